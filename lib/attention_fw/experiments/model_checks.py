"""How close are the forms of the model to one another (the numerical checks of section 1)?

* :func:`beta_limit`: the renormalised layer (1.3) at finite ``beta`` against its hardmax limit,
  with the smallest score gap met along the hardmax trajectory;
* :func:`sap_mean`: the Monte Carlo mean of one (SAP) step against the (SA-beta) step.

Each returns a :class:`attention_fw.results.Result`; :mod:`attention_fw.plot.model` draws them.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import numpy.typing as npt

from .._validate import SeedLike
from ..model import dynamics as dyn
from ..results import Result

__all__ = ["beta_limit", "held_out_constant", "sap_mean", "score_gap"]


def score_gap(x: npt.ArrayLike, t: int | None = None) -> np.ndarray:
    """Smallest margin between the best and the second-best score ``<x_i, x_j>``, per system.

    Examples
    --------
    >>> # row margins 1 - 0.5, 4 - 1, 1 - 0.5
    >>> float(score_gap(np.array([[1.0, 0.0], [0.0, 2.0], [0.5, 0.5]])))
    0.5
    """
    S = np.sort(dyn.scores(x), axis=-1)
    return (S[..., -1] - S[..., -2]).min(axis=-1)


def beta_limit(x0: npt.ArrayLike, betas: Iterable[float], h: float, steps: int) -> Result:
    """Distance after ``steps`` layers (1.3) (``B = I``, ``V = h I``) between finite ``beta`` and hardmax.

    Returns ``errors`` (len(betas), systems), its ``median`` and ``worst`` over systems, the
    smallest hardmax score gap ``Delta`` per system (layers 0..steps-1), ``bD = beta * Delta``
    and ``const``: the largest ``error * exp(beta Delta)`` over the points with ``beta Delta > 10``.

    Examples
    --------
    >>> res = beta_limit(
    ...     np.array([[[1.0, 0.0], [0.0, 2.0], [0.5, 0.5]]]), [1.0, 100.0], 0.25, 3
    ... )
    >>> bool(res.errors[1, 0] < 1e-12 < res.errors[0, 0])
    True
    """
    x0 = np.asarray(x0, dtype=float)
    eye, betas = np.eye(x0.shape[-1]), [float(b) for b in betas]
    gaps = dyn.FunctionRecorder("gap", score_gap)
    hard = dyn.simulate(x0, dyn.Layer(np.inf, eye, h * eye), steps, recorders=[gaps]).x
    Delta = gaps.result()[:-1].min(axis=0)
    errors = np.array([np.linalg.norm(dyn.simulate(x0, dyn.Layer(b, eye, h * eye), steps).x - hard,
                                      axis=-1).max(axis=-1) for b in betas])
    bD = np.array(betas)[:, None] * Delta[None, :]
    const = _envelope(errors, bD, bD > 10)
    return Result(betas=betas, steps=steps, h=h, errors=errors, median=np.median(errors, axis=1),
                  worst=errors.max(axis=1), Delta=Delta, bD=bD, const=const)


def _envelope(errors: np.ndarray, bD: np.ndarray, where: np.ndarray) -> float:
    """The largest ``error * exp(beta Delta)`` over the points ``where`` (NaN when there is none).

    Computed as ``exp(log(error) + beta Delta)``: at large ``beta Delta`` the product of an error
    that rounds to 0 and an exponential that overflows would be NaN; an error of exactly 0 lies
    under every line and counts as 0.
    """
    if not where.any():
        return float("nan")
    e, b = errors[where], bD[where]
    with np.errstate(divide="ignore"):
        logs = np.where(e > 0, np.log(np.where(e > 0, e, 1.0)) + b, -np.inf)
    return float(np.exp(logs.max()))


def held_out_constant(res: Result) -> tuple[float, int, int]:
    """Fit ``const`` on the even systems only; return it, and how many of the odd systems' points
    with ``beta Delta > 10`` lie under its line, out of how many (a check that is not circular).

    Examples
    --------
    >>> from attention_fw.results import Result
    >>> # system 0 (beta Delta <= 10) is ignored
    >>> bD = np.array([[5.0, 11.0, 12.0, 13.0, 14.0]])
    >>> res = Result(bD=bD, errors=2 * np.exp(-bD) * [9.0, 0.5, 1.0, 0.5, 1.0])
    >>> # fitted on systems 2 and 4: const = 2
    >>> const, under, held = held_out_constant(res)
    >>> # the odd systems 1 and 3 lie at half of it
    >>> round(const, 6), under, held
    (2.0, 2, 2)
    """
    far = res.bD > 10
    fit = far & (np.arange(res.errors.shape[1]) % 2 == 0)[None, :]
    held = far & ~fit
    const = _envelope(res.errors, res.bD, fit)
    return const, int((res.errors[held] <= const * np.exp(-res.bD[held])).sum()), int(held.sum())


def sap_mean(x: npt.ArrayLike, gamma: float, beta: float, samples: int, *, rng: SeedLike) -> Result:
    """Monte Carlo mean of ``samples`` independent (SAP) steps from ``x`` against one (SA-beta) step.

    The samples come in doubling batches (1000, 2000, 4000, ..., at most 100,000 at a time);
    ``checkpoints`` and ``errs`` record the largest coordinate error after each batch.
    ``se`` is the standard error of each coordinate of the mean, ``z`` the error in its units.

    Examples
    --------
    >>> res = sap_mean(np.array([[0.0, 0.0], [1.0, 0.0]]), 0.5, 1.0, 4000, rng=0)
    >>> bool(res.z.max() < 5), res.checkpoints
    (True, [1000, 2000, 4000])
    """
    rng = np.random.default_rng(rng)
    x = np.asarray(x, dtype=float)
    target = dyn.softmax_step(x, gamma, beta)
    sums, sq = np.zeros_like(x), np.zeros_like(x)
    checkpoints, errs, done = [], [], 0
    while done < samples:
        m = min(max(done, min(1000, samples)), samples - done, 100_000)
        Y = dyn.sap_step(np.broadcast_to(x, (m,) + x.shape), gamma, beta, rng=rng)
        sums += Y.sum(0)
        sq += (Y ** 2).sum(0)
        done += m
        checkpoints.append(done)
        errs.append(float(np.abs(sums / done - target).max()))
    mean = sums / done
    se = np.sqrt(np.maximum(sq / done - mean ** 2, 0) / done)
    z = np.abs(mean - target) / np.where(se > 0, se, np.inf)
    return Result(x=x, gamma=gamma, beta=beta, target=target, mean=mean, se=se, z=z,
                  checkpoints=checkpoints, errs=errs, weights=dyn.attention(x, beta))
