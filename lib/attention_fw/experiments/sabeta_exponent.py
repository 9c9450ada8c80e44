"""The exponent of the exit time of (SA-beta), and a like-for-like comparison with the chain.

An exponent is a limit, not a slope over a range. For the deterministic dynamics ``T2(beta)`` has
no noise, so what limits a reading of ``c = lim d log T2 / d beta`` is how ``log T2`` approaches
its asymptote. This module gives:

* :func:`local_slopes`: ``d log T2 / d beta`` between consecutive betas of a grid;
* :func:`fit_exponent`: the asymptotic exponent ``c_inf`` of the stated model
  ``log T2 = a + c beta + k log beta`` (local slope ``c + k / beta``, so ``c_inf`` is where the
  local slopes plotted against ``1 / beta`` meet ``1 / beta = 0``), with an interval spanning the
  exponents of that model and of its next order (``+ m / beta``) over the window and its upper
  part: an interval for the extrapolation, not a sampling interval (there is no sample);
* :func:`drift_integral_exit`: the next-order reduced model, the exit time of the continuous
  kappa-point dynamics of the settled points, ``T = int ds / |drift|`` along its path;
* :func:`chain_seed`, :func:`mean_interval`, :func:`fit_chain_rate_window`: an independent random
  stream per configuration and beta, intervals of the chain's mean exit time from the sample
  itself (sample variance, Student t), and the chain's rate fitted on a stated window with its
  lack of fit.

The exactly solvable case. One token per vertex of the equilateral triangle (B = I): by symmetry
the tokens stay at ``r v_i``, with ``r <- r (1 - (3/2) gamma (1 - a(r)))``,
``a(r) = 1 / (1 + 2 e^{-3 beta r^2 / 2})``; the exit is the first ``r < 1 - eps``, and
``T2 ~ int_{1-eps}^1 dr / ((3/2) gamma r (1 - a(r))) ~ e^{3 beta / 2} (1 - e^{-3 beta eps}) / (9 gamma beta)``:
exponent ``c0 = 3/2`` exactly, with a ``-log beta`` correction that biases any straight fit low.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np
from scipy import integrate, stats

from .. import _validate as V
from ..results import Result

__all__ = ["local_slopes", "fit_exponent", "EXPONENT_MODEL", "MODEL_SENTENCE", "MODEL_BETAS", "drift_integral_exit",
           "drift_integral_log_exit", "triangle_exit_exact",
           "model_exponent", "exponent_from_model", "rates_entry",
           "chain_seed", "mean_interval", "fit_chain_rate_window"]

#: The model of the approach, as the book states it.
EXPONENT_MODEL = ("log T2 = a + c β + k log β fitted by least squares to the points with T2 ≥ {t_min:g} "
                  "(local slope c + k/β); interval: the exponents of this model and of its next order "
                  "(+ m/β), each on the whole window and without its lowest point(s)")


def local_slopes(betas, T) -> np.ndarray:
    """``[[beta_mid, d log T / d beta], ...]`` between consecutive betas where both times are > 0.

    Examples
    --------
    >>> local_slopes([1.0, 2.0, 4.0], np.exp([1.0, 3.0, 5.0])).round(12).tolist()
    [[1.5, 2.0], [3.0, 1.0]]
    """
    b = V.as_float_array("betas", betas, ndim=1)
    t = np.asarray(T, float)
    if t.shape != b.shape:
        raise ValueError("T must hold one time per beta")
    ok = (t[:-1] > 0) & (t[1:] > 0)
    mid = 0.5 * (b[:-1] + b[1:])
    sl = np.diff(np.log(np.where(t > 0, t, 1.0))) / np.diff(b)
    return np.stack([mid[ok], sl[ok]], axis=1) if ok.any() else np.zeros((0, 2))


def _lsq(b, y, terms):
    X = np.stack([np.ones_like(b), b] + [f(b) for f in terms], axis=1)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    return coef, y - X @ coef


def fit_exponent(betas, T, *, t_min: float = 100.0, min_points: int = 4) -> Result:
    """The asymptotic exponent ``c_inf`` of ``T2(beta)`` from the model ``log T2 = a + c beta + k log beta``.

    Fitted (least squares) to the points with ``T >= t_min`` (below, integer rounding and the
    first steps dominate). ``ci`` spans ``c`` of that model and of ``log T2 = a + c beta + k log beta
    + m / beta``, each on the whole window and on the window without its lowest one and two points
    (where at least ``min_points`` points remain and the model has a residual degree of freedom):
    how far the extrapolation moves with the model and the window. With fewer than ``min_points``
    points the fit is not made: ``c_inf = None`` with a ``reason``.

    Returns a Result with ``c_inf``, ``k``, ``a``, ``ci`` ([lo, hi] or None), ``n``, ``window``
    ([beta_lo, beta_hi]), ``residuals`` ([[beta, log T2 - model], ...]), ``variants`` (the
    exponents behind the interval), ``reason`` (None or why no fit) and ``model`` (one sentence).

    Examples
    --------
    Exact data of the model give back its exponent, with a zero-width interval:

    >>> b = np.linspace(4.0, 10.0, 7)
    >>> f = fit_exponent(b, np.exp(2.0 + 1.5 * b - np.log(b)) * 1e3)
    >>> round(f.c_inf, 9), round(f.k, 9), [round(c, 6) for c in f.ci]
    (1.5, -1.0, [1.5, 1.5])
    >>> fit_exponent([1.0, 2.0], [200.0, 900.0]).reason
    'only 2 exit times at or above T2 = 100 (at least 4 needed)'
    """
    b = V.as_float_array("betas", betas, ndim=1)
    t = np.asarray(T, float)
    if t.shape != b.shape:
        raise ValueError("T must hold one time per beta")
    min_points = V.positive_int("min_points", min_points, minimum=4)
    ok = (t >= t_min) & (t > 0)
    model = EXPONENT_MODEL.format(t_min=t_min)
    n = int(ok.sum())
    if n < min_points:
        return Result(c_inf=None, k=None, a=None, ci=None, n=n, window=None, residuals=[], variants=[],
                      model=model, reason=f"only {n} exit times at or above T2 = {t_min:g} (at least {min_points} needed)")
    bb, y = b[ok], np.log(t[ok])
    order = np.argsort(bb)
    bb, y = bb[order], y[order]
    coef, res = _lsq(bb, y, [np.log])
    variants = []
    for drop in (0, 1, 2):
        bw, yw = bb[drop:], y[drop:]
        if drop and len(bw) < min_points:
            break
        variants.append(float(_lsq(bw, yw, [np.log])[0][1]))
        if len(bw) >= 5:
            variants.append(float(_lsq(bw, yw, [np.log, lambda x: 1.0 / x])[0][1]))
    return Result(c_inf=float(coef[1]), k=float(coef[2]), a=float(coef[0]), ci=[min(variants), max(variants)], n=n,
                  window=[float(bb[0]), float(bb[-1])], residuals=[[float(u), float(v)] for u, v in zip(bb, res)],
                  variants=variants, model=model, reason=None)


# ----------------------------------------------------------------------------------------
# the next-order reduced model
# ----------------------------------------------------------------------------------------

def _scaled_drift(p, m, Bm, beta, gamma, g0):
    """The kappa-point (SA-beta) drift ``gamma sum_{h != g} A_gh (p_h - p_g)`` times ``e^{beta g0}``, weights
    ``A_gh ∝ m_h e^{beta <B p_g, p_h>}``, from log-weights (so that ``e^{-beta gap}`` never underflows for
    ``gap`` near ``g0``) and summed over the differences (``A p - p`` would lose it to rounding)."""
    L = beta * (p @ Bm.T @ p.T) + np.log(m)[None, :]
    la = L - np.logaddexp.reduce(L, axis=1)[:, None] + beta * g0
    np.fill_diagonal(la, -np.inf)
    return gamma * np.einsum("gh,ghk->gk", np.exp(la), p[None, :, :] - p[:, None, :])


def drift_integral_log_exit(points, masses, regions, gamma: float, beta: float, eps: float, *, B=None,
                            rtol: float = 1e-10) -> float:
    """``log T`` of :func:`drift_integral_exit` (``inf`` if the flow does not exit), computed with the drift
    scaled by ``e^{beta g0}`` (``g0`` the smallest gap at the start), so that it stays finite at any beta
    (``log T`` of several hundred).

    Examples
    --------
    >>> from ..geometry.polytope import regular_polygon
    >>> v = regular_polygon(3)
    >>> reg = [lambda q, c=c: float(np.linalg.norm(q - c)) for c in v]
    >>> lt = drift_integral_log_exit(v, [1.0, 1.0, 1.0], reg, 0.1, 400.0, 0.05)
    >>> bool(abs(lt - (600 - math.log(9 * 0.1 * 400))) < 0.01)
    True
    """
    p0 = V.as_float_array("points", points, ndim=2)
    eps = V.real_scalar("eps", eps, low=0, low_open=True)
    m = np.asarray(masses, float)
    kappa, d = p0.shape
    Bm = np.eye(d) if B is None else np.asarray(B, float)
    gamma = V.step_size("gamma", gamma)
    S = p0 @ Bm.T @ p0.T
    gap = np.diag(S)[:, None] - S
    np.fill_diagonal(gap, np.inf)
    g0 = float(gap.min())
    # parametrised by the path length sigma of the fastest point (dp/dsigma = F / |F|_max, unit speed), with
    # the time as one more coordinate, dT/dsigma = 1 / |F|_max: the integral of ds / |drift| itself, carried
    # in units of 1 / |F(p0)|.
    F0 = _scaled_drift(p0, m, Bm, beta, gamma, g0)
    u0 = float(np.linalg.norm(F0, axis=1).max())
    if not u0 > 0:
        return math.inf

    def f(s, y):
        F = _scaled_drift(y[:-1].reshape(kappa, d), m, Bm, beta, gamma, g0)
        u = float(np.linalg.norm(F, axis=1).max())
        return np.r_[F.ravel() / u, u0 / u]

    def make(g):
        def ev(s, y):
            return regions[g](y[:-1].reshape(kappa, d)[g]) - eps
        ev.terminal = True
        ev.direction = 1
        return ev
    events = [make(g) for g in range(kappa)]
    size = float(np.ptp(p0, axis=0).max()) + eps
    sol = integrate.solve_ivp(f, (0.0, 4.0 * size), np.r_[p0.ravel(), 0.0], method="DOP853", rtol=rtol,
                              atol=1e-13, events=events, max_step=eps / 50)
    hits = [k for k, e in enumerate(sol.t_events) if len(e)]
    if not hits:
        return math.inf
    k = min(hits, key=lambda k: sol.t_events[k][0])
    return beta * g0 + math.log(float(sol.y_events[k][0][-1]) / u0)


def drift_integral_exit(points, masses, regions, gamma: float, beta: float, eps: float, *, B=None,
                        rtol: float = 1e-10) -> float:
    """Exit time of the continuous kappa-point dynamics ``dp_g/dt = gamma (sum_h A_gh p_h - p_g)``.

    The next order of the reduced model: where the leading order freezes the drift at the settled
    points, this follows it along the path, so that ``T = int ds / |drift|`` (``s`` the arc length
    of the exiting point), the drift growing like ``e^{beta (gap' s)}`` as the points approach each
    other. Its exit is the first time some ``p_g`` is farther than ``eps`` from its region
    (``regions[g]``, a callable distance, e.g. to the hull of the group's initial tokens). The
    discrete (SA-beta) steps this flow with unit time steps; while the drift is small (it is
    ``O(gamma e^{-beta gap})``) the two agree to a relative error that vanishes as beta grows.
    ``exp`` of :func:`drift_integral_log_exit`.

    ``points`` (kappa, d) the settled points, ``masses`` (kappa,); returns ``T`` (``inf`` if no exit).

    Examples
    --------
    The equilateral triangle, one token per vertex: against exact stepping (the chapter's T2 at
    beta = 6 is 917):

    >>> from ..geometry.polytope import regular_polygon
    >>> v = regular_polygon(3)
    >>> reg = [lambda q, c=c: float(np.linalg.norm(q - c)) for c in v]
    >>> T = drift_integral_exit(v, [1.0, 1.0, 1.0], reg, 0.1, 6.0, 0.05)
    >>> bool(abs(T / 917 - 1) < 0.01)
    True
    """
    lt = drift_integral_log_exit(points, masses, regions, gamma, beta, eps, B=B, rtol=rtol)
    return math.exp(lt) if lt < 709.0 else math.inf


def triangle_exit_exact(gamma: float, beta: float, eps: float, cap: int = 10**8) -> int:
    """``T2`` of (SA-beta) for one token per vertex of the unit equilateral triangle, from the
    one-line recursion of its radius (exact: by symmetry the tokens stay at ``r v_i``):
    ``r <- r (1 - (3/2) gamma (1 - a(r)))``, ``a(r) = 1 / (1 + 2 e^{-3 beta r^2 / 2})``, exit at the
    first ``r < 1 - eps``; -1 past ``cap``.

    Examples
    --------
    >>> [triangle_exit_exact(0.1, b, 0.05) for b in (2.0, 4.0, 6.0)]
    [4, 53, 917]
    """
    r, t = 1.0, 0
    lim = 1.0 - eps
    while t < cap:
        t += 1
        a = 1.0 / (1.0 + 2.0 * math.exp(-1.5 * beta * r * r))
        r = r * (1.0 - 1.5 * gamma * (1.0 - a))
        if r < lim:
            return t
    return -1


# ----------------------------------------------------------------------------------------
# the chain: streams, intervals of the mean, rate on a window
# ----------------------------------------------------------------------------------------

def chain_seed(name: str, beta: float, base: int = 0) -> int:
    """A seed of its own for the chain at configuration ``name`` and ``beta``: the first 63 bits of
    SHA-256 of ``"name|beta|base"`` (beta written with 12 significant digits), stable across
    runs, machines and the order of the grid.

    Examples
    --------
    >>> a = chain_seed("square", 2.0)
    >>> a == chain_seed("square", 2.0), a == chain_seed("square", 2.5)
    (True, False)
    """
    text = f"{name}|{float(beta):.12g}|{int(base)}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def mean_interval(times, level: float = 0.95) -> tuple[float, float, float]:
    """The sample mean of ``times`` with its ``level`` interval from the sample itself:
    ``mean ± t_{n-1} s / sqrt(n)`` (Student t on the sample variance; no law assumed). With one
    time, or no spread, the interval is the point.

    Examples
    --------
    >>> [round(v, 4) for v in mean_interval([1.0, 2.0, 3.0, 4.0])]
    [2.5, 0.4457, 4.5543]
    """
    x = V.as_float_array("times", times, ndim=1, finite=True)
    if x.size == 0:
        raise ValueError("times must hold at least one time")
    m = float(x.mean())
    if x.size < 2:
        return m, m, m
    h = float(stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return m, m - h, m + h


def fit_chain_rate_window(betas, mean, se_log, window, level: float = 0.95) -> Result:
    """Weighted least squares ``log mean = a + c beta`` over the betas inside ``window`` ([lo, hi]),
    weights ``1 / se_log^2`` (``se_log`` the standard error of ``log mean``, from the sample),
    with its ``level`` interval and the lack of fit: ``chi2`` of the weighted residuals on
    ``n - 2`` degrees of freedom and its p-value. When ``chi2 / dof > 1`` the interval is widened by
    ``sqrt(chi2 / dof)`` (the scatter about the line is larger than the sampling error). Needs at
    least 3 finite means in the window; otherwise ``slope = None`` with a ``reason``.

    Examples
    --------
    >>> b = np.array([1.0, 2.0, 3.0, 4.0])
    >>> r = fit_chain_rate_window(b, np.exp(2.0 * b), np.full(4, 0.1), [1.0, 4.0])
    >>> round(r.slope, 9), r.n, round(r.chi2, 9)
    (2.0, 4, 0.0)
    """
    b = V.as_float_array("betas", betas, ndim=1)
    m = np.asarray(mean, float)
    s = np.asarray(se_log, float)
    if m.shape != b.shape or s.shape != b.shape:
        raise ValueError("mean and se_log must hold one value per beta")
    lo, hi = float(window[0]), float(window[1])
    ok = np.isfinite(m) & (m > 0) & np.isfinite(s) & (s > 0) & (b >= lo - 1e-9) & (b <= hi + 1e-9)
    n = int(ok.sum())
    if n < 3:
        return Result(slope=None, slope_ci=None, n=n, chi2=None, dof=None, p_value=None, level=level,
                      reason=f"only {n} chain means in the window (at least 3 needed)")
    w = 1 / s[ok] ** 2
    X = np.stack([np.ones(n), b[ok]], axis=1)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    coef = cov @ (X.T @ (w * np.log(m[ok])))
    res = np.log(m[ok]) - X @ coef
    chi2 = float(np.sum(w * res ** 2))
    dof = n - 2
    infl = max(1.0, chi2 / dof) if dof > 0 else 1.0
    se = math.sqrt(cov[1, 1] * infl)
    z = float(stats.norm.ppf(0.5 + level / 2))
    return Result(slope=float(coef[1]), slope_ci=[float(coef[1] - z * se), float(coef[1] + z * se)], n=n,
                  chi2=chi2, dof=dof, p_value=float(stats.chi2.sf(chi2, dof)) if dof > 0 else None, level=level,
                  reason=None)


# ----------------------------------------------------------------------------------------
# the exponent of (SA-beta) through the next-order model
# ----------------------------------------------------------------------------------------

#: The stated model of the approach used for ``c_inf`` (see :func:`exponent_from_model`).
MODEL_SENTENCE = ("log T2 = log T_ode(β) + a + δβ, T_ode the exit time of the continuous κ-point dynamics of the "
                  "settled points (the next-order reduced model); c∞ = c_ode + δ, c_ode the exponent of T_ode "
                  "(log T_ode = a' + cβ + k log β solved at β = {b_hi}); T_ode + 1/2 stands for the integer "
                  "step T2; interval: δ on the whole window (T2 ≥ {t_min:g}), on its upper half and on its last "
                  "three points, with T_ode + 0 and T_ode + 1 as well, widened by the change of c_ode from "
                  "β = {b_lo} to β = {b_hi}")


#: The betas at which the next-order model's exponent is read (:func:`model_exponent`).
MODEL_BETAS = (80.0, 160.0, 320.0, 640.0)


def model_exponent(log_T_at) -> tuple[float | None, float | None]:
    """The exponent of a model time from ``log T`` at large beta: ``log T = a + c beta + k log beta``
    solved exactly at ``beta = 160, 320, 640`` and at ``80, 160, 320``; returns ``(c, |change|)``, the
    latter the error bar of the extrapolation (None, None if a value is not finite). The betas are
    large because the settled points of spread groups approach their vertices only like ``1 / beta``:
    at ``beta = 40 ... 160`` the terms in ``1 / beta`` still bias such a fit by about 1%.

    Examples
    --------
    >>> c, err = model_exponent(lambda b: 1.5 * b - math.log(b) + 3.0)
    >>> round(c, 9), round(err, 9)
    (1.5, 0.0)
    """
    def solve(bs):
        y = [log_T_at(b) for b in bs]
        if not all(math.isfinite(v) for v in y):
            return None
        X = np.array([[1.0, b, math.log(b)] for b in bs])
        return float(np.linalg.solve(X, np.array(y))[1])
    hi, lo = solve(MODEL_BETAS[1:]), solve(MODEL_BETAS[:3])
    if hi is None or lo is None:
        return None, None
    return hi, abs(hi - lo)


def exponent_from_model(betas, T, T_model, c_model, c_err, *, t_min: float = 100.0) -> Result:
    """``c_inf`` of ``T`` (measured) given a model time ``T_model`` on the same betas whose own exponent
    ``c_model`` (± ``c_err``) is known: ``log T - log(T_model + o) = a + delta beta`` fitted (least
    squares) on the points with ``T >= t_min`` (the window), on its upper half and on its last three
    points, with ``o = 1/2`` and, for the interval, ``o = 0`` and ``o = 1`` (``T`` counts whole steps from
    1, the model's time is continuous: they differ by about a step); ``c_inf = c_model + delta``
    (``o = 1/2``, whole window), ``ci`` spans every ``delta``, widened by ``c_err``. With fewer than 3
    points, or no model exponent, ``c_inf = None`` and a ``reason``.

    Examples
    --------
    A measured time that is the model's times a constant has the model's exponent:

    >>> b = np.arange(3.0, 9.0)
    >>> tm = np.exp(1.5 * b) * 1e4
    >>> r = exponent_from_model(b, 2.0 * (tm + 0.5), tm, 1.5, 0.001)
    >>> round(r.c_inf, 9), [round(c, 4) for c in r.ci]
    (1.5, [1.499, 1.501])
    """
    b = V.as_float_array("betas", betas, ndim=1)
    t = np.asarray(T, float)
    tm = np.asarray(T_model, float)
    ok = (t >= t_min) & np.isfinite(tm) & (tm > 0)
    n = int(ok.sum())
    if c_model is None or not math.isfinite(c_model):
        return Result(c_inf=None, ci=None, delta=None, n=n, window=None, residuals=[],
                      reason="the model's exponent could not be computed")
    if n < 3:
        return Result(c_inf=None, ci=None, delta=None, n=n, window=None, residuals=[],
                      reason=f"only {n} exit times at or above T2 = {t_min:g} (at least 3 needed)")
    order = np.argsort(b[ok])
    bb, tt, mm = b[ok][order], t[ok][order], tm[ok][order]
    deltas: list[float] = []
    central, resid = 0.0, np.zeros(n)
    for off in (0.5, 0.0, 1.0):
        y = np.log(tt / (mm + off))
        for lo in sorted({0, n // 2 if n - n // 2 >= 3 else 0, n - 3}):
            coef = np.polyfit(bb[lo:], y[lo:], 1)
            deltas.append(float(coef[0]))
            if lo == 0 and off == 0.5:
                central, resid = float(coef[0]), y - np.polyval(coef, bb)
    err = float(c_err or 0.0)
    return Result(c_inf=float(c_model + central), ci=[float(c_model + min(deltas) - err), float(c_model + max(deltas) + err)],
                  delta=central, deltas=deltas, n=n, window=[float(bb[0]), float(bb[-1])],
                  residuals=[[float(u), float(v)] for u, v in zip(bb, resid)], reason=None)


def _f(x):
    return None if x is None or not math.isfinite(float(x)) else float(x)


def rates_entry(r, *, t_min: float = 100.0) -> dict:
    """The ``"rates"`` entry of one configuration (a result of :func:`attention_fw.experiments.sabeta.family_task`):
    ``name``, ``c0``, ``gap_settled`` (smallest gap at the settled points, at the largest beta),
    ``local_slopes``, ``c_inf`` with ``c_inf_ci`` and ``c_inf_model`` (:func:`exponent_from_model`;
    None with ``c_inf_reason`` where it cannot be made), ``c_logbeta`` with ``c_logbeta_ci``
    (:func:`fit_exponent`, the three-term model, for comparison), ``chain_rate`` with
    ``chain_rate_ci`` on ``chain_window`` (the betas where the chain's mean and SA-beta's ``T2 >= t_min``
    are both known; :func:`fit_chain_rate_window`, with ``chain_chi2``, ``chain_dof``, ``chain_p``),
    ``sabeta_window_slope`` (the straight slope of SA-beta's ``log T2`` over that same window) and
    ``ratio`` ([[beta, T2 / chain mean, low, high], ...], the interval from the chain mean's).

    Examples
    --------
    >>> from attention_fw.experiments.sabeta import family_task
    >>> r = family_task(
    ...     name="triangle, 1 per vertex", t_lo=10, t_hi=3e4, num=7,
    ...     cap=10**5, chain_runs=20, chain_budget=100, rng=0,
    ... )
    >>> q = rates_entry(r)
    >>> lo, hi = q["c_inf_ci"]
    >>> lo <= 1.5 <= hi, len(q["local_slopes"]), q["chain_window"] is not None
    (True, 6, True)
    """
    b = np.asarray(r["betas"], float)
    T = np.where(r["T2_sabeta_censored"], np.nan, np.asarray(r["T2_sabeta"], float))   # NaN: no exit
    ex = exponent_from_model(b, T, r["T2_ode"], r["c_ode"], r["c_ode_err"], t_min=t_min)
    fe = fit_exponent(b, T, t_min=t_min)
    mean = np.asarray(r["T2_sap_mean"], float)
    se = np.asarray(r["T2_sap_se_log"], float)
    both = np.isfinite(mean) & np.isfinite(se) & (T >= t_min)
    entry = dict(name=r["name"], c0=float(r["c0"]), gap_settled=float(np.asarray(r["gap"])[-1]),
                 local_slopes=local_slopes(b, T).tolist(),
                 c_inf=_f(ex.c_inf), c_inf_ci=ex.ci,
                 c_inf_model=MODEL_SENTENCE.format(t_min=t_min, b_lo="80, 160, 320", b_hi="160, 320, 640")
                 if ex.c_inf is not None else None, c_inf_reason=ex.reason, c_inf_window=ex.window,
                 c_inf_residuals=ex.residuals, c_ode=_f(r["c_ode"]), delta=_f(ex.delta),
                 c_logbeta=_f(fe.c_inf), c_logbeta_ci=fe.ci, chain_rate=None, chain_rate_ci=None,
                 chain_window=None, chain_chi2=None, chain_dof=None, chain_p=None, sabeta_window_slope=None,
                 chain_reason=None)
    if both.sum() >= 3:
        win = [float(b[both].min()), float(b[both].max())]
        cf = fit_chain_rate_window(b, np.where(both, mean, np.nan), se, win)
        entry.update(chain_window=win, chain_rate=_f(cf.slope), chain_rate_ci=cf.slope_ci, chain_chi2=_f(cf.chi2),
                     chain_dof=cf.dof, chain_p=_f(cf.p_value), chain_reason=cf.reason)
        sel = both & (T > 0)
        entry["sabeta_window_slope"] = float(np.polyfit(b[sel], np.log(T[sel]), 1)[0])
    else:
        entry["chain_reason"] = (f"the chain's mean (uncensored) is known at {int(both.sum())} betas of the window "
                                 f"T2 >= {t_min:g} (at least 3 needed)")
    ci = np.asarray(r["T2_sap_ci"], float)
    ok = np.isfinite(mean) & (T > 0)
    entry["ratio"] = [[float(b[k]), float(T[k] / mean[k]), float(T[k] / ci[k, 1]), float(T[k] / ci[k, 0])
                       if ci[k, 0] > 0 else None] for k in np.flatnonzero(ok)]
    return entry
