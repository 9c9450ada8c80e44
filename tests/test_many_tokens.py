"""Chapter 9's library: the hardmax limit of a Gaussian density (the exact masses of the cells)."""
import numpy as np
import pytest
from scipy.special import ndtr, owens_t

from attention_fw.experiments import many_tokens as MT
from attention_fw.geometry import planar, polytope

TOL = 1e-12   # GAUSS_TOL per edge; a polygon has at most a few edges


def _pentagon():
    ang = np.array([0.3, 1.5, 2.4, 3.7, 5.0])
    return np.stack([np.cos(ang), np.sin(ang)], 1)


def _owen_mass(P, mean, cov):
    """The same edge decomposition with Owen's T in closed form (scipy.special.owens_t, independent code):
    int_0^alpha e^{-h^2 / (2 cos^2 t)} dt / (2 pi) = T(h, tan alpha)."""
    L = np.linalg.cholesky(cov)
    W = np.linalg.solve(L, (np.asarray(P, float) - mean).T).T
    total = 0.0
    for a, b in zip(W, np.roll(W, -1, axis=0)):
        cross, e = a[0] * b[1] - a[1] * b[0], b - a
        total += np.arctan2(cross, a @ b) / (2 * np.pi)
        h = abs(cross) / np.linalg.norm(e)
        if h == 0:
            continue
        f = a - (a @ e) / (e @ e) * e
        f /= np.linalg.norm(f)
        ta, tb = [(f[0] * p[1] - f[1] * p[0]) / (f @ p) for p in (a, b)]
        total -= owens_t(h, tb) - owens_t(h, ta)
    area = 0.5 * np.sum(W[:, 0] * np.roll(W[:, 1], -1) - np.roll(W[:, 0], -1) * W[:, 1])
    return total if area > 0 else -total


def test_gaussian_mass_of_rectangles_closed_form():
    # axis-parallel rectangle, diagonal covariance: a product of two normal-law differences; both orientations
    rng = np.random.default_rng(1)
    for _ in range(20):
        x0, y0 = rng.uniform(-2, 1, 2)
        x1, y1 = x0 + rng.uniform(0.1, 3), y0 + rng.uniform(0.1, 3)
        m, s = rng.normal(size=2), rng.uniform(0.2, 2.0, 2)
        R = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
        exact = ((ndtr((x1 - m[0]) / s[0]) - ndtr((x0 - m[0]) / s[0]))
                 * (ndtr((y1 - m[1]) / s[1]) - ndtr((y0 - m[1]) / s[1])))
        for P in (R, R[::-1]):
            r = MT.gaussian_polygon_mass(P, m, np.diag(s**2))
            assert abs(r.mass - exact) < 4 * TOL and r.error < 4 * TOL


def test_gaussian_mass_wedges_and_half_planes():
    # a wedge with its apex at the mean of an isotropic Gaussian, cut 60 standard deviations away: angle / (2 pi)
    for angle in (0.1, 1.0, 2.5, 3.0):
        P = 60.0 * np.array([[0.0, 0.0], [1.0, 0.0], [np.cos(angle), np.sin(angle)]]) / np.cos(angle / 2)
        assert abs(MT.gaussian_polygon_mass(P, [0.0, 0.0], 0.7 * np.eye(2)).mass - angle / (2 * np.pi)) < 2 * TOL
    # a half-plane {x >= c} (a square 60 sd wide) under any covariance: Phi(-(c - m_x) / s_x)
    cov = np.array([[0.5, 0.3], [0.3, 0.8]])
    for c in (-1.0, 0.0, 0.4, 2.0):
        P = np.array([[c, -60.0], [60.0, -60.0], [60.0, 60.0], [c, 60.0]])
        want = ndtr(-(c - 0.1) / np.sqrt(0.5))
        assert abs(MT.gaussian_polygon_mass(P, [0.1, 0.2], cov).mass - want) < 2 * TOL


def test_gaussian_mass_against_owens_t():
    rng = np.random.default_rng(2)
    for _ in range(30):
        pts = rng.normal(size=(9, 2)) * rng.uniform(0.2, 3)
        P = pts[planar.convex_hull(pts)]
        A = rng.normal(size=(2, 2))
        cov = A @ A.T + 0.05 * np.eye(2)
        m = rng.normal(size=2) * 2
        r = MT.gaussian_polygon_mass(P, m, cov)
        assert abs(r.mass - _owen_mass(P, m, cov)) < 1e-11
        assert 0.0 <= r.mass <= 1.0


def test_gaussian_cell_masses():
    V = _pentagon()
    mean, cov = np.array([0.2, -0.1]), np.array([[0.09, 0.03], [0.03, 0.16]])
    r = MT.gaussian_cell_masses(V, mean, cov)
    assert abs(r.masses.sum() - 1) < 1e-12 and abs(r.cell_mass_sum - r.mass_K) < 1e-12   # the cells tile K
    assert r.error < 1e-11
    # symmetry: a regular polygon, an isotropic Gaussian at its centre: equal masses
    for k in (3, 5, 8):
        assert np.allclose(MT.gaussian_cell_masses(polytope.regular_polygon(k), [0, 0], 0.3 * np.eye(2)).masses,
                           1 / k, atol=1e-12)
    # a very wide Gaussian is nearly uniform on K: the uniform masses in the limit (error O(1/sigma^2))
    wide = MT.gaussian_cell_masses(V, [0.0, 0.0], 1e6 * np.eye(2)).masses
    assert np.allclose(wide, MT.cell_masses(V), atol=1e-5)
    # Monte Carlo: 10^6 draws of the conditioned law, each cell within 5 standard errors
    x = MT.sample_gaussian_polygon(V, 1_000_000, mean, cov, rng=5)
    assert np.all(planar.point_in_polygon(x, V[planar.convex_hull(V)]))
    f = np.bincount(planar.cell_labels(x, V), minlength=5) / len(x)
    m = r.masses
    assert np.all(np.abs(f - m) <= 5 * np.sqrt(m * (1 - m) / len(x)))


def test_gaussian_hardmax_limit_and_refusals():
    V = _pentagon()
    r = MT.hardmax_limit(V, 3000, 30, rng=4, mean=[0.1, 0.1], cov=0.04 * np.eye(2))
    assert r.straight and r.max_distance < 1e-6 and np.array_equal(r.fractions, r.start_fractions)
    with pytest.raises(ValueError, match="together"):
        MT.hardmax_limit(V, 10, 1, rng=0, mean=[0.0, 0.0])
    with pytest.raises(ValueError, match="positive definite"):
        MT.gaussian_polygon_mass(V, [0, 0], [[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="rejection"):
        MT.sample_gaussian_polygon(V, 10, [30.0, 0.0], 0.01 * np.eye(2), rng=0)
    assert MT.gaussian_polygon_mass(np.zeros((0, 2)), [0, 0], np.eye(2)).mass == 0.0


# ----------------------------------------------------------------------------- metastability at scale
def test_polygon_distance_is_the_hull_distance():
    rng = np.random.default_rng(3)
    for m in (1, 2, 3, 7, 12):
        P = rng.normal(size=(m, 2))
        x = rng.normal(size=(200, 2)) * 2
        assert np.allclose(MT.polygon_distance(x, P), polytope.distance_to_hull(x, P), atol=1e-12, rtol=0)
    line = np.c_[np.linspace(0, 1, 5), np.linspace(0, 2, 5)]               # collinear points: a segment
    x = rng.normal(size=(50, 2))
    assert np.allclose(MT.polygon_distance(x, line), polytope.distance_to_hull(x, line[[0, -1]]), atol=1e-12)


def test_sector_configuration_law():
    from attention_fw.geometry.polytope import points_on_circle
    v = points_on_circle()
    x0, sigma = MT.sector_configuration(v, 50_000, 0.05, rng=2)
    assert np.array_equal(x0[:3], v[planar.convex_hull(v)]) and np.bincount(sigma).tolist() == [50_001] * 3
    d = np.linalg.norm(x0 - x0[sigma], axis=1)
    assert d.max() <= 0.05 and np.all(planar.point_in_polygon(x0, v, tol=1e-12))     # in the sectors, in K
    # uniform on a sector: P(r < radius / 2) = 1/4, within 5 standard errors
    f = np.mean(d[3:] < 0.025)
    assert abs(f - 0.25) < 5 * np.sqrt(0.25 * 0.75 / (len(d) - 3))


def test_sabeta_exit_at_scale_is_the_library_T2():
    from attention_fw.experiments import exit_times as ET
    from attention_fw.experiments import sabeta as SB
    from attention_fw.geometry.polytope import points_on_circle
    v = points_on_circle()
    for seed, beta in [(1, 3.0), (2, 5.0), (3, 6.0)]:
        x0, sg = MT.sector_configuration(v, 4, 0.05, rng=seed)
        want = SB.sabeta_exit_times(x0, sg, 0.1, beta, 0.1, cap=5000).times[0]
        for method in ("fast", "dense"):
            assert MT.sabeta_exit_at_scale(x0, sg, 0.1, beta, 0.1, cap=5000, method=method).T2 == want
    # coincident clusters move as one token (equal multiplicities, exact symmetry): T2 does not depend on them
    ones = MT.sabeta_exit_at_scale(*ET.cluster_configuration(v, np.array([1, 1, 1])), 0.1, 4.0, 0.05, cap=5000).T2
    for c in (2, 5, 40):
        x0, sg = ET.cluster_configuration(v, np.array([c, c, c]))
        assert MT.sabeta_exit_at_scale(x0, sg, 0.1, 4.0, 0.05, cap=5000).T2 == ones
    r = MT.sabeta_exit_at_scale(*MT.sector_configuration(v, 3, 0.05, rng=0), 0.1, 30.0, 0.1, cap=20)
    assert r.censored and r.T2 is None and r.distance <= 0.1


def test_chain_exit_mean_closed_form():
    from attention_fw.experiments import exit_times as ET
    m = np.array([1, 4, 30, 1000])
    beta = 8.0
    got = MT.chain_exit_mean(m, beta)
    lam = np.array([ET.frozen_escape_rate(polytope.regular_polygon(3), np.full(3, k), beta) for k in m])
    assert np.allclose(got, 1 / -np.expm1(-lam), rtol=1e-14)
    assert np.allclose(lam / m, lam[0], rtol=1e-12)       # -log q is n times one token's escape rate
    assert np.all(np.diff(got) < 0) and abs(MT.chain_exit_mean([10**9], beta)[0] - 1) < 1e-9   # falls to 1
