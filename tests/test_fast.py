"""The fast steps of attention_fw.model.fast against the dense steps of attention_fw.model.dynamics.

(SA-inf) through the hull: bitwise the dense step (d <= 2, and d = 3 at n <= 256 where the dense
step computes its scores in the same loop), over states that stress the tie rule: random clouds,
grids (tokens on the hull's edges, exactly tied in exact arithmetic), duplicated vertices, tokens at
the origin, a run until the tokens sit on their vertices, a wide tie tolerance, one B per system.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from attention_fw.model import dynamics as D
from attention_fw.model import fast as F


def _grid(k, lo=0.0, hi=1.0):
    g = np.linspace(lo, hi, k)
    return np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)


def _states(rng):
    yield "gaussian", rng.normal(size=(1500, 2))
    yield "uniform", rng.uniform(-1, 1, size=(1500, 2))
    yield "grid", _grid(25)
    yield "centred grid", _grid(25, -1.0, 1.0)
    x = rng.normal(size=(1200, 2))
    x[:50] = x[60]                      # a duplicated token (a vertex with multiplicity, often)
    x[100:160] = 0.0                    # tokens at the origin: B x_i = 0 ties every token
    yield "duplicates and zeros", x
    tri = np.array([[1.0, 0.0], [-0.5, 0.8], [-0.5, -0.8]])
    w = rng.dirichlet(np.ones(3), size=900)
    yield "triangle", np.vstack([tri, w @ tri])
    yield "tiny", rng.normal(size=(500, 2)) * 1e-160
    yield "huge", rng.normal(size=(500, 2)) * 1e160


@pytest.mark.parametrize("B", [None, "diag", "general"])
def test_hull_step_is_bitwise_the_dense_step(B):
    rng = np.random.default_rng(7)
    Bm = {None: None, "diag": np.diag([1.0, 2.5]), "general": np.array([[1.0, 0.4], [-0.3, 0.7]])}[B]
    for name, x in _states(rng):
        for gamma in (0.5, 1.0):
            a = F.hardmax_step(x, gamma, Bm)
            b = D.hardmax_step(x, gamma, Bm)
            assert np.array_equal(a, b), (name, gamma)


def test_hull_step_split_between_threads_is_bitwise_the_dense_step(monkeypatch):
    """The rows split between two and three threads (160 rows or more each): the dense step's bits, over the
    states and a general B."""
    rng = np.random.default_rng(17)
    monkeypatch.setattr(F, "HULL_PER_WORKER", 160)
    Bm = np.array([[1.0, 0.4], [-0.3, 0.7]])
    for workers in (2, 3):
        monkeypatch.setattr(F, "HULL_WORKERS", workers)
        for name, x in _states(rng):
            for B in (None, Bm):
                assert np.array_equal(F.hardmax_step(x, 0.5, B), D.hardmax_step(x, 0.5, B)), (name, workers)


def test_hull_step_bitwise_along_a_run_to_the_vertices():
    """Sixty steps from a uniform square: the tokens reach their vertices (ties within the tolerance
    there), and every step is the dense step's bits."""
    x = np.random.default_rng(3).uniform(-1, 1, size=(2500, 2))
    for _ in range(60):
        a, b = F.hardmax_step(x, 0.5), D.hardmax_step(x, 0.5)
        assert np.array_equal(a, b)
        x = b
    # at the end the tokens sit within 1e-12 of hull vertices (the run did reach the tie regime)
    v = x[ConvexHull(x).vertices]
    assert np.min(np.linalg.norm(x[:, None] - v[None], axis=-1), axis=1).max() < 1e-12


@pytest.mark.parametrize("tie_rtol", [0.0, 1e-9, 1e-3])
def test_hull_step_tie_tolerances(tie_rtol):
    rng = np.random.default_rng(11)
    for x in (_grid(20), rng.normal(size=(800, 2))):
        assert np.array_equal(F.hardmax_step(x, 0.3, tie_rtol=tie_rtol), D.hardmax_step(x, 0.3, tie_rtol=tie_rtol))


def test_hull_step_batches_dimensions_and_flat_hulls():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 300, 2))
    Bs = rng.normal(size=(4, 2, 2))
    assert np.array_equal(F.hardmax_step(x, 0.5, Bs), D.hardmax_step(x, 0.5, Bs))
    x3 = rng.normal(size=(250, 3))            # n <= 256: the dense step's own score loop
    assert np.array_equal(F.hardmax_step(x3, 0.5), D.hardmax_step(x3, 0.5))
    x1 = rng.normal(size=(400, 1))
    assert np.array_equal(F.hardmax_step(x1, 0.5), D.hardmax_step(x1, 0.5))
    line = np.stack([np.linspace(0, 1, 50)] * 2, -1)     # a flat hull: Qhull refuses, the dense step runs
    before = F.STATS["dense_fallbacks"]
    assert np.array_equal(F.hardmax_step(line, 0.5), D.hardmax_step(line, 0.5))
    assert F.STATS["dense_fallbacks"] == before + 1


def test_candidates_hold_the_hull_vertices_and_the_edge_tokens():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3000, 2))
    cand = F.hull_candidates(x)
    assert set(ConvexHull(x).vertices) <= set(cand.tolist())
    assert len(cand) < 50                                   # a Gaussian cloud: a few dozen vertices
    assert len(F.hull_candidates(_grid(30))) == 4 * 29      # every token on the square's edges


# ----------------------------------------------------------------------------- the circle model
def test_circle_fourier_identity():
    """e^{b cos p} sin p = (2/b) sum_k k I_k(b) sin(k p), checked pointwise with 200 modes."""
    from scipy.special import iv
    p = np.linspace(-np.pi, np.pi, 101)
    for b in (0.3, 5.0, 30.0):
        k = np.arange(1, 201)
        series = 2 / b * (k * iv(k, b) * np.sin(np.outer(p, k))).sum(axis=1)
        assert np.abs(series - np.exp(b * np.cos(p)) * np.sin(p)).max() <= 1e-13 * np.exp(b)


@pytest.mark.parametrize("beta", [0.5, 5.0, 20.0, 60.0])
def test_circle_truncation_error_below_its_bound(beta):
    from attention_fw.model import sphere as S
    rng = np.random.default_rng(int(beta * 10))
    t = np.r_[rng.uniform(0, 2 * np.pi, 1500), rng.normal(1.0, 0.01, 500)]   # spread and clustered
    dense = S.force_dense(t, beta)
    rounding = 64 * np.finfo(float).eps * np.exp(beta)
    for K in sorted({int(beta / 2) + 2, int(beta) + 5, S.modes(beta)}):
        err = np.abs(S.force(t, beta, K) - dense).max()
        assert err <= S.tail_bound(beta, K) + rounding, K
    assert np.abs(S.force(t, beta) - dense).max() <= 1e-13 * np.exp(beta) + rounding


def test_circle_run_is_forward_euler_of_the_dense_force():
    from attention_fw.model import sphere as S
    t0 = np.random.default_rng(4).uniform(0, 2 * np.pi, 400)
    t = t0.copy()
    for _ in range(100):
        t = t + 2e-3 * S.force_dense(t, 5.0)
    assert np.abs(S.simulate(t0, 5.0, 2e-3, 100, resync=16) - t).max() < 1e-11


def test_circle_predicted_mode_maximises_the_growth_rate():
    from attention_fw.model import sphere as S
    for b in (0.5, 3.0, 5.0, 12.0, 40.0):
        r = S.growth_rates(b)
        assert S.predicted_clusters(b) == int(np.argmax(r)) + 1
    # large beta: I_k(b) ~ e^b e^{-k^2/(2b)} / sqrt(2 pi b), so k^2 I_k peaks near sqrt(2 b)
    assert abs(S.predicted_clusters(200.0) - np.sqrt(400.0)) <= 1


# ----------------------------------------------------------------------------- (SA-beta)
def _soft_states(rng, n=1500):
    a, rr = rng.uniform(0, 2 * np.pi, n), np.sqrt(rng.random(n))
    yield "disk", np.stack([rr * np.cos(a), rr * np.sin(a)], 1)
    yield "gaussian", rng.normal(size=(n, 2))
    yield "clusters", np.concatenate([rng.normal(m, 0.01, (n // 3, 2)) for m in ([1, 0], [0, 1], [-1, -1])])
    yield "coincident", np.tile([[0.3, 0.4]], (n, 1))
    near = rng.normal(size=(n, 2)) * 1e-3
    near[: n // 50] += [1.0, 0.0]                     # most tokens near the origin, a few far
    yield "near the origin", near
    yield "shifted", rng.normal(size=(n, 2)) + 5.0


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0, 100.0, 1000.0])
def test_fast_softmax_step_within_tolerance_of_the_dense_step(beta):
    """|m_fast - m_dense| <= 1e-8 r + 64 eps max|x| for every token (r: the tokens' radius about their centroid;
    the second term is the dense float64 step's own rounding)."""
    rng = np.random.default_rng(int(beta * 10))
    B = np.array([[1.0, 0.3], [0.1, 0.8]])
    for name, x in _soft_states(rng):
        for Bm in (None, B):
            a, b = F.softmax_step(x, 1.0, beta, Bm), D.softmax_step(x, 1.0, beta, Bm)
            r = np.sqrt(((x - x.mean(0)) ** 2).sum(1).max())
            bound = F.STEP_TOL * r + 64 * np.finfo(float).eps * np.abs(x).max()
            assert np.linalg.norm(a - b, axis=1).max() <= bound, (name, Bm is None)


def test_fast_softmax_paths_all_taken_and_large_n():
    """n = 4096 with each path (expansion, grid, pruned sum, dense tiles) taken by some rows (the expansion at
    beta = 0.01, where its moments are of low order and cheaper than a grid); gamma < 1; a batch."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(4096, 2))
    before = dict(F.SOFTMAX_STATS)
    for beta in (0.01, 1.0, 3.0, 10.0, 300.0):
        a, b = F.softmax_step(x, 0.3, beta), D.softmax_step(x, 0.3, beta)
        assert np.abs(a - b).max() <= F.STEP_TOL * 5.0
    for k in ("taylor_rows", "grid_rows", "pruned_rows", "dense_rows"):
        assert F.SOFTMAX_STATS[k] > before[k], k
    xb = rng.uniform(-1, 1, size=(3, 500, 2))
    assert np.abs(F.softmax_step(xb, 0.5, 20.0) - D.softmax_step(xb, 0.5, 20.0)).max() < 1e-9


def test_taylor_order_meets_its_bound():
    from math import exp, factorial
    for rho in (0.5, 2.0, 6.0):
        p = F.taylor_order(rho)
        assert 2.01 * rho ** (p + 1) * exp(rho) / factorial(p + 1) <= F.TAYLOR_TOL
        assert 2.01 * rho ** p * exp(rho) / factorial(p) > F.TAYLOR_TOL


# ----------------------------------------------------------------------------- method= of the public steps
def test_method_keyword_routes_and_defaults_unchanged():
    import attention_fw as afw
    from attention_fw.model import tiled as T
    rng = np.random.default_rng(21)
    x = rng.uniform(-1, 1, size=(D.HULL_MIN_N + 100, 2))
    ref = D.hardmax_step(x, 0.5, method="dense")
    assert np.array_equal(afw.hardmax_step(x, 0.5), ref)                 # auto takes the hull: same bits
    assert np.array_equal(afw.hardmax_step(x, 0.5, method="hull"), ref)
    assert np.array_equal(afw.hardmax_step(x, 0.5, method="tiled"), T.hardmax_step(x, 0.5))
    xs = x[:1500]
    assert np.array_equal(afw.softmax_step(xs, 0.5, 3.0), D.softmax_step(xs, 0.5, 3.0, method="dense"))
    assert np.array_equal(afw.softmax_step(xs, 0.5, 3.0, method="tiled"), T.softmax_step(xs, 0.5, 3.0))
    assert np.abs(afw.softmax_step(xs, 0.5, 3.0, method="fast") - D.softmax_step(xs, 0.5, 3.0)).max() < 1e-9
    a = afw.sap_step(xs, 0.5, 3.0, rng=4)
    assert np.array_equal(a, afw.sap_step(xs, 0.5, 3.0, rng=4, method="dense"))
    run = afw.simulate(x, afw.Hardmax(0.5), 5, method="hull")
    assert np.array_equal(run.x, afw.simulate(x, afw.Hardmax(0.5, method="dense"), 5).x)


def test_method_keyword_bad_values():
    import attention_fw as afw
    x = np.zeros((4, 2))
    with pytest.raises(ValueError, match="method"):
        afw.hardmax_step(x, 0.5, method="fastest")
    with pytest.raises(ValueError, match="hull"):
        afw.sap_step(x, 0.5, 1.0, rng=0, method="hull")
    with pytest.raises(ValueError, match="hull"):
        afw.softmax_step(x, 0.5, 1.0, method="hull")
    with pytest.raises(TypeError, match="method"):
        afw.simulate(x, afw.Layer(1.0, np.eye(2), np.eye(2)), 1, method="dense")


# ----------------------------------------------------------------------------- experiments.many_tokens
def test_cell_masses_exact():
    from attention_fw.experiments import many_tokens as MT
    from attention_fw.geometry import planar, polytope
    for k in (3, 5, 8):
        assert np.allclose(MT.cell_masses(polytope.regular_polygon(k)), 1 / k, atol=1e-12)   # symmetry
    ang = np.array([0.3, 1.5, 2.4, 3.7, 5.0])
    V = np.stack([np.cos(ang), np.sin(ang)], 1)
    m = MT.cell_masses(V)
    assert abs(m.sum() - 1) < 1e-12
    x = MT.sample_polygon(V, 400_000, rng=3)                      # the law of large numbers, 5 sigma
    f = np.bincount(planar.cell_labels(x, V), minlength=5) / len(x)
    assert np.all(np.abs(f - m) <= 5 * np.sqrt(m * (1 - m) / len(x)))
    r = MT.hardmax_limit(V, 3000, 30, rng=4)                     # straight to the vertex of the initial cell
    assert r.straight and r.max_distance < 1e-6 and np.array_equal(r.fractions, r.start_fractions)


def test_exact_distances():
    from scipy.stats import wasserstein_distance
    from attention_fw.experiments import many_tokens as MT
    rng = np.random.default_rng(8)
    a, b = rng.normal(size=300), rng.normal(0.4, 2.0, size=170)
    assert abs(MT.w1_line(a, b) - wasserstein_distance(a, b)) < 1e-12
    ta, tb = rng.uniform(0, 2 * np.pi, 40), rng.vonmises(1.0, 3.0, 25) % (2 * np.pi)
    # the circle: the smallest over cut points of the line distance of the unrolled samples
    best = min(MT.w1_line((ta - c) % (2 * np.pi), (tb - c) % (2 * np.pi)) for c in np.r_[ta, tb])
    assert abs(MT.w1_circle(ta, tb) - best) < 1e-12
    x = rng.normal(size=(50, 2))
    perm = rng.permutation(50)
    assert MT.w1_equal(x, x[perm]) == 0.0
    assert abs(MT.w1_equal(x, x + [3.0, 4.0]) - 5.0) < 1e-12
    assert MT.sliced_w1(x, x + [3.0, 4.0], 256) <= 5.0


def _many_positions(rng):
    """States whose band holds more than 64 positions (the binned scan): points on a circle (every one a
    vertex), a disk, a fine grid (tokens on the edges, exactly tied in exact arithmetic), a regular polygon
    with tokens on its edges and at its vertices twice, tokens along the axes and diagonals (directions
    on the bins' boundaries)."""
    t = rng.uniform(0, 2 * np.pi, 3000)
    yield "circle", np.c_[np.cos(t), np.sin(t)]
    r, t = np.sqrt(rng.uniform(size=20000)), rng.uniform(0, 2 * np.pi, 20000)
    yield "disk", np.c_[r * np.cos(t), r * np.sin(t)]
    yield "grid", _grid(60, -1.0, 1.0)
    a = 2 * np.pi * np.arange(100) / 100
    v = np.c_[np.cos(a), np.sin(a)]
    s = rng.uniform(size=(1000, 1))
    k = rng.integers(0, 100, 1000)
    yield "polygon", np.vstack([v, v, s * v[k] + (1 - s) * v[(k + 1) % 100], 0.3 * rng.normal(size=(500, 2))])
    ax = np.linspace(-1, 1, 41)
    yield "axes and diagonals", np.vstack([np.c_[ax, 0 * ax], np.c_[0 * ax, ax], np.c_[ax, ax], np.c_[ax, -ax],
                                           1.5 * v])


@pytest.mark.parametrize("B", [None, "diag", "general"])
@pytest.mark.parametrize("tie_rtol", [None, 1e-6])
def test_binned_hull_step_is_bitwise_the_dense_step(B, tie_rtol):
    """More than 64 candidate positions: each row scores only the positions listed for its direction's bin
    and the opposite one; the same bits as the dense step, and the binned scan was taken."""
    rng = np.random.default_rng(17)
    Bm = {None: None, "diag": np.diag([1.0, 2.5]), "general": np.array([[1.0, 0.4], [-0.3, 0.7]])}[B]
    for name, x in _many_positions(rng):
        before = F.STATS["binned_steps"]
        a = F.hardmax_step(x, 0.5, Bm, tie_rtol=tie_rtol)
        assert F.STATS["binned_steps"] == before + 1, name
        assert np.array_equal(a, D.hardmax_step(x, 0.5, Bm, tie_rtol=tie_rtol)), name


def test_binned_hull_step_along_a_run():
    """Forty steps from a uniform disk of 5,000 tokens: bitwise the dense step at every step."""
    rng = np.random.default_rng(19)
    r, t = np.sqrt(rng.uniform(size=5000)), rng.uniform(0, 2 * np.pi, 5000)
    x = np.c_[r * np.cos(t), r * np.sin(t)]
    for _ in range(40):
        a, b = F.hardmax_step(x, 0.5), D.hardmax_step(x, 0.5)
        assert np.array_equal(a, b)
        x = b


def test_pseudo_angle_bins_hold_their_directions():
    """The compiled pseudo-angle puts every direction (random, on the axes and diagonals, signed zeros) in a
    bin whose centre is within the bin's half-width of it, and -b in the opposite bin."""
    K = F._kernels()
    assert K is not None, "numba (a pinned requirement) is not importable"
    rng = np.random.default_rng(23)
    nb = 4 * 300
    cen, w = F.pseudo_angle_bins(nb)
    b = np.vstack([rng.normal(size=(20000, 2)), rng.normal(size=(200, 2)) * 1e-300,
                   [[1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, 1], [-1, -1], [1, -1],
                    [0.0, -0.0], [-0.0, 1.0], [-0.0, -1.0], [5e-324, 1.0], [-1.0, 5e-324]]])
    b = b[np.any(b != 0, axis=1)]
    kb = np.array([min(int(K.pseudo_angle(p, q) * (nb / 4.0)), nb - 1) for p, q in b])
    u = b / np.hypot(b[:, 0], b[:, 1])[:, None]

    def gap(u, c):
        return np.arctan2(np.abs(u[:, 0] * c[:, 1] - u[:, 1] * c[:, 0]), np.sum(u * c, axis=1))

    assert np.all(gap(u, cen[kb]) <= w[kb] + 1e-15)
    ko = (kb + nb // 2) % nb                         # the bin the scan takes for the minimum
    assert np.all(gap(-u, cen[ko]) <= w[ko] + 1e-15)
