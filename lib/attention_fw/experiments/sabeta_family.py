"""The family of configurations of chapter 7 and the sweep task that computes everything on one of them.

Part of :mod:`attention_fw.experiments.sabeta` (which re-exports its public names).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import spatial

from .. import _validate as V
from ..geometry.polytope import regular_polygon, regular_simplex
from ..results import Result
from .exit_times import engine_exit_times, near_vertex_configuration
from .metastability import theorem54_hypotheses
from .sabeta_exponent import MODEL_BETAS, chain_seed, drift_integral_log_exit, mean_interval, model_exponent
from .sabeta_kernel import sabeta_exit_times
from .sabeta_reduced import _GroupDistance, leading_order_exit, reduced_exit_times, settled_points
from .survival import fit_exponential_censored

__all__ = ["FAMILY", "family_configuration", "beta_grid", "family_task"]

# ----------------------------------------------------------------------------------------
# the family of configurations of the book's chapter
# ----------------------------------------------------------------------------------------

def _random_polygon(kappa, seed, *, radii=None):
    g = np.random.default_rng(seed)
    while True:
        a = np.sort(g.uniform(0, 2 * np.pi, kappa))
        gaps = np.diff(np.r_[a, a[0] + 2 * np.pi])
        if gaps.min() > 0.6 * 2 * np.pi / kappa and gaps.max() < np.pi * 0.9:
            break
    r = 1.0 if radii is None else g.uniform(*radii, kappa)[:, None]
    return r * np.c_[np.cos(a), np.sin(a)]


def _random_sphere(kappa, seed):
    g = np.random.default_rng(seed)
    while True:
        v = g.normal(size=(kappa, 3))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        if spatial.distance.pdist(v).min() > 0.9 and np.linalg.norm(v.mean(0)) < 0.3:
            return v


_B2 = np.array([[1.4, 0.0], [0.0, 0.6]])
_B2R = np.array([[1.2, 0.3], [0.3, 0.8]])
_B3 = np.diag([1.3, 1.0, 0.7])

#: The family of configurations of chapter 7, ``name -> (vertices, tokens, gamma, eps, B)``; ``tokens`` is ``("c", m)``
#: for m coincident tokens per vertex or ``("n", m, r)`` for the vertex plus m tokens at distance r in
#: its tangent cone (seeded by the name's position in the family); ``B = None`` is the identity.
#: :func:`family_configuration` turns a name into tokens, groups and the hypotheses check.
FAMILY: dict[str, tuple[Any, ...]] = {
    "triangle, 1 per vertex": ("tri", ("c", 1), 0.1, 0.05, None),
    "triangle, 3 coincident": ("tri", ("c", 3), 0.1, 0.05, None),
    "triangle, 1+2 near": ("tri", ("n", 2, 0.05), 0.1, 0.1, None),
    "triangle, 1+6 near, gamma 0.3": ("tri", ("n", 6, 0.1), 0.3, 0.1, None),
    "square, 1 per vertex": ("sq", ("c", 1), 0.3, 0.1, None),
    "square, 1+3 near": ("sq", ("n", 3, 0.08), 0.1, 0.1, None),
    "pentagon, 2 coincident": ("pent", ("c", 2), 0.05, 0.05, None),
    "pentagon, 1+7 near": ("pent", ("n", 7, 0.1), 0.1, 0.1, None),
    "hexagon, 1 per vertex": ("hex", ("c", 1), 0.3, 0.1, None),
    "hexagon, 1+3 near": ("hex", ("n", 3, 0.05), 0.05, 0.05, None),
    "random triangle, 1+2 near": ("rtri", ("n", 2, 0.06), 0.1, 0.1, None),
    "random quadrilateral, 2 coincident": ("rquad", ("c", 2), 0.1, 0.05, None),
    "random pentagon, 1+2 near": ("rpent", ("n", 2, 0.05), 0.3, 0.1, None),
    "random hexagon, 1 per vertex": ("rhex", ("c", 1), 0.1, 0.05, None),
    "unequal-norm triangle, 1 per vertex": ("utri", ("c", 1), 0.1, 0.05, None),
    "triangle, 1+2 near, B diagonal": ("tri", ("n", 2, 0.05), 0.1, 0.1, _B2),
    "square, 1 per vertex, B rotated": ("sq", ("c", 1), 0.1, 0.05, _B2R),
    "pentagon, 1+3 near, B diagonal": ("pent", ("n", 3, 0.06), 0.05, 0.05, _B2),
    "tetrahedron, 1 per vertex": ("tet", ("c", 1), 0.1, 0.05, None),
    "tetrahedron, 1+3 near": ("tet", ("n", 3, 0.06), 0.1, 0.1, None),
    "octahedron, 1 per vertex": ("oct", ("c", 1), 0.3, 0.1, None),
    "random 5 points on the sphere, 1+2 near": ("rs5", ("n", 2, 0.05), 0.1, 0.1, None),
    "tetrahedron, 2 coincident, B diagonal": ("tet", ("c", 2), 0.05, 0.05, _B3),
    "triangle, 1 per vertex, in the hypotheses": ("tri", ("c", 1), 0.04, 0.17, None),
    "tetrahedron, 1 per vertex, in the hypotheses": ("tet", ("c", 1), 0.04, 0.15, None),
    "triangle, 2 coincident, in the hypotheses": ("tri", ("c", 2), 0.04, 0.17, None),
}


def _polytope(key):
    if key in ("tri", "sq", "pent", "hex"):
        return regular_polygon({"tri": 3, "sq": 4, "pent": 5, "hex": 6}[key])
    if key == "tet":
        return regular_simplex(3)
    if key == "oct":
        return np.vstack([np.eye(3), -np.eye(3)])
    if key == "rs5":
        return _random_sphere(5, 11)
    if key == "utri":
        return _random_polygon(3, 5, radii=(0.8, 1.2))
    return _random_polygon({"rtri": 3, "rquad": 4, "rpent": 5, "rhex": 6}[key], {"rtri": 1, "rquad": 2,
                                                                                 "rpent": 3, "rhex": 4}[key])


def family_configuration(name: str) -> Result:
    """One configuration of the book's family (``FAMILY``), with the hypotheses of Theorem 5.4 it meets.

    Returns a Result with ``x0`` (n, d), ``sigma``, ``B`` (d, d), ``gamma``, ``eps``, ``vertices``,
    ``rho`` (start radius ``max_j |x_j^0 - v_sigma(j)|``), ``c0`` (with B: ``min <B v_i, v_i - v_l>``),
    ``hypotheses`` (the Result of :func:`attention_fw.experiments.metastability.theorem54_hypotheses`, whose
    ``all`` also requires ``B = I``, the standing choice of Section 5) and ``coincident`` (every
    group starts at one point).

    Examples
    --------
    >>> c = family_configuration("triangle, 1 per vertex, in the hypotheses")
    >>> (
    ...     c.x0.shape,
    ...     bool(c.hypotheses.all),
    ...     family_configuration("triangle, 1+2 near").hypotheses.all,
    ... )
    ((3, 2), True, False)
    """
    if name not in FAMILY:
        raise ValueError(f"name must be one of the family's configurations, got {name!r}")
    key, tok, gamma, eps, B = FAMILY[name]
    v = _polytope(key)
    d = v.shape[1]
    if tok[0] == "c":
        sigma = np.repeat(np.arange(len(v)), tok[1])
        x0 = v[sigma].copy()
    else:
        x0, sigma = near_vertex_configuration(v, tok[1], tok[2], rng=list(FAMILY).index(name))
    Bm = np.eye(d) if B is None else np.asarray(B, float)
    rho = float(np.linalg.norm(x0 - v[sigma], axis=1).max())
    h = theorem54_hypotheses(v, eps, gamma, rho)
    h["B_identity"] = bool(np.array_equal(Bm, np.eye(d)))
    h["all"] = bool(h["all"] and h["B_identity"])
    G = v @ Bm.T @ v.T                                   # G_il = <B v_i, v_l>
    gap = np.diag(G)[:, None] - G
    np.fill_diagonal(gap, np.inf)
    return Result(name=name, x0=x0, sigma=sigma, B=Bm, gamma=gamma, eps=eps, vertices=v, rho=rho,
                  c0=float(gap.min()), hypotheses=h, coincident=tok[0] == "c", per_vertex=tok[1])


def beta_grid(config: Result, t_lo: float, t_hi: float, num: int) -> np.ndarray:
    """``num`` equally spaced betas from where the leading-order time
    (:func:`~attention_fw.experiments.sabeta_reduced.leading_order_exit`) is ``t_lo`` to where it
    is ``t_hi`` (bisection on beta; the grid only has to span the decades, the times themselves
    are then measured).

    Examples
    --------
    >>> b = beta_grid(family_configuration("triangle, 1 per vertex"), 1e2, 1e4, 3)
    >>> len(b), bool(b[0] < b[1] < b[2])
    (3, True)
    """
    num = V.positive_int("num", num, minimum=2)

    def logT(b):
        return np.log(leading_order_exit(config.x0, config.sigma, config.gamma, b, config.eps, B=config.B).T)

    hi = 1.0
    while logT([hi])[0] < math.log(t_hi):
        hi *= 2
        if hi > 1e4:
            raise ValueError(f"no beta below 1e4 reaches T = {t_hi:g} in {config.name!r}")
    grid = np.linspace(0.0, hi, 65)
    y = np.maximum.accumulate(logT(grid))                # log T is increasing in beta here; guard rounding

    def solve(target):
        k = int(np.searchsorted(y, math.log(target)))
        k = min(max(k, 1), len(grid) - 1)
        y0, y1 = y[k - 1], y[k]
        f = 0.0 if y1 == y0 else (math.log(target) - y0) / (y1 - y0)
        return grid[k - 1] + f * (grid[k] - grid[k - 1])
    return np.round(np.linspace(solve(t_lo), solve(t_hi), num), 3)


def _reach_grid(cfg: Result, t_lo: float, t_hi: float, num: int, t_reach, cap: int):
    """The betas and (SA-beta) exit times of one configuration: ``num`` betas spaced as :func:`beta_grid`
    ``(t_lo, t_hi)``, then more at the same spacing until the measured ``T2`` reaches ``t_reach``
    (None: no extension), or a run does not exit within ``cap``, or 40 more betas. Returns the betas,
    the times (the cap where no exit) and the "no exit" marker ``censored``, as an ExitSample's."""
    betas = beta_grid(cfg, t_lo, t_hi, num)
    es = sabeta_exit_times(cfg.x0, cfg.sigma, cfg.gamma, betas, cfg.eps, B=cfg.B, cap=cap)
    T, cens = es.times, es.censored
    if t_reach is None or num < 2:
        return betas, T, cens
    step = float(betas[-1] - betas[-2]) if betas[-1] > betas[-2] else 0.0
    added = 0
    while step > 0 and not cens[-1] and T[-1] < t_reach and added < 40:
        nxt = np.round(betas[-1] + step * np.arange(1, 3), 3)
        es = sabeta_exit_times(cfg.x0, cfg.sigma, cfg.gamma, nxt, cfg.eps, B=cfg.B, cap=cap)
        betas, T, cens = np.r_[betas, nxt], np.r_[T, es.times], np.r_[cens, es.censored]
        added += 2
    if t_reach is not None:                               # keep up to the first time at or above the target
        hit = np.flatnonzero(((T >= t_reach) & ~cens) | cens)
        if hit.size:
            betas, T, cens = betas[:hit[0] + 1], T[:hit[0] + 1], cens[:hit[0] + 1]
    return betas, T, cens


def _model_times(cfg: Result, betas) -> tuple[np.ndarray, float | None, float | None]:
    """The next-order model (:func:`attention_fw.experiments.sabeta_exponent.drift_integral_exit`) at
    ``betas``, and its exponent with its error bar (:func:`~attention_fw.experiments.sabeta_exponent.model_exponent`,
    from ``log T`` at :data:`~attention_fw.experiments.sabeta_exponent.MODEL_BETAS`)."""
    labels = np.unique(cfg.sigma)
    regions = [(lambda q, gd=_GroupDistance(cfg.x0[cfg.sigma == g]): gd(q, 1e300)) for g in labels]
    allb = np.r_[np.asarray(betas, float), MODEL_BETAS]
    sp = settled_points(cfg.x0, cfg.sigma, cfg.gamma, allb, B=cfg.B)
    logs = np.array([drift_integral_log_exit(sp.points[k], sp.masses, regions, cfg.gamma, b, cfg.eps, B=cfg.B)
                     for k, b in enumerate(allb)])
    far = dict(zip(MODEL_BETAS, logs[len(betas):]))
    c, err = model_exponent(lambda b: float(far[b]))
    grid = logs[:len(betas)]
    return np.where(grid < 709.0, np.exp(np.minimum(grid, 709.0)), np.inf), c, err


def family_task(*, name: str, t_lo: float, t_hi: float, num: int, cap: int, chain_runs: int,
                chain_budget: float, rng: int, t_reach: float | None = None) -> Result:
    """Everything the chapter computes for one configuration of the family (a sweep task).

    The grid: :func:`beta_grid` ``(t_lo, t_hi, num)``, extended at the same spacing until the measured
    ``T2`` reaches ``t_reach`` (``None``: not extended; the last beta is the first whose ``T2`` reaches
    it). On it: ``T2_sabeta`` with ``T2_sabeta_censored`` (True: no exit within ``cap``, the time then
    ``cap``: the library's one "no exit" marker, as in
    :class:`~attention_fw.experiments.exit_times.ExitSample`), ``T2_reduced`` with
    ``T2_reduced_censored`` (the reduced model, the same marker),
    ``T2_lead`` (its leading order), ``T2_ode`` (its next order,
    :func:`attention_fw.experiments.sabeta_exponent.drift_integral_exit`) with its exponent ``c_ode``
    ± ``c_ode_err``, the settled points' smallest gap ``gap``; and the chain (SAP) with the same ``B``
    by the rejection-free engine
    (:func:`attention_fw.experiments.exit_times.engine_exit_times`, ``chain_runs`` runs, each beta
    with its own seed ``chain_seed`` from the configuration's name, beta and ``rng``): at every beta
    when the engine is efficient there (coincident groups in the single-jump regime, or one token per
    vertex), otherwise only at the betas whose (SA-beta) time is at most ``chain_budget``. Where no
    run was censored, ``T2_sap_mean`` is the sample mean with its 95% interval ``T2_sap_ci`` from
    the sample (Student t on the sample variance) and ``T2_sap_se_log`` the standard error of its
    log; with censored runs, the censored exponential fit's mean and Wald interval (``se_log`` NaN:
    left out of rate fits); NaN where not computed. Returns the configuration's entries too.

    Examples
    --------
    >>> r = family_task(
    ...     name="triangle, 1 per vertex",
    ...     t_lo=10,
    ...     t_hi=100,
    ...     num=3,
    ...     cap=10**4,
    ...     chain_runs=50,
    ...     chain_budget=100,
    ...     rng=0,
    ... )
    >>> (
    ...     r.T2_sabeta.shape,
    ...     bool(not r.T2_sabeta_censored.any()),
    ...     bool(np.all(np.isfinite(r.T2_sap_mean))),
    ... )
    ((3,), True, True)
    """
    cfg = family_configuration(name)
    base = int(V.rng("rng", rng).integers(2**62))     # the same for the same seed as an int, SeedSequence or Generator
    betas, T, T_cens = _reach_grid(cfg, t_lo, t_hi, num, t_reach, cap)
    num = len(betas)
    red = reduced_exit_times(cfg.x0, cfg.sigma, cfg.gamma, betas, cfg.eps, B=cfg.B, cap=cap)
    lead = leading_order_exit(cfg.x0, cfg.sigma, cfg.gamma, betas, cfg.eps, B=cfg.B)
    T_ode, c_ode, c_ode_err = _model_times(cfg, betas)
    n, kappa = len(cfg.x0), len(cfg.vertices)
    vd = spatial.distance.pdist(cfg.vertices).min()
    efficient = cfg.coincident and (n == kappa or cfg.eps < cfg.gamma * vd)
    mean = np.full(num, np.nan)
    ci = np.full((num, 2), np.nan)
    se_log = np.full(num, np.nan)
    cens = np.zeros(num, np.int64)
    seeds = np.zeros(num, np.int64)
    Bk = None if cfg.hypotheses.B_identity else cfg.B
    for k, b in enumerate(betas):
        seeds[k] = chain_seed(name, float(b), base)
        if not efficient and (T_cens[k] or T[k] > chain_budget):
            continue
        ccap = 1e300 if efficient else 50.0 * chain_budget
        es = engine_exit_times(cfg.x0, cfg.sigma, cfg.gamma, b, cfg.eps, chain_runs, rng=int(seeds[k]), B=Bk,
                               cap=ccap, max_events=10_000 if efficient else int(60 * chain_budget))
        f = fit_exponential_censored(es.times, es.censored)
        cens[k] = f.n_censored
        if f.n_censored == 0:
            m, lo, hi = mean_interval(es.times)
            mean[k], ci[k] = m, (lo, hi)
            if chain_runs > 1 and m > 0:
                se_log[k] = float(np.std(es.times, ddof=1) / math.sqrt(chain_runs) / m)
        elif f.n_exits:
            mean[k] = f.mean
            ci[k] = np.exp(f.log_mean_ci)
    return Result(name=name, betas=betas, x0=cfg.x0, sigma=cfg.sigma, B=cfg.B, gamma=cfg.gamma, eps=cfg.eps,
                  cap=cap, T2_sabeta=T, T2_sabeta_censored=T_cens, T2_reduced=red.times,
                  T2_reduced_censored=red.censored, T2_lead=lead.T, T2_ode=T_ode, c_ode=c_ode,
                  c_ode_err=c_ode_err, gap=lead.gap,
                  contraction_steps=red.contraction_steps, T2_sap_mean=mean, T2_sap_ci=ci, T2_sap_se_log=se_log,
                  sap_censored=cens, chain_seed=seeds, chain_runs=chain_runs, c0=cfg.c0, hypotheses=dict(cfg.hypotheses),
                  rho=cfg.rho, kappa=kappa, d=cfg.x0.shape[1], n=n, chain_efficient=bool(efficient),
                  coincident=bool(cfg.coincident))
