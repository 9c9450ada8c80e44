"""Build the book once per test session, in the quick preset, in a scratch copy of the repository.

Used by ``test_book.py``, ``test_browser.py``, ``test_browser_subpath.py``, ``test_figures_heal.py``,
``test_determinism.py`` and ``test_lab.py``. The one build runs with the network unavailable (the
network guard of ``figrun.py`` in every Python process, and a network namespace with only a
loopback where ``unshare -n`` works), so that it is also the check that the book builds offline;
a second full build for that check would double the longest step of ``make test``. The copy holds the book
sources, the configuration, the Makefile, the tools and a copy of ``lib/`` (for make's dependency rules);
the virtual environment is a symlink to the real ``.venv``. Figures go to the copy's
``figures/`` through ``ATTENTION_FW_FIGURES``, so the working tree is never touched.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
_CACHE: dict[str, "Build"] = {}


@dataclass
class Build:
    repo: Path          # the scratch copy
    returncode: int     # of `make book PRESET=quick`
    log: str            # its stdout + stderr
    env: dict | None = None         # the (guarded) environment it ran in
    guard_log: Path | None = None   # network attempts the guard blocked (absent or empty: none)
    offline: str = ""               # how the network was taken away
    stderr: str = ""

    @property
    def html(self) -> Path:
        return self.repo / "_build" / "html"


def chapter_sources(root: Path = ROOT) -> list[Path]:
    """Every notebook of the book: the chapters, the errata and the reproducibility page."""
    book = root / "book"
    return sorted(book.glob("[0-9]*.py")) + [p for p in (book / "errata.py", book / "reproducibility.py")
                                             if p.exists()]


def make_copy(dest: Path) -> Path:
    """A scratch copy of what the book build needs, with mtimes preserved."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.ipynb", ".ipynb_checkpoints", "*.egg-info")
    for name in ("book", "tools", "lib"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore, dirs_exist_ok=True)
    for name in ("_config.yml", "_toc.yml", "Makefile", "requirements.txt", "jupytext.toml"):
        shutil.copy2(ROOT / name, dest / name)
    if not (dest / ".venv").exists():
        (dest / ".venv").symlink_to(VENV, target_is_directory=True)
    return dest


def env_for(repo: Path) -> dict:
    env = dict(os.environ)
    env["ATTENTION_FW_FIGURES"] = str(repo / "figures")
    env.pop("MAKEFLAGS", None)
    env.pop("MAKELEVEL", None)
    return env


def make(repo: Path, *args: str, timeout: float = 900, env: dict | None = None,
         offline: bool = False) -> subprocess.CompletedProcess:
    """Run make in ``repo`` (in ``env``, default :func:`env_for`; ``offline``: inside a network
    namespace with only a loopback); on timeout kill the whole process group (kernels included)."""
    cmd = ["make", "--no-print-directory", *args]
    if offline:
        cmd = ["unshare", "-n", "sh", "-c", "ip link set lo up && exec " + " ".join(f"'{c}'" for c in cmd)]
    proc = subprocess.Popen(cmd, cwd=repo, env=env or env_for(repo),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\nbookbuild: make {' '.join(args)} killed after {timeout} s"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def quick_book(base: Path) -> Build:
    """Run ``make book PRESET=quick`` once, offline, in a copy under ``base`` (cached for the session)."""
    if "quick" not in _CACHE:
        import figrun

        repo = make_copy(base / "repo")
        env = figrun.guarded_env(env_for(repo), base / "guard")
        unshare = figrun.unshare_works()
        proc = make(repo, "book", "PRESET=quick", env=env, offline=unshare)
        _CACHE["quick"] = Build(repo, proc.returncode, proc.stdout + "\n" + proc.stderr, env=env,
                                guard_log=base / "guard" / "attempts.log", stderr=proc.stderr,
                                offline="unshare -n + guard" if unshare else "guard only (unshare -n unavailable here)")
    return _CACHE["quick"]
