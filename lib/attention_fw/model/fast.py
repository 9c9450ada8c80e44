"""Steps whose cost grows like ``n``: (SA-inf) through the hull, (SA-beta) through sums with proved errors, (SAP) by rejection.

The dense steps of :mod:`attention_fw.model.dynamics` compare every token with every token,
``O(n^2 d)`` per step. Here the same steps for one or a few systems of many tokens in low dimension.

(SA-inf) through the hull (:func:`hardmax_step`)
-------------------------------------------------
A linear functional ``y -> <B x_i, y>`` attains its maximum (and its minimum) over the tokens at
vertices of their convex hull ``K``, so the leader of every token is a vertex. The dense step's tie
rule (``S_ij >= top_i - tol max_j |S_ij|``, ``_checks``) also counts the tokens whose score is
within ``tol`` times the row's scale of the top; such a token lies within ``tol max_j |x_j|`` of the
boundary of ``K`` (its distance to the supporting line of ``B x_i`` bounds its distance to the
boundary). So the candidates of a step are the tokens within a margin ::

    m = 4 (tol + 2 d eps) max_j |x_j|

of the boundary of ``K`` (the factor covers the rounding of a length-``d`` score, ``<= d eps |b| |x|``,
on both sides of the comparison, and of the distance itself): a token farther inside has, in every
row, a computed score strictly below the row's threshold and strictly above its minimum, so it
changes neither the top, the scale, nor the tied set. The scan over the candidates repeats the
dense pass's arithmetic operation for operation (the same products in the same order, the tied
tokens summed in index order), so on the same candidates the step is **bitwise** the dense
step (d <= 2; in d = 3 the dense step computes its scores by BLAS above n = 256 and the leader
sets agree except for a score within BLAS's rounding of the tie threshold). Candidates at the same
position share their score, and rows with the same tie pattern share their sum, so a hull whose
boundary band holds many tokens at few positions (late times, when tokens sit on their vertices)
costs ``O(n u)`` with ``u`` the number of distinct candidate positions.

In the plane with more than 64 positions (up to 4,096), a row does not score them all: the
positions are listed once per step by bins of directions (``4 u`` bins of a pseudo-angle, one
division per row instead of an arctangent), each list holding every position that can be the top
or tied for a direction in its bin (the bound is in ``_bins``), and a row scores the list of its
direction and that of the opposite direction (its minimum, for the scale). About ``2 sqrt(2 u / pi)``
scores per row for positions on a circle, the same bits. A step at ``n = 10^6`` uniform in a disk
(``u`` about 350) went from 1.3 to 0.19 CPU-s with it and with the ball below. The rows are split between two
threads from 200,000 tokens (``HULL_WORKERS``, ``HULL_PER_WORKER``; each row's bits do not depend on the split):
0.15 to 0.17 s on two cores for that step.

Finding the band costs ``O(n)`` per step: the tokens extreme along 16 fixed directions (26 in
3-D) span a polytope ``P`` inside ``K``; the tokens deeper than ``2 m`` inside ``P`` cannot be
candidates (and those inside a ball about the extremes' mean that is that deep are not even scored
against ``P``'s facets); Qhull (``scipy.spatial.ConvexHull``) takes the few others. The hull is recomputed at
every step: vertices are stationary only when they own their cells (Section 4 of the paper), and
a vertex that moves can let interior tokens become vertices, so a candidate set computed once and
only pruned would be wrong in general. A hull Qhull cannot build (all tokens on a line or a plane)
sends the step to the dense path (counted in :data:`STATS`).

(SA-beta) and (SAP)
-------------------
:func:`softmax_step` sums the weights by a Taylor expansion, a Chebyshev grid (middle temperatures), a
pruned sum, sector grids (Chebyshev grids over the sources of each cell of directions' caps) or dense
tiles (its docstring); :func:`sap_step` draws the chain's picks exactly in law by
rejection from an envelope of boxes of a tree over the tokens (its docstring), a few rounds per row.
"""
from __future__ import annotations

import itertools
import math
import numpy as np
import numpy.typing as npt

from .. import _validate as chk
from . import _fast_kernels
from ._checks import TIE_RTOL, key_query
from ._checks import beta as _beta_check
from ._checks import gamma as _gamma
from ._checks import tie_tol as _tie_tol
from ._checks import transpose as _t
from ._scaling import fit_scores as _fit_scores
from ._scaling import max_sq_norm as _max_sq_norm

__all__ = ["STATS", "SOFTMAX_STATS", "SAP_STATS", "STEP_TOL", "available", "hull_candidates", "hardmax_step",
           "softmax_step", "softmax_plan", "sap_step", "taylor_order", "grid_error_bound", "grid_order"]

EPS = float(np.finfo(float).eps)
TINY = 1e-250  # rows with max_k |(B x_i)_k| max_j |x_j| below: products near underflow, scanned in full
HULL_DIMS = (1, 2, 3)

STATS: dict[str, int] = {"hull_steps": 0, "binned_steps": 0, "dense_fallbacks": 0, "full_rows": 0}
"""Counters since import of systems stepped through the hull (of which ``binned_steps`` scored each row on
its direction's bin only), systems sent to the dense step (no hull), rows scanned in full (``B x_i`` near
underflow)."""


def available() -> bool:
    """True when the compiled passes (numba) are importable."""
    return _fast_kernels.impl() is not None


def _kernels():
    K = _fast_kernels.impl()
    if K is None:
        raise RuntimeError("the fast steps need numba (pip install numba); use method='dense' without it")
    return K


def _span(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a.min(axis=0), a.max(axis=0))`` of an ``(m, d)`` array, one column at a time (a reduction over the
    first axis of a narrow array is an order of magnitude slower in numpy; min and max are exact either way)."""
    return (np.array([a[:, k].min() for k in range(a.shape[1])]),
            np.array([a[:, k].max() for k in range(a.shape[1])]))


def _directions(d: int) -> np.ndarray:
    if d == 2:
        a = np.arange(16) * (2 * np.pi / 16)
        return np.stack([np.cos(a), np.sin(a)], axis=1)
    v = np.array([p for p in itertools.product((-1.0, 0.0, 1.0), repeat=d) if any(p)])
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _hull_equations(points: np.ndarray) -> np.ndarray | None:
    """Qhull's facets ``E[:, :d] x + E[:, d] <= 0`` (unit normals) of ``points``, or None if degenerate."""
    from scipy.spatial import ConvexHull, QhullError
    if points.shape[0] <= points.shape[1]:
        return None
    try:
        return np.ascontiguousarray(ConvexHull(points).equations)
    except (QhullError, ValueError):
        return None


def hull_candidates(x: npt.ArrayLike, tol: float = 0.0) -> np.ndarray | None:
    """Indices (ascending) of the tokens within the margin ``4 (tol + 2 d eps) max_j |x_j|`` of the boundary
    of their hull (module docstring); None if the hull is degenerate (flat) or ``d`` is not 1, 2 or 3.

    Examples
    --------
    >>> g = np.linspace(0.0, 1.0, 5)
    >>> grid = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)       # a 5 x 5 grid of the unit square
    >>> len(hull_candidates(grid))                                   # its 16 boundary tokens
    16
    """
    x = np.ascontiguousarray(chk.tokens("x", x, batched_ok=False), dtype=float)
    return _candidates(x, chk.real_scalar("tol", tol, low=0.0))[0]


def _candidates(x, tol):
    """:func:`hull_candidates` of checked contiguous tokens, and ``max_j |x_j|^2``."""
    n, d = x.shape
    if d not in HULL_DIMS:
        return None, _max_sq_norm(x)
    if d == 1:
        top_sq = _max_sq_norm(x)
        margin = 4.0 * (tol + 2.0 * d * EPS) * math.sqrt(top_sq)
        lo, hi = x[:, 0].min(), x[:, 0].max()
        return np.flatnonzero((x[:, 0] - lo <= margin) | (hi - x[:, 0] <= margin)), top_sq
    K = _kernels()
    ext, top_sq = K.extremes(x, _directions(d))
    margin = 4.0 * (tol + 2.0 * d * EPS) * math.sqrt(top_sq)
    ext = np.unique(ext)
    E = _hull_equations(x[ext]) if ext.size > d else None
    if E is None:
        idx = np.arange(n)
    else:  # the tokens deeper than 2 m inside P = conv(extremes) are inside K by as much
        depth = 2.0 * margin + 8.0 * EPS * math.sqrt(top_sq)
        centre, deep_sq = _deep_ball(x[ext], E, depth)
        idx = K.near_boundary(x, np.zeros(0, dtype=np.int64), E, depth, centre, deep_sq)
    E = _hull_equations(x[idx])
    if E is None:
        return None, top_sq
    return K.near_boundary(x, idx, E, margin, np.zeros(d), 0.0), top_sq


def _deep_ball(points, E, depth):
    """``(c, s)``: the tokens with ``|x - c|^2 < s`` are farther than ``depth`` from the boundary of the
    polytope ``{E[:, :d] x + E[:, d] <= 0}`` (unit normals) spanned by ``points``, so the scan skips their
    facets. ``c`` the points' mean, ``r`` its distance to the nearest facet: the ball of radius
    ``r - depth`` about ``c`` is that far inside; shrunk by a relative ``1e-9`` (and a few ``eps`` of the
    points' size) for the rounding of both sides. ``s = 0`` when ``c`` is not that deep."""
    d = points.shape[1]
    c = points.mean(axis=0)
    r = float(np.min(-(E[:, :d] @ c + E[:, d])))
    size = float(np.abs(points).max())
    reach = r - depth - 64.0 * EPS * size
    if not reach > 0.0:
        return c, 0.0
    return c, (reach * (1.0 - 1e-9)) ** 2


def _hardmax_one(x, bx, gamma, tol):
    """One system's step through the hull, or None when its hull is degenerate."""
    cand, top_sq = _candidates(x, tol)
    if cand is None:
        return None
    U, group = np.unique(x[cand], axis=0, return_inverse=True)
    U = np.ascontiguousarray(U)
    out = np.empty_like(x)
    K = _kernels()
    R = math.sqrt(top_sq)
    nb, ptr, idx = _bins(K, U, R, tol)
    STATS["binned_steps"] += nb > 0
    args = (bx, x, cand.astype(np.int64), group.reshape(-1).astype(np.int64), U, R, gamma, tol, TINY, out, nb, ptr,
            idx)
    n = x.shape[0]
    parts = max(1, min(HULL_WORKERS, n // HULL_PER_WORKER))
    cuts = [n * k // parts for k in range(parts + 1)]
    if parts == 1:
        full = K.hull_leaders(*args, 0, n)
    else:                   # rows split between threads (the compiled pass releases the GIL; same bits per row)
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(parts) as ex:
            full = sum(ex.map(lambda k: K.hull_leaders(*args, cuts[k], cuts[k + 1]), range(parts)))
    STATS["full_rows"] += int(full)
    return out


HULL_WORKERS = 2            # threads of the hull step's rows
HULL_PER_WORKER = 100_000   # ... each with at least this many rows


BIN_MIN_POSITIONS = 64      # planar candidate positions from which a row scores only its direction's bin
BIN_MAX_POSITIONS = 4096    # ... and up to which the bins are made (their cost: 4 u^2)
_NO_BINS = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))


def pseudo_angle_bins(nb: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``nb`` bins (``nb`` a multiple of 4) of directions by the compiled scan's pseudo-angle (``[0, 4)``,
    one unit per quadrant, ``p = b_1 / (b_0 + b_1)`` in the first): their unit centres ``(nb, 2)`` and
    angular half-widths ``(nb,)``, each bin widened by ``1e-12`` in ``p`` for the rounding of its index.

    Examples
    --------
    >>> c, w = pseudo_angle_bins(8)
    >>> bool(np.allclose(np.hypot(c[:, 0], c[:, 1]), 1.0)), bool(w.max() < 2 * 4 / 8)
    (True, True)
    >>> bool(np.allclose(c[4:], -c[:4]))                 # the bin k + nb/2 is the opposite of bin k
    True
    """
    if nb % 4 or nb <= 0:
        raise ValueError(f"nb must be a positive multiple of 4, got {nb}")
    edges = 4.0 * np.arange(nb + 1) / nb

    def angle(p):
        q = np.floor(np.clip(p, 0.0, 4.0 - 1e-15))
        r = p - q
        return q * (np.pi / 2) + np.arctan2(r, 1.0 - r)

    lo, hi = angle(edges[:-1] - 1e-12), angle(edges[1:] + 1e-12)
    mid = 0.5 * (lo + hi)
    return np.stack([np.cos(mid), np.sin(mid)], axis=1), 0.5 * (hi - lo)


def _bins(K, U, R, tol):
    """``(nb, ptr, idx)``: the lists of the direction bins of the planar positions ``U`` (``nb = 0``: none,
    every row scores every position).

    A row's direction ``b = B x_i`` falls in the bin (:func:`pseudo_angle_bins`) whose centre ``c`` (a unit
    vector) is within its half-width ``w`` of the angle of ``b``, so ``|<b/|b| - c, U_g>| <= w R``. The
    computed top of the row is within ``3 eps |b| R`` (the rounding of a planar score) of the exact maximum,
    and a tied position is within ``tol |b| R`` of the top (the scale ``max(top, -low)`` is at most ``|b| R``
    to rounding); moving from ``b / |b|`` to ``c`` costs ``w R`` twice for each of the two positions compared.
    So every position that can be the top or tied satisfies ``<c, U_g> >= max_h <c, U_h> - (4 w R + tol R +
    64 eps R)`` (the last term covers every rounding, the lists' own products included), and the bin's list
    holds it; the computed minimum is the top of ``-b``, in the opposite bin ``k + nb/2``."""
    u = U.shape[0]
    if U.shape[1] != 2 or not BIN_MIN_POSITIONS < u <= BIN_MAX_POSITIONS:
        return 0, *_NO_BINS
    nb = 4 * max(64, u)
    cen, w = pseudo_angle_bins(nb)
    slacks = 4.0 * w * R + tol * R * (1.0 + 1e-9) + 64.0 * EPS * R
    ptr, idx = K.hull_bins(U, np.ascontiguousarray(cen), np.ascontiguousarray(slacks))
    return nb, ptr, idx


# The dense steps the fast ones fall back to, registered by :mod:`attention_fw.model.dynamics` when it is
# imported (the package imports it first), so that the imports run one way: dynamics -> fast.
_DENSE_STEPS: dict = {}


def _dense_hardmax(x, gamma, B, tie_rtol):
    return _DENSE_STEPS["hardmax"](x, gamma, B, tie_rtol=tie_rtol, method="dense")


def hardmax_step(x: npt.ArrayLike, gamma: float, B: npt.ArrayLike | None = None, *,
                 tie_rtol: float | None = TIE_RTOL) -> np.ndarray:
    """One step of (SA-inf) with the leaders found among the tokens near the hull's boundary (module docstring).

    The same arguments and, in ``d <= 2``, the same bits as :func:`attention_fw.model.dynamics.hardmax_step`;
    ``O(n (D + u))`` per system with ``D`` = 16 directions (26 in 3-D) and ``u`` distinct candidate positions
    (about the number of hull vertices), memory ``O(n)``. A system whose hull is flat (or ``d > 3``)
    is stepped by the dense step.

    Examples
    --------
    >>> from attention_fw.model import dynamics
    >>> x = np.random.default_rng(0).normal(size=(2000, 2))
    >>> bool(np.array_equal(hardmax_step(x, 0.5), dynamics.hardmax_step(x, 0.5)))
    True
    """
    gamma = _gamma(gamma)
    x = chk.tokens("x", x)
    d = x.shape[-1]
    Bk: np.ndarray | None = key_query(B, x.shape)
    tol = _tie_tol(tie_rtol, d)
    if d not in HULL_DIMS or not available():
        STATS["dense_fallbacks"] += 1
        return _dense_hardmax(x, gamma, Bk, tie_rtol)
    xs, _, c = _fit_scores(x, Bk, 0.0)
    if c != 1.0:  # leader sets are invariant under a common power-of-two scaling (as in the dense step)
        return hardmax_step(xs, gamma, Bk, tie_rtol=tie_rtol) / c
    x3 = np.ascontiguousarray(x.reshape((-1,) + x.shape[-2:]))
    bx3 = x3 if Bk is None else np.ascontiguousarray(x3 @ _t(Bk))  # the dense step's own product
    out = np.empty(x3.shape)
    for r in range(x3.shape[0]):  # a loop over systems (each of many tokens), not over tokens
        y = _hardmax_one(x3[r], np.ascontiguousarray(bx3[r]), gamma, tol)
        if y is None:
            STATS["dense_fallbacks"] += 1
            Br = None if Bk is None else (Bk if Bk.ndim == 2 else Bk[r])
            y = _dense_hardmax(x3[r], gamma, Br, tie_rtol)
        else:
            STATS["hull_steps"] += 1
        out[r] = y
    return out.reshape(x.shape)


# ----------------------------------------------------------------------------- (SA-beta)
RHO_TAYLOR = 6.0      # rows with beta |B x_i| r <= RHO_TAYLOR take the expansion (r: radius about the centroid)
TAYLOR_TOL = 1e-10    # its proved bound on |m_fast - m| / r
PRUNE_EXTRA = 25.0    # the pruned sum drops terms below e^{-(log n + PRUNE_EXTRA)} of the row's largest
STEP_TOL = 1e-8       # what the tests hold every row to: |m_fast - m_dense| <= STEP_TOL r
"""The accuracy every row of the fast (SA-beta) step is held to, relative to the radius ``r`` of the tokens."""


def taylor_order(rho: float, tol: float = TAYLOR_TOL) -> int:
    """The smallest ``p`` with ``2.01 rho^{p+1} e^rho / (p+1)! <= tol``: the expansion's order at radius ``rho``.

    Examples
    --------
    >>> taylor_order(1.0), taylor_order(6.0)
    (13, 35)
    """
    p = 0
    while math.log(2.01) + (p + 1) * math.log(max(rho, 1e-300)) + rho - math.lgamma(p + 2) > math.log(tol):
        p += 1
    return p


# ----------------------------------------------------------------------------- (SA-beta): the Chebyshev grid
GRID_TOL = 1e-9           # the grid's proved bound on |m_fast - m| / r (a fifth of STEP_TOL, with the sectors' 2x)
GRID_RATES = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0)   # the candidate rates a = |s| h per cell
GRID_MAX_NODES = 2048     # Chebyshev nodes per coordinate, at most (memory 3 G^2 doubles per grid)
GRID_MAX_EXP = 700.0      # 2 sum_k max|q_k| max|y_k| at most: no entry of the scaled transform underflows
# rough seconds per unit of work on one core, for the routing only (results do not depend on them)
COST_TERM = 4e-9          # a source term of the pruned sum
COST_BOX = 2e-8           # a box of the quadtree bounded by the pruned sum
COST_TAYLOR = 0.85e-9     # a term of the expansion's moments or of its rows
COST_SETUP = 1e-6         # a token in the pruned sum's setup (hull candidates, quadtree)
COST_DENSE = 1.2e-9       # a source term of the dense tiles
COST_SECTOR = 6e-6        # a band of the pruned sum costing more per row may go to the sector grids
COST_SECTOR_CELL = 0.009  # the transform of one cell of the sector grids (p = 16, ~600 nodes per coordinate)
SECTOR_P = 16             # nodes per cell of the sector grids, as estimated by the routing
SECTOR_UNION = 4.0        # sources of a cell of the sector grids, in terms kept by one of its rows (estimate)
COST_NODE = 1e-9          # a source or target times p^2 in the spreading and the interpolation
COST_FLOP = 4e-11         # a BLAS multiply-add of the transform


def _lebesgue(p: int) -> float:
    return 1.0 + 2.0 / math.pi * math.log(p + 1.0)


def _cheb_error(a: float, p: int) -> float:
    """A bound on the relative error of the ``p``-node Chebyshev interpolant of ``e^{a u}`` on ``[-1, 1]``:
    ``4 e^a sum_{k >= p} I_k(a)`` with ``I_k(a) <= (a/2)^k / k! e^{a^2 / (4 (k + 1))}`` (inf when ``a >= 2 p + 2``)."""
    if a <= 0.0:
        return 0.0
    if a >= 2.0 * p + 2.0:
        return math.inf
    lg = (p * math.log(a / 2.0) - math.lgamma(p + 1.0) + a * a / (4.0 * (p + 1.0)) + a
          - math.log1p(-a / (2.0 * p + 2.0)))
    return 4.0 * math.exp(min(lg, 700.0))


def grid_error_bound(a_s: float, a_t: float, p: int, d: int = 2) -> float:
    """The bound on ``|m_fast - m| / r`` of the Chebyshev grid of :func:`softmax_step` with ``p`` nodes per cell,
    target cells of half-width ``h_s`` and source cells of half-width ``h_t`` such that ``max|y_k| h_s <= a_s``
    and ``max|q_k - q0_k| h_t <= a_t`` in every coordinate ``k`` (``q0`` the centre of the targets' box,
    ``r = max_j |y_j|``; the derivation is in
    :func:`softmax_step`).

    Examples
    --------
    >>> grid_error_bound(2.0, 2.0, 20) < 1e-10 < grid_error_bound(2.0, 2.0, 14)
    True
    """
    a_s = chk.real_scalar("a_s", a_s, low=0.0)
    a_t = chk.real_scalar("a_t", a_t, low=0.0)
    if int(p) != p or p < 1 or int(d) != d or d < 1:
        raise ValueError(f"p and d must be positive integers, got p = {p}, d = {d}")
    p, d = int(p), int(d)
    e = _cheb_error(a_s, p) + _lebesgue(p) * math.exp(2.0 * a_s) * _cheb_error(a_t, p)
    eps = (1.0 + e) ** d - 1.0
    return math.inf if eps >= 1.0 else 2.0 * eps / (1.0 - eps)


def grid_order(a: float, tol: float = GRID_TOL) -> int:
    """The smallest ``p`` with ``grid_error_bound(a, a, p) <= tol``: the nodes per cell at the rate ``a``.

    Examples
    --------
    >>> grid_order(1.0), grid_order(4.0)
    (12, 24)
    """
    a = chk.real_scalar("a", a, low=0.0)
    p = 1
    while grid_error_bound(a, a, p) > tol:
        p += 1
        if p > 200:
            raise ValueError(f"no p <= 200 meets tol = {tol} at a = {a}")
    return p


_GRID_ORDERS = {a: grid_order(a * (1.0 + 1e-9)) for a in GRID_RATES}   # cells may be wider by 1e-12


def _cheb_nodes(p):
    k = np.arange(p)
    nodes = np.cos((2 * k + 1) * np.pi / (2 * p))
    wts = (-1.0) ** k * np.sin((2 * k + 1) * np.pi / (2 * p))
    return nodes, wts


def _axis(lo, hi, other_max, a):
    """Cells of one coordinate over ``[lo, hi]`` of half-width ``h <= a / other_max``: ``(start, h, cells)``."""
    hreq = a / other_max if other_max > 0.0 else math.inf
    width = hi - lo
    if width <= 0.0:
        h = hreq if math.isfinite(hreq) else 1.0
        return lo - h, h, 1
    cells = max(1, math.ceil(width / (2.0 * hreq))) if math.isfinite(hreq) else 1
    return lo, width / (2.0 * cells) * (1.0 + 1e-12), cells


def _grid_layout(qlo, qhi, ylo, yhi, n_src, n_tgt):
    """The cheapest grid (by the cost model) meeting :data:`GRID_TOL` for targets in the box ``[qlo, qhi]`` and
    sources in ``[ylo, yhi]``: ``(seconds, a, p, target axes, source axes)``, or None (too many nodes, or
    exponents beyond :data:`GRID_MAX_EXP`)."""
    smax = np.maximum(np.abs(qlo), np.abs(qhi))
    tmax = np.maximum(np.abs(ylo), np.abs(yhi))
    if not 2.0 * float(np.dot(smax, tmax)) <= GRID_MAX_EXP:
        return None
    best = None
    for a in GRID_RATES:
        lay = _grid_layout_at(qlo, qhi, ylo, yhi, n_src, n_tgt, a, _GRID_ORDERS[a])
        if lay is not None and (best is None or lay[0] < best[0]):
            best = lay
    return best


def _grid_layout_at(qlo, qhi, ylo, yhi, n_src, n_tgt, a, p):
    """The grid of rate ``a`` with ``p`` nodes per cell (:func:`_grid_layout`), or None beyond
    :data:`GRID_MAX_NODES`: ``(seconds, a, p, target axes, source axes, q0)``. The targets are taken about the
    centre ``q0`` of their box (:func:`_grid_rows`), so the source cells are sized by the box's half-widths."""
    q0 = 0.5 * (np.asarray(qlo, dtype=float) + np.asarray(qhi, dtype=float))
    smax = 0.5 * (np.asarray(qhi, dtype=float) - np.asarray(qlo, dtype=float))
    tmax = np.maximum(np.abs(ylo), np.abs(yhi))
    tax = [_axis(float(qlo[k] - q0[k]), float(qhi[k] - q0[k]), float(tmax[k]), a) for k in range(2)]
    sax = [_axis(float(ylo[k]), float(yhi[k]), float(smax[k]), a) for k in range(2)]
    gs = [p * c for _, _, c in tax]
    gt = [p * c for _, _, c in sax]
    if max(gs + gt) > GRID_MAX_NODES:
        return None
    cost = COST_NODE * p * p * (n_src + n_tgt) + COST_FLOP * 3 * _transform_flops(gs, gt)
    return cost, a, p, tax, sax, q0


def _transform_orders(gs, gt):
    """Multiply-adds of the grid's transform ``E_0 Q E_1^T`` (``Q`` of ``gt[0] x gt[1]`` source nodes, ``gs``
    target nodes per coordinate) in its two orders: ``(E_0 Q) E_1^T`` and ``E_0 (Q E_1^T)``."""
    return gs[0] * gt[0] * gt[1] + gs[0] * gt[1] * gs[1], gt[0] * gt[1] * gs[1] + gs[0] * gt[0] * gs[1]


def _transform_flops(gs, gt):
    """Multiply-adds of the grid's transform in the cheaper of its two orders (:func:`_transform_orders`)."""
    return min(_transform_orders(gs, gt))


def _grid_nodes(axis, nodes):
    start, h, cells = axis
    centres = start + (2 * np.arange(cells) + 1) * h
    return (centres[:, None] + h * nodes[None, :]).reshape(-1)


def _by_cells(fn, start, workers):
    """``fn(a, b)`` over the cells ``a <= c < b``, in ``workers`` threads of about equal numbers of points
    (the compiled passes release the GIL; each cell writes its own block)."""
    from concurrent.futures import ThreadPoolExecutor
    m = int(start[-1])
    parts = max(1, min(workers, m // 50000 + 1))
    cuts = np.unique(np.searchsorted(start, np.linspace(0, m, parts + 1)[1:-1]))
    bounds = [0, *[int(c) for c in cuts], start.size - 1]
    if len(bounds) == 2:
        fn(0, start.size - 1)
        return
    with ThreadPoolExecutor(len(bounds) - 1) as ex:
        list(ex.map(lambda k: fn(bounds[k], bounds[k + 1]), range(len(bounds) - 1)))


def _grid_rows(q, y, rows, layout, out, workers=2):
    """``out[i] = sum_j w_ij y_j / sum_j w_ij`` (``w_ij = e^{<q_i, y_j>}``) for ``i`` in ``rows`` by the grid
    ``layout`` of :func:`_grid_layout` (:class:`_GridJob`); returns the rows whose interpolated ``Z`` was not
    positive (NaN)."""
    job = _GridJob(q, y, rows, layout)
    job.spread(workers)
    job.transform()
    vals, bad = job.gather(workers)
    out[rows] = vals
    return rows[bad]


class _GridJob:
    """One Chebyshev grid in three passes: :meth:`spread` (compiled, the sources to the nodes), :meth:`transform`
    (BLAS) and :meth:`gather` (compiled, the nodes to the targets), so that many grids can run each pass in
    turn: threads over the grids for the compiled passes, BLAS on both cores for the transforms (a compiled
    pass that follows a BLAS call on both cores shares them with BLAS's idle threads while they spin).

    The targets are taken about the centre ``q0`` of the layout's box: ``w_ij = e^{<q0, y_j>} e^{<q_i - q0, y_j>}``,
    the first factor a weight of source ``j`` (scaled by its largest, a common factor of the row's sums), the
    second interpolated. The weights' exponents span at most ``2 sum_k |q0_k| max|y_k|``, and with the
    transform's ``2 sum_k max|q_k - q0_k| max|y_k|`` at most :data:`GRID_MAX_EXP` (``|q0_k| + max|q_k - q0_k|``
    is ``max|q_k|``): no term underflows."""

    def __init__(self, q, y, rows, layout):
        K = self.K = _softmax_kernels()
        _, _, p, self.tax, self.sax, q0 = layout
        self.p = p
        self.nodes, self.wts = _cheb_nodes(p)
        self.lo_t = np.array([a[0] for a in self.sax])
        self.h_t = np.array([a[1] for a in self.sax])
        self.c_t = np.array([a[2] for a in self.sax], dtype=np.int64)
        self.lo_s = np.array([a[0] for a in self.tax])
        self.h_s = np.array([a[1] for a in self.tax])
        self.c_s = np.array([a[2] for a in self.tax], dtype=np.int64)
        order, self.src_start = K.cell_order(y, np.arange(y.shape[0]), self.lo_t, self.h_t, self.c_t)
        self.ys = np.ascontiguousarray(y[order])   # sorted by cell: the passes read memory in order
        e = self.ys @ q0
        e -= e.max()
        self.w = np.exp(e, out=e)
        qr = q[rows] - q0
        self.tgt_order, self.tgt_start = K.cell_order(qr, np.arange(rows.size), self.lo_s, self.h_s, self.c_s)
        self.qs = np.ascontiguousarray(qr[self.tgt_order])

    def spread(self, workers=2):
        p, c_t, K = self.p, self.c_t, self.K
        self.Q = Q = np.zeros((3, p * c_t[0], p * c_t[1]))
        _by_cells(lambda a, b: K.grid_spread(self.ys, self.w, self.src_start, self.lo_t, self.h_t, c_t, self.nodes,
                                             self.wts, Q, a, b), self.src_start, workers)
        del self.ys, self.w

    def kernels(self):
        """The transform's matrices, one per coordinate: ``E_k[l, m] = e^{S_l T_m - c_l}``, ``c_l = max_m S_l T_m``
        (``S`` the target nodes, ``T`` the source nodes), returned, and the scales ``sc_k`` of the target nodes
        (``c_l`` less its cell's largest, exponentiated), kept for :meth:`gather`."""
        p = self.p
        E, self.sc = [], []
        for k in range(2):
            S, T = _grid_nodes(self.tax[k], self.nodes), _grid_nodes(self.sax[k], self.nodes)
            A = S[:, None] * T[None, :]
            c = A.max(axis=1)
            A -= c[:, None]
            np.exp(A, out=A)
            E.append(A)
            cell_max = c.reshape(-1, p).max(axis=1)
            self.sc.append(np.exp(c - np.repeat(cell_max, p)))
        return E

    def transform(self):
        """``Phi = E_0 Q E_1^T`` (:meth:`kernels`) in the cheaper order (:func:`_transform_orders`)."""
        E = self.kernels()
        Q = self.Q
        left, right = _transform_orders([E[0].shape[0], E[1].shape[0]], [E[0].shape[1], E[1].shape[1]])
        if left <= right:
            self.Phi = np.matmul(np.matmul(E[0], Q), E[1].T)              # (3, G_s1, G_s2)
        else:
            self.Phi = np.matmul(E[0], np.matmul(Q, E[1].T))
        del self.Q

    def gather(self, workers=2):
        """``(values, bad)``: the rows' ``sum_j w_ij y_j / sum_j w_ij`` in the order of ``rows``, and the positions
        whose interpolated ``Z`` was not positive (NaN values)."""
        K, st = self.K, self.tgt_start
        res = np.empty_like(self.qs)
        _by_cells(lambda a, b: K.grid_gather(self.qs, st, self.lo_s, self.h_s, self.c_s, self.nodes, self.wts,
                                             self.sc[0], self.sc[1], self.Phi, res, a, b), st, workers)
        del self.Phi
        vals = np.empty_like(res)
        vals[self.tgt_order] = res
        return vals, np.flatnonzero(~np.isfinite(vals[:, 0]))


def _run_grids(tasks, ex, early=()):
    """Many grids, pass by pass (:class:`_GridJob`): ``tasks`` are ``(size, make)`` or ``(size, make, post)``,
    ``make()`` a grid (or None), ``post(result)`` run on the thread that gathered it, its value returned instead;
    on the threads of the executor ``ex`` the grids are made and spread (a grid to a thread, the largest first),
    then transformed one at a time (BLAS on both cores), and gathered on the threads again. ``early``: futures of
    grids already made and spread (:func:`_made`) on ``ex``, taken first. Returns each grid's ``(values, bad)`` of
    :meth:`_GridJob.gather`, or None, in the order of ``early`` then ``tasks``."""
    idx = sorted(range(len(tasks)), key=lambda k: -tasks[k][0])
    futs = {k: ex.submit(_made, tasks[k][1]) for k in idx}
    jobs = [f.result() for f in early] + [futs[k].result() for k in range(len(tasks))]
    for job in jobs[:len(early)] + [jobs[len(early) + k] for k in idx]:
        if job is not None:
            job.transform()
    posts = [None] * len(early) + [t[2] if len(t) > 2 else None for t in tasks]

    def gathered(k):
        res = None if jobs[k] is None else jobs[k].gather(1)
        return res if posts[k] is None else posts[k](res)

    done = [ex.submit(gathered, k) for k in range(len(jobs))]
    return [f.result() for f in done]


def _made(make):
    """``make()``'s grid, spread on one thread (or None). (Its transform's matrices are made in the transform's
    turn: made here, every cell's would be held at once, 150 MB more at n = 10^6 for no time gained.)"""
    job = make()
    if job is not None:
        job.spread(1)
    return job


def _softmax_kernels():
    K = _fast_kernels.softmax_impl()
    if K is None:
        raise RuntimeError("the fast steps need numba (pip install numba); use method='dense' without it")
    return K


def _grid(x, per_cell=16):
    """Sources sorted into a quadtree over their bounding box: the leaves are the cells of a
    ``2^L x 2^L`` grid with about ``per_cell`` sources each; every box holds its bounding box
    (empty boxes ``lo > hi``). Returns the arguments of the kernel ``pruned_rows`` after ``T``."""
    n = x.shape[0]
    lo, hi = _span(x)
    L = max(1, math.ceil(math.log2(max(1.0, math.sqrt(n / per_cell)))))
    g = 2**L
    span = np.where(hi > lo, hi - lo, 1.0)
    # Morton order (the four children of a box are consecutive), by a counting sort with the leaves' boxes
    order, start, blo, bhi = _softmax_kernels().morton_leaves(x, lo, span, g, L)
    los, his = [blo], [bhi]
    for _ in range(L):
        los.append(los[-1].reshape(-1, 4, 2).min(axis=1))
        his.append(his[-1].reshape(-1, 4, 2).max(axis=1))
    levels = L + 1
    LO = np.full((levels, g * g, 2), np.inf)
    HI = np.full((levels, g * g, 2), -np.inf)
    for lev, (a_, b_) in enumerate(zip(los[::-1], his[::-1])):
        LO[lev, : len(a_)] = a_
        HI[lev, : len(b_)] = b_
    return order, start, LO, HI, 4, levels


SOFTMAX_STATS: dict[str, int] = {"taylor_rows": 0, "grid_rows": 0, "sector_rows": 0, "pruned_rows": 0,
                                  "pruned_terms": 0, "dense_rows": 0, "dense_systems": 0}
"""Counters since import of rows by the expansion, rows by the Chebyshev grid, rows by the pruned sum and the
source terms it summed, rows by dense tiles (the pruned sum would keep most sources), systems sent to the
dense step."""


def _hull_row_max(q, x, cand, hull=None):
    """``max_j <q_i, x_j>`` for tokens in the plane, at the vertex of their hull whose normal cone holds ``q_i``: a
    binary search over the angles of the edges' outward normals (increasing around a counter-clockwise hull),
    then the largest score of that vertex and its two neighbours (a direction within rounding of a cone's
    edge). ``O(n log h)``, against ``O(n c)`` over the ``c`` hull candidates (:func:`_row_max`, its fall-back).
    ``hull``: the tokens' :func:`_hull_normals`, when already made."""
    hull = _hull_normals(x, cand) if hull is None else hull
    if hull is False:
        return _row_max(q, x, cand)
    V, alpha, k0 = hull
    h = np.empty(q.shape[0])
    _softmax_kernels().hull_row_max(np.ascontiguousarray(q), np.arange(q.shape[0]), V, alpha, k0, h)
    return h


def _hull_normals(x, cand):
    """``(V, alpha, k0)``: the hull's vertices counter-clockwise, the angles of its edges' outward normals from the
    least (edge ``k0``) on, increasing; False for a hull qhull cannot make (flat, too few points)."""
    from scipy.spatial import ConvexHull, QhullError
    xc = x[cand]
    try:
        V = xc[ConvexHull(xc).vertices]                          # counter-clockwise in the plane
    except (QhullError, ValueError):
        return False
    e = np.roll(V, -1, axis=0) - V                               # edge k: V[k] -> V[k + 1]
    alpha = np.arctan2(-e[:, 0], e[:, 1])                        # its outward normal (e_1, -e_0)
    k0 = int(np.argmin(alpha))
    return np.ascontiguousarray(V), np.ascontiguousarray(np.roll(alpha, -k0)), k0


def _row_max(q, x, cand, chunk=65536):
    """``max_j <q_i, x_j>`` over the hull candidates (the maximum over all tokens is attained there)."""
    xc = x[cand]
    h = np.empty(q.shape[0])
    for a in range(0, q.shape[0], chunk):
        h[a:a + chunk] = (q[a:a + chunk] @ xc.T).max(axis=1)
    return h


def _softmax_one(x, bx, beta):
    """``m_i - x_i`` (``m_i`` the softmax mean of row i) for one system in the plane, or None (dense)."""
    K = _softmax_kernels()
    q = beta * bx
    c = x.mean(axis=0)
    y = x - c
    r = math.sqrt(float(np.einsum("ij,ij->i", y, y).max()))
    out = np.empty_like(x)
    if r == 0.0:
        out[:] = 0.0
        return out
    qn = np.sqrt(np.einsum("ij,ij->i", q, q))
    rho = qn * r
    q = np.ascontiguousarray(q)
    y = np.ascontiguousarray(y)
    rows, route = _plan_rows(x, y, q, qn, r, out)
    if rows.size:
        p = taylor_order(float(rho[rows].max()))
        M = K.moments(np.ascontiguousarray(y / r), p + 1)
        K.taylor_rows(np.ascontiguousarray(q * r), rows, M, p, out)
        out[rows] = (c - x[rows]) + r * out[rows]
        SOFTMAX_STATS["taylor_rows"] += int(rows.size)
    if route is None:
        return out
    if route.grid_rows is None:
        return None
    g = route.grid_rows
    main = None
    if route.sector.size:     # the sector cells, and the grid with them (made and spread while the cells are cut)
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(2) as ex:
            early = [ex.submit(_made, lambda: _GridJob(q, y, g, route.layout))] if g.size else []
            tasks, finish = route.sector_tasks(route.sector, out)
            results = _run_grids(tasks, ex, early)
        if g.size:
            main, results = results[0], results[1:]
        left = finish(results)
        SOFTMAX_STATS["sector_rows"] += int(route.sector.size - left.size)
        route.pruned = np.concatenate([route.pruned, left])
    if g.size:
        if main is None:
            bad = _grid_rows(q, y, g, route.layout, out)
        else:
            out[g] = main[0]
            bad = g[main[1]]
        out[g] = (c - x[g]) + out[g]
        SOFTMAX_STATS["grid_rows"] += int(g.size - bad.size)
        if bad.size:           # an interpolated normaliser that is not positive: dense tiles for these rows
            if route.candidates() is None:
                return None
            route.dense = np.concatenate([route.dense, bad])
    if route.pruned.size:
        h = route.row_max(route.pruned)
        SOFTMAX_STATS["pruned_terms"] += route.pruned_sum(route.pruned, h, out)
        SOFTMAX_STATS["pruned_rows"] += int(route.pruned.size)
    if route.dense.size:
        d = route.dense
        out[d] = _dense_rows(q[d], x, x[d], route.row_max(d)[d])
        SOFTMAX_STATS["dense_rows"] += int(d.size)
    return out


def _plan_rows(x, y, q, qn, r, out):
    """``(rows of the expansion, route of the others)`` (the route None when there are no others). The
    expansion takes the rows with ``rho_i <= 6``, unless the grid can take them for at most half the
    expansion's estimated cost (its moments of order ``p``, ``O(n p^2)``): the grid's extra cost when its
    targets include them (or, when every row is smooth, the grid's whole cost)."""
    n = x.shape[0]
    rho = qn * r
    smooth = rho <= RHO_TAYLOR
    tay, rest = np.flatnonzero(smooth), np.flatnonzero(~smooth)
    route = _Route(x, y, q, rest, out, qn, r) if rest.size else None
    if not tay.size or (route is not None and (route.grid_rows is None or not route.grid_rows.size)):
        return tay, route
    p = taylor_order(float(rho[tay].max()))
    t_cost = COST_TAYLOR * (n * (p + 2) * (p + 3) / 2 + tay.size * 3 * (p + 1) * (p + 2) / 2)
    ylo, yhi = _span(y) if route is None else route.yspan
    qt = q[tay]
    lo, hi = _span(qt)
    if route is None:
        lay = _grid_layout(lo, hi, ylo, yhi, n, tay.size)
        if lay is not None and lay[0] < 0.5 * t_cost:
            return tay[:0], _Route.grid_only(x, q, tay, lay)
        return tay, None
    g = q[route.grid_rows]
    glo, ghi = _span(g)
    lay = _grid_layout(np.minimum(lo, glo), np.maximum(hi, ghi), ylo, yhi, n,
                       route.grid_rows.size + tay.size)
    if lay is not None and lay[0] - route.layout[0] < 0.5 * t_cost:
        route.cost += lay[0] - route.layout[0]
        route.grid_rows = np.concatenate([route.grid_rows, tay])
        route.layout = lay
        return tay[:0], route
    return tay, route


BANDS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 1.0)
"""The bands of the rows beyond the expansion, by ``max_k |q_ik|`` from the largest (fractions of the rows); thin
at the end of the smallest ``|q|`` too, where a row's cost in the pruned sum grows to ``n``."""
PROBE_PER_BAND = 32


class _Route:
    """Which rows beyond the expansion take the grid, the pruned sum or dense tiles: the rows sorted by
    ``max_k |q_ik|``; the grid takes the rows below a split (its estimated cost from :func:`_grid_layout`), the
    others the pruned sum, or dense tiles in a band whose probe keeps more than ``n / 4`` sources per row (the
    cost of each band from a probe of 32 of its rows, band by band from the sharpest); the split of least
    estimated cost wins. ``grid_rows`` is None when nothing can be done (a flat hull and no grid)."""

    @classmethod
    def grid_only(cls, x, q, rows, lay):
        """The route of ``rows`` all on the grid ``lay``."""
        self = cls.__new__(cls)
        self._lazy(x, q)
        self._all_grid(rows, lay)
        return self

    def _lazy(self, x, q, qn=None, r=None):
        self.x, self.q = x, q
        n = x.shape[0]
        self.T = math.log(n) + PRUNE_EXTRA
        self.cand: np.ndarray | None = None
        self._tree = None
        self._size: float | None = r            # the tokens' radius about their mean, |q_i|: given or computed
        self._mag: np.ndarray | None = qn
        self._hull = None
        self.h = np.full(n, np.nan)

    def _all_grid(self, rows, lay):
        self.grid_rows, self.layout, self.cost = rows, lay, lay[0]
        self.pruned = self.dense = self.sector = np.zeros(0, dtype=np.int64)
        self.pruned_terms = 0

    def __init__(self, x, y, q, rows, out, qn=None, r=None):
        self._lazy(x, q, qn, r)
        n = x.shape[0]
        m = rows.size
        qr = q[rows]
        self.yspan = ylo, yhi = _span(y)
        lay = _grid_layout(*_span(qr), ylo, yhi, n, m)
        if lay is not None and lay[0] <= COST_SETUP * n:   # the grid for all: cheaper than the pruned sum's setup
            self._all_grid(rows, lay)
            return
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(1) as ex:    # the hull candidates beside the quadtree (compiled passes, no GIL)
            cand = ex.submit(self.candidates)
            self.tree()
            cand.result()
        # the bands: the rows whose rank by -max_k |q_ik| falls between two cuts (thresholds by a partition, the
        # rows grouped by band in their own order: O(m)); tied rows at a threshold go to the later band
        key = -np.maximum(np.abs(qr[:, 0]), np.abs(qr[:, 1]))
        inner = sorted({int(round(f * m)) for f in BANDS} - {0, m})
        band = np.searchsorted(np.partition(key, inner)[inner], key, side="right") if inner else np.zeros(m, int)
        srt = rows[np.argsort(band.astype(np.uint8), kind="stable")]
        cuts = sorted({0, *np.cumsum(np.bincount(band, minlength=len(inner) + 1)).tolist()})
        qs = q[srt]
        lo = np.minimum.accumulate(np.minimum.reduceat(qs, cuts[:-1], axis=0)[::-1], axis=0)[::-1]
        hi = np.maximum.accumulate(np.maximum.reduceat(qs, cuts[:-1], axis=0)[::-1], axis=0)[::-1]
        at = {c: k for k, c in enumerate(cuts[:-1])}

        def grid(b):
            if b >= m:
                return 0.0, None
            lay = _grid_layout(lo[at[b]], hi[at[b]], ylo, yhi, n, m - b)
            return (math.inf, None) if lay is None else (lay[0], lay)

        best_cost, best = grid(0)[0], 0
        kinds: list[str] = []
        band_terms: list[float] = []
        costs: list[float] = []
        spent = 0.0
        rng = np.random.default_rng(0)
        for k in range(len(cuts) - 1):
            if spent >= best_cost:
                break
            band = srt[cuts[k]:cuts[k + 1]]
            if self.candidates() is None:
                break
            probe = band[rng.permutation(band.size)[:PROBE_PER_BAND]] if band.size > PROBE_PER_BAND else band
            self.row_max(probe)
            terms, boxes = _softmax_kernels().pruned_rows(q, x, probe, self.h, self.T, *self.tree(), out)
            mean = terms / probe.size
            per_row = (COST_TERM * terms + COST_BOX * boxes) / probe.size
            kind = "dense" if mean > n / 4 else "pruned"
            kinds.append(kind)
            band_terms.append(mean * band.size)
            costs.append(band.size * (COST_DENSE * n if kind == "dense" else per_row))
            spent += costs[-1]
            total = spent + grid(cuts[k + 1])[0]
            if total < best_cost:
                best_cost, best = total, k + 1
        if not math.isfinite(best_cost):
            self.grid_rows = None
            return
        # the pruned bands dearer per row than COST_SECTOR go together to the sector grids if their estimate wins
        wide = [k for k in range(best) if kinds[k] == "pruned" and costs[k] > COST_SECTOR * (cuts[k + 1] - cuts[k])]
        if wide:
            rows_s = np.concatenate([srt[cuts[k]:cuts[k + 1]] for k in wide])
            est = self._sector_estimate(rows_s, sum(band_terms[k] for k in wide) / rows_s.size)
            if est < sum(costs[k] for k in wide):
                for k in wide:
                    kinds[k] = "sector"
                best_cost += est - sum(costs[k] for k in wide)
        split = cuts[best]
        self.layout = grid(split)[1]
        self.grid_rows = srt[split:]
        self.pruned = np.concatenate([np.zeros(0, dtype=np.int64)]
                                     + [srt[cuts[k]:cuts[k + 1]] for k in range(best) if kinds[k] == "pruned"])
        self.dense = np.concatenate([np.zeros(0, dtype=np.int64)]
                                    + [srt[cuts[k]:cuts[k + 1]] for k in range(best) if kinds[k] == "dense"])
        self.sector = np.concatenate([np.zeros(0, dtype=np.int64)]
                                     + [srt[cuts[k]:cuts[k + 1]] for k in range(best) if kinds[k] == "sector"])
        self.cost = best_cost
        self.pruned_terms = sum(band_terms[k] for k in range(best) if kinds[k] == "pruned")

    def candidates(self):
        if self.cand is None:
            self.cand = _candidates(self.x, 0.0)[0]
        return self.cand

    def tree(self):
        """The quadtree of :func:`_grid` with the tokens themselves sorted by cell (the pruned sum's sources)."""
        if self._tree is None:
            order, *rest = _grid(self.x)
            self._tree = (np.ascontiguousarray(self.x[order]), *rest)
            self._order = order
        return self._tree

    def pruned_sum(self, rows, h, out, workers=2, per_worker=20000):
        """The pruned sum of ``rows`` into ``out``, the rows taken in the order of their own tokens' cells (so
        that consecutive rows walk nearly the same boxes), ``PRUNE_GROUP`` at a time through the tree, and
        split between ``workers`` threads (the compiled pass releases the GIL; each row writes its own
        ``out[i]``, bitwise the same whatever the order, the groups and the split). Returns the number of
        source terms summed."""
        tree = self.tree()
        chosen = np.zeros(self._order.size, dtype=bool)
        chosen[rows] = True
        rows = self._order[chosen[self._order]]
        K = _softmax_kernels()
        parts = max(1, min(workers, rows.size // per_worker))
        if parts == 1:
            return int(K.pruned_groups(self.q, self.x, rows, PRUNE_GROUP, h, self.T, *tree, out)[0])
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(parts) as ex:
            done = list(ex.map(lambda r: K.pruned_groups(self.q, self.x, r, PRUNE_GROUP, h, self.T, *tree, out),
                               np.array_split(rows, parts)))
        return int(sum(t for t, _ in done))

    def _norms(self):
        """``|q_i|`` for every token (once per route)."""
        if self._mag is None:
            self._mag = np.sqrt(np.einsum("ij,ij->i", self.q, self.q))
        return self._mag

    def _radius(self):
        """The tokens' radius about their mean (once per route)."""
        if self._size is None:
            dev = self.x - self.x.mean(axis=0)
            self._size = math.sqrt(float(np.einsum("ij,ij->i", dev, dev).max()))
        return self._size

    def _sector_estimate(self, rows, mean):
        """Seconds of the sector grids for ``rows`` whose caps keep ``mean`` sources on average (the probes'):
        cells from the octaves of ``|q|`` and the sectors of :meth:`sector_tasks`, each spreading ``SECTOR_UNION``
        caps and paying a transform; every row interpolated."""
        mag = self._norms()[rows]
        octaves = int(np.floor(np.log2(mag.max() / mag.min()))) + 1
        cells = octaves * _sectors(float(mag.max()), self._radius(), self.T + 1.0)
        return (COST_NODE * SECTOR_P**2 * (rows.size + SECTOR_UNION * mean * cells)
                + COST_SECTOR_CELL * min(cells, rows.size))

    def sector_tasks(self, rows, out):
        """The rows by the sector grids (:func:`softmax_step`): ``(tasks, finish)``, the cells as tasks of
        :func:`_run_grids`, each writing its rows' ``m_i - x_i`` into ``out`` once gathered, and ``finish(results)``,
        the rows left to the pruned sum (a cell without a feasible grid, an interpolated normaliser that is not
        positive)."""
        q, T1 = self.q, self.T + 1.0
        qr = q[rows]
        mag = self._norms()[rows]
        ang = np.arctan2(qr[:, 1], qr[:, 0])
        size = self._radius()
        band = np.floor(SECTOR_BANDS * np.log2(mag / mag.min())).astype(np.int64)
        # the cells: the rows grouped by (band, sector) in their own order (counting sorts on small keys)
        counts = np.bincount(band)
        full_b = counts > 0
        top = np.zeros(counts.size)
        top[full_b] = np.maximum.reduceat(mag[_small_argsort(band, counts.size)],
                                          np.concatenate([[0], np.cumsum(counts)[:-1]])[full_b])
        nsec = np.array([_sectors(float(t), size, T1) if f else 1 for t, f in zip(top, full_b)])
        ns = nsec[band]
        sec = np.minimum(((ang + math.pi) * (ns / (2 * math.pi))).astype(np.int64), ns - 1)
        off = np.concatenate([[0], np.cumsum(nsec)])
        key = off[band] + sec
        order = _small_argsort(key, int(off[-1]))
        kstart = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=int(off[-1])))])
        cells = []
        for k in np.flatnonzero(np.diff(kstart)):
            b = int(np.searchsorted(off, k, side="right")) - 1
            c = int(k - off[b])
            cells.append((order[kstart[k]:kstart[k + 1]], -math.pi + (c + 0.5) * (2 * math.pi / int(nsec[b]))))
        xs, start, LO, HI, _, levels = self.tree()
        leaf_lo, leaf_hi = LO[levels - 1], HI[levels - 1]
        full = leaf_lo[:, 0] <= leaf_hi[:, 0]
        self.hull()                        # the hull's normals, made here once (the cells' threads read them)
        tasks = []
        for loc, theta in cells:
            R = np.array([[math.cos(theta), math.sin(theta)], [-math.sin(theta), math.cos(theta)]])
            slot: dict = {}

            def make(loc=loc, R=R, slot=slot):
                # the sources any row of the cell needs, turned to the sector's frame, about their box's centre
                qc, mc = qr[loc], mag[loc]
                low = float(((self.max_scores(qc) - T1) / mc).min())   # keep x for row i iff <u_i, x> >= low_i
                xr = _sector_sources(qc / mc[:, None], low, R, xs, start, leaf_lo, leaf_hi, full)[1]
                if xr.shape[0] == 0:
                    return None
                slot["ctr"] = ctr = 0.5 * np.add(*_span(xr))
                y = np.ascontiguousarray(xr - ctr)
                qt = np.ascontiguousarray(qc @ R.T)
                lay = _grid_layout(*_span(qt), *_span(y), y.shape[0], qt.shape[0])
                return None if lay is None else _GridJob(qt, y, np.arange(qt.shape[0]), lay)

            def post(res, rr=rows[loc], R=R, slot=slot):
                # the cell's rows back to the tokens' frame, into ``out``; the rows left to the pruned sum
                if res is None:
                    return rr
                vals, bad = res
                out[rr] = (vals + slot["ctr"]) @ R - self.x[rr]
                return rr[bad]

            tasks.append((loc.size, make, post))

        def finish(results):
            return np.concatenate([np.zeros(0, dtype=np.int64), *results])

        return tasks, finish

    def hull(self):
        """The tokens' :func:`_hull_normals` (once per route)."""
        if self._hull is None:
            self._hull = _hull_normals(self.x, self.candidates())
        return self._hull

    def max_scores(self, q):
        """``max_j <q_i, x_j>`` for the rows of ``q`` (not kept; safe on several threads once the hull is made)."""
        return _hull_row_max(q, self.x, self.candidates(), self.hull())

    def row_max(self, rows):
        """``h`` with the rows' largest scores filled in (over the hull candidates; in place, by row index)."""
        todo = rows[np.isnan(self.h[rows])]
        if todo.size:
            if self.hull() is False:
                self.h[todo] = _row_max(self.q[todo], self.x, self.candidates())
            else:
                _softmax_kernels().hull_row_max(self.q, todo, *self.hull(), self.h)
        return self.h


PRUNE_GROUP = 16   # rows of the pruned sum that walk the tree together (consecutive in the order of their cells)
SECTOR_MAX = 512   # sectors of directions per band of |q|, at most
SECTOR_BANDS = 1.0  # bands of |q| per octave in the sector grids


def _small_argsort(key, bound):
    """A stable argsort of non-negative integer keys below ``bound`` (numpy's radix sort when they fit in 16 bits)."""
    return np.argsort(key.astype(np.uint16) if bound <= 2**16 else key, kind="stable")


def _sectors(top, size, T1):
    """Sectors of directions for rows of ``|q|`` up to ``top`` over tokens of radius ``size``: each of half-width
    about half a cap's angular half-width ``sqrt(2 T1 / (top size))``, between 4 and ``SECTOR_MAX``."""
    half = 0.5 * math.sqrt(2.0 * T1 / max(top * size, 1e-300))
    return int(min(SECTOR_MAX, max(4, math.ceil(math.pi / half))))


def _sector_sources(uc, low, R, xs, start, leaf_lo, leaf_hi, full):
    """``(indices into xs, their tokens turned by R)``: the sources ``x`` with ``<u, x> >= low`` for some ``u`` in the
    box of the directions ``uc`` (a bilinear form: largest at a corner of the box), first over the quadtree's
    leaf boxes ``leaf_lo, leaf_hi`` (``full``: not empty), then per source in the turned frame (a tighter box)."""
    ulo, uhi = _span(uc)
    ub = sum(np.maximum(np.maximum(ulo[k] * leaf_lo[:, k], ulo[k] * leaf_hi[:, k]),
                        np.maximum(uhi[k] * leaf_lo[:, k], uhi[k] * leaf_hi[:, k])) for k in range(2))
    keep = np.flatnonzero(full & (ub >= low))
    total = int((start[keep + 1] - start[keep]).sum())
    idx, xr = np.empty(total, dtype=np.int64), np.empty((total, 2))
    ur = uc @ R.T
    rlo, rhi = _span(ur)
    m = _softmax_kernels().sector_select(xs, start, keep, np.ascontiguousarray(R), rlo, rhi, float(low), idx, xr)
    return idx[:m], xr[:m]


def _dense_rows(q, x, xr, h, rows=512, keys=16384):
    """``sum_j w_j (x_j - xr_i) / sum_j w_j``, ``w_j = e^{<q_i, x_j> - h_i}``, over all sources: BLAS tiles of
    ``rows x keys`` scores (memory ``O(rows keys)``), ``h_i`` the row's maximum (no overflow, no shift needed)."""
    out = np.empty_like(xr)
    xa = np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)   # [x_j, 1]: numerator and normaliser together
    for a in range(0, q.shape[0], rows):
        qa, ha = q[a:a + rows], h[a:a + rows, None]
        acc = np.zeros((qa.shape[0], 3))
        for b in range(0, x.shape[0], keys):
            W = qa @ x[b:b + keys].T
            W -= ha
            np.exp(W, out=W)
            acc += W @ xa[b:b + keys]
        out[a:a + rows] = acc[:, :2] / acc[:, 2:] - xr[a:a + rows]
    return out


def softmax_step(x: npt.ArrayLike, gamma: float, beta: float, B: npt.ArrayLike | None = None) -> np.ndarray:
    """One step of (SA-beta), ``x_i + gamma (m_i - x_i)`` with ``m_i = sum_j A_ij x_j``, for tokens in the plane.

    Each row takes one of four sums, each with a proved error (see the section below):

    * **expansion** where ``rho_i = beta |B x_i| r <= 6`` (``r = max_j |x_j - c|``, ``c`` the centroid): with
      ``y_j = x_j - c``, ``m_i = c + sum_j e^{<q_i, y_j>} y_j / sum_j e^{<q_i, y_j>}`` (``q_i = beta B x_i``), and
      ``e^t`` is replaced by its Taylor polynomial of order ``p`` in ``t = <q_i, y_j>``, so the sums are
      ``O(p^2)`` moments of the sources, made once. Each term's error is at most
      ``rho^{p+1} e^rho / (p+1)!`` while, by Jensen's inequality about the centroid, ``sum_j e^{<q, y_j>} >= n``:
      ``|m_fast - m| <= 2.01 rho^{p+1} e^rho / (p+1)! r <= 1e-10 r`` for the ``p`` of :func:`taylor_order`;
    * **Chebyshev grid** where the kernel is neither smooth nor sharp (or where it is cheaper than the
      expansion): ``e^{<q, y>} = prod_k e^{q_k y_k}`` is separable for any ``B`` (targets ``q_i = beta B x_i``,
      sources ``y_j = x_j - c``), so it is interpolated on a tensor grid, per coordinate in cells with ``p``
      Chebyshev nodes, about the centre ``q0`` of the targets' box (``e^{<q0, y_j>}`` is a weight of source
      ``j``, ``e^{<q_i - q0, y_j>}`` is interpolated): target cells of half-width ``h_s`` with
      ``max|y_k| h_s <= a``, source cells of half-width ``h_t`` with ``max|q_k - q0_k| h_t <= a``. Each source
      spreads ``(1, y_j)`` times its weight to the ``p^2`` nodes of its cell by its Lagrange weights; the grid
      sums are two dense products per right-hand side with
      ``E_k[l, m] = e^{S_l T_m - c_l}`` (``c_l`` the row's largest exponent, BLAS); each target interpolates
      them in its cell. Per coordinate the relative error of every term is at most
      ``e(a) + Lambda_p e^{2a} e(a)`` with ``e(a) = 4 e^a sum_{k >= p} I_k(a)`` (the Chebyshev interpolation
      error of ``e^{a u}`` on ``[-1, 1]`` relative to its value, ``I_k(a) <= (a/2)^k / k! e^{a^2/(4(k+1))}``)
      and ``Lambda_p <= 1 + (2/pi) log(p + 1)`` the Lebesgue constant: the first term interpolates in the
      target, the second the source's interpolation error carried through the target's interpolation
      (which can scale a value by ``e^{2a}`` across a cell). With ``eps = (1 + eps_1)(1 + eps_2) - 1``,
      ``|Z_fast - Z| <= eps Z`` (positive terms) and ``|N_fast - N| <= eps sum_j w_ij |y_j| <= eps r Z``, so
      ``|m_fast - m| <= 2 eps r / (1 - eps)``, held below ``GRID_TOL r = 1e-9 r`` by the ``p`` of :func:`grid_order`
      (:func:`grid_error_bound`). The rate ``a`` of least estimated cost is taken; the cost is
      ``O(n p^2 + G^3)`` with ``G`` about ``p (q range) (y range) / (4 a)`` nodes per coordinate, so the grid
      is for ``beta R^2`` up to a few hundred; it is not used where ``2 sum_k max|q_k| max|y_k| > 700``
      (the scaled products could underflow) or ``G > 2048``. Memory ``O(n + G^2)``;
    * **pruned sum** elsewhere: ``w_ij = e^{<q_i, x_j> - h_i}`` with ``h_i = max_j <q_i, x_j>`` found among the
      hull candidates, over the sources of the quadtree cells whose bounding box allows a term of at least
      ``e^{-T}``, ``T = log n + 25``. The terms dropped weigh at most ``n e^{-T} = e^{-25}`` of the row's
      total, so ``|m_fast - m| <= 2 e^{-25} diam <= 1.1e-10 r``. Its cost is the number of sources in the
      cells it keeps: small where the kernel is sharp (a thin cap of the cloud), up to ``n`` per row
      where it is neither sharp nor smooth. Its rows are taken in the order of their own tokens' cells (neighbours
      walk nearly the same boxes), 16 at a time through the tree (the boxes any of them can keep, then each
      row's own test on those leaves), and split between two threads; each row's bits do not depend on any
      of this (``_fast_kernels.pruned_groups``). Where
      it keeps more than ``n / 4`` sources per row the rows are summed over all sources in BLAS tiles of
      ``512 x 16384`` scores (the **dense-tile fallback**: exact, ``O(n)`` memory, ``O(n)`` per row).
    * **sector grids** where the pruned sum keeps many sources per row (a uniform disk at ``beta = 1000``: caps
      of about 1.3 % of the tokens): the rows are cut into octaves of ``|q_i|`` and each octave into sectors of
      directions (``_sectors``). Since ``h_i = |q_i| max_j <u_i, x_j>`` (``u_i = q_i / |q_i|``), row ``i`` needs a
      source only if ``<u_i, x> >= (h_i - T - 1) / |q_i|``; a cell keeps the sources for which the largest
      ``<u, x>`` over its box of directions (a bilinear form: at a corner) reaches the least of these bounds,
      first over the quadtree's leaves, then per source in the frame turned to the sector's direction
      (``_sector_sources``), and sums them by the Chebyshev grid above in that frame
      (``e^{<q, x>} = e^{<Rq, Rx>}``). Each term dropped is below ``e^{-(T+1)}`` of its row's largest, and the grid's
      bound holds on the kept sources, whose radius about their box's centre is at most ``diam <= 2 r``:
      ``|m_fast - m| <= 2 e^{-26} diam + 2 GRID_TOL r <= 2.1e-9 r``. A cell whose grid is not feasible (the
      exponent guard, the node cap) or whose interpolated normaliser is not positive goes to the pruned sum.
      At fixed ``beta`` the cells do not multiply with ``n`` and the caps deepen like ``T = log n + 25``: ``O(n p^2)``
      up to powers of ``log n``, plus a transform per cell.

    **Routing.** The rows beyond the expansion are sorted by ``max_k |q_ik|``; the grid takes those below a
    split, the pruned sum (or dense tiles) those above, and the split of least estimated cost (a rough
    model of the grid's work and a probe of 32 rows per band of the pruned sum's terms and boxes, from
    the sharpest band down) is taken: on a Gaussian cloud at ``beta = 10`` the sparse rim goes to the
    pruned sum and the rest to the grid. The bands (``fast.BANDS``) are thin at both ends: at ``beta = 100``
    the 0.5 % of the rows nearest the origin, whose caps hold most of the cloud, go to the grid (bands of
    a quarter of the rows there sent them to the pruned sum: at ``n = 10^6``, 32 CPU-s instead of 5).
    The pruned bands dearer than ``COST_SECTOR`` a row go together to the sector grids when the estimate of
    their cells (``_Route._sector_estimate``) is below the pruned sum's: a disk at ``beta = 1000``,
    ``n = 10^6``, takes about 3.7 CPU-s (2.1 to 2.4 s on two cores) instead of 90 (46 s). The grid and the
    sector cells run pass by pass (``_run_grids``): the cells' sources and spreading on
    two threads, a cell to a thread, then the transforms one at a time (BLAS on both cores), then the
    interpolation on the threads again; the cells' node grids are held between the passes (the step's peak
    memory at ``n = 10^6``: about 480 MB above the tokens', against 270 MB one cell at a time).
    The routing is deterministic (no timing); its choice changes the
    result only within the bounds above. :func:`softmax_plan` reports it.

    All four errors are below ``STEP_TOL r = 1e-8 r`` (the largest, the sector grids', by a factor of 4.7),
    which the tests check against the dense float64 step (rounding included) over beta in [0.1, 1000] and
    random, clustered, coincident and near-origin states. Memory ``O(n)``. Only ``d = 2``; other dimensions,
    ``beta = 0`` and scores that need rescaling take the dense step.

    Examples
    --------
    >>> from attention_fw.model import dynamics
    >>> x = np.random.default_rng(0).uniform(-1, 1, size=(3000, 2))
    >>> bool(np.abs(softmax_step(x, 0.5, 30.0) - dynamics.softmax_step(x, 0.5, 30.0)).max() < 1e-9)
    True
    """
    gamma = _gamma(gamma)
    beta = _beta_check(beta, allow_inf=False)
    x = chk.tokens("x", x)
    Bk: np.ndarray | None = key_query(B, x.shape)
    d = x.shape[-1]
    xs, b, c = _fit_scores(x, Bk, beta)
    if d != 2 or beta == 0.0 or c != 1.0 or b != beta or not available():
        SOFTMAX_STATS["dense_systems"] += 1
        return _dense_softmax(x, gamma, beta, Bk)
    x3 = np.ascontiguousarray(x.reshape((-1,) + x.shape[-2:]))
    bx3 = x3 if Bk is None else np.ascontiguousarray(x3 @ _t(Bk))
    out = np.empty(x3.shape)
    for r in range(x3.shape[0]):   # a loop over systems (each of many tokens)
        u = _softmax_one(x3[r], np.ascontiguousarray(bx3[r]), beta)
        if u is None:
            SOFTMAX_STATS["dense_systems"] += 1
            Br = None if Bk is None else (Bk if Bk.ndim == 2 else Bk[r])
            out[r] = _dense_softmax(x3[r], gamma, beta, Br)
        else:
            out[r] = x3[r] + gamma * u
    return out.reshape(x.shape)


def _dense_softmax(x, gamma, beta, B):
    return _DENSE_STEPS["softmax"](x, gamma, beta, B, method="dense")


def softmax_plan(x: npt.ArrayLike, beta: float, B: npt.ArrayLike | None = None) -> dict[str, float]:
    """What :func:`softmax_step` would do for one system in the plane, without doing it: the rows by the
    expansion, by the Chebyshev grid, by the sector grids (``sector_rows``; a cell the grids cannot take goes to
    the pruned sum when the step runs), by the pruned sum and by dense tiles, the source terms per pruned row
    (from the probes of the routing), the grid's nodes per cell ``grid_p`` and largest number of nodes per
    coordinate ``grid_nodes``, and the routing's estimated seconds ``est_seconds`` beyond the expansion. For
    benchmarks: a row that goes to dense tiles costs ``O(n)``.

    Examples
    --------
    >>> x = np.random.default_rng(0).uniform(-1, 1, size=(5000, 2))
    >>> softmax_plan(x, 0.5)["taylor_rows"]
    5000
    >>> softmax_plan(x, 20.0)["grid_rows"] > 4000
    True
    """
    beta = _beta_check(beta, allow_inf=False)
    x = np.ascontiguousarray(chk.tokens("x", x, batched_ok=False), dtype=float)
    if x.shape[1] != 2:
        raise ValueError(f"x must hold tokens in the plane (d = 2), got d = {x.shape[1]}")
    Bk = key_query(B, x.shape)
    n = x.shape[0]
    q = np.ascontiguousarray(beta * (x if Bk is None else x @ _t(Bk)))
    y = np.ascontiguousarray(x - x.mean(axis=0))
    r = math.sqrt(float(np.einsum("ij,ij->i", y, y).max()))
    plan = {"n": n, "taylor_rows": n, "grid_rows": 0, "sector_rows": 0, "pruned_rows": 0, "dense_rows": 0,
            "terms_per_pruned_row": 0.0, "grid_p": 0, "grid_nodes": 0, "est_seconds": 0.0}
    if r == 0.0:
        return plan
    tay, route = _plan_rows(x, y, q, np.sqrt(np.einsum("ij,ij->i", q, q)), r, np.empty_like(x))
    plan["taylor_rows"] = int(tay.size)
    if route is None:
        return plan
    if route.grid_rows is None:
        plan["dense_rows"] = n - int(tay.size)
        return plan
    plan.update(grid_rows=int(route.grid_rows.size), sector_rows=int(route.sector.size), pruned_rows=int(route.pruned.size),
                dense_rows=int(route.dense.size), est_seconds=float(route.cost))
    if route.pruned.size:
        plan["terms_per_pruned_row"] = route.pruned_terms / route.pruned.size
    if route.grid_rows.size:
        _, _, p, tax, sax, _ = route.layout
        plan["grid_p"] = p
        plan["grid_nodes"] = p * max(a[2] for a in tax + sax)
    return plan


# ----------------------------------------------------------------------------- the chain (SAP)
SAP_DIMS = (1, 2, 3)
SAP_LEAF = 8        # tokens per leaf box of the tree (at most; more when they coincide)
SAP_OMEGA = 2.0     # the envelope is refined until its excess is at most twice its lower bound

SAP_STATS: dict[str, int] = {"fast_systems": 0, "dense_systems": 0, "rows": 0, "opened": 0, "elements": 0,
                             "proposals": 0}
"""Counters since import of systems stepped by the fast sampler and sent to the dense step, rows drawn, boxes
opened, envelope elements (boxes and single tokens) and proposals (at least one per row)."""


def _dense_sap(x, gamma, beta, B, rng, return_choice):
    return _DENSE_STEPS["sap"](x, gamma, beta, B, rng=rng, return_choice=return_choice, method="dense")


def sap_step(x: npt.ArrayLike, gamma: float, beta: float, B: npt.ArrayLike | None = None, *,
             rng: chk.SeedLike, return_choice: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """One step of the chain (SAP): each token independently picks ``J_i = j`` with probability
    ``A_ij = e^{beta <B x_i, x_j>} / sum_k e^{beta <B x_i, x_k>}`` and moves to ``x_i + gamma (x_J - x_i)``;
    for tokens in ``d <= 3`` at a cost per row far below ``n``, **exact in law**.

    **The sampler: rejection from an envelope of boxes.** The tokens are sorted once per step into a
    binary tree of boxes (each box split at the midpoint of its widest side, down to 8 tokens or a box
    of zero width). For row ``i`` with ``q = beta B x_i`` and scores ``L_j = <q, x_j>``, a box ``v`` with
    ``c_v`` tokens has the bound ``u_v = max over the box of <q, y>`` (from its corners, raised by four
    roundings of a score) and the envelope weight ``c_v e^{u_v}``. The row first finds its largest
    score ``h`` (by branch and bound over the boxes; over the hull candidates, by BLAS, for the rows
    whose kernel is smooth, ``|q| diam <= 20``), then refines a frontier of boxes (a partition of all
    the tokens) best-first, opening the box whose envelope exceeds its lower bound ``c_v e^{u_v - span_v}``
    the most, and a leaf into its single tokens (weight ``e^{L_j}``, exact), until the envelope's total
    excess is at most twice its lower bound (a smooth row: a few boxes, often the root alone).
    Then, repeatedly: pick a frontier element with probability
    proportional to its envelope weight, a token ``j`` uniformly in it, and accept ``j`` with probability
    ``e^{L_j - u_v}``. A token of box ``v`` is proposed with probability ``e^{u_v} / E`` (``E`` the
    envelope's total) and accepted with ``e^{L_j - u_v}``, so each round returns ``j`` with probability
    ``e^{L_j} / E``, proportional to ``A_ij``; the rounds are independent, so the accepted ``j`` has law
    exactly ``A_i.`` (the rejection argument), whatever the envelope. The envelope only sets the cost:
    at most about 3 rounds per row, and boxes far from the row's direction are never opened. (The lazy
    Gumbel-max sampler is the same argument in other clothes; rejection needs no truncated Gumbels.)
    The cost is the boxes opened: a few where the kernel is smooth, tens to about a hundred on a
    uniform disk at any beta; most on the sparse rim of a Gaussian cloud at large beta, whose
    axis-aligned leaf boxes reach the row's supporting line far from their tokens (hundreds per row,
    :data:`SAP_STATS` counts them; ``tools/bench_manytok.py`` reports them).

    **Nothing is dropped.** Every token belongs to one frontier element, however small its weight. The
    weights are handled as logarithms: the elements are grouped by log-weight in steps of 4, the group
    is chosen by walking down the groups with a Bernoulli draw per group of probability ``e^{-t}`` given
    by its ``-log`` (``t = log(1 + mass of the group / mass of the lighter groups)``), each drawn as
    Bernoulli(``e^{-8}``) draws for the whole chunks of ``t`` and one for the rest (exact to a relative
    ``3e-13`` however small ``e^{-t}``); the element within a group, by inverting the group's
    cumulative weights (within a factor ``e^4`` of each other); the acceptance likewise from its ``-log``.
    So a pick of probability ``1e-30`` (or ``1e-300``) keeps that probability; a 53-bit uniform alone
    could not draw it. The 64th group holds every element lighter than ``e^{-252}`` of the heaviest and,
    when reached, picks among them by the same walk, element by element.

    Randomness: row ``i`` draws from its own xoshiro256** generator seeded from one 64-bit word drawn
    from ``rng`` per system and from ``i``, so the same seed gives the same picks. Memory ``O(n)``.
    ``d`` not in 1, 2, 3, or numba missing: the dense step (counted in :data:`SAP_STATS`). Scores that
    need rescaling are drawn from the rescaled tokens (the same logits, ``_scaling``).

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(3000, 2))
    >>> y, J = sap_step(x, 0.5, 10.0, rng=1, return_choice=True)
    >>> bool(np.allclose(y, x + 0.5 * (x[J] - x)))
    True
    >>> bool(np.array_equal(J, sap_step(x, 0.5, 10.0, rng=1, return_choice=True)[1]))   # same seed
    True
    """
    gamma = _gamma(gamma)
    beta = _beta_check(beta, allow_inf=False)
    rng = chk.rng("rng", rng)
    x = chk.tokens("x", x)
    Bk: np.ndarray | None = key_query(B, x.shape)
    d = x.shape[-1]
    K = _fast_kernels.sap_impl()
    if d not in SAP_DIMS or K is None:
        SAP_STATS["dense_systems"] += int(np.prod(x.shape[:-2], dtype=np.int64))
        return _dense_sap(x, gamma, beta, Bk, rng, return_choice)
    xs, b, _ = _fit_scores(x, Bk, beta)      # the same logits b <B xs_i, xs_j> = beta <B x_i, x_j>
    x3 = np.ascontiguousarray(x.reshape((-1,) + x.shape[-2:]))
    xs3 = np.ascontiguousarray(xs.reshape(x3.shape))
    n = x3.shape[1]
    J3 = np.empty(x3.shape[:2], dtype=np.int64)
    counts = np.zeros(3, dtype=np.int64)
    for r in range(x3.shape[0]):      # a loop over systems (each of many tokens), not over tokens
        tree = _sap_tree(xs3[r])
        xt = tree[1]
        Br = None if Bk is None else (Bk if Bk.ndim == 2 else Bk[r])
        q = b * (xt if Br is None else xt @ _t(Br))       # the queries in the tree's order, row i: perm[i]
        J3[r, tree[0]] = _sap_picks(tree, q, tree[0], rng.integers(0, 2**64, dtype=np.uint64), counts,
                                    _smooth_row_max(xs3[r], q, tree))
    SAP_STATS["fast_systems"] += x3.shape[0]
    SAP_STATS["rows"] += x3.shape[0] * n
    for key, c in zip(("opened", "elements", "proposals"), counts):
        SAP_STATS[key] += int(c)
    target = np.take_along_axis(x3, J3[..., None], axis=-2)
    out = (x3 + gamma * (target - x3)).reshape(x.shape)
    J = J3.reshape(x.shape[:-1])
    return (out, J) if return_choice else out


def _sap_tree(x):
    """The tree of :func:`sap_step` over the tokens ``x`` (n, d): ``(perm, x[perm], boxes...)``."""
    K = _fast_kernels.sap_impl()
    perm, start, end, lo, hi, left, right = K.kdtree(np.ascontiguousarray(x, dtype=float), SAP_LEAF)
    return (perm, np.ascontiguousarray(x[perm]), start, end, lo, hi, left, right,
            np.log((end - start).astype(float)))


def _sap_picks(tree, q, rowid, seed, counts, h=None):
    """Original indices of the picks of the queries ``q`` (m, d), row ``t`` seeded by ``seed`` and ``rowid[t]``,
    among the tokens of ``tree`` (:func:`_sap_tree`); ``h`` the rows' largest scores if known (else NaN:
    branch and bound)."""
    perm, xt, start, end, lo, hi, left, right, lcnt = tree
    pos = np.empty(q.shape[0], dtype=np.int64)
    h = np.full(q.shape[0], np.nan) if h is None else np.ascontiguousarray(h, dtype=float)
    _fast_kernels.sap_impl().sap_rows(np.ascontiguousarray(q, dtype=float), xt, h, start, end, lo, hi, left, right,
                                      lcnt, np.ascontiguousarray(rowid, dtype=np.int64), np.uint64(seed),
                                      SAP_OMEGA, pos, counts)
    return perm[pos]


SAP_SMOOTH = 20.0   # rows with |q_i| (diameter of the tokens' box) <= 20 start from the root with their maximum


def _smooth_row_max(x, q, tree):
    """The largest score of the rows whose kernel is smooth over the tokens (``|q_i|`` times the diagonal of
    their box at most ``SAP_SMOOTH``), over the hull candidates; NaN for the others (and for all when the
    hull is flat), which find it by branch and bound. The smooth rows' envelope is then refined from the
    root (a few boxes), the others' from the boxes met on the way to their maximum."""
    h = np.full(q.shape[0], np.nan)
    lo, hi = tree[4][0], tree[5][0]
    smooth = np.sqrt(np.einsum("ij,ij->i", q, q)) * float(np.linalg.norm(hi - lo)) <= SAP_SMOOTH
    if smooth.any():
        cand, _ = _candidates(x, 0.0)
        if cand is not None:
            h[smooth] = _row_max(q[smooth], x, cand)
    return h
