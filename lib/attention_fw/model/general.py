"""Attention as researchers write it: separate queries and keys, a value matrix, masks, normalisations.

The paper's model is the special case ``W_Q = W_K = I`` (or one key-query matrix ``B``),
``V = I`` (the step ``gamma`` playing the value's role, Section 5), no mask and no
normalisation; those defaults take the fast paths of :mod:`attention_fw.model.dynamics`
unchanged, and anything else comes here. The steps of ``dynamics`` hand the work to
``_step`` through their one dispatch point.

Conventions (row tokens, as everywhere in the library: ``x`` of shape (n, d), token ``i`` is
the row ``x_i``):

* **queries and keys.** ``Q = x W_Q``, ``K = x W_K`` with ``W_Q``, ``W_K`` of shape (d, d_k)
  (or one pair per system, (R, d, d_k)); the scores are ``S = Q K^T``, i.e.
  ``S_ij = x_i^T W_Q W_K^T x_j``. The library's key-query argument enters as
  ``S_ij = <B x_i, x_j> = x_i^T B^T x_j``, so the same scores are given by
  ``B = (W_Q W_K^T)^T = W_K W_Q^T`` (:func:`key_query_from`). The paper's ``B = Q^T K``
  (column-vector maps ``Q = W_Q^T``, ``K = W_K^T``) is ``W_Q W_K^T``, the transpose of the
  library's; the two agree exactly when ``B`` is symmetric, the case of every theorem of the
  paper (the Frank-Wolfe reading needs ``B = B^T``).
* **values.** ``V`` of shape (d, d) or one per system (R, d, d) maps an attended token
  ``x_j`` to ``V x_j`` (the row ``x_j V^T``): the steps become
  ``x_i <- (1 - gamma) x_i + gamma sum_j A_ij V x_j`` (the SAP step moves towards ``V x_J``).
  ``V = None`` is the identity, the paper's Section 5.
* **mask.** ``None`` (every pair), ``"causal"`` (query ``i`` sees keys ``j <= i``) or a
  boolean (n, n) array of allowed pairs (row: query, column: key), every row with at least
  one allowed key. Disallowed pairs get weight exactly 0 (score ``-inf``); the hardmax's leader
  set and its tie rule are taken over the allowed keys.
* **norm.** Applied to every token after the step: ``None``; ``"layernorm"`` (each token
  centred over its d coordinates and scaled to unit variance, ``(y - mean) / sqrt(var +
  1e-12)``, no affine parameters); ``"sphere"`` (``y / |y|``; a token at the origin is
  refused, it has no direction).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _validate as chk
from . import _kernels
from ._checks import leader_mask
from ._sampling import SMALL_WEIGHT, bernoulli_from_neg_log
from ._scaling import fit_scores as _fit_scores

__all__ = ["NORMS", "LAYERNORM_EPS", "key_query_from", "check_mask", "check_norm", "check_values", "normalise",
           "allowed_pairs", "small_float", "masked_leaders", "weights", "logits"]

NORMS = (None, "layernorm", "sphere")
"""The accepted values of ``norm``."""

LAYERNORM_EPS = 1e-12
"""The variance floor of ``norm="layernorm"``."""


def key_query_from(B: npt.ArrayLike | None, W_Q: npt.ArrayLike | None, W_K: npt.ArrayLike | None) -> Any:
    """The library's ``B`` (scores ``<B x_i, x_j>``) for query and key matrices: ``B = W_K W_Q^T``.

    Either ``B`` or both of ``W_Q``, ``W_K`` (shape (d, d_k) or (R, d, d_k)), never both.

    Examples
    --------
    >>> W_Q, W_K = np.array([[1.0, 2.0], [0.0, 1.0]]), np.eye(2)
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> B = key_query_from(None, W_Q, W_K)
    >>> bool(np.allclose((x @ W_Q) @ (x @ W_K).T, x @ B.T @ x.T))   # Q K^T = <B x_i, x_j>
    True
    """
    if W_Q is None and W_K is None:
        return B
    if W_Q is None or W_K is None:
        raise ValueError("W_Q and W_K must be given together (the scores are (x W_Q)(x W_K)^T)")
    if B is not None:
        raise ValueError("give either B or W_Q and W_K, not both (B = W_K W_Q^T)")
    q = chk.as_float_array("W_Q", W_Q, min_ndim=2, max_ndim=3)
    k = chk.as_float_array("W_K", W_K, min_ndim=2, max_ndim=3)
    if q.shape != k.shape:
        raise ValueError(f"W_Q and W_K must have the same shape (d, d_k) or (R, d, d_k), got {q.shape} and {k.shape}")
    return k @ np.swapaxes(q, -1, -2)


def check_mask(mask: Any, n: int) -> np.ndarray | None:
    """``mask`` as a boolean (n, n) array of allowed pairs (``None`` stays ``None``)."""
    if mask is None:
        return None
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"mask must be None, 'causal' or a boolean (n, n) array, got {mask!r}")
        return np.tril(np.ones((n, n), dtype=bool))
    m = np.asarray(mask)
    if m.dtype != bool:
        raise TypeError(f"mask must be None, 'causal' or a boolean (n, n) array, got dtype {m.dtype}")
    if m.shape != (n, n):
        raise ValueError(f"mask must have shape ({n}, {n}) (queries x keys), got {m.shape}")
    if not m.any(axis=1).all():
        raise ValueError(f"mask must allow at least one key for every query (row {int(np.argmin(m.any(axis=1)))} "
                         "allows none)")
    return m


def check_norm(norm: Any) -> str | None:
    """``norm`` checked: one of :data:`NORMS`."""
    if norm is not None and (not isinstance(norm, str) or norm not in NORMS):
        raise ValueError(f"norm must be None, 'layernorm' or 'sphere', got {norm!r}")
    return norm


def check_values(V: npt.ArrayLike | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """``V`` checked against tokens of ``shape``: None, (d, d), or one (d, d) per system, (R, d, d)."""
    if V is None:
        return None
    d = shape[-1]
    arr = chk.as_float_array("V", V, min_ndim=2, max_ndim=3)
    if arr.ndim == 2:
        if arr.shape != (d, d):
            raise ValueError(f"V must be {d} x {d} (the residual x + ... keeps the tokens' dimension), "
                             f"got shape {arr.shape}")
        return arr
    if len(shape) != 3 or arr.shape != (shape[0], d, d):
        want = f"({shape[0]}, {d}, {d})" if len(shape) == 3 else "a batch of tokens (R, n, d)"
        raise ValueError(f"V must be {d} x {d} or one matrix per system, {want}; got shape {arr.shape}")
    return arr


def normalise(y: np.ndarray, norm: str | None) -> np.ndarray:
    """Each token (last axis) of ``y`` normalised: None, ``"layernorm"`` or ``"sphere"`` (module docstring).

    Examples
    --------
    >>> normalise(np.array([[3.0, 4.0]]), "sphere")
    array([[0.6, 0.8]])
    >>> normalise(np.array([[1.0, 3.0]]), "layernorm")    # mean 2, variance 1
    array([[-1.,  1.]])
    """
    if norm is None:
        return y
    if norm == "sphere":
        r = np.linalg.norm(y, axis=-1, keepdims=True)
        if not np.all(r > 0):
            raise ValueError("norm='sphere' met a token at the origin, which has no direction")
        return y / r
    c = y - y.mean(axis=-1, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + LAYERNORM_EPS)


def allowed_pairs(mask: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """The boolean (n, n) allowed pairs (all of them when ``mask`` is None)."""
    n = shape[-2]
    return np.ones((n, n), dtype=bool) if mask is None else mask


def _scores(x, B):
    return np.matmul(x if B is None else x @ np.swapaxes(B, -1, -2), np.swapaxes(x, -1, -2))


def small_float(x: Any) -> np.dtype | None:
    """The floating dtype of ``x`` when narrower than float64 (float32, float16), else None.

    The rule of the steps: such tokens are stepped in float64 and the result rounded back to
    their type once per step (float32 in, float32 out); everything else comes back as float64.
    """
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype) and dt.kind == "f" and dt.itemsize < 8:
        return dt
    return None


def masked_leaders(S: np.ndarray, mask: np.ndarray | None, tol: float) -> np.ndarray:
    """The library's tie rule (``_checks.leader_mask``) over the allowed keys of each row only."""
    if mask is None:
        return leader_mask(S, tol)
    top = np.where(mask, S, -np.inf).max(axis=-1, keepdims=True)
    scale = np.maximum(top, -np.where(mask, S, np.inf).min(axis=-1, keepdims=True))
    return mask & (S >= top - tol * scale)


def weights(x: np.ndarray, beta: float, B: np.ndarray | None, mask: np.ndarray | None,
            tie_rtol: float) -> np.ndarray:
    """The (masked) attention weights ``A`` of shape (..., n, n); ``beta = inf``: the hardmax with its tie rule.

    The scores are those of tokens scaled by a power of two where they would overflow or all
    underflow (``_scaling.fit_scores``), which changes neither the softmax nor the leader sets.
    """
    allowed = allowed_pairs(mask, x.shape)
    if np.isinf(beta):
        xs = _fit_scores(x, B, 0.0)[0]
        S = _scores(xs, B)
        m = masked_leaders(S, mask, tie_rtol)
        return m / m.sum(axis=-1, keepdims=True)
    xs, b, _ = _fit_scores(x, B, beta)
    Z = b * _scores(xs, B)
    if mask is not None:
        Z = np.where(allowed, Z, -np.inf)
    Z -= Z.max(axis=-1, keepdims=True)
    np.exp(Z, out=Z)
    Z /= Z.sum(axis=-1, keepdims=True)
    return Z


def logits(x: np.ndarray, beta: float, B: np.ndarray | None, mask: np.ndarray | None) -> np.ndarray:
    """``beta <B x_i, x_j>`` (finite ``beta``), ``-inf`` where ``mask`` forbids the pair, from tokens scaled
    by a power of two where the scores would overflow or all underflow (same softmax)."""
    xs, b, _ = _fit_scores(x, B, beta)
    L = _scores(xs, B)
    L *= b
    if mask is not None:
        L[..., ~mask] = -np.inf
    return L


def _values(x, V):
    """The attended tokens ``V x_j`` as rows, ``x V^T``."""
    return x if V is None else x @ np.swapaxes(V, -1, -2)


def _step(kind: str, x: np.ndarray, gamma: float, beta: float, B: np.ndarray | None, *, V: np.ndarray | None,
         mask: np.ndarray | None, norm: str | None, tie_rtol: float,
         rng: np.random.Generator | None = None, return_choice: bool = False) -> Any:
    """One step of ``kind`` ("hardmax", "softmax" or "sap") of the general model, checked inputs.

    ``x <- norm((1 - gamma) x_i + gamma sum_j A_ij V x_j)`` (hardmax, softmax), or the (SAP) step
    towards ``V x_J`` with ``P(J = j) = A_ij``.
    """
    vals = _values(x, V)
    if kind != "sap":
        A = weights(x, beta, B, mask, tie_rtol)
        y = x + gamma * (np.matmul(A, vals) - x)
        return normalise(y, norm)
    assert rng is not None
    J = _exact_pick(logits(x, beta, B, mask), rng)
    target = np.take_along_axis(vals, J[..., None], axis=-2)
    y = normalise(x + gamma * (target - x), norm)
    return (y, J) if return_choice else y


def _exact_pick(L: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row of the logits ``L`` (..., n, m), ``P(J = j) = exp(L_ij) / sum_k exp(L_ik)``, exact in the tails.

    The sampler of ``dynamics.sap_step`` (its docstring): the weights relative to the row's
    largest are split at ``SMALL_WEIGHT``, the group is drawn from its ``-log`` probability and
    the pick inverts the cumulative weights of its group only. A logit ``-inf`` (a masked pair)
    has weight exactly 0 and is never picked. ``L`` is overwritten.
    """
    K = _kernels.impl()
    W = np.ascontiguousarray(L.reshape((-1,) + L.shape[-2:]))
    K.shift_rows(W)
    np.exp(W, out=W)  # A_ij / max_k A_ik, in (0, 1]
    s_small, s_big = np.empty(W.shape[:-1]), np.empty(W.shape[:-1])  # s_big >= 1 (the largest weight)
    K.weight_split(W, SMALL_WEIGHT, s_small, s_big)
    with np.errstate(divide="ignore", over="ignore"):  # no small weights: -log P = inf, never
        pick_small = bernoulli_from_neg_log(np.log1p(s_big / s_small), rng=rng)
    J = np.empty(W.shape[:-1], dtype=np.intp)
    K.group_pick(W, SMALL_WEIGHT, pick_small, 1.0 - rng.random(J.shape), J)  # uniforms in (0, 1]
    return J.reshape(L.shape[:-1])
