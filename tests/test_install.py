"""A stranger's install: the library's wheel in a fresh virtual environment outside the repository.

The wheel is built from a copy of ``lib/`` (``pip wheel --no-deps``, with the pinned setuptools
of the project's environment), installed with all its extras into a new venv in a temporary folder,
the dependencies at the versions of ``requirements.txt`` and only those the wheel declares, without
byte-compiling them (by the project's uv from its cache, then ``pip check``; by pip where make venv
used pip). Then, from a folder that is not the repository:

* the README's "use the library in your own code" example runs and prints what the README says;
* every module of ``attention_fw`` and ``afw_book`` imports, matplotlib's backend and rcParams
  are left as the caller set them, and the modules are the installed ones (site-packages);
* ``attention_fw.__version__`` is the installed distribution's version and the wheel's;
* the book's layer looks for its repository instead of pointing into site-packages.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
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


def _run(cmd, cwd, env=None, timeout=1800):
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                         env=env)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stranger")
    assert ROOT not in tmp.resolve().parents
    dist, src = tmp / "dist", tmp / "src"                # built from a copy: no build/ left in the repository
    shutil.copytree(ROOT / "lib", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--disable-pip-version-check",
          "-w", dist, src], cwd=tmp)
    wheels = list(dist.glob("attention_fw-*.whl"))
    assert len(wheels) == 1, wheels
    pins = [line for line in (ROOT / "requirements.txt").read_text().splitlines()
            if "==" in line and not line.startswith(("-", "#"))]
    (tmp / "constraints.txt").write_text("\n".join(pins) + "\n")
    venv = tmp / "venv"
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", venv], cwd=tmp)
    py = venv / "bin" / "python"
    wanted = f"{wheels[0]}[plot,sweeps,book]"
    uv = ROOT / ".venv" / "bin" / "uv"
    if uv.exists():
        # The project's uv (make venv's installer), from its cache: the same resolution from the
        # wheel's own metadata (only what it declares, at the pins), in seconds instead of pip's
        # minute of downloads; pip then checks what is installed against every declared requirement.
        _run([uv, "pip", "install", "--quiet", "--python", py, "-c", tmp / "constraints.txt", wanted], cwd=tmp)
        _run([py, "-m", "pip", "check", "--disable-pip-version-check"], cwd=tmp)
    else:
        # --no-compile: pip would byte-compile all of site-packages (half of the install's time);
        # every module of the wheel is compiled anyway when the import test below imports it.
        _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
              "-c", tmp / "constraints.txt", wanted], cwd=tmp)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp), "MPLCONFIGDIR": str(tmp / "mpl")}
    return py, elsewhere, env, wheels[0]


def test_the_readme_example_runs_in_a_fresh_environment(installed):
    py, elsewhere, env, _ = installed
    (elsewhere / "example.py").write_text(_readme_example())
    out = _run([py, "example.py"], cwd=elsewhere, env=env).split()
    assert out[0] == "True"                              # the tokens have stopped
    assert 0.99 < float(out[1]) <= 1.0                   # almost all of them on an initial token


def test_importing_every_module_changes_nothing_and_comes_from_the_install(installed):
    py, elsewhere, env, _ = installed
    res = json.loads(_run([py, "-c", _PROBE, "attention_fw,afw_book"], cwd=elsewhere, env=env))
    assert res["backend"] == "pdf" and res["changed"] == []
    assert {"attention_fw.model.dynamics", "attention_fw.plot.style", "afw_book.notebook"} <= set(res["modules"])
    where = _run([py, "-c", "import attention_fw, afw_book; print(attention_fw.__file__); print(afw_book.__file__)"],
                 cwd=elsewhere, env=env).split()
    assert all("site-packages" in w and not w.startswith(str(ROOT)) for w in where), where


def test_version_is_the_installed_one(installed):
    py, elsewhere, env, wheel = installed
    version, dist = _run([py, "-c", "import attention_fw, importlib.metadata as m; "
                          "print(attention_fw.__version__, m.version('attention-fw'))"], cwd=elsewhere, env=env).split()
    assert version == dist == wheel.name.split("-")[1]


def test_the_book_layer_looks_for_its_repository(installed):
    py, elsewhere, env, _ = installed
    out = _run([py, "-c", "from afw_book import paths\ntry:\n    paths.ROOT\nexcept FileNotFoundError as e:\n"
                "    print('not found:', e)\n"], cwd=elsewhere, env=env)
    assert out.startswith("not found:") and "ATTENTION_FW_ROOT" in out
    env = {**env, "ATTENTION_FW_ROOT": str(ROOT)}
    assert _run([py, "-c", "from afw_book import paths; print(paths.ROOT)"], cwd=elsewhere, env=env).strip() == str(ROOT)
    assert os.path.isdir(ROOT / "book")
