"""The library is a product: one direction between its layers, no import cycle, nothing changed at import.

* the imports of every module (also those inside functions) form no cycle, and they run one way:
  the core (``model``, ``geometry``, ``experiments``) never imports ``plot``, matplotlib or the
  book's package ``afw_book``; ``attention_fw`` never imports ``afw_book``;
* importing every module, in a fresh interpreter, leaves matplotlib's backend and every rcParam
  as the caller set them, and the core does not even load matplotlib;
* the version is written once and is the installed distribution's.
(The install of the wheel into a fresh environment is ``tests/test_install.py``.)
"""
import ast
import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import afw_book
import attention_fw
import pytest

LIB = Path(attention_fw.__file__).resolve().parents[1]
CORE = ("model", "geometry", "experiments", "results", "_validate", "_version", "_lazy")


def _modules(package: str) -> dict[str, Path]:
    """Dotted name -> source of every module of ``package`` (``__init__`` files as the package)."""
    root = LIB / package
    out = {}
    for p in sorted(root.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        parts = p.relative_to(LIB).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


MODULES = {**_modules("attention_fw"), **_modules("afw_book")}


def _imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports, at the top or inside a function, absolute, library or not."""
    is_pkg = path.name == "__init__.py"
    package = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = (package[:len(package) - node.level + 1] if node.level else []) + \
                (node.module.split(".") if node.module else [])
            for a in node.names:
                sub = ".".join(base + [a.name])
                found.add(sub if sub in MODULES else ".".join(base))
    return found


GRAPH = {name: {m for m in _imports(name, path) if m in MODULES and not MODULES[m].name == "__init__.py"}
         for name, path in MODULES.items() if path.name != "__init__.py"}


def test_the_dependency_reader_sees_imports_inside_functions():
    # geometry.planar imports matplotlib only inside raster_cells; the reader must see it
    assert "matplotlib.path" in _imports("attention_fw.geometry.planar", MODULES["attention_fw.geometry.planar"])
    assert "attention_fw.model.tiled" in GRAPH["attention_fw.model.dynamics"]


def test_no_import_cycle_between_library_modules():
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(GRAPH):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_imports_run_one_way():
    wrong = []
    for name, path in MODULES.items():
        imported = _imports(name, path)
        core = name.split(".")[1] in CORE if name.startswith("attention_fw.") else False
        for m in imported:
            if name.startswith("attention_fw") and m.split(".")[0] == "afw_book":
                wrong.append((name, m))
            if core and (m.startswith("attention_fw.plot") or m.split(".")[0] == "matplotlib"):
                if not (name == "attention_fw.geometry.planar" and m == "matplotlib.path"):   # inside raster_cells
                    wrong.append((name, m))
    assert wrong == []


_PROBE = """
import importlib, json, pkgutil, sys
import matplotlib
matplotlib.use("pdf")                          # the caller's choice
matplotlib.rcParams["font.size"] = 13.5
matplotlib.rcParams["axes.grid"] = True
before = {k: repr(v) for k, v in matplotlib.rcParams.items()}
packages = sys.argv[1].split(",")
names = []
for top in packages:
    pkg = importlib.import_module(top)
    names += [top] + [m.name for m in pkgutil.walk_packages(pkg.__path__, top + ".")]
for n in names:
    importlib.import_module(n)
after = {k: repr(v) for k, v in matplotlib.rcParams.items()}
print(json.dumps({"modules": names, "backend": matplotlib.get_backend(),
                  "changed": sorted(k for k in before if before[k] != after.get(k))}))
"""

_CORE_PROBE = """
import importlib, pkgutil, sys
import attention_fw
import pytest
names = [m.name for m in pkgutil.walk_packages(attention_fw.__path__, "attention_fw.")
         if not m.name.startswith("attention_fw.plot")]
for n in names:
    importlib.import_module(n)
print(len(names), "matplotlib" in sys.modules)
"""


def test_importing_every_module_changes_nothing_of_the_caller():
    out = subprocess.run([sys.executable, "-c", _PROBE, "attention_fw,afw_book"], capture_output=True, text=True,
                         check=True, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    res = json.loads(out.stdout)
    assert set(res["modules"]) >= set(MODULES), set(MODULES) - set(res["modules"])
    assert res["backend"] == "pdf"
    assert res["changed"] == []


def test_the_core_does_not_load_matplotlib():
    out = subprocess.run([sys.executable, "-c", _CORE_PROBE], capture_output=True, text=True, check=True)
    count, loaded = out.stdout.split()
    assert int(count) >= 15 and loaded == "False"


_LAZY_PROBE = """
import json, sys
import attention_fw as afw
eager = sorted(m for m in sys.modules if m.startswith(("attention_fw.experiments", "scipy.stats")))
listed = [n for n in dir(afw.experiments) if not n.startswith("_")]
from attention_fw.experiments import survival
print(json.dumps({"eager": eager, "listed": listed, "same": afw.experiments.survival is survival,
                  "polytope": afw.geometry.polytope.__name__,
                  "others": sorted(m for m in sys.modules if m.startswith("attention_fw.experiments."))}))
"""


def test_the_experiments_are_imported_when_first_used():
    """``import attention_fw`` costs the dynamics only: no experiment and no SciPy statistics until
    first used; then the attribute and the import statement give the same module, and only it."""
    res = json.loads(subprocess.run([sys.executable, "-c", _LAZY_PROBE], capture_output=True, text=True,
                                    check=True).stdout)
    assert res["eager"] == []
    assert set(res["listed"]) >= {"convergence", "survival", "sabeta", "trained_heads"}
    assert res["same"] and res["polytope"] == "attention_fw.geometry.polytope"
    assert res["others"] == ["attention_fw.experiments.survival"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        attention_fw.nope  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        attention_fw.experiments.nope  # noqa: B018


def test_version_is_the_installed_distribution_s():
    assert attention_fw.__version__ == importlib.metadata.version("attention-fw")
    written = [p for p in MODULES.values() if f'"{attention_fw.__version__}"' in p.read_text()]
    assert written == [MODULES["attention_fw._version"]]
    for project in (LIB / "pyproject.toml", LIB.parent / "pyproject.toml"):   # the library's and afw_book's
        text = project.read_text()
        assert not re.search(r"^version = ", text, re.M) and 'dynamic = ["version"]' in text
        assert '[tool.hatch.version]\npath = "' in text and text.split('[tool.hatch.version]\npath = "')[1].startswith(
            ("attention_fw/_version.py", "lib/attention_fw/_version.py"))
    assert afw_book.__doc__


def test_a_plot_function_returns_its_figure_with_its_numbers_and_writes_nothing(tmp_path, monkeypatch):
    """attention_fw.plot draws and returns; the numbers travel with the figure; no file is written,
    and the old outdir/formats arguments are gone."""
    import warnings

    import matplotlib.pyplot as plt
    import pytest

    from attention_fw.experiments import metastability as M
    from attention_fw.geometry.polytope import points_on_circle
    from attention_fw.plot import figure_data
    from attention_fw.plot import metastability as MP

    monkeypatch.chdir(tmp_path)
    tri = points_on_circle()
    hyp = M.theorem54_hypotheses(tri, 0.15, 0.04)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # no warning on the plain call
        fig = MP.fig_admissible(tri, hyp, 0.15, 0.04)
    data = figure_data(fig)
    assert isinstance(data, dict) and data and json.dumps(data, default=lambda o: o.tolist())
    with pytest.raises(TypeError, match="outdir"):          # removed in 0.3.0 (ignored since 0.2.0)
        MP.fig_admissible(tri, hyp, 0.15, 0.04, outdir=tmp_path / "out", formats=("png",))
    assert list(tmp_path.rglob("*")) == []
    plt.close("all")
