"""Each chapter declares its parameters once, and a run is checked against it before any computation.

* every chapter's cell tagged ``parameters`` holds a literal ``PARAMETERS`` (type, accepted values,
  meaning), read without a kernel; its names are exactly those of the chapter's presets, and the
  presets are ``paper`` and ``quick``;
* the checker accepts what the declaration accepts and nothing else (types, bounds, intervals,
  lists item by item, ``None`` keeps the preset's value), with one line naming the parameter, the
  value and what is accepted; the kernel side (``resolve_declared``) applies the same rules,
  including to the presets' own values;
* ``tools/run_notebook.py`` (run as a subprocess, as ``make notebook`` runs it) stops bad input with
  exit status 2 and one line, no traceback, and leaves no executed notebook, record or kernel behind.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from afw_book import presets as PR
from bookbuild import ROOT

CHAPTERS = sorted(ROOT.glob("book/0*.py")) + [ROOT / "book" / "errata.py"]
RUNNER = ROOT / "tools" / "run_notebook.py"


def _preset_keywords(source: str) -> dict[str, set[str]]:
    """Preset name -> the keyword names of its dict(...) in every top-level PRESETS* assignment."""
    out: dict[str, set[str]] = {}
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.startswith("PRESETS") and isinstance(node.value, ast.Dict)):
            for key, value in zip(node.value.keys, node.value.values):
                assert isinstance(value, ast.Call) and value.func.id == "dict", "presets are dict(...) calls"
                out.setdefault(key.value, set()).update(k.arg for k in value.keywords)
    return out


@pytest.mark.parametrize("source", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_declares_each_preset_parameter_once(source):
    text = source.read_text()
    decl = PR.read_declaration(text)
    assert decl["preset"] == "paper" and decl["presets"] == ["paper", "quick"]
    declared = decl["parameters"]
    assert declared, f"{source.stem}: no PARAMETERS in its parameters cell"
    for name, (kind, rng, meaning, *requires) in declared.items():
        assert kind in PR.TYPES and meaning.strip() and len(requires) <= 1, name
    keywords = _preset_keywords(text)
    assert set(keywords) == {"paper", "quick"}
    for preset, names in keywords.items():
        assert names == set(declared), (source.stem, preset, names ^ set(declared))
    # the parameters cell declares, it does not assign the parameters a second time
    cell = text.split('tags=["parameters"', 1)[1].split("\n# %%", 1)[0]
    assigned = {t.id for node in ast.parse(cell.split("\n", 1)[1]).body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)}
    assert assigned == {"preset", "PARAMETERS"}


@pytest.mark.parametrize("decl,good,bad", [
    (("int", ">= 1", "m"), [1, 5, 10**9], [0, -5, 2.5, True, "3", [3]]),
    (("float", "(0, 1]", "m"), [1, 0.5, 1e-9], [0, 0.0, 1.0000001, -0.1, "0.5", False]),
    (("float", "> 0", "m"), [1e6, 3], [0, -1.0]),
    (("list[float]", "> 0", "m"), [[1, 2.5], (3.0,)], [[], [1, -1], 4.0, ["a"]]),
    (("list[int]", ">= 3", "m"), [[3, 4]], [[2, 3], [3.5], [True]]),
    (("str", "", "m"), ["serial", "tcp://host:8786"], [3, ["a"]]),
    (("str", "one of serial, processes", "m"), ["serial", "processes"], ["dask", 1]),
    (("bool", "", "m"), [True, False], [0, 1, "yes"]),
])
def test_check_value_accepts_exactly_the_declaration(decl, good, bad):
    for v in good:
        PR.check_value("x", v, decl)
    for v in bad:
        with pytest.raises(ValueError) as err:
            PR.check_value("x", v, decl)
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"x = {v!r} is not accepted") and "expected" in msg
    assert PR.check_value("x", None, decl) is None            # None keeps the preset's value
    assert PR.check_value("x", 2, ("float", "", "m")) == 2.0 and isinstance(PR.check_value("x", 2, ("float", "", "m")), float)


def test_a_malformed_declaration_is_an_authoring_error():
    with pytest.raises(ValueError, match="range"):
        PR.check_value("x", 1, ("int", "between 1 and 3", "m"))
    with pytest.raises(ValueError, match="unknown type"):
        PR.check_value("x", 1, ("integer", "", "m"))
    src = '# %% tags=["parameters"]\npreset = "paper"\nPARAMETERS = {"n": ("int", ">= 1")}\n'
    with pytest.raises(ValueError, match="PARAMETERS"):
        PR.read_declaration(src)


def test_resolve_declared_in_the_kernel():
    declared = {"n": ("int", ">= 1", "tokens"), "gamma": ("float", "(0, 1]", "step")}
    presets = {"paper": dict(n=8, gamma=0.3), "quick": dict(n=4, gamma=0.3)}
    p = PR.resolve_declared(presets, "quick", declared, {"n": 6, "gamma": None})
    assert (p.n, p.gamma, p.overrides, p.book_values["n"]) == (6, 0.3, {"n": 6}, 8)
    with pytest.raises(ValueError, match=r"^n = -1 is not accepted: expected int >= 1 \(tokens\)$"):
        PR.resolve_declared(presets, "quick", declared, {"n": -1})
    with pytest.raises(ValueError, match="preset = 'fast' is not accepted: expected one of paper, quick"):
        PR.resolve_declared(presets, "fast", declared, {})
    with pytest.raises(ValueError, match=r"gamma \(preset 'paper'\) = 2.0 is not accepted"):
        PR.resolve_declared({"paper": dict(n=8, gamma=2.0)}, "paper", declared, {})


def _run(tmp_path, *args):
    out = tmp_path / "out.ipynb"
    proc = subprocess.run([sys.executable, str(RUNNER), str(ROOT / "book" / "03-negative-definite.py"),
                           "-o", str(out), "--times-dir", str(tmp_path / "times"), *args],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    return proc, out


@pytest.mark.parametrize("args,name,given,accepted", [
    (["-p", "seed", "abc"], "seed", "'abc'", "int >= 0"),
    (["--preset", "fast"], "preset", "'fast'", "one of paper, quick"),
    (["-p", "cex_steps", "-5"], "cex_steps", "-5", "int > 576"),
    (["-p", "shifted_sizes", "[2, 5]"], "shifted_sizes", "[2, 5]", "list[int], each >= 3"),
    (["-p", "rate_steps", "2.5"], "rate_steps", "2.5", "int > 100"),
])
def test_the_runner_stops_bad_values_before_a_kernel_with_one_line(tmp_path, args, name, given, accepted):
    proc, out = _run(tmp_path, *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"run_notebook: 03-negative-definite: {name} = {given} is not accepted")
    assert accepted in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists() and not (tmp_path / "times").exists()      # nothing ran


def test_the_runner_names_an_unknown_parameter_and_lists_the_accepted_ones(tmp_path):
    proc, _ = _run(tmp_path, "-p", "steps", "5")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "steps is not a parameter of this notebook" in proc.stderr and "cex_steps" in proc.stderr


def test_a_notebook_without_declaration_is_still_checked_by_name(tmp_path):
    proc = subprocess.run([sys.executable, str(RUNNER), str(ROOT / "book" / "reproducibility.py"),
                           "-o", str(tmp_path / "r.ipynb"), "-p", "steps", "5"],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 2 and "steps is not a parameter" in proc.stderr and "Traceback" not in proc.stderr
    assert not Path(tmp_path / "r.ipynb").exists()
