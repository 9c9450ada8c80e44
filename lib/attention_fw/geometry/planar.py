"""Which token leads where? Exact planar cells C_i(v), their Voronoi special case, and the cones of section 5.

Everything planar here is exact up to floating point: a cell is the polygon K cut by
half-planes, never a raster. The dimension-free helpers (:func:`cell_labels`,
:func:`owns_cell`) work for points in any R^d and are vectorised over batches.

Notation (paper, section 4, equation (cells)): K = conv{v_1, ..., v_kappa} and ::

    C_i(v) = {x in K : <Bx, v_i> >= <Bx, v_j> for all j}                (eq: cells)
           = K  cap  {x : <x, B^T (v_i - v_j)> >= 0 for all j},

so every cell is K cut by half-planes whose boundary lines pass through the origin.

Polygons are float arrays of shape (m, 2) listing the corners counter-clockwise, without
repeating the first corner; an empty set is an array of shape (0, 2).

Contents
--------
* :func:`sample_vertices`: the authors' vertex recipe (seeded, resampling in the same stream)
* :func:`convex_hull`: hull vertex indices in counter-clockwise order (scipy / qhull)
* :func:`clip_halfplanes`: convex polygon cap {x : <a_j, x> >= b_j}
* :func:`cells`: exact C_i(v) for any B (symmetric positive definite in the paper)
* :func:`unit_direction_cells`: the authors' "unit" labelling ``argmax_j <x, v_j/|v_j|>``
  (published Figure 1)
* :func:`voronoi_cells`: Vor_B(v_i) cap K, Vor_B compared against the vertices only (E13)
* :func:`cone`, :func:`erode`: strict cone I_i(eta) of section 5 and its erosion by a disc
* :func:`cell_labels`, :func:`unit_direction_labels`, :func:`owns_cell`,
  :func:`neighbour_condition`: any dimension d
* :func:`raster_cells`: the published scripts' 1000 x 1000 grid approach (for the benchmark)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.spatial import ConvexHull

from .. import _validate as V

__all__ = [
    "NoDrawError", "sample_vertices", "convex_hull", "polygon_area", "polygon_centroid", "is_convex",
    "point_in_polygon", "clip_halfplanes", "polygon_intersection", "symmetric_difference_area",
    "cells", "unit_direction_cells", "voronoi_cells", "voronoi_mismatch", "cone", "erode",
    "distance_to_complement", "cell_labels", "unit_direction_labels", "owns_cell",
    "neighbour_condition", "level_set_vertices", "raster_cells", "RasterCells",
]

_EMPTY = np.zeros((0, 2))


# ---------------------------------------------------------------------------------------------
# Vertex sampling and hulls
# ---------------------------------------------------------------------------------------------
class NoDrawError(ValueError):
    """:func:`sample_vertices` found no draw with every point a hull vertex in ``max_tries`` (likely
    from ``k = 10`` with unequal norms): an outcome, not a bad argument; a :class:`ValueError` too.

    Examples
    --------
    >>> issubclass(NoDrawError, ValueError)
    True
    """


def sample_vertices(k: int, *, rng: V.SeedLike, equal_norm: bool = False, enforce_bijection: bool = False,
                    radius: float = 1.0, radial_range: tuple[float, float] = (0.4, 1.0),
                    max_tries: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """Random planar vertices exactly as the authors' figure scripts draw them.

    ``rng = numpy.random.default_rng(rng)``; per try ``theta = rng.uniform(0, 2 pi, k)``, then
    ``r = radius`` (``equal_norm``) or ``r = rng.uniform(*radial_range, k)``, and
    ``v = r (cos theta, sin theta)``. With ``enforce_bijection`` the draw is repeated in the same
    random stream (at most ``max_tries`` times) until all k points are hull vertices. With the
    defaults and ``rng=42`` this reproduces the polygons of the published Figures 1-4
    (the authors' scripts use seed 42).

    Parameters
    ----------
    k : int
        Number of points, k >= 3.
    rng : int, SeedSequence or numpy Generator (keyword-only)
    equal_norm : bool
        All points on the circle of radius ``radius`` (Figure 2 / Proposition 4.5 setting).
    enforce_bijection : bool
        Resample until the hull has exactly k vertices.
    radius : float
    radial_range : (float, float)
        Range of the uniform radii when ``equal_norm`` is False; 0 < low <= high.
    max_tries : int

    Returns
    -------
    points : ndarray (k, 2)
        The points in sampling order (their labels v_1..v_k are this order, 1-based).
    hull : ndarray of int
        Indices into ``points`` of the hull vertices in counter-clockwise order, starting where
        qhull starts (the published colour and ``i_target`` conventions use this order).

    Raises
    ------
    NoDrawError
        When no draw satisfies the bijection in ``max_tries`` tries (a subclass of ValueError:
        an outcome of the recipe, which callers may show as an empty panel).
    ValueError
        For k < 3, or a bad radius or radial range.
    TypeError
        For non-integer k or max_tries, or a bad rng.

    Examples
    --------
    >>> pts, hull = sample_vertices(7, rng=42, enforce_bijection=True)
    >>> pts.shape, sorted(hull.tolist()) == list(range(7))
    ((7, 2), True)
    """
    k = V.positive_int("k", k, minimum=3)
    max_tries = V.positive_int("max_tries", max_tries)
    rng = V.rng("rng", rng)
    radius = V.real_scalar("radius", radius, low=0.0, low_open=True)
    if not isinstance(radial_range, (tuple, list)) or len(radial_range) != 2:
        raise ValueError(f"radial_range must be a pair (low, high), got {radial_range!r}")
    lo = V.real_scalar("radial_range[0]", radial_range[0], low=0.0, low_open=True)
    hi = V.real_scalar("radial_range[1]", radial_range[1], low=lo)
    for _ in range(max_tries):
        theta = rng.uniform(0.0, 2.0 * np.pi, size=k)
        r = np.full(k, radius) if equal_norm else rng.uniform(lo, hi, size=k)
        pts = r[:, None] * np.c_[np.cos(theta), np.sin(theta)]
        hull = convex_hull(pts)
        if enforce_bijection and len(hull) != k:
            continue
        return pts, hull
    raise NoDrawError(f"no draw with {k} hull vertices in max_tries={max_tries} tries")


def convex_hull(points: npt.ArrayLike) -> np.ndarray:
    """Indices of the hull vertices of planar ``points``, counter-clockwise (qhull's start).

    Parameters
    ----------
    points : array (n, 2), n >= 3, not all collinear

    Returns
    -------
    ndarray of int, the hull vertices in counter-clockwise order.

    Raises
    ------
    ValueError
        Wrong shape, non-finite values, or a degenerate (collinear) point set.

    Examples
    --------
    >>> pts = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]])
    >>> idx = convex_hull(pts)
    >>> sorted(idx.tolist())   # the centre (index 4) is not a hull vertex
    [0, 1, 2, 3]
    >>> polygon_area(pts[idx])   # pts[idx] is the hull, here the unit square: area 1
    1.0
    """
    pts = V.as_float_array("points", points, ndim=2, last_dim=2)
    if len(pts) < 3:
        raise ValueError(f"points must hold at least 3 points, got {len(pts)}")
    try:
        idx = ConvexHull(pts).vertices
    except Exception as exc:  # qhull error on collinear input
        raise ValueError(f"points are degenerate (collinear or coincident): {exc}") from None
    idx = np.asarray(idx, dtype=int)
    if _signed_area(pts[idx]) < 0:  # qhull returns CCW in 2-D; keep the guarantee explicit
        idx = idx[::-1]
    return idx


# ---------------------------------------------------------------------------------------------
# Polygon helpers
# ---------------------------------------------------------------------------------------------
def _signed_area(P):
    if len(P) < 3:
        return 0.0
    x, y = P[:, 0], P[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y))


def _polygon(name: str, P: npt.ArrayLike, allow_empty: bool = True) -> np.ndarray:
    arr = V.as_float_array(name, P, ndim=2, last_dim=2, allow_empty=allow_empty) \
        if not (allow_empty and np.size(P) == 0) else _EMPTY
    return arr


def _ccw_polygon(name: str, P: npt.ArrayLike) -> np.ndarray:
    """A polygon that must list its corners counter-clockwise: a clockwise one (signed area
    negative beyond rounding) is refused by name, rather than silently giving empty
    intersections, no point inside and zero distances."""
    arr = _polygon(name, P)
    if len(arr) >= 3:
        extent = float(np.ptp(arr, axis=0).max())
        if _signed_area(arr) < -1e-12 * extent ** 2:
            raise ValueError(f"{name} must list its corners counter-clockwise (its signed area is negative); "
                             f"reverse it, e.g. {name}[::-1]")
    return arr


def polygon_area(polygon: npt.ArrayLike) -> float:
    """Area of a simple polygon (shoelace formula); 0 for fewer than 3 corners.

    Parameters
    ----------
    polygon : array (m, 2), corners in order (either orientation)

    Returns
    -------
    float >= 0

    Examples
    --------
    >>> square = [[0, 0], [1, 0], [1, 1], [0, 1]]
    >>> # unit square: area 1 in either orientation
    >>> polygon_area(square), polygon_area(square[::-1])
    (1.0, 1.0)
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> # regular hexagon, radius 1
    >>> bool(np.isclose(polygon_area(regular_polygon(6)), 3 * np.sqrt(3) / 2))
    True
    """
    return abs(_signed_area(_polygon("polygon", polygon)))


def polygon_centroid(polygon: npt.ArrayLike) -> np.ndarray:
    """Centroid (centre of mass) of a simple polygon with positive area.

    Raises
    ------
    ValueError
        If the polygon has zero area.

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> # symmetric polygon: the origin
    >>> np.round(polygon_centroid(regular_polygon(5)), 6) + 0.0
    array([0., 0.])
    >>> polygon_centroid([[0, 0], [3, 0], [0, 3]])   # triangle: the mean of its corners
    array([1., 1.])
    """
    P = _polygon("polygon", polygon)
    a = _signed_area(P)
    if len(P) < 3 or a == 0.0:
        raise ValueError("polygon must have positive area to have a centroid")
    x, y = P[:, 0], P[:, 1]
    xn, yn = np.roll(x, -1), np.roll(y, -1)
    cr = x * yn - xn * y
    return np.array([np.dot(x + xn, cr), np.dot(y + yn, cr)]) / (6.0 * a)


def is_convex(polygon: npt.ArrayLike, tol: float = 1e-12) -> bool:
    """True when the corners turn left (counter-clockwise convex) up to ``tol`` (relative).

    A polygon with fewer than 3 corners counts as convex (degenerate).

    Examples
    --------
    >>> square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]])
    >>> is_convex(square), is_convex(square[::-1])   # convex, but clockwise order fails
    (True, False)
    >>> # a dart: its corner (1, 0.5) turns right
    >>> is_convex([[0, 0], [2, 0], [1, 0.5], [1, 2]])
    False
    """
    P = _polygon("polygon", polygon)
    if len(P) < 3:
        return True
    e = np.roll(P, -1, axis=0) - P
    cross = e[:, 0] * np.roll(e[:, 1], -1) - e[:, 1] * np.roll(e[:, 0], -1)
    scale = max(1.0, float(np.abs(P).max())) ** 2
    return bool(np.all(cross >= -tol * scale))


def point_in_polygon(points: npt.ArrayLike, polygon: npt.ArrayLike, tol: float = 0.0) -> np.ndarray:
    """Mask of ``points`` (..., 2) lying in the closed convex CCW ``polygon`` (margin ``tol``).

    Examples
    --------
    >>> square = [[0, 0], [1, 0], [1, 1], [0, 1]]
    >>> # inside, on the boundary (closed), outside
    >>> point_in_polygon([[0.5, 0.5], [1.0, 0.5], [1.5, 0.5]], square)
    array([ True,  True, False])
    """
    X = V.as_float_array("points", points, min_ndim=1, last_dim=2, allow_empty=True)
    P = _ccw_polygon("polygon", polygon)
    if len(P) < 3:
        return np.zeros(X.shape[:-1], dtype=bool)
    e = np.roll(P, -1, axis=0) - P
    rel = X[..., None, :] - P
    cross = e[:, 0] * rel[..., 1] - e[:, 1] * rel[..., 0]
    return np.all(cross >= -tol * np.hypot(e[:, 0], e[:, 1]), axis=-1)


def _clip_one(P, a0, a1, b):
    """Sutherland-Hodgman step: convex polygon P (list of (x, y)) cap {a . x >= b}."""
    s = [a0 * x + a1 * y - b for x, y in P]
    if all(si >= 0.0 for si in s):
        return P
    out = []
    m = len(P)
    for i in range(m):
        p, sp = P[i], s[i]
        q, sq = P[(i + 1) % m], s[(i + 1) % m]
        if sp >= 0.0:
            out.append(p)
        if (sp >= 0.0) != (sq >= 0.0):
            t = sp / (sp - sq)
            pt = (p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1]))
            if not out or out[-1] != pt:
                out.append(pt)
    if len(out) > 1 and out[0] == out[-1]:
        out.pop()
    return out


def _clip_many(P, normals, offsets):
    poly = [tuple(p) for p in P.tolist()]
    for (a0, a1), b in zip(normals.tolist(), offsets.tolist()):
        if len(poly) < 3:
            return _EMPTY.copy()
        poly = _clip_one(poly, a0, a1, b)
    if len(poly) < 3:
        return _EMPTY.copy()
    P = np.array(poly, dtype=float)
    # drop repeated corners (a clipping line through a corner produces it twice)
    tol = 1e-14 * float(np.abs(P).max())  # relative: polygons at any scale
    keep = np.abs(P - np.roll(P, 1, axis=0)).max(axis=1) > tol
    P = P[keep] if keep.any() else P[:1]
    return P if len(P) >= 3 else _EMPTY.copy()


def clip_halfplanes(polygon: npt.ArrayLike, normals: npt.ArrayLike, offsets: npt.ArrayLike | None = None) -> np.ndarray:
    """Convex polygon intersected with the half-planes {x : <a_j, x> >= b_j}.

    Parameters
    ----------
    polygon : array (m, 2), convex, counter-clockwise
    normals : array (q, 2), the a_j
    offsets : array (q,), the b_j (default 0: half-planes through the origin)

    Returns
    -------
    ndarray (m', 2), convex, counter-clockwise; shape (0, 2) when the intersection has no area.

    Examples
    --------
    >>> # area 4, centred at the origin
    >>> square = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]])
    >>> # {x_1 >= 0} through the centre keeps half
    >>> polygon_area(clip_halfplanes(square, [[1, 0]]))
    2.0
    >>> # {x_1 >= 1/2} cap {x_2 >= 1/2}
    >>> clip_halfplanes(square, [[1, 0], [0, 1]], [0.5, 0.5])
    array([[1. , 0.5],
           [1. , 1. ],
           [0.5, 1. ],
           [0.5, 0.5]])
    >>> clip_halfplanes(square, [[1, 0]], [2.0]).shape   # {x_1 >= 2} misses the square
    (0, 2)
    """
    P = _ccw_polygon("polygon", polygon)
    A = V.as_float_array("normals", normals, ndim=2, last_dim=2, allow_empty=True)
    b = np.zeros(len(A)) if offsets is None else V.as_float_array("offsets", offsets, ndim=1,
                                                                    allow_empty=True)
    if len(b) != len(A):
        raise ValueError(f"offsets must have one entry per normal ({len(A)}), got {len(b)}")
    if len(P) < 3:
        return _EMPTY.copy()
    return _clip_many(P, A, b)


def _edge_halfplanes(P):
    """Inward unit normals n_e and offsets c_e with P = {x : <n_e, x> >= c_e} (P convex CCW)."""
    e = np.roll(P, -1, axis=0) - P
    length = np.hypot(e[:, 0], e[:, 1])
    keep = length > 0
    n = np.c_[-e[keep, 1], e[keep, 0]] / length[keep, None]
    return n, np.einsum("ij,ij->i", n, P[keep])


def polygon_intersection(P: npt.ArrayLike, Q: npt.ArrayLike) -> np.ndarray:
    """Intersection of two convex counter-clockwise polygons (shape (0, 2) if no area).

    Examples
    --------
    >>> square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]])
    >>> overlap = polygon_intersection(square, square + 0.5)   # the square [1/2, 1]^2
    >>> polygon_area(overlap)   # side 1/2: area 1/4
    0.25
    >>> polygon_intersection(square, square + 2).shape   # disjoint squares
    (0, 2)
    """
    P = _ccw_polygon("P", P)
    Q = _ccw_polygon("Q", Q)
    if len(P) < 3 or len(Q) < 3:
        return _EMPTY.copy()
    n, c = _edge_halfplanes(Q)
    return _clip_many(P, n, c)


def symmetric_difference_area(P: npt.ArrayLike, Q: npt.ArrayLike) -> float:
    """Area of the symmetric difference of two convex polygons: ``|P| + |Q| - 2 |P cap Q|``.

    Examples
    --------
    >>> square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]])
    >>> symmetric_difference_area(square, square + 0.5)   # 1 + 1 - 2 * 1/4
    1.5
    >>> symmetric_difference_area(square, square)   # a polygon against itself: 0
    0.0
    """
    return polygon_area(P) + polygon_area(Q) - 2.0 * polygon_area(polygon_intersection(P, Q))


# ---------------------------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------------------------
def _vertices_2d(vertices):
    v = V.as_float_array("vertices", vertices, ndim=2, last_dim=2)
    if len(v) < 3:
        raise ValueError(f"vertices must hold at least 3 points, got {len(v)}")
    if len(np.unique(v, axis=0)) < len(v):
        raise ValueError("vertices must be distinct points (two of them coincide)")
    return v


def _matrix(B: npt.ArrayLike | None, d: int, *, spd: bool = False) -> np.ndarray:
    """``B`` checked: symmetric always (the cells C_i(v) are the Frank-Wolfe oracle's, which needs
    ``B = B^T``), positive definite where ``spd`` (the B-Voronoi reading)."""
    if B is None:
        return np.eye(d)
    B = V.square_matrix("B", B, d, symmetric=True)
    if spd and np.linalg.eigvalsh(0.5 * (B + B.T)).min() <= 0:
        raise ValueError("B must be positive definite")
    return B


def _hull_polygon(v):
    try:
        return v[convex_hull(v)]
    except ValueError as exc:  # name the caller's argument, not convex_hull's
        raise ValueError(f"vertices {str(exc).splitlines()[0].removeprefix('points ')}") from None


FLAT_RATIO = 1e-12
"""Hulls with area < FLAT_RATIO * diameter^2 (thinner than about 1e-12 of their size) are refused by
the cell functions: their cells are slivers below rounding, and may come out empty although the
areas still add up."""


def _refuse_flat(K):
    """ValueError naming ``vertices`` when area(K) < FLAT_RATIO * diam(K)^2."""
    c = K - K.mean(axis=0)  # centred: the shoelace sum of a far-off sliver keeps its digits
    area = abs(_signed_area(c))
    diam2 = float(((c[:, None, :] - c[None, :, :]) ** 2).sum(-1).max())
    if not area >= FLAT_RATIO * diam2:
        raise ValueError(f"vertices are nearly collinear: their hull has area {area:.3g}, below "
                         f"{FLAT_RATIO:g} x its squared diameter {diam2:.3g}; its cells are not "
                         "resolved in floating point")


def _score_cells(v, W, offsets=None, hull=None):
    """K cap {x : <x, w_i - w_j> >= o_i - o_j ... } for every i (rows of W are the w_j)."""
    K = _hull_polygon(v) if hull is None else hull
    _refuse_flat(K)
    k = len(W)
    if offsets is None:
        return _cone_cells(K, W)
    out = []
    for i in range(k):
        others = np.arange(k) != i
        normals = W[i] - W[others]
        b = offsets[others] - offsets[i]
        out.append(_clip_many(K, normals, b))
    return out


def _cone_cells(K, W):
    """K cap {x : <x, w_i - w_j> >= 0 for all j}, for every i, with two clips per cell.

    The half-planes all pass through the origin, so their intersection is a cone whose
    directions form the intersection of half-circles centred at the normals' angles
    alpha_j: the arc [max_j alpha_j - pi/2, min_j alpha_j + pi/2] (angles unwrapped around
    one of them). It is bounded by the two extreme normals alone, so clipping K by those
    two gives the same polygon as clipping by all k - 1, in O(k) instead of O(k^2) clips.
    An arc of length zero or less (spread >= pi) is a ray or the origin: no area.
    """
    k = len(W)
    N = W[:, None, :] - W[None, :, :]  # N[i, j] = w_i - w_j
    ang = np.arctan2(N[..., 1], N[..., 0])
    ref = np.where(np.arange(k) == 0, 1, 0)  # a reference j != i for every row i
    rel = ang - ang[np.arange(k), ref][:, None]
    rel = (rel + np.pi) % (2 * np.pi) - np.pi  # in [-pi, pi)
    rel[np.arange(k), np.arange(k)] = np.nan
    hi = np.nanargmax(rel, axis=1)
    lo = np.nanargmin(rel, axis=1)
    spread = rel[np.arange(k), hi] - rel[np.arange(k), lo]
    out = []
    for i in range(k):
        if not spread[i] < np.pi:
            out.append(_EMPTY.copy())
            continue
        out.append(_clip_many(K, N[i, [hi[i], lo[i]]], np.zeros(2)))
    return out


def cells(vertices: npt.ArrayLike, B: npt.ArrayLike | None = None) -> list[np.ndarray]:
    """Exact cells C_i(v) = K cap {x : <Bx, v_i - v_j> >= 0 for all j} (eq: cells, section 4).

    K = conv(vertices). Each cell is K cut by the half-planes {x : <x, B^T (v_i - v_j)> >= 0},
    whose boundary lines pass through the origin. The cells are convex, have disjoint
    interiors for B positive definite and distinct vertices, and tile K (cells lemma, number
    unverified).

    Parameters
    ----------
    vertices : array (k, 2)
        The vertices v_1..v_k (usually the hull vertices in counter-clockwise order; cells[i]
        belongs to vertices[i]). Points that are not hull vertices are allowed.
    B : array (2, 2), optional
        Key-query matrix; identity by default. Symmetric (the Frank-Wolfe reading; a
        non-symmetric ``B`` is refused); the paper takes it positive definite, where the cells
        have disjoint interiors.

    Returns
    -------
    list of k arrays (m_i, 2): convex CCW polygons; shape (0, 2) for a cell without area.

    Raises
    ------
    ValueError, TypeError
        Bad shapes, non-finite values, fewer than 3 vertices, collinear vertices, or nearly
        collinear ones: a hull of area below ``FLAT_RATIO`` (1e-12) times its squared diameter.

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> v = regular_polygon(6)
    >>> areas = [polygon_area(c) for c in cells(v)]
    >>> np.round(areas, 6)   # B = I, regular hexagon: congruent cells of area sqrt(3)/4
    array([0.433013, 0.433013, 0.433013, 0.433013, 0.433013, 0.433013])
    >>> bool(np.isclose(sum(areas), polygon_area(v)))   # the cells tile the hull K
    True
    """
    v = _vertices_2d(vertices)
    B = _matrix(B, 2)
    return _score_cells(v, v @ B)  # row j: (B^T v_j)^T, <x, B^T v_j> = <Bx, v_j>


def unit_direction_cells(vertices: npt.ArrayLike) -> list[np.ndarray]:
    """Cells of the authors' "unit" labelling: ``argmax_j <x, v_j / |v_j|>`` over K (not C_i(v)!).

    This is what the published Figure 1 panels show (``normalize_inner_product=True`` in the
    authors' ``cells.py``; erratum E18). When the norms ``|v_j|`` differ these are cones of equal
    angular bisectors, not the cells C_i(v) of :func:`cells`; for equal norms they coincide.

    Parameters and returns as :func:`cells` (B = identity). Raises ValueError for a zero vertex
    and, as :func:`cells`, for (nearly) collinear vertices.

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> def gap(v):  # largest area where the unit labelling and C_i(v) disagree
    ...     return max(
    ...         symmetric_difference_area(a, b)
    ...         for a, b in zip(unit_direction_cells(v), cells(v))
    ...     )
    >>> round(gap(regular_polygon(5)), 9) + 0.0   # equal norms: the same cells
    0.0
    >>> # one vertex twice as long: not the same
    >>> round(gap(regular_polygon(4, phase=0.0) * [[2], [1], [1], [1]]), 6)
    0.266667
    """
    v = _vertices_2d(vertices)
    norms = np.hypot(v[:, 0], v[:, 1])
    if np.any(norms == 0):
        raise ValueError("vertices must be non-zero for the unit-direction labelling")
    return _score_cells(v, v / norms[:, None])


def voronoi_cells(vertices: npt.ArrayLike, B: npt.ArrayLike | None = None) -> list[np.ndarray]:
    """Vor_B(v_i) cap K with ||z||_B^2 = <Bz, z>, comparing against the vertices only (E13).

    ``Vor_B(v_i) = {x : ||x - v_i||_B <= ||x - v_j||_B for all j}
    = {x : <x, B(v_i - v_j)> >= (<Bv_i, v_i> - <Bv_j, v_j>) / 2}``.
    Proposition 4.5: if all <Bv_i, v_i> are equal these coincide with :func:`cells`.

    Parameters
    ----------
    vertices : array (k, 2)
    B : array (2, 2), symmetric positive definite (identity by default)

    Returns
    -------
    list of k convex CCW polygons (shape (0, 2) when empty).

    Raises
    ------
    ValueError
        B not symmetric or not positive definite; bad vertices, including (nearly) collinear
        ones as in :func:`cells`.

    Examples
    --------
    >>> pts, hull = sample_vertices(6, rng=42, enforce_bijection=True)   # unequal norms
    >>> v = pts[hull]
    >>> vor = voronoi_cells(v)
    >>> # they tile K
    >>> bool(np.isclose(sum(polygon_area(c) for c in vor), polygon_area(v)))
    True
    >>> # v_i lies in its own Voronoi cell
    >>> bool(all(point_in_polygon(v[i], vor[i]) for i in range(len(v))))
    True
    """
    v = _vertices_2d(vertices)
    B = _matrix(B, 2, spd=True)
    q = np.einsum("ij,jk,ik->i", v, B, v)
    return _score_cells(v, v @ B, offsets=-0.5 * q)


def voronoi_mismatch(vertices: npt.ArrayLike, B: npt.ArrayLike | None = None) -> float:
    """Largest area of C_i(v) symmetric-difference (Vor_B(v_i) cap K) over i (0 under Prop 4.5).

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> # B = I, equal norms: 0 (Proposition 4.5)
    >>> round(voronoi_mismatch(regular_polygon(7)), 9) + 0.0
    0.0
    >>> pts, hull = sample_vertices(6, rng=42, enforce_bijection=True)
    >>> # unequal norms: the cells are not Voronoi cells
    >>> bool(voronoi_mismatch(pts[hull]) > 0.1)
    True
    """
    c = cells(vertices, B)
    vor = voronoi_cells(vertices, B)
    return max(symmetric_difference_area(a, b) for a, b in zip(c, vor))


def level_set_vertices(directions: npt.ArrayLike, B: npt.ArrayLike, c: float = 1.0) -> np.ndarray:
    """Map directions on the unit circle onto the level set {1/2 <Bx, x> = c/2}: x = sqrt(c) B^{-1/2} u.

    This is the map the authors' ``quadratic.py`` applies (Figure 3), with
    B^{-1/2} the symmetric inverse square root.

    Parameters
    ----------
    directions : array (k, d), unit vectors
    B : array (d, d), symmetric positive definite
    c : float > 0

    Returns
    -------
    ndarray (k, d) with 1/2 <B x_i, x_i> = c/2 |u_i|^2.

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> B = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> X = level_set_vertices(regular_polygon(5), B, c=2.0)
    >>> np.round(np.einsum("ij,jk,ik->i", X, B, X), 6)   # <Bx_i, x_i> = c for unit u_i
    array([2., 2., 2., 2., 2.])
    >>> # equal B-norms: cells are B-Voronoi cells (Proposition 4.5)
    >>> round(voronoi_mismatch(X, B), 9) + 0.0
    0.0
    """
    U = V.as_float_array("directions", directions, ndim=2)
    B = _matrix(B, U.shape[1], spd=True)
    c = V.real_scalar("c", c, low=0.0, low_open=True)
    w, Q = np.linalg.eigh(0.5 * (B + B.T))
    inv_sqrt = (Q / np.sqrt(w)) @ Q.T
    return np.sqrt(c) * U @ inv_sqrt.T


# ---------------------------------------------------------------------------------------------
# Cones of section 5 and erosion
# ---------------------------------------------------------------------------------------------
def cone(vertices: npt.ArrayLike, i: int, eta: float, B: npt.ArrayLike | None = None) -> np.ndarray:
    """Strict dominance cone I_i(eta) = {x in K : <Bx, v_i - v_j> >= eta for all j != i} (section 5).

    The strict inequality "> eta" of the authors' script has the same closure, which is what a
    polygon records. For eta = 0 this is the cell C_i(v).

    Parameters
    ----------
    vertices : array (k, 2)
    i : int
        Index into ``vertices`` (0-based).
    eta : float >= 0
    B : array (2, 2), optional (identity in section 5)

    Returns
    -------
    ndarray (m, 2) convex CCW polygon, shape (0, 2) if empty.

    Raises
    ------
    ValueError
        i out of range, eta negative, bad vertices.

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> v = regular_polygon(4, phase=0.0)   # the square |x_1| + |x_2| <= 1, v_1 = (1, 0)
    >>> # eta = 0: the cell C_1(v)
    >>> round(symmetric_difference_area(cone(v, 0, 0.0), cells(v)[0]), 9) + 0.0
    0.0
    >>> round(polygon_area(cone(v, 0, 0.5)), 6)   # here area (1 - eta)^2 / 2
    0.125
    """
    v = _vertices_2d(vertices)
    i = V.positive_int("i", i, minimum=0)
    if i >= len(v):
        raise ValueError(f"i must be < the number of vertices ({len(v)}), got {i}")
    eta = V.real_scalar("eta", eta, low=0.0)
    B = _matrix(B, 2)
    W = v @ B
    others = np.arange(len(v)) != i
    return _clip_many(_hull_polygon(v), W[i] - W[others], np.full(others.sum(), eta))


def erode(polygon: npt.ArrayLike, delta: float) -> np.ndarray:
    """Erosion P ominus delta B_1 = {x : x + delta B_1 subset P} of a convex polygon, exactly.

    For a convex polygon this is the intersection of its edge half-planes, each moved inward
    by ``delta``; the corners of the result are exact intersections of shifted edges.

    Parameters
    ----------
    polygon : array (m, 2), convex, counter-clockwise
    delta : float >= 0

    Returns
    -------
    ndarray (m', 2), convex CCW; shape (0, 2) when nothing of positive area is left.

    Examples
    --------
    >>> square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]])
    >>> erode(square, 0.25)   # the square [1/4, 3/4]^2
    array([[0.25, 0.25],
           [0.75, 0.25],
           [0.75, 0.75],
           [0.25, 0.75]])
    >>> # the inradius is 1/2: nothing of positive area is left
    >>> erode(square, 0.5).shape
    (0, 2)
    """
    P = _ccw_polygon("polygon", polygon)
    delta = V.real_scalar("delta", delta, low=0.0)
    if len(P) < 3:
        return _EMPTY.copy()
    n, c = _edge_halfplanes(P)
    return _clip_many(P, n, c + delta)


def distance_to_complement(points: npt.ArrayLike, polygon: npt.ArrayLike) -> np.ndarray:
    """Distance from each point to the complement of a convex counter-clockwise polygon, by brute force over edges.

    Returns the Euclidean distance to the nearest boundary segment for points inside the closed
    polygon and 0 outside (used to check :func:`erode` independently of its construction).

    Examples
    --------
    >>> square = [[0, 0], [1, 0], [1, 1], [0, 1]]
    >>> # centre: half the side; outside: 0
    >>> distance_to_complement([[0.5, 0.5], [0.25, 0.5], [2.0, 2.0]], square)
    array([0.5 , 0.25, 0.  ])
    """
    X = V.as_float_array("points", points, ndim=2, last_dim=2)
    P = _ccw_polygon("polygon", polygon)
    a, b = P, np.roll(P, -1, axis=0)
    ab = b - a
    t = np.einsum("nmj,mj->nm", X[:, None, :] - a, ab) / np.maximum(np.einsum("mj,mj->m", ab, ab), 1e-300)
    t = np.clip(t, 0.0, 1.0)
    closest = a + t[..., None] * ab
    d = np.sqrt(((X[:, None, :] - closest) ** 2).sum(-1)).min(axis=1)
    return np.where(point_in_polygon(X, P), d, 0.0)


# ---------------------------------------------------------------------------------------------
# Any dimension
# ---------------------------------------------------------------------------------------------
def cell_labels(x: npt.ArrayLike, vertices: npt.ArrayLike, B: npt.ArrayLike | None = None) -> np.ndarray:
    """Label of the cell containing each point: argmax_j <Bx, v_j> (hardmax leader, eq: cells).

    Parameters
    ----------
    x : array (..., d), points
    vertices : array (k, d) or (R, k, d) (then x must be (R, ..., d))
    B : array (d, d), optional (identity)

    Returns
    -------
    int array
        Of shape ``x.shape[:-1]``; ties go to the smallest index (a boundary point of several
        cells).

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> v = regular_polygon(5)
    >>> cell_labels(v, v)   # B = I, equal norms: every vertex leads its own cell
    array([0, 1, 2, 3, 4])
    >>> # the origin is on every cell: the tie goes to index 0
    >>> int(cell_labels(np.zeros(2), v))
    0
    >>> cell_labels(2 * np.eye(3), np.eye(3)).tolist()   # any dimension d (here 3)
    [0, 1, 2]
    """
    X = V.as_float_array("x", x, min_ndim=1)
    v = V.as_float_array("vertices", vertices, min_ndim=2, max_ndim=3)
    d = v.shape[-1]
    if X.shape[-1] != d:
        raise ValueError(f"x must have last dimension {d} (that of vertices), got {X.shape}")
    W = v if B is None else v @ _matrix(B, d)  # <Bx, v_j> = <x, B^T v_j>
    if v.ndim == 2:
        return np.argmax(X @ W.T, axis=-1)
    if X.ndim < 2 or X.shape[0] != v.shape[0]:
        raise ValueError(f"x must start with the batch size {v.shape[0]} of vertices, got {X.shape}")
    flat = X.reshape(X.shape[0], -1, d)
    return np.argmax(flat @ np.swapaxes(W, -1, -2), axis=-1).reshape(X.shape[:-1])


def unit_direction_labels(x: npt.ArrayLike, vertices: npt.ArrayLike) -> np.ndarray:
    """The authors' "unit" labels ``argmax_j <x, v_j / |v_j|>`` (published Figure 1, E18); any d.

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> # v_1 = (3, 0), three times longer
    >>> v = regular_polygon(4, phase=0.0) * [[3], [1], [1], [1]]
    >>> x = [0.3, 0.5]
    >>> # unit labels ignore the norms, C_i(v) does not
    >>> int(unit_direction_labels(x, v)), int(cell_labels(x, v))
    (1, 0)
    """
    v = V.as_float_array("vertices", vertices, ndim=2)
    n = np.linalg.norm(v, axis=1)
    if np.any(n == 0):
        raise ValueError("vertices must be non-zero for the unit-direction labelling")
    return cell_labels(x, v / n[:, None])


def owns_cell(vertices: npt.ArrayLike, B: npt.ArrayLike | None = None) -> np.ndarray:
    """Whether each vertex owns its cell: <Bv_i, v_i> > <Bv_i, v_j> for all j != i (section 4.3).

    Strict, as the genericity condition of Theorem 4.2 needs (eq: vertices.own.cell; E14).
    Vectorised over a batch of configurations, for the Monte Carlo of Remark 4.6.

    Parameters
    ----------
    vertices : array (k, d) or (R, k, d), k >= 2
    B : array (d, d), optional (identity)

    Returns
    -------
    bool array (k,) or (R, k).

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> # regular polygon, B = I: every vertex owns its cell
    >>> owns_cell(regular_polygon(7))
    array([ True,  True,  True,  True,  True,  True,  True])
    >>> # a hull vertex near 0: <v_4, v_1> > |v_4|^2
    >>> owns_cell([[1, 0], [0, 1], [-1, 0], [0.2, -0.1]])
    array([ True,  True,  True, False])
    >>> # a batch (R, k, d)
    >>> owns_cell(np.stack([regular_polygon(3), regular_polygon(3, phase=0.0)])).shape
    (2, 3)
    """
    v = V.as_float_array("vertices", vertices, min_ndim=2, max_ndim=3)
    if v.shape[-2] < 2:
        raise ValueError(f"vertices must hold at least 2 points, got shape {v.shape}")
    Bv = v if B is None else v @ _matrix(B, v.shape[-1]).T  # no d x d identity product in high d
    G = Bv @ np.swapaxes(v, -1, -2)  # G[i, j] = <B v_i, v_j>
    diag = np.diagonal(G, axis1=-2, axis2=-1)
    k = v.shape[-2]
    off = np.where(np.eye(k, dtype=bool), -np.inf, G)
    return diag > off.max(axis=-1)


def neighbour_condition(hull_vertices: npt.ArrayLike, B: npt.ArrayLike | None = None, strict: bool = True) -> np.ndarray:
    """Polygon condition of the remark on the polytope condition (number unverified; E14).

    For a convex polygon with vertices in cyclic order, v_i passes when
    <Bv_i, w - v_i> < 0 for both hull neighbours w and for w = 0. With ``strict=True`` this is
    equivalent to :func:`owns_cell` (a linear functional attains a unique maximum over a
    polytope at v_i iff it beats all neighbours). ``strict=False`` is the printed, non-strict
    version, which is NOT equivalent (it accepts ties).

    Parameters
    ----------
    hull_vertices : array (k, 2), vertices of a convex polygon in cyclic order
    B : array (2, 2), optional

    Returns
    -------
    bool array (k,)

    Examples
    --------
    >>> v = [[1, 0], [1, 1], [-1, 0], [0, -1]]   # <v_1, v_2 - v_1> = 0: a tie at v_1
    >>> neighbour_condition(v), owns_cell(v)   # strict: the same answer as owns_cell
    (array([False,  True,  True,  True]), array([False,  True,  True,  True]))
    >>> # the printed, non-strict version accepts the tie
    >>> neighbour_condition(v, strict=False)
    array([ True,  True,  True,  True])
    """
    v = _vertices_2d(hull_vertices)
    B = _matrix(B, 2)
    Bv = v @ B.T
    g = []
    for w in (np.roll(v, 1, axis=0), np.roll(v, -1, axis=0), np.zeros_like(v)):
        g.append(np.einsum("ij,ij->i", Bv, w - v))
    G = np.array(g)
    return np.all(G < 0, axis=0) if strict else np.all(G <= 0, axis=0)


# ---------------------------------------------------------------------------------------------
# The published raster approach (benchmark reference)
# ---------------------------------------------------------------------------------------------
class RasterCells(NamedTuple):
    """Result of :func:`raster_cells`.

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> v = regular_polygon(6)
    >>> r = raster_cells(v, n=41, hulls=False)
    >>> # (n, n); the padded corner is outside K: -1
    >>> r.labels.shape, int(r.labels[0, 0])
    ((41, 41), -1)
    >>> # labels[row, col] is at (xs[col], ys[row])
    >>> int(r.labels[30, 20]) == int(cell_labels([r.xs[20], r.ys[30]], v))
    True
    """
    xs: np.ndarray          # (n,) grid abscissae
    ys: np.ndarray          # (n,) grid ordinates
    labels: np.ndarray      # (n, n) int, argmax label, -1 outside K; labels[r, c] at (xs[c], ys[r])
    polygons: list          # per vertex: convex hull of its grid points ((0, 2) if < 3 points)


def raster_cells(vertices: npt.ArrayLike, B: npt.ArrayLike | None = None, n: int = 1000, pad: float = 0.1,
                 hulls: bool = True) -> RasterCells:
    """Cells the way the published scripts compute them: an n x n grid and an argmax.

    The grid spans the bounding box of K padded by ``pad``; points inside K (matplotlib
    ``Path.contains_points``) get argmax_j <Bx, v_j>, others -1; each cell is then drawn as the
    convex hull of its grid points (``hulls=True``). Approximate to about one grid spacing;
    kept only as the reference for the exact :func:`cells` in ``make bench``.

    Returns
    -------
    RasterCells

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> v = regular_polygon(6)
    >>> r, exact = raster_cells(v, n=101), cells(v)
    >>> # hull of grid points: inside C_i
    >>> all(
    ...     bool(point_in_polygon(p, c, tol=1e-9).all())
    ...     for p, c in zip(r.polygons, exact)
    ... )
    True
    >>> # about a grid spacing short
    >>> bool(
    ...     all(
    ...         0.9 < polygon_area(p) / polygon_area(c) < 1
    ...         for p, c in zip(r.polygons, exact)
    ...     )
    ... )
    True
    """
    v = _vertices_2d(vertices)
    n = V.positive_int("n", n, minimum=2)
    pad = V.real_scalar("pad", pad, low=0.0)
    B = _matrix(B, 2)
    K = _hull_polygon(v)
    lo, hi = K.min(axis=0) - pad, K.max(axis=0) + pad
    xs, ys = np.linspace(lo[0], hi[0], n), np.linspace(lo[1], hi[1], n)
    xx, yy = np.meshgrid(xs, ys)
    grid = np.c_[xx.ravel(), yy.ravel()]
    from matplotlib.path import Path      # the published scripts' test; matplotlib only here (the plot extra)

    inside = Path(K).contains_points(grid)
    labels = np.argmax(grid @ (v @ B).T, axis=1)
    labels[~inside] = -1
    polys = []
    if hulls:
        for i in range(len(v)):
            pts = grid[labels == i]
            try:
                polys.append(pts[ConvexHull(pts).vertices])
            except Exception:
                polys.append(_EMPTY.copy())
    return RasterCells(xs, ys, labels.reshape(n, n), polys)
