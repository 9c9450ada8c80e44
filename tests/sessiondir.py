"""One folder per test session, shared by every pytest-xdist worker, and file locks in it.

``make test`` runs pytest with several workers (processes). What a session computes once for
many tests (the quick book build, the figure writer's reference runs) lives in this folder and
is made under an exclusive lock (``fcntl.flock``), so that no two workers ever make it twice
and a worker that needs it waits, without a deadline, until the one making it has finished.
The folder is the session's base temporary folder (``pytest-N``; with xdist the workers' own
folders ``pytest-N/popen-gwK`` are inside it). ``tests/conftest.py`` sets it.
"""
from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_ROOT: Path | None = None


def set_root(path: Path) -> None:
    global _ROOT
    _ROOT = Path(path)
    _ROOT.mkdir(parents=True, exist_ok=True)


def root() -> Path:
    if _ROOT is None:
        raise RuntimeError("sessiondir: no session folder (tests/conftest.py sets it)")
    return _ROOT


def is_set() -> bool:
    return _ROOT is not None


def try_lock(name: str, blocking: bool = True) -> int | None:
    """Take the session's exclusive lock ``name``: a file descriptor to pass to :func:`unlock`, or
    None when ``blocking`` is False and another process (or another thread of this one) holds it."""
    fd = os.open(root() / f".{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


@contextmanager
def locked(name: str) -> Iterator[None]:
    """Hold the session's exclusive lock ``name`` (waiting for it as long as another holds it)."""
    fd = try_lock(name)
    assert fd is not None
    try:
        yield
    finally:
        unlock(fd)


def once(name: str, make: Callable[[Path], None]) -> Path:
    """The folder ``<session>/<name>``, filled by ``make(folder)`` exactly once per session
    (whichever worker asks first; the others wait for it). A failed ``make`` leaves nothing
    behind, so the next caller tries again and sees the same error."""
    folder = root() / name
    done = root() / f".{name}.done"
    with locked(name):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            try:
                make(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder
