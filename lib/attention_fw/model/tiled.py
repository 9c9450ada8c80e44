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
  tie tolerance above :data:`~attention_fw.model.tiled_leaders.BOUNDED_SCALE_TOL` the running
  minimum gives the scale instead); two
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
a tile of scores the size of a few times one core's L2 cache
(:data:`~attention_fw.model.tiled_plan.TILE_CACHE_FACTOR`,
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

The code is cut by concept into :mod:`~attention_fw.model.tiled_plan` (the tiles' shape, the
budget, the threads), :mod:`~attention_fw.model.tiled_softmax` (the tiles' loops, the online
softmax, the float32 rules) and :mod:`~attention_fw.model.tiled_leaders` (the leader sets and the
screen); this module holds the public steps and the chain's sampler, and re-exports the public
names of the three.

Shapes follow ``dynamics``: tokens ``(n, d)`` or ``(R, n, d)``; ``B`` is ``None`` (identity),
``(d, d)``, or one matrix per system ``(R, d, d)``. The sample path of :func:`sap_step` depends on the
tile plan (the law does not), not on the number of threads.
"""
from __future__ import annotations

import numpy as np

from . import _tile_kernels
from .. import _validate as chk
from . import _checks, _sampling
from ._checks import key_query as _key_query
# the parts of the tiled steps, cut by concept; their public names are this module's too
from .tiled_plan import (ARRAYS_PER_TILE, DEFAULT_BUDGET, MIN_KEY_TILE, TILE_CACHE_FACTOR, Plan, budget,
                         cache_bytes, fits, memory_budget, plan, set_memory_budget, threads)
from .tiled_softmax import (PRECISIONS, Float32PrecisionWarning, _batch, _operands, _precision, _rescale,
                            _softmax_apply, _Tiles, float32_score_error, float32_step_error)
from .tiled_leaders import (BOUNDED_SCALE_TOL, SCREEN_MAX_UNSURE, SCREEN_MIN_ROWS, SCREEN_PROBE_ROWS,
                            SCREEN_TINY_QUERY, _leader_state, _screen)

__all__ = ["DEFAULT_BUDGET", "MIN_KEY_TILE", "ARRAYS_PER_TILE", "memory_budget", "set_memory_budget", "budget",
           "fits", "Plan", "plan", "softmax_step", "hardmax_step", "attention_apply", "leaders", "tie_counts",
           "sap_step", "TILE_CACHE_FACTOR", "cache_bytes", "threads", "PRECISIONS", "Float32PrecisionWarning",
           "float32_score_error", "float32_step_error", "BOUNDED_SCALE_TOL", "SCREEN_PROBE_ROWS",
           "SCREEN_MAX_UNSURE", "SCREEN_MIN_ROWS", "SCREEN_TINY_QUERY"]


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
    decides from a probe of 256 rows scored in float64
    (:data:`~attention_fw.model.tiled_leaders.SCREEN_PROBE_ROWS`; tied or
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
