"""The Frank-Wolfe reading of (SA-inf) (Section 2.2) and its convergence quantities.

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
from scipy.optimize import linprog, minimize
from scipy.spatial import ConvexHull, QhullError

from . import _validate as V


def energy(x, B) -> np.ndarray:
    """``J(x) = 1/2 <B x, x>`` over the last axis (Section 2.2). ``B`` symmetric ``d x d``.

    Raises ValueError for a non-symmetric ``B`` (the Frank-Wolfe reading needs symmetry).
    """
    x = V.as_float_array("x", x, min_ndim=1)
    B = V.square_matrix("B", B, x.shape[-1], symmetric=True)
    return 0.5 * np.einsum("...i,ij,...j->...", x, B, x)


def lmo(points, direction, *, return_index: bool = False):
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
    """
    P = V.tokens("points", points)
    D = V.as_float_array("direction", direction, min_ndim=2, max_ndim=3, last_dim=P.shape[-1])
    vals = D @ np.swapaxes(P, -1, -2)  # (..., k, m)
    idx = vals.argmin(axis=-1)
    out = np.take_along_axis(P, idx[..., None], axis=-2) if P.ndim == D.ndim else P[idx]
    return (out, idx) if return_index else out


def lmo_linprog(points, direction) -> np.ndarray:
    """The same oracle by linear programming over the simplex of convex weights (cross-check).

    ``min_w <direction, P^T w>`` subject to ``w >= 0, sum w = 1``; returns ``P^T w*``
    for one point set (m, d) and directions (k, d).
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


def fw_gap(x, grad, points) -> np.ndarray:
    """Frank-Wolfe gap ``g(x) = max_{y in conv(points)} <grad, x - y> = <grad, x> - min_j <grad, p_j>``.

    Non-negative whenever ``x`` lies in the hull; zero exactly at a stationary point
    of the constrained problem. Shapes: x and grad (..., k, d), points (..., m, d).
    """
    x = V.tokens("x", x)
    G = V.as_float_array("grad", grad)
    if G.shape != x.shape:
        raise ValueError(f"grad must have the shape of x {x.shape}, got {G.shape}")
    P = V.tokens("points", points)
    best = (G @ np.swapaxes(P, -1, -2)).min(axis=-1)
    return np.einsum("...d,...d->...", G, x) - best


def _check_psd(M, name="B"):
    w = np.linalg.eigvalsh(M)
    if w.min() < -1e-12 * max(1.0, abs(w).max()):
        raise ValueError(f"{name} must be positive semidefinite for a convex energy, got eigenvalue {w.min():.3g}")


def min_energy_over_hull(points, B) -> float:
    """``min_{y in conv(points)} 1/2 <B y, y>`` for a symmetric positive semidefinite ``B``.

    Exact in dimensions 1 and 2 (the minimum of a convex quadratic over a polygon
    is 0 if the polygon meets the null space of ``B``, otherwise it is attained on
    an edge, where it is a 1-D quadratic); a convex QP over the simplex of weights
    in higher dimensions (SLSQP, tolerance 1e-14).
    """
    P = V.tokens("points", points, batched_ok=False)
    d = P.shape[1]
    B = V.square_matrix("B", B, d, symmetric=True)
    _check_psd(B)
    if d == 1:
        lo, hi = P.min(), P.max()
        if lo <= 0.0 <= hi or B[0, 0] == 0.0:
            return 0.0
        return 0.5 * B[0, 0] * min(lo * lo, hi * hi)
    if d == 2:
        degenerate = False
        try:
            hull = ConvexHull(P)
            verts = P[hull.vertices]
        except QhullError:  # degenerate: coincident or collinear points, the hull is a segment
            degenerate = True
            u = P - P.mean(0)
            axis = np.linalg.svd(u)[2][0]
            proj = u @ axis
            verts = np.array([P[proj.argmin()], P[proj.argmax()]])
        # A segment (or a point) has no interior: the edge minimisation below is exact.
        # Otherwise an interior critical point (B y = 0 inside the polygon) gives J = 0.
        if degenerate:
            pass
        elif np.linalg.matrix_rank(B) == 2:
            if _inside_convex(verts, np.zeros(2)):
                return 0.0
        else:
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


def _inside_convex(verts, q, tol=1e-14):
    a = verts
    b = np.roll(verts, -1, axis=0)
    cross = (b[:, 0] - a[:, 0]) * (q[1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (q[0] - a[:, 0])
    return bool(np.all(cross >= -tol) or np.all(cross <= tol))


def primal_gap(x, points, B) -> np.ndarray:
    """Primal gap ``J(x_i) - min_{y in conv(points)} J(y)`` against the given (current) hull.

    ``x`` (k, d), ``points`` (m, d); ``B`` symmetric positive semidefinite.
    """
    return energy(x, B) - min_energy_over_hull(points, B)


def hull_diameter(points) -> np.ndarray:
    """Diameter ``d(K) = max_{i,j} |p_i - p_j|`` of ``conv(points)`` (batched). Shape (...)."""
    P = V.tokens("points", points)
    sq = np.einsum("...id,...id->...i", P, P)
    D2 = sq[..., :, None] + sq[..., None, :] - 2.0 * P @ np.swapaxes(P, -1, -2)
    return np.sqrt(np.maximum(D2.max(axis=(-1, -2)), 0.0))


def hull_area(points) -> np.ndarray:
    """Area of ``conv(points)`` for planar point sets (length of the hull for d = 1). Batched.

    Degenerate (collinear) planar sets have area 0.
    """
    P = V.tokens("points", points)
    if P.shape[-1] == 1:
        return P[..., 0].max(axis=-1) - P[..., 0].min(axis=-1)
    if P.shape[-1] != 2:
        raise ValueError(f"points must be planar (d = 2) for an area, got d = {P.shape[-1]}")
    flat = P.reshape(-1, P.shape[-2], 2)
    out = np.empty(flat.shape[0])
    for r, Q in enumerate(flat):
        try:
            out[r] = ConvexHull(Q).volume
        except QhullError:
            out[r] = 0.0
    return out.reshape(P.shape[:-2]) if P.ndim == 3 else float(out[0])
