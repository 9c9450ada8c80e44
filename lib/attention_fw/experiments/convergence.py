"""How fast does (SA-inf) with B = -B_* converge? The experiments of Section 3 (Theorem 3.1 and its rates).

Every function here runs an experiment and returns one :class:`~attention_fw.results.Result`
(numpy arrays under named entries), vectorised over ``R`` independent systems of tokens and
run by :func:`attention_fw.model.dynamics.simulate` with recorders; the figures are
drawn by :mod:`attention_fw.plot.convergence`. The dynamics itself is
:func:`attention_fw.model.dynamics.hardmax_step` (SA-inf); nothing here re-implements it,
except :func:`exact_hardmax_trajectory`, which redoes (SA-inf) in exact rational
arithmetic for the counterexample to Theorem 3.1.

Contents (numbers as in the paper; "unverified" where the book could not confirm the number):

* Theorem 3.1 and its failure (errata E1-E3): :func:`exact_hardmax_trajectory`,
  :func:`thm31_counterexample`, :func:`symmetric_cloud`, :func:`shifted_cloud`,
  :func:`thm31_ratio`.
* Rates of Section 3: :func:`section3_rates` (energy, Frank-Wolfe gap and primal
  gap against the *current* hull), :func:`fixed_hull_fw` (classical Frank-Wolfe
  over a *fixed* hull, open-loop ``2/(t+2)`` or exact line search),
  :func:`linear_rate_bound`, :func:`loglog_slope`.
* Section 4 (``B > 0``: Theorem 4.2, Remark 4.6, Theorem 4.8) is in :mod:`attention_fw.experiments.vertex_limits`.

Time convention: ``t = 0`` is the first step (``x^{t+1}`` is made with ``gamma^t``).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from .. import _validate as V
from ..model import dynamics as D
from ..model import frank_wolfe as F
from ..geometry.polytope import diameter, facets, origin_distance_2d
from .._validate import SeedLike
from ..results import Result
from ..model.schedules import Schedule, get_schedule

__all__ = [
    "exact_hardmax_trajectory", "thm31_counterexample", "symmetric_cloud", "shifted_cloud",
    "thm31_ratio", "thm31_shifted", "section3_rates", "rate_slopes", "fixed_vs_current_slopes",
    "linear_contrast_rates", "FixedHullFrankWolfe", "fixed_hull_fw", "linear_rate_bound",
    "loglog_slope", "local_loglog_slopes", "supported_decimals", "log_times",
]

# ============================================================================ small helpers
def log_times(steps: int, num: int = 200) -> np.ndarray:
    """About ``num`` integer times in ``[0, steps]``, log-spaced (all small times kept), sorted, unique.

    Examples
    --------
    >>> # 0, then 1 to 1000 by ratios close to 1000**(1/4) = 5.6
    >>> log_times(1000, 5).tolist()
    [0, 1, 6, 32, 178, 1000]
    """
    steps = V.positive_int("steps", steps)
    num = V.positive_int("num", num, minimum=2)
    t = np.unique(np.round(np.geomspace(1, steps, num)).astype(int))
    return np.unique(np.concatenate([[0], t, [steps]]))


def loglog_slope(t: npt.ArrayLike, y: npt.ArrayLike, t_min: float | None = None, t_max: float | None = None) -> float:
    """Least-squares slope of ``log y`` against ``log t`` over ``t_min <= t <= t_max`` (positive ``y`` only).

    Points with ``t <= 0`` or ``y <= 0`` have no logarithm and are left out (a gap that is
    exactly zero, say); every other point in the window is used.

    Parameters
    ----------
    t : array (T,)
        Finite times.
    y : array (T,)
        Finite values, one per time.
    t_min : float, optional
        Start of the window of the fit (inclusive).
    t_max : float, optional
        End of the window of the fit (inclusive).

    Raises
    ------
    ValueError
        ``t`` or ``y`` not one-dimensional, of different lengths, or holding NaN or inf
        (a non-finite value is an upstream failure, never silently dropped); fewer than two
        usable points.

    Examples
    --------
    The exponent of a power law ``y = c t^p`` is ``p``; a zero is left out of the fit:

    >>> t = np.arange(1.0, 11.0)
    >>> (
    ...     round(loglog_slope(t, 3.0 / t**2), 9),
    ...     round(loglog_slope(t, np.where(t == 5, 0.0, t)), 9),
    ... )
    (-2.0, 1.0)
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


def local_loglog_slopes(t: npt.ArrayLike, y: npt.ArrayLike, t_min: float, factor: float = 4.0,
                        num: int = 8) -> Result:
    """Log-log slopes of ``y`` against ``t`` on moving windows ``[a, factor a]``, ``a`` from ``t_min``
    to ``t_max / factor`` (``num`` log-spaced starts; one window ``[t_min, t_max]`` if the range is
    shorter than ``factor``).

    A power law has one slope on every window; a slope fitted over a whole range is only an
    average of these, and their spread says how many digits of it the data support
    (:func:`supported_decimals`). Returns a Result with ``start``, ``stop`` and ``slope`` (arrays,
    one entry per window; a window with fewer than two positive points is left out).

    Examples
    --------
    >>> t = np.arange(1.0, 10001.0)
    >>> loc = local_loglog_slopes(t, 3.0 / t**2 + 1.0 / t**3, 10)  # fading correction
    >>> rising = bool(np.all(np.diff(loc.slope) > 0))              # rising to -2
    >>> np.round(loc.slope[[0, -1]], 3).tolist(), rising
    ([-2.016, -2.0], True)
    """
    t = V.as_float_array("t", t, ndim=1)
    y = V.as_float_array("y", y, ndim=1)
    factor = V.real_scalar("factor", factor)
    if not factor > 1:
        raise ValueError(f"factor must be > 1, got {factor}")
    num = V.positive_int("num", num)
    t_min = V.real_scalar("t_min", t_min)
    t_max = float(t[(t > 0) & (y > 0)].max()) if np.any((t > 0) & (y > 0)) else t_min
    if t_max / factor <= t_min:
        starts = np.array([t_min])
        stops = np.array([t_max])
    else:
        starts = np.geomspace(t_min, t_max / factor, num)
        stops = starts * factor
    out_a, out_b, out_s = [], [], []
    for a, b in zip(starts, stops):
        try:
            out_s.append(loglog_slope(t, y, a, b))
        except ValueError:
            continue
        out_a.append(float(a))
        out_b.append(float(b))
    return Result(start=np.array(out_a), stop=np.array(out_b), slope=np.array(out_s))


def supported_decimals(values: npt.ArrayLike, most: int = 3) -> int:
    """Decimals to quote a quantity whose estimates (local slopes, say) spread over ``values``:
    the unit of the last digit is at least half their range (at most ``most`` decimals).

    Examples
    --------
    >>> supported_decimals([-1.99, -2.19]), supported_decimals([-1.62, -2.07])
    (1, 0)
    >>> supported_decimals([1.5, 1.5])
    3
    """
    v = V.as_float_array("values", values, ndim=1)
    if v.size == 0:
        raise ValueError("values must hold at least one number")
    half = (v.max() - v.min()) / 2
    if half <= 10.0 ** -most:
        return most
    return int(min(most, max(0, np.floor(-np.log10(half)))))


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


def exact_hardmax_trajectory(x0: Sequence[Any], steps: int, *, gamma: Callable[[int], Fraction] | None = None,
                             Bstar: Any = 1) -> list[list[tuple[Fraction, ...]]]:
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
    gamma : callable ``t -> Fraction``, optional, keyword-only
        Step sizes; default ``2/(t+2)`` exactly (Theorem 3.1).
    Bstar : number or d x d nested sequence, keyword-only
        ``B_*`` (symmetric positive semidefinite is the setting of Section 3; the function does not test it).

    Returns
    -------
    list of ``steps + 1`` lists of n tuples of Fractions.

    Raises
    ------
    TypeError, ValueError
        Non-numeric or non-finite entries, ragged tokens, a step outside (0, 1].

    Examples
    --------
    The counterexample to Theorem 3.1, ``x^0 = (3, -1)`` with ``gamma^t = 2/(t+2)``:

    >>> traj = exact_hardmax_trajectory([3, -1], 3)
    >>> # gamma^0 = 1 swaps; from t = 2 on, 1/3 is its own oracle
    >>> [[str(x[0]) for x in xt] for xt in traj]
    [['3', '-1'], ['-1', '3'], ['5/3', '1/3'], ['1', '1/3']]
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
        Bm = [[b if k == j else Fraction(0) for j in range(d)] for k in range(d)]
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
        Bx = [tuple(sum(Bm[k][j] * xi[j] for j in range(d)) for k in range(d)) for xi in x]
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


def thm31_counterexample(x0: Sequence[Any] = (3, -1), steps: int = 700) -> Result:
    """Theorem 3.1 against its counterexample (errata E2), exactly: ``d = 1``, ``B_* = 1``, ``gamma^t = 2/(t+2)``.

    For each ``t = 0, ..., steps-1`` compares ``J(x_i^{t+1}) = (x_i^{t+1})^2 / 2`` with the
    printed bound ``2/(t+1) * lambda_max(B_*) * d(K^0)^2`` (here ``lambda_max = 1``), all in
    Fractions.

    Returns
    -------
    Result
        Entries ``trajectory`` (list of Fraction tuples), ``t`` (array 0..steps-1), ``J``
        (list of per-token Fraction lists, ``J[t][i] = J(x_i^{t+1})``), ``bound`` (list of
        Fractions), ``first_violation`` (first t with ``max_i J > bound``, or None),
        ``first_violation_token`` (list, per token), ``equality_times`` (list per token of
        the t with ``J == bound``), ``plateau`` (``J`` of the lowest token at the end),
        ``limit`` (final position of the lowest token), ``lowest_token`` (its index),
        ``diameter`` (``d(K^0)``).

    Raises
    ------
    ValueError
        ``0`` not in the initial hull (the theorem's hypothesis), fewer than 2 steps.

    Examples
    --------
    The token stuck at ``1/3`` keeps ``J = 1/18``, which the bound ``32/(t+1)`` reaches at
    ``t = 575``; the other token, still above ``1/3``, is then strictly above the bound:

    >>> res = thm31_counterexample((3, -1), steps=600)
    >>> res.first_violation, str(res.limit), str(res.plateau), str(res.bound[575])
    (575, '1/3', '1/18', '1/18')
    """
    steps = V.positive_int("steps", steps, minimum=2)
    traj = exact_hardmax_trajectory(list(x0), steps, Bstar=1)
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
    return Result(trajectory=traj, t=np.arange(steps), J=J, bound=bound, first_violation=first,
                first_violation_token=first_tok, equality_times=eq, plateau=J[-1][low],
                limit=last[low][0], diameter=diam, lowest_token=low)


# ============================================================================ Section 3, clouds
def symmetric_cloud(R: int, m: int, d: int = 2, *, rng: SeedLike) -> np.ndarray:
    """``R`` centrally symmetric clouds ``{x_1, ..., x_m, -x_1, ..., -x_m}`` of ``n = 2m`` Gaussian tokens.

    Central symmetry is preserved by (SA-inf) with ``B = -B_*`` (the oracle of ``-x`` is ``-s``),
    so ``0 in K^t`` for all ``t``, the hypothesis the proof of Theorem 3.1 really uses.

    Returns
    -------
    array (R, 2m, d)

    Examples
    --------
    >>> x = symmetric_cloud(2, 3, rng=0)
    >>> x.shape, bool(np.array_equal(x[:, 3:], -x[:, :3]))
    ((2, 6, 2), True)
    """
    R = V.positive_int("R", R)
    m = V.positive_int("m", m)
    d = V.positive_int("d", d)
    rng = V.rng("rng", rng)
    x = rng.normal(size=(R, m, d))
    return np.concatenate([x, -x], axis=1)


def shifted_cloud(R: int, n: int, d: int = 2, *, rng: SeedLike, concentration: float = 0.3) -> np.ndarray:
    """``R`` Gaussian clouds shifted so that ``0`` lies in ``K^0`` but, typically, off-centre.

    Each cloud is translated by ``-sum_j w_j x_j`` with Dirichlet(``concentration``) weights
    ``w``: the origin becomes that convex combination of the tokens, hence ``0 in K^0`` (the
    hypothesis of Theorem 3.1), and small ``concentration`` puts it near the boundary.

    Returns
    -------
    array (R, n, d)

    Examples
    --------
    >>> from attention_fw.geometry.polytope import origin_in_hull_2d
    >>> origin_in_hull_2d(shifted_cloud(4, 5, rng=0)).tolist()
    [True, True, True, True]
    """
    R = V.positive_int("R", R)
    n = V.positive_int("n", n, minimum=2)
    d = V.positive_int("d", d)
    a = V.real_scalar("concentration", concentration, low=0.0, low_open=True)
    rng = V.rng("rng", rng)
    x = rng.normal(size=(R, n, d))
    w = rng.dirichlet(np.full(n, a), size=R)
    return x - np.einsum("rn,rnd->rd", w, x)[:, None, :]


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


class _Symmetrised(D.Rule):
    """A rule followed by the exact-arithmetic bookkeeping of symmetric clouds (:func:`_resymmetrise`)."""

    def __init__(self, rule):
        self.rule = rule

    def step(self, x, t, systems=None):
        return _resymmetrise(self.rule.step(x, t, systems), x)


def _hardmax_rule(schedule, B, symmetric):
    rule = D.Hardmax(schedule, B)
    return _Symmetrised(rule) if symmetric else rule


def thm31_ratio(x0: npt.ArrayLike, Bstar: npt.ArrayLike, steps: int, times: npt.ArrayLike | None = None,
                symmetric: bool = False) -> Result:
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
    Result
        Entries ``t`` (T,), ``ratio`` (T, R), ``origin_dist`` (T, R) (distance from 0 to
        ``K^{t+1}`` divided by ``d(K^0)``; planar data only, else None),
        ``first_violation`` (R,) (first t, recorded or not, with ratio > 2, -1 if none),
        ``final`` (R, n, d), ``final_diameter`` (R,), ``limit`` (R, d) (token mean at the
        end), ``lam``, ``diam0`` (R,).

    Examples
    --------
    >>> res = thm31_ratio(symmetric_cloud(3, 4, rng=0), np.eye(2), 50, symmetric=True)
    >>> res.first_violation.tolist(), bool(res.ratio.max() <= 2)
    ([-1, -1, -1], True)
    """
    x, _ = V.batch("x0", x0)
    d = x.shape[-1]
    Bs = V.psd_matrix("Bstar", Bstar, d)
    steps = V.positive_int("steps", steps)
    times = log_times(steps) if times is None else np.asarray(times, dtype=int)
    times = times[times < steps]
    lam = float(np.linalg.eigvalsh(Bs).max())
    diam0 = diameter(x)
    planar = d == 2
    if symmetric:
        _check_symmetric(x)

    def ratio(x, t):                        # simulate's t is the layer t + 1 of the theorem
        return t * F.energy(x, Bs).max(axis=-1) / (lam * diam0 ** 2)

    def record(x, t):
        out = {"ratio": ratio(x, t)}
        if planar:
            out["origin_dist"] = origin_distance_2d(x) / diam0
        return out
    tset = sorted(set(int(t) for t in times))
    rec = D.FunctionRecorder("rec", record, times=[t + 1 for t in tset])
    first = D.FirstTime("first", lambda x, t: ratio(x, t) > 2.0)
    res = D.simulate(x, _hardmax_rule("fw", -Bs, symmetric), steps, [rec, first])
    got = res.records["rec"]
    ft = res.records["first"]
    x = res.x
    return Result(t=np.array(tset), ratio=got["ratio"], origin_dist=got["origin_dist"] if planar else None,
                  first_violation=np.where(ft > 0, ft - 1, -1), final=x, final_diameter=diameter(x),
                  limit=x.mean(axis=-2), lam=lam, diam0=diam0)


def thm31_shifted(ns: Iterable[int], R: int, steps: int, Bstar: npt.ArrayLike | None = None, *, rng: SeedLike,
                  times: npt.ArrayLike | None = None) -> Result:
    """:func:`thm31_ratio` over shifted clouds of several sizes ``n`` (``R`` clouds each), pooled.

    The clouds of size ``ns[k]`` are drawn from the ``k``-th stream spawned from ``rng``, so the
    same seed gives the same clouds whether passed as an int, a SeedSequence or a Generator.
    Returns the entries of :func:`thm31_ratio` with the systems of all sizes concatenated
    (``final`` is dropped, its shape depends on ``n``), plus ``n`` (per system) and ``initial``
    (a list of the clouds, one ``(n, 2)`` array per system, to follow some of them further).

    Examples
    --------
    >>> a = thm31_shifted([3, 4], 2, 20, rng=5)
    >>> b = thm31_shifted([3, 4], 2, 20, rng=np.random.SeedSequence(5))
    >>> a.n.tolist(), bool(np.array_equal(a.ratio, b.ratio))
    ([3, 3, 4, 4], True)
    """
    ns = [V.positive_int("ns", int(n), minimum=2) for n in ns]
    if not ns:
        raise ValueError("ns must list at least one cloud size")
    Bs = np.eye(2) if Bstar is None else Bstar
    streams = V.rng("rng", rng).spawn(len(ns))
    clouds = [shifted_cloud(R, n, 2, rng=g) for n, g in zip(ns, streams)]
    parts = [thm31_ratio(x, Bs, steps, times=times) for x in clouds]
    out = Result(t=parts[0].t, lam=parts[0].lam, n=np.repeat(ns, R), initial=[c for x in clouds for c in x])
    for k in ("ratio", "origin_dist"):
        out[k] = np.concatenate([q[k] for q in parts], axis=1)
    for k in ("first_violation", "final_diameter", "limit", "diam0"):
        out[k] = np.concatenate([q[k] for q in parts], axis=0)
    return out


def section3_rates(x0: npt.ArrayLike, Bstar: npt.ArrayLike, steps: int, *, schedule: Schedule | float | str = "fw",
                   times: npt.ArrayLike | None = None, symmetric: bool = False) -> Result:
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
    Result
        The entries above as arrays (T, R), plus ``t`` (T,), ``positions`` (T, R, n, d),
        ``final`` (R, n, d), ``diam0`` (R,), ``lam`` (float).

    Examples
    --------
    >>> res = section3_rates(
    ...     symmetric_cloud(2, 3, rng=0),
    ...     np.eye(2),
    ...     100,
    ...     times=[0, 10, 100],
    ...     symmetric=True,
    ... )
    >>> res.t.tolist(), bool(np.all(np.diff(res.J, axis=0) <= 0))
    ([0, 10, 100], True)
    """
    x, _ = V.batch("x0", x0)
    d = x.shape[-1]
    Bs = V.psd_matrix("Bstar", Bstar, d)
    steps = V.positive_int("steps", steps)
    times = log_times(steps) if times is None else np.asarray(times, dtype=int)
    tset = sorted(set(int(t) for t in times if t <= steps))
    min0 = F.min_energy_over_hull(x, Bs)
    diam0 = diameter(x)
    if symmetric:
        _check_symmetric(x)

    def record(x, t):
        J = F.energy(x, Bs).max(axis=-1)
        return {"positions": x, "J": J, "fw_gap": F.fw_gap(x, x @ Bs, x).max(axis=-1),
                "primal_current": J - F.min_energy_over_hull(x, Bs), "primal_initial": J - min0,
                "diameter": diameter(x)}
    rec = D.FunctionRecorder("rates", record, times=tset)
    res = D.simulate(x, _hardmax_rule(get_schedule(schedule), -Bs, symmetric), steps, [rec])
    return Result(res.records["rates"], t=np.array(tset), final=res.x, diam0=diam0,
                  lam=float(np.linalg.eigvalsh(Bs).max()))


# ============================================================================ classical Frank-Wolfe, fixed hull
class FixedHullFrankWolfe(D.Rule):
    """Classical Frank-Wolfe for ``min_{y in conv(points)} 1/2 <B_* y, y>``, one iterate per token.

    ``s = argmin_{y in K} <B_* x, y>``, ``x <- x + gamma (s - x)`` over the FIXED hull
    ``K = conv(points)`` (points (R, m, d)); ``rule`` is ``"line-search"`` (exact line search
    on the quadratic) or any schedule spec.

    Examples
    --------
    From ``x = (0.5, 0.2)`` in the square ``[-1, 1]^2`` with ``B_* = I`` the oracle is the
    corner ``s = (-1, -1)``. The open loop's first step (``gamma^0 = 1``) jumps to it; exact
    line search stops where the step ends orthogonal to the segment ``[x, s]``:

    >>> P = np.array([[[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]]])
    >>> x = np.array([[[0.5, 0.2]]])
    >>> FixedHullFrankWolfe(P, np.eye(2), "fw").step(x, 0).tolist()
    [[[-1.0, -1.0]]]
    >>> y = FixedHullFrankWolfe(P, np.eye(2), "line-search").step(x, 0)[0, 0]
    >>> float(np.round(y @ (P[0, 2] - x[0, 0]), 12)) + 0.0    # <B_* y, s - x> = 0
    0.0
    """

    def __init__(self, points: np.ndarray, Bstar: np.ndarray, rule: Schedule | float | str = "fw") -> None:
        self.P = points
        self.Bs = Bstar
        self.line = isinstance(rule, str) and rule == "line-search"
        self.schedule = None if self.line else get_schedule(rule)

    def step(self, x: np.ndarray, t: int, systems: np.ndarray | None = None) -> np.ndarray:
        P = self.P if systems is None else self.P[systems]
        grad = x @ self.Bs
        e = F.lmo(P, grad) - x
        if self.line:
            num = -np.einsum("...d,...d->...", grad, e)
            den = np.einsum("...d,de,...e->...", e, self.Bs, e)
            g = np.clip(np.divide(num, den, out=np.zeros_like(num), where=den > 1e-300), 0.0, 1.0)[..., None]
        else:
            g = self.schedule(t)  # type: ignore[misc]  # None only with the line search
        return x + g * e


def fixed_hull_fw(x0: npt.ArrayLike, Bstar: npt.ArrayLike, steps: int, points: npt.ArrayLike | None = None,
                  rule: Schedule | float | str = "fw", times: npt.ArrayLike | None = None) -> Result:
    """Classical Frank-Wolfe for ``min_{y in K} 1/2 <B_* y, y>`` over a FIXED hull ``K``, from every token.

    Each token is an independent Frank-Wolfe iterate (:class:`FixedHullFrankWolfe`) with
    ``K = conv(points)`` fixed (default ``points = x0``, i.e. ``K = K^0``), unlike (SA-inf)
    whose hull ``K^t`` is the hull of the current tokens.

    Parameters
    ----------
    x0 : (n, d) or (R, n, d)
        The initial tokens, one Frank-Wolfe iterate each.
    Bstar : (d, d) symmetric positive semidefinite
    steps : int
    points : (m, d) or (R, m, d), optional
        The points whose hull is ``K`` (default: ``x0``, i.e. ``K = K^0``).
    rule : "fw", "line-search" or any schedule spec
        ``"fw"``: the open loop ``2/(t+2)``; ``"line-search"``: exact line search on the
        quadratic, ``gamma = clip(<B_* x, x - s> / <B_*(s - x), s - x>, 0, 1)``; or any
        schedule spec.
    times : int array, optional
        The ``t`` at which to record (default: :func:`log_times`).

    Returns
    -------
    Result
        Entries ``t`` (T,), ``J`` (T, R) (max over tokens of ``J``), ``primal`` (T, R)
        (``max_i J(x_i) - min_K J``), ``fw_gap`` (T, R), ``positions`` (T, R, n, d),
        ``final`` (R, n, d), ``min_energy`` (R,).

    Examples
    --------
    With 0 inside the fixed hull, exact line search converges linearly, the open loop as 1/t:

    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> hexagon = regular_polygon(6)[None] + 0.2
    >>> line = fixed_hull_fw(
    ...     hexagon, np.diag([2.0, 1.0]), 40, rule="line-search", times=[0, 40]
    ... )
    >>> open_loop = fixed_hull_fw(
    ...     hexagon, np.diag([2.0, 1.0]), 40, rule="fw", times=[0, 40]
    ... )
    >>> bool(line.primal[-1, 0] < 1e-50 < open_loop.primal[-1, 0] < 1e-2)
    True
    """
    x, _ = V.batch("x0", x0)
    d = x.shape[-1]
    Bs = V.psd_matrix("Bstar", Bstar, d)
    steps = V.positive_int("steps", steps)
    P = x.copy() if points is None else V.batch("points", points)[0]
    if P.shape[0] != x.shape[0] or P.shape[-1] != d:
        raise ValueError(f"points must have shape (R, m, {d}) with R = {x.shape[0]}, got {P.shape}")
    times = log_times(steps) if times is None else np.asarray(times, dtype=int)
    tset = sorted(set(int(t) for t in times if t <= steps))
    fmin = F.min_energy_over_hull(P, Bs)

    def record(x, t):
        J = F.energy(x, Bs).max(axis=-1)
        return {"positions": x, "J": J, "primal": J - fmin, "fw_gap": F.fw_gap(x, x @ Bs, P).max(axis=-1)}
    rec = D.FunctionRecorder("fw", record, times=tset)
    res = D.simulate(x, FixedHullFrankWolfe(P, Bs, rule), steps, [rec])
    return Result(res.records["fw"], t=np.array(tset), final=res.x, min_energy=fmin)


def linear_rate_bound(points: npt.ArrayLike, Bstar: npt.ArrayLike) -> Result:
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
    Result with ``rho``, ``r`` (distance from 0 to the boundary), ``D``, ``mu``, ``L``.

    Raises
    ------
    ValueError
        Non-planar points, 0 not in the interior, ``B_*`` not positive definite.

    Examples
    --------
    The regular hexagon of circumradius 1 has ``r = cos(pi/6)`` and ``D = 2``; with
    ``B_* = I``, ``rho = 1 - (sqrt(3)/4)^2 = 13/16``:

    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> b = linear_rate_bound(regular_polygon(6), np.eye(2))
    >>> round(float(b.rho), 12), round(b.r, 6), b.D
    (0.8125, 0.866025, 2.0)
    """
    P = V.tokens("points", points, batched_ok=False)
    if P.shape[1] != 2:
        raise ValueError("points must be planar (d = 2)")
    Bs = V.psd_matrix("Bstar", Bstar, 2)
    w = np.linalg.eigvalsh(Bs)
    if w.min() <= 0:
        raise ValueError("Bstar must be positive definite for a linear rate")
    r = float(facets(P)[1].min())          # a x <= b inside, |a| = 1: distance from 0 is b
    if r <= 0:
        raise ValueError("points must have 0 in the interior of their hull")
    Dm = diameter(P)
    return Result(rho=1.0 - (w.min() / w.max()) * (r / Dm) ** 2, r=r, D=Dm, mu=float(w.min()), L=float(w.max()))


def rate_slopes(res: Mapping[str, Any], window: tuple[float | None, float | None] = (100, None)) -> Result:
    """Log-log slopes of the medians over clouds of ``J``, ``fw_gap`` and ``primal_current`` of :func:`section3_rates`.

    Clouds that collapse to one point in finitely many steps (their gaps are exactly 0) are
    left out. Zero medians inside ``window`` (t_min, t_max) are dropped from the fit (see
    :func:`loglog_slope`); a slope is None when fewer than two positive points are left.
    Returns a Result with the three slopes, ``collapsed`` (clouds left out) and ``systems``.

    Examples
    --------
    In the counterexample ``(3, -1)`` (see :func:`thm31_counterexample`) the energy plateaus at
    ``1/18`` while the gaps decay like ``x^t - 1/3 = 8/(t(t+1))``, the straight-line approach
    to the stuck token:

    >>> s = rate_slopes(section3_rates([[3.0], [-1.0]], [[1.0]], 400))
    >>> {k: round(s[k], 1) + 0.0 for k in ("J", "fw_gap", "primal_current")}, s.collapsed
    ({'J': 0.0, 'fw_gap': -2.0, 'primal_current': -2.0}, 0)
    """
    keep = res["diameter"][-1] > 0
    t = res["t"]
    lo, hi = window
    hi = t[-1] if hi is None else hi
    out = Result()
    for key in ("J", "fw_gap", "primal_current"):
        try:
            out[key] = loglog_slope(t, np.median(res[key][:, keep], axis=1), lo, hi)
        except ValueError:
            out[key] = None
    out.update(collapsed=int((~keep).sum()), systems=len(keep))
    return out


def fixed_vs_current_slopes(fixed: Mapping[str, Any], current: Mapping[str, Any], t_min: float = 100) -> Result:
    """Log-log slopes (``t >= t_min``) of the median primal gap of :func:`fixed_hull_fw` (``fixed``)
    and of :func:`section3_rates` on the current hull (``current``, clouds that collapse left out);
    None where no slope can be fitted (fewer than two positive points from ``t_min`` on, or every
    cloud collapsed).

    Examples
    --------
    The counterexample ``(3, -1)``: on the current hull the gap decays as ``8/(t(t+1))``
    (slope -2); over the fixed hull ``[-1, 3]`` classical Frank-Wolfe is faster than its
    ``O(1/t)`` guarantee:

    >>> x0 = [[3.0], [-1.0]]
    >>> sl = fixed_vs_current_slopes(
    ...     fixed_hull_fw(x0, [[1.0]], 400), section3_rates(x0, [[1.0]], 400)
    ... )
    >>> round(sl.current, 1), bool(sl.fixed < -1)
    (-2.0, True)
    """
    alive = current["diameter"][-1] > 0
    y_cur = np.median(current["primal_current"][:, alive], axis=1) if alive.any() else None
    return Result(fixed=_slope_if_fitted(fixed["t"], np.median(fixed["primal"], axis=1), t_min),
                  current=None if y_cur is None else _slope_if_fitted(current["t"], y_cur, t_min))


def _slope_if_fitted(t, y, t_min):
    """:func:`loglog_slope` from ``t_min`` on, or None when fewer than two points there have ``y > 0``
    (a run that ends at ``t_min``, a gap that reaches 0)."""
    t, y = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    if np.count_nonzero((t >= t_min) & (t > 0) & (y > 0)) < 2:
        return None
    return loglog_slope(t, y, t_min)


def linear_contrast_rates(open_loop: Mapping[str, Any], line: Mapping[str, Any]) -> Result:
    """Measured contraction factor of :func:`fixed_hull_fw` with exact line search (``line``, one
    system; fitted on ``log h^t`` while ``h^t > 1e-14 h^0``, the first 3 points left out) and the
    log-log slope (``t >= 10``) of its open-loop run (``open_loop``).

    Examples
    --------
    Every step of exact line search contracts the primal gap by at least ``rho`` of
    :func:`linear_rate_bound` (0 interior), so the fitted factor is at most ``rho``:

    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> hexagon, Bs = regular_polygon(6)[None] + 0.2, np.diag([2.0, 1.0])
    >>> line = fixed_hull_fw(hexagon, Bs, 30, rule="line-search", times=np.arange(31))
    >>> rates = linear_contrast_rates(fixed_hull_fw(hexagon, Bs, 200), line)
    >>> bool(rates.rate <= linear_rate_bound(hexagon[0], Bs).rho)
    True
    """
    h_ls = line["primal"][:, 0]
    ok = h_ls > 1e-14 * h_ls[0]
    rate = np.exp(np.polyfit(line["t"][ok][3:], np.log(h_ls[ok][3:]), 1)[0])
    return Result(rate=rate, slope_open_loop=loglog_slope(open_loop["t"], open_loop["primal"][:, 0], 10))
