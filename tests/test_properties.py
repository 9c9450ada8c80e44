"""Property-based tests (hypothesis) on random and near-degenerate input.

Geometry: for random polygons, nearly collinear point sets, nearly coincident vertices and
scales from 1e-15 to 1e12, the exact cells C_i(v) are finite convex polygons inside K that tile
K (areas sum to area(K); every sample point of K lies in some cell; the hardmax label of a
point lies in the cell of that label; for point sets thinner than 1e-6 of their size, only the
area identity and containment). Inputs that are degenerate for floating point (qhull
cannot build a 2-D hull, or the hull's area is below 1e-12 times its squared diameter) must be
refused with a ValueError naming ``vertices``, never answered with NaN.

Dynamics: for beta in [0, 1e6], coincident tokens, ties and coordinates from 1e-6 to 1e6, the
attention weights are finite and row-stochastic and every step of (SA-inf), (SA-beta), (SAP)
and (1.3) with V = I (a convex combination then) stays finite and inside the bounding box of
the tokens.

Examples are derandomised (fixed seed) so a failure reproduces.
"""
from __future__ import annotations

import numpy as np
import pytest
import shapely
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from attention_fw.model import dynamics as D
from attention_fw.geometry import planar as G

SETTINGS = dict(derandomize=True, deadline=None, max_examples=120,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# ------------------------------------------------------------------------------ strategies
unit = st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False)
scales = st.sampled_from([1e-6, 1e-3, 1.0, 1e3, 1e6])
geo_scales = st.sampled_from([1e-15, 1e-9, 1e-6, 1e-3, 1.0, 1e3, 1e6, 1e12])


@st.composite
def polygons(draw):
    """(vertices, kind): random, nearly collinear, nearly duplicate, or on a circle; any scale."""
    kind = draw(st.sampled_from(["random", "collinear", "duplicate", "circle", "thin"]))
    k = draw(st.integers(3, 12))
    scale = draw(geo_scales)
    shift = np.array([draw(st.floats(-0.5, 0.5)), draw(st.floats(-0.5, 0.5))])
    if kind == "random":
        P = np.array([[draw(unit), draw(unit)] for _ in range(k)])
    elif kind == "circle":
        th = np.sort(np.array([draw(st.floats(0.0, 2 * np.pi, exclude_max=True)) for _ in range(k)]))
        P = np.c_[np.cos(th), np.sin(th)]
    elif kind == "collinear":
        t = np.array([draw(unit) for _ in range(k)])
        d = np.array([draw(unit), draw(unit)])
        assume(np.hypot(*d) > 0.1)
        eta = draw(st.sampled_from([1e-12, 1e-9, 1e-6, 1e-3]))
        noise = np.array([draw(unit) for _ in range(k)])
        P = t[:, None] * d + eta * noise[:, None] * np.array([-d[1], d[0]])
    elif kind == "thin":  # a long thin triangle-like polygon
        t = np.array([draw(unit) for _ in range(k)])
        P = np.c_[t, 1e-4 * np.array([draw(unit) for _ in range(k)])]
    else:  # duplicate: a random polygon with one vertex repeated up to a tiny offset
        P = np.array([[draw(unit), draw(unit)] for _ in range(k - 1)])
        j = draw(st.integers(0, k - 2))
        off = draw(st.sampled_from([1e-13, 1e-10, 1e-7]))
        P = np.vstack([P, P[j] + off * np.array([draw(unit), draw(unit)])])
    return (P + shift) * scale, kind


def _nearly_degenerate(v, rel=1e-6):
    """Independent check: nearly coincident points or nearly collinear (relative to the span)."""
    c = v - v.mean(axis=0)
    span = np.abs(c).max()
    if span == 0:
        return True
    sv = np.linalg.svd(c / span, compute_uv=False)
    dist = np.sqrt(((v[:, None, :] - v[None, :, :]) ** 2).sum(-1)) / span
    np.fill_diagonal(dist, np.inf)
    return bool(sv[-1] < rel or dist.min() < rel)


def _area(P):
    return G.polygon_area(P) if len(P) >= 3 else 0.0


def _flatness(v):
    """Independent area(conv v) / diam(v)^2 (GEOS hull via shapely, centred coordinates)."""
    c = v - v.mean(axis=0)
    hull = shapely.convex_hull(shapely.multipoints(c))
    diam2 = ((c[:, None, :] - c[None, :, :]) ** 2).sum(-1).max()
    return shapely.area(hull) / diam2 if diam2 > 0 else 0.0


# ------------------------------------------------------------------------------ geometry
@settings(**SETTINGS)
@given(polygons())
def test_cells_tile_the_hull_and_never_give_nan(case):
    v, kind = case
    flat = _flatness(v)
    if flat < 0.5 * G.FLAT_RATIO:
        # thinner than about 1e-12 of its size: the cells would be slivers below rounding
        # (some empty although the areas add up); all three cell functions must refuse
        for fn in (G.cells, G.unit_direction_cells, G.voronoi_cells):
            with pytest.raises(ValueError, match=r"^vertices"):
                fn(v)
        return
    try:
        cells = G.cells(v)
    except ValueError as exc:
        assert flat <= 2 * G.FLAT_RATIO or "nearly collinear" not in str(exc), (flat, str(exc))
        # Allowed only for point sets that are degenerate for floating point, with a message
        # naming the argument.
        assert "vertices" in str(exc), str(exc)
        assert _nearly_degenerate(v), f"{kind} polygon refused: {exc}"
        return
    K = v[G.convex_hull(v)]
    aK = _area(K)
    assert np.isfinite(aK) and aK > 0
    assert len(cells) == len(v)
    areas = np.array([_area(c) for c in cells])
    for c in cells:
        assert np.all(np.isfinite(c)), "NaN or inf in a cell"
        if len(c) >= 3:
            assert G.is_convex(c, tol=1e-9)
    # Tiling, part 1: the areas add up to area(K) (relative to area(K) and to the scale of the
    # corners, since each clipped corner carries a rounding error of order eps * |v|).
    span = np.abs(v).max()
    tol = 1e-9 * aK + 1e-12 * span * span * len(v)
    assert abs(areas.sum() - aK) <= tol, (areas.sum(), aK)
    if _nearly_degenerate(v):
        # K is thinner than 1e-6 of its size: corners of cells closer than rounding merge and
        # slivers of no measurable area may vanish. Require the measure-theoretic tiling above
        # (areas) and cells inside K, not set coverage.
        for c in cells:
            if len(c) >= 3:
                assert np.all(G.point_in_polygon(c, K, tol=1e-9 * span))
        return
    # Tiling, part 2: every cell lies in K and every point of K lies in some cell. Membership
    # is measured independently of the library, as the Euclidean distance from the point to
    # the polygon (GEOS via shapely; 0 inside), so it does not depend on how the library
    # orders or cleans corners.
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(len(K)), size=200)
    pts = w @ K
    gpts = shapely.points(pts)
    tol_d = 1e-9 * span
    dist = np.full(len(pts), np.inf)
    owner = {}
    for i, c in enumerate(cells):
        if len(c) >= 3:
            assert np.all(G.point_in_polygon(c, K, tol=tol_d))
            with np.errstate(all="ignore"):  # GEOS on subnormal coordinates (a reference tool)
                di = shapely.distance(shapely.Polygon(c), gpts)
            di = np.where(np.isnan(di), np.where(G.point_in_polygon(pts, c, tol=tol_d), 0.0, np.inf), di)
            owner[i] = di
            dist = np.minimum(dist, di)
    assert np.all(dist <= tol_d), f"{(dist > tol_d).sum()} points of K in no cell"
    # Labels: the hardmax leader of a point owns a cell that contains it, for the points whose
    # leader is decided beyond rounding (score margin above 1e-12 |x| max|v|).
    lab = G.cell_labels(pts, v)
    sc = np.sort(pts @ v.T, axis=1)
    clear = (sc[:, -1] - sc[:, -2]) > 1e-12 * np.linalg.norm(pts, axis=1) * np.linalg.norm(v, axis=1).max()
    for i in np.unique(lab[clear]):
        assert i in owner, f"cell {i} is empty but leads some point of K"
        assert np.all(owner[i][(lab == i) & clear] <= tol_d)


@settings(**SETTINGS)
@given(polygons(), st.floats(0.0, 0.2), st.floats(0.0, 0.1))
def test_cone_and_erosion_finite_and_nested(case, eta, delta):
    v, kind = case
    try:
        K = v[G.convex_hull(v)]
    except ValueError:
        return
    span = np.abs(v).max()
    C = G.cone(K, 0, eta * span * span)        # eta scales like <x, v>
    assert np.all(np.isfinite(C))
    E = G.erode(C, delta * span) if len(C) >= 3 else C
    assert np.all(np.isfinite(E))
    assert _area(E) <= _area(C) * (1 + 1e-9) + 1e-12 * span * span
    assert _area(C) <= _area(K) * (1 + 1e-9) + 1e-12 * span * span
    if len(E) >= 3:
        assert np.all(G.point_in_polygon(E, C, tol=1e-9 * span))


# ------------------------------------------------------------------------------ dynamics
@st.composite
def token_sets(draw):
    R = draw(st.sampled_from([None, 1, 3]))
    n = draw(st.integers(1, 7))
    d = draw(st.integers(1, 3))
    scale = draw(scales)
    shape = (n, d) if R is None else (R, n, d)
    x = np.array([draw(unit) for _ in range(int(np.prod(shape)))]).reshape(shape) * scale
    if n >= 2 and draw(st.booleans()):       # coincident tokens (ties in the hardmax)
        x[..., 1, :] = x[..., 0, :]
    if draw(st.booleans()):                  # symmetric configuration (exact score ties)
        x[..., -1, :] = -x[..., 0, :]
    return x


betas = st.one_of(st.sampled_from([0.0, 1e-12, 1.0, 1e3, 1e6]), st.floats(0.0, 1e6))
gammas = st.one_of(st.sampled_from([1e-9, 0.5, 1.0]), st.floats(1e-6, 1.0))


def _in_box(y, x):
    lo = x.min(axis=-2, keepdims=True)
    hi = x.max(axis=-2, keepdims=True)
    tol = 1e-12 * (np.abs(x).max() + 1e-300) * 8
    return np.all(y >= lo - tol) and np.all(y <= hi + tol)


@settings(**SETTINGS)
@given(token_sets(), betas)
def test_attention_is_finite_and_row_stochastic(x, beta):
    for b in (beta, np.inf):
        A = D.attention(x, beta=b)
        assert np.all(np.isfinite(A))
        assert np.all(A >= 0)
        np.testing.assert_allclose(A.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@settings(**SETTINGS)
@given(token_sets(), betas, gammas)
def test_steps_never_nan_and_stay_in_the_hull_box(x, beta, gamma):
    outs = {
        "softmax": D.softmax_step(x, gamma, beta),
        "hardmax": D.hardmax_step(x, gamma),
        "sap": D.sap_step(x, gamma, beta, rng=np.random.default_rng(1)),
        "layer": D.layer_step(x, beta, np.eye(x.shape[-1]), np.eye(x.shape[-1])),
    }
    for name, y in outs.items():
        assert y.shape == x.shape, name
        assert np.all(np.isfinite(y)), f"{name}: NaN or inf at beta={beta}"
        assert _in_box(y, x), f"{name} left the convex hull of the tokens"


@settings(**SETTINGS)
@given(token_sets(), betas, gammas)
def test_softmax_step_equals_the_attention_average(x, beta, gamma):
    """The fast path of softmax_step gives x + gamma (A x - x) with A from ``attention``."""
    A = D.attention(x, beta=beta)
    ref = x + gamma * (A @ x - x)
    # Conditioning: rounding beta <x_i, x_j> perturbs each weight by a relative
    # ~ eps beta max|S|, whichever way the same formula is evaluated.
    xs = np.abs(x).max()
    cond = np.finfo(float).eps * beta * xs * xs * x.shape[-1]
    np.testing.assert_allclose(D.softmax_step(x, gamma, beta), ref, rtol=1e-9,
                               atol=(1e-9 + 8 * cond) * xs)


@pytest.mark.parametrize("B", [np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([[1.0, 3.0], [-1.0, 0.5]])])
def test_softmax_step_with_B_matches_attention_at_large_beta(B):
    rng = np.random.default_rng(3)
    for scale in (1e-3, 1.0, 10.0, 1e3, 1e6):   # beta |S| from 1e-6 to 1e18: both shift branches
        x = rng.standard_normal((5, 6, 2)) * scale
        for beta in (0.0, 1e-3, 1.0, 50.0, 1e3, 1e6):
            A = D.attention(x, beta, B)
            y = D.softmax_step(x, 0.3, beta, B)
            assert np.all(np.isfinite(y))
            cond = np.finfo(float).eps * beta * scale * scale * 40
            np.testing.assert_allclose(y, x + 0.3 * (A @ x - x), rtol=1e-10, atol=(1e-12 + cond) * scale)


@settings(**SETTINGS)
@given(token_sets(), gammas)
def test_hardmax_step_equals_the_hardmax_attention_average(x, gamma):
    """The mask-and-count path of hardmax_step picks the same leaders as attention(beta=inf)."""
    A = D.attention(x, beta=np.inf)
    ref = x + gamma * (A @ x - x)
    np.testing.assert_allclose(D.hardmax_step(x, gamma), ref, rtol=1e-12, atol=1e-12 * np.abs(x).max())
    B = np.diag(np.arange(1.0, x.shape[-1] + 1.0))
    A = D.attention(x, np.inf, B)
    np.testing.assert_allclose(D.hardmax_step(x, gamma, B), x + gamma * (A @ x - x), rtol=1e-12,
                               atol=1e-12 * np.abs(x).max())
