"""Multi-head attention with an output projection, the block of a transformer without its MLP.

``y = x + sum_h softmax(beta Q_h K_h^T + mask) V_h W_O[h]`` with ``Q_h = x W_Q[h]``,
``K_h = x W_K[h]``, ``V_h = x W_V[h]`` (row tokens), the softmax over the keys (the last axis),
then the normalisation ``norm`` of :mod:`attention_fw.model.general` (None, ``"layernorm"``,
``"sphere"``). One head with ``W_Q = W_K = I``, ``W_V W_O = gamma I`` and no normalisation is the
paper's layer (1.1) with ``V = gamma I``, whose renormalised form (1.3) is the (SA-beta) step
``softmax_step(x, gamma / (1 + gamma), beta)`` (erratum E8 of the book).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _validate as chk
from . import general
from ._checks import beta as _beta
from ._checks import tie_tol
from .dynamics import Rule

__all__ = ["multihead_step", "MultiHead"]


def _weights(name: str, W: npt.ArrayLike, H: int | None = None, d: int | None = None,
             inner: int | None = None) -> np.ndarray:
    arr = chk.as_float_array(name, W, ndim=3)
    if H is not None and arr.shape[0] != H:
        raise ValueError(f"{name} must hold one matrix per head ({H} heads, as W_Q), got shape {arr.shape}")
    if d is not None and arr.shape[1] != d:
        raise ValueError(f"{name} must have shape (H, {d}, d_h) to act on tokens in R^{d}, got {arr.shape}")
    if inner is not None and arr.shape[2] != inner:
        raise ValueError(f"{name} must have shape (H, d, {inner}) (the heads' size, as W_Q), got {arr.shape}")
    return arr


def _check(x, W_Q, W_K, W_V, W_O, beta, mask, norm):
    small = general.small_float(x)
    x = chk.tokens("x", x)
    d = x.shape[-1]
    q = _weights("W_Q", W_Q, d=d)
    H, _, dh = q.shape
    k = _weights("W_K", W_K, H, d, dh)
    v = _weights("W_V", W_V, H, d)
    o = chk.as_float_array("W_O", W_O, ndim=3)
    if o.shape != (H, v.shape[2], d):
        raise ValueError(f"W_O must have shape (H, d_v, d) = ({H}, {v.shape[2]}, {d}), got {o.shape}")
    return (small, x, q, k, v, o, _beta(beta), general.check_mask(mask, x.shape[-2]), general.check_norm(norm))


def _step(x, q, k, v, o, beta, mask, norm):
    Q = np.einsum("...nd,hdk->...hnk", x, q)
    K = np.einsum("...nd,hdk->...hnk", x, k)
    S = Q @ np.swapaxes(K, -1, -2)                       # (..., H, n, n), queries x keys
    if not np.all(np.isfinite(S)):
        raise ValueError("x and the weights give scores that overflow (tokens or weights too large)")
    allowed = general.allowed_pairs(mask, x.shape)
    if np.isinf(beta):
        A = general.masked_leaders(S, mask, tie_tol(None, q.shape[2])).astype(float)
    else:
        Z = beta * S if beta > 0 else np.zeros_like(S)
        if mask is not None:
            Z = np.where(allowed, Z, -np.inf)
        Z -= Z.max(axis=-1, keepdims=True)
        A = np.exp(Z)
    A /= A.sum(axis=-1, keepdims=True)
    Vh = np.einsum("...nd,hdk->...hnk", x, v)
    heads = A @ Vh                                        # (..., H, n, d_v)
    y = x + np.einsum("...hnk,hkd->...nd", heads, o)
    return general.normalise(y, norm)


def multihead_step(x: npt.ArrayLike, W_Q: npt.ArrayLike, W_K: npt.ArrayLike, W_V: npt.ArrayLike,
                   W_O: npt.ArrayLike, *, beta: float = 1.0, mask: Any = None, norm: str | None = None) -> np.ndarray:
    """One multi-head attention block: ``x + sum_h softmax(beta Q_h K_h^T + mask) V_h W_O[h]``, then ``norm``.

    Parameters
    ----------
    x : array (n, d) or (R, n, d)
        Tokens (rows).
    W_Q : array (H, d, d_h)
        Query matrices of the H heads: ``Q_h = x W_Q[h]``.
    W_K : array (H, d, d_h)
        Key matrices: ``K_h = x W_K[h]``; the scores of head h are ``Q_h K_h^T``.
    W_V : array (H, d, d_v)
        Value matrices: ``V_h = x W_V[h]``.
    W_O : array (H, d_v, d)
        Output projection of each head (the blocks of the usual (H d_v, d) matrix).
    beta : float in [0, inf], keyword-only
        Inverse temperature (``inf``: each head's hardmax, tied keys averaged).
    mask : None, "causal" or boolean array (n, n), keyword-only
        Allowed (query, key) pairs, the same for every head; ``"causal"``: key ``j <= i``.
    norm : None, "layernorm" or "sphere", keyword-only
        Normalisation of every token after the residual sum (no affine parameters).

    Returns
    -------
    array of the shape of ``x`` (float32 for float32 tokens, else float64)

    Examples
    --------
    One head with identity weights and ``W_O = gamma I``: the paper's layer (1.1) with ``V = gamma I``

    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    >>> I = np.eye(2)[None]
    >>> y = multihead_step(x, I, I, I, 0.5 * I, beta=2.0)
    >>> A = np.exp(2.0 * x @ x.T); A /= A.sum(axis=1, keepdims=True)
    >>> bool(np.allclose(y, x + 0.5 * A @ x))
    True
    """
    small, x, q, k, v, o, beta, mask, norm = _check(x, W_Q, W_K, W_V, W_O, beta, mask, norm)
    y = _step(x, q, k, v, o, beta, mask, norm)
    return y if small is None else y.astype(small)


class MultiHead(Rule):
    """The block :func:`~attention_fw.model.multihead.multihead_step` as a rule for ``simulate``.

    The same weights at every layer; :func:`~attention_fw.model.dynamics.simulate` runs it.

    Examples
    --------
    >>> from attention_fw.model.dynamics import simulate
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    >>> I = np.eye(2)[None]
    >>> rule = MultiHead(I, I, I, 0.5 * I, beta=2.0, norm="sphere")
    >>> run = simulate(x, rule, 3)
    >>> bool(np.allclose(np.linalg.norm(run.x, axis=1), 1.0))     # on the sphere
    True
    """

    def __init__(self, W_Q: npt.ArrayLike, W_K: npt.ArrayLike, W_V: npt.ArrayLike, W_O: npt.ArrayLike, *,
                 beta: float = 1.0, mask: Any = None, norm: str | None = None) -> None:
        d = chk.as_float_array("W_Q", W_Q, ndim=3).shape[1]
        _, _, self.W_Q, self.W_K, self.W_V, self.W_O, self.beta, _, self.norm = _check(
            np.zeros((1, d)), W_Q, W_K, W_V, W_O, beta, None, norm)
        self.mask = mask if mask is None or isinstance(mask, str) else np.asarray(mask)

    def step(self, x: np.ndarray, t: int, systems: np.ndarray | None = None) -> np.ndarray:
        return multihead_step(x, self.W_Q, self.W_K, self.W_V, self.W_O, beta=self.beta, mask=self.mask,
                              norm=self.norm)
