"""What do Theorems 5.2 and 5.4 and Proposition 5.1 promise, and do the simulations agree?

Standing choices of Section 5: key-query matrix ``B = I_d`` and a constant step ``gamma``.
The chain (SAP) moves token ``i`` to ``(1 - gamma) x_i + gamma x_j`` with probability
``softmax_j(beta <x_i, x_j>)``, independently for every token (Section 1.8 of the paper).

* hypotheses of Theorem 5.2: the smallest ``beta`` for which the eroded cones
  ``I_i(beta^{-1/8}) (-) beta^{-1/4} B_1`` are non-empty, sampling from them, the
  configurations the theorem is about (the geometry itself is in :mod:`attention_fw.geometry.polytope`);
* phase 1 (Theorem 5.2): ``m``, ``tau``, ``T1`` and the event at ``T1`` (the constant ``C``
  is not universal, erratum E9 of the book: its default is the proof's ratio of initial
  distances), and its Monte Carlo;
* the lower bound of Theorem 5.4 on ``P[T2 >= t]``, as printed and as corrected (erratum E11);
  the exit times themselves are simulated in :mod:`attention_fw.experiments.exit_times` and fitted in
  :mod:`attention_fw.experiments.survival`;
* Prop 5.1: the deterministic (SA-beta) collapses to a point of the initial hull (E5, E12).
"""
from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import spatial

from .. import _validate as V
from ..model import dynamics
from ..geometry.polytope import (_around_vertices, _vertices, c0, diameter, eroded_cone_mask, eroded_slack, points_on_circle,
                       regular_simplex,
                       satisfies_51)
from .._validate import SeedLike
from ..results import Result

__all__ = [
    "hypothesis_beta_min", "configuration_beta_min", "sample_eroded_cone", "phase1_configuration",
    "phase1_constants", "phase1_event", "run_phase1", "metastability_bound", "collapse_sabeta",
    "theorem54_radius", "theorem54_hypotheses", "theorem54_region", "phase1_task", "collapse_task",
]


# ----------------------------------------------------------------------------------------
# hypotheses of Theorem 5.2
# ----------------------------------------------------------------------------------------

def _bisect_beta_min(ok, beta_hi):
    """Smallest beta in [1, beta_hi] with ``ok(beta)``, for a monotone ``ok`` (bisection on log beta)."""
    if not ok(beta_hi):
        return math.inf
    if ok(1.0):
        return 1.0
    lo, hi = 0.0, math.log(beta_hi)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(math.exp(mid)) else (mid, hi)
    return math.exp(hi)


def hypothesis_beta_min(vertices: npt.ArrayLike, *, beta_hi: float = 1e12) -> float:
    """Smallest beta for which every eroded cone ``I_i(beta^{-1/8}) (-) beta^{-1/4} B_1`` (within
    the eroded K) is non-empty: below it Theorem 5.2 has no admissible interior token.

    Computed (not a claim of the paper) by bisection on log(beta) of a linear programme; the
    cones shrink monotonically as beta decreases. Returns ``inf`` if empty even at ``beta_hi``.

    Examples
    --------
    >>> v = points_on_circle()
    >>> # the unit triangle's eroded cones are still empty at 400
    >>> hypothesis_beta_min(v, beta_hi=400.0)
    inf
    >>> # ... and no longer at 450
    >>> bool(eroded_slack(v, 0, 450 ** (-1 / 8), 450 ** (-1 / 4)) >= 0)
    True
    >>> # ten times larger, they are non-empty from beta = 1 on
    >>> hypothesis_beta_min(10 * v)
    1.0
    """
    v = _vertices("vertices", vertices)

    def ok(beta):
        return min(eroded_slack(v, i, beta ** (-1 / 8), beta ** (-1 / 4)) for i in range(len(v))) >= 0
    return _bisect_beta_min(ok, beta_hi)


def configuration_beta_min(x0: npt.ArrayLike, vertices: npt.ArrayLike, sigma: npt.ArrayLike, *, beta_hi: float = 1e12) -> float:
    """Smallest beta at which the interior tokens of ``x0`` lie in their eroded cones
    ``I_sigma(j)(beta^{-1/8}) (-) beta^{-1/4} B_1`` (Theorem 5.2's hypothesis); the sets grow
    with beta, so the hypothesis then holds for every larger beta. ``inf`` if never (up to beta_hi).

    Examples
    --------
    >>> v = points_on_circle()
    >>> x0, sigma = np.vstack([v, 0.5 * v]), np.array([0, 1, 2, 0, 1, 2])
    >>> b = configuration_beta_min(x0, v, sigma)
    >>> [
    ...     bool(eroded_cone_mask(x0[3], v, 0, s ** (-1 / 8), s ** (-1 / 4)))
    ...     for s in (b / 1.01, b * 1.01)
    ... ]
    [False, True]

    Token 3 (half-way to ``v_0``) enters its eroded cone at ``b`` (tokens 4 and 5 too, by symmetry).
    """
    v = _vertices("vertices", vertices)
    x0 = V.tokens("x0", x0, batched_ok=False)
    k = len(v)
    sigma = _sigma("sigma", sigma, len(x0), k)
    lonely = sorted(set(range(k)) - set(sigma[k:].tolist()))
    if lonely:
        raise ValueError(f"sigma must give every vertex at least one interior token (x0[kappa:]); "
                         f"vertices {lonely} have none")

    def ok(beta):
        return all(bool(np.all(eroded_cone_mask(x0[k:][sigma[k:] == i], v, i, beta ** (-1 / 8), beta ** (-1 / 4))))
                   for i in range(k))
    return _bisect_beta_min(ok, beta_hi)


def sample_eroded_cone(vertices: npt.ArrayLike, i: int, eta: float, delta: float, size: int, *, rng: SeedLike,
                       min_dist: float = 0.0, max_tries: int = 10_000) -> np.ndarray:
    """``size`` points uniform in ``(I_i(eta) (-) delta B_1) cap (K (-) delta B_1)``, shape (size, d).

    Rejection sampling from the bounding box of K (vectorised). With ``min_dist > 0`` only
    points at distance >= ``min_dist`` from ``v_i`` are kept (to control ``m`` and so ``T1``).

    Raises
    ------
    ValueError
        If the set is empty or too small to hit within ``max_tries`` batches.

    Examples
    --------
    >>> v = points_on_circle()
    >>> pts = sample_eroded_cone(v, 0, 0.05, 0.03, 100, rng=0, min_dist=0.3)
    >>> # every point lies in the eroded cone
    >>> pts.shape, bool(eroded_cone_mask(pts, v, 0, 0.05, 0.03).all())
    ((100, 2), True)
    >>> # ... at distance >= min_dist from v_0
    >>> bool((np.linalg.norm(pts - v[0], axis=1) >= 0.3).all())
    True
    """
    v = _vertices("vertices", vertices)
    size = V.positive_int("size", size)
    g = V.rng("rng", rng)
    lo, hi = v.min(0), v.max(0)
    out = []
    have = 0
    for _ in range(max_tries):
        cand = g.uniform(lo, hi, size=(max(256, 4 * size), v.shape[1]))
        ok = eroded_cone_mask(cand, v, i, eta, delta) & (np.linalg.norm(cand - v[i], axis=1) >= min_dist)
        keep = cand[ok]
        out.append(keep)
        have += len(keep)
        if have >= size:
            return np.concatenate(out)[:size]
    raise ValueError(f"the eroded cone of vertex {i} (eta={eta}, delta={delta}) is empty or too small")


def phase1_configuration(vertices: npt.ArrayLike, per_vertex: int, beta: float, *, rng: SeedLike,
                         min_dist: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """A configuration satisfying the hypotheses of Theorem 5.2 at ``beta`` (and every larger beta).

    Tokens ``0..kappa-1`` are the vertices (``x_i^0 = v_i``); then ``per_vertex`` tokens per
    vertex, uniform in ``I_i(beta^{-1/8}) (-) beta^{-1/4} B_1`` intersected with the eroded K.

    Returns
    -------
    x0 : (kappa * (1 + per_vertex), d) array
    sigma : (n,) int array, ``sigma[j]`` = the vertex whose cell holds token j.

    Examples
    --------
    >>> x0, sigma = phase1_configuration(points_on_circle(), 2, 1e6, rng=0)
    >>> x0.shape, sigma.tolist()
    ((9, 2), [0, 1, 2, 0, 0, 1, 1, 2, 2])
    """
    beta = V.real_scalar("beta", beta, low=0, low_open=True)
    return _around_vertices(vertices, per_vertex, rng, lambda v, i, g: sample_eroded_cone(
        v, i, beta ** (-1 / 8), beta ** (-1 / 4), per_vertex, rng=g, min_dist=min_dist))


# ----------------------------------------------------------------------------------------
# phase 1: Theorem 5.2
# ----------------------------------------------------------------------------------------

def _sigma(name: str, sigma: npt.ArrayLike, n: int, k: int) -> np.ndarray:
    s = np.asarray(sigma)
    if s.shape != (n,) or s.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer array of shape ({n},), got {s.shape} {s.dtype}")
    if s.min() < 0 or s.max() >= k:
        raise ValueError(f"{name} must take values in 0..{k - 1}")
    return s.astype(np.intp)


def phase1_constants(x0: npt.ArrayLike, vertices: npt.ArrayLike, sigma: npt.ArrayLike, gamma: float) -> Result:
    """``m``, ``tau``, ``T1`` and the proof's constant ``C`` of Theorem 5.2.

    ``m = min_{j > kappa} |x_j^0 - v_sigma(j)|``,
    ``tau = min{c0 / (2 max|v_i - v_j|), sqrt(2 c0) / 2, (1 - gamma) m}``,
    ``T1 = floor(log(tau / m) / log(1 - gamma))`` (>= 1, independent of beta).
    ``C`` is *not* universal (erratum E9 of the book): following a reading of the proof of
    Theorem 5.2 (Appendix A.3, Step 4.4; uncertain) ``C = max_j |x_j^0 - v_sigma(j)| / (m (1 - gamma))``.
    Returns a Result with ``m``, ``tau``, ``T1``, ``C``, ``c0`` and ``max_dist``.

    Parameters
    ----------
    x0 : (n, d) array, first kappa rows are the vertices
    vertices : (kappa, d) array
    sigma : (n,) int array
    gamma : float in (0, 1)

    Raises
    ------
    ValueError
        ``n == kappa`` (the statement is vacuous, ``m`` undefined), or the first kappa tokens
        are not the vertices, or ``m == 0``.

    Examples
    --------
    >>> # c0 = 1.5, d(K) = sqrt(3)
    >>> v = points_on_circle()
    >>> c = phase1_constants(
    ...     np.vstack([v, 0.4 * v]), v, np.array([0, 1, 2, 0, 1, 2]), 0.1
    ... )
    >>> # tau = c0/(2 d(K)), C = 1/0.9
    >>> round(c.m, 6), bool(np.isclose(c.tau, 1.5 / (2 * np.sqrt(3)))), round(c.C, 6)
    (0.6, True, 1.111111)
    >>> # T1: last t with (1 - gamma)^t m >= tau
    >>> c.T1, 0.9 ** c.T1 * c.m >= c.tau > 0.9 ** (c.T1 + 1) * c.m
    (3, True)
    """
    v = _vertices("vertices", vertices)
    x0 = V.tokens("x0", x0, batched_ok=False)
    gamma = V.step_size("gamma", gamma, theorem="the bounds of Theorems 5.2 and 5.4")
    k, n = len(v), len(x0)
    if x0.shape[1] != v.shape[1]:
        raise ValueError("x0 and vertices must have the same dimension")
    if n <= k:
        raise ValueError("x0 must hold more tokens than vertices: with n == kappa, m is undefined "
                         "and Theorem 5.2 is vacuous")
    sigma = _sigma("sigma", sigma, n, k)
    if not np.array_equal(x0[:k], v) or not np.array_equal(sigma[:k], np.arange(k)):
        raise ValueError("x0[:kappa] must be the vertices and sigma[:kappa] = 0..kappa-1")
    dist = np.linalg.norm(x0[k:] - v[sigma[k:]], axis=1)
    m = float(dist.min())
    if m <= 0:
        raise ValueError("an interior token sits on its vertex (m = 0)")
    cc = c0(v)
    tau = min(cc / (2 * float(diameter(v))), math.sqrt(2 * cc) / 2, (1 - gamma) * m)
    # T1 >= 1 always (tau <= (1 - gamma) m); at the tie tau = (1 - gamma) m the ratio is 1 exactly,
    # and rounding could floor it to 0
    T1 = max(1, int(math.floor(math.log(tau / m) / math.log(1 - gamma))))
    C = float(dist.max() / (m * (1 - gamma)))
    return Result(m=m, tau=tau, T1=T1, C=C, c0=cc, max_dist=float(dist.max()))


def phase1_event(xT: npt.ArrayLike, vertices: npt.ArrayLike, sigma: npt.ArrayLike, beta: float, tau: float, C: float) -> Result:
    """The event of Theorem 5.2 at time ``T1``, for each of R runs.

    ``|x_i^{T1} - v_i| < beta^{-1/4}`` for the vertex tokens ``i < kappa`` and
    ``|x_i^{T1} - v_sigma(i)| < C tau`` for the others.

    Parameters
    ----------
    xT : (R, n, d) or (n, d) array
        The configurations at ``T1``.

    Returns
    -------
    Result
        Bool arrays of shape (R,) ``"event"``, ``"vertices"`` (first part) and
        ``"interior"`` (second part), and float arrays ``"vertex_drift"`` (max over vertex
        tokens) and ``"interior_radius"`` (max over the others, in units of ``tau``).

    Examples
    --------
    >>> v = points_on_circle()
    >>> # interior tokens at 0.01 and 0.1
    >>> xT = np.stack([np.vstack([v, 0.99 * v]), np.vstack([v, 0.9 * v])])
    >>> ev = phase1_event(xT, v, np.array([0, 1, 2, 0, 1, 2]), 1e4, 0.05, 1.0)
    >>> # radius / tau vs C = 1
    >>> ev.event.tolist(), ev.vertices.tolist(), np.round(ev.interior_radius, 6)
    ([True, False], [True, True], array([0.2, 2. ]))
    """
    v = _vertices("vertices", vertices)
    xT = V.tokens("xT", xT)
    if xT.ndim == 2:
        xT = xT[None]
    k, n = len(v), xT.shape[1]
    sigma = _sigma("sigma", sigma, n, k)
    beta = V.real_scalar("beta", beta, low=0, low_open=True)
    tau = V.real_scalar("tau", tau, low=0, low_open=True)
    C = V.real_scalar("C", C, low=0, low_open=True)
    dist = np.linalg.norm(xT - v[sigma], axis=-1)
    vd = dist[:, :k].max(axis=1)
    ir = dist[:, k:].max(axis=1) if n > k else np.zeros(len(xT))
    ok_v = vd < beta ** (-1 / 4)
    ok_i = ir < C * tau
    return Result(event=ok_v & ok_i, vertices=ok_v, interior=ok_i, vertex_drift=vd, interior_radius=ir / tau)


def run_phase1(x0: npt.ArrayLike, vertices: npt.ArrayLike, sigma: npt.ArrayLike, gamma: float, beta: float, runs: int, *,
               rng: SeedLike, C: float | None = None, horizon: int | None = None) -> Result:
    """Monte Carlo of Theorem 5.2: ``runs`` independent (SAP) chains for ``horizon`` steps
    (default ``3 T1``), run by :func:`attention_fw.model.dynamics.simulate` (B = I).

    Returns a Result with the summary of :func:`phase1_event` at ``T1`` (``fraction``,
    ``fraction_vertices``, ``fraction_interior``, ``vertex_drift_max``, ``interior_radius_q99``),
    the fraction meeting the event at every ``t <= horizon`` (``fraction_by_time``), ``T1``,
    ``tau``, ``C``, ``runs`` and the paper's lower bound ``bound = 1 - beta^{-1/8}``.

    Examples
    --------
    >>> v = points_on_circle()
    >>> x0, sigma = phase1_configuration(v, 2, 1e6, rng=0, min_dist=0.05)
    >>> res = run_phase1(x0, v, sigma, 0.5, 1e6, 100, rng=1)
    >>> res.fraction >= res.bound
    True
    """
    consts = phase1_constants(x0, vertices, sigma, gamma)
    C = consts.C if C is None else V.real_scalar("C", C, low=0, low_open=True)
    runs = V.positive_int("runs", runs)
    horizon = V.positive_int("horizon", horizon if horizon is not None else 3 * consts.T1)
    x = np.broadcast_to(np.asarray(x0, float), (runs,) + np.shape(x0))
    fraction = dynamics.FunctionRecorder(
        "fraction", lambda x, t: phase1_event(x, vertices, sigma, beta, consts.tau, C).event.mean())
    at_T1 = dynamics.FunctionRecorder("x", lambda x, t: x.copy(), times=[consts.T1])
    res = dynamics.simulate(x, dynamics.MarkovChain(gamma, beta, rng=rng), horizon, [fraction, at_T1])
    ev = phase1_event(res.records["x"][0], vertices, sigma, beta, consts.tau, C)
    return Result(beta=float(beta), T1=consts.T1, tau=consts.tau, C=C, runs=runs,
                  fraction_by_time=res.records["fraction"],
                  fraction=float(ev.event.mean()), fraction_vertices=float(ev.vertices.mean()),
                  fraction_interior=float(ev.interior.mean()),
                  vertex_drift_max=float(ev.vertex_drift.max()),
                  interior_radius_q99=float(np.quantile(ev.interior_radius, 0.99)),
                  bound=1.0 - beta ** (-1 / 8))


# ----------------------------------------------------------------------------------------
# the bound of Theorem 5.4 and the collapse of Prop 5.1
# ----------------------------------------------------------------------------------------

def metastability_bound(t: npt.ArrayLike, beta: float, n: int, gamma: float, eps: float, c0_: float,
                        diam: float | None = None, form: str = "printed") -> np.ndarray:
    """Lower bound on ``P[T2 >= t]`` of Theorem 5.4, clipped at 0.

    ``form="printed"``: ``1 - exp((1 + eps/gamma) log(gamma t / eps) + (1 + eps/gamma) log n
    - beta c0 eps / (2 gamma))`` as printed in the paper.

    ``form="corrected"``: the book's reconstruction of a correction (erratum E11 of the book;
    no corrected statement is published, so this form is *uncertain*): an exit needs
    ``M = ceil(eps / (gamma d(K)))`` bad steps among the ``n t`` token-steps, each of
    probability at most ``p = n e^{-beta c0 / 2}`` (the cluster bound in the proof of Theorem 5.4), so by a
    union bound ``P[T2 < t] <= binom(n t, M) p^M``. It also needs the clusters to stay within
    radius r with ``4 R r + 2 r^2 <= c0 / 2`` and disjoint balls (the function does not test these two).

    Parameters
    ----------
    t : array of times (> 1)
    diam : ``d(K)``, required for the corrected form

    Examples
    --------
    >>> b = metastability_bound([10.0, 1e6], 30.0, 6, 0.1, 0.05, 1.5)
    >>> bool(b[0] > 0.98), float(b[1])          # vacuous (clipped at 0) for large t
    (True, 0.0)
    """
    t = V.as_float_array("t", t, min_ndim=0)
    beta = V.real_scalar("beta", beta, low=0)
    n = V.positive_int("n", n)
    gamma = V.step_size("gamma", gamma, theorem="the bounds of Theorems 5.2 and 5.4")
    eps = V.real_scalar("eps", eps, low=0, low_open=True)
    c0_ = V.real_scalar("c0_", c0_, low=0, low_open=True)
    if form == "printed":
        k = 1 + eps / gamma
        expo = k * np.log(gamma * t / eps) + k * math.log(n) - beta * c0_ * eps / (2 * gamma)
    elif form == "corrected":
        if diam is None:
            raise ValueError("diam must be given for form='corrected'")
        diam = V.real_scalar("diam", diam, low=0, low_open=True)
        M = math.ceil(eps / (gamma * diam) - 1e-12)
        N = n * t
        # log binom(N, M) = sum_{k<M} log(N - k) - log M!, accurate for huge N (no gammaln cancellation)
        j = np.arange(M).reshape((M,) + (1,) * np.ndim(N))
        ok = N >= M
        terms = np.log(np.where(ok, N - j, 1.0))
        log_binom = np.where(ok, terms.sum(axis=0) - math.lgamma(M + 1), -np.inf)
        expo = log_binom + M * (math.log(n) - beta * c0_ / 2)
    else:
        raise ValueError(f"form must be 'printed' or 'corrected', got {form!r}")
    return np.clip(-np.expm1(np.minimum(expo, 700.0)), 0.0, 1.0)


# ----------------------------------------------------------------------------------------
# Prop 5.1: collapse of (SA-beta)
# ----------------------------------------------------------------------------------------

def collapse_sabeta(x0: npt.ArrayLike, gamma: float, beta: float, *, tol: float = 1e-8, max_steps: int = 10**6,
                    record_every: int = 1) -> Result:
    """Run the deterministic (SA-beta) (B = I, constant gamma) until the diameter is < ``tol``.

    Prop 5.1: all tokens converge to one point ``x*`` of ``conv{x_i^0}``, in general **not**
    the origin (erratum E5 of the book; the proof holds for every beta and gamma in (0, 1],
    E12). Runs :func:`attention_fw.model.dynamics.simulate` with the diameter as stop condition.

    Returns
    -------
    Result
        Entries ``limit`` (d,) (mean of the final tokens), ``steps`` (first t with diameter
        < tol, or ``max_steps`` with ``converged=False``), ``times`` and ``diameters``
        (recorded every ``record_every`` steps) and ``x`` (final tokens).

    Examples
    --------
    >>> res = collapse_sabeta(
    ...     np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]]), 0.5, 1.0, tol=1e-6
    ... )
    >>> from attention_fw.geometry.polytope import hull_area
    >>> (
    ...     bool(res.converged),
    ...     bool(hull_area(np.vstack([[[0, 0], [1, 0], [0, 2]], res.limit])) == 1.0),
    ... )
    (True, True)
    """
    x = V.tokens("x0", x0, batched_ok=False)
    gamma = V.real_scalar("gamma", gamma, low=0, high=1, low_open=True)
    beta = V.real_scalar("beta", beta)
    tol = V.real_scalar("tol", tol, low=0, low_open=True)
    max_steps = V.positive_int("max_steps", max_steps)
    record_every = V.positive_int("record_every", record_every)

    def diam(y, t=None):
        return float(np.max(np.linalg.norm(y[:, None, :] - y[None, :, :], axis=-1)))
    rec = dynamics.FunctionRecorder("diam", diam, every=record_every)
    res = dynamics.simulate(x, dynamics.Softmax(gamma, beta), max_steps, [rec], stop=lambda y, t: diam(y) < tol)
    conv = res.stopped > 0
    return Result(limit=res.x.mean(0), steps=res.stopped if conv else max_steps, converged=conv,
                  times=res.record_times["diam"], diameters=res.records["diam"], x=res.x)


# ----------------------------------------------------------------------------------------
# Theorem 5.4: the hypotheses its proof mechanism needs
# ----------------------------------------------------------------------------------------

def theorem54_radius(vertices: npt.ArrayLike) -> float:
    """Largest ``r`` with ``4 R r + 2 r^2 <= c0 / 2``, ``R = max_a |v_a|``: ``sqrt(R^2 + c0/4) - R``.

    The proof of Theorem 5.4 bounds the total softmax weight a token gives to the other
    groups by ``n e^{-beta c0 / 2}`` as long as every token stays within ``r`` of its vertex
    and ``4 R r + 2 r^2 <= c0 / 2`` (for ``x`` within ``r`` of ``v_i``, ``y`` within ``r`` of
    ``v_j`` and ``z`` within ``r`` of ``v_i``: ``<x, z> - <x, y> >= c0 - 4 R r - 2 r^2``).
    Before the exit time the tokens stay in ``conv{x_ji^0}_j + B(0, eps)``, so ``r`` must cover
    the start radius plus ``eps``. Returns 0.0 when ``c0 <= 0`` (no admissible radius).

    Examples
    --------
    >>> r = theorem54_radius(points_on_circle())                  # R = 1, c0 = 1.5
    >>> # sqrt(1.375) - 1, with equality 4Rr + 2r^2 = c0/2
    >>> round(r, 6), round(4 * r + 2 * r ** 2, 12)
    (0.172604, 0.75)
    """
    v = _vertices("vertices", vertices)
    R = float(np.linalg.norm(v, axis=1).max())
    c = c0(v)
    if c <= 0:
        return 0.0
    # sqrt(R^2 + c/4) - R without cancellation when c << R^2
    return (c / 4) / (math.sqrt(R * R + c / 4) + R)


def theorem54_hypotheses(vertices: npt.ArrayLike, eps: float, gamma: float, rho: float = 0.0) -> Result:
    """Which hypotheses of Theorem 5.4, as its proof uses them, hold for ``(eps, gamma)``.

    ``rho`` is the start radius ``max_j |x_j^0 - v_sigma(j)|`` (0 for clusters at the vertices;
    the theorem allows up to ``C tau``, the output radius of Theorem 5.2). Keys:

    * ``angle_51``: condition (5.1) read as an angle (E15); ``equal_norms``: ``|v_i| = |v_j|``;
      ``c0_positive``: the bound on inner products of Theorem 5.4 holds with ``c0 > 0``;
    * ``ratio``: ``eps / gamma >= 2 d(K)``, i.e. ``gamma <= gamma_max = eps / (2 d(K))``;
    * ``radius``: ``4 R (rho + eps) + 2 (rho + eps)^2 <= c0 / 2``, i.e. ``eps <= eps_max =``
      :func:`theorem54_radius` ``- rho`` (the proof's ``eps_*`` for this start radius);
    * ``disjoint``: ``rho < min_{i != j} |v_i - v_j| / 3`` (the balls of the relabelling are
      disjoint; the review's suggested condition);
    * ``all``: every item above, plus ``gamma in (0, 1)``.

    Also returns the numbers ``eps_max``, ``gamma_max``, ``r_star``, ``M = ceil(eps / (gamma d(K)))``
    (bad steps an exit needs) and ``d`` (the diameter).

    Examples
    --------
    >>> v = points_on_circle()                                    # d(K) = sqrt(3)
    >>> h = theorem54_hypotheses(v, 0.1, 0.02)
    >>> # gamma_max = 0.1/(2 sqrt 3); M = ceil(0.1/(0.02 sqrt 3))
    >>> h.all, round(h.gamma_max, 6), h.M
    (True, 0.028868, 3)
    >>> # 0.1 / 0.05 = 2 < 2 d(K)
    >>> theorem54_hypotheses(v, 0.1, 0.05).ratio
    False
    """
    v = _vertices("vertices", vertices)
    eps = V.real_scalar("eps", eps, low=0, low_open=True)
    gamma = V.step_size("gamma", gamma, theorem="the bounds of Theorems 5.2 and 5.4")
    rho = V.real_scalar("rho", rho, low=0)
    d = diameter(v)
    c = c0(v)
    norms = np.linalg.norm(v, axis=1)
    R = float(norms.max())
    r_star = theorem54_radius(v)
    r = rho + eps
    out = Result({
        "angle_51": satisfies_51(v),
        "equal_norms": bool(np.ptp(norms) <= 1e-12 * max(R, 1.0)),
        "c0_positive": bool(c > 0),
        "ratio": bool(eps / gamma >= 2 * d * (1 - 1e-12)),
        "radius": bool(c > 0 and 4 * R * r + 2 * r * r <= c / 2 * (1 + 1e-12)),
        "disjoint": bool(rho < spatial.distance.pdist(v).min() / 3),
        "eps_max": r_star - rho, "gamma_max": eps / (2 * d), "r_star": r_star,
        "M": math.ceil(eps / (gamma * d) - 1e-12), "d": d,
    })
    out["all"] = all(out[k] for k in ("angle_51", "equal_norms", "c0_positive", "ratio", "radius", "disjoint"))
    return out


def theorem54_region(vertices: npt.ArrayLike, rho: float = 0.0) -> np.ndarray:
    """The admissible ``(eps, gamma)`` set of :func:`theorem54_hypotheses` as a polygon.

    ``{0 < eps <= eps_max, 0 < gamma <= eps / (2 d(K))}`` is the triangle with corners
    ``(0, 0)``, ``(eps_max, 0)``, ``(eps_max, eps_max / (2 d(K)))`` (counter-clockwise, shape (3, 2));
    empty (shape (0, 2)) when ``eps_max <= 0``. (``eps_max / (2 d) < 1`` always, so ``gamma < 1``
    is implied.)

    Examples
    --------
    >>> # eps_max = theorem54_radius(v) = 0.172604, d(K) = sqrt(3)
    >>> v = points_on_circle()
    >>> # top corner: gamma = 0.172604 / (2 sqrt 3)
    >>> np.round(theorem54_region(v), 6) + 0.0
    array([[0.      , 0.      ],
           [0.172604, 0.      ],
           [0.172604, 0.049826]])
    >>> theorem54_region(v, rho=0.2).shape     # start radius beyond eps_max: empty
    (0, 2)
    """
    v = _vertices("vertices", vertices)
    rho = V.real_scalar("rho", rho, low=0)
    e = theorem54_radius(v) - rho
    if e <= 0:
        return np.zeros((0, 2))
    return np.array([[0.0, 0.0], [e, 0.0], [e, e / (2 * diameter(v))]])


# ----------------------------------------------------------------------------------------
# tasks of the book's sweeps (module level and keyword-only, so that they pickle and cache)
# ----------------------------------------------------------------------------------------

def phase1_task(*, beta: float, rng: int, gamma: float, runs: int, config_beta: float,
                per_vertex: int, min_dist: float, config_rng: int, horizon: int | None = None,
                d: int = 2) -> Result:
    """Theorem 5.2 Monte Carlo at ``beta`` from a configuration built for ``config_beta`` (regular
    simplex in R^d; d = 2 is the equilateral triangle). See :func:`run_phase1`.

    Examples
    --------
    >>> res = phase1_task(
    ...     beta=1e6,
    ...     rng=1,
    ...     gamma=0.5,
    ...     runs=20,
    ...     config_beta=1e6,
    ...     per_vertex=1,
    ...     min_dist=0.05,
    ...     config_rng=0,
    ... )
    >>> res.runs, round(res.bound, 6), res.fraction        # bound = 1 - beta^(-1/8)
    (20, 0.822172, 1.0)

    At ``beta = 1e6`` every (SAP) step of this configuration picks the hardmax leader (every other
    weight stays below ``e^(-1e4)``), so every run meets the event whatever the draw.
    """
    v = regular_simplex(d) if d != 2 else points_on_circle()
    x0, sigma = phase1_configuration(v, per_vertex, config_beta, rng=config_rng, min_dist=min_dist)
    return run_phase1(x0, v, sigma, gamma, beta, runs, rng=rng, horizon=horizon)


def collapse_task(*, x0: tuple, gamma: float, beta: float, tol: float, max_steps: int,
                  record_every: int = 1) -> Result:
    """Prop 5.1: :func:`collapse_sabeta` with hashable inputs (``x0`` as nested tuples).

    Examples
    --------
    >>> res = collapse_task(
    ...     x0=((1.0, 0.0), (0.0, 1.0)), gamma=0.5, beta=1.0, tol=1e-9, max_steps=1000
    ... )
    >>> # symmetric under (a, b) -> (b, a): the midpoint of the hull
    >>> res.converged, np.round(res.limit, 6)
    (True, array([0.5, 0.5]))
    """
    return collapse_sabeta(np.asarray(x0, float), gamma, beta, tol=tol, max_steps=max_steps,
                           record_every=record_every)
