"""Score scaling shared by the dense and the tiled steps: scores that neither overflow nor all underflow.

Tokens are scaled by a power of two (exact to multiply and divide by) and ``beta`` by its
inverse square, which leaves ``beta <B x_i, x_j>``, hence the weights and the leader sets, unchanged.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["SCORE_LIMIT", "SCORE_TINY", "max_sq_norm", "scores_fit", "norm", "rescaled", "fit_scores"]

SCORE_LIMIT, SCORE_TINY = 1e300, 1e-200


def max_sq_norm(x) -> float:
    """``max_i |x_i|^2`` (inf if it overflows, without a warning; NaN if x has NaN)."""
    with np.errstate(over="ignore"):
        return float(np.einsum("...i,...i->...", x, x).max())


def scores_fit(top_sq, B):
    """False when the scores ``<B x_i, x_j>`` could overflow, or all underflow, given ``max_i |x_i|^2``.

    That is tokens of norm above about 1e150, or all of them below about 1e-100 (``top_sq = 0``
    is ambiguous: all tokens at 0, or squares underflowing; :func:`rescaled` decides). The steps
    then work on the tokens scaled by a power of two.
    """
    return SCORE_TINY <= top_sq <= SCORE_LIMIT / (1.0 if B is None else norm(B))


def norm(B):
    return max(float(np.linalg.norm(B)), 1e-300)


def rescaled(x):
    """A power of two ``c`` with ``1/2 <= max |c x_ik| < 1`` (exact to multiply and divide by).

    None when there is nothing to rescale: x = 0, or x already in that range (c would be 1).
    """
    m = float(np.abs(x).max())
    if m == 0.0 or 0.5 <= m < 1.0:
        return None
    # Subnormal tokens would need c > 2^1023 (not a double): stop at 2^1000, which already puts
    # the scores in range (|c x|^2 >= 2^-148 > 1e-200).
    return math.ldexp(1.0, min(-math.frexp(m)[1], 1000))


def fit_scores(x, B, beta, top=None):
    """``(x', beta', c)`` with ``x' = c x``, ``beta' <B x'_i, x'_j> = beta <B x_i, x_j>`` and scores that neither
    overflow nor all underflow (``top = max_i |x_i|^2`` if known).

    ``c`` a power of two (exact) when needed, else 1 and ``x' = x``. When even then
    ``beta' |B| max|x'_i|^2`` would pass 1e300, ``beta'`` is capped there: the weights are then the
    hardmax ones to double precision either way.
    """
    if top is None:
        top = max_sq_norm(x)
    nrm = 1.0 if B is None else norm(B)
    if scores_fit(top, B) and beta * nrm * top <= SCORE_LIMIT:
        return x, beta, 1.0
    c = rescaled(x) or 1.0
    xs = x if c == 1.0 else x * c
    top_s = top if c == 1.0 else max_sq_norm(xs)
    if top_s == 0.0:
        return x, beta, 1.0
    b = min(beta / c / c, SCORE_LIMIT / (nrm * top_s))
    return xs, (0.0 if b < 1e-300 else b), c
