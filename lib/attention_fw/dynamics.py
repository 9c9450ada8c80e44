"""Self-attention as a discrete-time particle system (Section 1 of the paper).

All functions take tokens ``x`` of shape ``(n, d)`` or ``(R, n, d)``: ``R``
independent systems of ``n`` tokens in ``R^d``, advanced together with no Python
loop over tokens or systems. ``B`` is the key-query matrix (``None`` = identity),
``beta`` the inverse temperature.

Equations (numbers as in the paper; see NOTES "Numbering confidence"):

* scores               S_ij = <B x_i, x_j>
* attention (Sec. 1.1) A_ij = exp(beta S_ij) / sum_k exp(beta S_ik), the sum includes k = i
* layer (1.3)          x_i <- x_i + P (sum_j A_ij x_j - x_i),  P = (I + V)^{-1} V
* (SA-inf)             x_i <- x_i + gamma^t (argmax_{y in K^t} <B x_i, y> - x_i)
* (SA-beta)            x_i <- (1 - gamma) x_i + gamma sum_j A_ij x_j          (B = I in Sec. 5)
* (SAP)                x_i <- (1 - gamma) x_i + gamma x_J,  P(J = j) = A_ij, independently over i

Tie rule of the hardmax. The leader set C_i^t of Section 1.5 may contain several
tokens. We average over the tied *indices* (coincident tokens count with
multiplicity), which is exactly the limit beta -> infinity of the softmax; the
paper's set-of-points reading differs only when tokens coincide. Ties are
detected with a relative tolerance on the scores just above the rounding error
of a length-d dot product (``tie_rtol = 8 d eps`` relative to the row's largest
|score|, unless given), so that exact ties spoilt by floating-point rounding are
still ties while genuine near-ties (a token 1e-12 away from its vertex, say)
are not. ``tie_rtol=0`` asks for exact equality.

Memory. The batched steps hold the ``(R, n, n)`` scores. When those would exceed the memory
budget of :mod:`attention_fw.tiled` (256 MiB unless set), ``softmax_step``, ``hardmax_step``,
``sap_step``, ``layer_step``, ``leaders`` and ``tie_counts`` hand the work to the tiled versions
there (same numbers to rounding, same leader sets, same law), which need ``O(R n (d + tile))``.
``attention`` returns the matrix itself and is never tiled (``tiled.attention_apply`` gives
``A @ values``).
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np

from . import _kernels
from . import _validate as V
from .schedules import Schedule, get_schedule

TIE_RTOL = None  # None: 8 * d * machine epsilon (see the module docstring)


def _tie_tol(tie_rtol, d):
    if tie_rtol is None:
        return 8.0 * d * np.finfo(float).eps
    return V.real_scalar("tie_rtol", tie_rtol, low=0.0)


def _tiled_for(x, *, hardmax=False):
    """:mod:`attention_fw.tiled` when this step's (R, n, n) arrays would exceed its memory budget, else None.

    The hardmax of tokens in d <= 2 never holds the score matrix (its numba pass makes the scores
    row by row), so it stays on its own path at any n.
    """
    shape = np.shape(x)
    if len(shape) < 2 or (hardmax and shape[-1] <= 2):
        return None
    from . import tiled
    return None if tiled.fits(shape) else tiled


# ----------------------------------------------------------------------------- checks
def _tokens(x):
    return V.tokens("x", x)


def _key_query(B, d):
    if B is None:
        return None
    return V.square_matrix("B", B, d)


def _beta(beta, allow_inf=True):
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)):
        raise TypeError(f"beta must be a real number >= 0, got {type(beta).__name__}")
    b = float(beta)
    if np.isnan(b) or b < 0 or (np.isinf(b) and not allow_inf):
        want = "[0, inf]" if allow_inf else "[0, inf)"
        raise ValueError(f"beta must lie in {want}, got {beta!r}")
    return b


def _gamma(gamma):
    return V.real_scalar("gamma", gamma, low=0.0, high=1.0, low_open=True)


# ----------------------------------------------------------------------------- scores and weights
def scores(x, B=None) -> np.ndarray:
    """Attention scores ``S[..., i, j] = <B x_i, x_j>``.

    Parameters
    ----------
    x : array (n, d) or (R, n, d)
    B : array (d, d) or None (identity)

    Returns
    -------
    array (..., n, n)
    """
    x = _tokens(x)
    return _scores(x, _key_query(B, x.shape[-1]))


def _scores(x, B):
    """:func:`scores` of already checked tokens and key-query matrix."""
    bx = x if B is None else x @ B.T
    # A contiguous transposed copy keeps a batched product in BLAS (2-3x faster than the view).
    return bx @ np.ascontiguousarray(np.swapaxes(x, -1, -2))


def _hardmax_from_scores(S, tie_rtol):
    top = S.max(axis=-1, keepdims=True)
    scale = np.abs(S).max(axis=-1, keepdims=True)
    mask = S >= top - tie_rtol * scale
    return mask / mask.sum(axis=-1, keepdims=True)


def _softmax_from_scores(S, beta):
    Z = beta * S
    Z -= Z.max(axis=-1, keepdims=True)  # log-sum-exp shift: the largest term is exp(0) = 1
    np.exp(Z, out=Z)
    Z /= Z.sum(axis=-1, keepdims=True)
    return Z


def attention(x, B=None, beta=np.inf, *, tie_rtol: float = TIE_RTOL) -> np.ndarray:
    """Row-stochastic attention matrix ``A[..., i, j]`` (Section 1.1; hardmax for ``beta = inf``).

    Numerically stable for every ``beta`` in ``[0, inf]``: the scores are shifted by
    their row maximum before exponentiation, so nothing overflows, and the
    leading weight is always ``>= 1/n``. ``beta = 0`` gives uniform weights;
    ``beta = inf`` gives the hardmax with tied indices averaged (module docstring).

    Raises
    ------
    ValueError, TypeError
        Bad shapes, non-finite tokens, ``B`` not ``d x d``, ``beta < 0`` or NaN.
    """
    beta = _beta(beta)
    x = _tokens(x)
    B = _key_query(B, x.shape[-1])
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


def leaders(x, B=None) -> np.ndarray:
    """Index of the (first) maximiser of ``<B x_i, x_j>`` over ``j``: the oracle of (SA-inf). Shape (..., n)."""
    if (T := _tiled_for(x)) is not None:
        return T.leaders(x, B)
    x = _tokens(x)
    return _leader_scores(x, _key_query(B, x.shape[-1])).argmax(axis=-1)


def tie_counts(x, B=None, *, tie_rtol: float = TIE_RTOL) -> np.ndarray:
    """Number of tokens tied for the maximum of ``<B x_i, .>`` (``#C_i^t`` of Lemma 2.1, by index). Shape (..., n)."""
    if (T := _tiled_for(x)) is not None:
        return T.tie_counts(x, B, tie_rtol=tie_rtol)
    x = _tokens(x)
    S = _leader_scores(x, _key_query(B, x.shape[-1]))
    tol = _tie_tol(tie_rtol, x.shape[-1])
    top = S.max(axis=-1, keepdims=True)
    scale = np.abs(S).max(axis=-1, keepdims=True)
    return (S >= top - tol * scale).sum(axis=-1)


# ----------------------------------------------------------------------------- one step of each rule
def preconditioner(Vmat) -> np.ndarray:
    """``P = (I + V)^{-1} V`` of equation (1.3).

    Raises
    ------
    ValueError
        ``V`` not square, not finite, or ``I + V`` singular (the standing assumption of (1.3)).
    """
    Vm = V.square_matrix("V", Vmat)
    M = np.eye(Vm.shape[0]) + Vm
    if np.linalg.cond(M) > 1e12:
        raise ValueError("V must make I + V invertible (equation (1.3) divides by it)")
    return np.linalg.solve(M, Vm)


def layer_step(x, B, Vmat, beta) -> np.ndarray:
    """One renormalised self-attention layer, equation (1.3).

    ``x_i <- x_i + P (sum_j A_ij x_j - x_i)`` with ``P = (I+V)^{-1} V``, equivalently
    ``x_i <- (I+V)^{-1} (x_i + V sum_j A_ij x_j)``. ``beta = inf`` gives the hardmax
    limit of Section 1.5 (ties averaged).
    """
    x = _tokens(x)
    P = preconditioner(Vmat)
    if P.shape[0] != x.shape[-1]:
        raise ValueError(f"V must be {x.shape[-1]} x {x.shape[-1]} to match x, got {P.shape}")
    T = _tiled_for(x)
    Ax = attention(x, B, beta) @ x if T is None else T.attention_apply(x, x, B, beta)
    return x + (Ax - x) @ P.T


def hardmax_step(x, gamma, B=None, *, tie_rtol: float = TIE_RTOL) -> np.ndarray:
    """One step of (SA-inf): ``x_i + gamma (argmax_{y in K} <B x_i, y> - x_i)``.

    The maximum of a linear functional over the hull ``K = conv{x_j}`` is attained
    at a token, so the oracle scans tokens; ties are averaged (module docstring).
    """
    if (T := _tiled_for(x, hardmax=True)) is not None:
        return T.hardmax_step(x, gamma, B, tie_rtol=tie_rtol)
    gamma = _gamma(gamma)
    x = V.tokens("x", x, finite=False)  # checked below, by the pass that reads it anyway
    d = x.shape[-1]
    B = _key_query(B, d)
    tol = _tie_tol(tie_rtol, d)
    # The same leader set as attention(x, B, inf) (_hardmax_from_scores), in one pass over each
    # row of scores: max_j |S_ij| = max(max_j S_ij, -min_j S_ij), and the tied tokens (usually
    # one) are averaged directly instead of through a 0/1 matrix product. For small d the
    # scores are computed inside that pass; for larger d they come from one BLAS product.
    K = _kernels.impl()
    x3 = np.ascontiguousarray(x.reshape((-1,) + x.shape[-2:]))
    bx = x3 if B is None else np.ascontiguousarray(x3 @ B.T)
    out = np.empty(x3.shape)
    small = d <= 2 or (d <= 8 and x3.shape[0] * x3.shape[1] ** 2 <= 65536)  # measured crossover
    if small:
        top, total_sq = K.hardmax_small(bx, x3, gamma, tol, out)
        if not math.isfinite(total_sq):
            V.require_finite("x", x)  # raises unless only the squares overflowed
    else:
        V.require_finite("x", x)
        top = _max_sq_norm(x3)
    xs, _, c = _fit_scores(x, B, 0.0, top)
    if c != 1.0:
        # Scores would overflow or underflow: the leader sets do not change when every token is
        # scaled by the same power of two c, and the step commutes with the scaling exactly.
        return hardmax_step(xs, gamma, B, tie_rtol=tie_rtol) / c
    if not small:
        # A contiguous transposed copy keeps the batched product in BLAS (numpy multiplies a
        # transposed view of a stack without it, several times slower).
        S = np.matmul(bx, np.ascontiguousarray(np.swapaxes(x3, -1, -2)))
        K.hardmax_combine(S, x3, gamma, tol, out)
    return out.reshape(x.shape)


def _max_sq_norm(x) -> float:
    """``max_i |x_i|^2`` (inf if it overflows, without a warning; NaN if x has NaN)."""
    with np.errstate(over="ignore"):
        return float(np.einsum("...i,...i->...", x, x).max())


def _scores_fit(top_sq, B):
    """False when the scores ``<B x_i, x_j>`` could overflow, or all underflow, given ``max_i |x_i|^2``.

    That is tokens of norm above about 1e150, or all of them below about 1e-100 (``top_sq = 0``
    is ambiguous: all tokens at 0, or squares underflowing; :func:`_rescaled` decides). The steps
    then work on the tokens scaled by a power of two.
    """
    return _SCORE_TINY <= top_sq <= _SCORE_LIMIT / (1.0 if B is None else _norm(B))


_SCORE_LIMIT, _SCORE_TINY = 1e300, 1e-200


def _norm(B):
    return max(float(np.linalg.norm(B)), 1e-300)


def _rescaled(x):
    """A power of two ``c`` with ``1/2 <= max |c x_ik| < 1`` (exact to multiply and divide by).

    None when there is nothing to rescale: x = 0, or x already in that range (c would be 1).
    """
    m = float(np.abs(x).max())
    if m == 0.0 or 0.5 <= m < 1.0:
        return None
    return math.ldexp(1.0, -math.frexp(m)[1])


def softmax_step(x, gamma, beta, B=None) -> np.ndarray:
    """One step of (SA-beta): ``(1-gamma) x_i + gamma sum_j A_ij x_j``.

    ``gamma`` is the convex weight of the displayed formula of Section 5 (E8:
    the paper's "V = gamma I" would give gamma/(1+gamma) through (1.3)).
    """
    if (T := _tiled_for(x)) is not None:
        return T.softmax_step(x, gamma, beta, B)
    gamma = _gamma(gamma)
    beta = _beta(beta, allow_inf=False)
    x = V.tokens("x", x, finite=False)  # checked by the first pass of _softmax_mean
    B = _key_query(B, x.shape[-1])
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

    Same numbers as ``x + gamma (attention(x, B, beta) @ x - x)`` up to rounding, with each
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
            V.require_finite("x", x)
        y = np.repeat(x.mean(axis=-2, keepdims=True), n, axis=-2)
        return x + gamma * (y - x)
    K = _kernels.impl()
    shape = x.shape
    x = np.ascontiguousarray(x.reshape((-1, n, d)))
    R = x.shape[0]
    xt = _scratch("xt", (R, d, n))
    top, total_sq = K.scaled_transpose(x, beta, xt)
    if not checked and not math.isfinite(total_sq):
        V.require_finite("x", x)  # raises unless only the squares overflowed
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
        np.matmul(x @ B.T, xt, out=Z)
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


def sap_step(x, gamma, beta, rng, B=None, *, return_choice: bool = False):
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
    rng : numpy.random.Generator (or an int seed)
    return_choice : bool
        Also return the picks ``J`` of shape (..., n).
    """
    if (T := _tiled_for(x)) is not None:
        return T.sap_step(x, gamma, beta, B, rng=rng, return_choice=return_choice)
    gamma = _gamma(gamma)
    beta = _beta(beta, allow_inf=False)
    rng = V.rng("rng", rng)
    x = _tokens(x)
    B = _key_query(B, x.shape[-1])
    xs, b, _ = _fit_scores(x, B, beta)
    L = _scores(xs, B)
    L *= b
    K = _kernels.impl()
    W = np.ascontiguousarray(L.reshape((-1,) + L.shape[-2:]))
    K.shift_rows(W)
    np.exp(W, out=W)  # A_ij / max_k A_ik, in (0, 1]
    s_small, s_big = np.empty(W.shape[:-1]), np.empty(W.shape[:-1])  # s_big >= 1 (the largest weight)
    K.weight_split(W, SMALL_WEIGHT, s_small, s_big)
    with np.errstate(divide="ignore", over="ignore"):  # no small weights: -log P = inf, never
        pick_small = bernoulli_from_neg_log(np.log1p(s_big / s_small), rng)
    J = np.empty(W.shape[:-1], dtype=np.intp)
    K.group_pick(W, SMALL_WEIGHT, pick_small, 1.0 - rng.random(J.shape), J)  # uniforms in (0, 1]
    J = J.reshape(L.shape[:-1])
    target = np.take_along_axis(x, J[..., None], axis=-2)
    out = x + gamma * (target - x)
    return (out, J) if return_choice else out


SMALL_WEIGHT = 2.0 ** -26  # sap_step: weights below this (relative to the largest) form the tail group
TAIL_CHUNK = 30.0  # -log-probability handled by one exponential draw (numpy's Exp(1) reaches ~44)


def bernoulli_from_neg_log(t, rng) -> np.ndarray:
    """Independent Bernoulli(``exp(-t)``) draws for an array ``t >= 0``, exact however small ``exp(-t)``.

    ``P(E > t) = exp(-t)`` for ``E ~ Exp(1)``, but a double-precision exponential variate never
    exceeds about 44, so ``t`` is cut into pieces of at most ``TAIL_CHUNK``: by memorylessness
    the event is that independent ``E_1 > t_1, E_2 > t_2, ...``, and the later draws are made
    only for the (rare) entries that passed the earlier ones. ``t = inf`` gives False.
    """
    t = V.as_float_array("t", t, finite=False, allow_empty=True)
    if np.isnan(t).any() or (t < 0).any():
        raise ValueError("t must hold -log-probabilities: numbers >= 0 or inf, no NaN")
    rng = V.rng("rng", rng)
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


def _fit_scores(x, B, beta, top=None):
    """``(x', beta', c)`` with ``x' = c x``, ``beta' <B x'_i, x'_j> = beta <B x_i, x_j>`` and scores that neither
    overflow nor all underflow (``top = max_i |x_i|^2`` if known).

    ``c`` a power of two (exact) when needed, else 1 and ``x' = x``. When even then
    ``beta' |B| max|x'_i|^2`` would pass 1e300, ``beta'`` is capped there: the weights are then the
    hardmax ones to double precision either way.
    """
    if top is None:
        top = _max_sq_norm(x)
    norm = 1.0 if B is None else _norm(B)
    if _scores_fit(top, B) and beta * norm * top <= _SCORE_LIMIT:
        return x, beta, 1.0
    c = _rescaled(x) or 1.0
    xs = x if c == 1.0 else x * c
    top_s = top if c == 1.0 else _max_sq_norm(xs)
    if top_s == 0.0:
        return x, beta, 1.0
    b = min(beta / c / c, _SCORE_LIMIT / (norm * top_s))
    return xs, (0.0 if b < 1e-300 else b), c


# ----------------------------------------------------------------------------- rules and the driver
class Rule:
    """A dynamics: ``step(x, t)`` maps layer ``t`` to layer ``t + 1``."""

    def step(self, x, t):  # pragma: no cover - abstract
        raise NotImplementedError


class Hardmax(Rule):
    """(SA-inf) with key-query ``B`` and step-size schedule (``Schedule``, number or name)."""

    def __init__(self, B=None, schedule=0.5, **schedule_params):
        self.B = None if B is None else V.square_matrix("B", B)
        self.schedule: Schedule = get_schedule(schedule, **schedule_params)

    def step(self, x, t):
        return hardmax_step(x, self.schedule(t), self.B)


class Softmax(Rule):
    """(SA-beta) at inverse temperature ``beta``."""

    def __init__(self, beta, schedule=0.1, B=None, **schedule_params):
        self.beta = _beta(beta, allow_inf=False)
        self.B = None if B is None else V.square_matrix("B", B)
        self.schedule = get_schedule(schedule, **schedule_params)

    def step(self, x, t):
        return softmax_step(x, self.schedule(t), self.beta, self.B)


class MarkovChain(Rule):
    """(SAP) at inverse temperature ``beta``; reproducible from ``seed``."""

    def __init__(self, beta, schedule=0.1, B=None, seed=None, **schedule_params):
        self.beta = _beta(beta, allow_inf=False)
        self.B = None if B is None else V.square_matrix("B", B)
        self.schedule = get_schedule(schedule, **schedule_params)
        self.rng = V.rng("seed", seed)

    def step(self, x, t):
        return sap_step(x, self.schedule(t), self.beta, self.rng, self.B)


class Layer(Rule):
    """The general layer (1.3) with fixed ``B``, ``V`` and ``beta`` (``inf`` allowed)."""

    def __init__(self, B, Vmat, beta=np.inf):
        self.B = V.square_matrix("B", B)
        self.P = preconditioner(Vmat)
        if self.P.shape != self.B.shape:
            raise ValueError(f"V must have the shape of B {self.B.shape}, got {self.P.shape}")
        self.beta = _beta(beta)

    def step(self, x, t):
        T = _tiled_for(x)
        Ax = attention(x, self.B, self.beta) @ x if T is None else T.attention_apply(x, x, self.B, self.beta)
        return x + (Ax - x) @ self.P.T


class FunctionRecorder:
    """Record ``fn(x, t)`` at ``t = 0, every, 2 every, ...`` and at the last step."""

    def __init__(self, name: str, fn, every: int = 1):
        if not callable(fn):
            raise TypeError("fn must be callable as fn(x, t)")
        self.name = name
        self.fn = fn
        self.every = V.positive_int("every", every)
        self.times: list[int] = []
        self.values: list = []

    def __call__(self, x, t):
        self.times.append(t)
        self.values.append(np.asarray(self.fn(x, t)))

    def result(self):
        return np.stack(self.values)


@dataclass
class SimulationResult:
    """Output of :func:`simulate`: final tokens, optional trajectory, recorded summaries."""

    x: np.ndarray
    steps: int
    times: np.ndarray | None = None
    trajectory: np.ndarray | None = None
    records: dict = field(default_factory=dict)
    record_times: dict = field(default_factory=dict)


def simulate(x0, rule: Rule, steps: int, recorders=(), *, trajectory: bool = False,
             every: int = 1) -> SimulationResult:
    """Run ``rule`` for ``steps`` steps from ``x0``.

    Memory stays ``O(R n d)`` unless ``trajectory=True`` (then the states at
    ``t = 0, every, ..., steps`` are kept). Recorders see ``(x, t)`` at their own
    cadence and return summaries, so a run of 10^6 steps over 10^3 systems needs
    no ``T x R x n x d`` array.

    Raises
    ------
    TypeError, ValueError
        Bad ``rule``, ``steps`` or ``every``, or bad tokens.
    """
    if not isinstance(rule, Rule):
        raise TypeError(f"rule must be a dynamics Rule (Hardmax, Softmax, MarkovChain, Layer), got {type(rule).__name__}")
    x = _tokens(x0).copy()
    steps = V.positive_int("steps", steps, minimum=0)
    every = V.positive_int("every", every)
    recorders = list(recorders)
    for r in recorders:
        if not isinstance(r, FunctionRecorder):
            raise TypeError("recorders must be FunctionRecorder objects")
    traj, ttimes = [], []
    for t in range(steps + 1):
        if trajectory and (t % every == 0 or t == steps):
            traj.append(x.copy())
            ttimes.append(t)
        for r in recorders:
            if t % r.every == 0 or t == steps:
                r(x, t)
        if t < steps:
            x = rule.step(x, t)
    return SimulationResult(
        x=x, steps=steps,
        times=np.array(ttimes) if trajectory else None,
        trajectory=np.stack(traj) if trajectory else None,
        records={r.name: r.result() for r in recorders},
        record_times={r.name: np.array(r.times) for r in recorders},
    )
