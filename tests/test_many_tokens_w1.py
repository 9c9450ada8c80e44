"""Chapter 9's exact transport distances: ``w1_exact`` (POT's network simplex) against closed forms and
the library's other exact distances, the sliced distance as a lower bound, the transport to the
hardmax limit's atoms, and the exact part of ``chaos``.

Tolerances: the costs are float64 distances of O(1) and the simplex returns a sum of at most
n + m - 1 of them times weights, so 1e-12 absolute (a few hundred ulps) covers its rounding; a
closed form by sorting (``w1_line``) or assignment (``w1_equal``) rounds differently by as much."""
import numpy as np
import pytest

from attention_fw.experiments import many_tokens as MT

TOL = 1e-12


def _cloud(rng, n, d=2):
    return rng.standard_normal((n, d))


def test_two_diracs_and_translates():
    rng = np.random.default_rng(0)
    for _ in range(10):
        p, q = rng.standard_normal(2), rng.standard_normal(2)
        assert abs(MT.w1_exact([p], [q]) - np.linalg.norm(p - q)) < TOL
        # a weighted measure against its translate: W1 = |shift| (the translation is optimal,
        # and no plan does better since the means differ by the shift)
        n = int(rng.integers(1, 30))
        x, s = _cloud(rng, n), rng.standard_normal(2)
        a = rng.random(n)
        a /= a.sum()
        assert abs(MT.w1_exact(x, x + s, a, a) - np.linalg.norm(s)) < TOL


def test_on_a_line_equals_sorting_unequal_sizes():
    # points on one line of the plane: W1 is that of their coordinates along it (w1_line, by sorting)
    rng = np.random.default_rng(1)
    for n, m in [(7, 13), (50, 20), (1, 40), (100, 300)]:
        u = rng.standard_normal(2)
        u /= np.linalg.norm(u)
        c = rng.standard_normal(2)
        s, t = rng.standard_normal(n), 0.5 + rng.standard_normal(m)
        x, y = c + s[:, None] * u, c + t[:, None] * u
        assert abs(MT.w1_exact(x, y) - MT.w1_line(s, t)) < TOL


def test_equal_sizes_equals_the_assignment():
    rng = np.random.default_rng(2)
    for n, d in [(5, 2), (60, 2), (200, 2), (40, 3)]:
        x, y = _cloud(rng, n, d), _cloud(rng, n, d) + 0.3
        assert abs(MT.w1_exact(x, y) - MT.w1_equal(x, y)) < TOL


def test_sliced_below_exact_symmetric_zero_on_identical():
    rng = np.random.default_rng(3)
    for n, m in [(30, 45), (200, 120), (400, 400)]:
        x, y = _cloud(rng, n), 0.8 * _cloud(rng, m) + [0.2, -0.1]
        w = MT.w1_exact(x, y)
        # a projection is 1-Lipschitz: each direction's W1 is at most W1, so is their mean
        assert MT.sliced_w1(x, y, 64) <= w + TOL
        a, b = rng.random(n), rng.random(m)
        a, b = a / a.sum(), b / b.sum()
        assert abs(MT.w1_exact(x, y, a, b) - MT.w1_exact(y, x, b, a)) < TOL
        assert abs(w - MT.w1_exact(y, x)) < TOL
        assert MT.w1_exact(x, x) == 0.0
        # the same measure written with repeated atoms (sizes n and 2n)
        assert MT.w1_exact(x, np.repeat(x, 2, axis=0)) < TOL


def test_the_sliced_bias_of_a_translate_is_two_over_pi():
    # sliced W1 of a translate by s: mean over equally spaced directions of |<u, s>| -> (2/pi)|s|
    rng = np.random.default_rng(4)
    x, s = _cloud(rng, 300), np.array([0.3, -0.4])
    ratio = MT.sliced_w1(x, x + s, 256) / MT.w1_exact(x, x + s)
    assert abs(ratio - 2 / np.pi) < 1e-4          # the equally spaced mean of |cos|: error O(directions^-2)


def _pentagon():
    ang = np.array([0.3, 1.5, 2.4, 3.7, 5.0])
    return np.stack([np.cos(ang), np.sin(ang)], 1)


def test_transport_to_the_atoms_of_the_hardmax_limit():
    """The chapter's W1 between the tokens after the hardmax steps and sum_i mu0(C_i) delta_{v_i}: the
    kappa x kappa problem between the fractions and the masses on the vertices (w1_exact(V, V, f, m)),
    within the tokens' largest distance to their vertex of the n x kappa problem (POT on every token)."""
    V = _pentagon()
    masses = MT.cell_masses(V)
    rng = np.random.default_rng(5)
    for eps in (0.0, 1e-3):
        lab = rng.choice(len(V), size=400, p=masses)
        noise = rng.standard_normal((400, 2))
        noise *= eps * rng.random((400, 1)) / np.linalg.norm(noise, axis=1, keepdims=True)
        tokens = V[lab] + noise
        f = np.bincount(lab, minlength=len(V)) / len(lab)
        full = MT.w1_exact(tokens, V, b=masses)
        atoms = MT.w1_exact(V, V, f, masses)
        assert abs(full - atoms) <= eps + TOL
        # moving mass TV between the atoms costs at least the shortest and at most the longest
        # distance between two vertices
        edges = np.linalg.norm(V[:, None] - V[None], axis=-1)
        tv = 0.5 * np.abs(f - masses).sum()
        assert edges[edges > 0].min() * tv - TOL <= atoms <= edges.max() * tv + TOL


def test_semi_discrete_to_atoms_is_the_nearest_vertex_map():
    # tokens uniform on the pentagon to the atoms weighted by their own cell fractions: the map to the
    # nearest vertex (B = I, vertices on the unit circle: the cells are Voronoi cells) is optimal
    V = _pentagon()
    x = MT.sample_polygon(V, 500, rng=7)
    dist = np.linalg.norm(x[:, None] - V[None], axis=-1)
    f = np.bincount(dist.argmin(axis=1), minlength=len(V)) / len(x)
    assert abs(MT.w1_exact(x, V, b=f) - dist.min(axis=1).mean()) < TOL


def test_input_checks_name_the_argument():
    x = np.zeros((3, 2))
    with pytest.raises(ValueError, match="same dimension"):
        MT.w1_exact(x, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="^a must sum to 1"):
        MT.w1_exact(x, x, a=[0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match=r"^b must have shape \(3,\)"):
        MT.w1_exact(x, x, b=[0.5, 0.5])
    with pytest.raises(ValueError, match="^a must be nonnegative"):
        MT.w1_exact(x, x, a=[1.5, -0.5, 0.0])
    with pytest.raises(ValueError, match="^y must be finite"):
        MT.w1_exact(x, [[0.0, np.nan]])
    with pytest.raises(ValueError, match="max_entries"):
        MT.w1_exact(np.zeros((5, 2)), np.zeros((4, 2)), max_entries=19)
    with pytest.raises(ValueError, match="max_entries"):       # the default bound, before any allocation
        MT.w1_exact(np.zeros((4000, 2)), np.zeros((2501, 2)))


def test_chaos_exact_part():
    kw = dict(rng=11, directions=16)
    plain = MT.chaos([20, 40], 400, 0.5, 1.0, 2, 2, **kw)
    both = MT.chaos([20, 40], 400, 0.5, 1.0, 2, 2, exact_ns=[10, 30], exact_reference=200, **kw)
    assert np.array_equal(plain.distances, both.distances)     # the exact runs have streams of their own
    assert both.exact.shape == both.sliced_exact.shape == both.baseline.shape == (2, 2)
    assert np.all(both.sliced_exact <= both.exact + TOL)
    assert np.all(both.exact > 0) and np.all(both.baseline > 0)
    three = MT.chaos([20], 400, 0.5, 1.0, 2, 2, exact_ns=[10, 30], exact_reference=200,
                     exact_replicates=3, **kw)
    assert three.exact.shape == three.baseline.shape == (2, 3) and three.distances.shape == (1, 2)
    with pytest.raises(ValueError, match="reference must exceed exact_reference"):
        MT.chaos([20], 200, 0.5, 1.0, 2, 2, exact_ns=[10, 30], exact_reference=200, **kw)
    small = MT.chaos([20], 210, 0.5, 1.0, 2, 2, exact_ns=[30], exact_reference=200, **kw)   # drawn with replacement
    assert np.all(small.baseline > 0)
