"""Steps whose cost grows like ``n``: (SA-inf) through the hull, (SA-beta) and (SAP) through a pruned sum.

The dense steps of :mod:`attention_fw.model.dynamics` compare every token with every token,
``O(n^2 d)`` per step. Here the same steps for one or a few systems of many tokens in low dimension.

(SA-inf) through the hull (:func:`hardmax_step`)
-------------------------------------------------
A linear functional ``y -> <B x_i, y>`` attains its maximum (and its minimum) over the tokens at
vertices of their convex hull ``K``, so the leader of every token is a vertex. The dense step's tie
rule (``S_ij >= top_i - tol max_j |S_ij|``, :mod:`._checks`) also counts the tokens whose score is
within ``tol`` times the row's scale of the top; such a token lies within ``tol max_j |x_j|`` of the
boundary of ``K`` (its distance to the supporting line of ``B x_i`` bounds its distance to the
boundary). So the candidates of a step are the tokens within a margin

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

Finding the band costs ``O(n)`` per step: the tokens extreme along 8 fixed directions (26 in
3-D) span a polytope ``P`` inside ``K``; the tokens deeper than ``2 m`` inside ``P`` cannot be
candidates; Qhull (``scipy.spatial.ConvexHull``) takes the few others. The hull is recomputed at
every step: vertices are stationary only when they own their cells (Section 4 of the paper), and
a vertex that moves can let interior tokens become vertices, so a candidate set computed once and
only pruned would be wrong in general. A hull Qhull cannot build (all tokens on a line or a plane)
sends the step to the dense path (counted in :data:`STATS`).
"""
from __future__ import annotations

import itertools
import math
import numpy as np
import numpy.typing as npt

from .. import _validate as chk
from . import _fast_kernels
from ._checks import TIE_RTOL, key_query
from ._checks import gamma as _gamma
from ._checks import tie_tol as _tie_tol
from ._checks import transpose as _t
from ._scaling import fit_scores as _fit_scores
from ._scaling import max_sq_norm as _max_sq_norm

__all__ = ["STATS", "available", "hull_candidates", "hardmax_step"]

EPS = float(np.finfo(float).eps)
TINY = 1e-250  # rows with max_k |(B x_i)_k| max_j |x_j| below: products near underflow, scanned in full
HULL_DIMS = (1, 2, 3)

STATS: dict[str, int] = {"hull_steps": 0, "dense_fallbacks": 0, "full_rows": 0}
"""Counters since import: systems stepped through the hull, systems sent to the dense step (no hull),
rows scanned in full (``B x_i`` near underflow)."""


def available() -> bool:
    """True when the compiled passes (numba) are importable."""
    return _fast_kernels.impl() is not None


def _kernels():
    K = _fast_kernels.impl()
    if K is None:
        raise RuntimeError("the fast steps need numba (pip install numba); use method='dense' without it")
    return K


def _directions(d: int) -> np.ndarray:
    if d == 2:
        a = np.arange(8) * (2 * np.pi / 8)
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
        idx = K.near_boundary(x, np.zeros(0, dtype=np.int64), E, 2.0 * margin + 8.0 * EPS * math.sqrt(top_sq))
    E = _hull_equations(x[idx])
    if E is None:
        return None, top_sq
    return K.near_boundary(x, idx, E, margin), top_sq


def _hardmax_one(x, bx, gamma, tol):
    """One system's step through the hull, or None when its hull is degenerate."""
    cand, top_sq = _candidates(x, tol)
    if cand is None:
        return None
    U, group = np.unique(x[cand], axis=0, return_inverse=True)
    out = np.empty_like(x)
    STATS["full_rows"] += int(_kernels().hull_leaders(bx, x, cand.astype(np.int64), group.reshape(-1).astype(np.int64),
                                                      np.ascontiguousarray(U), math.sqrt(top_sq), gamma, tol,
                                                      TINY, out))
    return out


def _dense_hardmax(x, gamma, B, tie_rtol):
    from . import dynamics
    return dynamics.hardmax_step(x, gamma, B, tie_rtol=tie_rtol)


def hardmax_step(x: npt.ArrayLike, gamma: float, B: npt.ArrayLike | None = None, *,
                 tie_rtol: float | None = TIE_RTOL) -> np.ndarray:
    """One step of (SA-inf) with the leaders found among the tokens near the hull's boundary (module docstring).

    The same arguments and, in ``d <= 2``, the same bits as :func:`attention_fw.model.dynamics.hardmax_step`;
    ``O(n (D + u))`` per system with ``D`` = 8 directions (26 in 3-D) and ``u`` distinct candidate positions
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
    B = key_query(B, x.shape)
    tol = _tie_tol(tie_rtol, d)
    if d not in HULL_DIMS or not available():
        STATS["dense_fallbacks"] += 1
        return _dense_hardmax(x, gamma, B, tie_rtol)
    xs, _, c = _fit_scores(x, B, 0.0)
    if c != 1.0:  # leader sets are invariant under a common power-of-two scaling (as in the dense step)
        return hardmax_step(xs, gamma, B, tie_rtol=tie_rtol) / c
    x3 = np.ascontiguousarray(x.reshape((-1,) + x.shape[-2:]))
    bx3 = x3 if B is None else np.ascontiguousarray(x3 @ _t(B))  # the dense step's own product
    out = np.empty(x3.shape)
    for r in range(x3.shape[0]):  # a loop over systems (each of many tokens), not over tokens
        y = _hardmax_one(x3[r], np.ascontiguousarray(bx3[r]), gamma, tol)
        if y is None:
            STATS["dense_fallbacks"] += 1
            Br = None if B is None else (B if B.ndim == 2 else B[r])
            y = _dense_hardmax(x3[r], gamma, Br, tie_rtol)
        else:
            STATS["hull_steps"] += 1
        out[r] = y
    return out.reshape(x.shape)
