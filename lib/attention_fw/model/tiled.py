"""The steps at real context lengths: keys in tiles, memory ``O(R n (d + tile))`` instead of ``O(R n^2)``.

The batched steps of :mod:`attention_fw.model.dynamics` hold the whole ``(R, n, n)`` score matrix:
right for the book's experiments, but 34 GB for one system of ``n = 65,536`` tokens. The
functions here compute the same steps with the queries cut into blocks of ``q`` rows and the keys
into tiles of ``k`` columns, so that only ``(R_b, q, k)`` tiles of scores exist at any time (one per
worker thread), plus ``O(R n d)`` state:

* **softmax** (:func:`softmax_step`, :func:`attention_apply`): a running maximum and sum per query
  row (the online softmax of attention kernels). The weighted sum and the normaliser come out of
  one product ``E [x, 1]``. When ``beta |B| max_k |x_k|^2 <= 200`` (Cauchy-Schwarz) no shift is
  needed at all, as in ``dynamics``, and a tile costs exactly its two products and its ``exp``.
* **hardmax** (:func:`hardmax_step`, :func:`leaders`, :func:`tie_counts`): a running leader set with
  the library's tie rule, ``S_ij >= top_i - tie_rtol * max_j |S_ij|`` for the row's *final* top and
  scale, ties across tiles included. The running set uses the running top and, for the scale, the
  Cauchy-Schwarz bound ``|B x_i| max_j |x_j|`` (so a tile costs one pass for its maximum; with a
  tie tolerance above :data:`BOUNDED_SCALE_TOL` the running minimum gives the scale instead); two
  numbers per row (the smallest member score and the largest non-member score) show at the end
  whether it is the exact set, and the rare rows where it might not be (a near tie straddling the
  tolerance across tiles, or a key between ``tol |top|`` and ``tol`` times the bound below the
  top) are recomputed from their whole row of scores. On the float32 route (and the float64
  steps' float32 screen) with ``B`` the identity or exactly symmetric, the scores are symmetric
  and each tile serves two query blocks: its rows for its queries, its columns for the queries of
  its key block, so only the tiles at or after the diagonal are made (half the products); the
  workers keep their own running states, merged at the end, and the certification's margin
  covers the transposed scores' rounding.
* **the chain (SAP)** (:func:`sap_step`): an exact streaming sampler. Row ``i`` keeps one pick and
  the total weight ``T`` of the tiles seen; at a tile of weight ``W`` it switches to a pick drawn
  inside the tile with probability ``W / (T + W)``. By induction every key ``j`` is the final pick
  with probability ``w_j / sum_k w_k``, the softmax law. The switch is a Bernoulli variable drawn
  from its ``-log`` (``dynamics.bernoulli_from_neg_log``) and the draw inside the tile uses the
  two groups of ``dynamics.sap_step``, so escapes of probability 1e-40 keep probability 1e-40.
  (Gumbel-max over tiles has the same law, but a double-precision Gumbel variate cannot exceed
  about 37, which cuts the law's tail at probability ~1e-16.) A row switches about
  ``log(number of tiles)`` times, so the draws cost next to nothing beside the products.

The work is cut into blocks of ``q`` queries (of one or several systems) times tiles of ``k`` keys,
a tile of scores the size of a few times one core's L2 cache (:data:`TILE_CACHE_FACTOR`,
:func:`cache_bytes`, 512 x 512 on a 1 MiB L2): a tile is made by one BLAS product, exponentiated in
place (numpy's vectorised ``exp``) and consumed by the next product while it is still in cache,
and the running state of each query row (maximum and sums, leader set, pick) is carried from one
key tile to the next. The blocks of queries are shared out between :func:`threads` worker threads
(all usable CPUs unless ``ATTENTION_FW_THREADS`` is set), each running BLAS with one thread
(through ``threadpoolctl``, restored afterwards); the results do not depend on the number of threads.
``query_tile`` and ``key_tile`` fix the block shape (tests, benchmarks, other machines).

A memory budget (:func:`memory_budget`, 256 MiB unless set by :func:`set_memory_budget`,
:func:`budget` or ``ATTENTION_FW_MEMORY_BUDGET`` in bytes) caps what the workers' tiles may hold.
The functions of ``dynamics`` call the ones here only when their own ``(R, n, n)`` arrays would
exceed the budget, so small problems run exactly as before. The functions here always tile.

Precision. Every step takes ``precision='float64'`` (default: the numbers of ``dynamics`` to
rounding) or ``'float32'`` (opt-in): scores and exponentials in float32, each tile's products in
float32, the tiles' sums accumulated in float64. Its error against float64 is bounded in
:func:`float32_step_error` (about ``u (2 (d + 2) beta |B| max|x|^2 + 2 k)`` relative, ``u = 2^-24``);
it is refused where a float32 score may be off by more than 1 in the exponent
(:func:`float32_score_error`) and warned about above 0.01. The hardmax steps in float32 certify
each row's leader from the float32 scores and recompute the rows they cannot certify in float64,
so their leader sets are exactly those of float64; the float64 hardmax steps take that route
themselves (the *screen*) where a probe of a few hundred rows predicts that it pays
(``screen=False`` keeps float64 arithmetic throughout), with the same results. (Numba's own ``exp`` is a scalar call, about ten
times slower than numpy's vectorised one on this machine; numba vectorises it only through SVML,
which the llvmlite wheels of the package index are built without, so ``intel-cmplr-lib-rt`` would
change nothing here.)

Shapes follow ``dynamics``: tokens ``(n, d)`` or ``(R, n, d)``; ``B`` is ``None`` (identity),
``(d, d)``, or one matrix per system ``(R, d, d)``. The sample path of :func:`sap_step` depends on the
tile plan (the law does not), not on the number of threads.
"""
from __future__ import annotations

import contextlib
import math
import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from . import _tile_kernels
from .. import _validate as chk
from . import _checks, _sampling, _scaling
from ._checks import key_query as _key_query
from ._checks import leader_mask

__all__ = ["DEFAULT_BUDGET", "MIN_KEY_TILE", "ARRAYS_PER_TILE", "memory_budget", "set_memory_budget", "budget",
           "fits", "Plan", "plan", "softmax_step", "hardmax_step", "attention_apply", "leaders", "tie_counts",
           "sap_step", "TILE_CACHE_FACTOR", "cache_bytes", "threads", "PRECISIONS", "Float32PrecisionWarning",
           "float32_score_error", "float32_step_error", "BOUNDED_SCALE_TOL", "SCREEN_PROBE_ROWS",
           "SCREEN_MAX_UNSURE", "SCREEN_MIN_ROWS", "SCREEN_TINY_QUERY"]

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


# ----------------------------------------------------------------------------- checks
def _batch(x):
    return x.reshape((-1,) + x.shape[-2:])


def _bx(x3, B):
    """``B x_i`` for every token of the systems ``x3`` (R, n, d)."""
    if B is None:
        return x3
    if B.ndim == 2:
        return x3 @ B.T
    return np.matmul(x3, np.swapaxes(B, -1, -2))


def _norm(B):
    """An upper bound of every system's operator norm of B (1 for the identity)."""
    return 1.0 if B is None else _scaling.norm(B)


def _rescale(x3, B, beta):
    """:func:`._scaling.fit_scores` for the batch: scores that neither overflow nor all underflow."""
    return _scaling.fit_scores(x3, B, beta)


# ----------------------------------------------------------------------------- the cores
class _Tiles:
    """The loops over the blocks (system chunk x query block) and key tiles of one step.

    ``Q`` (R, n, d) are the (scaled) queries and ``KT`` (R, d, n) the keys transposed, both of the
    step's precision; a tile of scores is ``Q[rs, qs] @ KT[rs, :, ks]``. :meth:`run` shares the
    blocks out between ``plan.workers`` threads, each with its own tile buffer.
    """

    def __init__(self, Q, KT, p: Plan):
        self.Q, self.KT, self.p = Q, KT, p
        self.R, self.n = Q.shape[0], Q.shape[1]

    def blocks(self):
        p = self.p
        return [(slice(r0, min(self.R, r0 + p.systems)), slice(q0, min(self.n, q0 + p.queries)))
                for r0 in range(0, self.R, p.systems) for q0 in range(0, self.n, p.queries)]

    def buffer(self):
        return np.empty(self.p.systems * self.p.queries * self.p.keys, dtype=self.Q.dtype)

    def run(self, work, blocks=None):
        """``work(i, rs, qs, buf)`` for every block ``i``; rows of different blocks never overlap,
        so the workers write their results without locks."""
        blocks = self.blocks() if blocks is None else blocks
        with contextlib.ExitStack() as stack:
            parallel = self.p.workers > 1 and len(blocks) > 1 and stack.enter_context(_one_blas_thread())
            if not parallel:
                buf = self.buffer()
                for i, (rs, qs) in enumerate(blocks):
                    work(i, rs, qs, buf)
                return
            local = threading.local()

            def one(i):
                buf = getattr(local, "buf", None)
                if buf is None:
                    buf = local.buf = self.buffer()
                work(i, *blocks[i], buf)

            with ThreadPoolExecutor(self.p.workers, thread_name_prefix="attention_fw-tiles") as ex:
                for _ in ex.map(one, range(len(blocks))):
                    pass

    def scores(self, rs, qs, buf):
        """The scores of the block ``(rs, qs)`` key tile by key tile: ``(k0, ks, S)``, ``S`` a
        C-contiguous (Rb, q, k) view of ``buf``, overwritten by the next tile."""
        for k0 in range(0, self.n, self.p.keys):
            ks = slice(k0, min(self.n, k0 + self.p.keys))
            shape = (rs.stop - rs.start, qs.stop - qs.start, ks.stop - ks.start)
            S = buf[: shape[0] * shape[1] * shape[2]].reshape(shape)
            np.matmul(self.Q[rs, qs], self.KT[rs, :, ks], out=S)
            yield k0, ks, S

    def weights(self, rs, qs, shift, c, acc, buf):
        """The tiles of ``exp`` of the scores of the block, as :meth:`scores`. ``shift``: each tile
        relative to the running row maximum ``c`` (R_b, q), rescaling the running sums ``acc``
        (``_tile_kernels`` ``online_shift``); else the scores are known to lie where ``exp``
        neither overflows nor underflows (``NO_SHIFT`` of the precision)."""
        TK = _tile_kernels.impl()
        for k0, ks, Z in self.scores(rs, qs, buf):
            if shift:
                TK.online_shift(Z, c, acc)
            np.exp(Z, out=Z)
            yield k0, ks, Z


def _softmax_core(Q, KT, Va, p: Plan, shift: bool):
    """``sum_j e^{<Q_i, K_j>} Va_j`` and ``sum_j e^{<Q_i, K_j>}`` in the last column of the result.

    ``Q`` (R, n, d) the scaled queries, ``KT`` (R, d, n) the keys transposed, ``Va`` (R, n, m + 1)
    the values with a column of ones, all three of the step's precision. ``shift``: keep a running
    maximum (else the scores are known to lie within ``NO_SHIFT``). Returns ``(acc, c)``: the sums
    relative to ``e^{c_i}``, accumulated tile by tile in float64 whatever the precision.
    """
    R, n = Q.shape[0], Q.shape[1]
    tiles = _Tiles(Q, KT, p)
    acc = np.zeros(Va.shape[:1] + (n, Va.shape[-1]))
    c = np.full((R, n), -np.inf) if shift else np.zeros((R, n))

    def work(_, rs, qs, buf):
        a, cq = acc[rs, qs], c[rs, qs]  # views: the kernels write through them
        tmp = np.empty(a.shape, dtype=Q.dtype)
        for _, ks, Z in tiles.weights(rs, qs, shift, cq, a, buf):
            np.matmul(Z, Va[rs, ks], out=tmp)
            a += tmp

    tiles.run(work)
    return acc, c


# ----------------------------------------------------------------------------- precision
PRECISIONS = ("float64", "float32")
"""The precisions of the tiled steps' scores and exponentials (the sums are accumulated in float64 in both)."""

NO_SHIFT = {"float64": 200.0, "float32": 40.0}
"""Largest ``beta |B| max|x|^2`` at which the scores are exponentiated without a running maximum:
``e^{+-200}`` is a normal double, ``e^{+-40}`` a normal float (and sums of ``e^40`` over any tile stay finite)."""

FLOAT32_UNIT = 2.0 ** -24
"""Unit roundoff of float32."""

BOUNDED_SCALE_TOL = 1e-9
"""Tie tolerances up to this (the default is ``8 d`` machine epsilons) let the hardmax tiles track
each row's maximum alone, the scale of the tie rule bounded by Cauchy-Schwarz (``_leader_state``);
above it the running minimum is tracked too (a wide tolerance would otherwise send many rows to
the exact recomputation)."""

FLOAT32_SCORE_LIMIT = 1.0
"""The float32 path is refused when a float32 score may be off by more than this (in the exponent)."""

FLOAT32_SCORE_WARN = 0.01
"""... and warns (``Float32PrecisionWarning``) when it may be off by more than this."""


class Float32PrecisionWarning(UserWarning):
    """``precision='float32'`` at a ``beta |B| max|x|^2`` where the weights may be off by more than 1%.

    Examples
    --------
    At ``beta max|x|^2 = 10^5`` in ``d = 2`` a float32 score may be off by ``4 u 10^5 = 0.024``:

    >>> import warnings
    >>> x = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = softmax_step(x, 0.5, 1e5, precision="float32")
    >>> [type(m.message).__name__ for m in caught]
    ['Float32PrecisionWarning']
    """


def float32_score_error(beta_sq, d) -> float:
    """Worst-case absolute error of one float32 score ``beta <B x_i, x_j>``: ``(d + 2) u beta |B| max|x|^2``.

    ``u = 2^-24``; ``beta_sq = beta |B| max_k |x_k|^2``. Rounding the two factors to float32 costs
    ``2 u`` relative and a dot product of length ``d`` at most ``d u`` (to first order), each relative
    to ``|B x_i| |x_j| <= |B| max|x|^2``.

    Examples
    --------
    >>> round(float32_score_error(1.0, 64) / FLOAT32_UNIT)
    66
    """
    return (d + 2) * FLOAT32_UNIT * float(beta_sq)


def float32_step_error(beta_sq, d, key_tile) -> float:
    """Bound on the error of one float32 softmax step against float64, relative to ``gamma max|x|``.

    ``|y32_i - y64_i| <= gamma max_k|x_k| u (2 (d + 2) beta |B| max|x|^2 + 2 k + 3)`` (first order,
    ``u = 2^-24``, ``k`` the key tile), from: weights with relative errors at most
    ``e = float32_score_error`` plus ``u`` (the float32 ``exp``) move an average of the ``x_j`` by at
    most ``2 (e + u) max|x|``; the tile's float32 product ``E [x, 1]`` sums ``k`` positive weights
    (times values rounded to float32, ``u``), at most ``k u`` relative in the sum and in the
    normaliser; the tiles' sums are accumulated in float64 (no error growth with ``n``). Rounding
    errors of random sign make the typical error smaller: ``sqrt(d)`` and ``sqrt(k)`` in place of
    ``d`` and ``k``.

    Examples
    --------
    >>> # d = 64, tiles of 512 keys
    >>> round(float32_step_error(1.0, 64, 512) / FLOAT32_UNIT)
    1159
    """
    return FLOAT32_UNIT * (2.0 * (d + 2) * float(beta_sq) + 2.0 * key_tile + 3.0)


def _precision(precision) -> str:
    """``'float64'`` or ``'float32'`` from that name, ``np.float64`` / ``np.float32`` or their dtypes."""
    if isinstance(precision, str) and precision in PRECISIONS:
        return precision
    if isinstance(precision, np.dtype) or precision in (np.float64, np.float32):
        name = np.dtype(precision).name
        if name in PRECISIONS:
            return name
    raise ValueError(f"precision must be 'float64' or 'float32', got {precision!r}")


def _screen(screen):
    """``screen`` of the hardmax steps: None, True or False."""
    if screen is None or isinstance(screen, (bool, np.bool_)):
        return None if screen is None else bool(screen)
    raise ValueError(f"screen must be None, True or False, got {screen!r}")


def _check_float32(beta_sq, d):
    """Refuse (``precision`` named) or warn where float32 scores are meaningless or coarse."""
    e = float32_score_error(beta_sq, d)
    if not e <= FLOAT32_SCORE_LIMIT:
        raise ValueError(
            f"precision='float32' cannot resolve these scores: beta |B| max|x|^2 = {beta_sq:.3g} in d = {d}, "
            f"so a float32 score may be off by {e:.3g} in the exponent (weights off by a factor up to "
            f"e^{e:.3g}); use precision='float64'")
    if e > FLOAT32_SCORE_WARN:
        warnings.warn(f"precision='float32': beta |B| max|x|^2 = {beta_sq:.3g} in d = {d}, the weights may be "
                      f"off by {100 * e:.2g}% (float32_score_error); precision='float64' is exact to rounding",
                      Float32PrecisionWarning, stacklevel=4)


def _operands(xs, values3, B, b, precision):
    """``(Q, KT, Va, scale, shift)`` of a softmax-type step in the given precision: the scaled
    queries, the keys transposed, the values with a column of ones (in float32 multiplied by a
    power of two ``scale`` that brings them below 1), and whether a running maximum is needed."""
    beta_sq = b * _norm(B) * _scaling.max_sq_norm(xs)
    Q = b * _bx(xs, B)
    KT = np.swapaxes(xs, -1, -2)
    scale = 1.0
    if precision == "float32":
        _check_float32(beta_sq, xs.shape[-1])
        if values3 is not None:
            scale = _scaling.rescaled(values3) or 1.0
            values3 = values3 * scale
        c = _scaling.rescaled(KT) or 1.0  # a power of two: the keys near 1, the queries carry the rest (exact)
        Q, KT = (Q / c).astype(np.float32), (KT * c).astype(np.float32)
    Va = None
    if values3 is not None:
        Va = np.concatenate([values3, np.ones(values3.shape[:-1] + (1,))], axis=-1).astype(Q.dtype)
    return Q, np.ascontiguousarray(KT), Va, scale, not beta_sq <= NO_SHIFT[precision]


def _softmax_apply(x3, values3, B, beta, p: Plan, precision="float64"):
    """``sum_j A_ij values_j`` for the softmax weights of the tokens ``x3`` (R, n, d)."""
    xs, b, _ = _rescale(x3, B, beta)
    if b == 0.0:
        return np.repeat(values3.mean(axis=-2, keepdims=True), x3.shape[-2], axis=-2)
    Q, KT, Va, scale, shift = _operands(xs, values3, B, b, precision)
    acc, _ = _softmax_core(Q, KT, Va, p, shift)
    out = acc[..., :-1] / acc[..., -1:]
    if scale != 1.0:
        out /= scale
    return out


def _leader_state(x3, values3, B, tol, p: Plan, precision="float64", screen=None, symmetric=None):
    """The exact leader sets of every token, tile by tile: ``(sum of the leaders' values, count,
    first argmax)``, shapes (R, n, m), (R, n), (R, n).

    ``precision='float32'``: the tiles' scores in float32; a row's set is certified exact when it
    has one member and every other key scores more than ``2.5 e_i`` below the threshold (``e_i``
    the row's float32 score error, :func:`float32_score_error`); every other row (ties, near
    ties, and queries too small for float32's normal range) is recomputed from its float64
    scores: the leader sets, counts and first maximisers are those of float64 in every row.

    ``precision='float64'`` takes that float32 route too (the *screen*) when ``screen`` is True, or
    when it is None and :func:`_screen_pays` predicts few rows to recompute; ``screen=False`` keeps
    float64 arithmetic throughout. Each leader's value is added in key order in both routes and
    in the recomputation, so (with the numba passes) the sums are the same to the last bit.

    On the float32 route with an exactly symmetric ``B`` (or the identity) and square tiles,
    ``symmetric`` not False: only the tiles of key blocks at or after the query block are made,
    each scanned by rows for its queries and by columns for the queries of its key block
    (:func:`_symmetric_scan`, half the products); the certification's margin then covers the
    rounding of the transposed scores too.
    """
    xs, _, _ = _rescale(x3, B, 0.0)  # leader sets do not change under the exact power-of-two scaling
    Q = np.ascontiguousarray(_bx(xs, B))
    KT = np.ascontiguousarray(np.swapaxes(xs, -1, -2))
    R, n = xs.shape[0], xs.shape[1]
    TK = _tile_kernels.impl()
    q_rows = np.sqrt(np.einsum("rij,rij->ri", Q, Q))       # |B x_i| (the bounds and margins below)
    low = precision == "float32" or (screen is not False and _screen_pays(Q, KT, tol, screen))
    c = c2 = 1.0
    if low:  # powers of two bring keys and queries near 1 (float32 range); leader sets do not change
        c = _scaling.rescaled(KT) or 1.0
        c2 = _scaling.rescaled(Q) or 1.0
        tiles = _Tiles((Q * c2).astype(np.float32), (KT * c).astype(np.float32), p)
    else:
        tiles = _Tiles(Q, KT, p)
    m = values3.shape[-1]
    acc = np.zeros((R, n, m))
    fs = np.empty((R, n, 4))
    fs[..., 0], fs[..., 1], fs[..., 2], fs[..., 3] = -np.inf, np.inf, np.inf, -np.inf
    # With the usual tolerance the tiles track the running maximum alone: the smallest score is
    # replaced by -U, U_i >= max_j |S_ij| from Cauchy-Schwarz (with room for the products' rounding),
    # so the running set holds the keys within tol U_i of the top, a superset of the tie rule's
    # set (whose scale max_j |S_ij| lies between |top| and U_i); rows where the two could differ
    # (a key between tol |top| and tol U_i below the top) are recomputed below.
    track_low = not tol <= BOUNDED_SCALE_TOL
    if not track_low:
        unit = FLOAT32_UNIT if low else 2.0 ** -53
        q_norm = q_rows * (c2 if low else 1.0)
        k_norm = np.sqrt(np.einsum("rji,rji->ri", KT, KT)).max(axis=-1) * (c if low else 1.0)
        fs[..., 1] = -(q_norm * k_norm[:, None]) * (1.0 + 4.0 * (xs.shape[-1] + 4) * unit)
    ist = np.zeros((R, n, 2), dtype=np.intp)
    ist[..., 1] = -1

    def work(_, rs, qs, buf):
        fsq, istq, accq = (np.ascontiguousarray(a[rs, qs]) for a in (fs, ist, acc))
        for k0, ks, S in tiles.scores(rs, qs, buf):
            TK.leader_scan(S, values3[rs, ks], k0, fsq, istq, accq, tol, track_low)
        fs[rs, qs], ist[rs, qs], acc[rs, qs] = fsq, istq, accq

    sym = low and not track_low and symmetric is not False and _symmetric_route(B, p, n)
    if sym:
        _symmetric_scan(tiles, values3, fs, ist, acc, tol, TK)
    else:
        tiles.run(work)
    top, low_, mlow, xhigh = (fs[..., k] for k in range(4))
    thr = top - tol * np.maximum(top, -low_)  # the smallest threshold the row's scale allows
    # the largest: the tie rule's own where the minimum was tracked, else from the scale's lower bound |top|
    thr_high = thr if track_low else top - tol * np.abs(top)
    if low:
        x_rows = np.sqrt(np.einsum("rij,rij->ri", xs, xs))
        keys = x_rows.max(axis=-1)[:, None]
        qn = q_rows
        if sym:  # row j also saw fl32(<Q_i, K_j>) for S_ji, off by (d + 2) u |B x_i| |x_j| <= |B| max|x| |x_j|
            qn = np.maximum(qn, _norm(B) * x_rows)
        margin = 2.5 * (xs.shape[-1] + 2) * FLOAT32_UNIT * c * c2 * qn * keys  # in the scaled scores' units
        # one member whose every rival lies a few float32 errors below the threshold: the float64 set
        # is that member too (its score moves by at most e, the threshold by at most (1 + tol) e)
        unsure = ~((ist[..., 0] == 1) & (xhigh < thr - margin))
        # a query below float32's normal range lost relative precision that the margin does not cover
        unsure |= q_rows * c2 < SCREEN_TINY_QUERY
    else:
        unsure = ~((mlow >= thr_high) & (xhigh < thr))
    if unsure.any():
        _recompute_leaders(Q, KT, values3, tol, np.nonzero(unsure), acc, ist, p.systems * p.queries * p.keys)
    return acc, ist[..., 0], ist[..., 1]


def _symmetric_route(B, p: Plan, n: int) -> bool:
    """The tiles may be shared between the two blocks they join: ``B`` exactly symmetric (the
    identity, one matrix, or every matrix of the batch; a ``B`` symmetric but for one rounding
    does not qualify), square tiles, one system per block and more than one block."""
    if p.systems != 1 or p.queries != p.keys or n <= p.keys:
        return False
    return B is None or bool(np.array_equal(B, np.swapaxes(B, -1, -2)))


def _symmetric_scan(tiles, values3, fs, ist, acc, tol, TK):
    """The leader scan over the tiles ``(a, b)``, key block ``b >= a``, of symmetric scores:
    the rows of block ``a`` scan the tile (keys of block ``b``), those of block ``b`` its columns
    (keys of block ``a``: ``S_ji = S_ij``). The tiles are shared out in contiguous runs between
    the workers, each with its own running state of every row; the states are merged at the end
    (:func:`_merge_leader_states`), so no two threads write one row."""
    p = tiles.p
    R, n = tiles.R, tiles.n
    q = p.queries
    starts = list(range(0, n, q))
    pairs = [(r, a, b) for r in range(R) for ia, a in enumerate(starts) for b in starts[ia:]]
    w = max(1, min(p.workers, len(pairs)))
    runs = [pairs[len(pairs) * k // w:len(pairs) * (k + 1) // w] for k in range(w)]
    states = [(fs, ist, acc)] + [(fs.copy(), ist.copy(), acc.copy()) for _ in range(w - 1)]

    def work(k):
        fs_w, ist_w, acc_w = states[k]
        buf = tiles.buffer()
        cmax = np.empty(q, dtype=tiles.Q.dtype)
        for r, a, b in runs[k]:
            qa, kb = slice(a, min(n, a + q)), slice(b, min(n, b + q))
            shape = (1, qa.stop - qa.start, kb.stop - kb.start)
            S = buf[: shape[1] * shape[2]].reshape(shape)
            np.matmul(tiles.Q[r:r + 1, qa], tiles.KT[r:r + 1, :, kb], out=S)
            rows = [arr[r:r + 1, qa] for arr in (fs_w, ist_w, acc_w)]
            TK.leader_scan(S, values3[r:r + 1, kb], b, *rows, tol, False)
            if b != a:
                cm = cmax[: shape[2]]
                np.max(S[0], axis=0, out=cm)
                TK.leader_scan_cols(S[0], cm, values3[r, qa], a, fs_w[r, kb], ist_w[r, kb], acc_w[r, kb], tol)

    with contextlib.ExitStack() as stack:
        if w > 1 and stack.enter_context(_one_blas_thread()):
            with ThreadPoolExecutor(w, thread_name_prefix="attention_fw-tiles") as ex:
                list(ex.map(work, range(w)))
        else:
            for k in range(w):
                work(k)
    for fs_w, ist_w, acc_w in states[1:]:
        _merge_leader_states(fs, ist, acc, fs_w, ist_w, acc_w, tol)


def _merge_leader_states(fs, ist, acc, fs2, ist2, acc2, tol):
    """Merge into ``(fs, ist, acc)`` the running leader state of the same rows over other keys
    (the bounded-scale scan of ``_tile_kernels.leader_scan``, ``track_low=False``): the state of
    the two key sets together, as one scan over both would leave it up to the order of the sums
    and the first maximiser among equal tops (rows the caller then recomputes)."""
    top1, top2 = fs[..., 0].copy(), fs2[..., 0]
    top = np.maximum(top1, top2)
    thr = top - tol * np.maximum(top, -fs[..., 1])
    for f, i_, a_, t_ in ((fs, ist, acc, top1), (fs2, ist2, acc2, top2)):
        evict = (i_[..., 0] > 0) & (thr > t_)
        f[..., 3][evict] = np.maximum(f[..., 3][evict], t_[evict])
        i_[..., 0][evict] = 0
        f[..., 2][evict] = np.inf
        a_[evict] = 0.0
    arg = np.where(top2 > top1, ist2[..., 1], np.where(top1 > top2, ist[..., 1], np.minimum(ist[..., 1], ist2[..., 1])))
    fs[..., 0] = top
    np.minimum(fs[..., 2], fs2[..., 2], out=fs[..., 2])
    np.maximum(fs[..., 3], fs2[..., 3], out=fs[..., 3])
    ist[..., 0] += ist2[..., 0]
    ist[..., 1] = arg
    acc += acc2


def _recompute_leaders(Q, KT, values3, tol, where, acc, ist, entries):
    """The leader sets and first maximisers of the rows ``where`` from their whole rows of float64
    scores (the tie rule of :mod:`._checks`), in chunks of rows that fit the tile's size."""
    rr, ii = where
    TK = _tile_kernels.impl()
    step = max(1, entries // KT.shape[-1])
    for r in np.unique(rr):
        rows = ii[rr == r]
        for s in range(0, rows.size, step):
            i = rows[s:s + step]
            S = Q[r, i] @ KT[r]
            mask = leader_mask(S, tol)
            sums = np.empty((i.size, values3.shape[-1]))
            TK.leader_sums(mask, values3[r], sums)  # in key order, as the tiles' scan adds them
            acc[r, i] = sums
            ist[r, i, 0] = mask.sum(axis=-1)
            ist[r, i, 1] = _first_maximiser(S, Q[r, i], KT[r])


def _first_maximiser(S, Qi, K):
    """``S.argmax(axis=-1)``, except where several keys score within a product's rounding of the
    top: among those the first maximiser of their scores summed in one fixed order (so coincident
    keys score exactly alike wherever they sit in a product; a BLAS product may round two equal
    dot products differently by their position in its blocks)."""
    arg = S.argmax(axis=-1)
    d = Qi.shape[-1]
    top = S.max(axis=-1)
    slack = 4.0 * (d + 2) * 2.0 ** -53 * np.sqrt(np.einsum("ij,ij->i", Qi, Qi)) * np.sqrt(
        np.einsum("ij,ij->j", K, K)).max()
    cand = S >= (top - slack)[:, None]
    multi = np.nonzero(cand.sum(axis=-1) > 1)[0]
    if multi.size == 0:
        return arg
    pr, kj = np.nonzero(cand[multi])
    a, b = Qi[multi[pr]], K[:, kj].T
    canon = a[:, 0] * b[:, 0]
    for c in range(1, d):
        canon = canon + a[:, c] * b[:, c]
    starts = np.r_[0, np.nonzero(np.diff(pr))[0] + 1]
    best = np.maximum.reduceat(canon, starts)
    hit = np.nonzero(canon == best[pr])[0]
    first = hit[np.r_[True, np.diff(pr[hit]) > 0]]
    arg[multi[pr[first]]] = kj[first]
    return arg


SCREEN_PROBE_ROWS = 256
"""Rows whose float64 scores the float64 hardmax steps compute first to decide on the float32 screen."""

SCREEN_MAX_UNSURE = 1.0 / 32.0
"""The screen is taken when at most this share of the probed rows would need their float64 row again."""

SCREEN_MIN_ROWS = 4096
"""Below this many rows, over all systems, the steps use plain float64 (the probe would cost more than it saves)."""

SCREEN_TINY_QUERY = 2.0 ** -90
"""A query row whose scaled norm is below this (float32's normal range begins at ``2^-126``) is
always recomputed in float64 on the float32 route."""


def _screen_pays(Q, KT, tol, screen=None) -> bool:
    """Whether the float64 hardmax steps take the float32 screen (``screen=None``: decide; True: take it).

    The decision: at least :data:`SCREEN_MIN_ROWS` rows, and among :data:`SCREEN_PROBE_ROWS`
    evenly spaced rows (no randomness) scored exactly in float64, at most
    :data:`SCREEN_MAX_UNSURE` of them with a rival key within 1.5 float32 errors of the smallest
    threshold the screen may use (tied, clustered and coincident tokens: nearly every row) or a
    query too small for float32. The screen costs a float32 pass plus one float64 row per unsure
    row; plain float64 costs one float64 pass, so the screen pays while few rows are unsure.
    Either route gives the same answers; only the time depends on this.
    """
    if screen:
        return True
    R, n, d = Q.shape
    if R * n < SCREEN_MIN_ROWS:
        return False
    flat = np.unique(np.linspace(0, R * n - 1, SCREEN_PROBE_ROWS).astype(np.int64))
    rr, ii = np.divmod(flat, n)
    qn = np.sqrt(np.einsum("ij,ij->i", Q[rr, ii], Q[rr, ii]))
    kmax = np.sqrt(np.einsum("rji,rji->ri", KT, KT)).max(axis=-1)
    cq = _scaling.rescaled(Q) or 1.0
    unsure = int((qn * cq < SCREEN_TINY_QUERY).sum())
    for r in np.unique(rr):
        sel = rr == r
        Qp = Q[r, ii[sel]]
        cols = max(1, 2 ** 18 // Qp.shape[0])  # scores in slices of keys of 2 MiB each, twice
        parts = [slice(k0, k0 + cols) for k0 in range(0, n, cols)]
        top = np.max([(Qp @ KT[r][:, ks]).max(axis=-1) for ks in parts], axis=0)
        bound = qn[sel] * kmax[r]
        if tol > BOUNDED_SCALE_TOL:
            scale = np.maximum(top, -np.min([(Qp @ KT[r][:, ks]).min(axis=-1) for ks in parts], axis=0))
        else:
            scale = np.maximum(top, bound)
        edge = (top - tol * scale - 1.5 * 2.5 * (d + 2) * FLOAT32_UNIT * bound)[:, None]
        near = np.sum([(Qp @ KT[r][:, ks] >= edge).sum(axis=-1) for ks in parts], axis=0)
        unsure += int(((near > 1) & (qn[sel] * cq >= SCREEN_TINY_QUERY)).sum())
    return unsure <= SCREEN_MAX_UNSURE * flat.size


def _convex_step(x3, target, gamma):
    return x3 + gamma * (target - x3)


# ----------------------------------------------------------------------------- public steps
def _prepare(x, B):
    x = chk.tokens("x", x)
    return x, _key_query(B, x.shape)


def softmax_step(x, gamma, beta, B=None, *, budget=None, key_tile=None, query_tile=None,
                 precision="float64") -> np.ndarray:
    """One step of (SA-beta), ``(1 - gamma) x_i + gamma sum_j A_ij x_j``, with the keys in tiles.

    Same numbers as :func:`attention_fw.model.dynamics.softmax_step` to rounding (tested to 1e-12
    relative), in memory ``O(R n (d + k))`` for tiles of ``k`` keys.

    ``precision='float32'`` (opt-in): scores and exponentials in float32, each tile's sums in float32
    and the sums of the tiles in float64; one step is then off the float64 step by at most
    ``gamma max|x| u (2 (d + 2) beta |B| max|x|^2 + 2 k + 3)``, ``u = 2^-24`` (:func:`float32_step_error`;
    about ``1e-6`` relative at ``beta max|x|^2 = 1``, ``d = 64``, typically ten times less). Refused
    (``ValueError`` naming ``precision``) where a float32 score may be off by more than 1 in the
    exponent, ``(d + 2) u beta |B| max|x|^2 > 1``; a ``Float32PrecisionWarning`` above 0.01.

    Examples
    --------
    >>> from attention_fw.model import dynamics
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [0.1, 0.2]])
    >>> tiled = softmax_step(x, 0.5, 2.0, key_tile=2)           # 3 tiles of keys
    >>> bool(np.allclose(tiled, dynamics.softmax_step(x, 0.5, 2.0)))
    True
    """
    gamma = _checks.gamma(gamma)
    beta = _checks.beta(beta, allow_inf=False)
    x, B = _prepare(x, B)
    precision = _precision(precision)
    x3 = _batch(x)
    p = plan(x3.shape, budget=budget, key_tile=key_tile, query_tile=query_tile)
    return _convex_step(x3, _softmax_apply(x3, x3, B, beta, p, precision), gamma).reshape(x.shape)


def hardmax_step(x, gamma, B=None, *, tie_rtol=None, budget=None, key_tile=None, query_tile=None,
                 precision="float64", screen=None) -> np.ndarray:
    """One step of (SA-inf) with the keys in tiles: each token moves a fraction gamma towards the
    average of its tied leaders (tie rule of :mod:`attention_fw.model.dynamics`, ties across tiles included).

    ``precision='float32'``: the tiles' scores in float32, every row whose leader set float32 cannot
    certify (ties, or a rival within a few float32 errors of the threshold) recomputed from its
    float64 scores: the same leader sets as float64 in every row, at float32 speed where the leader
    is clear (rows with ties, as of coincident tokens, cost a float64 row each).

    ``precision='float64'`` (default) runs that same float32 screen when it pays: ``screen=None``
    decides from a probe of 256 rows scored in float64 (:data:`SCREEN_PROBE_ROWS`; tied or
    clustered states keep float64 arithmetic), ``screen=True`` always screens, ``screen=False``
    forces float64 arithmetic throughout. The leader sets, counts, first maximisers and the step
    are the same on either route (identical with the numba passes; with ``ATTENTION_FW_KERNELS=numpy``
    the averages of rows with several tied leaders may differ by the rounding of their sums).

    Examples
    --------
    Token 2 ties ``x_0`` and ``x_1``, which lie in different one-key tiles; ``gamma = 1`` lands on their average:

    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    >>> hardmax_step(x, 1.0, key_tile=1)
    array([[1. , 0. ],
           [0. , 1. ],
           [0.5, 0.5]])
    """
    gamma = _checks.gamma(gamma)
    x, B = _prepare(x, B)
    x3 = _batch(x)
    tol = _checks.tie_tol(tie_rtol, x.shape[-1])
    p = plan(x3.shape, budget=budget, key_tile=key_tile, query_tile=query_tile)
    acc, cnt, _ = _leader_state(x3, x3, B, tol, p, _precision(precision), _screen(screen))
    return _convex_step(x3, acc / cnt[..., None], gamma).reshape(x.shape)


def attention_apply(x, values, beta=np.inf, B=None, *, tie_rtol=None, budget=None,
                    key_tile=None, query_tile=None, precision="float64", screen=None) -> np.ndarray:
    """``A @ values`` for the attention matrix ``A = dynamics.attention(x, beta, B)``, without forming ``A``.

    ``values`` has shape (..., n, m) with the batch and token axes of ``x``. ``precision`` as in
    :func:`softmax_step` (finite beta) and :func:`hardmax_step` (``beta = inf``), and so is
    ``screen`` (``beta = inf`` only; finite beta ignores it).

    Examples
    --------
    With ``values = I`` the product is ``A`` itself: uniform at ``beta = 0``, tied leaders averaged at ``inf``:

    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    >>> np.round(attention_apply(x, np.eye(3), 0.0, key_tile=1), 4)
    array([[0.3333, 0.3333, 0.3333],
           [0.3333, 0.3333, 0.3333],
           [0.3333, 0.3333, 0.3333]])
    >>> attention_apply(x, np.eye(3), np.inf, key_tile=1)[2]
    array([0.5, 0.5, 0. ])
    """
    beta = _checks.beta(beta)
    x, B = _prepare(x, B)
    v = chk.as_float_array("values", values, min_ndim=2, max_ndim=3)
    if v.shape[:-1] != x.shape[:-1]:
        raise ValueError(f"values must have shape {x.shape[:-1]} + (m,) to match x, got {v.shape}")
    precision, screen = _precision(precision), _screen(screen)
    x3, v3 = _batch(x), np.ascontiguousarray(_batch(v))
    p = plan(x3.shape, budget=budget, key_tile=key_tile, query_tile=query_tile)
    if np.isinf(beta):
        acc, cnt, _ = _leader_state(x3, v3, B, _checks.tie_tol(tie_rtol, x.shape[-1]), p, precision, screen)
        out = acc / cnt[..., None]
    else:
        out = _softmax_apply(x3, v3, B, beta, p, precision)
    return out.reshape(v.shape)


def leaders(x, B=None, *, return_counts: bool = False, tie_rtol=None, budget=None, key_tile=None,
            query_tile=None, precision="float64", screen=None):
    """Index of the first maximiser of ``<B x_i, x_j>`` over ``j`` (as :func:`attention_fw.model.dynamics.leaders`).

    ``return_counts``: also the number of tied leaders of each token (:func:`tie_counts`, same pass).
    ``precision='float32'`` and ``screen`` as in :func:`hardmax_step`: the same answers as float64.

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    >>> # token 2 ties 0 and 1: first index, count 2
    >>> leaders(x, return_counts=True, key_tile=1)
    (array([0, 1, 0]), array([1, 1, 2]))
    """
    x, B = _prepare(x, B)
    x3 = _batch(x)
    _, cnt, arg = _leader_state(x3, np.zeros(x3.shape[:-1] + (0,)), B, _checks.tie_tol(tie_rtol, x.shape[-1]),
                                plan(x3.shape, budget=budget, key_tile=key_tile, query_tile=query_tile),
                                _precision(precision), _screen(screen))
    arg = arg.reshape(x.shape[:-1])
    return (arg, cnt.reshape(x.shape[:-1])) if return_counts else arg


def tie_counts(x, B=None, *, tie_rtol=None, budget=None, key_tile=None, query_tile=None,
               precision="float64", screen=None) -> np.ndarray:
    """Number of tied leaders of every token (as :func:`attention_fw.model.dynamics.tie_counts`).

    ``precision`` and ``screen`` as in :func:`hardmax_step` (the same counts on every route).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    >>> # <x_2, x_0> = <x_2, x_1> = 0.3: a tie across two tiles
    >>> tie_counts(x, key_tile=1)
    array([1, 1, 2])
    """
    x, B = _prepare(x, B)
    x3 = _batch(x)
    _, cnt, _ = _leader_state(x3, np.zeros(x3.shape[:-1] + (0,)), B, _checks.tie_tol(tie_rtol, x.shape[-1]),
                              plan(x3.shape, budget=budget, key_tile=key_tile, query_tile=query_tile),
                              _precision(precision), _screen(screen))
    return cnt.reshape(x.shape[:-1])


def sap_step(x, gamma, beta, B=None, *, rng, return_choice: bool = False, budget=None, key_tile=None,
             query_tile=None, precision="float64"):
    """One step of the chain (SAP) with the keys in tiles (streaming exact sampler, module docstring).

    Each token independently picks ``J_i = j`` with probability ``A_ij`` and moves to
    ``(1 - gamma) x_i + gamma x_J``; ``rng`` an int seed, a SeedSequence or a Generator. Each block
    of queries draws from its own stream spawned from ``rng`` (the picks do not depend on the
    number of threads). ``precision='float32'``: the weights from float32 scores and exponentials
    (tile sums in float64), so the law is the softmax law of scores off by at most
    :func:`float32_score_error` (refused and warned about as in :func:`softmax_step`).

    Examples
    --------
    The move is towards the pick; at ``beta = 1000`` every other pick has probability below
    ``e^{-200}``, so each token picks its hardmax leader:

    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.2]])
    >>> y, J = sap_step(x, 0.5, 1000.0, rng=0, return_choice=True, key_tile=1)
    >>> J, bool(np.allclose(y, x + 0.5 * (x[J] - x)))
    (array([0, 1, 0]), True)
    """
    gamma = _checks.gamma(gamma)
    beta = _checks.beta(beta, allow_inf=False)
    rng = chk.rng("rng", rng)
    x, B = _prepare(x, B)
    precision = _precision(precision)
    x3 = _batch(x)
    J = _sap_picks(x3, B, beta, rng, plan(x3.shape, budget=budget, key_tile=key_tile, query_tile=query_tile),
                   precision)
    target = np.take_along_axis(x3, J[..., None], axis=-2)
    out = _convex_step(x3, target, gamma).reshape(x.shape)
    J = J.reshape(x.shape[:-1])
    return (out, J) if return_choice else out


def _sap_picks(x3, B, beta, rng, p: Plan, precision="float64"):
    xs, b, _ = _rescale(x3, B, beta)
    R, n = xs.shape[0], xs.shape[1]
    Q, KT, _, _, shift = _operands(xs, None, B, b, precision)
    TK = _tile_kernels.impl()
    tiles = _Tiles(Q, KT, p)
    J = np.full((R, n), -1, dtype=np.intp)
    blocks = tiles.blocks()
    streams = np.random.SeedSequence(rng.integers(0, 2 ** 63, size=2)).spawn(len(blocks))

    def work(i, rs, qs, buf):
        g = np.random.default_rng(streams[i])
        Rb, q = rs.stop - rs.start, qs.stop - qs.start
        total = np.zeros((Rb, q, 1))
        c = np.full((Rb, q), -np.inf)
        w = np.empty((Rb, q))
        t = np.empty(Rb * q)
        flag = np.empty((Rb, q), dtype=np.int8)
        rr, ii = np.empty(Rb * q, dtype=np.intp), np.empty(Rb * q, dtype=np.intp)
        none = np.zeros(0, dtype=bool)
        Jq = np.full((Rb, q), -1, dtype=np.intp)
        for k0, _, Z in tiles.weights(rs, qs, shift, c, total, buf):
            TK.row_sums(Z, w)
            # rows whose first weight is here switch with probability 1, the others with
            # probability w / (T + w) = exp(-log1p(T / w)), drawn from its -log (exact when tiny)
            races = TK.race_terms(w, total, t, flag)
            hits = _sampling._bernoulli(t[:races], g) if races else none
            s = TK.switch_rows(flag, hits, rr, ii)
            if s:
                Jq[rr[:s], ii[:s]] = k0 + _pick_in_tile(Z, rr[:s], ii[:s], TK, g)
        J[rs, qs] = Jq

    tiles.run(work, blocks)
    return J


def _neg_log_share(rest, part):
    """``-log(part / (rest + part)) = log1p(rest / part)`` for ``rest >= 0``, ``part >= 0`` (inf where
    ``part = 0``), also where ``rest / part`` overflows (then ``log(rest) - log(part)``)."""
    with np.errstate(divide="ignore", over="ignore"):
        ratio = rest / part
        out = np.log1p(ratio)
        far = np.isinf(ratio) & (part > 0)
        out[far] = np.log(rest[far]) - np.log(part[far])
    return out


def _pick_in_tile(Z, rr, ii, TK, rng):
    """A key of the tile for each selected row, with probability proportional to its weight (the
    two groups of ``dynamics.sap_step``: weights below ``SMALL_WEIGHT`` times the row's largest)."""
    s = rr.size
    threshold = _sampling.SMALL_WEIGHT
    top, s_small, s_big = np.empty(s), np.empty(s), np.empty(s)
    TK.tile_split(Z, rr, ii, threshold, top, s_small, s_big)
    pick_small = _sampling._bernoulli(_neg_log_share(s_big, s_small), rng)
    picks = np.empty(s, dtype=np.intp)
    TK.tile_pick(Z, rr, ii, top, threshold, pick_small, 1.0 - rng.random(s), picks)
    return picks
