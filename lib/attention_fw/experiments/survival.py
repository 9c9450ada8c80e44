"""What do right-censored exit times say? Censored maximum-likelihood fits and survival curves.

The exit times of :mod:`attention_fw.experiments.exit_times` are censored at a cap (a run that has not
exited counts as ``T2 > cap``, never dropped). Here: the maximum-likelihood fit of a
geometric or exponential law to such data with a confidence interval for the log of the
mean, the weighted fit of ``log E[T2]`` against ``beta`` (the slope Theorem 5.4 is about),
and the Kaplan-Meier estimate of ``P[T2 >= t]``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats

from .. import _validate as V
from ..results import Result

__all__ = ["CensoredFit", "fit_geometric_censored", "fit_exponential_censored", "fit_log_mean_slope",
           "kaplan_meier"]


def kaplan_meier(times: npt.ArrayLike, censored: npt.ArrayLike, t: npt.ArrayLike) -> np.ndarray:
    """Empirical ``P[T >= t]`` from right-censored ``times`` (Kaplan-Meier).

    Equals the plain fraction of runs with ``T >= t`` when every censoring time is a common
    cap. Valid for ``t`` up to the smallest censoring time.

    Examples
    --------
    >>> kaplan_meier(
    ...     [1.0, 2.0, 3.0, 10.0], np.array([False, False, False, True]), [1, 2, 4]
    ... )
    array([1.  , 0.75, 0.25])
    """
    T, c = _times(times, censored)
    t = np.atleast_1d(np.asarray(t, float))
    order = np.argsort(T, kind="stable")
    T, c = T[order], c[order]
    at_risk = len(T) - np.arange(len(T))
    factors = np.where(c, 1.0, 1.0 - 1.0 / at_risk)
    surv_after = np.cumprod(factors)                          # S just after T[k]
    k = np.searchsorted(T, t, side="left")                    # number of times < t
    return np.where(k == 0, 1.0, surv_after[np.maximum(k - 1, 0)])


@dataclass
class CensoredFit:
    """Maximum-likelihood fit of a geometric (or exponential) law to right-censored times.

    Returned by :func:`fit_geometric_censored` and :func:`fit_exponential_censored`.

    Examples
    --------
    >>> fit = fit_exponential_censored([1.0, 3.0], np.array([False, False]))
    >>> # exponential median: log(2) / rate
    >>> fit.model, fit.rate, fit.n_exits, round(fit.median, 6)
    ('exponential', 0.5, 2, 1.386294)
    >>> # p = 1/8
    >>> fit_geometric_censored([2.0, 4.0, 10.0], np.array([False, False, True])).median
    6.0

    The geometric median is the smallest ``t`` with ``1 - (7/8)^t >= 1/2``: ``(7/8)^5 = 0.51``, ``(7/8)^6 = 0.45``.
    """
    model: str
    rate: float            # geometric: success probability p; exponential: rate lambda
    mean: float            # 1 / rate (inf when no exit was observed)
    log_mean_ci: tuple     # confidence interval for log(mean), Wald on the log scale
    n: int
    n_exits: int
    n_censored: int
    exposure: float        # sum of all observed times (exits and censoring times)
    level: float

    @property
    def median(self) -> float:
        """Median of the fitted law (for the geometric law the smallest t with P(T <= t) >= 1/2)."""
        if self.rate <= 0:
            return math.inf
        if self.model == "geometric":
            return float(math.ceil(-math.log(2) / math.log1p(-self.rate))) if self.rate < 1 else 1.0
        return math.log(2) / self.rate


def _times(times, censored):
    T = V.as_float_array("times", times, ndim=1, finite=True)
    c = np.asarray(censored)
    if c.shape != T.shape or c.dtype != bool:
        raise ValueError("censored must be a boolean array with the shape of times")
    return T, c


def fit_geometric_censored(times: npt.ArrayLike, censored: npt.ArrayLike, level: float = 0.95) -> CensoredFit:
    """MLE of a geometric law on {1, 2, ...} from right-censored data.

    Exits contribute ``(1-p)^{T-1} p``, censored runs ``P(T > c) = (1-p)^c``, hence
    ``p_hat = D / (sum of exit times + sum of censoring times)`` with D the number of exits.
    The interval for ``log(1/p)`` uses the observed information,
    ``se(log p_hat) = sqrt((1 - p_hat) / D)``. With ``D = 0`` the MLE is ``p = 0`` (mean
    infinite); the interval is then the one-sided ``[log(exposure / -log(1 - level)), inf)``.

    Examples
    --------
    >>> fit = fit_geometric_censored([2.0, 4.0, 10.0], np.array([False, False, True]))
    >>> # 2 exits / 16 steps of exposure
    >>> fit.rate, fit.mean, fit.n_censored
    (0.125, 8.0, 1)
    """
    return _censored_rate_fit("geometric", times, censored, level, lambda p, D: math.sqrt(max(1 - p, 0.0) / D))


def fit_exponential_censored(times: npt.ArrayLike, censored: npt.ArrayLike, level: float = 0.95) -> CensoredFit:
    """MLE of an exponential law from right-censored data: ``lambda_hat = D / sum(times)``,
    ``se(log lambda_hat) = 1 / sqrt(D)``.

    Examples
    --------
    >>> fit = fit_exponential_censored([1.0, 2.0, 3.0], np.array([False, False, False]))
    >>> # no censoring: 1 / (mean of the times)
    >>> fit.rate, fit.mean
    (0.5, 2.0)
    >>> # 2 exits / 8 time units
    >>> fit_exponential_censored([1.0, 2.0, 5.0], np.array([False, False, True])).rate
    0.25
    """
    return _censored_rate_fit("exponential", times, censored, level, lambda lam, D: 1 / math.sqrt(D))


def _censored_rate_fit(kind, times, censored, level, se_log_rate) -> CensoredFit:
    """Shared MLE of the geometric and exponential laws from right-censored data.

    Both estimate the rate as (number of exits D) / (total exposure), the mean as its inverse,
    and give a normal interval for the log of the mean with standard error
    ``se_log_rate(rate, D)``; with no exit the interval is one-sided (see the callers).
    """
    T, c = _times(times, censored)
    level = V.real_scalar("level", level, low=0, high=1, low_open=True, high_open=True)
    D = int(np.count_nonzero(~c))
    expo = float(T.sum())
    z = stats.norm.ppf(0.5 + level / 2)
    if D == 0:
        return CensoredFit(kind, 0.0, math.inf, (math.log(expo / -math.log1p(-level)), math.inf),
                           len(T), 0, len(T), expo, level)
    rate = D / expo
    se = se_log_rate(rate, D)
    lm = -math.log(rate)
    return CensoredFit(kind, rate, 1 / rate, (float(lm - z * se), float(lm + z * se)), len(T), D, len(T) - D, expo, level)


def fit_log_mean_slope(betas: npt.ArrayLike, fits: Sequence[CensoredFit], level: float = 0.95) -> Result:
    """Weighted least-squares line ``log E[T2] = a + s beta`` through censored fits.

    Weights are the inverse variances of ``log(mean)`` from each fit. Returns the slope, the
    intercept, the standard error of the slope, its ``level`` confidence interval (normal) and the
    weights, as a Result with ``slope``, ``intercept``, ``slope_se``, ``slope_ci``, ``level`` and ``weights``.

    Examples
    --------
    >>> betas = [1.0, 2.0, 3.0]
    >>> fits = [
    ...     fit_exponential_censored(np.full(4, np.exp(0.5 * b)), np.zeros(4, bool))
    ...     for b in betas
    ... ]
    >>> # the means are exactly exp(0.5 beta)
    >>> res = fit_log_mean_slope(betas, fits)
    >>> (
    ...     round(res.slope, 6),
    ...     round(res.intercept, 6) + 0.0,
    ...     res.slope_ci[0] < 0.5 < res.slope_ci[1],
    ... )
    (0.5, 0.0, True)
    """
    b = V.as_float_array("betas", betas, ndim=1)
    if len(fits) != len(b) or len(b) < 2:
        raise ValueError("fits must hold one CensoredFit per beta (at least 2)")
    y = np.array([math.log(f.mean) for f in fits])
    z = stats.norm.ppf(0.5 + level / 2)
    se = np.array([(f.log_mean_ci[1] - f.log_mean_ci[0]) / (2 * stats.norm.ppf(0.5 + f.level / 2)) for f in fits])
    if not np.all(np.isfinite(y)) or not np.all(se > 0):
        raise ValueError("every fit must have at least one exit and a positive standard error")
    w = 1 / se ** 2
    X = np.stack([np.ones_like(b), b], axis=1)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    a, s = cov @ (X.T @ (w * y))
    ses = math.sqrt(cov[1, 1])
    return Result(slope=float(s), intercept=float(a), slope_se=ses,
                  slope_ci=(float(s - z * ses), float(s + z * ses)), level=level, weights=w)


