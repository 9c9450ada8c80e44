"""Is the deterministic softmax dynamics (SA-beta) metastable, and how fast does it leave its clusters?

Theorems 5.2 and 5.4 of the paper are proved for the Markov chain (SAP) only. The process a
transformer computes is the deterministic update (SA-beta)

    x_i^{t+1} = x_i^t + gamma (sum_j A_ij(x^t) x_j^t - x_i^t),   A_ij ∝ m_j exp(beta <B x_i, x_j>)

(self-interaction included; the masses ``m_j`` are 1 for tokens, the cluster sizes in the
reduced model). Nothing about its exit times is proved; this module computes them.

* :func:`sabeta_exit_times`: the exit time ``T2`` of Theorem 5.4 for (SA-beta), by exact
  stepping in a compiled kernel, batched over configurations, betas, gammas, key-query matrices
  (one system per core, ``prange``): the first ``t >= 1`` at which some token lies farther than
  ``eps`` from ``conv{x_k^0 : sigma_k = sigma_i}``. No approximation: every step is the full
  softmax update; the exit test is an exact distance to each group's hull (see below).
* :func:`settled_points` and :func:`reduced_exit_times`: the reduced model (its derivation,
  assumptions and leading-order error are in the docstring of :func:`reduced_exit_times`).
* :func:`fit_rate`: the slope of ``log T2`` against ``beta`` with its interval;
  :func:`coupling_distances`: how far one (SAP) path, and the mean of many, are from (SA-beta).
* The exponent ``c_inf`` (a limit, not a slope over a range), the next-order reduced model and the
  chain's intervals: :mod:`attention_fw.experiments.sabeta_exponent`.

The code is split by concept: the kernel (:mod:`~attention_fw.experiments.sabeta_kernel`), the reduced
model (:mod:`~attention_fw.experiments.sabeta_reduced`), the family (:mod:`~attention_fw.experiments.sabeta_family`),
the exponent (:mod:`~attention_fw.experiments.sabeta_exponent`); this module re-exports their public names.

Exact hull test. For each group the hull of its initial tokens is stored as half-spaces
(when it is full-dimensional) and as boundary primitives (points, segments, triangles whose
union is the boundary, or the whole hull when it is lower-dimensional). For a token ``x``:
if some half-space ``<a, x> <= b`` (``|a| = 1``) is violated by more than ``eps``, the distance
exceeds ``eps`` (a lower bound: exit); if none is violated, ``x`` is inside (distance 0);
otherwise the distance is the minimum of the exact distances to the primitives (for a point
outside a convex polytope the nearest point lies on its boundary). Dimensions 1, 2 and 3.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .. import _validate as V
from ..model import dynamics
from ..results import Result
from .sabeta_family import FAMILY, beta_grid, family_configuration, family_task
from .sabeta_kernel import _blk_scores, _blk_sums3, _dist2, _exp_into, _exp_row, hull_primitives, sabeta_exit_times
from .sabeta_reduced import _GroupDistance, leading_order_exit, reduced_exit_times, settled_points

__all__ = ["hull_primitives", "sabeta_exit_times", "settled_points", "reduced_exit_times",
           "leading_order_exit", "fit_rate", "fit_chain_rate", "coupling_distances", "FAMILY", "family_configuration",
           "beta_grid", "family_task"]
# used by the tests and the bench through this module
_PRIVATE = (_dist2, _exp_into, _exp_row, _blk_scores, _blk_sums3, _GroupDistance)

# ----------------------------------------------------------------------------------------
# rates and the coupling
# ----------------------------------------------------------------------------------------

def fit_rate(betas, T, level: float = 0.95, *, censored=None) -> Result:
    """Least-squares line ``log T = a + c beta`` with a ``level`` interval for the rate ``c``.

    For the deterministic (SA-beta) the times carry no noise: the interval (Student t on the
    residuals, n - 2 degrees of freedom) measures how far ``log T`` is from a straight line over
    the grid, i.e. how much the rate changes with beta. The entries marked ``censored`` (the "no
    exit" marker of :func:`sabeta_exit_times`' result, whose time is then the cap) are left out, and
    so are times that are not positive; ``n`` says how many were used (at least 3 are needed
    for an interval).

    Examples
    --------
    >>> r = fit_rate(
    ...     [1.0, 2.0, 3.0, 4.0], np.exp(0.5 * np.array([1.0, 2.0, 3.0, 4.0]) + 2)
    ... )
    >>> (
    ...     round(r.slope, 12),
    ...     round(r.intercept, 12),
    ...     r.n,
    ...     [round(c, 9) for c in r.slope_ci],
    ... )
    (0.5, 2.0, 4, [0.5, 0.5])
    """
    b = V.as_float_array("betas", betas, ndim=1)
    t = V.as_float_array("T", T, ndim=1)
    if t.shape != b.shape:
        raise ValueError("T must hold one time per beta")
    cens = np.zeros(b.shape, bool) if censored is None else np.asarray(censored, bool)
    if cens.shape != b.shape:
        raise ValueError("censored must hold one flag per beta")
    ok = (t > 0) & ~cens
    if ok.sum() < 2:
        raise ValueError("T must hold at least 2 exit times (> 0)")
    bb, y = b[ok], np.log(t[ok])
    lr = stats.linregress(bb, y)
    n = int(ok.sum())
    if n > 2:
        q = stats.t.ppf(0.5 + level / 2, n - 2)
        ci = (float(lr.slope - q * lr.stderr), float(lr.slope + q * lr.stderr))
    else:
        ci = (math.nan, math.nan)
    return Result(slope=float(lr.slope), intercept=float(lr.intercept), slope_ci=ci, n=n, level=level)


def fit_chain_rate(betas, mean, ci, level: float = 0.95) -> Result:
    """Weighted least-squares rate of the chain's mean exit times: ``log mean = a + c beta``.

    ``ci`` (k, 2) are the intervals of the means at ``level`` (Wald on the log scale, as
    :func:`attention_fw.experiments.survival.fit_exponential_censored` gives them); the weights
    are the inverse variances of ``log mean``. Entries with a NaN mean are left out.

    Examples
    --------
    >>> b = np.array([1.0, 2.0, 3.0])
    >>> m = np.exp(2.0 * b)
    >>> r = fit_chain_rate(b, m, np.c_[m / 1.2, m * 1.2])
    >>> round(r.slope, 9), r.n
    (2.0, 3)
    """
    b = V.as_float_array("betas", betas, ndim=1)
    m = np.asarray(mean, float)
    c = np.asarray(ci, float)
    if m.shape != b.shape or c.shape != b.shape + (2,):
        raise ValueError("mean must hold one value and ci one (low, high) pair per beta")
    ok = np.isfinite(m) & np.all(np.isfinite(c), axis=1) & (c[:, 0] > 0)
    if ok.sum() < 2:
        raise ValueError("at least 2 finite means are needed")
    z = stats.norm.ppf(0.5 + level / 2)
    se = (np.log(c[ok, 1]) - np.log(c[ok, 0])) / (2 * z)
    w = 1 / se ** 2
    X = np.stack([np.ones(ok.sum()), b[ok]], axis=1)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    a0, sl = cov @ (X.T @ (w * np.log(m[ok])))
    ses = math.sqrt(cov[1, 1])
    return Result(slope=float(sl), intercept=float(a0), slope_ci=(float(sl - z * ses), float(sl + z * ses)),
                  n=int(ok.sum()), level=level)


def coupling_distances(x0, gamma: float, beta: float, times, runs: int, *, rng) -> Result:
    """How far (SAP) paths are from the (SA-beta) path started at the same ``x0`` (B = I).

    At each step of ``times``: ``one`` (runs, T') the largest token distance
    ``max_i |X_i^t - x_i^t|`` of every chain path to the deterministic path, and ``mean`` (T')
    the same for the empirical mean of the ``runs`` chains, ``max_i |mean_r X_{r,i}^t - x_i^t|``
    (one (SAP) step is one (SA-beta) step in expectation, but the map is not linear, so the
    mean drifts too). The chains are stepped together by :func:`attention_fw.model.dynamics.simulate`.

    Examples
    --------
    At ``t = 0`` every distance is 0; with one token the chain cannot move at all:

    >>> c = coupling_distances(np.array([[1.0, 0.0]]), 0.1, 2.0, [0, 5], 4, rng=0)
    >>> c.one.tolist(), c.mean.tolist()
    ([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    t = np.asarray(times, np.int64)
    if t.ndim != 1 or np.any(t < 0) or np.any(np.diff(t) <= 0):
        raise ValueError("times must be increasing non-negative step numbers")
    runs = V.positive_int("runs", runs)
    det = sabeta_exit_times(x0, np.zeros(len(x0), np.int64), gamma, beta, np.inf, cap=max(int(t[-1]), 1),
                            record_times=t).path[0]
    rec = dynamics.FunctionRecorder("x", lambda x, s: x.copy(), times=t)
    chains = dynamics.simulate(np.broadcast_to(x0, (runs,) + x0.shape), dynamics.MarkovChain(gamma, beta, rng=rng),
                               int(t[-1]), [rec])
    X = np.asarray(chains.records["x"])                          # (T', runs, n, d)
    one = np.linalg.norm(X - det[:, None], axis=-1).max(axis=-1).T
    mean = np.linalg.norm(X.mean(axis=1) - det, axis=-1).max(axis=-1)
    return Result(t=t, one=one, mean=mean, sabeta=det)
