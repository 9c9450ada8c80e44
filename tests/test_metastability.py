"""Section 5: geometry of the hypotheses, phase 1, exit times, the rejection-free engine, fits.

Statistical tests use fixed seeds; every tolerance is stated next to the assertion (as a
number of standard errors or a p-value threshold). With fixed seeds they are deterministic;
the thresholds say how unlikely a failure would be for a correct implementation.
"""
import math

import numpy as np
import pytest
from scipy import optimize, stats

from attention_fw.experiments import exit_times as ET
from attention_fw.experiments import metastability as M
from attention_fw.geometry import polytope as P
from attention_fw.experiments import survival as SV

TRI = P.points_on_circle()


# ---------------------------------------------------------------------------------------
# geometry: c0, (5.1), eroded cones
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [3, 4, 5, 6, 7])
def test_c0_regular_polygon_closed_form(k):
    v = P.regular_polygon(k, phase=0.0)
    assert P.c0(v) == pytest.approx(1 - math.cos(2 * math.pi / k), abs=1e-12)


@pytest.mark.parametrize("d", [2, 3, 5])
def test_regular_simplex_inner_products_and_c0(d):
    v = P.regular_simplex(d)
    G = v @ v.T
    assert np.allclose(np.diag(G), 1.0)
    off = G[~np.eye(d + 1, dtype=bool)]
    assert np.allclose(off, -1.0 / d)
    assert P.c0(v) == pytest.approx(1 + 1 / d)
    assert np.allclose(P.vertex_angles(v), np.pi / 3)          # 60-degree edge angles
    assert P.satisfies_51(v)


def test_condition_51_forces_acute_triangle_in_2d():
    # interior angles of a triangle sum to pi
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = P.points_on_circle(np.sort(rng.uniform(0, 360, 3)))
        a = P.vertex_angles(v)
        assert a.sum() == pytest.approx(np.pi, abs=1e-9)
        assert P.satisfies_51(v) == bool(a.max() < np.pi / 2)
    assert not P.satisfies_51(P.points_on_circle((0, 30, 150)))     # obtuse (105 degrees)
    assert not P.satisfies_51(P.points_on_circle((0, 10, 180)))     # right angle (Thales)
    for k in (4, 5, 7):                                              # regular k-gons fail
        v = P.regular_polygon(k, phase=0.0)
        assert np.allclose(P.vertex_angles(v), np.pi - 2 * np.pi / k)
        assert not P.satisfies_51(v)
    cross = np.vstack([np.eye(3), -np.eye(3)])                        # cross-polytope: 90 degrees
    assert np.allclose(P.vertex_angles(cross), np.pi / 2)
    assert not P.satisfies_51(cross)


def test_eroded_cone_matches_definition():
    """x is in I_i(eta) (-) delta B_1 (inside eroded K) iff the whole disc x + delta B_1 lies in
    I_i(eta): checked against the definition on 720 boundary points of the disc (which
    suffices for an intersection of half-planes up to O(delta (1 - cos(pi/720))))."""
    eta, delta = 0.2, 0.1
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, size=(4000, 2))
    mask = P.eroded_cone_mask(x, TRI, 0, eta, delta)
    ang = np.linspace(0, 2 * np.pi, 720, endpoint=False)
    disc = x[:, None, :] + delta * np.stack([np.cos(ang), np.sin(ang)], 1)[None]
    diff = TRI[0] - TRI[1:]
    in_cone = np.all(disc @ diff.T >= eta, axis=-1).all(-1)
    # K = triangle: barycentric coordinates >= 0
    A = np.vstack([TRI.T, np.ones(3)])
    bary = np.linalg.solve(A, np.concatenate([disc.reshape(-1, 2).T, np.ones((1, disc.shape[0] * 720))]))
    in_K = np.all(bary.T.reshape(disc.shape[0], 720, 3) >= 0, axis=-1).all(-1)
    truth = in_cone & in_K
    disagree = mask != truth
    # disagreements only within 1e-4 of the boundary of the eroded set (disc discretisation)
    assert disagree.sum() <= 2, disagree.sum()
    assert mask.sum() > 50


def test_hypothesis_beta_min_is_threshold():
    b = M.hypothesis_beta_min(TRI)
    assert 100 < b < 1e4
    for f, nonempty in ((1.01, True), (0.99, False)):
        beta = b * f
        rng = np.random.default_rng(2)
        pts = rng.uniform(-1, 1, size=(200_000, 2))
        # just above the threshold the set is tiny; check with the LP slack instead of sampling
        slack = min(P.eroded_slack(TRI, i, beta ** (-1 / 8), beta ** (-1 / 4)) for i in range(3))
        assert (slack >= 0) == nonempty
        if not nonempty:
            assert not P.eroded_cone_mask(pts, TRI, 0, beta ** (-1 / 8), beta ** (-1 / 4)).any()


def test_phase1_configuration_satisfies_hypotheses():
    beta0 = 1e4
    x0, sig = M.phase1_configuration(TRI, 3, beta0, rng=3, min_dist=0.5)
    assert np.array_equal(x0[:3], TRI)
    for j in range(3, len(x0)):
        i = sig[j]
        assert P.eroded_cone_mask(x0[j], TRI, i, beta0 ** (-1 / 8), beta0 ** (-1 / 4))
        # every token lies in the cell C_sigma(j)(v): sigma(j) is the nearest vertex
        assert np.argmin(np.linalg.norm(TRI - x0[j], axis=1)) == i
    bmin = M.configuration_beta_min(x0, TRI, sig)
    assert bmin <= beta0 * (1 + 1e-9)
    assert M.hypothesis_beta_min(TRI) <= bmin


# ---------------------------------------------------------------------------------------
# Theorem 5.2: T1 and the event
# ---------------------------------------------------------------------------------------

def test_T1_definition():
    x0, sig = M.phase1_configuration(TRI, 2, 1e4, rng=4, min_dist=0.55)
    for gamma in (0.02, 0.05, 0.1, 0.3):
        c = M.phase1_constants(x0, TRI, sig, gamma)
        dist = np.linalg.norm(x0[3:] - TRI[sig[3:]], axis=1)
        assert c["m"] == pytest.approx(dist.min())
        assert c["tau"] == pytest.approx(min(1.5 / (2 * math.sqrt(3)), math.sqrt(3) / 2, (1 - gamma) * dist.min()))
        T1 = c["T1"]
        assert T1 >= 1
        # T1 = floor(log(tau/m) / log(1 - gamma)): largest t with (1 - gamma)^t m >= tau
        assert (1 - gamma) ** T1 * c["m"] >= c["tau"] * (1 - 1e-12)
        assert (1 - gamma) ** (T1 + 1) * c["m"] < c["tau"]
        assert c["C"] > 1


def test_T1_is_one_at_the_tie_tau_equal_to_one_step():
    """When tau = (1 - gamma) m (the interior tokens start close to their vertices), T1 is 1
    exactly: log(tau / m) / log(1 - gamma) = 1, which rounding used to floor to 0; phase 1 then
    runs its 3 T1 steps."""
    for frac, gamma in ((0.7, 0.1), (0.95, 0.2), (0.9, 0.05)):
        x0 = np.vstack([TRI, frac * TRI])
        sig = np.array([0, 1, 2, 0, 1, 2])
        c = M.phase1_constants(x0, TRI, sig, gamma)
        assert c["tau"] == (1 - gamma) * c["m"]
        assert c["T1"] == 1
        assert M.run_phase1(x0, TRI, sig, gamma, 1e4, 4, rng=0)["runs"] == 4


def test_phase1_vacuous_without_interior_tokens():
    with pytest.raises(ValueError, match="x0"):
        M.phase1_constants(TRI, TRI, np.arange(3), 0.1)


def test_phase1_event_components():
    x0, sig = M.phase1_configuration(TRI, 1, 1e4, rng=5, min_dist=0.5)
    c = M.phase1_constants(x0, TRI, sig, 0.1)
    beta = 1e4
    x = np.stack([x0, x0])
    x[1, 0] += [0.0, -1.01 * beta ** (-1 / 4)]          # vertex token moved just too far
    ev = M.phase1_event(x, TRI, sig, beta, c["tau"], c["C"])
    assert ev["vertices"].tolist() == [True, False]
    # at time 0 interior tokens sit at distance <= max_dist = C (1 - gamma) m <= C tau? only if tau = (1-gamma) m
    assert ev["interior"][0] == bool(np.max(np.linalg.norm(x0[3:] - TRI[sig[3:]], axis=1)) < c["C"] * c["tau"])


# ---------------------------------------------------------------------------------------
# the rejection-free engine against closed forms
# ---------------------------------------------------------------------------------------

def _brute_stay_log_q(points, counts, beta):
    """-log q computed token by token from the full softmax matrix (independent of the library)."""
    x = np.repeat(points, counts, axis=0)
    L = beta * x @ x.T
    A = np.exp(L - L.max(1, keepdims=True))
    A /= A.sum(1, keepdims=True)
    same = np.all(x[:, None] == x[None], -1)
    return -np.sum(np.log((A * same).sum(1)))


@pytest.mark.parametrize("beta", [0.0, 0.5, 2.0, 5.0])
def test_frozen_escape_rate_closed_form(beta):
    v = P.points_on_circle((80, 200, 320))
    counts = np.array([1, 3, 2])
    assert ET.frozen_escape_rate(v, counts, beta) == pytest.approx(_brute_stay_log_q(v, counts, beta), rel=1e-12)
    x0, sig = ET.cluster_configuration(v, counts)
    d, _, _ = ET.move_log_odds(x0[None], beta)
    assert np.sum(np.logaddexp(0, d)) == pytest.approx(ET.frozen_escape_rate(v, counts, beta), rel=1e-12)


def test_frozen_escape_rate_large_beta_asymptotics():
    # equilateral triangle, m tokens per vertex: -log q = n log(1 + 2 e^{-beta c0}) ~ 2 n e^{-1.5 beta}
    for beta in (20.0, 100.0, 400.0):
        lam = ET.frozen_escape_rate(TRI, np.array([2, 2, 2]), beta)
        assert lam > 0 and np.isfinite(lam)
        assert lam == pytest.approx(12 * math.exp(-1.5 * beta), rel=1e-6)
    # beta = 1e6: the escape probability underflows to exactly 0, never NaN
    assert ET.frozen_escape_rate(TRI, np.array([2, 2, 2]), 1e6) == 0.0


def test_engine_single_jump_is_geometric_small_mean():
    """beta = 1: E[T2] = 1/(1 - q) ~ 1.3; chi-square goodness of fit of T2 against Geom(1 - q)."""
    counts = np.array([2, 2, 2])
    x0, sig = ET.cluster_configuration(TRI, counts)
    beta, gamma, eps = 1.0, 0.1, 0.05                       # eps < gamma sqrt(3): single jump
    es = ET.engine_exit_times(x0, sig, gamma, beta, eps, 20_000, rng=11)
    assert es.n_censored == 0 and np.all(es.events == 1)
    q = math.exp(-ET.frozen_escape_rate(TRI, counts, beta))
    ks = np.arange(1, 6)
    obs = np.array([np.sum(es.times == k) for k in ks] + [np.sum(es.times > ks[-1])])
    pk = np.array([q ** (k - 1) * (1 - q) for k in ks] + [q ** ks[-1]])
    chi2 = np.sum((obs - len(es.times) * pk) ** 2 / (len(es.times) * pk))
    assert stats.chi2.sf(chi2, len(pk) - 1) > 1e-3, chi2


@pytest.mark.parametrize("beta", [8.0, 20.0, 60.0])
def test_engine_single_jump_exponential_scaling_large_beta(beta):
    """(1 - q) T2 is asymptotically Exp(1) when q -> 1: KS test (p > 1e-3) and mean within 4 SE."""
    counts = np.array([1, 2, 3])
    x0, sig = ET.cluster_configuration(TRI, counts)
    lam = ET.frozen_escape_rate(TRI, counts, beta)
    es = ET.engine_exit_times(x0, sig, 0.1, beta, 0.05, 5000, rng=12)
    assert es.n_censored == 0
    z = es.times * -math.expm1(-lam)
    assert stats.kstest(z, "expon").pvalue > 1e-3
    assert abs(z.mean() - 1) < 4 / math.sqrt(len(z))


def test_engine_censoring_at_cap_keeps_every_run():
    counts = np.array([2, 2, 2])
    x0, sig = ET.cluster_configuration(TRI, counts)
    beta = 6.0
    lam = ET.frozen_escape_rate(TRI, counts, beta)
    cap = 300.0
    es = ET.engine_exit_times(x0, sig, 0.1, beta, 0.05, 20_000, rng=13, cap=cap)
    assert len(es.times) == 20_000 and np.all(es.times[es.censored] == cap)
    assert np.all(es.times[~es.censored] <= cap)
    p_cens = math.exp(-lam * cap)                              # P(T2 > cap) = q^cap
    se = math.sqrt(p_cens * (1 - p_cens) / 20_000)
    assert abs(es.n_censored / 20_000 - p_cens) < 4 * se


def test_engine_huge_beta_is_censored_not_nan():
    x0, sig = ET.cluster_configuration(TRI, np.array([2, 2, 2]))
    es = ET.engine_exit_times(x0, sig, 0.1, 1e6, 0.05, 100, rng=0, cap=1e15)
    assert np.all(es.censored) and np.all(es.times == 1e15)
    # all tokens at one point: nothing can ever move
    es = ET.engine_exit_times(np.zeros((4, 2)), np.zeros(4, int), 0.1, 1.0, 0.05, 10, rng=0, cap=50)
    assert np.all(es.censored) and np.all(np.isfinite(es.times))


def test_event_step_conditional_law():
    """At the event step from a frozen configuration, P(token i jumps to point b | event) =
    w_ib / (1 - q) (independent tokens conditioned on 'at least one moves'); each
    frequency within 4.5 binomial standard errors."""
    v = P.points_on_circle((80, 200, 320))
    counts = np.array([1, 2, 3])
    beta = 1.5
    x0, sig = ET.cluster_configuration(v, counts)
    R = 60_000
    x = np.broadcast_to(x0, (R,) + x0.shape).copy()
    d, L, same = ET.move_log_odds(x, beta)
    xn, move = ET._event_step(x, d, L, same, 0.1, np.random.default_rng(14))
    assert np.all(move.any(1))
    # closed form
    W = np.exp(beta * v @ v.T) * counts[None]
    W /= W.sum(1, keepdims=True)
    q = np.prod(np.diag(W) ** counts)
    for i in range(len(x0)):
        a = sig[i]
        for b in range(3):
            if b == a:
                continue
            target = 0.9 * v[a] + 0.1 * v[b]
            freq = np.mean(np.all(np.isclose(xn[:, i], target, atol=1e-12), -1))
            p = W[a, b] / (1 - q)
            assert abs(freq - p) < 4.5 * math.sqrt(p * (1 - p) / R), (i, b, freq, p)
    # the number of movers: P(at least two move | event) from the product formula
    s = np.repeat(np.diag(W), counts)
    p1 = sum((1 - s[i]) * np.prod(np.delete(s, i)) for i in range(len(s))) / (1 - q)
    f1 = np.mean(move.sum(1) == 1)
    assert abs(f1 - p1) < 4.5 * math.sqrt(p1 * (1 - p1) / R)


# ---------------------------------------------------------------------------------------
# distance to the hull (exit region)
# ---------------------------------------------------------------------------------------

def test_distance_to_hull_against_quadratic_programme():
    rng = np.random.default_rng(5)
    Q = rng.normal(size=(5, 2))
    x = rng.normal(scale=2, size=(40, 2))
    dist = P.distance_to_hull(x, Q)

    def qp(y):
        res = optimize.minimize(lambda w: np.sum((w @ Q - y) ** 2), np.full(5, 0.2),
                                bounds=[(0, 1)] * 5, constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1}],
                                method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        return math.sqrt(max(res.fun, 0))
    ref = np.array([qp(y) for y in x])
    assert np.allclose(dist, ref, atol=1e-6)
    w = rng.dirichlet(np.ones(5), size=30)
    assert np.allclose(P.distance_to_hull(w @ Q, Q), 0, atol=1e-12)


# ---------------------------------------------------------------------------------------
# censored fits
# ---------------------------------------------------------------------------------------

def test_geometric_censored_mle_unbiased_and_covers():
    """Synthetic Geom(p) censored at a cap (about 37 % censored). Over 400 replications the
    mean of p_hat is within 1 % of p (its standard error is ~0.2 %, its O(1/D) bias ~0.2 %),
    and the 95 % interval covers the truth in 92-98 % of replications. Dropping the censored
    runs or counting them as exits is off by far more than 1 %."""
    p, cap, n, reps = 0.01, 100, 1000, 400
    rng = np.random.default_rng(6)
    T = rng.geometric(p, size=(reps, n)).astype(float)
    cens = T > cap
    T = np.where(cens, cap, T)
    fits = [SV.fit_geometric_censored(T[r], cens[r]) for r in range(reps)]
    phat = np.array([f.rate for f in fits])
    assert all(f.n_censored == cens[r].sum() for r, f in enumerate(fits))
    assert abs(phat.mean() / p - 1) < 0.01
    cover = np.mean([f.log_mean_ci[0] <= -math.log(p) <= f.log_mean_ci[1] for f in fits])
    assert 0.92 <= cover <= 0.98
    naive_drop = np.mean([1 / T[r][~cens[r]].mean() for r in range(reps)])
    naive_exit = np.mean([1 / T[r].mean() for r in range(reps)])
    assert abs(naive_drop / p - 1) > 0.1 and abs(naive_exit / p - 1) > 0.1


def test_exponential_censored_mle():
    lam, cap, n, reps = 2.0, 0.4, 2000, 300
    rng = np.random.default_rng(7)
    T = rng.exponential(1 / lam, size=(reps, n))
    cens = T > cap
    T = np.where(cens, cap, T)
    est = np.array([SV.fit_exponential_censored(T[r], cens[r]).rate for r in range(reps)])
    # relative standard error of one estimate ~ 1/sqrt(D) ~ 0.03; of the mean ~ 0.002
    assert abs(est.mean() / lam - 1) < 0.01


def test_fit_without_exits_gives_one_sided_interval():
    f = SV.fit_geometric_censored(np.full(10, 1000.0), np.ones(10, bool))
    assert f.mean == math.inf and f.n_censored == 10
    assert f.log_mean_ci[0] == pytest.approx(math.log(10_000 / -math.log(0.05)))


def test_slope_fit_recovers_c0_on_exact_geometric_data():
    counts = np.array([2, 2, 2])
    betas = np.array([6.0, 8.0, 10.0, 12.0])
    rng = np.random.default_rng(8)
    fits = []
    for b in betas:
        p = -math.expm1(-ET.frozen_escape_rate(TRI, counts, b))
        T = rng.geometric(p, size=4000).astype(float)
        fits.append(SV.fit_geometric_censored(T, np.zeros(len(T), bool)))
    s = SV.fit_log_mean_slope(betas, fits)
    # exact log E[T2] = -log(1 - q) has slope -> 1.5 (difference < 1e-3 at these beta)
    assert s["slope_ci"][0] < 1.5 < s["slope_ci"][1]
    assert s["slope_se"] < 0.02


# ---------------------------------------------------------------------------------------
# the bound of Theorem 5.4
# ---------------------------------------------------------------------------------------

def test_bound_printed_formula_properties():
    t = np.logspace(0.1, 8, 50)
    b = M.metastability_bound(t, 20.0, 6, 0.1, 0.35, 1.5, form="printed")
    assert np.all((0 <= b) & (b <= 1)) and np.all(np.diff(b) <= 0)
    # explicit value of the printed exponent at one point
    k = 1 + 3.5
    expo = k * math.log(0.1 * 10 / 0.35) + k * math.log(6) - 20 * 1.5 * 3.5 / 2
    assert M.metastability_bound(10.0, 20.0, 6, 0.1, 0.35, 1.5) == pytest.approx(1 - math.exp(expo))
    assert M.metastability_bound(10.0, 25.0, 6, 0.1, 0.35, 1.5) >= M.metastability_bound(10.0, 20.0, 6, 0.1, 0.35, 1.5)


def test_corrected_bound_one_bad_step_closed_form():
    # eps / (gamma d) <= 1: M = 1, the union bound is n t * n e^{-beta c0 / 2}
    t = np.array([2.0, 10.0, 100.0])
    b = M.metastability_bound(t, 30.0, 3, 0.1, 0.1, 1.5, diam=math.sqrt(3), form="corrected")
    assert np.allclose(b, np.clip(1 - 3 * t * 3 * np.exp(-30.0 * 1.5 / 2), 0, 1))
    # huge t: log binom(N, M) must stay accurate (no cancellation), so the bound is monotone
    tt = np.logspace(0, 25, 2000)
    bb = M.metastability_bound(tt, 32.0, 3, 0.1, 0.35, 1.5, diam=math.sqrt(3), form="corrected")
    assert np.all(np.diff(bb) <= 1e-15)
    M3 = math.ceil(3.5 / math.sqrt(3))
    from scipy.special import comb
    for t0 in (1e3, 1e9):
        exact = comb(3 * t0, M3, exact=False) * (3 * math.exp(-24.0)) ** M3
        assert M.metastability_bound(t0, 32.0, 3, 0.1, 0.35, 1.5, diam=math.sqrt(3),
                                     form="corrected") == pytest.approx(max(0.0, 1 - exact), rel=1e-9, abs=1e-12)
    with pytest.raises(ValueError, match="diam"):
        M.metastability_bound(t, 30.0, 3, 0.1, 0.1, 1.5, form="corrected")


def test_corrected_bound_below_engine_survival_one_token_per_vertex():
    """Theorem regime (eps/gamma = 3.5 >= 2 d(K)) with one token per vertex: the engine's
    survival must lie above the (corrected) lower bound, up to 4 binomial standard errors."""
    x0, sig = ET.cluster_configuration(TRI, np.array([1, 1, 1]))
    beta, gamma, eps = 24.0, 0.1, 0.35
    es = ET.engine_exit_times(x0, sig, gamma, beta, eps, 4000, rng=9, max_events=2000)
    assert es.n_censored == 0
    t = np.logspace(0.5, 8, 30)
    surv = es.survival(t)
    bound = M.metastability_bound(t, beta, 3, gamma, eps, 1.5, diam=math.sqrt(3), form="corrected")
    se = np.sqrt(np.maximum(bound * (1 - bound), 1e-12) / 4000)
    assert np.all(surv >= bound - 4 * se)
    assert bound.max() > 0.5                    # the comparison is not vacuous


def test_survival_kaplan_meier_equals_fraction_with_common_cap():
    T = np.array([1.0, 3.0, 3.0, 5.0, 10.0, 10.0])
    c = np.array([False, False, False, False, True, True])
    es = ET.ExitSample(T, c)
    for t in (1, 2, 3, 4, 5, 6, 10):
        assert es.survival(t)[0] == pytest.approx(np.mean(T >= t))


# ---------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------

def test_bad_inputs_name_the_argument():
    x0, sig = ET.cluster_configuration(TRI, np.array([1, 1, 1]))
    with pytest.raises(ValueError, match="gamma"):
        ET.engine_exit_times(x0, sig, 1.5, 1.0, 0.1, 10, rng=0)
    with pytest.raises(ValueError, match="eps"):
        ET.engine_exit_times(x0, sig, 0.1, 1.0, 0.0, 10, rng=0)
    with pytest.raises(TypeError, match="runs"):
        ET.engine_exit_times(x0, sig, 0.1, 1.0, 0.1, 10.5, rng=0)
    with pytest.raises(ValueError, match="sigma"):
        ET.engine_exit_times(x0, sig[:2], 0.1, 1.0, 0.1, 10, rng=0)
    with pytest.raises(ValueError, match="counts"):
        ET.cluster_configuration(TRI, np.array([1, 0, 1]))
    with pytest.raises(ValueError, match="form"):
        M.metastability_bound(2.0, 1.0, 3, 0.1, 0.1, 1.5, form="nope")
    with pytest.raises(ValueError, match="censored"):
        SV.fit_geometric_censored([1.0, 2.0], [0, 1])


# ---------------------------------------------------------------------------------------
# sweeps: executors and the on-disk cache
# ---------------------------------------------------------------------------------------

def _counted_square(*, x, counter):
    """Task that leaves one line in ``counter`` per actual computation."""
    with open(counter, "a") as fh:
        fh.write(f"{x}\n")
    return x * x


def _ncalls(path):
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("executor", ["serial", "processes", "local-dask"])
def test_sweep_cache_hit_recomputes_nothing(tmp_path, executor):
    from afw_book import sweeps
    counter = tmp_path / "calls.txt"
    params = sweeps.grid(x=[1, 2, 3, 4], counter=str(counter))
    kw = dict(cache_dir=tmp_path / "cache", progress=False, max_workers=2)
    assert sweeps.run(_counted_square, params, executor=executor, **kw) == [1, 4, 9, 16]
    assert _ncalls(counter) == 4
    # second pass: everything is loaded from the cache, no task runs anywhere
    assert sweeps.run(_counted_square, params, executor=executor, **kw) == [1, 4, 9, 16]
    assert _ncalls(counter) == 4
    # one new parameter: exactly one computation
    params2 = params + sweeps.grid(x=[5], counter=str(counter))
    assert sweeps.run(_counted_square, params2, executor="serial", **kw)[-1] == 25
    assert _ncalls(counter) == 5
    # cache=False always recomputes and stores nothing
    assert sweeps.run(_counted_square, params[:1], executor="serial", cache=False, **kw) == [1]
    assert _ncalls(counter) == 6


def test_sweep_exit_time_task_through_dask_matches_serial(tmp_path):
    """The same seeded tasks give identical exit times through a Dask LocalCluster and in-process."""
    from afw_book import sweeps
    params = sweeps.grid(beta=[2.0, 4.0], rng=[0, 1], n=[4, 8], kappa=[3, 4], runs=200)
    a = sweeps.run(ET.exit_time_task, params, executor="local-dask", cache=False, progress=False)
    b = sweeps.run(ET.exit_time_task, params, executor="serial", cache=False, progress=False)
    for ra, rb, p in zip(a, b, params):
        assert ra["beta"] == p["beta"] and ra["kappa"] == p["kappa"]
        assert np.array_equal(ra["times"], rb["times"]) and np.array_equal(ra["censored"], rb["censored"])
        assert ra["c0"] == pytest.approx(1 - math.cos(2 * math.pi / p["kappa"]))


def test_local_dask_leaves_port_8787_alone():
    """The local cluster's HTTP server listens on the loopback at a free port: a reader's own
    cluster on 8787 (the dashboard's default) is not touched, and no warning about it is raised."""
    import socket
    import warnings

    from afw_book import sweeps
    holder = socket.socket()
    try:
        try:
            holder.bind(("0.0.0.0", 8787))
            holder.listen()
        except OSError:
            pass                                   # already taken by someone else: the same situation
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = sweeps.run(_square, sweeps.grid(v=[1, 2]), executor="local-dask", cache=False,
                             progress=False)
    finally:
        holder.close()
    assert out == [1, 4]


def _square(v):
    return v * v


def test_sweep_grid_is_the_cartesian_product_and_rejects_an_empty_axis():
    from afw_book import sweeps
    params = sweeps.grid(beta=np.array([1.0, 2.0]), seed=[0, 1, 2], n=np.int64(4))
    assert len(params) == 2 * 3 * 1
    assert {(q["beta"], q["seed"]) for q in params} == {(b, s) for b in (1.0, 2.0) for s in (0, 1, 2)}
    assert all(q["n"] == 4 and type(q["n"]) is int and type(q["beta"]) is float for q in params)
    assert sweeps.grid(rng=range(3), beta=2.0) == sweeps.grid(rng=[0, 1, 2], beta=2.0)   # a range is an axis
    assert sweeps.grid(executor="serial") == [{"executor": "serial"}]                      # a string is one value
    for empty in ([], (), np.array([]), range(0)):
        with pytest.raises(ValueError, match=r"^beta must hold at least one value"):
            sweeps.grid(seed=[0, 1], beta=empty)


def test_sweep_rejects_bad_arguments():
    from afw_book import sweeps
    with pytest.raises(TypeError, match="fn"):
        sweeps.run(3, [{}])
    with pytest.raises(TypeError, match="params"):
        sweeps.run(_counted_square, {"x": 1})
    with pytest.raises(ValueError, match="executor"):
        sweeps.run(_counted_square, [{"x": 1, "counter": "/dev/null"}], executor="nonsense", cache=False,
                   progress=False)
    with pytest.raises(ValueError, match="n must be"):
        ET.tokens_per_vertex(2, 3)


# ---------------------------------------------------------------------------------------
# the engine against plain step-by-step (SAP) (attention_fw.model.dynamics.sap_step)
# ---------------------------------------------------------------------------------------

def test_engine_matches_stepping_single_jump_regime():
    """beta = 3, clusters of 2 at the triangle's vertices, eps = 0.05 < gamma sqrt(3): exit
    times from both simulators agree (two-sample KS p > 1e-3; means within 4.5 combined SE)
    and both agree with the closed-form mean 1 / (1 - q)."""
    x0, sig = ET.cluster_configuration(TRI, np.array([2, 2, 2]))
    a = ET.engine_exit_times(x0, sig, 0.1, 3.0, 0.05, 4000, rng=21)
    b = ET.stepping_exit_times(x0, sig, 0.1, 3.0, 0.05, 4000, rng=22, cap=5000)
    assert a.n_censored == 0 and b.n_censored == 0
    assert stats.ks_2samp(a.times, b.times).pvalue > 1e-3
    se = math.sqrt(a.times.var() / 4000 + b.times.var() / 4000)
    assert abs(a.times.mean() - b.times.mean()) < 4.5 * se
    mean = 1 / -math.expm1(-ET.frozen_escape_rate(TRI, np.array([2, 2, 2]), 3.0))
    assert abs(b.times.mean() - mean) < 4.5 * b.times.std() / math.sqrt(4000)


@pytest.mark.parametrize("counts,beta", [((1, 1, 1), 4.0), ((2, 2, 2), 2.0), ((1, 2, 1), 2.5)])
def test_engine_matches_stepping_theorem_regime(counts, beta):
    """eps / gamma = 3.5 >= 2 d(K): several jumps per exit and non-frozen states in between
    (the general event-driven mode). KS p > 1e-3 and means within 4.5 combined SE."""
    x0, sig = ET.cluster_configuration(TRI, np.array(counts))
    a = ET.engine_exit_times(x0, sig, 0.1, beta, 0.35, 3000, rng=23, max_events=100_000)
    b = ET.stepping_exit_times(x0, sig, 0.1, beta, 0.35, 3000, rng=24, cap=200_000)
    assert a.n_censored == 0 and b.n_censored == 0
    assert stats.ks_2samp(a.times, b.times).pvalue > 1e-3
    se = math.sqrt(a.times.var() / 3000 + b.times.var() / 3000)
    assert abs(a.times.mean() - b.times.mean()) < 4.5 * se


def test_engine_state_matches_stepping_in_general_position():
    """Tokens in general position at beta = 1.5 (nothing frozen): after 6 steps the laws of
    the first coordinates of tokens 0 and 3 agree (KS p > 1e-3)."""
    from attention_fw.model import dynamics
    rng = np.random.default_rng(25)
    x0 = rng.normal(size=(5, 2))
    R = 4000
    a = ET.engine_state_at(x0, 0.2, 1.5, 6, R, rng=26)
    g = np.random.default_rng(27)
    b = np.broadcast_to(x0, (R, 5, 2)).copy()
    for _ in range(6):
        b = dynamics.sap_step(b, 0.2, 1.5, rng=g)
    for tok in (0, 3):
        # the law is atomic; both simulators compute x + gamma (x_J - x), so atoms coincide
        assert stats.ks_2samp(a[:, tok, 0], b[:, tok, 0]).pvalue > 1e-3
    # the hull never grows (both simulators), a property of every convex-combination step
    assert np.all(P.distance_to_hull(a.reshape(-1, 2), x0) < 1e-12)


def test_engine_watch_vertex_tokens_only():
    x0, sig = ET.cluster_configuration(TRI, np.array([1, 1, 1]))
    watch = np.array([True, False, False])
    es = ET.engine_exit_times(x0, sig, 0.1, 3.0, 0.05, 3000, rng=28, watch=watch)
    st = ET.stepping_exit_times(x0, sig, 0.1, 3.0, 0.05, 3000, rng=29, watch=watch, cap=100_000)
    assert stats.ks_2samp(es.times, st.times).pvalue > 1e-3
    # token 0 alone is watched: before anything else moves its escape probability is 1 - s_0,
    # so P(T2 = 1) = 1 - s_0 exactly (binomial, 4.5 SE)
    d, _, _ = ET.move_log_odds(x0[None], 3.0)
    p0 = -math.expm1(-np.logaddexp(0, d[0, 0]))
    f1 = np.mean(es.times == 1)
    assert abs(f1 - p0) < 4.5 * math.sqrt(p0 * (1 - p0) / 3000)
    # watching all tokens exits earlier (stochastically smaller)
    es_all = ET.engine_exit_times(x0, sig, 0.1, 3.0, 0.05, 3000, rng=30)
    assert es_all.times.mean() < es.times.mean()


# ---------------------------------------------------------------------------------------
# Theorem 5.2 Monte Carlo and Prop 5.1
# ---------------------------------------------------------------------------------------

def test_phase1_event_holds_above_bound_at_large_beta():
    """In the hypotheses' range (beta >= configuration_beta_min), the observed frequency of the
    event is at least the printed 1 - beta^{-1/8} (with 2000 runs, frequency 1 observed)."""
    x0, sig = M.phase1_configuration(TRI, 2, 1e4, rng=31, min_dist=0.55)
    beta = 1e4
    assert M.configuration_beta_min(x0, TRI, sig) <= beta
    r = M.run_phase1(x0, TRI, sig, 0.05, beta, 2000, rng=32)
    assert r["fraction"] >= r["bound"]
    assert r["fraction_by_time"][r["T1"]] == r["fraction"]
    assert r["vertex_drift_max"] < beta ** (-1 / 4)


def test_prop51_collapse_inside_hull_not_origin():
    """Prop 5.1 / E5: SA-beta from tokens with x_1 > 0 collapses to one point of the initial
    hull (distance < 1e-9), which is not the origin (|x*| > 0.5)."""
    rng = np.random.default_rng(33)
    x0 = np.c_[rng.uniform(0.8, 2.0, 7), rng.uniform(-1, 1, 7)]
    for beta in (0.5, 2.0):
        r = M.collapse_sabeta(x0, 0.2, beta, tol=1e-10, max_steps=200_000)
        assert r["converged"]
        assert P.distance_to_hull(r["limit"], x0) < 1e-9
        assert np.linalg.norm(r["limit"]) > 0.5
        assert np.all(np.diff(r["diameters"]) <= 1e-12)        # hull shrinks, so the diameter too
    # beta = 0 is plain averaging: the mean is invariant, so x* is the initial mean exactly
    r0 = M.collapse_sabeta(x0, 0.2, 0.0, tol=1e-12, max_steps=10_000)
    assert np.allclose(r0["limit"], x0.mean(0), atol=1e-10)


def test_eroded_cone_mask_matches_exact_polygons_of_geometry():
    """The linear-inequality erosion agrees with geometry.erode(geometry.cone(...)) (exact
    polygon clipping, another module) on random points away from the boundary (1e-9)."""
    from attention_fw.geometry import planar as geo
    v = P.points_on_circle((90, 200, 330))
    rng = np.random.default_rng(40)
    x = rng.uniform(-1, 1, size=(20_000, 2))
    for i in range(3):
        for eta, delta in ((0.05, 0.03), (0.3, 0.1), (0.0, 0.2)):
            poly = geo.erode(geo.cone(v, i, eta), delta)
            mask = P.eroded_cone_mask(x, v, i, eta, delta)
            if len(poly) == 0:
                assert not mask.any()
                continue
            inside = geo.point_in_polygon(x, poly)
            far = geo.distance_to_complement(x, poly) > 1e-9
            near_edge = inside & ~far
            assert np.array_equal(mask[~near_edge], inside[~near_edge])


def test_sweep_accepts_executor_instance_and_keeps_output_clean(tmp_path, capsys, monkeypatch):
    """A caller-owned Executor is used and left open; with progress off (argument or
    ATTENTION_FW_PROGRESS=0) nothing is written to stdout/stderr, so static pages stay clean."""
    import concurrent.futures as cf

    from afw_book import sweeps
    counter = tmp_path / "calls.txt"
    params = sweeps.grid(x=[1, 2, 3], counter=str(counter))
    with cf.ThreadPoolExecutor(2) as ex:
        assert sweeps.run(_counted_square, params, executor=ex, cache_dir=tmp_path / "c", progress=False) == [1, 4, 9]
        assert ex.submit(lambda: 7).result() == 7            # still open
    monkeypatch.setenv("ATTENTION_FW_PROGRESS", "0")
    assert sweeps.run(_counted_square, sweeps.grid(x=[4], counter=str(counter)), executor="serial",
                      cache_dir=tmp_path / "c") == [16]
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    assert _ncalls(counter) == 4


def test_sweep_cache_folder_follows_library_source(tmp_path, monkeypatch):
    """The cache lives in a folder named after the hash of the task's module and every library
    module it imports (read from the imports, no hand-kept list), so an edit of the engine, or
    of anything the engine imports, cannot serve stale results; an unrelated module can change."""
    import shutil

    from afw_book import sweeps
    deps = sweeps.library_imports("experiments.exit_times")
    assert {"experiments.exit_times", "model.dynamics", "model._kernels", "geometry.polytope", "experiments.survival",
            "_validate", "model.schedules"} <= set(deps)
    assert not any(d.startswith("plot") for d in deps)
    v1 = sweeps.code_version(ET.exit_time_task)
    assert sweeps.memory(tmp_path, ET.exit_time_task).location.endswith(v1)
    fake = tmp_path / "src"
    shutil.copytree(sweeps._PACKAGE, fake, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(sweeps, "_PACKAGE", fake)
    assert sweeps.code_version(ET.exit_time_task) == v1
    (fake / "plot" / "model.py").write_bytes((fake / "plot" / "model.py").read_bytes() + b"\n# edit\n")
    assert sweeps.code_version(ET.exit_time_task) == v1          # not a dependency of the task
    (fake / "model" / "_kernels.py").write_bytes((fake / "model" / "_kernels.py").read_bytes() + b"\n# edit\n")
    assert sweeps.code_version(ET.exit_time_task) != v1         # imported through dynamics


# --------------------------------------------------------------------------------------------
# Theorem 5.4: the admissible (eps, gamma) of its proof; exact single-jump slopes
# --------------------------------------------------------------------------------------------

def test_theorem54_radius_solves_the_radius_condition():
    """r* is the positive root of 2 r^2 + 4 R r - c0/2 = 0: equality at r*, strict on either side."""
    for v in (P.points_on_circle(), P.regular_simplex(3), 2.0 * P.points_on_circle()):
        R, c = np.linalg.norm(v, axis=1).max(), P.c0(v)
        r = M.theorem54_radius(v)
        assert r > 0
        assert abs(4 * R * r + 2 * r * r - c / 2) < 1e-14 * c
        assert 4 * R * r * 1.001 + 2 * (r * 1.001) ** 2 > c / 2 > 4 * R * r * 0.999 + 2 * (r * 0.999) ** 2
    # triangle on S^1: R = 1, c0 = 3/2, r* = sqrt(11/8) - 1
    assert abs(M.theorem54_radius(P.points_on_circle()) - (math.sqrt(11 / 8) - 1)) < 1e-15
    # scaling K by s scales R by s and c0 by s^2, hence r* by s
    assert abs(M.theorem54_radius(3 * P.points_on_circle()) - 3 * M.theorem54_radius(P.points_on_circle())) < 1e-14


def test_theorem54_hypotheses_on_the_triangle():
    T = P.points_on_circle()
    d, r = math.sqrt(3), math.sqrt(11 / 8) - 1
    inside = M.theorem54_hypotheses(T, 0.9 * r, 0.9 * r / (2 * d))
    assert inside["all"] and inside["M"] == 2            # eps / (gamma d) = 2 exactly
    ratio_only = M.theorem54_hypotheses(T, 0.35, 0.1)    # eps/gamma = 3.5 >= 2 sqrt(3), but eps > r*
    assert ratio_only["ratio"] and not ratio_only["radius"] and not ratio_only["all"]
    radius_only = M.theorem54_hypotheses(T, 0.1, 0.05)   # eps/gamma = 2 < 2 sqrt(3)
    assert radius_only["radius"] and not radius_only["ratio"] and not radius_only["all"]
    # the start radius eats into eps: eps_max = r* - rho
    h = M.theorem54_hypotheses(T, 0.05, 0.01, rho=r - 0.04)
    assert abs(h["eps_max"] - 0.04) < 1e-15 and not h["radius"]
    assert M.theorem54_hypotheses(T, 0.039, 0.01, rho=r - 0.04)["radius"]
    # (5.1) fails for the square, equal norms fail for a scaled vertex
    assert not M.theorem54_hypotheses(np.array([[1, 0], [0, 1], [-1, 0], [0, -1.0]]), 0.01, 0.001)["angle_51"]
    assert not M.theorem54_hypotheses(T * np.array([[1.0], [1.0], [1.1]]), 0.01, 0.001)["equal_norms"]


def test_theorem54_region_is_the_admissible_set():
    """Points of the polygon pass theorem54_hypotheses, points outside fail it."""
    T = P.points_on_circle()
    region = M.theorem54_region(T)
    rng = np.random.default_rng(0)
    pts = rng.uniform([1e-4, 1e-5], [0.3, 0.12], size=(2000, 2))
    from attention_fw.geometry import planar as g
    inside = g.point_in_polygon(pts, region, tol=0.0)
    ok = np.array([M.theorem54_hypotheses(T, e, gm)["all"] for e, gm in pts])
    assert inside.any() and (~inside).any()
    # points within 1e-9 of the boundary may go either way
    e_max, d = region[1, 0], math.sqrt(3)
    margin = np.minimum(np.abs(pts[:, 0] - e_max), np.abs(pts[:, 1] - pts[:, 0] / (2 * d)))
    assert np.array_equal(inside[margin > 1e-9], ok[margin > 1e-9])
    assert M.theorem54_region(T, rho=1.0).shape == (0, 2)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_frozen_log_mean_exit_closed_forms(m):
    """Triangle: q = (1 + 2 e^{-1.5 beta})^{-3m}; square: q = (1 + e^{-beta})^{-8m}; log E = -log(1 - q)."""
    T, S = P.points_on_circle(), np.array([[1, 0], [0, 1], [-1, 0], [0, -1.0]])
    for beta in (0.0, 0.5, 3.0, 12.0):
        one_minus_qT = -math.expm1(-3 * m * math.log1p(2 * math.exp(-1.5 * beta)))
        one_minus_qS = -math.expm1(-8 * m * math.log1p(math.exp(-beta)))
        assert abs(ET.frozen_log_mean_exit(T, [m] * 3, beta) + math.log(one_minus_qT)) < 1e-12
        assert abs(ET.frozen_log_mean_exit(S, [m] * 4, beta) + math.log(one_minus_qS)) < 1e-12
    # consistent with frozen_escape_rate wherever that one is representable
    v = P.points_on_circle((90, 200, 330))
    for beta in (1.0, 7.0, 30.0):
        lam = ET.frozen_escape_rate(v, [2, 1, 3], beta)
        assert abs(ET.frozen_log_mean_exit(v, [2, 1, 3], beta) + math.log(-math.expm1(-lam))) < 1e-10


def test_frozen_log_mean_exit_large_beta_limit():
    """log E[T] = beta c0 - log(n N) + o(1) (N nearest neighbours), finite even when lambda underflows."""
    for k, N in ((3, 2), (4, 2), (5, 2), (6, 2)):
        v = P.regular_polygon(k)
        counts = ET.tokens_per_vertex(6, k)
        for beta in (200.0, 1e6):
            val = ET.frozen_log_mean_exit(v, counts, beta)
            assert math.isfinite(val)
            assert abs(val - (beta * P.c0(v) - math.log(6 * N))) < 1e-9 * max(1.0, beta)
    T = P.regular_simplex(3)
    assert abs(ET.frozen_log_mean_exit(T, [1] * 4, 1e3) - (1e3 * P.c0(T) - math.log(4 * 3))) < 1e-9


def test_frozen_mean_slope_properties():
    v, c = P.regular_polygon(6), ET.tokens_per_vertex(6, 6)
    b = np.array([4.0, 9.0])
    # two points: the difference quotient
    q = (ET.frozen_log_mean_exit(v, c, 9.0) - ET.frozen_log_mean_exit(v, c, 4.0)) / 5.0
    assert abs(ET.frozen_mean_slope(v, c, b) - q) < 1e-12
    grid = np.linspace(4, 30, 9)
    w = np.random.default_rng(1).uniform(0.5, 2, 9)
    assert abs(ET.frozen_mean_slope(v, c, grid, weights=w) - ET.frozen_mean_slope(v, c, grid, weights=7 * w)) < 1e-12
    # finite-beta bias: below c0 on a low window, the gap shrinks as the window moves up, -> c0
    starts = np.arange(2.0, 44.0, 2.0)
    for k in (3, 4, 5, 6):
        vk, ck = P.regular_polygon(k), ET.tokens_per_vertex(6, k)
        gap = P.c0(vk) - ET.frozen_slope_windows(vk, ck, starts, 8.0)
        assert gap[0] > 1e-3
        assert np.all(gap > -1e-9) and np.all(np.diff(gap) <= 1e-9)
        assert gap[-1] < 1e-7
    with pytest.raises(ValueError, match="betas"):
        ET.frozen_mean_slope(v, c, [3.0, 3.0])
    with pytest.raises(ValueError, match="weights"):
        ET.frozen_mean_slope(v, c, grid, weights=np.ones(3))


def test_monte_carlo_slope_agrees_with_exact_mean_slope_not_with_c0():
    """The single-jump exit is geometric with mean 1/(1-q): on a low beta window the fitted slope
    of Monte Carlo exits estimates the exact-mean slope (within 4 standard errors), which is
    below c0 (hexagon, n = 6)."""
    betas = [2.0, 3.0, 4.0, 5.0]
    v, c = P.regular_polygon(6), ET.tokens_per_vertex(6, 6)
    x0, sig = ET.cluster_configuration(v, np.asarray(c))
    fits = [SV.fit_geometric_censored(*(lambda e: (e.times, e.censored))(
        ET.engine_exit_times(x0, sig, 0.1, b, 0.05, 4000, rng=int(b)))) for b in betas]
    mc = SV.fit_log_mean_slope(betas, fits)
    exact = ET.frozen_mean_slope(v, c, betas, weights=mc["weights"])
    assert abs(mc["slope"] - exact) < 4 * mc["slope_se"]
    assert P.c0(v) - exact > 8 * mc["slope_se"]
