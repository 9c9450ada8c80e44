"""Convergence experiments for Sections 3 and 4 and the ODE limit (Theorem 4.8).

Every function here runs an experiment and returns plain numbers (dicts of numpy
arrays), vectorised over ``R`` independent systems of tokens; the figures are
drawn by :mod:`attention_fw.convergence_plots`. The dynamics itself is
:func:`attention_fw.dynamics.hardmax_step` (SA-inf); nothing here re-implements it,
except :func:`exact_hardmax_trajectory`, which redoes (SA-inf) in exact rational
arithmetic for the counterexample to Theorem 3.1.

Contents (paper numbers as in NOTES; "unverified" where NOTES says so):

* Theorem 3.1 and its failure (errata E1-E3): :func:`exact_hardmax_trajectory`,
  :func:`thm31_counterexample`, :func:`symmetric_cloud`, :func:`shifted_cloud`,
  :func:`thm31_ratio`.
* Rates of Section 3: :func:`section3_rates` (energy, Frank-Wolfe gap and primal
  gap against the *current* hull), :func:`fixed_hull_fw` (classical Frank-Wolfe
  over a *fixed* hull, open-loop ``2/(t+2)`` or exact line search),
  :func:`linear_rate_bound`, :func:`loglog_slope`.
* Theorem 4.2 (E4): :func:`vertex_convergence`; a vertex that does not own its
  cell: :func:`non_owning_run`.
* The duality-gap proposition of Section 4 (number unverified, plausibly Prop 4.1):
  :func:`duality_gap_check`.
* Remark 4.6: :func:`owns_cell_probability`, :func:`owns_cell_union_bound`,
  :func:`wilson_interval`.
* Theorem 4.8 (number not source-confirmed): :func:`ode_solution`,
  :func:`euler_error`, :func:`ode_continuity`.

Time convention: ``t = 0`` is the first step (``x^{t+1}`` is made with ``gamma^t``).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from scipy import integrate, stats

from . import _validate as V
from . import dynamics as D
from . import frank_wolfe as F
from .geometry import cell_labels, owns_cell
from .schedules import get_schedule

__all__ = [
    "exact_hardmax_trajectory", "thm31_counterexample", "symmetric_cloud", "shifted_cloud",
    "origin_in_hull_2d", "origin_distance_2d", "thm31_ratio", "thm31_shifted", "section3_rates", "fixed_hull_fw", "linear_rate_bound",
    "loglog_slope", "log_times", "vertex_convergence", "non_owning_run", "duality_gap_check",
    "wilson_interval", "owns_cell_probability", "owns_cell_union_bound", "ode_solution",
    "euler_error", "ode_continuity", "HALVING_LIMIT",
]

HALVING_LIMIT = 0.28878809508660242
"""``prod_{k >= 1} (1 - 2^{-k})``: the factor Theorem 4.2 gives for ``gamma^t = 2^{-t-1}`` as ``t -> inf`` (E4)."""


# ============================================================================ small helpers
def log_times(steps: int, num: int = 200) -> np.ndarray:
    """About ``num`` integer times in ``[0, steps]``, log-spaced (all small times kept), sorted, unique."""
    steps = V.positive_int("steps", steps)
    num = V.positive_int("num", num, minimum=2)
    t = np.unique(np.round(np.geomspace(1, steps, num)).astype(int))
    return np.unique(np.concatenate([[0], t, [steps]]))


def loglog_slope(t, y, t_min=None, t_max=None) -> float:
    """Least-squares slope of ``log y`` against ``log t`` over ``t_min <= t <= t_max`` (positive ``y`` only).

    Points with ``t <= 0`` or ``y <= 0`` have no logarithm and are left out (a gap that is
    exactly zero, say); every other point in the window is used.

    Parameters
    ----------
    t, y : arrays (T,)
        Finite times and values of the same length.
    t_min, t_max : float, optional
        Window of the fit (inclusive).

    Raises
    ------
    ValueError
        ``t`` or ``y`` not one-dimensional, of different lengths, or holding NaN or inf
        (a non-finite value is an upstream failure, never silently dropped); fewer than two
        usable points.
    """
    t = V.as_float_array("t", t, ndim=1)
    y = V.as_float_array("y", y, ndim=1)
    if t.shape != y.shape:
        raise ValueError(f"t and y must have the same length, got {len(t)} and {len(y)}")
    keep = (t > 0) & (y > 0)
    if t_min is not None:
        keep &= t >= V.real_scalar("t_min", t_min)
    if t_max is not None:
        keep &= t <= V.real_scalar("t_max", t_max)
    if keep.sum() < 2:
        raise ValueError("loglog_slope needs at least two points with t > 0 and y > 0 in the window")
    return float(np.polyfit(np.log(t[keep]), np.log(y[keep]), 1)[0])


def _psd(name, M, d=None):
    M = V.square_matrix(name, M, d, symmetric=True)
    w = np.linalg.eigvalsh(M)
    if w.min() < -1e-12 * max(1.0, abs(w).max()):
        raise ValueError(f"{name} must be positive semidefinite, got eigenvalue {w.min():.3g}")
    return M


def _batch(x):
    x = V.tokens("x0", x)
    return (x[None], True) if x.ndim == 2 else (x, False)


# ============================================================================ Theorem 3.1, exact
def _frac(name, v):
    if isinstance(v, bool):
        raise TypeError(f"{name} must hold integers, Fractions or floats, got bool")
    if isinstance(v, (int, np.integer)):
        return Fraction(int(v))
    if isinstance(v, Fraction):
        return v
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            raise ValueError(f"{name} must be finite")
        return Fraction(float(v))
    raise TypeError(f"{name} must hold integers, Fractions or floats, got {type(v).__name__}")


def exact_hardmax_trajectory(x0, steps: int, Bstar=1, gamma=None):
    """(SA-inf) of Section 3 in exact rational arithmetic (``fractions.Fraction``).

    ``x_i <- x_i + gamma^t (s_i - x_i)`` with ``s_i`` the average of the tokens minimising
    ``<B_* x_i, x_j>`` (ties averaged over indices, exactly), i.e. (SA-inf) with ``B = -B_*``
    (Section 3.1, equation ``hardmax.dynamics.V_fw``).

    Parameters
    ----------
    x0 : sequence of n numbers (d = 1) or of n length-d sequences
        Integers, Fractions or floats (floats are converted exactly).
    steps : int
        Number of steps; the result holds ``x^0, ..., x^steps``.
    Bstar : number or d x d nested sequence
        ``B_*`` (symmetric positive semidefinite is the setting of Section 3; not checked here).
    gamma : callable ``t -> Fraction``, optional
        Step sizes; default ``2/(t+2)`` exactly (Theorem 3.1).

    Returns
    -------
    list of ``steps + 1`` lists of n tuples of Fractions.

    Raises
    ------
    TypeError, ValueError
        Non-numeric or non-finite entries, ragged tokens, a step outside (0, 1].
    """
    steps = V.positive_int("steps", steps, minimum=0)
    pts = list(x0)
    if not pts:
        raise ValueError("x0 must hold at least one token")
    toks = []
    for p in pts:
        if isinstance(p, (list, tuple, np.ndarray)):
            toks.append(tuple(_frac("x0", c) for c in p))
        else:
            toks.append((_frac("x0", p),))
    d = len(toks[0])
    if any(len(p) != d for p in toks):
        raise ValueError("x0 tokens must all have the same dimension")
    if isinstance(Bstar, (list, tuple, np.ndarray)):
        Bm = [[_frac("Bstar", c) for c in row] for row in Bstar]
        if len(Bm) != d or any(len(r) != d for r in Bm):
            raise ValueError(f"Bstar must be {d} x {d}")
    else:
        b = _frac("Bstar", Bstar)
        Bm = [[b if k == l else Fraction(0) for l in range(d)] for k in range(d)]
    if gamma is None:
        def gamma(t):
            return Fraction(2, t + 2)
    out = [toks]
    x = toks
    n = len(x)
    for t in range(steps):
        g = Fraction(gamma(t))
        if not (0 < g <= 1):
            raise ValueError(f"gamma(t) must lie in (0, 1], got {g} at t = {t}")
        Bx = [tuple(sum(Bm[k][l] * xi[l] for l in range(d)) for k in range(d)) for xi in x]
        new = []
        for i in range(n):
            sc = [sum(Bx[i][k] * x[j][k] for k in range(d)) for j in range(n)]
            m = min(sc)
            tied = [j for j in range(n) if sc[j] == m]
            s = tuple(sum(x[j][k] for j in tied) / len(tied) for k in range(d))
            new.append(tuple(x[i][k] + g * (s[k] - x[i][k]) for k in range(d)))
        x = new
        out.append(x)
    return out


def thm31_counterexample(x0=(3, -1), steps: int = 700) -> dict:
    """Theorem 3.1 against its counterexample (errata E2), exactly: ``d = 1``, ``B_* = 1``, ``gamma^t = 2/(t+2)``.

    For each ``t = 0, ..., steps-1`` compares ``J(x_i^{t+1}) = (x_i^{t+1})^2 / 2`` with the
    printed bound ``2/(t+1) * lambda_max(B_*) * d(K^0)^2`` (here ``lambda_max = 1``), all in
    Fractions.

    Returns
    -------
    dict with
        ``trajectory`` (list of Fraction tuples), ``t`` (array 0..steps-1), ``J`` (list of per-token
        Fraction lists, ``J[t][i] = J(x_i^{t+1})``), ``bound`` (list of Fractions),
        ``first_violation`` (first t with ``max_i J > bound``, or None), ``first_violation_token``
        (list, per token), ``equality_times`` (list per token of the t with ``J == bound``),
        ``plateau`` (``J`` of the lowest token at the end), ``limit`` (final position of the lowest
        token), ``diameter`` (``d(K^0)``).

    Raises
    ------
    ValueError
        ``0`` not in the initial hull (the theorem's hypothesis), fewer than 2 steps.
    """
    steps = V.positive_int("steps", steps, minimum=2)
    traj = exact_hardmax_trajectory(list(x0), steps, 1)
    xs0 = [p[0] for p in traj[0]]
    if not (min(xs0) <= 0 <= max(xs0)):
        raise ValueError("x0 must have 0 in its convex hull (hypothesis of Theorem 3.1)")
    diam = max(xs0) - min(xs0)
    n = len(xs0)
    J = [[traj[t + 1][i][0] ** 2 / 2 for i in range(n)] for t in range(steps)]
    bound = [Fraction(2, t + 1) * diam ** 2 for t in range(steps)]
    first = next((t for t in range(steps) if max(J[t]) > bound[t]), None)
    first_tok = [next((t for t in range(steps) if J[t][i] > bound[t]), None) for i in range(n)]
    eq = [[t for t in range(steps) if J[t][i] == bound[t]] for i in range(n)]
    last = traj[-1]
    low = min(range(n), key=lambda i: abs(last[i][0]))
    return dict(trajectory=traj, t=np.arange(steps), J=J, bound=bound, first_violation=first,
                first_violation_token=first_tok, equality_times=eq, plateau=J[-1][low],
                limit=last[low][0], diameter=diam, lowest_token=low)


# ============================================================================ Section 3, clouds
def symmetric_cloud(R: int, m: int, d: int = 2, seed=0) -> np.ndarray:
    """``R`` centrally symmetric clouds ``{x_1, ..., x_m, -x_1, ..., -x_m}`` of ``n = 2m`` Gaussian tokens.

    Central symmetry is preserved by (SA-inf) with ``B = -B_*`` (the oracle of ``-x`` is ``-s``),
    so ``0 in K^t`` for all ``t``, the hypothesis the proof of Theorem 3.1 really uses.

    Returns
    -------
    array (R, 2m, d)
    """
    R = V.positive_int("R", R)
    m = V.positive_int("m", m)
    d = V.positive_int("d", d)
    rng = V.rng("seed", seed)
    x = rng.normal(size=(R, m, d))
    return np.concatenate([x, -x], axis=1)


def shifted_cloud(R: int, n: int, d: int = 2, seed=0, concentration: float = 0.3) -> np.ndarray:
    """``R`` Gaussian clouds shifted so that ``0`` lies in ``K^0`` but, typically, off-centre.

    Each cloud is translated by ``-sum_j w_j x_j`` with Dirichlet(``concentration``) weights
    ``w``: the origin becomes that convex combination of the tokens, hence ``0 in K^0`` (the
    hypothesis of Theorem 3.1), and small ``concentration`` puts it near the boundary.

    Returns
    -------
    array (R, n, d)
    """
    R = V.positive_int("R", R)
    n = V.positive_int("n", n, minimum=2)
    d = V.positive_int("d", d)
    a = V.real_scalar("concentration", concentration, low=0.0, low_open=True)
    rng = V.rng("seed", seed)
    x = rng.normal(size=(R, n, d))
    w = rng.dirichlet(np.full(n, a), size=R)
    return x - np.einsum("rn,rnd->rd", w, x)[:, None, :]


def origin_in_hull_2d(x, tol: float = 1e-12) -> np.ndarray:
    """Whether ``0 in conv{x_1, ..., x_n}`` for planar point sets, vectorised.

    ``0`` is in the hull iff a token sits at ``0`` or the directions of the tokens leave no
    angular gap larger than ``pi``. Shape ``(R, n, 2) -> (R,)`` (or ``(n, 2) -> bool``).
    """
    x = V.tokens("x", x)
    if x.shape[-1] != 2:
        raise ValueError(f"x must be planar (d = 2), got d = {x.shape[-1]}")
    xb = x[None] if x.ndim == 2 else x
    r = np.linalg.norm(xb, axis=-1)
    scale = np.maximum(r.max(axis=-1), 1e-300)
    at0 = (r <= tol * scale[:, None]).any(axis=-1)
    ang = np.sort(np.arctan2(xb[..., 1], xb[..., 0]), axis=-1)
    gaps = np.diff(np.concatenate([ang, ang[:, :1] + 2 * np.pi], axis=-1), axis=-1)
    out = at0 | (gaps.max(axis=-1) <= np.pi + 1e-12)
    return out[0] if x.ndim == 2 else out


def origin_distance_2d(x) -> np.ndarray:
    """Distance from ``0`` to ``conv{x_1, ..., x_n}`` for planar point sets, vectorised (0 inside).

    Outside the hull the nearest point lies on an edge, i.e. on a segment between two tokens,
    and every such segment lies in the hull; so the distance is the minimum over all pairs
    ``(i, j)`` of the distance from 0 to ``[x_i, x_j]`` (``O(n^2)``). Shape ``(R, n, 2) -> (R,)``.
    """
    x = V.tokens("x", x)
    xb = x[None] if x.ndim == 2 else x
    a = xb[:, :, None, :]
    e = xb[:, None, :, :] - a
    ee = np.einsum("...d,...d->...", e, e)
    s = np.clip(np.divide(-np.einsum("...d,...d->...", a, e), ee, out=np.zeros_like(ee), where=ee > 0), 0, 1)
    dist = np.linalg.norm(a + s[..., None] * e, axis=-1).min(axis=(-1, -2))
    dist = np.where(origin_in_hull_2d(xb), 0.0, dist)
    return dist[0] if x.ndim == 2 else dist


def _check_symmetric(x):
    n = x.shape[-2]
    if n % 2 or not np.array_equal(x[:, n // 2:], -x[:, :n // 2]):
        raise ValueError("x0 must be a centrally symmetric cloud [x; -x] (see symmetric_cloud) when symmetric=True")


def _resymmetrise(x, x_old):
    """Exact-arithmetic bookkeeping for symmetric clouds: mirror the first half, keep exact zeros exact.

    In exact arithmetic the symmetry ``x_{i+m} = -x_i`` is preserved, and a token whose oracle is
    its own mirror lands EXACTLY on 0 (e.g. at t = 2, where gamma = 1/2); there all scores tie,
    the tied average is 0, and it stays. In floating point such a token sits at ~1e-16 and its
    oracle is decided by rounding noise, which breaks the symmetry by O(1). We restore the
    exact-arithmetic state: a token that was 0 stays 0, a token whose norm drops by more than
    12 orders of magnitude in one step (exact cancellation; a genuine step shrinks it by the
    factor ``|1 - 2 gamma|`` at most, which is 0 only at gamma = 1/2) becomes 0, and the second
    half is re-mirrored. (Validated against :func:`exact_hardmax_trajectory` in the tests.)
    """
    m = x.shape[-2] // 2
    old = np.linalg.norm(x_old, axis=-1)
    small = (old == 0) | (np.linalg.norm(x, axis=-1) <= 1e-12 * old)
    x = np.where(small[..., None], 0.0, x)
    return np.concatenate([x[:, :m], -x[:, :m]], axis=1)


def thm31_ratio(x0, Bstar, steps: int, times=None, symmetric: bool = False) -> dict:
    """Theorem 3.1's ratio ``(t+1) max_i J(x_i^{t+1}) / (lambda_max(B_*) d(K^0)^2)`` along (SA-inf), ``2/(t+2)``.

    The printed bound says this ratio is ``<= 2`` for every ``t`` (errata E2: false unless
    ``0 in K^t`` for all ``t``).

    Parameters
    ----------
    x0 : (n, d) or (R, n, d)
    Bstar : (d, d) symmetric positive semidefinite
    steps : int
    times : int array, optional
        The ``t`` at which to record (default: :func:`log_times`).
    symmetric : bool
        ``x0`` is centrally symmetric (``[x; -x]``); keep the exact-arithmetic symmetry and
        exact zeros (see ``_resymmetrise``).

    Returns
    -------
    dict with ``t`` (T,), ``ratio`` (T, R), ``origin_dist`` (T, R) (distance from 0 to
    ``K^{t+1}`` divided by ``d(K^0)``; planar data only, else None), ``first_violation`` (R,) (first recorded-or-not t with
    ratio > 2, -1 if none), ``final`` (R, n, d), ``final_diameter`` (R,), ``limit`` (R, d)
    (token mean at the end), ``lam``, ``diam0`` (R,).
    """
    x, _ = _batch(x0)
    d = x.shape[-1]
    Bs = _psd("Bstar", Bstar, d)
    steps = V.positive_int("steps", steps)
    times = log_times(steps) if times is None else np.asarray(times, dtype=int)
    times = times[times < steps]
    lam = float(np.linalg.eigvalsh(Bs).max())
    diam0 = F.hull_diameter(x)
    sched = get_schedule("fw")
    R = x.shape[0]
    first = np.full(R, -1)
    rec, orig = [], []
    planar = d == 2
    tset = set(int(t) for t in times)
    if symmetric:
        _check_symmetric(x)
    for t in range(steps):
        x_new = D.hardmax_step(x, sched(t), -Bs)
        x = _resymmetrise(x_new, x) if symmetric else x_new
        ratio = (t + 1) * F.energy(x, Bs).max(axis=-1) / (lam * diam0 ** 2)
        newly = (first < 0) & (ratio > 2.0)
        first[newly] = t
        if t in tset:
            rec.append(ratio)
            if planar:
                orig.append(origin_distance_2d(x) / diam0)
    return dict(t=np.array(sorted(tset)), ratio=np.array(rec), origin_dist=np.array(orig) if planar else None,
                first_violation=first, final=x, final_diameter=F.hull_diameter(x), limit=x.mean(axis=-2),
                lam=lam, diam0=diam0)


def thm31_shifted(ns, R: int, steps: int, Bstar=None, seed=0, times=None) -> dict:
    """:func:`thm31_ratio` over shifted clouds of several sizes ``n`` (``R`` clouds each), pooled.

    Returns the keys of :func:`thm31_ratio` with the systems of all sizes concatenated (``final``
    is dropped, its shape depends on ``n``), plus ``n`` (per system).
    """
    ns = [V.positive_int("ns", int(n), minimum=2) for n in ns]
    if not ns:
        raise ValueError("ns must list at least one cloud size")
    Bs = np.eye(2) if Bstar is None else Bstar
    ss = np.random.SeedSequence(seed if isinstance(seed, (int, np.integer)) else None).spawn(len(ns))
    parts = [thm31_ratio(shifted_cloud(R, n, 2, seed=np.random.default_rng(s)), Bs, steps, times=times)
             for n, s in zip(ns, ss)]
    out = dict(t=parts[0]["t"], lam=parts[0]["lam"], n=np.repeat(ns, R))
    for k in ("ratio", "origin_dist"):
        out[k] = np.concatenate([q[k] for q in parts], axis=1)
    for k in ("first_violation", "final_diameter", "limit", "diam0"):
        out[k] = np.concatenate([q[k] for q in parts], axis=0)
    return out


def _min_energy_batch(x, Bs):
    """``min_{K} 1/2 <B_* y, y>`` for each system of ``x`` (R, n, d).

    Planar data with ``B_*`` positive definite (vectorised, also for degenerate hulls): the
    minimum is 0 if ``0 in K``; otherwise it is attained on an edge of ``K``, and every edge
    is a segment between two tokens while every such segment lies in ``K``, so the minimum
    over all token pairs of the 1-D minimum on ``[x_i, x_j]`` is exact. Other cases go
    through :func:`attention_fw.frank_wolfe.min_energy_over_hull` one system at a time.
    """
    if x.shape[-1] != 2 or np.linalg.eigvalsh(Bs).min() <= 0:
        return np.array([F.min_energy_over_hull(p, Bs) for p in x])
    a = x[:, :, None, :]
    e = x[:, None, :, :] - a
    Be = e @ Bs
    den = np.einsum("...d,...d->...", Be, e)
    num = -np.einsum("...d,...d->...", a @ Bs, e)
    s = np.clip(np.divide(num, den, out=np.zeros_like(num), where=den > 0), 0.0, 1.0)
    y = a + s[..., None] * e
    m = F.energy(y, Bs).min(axis=(-1, -2))
    return np.where(origin_in_hull_2d(x), 0.0, m)


def section3_rates(x0, Bstar, steps: int, schedule="fw", times=None, symmetric: bool = False) -> dict:
    """Energy, Frank-Wolfe gap and primal gaps along (SA-inf) with ``B = -B_*`` (Section 3).

    At each recorded ``t`` (per system, maximised over tokens):

    * ``J``: ``max_i J(x_i^t)``, ``J = 1/2 <B_* x, x>``;
    * ``fw_gap``: ``max_i max_{y in K^t} <B_* x_i, x_i - y>`` (Frank-Wolfe gap on the current hull);
    * ``primal_current``: ``max_i J(x_i^t) - min_{K^t} J`` (primal gap against the current hull);
    * ``primal_initial``: ``max_i J(x_i^t) - min_{K^0} J`` (against the initial hull);
    * ``diameter``: ``d(K^t)``.

    ``symmetric=True``: centrally symmetric ``x0``, bookkeeping as in :func:`thm31_ratio`.

    Returns
    -------
    dict of arrays (T, R) plus ``t`` (T,), ``positions`` (T, R, n, d), ``final`` (R, n, d),
    ``diam0`` (R,), ``lam`` (float).
    """
    x, _ = _batch(x0)
    d = x.shape[-1]
    Bs = _psd("Bstar", Bstar, d)
    steps = V.positive_int("steps", steps)
    sched = get_schedule(schedule)
    times = log_times(steps) if times is None else np.asarray(times, dtype=int)
    tset = set(int(t) for t in times if t <= steps)
    min0 = _min_energy_batch(x, Bs)
    diam0 = F.hull_diameter(x)
    if symmetric:
        _check_symmetric(x)
    out = {k: [] for k in ("J", "fw_gap", "primal_current", "primal_initial", "diameter", "positions")}
    for t in range(steps + 1):
        if t in tset:
            out["positions"].append(x)
            J = F.energy(x, Bs).max(axis=-1)
            out["J"].append(J)
            out["fw_gap"].append(F.fw_gap(x, x @ Bs, x).max(axis=-1))
            out["primal_current"].append(J - _min_energy_batch(x, Bs))
            out["primal_initial"].append(J - min0)
            out["diameter"].append(F.hull_diameter(x))
        if t < steps:
            x_new = D.hardmax_step(x, sched(t), -Bs)
            x = _resymmetrise(x_new, x) if symmetric else x_new
    res = {k: np.array(v) for k, v in out.items()}
    res.update(t=np.array(sorted(tset)), final=x, diam0=diam0, lam=float(np.linalg.eigvalsh(Bs).max()))
    return res


# ============================================================================ classical Frank-Wolfe, fixed hull
def fixed_hull_fw(x0, Bstar, steps: int, points=None, rule="fw", times=None) -> dict:
    """Classical Frank-Wolfe for ``min_{y in K} 1/2 <B_* y, y>`` over a FIXED hull ``K``, from every token.

    Each token is an independent Frank-Wolfe iterate: ``s = argmin_{y in K} <B_* x, y>``,
    ``x <- x + gamma (s - x)``, with ``K = conv(points)`` fixed (default ``points = x0``, i.e.
    ``K = K^0``), unlike (SA-inf) whose hull ``K^t`` is the hull of the current tokens.

    Parameters
    ----------
    rule : "fw" (open loop ``2/(t+2)``), "line-search" (exact line search on the quadratic:
        ``gamma = clip(<B_* x, x - s> / <B_*(s - x), s - x>, 0, 1)``) or any schedule spec.

    Returns
    -------
    dict with ``t`` (T,), ``J`` (T, R) (max over tokens of ``J``), ``primal`` (T, R)
    (``max_i J(x_i) - min_K J``), ``fw_gap`` (T, R), ``positions`` (T, R, n, d),
    ``final`` (R, n, d), ``min_energy`` (R,).
    """
    x, _ = _batch(x0)
    d = x.shape[-1]
    Bs = _psd("Bstar", Bstar, d)
    steps = V.positive_int("steps", steps)
    P = x.copy() if points is None else _batch(points)[0]
    if P.shape[0] != x.shape[0] or P.shape[-1] != d:
        raise ValueError(f"points must have shape (R, m, {d}) with R = {x.shape[0]}, got {P.shape}")
    line = rule == "line-search"
    sched = None if line else get_schedule(rule)
    times = log_times(steps) if times is None else np.asarray(times, dtype=int)
    tset = set(int(t) for t in times if t <= steps)
    fmin = _min_energy_batch(P, Bs)
    out = {k: [] for k in ("J", "primal", "fw_gap", "positions")}
    for t in range(steps + 1):
        grad = x @ Bs
        if t in tset:
            out["positions"].append(x)
            J = F.energy(x, Bs).max(axis=-1)
            out["J"].append(J)
            out["primal"].append(J - fmin)
            out["fw_gap"].append(F.fw_gap(x, grad, P).max(axis=-1))
        if t == steps:
            break
        s = F.lmo(P, grad)
        e = s - x
        if line:
            num = -np.einsum("...d,...d->...", grad, e)
            den = np.einsum("...d,de,...e->...", e, Bs, e)
            g = np.clip(np.divide(num, den, out=np.zeros_like(num), where=den > 1e-300), 0.0, 1.0)[..., None]
        else:
            g = sched(t)
        x = x + g * e
    res = {k: np.array(v) for k, v in out.items()}
    res.update(t=np.array(sorted(tset)), final=x, min_energy=fmin)
    return res


def linear_rate_bound(points, Bstar) -> dict:
    """Contraction factor of Frank-Wolfe with exact line search when ``0`` is interior to a fixed polygon.

    For ``f = 1/2 <B_* x, x>`` (``mu = lambda_min``, ``L = lambda_max``) over ``K`` of
    diameter ``D`` containing the ball ``B(0, r)``: the Frank-Wolfe gap obeys
    ``g >= r |grad f|`` and ``|grad f|^2 >= 2 mu h`` (``h`` the primal gap), and one step of
    exact line search gives ``h' <= h - min(g^2 / (2 L D^2), g / 2)``. Hence
    ``h^{t+1} <= rho h^t`` with ``rho = 1 - (mu / L) (r / D)^2`` (classical; Guelat-Marcotte 1986).

    Parameters
    ----------
    points : (m, 2) planar point set with 0 in the interior of its hull
    Bstar : (2, 2) symmetric positive definite

    Returns
    -------
    dict with ``rho``, ``r`` (distance from 0 to the boundary), ``D``, ``mu``, ``L``.

    Raises
    ------
    ValueError
        Non-planar points, 0 not in the interior, ``B_*`` not positive definite.
    """
    from scipy.spatial import ConvexHull

    P = V.tokens("points", points, batched_ok=False)
    if P.shape[1] != 2:
        raise ValueError("points must be planar (d = 2)")
    Bs = _psd("Bstar", Bstar, 2)
    w = np.linalg.eigvalsh(Bs)
    if w.min() <= 0:
        raise ValueError("Bstar must be positive definite for a linear rate")
    hull = ConvexHull(P)
    # facet equations n . x + c <= 0 inside, |n| = 1: distance from 0 is -c
    r = float((-hull.equations[:, 2]).min())
    if r <= 0:
        raise ValueError("points must have 0 in the interior of their hull")
    Dm = float(F.hull_diameter(P))
    return dict(rho=1.0 - (w.min() / w.max()) * (r / Dm) ** 2, r=r, D=Dm, mu=float(w.min()), L=float(w.max()))


# ============================================================================ Theorem 4.2
def _cell_labels(x, verts, B):
    """Index of the vertex maximising ``<B x, v_j>`` (the cell of x), shape (R, n)."""
    return cell_labels(x, verts, B)


def vertex_convergence(vertices, interior, B, schedule, steps: int, tie_rtol: float = 0.0) -> dict:
    """(SA-inf) from the vertices of a polygon plus interior tokens, against the closed form of Theorem 4.2.

    Tokens are ``x^0 = [vertices; interior]``. Under the genericity conditions of Theorem 4.2
    (every vertex owns its cell, no interior token on a cell boundary),
    ``x_i^t - v_{sigma(i)} = prod_{tau < t} (1 - gamma^tau) (x_i^0 - v_{sigma(i)})``
    (Theorem 4.2 with its coefficients summed), ``sigma(i)`` the cell of ``x_i^0``.

    Parameters
    ----------
    vertices : (k, d) or (R, k, d)
    interior : (m, d) or (R, m, d)
    B : (d, d)
    schedule : schedule spec (see :func:`attention_fw.schedules.get_schedule`)
    steps : int
    tie_rtol : float
        Tie tolerance passed to :func:`attention_fw.dynamics.hardmax_step`. Default 0 (exact
        comparisons): the data are generic, so there is no tie in exact arithmetic, and the
        library's default tolerance 1e-12 would merge a token with its vertex once they are
        1e-12 apart (the token and the vertex then move to their average), which stalls the
        measured distance at ~1e-12 instead of following the closed form to machine precision.

    Returns
    -------
    dict with ``t`` (steps+1,), ``dist`` (steps+1, R, n) measured ``|x_i^t - v_sigma(i)|``,
    ``closed`` (same) the closed form, ``product`` (steps+1,), ``sigma`` (R, n),
    ``labels_constant`` (R,) (the cell of every token never changes), ``vertices_fixed`` (R,)
    (max vertex displacement), ``trajectory`` (steps+1, R, n, d).
    """
    Vt, single = _batch(vertices)
    X, _ = _batch(interior)
    if X.shape[0] != Vt.shape[0] or X.shape[-1] != Vt.shape[-1]:
        raise ValueError(f"interior must match vertices in R and d, got {X.shape} and {Vt.shape}")
    d = Vt.shape[-1]
    Bm = V.square_matrix("B", B, d)
    steps = V.positive_int("steps", steps)
    sched = get_schedule(schedule)
    k = Vt.shape[1]
    x = np.concatenate([Vt, X], axis=1)
    sigma = _cell_labels(x, Vt, Bm)
    target = np.take_along_axis(Vt, sigma[..., None], axis=1)
    d0 = np.linalg.norm(x - target, axis=-1)
    traj = [x]
    same = np.ones(x.shape[0], dtype=bool)
    for t in range(steps):
        x = D.hardmax_step(x, sched(t), Bm, tie_rtol=tie_rtol)
        traj.append(x)
        same &= np.all(_cell_labels(x, x[:, :k], Bm) == sigma, axis=-1)
    traj = np.array(traj)
    dist = np.linalg.norm(traj - target[None], axis=-1)
    prod = sched.product(np.arange(steps + 1))
    return dict(t=np.arange(steps + 1), dist=dist, closed=prod[:, None, None] * d0[None], product=prod,
                sigma=sigma, labels_constant=same,
                vertices_fixed=np.abs(traj[:, :, :k] - Vt[None]).max(axis=(0, 2, 3)), trajectory=traj)


def non_owning_run(vertices, interior, B, gamma: float, steps: int) -> dict:
    """(SA-inf) with constant step from a polygon some of whose vertices do NOT own their cells.

    A vertex ``v_j`` with ``<B v_j, v_j> <= <B v_j, v_i>`` for some ``i`` is not its own
    leader, so it moves towards ``v_i``: the hull shrinks, unlike under the hypotheses of
    Theorem 4.2. Single system.

    Returns
    -------
    dict with ``trajectory`` (steps+1, n, d), ``area`` (steps+1,) of ``K^t``,
    ``vertex_shift`` (steps+1, k) distance of each initial vertex token from its start,
    ``owner`` (k,) bool: ``<B v_j, v_j> > <B v_j, v_i>`` for all ``i != j``.
    """
    Vt = V.tokens("vertices", vertices, batched_ok=False)
    X = V.tokens("interior", interior, batched_ok=False)
    Bm = V.square_matrix("B", B, Vt.shape[1])
    if X.shape[1] != Vt.shape[1]:
        raise ValueError("interior must have the dimension of vertices")
    steps = V.positive_int("steps", steps)
    owner = owns_cell(Vt, Bm)
    res = D.simulate(np.concatenate([Vt, X]), D.Hardmax(Bm, gamma), steps, trajectory=True)
    traj = res.trajectory
    area = F.hull_area(traj)
    shift = np.linalg.norm(traj[:, :len(Vt)] - Vt[None], axis=-1)
    return dict(trajectory=traj, area=area, vertex_shift=shift, owner=owner)


# ============================================================================ duality gap (Section 4.1)
def duality_gap_check(x0, B, schedule, steps: int, c: float = 1.0) -> dict:
    """Both sides of the duality-gap proposition of NOTES Section 4.1 (number unverified) along (SA-inf).

    Setting: ``B^t = beta^t B`` with ``B >= 0`` and ``beta^t / beta^{t+1} = gamma^t / gamma^{t+1}``,
    i.e. ``beta^t = c gamma^t``; ``J^t(y) = -1/2 <B^t y, y>``. The proposition states, for every
    token ``i`` and ``t >= 1``,

        min_{1 <= tau <= t} max_{y in K^tau} <grad J^tau(x_i^tau), x_i^tau - y>
            <= (1/t) (J^1(x_i^1) / gamma^1 - inf_{y in K^t} J^t(y) / gamma^t).

    Positive rescaling of ``B`` does not change the oracle, so the trajectory is that of
    (SA-inf) with ``B``. Here ``J^t / gamma^t = -(c/2) <B y, y>`` and its infimum over
    ``K^t`` is attained at a token (a concave function on a polytope).

    Returns
    -------
    dict with ``t`` (1..steps), ``lhs`` and ``rhs`` (steps, R, n), ``gap`` (steps, R, n) the
    per-step Frank-Wolfe gap ``max_y <grad J^tau(x_i^tau), x_i^tau - y>``.
    """
    x, _ = _batch(x0)
    d = x.shape[-1]
    Bm = _psd("B", B, d)
    steps = V.positive_int("steps", steps)
    c = V.real_scalar("c", c, low=0.0, low_open=True)
    sched = get_schedule(schedule)
    x = D.hardmax_step(x, sched(0), Bm)  # x^1
    f1 = -0.5 * c * np.einsum("...d,de,...e->...", x, Bm, x)
    gaps, rhs = [], []
    for t in range(1, steps + 1):
        Bx = x @ Bm  # B symmetric
        S = Bx @ np.swapaxes(x, -1, -2)
        # grad J^t = -c gamma^t B x; max_y <grad, x - y> = c gamma^t (max_j <Bx, x_j> - <Bx, x>)
        gaps.append(c * sched(t) * (S.max(axis=-1) - np.einsum("...ii->...i", S)))
        inf_t = -0.5 * c * np.einsum("...ii->...i", S).max(axis=-1)
        rhs.append((f1 - inf_t[..., None]) / t)
        if t < steps:
            x = D.hardmax_step(x, sched(t), Bm)
    gaps = np.array(gaps)
    return dict(t=np.arange(1, steps + 1), lhs=np.minimum.accumulate(gaps, axis=0), rhs=np.array(rhs), gap=gaps)


# ============================================================================ Remark 4.6
def wilson_interval(successes, trials, z: float = 1.96):
    """Wilson score interval for a binomial proportion (vectorised). Returns ``(low, high)``."""
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    if np.any(n <= 0) or np.any(k < 0) or np.any(k > n):
        raise ValueError("trials must be positive and 0 <= successes <= trials")
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z / den * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def owns_cell_probability(dims, kappa: int, samples: int, seed=0, B_spectrum=None, chunk: int = 4096) -> dict:
    """Monte-Carlo ``P(every one of kappa Gaussian vertices owns its cell)`` against ``d`` (Remark 4.6).

    ``v_1, ..., v_kappa ~ N(0, I_d)`` i.i.d.; the event is
    ``<B v_j, v_j> > <B v_j, v_i>`` for all ``i != j`` (NOTES Section 4.3, condition 1), tested
    by :func:`attention_fw.geometry.owns_cell`. ``B = diag(B_spectrum(d))`` if given (bounded
    condition number), else ``I_d``.

    Parameters
    ----------
    dims : sequence of int >= 1
    kappa : int >= 2
    samples : int, draws per dimension
    B_spectrum : callable ``d -> (d,) positive eigenvalues``, optional

    Returns
    -------
    dict with ``d``, ``p``, ``low``, ``high`` (95% Wilson), ``successes``, ``samples``, ``kappa``.
    """
    dims = [V.positive_int("dims", int(d)) if isinstance(d, (int, np.integer)) else V.positive_int("dims", d)
            for d in dims]
    kappa = V.positive_int("kappa", kappa, minimum=2)
    samples = V.positive_int("samples", samples)
    rng = V.rng("seed", seed)
    succ = []
    for d in dims:
        B = np.eye(d) if B_spectrum is None else np.diag(np.asarray(B_spectrum(d), dtype=float))
        k = 0
        left = samples
        while left:
            m = min(chunk, left)
            v = rng.normal(size=(m, kappa, d))
            k += int(np.all(owns_cell(v, B), axis=-1).sum())
            left -= m
        succ.append(k)
    succ = np.array(succ)
    lo, hi = wilson_interval(succ, samples)
    return dict(d=np.array(dims), p=succ / samples, low=lo, high=hi, successes=succ, samples=samples, kappa=kappa)


def _union_q(ds) -> np.ndarray:
    """``q(d) = P(<v, w> >= |v|^2) = E[Phi_bar(|v|)]``, ``v, w ~ N(0, I_d)`` independent, for each d.

    Composite Simpson rule on ``r in [0, sqrt(d) + 12]`` (the chi_d density is negligible beyond),
    vectorised over ``d``; agrees with adaptive quadrature to ~1e-12 (tested).
    """
    ds = np.asarray(ds, dtype=float)
    u = np.linspace(0.0, 1.0, 4001)
    hi = np.sqrt(ds) + 12.0
    r = hi[:, None] * u[None, :]
    f = stats.norm.sf(r) * np.exp(stats.chi.logpdf(np.maximum(r, 1e-300), ds[:, None]))
    w = np.ones_like(u)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return (f * w).sum(axis=1) * hi * (u[1] - u[0]) / 3.0


def owns_cell_union_bound(d, kappa: int) -> np.ndarray:
    """Union-bound lower estimate ``1 - kappa (kappa - 1) q(d)`` of the Remark 4.6 probability for ``B = I_d``.

    ``q(d) = P(<v, w> >= |v|^2) = E[ Phi_bar(|v|) ]`` for independent ``v, w ~ N(0, I_d)``
    (given ``v``, ``<v, w> ~ N(0, |v|^2)``), computed by quadrature over the chi law of ``|v|``.
    Clipped at 0.
    """
    kappa = V.positive_int("kappa", kappa, minimum=2)
    ds = np.atleast_1d(np.asarray(d))
    for k in ds.ravel():
        V.positive_int("d", int(k))
    q = _union_q(ds.ravel())
    out = np.clip(1.0 - kappa * (kappa - 1) * q, 0.0, 1.0)
    return out if np.ndim(d) else float(out[0])


# ============================================================================ Theorem 4.8, the ODE limit
def _ode_leaders(x0, B):
    x, single = _batch(x0)
    Bm = V.square_matrix("B", B, x.shape[-1])
    S = (x @ Bm.T) @ np.swapaxes(x, -1, -2)
    srt = np.sort(S, axis=-1)
    scale = np.abs(S).max(axis=(-1, -2))[..., None]
    if np.any(srt[..., -1] - srt[..., -2] <= 1e-12 * scale):
        raise ValueError("x0 must be generic: some token has tied leaders (Theorem 4.8 needs genericity)")
    L = S.argmax(axis=-1)
    for r in range(x.shape[0]):
        hv = _hull_vertex_indices(x[r])
        if np.any(L[r, hv] != hv):
            raise ValueError("x0 must satisfy the genericity conditions of Theorem 4.2: some vertex of "
                             "the hull does not own its cell (it is not its own leader)")
    return x, single, L


def _hull_vertex_indices(P):
    """Indices of the tokens that are vertices of their convex hull (one system, (n, d))."""
    from scipy.spatial import ConvexHull, QhullError

    if P.shape[1] == 1:
        return np.unique([P[:, 0].argmin(), P[:, 0].argmax()])
    try:
        return np.sort(ConvexHull(P).vertices)
    except QhullError as exc:
        raise ValueError(f"x0 must span R^d (its hull is degenerate): {exc}".splitlines()[0]) from None


def ode_solution(x0, B, t) -> np.ndarray:
    """Explicit solution ``x_i(t) = e^{-t} x_i^0 + (1 - e^{-t}) v_sigma(i)`` of the hardmax ODE (Theorem 4.8).

    ``v_sigma(i)`` is the leader token of ``x_i^0`` (a vertex owning its cell).

    Parameters
    ----------
    x0 : (n, d) or (R, n, d)
    B : (d, d)
    t : float or (T,) array of times >= 0

    Returns
    -------
    array (T, ...) of x0's shape (or x0's shape for scalar t).

    Raises
    ------
    ValueError
        Non-generic ``x0`` (a tie, or a leader that is not its own leader), negative times.
    """
    x, single, L = _ode_leaders(x0, B)
    tt = np.atleast_1d(np.asarray(t, dtype=float))
    if np.any(tt < 0) or not np.all(np.isfinite(tt)):
        raise ValueError("t must be finite and >= 0")
    v = np.take_along_axis(x, L[..., None], axis=-2)
    e = np.exp(-tt)[:, None, None, None]
    out = e * x[None] + (1 - e) * v[None]
    if single:
        out = out[:, 0]
    return out if np.ndim(t) else out[0]


def euler_error(x0, B, dts, T: float = 1.0) -> dict:
    """Error of (SA-inf) with ``gamma = dt`` (the Euler scheme of the hardmax ODE) against Theorem 4.8.

    For each ``dt`` with ``T / dt`` an integer, runs ``T/dt`` steps and records the sup-norm error
    ``max_i |x_i^k - x_i(k dt)|`` at ``t = T`` and its maximum over the grid ``k dt in [0, T]``.
    The leading term of the error at time t is ``-(t/2) e^{-t} dt (x_i^0 - v_sigma(i))``.

    Returns
    -------
    dict with ``dt``, ``err_T``, ``err_sup``, ``leading_T`` (``(T/2) e^{-T} max_i |x_i^0 - v|``),
    ``leading_sup`` (``e^{-1}/2 max_i |x_i^0 - v|`` if ``T >= 1`` else the value at T).
    """
    x, _, L = _ode_leaders(x0, B)
    Bm = np.asarray(B, dtype=float)
    T = V.real_scalar("T", T, low=0.0, low_open=True)
    dts = np.asarray(dts, dtype=float)
    if np.any(dts <= 0) or np.any(dts >= 1):
        raise ValueError("dts must lie in (0, 1) (gamma = dt is a step size)")
    steps = np.rint(T / dts).astype(int)
    if np.any(np.abs(steps * dts - T) > 1e-9 * T):
        raise ValueError("each dt must divide T (T / dt an integer)")
    v = np.take_along_axis(x, L[..., None], axis=-2)
    amp = np.linalg.norm(x - v, axis=-1).max()
    eT, es = [], []
    for dt, N in zip(dts, steps):
        res = D.simulate(x, D.Hardmax(Bm, float(dt)), int(N), trajectory=True)
        times = res.times * dt
        exact = ode_solution(x, Bm, times)
        err = np.linalg.norm(res.trajectory - exact, axis=-1).max(axis=(-1, -2))
        eT.append(err[-1])
        es.append(err.max())
    tpk = min(T, 1.0)
    return dict(dt=dts, err_T=np.array(eT), err_sup=np.array(es), T=T,
                leading_T=0.5 * T * np.exp(-T) * amp, leading_sup=0.5 * tpk * np.exp(-tpk) * amp, amplitude=amp)


def ode_continuity(x0, B, deltas, T: float = 3.0, dt: float = 1e-3, seed=0, direction=None) -> dict:
    """Continuous dependence of the hardmax ODE on its initial data (Theorem 4.8), measured with Euler.

    For each size ``delta``, perturbs ``x0`` by ``delta * u`` (``u`` a fixed random direction,
    normalised so that ``max_i |u_i| = 1``), integrates both problems by (SA-inf) with
    ``gamma = dt`` up to ``T`` and records ``sup_{t <= T} max_i |x_i(t) - x~_i(t)|``. While the
    perturbed data stay generic with the same cells this distance is ``delta`` (the solution
    map is 1-Lipschitz: ``x - x~ = e^{-t}(x0 - x~0)``, plus the vertex shift when a vertex
    moves); once a token crosses a cell boundary it jumps to ``O(1)``.

    Returns
    -------
    dict with ``delta``, ``sup_dist``, ``same_cells`` (bool per delta), ``direction``.
    """
    x, single, L = _ode_leaders(x0, B)
    Bm = np.asarray(B, dtype=float)
    deltas = np.asarray(deltas, dtype=float)
    if np.any(deltas < 0):
        raise ValueError("deltas must be >= 0")
    if direction is None:
        u = V.rng("seed", seed).normal(size=x.shape)
    else:
        u = V.as_float_array("direction", direction).reshape(x.shape)
    u = u / np.linalg.norm(u, axis=-1).max()
    N = int(round(T / dt))
    base = D.simulate(x, D.Hardmax(Bm, dt), N, trajectory=True).trajectory
    out, same = [], []
    for dl in deltas:
        y = x + dl * u
        S = (y @ Bm.T) @ np.swapaxes(y, -1, -2)
        same.append(bool(np.all(S.argmax(axis=-1) == L)))
        tr = D.simulate(y, D.Hardmax(Bm, dt), N, trajectory=True).trajectory
        out.append(np.linalg.norm(tr - base, axis=-1).max())
    return dict(delta=deltas, sup_dist=np.array(out), same_cells=np.array(same), direction=u[0] if single else u,
                T=T, dt=dt)
