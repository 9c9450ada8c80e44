"""Is one (SA-inf) step one Frank-Wolfe step? The Frank-Wolfe reading (Section 2.2) and its quantities.

With ``B`` symmetric and ``J(x) = 1/2 <Bx, x>``, one (SA-inf) step of token ``i`` is one
Frank-Wolfe step on the *current* hull ``K^t = conv{x_1^t, ..., x_n^t}``:

    s_i = argmax_{y in K^t} <B x_i, y>   (linear oracle),   x_i <- x_i + gamma (s_i - x_i).

Section 3 (``B = -B_*``, ``B_* >= 0``) is Frank-Wolfe *minimising* the convex
``J_*(x) = 1/2 <B_* x, x>``; Section 4 (``B > 0``) maximises the convex ``J``.
This module works with a generic convex quadratic ``f(x) = 1/2 <M x, x>`` to be
*minimised* (``M = B_*``) and the gradient ``M x``; pass ``-B``-style sign
conventions explicitly.

Point sets ``points`` have shape ``(m, d)`` or ``(R, m, d)``; queries ``x`` or
directions have shape ``(k, d)`` or ``(R, k, d)``.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog, minimize
from scipy.spatial import ConvexHull, QhullError

from .. import _validate as V
from . import dynamics as dyn
from ..geometry.polytope import hull_area, origin_in_hull_2d, outside_hull
from ..results import Result

__all__ = ["energy", "lmo", "lmo_linprog", "fw_gap", "min_energy_over_hull", "primal_gap",
           "oracle_residuals", "hull_shrinking"]


def energy(x: npt.ArrayLike, B: npt.ArrayLike) -> np.ndarray:
    """``J(x) = 1/2 <B x, x>`` over the last axis (Section 2.2). ``B`` symmetric ``d x d``.

    Raises ValueError for a non-symmetric ``B`` (the Frank-Wolfe reading needs symmetry).

    Examples
    --------
    >>> energy([[1.0, 2.0], [0.0, 1.0]], np.diag([2.0, 1.0]))
    array([3. , 0.5])
    """
    x = V.as_float_array("x", x, min_ndim=1)
    B = V.square_matrix("B", B, x.shape[-1], symmetric=True)
    return 0.5 * np.einsum("...i,ij,...j->...", x, B, x)


def lmo(points: npt.ArrayLike, direction: npt.ArrayLike, *,
        return_index: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Linear minimisation oracle over ``conv(points)``: ``argmin_{y} <direction, y>``.

    A linear function on a polytope is minimised at a vertex, so the minimum over
    the hull equals the minimum over the points; the first minimising point is
    returned (one per direction).

    Parameters
    ----------
    points : (m, d) or (R, m, d)
    direction : (k, d) or (R, k, d)

    Returns
    -------
    (k, d) or (R, k, d) array of minimisers (and their indices (..., k) if ``return_index``).

    Examples
    --------
    >>> lmo(
    ...     [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]],
    ...     [[-1.0, 0.0], [1.0, 1.0]],
    ...     return_index=True,
    ... )
    (array([[1., 0.],
           [0., 0.]]), array([1, 0]))
    """
    P = V.tokens("points", points)
    D = V.as_float_array("direction", direction, min_ndim=2, max_ndim=3, last_dim=P.shape[-1])
    vals = D @ np.swapaxes(P, -1, -2)  # (..., k, m)
    idx = vals.argmin(axis=-1)
    out = np.take_along_axis(P, idx[..., None], axis=-2) if P.ndim == D.ndim else P[idx]
    return (out, idx) if return_index else out


def lmo_linprog(points: npt.ArrayLike, direction: npt.ArrayLike) -> np.ndarray:
    """The same oracle by linear programming over the simplex of convex weights (cross-check).

    ``min_w <direction, P^T w>`` subject to ``w >= 0, sum w = 1``; returns ``P^T w*``
    for one point set (m, d) and directions (k, d).

    Examples
    --------
    >>> lmo_linprog([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], [[-1.0, 0.0]])
    array([[1., 0.]])
    """
    P = V.tokens("points", points, batched_ok=False)
    D = V.as_float_array("direction", direction, ndim=2, last_dim=P.shape[-1])
    m = P.shape[0]
    out = np.empty((D.shape[0], P.shape[1]))
    for r, c in enumerate(D):
        res = linprog(P @ c, A_eq=np.ones((1, m)), b_eq=[1.0], bounds=[(0, None)] * m, method="highs")
        if not res.success:  # pragma: no cover - the simplex is never empty
            raise RuntimeError(f"linprog failed: {res.message}")
        out[r] = res.x @ P
    return out


def fw_gap(x: npt.ArrayLike, grad: npt.ArrayLike, points: npt.ArrayLike) -> np.ndarray:
    """Frank-Wolfe gap ``g(x) = max_{y in conv(points)} <grad, x - y> = <grad, x> - min_j <grad, p_j>``.

    Non-negative whenever ``x`` lies in the hull; zero exactly at a stationary point
    of the constrained problem. Shapes: x and grad (..., k, d), points (..., m, d).

    Examples
    --------
    >>> P = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> # J = |x|^2 / 2: the gap vanishes only at the minimiser 0
    >>> fw_gap(P, P, P)
    array([0., 1., 1.])
    """
    x = V.tokens("x", x)
    G = V.as_float_array("grad", grad)
    if G.shape != x.shape:
        raise ValueError(f"grad must have the shape of x {x.shape}, got {G.shape}")
    P = V.tokens("points", points)
    best = (G @ np.swapaxes(P, -1, -2)).min(axis=-1)
    return np.einsum("...d,...d->...", G, x) - best


def min_energy_over_hull(points: npt.ArrayLike, B: npt.ArrayLike) -> float | np.ndarray:
    """``min_{y in conv(points)} 1/2 <B y, y>`` for a symmetric positive semidefinite ``B``; batched.

    ``points`` (m, d) gives a float, (R, m, d) an array (R,). Exact in dimensions 1 and 2. For
    planar points and ``B`` positive definite (vectorised over the batch, degenerate hulls
    included) the minimum is 0 if ``0 in K``; otherwise it is attained on an edge of ``K``,
    and every edge is a segment between two points while every such segment lies in ``K``,
    so the minimum over all pairs of the 1-D minimum on ``[p_i, p_j]`` is exact. For a
    singular planar ``B`` the polygon is met against the null space of ``B``; in higher
    dimensions a convex QP over the simplex of weights (SLSQP, tolerance 1e-14).

    Examples
    --------
    >>> # nearest point (1, 0)
    >>> min_energy_over_hull([[1.0, -1.0], [1.0, 1.0], [3.0, 0.0]], np.eye(2))
    0.5
    >>> min_energy_over_hull([[[-1.0, 0.0], [1.0, 0.0], [0.0, 1.0]],
    ...                       [[1.0, 1.0], [2.0, 1.0], [1.0, 2.0]]], np.eye(2))
    array([0., 1.])
    """
    P = V.tokens("points", points)
    d = P.shape[-1]
    B = V.psd_matrix("B", B, d)
    if d == 2 and np.linalg.eigvalsh(B).min() > 0:
        out = _min_energy_pairs(P[None] if P.ndim == 2 else P, B)
        return float(out[0]) if P.ndim == 2 else out
    if P.ndim == 3:
        return np.array([_min_energy_one(p, B) for p in P])
    return _min_energy_one(P, B)


def _min_energy_pairs(x, B):
    """:func:`min_energy_over_hull` of planar point sets (R, m, 2), ``B`` positive definite, over all pairs."""
    a = x[:, :, None, :]
    e = x[:, None, :, :] - a
    Be = e @ B
    den = np.einsum("...d,...d->...", Be, e)
    num = -np.einsum("...d,...d->...", a @ B, e)
    s = np.clip(np.divide(num, den, out=np.zeros_like(num), where=den > 0), 0.0, 1.0)
    y = a + s[..., None] * e
    m = energy(y, B).min(axis=(-1, -2))
    return np.where(origin_in_hull_2d(x), 0.0, m)


def _min_energy_one(P, B) -> float:
    """:func:`min_energy_over_hull` of one point set (m, d) in the cases the pairs cannot serve."""
    d = P.shape[1]
    if d == 1:
        lo, hi = P.min(), P.max()
        if lo <= 0.0 <= hi or B[0, 0] == 0.0:
            return 0.0
        return 0.5 * B[0, 0] * min(lo * lo, hi * hi)
    if d == 2:  # B singular (the positive definite case goes through the pairs)
        try:
            verts = P[ConvexHull(P).vertices]
        except QhullError:  # degenerate: coincident or collinear points, the hull is a segment
            u = P - P.mean(0)
            axis = np.linalg.svd(u)[2][0]
            proj = u @ axis
            verts = np.array([P[proj.argmin()], P[proj.argmax()]])
        null = np.linalg.eigh(B)[1][:, 0]
        # the line {s * null} meets the polygon iff vertices lie on both sides of it (or on it)
        normal = np.array([-null[1], null[0]])
        side = verts @ normal
        if side.min() <= 0.0 <= side.max():
            return 0.0
        a = verts
        b = np.roll(verts, -1, axis=0)
        e = b - a
        Be = e @ B
        den = np.einsum("ij,ij->i", Be, e)
        num = -np.einsum("ij,ij->i", a @ B, e)
        s = np.clip(np.divide(num, den, out=np.zeros_like(num), where=den > 0), 0.0, 1.0)
        y = a + s[:, None] * e
        return float(0.5 * np.einsum("ij,jk,ik->i", y, B, y).min())
    m = P.shape[0]
    G = P @ B @ P.T
    w0 = np.full(m, 1.0 / m)
    res = minimize(lambda w: 0.5 * w @ G @ w, w0, jac=lambda w: G @ w, method="SLSQP",
                   bounds=[(0, 1)] * m, constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0,
                                                       "jac": lambda w: np.ones_like(w)}],
                   options={"ftol": 1e-14, "maxiter": 1000})
    return float(max(res.fun, 0.0))


def primal_gap(x: npt.ArrayLike, points: npt.ArrayLike, B: npt.ArrayLike) -> np.ndarray:
    """Primal gap ``J(x_i) - min_{y in conv(points)} J(y)`` against the given (current) hull.

    ``x`` (k, d), ``points`` (m, d); ``B`` symmetric positive semidefinite.

    Examples
    --------
    >>> primal_gap(
    ...     [[1.0, 0.0], [0.0, 0.0]], [[-1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], np.eye(2)
    ... )
    array([0.5, 0. ])
    """
    return energy(x, B) - min_energy_over_hull(points, B)


def oracle_residuals(points: npt.ArrayLike, B: npt.ArrayLike) -> np.ndarray:
    """Largest coordinate difference between :func:`lmo` and :func:`lmo_linprog` for each query.

    Each point ``x_i`` of each set queries the oracle of (SA-inf), ``argmax_{y in K} <B x_i, y>``,
    with that set's ``B``. ``points`` (R, m, d), ``B`` (R, d, d) -> (R, m).

    Examples
    --------
    >>> pts = np.array([[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    >>> oracle_residuals(pts, np.eye(2)[None]).max()
    np.float64(0.0)
    """
    P = V.as_float_array("points", points, ndim=3)
    Bm = V.as_float_array("B", B, ndim=3)
    if Bm.shape != (P.shape[0], P.shape[2], P.shape[2]):
        raise ValueError(f"B must hold one d x d matrix per point set, shape {(P.shape[0],) + P.shape[2:] * 2}, "
                         f"got {Bm.shape}")
    direction = -(P @ np.swapaxes(Bm, -1, -2))     # argmax <B x_i, y> = argmin <-B x_i, y>
    fast = lmo(P, direction)
    slow = np.stack([lmo_linprog(P[r], direction[r]) for r in range(P.shape[0])])
    return np.abs(fast - slow).max(axis=-1)


def hull_shrinking(x0: npt.ArrayLike, gamma: float, B: npt.ArrayLike, steps: int, *, tol: float = 1e-12) -> Result:
    """Follow planar (SA-inf) systems and record the area of the hull and the tokens that leave it.

    ``x0`` (R, n, 2), ``B`` (d, d) or one per system (R, d, d). Returns ``areas`` (steps + 1, R)
    and ``outside``: how many new tokens lie outside the previous hull by more than ``tol``
    (facet offsets), over all systems and layers (0 by the hull lemma whenever ``gamma`` is in (0, 1)).

    Examples
    --------
    >>> res = hull_shrinking(
    ...     np.random.default_rng(0).standard_normal((3, 6, 2)), 0.3, np.eye(2), 5
    ... )
    >>> bool((np.diff(res.areas, axis=0) <= 1e-12).all()), res.outside
    (True, 0)
    """
    x = V.as_float_array("x0", x0, ndim=3, last_dim=2)
    previous: dict = {}

    def left_the_hull(y, t):                   # new tokens outside the hull of the layer before
        count = int(outside_hull(previous["x"], y, tol).sum()) if previous else 0
        previous["x"] = y.copy()
        return count

    areas = dyn.FunctionRecorder("area", lambda y, t: hull_area(y))
    outside = dyn.FunctionRecorder("outside", left_the_hull)
    dyn.simulate(x, dyn.Hardmax(gamma, B), steps, recorders=[areas, outside])
    return Result(areas=areas.result(), outside=int(outside.result().sum()), gamma=gamma)
