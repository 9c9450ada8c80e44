"""Convergence rates of Sections 3 and 4 and the ODE limit (attention_fw.experiments.convergence).

Each test checks a law of the mathematics with a stated tolerance: exact rational
crossings, closed forms to machine precision, fitted log-log slopes within a band,
inequalities along trajectories, limits.
"""
from fractions import Fraction

import numpy as np
import pytest

from attention_fw.experiments import convergence as C
from attention_fw.model import frank_wolfe as F
from attention_fw.geometry import polytope as P
from attention_fw.model import schedules as S
from attention_fw.experiments import vertex_limits as VL


def polygon(k, phase=0.2):
    return P.regular_polygon(k, phase=phase)


# ============================================================== Theorem 3.1: the counterexample (E2)
def test_counterexample_trajectory_matches_closed_form():
    """x^0 = (3,-1): swap, then (5/3, 1/3), then x_2 = 1/3 and x_1^s = 1/3 + 8/(s(s+1)) exactly."""
    traj = C.exact_hardmax_trajectory([3, -1], 60)
    assert traj[1] == [(Fraction(-1),), (Fraction(3),)]
    assert traj[2] == [(Fraction(5, 3),), (Fraction(1, 3),)]
    for s in range(2, 61):
        assert traj[s][1][0] == Fraction(1, 3)
        assert traj[s][0][0] == Fraction(1, 3) + Fraction(8, s * (s + 1))


def test_counterexample_first_violation_at_575_exactly():
    """First t with max_i J(x_i^{t+1}) > 32/(t+1) is 575; token 2 alone at 576, with equality at 575."""
    r = C.thm31_counterexample(steps=700)
    assert r["first_violation"] == 575
    assert r["first_violation_token"] == [575, 576]
    assert r["equality_times"][1] == [575] and r["equality_times"][0] == []
    assert r["bound"][575] == Fraction(1, 18) == r["J"][575][1]
    assert r["plateau"] == Fraction(1, 18) and r["limit"] == Fraction(1, 3)
    assert all(max(r["J"][t]) <= r["bound"][t] for t in range(575))
    assert r["diameter"] == 4


def test_exact_trajectory_agrees_with_float_dynamics():
    """The Fraction implementation and dynamics.hardmax_step (B = -B_*) agree to rounding."""
    from attention_fw.model import dynamics as D
    rng = np.random.default_rng(0)
    x0 = rng.normal(size=(5, 2))
    Bs = np.array([[2.0, 0.5], [0.5, 1.0]])
    traj = C.exact_hardmax_trajectory(x0.tolist(), 30, Bstar=Bs.tolist())
    x = x0.copy()
    for t in range(30):
        x = D.hardmax_step(x, 2 / (t + 2), -Bs)
        np.testing.assert_allclose(x, np.array(traj[t + 1], dtype=float), atol=1e-12)


def test_exact_trajectory_bad_input():
    with pytest.raises(TypeError, match="x0"):
        C.exact_hardmax_trajectory(["a", 1], 3)
    with pytest.raises(ValueError, match="gamma"):
        C.exact_hardmax_trajectory([1, -1], 3, gamma=lambda t: Fraction(3, 2))
    with pytest.raises(ValueError, match="x0"):
        C.thm31_counterexample(x0=(3, 1))


# ============================================================== symmetric vs shifted clouds
def test_symmetric_clouds_keep_origin_and_satisfy_bound():
    """Central symmetry keeps 0 in K^t; the printed ratio (t+1) J / (lambda d^2) stays <= 2."""
    x = C.symmetric_cloud(40, 4, 2, rng=3)
    Bs = np.diag([1.0, 0.3])
    r = C.thm31_ratio(x, Bs, 2000, symmetric=True)
    assert np.all(r["first_violation"] == -1)
    assert r["ratio"].max() <= 2.0
    assert r["origin_dist"].max() <= 1e-12
    # the limit is the origin
    assert np.abs(r["final"]).max() <= 1e-6 * r["diam0"].max()


@pytest.mark.parametrize("seed", [0, 2, 6])
def test_symmetric_bookkeeping_matches_exact_arithmetic(seed):
    """The float simulation of symmetric clouds (mirror + exact zeros) follows the Fraction trajectory."""
    x = np.round(C.symmetric_cloud(1, 6, 2, rng=seed)[0] * 100) / 100
    Bs = [[1, 0], [0, Fraction(3, 10)]]
    exact = C.exact_hardmax_trajectory(x.tolist(), 40, Bstar=Bs)
    r = C.section3_rates(x, np.array(Bs, dtype=float), 40, times=np.arange(41), symmetric=True)
    for t in range(41):
        np.testing.assert_allclose(r["positions"][t, 0], np.array(exact[t], dtype=float), atol=1e-12)
    with pytest.raises(ValueError, match="symmetric"):
        C.section3_rates(x + 0.1, np.eye(2), 3, symmetric=True)


def test_shifted_clouds_violate_bound_and_converge_off_origin():
    """0 in K^0 but the bound fails; consensus at a point of K^0 at positive distance from 0."""
    x = C.shifted_cloud(30, 5, 2, rng=2)
    assert np.all(P.origin_in_hull_2d(x))
    r = C.thm31_ratio(x, np.eye(2), 5000)
    assert np.mean(r["first_violation"] >= 0) >= 0.9
    assert np.all(r["final_diameter"] <= 1e-5 * r["diam0"])
    lim = r["limit"]
    assert np.median(np.linalg.norm(lim, axis=-1) / r["diam0"]) >= 0.02
    # the limit lies in K^0: shift the cloud by -limit, the origin must be inside
    assert np.all(P.origin_in_hull_2d(x - lim[:, None, :]))
    # and the hull moves away from the origin
    assert np.median(r["origin_dist"][-1]) > 0.01


def test_min_energy_batch_matches_quadratic_programme_and_degenerate_hulls():
    """The vectorised minimum over the hull agrees with a QP over the convex weights, system by system
    (batched and single calls alike); a collapsed hull gives J(point)."""
    from scipy import optimize
    rng = np.random.default_rng(4)
    x = rng.normal(size=(12, 6, 2)) + rng.normal(size=(12, 1, 2)) * 2
    Bs = np.array([[2.0, 0.3], [0.3, 0.5]])

    def qp(p):
        G = p @ Bs @ p.T
        res = optimize.minimize(lambda w: 0.5 * w @ G @ w, np.full(6, 1 / 6), jac=lambda w: G @ w, method="SLSQP",
                                bounds=[(0, 1)] * 6, constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1}],
                                options={"ftol": 1e-15, "maxiter": 500})
        return max(res.fun, 0.0)
    ref = np.array([qp(p) for p in x])
    got = F.min_energy_over_hull(x, Bs)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-10)
    np.testing.assert_array_equal(got, [F.min_energy_over_hull(p, Bs) for p in x])
    pt = np.broadcast_to([[0.6, 0.3]], (1, 4, 2))
    assert F.min_energy_over_hull(pt, np.eye(2))[0] == pytest.approx(0.5 * 0.45, rel=1e-14)
    seg = np.array([[[1.0, 1.0], [2.0, 2.0]]])  # on a line through 0, not containing it
    assert F.min_energy_over_hull(seg, np.eye(2))[0] == pytest.approx(1.0, rel=1e-14)


def test_thm31_shifted_pools_sizes():
    r = C.thm31_shifted([3, 4], 5, 50, rng=1)
    assert r["ratio"].shape[1] == 10 and r["limit"].shape == (10, 2) and list(r["n"]) == [3] * 5 + [4] * 5


def test_shifted_clouds_violate_when_the_horizon_law_says():
    """Merged at x*, the ratio of Theorem 3.1 is (t+1)|x*|^2/(2 d^2) (B_* = I), which passes 2 at
    t+1 = 4/(|x*|/d)^2: every cloud with x* != 0 violates the printed bound, at that time. Checked on
    the clouds whose violation comes late enough for the tokens to have merged (t >= 200): within
    10% of the law. Followed from the clouds it returns, a cloud keeps its first violation."""
    r = C.thm31_shifted([4, 5], 8, 3000, rng=2)
    lim = np.linalg.norm(r["limit"], axis=-1) / r["diam0"]
    late = r["first_violation"] >= 200
    assert late.sum() >= 3
    ratio = (r["first_violation"][late] + 1) / (4 / lim[late] ** 2)
    assert np.all(np.abs(ratio - 1) < 0.1), ratio
    # a cloud not in violation by 3000 layers is one whose law says later (a 20% margin)
    never = r["first_violation"] < 0
    assert np.all(4 / lim[never] ** 2 > 0.8 * 3000)
    k = int(np.flatnonzero(late)[0])
    again = C.thm31_ratio(r["initial"][k][None], np.eye(2), 3000)
    assert again["first_violation"][0] == r["first_violation"][k]


def test_local_slopes_of_a_power_law_and_its_correction():
    """A pure power law has its exponent on every window; with a fading correction t^-3 the
    local slopes climb monotonically to the exponent, so an average over the range lies below
    it; the digits quoted are those the spread of the local slopes supports."""
    t = np.arange(1.0, 20001.0)
    pure = C.local_loglog_slopes(t, 5.0 * t ** -1.5, 10)
    assert len(pure.slope) == 8 and np.allclose(pure.slope, -1.5, atol=1e-9)
    assert np.allclose(pure.stop / pure.start, 4.0) and pure.start[0] == 10
    loc = C.local_loglog_slopes(t, t ** -2.0 + 30 * t ** -3.0, 10)
    assert np.all(np.diff(loc.slope) > 0) and -2.01 < loc.slope[-1] < -2
    assert C.loglog_slope(t, t ** -2.0 + 30 * t ** -3.0, 10) < loc.slope[-1]
    assert C.supported_decimals(pure.slope) == 3                        # no spread: three decimals
    assert C.supported_decimals(loc.slope) == int(np.floor(-np.log10(np.ptp(loc.slope) / 2)))
    assert C.supported_decimals([-1.0, -3.0]) == 0
    one = C.local_loglog_slopes(t[:30], t[:30] ** -1.0, 10)             # shorter than one window
    assert one.start.tolist() == [10.0] and one.stop.tolist() == [30.0]
    with pytest.raises(ValueError, match="factor"):
        C.local_loglog_slopes(t, t, 10, factor=1.0)


def test_origin_in_hull_and_distance():
    sq = np.array([[1.0, 1], [-1, 1], [-1, -1], [1, -1]])
    assert P.origin_in_hull_2d(sq) and not P.origin_in_hull_2d(sq + 2)
    assert P.origin_distance_2d(sq) == 0.0
    assert P.origin_distance_2d(sq + [2.0, 0]) == pytest.approx(1.0, abs=1e-14)
    assert P.origin_distance_2d(sq + [3.0, 3.0]) == pytest.approx(np.sqrt(8), abs=1e-14)


# ============================================================== Section 3 rates
def test_section3_rates_current_hull():
    """Shifted clouds: J plateaus at J(x*) > 0; FW gap and primal gap on K^t decay like t^-2 (slope in [-2.3, -1.7])."""
    x = C.shifted_cloud(10, 5, 2, rng=5)
    r = C.section3_rates(x, np.eye(2), 4000)
    t = r["t"]
    for key in ("fw_gap", "primal_current"):
        slope = C.loglog_slope(t, np.median(r[key], axis=1), 100, 4000)
        assert -2.3 <= slope <= -1.7, (key, slope)
    # the book's corrected statement: J(x_i^t) - min_{K^t} J <= 2 lambda d(K^0)^2 / (t+2) for t >= 1
    assert np.all(r["primal_current"][1:] <= 2 * r["lam"] * r["diam0"] ** 2 / (t[1:, None] + 2))
    # J does not tend to 0: its last value is close to its value at t = 1000
    i = np.searchsorted(t, 1000)
    np.testing.assert_allclose(r["J"][-1], r["J"][i], rtol=1e-3)
    assert np.median(r["primal_initial"][-1] / r["diam0"] ** 2) > 1e-3


def test_fixed_hull_frank_wolfe_converges_to_min():
    """Classical FW over the FIXED K^0 (0 in K^0): primal gap <= 2 L D^2/(t+2) (Jaggi) and -> 0."""
    x = C.shifted_cloud(10, 5, 2, rng=5)
    Bs = np.diag([1.0, 0.5])
    r = C.fixed_hull_fw(x, Bs, 3000)
    assert np.allclose(r["min_energy"], 0.0)
    D0 = P.diameter(x)
    t = r["t"]
    assert np.all(r["primal"] <= 2 * 1.0 * D0 ** 2 / (t[:, None] + 2) + 1e-14)
    assert np.all(r["primal"][-1] <= 1e-4 * D0 ** 2)


def test_line_search_is_linear_with_the_stated_factor():
    """Exact line search, 0 interior, B_* > 0: h^t <= rho^t h^0 with rho = 1 - (mu/L)(r/D)^2."""
    P = polygon(6, phase=0.3) * [1.2, 0.8] + [0.3, -0.1]
    Bs = np.array([[2.0, 0.5], [0.5, 1.0]])
    b = C.linear_rate_bound(P, Bs)
    assert 0 < b["rho"] < 1
    r = C.fixed_hull_fw(P[None], Bs, 300, rule="line-search", times=np.arange(301))
    h = r["primal"][:, 0]
    ok = h > 1e-13
    assert np.all(h[ok] <= b["rho"] ** r["t"][ok] * h[0] * (1 + 1e-9))
    # geometric: the per-step factor over the run is < 1 (fit of log h against t)
    slope = np.polyfit(r["t"][ok][5:], np.log(h[ok][5:]), 1)[0]
    assert slope < np.log(b["rho"])
    with pytest.raises(ValueError, match="interior"):
        C.linear_rate_bound(P + 5, Bs)


def test_loglog_slope_recovers_power_law_and_rejects_empty():
    t = np.arange(1, 100)
    assert C.loglog_slope(t, 3.0 * t ** -1.5) == pytest.approx(-1.5, abs=1e-12)
    with pytest.raises(ValueError, match="two points"):
        C.loglog_slope(t, -t)


def test_loglog_slope_rejects_non_finite_input_naming_the_argument():
    t = np.arange(1.0, 50.0)
    y = t ** -2.0
    # zero and negative y have no logarithm and are left out (documented): the slope is unchanged
    y_zero = y.copy()
    y_zero[[3, 7]] = [0.0, -1.0]
    assert C.loglog_slope(t, y_zero) == pytest.approx(-2.0, abs=1e-12)
    for bad in (np.nan, np.inf, -np.inf):
        y_bad = y.copy()
        y_bad[5] = bad
        with pytest.raises(ValueError, match=r"^y must be finite"):
            C.loglog_slope(t, y_bad)
        t_bad = t.copy()
        t_bad[5] = bad
        with pytest.raises(ValueError, match=r"^t must be finite"):
            C.loglog_slope(t_bad, y)
    with pytest.raises(ValueError, match="t and y must have the same length"):
        C.loglog_slope(t, y[:-1])
    with pytest.raises(ValueError, match="t_min must be a finite"):
        C.loglog_slope(t, y, t_min=np.nan)


# ============================================================== Theorem 4.2 (E4)
@pytest.mark.parametrize("sched", [S.Constant(0.3), S.Harmonic(), S.Halving(), S.ToOne(0.5), S.FrankWolfe()],
                         ids=repr)
def test_theorem_42_closed_form_machine_precision(sched):
    """|x_i^t - v_sigma(i)| = prod(1-gamma) |x_i^0 - v_sigma(i)| to 1e-14, cells never change, hull fixed."""
    Vt = polygon(6) @ np.diag([1.0, 1 / np.sqrt(2)])  # on the ellipse <Bv, v> = 1 of B = diag(1, 2)
    B = np.diag([1.0, 2.0])
    X = np.random.default_rng(0).dirichlet(np.ones(6), size=(4, 15)) @ Vt
    r = VL.vertex_convergence(np.broadcast_to(Vt, (4, 6, 2)), X, sched, B, 40)
    assert np.all(r["labels_constant"])
    assert np.all(r["vertices_fixed"] <= 1e-12)
    err = np.abs(r["dist"] - r["closed"])
    # machine precision; once a token is within 1e-11 of its vertex, the hardmax tie tolerance
    # (relative 1e-12 on the scores) may average it with the vertex: allow 1e-12 there
    tol = np.where(r["closed"] > 1e-11, 1e-14, 1e-12)
    assert np.all(err <= tol)


def test_theorem_42_rates():
    """Constant: exp slope log(1-gamma); 1/(t+2): log-log slope -1; 2^{-t-1}: limit 0.288788...; to-one: exp(-a t(t+1)/2)."""
    assert S.Constant(0.3).product(50) == pytest.approx(0.7 ** 50, rel=1e-13)
    t = np.arange(1, 2000)
    assert C.loglog_slope(t, S.Harmonic().product(t), 10) == pytest.approx(-1.0, abs=0.01)
    assert S.Halving().product(80) == pytest.approx(VL.HALVING_LIMIT, rel=1e-14)
    assert S.Halving().product(10) > VL.HALVING_LIMIT
    a = 0.4
    assert S.ToOne(a).product(12) == pytest.approx(np.exp(-a * 12 * 13 / 2), rel=1e-12)
    # measured through the dynamics: the halving schedule stalls at 0.2888 of the initial distance
    Vt = polygon(5)
    X = np.random.default_rng(1).dirichlet(np.ones(5), size=(1, 10)) @ Vt
    r = VL.vertex_convergence(Vt, X, S.Halving(), np.eye(2), 60)
    ratio = r["dist"][-1, 0, 5:] / r["dist"][0, 0, 5:]
    np.testing.assert_allclose(ratio, VL.HALVING_LIMIT, rtol=1e-12)


def test_non_owning_vertex_moves_and_hull_shrinks():
    """A vertex that does not own its cell moves; the hull area strictly decreases."""
    Vt = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [0.62, 0.62]])
    X = np.array([[0.1, 0.2], [-0.3, 0.1]])
    r = VL.non_owning_run(Vt, X, 0.3, np.diag([1.0, 2.0]), 30)
    assert not r["owner"].all()
    assert np.all(r["vertex_shift"][-1, ~r["owner"]] > 0.1)
    assert np.all(r["vertex_shift"][:, r["owner"]] == 0.0)
    assert r["area"][-1] < r["area"][0] - 1e-3 and np.all(np.diff(r["area"]) <= 1e-14)


# ============================================================== duality-gap proposition (Section 4.1)
@pytest.mark.parametrize("sched", [0.3, "harmonic", "fw", "halving", 0.9])
@pytest.mark.parametrize("c", [1.0, 0.2])
def test_duality_gap_inequality_along_trajectories(sched, c):
    """min_{tau<=t} FW gap <= (1/t)(J^1(x^1)/gamma^1 - inf_{K^t} J^t/gamma^t) for every token and t."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(20, 9, 2))
    M = rng.normal(size=(2, 2))
    B = M @ M.T + 0.1 * np.eye(2)
    g = VL.duality_gap_check(x, sched, B, 300, c=c)
    scale = c * 0.5 * np.einsum("rnd,de,rne->r", x, B, x).max()
    assert np.all(g["lhs"] <= g["rhs"] + 1e-12 * scale)
    assert np.all(g["gap"] >= -1e-12 * scale)
    # the right-hand side decays like 1/t (its numerator is bounded): slope -1 within 0.05
    pos = np.median(g["rhs"], axis=(1, 2))
    if np.all(pos[50:] > 0):
        assert C.loglog_slope(g["t"], pos, 50) == pytest.approx(-1.0, abs=0.05)


# ============================================================== Theorem 4.8: the ODE limit
def ode_data():
    Vt = polygon(6)
    X = np.random.default_rng(3).dirichlet(np.ones(6), size=8) @ Vt
    return np.concatenate([Vt, X])


def test_euler_error_is_first_order_with_leading_constant():
    """Error of SA-inf with gamma = dt at t = 1: slope in [0.9, 1.1]; error/dt -> e^{-1}/2 |x^0 - v|."""
    x0 = ode_data()
    dts = 1 / 2 ** np.arange(3, 12)
    e = VL.euler_error(x0, np.eye(2), dts, T=1.0)
    slope = C.loglog_slope(e["dt"], e["err_T"])
    assert 0.9 <= slope <= 1.1
    assert e["err_T"][-1] / e["dt"][-1] == pytest.approx(e["leading_T"], rel=2e-3)
    # the factor (1-dt)^{1/dt} - e^{-1} itself, leading term -(1/2) e^{-1} dt
    dt = 1e-4
    assert ((1 - dt) ** (1 / dt) - np.exp(-1)) / dt == pytest.approx(-0.5 * np.exp(-1), rel=1e-3)


def test_ode_solution_is_straight_line_in_hull_and_euler_limit():
    x0 = ode_data()
    t = np.linspace(0, 5, 11)
    sol = VL.ode_solution(x0, np.eye(2), t)
    np.testing.assert_allclose(sol[0], x0, atol=1e-15)
    # the explicit solution satisfies the ODE x' = v - x (leaders are fixed)
    v = sol[-1] + (sol[-1] - x0) * np.exp(-5) / (1 - np.exp(-5))
    h = 1e-6
    deriv = (VL.ode_solution(x0, np.eye(2), 1 + h) - VL.ode_solution(x0, np.eye(2), 1 - h)) / (2 * h)
    np.testing.assert_allclose(deriv, v - VL.ode_solution(x0, np.eye(2), 1.0), atol=1e-8)


def test_ode_continuous_dependence():
    """Generic data: sup_t |x(t) - x~(t)| = delta (1-Lipschitz) while cells are unchanged."""
    x0 = ode_data()
    deltas = np.geomspace(1e-6, 1e-3, 4)
    r = VL.ode_continuity(x0, np.eye(2), deltas, T=2.0, dt=1e-2, rng=1)
    assert np.all(r["same_cells"])
    np.testing.assert_allclose(r["sup_dist"], deltas, rtol=1e-6)


def test_ode_rejects_non_generic_data():
    Vt = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [0.62, 0.62]])
    with pytest.raises(ValueError, match="genericity"):
        VL.ode_solution(Vt, np.diag([1.0, 2.0]), 1.0)
    with pytest.raises(ValueError, match="generic"):
        VL.ode_solution(np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]]), np.eye(2), 1.0)
    with pytest.raises(ValueError, match="divide"):
        VL.euler_error(ode_data(), np.eye(2), [0.3])


# ============================================================== Remark 4.6 helpers
def test_wilson_interval_covers_and_bad_input():
    lo, hi = VL.wilson_interval(np.array([0, 50, 100]), 100)
    assert lo[0] == 0.0 and hi[-1] == pytest.approx(1.0, abs=1e-15) and lo[1] < 0.5 < hi[1]
    assert hi[0] == pytest.approx(1.96 ** 2 / (100 + 1.96 ** 2), rel=1e-12)
    with pytest.raises(ValueError, match="trials"):
        VL.wilson_interval(5, 3)


def test_union_q_matches_adaptive_quadrature():
    from scipy import integrate, stats
    for d in (1, 2, 7, 40, 300):
        ref = integrate.quad(lambda r: stats.norm.sf(r) * stats.chi.pdf(r, d), 0, np.inf, epsabs=1e-14, limit=200)[0]
        assert VL._union_q([d])[0] == pytest.approx(ref, rel=1e-8, abs=1e-13)
    # d = 1: P(v w >= v^2) = P(w/v >= 1) for independent standard normals = 1/4 (Cauchy ratio)
    assert VL._union_q([1])[0] == pytest.approx(0.25, abs=1e-9)


def test_union_bound_increases_to_one():
    b = VL.owns_cell_union_bound(np.array([5, 10, 20, 40, 80]), 5)
    assert np.all(np.diff(b) >= 0) and b[-1] > 1 - 1e-6


def test_remark46_probability_increases_to_one():
    """P(all kappa Gaussian vertices own their cells) rises with d towards 1, above the union bound."""
    dims = [2, 6, 15, 40, 120]
    r = VL.owns_cell_probability(dims, 5, 4000, rng=11)
    assert np.all(np.diff(r["p"][:3]) > 0) and np.all(np.diff(r["p"]) >= 0)
    assert r["p"][0] < 0.2 and r["p"][-1] > 0.999
    # the union bound is a lower bound: the 99.9% Wilson upper limit is above it
    lo, hi = VL.wilson_interval(r["successes"], r["samples"], z=3.29)
    assert np.all(hi >= VL.owns_cell_union_bound(np.array(dims), 5))
    # bounded condition number (spectrum in [1, 4]): still tends to 1
    r2 = VL.owns_cell_probability([3, 120], 5, 2000, rng=12, B_spectrum=lambda d: np.linspace(1, 4, d))
    assert r2["p"][1] > 0.99 > r2["p"][0]


def test_remark46_kappa_two_exact():
    """kappa = 2, d = 1: both points own their cells iff they have opposite signs: probability 1/2."""
    r = VL.owns_cell_probability([1], 2, 20000, rng=13)
    assert r["low"][0] <= 0.5 <= r["high"][0]


# ============================================================== bad input names the argument
def test_bad_inputs_name_the_argument():
    Vt = polygon(5)
    with pytest.raises(ValueError, match="interior"):
        VL.vertex_convergence(Vt, np.zeros((2, 3, 2)), 0.3, np.eye(2), 5)
    with pytest.raises(ValueError, match="gamma"):
        VL.vertex_convergence(Vt, Vt[:2] * 0.5, 1.5, np.eye(2), 5)
    with pytest.raises(ValueError, match="kappa"):
        VL.owns_cell_probability([3], 1, 10, rng=0)
    with pytest.raises(ValueError, match="dts"):
        VL.euler_error(ode_data(), np.eye(2), [1.5])
    with pytest.raises(ValueError, match="Bstar"):
        C.linear_rate_bound(polygon(6), np.diag([1.0, -1.0]))
    with pytest.raises(ValueError, match="Bstar"):
        C.thm31_ratio(C.shifted_cloud(2, 3, rng=0), -np.eye(2), 5)
    with pytest.raises(TypeError, match="steps"):
        C.section3_rates(C.shifted_cloud(2, 3, rng=0), np.eye(2), 2.5)
    with pytest.raises(ValueError, match="ns"):
        C.thm31_shifted([], 3, 5, rng=0)
    with pytest.raises(ValueError, match="c"):
        VL.duality_gap_check(np.ones((3, 2)), 0.3, np.eye(2), 5, c=-1.0)


def test_fixed_vs_current_slopes_say_none_when_no_slope_can_be_fitted():
    """Found by make fuzz (chapter 3 with rate_steps 101): a run that ends one layer after t_min leaves
    one point to fit; the slopes are None (the chapter and the figure say "not fitted"), not a crash."""
    from attention_fw.experiments import convergence as cv
    from attention_fw.plot import convergence as cvp

    x0 = [[3.0], [-1.0]]
    sl = cv.fixed_vs_current_slopes(cv.fixed_hull_fw(x0, [[1.0]], 100), cv.section3_rates(x0, [[1.0]], 100))
    assert sl.fixed is None and sl.current is None
    assert cvp._supported(None, [1.0], [1.0], 100) == "not fitted"
    sl = cv.fixed_vs_current_slopes(cv.fixed_hull_fw(x0, [[1.0]], 400), cv.section3_rates(x0, [[1.0]], 400))
    assert round(sl.current, 1) == -2.0
