"""Properties of the dynamics of Section 1: (1.3), (SA-inf), (SA-beta), (SAP)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from attention_fw.model import dynamics as D
from attention_fw.model import schedules as S
from attention_fw.geometry.polytope import regular_polygon


# ----------------------------------------------------------------- SAP in expectation is SA-beta
def test_sap_step_mean_is_softmax_step():
    """E[one SAP step | x] = one SA-beta step (Section 1.8), within 5 standard errors."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(6, 3))
    N = 40_000
    gamma, beta = 0.3, 1.7
    xs = np.broadcast_to(x, (N, 6, 3))
    out = D.sap_step(xs, gamma, beta, rng=rng)
    mean = out.mean(0)
    se = out.std(0, ddof=1) / np.sqrt(N)
    exact = D.softmax_step(x, gamma, beta)
    assert np.all(np.abs(mean - exact) <= 5 * se + 1e-15)


def test_sap_coincident_tokens_add_their_probabilities(check_coincident_pick):
    """Two tokens at the same point are picked together with the sum of their probabilities."""
    check_coincident_pick(beta=1.3, N=100_000)


def test_sap_reproducible_from_seed():
    x = np.random.default_rng(0).normal(size=(10, 4, 2))
    a = D.simulate(x, D.MarkovChain(0.2, 2.0, rng=7), 20).x
    b = D.simulate(x, D.MarkovChain(0.2, 2.0, rng=7), 20).x
    c = D.simulate(x, D.MarkovChain(0.2, 2.0, rng=8), 20).x
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_sap_moves_are_convex_steps_towards_tokens():
    """Every SAP move is (1-gamma) x_i + gamma x_J for the returned pick J."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 7, 2))
    out, J = D.sap_step(x, 0.25, 3.0, rng=rng, return_choice=True)
    target = np.take_along_axis(x, J[..., None], axis=-2)
    np.testing.assert_allclose(out, 0.75 * x + 0.25 * target, atol=1e-14)


# ----------------------------------------------------------------- SAP in the tails
def test_bernoulli_from_neg_log_law_through_several_pieces(monkeypatch):
    """P(hit) = exp(-t) when t is cut into pieces (memorylessness), within 5 standard errors."""
    from attention_fw.model import _sampling
    monkeypatch.setattr(_sampling, "TAIL_CHUNK", 0.5)  # t = 3 takes six exponential draws
    N = 1_000_000
    for t in (0.2, 3.0):
        p = np.exp(-t)
        hit = D.bernoulli_from_neg_log(np.full(N, t), rng=np.random.default_rng(int(10 * t)))
        assert abs(hit.mean() - p) <= 5 * np.sqrt(p * (1 - p) / N)
    rng = np.random.default_rng(0)
    assert D.bernoulli_from_neg_log(np.zeros(1000), rng=rng).all()  # P(E > 0) = 1
    assert not D.bernoulli_from_neg_log(np.full(1000, np.inf), rng=rng).any()
    assert not D.bernoulli_from_neg_log(np.full(1000, 1e5), rng=rng).any()  # e^-1e5, and it terminates


def _cluster_triangle(beta_copies=2):
    v = regular_polygon(3, phase=np.pi / 2)
    return np.repeat(v, beta_copies, axis=0)


@pytest.mark.parametrize("small_weight", [None, 0.01])
def test_sap_step_escape_law_from_coincident_clusters(monkeypatch, small_weight):
    """Two tokens on each vertex of a triangle: something moves with probability 1 - prod_i s_i,
    s_i = 2 / (2 + 4 e^{-3 beta / 2}) (own point against the four tokens at the other vertices).

    With SMALL_WEIGHT = 0.01 the escape weights e^{-7.5} fall in the tail group, so the
    two-group draw is what is tested; with the default they are in the main group."""
    if small_weight is not None:
        monkeypatch.setattr(D, "SMALL_WEIGHT", small_weight)
    x, beta, N = _cluster_triangle(), 5.0, 400_000
    s = 2 / (2 + 4 * np.exp(-1.5 * beta))
    p = 1 - s ** 6
    y = D.sap_step(np.broadcast_to(x, (N,) + x.shape), 0.1, beta, rng=np.random.default_rng(5))
    moved = (y != x).any(axis=(1, 2)).mean()
    assert abs(moved - p) <= 5 * np.sqrt(p * (1 - p) / N)


def test_sap_step_represents_escape_probabilities_far_below_epsilon(neg_logs):
    """At beta = 40 a clustered token leaves its point with probability 4e^{-60} / (2 + 4e^{-60}) ~ 1.8e-26.

    The step draws that event as Bernoulli(exp(-t)); t must be -log of the exact probability
    (to rounding), not inf as a cumulative-sum sampler would make it."""
    x, beta = _cluster_triangle(), 40.0
    D.sap_step(x, 0.1, beta, rng=np.random.default_rng(0))
    w = 4 * np.exp(-1.5 * beta)
    np.testing.assert_allclose(np.exp(-neg_logs[0]), w / (2 + w), rtol=1e-12)


# ----------------------------------------------------------------- beta -> infinity
def test_softmax_tends_to_hardmax_with_exponential_error():
    """|A_beta x - A_inf x|_i <= (n-1) exp(-beta * gap_i) * diam for generic data (gap = score margin)."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(8, 2))
    Sc = D.scores(x)
    srt = np.sort(Sc, axis=1)
    gap = srt[:, -1] - srt[:, -2]
    diam = np.max(np.linalg.norm(x[:, None] - x[None], axis=-1))
    hard = D.attention(x, beta=np.inf) @ x
    errs = []
    for beta in [1.0, 10.0, 100.0, 1000.0, 1e4]:
        err = np.linalg.norm(D.attention(x, beta=beta) @ x - hard, axis=1)
        assert np.all(err <= (len(x) - 1) * np.exp(-beta * gap) * diam + 1e-15)
        errs.append(err.max())
    assert errs[-1] < 1e-12 and all(a >= b for a, b in zip(errs, errs[1:]))


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, (5, 2), elements=st.floats(-1e3, 1e3)), st.floats(0, 1e6))
def test_softmax_finite_for_any_beta(x, beta):
    A = D.attention(x, beta=beta)
    assert np.all(np.isfinite(A))
    np.testing.assert_allclose(A.sum(-1), 1.0, rtol=1e-12)
    assert np.all(D.softmax_step(x, 0.5, beta) == D.softmax_step(x, 0.5, beta))  # no NaN


def test_subnormal_tokens_give_finite_weights_and_steps():
    """Tokens below 2^-1022 (found by the property above): the rescaling by a power of two stays finite.

    All scores are ~1e-622, so every softmax weight is 1/n (uniform) and coincident tokens stay put."""
    x = np.full((5, 2), 2.22507386e-311)
    x[0, 0] = 4.4501477e-311
    for beta in (0.0, 1.0, 1e6):
        np.testing.assert_allclose(D.attention(x, beta=beta), 0.2, rtol=1e-12)
    assert np.all(D.hardmax_step(x, 1.0) == x[0])       # every leader is token 0 (largest scores)
    np.testing.assert_array_equal(D.softmax_step(x[1:], 0.5, 3.0), x[1:])


def test_beta_1e6_equals_hardmax_for_generic_data():
    x = np.random.default_rng(5).uniform(-1, 1, size=(100, 12, 2))
    np.testing.assert_allclose(D.softmax_step(x, 0.4, 1e6), D.hardmax_step(x, 0.4), atol=1e-12)


def test_beta_zero_is_uniform_average():
    x = np.random.default_rng(6).normal(size=(5, 3))
    np.testing.assert_allclose(D.softmax_step(x, 1.0, 0.0), np.broadcast_to(x.mean(0), x.shape), atol=1e-14)


# ----------------------------------------------------------------- ties
def test_engineered_tie_is_averaged_and_matches_the_softmax_limit():
    """Token (0.3, 0.3) has two tied leaders e1, e2: it steps towards their midpoint,
    as the beta -> infinity limit of the softmax does; a coincident copy of e1 counts twice."""
    x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    assert D.tie_counts(x)[2] == 2
    target = D.attention(x) @ x
    np.testing.assert_allclose(target[2], [0.5, 0.5], atol=1e-15)
    np.testing.assert_allclose(D.attention(x, beta=1e5) @ x, target, atol=1e-12)
    x2 = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    t2 = (D.attention(x2) @ x2)[3]
    np.testing.assert_allclose(t2, [2 / 3, 1 / 3], atol=1e-15)
    np.testing.assert_allclose((D.attention(x2, beta=1e5) @ x2)[3], t2, atol=1e-12)


def test_square_with_centre_tie_rounding_is_still_a_tie():
    """Rotated square: scores of symmetric vertices differ only by rounding; they are still tied."""
    sq = regular_polygon(4, phase=0.1234)
    x = np.vstack([sq, [[0.0, 0.0]]])
    assert D.tie_counts(x)[4] == 5  # the centre scores 0 against everybody
    np.testing.assert_allclose(D.hardmax_step(x, 0.5)[4], [0, 0], atol=1e-15)


def test_no_ties_for_random_initialisations():
    """Lemma 2.1: for a.e. initial data every leader set is a single token, at every step."""
    x = np.random.default_rng(7).normal(size=(2000, 6, 2))
    for t in range(30):
        assert np.all(D.tie_counts(x) == 1)
        x = D.hardmax_step(x, 0.3)


# ----------------------------------------------------------------- the layer (1.3)
def test_layer_with_scalar_value_is_the_frank_wolfe_step():
    """V = hI gives P = gamma I with gamma = h/(1+h) (Section 1.6), for finite and infinite beta."""
    rng = np.random.default_rng(8)
    x = rng.normal(size=(3, 5, 2))
    h = 0.7
    g = h / (1 + h)
    np.testing.assert_allclose(D.preconditioner(h * np.eye(2)), g * np.eye(2), atol=1e-15)
    np.testing.assert_allclose(D.layer_step(x, np.inf, np.eye(2), h * np.eye(2)), D.hardmax_step(x, g), atol=1e-14)
    np.testing.assert_allclose(D.layer_step(x, 2.5, np.eye(2), h * np.eye(2)), D.softmax_step(x, g, 2.5), atol=1e-14)
    assert S.FromValue(h)(3) == pytest.approx(g)


def test_layer_equals_its_renormalised_form():
    """x + P(Ax - x) == (I+V)^{-1}(x + V A x): the two printed forms of (1.3) agree."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(6, 3))
    Vm = rng.normal(size=(3, 3))
    B = rng.normal(size=(3, 3))
    A = D.attention(x, 1.3, B)
    rhs = np.linalg.solve(np.eye(3) + Vm, (x + (A @ x) @ Vm.T).T).T
    np.testing.assert_allclose(D.layer_step(x, 1.3, B, Vm), rhs, atol=1e-12)


# ----------------------------------------------------------------- hull shrinking and growing
def _inside(pts, q, tol=1e-9):
    """Membership of each row of q in conv(pts) (planar), independent of the dynamics, robust to slivers.

    Caratheodory in the plane: q is in the hull iff it lies in a triangle of three of the points,
    or on a segment between two of them (the degenerate cases). Segments are tested by distance
    (at most ``tol`` times the cloud's size); triangles by the signs of three cross products."""
    pts = np.asarray(pts, float)
    scale = max(1.0, float(np.abs(pts).max()))
    m = len(pts)

    def seg_dist(y, a, b):
        ab = b - a
        t = 0.0 if not ab.any() else np.clip((y - a) @ ab / (ab @ ab), 0.0, 1.0)
        return np.linalg.norm(y - (a + t * ab))

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    out = []
    for y in np.atleast_2d(q):
        inside = any(seg_dist(y, pts[i], pts[j]) <= tol * scale for i in range(m) for j in range(i, m))
        for i in range(m):
            for j in range(i + 1, m):
                for k in range(j + 1, m):
                    if inside:
                        break
                    a, b, c = pts[i], pts[j], pts[k]
                    if cross(a, b, c) == 0.0:
                        continue
                    s1, s2, s3 = cross(a, b, y), cross(b, c, y), cross(c, a, y)
                    inside = (s1 >= 0 and s2 >= 0 and s3 >= 0) or (s1 <= 0 and s2 <= 0 and s3 <= 0)
        out.append(inside)
    return np.array(out)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.01, 0.99), st.integers(3, 9))
def test_hull_shrinks_under_hardmax(seed, gamma, n):
    """Section 2.3: gamma in (0,1) gives K^{t+1} inside K^t, for any key-query matrix B."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    B = rng.normal(size=(2, 2))
    for _ in range(5):
        new = D.hardmax_step(x, gamma, B)
        assert np.all(_inside(x, new))
        x = new


def test_diagonal_value_matrix_can_grow_the_hull():
    """Section 2.4: P = diag(0.6, 0.7), B = [[0,1],[1,0]] sends e1 to (0.4, 0.7), outside the triangle."""
    x = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    Vm = np.diag([1.5, 7 / 3])
    np.testing.assert_allclose(D.preconditioner(Vm), np.diag([0.6, 0.7]), atol=1e-15)
    new = D.layer_step(x, np.inf, np.array([[0.0, 1.0], [1.0, 0.0]]), Vm)
    np.testing.assert_allclose(new[1], [0.4, 0.7], atol=1e-15)
    assert new[1].sum() > 1 and not _inside(x, new[1:2])[0]


# ----------------------------------------------------------------- vertices and Theorem 4.2
def test_vertex_owning_its_cell_is_fixed_and_other_moves():
    """A vertex v with <Bv,v> > <Bv,w> for all other tokens w is its own leader and stays put;
    a vertex that does not own its cell moves towards its leader."""
    pent = regular_polygon(5, phase=0.3)
    x = np.vstack([pent, [[0.1, 0.05]]])
    new = D.hardmax_step(x, 0.5)
    np.testing.assert_array_equal(new[:5], pent)
    tri = np.array([[1.0, 0.0], [2.0, 2.0], [-1.0, 1.0]])  # <a,a> = 1 < <a,b> = 2
    new = D.hardmax_step(tri, 0.5)
    np.testing.assert_allclose(new[0], [1.5, 1.0])
    assert not np.allclose(new[0], tri[0])


@pytest.mark.parametrize("schedule", [S.Constant(0.3), S.Harmonic(), S.Halving(), S.ToOne(0.4), S.FrankWolfe()])
@pytest.mark.parametrize("B", [np.eye(2), np.diag([1.0, 2.0])])
def test_theorem_4_2_closed_form(schedule, B):
    """x_i^t = prod(1-g) x_i^0 + (1 - prod(1-g)) v_sigma(i), to machine precision (Theorem 4.2)."""
    circle = regular_polygon(7, phase=0.3)
    verts = circle @ np.linalg.inv(np.linalg.cholesky(B)).T  # on the level set <Bv,v> = 1
    rng = np.random.default_rng(10)
    w = rng.dirichlet(np.ones(7), size=(64, 20))
    interior = w @ verts  # (64, 20, 2) random points of K
    x0 = np.concatenate([np.broadcast_to(verts, (64, 7, 2)), interior], axis=1)
    sigma = (interior @ B @ verts.T).argmax(-1)
    T = 40
    res = D.simulate(x0, D.Hardmax(schedule, B), T, trajectory=True)
    for t in [1, 5, 17, T]:
        p = schedule.product(t)
        expected = p * interior + (1 - p) * verts[sigma]
        np.testing.assert_allclose(res.trajectory[t][:, 7:], expected, atol=1e-13)
        np.testing.assert_allclose(res.trajectory[t][:, :7], x0[:, :7], atol=1e-15)  # the hull is fixed


# ----------------------------------------------------------------- simulate and recorders
def test_recorders_give_summaries_without_trajectory():
    x = np.random.default_rng(11).normal(size=(30, 5, 2))
    rec = D.FunctionRecorder("spread", lambda x, t: x.std(axis=-2).sum(-1), every=3)
    res = D.simulate(x, D.Softmax(0.2, 1.0), 10, [rec])
    assert res.trajectory is None
    np.testing.assert_array_equal(res.record_times["spread"], [0, 3, 6, 9, 10])
    assert res.records["spread"].shape == (5, 30)
    np.testing.assert_allclose(res.records["spread"][-1], res.x.std(axis=-2).sum(-1))
    assert np.all(np.diff(res.records["spread"], axis=0) <= 1e-12)  # SA-beta contracts the spread here


# ----------------------------------------------------------------- bad input
@pytest.mark.parametrize("call,match", [
    (lambda: D.hardmax_step(np.zeros(3), 0.5), "x"),
    (lambda: D.hardmax_step(np.full((3, 2), np.nan), 0.5), "x"),
    (lambda: D.hardmax_step(np.zeros((3, 2)), 1.5), "gamma"),
    (lambda: D.hardmax_step(np.zeros((3, 2)), 0.0), "gamma"),
    (lambda: D.softmax_step(np.zeros((3, 2)), 0.5, -1.0), "beta"),
    (lambda: D.softmax_step(np.zeros((3, 2)), 0.5, np.inf), "beta"),
    (lambda: D.attention(np.zeros((3, 2)), B=np.eye(3)), "B"),
    (lambda: D.preconditioner(-np.eye(2)), "V"),
    (lambda: D.simulate(np.zeros((3, 2)), "hardmax", 3), "rule"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_near_tie_is_not_a_tie():
    """A token 1e-12 away from a vertex that owns its cell: the vertex stays its own unique leader."""
    pent = regular_polygon(5, phase=0.3)
    x = np.vstack([pent, pent[:1] * (1 - 1e-12)])
    assert D.tie_counts(x)[0] == 1
    np.testing.assert_array_equal(D.hardmax_step(x, 0.5)[:5], pent)
    with pytest.raises(ValueError, match="tie_rtol"):
        D.tie_counts(x, tie_rtol=-1.0)
