"""Exact Bernoulli draws of tiny probabilities, shared by the (SAP) steps of ``dynamics`` and ``tiled``."""
from __future__ import annotations

import numpy as np

from .. import _validate as chk

__all__ = ["SMALL_WEIGHT", "TAIL_CHUNK", "bernoulli_from_neg_log"]

SMALL_WEIGHT = 2.0 ** -26  # sap_step: weights below this (relative to the largest) form the tail group
TAIL_CHUNK = 30.0  # -log-probability handled by one exponential draw (numpy's Exp(1) reaches ~44)


def bernoulli_from_neg_log(t, *, rng) -> np.ndarray:
    """Independent Bernoulli(``exp(-t)``) draws for an array ``t >= 0``, exact however small ``exp(-t)``.

    ``P(E > t) = exp(-t)`` for ``E ~ Exp(1)``, but a double-precision exponential variate never
    exceeds about 44, so ``t`` is cut into pieces of at most ``TAIL_CHUNK``: by memorylessness
    the event is that independent ``E_1 > t_1, E_2 > t_2, ...``, and the later draws are made
    only for the (rare) entries that passed the earlier ones. ``t = inf`` gives False.

    Examples
    --------
    >>> bernoulli_from_neg_log(np.array([0.0, np.inf]), rng=0)
    array([ True, False])
    """
    t = chk.as_float_array("t", t, finite=False, allow_empty=True)
    if np.isnan(t).any() or (t < 0).any():
        raise ValueError("t must hold -log-probabilities: numbers >= 0 or inf, no NaN")
    return _bernoulli(t, chk.rng("rng", rng))


def _bernoulli(t, rng):
    """:func:`bernoulli_from_neg_log` without the checks (``t`` a float array >= 0 or inf,
    ``rng`` a Generator): the same draws from the same stream, for callers in a loop over tiles."""
    step = np.minimum(t, TAIL_CHUNK)
    hit = rng.standard_exponential(t.shape) > step
    rest = np.where(np.isinf(t), 0.0, t - step)
    hit &= np.isfinite(t)
    todo = hit & (rest > 0)
    while todo.any():
        step = np.minimum(rest[todo], TAIL_CHUNK)
        hit[todo] = rng.standard_exponential(step.shape) > step
        rest[todo] -= step
        todo = hit & (rest > 0)
    return hit
