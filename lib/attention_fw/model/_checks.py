"""What the dense steps (``dynamics``) and the tiled steps (``tiled``) share: their input checks and the tie rule.

One copy of each, so that the same bad input gets the same message from both backends and both
pick the same leaders. Neither backend imports the other for these (``dynamics`` imports
``tiled`` only to hand it the steps that do not fit in memory).

The tie rule (Lemma 2.1's sets ``C_i``, by index): ``j`` leads token ``i`` when
``S_ij >= top_i - tol * scale_i``, with ``top_i = max_j S_ij``, ``scale_i = max_j |S_ij|`` and
``tol = tie_rtol`` (default ``8 d`` machine epsilons, :data:`TIE_RTOL`). The compiled passes of
``_kernels`` and ``_tile_kernels`` apply the same inequality row by row.
"""
from __future__ import annotations

import numpy as np

from .. import _validate as chk

__all__ = ["TIE_RTOL", "tie_tol", "leader_mask", "tokens", "key_query", "rule_key_query", "transpose", "beta",
           "gamma"]

TIE_RTOL = None  # None: 8 * d * machine epsilon (see the module docstring of dynamics)


def tie_tol(tie_rtol, d):
    """The relative tie tolerance for tokens in dimension ``d`` (``None``: ``8 d`` machine epsilons)."""
    if tie_rtol is None:
        return 8.0 * d * np.finfo(float).eps
    return chk.real_scalar("tie_rtol", tie_rtol, low=0.0)


def leader_mask(S, tol):
    """The tie rule: ``S_ij >= max_j S_ij - tol max_j |S_ij|``, over the last axis of the scores ``S``."""
    top = S.max(axis=-1, keepdims=True)
    scale = np.maximum(top, -S.min(axis=-1, keepdims=True))
    return S >= top - tol * scale


def tokens(x):
    return chk.tokens("x", x)


def key_query(B, shape):
    """``B`` checked against tokens of shape ``shape``: None, (d, d), or (R, d, d) for a batch of R systems."""
    if B is None:
        return None
    d = shape[-1]
    arr = chk.as_float_array("B", B, min_ndim=2, max_ndim=3)
    if arr.ndim == 2:
        return chk.square_matrix("B", arr, d)
    if len(shape) != 3 or arr.shape != (shape[0], d, d):
        want = f"({shape[0]}, {d}, {d})" if len(shape) == 3 else "a batch of tokens (R, n, d)"
        raise ValueError(f"B must be {d} x {d} or one matrix per system, {want}; got shape {arr.shape}")
    return arr


def rule_key_query(B):
    """``B`` of a rule: None, (d, d) or (R, d, d); checked against the tokens at each step."""
    if B is None:
        return None
    arr = chk.as_float_array("B", B, min_ndim=2, max_ndim=3)
    if arr.shape[-1] != arr.shape[-2]:
        raise ValueError(f"B must be square (d, d) or (R, d, d), got shape {arr.shape}")
    return arr


def transpose(B):
    """Transpose of a matrix or of each matrix of a stack."""
    return np.swapaxes(B, -1, -2)


def beta(beta, allow_inf=True):
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)):
        raise TypeError(f"beta must be a real number >= 0, got {type(beta).__name__}")
    b = float(beta)
    if np.isnan(b) or b < 0 or (np.isinf(b) and not allow_inf):
        want = "[0, inf]" if allow_inf else "[0, inf)"
        raise ValueError(f"beta must lie in {want}, got {beta!r}")
    return b


def gamma(gamma):
    """The step size, in the library's one interval ``(0, 1]`` (``_validate.GAMMA_INTERVAL``)."""
    return chk.step_size("gamma", gamma)
