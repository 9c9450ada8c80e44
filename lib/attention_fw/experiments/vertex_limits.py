"""Where do the tokens go when B > 0? Vertex limits (Theorem 4.2), the duality gap, Remark 4.6 and the ODE limit (Theorem 4.8).

Every function here runs an experiment and returns one :class:`~attention_fw.results.Result`,
vectorised over ``R`` independent systems and run by :func:`attention_fw.model.dynamics.simulate`;
the figures are drawn by :mod:`attention_fw.plot.convergence`. (Section 3, ``B = -B_*``, is
:mod:`attention_fw.experiments.convergence`.)

* Theorem 4.2 (erratum E4 of the book): :func:`vertex_convergence`; a vertex that does not
  own its cell: :func:`non_owning_run`.
* The duality-gap proposition of Section 4.1 (number unverified, plausibly Prop 4.1):
  :func:`duality_gap_check`.
* Remark 4.6: :func:`owns_cell_probability`, :func:`owns_cell_union_bound`,
  :func:`wilson_interval`.
* Theorem 4.8 (number not confirmed from the source): :func:`ode_solution`,
  :func:`euler_error`, :func:`ode_continuity`.

Time convention: ``t = 0`` is the first step (``x^{t+1}`` is made with ``gamma^t``).

Examples
--------
:data:`HALVING_LIMIT` is the limit of Theorem 4.2's factor ``prod_{tau < t} (1 - gamma^tau)``
for ``gamma^t = 2^{-t-1}``: a token led by a vertex stops short of it (erratum E4).

>>> from attention_fw.model.schedules import get_schedule
>>> bool(abs(get_schedule("halving").product(60) - HALVING_LIMIT) < 1e-15)
True
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np
import numpy.typing as npt
from scipy import stats

from .. import _validate as V
from ..model import dynamics as D
from .convergence import loglog_slope
from ..geometry.planar import cell_labels, owns_cell
from ..geometry.polytope import hull_area, hull_vertex_indices
from .._validate import SeedLike
from ..results import Result
from ..model.schedules import Schedule, get_schedule

__all__ = [
    "vertex_convergence", "non_owning_run", "duality_gap_check", "wilson_interval",
    "owns_cell_probability", "owns_cell_union_bound", "ode_solution", "euler_error", "ode_continuity",
    "HALVING_LIMIT",
]

HALVING_LIMIT = 0.28878809508660242
"""``prod_{k >= 1} (1 - 2^{-k})``: the factor Theorem 4.2 gives for ``gamma^t = 2^{-t-1}`` as ``t -> inf`` (E4)."""


# ============================================================================ Theorem 4.2
def vertex_convergence(vertices: npt.ArrayLike, interior: npt.ArrayLike, schedule: Schedule | float | str, B: npt.ArrayLike,
                       steps: int, *, tie_rtol: float = 0.0) -> Result:
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
    schedule : schedule spec
        See :func:`attention_fw.model.schedules.get_schedule`.
    steps : int
    tie_rtol : float
        Tie tolerance passed to :func:`attention_fw.model.dynamics.hardmax_step`. Default 0 (exact
        comparisons): the data are generic, so there is no tie in exact arithmetic, while the
        library's default tolerance (``8 d`` machine epsilons relative to the largest score,
        :data:`attention_fw.model.dynamics.TIE_RTOL`) would merge a token with its vertex once
        their scores agree to that precision (the token and the vertex then move to their
        average), which stalls the measured distance near 1e-15 relative instead of following
        the closed form down to the smallest doubles.

    Returns
    -------
    Result
        Entries ``t`` (steps+1,), ``dist`` (steps+1, R, n) measured ``|x_i^t - v_sigma(i)|``,
        ``closed`` (same) the closed form, ``product`` (steps+1,), ``sigma`` (R, n),
        ``labels_constant`` (R,) (the cell of every token never changes),
        ``vertices_fixed`` (R,) (max vertex displacement), ``trajectory`` (steps+1, R, n, d).

    Examples
    --------
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> res = vertex_convergence(
    ...     regular_polygon(5), [[0.1, 0.2], [-0.3, 0.1]], "halving", np.eye(2), 30
    ... )
    >>> (
    ...     bool(np.allclose(res.dist, res.closed, rtol=1e-9, atol=0)),
    ...     res.labels_constant.tolist(),
    ... )
    (True, [True])
    """
    Vt, single = V.batch("x0", vertices)
    X, _ = V.batch("x0", interior)
    if X.shape[0] != Vt.shape[0] or X.shape[-1] != Vt.shape[-1]:
        raise ValueError(f"interior must match vertices in R and d, got {X.shape} and {Vt.shape}")
    d = Vt.shape[-1]
    Bm = V.square_matrix("B", B, d)
    steps = V.positive_int("steps", steps)
    sched = get_schedule(schedule)
    k = Vt.shape[1]
    x = np.concatenate([Vt, X], axis=1)
    sigma = cell_labels(x, Vt, Bm)
    target = np.take_along_axis(Vt, sigma[..., None], axis=1)
    d0 = np.linalg.norm(x - target, axis=-1)
    same = D.FunctionRecorder("same", lambda x, t: np.all(cell_labels(x, x[:, :k], Bm) == sigma, axis=-1))
    res = D.simulate(x, D.Hardmax(sched, Bm, tie_rtol=tie_rtol), steps, [same], trajectory=True)
    traj = res.trajectory
    dist = np.linalg.norm(traj - target[None], axis=-1)
    prod = np.asarray(sched.product(np.arange(steps + 1)))
    return Result(t=np.arange(steps + 1), dist=dist, closed=prod[:, None, None] * d0[None], product=prod,
                  sigma=sigma, labels_constant=res.records["same"].all(axis=0),
                  vertices_fixed=np.abs(traj[:, :, :k] - Vt[None]).max(axis=(0, 2, 3)), trajectory=traj)


def non_owning_run(vertices: npt.ArrayLike, interior: npt.ArrayLike, gamma: float, B: npt.ArrayLike, steps: int) -> Result:
    """(SA-inf) with constant step from a polygon some of whose vertices do NOT own their cells.

    A vertex ``v_j`` with ``<B v_j, v_j> <= <B v_j, v_i>`` for some ``i`` is not its own
    leader, so it moves towards ``v_i``: the hull shrinks, unlike under the hypotheses of
    Theorem 4.2. Single system.

    Returns
    -------
    Result
        Entries ``trajectory`` (steps+1, n, d), ``area`` (steps+1,) of ``K^t``,
        ``vertex_shift`` (steps+1, k) distance of each initial vertex token from its start,
        ``owner`` (k,) bool (``<B v_j, v_j> > <B v_j, v_i>`` for all ``i != j``).

    Examples
    --------
    With ``B = I`` the vertex ``(1, 0)`` scores ``<v, (3, 1)> = 3 > |v|^2 = 1``: it does not own
    its cell and slides towards ``(3, 1)`` (half-way at ``gamma = 1/2``, a shift of
    ``sqrt(5)/2``), the owners stay, and the triangle's area shrinks by ``1 - gamma`` per step:

    >>> res = non_owning_run([[1, 0], [3, 1], [2.5, -1]], [[2, 0]], 0.5, np.eye(2), 3)
    >>> res.owner.tolist(), np.round(res.vertex_shift[1], 6).tolist()
    ([False, True, True], [1.118034, 0.0, 0.0])
    >>> np.round(res.area / res.area[0], 12).tolist()
    [1.0, 0.5, 0.25, 0.125]
    """
    Vt = V.tokens("vertices", vertices, batched_ok=False)
    X = V.tokens("interior", interior, batched_ok=False)
    Bm = V.square_matrix("B", B, Vt.shape[1])
    if X.shape[1] != Vt.shape[1]:
        raise ValueError("interior must have the dimension of vertices")
    steps = V.positive_int("steps", steps)
    owner = owns_cell(Vt, Bm)
    res = D.simulate(np.concatenate([Vt, X]), D.Hardmax(gamma, Bm), steps, trajectory=True)
    traj = res.trajectory
    area = hull_area(traj)
    shift = np.linalg.norm(traj[:, :len(Vt)] - Vt[None], axis=-1)
    return Result(trajectory=traj, area=area, vertex_shift=shift, owner=owner)


# ============================================================================ duality gap (Section 4.1)
def duality_gap_check(x0: npt.ArrayLike, schedule: Schedule | float | str, B: npt.ArrayLike,
                      steps: int, *, c: float = 1.0) -> Result:
    """Both sides of the duality-gap proposition of Section 4.1 (number unverified, plausibly Prop 4.1) along (SA-inf).

    Setting: ``B^t = beta^t B`` with ``B >= 0`` and ``beta^t / beta^{t+1} = gamma^t / gamma^{t+1}``,
    i.e. ``beta^t = c gamma^t``; ``J^t(y) = -1/2 <B^t y, y>``. The proposition states, for every
    token ``i`` and ``t >= 1``, ::

        min_{1 <= tau <= t} max_{y in K^tau} <grad J^tau(x_i^tau), x_i^tau - y>
            <= (1/t) (J^1(x_i^1) / gamma^1 - inf_{y in K^t} J^t(y) / gamma^t).

    Positive rescaling of ``B`` does not change the oracle, so the trajectory is that of
    (SA-inf) with ``B``. Here ``J^t / gamma^t = -(c/2) <B y, y>`` and its infimum over
    ``K^t`` is attained at a token (a concave function on a polytope).

    Returns
    -------
    Result
        Entries ``t`` (1..steps), ``lhs`` and ``rhs`` (steps, R, n), ``gap`` (steps, R, n)
        the per-step Frank-Wolfe gap ``max_y <grad J^tau(x_i^tau), x_i^tau - y>``.

    Examples
    --------
    >>> from attention_fw.experiments.convergence import shifted_cloud
    >>> res = duality_gap_check(shifted_cloud(2, 6, rng=0), "fw", np.eye(2), 40)
    >>> bool(np.all(res.lhs <= res.rhs + 1e-12))
    True
    """
    x, _ = V.batch("x0", x0)
    d = x.shape[-1]
    Bm = V.psd_matrix("B", B, d)
    steps = V.positive_int("steps", steps)
    c = V.real_scalar("c", c, low=0.0, low_open=True)
    sched = get_schedule(schedule)
    x = D.hardmax_step(x, sched(0), Bm)  # x^1
    f1 = -0.5 * c * np.einsum("...d,de,...e->...", x, Bm, x)

    def sides(x, t):
        S = (x @ Bm) @ np.swapaxes(x, -1, -2)  # B symmetric
        # grad J^t = -c gamma^t B x; max_y <grad, x - y> = c gamma^t (max_j <Bx, x_j> - <Bx, x>)
        inf_t = -0.5 * c * np.einsum("...ii->...i", S).max(axis=-1)
        return {"gap": c * sched(t) * (S.max(axis=-1) - np.einsum("...ii->...i", S)),
                "rhs": (f1 - inf_t[..., None]) / t}
    res = D.simulate(x, D.Hardmax(sched, Bm), steps - 1, [D.FunctionRecorder("sides", sides)], t0=1)
    gaps = res.records["sides"]["gap"]
    return Result(t=np.arange(1, steps + 1), lhs=np.minimum.accumulate(gaps, axis=0), rhs=res.records["sides"]["rhs"],
                  gap=gaps)


# ============================================================================ Remark 4.6
def wilson_interval(successes: npt.ArrayLike, trials: npt.ArrayLike,
                    z: float = 1.96) -> tuple[float | np.ndarray, float | np.ndarray]:
    """Wilson score interval for a binomial proportion (vectorised). Returns ``(low, high)``.

    Examples
    --------
    The interval contains the observed proportion and shrinks as the number of trials grows:

    >>> low, high = wilson_interval([30, 300], [100, 1000])
    >>> (
    ...     bool(np.all((low < 0.3) & (0.3 < high))),
    ...     bool(high[1] - low[1] < high[0] - low[0]),
    ... )
    (True, True)
    >>> # no success: [0, z^2/(n + z^2)], not [0, 0]
    >>> [round(float(b), 4) for b in wilson_interval(0, 10)]
    [0.0, 0.2775]
    """
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    if np.any(n <= 0) or np.any(k < 0) or np.any(k > n):
        raise ValueError("trials must be positive and 0 <= successes <= trials")
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z / den * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def owns_cell_probability(dims: Iterable[int], kappa: int, samples: int, *, rng: SeedLike,
                          B_spectrum: Callable[[int], npt.ArrayLike] | None = None, chunk: int = 4096) -> Result:
    """Monte-Carlo ``P(every one of kappa Gaussian vertices owns its cell)`` against ``d`` (Remark 4.6).

    ``v_1, ..., v_kappa ~ N(0, I_d)`` i.i.d.; the event is
    ``<B v_j, v_j> > <B v_j, v_i>`` for all ``i != j`` (condition 1 of Section 4.3), tested
    by :func:`attention_fw.geometry.planar.owns_cell`. ``B = diag(B_spectrum(d))`` if given (bounded
    condition number), else ``I_d``.

    Parameters
    ----------
    dims : sequence of int >= 1
    kappa : int >= 2
    samples : int, draws per dimension
    B_spectrum : callable ``d -> (d,) positive eigenvalues``, optional

    Returns
    -------
    Result with ``d``, ``p``, ``low``, ``high`` (95% Wilson), ``successes``, ``samples``, ``kappa``.

    Examples
    --------
    On a line (``d = 1``) the middle one of three points never owns its cell (it would need
    ``v > 0`` and ``v < 0``), so every draw gives 0 successes:

    >>> res = owns_cell_probability([1, 2], 3, 200, rng=0)
    >>> # high = z^2/(n + z^2)
    >>> res.d.tolist(), int(res.successes[0]), round(float(res.high[0]), 4)
    ([1, 2], 0, 0.0188)
    """
    dims = [V.positive_int("dims", int(d)) if isinstance(d, (int, np.integer)) else V.positive_int("dims", d)
            for d in dims]
    kappa = V.positive_int("kappa", kappa, minimum=2)
    samples = V.positive_int("samples", samples)
    rng = V.rng("rng", rng)
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
    successes = np.array(succ)
    lo, hi = wilson_interval(successes, samples)
    return Result(d=np.array(dims), p=successes / samples, low=lo, high=hi, successes=successes, samples=samples,
                  kappa=kappa)


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


def owns_cell_union_bound(d: npt.ArrayLike, kappa: int) -> np.ndarray | float:
    """Union-bound lower estimate ``1 - kappa (kappa - 1) q(d)`` of the Remark 4.6 probability for ``B = I_d``.

    ``q(d) = P(<v, w> >= |v|^2) = E[ Phi_bar(|v|) ]`` for independent ``v, w ~ N(0, I_d)``
    (given ``v``, ``<v, w> ~ N(0, |v|^2)``), computed by quadrature over the chi law of ``|v|``.
    Clipped at 0.

    Examples
    --------
    For two points on a line ``q(1) = P(Cauchy >= 1) = 1/4`` and the bound ``1 - 2/4`` is exact
    (both own their cells iff they have opposite signs); the bound grows with ``d``, and it lies
    below the Monte Carlo probability (about 0.33 against 0.12 for ``d = 2``, ``kappa = 3``):

    >>> round(owns_cell_union_bound(1, 2), 9)
    0.5
    >>> bool(np.all(np.diff(owns_cell_union_bound([2, 4, 10, 100], 3)) > 0))
    True
    >>> bool(
    ...     owns_cell_probability([2], 3, 500, rng=0).low[0]
    ...     > owns_cell_union_bound(2, 3)
    ... )
    True
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
    x, single = V.batch("x0", x0)
    Bm = V.square_matrix("B", B, x.shape[-1])
    S = (x @ Bm.T) @ np.swapaxes(x, -1, -2)
    srt = np.sort(S, axis=-1)
    scale = np.abs(S).max(axis=(-1, -2))[..., None]
    if np.any(srt[..., -1] - srt[..., -2] <= 1e-12 * scale):
        raise ValueError("x0 must be generic: some token has tied leaders (Theorem 4.8 needs genericity)")
    L = S.argmax(axis=-1)
    for r in range(x.shape[0]):
        try:
            hv = hull_vertex_indices(x[r])
        except ValueError as exc:
            raise ValueError(str(exc).replace("points", "x0", 1)) from None
        if np.any(L[r, hv] != hv):
            raise ValueError("x0 must satisfy the genericity conditions of Theorem 4.2: some vertex of "
                             "the hull does not own its cell (it is not its own leader)")
    return x, single, L


def ode_solution(x0: npt.ArrayLike, B: npt.ArrayLike, t: npt.ArrayLike) -> np.ndarray:
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

    Examples
    --------
    A square and one interior token led by the vertex ``(1, 0)``: the vertices stay, and at
    ``t = log 2`` the token is half-way to its leader:

    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> x0 = np.vstack([regular_polygon(4, phase=0.0), [[0.3, 0.1]]])
    >>> x = ode_solution(x0, np.eye(2), [0.0, np.log(2)])
    >>> bool(np.allclose(x[:, :4], x0[:4])), np.round(x[:, 4], 12).tolist()
    (True, [[0.3, 0.1], [0.65, 0.05]])
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


def euler_error(x0: npt.ArrayLike, B: npt.ArrayLike, dts: npt.ArrayLike, T: float = 1.0) -> Result:
    """Error of (SA-inf) with ``gamma = dt`` (the Euler scheme of the hardmax ODE) against Theorem 4.8.

    For each ``dt`` with ``T / dt`` an integer, runs ``T/dt`` steps and records the sup-norm error
    ``max_i |x_i^k - x_i(k dt)|`` at ``t = T`` and its maximum over the grid ``k dt in [0, T]``.
    The leading term of the error at time t is ``-(t/2) e^{-t} dt (x_i^0 - v_sigma(i))``.

    Returns
    -------
    Result
        Entries ``dt``, ``err_T``, ``err_sup``, ``leading_T``
        (``(T/2) e^{-T} max_i |x_i^0 - v|``), ``leading_sup``
        (``e^{-1}/2 max_i |x_i^0 - v|`` if ``T >= 1`` else the value at T). Also ``T``,
        ``slope`` (log-log slope of ``err_T`` against ``dt``) and ``amplitude``
        (``max_i |x_i^0 - v|``).

    Examples
    --------
    The Euler error at ``T = 1`` shrinks linearly with ``dt``, close to its leading term:

    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> x0 = np.vstack([regular_polygon(4, phase=0.0), [[0.3, 0.1]]])
    >>> res = euler_error(x0, np.eye(2), [0.1, 0.05, 0.025])
    >>> (
    ...     round(res.slope, 1),
    ...     bool(np.allclose(res.err_T / res.dt, res.leading_T, rtol=0.05)),
    ... )
    (1.0, True)
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
        res = D.simulate(x, D.Hardmax(float(dt), Bm), int(N), trajectory=True)
        times = res.times * dt
        exact = ode_solution(x, Bm, times)
        err = np.linalg.norm(res.trajectory - exact, axis=-1).max(axis=(-1, -2))
        eT.append(err[-1])
        es.append(err.max())
    tpk = min(T, 1.0)
    return Result(dt=dts, err_T=np.array(eT), err_sup=np.array(es), T=T, slope=loglog_slope(dts, np.array(eT)),
                leading_T=0.5 * T * np.exp(-T) * amp, leading_sup=0.5 * tpk * np.exp(-tpk) * amp, amplitude=amp)


def ode_continuity(x0: npt.ArrayLike, B: npt.ArrayLike, deltas: npt.ArrayLike, T: float = 3.0, dt: float = 1e-3, *,
                   rng: SeedLike = None, direction: npt.ArrayLike | None = None) -> Result:
    """Continuous dependence of the hardmax ODE on its initial data (Theorem 4.8), measured with Euler.

    For each size ``delta``, perturbs ``x0`` by ``delta * u`` (``u`` a fixed random direction,
    normalised so that ``max_i |u_i| = 1``; drawn from ``rng``, required unless ``direction`` gives
    ``u``), integrates both problems by (SA-inf) with
    ``gamma = dt`` up to ``T`` and records ``sup_{t <= T} max_i |x_i(t) - x~_i(t)|``. While the
    perturbed data stay generic with the same cells this distance is ``delta`` (the solution
    map is 1-Lipschitz: ``x - x~ = e^{-t}(x0 - x~0)``, plus the vertex shift when a vertex
    moves); once a token crosses a cell boundary it jumps to ``O(1)``.

    Returns
    -------
    Result
        Entries ``delta``, ``sup_dist``, ``same_cells`` (bool per delta), ``direction``, and
        the ``T`` and ``dt`` of the runs.

    Examples
    --------
    Moving the interior token ``(0.3, 0.1)`` of a square along ``(-1, 1)``: a small move keeps
    its leader ``(1, 0)`` and the distance stays ``delta``; a move across the diagonal hands it
    to the leader ``(0, 1)`` and the distance jumps:

    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> x0 = np.vstack([regular_polygon(4, phase=0.0), [[0.3, 0.1]]])
    >>> # only the interior token moves
    >>> u = np.vstack([np.zeros((4, 2)), [[-1.0, 1.0]]])
    >>> res = ode_continuity(
    ...     x0, np.eye(2), [0.001, 0.1, 0.5], T=2.0, dt=0.01, direction=u
    ... )
    >>> (
    ...     res.same_cells.tolist(),
    ...     np.round(res.sup_dist[:2], 12).tolist(),
    ...     bool(res.sup_dist[2] > 1),
    ... )
    ([True, True, False], [0.001, 0.1], True)
    """
    x, single, L = _ode_leaders(x0, B)
    Bm = np.asarray(B, dtype=float)
    deltas = np.asarray(deltas, dtype=float)
    if np.any(deltas < 0):
        raise ValueError("deltas must be >= 0")
    if direction is None:
        if rng is None:
            raise TypeError("rng is required when direction is not given (the random direction u is drawn from it)")
        u = V.rng("rng", rng).normal(size=x.shape)
    else:
        u = V.as_float_array("direction", direction).reshape(x.shape)
    u = u / np.linalg.norm(u, axis=-1).max()
    N = int(round(T / dt))
    base = D.simulate(x, D.Hardmax(dt, Bm), N, trajectory=True).trajectory
    out, same = [], []
    for dl in deltas:
        y = x + dl * u
        S = (y @ Bm.T) @ np.swapaxes(y, -1, -2)
        same.append(bool(np.all(S.argmax(axis=-1) == L)))
        tr = D.simulate(y, D.Hardmax(dt, Bm), N, trajectory=True).trajectory
        out.append(np.linalg.norm(tr - base, axis=-1).max())
    return Result(delta=deltas, sup_dist=np.array(out), same_cells=np.array(same), direction=u[0] if single else u,
                T=T, dt=dt)
