"""Build the book once per test session, in the quick preset, in a scratch copy of the repository.

Used by ``test_book.py``, ``test_browser.py``, ``test_figures_heal.py``,
``test_figures_readme.py``, ``test_determinism.py`` and ``test_lab.py``. With several pytest-xdist
workers the build is still made once: in the session's shared folder (``sessiondir.py``), under a
file lock, by the first worker that collects a test needing it (in a background thread, so that the
worker runs other tests meanwhile); every other user waits on the lock, without a deadline, and reads
the recorded result. The shared build is read only; a test that changes it works on a copy
(:func:`private_copy`). The one build runs with the network unavailable (the
network guard of ``figrun.py`` in every Python process, and a network namespace with only a
loopback where ``unshare -n`` works), so that it is also the check that the book builds offline;
a second full build for that check would double the longest step of ``make test``. The copy holds the book
sources, the configuration, the Makefile, the tools and a copy of ``lib/`` (for make's dependency rules);
the virtual environment is a symlink to the real ``.venv``. Figures go to the copy's
``figures/`` through ``ATTENTION_FW_FIGURES``, so the working tree is never touched.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import sessiondir

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
STAMP = VENV / ".installed"     # make's record that .venv matches requirements.txt (the Makefile's $(STAMP))
# A deadline only for a make that hangs: far beyond any build on a loaded two-core machine.
MAKE_TIMEOUT = 3600.0
_CACHE: dict[str, "Build"] = {}
_RUNNING: set[subprocess.Popen] = set()
_BACKGROUND: list[threading.Thread] = []


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

    def save(self, path: Path) -> None:
        record = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> "Build":
        record = json.loads(path.read_text())
        record["repo"] = Path(record["repo"])
        if record.get("guard_log"):
            record["guard_log"] = Path(record["guard_log"])
        return cls(**record)


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
    for name in ("_config.yml", "_toc.yml", "Makefile", "requirements.txt", "pyproject.toml", "jupytext.toml"):
        shutil.copy2(ROOT / name, dest / name)
    if not (dest / ".venv").exists():
        (dest / ".venv").symlink_to(VENV, target_is_directory=True)
    _never_reinstall(dest)
    return dest


def _never_reinstall(copy: Path) -> None:
    """The copy shares the project's ``.venv`` (a symlink): its make must never reinstall it.

    When ``.venv/.installed`` is older than what the Makefile's stamp depends on (pytest run by
    hand after a merge, without ``make venv``), the copy's make would run ``pip install -r
    requirements.txt`` into the shared environment, and its ``-e ./lib`` would point the project's
    editable install at the scratch copy's lib/ (and several copies would do so at once). ``make
    test`` refreshes the stamp before pytest starts, so a reinstall there is never needed: the copy's
    two files get the stamp's time when they are newer than it (the notebooks' rules compare them
    only with executed notebooks, which are all written after the copy is made).
    """
    if not STAMP.exists():
        return
    stamp = STAMP.stat().st_mtime_ns
    for name in ("requirements.txt", "tools/installer-requirements.txt", "lib/pyproject.toml", "pyproject.toml"):
        f = copy / name
        if f.stat().st_mtime_ns > stamp:
            os.utime(f, ns=(stamp, stamp))


def env_for(repo: Path) -> dict:
    env = dict(os.environ)
    env["ATTENTION_FW_FIGURES"] = str(repo / "figures")
    env.pop("MAKEFLAGS", None)
    env.pop("MAKELEVEL", None)
    return env


def make(repo: Path, *args: str, timeout: float = MAKE_TIMEOUT, env: dict | None = None,
         offline: bool = False) -> subprocess.CompletedProcess:
    """Run make in ``repo`` (in ``env``, default :func:`env_for`; ``offline``: inside a network
    namespace with only a loopback); on timeout kill the whole process group (kernels included)."""
    cmd = ["make", "--no-print-directory", *args]
    if offline:
        cmd = ["unshare", "-n", "sh", "-c", "ip link set lo up && exec " + " ".join(f"'{c}'" for c in cmd)]
    proc = subprocess.Popen(cmd, cwd=repo, env=env or env_for(repo),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    _RUNNING.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\nbookbuild: make {' '.join(args)} killed after {timeout} s"
    finally:
        _RUNNING.discard(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@atexit.register
def _kill_running() -> None:
    """A make still running when this process exits (an interrupted session) ends with it."""
    for proc in list(_RUNNING):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _build_quick(base: Path, on_figures=None) -> Build:
    """``make book PRESET=quick``, offline, in a copy under ``base``, in its two steps: ``make
    figures`` (every notebook executed, the manifest written), then ``make book`` (whose figures
    step then finds nothing to do, and jupyter-book). ``on_figures(build)`` is called in between
    with the result of the first step, so that tests needing only the figures can start."""
    import figrun

    repo = make_copy(base / "repo")
    env = figrun.guarded_env(env_for(repo), base / "guard")
    unshare = figrun.unshare_works()
    how = "unshare -n + guard" if unshare else "guard only (unshare -n unavailable here)"
    guard_log = base / "guard" / "attempts.log"
    first = make(repo, "figures", "PRESET=quick", env=env, offline=unshare)
    if on_figures is not None:
        on_figures(Build(repo, first.returncode, first.stdout + "\n" + first.stderr, env=env,
                         guard_log=guard_log, stderr=first.stderr, offline=how))
    if first.returncode != 0:
        return Build(repo, first.returncode, first.stdout + "\n" + first.stderr, env=env,
                     guard_log=guard_log, stderr=first.stderr, offline=how)
    second = make(repo, "book", "PRESET=quick", env=env, offline=unshare)
    stderr = first.stderr + second.stderr
    return Build(repo, second.returncode, first.stdout + second.stdout + "\n" + stderr, env=env,
                 guard_log=guard_log, stderr=stderr, offline=how)


_QUICK = "quick-book"          # lock: held while the build runs; record: the whole build
_FIGURES = "quick-figures"     # lock: held until the figures step is done; record: that step


def _record(name: str = _QUICK) -> Path:
    return sessiondir.root() / _QUICK / f"{name}.json"


def _build_and_record(release_figures=None) -> None:
    """Holding both locks: build into the session folder and record both steps (unless recorded).
    ``release_figures`` is called once the figures step is recorded."""
    if _record().exists():
        return
    folder = sessiondir.root() / _QUICK
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)

    def figures_done(step: Build) -> None:
        step.save(_record(_FIGURES))
        if release_figures is not None:
            release_figures()

    _build_quick(folder, figures_done).save(_record())


def start_quick_book() -> bool:
    """Start the session's quick build in a background thread of this process, unless it is
    recorded already or another worker (or thread) is making it. True when this call started it."""
    book = sessiondir.try_lock(_QUICK, blocking=False)
    if book is None:
        return False
    if _record().exists():
        sessiondir.unlock(book)
        return False
    figures = sessiondir.try_lock(_FIGURES)      # only ever held briefly by a reader otherwise
    released = []

    def release_figures():
        if not released:
            released.append(True)
            sessiondir.unlock(figures)

    def run():
        try:
            _build_and_record(release_figures)
        finally:
            release_figures()
            sessiondir.unlock(book)

    thread = threading.Thread(target=run, name="quick-book", daemon=True)
    _BACKGROUND.append(thread)
    thread.start()
    return True


def join_background() -> None:
    """Wait for a build this process started (a worker must not exit while another waits on it)."""
    for thread in _BACKGROUND:
        thread.join()


def quick_book(base: Path | None = None) -> Build:
    """The session's one ``make book PRESET=quick``, run offline in a scratch copy.

    With the session folder set (``tests/conftest.py``) it is made once for all workers (waiting for
    the worker that makes it); otherwise, once per process in a copy under ``base``.
    """
    if "quick" not in _CACHE:
        if sessiondir.is_set():
            with sessiondir.locked(_QUICK), sessiondir.locked(_FIGURES):
                _build_and_record()
            _CACHE["quick"] = Build.load(_record())
        else:
            assert base is not None, "quick_book: no session folder, so a base folder is needed"
            _CACHE["quick"] = _build_quick(base)
    return _CACHE["quick"]


def quick_figures() -> Build:
    """The figures step of the session's quick build (``make figures PRESET=quick``, every notebook
    executed and the manifest written), as soon as it is done: the HTML may still be in the making,
    so use it through :func:`private_copy` only."""
    if "figures" not in _CACHE:
        with sessiondir.locked(_FIGURES):
            recorded = _record(_FIGURES).exists()
        if not recorded:        # no build running: make the whole one here
            quick_book()
        _CACHE["figures"] = Build.load(_record(_FIGURES))
    return _CACHE["figures"]


# made by jupyter-book (``make book``'s second step), perhaps while a private copy is taken; left out
_BOOK_OUTPUTS = {"html", ".doctrees", ".jupyter_cache", "jupyter_execute"}


def private_copy(build: Build, dest: Path) -> Build:
    """A copy of a build (its figures step at least) that a test may change (heal its figures, re-run
    make figures) while the other workers read the shared one. Without jupyter-book's outputs (the
    HTML may still be in the making). Timestamps are kept, so make sees the same state. The one
    absolute path the build records, the figures folder its figure state describes
    (``_build/figures-state.json``), is the copy's own: the copy is the build, moved."""
    repo = dest / "repo"
    book_outputs = build.repo / "_build"
    shutil.copytree(build.repo, repo, symlinks=True,
                    ignore=lambda d, names: [n for n in names if n in _BOOK_OUTPUTS] if Path(d) == book_outputs else [])
    state = repo / "_build" / "figures-state.json"
    if state.is_file():
        times = state.stat()
        data = json.loads(state.read_text())
        if data.get("figures") == str((build.repo / "figures").resolve()):
            data["figures"] = str((repo / "figures").resolve())
        state.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        os.utime(state, ns=(times.st_atime_ns, times.st_mtime_ns))
    env = env_for(repo) if build.env is not None else None
    return Build(repo, build.returncode, build.log, env=env, guard_log=build.guard_log,
                 offline=build.offline, stderr=build.stderr)
