"""A stranger's install: the library's wheel in a fresh virtual environment outside the repository.

The wheel is built from ``lib/`` itself (``pip wheel --no-deps``, with the pinned hatchling of the
project's environment), and the checkout is left as it was (no ``build/``, no egg-info). Its file
list holds the library alone (no ``afw_book``, no caches) with its licence, and its metadata the
README, the licence and the project URLs. It is installed with its extras into a new venv in a
temporary folder, the dependencies at the versions of ``requirements.txt`` and only those the wheel
declares, without byte-compiling them (by the project's uv from its cache into a venv without pip,
then ``uv pip check``; by pip where make venv used pip, then ``pip check``). Then, from a folder
that is not the repository:

* the README's "use the library in your own code" example and the wheel's own README quickstart
  (cells, exit times, a long context, a figure) run and print what the READMEs say;
* every module of ``attention_fw`` imports, matplotlib's backend and rcParams are left as the
  caller set them, and the modules are the installed ones (site-packages); ``afw_book`` is not
  there (it installs from the repository only);
* ``attention_fw.__version__`` is the installed distribution's version and the wheel's;
* the book's layer (the repository's own install) looks for its repository instead of guessing.
"""
from __future__ import annotations

import email
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from test_packaging import _PROBE

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _readme_example() -> str:
    section = (ROOT / "README.md").read_text().split("## Use the library in your own code", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the README's section has one Python example"
    return blocks[0]


def _quickstart() -> tuple[str, str]:
    """The wheel's README quickstart and the output it says it prints."""
    section = (ROOT / "lib" / "README.md").read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    code, = re.findall(r"```python\n(.*?)```", section, re.S)
    printed, = re.findall(r"```text\n(.*?)```", section, re.S)
    return code, printed


def _status() -> tuple[str, list[str]]:
    """``git status`` of lib/, and the build folders and egg-info a build backend could leave there (ignored by git)."""
    status = subprocess.run(["git", "status", "--porcelain", "lib"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    return status, sorted(str(p) for p in [*(ROOT / "lib").glob("build"), *(ROOT / "lib").glob("dist"),
                                           *(ROOT / "lib").rglob("*.egg-info")])


def _run(cmd, cwd, env=None, timeout=1800):
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                         env=env)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stranger")
    assert ROOT not in tmp.resolve().parents
    dist = tmp / "dist"
    before = _status()
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check",
          "-w", dist, ROOT / "lib"], cwd=tmp)
    # building leaves the checkout as it was (the ignored files too: no lib/build/, no egg-info)
    assert _status() == before
    wheels = list(dist.glob("attention_fw-*.whl"))
    assert len(wheels) == 1, wheels
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*==[^\s\\]+)", (ROOT / "requirements.txt").read_text(), re.M)
    (tmp / "constraints.txt").write_text("\n".join(pins) + "\n")
    venv = tmp / "venv"
    py = venv / "bin" / "python"
    wanted = f"{wheels[0]}[plot,encoder]"
    uv = ROOT / ".venv" / "bin" / "uv"
    if uv.exists():
        # The project's uv (make venv's installer), from its cache: the same resolution from the
        # wheel's own metadata (only what it declares, at the pins), in seconds instead of pip's
        # minute of downloads; uv then checks what is installed against every declared requirement.
        # The venv has no pip (ensurepip's install of it was 5 of the fixture's CPU-seconds).
        _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", venv], cwd=tmp)
        _run([uv, "pip", "install", "--quiet", "--python", py, "-c", tmp / "constraints.txt", wanted], cwd=tmp)
        _run([uv, "pip", "check", "--python", py], cwd=tmp)
    else:
        _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", venv], cwd=tmp)
        # --no-compile: pip would byte-compile all of site-packages (half of the install's time);
        # every module of the wheel is compiled anyway when the import test below imports it.
        _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
              "-c", tmp / "constraints.txt", wanted], cwd=tmp)
        _run([py, "-m", "pip", "check", "--disable-pip-version-check"], cwd=tmp)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp), "MPLCONFIGDIR": str(tmp / "mpl")}
    return py, elsewhere, env, wheels[0]


def test_the_wheel_holds_the_library_alone_with_its_licence_readme_and_urls(installed):
    *_, wheel = installed
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = email.message_from_bytes(z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))))
    tops = {n.split("/")[0] for n in names}
    assert tops == {"attention_fw", wheel.name.split("-py")[0] + ".dist-info"}, tops       # no afw_book
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".nbi", ".nbc"))]
    assert "attention_fw/py.typed" in names and "attention_fw/model/multihead.py" in names
    licence = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert len(licence) == 1
    with zipfile.ZipFile(wheel) as z:
        assert z.read(licence[0]) == (ROOT / "LICENSE").read_bytes()
    assert meta["License-Expression"] == "BSD-3-Clause" and meta["License-File"] == "LICENSE"
    assert meta["Description-Content-Type"] == "text/markdown" and "## Quickstart" in meta.get_payload()
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls["Paper"] == "https://arxiv.org/abs/2508.09628"
    assert meta["Version"] == "0.3.0"
    assert "sweeps" not in (meta.get_all("Provides-Extra") or []) and "book" not in meta.get_all("Provides-Extra")


def test_the_quickstart_runs_from_another_folder(installed):
    py, elsewhere, env, _ = installed
    code, printed = _quickstart()
    (elsewhere / "quickstart.py").write_text(code)
    out = _run([py, "quickstart.py"], cwd=elsewhere, env=env)
    assert out == printed
    assert (elsewhere / "quickstart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_readme_example_runs_in_a_fresh_environment(installed):
    py, elsewhere, env, _ = installed
    (elsewhere / "example.py").write_text(_readme_example())
    out = _run([py, "example.py"], cwd=elsewhere, env=env).split()
    assert out[0] == "True"                              # the tokens have stopped
    assert 0.99 < float(out[1]) <= 1.0                   # almost all of them on an initial token


def test_importing_every_module_changes_nothing_and_comes_from_the_install(installed):
    py, elsewhere, env, _ = installed
    res = json.loads(_run([py, "-c", _PROBE, "attention_fw"], cwd=elsewhere, env=env))
    assert res["backend"] == "pdf" and res["changed"] == []
    assert {"attention_fw.model.dynamics", "attention_fw.model.multihead", "attention_fw.plot.style"} <= set(res["modules"])
    where = _run([py, "-c", "import attention_fw; print(attention_fw.__file__)\n"
                  "try:\n    import afw_book\nexcept ImportError:\n    print('no afw_book')"], cwd=elsewhere, env=env).split()
    assert "site-packages" in where[0] and not where[0].startswith(str(ROOT)), where
    assert where[1:] == ["no", "afw_book"]


def test_version_is_the_installed_one(installed):
    py, elsewhere, env, wheel = installed
    version, dist = _run([py, "-c", "import attention_fw, importlib.metadata as m; "
                          "print(attention_fw.__version__, m.version('attention-fw'))"], cwd=elsewhere, env=env).split()
    assert version == dist == wheel.name.split("-")[1]


def test_the_book_layer_looks_for_its_repository(installed):
    """afw_book is the repository's own package (make venv); run from a folder outside the repository it
    does not guess one."""
    _, elsewhere, env, _ = installed
    py = sys.executable
    env = {**env, "PATH": f"{Path(py).parent}:/usr/bin:/bin"}
    out = _run([py, "-c", "from afw_book import paths\ntry:\n    paths.ROOT\nexcept FileNotFoundError as e:\n"
                "    print('not found:', e)\n"], cwd=elsewhere, env=env)
    assert out.startswith("not found:") and "ATTENTION_FW_ROOT" in out
    env = {**env, "ATTENTION_FW_ROOT": str(ROOT)}
    assert _run([py, "-c", "from afw_book import paths; print(paths.ROOT)"], cwd=elsewhere, env=env).strip() == str(ROOT)
    assert os.path.isdir(ROOT / "book")
