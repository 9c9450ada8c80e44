"""The reduced model of clustered configurations of (SA-beta): settled points, the weighted kappa-point
dynamics, its leading order.

Part of :mod:`attention_fw.experiments.sabeta` (which re-exports its public names); the next order
(the flow of the settled points) is :func:`attention_fw.experiments.sabeta_exponent.drift_integral_exit`.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _validate as V
from ..geometry.polytope import regular_polygon  # noqa: F401  (the Examples use it)
from ..results import Result
from .sabeta_kernel import _dist2, hull_primitives, sabeta_exit_times

__all__ = ["settled_points", "reduced_exit_times", "leading_order_exit"]

# ----------------------------------------------------------------------------------------
# the reduced model
# ----------------------------------------------------------------------------------------

def settled_points(x0, sigma, gamma: float, beta, *, B=None, tol: float = 1e-13, max_steps: int = 10**6,
                   chunk: int = 500) -> Result:
    """Where each cluster of (SA-beta) contracts to when it is left alone: the point ``p_g(beta)``.

    Group ``g`` (the tokens with ``sigma = g``) is run by (SA-beta) *on its own* (no other group
    present) until its diameter is below ``tol`` times the size of the configuration
    (Proposition 5.1 for that group: it collapses to a point of its own hull). At large ``beta``
    the weights inside a cluster tend to hardmax, every token follows its leader and the point
    tends to the group's extreme token (the vertex); at small ``beta`` it tends to the mean of the
    group. Batched over the groups and ``beta`` (one kernel call per chunk of steps).

    Returns a Result with ``points`` (len(beta), kappa, d), ``masses`` (kappa,) (tokens per
    group), ``labels`` (kappa,) and ``steps`` (len(beta), kappa) (the steps the collapse took).

    Examples
    --------
    Two tokens of one group at (1, 0) and (0.9, 0): at ``beta = 0`` both move to their mean, so
    the point is 0.95; at larger beta the token nearer the vertex (larger inner products) wins:

    >>> x0 = np.array([[1.0, 0.0], [0.9, 0.0], [-1.0, 0.0]])
    >>> sp = settled_points(x0, [0, 0, 1], 0.1, [0.0, 20.0])
    >>> sp.points[:, 0, 0].round(6).tolist(), sp.masses.tolist()
    ([0.95, 0.972197], [2.0, 1.0])
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    sigma = np.asarray(sigma)
    if sigma.shape != (len(x0),) or sigma.dtype.kind not in "iu":
        raise ValueError(f"sigma must be integer labels, one per token ({len(x0)})")
    gamma = V.step_size("gamma", gamma)
    betas = V.as_float_array("beta", beta, min_ndim=0).reshape(-1)
    tol = V.real_scalar("tol", tol, low=0, low_open=True)
    labels = np.unique(sigma)
    groups = [x0[sigma == g] for g in labels]
    size = max(float(np.ptp(x0, axis=0).max()), 1e-300)
    sys_x = [g for _ in betas for g in groups]
    sys_b = np.repeat(betas, len(groups))
    x = [a.copy() for a in sys_x]
    steps = np.zeros(len(x), np.int64)
    todo = [k for k in range(len(x)) if len(x[k]) > 1]
    while todo:
        res = sabeta_exit_times([x[k] for k in todo], [np.zeros(len(x[k]), np.int64) for k in todo], gamma,
                                sys_b[todo], np.inf, B=B, cap=chunk)
        left = []
        for k, xn in zip(todo, res.final):
            x[k] = xn
            steps[k] += chunk
            if np.ptp(xn, axis=0).max() > tol * size and steps[k] < max_steps:
                left.append(k)
        todo = left
    pts = np.array([a.mean(axis=0) for a in x]).reshape(len(betas), len(groups), x0.shape[1])
    return Result(points=pts, masses=np.array([len(g) for g in groups], float), labels=labels,
                  steps=steps.reshape(len(betas), len(groups)))


def reduced_exit_times(x0, sigma, gamma: float, beta, eps: float, *, B=None, cap=10**7) -> Result:
    """Exit time ``T2`` of (SA-beta) predicted by the reduced model of clustered configurations.

    Derivation. In a clustered configuration (every group of tokens close to its vertex, the
    groups far apart) the (SA-beta) weights split into intra-group weights of order 1 and
    inter-group weights ``A_ij ≈ (m_h / m_g) e^{-beta (<B p_g, p_g> - <B p_g, p_h>)}`` for ``i`` in
    group g, ``j`` in group h. Two time scales follow:

    1. *fast*: each group contracts, as if it were alone, to a point ``p_g(beta)`` in about
       ``log(spread / tol) / gamma`` steps (:func:`settled_points`); where it settles depends on
       beta (hardmax-like weights at large beta pull it to the vertex, near-uniform weights at
       small beta to the group's mean) and on the group's tokens;
    2. *slow*: coincident tokens stay coincident under (SA-beta), so once contracted the system
       **is** the kappa-point (SA-beta) with masses ``m_g`` (the group sizes), whose points drift
       at speeds ``gamma sum_h (m_h / m_g) e^{-beta gap_gh} |p_h - p_g|``,
       ``gap_gh = <B p_g, p_g> - <B p_g, p_h>``, until one leaves
       ``conv{x_k^0 : sigma_k = g} + B(0, eps)``.

    The model steps (2) exactly from the points of (1) (its clock starts at 0 at the settled
    points). Assumptions: the groups are separated (every inter-group gap at the settled points is
    positive, so the inter-group weights are exponentially small) and no token leaves its region
    during the contraction. Leading-order error: the contraction takes ``T_A`` steps, during which
    the inter-group pull (``O(e^{-beta gap})`` per step) is ignored and the clock is shifted by at
    most ``T_A``; so ``T2_reduced / T2 - 1 = O(T_A / T2)``, which vanishes like ``e^{-beta gap}``
    as ``beta`` grows. It fails when the scales do not separate: at small ``beta``, where ``T2``
    is of the order of ``T_A`` (the exit happens during the contraction), and when a group's
    settled point is not separated from another group's.

    Returns a Result with the exit times as :class:`~attention_fw.experiments.exit_times.ExitSample`
    gives them: ``times`` (len(beta),) the model's exit steps, or ``cap`` where it does not exit within
    ``cap``, with ``censored`` (len(beta),) True there (the library's one "no exit" marker) and
    ``cap``; and ``points``, ``masses`` and ``contraction_steps`` of :func:`settled_points`.

    Examples
    --------
    Coincident clusters are already contracted, so there the model *is* (SA-beta): the same T.

    >>> v = regular_polygon(3)
    >>> x0, sigma = np.repeat(v, 2, axis=0), np.repeat([0, 1, 2], 2)
    >>> red = reduced_exit_times(x0, sigma, 0.1, [3.0, 5.0], 0.05)
    >>> det = sabeta_exit_times(x0, sigma, 0.1, [3.0, 5.0], 0.05)
    >>> red.times.tolist() == det.times.tolist(), red.censored.tolist()
    (True, [False, False])
    >>> # no exit within the cap: censored there, the time then the cap
    >>> late = reduced_exit_times(x0, sigma, 0.1, [3.0, 5.0], 0.05, cap=100)
    >>> late.times.tolist(), late.censored.tolist()
    ([13.0, 100.0], [False, True])
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    sigma = np.asarray(sigma)
    betas = V.as_float_array("beta", beta, min_ndim=0).reshape(-1)
    sp = settled_points(x0, sigma, gamma, betas, B=B)
    pts = [p for p in sp.points]
    res = sabeta_exit_times(pts, [sp.labels] * len(betas), gamma, betas, eps, B=B, cap=cap,
                            mass=[sp.masses] * len(betas), region=[(x0, sigma)] * len(betas))
    return Result(times=res.times, censored=res.censored, cap=res.cap, points=sp.points, masses=sp.masses,
                  contraction_steps=sp.steps.max(axis=1))


class _GroupDistance:
    """Exact distance to ``conv(points)`` through the kernel's primitives (fast, for many queries)."""

    def __init__(self, points):
        hp = hull_primitives(points)
        self.d = hp.corners.shape[2]
        self.args = (np.array([0]), np.array([len(hp.halfspaces)]), np.ascontiguousarray(hp.halfspaces).reshape(-1, self.d + 1),
                     np.array([0]), np.array([len(hp.kinds)]), hp.kinds, np.ascontiguousarray(hp.corners))

    def __call__(self, p, eps):
        """The distance when it is at most ``eps``, a number above ``eps`` otherwise."""
        lo, hi, HS, plo, phi, PK, PC = self.args
        return math.sqrt(_dist2(np.ascontiguousarray(p, dtype=float), 0, eps, lo, hi, HS, plo, phi, PK, PC, self.d))


def _ray_exit(p, u, gd, eps):
    """Smallest s >= 0 with dist(p + s u, hull) = eps (u a unit vector, gd a _GroupDistance; inf if never)."""
    def out(s):
        return gd(p + s * u, eps) > eps
    if out(0.0):
        return 0.0
    hi = 1.0
    while not out(hi):
        hi *= 2
        if hi > 1e6:
            return math.inf
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if out(mid) else (mid, hi)
    return hi


def leading_order_exit(x0, sigma, gamma: float, beta, eps: float, *, B=None) -> Result:
    """The reduced model to leading order: constant drift of the settled points.

    Group g's point moves by ``u_g = gamma sum_{h != g} (m_h / m_g) e^{-beta gap_gh} (p_h - p_g)``
    per step (the inter-group weights at first order), so it reaches the boundary of its exit
    region after ``s_g / |u_g|`` steps, ``s_g`` the distance along ``u_g`` from ``p_g`` to that
    boundary. ``T_lead = min_g s_g / |u_g|`` and its rate ``d log T_lead / d beta`` is about the
    smallest gap ``min_h gap_gh`` *at the settled points*: the effective barrier of (SA-beta),
    below ``c0`` when the points sit inside the vertices. It ignores the change of speed along
    the way (the speed grows by a factor ``e^{beta O(eps)}`` while a point moves by ``eps``),
    so it overestimates ``T2`` by a factor that does not vanish as beta grows; it is an
    explanation of the rate, not a prediction of ``T2`` (that is :func:`reduced_exit_times`).

    Returns a Result with ``T`` (len(beta),), ``gap`` (len(beta),) (the smallest gap of the exiting
    group), ``points`` and ``group`` (the exiting group per beta).

    Examples
    --------
    One token per vertex of the equilateral triangle: the gap is ``c0 = 3/2`` at every beta:

    >>> lo = leading_order_exit(regular_polygon(3), [0, 1, 2], 0.1, [5.0, 10.0], 0.05)
    >>> lo.gap.round(12).tolist(), bool(lo.T[1] / lo.T[0] > math.exp(1.5 * 5) * 0.99)
    ([1.5, 1.5], True)
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    sigma = np.asarray(sigma)
    betas = V.as_float_array("beta", beta, min_ndim=0).reshape(-1)
    d = x0.shape[1]
    Bm = np.eye(d) if B is None else V.as_float_array("B", B, ndim=2)
    sp = settled_points(x0, sigma, gamma, betas, B=B)
    T = np.full(len(betas), np.inf)
    gaps = np.zeros(len(betas))
    grp = np.zeros(len(betas), np.int64)
    m = sp.masses
    gds = [_GroupDistance(x0[sigma == g]) for g in sp.labels]
    for k, b in enumerate(betas):
        p = sp.points[k]
        S = p @ Bm.T @ p.T                                    # S_gh = <B p_g, p_h>
        gap = np.diag(S)[:, None] - S
        np.fill_diagonal(gap, np.inf)
        for g in range(len(p)):
            wgt = (m / m[g]) * np.exp(-b * np.where(np.isinf(gap[g]), 0.0, gap[g]))
            wgt[g] = 0.0
            u = gamma * (wgt[:, None] * (p - p[g])).sum(axis=0)
            speed = float(np.linalg.norm(u))
            if speed == 0:
                continue
            s = _ray_exit(p[g], u / speed, gds[g], eps)
            if s / speed < T[k]:
                T[k], gaps[k], grp[k] = s / speed, float(gap[g].min()), g
    return Result(T=T, gap=gaps, points=sp.points, group=grp)
