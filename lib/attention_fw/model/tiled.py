"""The steps at real context lengths: keys in tiles, memory ``O(R n (d + tile))`` instead of ``O(R n^2)``.

The batched steps of :mod:`attention_fw.model.dynamics` hold the whole ``(R, n, n)`` score matrix:
right for the book's experiments, but 34 GB for one system of ``n = 65,536`` tokens. The
functions here compute the same steps with the keys cut into tiles of ``k`` columns, so that
only an ``(R_b, q, k)`` block of scores exists at any time, plus ``O(R n d)`` state:

* **softmax** (:func:`softmax_step`, :func:`attention_apply`): a running maximum and sum per query
  row (the online softmax of attention kernels). The weighted sum and the normaliser come out of
  one product ``E [x, 1]``. When ``beta |B| max_k |x_k|^2 <= 200`` (Cauchy-Schwarz) no shift is
  needed at all, as in ``dynamics``, and a tile costs exactly its two products and its ``exp``.
* **hardmax** (:func:`hardmax_step`, :func:`leaders`, :func:`tie_counts`): a running leader set with
  the library's tie rule, ``S_ij >= top_i - tie_rtol * max_j |S_ij|`` for the row's *final* top and
  scale, ties across tiles included. The running set uses the running top and scale; two numbers
  per row (the smallest member score and the largest non-member score) show at the end whether it
  is the exact set, and the rare rows where it might not be (a near tie straddling the tolerance
  across tiles) are recomputed from their whole row of scores.
* **the chain (SAP)** (:func:`sap_step`): an exact streaming sampler. Row ``i`` keeps one pick and
  the total weight ``T`` of the tiles seen; at a tile of weight ``W`` it switches to a pick drawn
  inside the tile with probability ``W / (T + W)``. By induction every key ``j`` is the final pick
  with probability ``w_j / sum_k w_k``, the softmax law. The switch is a Bernoulli variable drawn
  from its ``-log`` (``dynamics.bernoulli_from_neg_log``) and the draw inside the tile uses the
  two groups of ``dynamics.sap_step``, so escapes of probability 1e-40 keep probability 1e-40.
  (Gumbel-max over tiles has the same law, but a double-precision Gumbel variate cannot exceed
  about 37, which cuts the law's tail at probability ~1e-16.) A row switches about
  ``log(number of tiles)`` times, so the draws cost next to nothing beside the products.

The tile is chosen from a memory budget (:func:`memory_budget`, 256 MiB unless set by
:func:`set_memory_budget`, :func:`budget` or ``ATTENTION_FW_MEMORY_BUDGET`` in bytes): all queries of as
many systems as fit against ``k`` keys, ``k`` as large as the budget allows (at least
``MIN_KEY_TILE``); queries are split only when even that does not fit. The functions of
``dynamics`` call the ones here only when their own ``(R, n, n)`` arrays would exceed the
budget, so small problems run exactly as before. The functions here always tile; ``key_tile``
fixes the tile width (tests, benchmarks).

Shapes follow ``dynamics``: tokens ``(n, d)`` or ``(R, n, d)``; ``B`` is ``None`` (identity),
``(d, d)``, or one matrix per system ``(R, d, d)``. The sample path of :func:`sap_step` depends on the
tile plan (the law does not).
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import numpy as np

from . import _tile_kernels
from .. import _validate as chk
from . import _checks, _sampling, _scaling
from ._checks import key_query as _key_query
from ._checks import leader_mask

__all__ = ["DEFAULT_BUDGET", "MIN_KEY_TILE", "ARRAYS_PER_TILE", "memory_budget", "set_memory_budget", "budget",
           "fits", "Plan", "plan", "softmax_step", "hardmax_step", "attention_apply", "leaders", "tie_counts",
           "sap_step"]

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
    >>> set_memory_budget(previous)                    # restores the old setting, returns the one replaced
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


@dataclass(frozen=True)
class Plan:
    """How a step cuts its work: ``systems`` per chunk, ``queries`` per block, ``keys`` per tile.

    Examples
    --------
    >>> Plan(systems=2, queries=100, keys=64).tile_bytes     # 8 bytes x 2 x 100 x 64
    102400
    """

    systems: int
    queries: int
    keys: int

    @property
    def tile_bytes(self) -> int:
        return 8 * self.systems * self.queries * self.keys


def plan(shape, *, budget=None, key_tile=None) -> Plan:
    """The tiles of a step on tokens of ``shape`` ``(n, d)`` or ``(R, n, d)``.

    Keys are tiled first (all queries of all systems against ``k`` keys, ``k`` as wide as the
    budget allows, at least ``MIN_KEY_TILE``); then systems are taken in chunks; queries are
    split last. ``key_tile`` fixes ``k``.

    Examples
    --------
    With 1 MiB (``2^16`` entries per tile): 4 systems of 100 tokens fit whole; 4 x 1000 need key
    tiles of ``MIN_KEY_TILE = 64`` over all 1000 queries, one system at a time:

    >>> plan((4, 100, 2), budget=2**20)
    Plan(systems=4, queries=100, keys=100)
    >>> p = plan((4, 1000, 2), budget=2**20)
    >>> p, p.tile_bytes * ARRAYS_PER_TILE <= 2**20
    (Plan(systems=1, queries=1000, keys=64), True)
    """
    shape = tuple(shape)
    if len(shape) not in (2, 3):
        raise ValueError(f"shape must be (n, d) or (R, n, d), got {shape}")
    R = shape[0] if len(shape) == 3 else 1
    n = shape[-2]
    entries = _entries(budget)
    if key_tile is not None:
        k = min(chk.positive_int("key_tile", key_tile), n)
    else:
        k = min(n, max(MIN_KEY_TILE, entries // max(1, R * n)))
    rows = max(1, entries // k)  # query rows (over all systems of a chunk) per tile
    if rows >= n:
        return Plan(systems=min(R, rows // n), queries=n, keys=k)
    return Plan(systems=1, queries=rows, keys=k)


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
    """The loops over system chunks, query blocks and key tiles of one step, with one reusable tile buffer.

    ``Q`` (R, n, d) are the (scaled) queries and ``KT`` (R, d, n) the keys transposed; a tile of
    scores is ``Q[rs, qs] @ KT[rs, :, ks]``.
    """

    def __init__(self, Q, KT, p: Plan):
        self.Q, self.KT, self.p = Q, KT, p
        self.R, self.n = Q.shape[0], Q.shape[1]
        self._buf = np.empty(p.systems * p.queries * p.keys)

    def blocks(self):
        p = self.p
        for r0 in range(0, self.R, p.systems):
            r1 = min(self.R, r0 + p.systems)
            for q0 in range(0, self.n, p.queries):
                yield slice(r0, r1), slice(q0, min(self.n, q0 + p.queries))

    def scores(self, rs, qs):
        """The scores of the block ``(rs, qs)`` key tile by key tile: ``(k0, ks, S)``, ``S`` a
        C-contiguous (Rb, q, k) view of the buffer, overwritten by the next tile."""
        for k0 in range(0, self.n, self.p.keys):
            ks = slice(k0, min(self.n, k0 + self.p.keys))
            shape = (rs.stop - rs.start, qs.stop - qs.start, ks.stop - ks.start)
            S = self._buf[: shape[0] * shape[1] * shape[2]].reshape(shape)
            np.matmul(self.Q[rs, qs], self.KT[rs, :, ks], out=S)
            yield k0, ks, S

    def weights(self, rs, qs, shift, c, acc):
        """The tiles of ``exp`` of the scores of the block, as :meth:`scores`. ``shift``: each tile
        relative to the running row maximum ``c`` (R_b, q), rescaling the running sums ``acc``
        (``_tile_kernels`` ``online_shift``); else the scores are known to lie in [-200, 200]."""
        TK = _tile_kernels.impl()
        for k0, ks, Z in self.scores(rs, qs):
            if shift:
                TK.online_shift(Z, c, acc)
            np.exp(Z, out=Z)
            yield k0, ks, Z


def _softmax_core(Q, KT, Va, p: Plan, shift: bool):
    """``sum_j e^{<Q_i, K_j>} Va_j`` and ``sum_j e^{<Q_i, K_j>}`` in the last column of the result.

    ``Q`` (R, n, d) the scaled queries, ``KT`` (R, d, n) the keys transposed, ``Va`` (R, n, m + 1)
    the values with a column of ones. ``shift``: keep a running maximum (else the scores are
    known to lie in [-200, 200]). Returns ``(acc, c)``: the sums relative to ``e^{c_i}``.
    """
    R, n = Q.shape[0], Q.shape[1]
    tiles = _Tiles(Q, KT, p)
    acc = np.zeros(Va.shape[:1] + (n, Va.shape[-1]))
    c = np.full((R, n), -np.inf) if shift else np.zeros((R, n))
    for rs, qs in tiles.blocks():
        a, cq = acc[rs, qs], c[rs, qs]  # views: the kernels write through them
        tmp = np.empty(a.shape)
        for _, ks, Z in tiles.weights(rs, qs, shift, cq, a):
            np.matmul(Z, Va[rs, ks], out=tmp)
            a += tmp
    return acc, c


def _softmax_apply(x3, values3, B, beta, p: Plan):
    """``sum_j A_ij values_j`` for the softmax weights of the tokens ``x3`` (R, n, d)."""
    xs, b, _ = _rescale(x3, B, beta)
    if b == 0.0:
        return np.repeat(values3.mean(axis=-2, keepdims=True), x3.shape[-2], axis=-2)
    Q = b * _bx(xs, B)
    KT = np.ascontiguousarray(np.swapaxes(xs, -1, -2))
    Va = np.concatenate([values3, np.ones(values3.shape[:-1] + (1,))], axis=-1)
    shift = not b * _norm(B) * _scaling.max_sq_norm(xs) <= 200.0
    acc, _ = _softmax_core(Q, KT, Va, p, shift)
    return acc[..., :-1] / acc[..., -1:]


def _leader_state(x3, values3, B, tol, p: Plan):
    """The exact leader sets of every token, tile by tile: ``(sum of the leaders' values, count,
    first argmax)``, shapes (R, n, m), (R, n), (R, n)."""
    xs, _, _ = _rescale(x3, B, 0.0)  # leader sets do not change under the exact power-of-two scaling
    Q = np.ascontiguousarray(_bx(xs, B))
    KT = np.ascontiguousarray(np.swapaxes(xs, -1, -2))
    R, n = xs.shape[0], xs.shape[1]
    TK = _tile_kernels.impl()
    tiles = _Tiles(Q, KT, p)
    m = values3.shape[-1]
    acc = np.zeros((R, n, m))
    fs = np.empty((R, n, 4))
    fs[..., 0], fs[..., 1], fs[..., 2], fs[..., 3] = -np.inf, np.inf, np.inf, -np.inf
    ist = np.zeros((R, n, 2), dtype=np.intp)
    ist[..., 1] = -1
    for rs, qs in tiles.blocks():
        fsq, istq, accq = (np.ascontiguousarray(a[rs, qs]) for a in (fs, ist, acc))
        for k0, ks, S in tiles.scores(rs, qs):
            TK.leader_scan(S, values3[rs, ks], k0, fsq, istq, accq, tol)
        fs[rs, qs], ist[rs, qs], acc[rs, qs] = fsq, istq, accq
    top, low, mlow, xhigh = (fs[..., k] for k in range(4))
    thr = top - tol * np.maximum(top, -low)
    unsure = ~((mlow >= thr) & (xhigh < thr))
    if unsure.any():
        _recompute_leaders(Q, KT, values3, tol, np.nonzero(unsure), acc, ist, p.systems * p.queries * p.keys)
    return acc, ist[..., 0], ist[..., 1]


def _recompute_leaders(Q, KT, values3, tol, where, acc, ist, entries):
    """The leader sets of the rows ``where`` from their whole rows of scores (the rule of
    the tie rule of :mod:`._checks`), in chunks of rows that fit the tile's size."""
    rr, ii = where
    step = max(1, entries // KT.shape[-1])
    for r in np.unique(rr):
        rows = ii[rr == r]
        for s in range(0, rows.size, step):
            i = rows[s:s + step]
            S = Q[r, i] @ KT[r]
            mask = leader_mask(S, tol)
            acc[r, i] = mask.astype(np.float64) @ values3[r]
            ist[r, i, 0] = mask.sum(axis=-1)


def _convex_step(x3, target, gamma):
    return x3 + gamma * (target - x3)


# ----------------------------------------------------------------------------- public steps
def _prepare(x, B):
    x = chk.tokens("x", x)
    return x, _key_query(B, x.shape)


def softmax_step(x, gamma, beta, B=None, *, budget=None, key_tile=None) -> np.ndarray:
    """One step of (SA-beta), ``(1 - gamma) x_i + gamma sum_j A_ij x_j``, with the keys in tiles.

    Same numbers as :func:`attention_fw.model.dynamics.softmax_step` to rounding (tested to 1e-12
    relative), in memory ``O(R n (d + k))`` for tiles of ``k`` keys.

    Examples
    --------
    >>> from attention_fw.model import dynamics
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [0.1, 0.2]])
    >>> bool(np.allclose(softmax_step(x, 0.5, 2.0, key_tile=2), dynamics.softmax_step(x, 0.5, 2.0)))   # 3 tiles
    True
    """
    gamma = _checks.gamma(gamma)
    beta = _checks.beta(beta, allow_inf=False)
    x, B = _prepare(x, B)
    x3 = _batch(x)
    p = plan(x3.shape, budget=budget, key_tile=key_tile)
    return _convex_step(x3, _softmax_apply(x3, x3, B, beta, p), gamma).reshape(x.shape)


def hardmax_step(x, gamma, B=None, *, tie_rtol=None, budget=None, key_tile=None) -> np.ndarray:
    """One step of (SA-inf) with the keys in tiles: each token moves a fraction gamma towards the
    average of its tied leaders (tie rule of :mod:`attention_fw.model.dynamics`, ties across tiles included).

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
    acc, cnt, _ = _leader_state(x3, x3, B, tol, plan(x3.shape, budget=budget, key_tile=key_tile))
    return _convex_step(x3, acc / cnt[..., None], gamma).reshape(x.shape)


def attention_apply(x, values, beta=np.inf, B=None, *, tie_rtol=None, budget=None,
                    key_tile=None) -> np.ndarray:
    """``A @ values`` for the attention matrix ``A = dynamics.attention(x, beta, B)``, without forming ``A``.

    ``values`` has shape (..., n, m) with the batch and token axes of ``x``.

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
    x3, v3 = _batch(x), np.ascontiguousarray(_batch(v))
    p = plan(x3.shape, budget=budget, key_tile=key_tile)
    if np.isinf(beta):
        acc, cnt, _ = _leader_state(x3, v3, B, _checks.tie_tol(tie_rtol, x.shape[-1]), p)
        out = acc / cnt[..., None]
    else:
        out = _softmax_apply(x3, v3, B, beta, p)
    return out.reshape(v.shape)


def leaders(x, B=None, *, return_counts: bool = False, tie_rtol=None, budget=None, key_tile=None):
    """Index of the first maximiser of ``<B x_i, x_j>`` over ``j`` (as :func:`attention_fw.model.dynamics.leaders`).

    ``return_counts``: also the number of tied leaders of each token (:func:`tie_counts`, same pass).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    >>> leaders(x, return_counts=True, key_tile=1)      # token 2 ties 0 and 1: first index, count 2
    (array([0, 1, 0]), array([1, 1, 2]))
    """
    x, B = _prepare(x, B)
    x3 = _batch(x)
    _, cnt, arg = _leader_state(x3, np.zeros(x3.shape[:-1] + (0,)), B, _checks.tie_tol(tie_rtol, x.shape[-1]),
                                plan(x3.shape, budget=budget, key_tile=key_tile))
    arg = arg.reshape(x.shape[:-1])
    return (arg, cnt.reshape(x.shape[:-1])) if return_counts else arg


def tie_counts(x, B=None, *, tie_rtol=None, budget=None, key_tile=None) -> np.ndarray:
    """Number of tied leaders of every token (as :func:`attention_fw.model.dynamics.tie_counts`).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    >>> tie_counts(x, key_tile=1)          # <x_2, x_0> = <x_2, x_1> = 0.3: a tie across two tiles
    array([1, 1, 2])
    """
    x, B = _prepare(x, B)
    x3 = _batch(x)
    _, cnt, _ = _leader_state(x3, np.zeros(x3.shape[:-1] + (0,)), B, _checks.tie_tol(tie_rtol, x.shape[-1]),
                              plan(x3.shape, budget=budget, key_tile=key_tile))
    return cnt.reshape(x.shape[:-1])


def sap_step(x, gamma, beta, B=None, *, rng, return_choice: bool = False, budget=None, key_tile=None):
    """One step of the chain (SAP) with the keys in tiles (streaming exact sampler, module docstring).

    Each token independently picks ``J_i = j`` with probability ``A_ij`` and moves to
    ``(1 - gamma) x_i + gamma x_J``; ``rng`` an int seed, a SeedSequence or a Generator.

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
    x3 = _batch(x)
    J = _sap_picks(x3, B, beta, rng, plan(x3.shape, budget=budget, key_tile=key_tile))
    target = np.take_along_axis(x3, J[..., None], axis=-2)
    out = _convex_step(x3, target, gamma).reshape(x.shape)
    J = J.reshape(x.shape[:-1])
    return (out, J) if return_choice else out


def _sap_picks(x3, B, beta, rng, p: Plan):
    xs, b, _ = _rescale(x3, B, beta)
    R, n = xs.shape[0], xs.shape[1]
    Q = b * _bx(xs, B)
    KT = np.ascontiguousarray(np.swapaxes(xs, -1, -2))
    shift = not b * _norm(B) * _scaling.max_sq_norm(xs) <= 200.0
    TK = _tile_kernels.impl()
    tiles = _Tiles(Q, KT, p)
    J = np.full((R, n), -1, dtype=np.intp)
    for rs, qs in tiles.blocks():
        Rb, q = rs.stop - rs.start, qs.stop - qs.start
        total = np.zeros((Rb, q, 1))
        c = np.full((Rb, q), -np.inf)
        w = np.empty((Rb, q))
        Jq = np.full((Rb, q), -1, dtype=np.intp)
        for k0, _, Z in tiles.weights(rs, qs, shift, c, total):
            TK.row_sums(Z, w)
            before = total[..., 0]
            switch = (before == 0.0) & (w > 0.0)  # the first tile with weight: probability 1
            race = (before > 0.0) & (w > 0.0)
            if race.any():
                # switch with probability w / (before + w) = exp(-log1p(before / w)), exact when tiny
                switch[race] = _sampling.bernoulli_from_neg_log(_neg_log_share(before[race], w[race]), rng=rng)
            total[..., 0] += w
            rr, ii = np.nonzero(switch)
            if rr.size:
                Jq[rr, ii] = k0 + _pick_in_tile(Z, rr, ii, TK, rng)
        J[rs, qs] = Jq
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
    pick_small = _sampling.bernoulli_from_neg_log(_neg_log_share(s_big, s_small), rng=rng)
    picks = np.empty(s, dtype=np.intp)
    TK.tile_pick(Z, rr, ii, top, threshold, pick_small, 1.0 - rng.random(s), picks)
    return picks
