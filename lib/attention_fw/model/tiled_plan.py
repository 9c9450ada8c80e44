"""How a tiled step cuts its work: the memory budget, the tile shape, the worker threads.

Part of :mod:`attention_fw.model.tiled` (which re-exports its public names; the module docstring there
describes the tiled steps): a tile of scores the size of a few times one core's L2 cache
(:data:`TILE_CACHE_FACTOR`, :func:`cache_bytes`), never more than the memory budget
(:func:`memory_budget`) shared out between :func:`threads` workers, each running BLAS with one thread.
"""
from __future__ import annotations

import contextlib
import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from .. import _validate as chk

__all__ = ["DEFAULT_BUDGET", "MIN_KEY_TILE", "ARRAYS_PER_TILE", "memory_budget", "set_memory_budget", "budget",
           "fits", "Plan", "plan", "TILE_CACHE_FACTOR", "cache_bytes", "threads"]

DEFAULT_BUDGET = 256 * 2 ** 20
"""Bytes of scores a step may hold at once unless told otherwise."""

MIN_KEY_TILE = 64
"""Narrowest key tile; below this the products lose much of their BLAS speed."""

ARRAYS_PER_TILE = 2
"""Tile-sized arrays a step may hold at once (the scores, and a copy or product of them)."""

_BUDGET: int | None = None


def _check_budget(nbytes) -> int:
    nbytes = chk.positive_int("budget", nbytes)
    if nbytes < 8 * ARRAYS_PER_TILE * MIN_KEY_TILE:
        raise ValueError(f"budget must be at least {8 * ARRAYS_PER_TILE * MIN_KEY_TILE} bytes, got {nbytes}")
    return nbytes


def memory_budget() -> int:
    """The memory budget in bytes: :func:`set_memory_budget`, else ``ATTENTION_FW_MEMORY_BUDGET``, else 256 MiB.

    Examples
    --------
    >>> DEFAULT_BUDGET == 256 * 2**20                 # used when neither setting is made
    True
    >>> with budget(2**20):
    ...     memory_budget()
    1048576
    """
    if _BUDGET is not None:
        return _BUDGET
    env = os.environ.get("ATTENTION_FW_MEMORY_BUDGET", "").strip()
    if env:
        try:
            return _check_budget(int(float(env)))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"ATTENTION_FW_MEMORY_BUDGET must be a number of bytes, got {env!r} ({exc})") from None
    return DEFAULT_BUDGET


def set_memory_budget(nbytes) -> int | None:
    """Set the budget (bytes; ``None`` restores the default). Returns the previous setting.

    Examples
    --------
    >>> previous = set_memory_budget(2**20)
    >>> memory_budget()
    1048576
    >>> # restores the old setting, returns the one replaced
    >>> set_memory_budget(previous)
    1048576
    """
    global _BUDGET
    previous = _BUDGET
    _BUDGET = None if nbytes is None else _check_budget(nbytes)
    return previous


@contextlib.contextmanager
def budget(nbytes):
    """``with tiled.budget(2**30): ...`` runs the block with another memory budget.

    Examples
    --------
    1 MiB holds two float64 arrays of ``2^16 = 256^2`` scores: one system of 256 tokens, not two:

    >>> with budget(2**20):
    ...     fits((1, 256, 2)), fits((2, 256, 2))
    (True, False)
    """
    previous = set_memory_budget(nbytes)
    try:
        yield
    finally:
        set_memory_budget(previous)


def _entries(nbytes) -> int:
    return (memory_budget() if nbytes is None else _check_budget(nbytes)) // (8 * ARRAYS_PER_TILE)


def fits(shape, budget=None) -> bool:
    """True when the ``(R, n, n)`` arrays of the untiled steps fit the budget (``shape`` of the tokens).

    Examples
    --------
    ``ARRAYS_PER_TILE = 2`` arrays of ``n^2`` doubles: ``16 n^2 <= 2^20`` up to ``n = 256``:

    >>> fits((256, 2), budget=2**20), fits((257, 2), budget=2**20)
    (True, False)
    """
    shape = tuple(shape)
    if len(shape) < 2:
        return True
    R = int(np.prod(shape[:-2], dtype=np.int64)) if len(shape) > 2 else 1
    return R * shape[-2] ** 2 <= _entries(budget)


TILE_CACHE_FACTOR = 2
"""A tile of float64 scores takes this many times one core's L2 cache (:func:`cache_bytes`).

Per tile the scores are written by one product, exponentiated in place and read by the next
product; in a tile of a few MiB they stay in the core's caches (L2 and its share of L3) between
the three passes instead of going through main memory. Measured on a 2-core AMD EPYC (1 MiB
L2, 32 MiB L3) shared with other jobs, so only coarsely: at n = 16,384, d = 64, the 512 x 512
tiles in two threads took 0.57-1.13 of the time of the previous plan (all queries against 256
keys, a 32 MiB tile, BLAS threaded; two runs each of the softmax, hardmax and SAP steps, five of
the six below 0.85); shapes from 256 x 256 to 1024 x 1024 could not be told apart through the
noise."""

_CACHE_FALLBACK = 2 ** 20


def cache_bytes() -> int:
    """Bytes of one core's L2 cache: ``ATTENTION_FW_CACHE_BYTES`` if set, else read from
    ``/sys/devices/system/cpu/cpu0/cache`` (Linux), else 1 MiB. The tiles are sized from it.

    Examples
    --------
    >>> cache_bytes() >= 2 ** 14
    True
    """
    env = os.environ.get("ATTENTION_FW_CACHE_BYTES", "").strip()
    if env:
        try:
            value = int(float(env))
        except (TypeError, ValueError):
            value = 0
        if value < 2 ** 14:
            raise ValueError(f"ATTENTION_FW_CACHE_BYTES must be a number of bytes >= 16384, got {env!r}")
        return value
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(root)):
            path = os.path.join(root, entry)
            with open(os.path.join(path, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(path, "type")) as f:
                kind = f.read().strip()
            if level == "2" and kind in ("Unified", "Data"):
                with open(os.path.join(path, "size")) as f:
                    text = f.read().strip().upper()
                unit = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}.get(text[-1:], 1)
                return int(text.rstrip("KMG")) * unit
    except (OSError, ValueError):
        pass
    return _CACHE_FALLBACK


def threads() -> int:
    """Worker threads of a tiled step: ``ATTENTION_FW_THREADS`` if set, else the CPUs this process may use.

    The query blocks are shared out between the workers; each worker's products run in BLAS with
    one thread (two levels of threads on the same cores are several times slower than one).

    Examples
    --------
    >>> threads() >= 1
    True
    """
    env = os.environ.get("ATTENTION_FW_THREADS", "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"ATTENTION_FW_THREADS must be a whole number >= 1, got {env!r}")
        return value
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class Plan:
    """How a step cuts its work: ``systems`` per chunk, ``queries`` per block, ``keys`` per tile,
    and the number of ``workers`` (threads) that share the blocks.

    Examples
    --------
    >>> Plan(systems=2, queries=100, keys=64).tile_bytes     # 8 bytes x 2 x 100 x 64
    102400
    """

    systems: int
    queries: int
    keys: int
    workers: int = 1

    @property
    def tile_bytes(self) -> int:
        return 8 * self.systems * self.queries * self.keys


def _floor_pow2(v: int) -> int:
    return 1 << (max(1, int(v)).bit_length() - 1)


def plan(shape, *, budget=None, key_tile=None, query_tile=None, workers=None) -> Plan:
    """The tiles of a step on tokens of ``shape`` ``(n, d)`` or ``(R, n, d)``.

    A tile holds ``TILE_CACHE_FACTOR x`` :func:`cache_bytes` of float64 scores, as square as
    possible (``k`` keys, a power of two, at least ``MIN_KEY_TILE``, times ``q`` queries), and
    never more than the memory budget shared out between the ``workers`` (default
    :func:`threads`): each worker holds ``ARRAYS_PER_TILE`` tile-sized arrays. When all queries
    of a system fit in one block, blocks take as many systems as fit. ``key_tile`` and
    ``query_tile`` fix ``k`` and ``q``.

    Examples
    --------
    With the cache of a 1 MiB L2 (tiles of 2 MiB: 512 queries x 512 keys), one worker:

    >>> import os
    >>> os.environ["ATTENTION_FW_CACHE_BYTES"] = str(2 ** 20)
    >>> plan((65536, 64), workers=1)
    Plan(systems=1, queries=512, keys=512, workers=1)
    >>> # small systems: several per block
    >>> plan((4, 100, 2), workers=2)
    Plan(systems=4, queries=100, keys=100, workers=1)

    A 1 MiB budget shared by two workers leaves each ``2^20 / (8 x 2 x 2) = 2^15`` scores:

    >>> p = plan((1000, 2), budget=2 ** 20, workers=2)
    >>> p, 2 * p.tile_bytes * ARRAYS_PER_TILE <= 2 ** 20
    (Plan(systems=1, queries=256, keys=128, workers=2), True)
    >>> del os.environ["ATTENTION_FW_CACHE_BYTES"]
    """
    shape = tuple(shape)
    if len(shape) not in (2, 3):
        raise ValueError(f"shape must be (n, d) or (R, n, d), got {shape}")
    R = shape[0] if len(shape) == 3 else 1
    n = shape[-2]
    w = threads() if workers is None else chk.positive_int("workers", workers)
    entries = max(1, min(_entries(budget) // w, TILE_CACHE_FACTOR * cache_bytes() // 8))
    if key_tile is not None:
        k = min(chk.positive_int("key_tile", key_tile), n)
    else:
        k = min(n, max(MIN_KEY_TILE, _floor_pow2(math.isqrt(entries))))
    if query_tile is not None:
        q = min(chk.positive_int("query_tile", query_tile), n)
    else:
        q = min(n, max(1, entries // k))
    systems = max(1, min(R, entries // (n * k))) if q == n and query_tile is None else 1
    items = -(-R // systems) * -(-n // q)
    return Plan(systems=systems, queries=q, keys=k, workers=max(1, min(w, items)))


# ----------------------------------------------------------------------------- threads
_BLAS = {"lock": threading.Lock(), "users": 0, "limiter": None, "controller": None}


@contextlib.contextmanager
def _one_blas_thread():
    """BLAS limited to one thread while any tiled step runs its workers; yields False when the BLAS
    library cannot be told (then the step runs its blocks in one thread, BLAS threaded as usual).

    The limit is process-wide (BLAS libraries have no per-thread setting); it is set by the first
    step that enters and restored to the caller's setting by the last one that leaves."""
    state = _BLAS
    with state["lock"]:
        if state["users"] == 0:
            try:
                if state["controller"] is None:
                    import threadpoolctl

                    state["controller"] = threadpoolctl.ThreadpoolController()
                ctrl = state["controller"]
                state["limiter"] = ctrl.limit(limits=1, user_api="blas") if ctrl.select(user_api="blas") else None
            except Exception:  # no threadpoolctl, or a BLAS it does not know
                state["limiter"] = None
        ok = state["limiter"] is not None
        if ok:
            state["users"] += 1
    try:
        yield ok
    finally:
        if ok:
            with state["lock"]:
                state["users"] -= 1
                if state["users"] == 0:
                    state["limiter"].restore_original_limits()
                    state["limiter"] = None

