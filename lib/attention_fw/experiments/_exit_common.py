"""What every exit-time function shares: the result :class:`ExitSample`, the checks of the common
arguments (``x0, sigma, gamma, beta, eps``, ``watch``, ``B``) and the exit region.

A low-level module imported by :mod:`attention_fw.experiments.exit_times` (the chain) and by
:mod:`attention_fw.experiments.sabeta_kernel` (the deterministic dynamics), so that the two speak one
API without importing each other. Its public name, :class:`ExitSample`, is re-exported (and
documented) by :mod:`attention_fw.experiments.exit_times`.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .. import _validate as V
from ..geometry.polytope import HullDistance
from ..results import ExitTimes
from .survival import kaplan_meier

__all__ = ["ExitSample"]


class _ExitRegion:
    """Precomputed exit region ``conv{x_k^0 : sigma_k = sigma_j} + B(0, eps)`` of every token."""

    def __init__(self, x0, sigma, eps, watch=None):
        self.eps = eps
        n = len(x0)
        watch = np.ones(n, bool) if watch is None else watch
        groups = [x0[sigma == g] for g in range(int(sigma.max()) + 1)]
        point = np.array([len(np.unique(groups[g], axis=0)) == 1 for g in sigma])
        self.pt_idx = np.flatnonzero(watch & point)           # tokens whose hull is a point
        self.pt_center = x0[self.pt_idx]
        self.hull_sets = [(np.flatnonzero(watch & ~point & (sigma == g)), groups[g])
                          for g in range(len(groups))]
        self.hull_sets = [(i, HullDistance(P)) for i, P in self.hull_sets if i.size]

    def __call__(self, x):
        """x (R, n, d) -> bool (R,): True where some watched token is outside its region."""
        out = np.zeros(x.shape[0], bool)
        if self.pt_idx.size:
            diff = x[:, self.pt_idx] - self.pt_center
            out |= np.any(np.einsum("rjd,rjd->rj", diff, diff) > self.eps ** 2, axis=1)
        for idx, hd in self.hull_sets:
            out |= np.any(hd(x[:, idx]) > self.eps, axis=1)
        return out


class ExitSample(ExitTimes):
    """:class:`attention_fw.results.ExitTimes` (the one exit-time result) with the Kaplan-Meier curve.

    No run is ever dropped: a censored run contributes ``T2 > times[r]`` to the fits.

    Examples
    --------
    Exits at 3 and 5, one run censored at 10; the Kaplan-Meier ``P[T2 >= t]`` drops by
    1/3 at the first exit (3 at risk) and by half at the second (2 at risk):

    >>> es = ExitSample(
    ...     times=np.array([3.0, 5.0, 10.0]),
    ...     censored=np.array([False, False, True]),
    ...     cap=10.0,
    ... )
    >>> es.n_censored, es.survival([1, 4, 6]).round(6)
    (1, array([1.      , 0.666667, 0.333333]))
    """

    def survival(self, t: npt.ArrayLike) -> np.ndarray:
        """Empirical ``P[T2 >= t]`` (:func:`attention_fw.experiments.survival.kaplan_meier`)."""
        return kaplan_meier(self.times, self.censored, t)


ExitSample.__module__ = "attention_fw.experiments.exit_times"     # its documented home (and pickles' name)


def _watch(watch, n):
    if watch is None:
        return None
    w = np.asarray(watch)
    if w.shape != (n,) or w.dtype != bool or not w.any():
        raise ValueError(f"watch must be a boolean array of shape ({n},) with at least one True")
    return w


def _check_common(x0: npt.ArrayLike, sigma: npt.ArrayLike, gamma: float, beta: float,
                  eps: float) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    x0 = V.tokens("x0", x0, batched_ok=False)
    n = len(x0)
    sigma = np.asarray(sigma)
    if sigma.shape != (n,) or sigma.dtype.kind not in "iu" or sigma.min() < 0:
        raise ValueError(f"sigma must be a non-negative integer array of shape ({n},)")
    gamma = V.step_size("gamma", gamma)
    beta = V.real_scalar("beta", beta, low=0)
    eps = V.real_scalar("eps", eps, low=0, low_open=True)
    return x0, sigma.astype(np.intp), gamma, beta, eps


def _key_query(B, d):
    """``None`` for the identity (the standing choice of Section 5), else the checked (d, d) matrix.

    Theorem 5.4's setting, which the exit time ``T2`` and its regions belong to: ``B`` symmetric
    positive definite (and ``V = gamma I``, built into the steps); anything else is refused.
    """
    if B is None:
        return None
    Bm = V.square_matrix("B", B, d, symmetric=True)
    w = np.linalg.eigvalsh(Bm)
    if not w.min() > 1e-12 * max(1.0, abs(w).max()):
        raise ValueError(f"B must be positive definite (B > 0, the hypothesis of Theorem 5.4's exit times), "
                         f"got smallest eigenvalue {w.min():.3g}")
    return Bm
