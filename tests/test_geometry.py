"""Exact cells, Voronoi cells, cones and erosion: properties of the mathematics."""
import numpy as np
import pytest
import shapely
from matplotlib.path import Path
from scipy.spatial import ConvexHull

from attention_fw.geometry import planar as g


def _random_spd(rng, d=2):
    A = rng.normal(size=(d, d))
    return A @ A.T + 0.3 * np.eye(d)


def _configs():
    """A spread of polygons: published recipes and random point clouds with random SPD B."""
    out = []
    for k in (3, 5, 7, 9, 10, 12):
        for eq in ((False, True) if k <= 10 else (True,)):
            pts, hull = g.sample_vertices(k, rng=42, equal_norm=eq, enforce_bijection=True)
            out.append((pts[hull], None))
    rng = np.random.default_rng(0)
    for _ in range(12):
        pts = rng.normal(size=(int(rng.integers(3, 15)), 2)) + rng.normal(scale=0.5, size=2)
        K = pts[g.convex_hull(pts)]
        out.append((K, _random_spd(rng)))
    return out


CONFIGS = _configs()


# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [5, 7, 9, 10])
def test_sampling_follows_the_authors_recipe_with_resampling_in_one_stream(k):
    pts, hull = g.sample_vertices(k, rng=42, equal_norm=False, enforce_bijection=True)
    rng = np.random.default_rng(42)
    for tries in range(500):  # the recipe, restated: angles then radii, same stream
        theta = rng.uniform(0, 2 * np.pi, k)
        r = rng.uniform(0.4, 1.0, k)
        cand = r[:, None] * np.c_[np.cos(theta), np.sin(theta)]
        if len(ConvexHull(cand).vertices) == k:
            break
    np.testing.assert_array_equal(pts, cand)
    np.testing.assert_array_equal(hull, ConvexHull(cand).vertices)


def test_equal_norm_sampling_is_on_the_circle_and_hull_is_ccw():
    pts, hull = g.sample_vertices(7, rng=42, equal_norm=True)
    np.testing.assert_allclose(np.hypot(*pts.T), 1.0, rtol=0, atol=1e-15)
    K = pts[hull]
    x, y = K.T
    assert 0.5 * np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y) > 0


def test_sampling_rejects_bad_input():
    with pytest.raises(ValueError, match="k"):
        g.sample_vertices(2, rng=0)
    with pytest.raises(TypeError, match="k"):
        g.sample_vertices(5.0, rng=0)
    with pytest.raises(ValueError, match="max_tries"):
        g.sample_vertices(40, enforce_bijection=True, max_tries=2, rng=0)
    with pytest.raises(ValueError, match="radial_range") as bad:
        g.sample_vertices(5, radial_range=(0.0, 1.0), rng=0)
    assert not isinstance(bad.value, g.NoDrawError)          # a bad argument is not "no draw"


def test_no_draw_is_its_own_error_and_a_value_error():
    """An impossible request (40 points all on the hull in 2 tries) raises the dedicated NoDrawError,
    a ValueError (callers draw an empty panel by catching the class, not by matching the message)."""
    with pytest.raises(g.NoDrawError, match="no draw with 40 hull vertices in max_tries=2 tries") as err:
        g.sample_vertices(40, enforce_bijection=True, max_tries=2, rng=0)
    assert isinstance(err.value, ValueError) and "NoDrawError" in g.__all__
    # the same recipe without the bijection returns its first draw
    pts, hull = g.sample_vertices(40, max_tries=2, rng=0)
    assert pts.shape == (40, 2) and len(hull) < 40


# --------------------------------------------------------------------------------------------
# Cells lemma: convex, disjoint interiors, tile K
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("K,B", CONFIGS)
def test_cells_tile_the_hull_are_convex_and_have_disjoint_interiors(K, B):
    cells = g.cells(K, B)
    area_K = g.polygon_area(K)
    total = sum(g.polygon_area(c) for c in cells)
    assert abs(total - area_K) <= 1e-12 * max(1.0, area_K)
    for c in cells:
        assert g.is_convex(c)
        assert np.all(g.point_in_polygon(c, K, tol=1e-12))
    for i in range(len(cells)):
        for j in range(i + 1, len(cells)):
            assert g.polygon_area(g.polygon_intersection(cells[i], cells[j])) <= 1e-12


@pytest.mark.parametrize("K,B", CONFIGS[::3])
def test_cells_agree_with_pointwise_argmax_away_from_boundaries(K, B):
    rng = np.random.default_rng(1)
    lo, hi = K.min(0), K.max(0)
    X = rng.uniform(lo, hi, size=(4000, 2))
    X = X[Path(K).contains_points(X)]
    Bm = np.eye(2) if B is None else B
    S = X @ Bm @ K.T  # <Bx, v_j>
    top2 = np.sort(S, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-6  # away from cell boundaries
    labels = np.argmax(S, axis=1)
    cells = g.cells(K, B)
    for i, c in enumerate(cells):
        if len(c) < 3:
            assert not np.any(labels[clear] == i)
            continue
        inside = Path(c).contains_points(X[clear])  # matplotlib, independent of our clipping
        np.testing.assert_array_equal(inside, labels[clear] == i)


def test_raster_cells_agree_with_exact_cells_except_near_boundaries():
    pts, hull = g.sample_vertices(7, rng=42, enforce_bijection=True)
    K = pts[hull]
    r = g.raster_cells(K, n=200)
    xx, yy = np.meshgrid(r.xs, r.ys)
    grid = np.c_[xx.ravel(), yy.ravel()]
    lab = r.labels.ravel()
    cells = g.cells(K)
    exact = np.full(len(grid), -1)
    for i, c in enumerate(cells):
        if len(c) >= 3:
            exact[g.point_in_polygon(grid, c, tol=-1e-9)] = i  # strictly inside cell i
    known = exact >= 0
    assert known.sum() > 0.9 * (lab >= 0).sum()
    np.testing.assert_array_equal(lab[known], exact[known])


def test_cell_labels_any_dimension_and_batched():
    rng = np.random.default_rng(3)
    v = rng.normal(size=(4, 6, 10))       # R = 4 systems, kappa = 6, d = 10
    x = rng.normal(size=(4, 50, 10))
    B = _random_spd(rng, 10)
    lab = g.cell_labels(x, v, B)
    assert lab.shape == (4, 50)
    for r in range(4):
        np.testing.assert_array_equal(lab[r], np.argmax(x[r] @ B @ v[r].T, axis=1))
    np.testing.assert_array_equal(g.cell_labels(x[0], v[0], B), lab[0])


def test_unit_direction_labelling_is_argmax_of_normalised_vertices_and_differs_from_cells():
    pts, hull = g.sample_vertices(7, rng=42, enforce_bijection=True)
    K = pts[hull]
    unit = g.unit_direction_cells(K)
    exact = g.cells(K)
    area_K = g.polygon_area(K)
    assert abs(sum(map(g.polygon_area, unit)) - area_K) < 1e-12
    # unequal norms: the unit labelling is not C_i(v) (erratum E18)
    assert max(g.symmetric_difference_area(a, b) for a, b in zip(unit, exact)) > 0.02
    rng = np.random.default_rng(5)
    X = rng.uniform(K.min(0), K.max(0), size=(3000, 2))
    X = X[Path(K).contains_points(X)]
    lab = g.unit_direction_labels(X, K)
    U = K / np.linalg.norm(K, axis=1, keepdims=True)
    np.testing.assert_array_equal(lab, np.argmax(X @ U.T, axis=1))
    for i, c in enumerate(unit):
        inside = Path(c).contains_points(X, radius=-1e-9)
        assert np.all(lab[inside] == i)


def test_equal_norms_unit_labelling_equals_cells():
    pts, hull = g.sample_vertices(9, rng=42, equal_norm=True, enforce_bijection=True)
    K = pts[hull]
    for a, b in zip(g.unit_direction_cells(K), g.cells(K)):
        assert g.symmetric_difference_area(a, b) < 1e-13


# --------------------------------------------------------------------------------------------
# Proposition 4.5: Voronoi cells in the B-norm
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(5))
def test_voronoi_coincides_with_cells_on_a_level_set(seed):
    rng = np.random.default_rng(seed)
    B = _random_spd(rng)
    theta = np.sort(rng.uniform(0, 2 * np.pi, 8))
    u = np.c_[np.cos(theta), np.sin(theta)]
    v = g.level_set_vertices(u, B, c=1.3)
    q = np.einsum("ij,jk,ik->i", v, B, v)
    np.testing.assert_allclose(q, 1.3, rtol=1e-13)
    K = v[g.convex_hull(v)]
    assert g.voronoi_mismatch(K, B) < 1e-12
    # and the B-Voronoi cells are the nearest-vertex regions in the B-norm (pointwise check)
    X = rng.uniform(K.min(0), K.max(0), size=(2000, 2))
    X = X[Path(K).contains_points(X)]
    D = np.einsum("nkj,jl,nkl->nk", X[:, None] - K, B, X[:, None] - K)
    near = np.argmin(D, axis=1)
    for i, c in enumerate(g.voronoi_cells(K, B)):
        inside = Path(c).contains_points(X, radius=-1e-9)
        assert np.all(near[inside] == i)


def test_voronoi_differs_from_cells_when_norms_differ():
    pts, hull = g.sample_vertices(5, rng=42, enforce_bijection=True)
    K = pts[hull]
    assert g.voronoi_mismatch(K) > 1e-2
    # and with a B for which the norms are unequal although |v_i| = 1
    pts, hull = g.sample_vertices(7, rng=42, equal_norm=True)
    assert g.voronoi_mismatch(pts[hull]) < 1e-12
    assert g.voronoi_mismatch(pts[hull], np.diag([1.0, 3.0])) > 1e-3


def test_voronoi_requires_spd():
    K = np.array([[1.0, 0], [0, 1], [-1, 0]])
    with pytest.raises(ValueError, match="B"):
        g.voronoi_cells(K, np.diag([1.0, -1.0]))
    with pytest.raises(ValueError, match="B"):
        g.voronoi_cells(K, [[1.0, 0.5], [0.0, 1.0]])


# --------------------------------------------------------------------------------------------
# Owning a cell (section 4.3), the polygon condition (E14), Remark 4.6
# --------------------------------------------------------------------------------------------
def test_a_vertex_that_does_not_own_its_cell():
    K = np.array([[0.4, 0.0], [1.0, -1.0], [1.0, 1.0]])  # CCW triangle
    own = g.owns_cell(K)
    np.testing.assert_array_equal(own, [False, True, True])
    # <v1, v1> = 0.16 < <v1, v2> = 0.4: v1's own label goes to another vertex
    assert g.cell_labels(K[0], K) != 0
    cells = g.cells(K)
    assert g.polygon_area(cells[0]) == 0.0          # its cell has no area at all
    assert abs(sum(map(g.polygon_area, cells)) - g.polygon_area(K)) < 1e-15
    np.testing.assert_array_equal(g.neighbour_condition(K), own)


def test_polygon_condition_is_equivalent_to_owning_only_in_its_strict_form():
    rng = np.random.default_rng(11)
    n_false = 0
    for _ in range(200):
        pts = rng.normal(size=(int(rng.integers(3, 9)), 2)) + rng.normal(size=2)
        K = pts[g.convex_hull(pts)]
        B = _random_spd(rng)
        own = g.owns_cell(K, B)
        n_false += (~own).sum()
        np.testing.assert_array_equal(g.neighbour_condition(K, B), own)
    assert n_false > 50  # the sample contains plenty of non-owning vertices
    # a tie <v1, v1> = <v1, v2>: the non-strict (printed) version accepts v1, yet v1 does not own
    K = np.array([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.0]])
    assert not g.owns_cell(K)[0]
    assert g.neighbour_condition(K, strict=False)[0]
    assert not g.neighbour_condition(K, strict=True)[0]


def test_owns_cell_batched_and_high_dimension():
    rng = np.random.default_rng(2)
    v = rng.normal(size=(300, 5, 2))
    own = g.owns_cell(v)
    assert own.shape == (300, 5)
    for r in range(0, 300, 37):
        G = v[r] @ v[r].T
        expect = [all(G[i, i] > G[i, j] for j in range(5) if j != i) for i in range(5)]
        np.testing.assert_array_equal(own[r], expect)
    low = own.all(axis=1).mean()
    high = g.owns_cell(rng.normal(size=(300, 5, 2000))).all(axis=1).mean()
    assert low < 0.5 and high == 1.0  # Remark 4.6: probability -> 1 as d grows


# --------------------------------------------------------------------------------------------
# Cones and erosion (section 5, Figure 4)
# --------------------------------------------------------------------------------------------
def _fig4_cone(eta=0.05):
    pts, hull = g.sample_vertices(7, rng=42, equal_norm=True)
    K = pts[hull]
    return K, g.cone(K, 2, eta)


def test_cone_is_the_eta_margin_region_of_the_cell():
    K, C = _fig4_cone()
    cell = g.cells(K)[2]
    assert g.polygon_area(C) > 0
    assert np.all(g.point_in_polygon(C, cell, tol=1e-12))
    others = np.arange(7) != 2
    margins = C @ (K[2] - K[others]).T
    assert margins.min() >= 0.05 - 1e-12
    _, C0 = _fig4_cone(0.0)
    assert g.symmetric_difference_area(C0, cell) < 1e-14


@pytest.mark.parametrize("delta", [0.0, 0.02, 0.03, 0.08])
def test_erosion_against_a_direct_distance_check(delta):
    K, C = _fig4_cone()
    E = g.erode(C, delta)
    rng = np.random.default_rng(4)
    X = rng.uniform(C.min(0), C.max(0), size=(20000, 2))
    dist = g.distance_to_complement(X, C)          # brute force over the boundary segments
    inE = Path(E).contains_points(X) if len(E) else np.zeros(len(X), bool)
    assert np.all(dist[inE] >= delta - 1e-12)       # eroded points keep a delta-disc inside C
    assert np.all(inE[dist > delta + 1e-9])          # deep points of C are in the erosion
    if len(E):
        assert np.all(g.distance_to_complement(E, C) >= delta - 1e-12)
        ref = shapely.Polygon(C).buffer(-delta, join_style="mitre").area if delta else g.polygon_area(C)
        assert abs(g.polygon_area(E) - ref) < 1e-12


def test_erosion_can_empty_a_polygon():
    sq = np.array([[0.0, 0], [1, 0], [1, 1], [0, 1]])
    assert g.erode(sq, 0.6).shape == (0, 2)
    np.testing.assert_allclose(g.polygon_area(g.erode(sq, 0.25)), 0.25, rtol=1e-14)
    with pytest.raises(ValueError, match="delta"):
        g.erode(sq, -0.1)


# --------------------------------------------------------------------------------------------
# Helpers and input checks
# --------------------------------------------------------------------------------------------
def test_area_and_centroid_of_a_known_polygon():
    tri = np.array([[0.0, 0], [3, 0], [0, 3]])
    assert g.polygon_area(tri) == 4.5
    np.testing.assert_allclose(g.polygon_centroid(tri), [1.0, 1.0], rtol=1e-15)
    with pytest.raises(ValueError, match="polygon"):
        g.polygon_centroid(np.zeros((0, 2)))


def test_bad_inputs_name_the_argument():
    K = np.array([[1.0, 0], [0, 1], [-1, 0]])
    with pytest.raises(ValueError, match="vertices"):
        g.cells(K[:2])
    with pytest.raises(ValueError, match="B"):
        g.cells(K, np.eye(3))
    with pytest.raises(ValueError, match="vertices"):
        g.cells([[np.nan, 0], [0, 1], [1, 1]])
    with pytest.raises(ValueError, match="points"):
        g.convex_hull([[0, 0], [1, 1], [2, 2]])
    with pytest.raises(ValueError, match="i"):
        g.cone(K, 3, 0.1)
    with pytest.raises(ValueError, match="eta"):
        g.cone(K, 0, -0.1)
    with pytest.raises(ValueError, match="x"):
        g.cell_labels(np.zeros((4, 3)), K)
    with pytest.raises(ValueError, match="vertices"):
        g.unit_direction_cells([[0.0, 0], [0, 1], [1, 0]])


def test_two_clip_cells_equal_clipping_by_every_half_plane():
    """cells() clips K by the two extreme half-planes of each cone; clipping by all k - 1
    half-planes <Bx, v_i - v_j> >= 0 (clip_halfplanes) must give the same polygon."""
    rng = np.random.default_rng(31)
    for k in [3, 5, 9, 25]:
        for _ in range(5):
            pts, hull = g.sample_vertices(k, rng=int(rng.integers(1 << 30)), equal_norm=k > 9, enforce_bijection=True)
            K = pts[hull]
            M = rng.normal(size=(2, 2))
            B = M @ M.T + 0.2 * np.eye(2)
            fast = g.cells(K, B)
            for i in range(len(K)):
                normals = (K[i] - np.delete(K, i, axis=0)) @ B
                full = g.clip_halfplanes(K, normals)
                assert abs(g.polygon_area(fast[i]) - g.polygon_area(full)) <= 1e-12 * g.polygon_area(K)
                if len(full):
                    assert g.symmetric_difference_area(fast[i], full) <= 1e-12 * g.polygon_area(K)


@pytest.mark.parametrize("scale", [1e-9, 1.0, 1e6])
def test_cells_refuse_hulls_thinner_than_1e_12_of_their_size(scale):
    """area(K) < 1e-12 diam(K)^2: cells, unit-direction cells and Voronoi cells refuse the input
    with a ValueError naming vertices; a thin but resolvable triangle is still tiled exactly.
    The threshold is scale-invariant (a ratio of an area to a squared length)."""
    shift = np.array([0.3, -0.2])
    for h, flat in ((1e-13, True), (1.5e-12, True), (1e-10, False), (1e-6, False)):
        # area h/2 against diameter^2 = 1: ratio h/2
        v = (np.array([[0.0, 0.0], [1.0, 0.0], [0.5, h]]) + shift) * scale
        for fn in (g.cells, g.unit_direction_cells, g.voronoi_cells):
            if flat:
                with pytest.raises(ValueError, match=r"^vertices are nearly collinear"):
                    fn(v)
            else:
                polys = fn(v)
                total = sum(g.polygon_area(P) for P in polys if len(P) >= 3)
                assert total == pytest.approx(g.polygon_area(v), rel=1e-6)


def test_degenerate_polygons_are_not_taken_for_clockwise_ones():
    """A polygon of zero area (collinear corners, any order, any scale) is no clockwise polygon:
    the orientation check lets it through, and what comes back has no area."""
    flat = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    for P in (flat, flat[::-1], 1e9 * flat, 1e-9 * flat):
        assert g.polygon_area(g.clip_halfplanes(P, [[1.0, 0.0]])) == 0.0
        assert not g.point_in_polygon([[5.0, 5.0]], P).any()
        assert g.polygon_area(g.polygon_intersection(P, P)) == 0.0
        assert g.polygon_area(g.erode(P, 0.0)) == 0.0
