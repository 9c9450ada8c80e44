"""Polytopes in any dimension: where is a point relative to ``K = conv{v_1, ..., v_kappa}``?

Hulls, their size and vertices, the constants of the paper's hypotheses that depend on
``K`` alone (``c_0``, the vertex angles of (5.1)), the eroded dominance cones of
Section 5, and exact distances to a hull. Everything here works for points in ``R^d``
(the planar cells, polygons and their clipping live in :mod:`attention_fw.geometry.planar`), and
regular polygons and simplices are built here once for the library, the tests and the book.

Point sets are arrays of shape ``(m, d)``; functions that say so also take a batch
``(R, m, d)`` of ``R`` independent point sets.
"""
from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
from scipy import optimize, spatial

from .. import _validate as V

__all__ = [
    "regular_polygon", "regular_simplex", "points_on_circle", "diameter", "hull_area",
    "hull_vertex_indices", "outside_hull", "c0", "vertex_angles", "satisfies_51", "facets", "eroded_cone_mask",
    "eroded_slack", "HullDistance", "distance_to_hull", "origin_in_hull_2d", "origin_distance_2d",
]


# ----------------------------------------------------------------------------- standard polytopes
def regular_polygon(kappa: int, *, radius: float = 1.0, phase: float = np.pi / 2) -> np.ndarray:
    """Regular ``kappa``-gon inscribed in the circle of ``radius``, first vertex at angle ``phase``.

    Vertex ``k`` is ``radius (cos a_k, sin a_k)`` with ``a_k = phase + 2 pi k / kappa``,
    counter-clockwise. Shape (kappa, 2).

    Raises
    ------
    TypeError, ValueError
        ``kappa`` not an integer >= 3, ``radius`` not positive, ``phase`` not finite.

    Examples
    --------
    >>> P = regular_polygon(4, phase=0.0)
    >>> np.round(P, 12) + 0.0
    array([[ 1.,  0.],
           [ 0.,  1.],
           [-1.,  0.],
           [ 0., -1.]])
    >>> round(c0(regular_polygon(6)), 12)   # 1 - cos(2 pi / 6)
    0.5
    """
    kappa = V.positive_int("kappa", kappa, minimum=3)
    radius = V.real_scalar("radius", radius, low=0.0, low_open=True)
    phase = V.real_scalar("phase", phase)
    th = phase + 2 * np.pi * np.arange(kappa) / kappa
    P = np.stack([np.cos(th), np.sin(th)], axis=1)
    return P if radius == 1.0 else radius * P


def regular_simplex(d: int) -> np.ndarray:
    """Vertices of a regular simplex inscribed in the unit sphere of R^d, shape (d + 1, d).

    ``<v_i, v_j> = -1/d`` for ``i != j``, so ``c0 = 1 + 1/d``; its edge angles are 60
    degrees, so it satisfies (5.1). For ``d = 2``: an equilateral triangle on S^1.

    Raises
    ------
    TypeError, ValueError
        ``d`` not an integer >= 1.

    Examples
    --------
    >>> S = regular_simplex(3)
    >>> S.shape
    (4, 3)
    >>> np.allclose(S @ S.T, np.where(np.eye(4) == 1, 1.0, -1 / 3))
    True
    """
    d = V.positive_int("d", d)
    e = np.eye(d + 1) - 1.0 / (d + 1)            # centred basis of the hyperplane sum = 0
    q, _ = np.linalg.qr(e[:, :d])                # orthonormal basis of that hyperplane
    pts = e @ q                                   # (d + 1, d), centred at the origin
    return pts / np.linalg.norm(pts, axis=1, keepdims=True)


def points_on_circle(angles_deg: npt.ArrayLike = (90.0, 210.0, 330.0)) -> np.ndarray:
    """Points ``(cos a, sin a)`` on S^1 at the given angles in degrees, shape (len(angles_deg), 2).

    The default is the equilateral triangle of Section 5 with a vertex at the top (the same
    triangle as ``regular_polygon(3)`` up to rounding); other angles give the acute and
    obtuse triangles the book compares.

    Raises
    ------
    ValueError
        Fewer than 3 finite angles, or two of them equal modulo 360.

    Examples
    --------
    >>> np.round(points_on_circle((0, 90, 180)), 12) + 0.0
    array([[ 1.,  0.],
           [ 0.,  1.],
           [-1.,  0.]])
    """
    a = V.as_float_array("angles_deg", angles_deg, ndim=1)
    if a.shape[0] < 3:
        raise ValueError(f"angles_deg must hold at least 3 angles, got {a.shape[0]}")
    r = np.deg2rad(a)
    pts = np.stack([np.cos(r), np.sin(r)], axis=1)
    if np.min(spatial.distance.pdist(pts)) < 1e-12:
        raise ValueError("angles_deg must be distinct modulo 360")
    return pts


# ----------------------------------------------------------------------------- size and vertices
def diameter(points: npt.ArrayLike) -> np.ndarray | float:
    """``d(K) = max_{i, j} |p_i - p_j|`` of ``K = conv(points)``; batched, shape ``points.shape[:-2]``.

    The squared distances are summed coordinate by coordinate from the differences (no
    Gram-matrix cancellation), so the result is accurate for clouds far from the origin.

    Examples
    --------
    >>> float(diameter([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]]))
    5.0
    >>> diameter(np.stack([regular_polygon(4), 2 * regular_polygon(4)])).round(12)
    array([2., 4.])
    """
    P = V.tokens("points", points)
    sq = np.zeros(P.shape[:-1] + P.shape[-2:-1])
    for k in range(P.shape[-1]):
        c = P[..., k]
        sq += (c[..., :, None] - c[..., None, :]) ** 2
    out = np.sqrt(sq.max(axis=(-1, -2)))
    return out if P.ndim == 3 else float(out)


def hull_area(points: npt.ArrayLike) -> np.ndarray | float:
    """Area of ``conv(points)`` for planar point sets (length for d = 1); batched.

    Degenerate (collinear) planar sets have area 0.

    Examples
    --------
    >>> float(hull_area([[0, 0], [1, 0], [0, 1], [0.2, 0.2]]))
    0.5
    """
    P = V.tokens("points", points)
    if P.shape[-1] == 1:
        return P[..., 0].max(axis=-1) - P[..., 0].min(axis=-1)
    if P.shape[-1] != 2:
        raise ValueError(f"points must be planar (d = 2) for an area, got d = {P.shape[-1]}")
    flat = P.reshape(-1, P.shape[-2], 2)
    out = np.empty(flat.shape[0])
    for r, Q in enumerate(flat):            # qhull takes one point set at a time
        try:
            out[r] = spatial.ConvexHull(Q).volume
        except spatial.QhullError:
            out[r] = 0.0
    return out.reshape(P.shape[:-2]) if P.ndim == 3 else float(out[0])


def hull_vertex_indices(points: npt.ArrayLike) -> np.ndarray:
    """Sorted indices of the points that are vertices of their convex hull, one set (m, d).

    Raises
    ------
    ValueError
        A degenerate set (its hull does not span R^d).

    Examples
    --------
    >>> hull_vertex_indices([[0, 0], [2, 0], [0, 2], [0.5, 0.5]])
    array([0, 1, 2], dtype=int32)
    """
    P = V.tokens("points", points, batched_ok=False)
    if P.shape[1] == 1:
        return np.unique([P[:, 0].argmin(), P[:, 0].argmax()])
    try:
        return np.sort(spatial.ConvexHull(P).vertices)
    except spatial.QhullError as exc:
        raise ValueError(f"points must span R^d (their hull is degenerate): {exc}".splitlines()[0]) from None


def outside_hull(points: npt.ArrayLike, q: npt.ArrayLike, tol: float = 1e-12) -> np.ndarray:
    """Whether each query point lies outside ``conv(points)`` by more than ``tol`` (facet offsets).

    One point set (m, d) with queries (k, d) gives (k,); a batch (R, m, d) with (R, k, d)
    gives (R, k). A degenerate hull (the points on a line, or all equal: a segment or a point) is
    handled in its own affine span: a query is outside when its distance to that span, or to the
    hull inside the span, exceeds ``tol``.

    Examples
    --------
    >>> outside_hull([[0, 0], [1, 0], [0, 1]], [[0.2, 0.2], [1.0, 0.0], [0.6, 0.6]])
    array([False, False,  True])
    >>> segment = [[0, 0], [1, 1], [2, 2]]
    >>> outside_hull(segment, [[1.5, 1.5], [3, 3], [1, 0]])
    array([False,  True,  True])
    """
    P = V.tokens("points", points)
    Q = V.as_float_array("q", q, min_ndim=P.ndim, max_ndim=P.ndim, last_dim=P.shape[-1])
    if P.ndim == 3 and Q.shape[0] != P.shape[0]:
        raise ValueError(f"q must hold one set of queries per point set ({P.shape[0]}), got shape {Q.shape}")
    Pb, Qb = (P[None], Q[None]) if P.ndim == 2 else (P, Q)
    out = np.empty(Qb.shape[:2], dtype=bool)
    for r in range(Pb.shape[0]):            # qhull takes one point set at a time
        out[r] = _outside_one(Pb[r], Qb[r], tol)
    return out[0] if P.ndim == 2 else out


def _outside_one(P: np.ndarray, Q: np.ndarray, tol: float) -> np.ndarray:
    """:func:`outside_hull` for one point set (m, d) and its queries (k, d), any dimension of hull."""
    c = P.mean(axis=0)
    _, s, vt = np.linalg.svd(P - c, full_matrices=False)
    scale = max(1.0, float(np.abs(P).max()))
    rank = int((s > 1e-12 * scale).sum())
    if rank == P.shape[1] and P.shape[1] > 1:
        try:
            eq = spatial.ConvexHull(P).equations        # a.x + b <= 0 inside
            return ((Q @ eq[:, :-1].T + eq[:, -1]) > tol).any(axis=1)
        except spatial.QhullError:
            rank = P.shape[1] - 1                         # flat to within qhull's precision
    U = vt[:rank]                                         # the affine span of the points
    rel = Q - c
    inside = rel @ U.T
    off = np.linalg.norm(rel - inside @ U, axis=1) > tol
    if rank == 0:
        return off
    if rank == 1:
        t = (P - c) @ U[0]
        return off | (inside[:, 0] < t.min() - tol) | (inside[:, 0] > t.max() + tol)
    return off | _outside_one((P - c) @ U.T, inside, tol)


# ----------------------------------------------------------------------------- hypotheses of Section 5
def _vertices(name, v) -> np.ndarray:
    v = V.as_float_array(name, v, ndim=2)
    if v.shape[0] < 2:
        raise ValueError(f"{name} must hold at least 2 vertices, got shape {v.shape}")
    if np.min(spatial.distance.pdist(v)) <= 0:
        raise ValueError(f"{name} must hold distinct vertices")
    return v


def _around_vertices(vertices, per_vertex, rng, draw) -> tuple[np.ndarray, np.ndarray]:
    """The configurations of Section 5: tokens ``0..kappa-1`` at the vertices, then ``per_vertex``
    tokens ``draw(v, i, g)`` (an array (per_vertex, d)) around each vertex ``i`` in turn, ``v`` the
    checked vertices and ``g`` the Generator of ``rng``. Returns ``x0`` and the labels ``sigma``
    (the vertex of each token)."""
    v = _vertices("vertices", vertices)
    per_vertex = V.positive_int("per_vertex", per_vertex, minimum=0)
    g = V.rng("rng", rng)
    k = len(v)
    xs, sig = [v], [np.arange(k)]
    if per_vertex:
        for i in range(k):
            xs.append(draw(v, i, g))
            sig.append(np.full(per_vertex, i))
    return np.concatenate(xs), np.concatenate(sig)


def c0(vertices: npt.ArrayLike) -> float:
    """The constant ``c_0 = min_{i != l} (<v_i, v_i> - <v_i, v_l>)`` of Theorems 5.2 and 5.4.

    Regular kappa-gon on S^1: ``1 - cos(2 pi / kappa)``. The hypothesis needs ``c0 > 0``;
    the value is returned even when it is not positive.

    Examples
    --------
    >>> round(c0(points_on_circle()), 12)      # equilateral triangle: 1 - cos(120 deg)
    1.5
    """
    v = _vertices("vertices", vertices)
    g = v @ v.T
    gap = np.diag(g)[:, None] - g
    np.fill_diagonal(gap, np.inf)
    return float(gap.min())


def vertex_angles(vertices: npt.ArrayLike) -> np.ndarray:
    """``sup_{x, y in K} angle(x - v_i, y - v_i)`` at every vertex, in radians, shape (kappa,).

    Condition (5.1) read as an angle (erratum E15 of the book; printed as
    ``arccos<x - v_i, y - v_i>`` without normalisation). The tangent cone of ``K`` at ``v_i``
    is generated by the edges ``v_j - v_i``, so the supremum is the largest angle between two
    of them (in 2-D: the interior angle of the polygon).

    Raises
    ------
    ValueError
        Fewer than 3 points, or a point that is not a vertex of the hull.

    Examples
    --------
    >>> np.degrees(vertex_angles(regular_polygon(4))).round(9)
    array([90., 90., 90., 90.])
    """
    v = _vertices("vertices", vertices)
    k = v.shape[0]
    if k < 3:
        raise ValueError("vertices must hold at least 3 points")
    if v.shape[1] >= 2 and k > v.shape[1]:
        try:
            hull = spatial.ConvexHull(v)
        except spatial.QhullError:
            raise ValueError("vertices are degenerate (all in a lower-dimensional affine subspace)") from None
        if len(hull.vertices) != k:
            raise ValueError("every point of vertices must be a vertex of its convex hull")
    out = np.empty(k)
    for i in range(k):                        # loop over vertices (kappa is small), not tokens
        e = np.delete(v, i, axis=0) - v[i]
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        out[i] = np.arccos(np.clip(e @ e.T, -1.0, 1.0)).max()
    return out


def satisfies_51(vertices: npt.ArrayLike) -> bool:
    """True when every vertex angle of (5.1) (see :func:`vertex_angles`) is < pi/2.

    Examples
    --------
    >>> satisfies_51(points_on_circle()), satisfies_51(regular_polygon(4))
    (True, False)
    """
    return bool(np.all(vertex_angles(vertices) < np.pi / 2 - 1e-12))


def facets(vertices: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Unit outer normals ``a`` (f, d) and offsets ``b`` (f,) with ``x in K iff a @ x <= b`` (K full-dimensional).

    Examples
    --------
    >>> a, b = facets([[0, 0], [1, 0], [0, 1]])
    >>> bool(np.all(a @ [0.2, 0.2] <= b)), bool(np.all(a @ [1.0, 1.0] <= b))
    (True, False)
    """
    v = V.as_float_array("vertices", vertices, ndim=2)
    eq = spatial.ConvexHull(v).equations       # n . x + c <= 0 inside, |n| = 1
    return eq[:, :-1], -eq[:, -1]


def eroded_cone_mask(x: npt.ArrayLike, vertices: npt.ArrayLike, i: int, eta: float, delta: float) -> np.ndarray:
    """Membership in ``I_i(eta) (-) delta B_1``, intersected with ``K (-) delta B_1``.

    ``I_i(eta) = {x in K : <v_i - v_j, x> >= eta for all j != i}`` (the cones of Section 5,
    ``B = I``) and ``A (-) delta B_1 = {x : x + delta B_1 in A}`` (erosion). For an
    intersection of half-spaces the erosion is exact: ``<v_i - v_j, x> >= eta + delta |v_i - v_j|``
    for all ``j != i`` and ``<a_f, x> + delta <= b_f`` for every facet ``f`` of K (unit normals).

    Parameters
    ----------
    x : (..., d) array
    vertices : (kappa, d) array, K = conv(vertices) full-dimensional
    i : vertex index
    eta : float >= 0
        Margin of the cone ``I_i(eta)``.
    delta : float >= 0
        Radius of the erosion.

    Returns
    -------
    bool array of shape ``x.shape[:-1]``.

    Examples
    --------
    >>> T = points_on_circle()
    >>> eroded_cone_mask([[0.0, 0.9], [0.0, 0.0]], T, 0, eta=0.05, delta=0.03)
    array([ True, False])
    """
    v = _vertices("vertices", vertices)
    x = V.as_float_array("x", x, min_ndim=1, last_dim=v.shape[1])
    i = V.positive_int("i", i, minimum=0)
    if i >= v.shape[0]:
        raise ValueError(f"i must be < kappa = {v.shape[0]}, got {i}")
    eta = V.real_scalar("eta", eta, low=0)
    delta = V.real_scalar("delta", delta, low=0)
    diff = np.delete(v[i] - v, i, axis=0)                     # (kappa-1, d)
    cone = np.all(x @ diff.T >= eta + delta * np.linalg.norm(diff, axis=1), axis=-1)
    a, b = facets(v)
    inside = np.all(x @ a.T + delta <= b, axis=-1)
    return cone & inside


def eroded_slack(vertices: npt.ArrayLike, i: int, eta: float, delta: float) -> float:
    """Largest smallest slack of the inequalities of :func:`eroded_cone_mask` (a linear programme).

    Non-negative exactly when the eroded cone of vertex ``i`` is non-empty.

    Examples
    --------
    >>> eroded_slack(points_on_circle(), 0, 0.05, 0.03) > 0
    True
    """
    v = _vertices("vertices", vertices)
    diff = np.delete(v[i] - v, i, axis=0)
    a, b = facets(v)
    d = v.shape[1]
    # variables (x, s): maximise s subject to  -diff x + s <= -(eta + delta |diff|),  a x + s <= b - delta
    A = np.vstack([np.hstack([-diff, np.ones((len(diff), 1))]), np.hstack([a, np.ones((len(a), 1))])])
    rhs = np.concatenate([-(eta + delta * np.linalg.norm(diff, axis=1)), b - delta])
    res = optimize.linprog(np.r_[np.zeros(d), -1.0], A_ub=A, b_ub=rhs,
                           bounds=[(None, None)] * d + [(None, 10.0)], method="highs")
    return -res.fun


# ----------------------------------------------------------------------------- distances
class HullDistance:
    """Distance to ``conv(P)`` with the face geometry of the point set ``P`` (m, d) precomputed.

    Calling it on ``x`` (..., d) gives the exact distance of :func:`distance_to_hull`; build
    it once when the same hull is queried at every step of a simulation.

    Examples
    --------
    ``K = {|x| + |y| <= 1}``: 0 inside, 1 from the vertex ``(1, 0)``, ``1/sqrt(2)`` from the edge ``x + y = 1``:

    >>> hd = HullDistance(regular_polygon(4, phase=0.0))
    >>> np.round(hd(np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 1.0]])), 6)
    array([0.      , 1.      , 0.707107])
    >>> hd(np.zeros((5, 7, 2))).shape                # any batch of points (..., d)
    (5, 7)
    """

    def __init__(self, P: npt.ArrayLike) -> None:
        P = np.unique(V.as_float_array("points", P, ndim=2), axis=0)
        self.P = P
        m, d = P.shape
        self.faces = []
        for r in range(2, min(m, d + 1) + 1):
            for sub in itertools.combinations(range(m), r):
                Q = P[list(sub)]
                E = (Q[1:] - Q[0]).T                          # (d, r-1)
                G = E.T @ E
                if np.linalg.matrix_rank(G) < r - 1:
                    continue
                self.faces.append((Q[0], E, E @ np.linalg.inv(G)))   # G symmetric

    def __call__(self, x: npt.ArrayLike) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if x.ndim < 1 or x.shape[-1] != self.P.shape[1]:
            raise ValueError(f"x must be points (..., {self.P.shape[1]}) in the dimension of the hull, "
                             f"got shape {x.shape}")
        best = np.min(np.linalg.norm(x[..., None, :] - self.P, axis=-1), axis=-1)
        for base, E, EG in self.faces:
            y = x - base
            lam = y @ EG                                      # (..., r-1) affine coordinates
            ok = np.all(lam >= -1e-12, axis=-1) & (lam.sum(-1) <= 1 + 1e-12)
            dist = np.linalg.norm(y - lam @ E.T, axis=-1)
            best = np.where(ok, np.minimum(best, dist), best)
        return best


def distance_to_hull(x: npt.ArrayLike, points: npt.ArrayLike) -> np.ndarray:
    """Euclidean distance from each row of ``x`` (..., d) to ``conv(points)`` ((m, d) array).

    Exact: the nearest point lies in the relative interior of a face spanned by at most
    ``d + 1`` of the points, so the minimum over all such subsets of the distance to their
    affine hull (kept when the barycentric coordinates are >= 0) is the distance.
    Vectorised over x; meant for small m (group sizes).

    Examples
    --------
    >>> distance_to_hull([[0.5, 0.5], [2.0, 0.0], [0.0, -3.0]], [[0, 0], [1, 0], [0, 1]])
    array([0., 1., 3.])
    """
    P = V.as_float_array("points", points, ndim=2)
    x = V.as_float_array("x", x, min_ndim=1, last_dim=P.shape[1])
    return HullDistance(P)(x)


def origin_in_hull_2d(x: npt.ArrayLike, tol: float = 1e-12) -> np.ndarray:
    """Whether ``0 in conv{x_1, ..., x_n}`` for planar point sets, vectorised.

    ``0`` is in the hull iff a token sits at ``0`` or the directions of the tokens leave no
    angular gap larger than ``pi``. Shape ``(R, n, 2) -> (R,)`` (or ``(n, 2) -> bool``).

    Examples
    --------
    >>> (
    ...     bool(origin_in_hull_2d(points_on_circle())),
    ...     bool(origin_in_hull_2d(points_on_circle() + 2)),
    ... )
    (True, False)
    """
    x = V.tokens("x", x)
    if x.shape[-1] != 2:
        raise ValueError(f"x must be planar (d = 2), got d = {x.shape[-1]}")
    xb = x[None] if x.ndim == 2 else x
    r = np.linalg.norm(xb, axis=-1)
    scale = np.maximum(r.max(axis=-1), 1e-300)
    at0 = (r <= tol * scale[:, None]).any(axis=-1)
    ang = np.sort(np.arctan2(xb[..., 1], xb[..., 0]), axis=-1)
    gaps = np.diff(np.concatenate([ang, ang[:, :1] + 2 * np.pi], axis=-1), axis=-1)
    out = at0 | (gaps.max(axis=-1) <= np.pi + 1e-12)
    return out[0] if x.ndim == 2 else out


def origin_distance_2d(x: npt.ArrayLike) -> np.ndarray:
    """Distance from ``0`` to ``conv{x_1, ..., x_n}`` for planar point sets, vectorised (0 inside).

    Outside the hull the nearest point lies on an edge, i.e. on a segment between two tokens,
    and every such segment lies in the hull; so the distance is the minimum over all pairs
    ``(i, j)`` of the distance from 0 to ``[x_i, x_j]`` (``O(n^2)``). Shape ``(R, n, 2) -> (R,)``.

    Examples
    --------
    >>> float(origin_distance_2d([[1.0, -1.0], [1.0, 1.0], [3.0, 0.0]]))
    1.0
    """
    x = V.tokens("x", x)
    xb = x[None] if x.ndim == 2 else x
    a = xb[:, :, None, :]
    e = xb[:, None, :, :] - a
    ee = np.einsum("...d,...d->...", e, e)
    s = np.clip(np.divide(-np.einsum("...d,...d->...", a, e), ee, out=np.zeros_like(ee), where=ee > 0), 0, 1)
    dist = np.linalg.norm(a + s[..., None] * e, axis=-1).min(axis=(-1, -2))
    dist = np.where(origin_in_hull_2d(xb), 0.0, dist)
    return dist[0] if x.ndim == 2 else dist
