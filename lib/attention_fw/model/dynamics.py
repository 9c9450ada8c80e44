"""How do tokens move? Self-attention as a discrete-time particle system (Section 1 of the paper).

This docstring is the one place where the library's vocabulary is defined; every other
module uses it.

Vocabulary
----------
x : array (n, d) or (R, n, d)
    Tokens: ``R`` independent systems of ``n`` tokens in ``R^d``, advanced together with no
    Python loop over tokens or systems.
gamma : float in (0, 1], or a schedule ``gamma^t`` (:mod:`attention_fw.model.schedules`)
    The step size; ``t = 0`` is the first step.
beta : float in [0, inf]
    Inverse temperature of the softmax (``inf``: hardmax).
B : array (d, d), (R, d, d) or None
    Key-query matrix (``None`` = identity); the steps also accept one ``B`` per system.
V : array (d, d)
    Value matrix of the layer (1.3).
rng : int, numpy.random.SeedSequence or numpy.random.Generator, keyword-only
    Source of randomness. The same seed gives the same result however it is passed
    (``rng=7``, ``rng=np.random.SeedSequence(7)`` and ``rng=np.random.default_rng(7)`` agree);
    a Generator passed in is advanced, so successive calls continue its stream.

Arguments come in that order, ``(x, gamma, beta, B, *, rng)``, a function without one of
them skipping it (``hardmax_step(x, gamma, B)``). Experiments return one result object with
attributes (:class:`attention_fw.results.Result`, a dict whose keys are also attributes, or
a dataclass), and plot functions take that result and return the figure.

Equations (numbers as in the paper)
-----------------------------------
* scores                 S_ij = <B x_i, x_j>
* attention (Sec. 1.1)   A_ij = exp(beta S_ij) / sum_k exp(beta S_ik), the sum includes k = i
* layer (1.3)            x_i <- x_i + P (sum_j A_ij x_j - x_i),  P = (I + V)^{-1} V
* (SA-inf)               x_i <- x_i + gamma^t (argmax_{y in K^t} <B x_i, y> - x_i)
* (SA-beta)              x_i <- (1 - gamma) x_i + gamma sum_j A_ij x_j          (B = I in Sec. 5)
* (SAP)                  x_i <- (1 - gamma) x_i + gamma x_J,  P(J = j) = A_ij, independently over i

One driver, :func:`simulate`, runs a :class:`Rule` (one of the steps with its schedule) for a
number of steps, with recorders at chosen times and an optional stop condition; every
step-by-step experiment of the library is built on it.

Tie rule of the hardmax. The leader set C_i^t of Section 1.5 may contain several
tokens. We average over the tied *indices* (coincident tokens count with
multiplicity), which is exactly the limit beta -> infinity of the softmax; the
paper's set-of-points reading differs only when tokens coincide. Ties are
detected with a relative tolerance on the scores just above the rounding error
of a length-d dot product (``tie_rtol = 8 d eps`` relative to the row's largest
``|score|``, unless given), so that exact ties spoilt by floating-point rounding are
still ties while genuine near-ties (a token 1e-12 away from its vertex, say)
are not. ``tie_rtol=0`` asks for exact equality.

Memory. The batched steps hold the ``(R, n, n)`` scores. When those would exceed the memory
budget of :mod:`attention_fw.model.tiled` (256 MiB unless set), ``softmax_step``, ``hardmax_step``,
``sap_step``, ``layer_step``, ``leaders`` and ``tie_counts`` hand the work to the tiled versions
there (same numbers to rounding, same leader sets, same law), which need ``O(R n (d + tile))``.
``attention`` returns the matrix itself and is never tiled (``tiled.attention_apply`` gives
``A @ values``).

Examples
--------
>>> import numpy as np
>>> from attention_fw.model import dynamics as dyn
>>> x = np.array([[0.0, 1.0], [1.0, 0.0], [0.2, 0.3]])
>>> dyn.hardmax_step(x, 0.5)          # each token moves half-way to its leader
array([[0.  , 1.  ],
       [1.  , 0.  ],
       [0.1 , 0.65]])
>>> run = dyn.simulate(x, dyn.Hardmax(0.5), 30)
>>> np.round(run.x, 6) + 0.0          # the interior token reached its vertex
array([[0., 1.],
       [1., 0.],
       [0., 1.]])
"""
from __future__ import annotations

import copy
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, overload

import numpy as np
import numpy.typing as npt

from .. import _validate as chk
from . import _kernels, fast, general, tiled
from ._checks import TIE_RTOL, key_query, leader_mask
from ._checks import beta as _beta
from ._checks import gamma as _gamma
from ._checks import rule_key_query as _rule_key_query
from ._checks import tie_tol as _tie_tol
from ._checks import tokens as _checks_tokens
from ._checks import transpose as _t
from ._sampling import SMALL_WEIGHT, TAIL_CHUNK, bernoulli_from_neg_log
from ._scaling import fit_scores as _fit_scores
from ._scaling import max_sq_norm as _max_sq_norm
from .recorders import FirstTime, FunctionRecorder, Recorder
from .schedules import Schedule, get_schedule

_tokens: Callable[[npt.ArrayLike], np.ndarray] = _checks_tokens  # typed: _checks is not annotated

__all__ = ["TIE_RTOL", "SMALL_WEIGHT", "TAIL_CHUNK", "bernoulli_from_neg_log", "scores", "attention", "leaders",
           "tie_counts", "preconditioner", "layer_step", "hardmax_step", "softmax_step", "sap_step", "Rule",
           "Hardmax", "Softmax", "MarkovChain", "Layer", "Recorder", "FunctionRecorder", "FirstTime",
           "SimulationResult", "simulate"]


def _key_query(B, x):
    """``B`` checked against the tokens ``x`` (the one check of :mod:`._checks`)."""
    return key_query(B, x.shape)


def _tiled_for(x, *, hardmax=False):
    """:mod:`attention_fw.model.tiled` when this step's (R, n, n) arrays would exceed its memory budget, else None.

    The hardmax of tokens in d <= 2 never holds the score matrix (its numba pass makes the scores
    row by row), so it stays on its own path at any n.
    """
    shape = np.shape(x)
    if len(shape) < 2 or (hardmax and shape[-1] <= 2):
        return None
    return None if tiled.fits(shape) else tiled


METHODS = ("auto", "dense", "tiled", "hull", "fast")
FAST_MIN_N = 2**17  # method="auto": the fast (SA-beta) and (SAP) steps from this many tokens per system (no book run reaches it)
HULL_MIN_N = 2048   # method="auto": the hull (SA-inf) step from this many tokens per system (d = 2, numba: same bits)


def _route(method, x, kind):
    """Which engine a step of the paper's model runs: "dense" (dense, tiles above the memory budget),
    "tiled" or "fast" (:mod:`attention_fw.model.fast`).

    ``method="auto"`` picks the fast engine only where it changes no result of the dense path beyond
    its stated tolerance: the hull step (bitwise the dense one) for d = 2 from ``HULL_MIN_N`` tokens
    with the numba passes, the fast (SA-beta) step (within 1e-8 of the tokens' radius) and the fast
    (SAP) sampler (the same law, exactly; other random draws than the dense sampler's) from
    ``FAST_MIN_N`` tokens. ``method="fast"`` forces the (SA-beta) or (SAP) engine, ``"hull"`` the
    (SA-inf) one.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if method in ("hull", "fast"):
        if kind == "hardmax" and method == "fast" or kind in ("softmax", "sap") and method == "hull":
            raise ValueError(f"method={method!r} is not a {kind} engine: 'hull' steps (SA-inf), 'fast' (SA-beta "
                             "and SAP)")
        return "fast"
    if method != "auto":
        return method
    shape = np.shape(x)
    if kind == "hardmax" and len(shape) >= 2 and shape[-1] == 2 and shape[-2] >= HULL_MIN_N \
            and _kernels.impl().name == "numba":
        return "fast"
    if kind in ("softmax", "sap") and len(shape) >= 2 and shape[-1] == 2 and shape[-2] >= FAST_MIN_N:
        return "fast"
    return "dense"


def _dispatch(kind, x, gamma, beta, B, *, tie_rtol=TIE_RTOL, rng=None, return_choice=False, W_Q=None, W_K=None,
              V=None, mask=None, norm=None, method="auto"):
    """The one dispatch point of the public steps ``hardmax_step``, ``softmax_step`` and ``sap_step``.

    The paper's model (no ``V``, ``mask`` or ``norm``; ``W_Q``, ``W_K`` become ``B = W_K W_Q^T``)
    runs the fast paths (the fused batched passes, the tiled ones beyond the memory budget);
    anything else runs the general model of :mod:`attention_fw.model.general`. Tokens of a
    narrower floating type (float32, float16) are stepped in float64 and the result is rounded
    back to their type once; everything else comes back as float64.
    """
    small = general.small_float(x)
    B = general.key_query_from(B, W_Q, W_K)
    route = _route(method, x, kind)
    if V is None and mask is None and norm is None and route != "dense":
        if kind == "hardmax":
            out = (fast.hardmax_step if route == "fast" else tiled.hardmax_step)(x, gamma, B, tie_rtol=tie_rtol)
        elif kind == "softmax":
            out = (fast.softmax_step if route == "fast" else tiled.softmax_step)(x, gamma, beta, B)
        else:
            out = (fast.sap_step if route == "fast" else tiled.sap_step)(x, gamma, beta, B, rng=rng,
                                                                          return_choice=return_choice)
    elif V is None and mask is None and norm is None:
        if kind == "hardmax":
            out = _hardmax_plain(x, gamma, B, tie_rtol=tie_rtol)
        elif kind == "softmax":
            out = _softmax_plain(x, gamma, beta, B)
        else:
            out = _sap_plain(x, gamma, beta, B, rng=rng, return_choice=return_choice)
    else:
        if method not in ("auto", "dense"):
            raise ValueError(f"method={method!r} applies to the paper's model only (no V, mask or norm)")
        gamma = _gamma(gamma)
        beta = _beta(beta, allow_inf=kind == "hardmax")
        if kind == "sap":
            rng = chk.rng("rng", rng)
        x = _tokens(x)
        B = _key_query(B, x)
        out = general._step(kind, x, gamma, beta, B, V=general.check_values(V, x.shape),
                           mask=general.check_mask(mask, x.shape[-2]), norm=general.check_norm(norm),
                           tie_rtol=_tie_tol(tie_rtol, x.shape[-1]), rng=rng, return_choice=return_choice)
    if small is not None:
        out = (out[0].astype(small), out[1]) if isinstance(out, tuple) else out.astype(small)
    return out


# ----------------------------------------------------------------------------- scores and weights
def scores(x: npt.ArrayLike, B: npt.ArrayLike | None = None) -> np.ndarray:
    """Attention scores ``S[..., i, j] = <B x_i, x_j>``.

    Parameters
    ----------
    x : array (n, d) or (R, n, d)
    B : array (d, d) or None (identity)

    Returns
    -------
    array (..., n, n)

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    >>> bool(np.allclose(scores(x), x @ x.T))            # B = I: the Gram matrix
    True
    >>> # S_ij = <B e_i, e_j> = B_ji: S = x B^T x^T
    >>> scores(np.eye(2), np.array([[0.0, 1.0], [0.0, 0.0]]))
    array([[0., 0.],
           [1., 0.]])
    """
    x = _tokens(x)
    return _scores(x, _key_query(B, x))


def _scores(x, B):
    """:func:`scores` of already checked tokens and key-query matrix."""
    bx = x if B is None else x @ _t(B)
    # A contiguous transposed copy keeps a batched product in BLAS (2-3x faster than the view).
    return bx @ np.ascontiguousarray(np.swapaxes(x, -1, -2))


def _hardmax_from_scores(S, tie_rtol):
    mask = leader_mask(S, tie_rtol)
    return mask / mask.sum(axis=-1, keepdims=True)


def _softmax_from_scores(S, beta):
    Z = beta * S
    Z -= Z.max(axis=-1, keepdims=True)  # log-sum-exp shift: the largest term is exp(0) = 1
    np.exp(Z, out=Z)
    Z /= Z.sum(axis=-1, keepdims=True)
    return Z


def attention(x: npt.ArrayLike, beta: float = np.inf, B: npt.ArrayLike | None = None, *,
              tie_rtol: float | None = TIE_RTOL) -> np.ndarray:
    """Row-stochastic attention matrix ``A[..., i, j]`` (Section 1.1; hardmax for ``beta = inf``).

    Numerically stable for every ``beta`` in ``[0, inf]``: the scores are shifted by
    their row maximum before exponentiation, so nothing overflows, and the
    leading weight is always ``>= 1/n``. ``beta = 0`` gives uniform weights;
    ``beta = inf`` gives the hardmax with tied indices averaged (module docstring).

    Raises
    ------
    ValueError, TypeError
        Bad shapes, non-finite tokens, ``B`` not ``d x d``, ``beta < 0`` or NaN.

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    >>> attention(x, 2.0).sum(axis=1)                 # row-stochastic
    array([1., 1., 1.])
    >>> np.round(attention(x, 0.0), 4)                # beta = 0: uniform weights 1/n
    array([[0.3333, 0.3333, 0.3333],
           [0.3333, 0.3333, 0.3333],
           [0.3333, 0.3333, 0.3333]])
    >>> # token 2 ties x_0 and x_1: hardmax averages them, the limit of softmax
    >>> attention(x, np.inf)[2], attention(x, 1e6)[2]
    (array([0.5, 0.5, 0. ]), array([0.5, 0.5, 0. ]))
    """
    beta = _beta(beta)
    x = _tokens(x)
    B = _key_query(B, x)
    if np.isinf(beta):
        return _hardmax_from_scores(_leader_scores(x, B), _tie_tol(tie_rtol, x.shape[-1]))
    xs, b, _ = _fit_scores(x, B, beta)  # scores that neither overflow nor all underflow
    return _softmax_from_scores(_scores(xs, B), b)


def _leader_scores(x, B):
    """Scores of the tokens, scaled first by a power of two if they would overflow or all underflow.

    Leader sets (argmax and ties of ``<B x_i, x_j>`` over j) are invariant under a common
    scaling, and a power of two scales exactly (:func:`_fit_scores` with beta = 0).
    """
    return _scores(_fit_scores(x, B, 0.0)[0], B)


def leaders(x: npt.ArrayLike, B: npt.ArrayLike | None = None) -> np.ndarray:
    """Index of the (first) maximiser of ``<B x_i, x_j>`` over ``j``: the oracle of (SA-inf). Shape (..., n).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    >>> # a vertex leads itself; token 2 ties 0 and 1, the first index wins
    >>> leaders(x)
    array([0, 1, 0])
    >>> leaders(x, -np.eye(2))      # B = -I: the leader minimises <x_i, x_j>
    array([1, 0, 2])
    """
    if (T := _tiled_for(x)) is not None:
        return T.leaders(x, B)
    x = _tokens(x)
    return _leader_scores(x, _key_query(B, x)).argmax(axis=-1)


def tie_counts(x: npt.ArrayLike, B: npt.ArrayLike | None = None, *, tie_rtol: float | None = TIE_RTOL) -> np.ndarray:
    """Number of tokens tied for the maximum of ``<B x_i, .>`` (``#C_i^t`` of Lemma 2.1, by index). Shape (..., n).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.3]])
    >>> # <x_2, x_0> = <x_2, x_1> = 0.3 > <x_2, x_2>: two leaders for token 2
    >>> tie_counts(x)
    array([1, 1, 2])
    >>> # coincident tokens count by index
    >>> tie_counts(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    array([2, 2, 1])
    """
    if (T := _tiled_for(x)) is not None:
        return T.tie_counts(x, B, tie_rtol=tie_rtol)
    x = _tokens(x)
    S = _leader_scores(x, _key_query(B, x))
    return leader_mask(S, _tie_tol(tie_rtol, x.shape[-1])).sum(axis=-1)


# ----------------------------------------------------------------------------- one step of each rule
def preconditioner(V: npt.ArrayLike) -> np.ndarray:
    """``P = (I + V)^{-1} V`` of equation (1.3).

    Raises
    ------
    ValueError
        ``V`` not square, not finite, or ``I + V`` singular (the standing assumption of (1.3)).

    Examples
    --------
    >>> preconditioner(np.eye(2))            # V = I: P = I / 2
    array([[0.5, 0. ],
           [0. , 0.5]])
    """
    Vm = chk.square_matrix("V", V)
    M = np.eye(Vm.shape[0]) + Vm
    if np.linalg.cond(M) > 1e12:
        raise ValueError("V must make I + V invertible (equation (1.3) divides by it)")
    return np.linalg.solve(M, Vm)


def layer_step(x: npt.ArrayLike, beta: float, B: npt.ArrayLike | None, V: npt.ArrayLike) -> np.ndarray:
    """One renormalised self-attention layer, equation (1.3).

    ``x_i <- x_i + P (sum_j A_ij x_j - x_i)`` with ``P = (I+V)^{-1} V``, equivalently
    ``x_i <- (I+V)^{-1} (x_i + V sum_j A_ij x_j)``. ``beta = inf`` gives the hardmax
    limit of Section 1.5 (ties averaged). ``V`` is (d, d) or one matrix per system (R, d, d);
    the proxy ``I + V`` of LayerNorm is the paper's normalisation (the steps' ``norm`` offers
    LayerNorm itself and the sphere).

    Examples
    --------
    With ``V = gamma / (1 - gamma) I`` the layer is the (SA-beta) step with step ``gamma``:

    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    >>> bool(
    ...     np.allclose(
    ...         layer_step(x, 2.0, None, 0.25 / 0.75 * np.eye(2)),
    ...         softmax_step(x, 0.25, 2.0),
    ...     )
    ... )
    True
    """
    small = general.small_float(x)
    x = _tokens(x)
    Vm = general.check_values(V, x.shape)
    P = preconditioner(Vm) if Vm is not None and Vm.ndim == 2 else _preconditioners(Vm)
    T = _tiled_for(x)
    Ax = attention(x, beta, B) @ x if T is None else T.attention_apply(x, x, beta, B)
    out = x + (Ax - x) @ _t(P)
    return out if small is None else out.astype(small)


def _preconditioners(V):
    """``P = (I + V)^{-1} V`` of each matrix of a stack (R, d, d) (one value matrix per system)."""
    M = np.eye(V.shape[-1]) + V
    if np.max(np.linalg.cond(M)) > 1e12:
        raise ValueError("V must make I + V invertible for every system (equation (1.3) divides by it)")
    return np.linalg.solve(M, V)


def hardmax_step(x: npt.ArrayLike, gamma: float, B: npt.ArrayLike | None = None, *,
                 tie_rtol: float | None = TIE_RTOL, W_Q: npt.ArrayLike | None = None,
                 W_K: npt.ArrayLike | None = None, V: npt.ArrayLike | None = None, mask: Any = None,
                 norm: str | None = None, method: str = "auto") -> np.ndarray:
    """One step of (SA-inf): ``x_i + gamma (argmax_{y in K} <B x_i, y> - x_i)``.

    The maximum of a linear functional over the hull ``K = conv{x_j}`` is attained
    at a token, so the oracle scans tokens; ties are averaged (module docstring).
    ``B`` may hold one matrix per system, shape (R, d, d).

    The general model (:mod:`attention_fw.model.general`): ``W_Q``, ``W_K`` instead of ``B``
    (scores ``(x W_Q)(x W_K)^T``, i.e. ``B = W_K W_Q^T``), a value matrix ``V`` (the step moves
    towards ``V`` times the leaders' mean), ``mask`` (``"causal"`` or a boolean (n, n) array of
    allowed pairs: leaders among the allowed keys) and ``norm`` (``"layernorm"``, ``"sphere"``).
    The defaults give the paper's (SA-inf). ``method``: "auto" (the hull step of :mod:`.fast` for
    d = 2 from ``HULL_MIN_N`` tokens, bitwise this one; else dense), "dense", "tiled" or "hull".

    Examples
    --------
    >>> x = np.array([[0.0, 1.0], [1.0, 0.0], [0.2, 0.3]])
    >>> hardmax_step(x, 0.5)
    array([[0.  , 1.  ],
           [1.  , 0.  ],
           [0.1 , 0.65]])
    >>> B = np.stack([np.eye(2), np.diag([1.0, -1.0])])       # one B per system
    >>> hardmax_step(np.stack([x, x]), 0.5, B)[:, 2]
    array([[0.1 , 0.65],
           [0.6 , 0.15]])
    """
    return _dispatch("hardmax", x, gamma, np.inf, B, tie_rtol=tie_rtol, W_Q=W_Q, W_K=W_K, V=V, mask=mask,
                     norm=norm, method=method)


def _hardmax_plain(x, gamma, B=None, *, tie_rtol=TIE_RTOL):
    """(SA-inf) of the paper's model: the batched pass (or the tiled one beyond the memory budget)."""
    if (T := _tiled_for(x, hardmax=True)) is not None:
        return T.hardmax_step(x, gamma, B, tie_rtol=tie_rtol)
    gamma = _gamma(gamma)
    x = chk.tokens("x", x, finite=False)  # checked below, by the pass that reads it anyway
    d = x.shape[-1]
    B = _key_query(B, x)
    tol = _tie_tol(tie_rtol, d)
    # The same leader set as attention(x, inf, B) (_hardmax_from_scores), in one pass over each
    # row of scores: max_j |S_ij| = max(max_j S_ij, -min_j S_ij), and the tied tokens (usually
    # one) are averaged directly instead of through a 0/1 matrix product. For small d the
    # scores are computed inside that pass; for larger d they come from one BLAS product.
    K = _kernels.impl()
    x3 = np.ascontiguousarray(x.reshape((-1,) + x.shape[-2:]))
    bx = x3 if B is None else np.ascontiguousarray(x3 @ _t(B))
    out = np.empty(x3.shape)
    small = d <= 2 or (d <= 8 and x3.shape[0] * x3.shape[1] ** 2 <= 65536)  # measured crossover
    if small:
        top, total_sq = K.hardmax_small(bx, x3, gamma, tol, out)
        if not math.isfinite(total_sq):
            chk.require_finite("x", x)  # raises unless only the squares overflowed
    else:
        chk.require_finite("x", x)
        top = _max_sq_norm(x3)
    xs, _, c = _fit_scores(x, B, 0.0, top)
    if c != 1.0:
        # Scores would overflow or underflow: the leader sets do not change when every token is
        # scaled by the same power of two c, and the step commutes with the scaling exactly.
        return _hardmax_plain(xs, gamma, B, tie_rtol=tie_rtol) / c
    if not small:
        # A contiguous transposed copy keeps the batched product in BLAS (numpy multiplies a
        # transposed view of a stack without it, several times slower).
        S = np.matmul(bx, np.ascontiguousarray(np.swapaxes(x3, -1, -2)))
        K.hardmax_combine(S, x3, gamma, tol, out)
    return out.reshape(x.shape)


def softmax_step(x: npt.ArrayLike, gamma: float, beta: float, B: npt.ArrayLike | None = None, *,
                 W_Q: npt.ArrayLike | None = None, W_K: npt.ArrayLike | None = None, V: npt.ArrayLike | None = None,
                 mask: Any = None, norm: str | None = None, method: str = "auto") -> np.ndarray:
    """One step of (SA-beta): ``(1-gamma) x_i + gamma sum_j A_ij x_j``.

    ``gamma`` is the convex weight of the displayed formula of Section 5 (erratum E8 of the
    book: the paper's "V = gamma I" would give gamma/(1+gamma) through (1.3)).

    The general model (:mod:`attention_fw.model.general`): ``W_Q``, ``W_K`` instead of ``B``
    (scores ``(x W_Q)(x W_K)^T``, i.e. ``B = W_K W_Q^T``), a value matrix ``V`` (d, d) or (R, d, d)
    (``(1-gamma) x_i + gamma sum_j A_ij V x_j``), ``mask`` (``"causal"`` or a boolean (n, n)
    array of allowed pairs) and ``norm`` (``"layernorm"``, ``"sphere"``, applied after the
    step). The defaults give the paper's (SA-beta), by its fast path. ``method``: "auto" (the
    fast step of :mod:`.fast`, within 1e-8 of the tokens' radius, for d = 2 from ``FAST_MIN_N``
    tokens; else dense), "dense", "tiled" or "fast".

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [-1.0, 0.0]])
    >>> softmax_step(x, 0.5, 0.0)                  # beta = 0: half-way to the mean
    array([[ 0.5,  0. ],
           [-0.5,  0. ]])
    """
    return _dispatch("softmax", x, gamma, beta, B, W_Q=W_Q, W_K=W_K, V=V, mask=mask, norm=norm, method=method)


def _softmax_plain(x, gamma, beta, B=None):
    """(SA-beta) of the paper's model: the fused passes (or the tiled ones beyond the memory budget)."""
    if (T := _tiled_for(x)) is not None:
        return T.softmax_step(x, gamma, beta, B)
    gamma = _gamma(gamma)
    beta = _beta(beta, allow_inf=False)
    x = chk.tokens("x", x, finite=False)  # checked by the first pass of _softmax_mean
    B = _key_query(B, x)
    return _softmax_mean(x, B, beta, gamma, checked=False)


_WORKSPACE = threading.local()


def _scratch(name, shape):
    """A per-thread scratch array reused across calls of the same shape.

    Fresh multi-megabyte arrays are mapped and page-faulted by the allocator at every
    call, which costs as much as the products themselves at the sizes of a batched step.
    Only the scratch of the last shape is kept, so memory stays bounded.
    """
    store = getattr(_WORKSPACE, "arrays", None)
    if store is None:
        store = _WORKSPACE.arrays = {}
    arr = store.get(name)
    if arr is None or arr.shape != shape:
        arr = store[name] = np.empty(shape)
    return arr


def _softmax_mean(x, B, beta, gamma=1.0, *, checked=True):
    """``(1 - gamma) x_i + gamma sum_j A_ij x_j`` for the softmax weights, without storing ``A``.

    Same numbers as ``x + gamma (attention(x, beta, B) @ x - x)`` up to rounding, with each
    pass over memory done once (the passes are the fused kernels of ``_kernels``): beta scales
    a (R, d, n) transposed copy of the tokens (contiguous, so the batched product runs in BLAS),
    which also yields ``max_k |x_k|^2`` and, unless ``checked``, the finiteness of x; the scores
    and their exponentials live in a reused per-thread scratch array; the stabilising shift by
    the row maximum is applied only when a bound on ``|beta S_ij|`` (Cauchy-Schwarz) exceeds
    200, i.e. when exp could overflow or a whole row underflow; the row sums and the convex
    combination with x (a diagonal shift of the weights, so that it rides along in the second
    product) are one pass; and the normalisation is one scaling of the (R, n, d) result.
    """
    n, d = x.shape[-2], x.shape[-1]
    if beta == 0.0:  # uniform weights: the mean of the tokens, exactly
        if not checked:
            chk.require_finite("x", x)
        y = np.repeat(x.mean(axis=-2, keepdims=True), n, axis=-2)
        return x + gamma * (y - x)
    K = _kernels.impl()
    shape = x.shape
    x = np.ascontiguousarray(x.reshape((-1, n, d)))
    R = x.shape[0]
    xt = _scratch("xt", (R, d, n))
    top, total_sq = K.scaled_transpose(x, beta, xt)
    if not checked and not math.isfinite(total_sq):
        chk.require_finite("x", x)  # raises unless only the squares overflowed
    xs, b, c = _fit_scores(x, B, beta, top)
    if c != 1.0 or b != beta:
        # The scores would overflow or underflow. With c a power of two, beta <B x_i, x_j> =
        # (beta / c^2) <B c x_i, c x_j> and the step commutes with the scaling by c exactly.
        return _softmax_mean(xs, B, b, gamma).reshape(shape) / c
    # Cauchy-Schwarz: |S_ij| <= |B| max_k |x_k|^2.
    scale = top if B is None else float(np.linalg.norm(B)) * top
    Z = _scratch("Z", (R, n, n))
    if B is None:
        np.matmul(x, xt, out=Z)
    else:
        np.matmul(x @ _t(B), xt, out=Z)
    # Stabilising shift by the row maximum, needed only when exp could overflow or a whole row
    # underflow: with |beta S_ij| <= 200 every exp lies in [e^-200, e^200] and the shift would
    # change nothing but rounding.
    if not beta * scale <= 200.0:
        K.shift_rows(Z)
    np.exp(Z, out=Z)
    total = np.empty((R, n))
    # (1 - gamma) x_i + gamma sum_j Z_ij x_j / total_i = gamma / total_i * sum_j Z'_ij x_j with
    # Z' = Z + ((1 - gamma) / gamma) total_i on the diagonal -- unless that could overflow
    # (gamma < 1e-200 with totals up to n e^200), where the combination is made afterwards.
    fold = gamma >= 1e-200
    K.row_sums_shift(Z, (1.0 - gamma) / gamma if fold else 0.0, total)
    y = np.matmul(Z, x)  # the one fresh array: the result
    if fold:
        K.scale_rows(y, gamma, total)
    else:
        K.scale_rows(y, 1.0, total)
        y -= x
        y *= gamma
        y += x
    return y.reshape(shape)


@overload
def sap_step(x: npt.ArrayLike, gamma: float, beta: float, B: npt.ArrayLike | None = None, *, rng: chk.SeedLike,
             return_choice: Literal[False] = False, W_Q: npt.ArrayLike | None = None, W_K: npt.ArrayLike | None = None,
             V: npt.ArrayLike | None = None, mask: Any = None, norm: str | None = None,
             method: str = "auto") -> np.ndarray: ...
@overload
def sap_step(x: npt.ArrayLike, gamma: float, beta: float, B: npt.ArrayLike | None = None, *, rng: chk.SeedLike,
             return_choice: Literal[True], W_Q: npt.ArrayLike | None = None, W_K: npt.ArrayLike | None = None,
             V: npt.ArrayLike | None = None, mask: Any = None,
             norm: str | None = None, method: str = "auto") -> tuple[np.ndarray, np.ndarray]: ...
def sap_step(x: npt.ArrayLike, gamma: float, beta: float, B: npt.ArrayLike | None = None, *, rng: chk.SeedLike,
             return_choice: bool = False, W_Q: npt.ArrayLike | None = None, W_K: npt.ArrayLike | None = None,
             V: npt.ArrayLike | None = None, mask: Any = None,
             norm: str | None = None, method: str = "auto") -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """One step of the Markov chain (SAP).

    Each token ``i`` independently picks ``J_i = j`` with probability ``A_ij`` and
    moves to ``(1-gamma) x_i + gamma x_J``. A self-pick is a no-op; coincident tokens
    are separate indices, so their probabilities add exactly.

    The pick is exact in the tails, where inverting the cumulative weights is not (a uniform
    variate of 53 bits cannot select a pick of probability 1e-20 next to one of probability
    near 1). The weights relative to the largest, ``w_ij = A_ij / max_k A_ik``, are split at
    ``SMALL_WEIGHT = 2^-26``: the token picks among the small ones with probability
    ``s_i / (b_i + s_i)`` (``s_i``, ``b_i`` the sums of the small and of the other weights),
    a Bernoulli variable drawn from its ``-log`` (:func:`bernoulli_from_neg_log`, exact down to
    the smallest doubles), and then inverts the cumulative weights of its group only. So an
    escape of probability 1e-40 per step happens with probability 1e-40, not 0, also when
    coincident or nearby tokens tie with the leader.

    Parameters
    ----------
    x : array (n, d) or (R, n, d)
    gamma : float in (0, 1]
    beta : float in [0, inf)
    B : array (d, d), (R, d, d) or None
    rng : int, SeedSequence or Generator (keyword-only)
    return_choice : bool
        Also return the picks ``J`` of shape (..., n).
    W_Q, W_K : arrays (d, d_k) or (R, d, d_k), keyword-only
        Query and key matrices instead of ``B``: scores ``(x W_Q)(x W_K)^T`` (``B = W_K W_Q^T``).
    V : array (d, d) or (R, d, d), keyword-only
        Value matrix: the token moves towards ``V x_J`` (default the identity).
    mask : None, "causal" or boolean array (n, n), keyword-only
        Allowed (query, key) pairs; a forbidden key is never picked.
    norm : None, "layernorm" or "sphere", keyword-only
        Normalisation of every token after the step.
    method : "auto", "dense", "tiled" or "fast", keyword-only
        "fast": the sampler of :func:`attention_fw.model.fast.sap_step` (d <= 3; rejection from an
        envelope of boxes, exact in law, far below ``n`` per row); "auto": that sampler for d = 2 from
        ``FAST_MIN_N`` tokens (the same law, other draws), else as "dense": dense, tiles above the
        memory budget.

    Examples
    --------
    >>> x = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> y, J = sap_step(x, 0.5, 1.0, rng=0, return_choice=True)
    >>> bool(np.allclose(y, x + 0.5 * (x[J] - x)))
    True
    """
    return _dispatch("sap", x, gamma, beta, B, rng=rng, return_choice=return_choice, W_Q=W_Q, W_K=W_K, V=V,
                     mask=mask, norm=norm, method=method)


def _sap_plain(x, gamma, beta, B=None, *, rng, return_choice=False):
    """(SAP) of the paper's model: the exact sampler (or the tiled streaming one beyond the memory budget)."""
    if (T := _tiled_for(x)) is not None:
        return T.sap_step(x, gamma, beta, B, rng=rng, return_choice=return_choice)
    gamma = _gamma(gamma)
    beta = _beta(beta, allow_inf=False)
    rng = chk.rng("rng", rng)
    x = _tokens(x)
    B = _key_query(B, x)
    xs, b, _ = _fit_scores(x, B, beta)
    L = _scores(xs, B)
    L *= b
    J = general._exact_pick(L, rng)
    target = np.take_along_axis(x, J[..., None], axis=-2)
    out = x + gamma * (target - x)
    return (out, J) if return_choice else out


# ----------------------------------------------------------------------------- rules and the driver
class Rule:
    """A dynamics: ``step(x, t)`` maps layer ``t`` to layer ``t + 1``.

    ``systems`` (indices into the batch the rule was built for) is passed by :func:`simulate`
    when it steps only the systems that have not stopped yet, so that a rule holding one
    ``B`` per system uses the matching ones.

    Examples
    --------
    A rule needs only ``step``; here ``x -> x / 2``, so three steps scale by ``2^-3``:

    >>> class Halve(Rule):
    ...     def step(
    ...         self, x: np.ndarray, t: int, systems: np.ndarray | None = None
    ...     ) -> np.ndarray:
    ...         return x / 2
    >>> simulate(np.ones((2, 1)), Halve(), 3).x.ravel()
    array([0.125, 0.125])
    """

    B: np.ndarray | None = None

    def step(self, x: np.ndarray, t: int, systems: np.ndarray | None = None) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def start(self) -> None:
        """Called by :func:`simulate` before its first step: a rule that draws restarts its stream here."""

    def _B(self, systems):
        return _per_system(self.B, systems)


def _per_system(M, systems):
    """The matrices of the systems ``systems`` of a per-system stack (R, ., .); a shared matrix as itself."""
    if systems is None or M is None or M.ndim == 2:
        return M
    return M[systems]


def _general(rule, B, W_Q, W_K, V, mask, norm):
    """Store on ``rule`` the keywords of the general model it passes to its step (``W_Q``, ``W_K`` folded into ``B``)."""
    rule.B = _rule_key_query(general.key_query_from(B, W_Q, W_K))
    rule.V = None if V is None else chk.as_float_array("V", V, min_ndim=2, max_ndim=3)
    rule.mask = mask if mask is None or isinstance(mask, str) else np.asarray(mask)
    rule.norm = general.check_norm(norm)


def _options(rule, systems):
    """The general model's keywords of ``rule`` for the systems ``systems`` (and the engine, ``method``)."""
    return dict(V=_per_system(rule.V, systems), mask=rule.mask, norm=rule.norm, method=getattr(rule, "method", "auto"))


class Hardmax(Rule):
    """(SA-inf) with step-size schedule (``Schedule``, number or name) and key-query ``B``.

    ``W_Q``, ``W_K``, ``V``, ``mask``, ``norm``: the general model, as in :func:`hardmax_step`.

    Examples
    --------
    >>> x = np.array([[0.0, 1.0], [1.0, 0.0], [0.2, 0.3]])
    >>> # gamma^0 = 1: straight to the leader
    >>> simulate(x, Hardmax("fw"), 1).x[2]
    array([0., 1.])
    """

    def __init__(self, schedule: Schedule | float | str = 0.5, B: npt.ArrayLike | None = None, *,
                 tie_rtol: float | None = TIE_RTOL, W_Q: npt.ArrayLike | None = None, W_K: npt.ArrayLike | None = None,
                 V: npt.ArrayLike | None = None, mask: Any = None, norm: str | None = None,
                 method: str = "auto", **schedule_params: Any) -> None:
        self.schedule: Schedule = get_schedule(schedule, **schedule_params)
        _general(self, B, W_Q, W_K, V, mask, norm)
        self.tie_rtol = tie_rtol
        self.method = method

    def step(self, x: np.ndarray, t: int, systems: np.ndarray | None = None) -> np.ndarray:
        return hardmax_step(x, self.schedule(t), self._B(systems), tie_rtol=self.tie_rtol, **_options(self, systems))


class Softmax(Rule):
    """(SA-beta) with step-size schedule ``schedule`` at inverse temperature ``beta``.

    ``W_Q``, ``W_K``, ``V``, ``mask``, ``norm``: the general model, as in :func:`softmax_step`.

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [-1.0, 0.0]])
    >>> simulate(x, Softmax(0.5, 0.0), 1).x          # beta = 0: half-way to the mean
    array([[ 0.5,  0. ],
           [-0.5,  0. ]])
    """

    def __init__(self, schedule: Schedule | float | str, beta: float, B: npt.ArrayLike | None = None, *,
                 W_Q: npt.ArrayLike | None = None, W_K: npt.ArrayLike | None = None, V: npt.ArrayLike | None = None,
                 mask: Any = None, norm: str | None = None, method: str = "auto", **schedule_params: Any) -> None:
        self.schedule = get_schedule(schedule, **schedule_params)
        self.beta = _beta(beta, allow_inf=False)
        _general(self, B, W_Q, W_K, V, mask, norm)
        self.method = method

    def step(self, x: np.ndarray, t: int, systems: np.ndarray | None = None) -> np.ndarray:
        return softmax_step(x, self.schedule(t), self.beta, self._B(systems), **_options(self, systems))


class MarkovChain(Rule):
    """(SAP) with step-size schedule ``schedule`` at inverse temperature ``beta``, random stream ``rng``.

    The rule keeps the stream it was given as it was at construction (a Generator is copied,
    not advanced), and every :func:`simulate` starts again from there: the same rule gives the
    same path on every run. ``W_Q``, ``W_K``, ``V``, ``mask``, ``norm``: the general model, as
    in :func:`sap_step`.

    Examples
    --------
    >>> x = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> rule = MarkovChain(0.5, 1.0, rng=3)
    >>> a = simulate(np.stack([x] * 4), rule, 5).x
    >>> b = simulate(
    ...     np.stack([x] * 4), MarkovChain(0.5, 1.0, rng=np.random.default_rng(3)), 5
    ... ).x
    >>> again = simulate(np.stack([x] * 4), rule, 5).x      # the same rule, run again
    >>> bool(np.array_equal(a, b)), bool(np.array_equal(a, again))
    (True, True)
    """

    def __init__(self, schedule: Schedule | float | str, beta: float, B: npt.ArrayLike | None = None, *,
                 rng: chk.SeedLike, W_Q: npt.ArrayLike | None = None, W_K: npt.ArrayLike | None = None,
                 V: npt.ArrayLike | None = None, mask: Any = None, norm: str | None = None,
                 method: str = "auto", **schedule_params: Any) -> None:
        self.schedule = get_schedule(schedule, **schedule_params)
        self.beta = _beta(beta, allow_inf=False)
        _general(self, B, W_Q, W_K, V, mask, norm)
        self.method = method
        self._origin = copy.deepcopy(chk.rng("rng", rng))
        self.rng = copy.deepcopy(self._origin)

    def start(self) -> None:
        self.rng = copy.deepcopy(self._origin)

    def step(self, x: np.ndarray, t: int, systems: np.ndarray | None = None) -> np.ndarray:
        return sap_step(x, self.schedule(t), self.beta, self._B(systems), rng=self.rng, **_options(self, systems))


class Layer(Rule):
    """The general layer (1.3) at inverse temperature ``beta`` (``inf`` allowed) with fixed ``B`` and ``V``.

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [-1.0, 0.0]])
    >>> simulate(x, Layer(0.0, np.eye(2), np.eye(2)), 1).x   # P = I/2, A uniform
    array([[ 0.5,  0. ],
           [-0.5,  0. ]])
    """

    def __init__(self, beta: float, B: npt.ArrayLike, V: npt.ArrayLike) -> None:
        self.beta = _beta(beta)
        self.B = chk.square_matrix("B", B)
        self.P = preconditioner(V)
        if self.P.shape != self.B.shape:
            raise ValueError(f"V must have the shape of B {self.B.shape}, got {self.P.shape}")

    def step(self, x: np.ndarray, t: int, systems: np.ndarray | None = None) -> np.ndarray:
        T = _tiled_for(x)
        Ax = attention(x, self.beta, self.B) @ x if T is None else T.attention_apply(x, x, self.beta, self.B)
        return x + (Ax - x) @ self.P.T


@dataclass
class SimulationResult:
    """Output of :func:`~attention_fw.model.dynamics.simulate`.

    Its attributes:

    - ``x``: the final tokens (the tokens of a stopped system stay at its stopping step);
    - ``steps``: the number of steps run;
    - ``times``, ``trajectory``: the recorded states (``trajectory=True``), shape (T,) and (T, ...);
    - ``records``, ``record_times``: per recorder name, its result and the steps it recorded;
    - ``stopped``: (R,) int (or int for one system), the step at which ``stop`` first held, -1 if never.

    Examples
    --------
    >>> x = np.array([[0.0, 1.0], [1.0, 0.0], [0.2, 0.3]])
    >>> run = simulate(x, Hardmax(0.5), 3, trajectory=True)
    >>> # no stop condition: -1
    >>> run.steps, run.times.tolist(), run.trajectory.shape, run.stopped
    (3, [0, 1, 2, 3], (4, 3, 2), -1)
    >>> # half-way to the leader (0, 1) each step: 1 - 0.7 / 2^t
    >>> run.trajectory[:, 2, 1]
    array([0.3   , 0.65  , 0.825 , 0.9125])
    """

    x: np.ndarray
    steps: int
    times: Any = None               # np.ndarray when trajectory=True
    trajectory: Any = None          # np.ndarray when trajectory=True
    records: dict = field(default_factory=dict)
    record_times: dict = field(default_factory=dict)
    stopped: Any = None             # (R,) int array, or int for one system (always set by simulate)


def simulate(x0: npt.ArrayLike, rule: Rule, steps: int, recorders: Iterable[Recorder] = (), *,
             trajectory: bool = False, every: int = 1, stop: Callable[[np.ndarray, int], Any] | None = None,
             t0: int = 0, method: str | None = None) -> SimulationResult:
    """Run ``rule`` for at most ``steps`` steps from the tokens ``x0`` at layer ``t0``.

    Memory stays ``O(R n d)`` unless ``trajectory=True`` (then the states at
    ``t = t0, t0 + every, ...`` and at the last step are kept). Recorders see ``(x, t)``
    at their own times and return summaries, so a run of 10^6 steps over 10^3 systems
    needs no ``T x R x n x d`` array.

    ``stop(x, t)``, checked after every step, ends the run: for one system (tokens (n, d))
    it returns a bool; for a batch (R, n, d) it returns a bool array (R,), a system that
    stops keeps its tokens from then on and only the others are stepped, and the run ends
    when every system has stopped. The step at which each system stopped is
    ``result.stopped``; the stopping step counts as the last step for the recorders.

    ``method`` (None: the rule's own, "auto" unless it was built with another) overrides the engine
    of a :class:`Hardmax`, :class:`Softmax` or :class:`MarkovChain` rule for this run (``METHODS``).

    Raises
    ------
    TypeError, ValueError
        Bad ``rule``, ``steps``, ``every``, ``t0``, recorders or ``stop``, or bad tokens.

    Examples
    --------
    >>> x = np.array([[0.0, 1.0], [1.0, 0.0], [0.2, 0.3]])
    >>> far = lambda x, t: np.linalg.norm(x[2] - x[0]) < 1e-3
    >>> run = simulate(x, Hardmax(0.5), 100, stop=far)
    >>> run.stopped, run.steps                   # 0.73 / 2^t < 1e-3 from t = 10 on
    (10, 10)
    """
    if not isinstance(rule, Rule):
        raise TypeError(f"rule must be a dynamics Rule (Hardmax, Softmax, MarkovChain, Layer), got {type(rule).__name__}")
    if method is not None:
        if not hasattr(rule, "method"):
            raise TypeError(f"method applies to Hardmax, Softmax and MarkovChain rules, not {type(rule).__name__}")
        _route(method, np.zeros((1, 1)), "")     # checks the name
        rule = copy.copy(rule)
        rule.method = method
    small = general.small_float(x0)
    x = _tokens(x0).copy()
    if small is not None:                       # float32 in, float32 out: kept in its type between steps
        x = x.astype(small)
    steps = chk.positive_int("steps", steps, minimum=0)
    every = chk.positive_int("every", every)
    t0 = chk.positive_int("t0", t0, minimum=0)
    if stop is not None and not callable(stop):
        raise TypeError("stop must be callable as stop(x, t)")
    recorders = list(recorders)
    for r in recorders:
        if not isinstance(r, Recorder):
            raise TypeError("recorders must be Recorder objects (FunctionRecorder, FirstTime)")
    rule.start()
    batched = x.ndim == 3
    stopped = np.full(x.shape[0] if batched else (), -1)
    act = np.arange(x.shape[0]) if batched else None
    traj, ttimes = [], []
    t_end = t0 + steps
    t = t0
    while True:
        last = t == t_end or not bool(np.any(stopped < 0))
        if trajectory and ((t - t0) % every == 0 or last):
            traj.append(x.copy())
            ttimes.append(t)
        for r in recorders:
            if r.due(t, t0, last):
                r(x, t)
        if last:
            break
        if stop is None:
            x = rule.step(x, t)
        elif batched:
            assert act is not None          # set above for a batch
            xa = rule.step(x[act], t, act)
            x[act] = xa
            hit = np.asarray(stop(xa, t + 1), dtype=bool)
            if hit.shape != act.shape:
                raise ValueError(f"stop must return one bool per system, shape {act.shape}, got {hit.shape}")
            stopped[act[hit]] = t + 1
            act = act[~hit]
        else:
            x = rule.step(x, t)
            if bool(stop(x, t + 1)):
                stopped[()] = t + 1
        t += 1
    return SimulationResult(
        x=x, steps=t - t0,
        times=np.array(ttimes) if trajectory else None,
        trajectory=np.stack(traj) if trajectory else None,
        records={r.name: r.result() for r in recorders},
        record_times={r.name: np.array(r.times) for r in recorders},
        stopped=stopped if batched else int(stopped),
    )


fast._DENSE_STEPS.update(hardmax=hardmax_step, softmax=softmax_step, sap=sap_step)   # the fast steps' dense fall-back
