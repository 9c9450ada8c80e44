"""Trained attention heads against the paper's hypotheses, and attention on real text against the geometry.

For head ``h`` of a layer with query and key blocks ``W_Q, W_K`` (the head's 32 rows of the
layer's 384 x 384 query and key weights) the score of query token ``x_i`` on key token ``x_j`` is,
biases aside, ``x_i^T M x_j`` with ``M = W_Q^T W_K / sqrt(32)``; the head's value-output map is
``U = W_O[:, block] W_V[block]``. The paper's model (1.3) has the key-query matrix ``B`` with
``<B x_i, x_j> = x_i^T M x_j`` (so ``B = M^T``) and wants ``B`` symmetric of one sign and ``V = cI``.

Statistics of one head (float64):

* :func:`antisym_ratio` ``||M - M^T||_F / ||M + M^T||_F`` (0 for a symmetric ``M``);
* :func:`pos_mass` (sum of the positive eigenvalues of ``S = (M + M^T)/2``) / (sum of their
  absolute values): 1 for ``S >= 0``, 0 for ``S <= 0``;
* :func:`value_scalar_dist` ``min_c ||U - cI||_F / ||U||_F`` (0 for ``U = cI``, ``c != 0``).

What rank forces (proved in the chapter, checked in the tests): ``S = C^T J C`` with ``C`` the 64
stacked rows of ``W_Q`` and ``W_K`` and ``J`` the 64 x 64 matrix ``[[0, I], [I, 0]] / (2 sqrt 32)``
of inertia (32, 32, 0), so ``S`` has at most 32 positive and 32 negative eigenvalues, exactly 32
of each when ``C`` has rank 64 (:func:`inertia`); and a rank-``r`` map ``U`` of ``R^d`` has
``value_scalar_dist >= sqrt(1 - r/d)``, which is ``sqrt(11/12)`` for ``r = 32``, ``d = 384``
(:func:`value_bound`). The question that matters for the dynamics is the sign of the form on the
subspace the tokens occupy (:func:`token_subspace`, :func:`restricted`).

On real text (:func:`sentence_stats`): the effective support ``exp(entropy)`` of the attention rows,
the distinct hardmax leaders, the vertices of the hull of the keys in the head's 32-dimensional
space by an exact linear-programming test (:func:`hull_vertices`), the attention mass on those
vertices and on the sink tokens.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> A = rng.standard_normal((4, 4))
>>> antisym_ratio(A + A.T), pos_mass(np.eye(3)), pos_mass(-np.eye(3))
(0.0, 1.0, 0.0)
>>> value_scalar_dist(2.5 * np.eye(5))
0.0
>>> hull_vertices(np.array([[0.0, 0], [1, 0], [0, 1], [0.2, 0.2]])).tolist()
[True, True, True, False]
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.optimize import linprog

from .. import _validate
from ..model.dynamics import Softmax, simulate

__all__ = ["head_matrices", "antisym_ratio", "pos_mass", "value_scalar_dist", "value_bound", "inertia", "head_spectrum",
           "head_row", "corpus_study", "clusters", "head_dynamics", "passages", "spread", "sentence_panel", "sink_head",
           "broad_head", "dynamics_runs", "first_below", "describe", "collapse_summary",
           "head_table", "token_subspace", "restricted", "token_sign", "bias_share", "hull_vertices",
           "effective_support", "sentence_stats", "participation_ratio", "token_classes", "SentenceStats"]


# ------------------------------------------------------------------------------ one head's matrices
def head_matrices(weights: dict, head: int, head_dim: int = 32) -> dict:
    """``M`` (d x d), ``U`` (d x d) and the head's blocks from one layer's attention weights.

    ``weights`` holds ``query``, ``key``, ``value``, ``output`` (``y = W x + b``, ``d x d``) and
    their ``*_bias`` (as :meth:`attention_fw.encoder.bert.Encoder.attention_weights` returns them).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> W = {
    ...     k: rng.standard_normal((64, 64)) for k in ("query", "key", "value", "output")
    ... }
    >>> W.update(
    ...     {k + "_bias": np.zeros(64) for k in ("query", "key", "value", "output")}
    ... )
    >>> m = head_matrices(W, 1, head_dim=32)
    >>> (
    ...     bool(np.allclose(m["M"], W["query"][32:].T @ W["key"][32:] / np.sqrt(32))),
    ...     m["U"].shape,
    ... )
    (True, (64, 64))
    """
    d = weights["query"].shape[1]
    if d % head_dim or not (0 <= int(head) < d // head_dim):
        raise ValueError(f"head must be in [0, {d // head_dim}), got {head!r}")
    blk = slice(int(head) * head_dim, (int(head) + 1) * head_dim)
    wq, wk, wv = (np.asarray(weights[k][blk], dtype=np.float64) for k in ("query", "key", "value"))
    wo = np.asarray(weights["output"][:, blk], dtype=np.float64)
    return {"M": wq.T @ wk / math.sqrt(head_dim), "U": wo @ wv, "Wq": wq, "Wk": wk, "Wv": wv, "Wo": wo,
            "bq": np.asarray(weights["query_bias"][blk], float), "bk": np.asarray(weights["key_bias"][blk], float),
            "bv": np.asarray(weights["value_bias"][blk], float), "head_dim": head_dim}


def _square(name, M):
    M = np.asarray(M, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.size == 0:
        raise ValueError(f"{name} must be a non-empty square matrix, got shape {M.shape}")
    if not np.isfinite(M).all():
        raise ValueError(f"{name} must be finite")
    return M


def antisym_ratio(M) -> float:
    """``||M - M^T||_F / ||M + M^T||_F`` (``inf`` for a non-zero antisymmetric ``M``).

    Examples
    --------
    >>> # ||(0 2; -2 0)|| / ||(2 2; 2 2)||
    >>> antisym_ratio(np.array([[1.0, 2.0], [0.0, 1.0]]))
    0.7071067811865476
    """
    M = _square("M", M)
    num, den = np.linalg.norm(M - M.T), np.linalg.norm(M + M.T)
    if den == 0:
        if num == 0:
            raise ValueError("M is zero: antisym_ratio is undefined")
        return math.inf
    return float(num / den)


def _sym_eigs(M):
    M = _square("M", M)
    return np.linalg.eigvalsh((M + M.T) / 2)


def pos_mass(M) -> float:
    """Sum of the positive eigenvalues of ``(M + M^T)/2`` over the sum of their absolute values.

    Examples
    --------
    >>> pos_mass(np.diag([3.0, -1.0, 0.0]))
    0.75
    """
    ev = _sym_eigs(M)
    total = np.abs(ev).sum()
    if total == 0:
        raise ValueError("the symmetric part of M is zero: pos_mass is undefined")
    return float(ev[ev > 0].sum() / total)


def value_scalar_dist(U) -> float:
    """``min_c ||U - cI||_F / ||U||_F``; the minimiser is ``c = tr(U)/d``, so this is
    ``sqrt(1 - tr(U)^2 / (d ||U||_F^2))``.

    Examples
    --------
    >>> round(value_scalar_dist(np.diag([1.0, -1.0])), 12)     # trace 0: c = 0 is best
    1.0
    """
    U = _square("U", U)
    d = U.shape[0]
    fro2 = float(np.sum(U * U))
    if fro2 == 0:
        raise ValueError("U is zero: value_scalar_dist is undefined")
    c = np.trace(U) / d
    resid = U - c * np.eye(d)
    return float(np.linalg.norm(resid) / math.sqrt(fro2))


def value_bound(rank: int, d: int) -> float:
    """Smallest ``value_scalar_dist`` a map of rank ``rank`` on ``R^d`` can have: ``sqrt(1 - rank/d)``.

    Proof: with ``P`` the orthogonal projector on the range of ``U`` (rank ``r``),
    ``tr U = tr(P U) = <P, U>_F <= ||P||_F ||U||_F = sqrt(r) ||U||_F`` (Cauchy-Schwarz), so
    ``tr(U)^2 / (d ||U||^2) <= r/d``; equality for ``U = cP``.

    Examples
    --------
    >>> value_bound(32, 384) == math.sqrt(11 / 12)
    True
    """
    if not (0 <= rank <= d):
        raise ValueError(f"rank must be in [0, d], got rank={rank!r}, d={d!r}")
    return math.sqrt(1 - rank / d)


def inertia(M, rtol: float = 1e-10) -> tuple[int, int, int]:
    """(positive, negative, zero) eigenvalue counts of ``(M + M^T)/2``, zero meaning
    ``|lambda| <= rtol * max |lambda|``.

    Examples
    --------
    >>> inertia(np.diag([2.0, -1.0, 0.0, 5.0]))
    (2, 1, 1)
    """
    ev = _sym_eigs(M)
    tol = rtol * np.abs(ev).max()
    return int((ev > tol).sum()), int((ev < -tol).sum()), int((np.abs(ev) <= tol).sum())


def head_table(encoder) -> list[dict]:
    """:func:`head_row` for every head of ``encoder``, layer by layer.

    Examples
    --------
    >>> from attention_fw import encoder
    >>> table = head_table(encoder.load())
    >>> len(table), {(r["positive"], r["negative"]) for r in table}
    (72, {(32, 32)})
    """
    return [head_row(encoder, layer, h) for layer in range(encoder.layers) for h in range(encoder.heads)]


# ------------------------------------------------------------------------------ the tokens' subspace
def token_subspace(X, share: float = 0.9) -> np.ndarray:
    """Orthonormal basis (d, k) of the smallest span of top principal directions of the token
    states ``X`` (N, d) holding ``share`` of their energy ``sum ||x||^2`` (uncentred: the scores
    are bilinear in the states themselves, not in their deviations from the mean).

    Examples
    --------
    >>> X = np.array([[3.0, 0, 0], [0, 1, 0], [-3, 0, 0]])       # energies 18 and 1
    >>> token_subspace(X, 0.9).shape, token_subspace(X, 0.99).shape
    ((3, 1), (3, 2))
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or len(X) == 0:
        raise ValueError(f"X must be a non-empty (tokens, d) array, got shape {X.shape}")
    if not (0 < share <= 1):
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    _, s, vt = np.linalg.svd(X, full_matrices=False)
    energy = np.cumsum(s ** 2) / np.sum(s ** 2)
    k = int(np.searchsorted(energy, share - 1e-12) + 1)
    return vt[:k].T


def restricted(M, P) -> np.ndarray:
    """The form ``M`` on the span of the orthonormal columns of ``P``: ``P^T M P``.

    Examples
    --------
    >>> P = np.array([[1.0], [0.0]])
    >>> # the form on the first axis
    >>> restricted(np.array([[2.0, 5.0], [-5.0, -1.0]]), P)
    array([[2.]])
    """
    P = np.asarray(P, dtype=np.float64)
    return P.T @ _square("M", M) @ P


def token_sign(M, X) -> float:
    """Fraction of the token states ``X`` (N, d) with ``x^T M x > 0`` (the paper's ``B > 0`` needs 1,
    ``B < 0`` needs 0).

    Examples
    --------
    >>> token_sign(np.diag([1.0, -1.0]), np.array([[2.0, 1.0], [1.0, 2.0], [1.0, 0.0]]))
    0.6666666666666666
    """
    X = np.asarray(X, dtype=np.float64)
    return float(np.mean(((X @ _square("M", M)) * X).sum(axis=1) > 0))


def bias_share(X, mask, m: dict) -> float:
    """Share of the biases in how the scores vary over the keys.

    The score is ``(W_Q x_i + b_Q) . (W_K x_j + b_K) / sqrt(32)``. Over the keys ``j`` of one query
    only ``x_i^T M x_j`` and the key term ``b_Q . W_K x_j / sqrt(32)`` vary (the other terms shift a
    whole row and cancel in the softmax). Returns ``sum ||key term, row-centred||^2 / sum ||score,
    row-centred||^2`` over the rows of the batch ``X`` (b, n, d) with ``mask`` (b, n).

    Examples
    --------
    Without biases the share is 0:

    >>> rng = np.random.default_rng(0)
    >>> W = {
    ...     k: rng.standard_normal((64, 64)) for k in ("query", "key", "value", "output")
    ... }
    >>> W.update(
    ...     {k + "_bias": np.zeros(64) for k in ("query", "key", "value", "output")}
    ... )
    >>> bias_share(rng.standard_normal((2, 5, 64)), np.ones((2, 5)), head_matrices(W, 0))
    0.0
    """
    X = np.asarray(X, dtype=np.float64)
    num, den = _bias_parts(X, np.asarray(mask, dtype=np.float64), m)
    return num / den


def participation_ratio(Y) -> float:
    """Effective dimension ``(sum lambda)^2 / sum lambda^2`` of the covariance of the rows of ``Y``.

    Examples
    --------
    >>> participation_ratio(np.array([[1.0, 0], [-1, 0], [0, 1], [0, -1]]))
    2.0
    """
    Y = np.asarray(Y, dtype=np.float64)
    lam = np.linalg.eigvalsh(np.cov(Y.T, bias=True)) if Y.shape[1] > 1 else np.array([np.var(Y)])
    lam = np.clip(lam, 0, None)
    return float(lam.sum() ** 2 / np.sum(lam ** 2))


# ------------------------------------------------------------------------------ hull vertices
CERTIFICATE_DIRECTIONS = 2000
"""Random directions tried by :func:`hull_vertices` before its LPs (a fixed stream: they only
certify vertices, the answer does not depend on them)."""


def hull_vertices(points, *, tol: float = 1e-9) -> np.ndarray:
    """Which of ``points`` (n, k) are vertices of their convex hull (bool (n,)), by an exact LP test.

    A point is a vertex iff it is not a convex combination of the other (distinct) points: the
    linear program ``sum_j lambda_j p_j = p_i, sum_j lambda_j = 1, lambda >= 0`` over the others
    is infeasible (HiGHS through ``scipy.optimize.linprog``). Coincident points count once:
    every copy of a vertex is a vertex. Cheap certificates come first: when the distinct points
    are affinely independent all are vertices; a point that is the unique maximiser of a linear
    functional (``<p_i - mean, .>``, the same in the metric of the inverse covariance, or one of
    ``CERTIFICATE_DIRECTIONS`` random directions) is a vertex; only the rest go to the LP. The points are centred and
    scaled to unit largest norm before the test; ``tol`` is the relative margin of the
    certificates.

    Examples
    --------
    A square's corners with its centre and a repeated corner:

    >>> pts = np.array([[0.0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5], [1, 1]])
    >>> hull_vertices(pts).tolist()
    [True, True, True, True, False, True]
    """
    P = np.asarray(points, dtype=np.float64)
    if P.ndim != 2 or len(P) == 0:
        raise ValueError(f"points must be a non-empty (n, k) array, got shape {P.shape}")
    if not np.isfinite(P).all():
        raise ValueError("points must be finite")
    uniq, inverse = np.unique(P, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    m = len(uniq)
    if m <= 2:
        return np.ones(len(P), bool)
    Q = uniq - uniq.mean(axis=0)
    Q = Q / np.abs(Q).max()
    vert = np.zeros(m, bool)
    if np.linalg.matrix_rank(Q[1:] - Q[0]) == m - 1:              # affinely independent: a simplex
        vert[:] = True
        return vert[inverse]
    # certificates: p_i is the unique maximiser of <a, .> for a = p_i - mean, a = C^+ (p_i - mean)
    # (C the covariance) or one of CERTIFICATE_DIRECTIONS fixed random directions in that metric
    C = np.cov(Q.T, bias=True) if Q.shape[1] > 1 else np.atleast_2d(np.var(Q))
    white = np.linalg.pinv(C, hermitian=True)
    eye = np.eye(m, dtype=bool)
    for A in (Q, Q @ white):
        G = A @ Q.T                                                 # G[i, j] = <a_i, q_j>
        own = np.diag(G)
        rival = np.where(eye, -np.inf, G).max(axis=1)
        vert |= own > rival + tol * np.maximum(1.0, np.abs(own))
    w, V = np.linalg.eigh(white)
    R = np.random.default_rng(0).standard_normal((CERTIFICATE_DIRECTIONS, Q.shape[1])) @ (V * np.sqrt(np.clip(w, 0, None))).T
    F = R @ Q.T                                                     # (directions, m)
    top = np.argmax(F, axis=1)
    second = np.partition(F, -2, axis=1)[:, -2]
    ok = F[np.arange(len(F)), top] > second + tol * np.maximum(1.0, np.abs(second))
    vert[top[ok]] = True
    for i in np.flatnonzero(~vert):
        others = np.delete(Q, i, axis=0)
        A_eq = np.vstack([others.T, np.ones(m - 1)])
        b_eq = np.append(Q[i], 1.0)
        for method in ("highs-ds", "highs-ipm", "highs"):           # the dual simplex first; others on trouble
            res = linprog(np.zeros(m - 1), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method=method)
            if res.status in (0, 2):
                break
        else:
            raise RuntimeError(f"hull_vertices: the LP for point {i} ended with status {res.status} ({res.message})")
        vert[i] = res.status == 2                                   # infeasible: not in the others' hull
    return vert[inverse]


# ------------------------------------------------------------------------------ attention on text
def effective_support(weights, axis: int = -1) -> np.ndarray:
    """``exp(entropy)`` of attention rows (1 for a one-hot row, ``n`` for a uniform one).

    Examples
    --------
    >>> effective_support(np.array([[1.0, 0, 0, 0], [0.25, 0.25, 0.25, 0.25]])).round(
    ...     12
    ... ).tolist()
    [1.0, 4.0]
    """
    a = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(a > 0, a * np.log(a), 0.0).sum(axis=axis)
    return np.exp(h)


_PUNCT = re.compile(r"^[^\w\s]+$")


def token_classes(pieces) -> np.ndarray:
    """0 for [CLS], 1 for [SEP], 2 for punctuation, 3 for the other word pieces.

    Examples
    --------
    >>> token_classes(["[CLS]", "and", ",", "god", "[SEP]"]).tolist()
    [0, 3, 2, 3, 1]
    """
    out = np.full(len(pieces), 3)
    for i, p in enumerate(pieces):
        out[i] = 0 if p == "[CLS]" else 1 if p == "[SEP]" else 2 if _PUNCT.match(p) else 3
    return out


CLASS_NAMES = ("[CLS]", "[SEP]", "punctuation", "words")


@dataclass
class SentenceStats:
    """One sentence at one head: ``n`` tokens, mean effective support, distinct hardmax leaders,
    hull vertices of the keys (``vertices`` count and ``is_vertex`` mask, or None when not
    computed), mean attention mass on the vertices, on each token class (``class_mass``, 4) and
    the share of each class among the tokens (``class_share``), whether each unique leader is a
    vertex (``leaders_are_vertices``).

    Examples
    --------
    >>> st = sentence_stats(np.eye(3), np.eye(3), np.eye(3), ["[CLS]", "x", "[SEP]"])
    >>> st.n, st.support, st.class_mass.tolist()
    (3, 1.0, [0.3333333333333333, 0.3333333333333333, 0.0, 0.3333333333333333])
    """
    n: int
    support: float
    leaders: int
    vertices: int | None
    is_vertex: np.ndarray | None
    vertex_mass: float | None
    class_mass: np.ndarray
    class_share: np.ndarray
    leaders_are_vertices: bool | None
    leader_index: np.ndarray


def sentence_stats(scores, weights, keys, pieces, *, hull: bool = True) -> SentenceStats:
    """The statistics of one head on one sentence (real tokens only: ``scores``, ``weights`` (n, n),
    ``keys`` (n, 32), ``pieces`` its n word pieces).

    Examples
    --------
    >>> keys = np.array([[0.0, 0], [1, 0], [0, 1], [0.3, 0.3]])
    >>> s = keys @ keys.T                                      # query = key
    >>> a = np.exp(s) / np.exp(s).sum(1, keepdims=True)
    >>> st = sentence_stats(s, a, keys, ["[CLS]", "a", "b", "[SEP]"])
    >>> st.vertices, st.leaders, st.leaders_are_vertices
    (3, 3, True)
    """
    s = np.asarray(scores, dtype=np.float64)
    a = np.asarray(weights, dtype=np.float64)
    n = len(pieces)
    if s.shape != (n, n) or a.shape != (n, n) or np.shape(keys)[0] != n:
        raise ValueError(f"scores and weights must be ({n}, {n}) and keys ({n}, k) for {n} pieces")
    lead = np.argmax(s, axis=1)
    top = s[np.arange(n), lead]
    unique = (s >= top[:, None] - 1e-12 * np.maximum(1, np.abs(top[:, None]))).sum(axis=1) == 1
    cls = token_classes(pieces)
    class_mass = np.array([a[:, cls == c].sum(axis=1).mean() for c in range(4)])
    class_share = np.array([(cls == c).mean() for c in range(4)])
    vert = hull_vertices(keys) if hull else None
    return SentenceStats(
        n=n, support=float(effective_support(a).mean()), leaders=int(len(np.unique(lead))),
        vertices=None if vert is None else int(vert.sum()), is_vertex=vert,
        vertex_mass=None if vert is None else float(a[:, vert].sum(axis=1).mean()),
        class_mass=class_mass, class_share=class_share,
        leaders_are_vertices=None if vert is None else bool(vert[lead[unique]].all()), leader_index=lead)


# ------------------------------------------------------------------------------ the 72 heads, fast
def head_spectrum(m: dict) -> np.ndarray:
    """The (at most 64) non-zero eigenvalues of ``S = (M + M^T)/2`` of a head, exactly.

    ``S = C^T J C`` with ``C`` the stacked blocks ``W_Q``, ``W_K`` (64 x d) and
    ``J = [[0, I], [I, 0]] / (2 sqrt(head_dim))``; with ``C^T = Q R`` (QR), ``S = Q (R J R^T) Q^T``,
    so the non-zero eigenvalues of ``S`` are those of the 64 x 64 matrix ``R J R^T``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> m = {
    ...     "Wq": rng.standard_normal((32, 100)),
    ...     "Wk": rng.standard_normal((32, 100)),
    ...     "head_dim": 32,
    ... }
    >>> M = m["Wq"].T @ m["Wk"] / np.sqrt(32)
    >>> full = np.linalg.eigvalsh((M + M.T) / 2)
    >>> bool(np.allclose(np.sort(head_spectrum(m)), np.r_[full[:32], full[-32:]]))
    True
    """
    r = m["head_dim"]
    C = np.vstack([m["Wq"], m["Wk"]])
    _, R = np.linalg.qr(C.T)
    J = np.zeros((2 * r, 2 * r))
    J[:r, r:] = J[r:, :r] = np.eye(r) / (2 * math.sqrt(r))
    return np.linalg.eigvalsh(R @ J @ R.T)


def head_row(encoder, layer: int, head: int) -> dict:
    """One head's entry of the table: ``layer``, ``head``, ``antisym_ratio``, ``pos_mass``,
    ``value_scalar_dist`` (all float64), the inertia of ``S`` (``positive``, ``negative``) and the
    rank of ``U``.

    Examples
    --------
    >>> from attention_fw import encoder
    >>> row = head_row(encoder.load(), 0, 0)
    >>> print(*sorted(row))
    antisym_ratio head layer negative pos_mass positive rank_U value_scalar_dist
    >>> row["positive"], row["negative"], row["rank_U"]
    (32, 32, 32)
    """
    m = head_matrices(encoder.attention_weights(layer), head, encoder.head_dim)
    ev = head_spectrum(m)
    tol = 1e-10 * np.abs(ev).max()
    # rank of U = W_O W_V from the 32 x 32 core of the two thin factors
    _, ro = np.linalg.qr(m["Wo"])
    _, rv = np.linalg.qr(m["Wv"].T)
    rank_u = int(np.linalg.matrix_rank(ro @ rv.T))
    return {"layer": int(layer), "head": int(head), "antisym_ratio": antisym_ratio(m["M"]),
            "pos_mass": float(ev[ev > 0].sum() / np.abs(ev).sum()), "value_scalar_dist": value_scalar_dist(m["U"]),
            "positive": int((ev > tol).sum()), "negative": int((ev < -tol).sum()), "rank_U": rank_u}


# ------------------------------------------------------------------------------ a corpus through the model
def _batches(lengths, max_tokens):
    order = np.argsort(lengths, kind="stable")
    batch, longest = [], 0
    for i in order:
        longest = max(longest, int(lengths[i]))
        if batch and longest * (len(batch) + 1) > max_tokens:
            yield batch
            batch, longest = [], int(lengths[i])
        batch.append(int(i))
    if batch:
        yield batch


def corpus_study(encoder, texts, *, hull_for=(), shares=(0.9, 0.99), max_tokens: int = 4096,
                 token_sample: int = 4000, rng) -> dict:
    """Every head of ``encoder`` on the sentences ``texts``: per sentence and head the effective
    support, the distinct leaders and the mass per token class; the hull vertices of the keys
    for the sentences whose indices are in ``hull_for``; per head the statistics of ``M`` on the
    subspaces holding ``shares`` of the energy of the layer's input states, the fraction of
    tokens with ``x^T M x > 0`` and the biases' share of the variation of the scores; per head
    the effective dimension (participation ratio) of its keys.

    Returns a dict of arrays: ``n`` (sentences,), ``support``, ``leaders`` (sentences, layers,
    heads), ``class_mass`` (sentences, layers, heads, 4), ``class_share`` (sentences, 4),
    ``hull`` (list of dicts for ``hull_for``: ``sentence``, ``layer``, ``head``, ``n``,
    ``vertices``, ``vertex_mass``, ``leaders_are_vertices``), ``subspace`` (per share: ``dim``
    per layer and ``pos_mass``, ``antisym_ratio`` per (layer, head)), ``token_sign``,
    ``bias_share``, ``key_dim`` (layers, heads), ``states`` (per layer a sample of input
    states, ``token_sample`` rows).

    Examples
    --------
    >>> from attention_fw import encoder
    >>> st = corpus_study(
    ...     encoder.load(),
    ...     [
    ...         "And God saw the light.",
    ...         "And the evening and the morning were the first day.",
    ...     ],
    ...     hull_for=[0],
    ...     token_sample=20,
    ...     rng=0,
    ... )
    >>> (
    ...     st["support"].shape,
    ...     len(st["hull"]),
    ...     all(e["vertices"] == e["n"] for e in st["hull"]),
    ... )
    ((2, 6, 12), 72, True)
    """
    L, H = encoder.layers, encoder.heads
    tok = encoder.tokenize(list(texts))
    S = len(texts)
    out = {"n": tok.lengths.copy(), "support": np.zeros((S, L, H)), "leaders": np.zeros((S, L, H), int),
           "class_mass": np.zeros((S, L, H, 4)), "class_share": np.zeros((S, 4)), "hull": []}
    hull_for = set(int(i) for i in hull_for)
    bias_num, bias_den = np.zeros((L, H)), np.zeros((L, H))
    states: list[list[np.ndarray]] = [[] for _ in range(L)]
    keys: list[list[list[np.ndarray]]] = [[[] for _ in range(H)] for _ in range(L)]
    for idx in _batches(tok.lengths, max_tokens):
        n = int(tok.lengths[idx].max())
        ids, mask = tok.ids[idx, :n], tok.mask[idx, :n]
        f = encoder.forward(ids, mask, keep=True, dtype=np.float32)
        w = mask.astype(np.float64)
        cls = np.zeros((len(idx), n, 4))
        for r, i in enumerate(idx):
            c = token_classes(tok.pieces[i])
            cls[r, np.arange(len(c)), c] = 1.0
        out["class_share"][idx] = cls.sum(1) / w.sum(1)[:, None]
        rows = w.sum(1)[:, None]                                         # real rows per sentence
        for layer in range(L):
            kept = f.heads[layer]
            a = kept["weights"].astype(np.float64)                       # (b, H, n, n)
            s = kept["scores"].astype(np.float64)
            sup = effective_support(a)                                   # (b, H, n)
            out["support"][idx, layer] = (sup * w[:, None, :]).sum(-1) / rows
            lead = np.where(w[:, None, :] > 0, np.argmax(s, axis=-1), -1)   # padded rows -> -1
            srt = np.sort(lead, axis=-1)
            distinct = (np.diff(srt, axis=-1) != 0) & (srt[..., 1:] >= 0)
            out["leaders"][idx, layer] = distinct.sum(-1) + (srt[..., :1] >= 0).sum(-1)
            mass = np.einsum("bhij,bjc->bhic", a, cls)
            out["class_mass"][idx, layer] = (mass * w[:, None, :, None]).sum(2) / rows[:, None, :]
            X = f.inputs[layer].astype(np.float64)
            states[layer].append(X[mask.astype(bool)])
            W = encoder.attention_weights(layer)
            for h in range(H):
                m = head_matrices(W, h, encoder.head_dim)
                num, den = _bias_parts(X, w, m)
                bias_num[layer, h] += num
                bias_den[layer, h] += den
                k = kept["keys"][:, h].astype(np.float64)
                keys[layer][h].append(k[mask.astype(bool)])
                for r, i in enumerate(idx):
                    if i in hull_for:
                        ni = int(tok.lengths[i])
                        st = sentence_stats(s[r, h, :ni, :ni], a[r, h, :ni, :ni], k[r, :ni], tok.pieces[i])
                        out["hull"].append({"sentence": int(i), "layer": layer, "head": h, "n": ni,
                                            "vertices": st.vertices, "vertex_mass": st.vertex_mass,
                                            "support": st.support, "leaders": st.leaders,
                                            "leaders_are_vertices": st.leaders_are_vertices,
                                            "is_vertex": st.is_vertex, "leader_index": st.leader_index})
    out["hull"].sort(key=lambda e: (e["sentence"], e["layer"], e["head"]))
    out["bias_share"] = bias_num / bias_den
    gen = _validate.rng("rng", rng)
    out["subspace"], out["token_sign"], out["key_dim"], out["states"] = {}, np.zeros((L, H)), np.zeros((L, H)), []
    for share in shares:
        out["subspace"][share] = {"dim": np.zeros(L, int), "pos_mass": np.zeros((L, H)),
                                  "antisym_ratio": np.zeros((L, H))}
    for layer in range(L):
        X = np.concatenate(states[layer])
        sample = X[gen.choice(len(X), size=min(token_sample, len(X)), replace=False)]
        out["states"].append(sample)
        bases = {share: token_subspace(X, share) for share in shares}
        W = encoder.attention_weights(layer)
        for h in range(H):
            m = head_matrices(W, h, encoder.head_dim)
            out["token_sign"][layer, h] = token_sign(m["M"], X)
            out["key_dim"][layer, h] = participation_ratio(np.concatenate(keys[layer][h]))
            for share, P in bases.items():
                Mp = restricted(m["M"], P)
                sub = out["subspace"][share]
                sub["dim"][layer] = P.shape[1]
                sub["pos_mass"][layer, h] = pos_mass(Mp)
                sub["antisym_ratio"][layer, h] = antisym_ratio(Mp)
    return out


def _bias_parts(X, w, m):
    """Numerator and denominator of :func:`bias_share` for one batch."""
    q = X @ m["Wq"].T + m["bq"]
    k = X @ m["Wk"].T + m["bk"]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(m["head_dim"])
    kb = (k @ m["bq"]) / math.sqrt(m["head_dim"])
    cnt = w.sum(axis=1)[:, None, None]

    def centred_energy(a):
        mean = (a * w[:, None, :]).sum(-1, keepdims=True) / cnt
        return float((((a - mean) ** 2 * w[:, None, :]).sum(-1) * w).sum())

    return centred_energy(np.broadcast_to(kb[:, None, :], s.shape)), centred_energy(s)


# ------------------------------------------------------------------------------ the paper's dynamics with a trained head
def clusters(x, tol: float) -> int:
    """Number of groups of the points ``x`` (n, d) whose single-linkage distance is at most ``tol``.

    Examples
    --------
    >>> clusters(np.array([[0.0, 0], [0, 1e-9], [1, 0]]), 1e-6)
    2
    """
    x = np.asarray(x, dtype=np.float64)
    if len(x) < 2:
        return len(x)
    return int(fcluster(linkage(x, "single"), t=tol, criterion="distance").max())


def head_dynamics(x0, M, *, steps: int, gamma: float = 0.5, every: int = 1, cluster_rtol: float = 1e-3) -> dict:
    """Iterate the attention-only update (1.3) with ``V = h I`` (step ``gamma = h/(1+h)``) and the
    trained head's form at its trained temperature: ``x_i <- (1 - gamma) x_i + gamma sum_j A_ij x_j``,
    ``A_ij`` the softmax over ``j`` of ``x_i^T M x_j`` (``M`` includes the head's ``1/sqrt(32)``;
    in the paper's notation ``B = M^T``, ``beta = 1``), simultaneous for all tokens, no biases, no
    MLP, no LayerNorm. Built on :func:`attention_fw.model.dynamics.simulate` with its ``Softmax`` rule.

    Returns ``x`` (saved layers, n, d), ``t`` (the layers saved), ``diameter`` (relative to the
    start), ``clusters`` (groups at ``cluster_rtol`` times the initial diameter), ``leaders``
    (distinct hardmax leaders at each saved layer) and ``selfled`` (tokens that are their own
    leader).

    Examples
    --------
    With ``M = -I`` every token is pulled towards the others and the cloud collapses:

    >>> x0 = np.random.default_rng(0).standard_normal((6, 3))
    >>> run = head_dynamics(x0, -np.eye(3), steps=60)
    >>> int(run["clusters"][-1]), bool(run["diameter"][-1] < 1e-6)
    (1, True)
    """
    x0 = np.asarray(x0, dtype=np.float64)
    M = _square("M", M)
    run = simulate(x0, Softmax(gamma, 1.0, B=M.T), steps, trajectory=True, every=every)
    xs = np.asarray(run.trajectory)
    t = np.asarray(run.times)
    diam0 = float(np.max(np.linalg.norm(x0[:, None] - x0[None], axis=-1)))
    diam = np.array([np.max(np.linalg.norm(x[:, None] - x[None], axis=-1)) for x in xs]) / diam0
    lead = [np.argmax(x @ M @ x.T, axis=1) for x in xs]
    return {"x": xs, "t": t, "diameter": diam, "clusters": np.array([clusters(x, cluster_rtol * diam0) for x in xs]),
            "leaders": np.array([len(np.unique(a)) for a in lead]),
            "selfled": np.array([int((a == np.arange(len(a))).sum()) for a in lead]), "gamma": gamma, "steps": steps}


# ------------------------------------------------------------------------------ helpers of the chapter
def passages(texts, sizes, count: int) -> list[str]:
    """Longer inputs from consecutive sentences: for each ``k`` in ``sizes``, the first ``count``
    non-overlapping runs of ``k`` consecutive ``texts`` joined by spaces.

    Examples
    --------
    >>> passages(["a.", "b.", "c.", "d.", "e."], [2], 2)
    ['a. b.', 'c. d.']
    """
    out = []
    for k in sizes:
        if int(k) < 1:
            raise ValueError(f"sizes must be positive integers, got {k!r}")
        runs = [" ".join(texts[s:s + k]) for s in range(0, len(texts) - k + 1, k)]
        out += runs[:count]
    return out


def spread(n, k: int) -> np.ndarray:
    """Indices of ``k`` entries of ``n`` spread evenly over its sorted values (smallest and largest
    included).

    Examples
    --------
    >>> spread(np.array([5, 50, 10, 20, 40]), 3).tolist()
    [0, 3, 1]
    """
    n = np.asarray(n)
    order = np.argsort(n, kind="stable")
    pos = np.unique(np.round(np.linspace(0, len(n) - 1, min(k, len(n)))).astype(int))
    return order[pos]


def sentence_panel(encoder, text: str, layer: int, head: int) -> dict:
    """One sentence at one head, for a picture: word pieces, weights, each row's leader, the keys'
    vertices in the head's space and in the plane of their two first principal components.

    Examples
    --------
    >>> from attention_fw import encoder
    >>> p = sentence_panel(encoder.load(), "And God saw the light.", 0, 2)
    >>> # 8 keys in 32 dimensions: a simplex
    >>> p["pieces"][:3], int(p["is_vertex"].sum()), len(p["weights"])
    (['[CLS]', 'and', 'god'], 8, 8)
    """
    t = encoder.tokenize([text])
    f = encoder.forward(t.ids, t.mask, keep=True)
    kept = f.heads[layer]
    k = kept["keys"][0, head]
    st = sentence_stats(kept["scores"][0, head], kept["weights"][0, head], k, t.pieces[0])
    c = k - k.mean(axis=0)
    _, _, vt = np.linalg.svd(c, full_matrices=False)
    return {"layer": int(layer), "head": int(head), "pieces": t.pieces[0], "weights": kept["weights"][0, head],
            "leader_index": st.leader_index, "is_vertex": st.is_vertex, "is_vertex_2d": hull_vertices(c @ vt[:2].T),
            "support": st.support}


def sink_head(study: dict) -> tuple[int, int]:
    """(layer, head) whose rows give the most mass, on average, to [CLS] and [SEP].

    Examples
    --------
    >>> cm = np.zeros((1, 2, 2, 4)); cm[..., 3] = 1; cm[0, 1, 0] = [0.9, 0, 0, 0.1]
    >>> sink_head({"class_mass": cm})
    (1, 0)
    """
    m = study["class_mass"][..., :2].sum(-1).mean(axis=0)
    layer, head = np.unravel_index(np.argmax(m), m.shape)
    return int(layer), int(head)


def dynamics_runs(encoder, states, heads: dict, *, steps: int, betas, gamma: float = 0.5):
    """:func:`head_dynamics` for each named head ``{label: (layer, head)}`` of ``encoder``, as
    trained and with ``M`` replaced by its symmetric part, at each multiple ``beta`` of the trained
    inverse temperature, from ``states[layer][0]`` (the token states of one sentence entering the
    head's layer, as :meth:`attention_fw.encoder.bert.Encoder.forward` keeps them).

    Returns ``(runs, sweep)``: ``sweep`` has every run (``label``, ``head_label``, ``layer``,
    ``head``, ``kind``, ``beta`` and the results of :func:`head_dynamics` but the states);
    ``runs`` the runs at ``beta = 1`` with their states ``x``, for pictures.

    Examples
    --------
    >>> from attention_fw import encoder
    >>> enc = encoder.load()
    >>> t = enc.tokenize(["And God saw the light."])
    >>> runs, sweep = dynamics_runs(
    ...     enc,
    ...     enc.forward(t.ids, t.mask, keep=True).inputs,
    ...     {"a head": (4, 2)},
    ...     steps=30,
    ...     betas=[1.0],
    ... )
    >>> # trained and symmetric part; collapse
    >>> len(runs), len(sweep), int(sweep[0]["clusters"][-1])
    (2, 2, 1)
    """
    betas = [float(b) for b in betas]
    if 1.0 not in betas:
        betas = [1.0] + betas
    runs, sweep = [], []
    for label, (layer, head) in heads.items():
        m = head_matrices(encoder.attention_weights(layer), head, encoder.head_dim)
        x0 = np.asarray(states[layer][0], dtype=np.float64)
        for kind, M in (("trained", m["M"]), ("symmetric part", (m["M"] + m["M"].T) / 2)):
            for beta in betas:
                r = head_dynamics(x0, beta * M, steps=steps, gamma=gamma)
                r.update(head_label=label, layer=int(layer), head=int(head), kind=kind, beta=beta,
                         label=f"{label} ({layer}.{head}), {kind}, beta x{beta:g}")
                if beta == 1.0:
                    runs.append(dict(r, label=f"{label} head {layer}.{head}, {kind}"))
                r.pop("x")
                sweep.append(r)
    return runs, sweep


def first_below(values, t, tol: float):
    """The first ``t`` at which ``values`` is below ``tol`` (None if never).

    Examples
    --------
    >>> first_below([1.0, 0.1, 1e-7], [0, 1, 2], 1e-6)
    2
    """
    idx = np.flatnonzero(np.asarray(values) < tol)
    return int(np.asarray(t)[idx[0]]) if len(idx) else None


def describe(run: dict) -> str:
    """The end of a :func:`head_dynamics` run in words: clusters and diameter.

    Examples
    --------
    >>> describe({"clusters": [5, 3], "diameter": [1.0, 0.5], "t": [0, 10]})
    '3 clusters after 10 layers (diameter 0.50 of the start)'
    """
    c, d = int(run["clusters"][-1]), float(run["diameter"][-1])
    if c == 1:
        return f"one cluster after {int(run['t'][-1])} layers (diameter {d:.0e} of the start)"
    return f"{c} clusters after {int(run['t'][-1])} layers (diameter {d:.2f} of the start)"


def _listed(words) -> str:
    """'a', 'a and b', 'a, b and c'."""
    words = list(words)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def collapse_summary(runs, steps: int, tol: float = 1e-6) -> tuple[str, str]:
    """Which of ``runs`` (:func:`dynamics_runs`' runs: ``head_label``, ``kind``, ``t``,
    ``clusters``, ``diameter``) collapse, in words: ``(status, sentence)``.

    A run has collapsed when its diameter falls below ``tol`` (:func:`first_below`) within the
    ``steps`` layers it ran. ``status`` is ``"all"`` (every run collapsed), ``"none"`` or
    ``"some"``; ``sentence`` names the heads of each kind and, for the runs left, their clusters
    and diameters (a run may already be one cluster, at 1e-3 of its start, without having
    collapsed below ``tol``).

    Examples
    --------
    >>> a = {"head_label": "a", "kind": "trained", "t": [0, 5, 9], "clusters": [4, 1, 1],
    ...      "diameter": [1.0, 1e-8, 1e-12]}
    >>> b = {"head_label": "b", "kind": "trained", "t": [0, 5, 9], "clusters": [4, 3, 3],
    ...      "diameter": [1.0, 0.6, 0.5]}
    >>> import textwrap
    >>> status, sentence = collapse_summary([a], 9)
    >>> print(status); print(textwrap.fill(sentence, 78))
    all
    the tokens collapse to one point within 5 layers, whichever head drives them
    >>> status, sentence = collapse_summary([a, b], 9)
    >>> print(status); print(textwrap.fill(sentence, 78))
    some
    under the a head (as trained) the tokens collapse to one point within 5
    layers; under the b head (as trained) they have not collapsed after 9 layers,
    leaving 3 clusters (diameter 0.50 of the start)
    """
    runs = list(runs)
    if not runs:
        raise ValueError("runs must hold at least one run, got none")
    times = [first_below(r["diameter"], r["t"], tol) for r in runs]
    heads = list(dict.fromkeys(r["head_label"] for r in runs))

    def of_head(collapsed: bool) -> list[list[dict]]:
        groups = [[r for r, c in zip(runs, times) if (c is not None) == collapsed and r["head_label"] == h]
                  for h in heads]
        return [g for g in groups if g]

    def under(group) -> str:
        kinds = " and ".join("as trained" if r["kind"] == "trained" else "symmetrised" for r in group)
        return f"the {group[0]['head_label']} head ({kinds})"

    done, left = of_head(True), of_head(False)
    within = max((c for c in times if c is not None), default=None)
    if not left:
        return "all", f"the tokens collapse to one point within {within} layers, whichever head drives them"
    def left_by(run) -> str:
        c, d = int(run["clusters"][-1]), float(run["diameter"][-1])
        return (f"{'one cluster' if c == 1 else f'{c} clusters'} "
                f"(diameter {f'{d:.2f}' if d >= 0.01 else f'{d:.0e}'} of the start)")

    still = (f"{'they' if done else 'the tokens'} have not collapsed after {steps} layers, "
             f"leaving {_listed(left_by(r) for g in left for r in g)}")
    lefts = " and ".join(under(g) for g in left)
    if not done:
        return "none", f"under {lefts} {still}"
    dones = " and ".join(under(g) for g in done)
    return "some", f"under {dones} the tokens collapse to one point within {within} layers; under {lefts} {still}"


def broad_head(study: dict) -> tuple[int, int]:
    """(layer, head) with the largest median effective support relative to the number of tokens.

    Examples
    --------
    >>> broad_head({"support": np.array([[[1.0, 3.0], [2.0, 1.0]]]), "n": np.array([4])})
    (0, 1)
    """
    m = np.median(study["support"] / np.asarray(study["n"])[:, None, None], axis=0)
    layer, head = np.unravel_index(np.argmax(m), m.shape)
    return int(layer), int(head)
