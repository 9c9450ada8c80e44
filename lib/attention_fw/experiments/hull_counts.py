"""Well-posed counts of the keys a head could attend to (geometry) and of those it does attend to.

The review of the paper reads its geometry (a hardmax leader maximises a linear functional over the
keys, so it is a vertex of their hull) as a prediction: the number of tokens a head attends to
should follow the number of hull vertices rather than the context length ``n``. In a head's 32
dimensions any ``n <= 33`` keys in general position are all vertices, so the plain vertex count
tests nothing there. These counts are posed so that they can tell the two apart; each takes one
head on one input: ``queries`` (n_q, k) and ``keys`` (n, k) as the model computes them (biases
included), logits ``queries @ keys.T * scale`` with ``scale = 1/sqrt(k)`` unless given.

Geometry of the keys:

* :func:`near_top` keys within ``delta`` nats of the largest logit of some actual query;
* :func:`robust_vertices` keys farther than ``eps * diam`` from the hull of the other keys (``diam``
  the largest distance between two keys), the distance computed exactly (:func:`hull_distances`);
* :func:`projected_vertices` hull vertices of the keys projected on their top ``k`` principal
  directions (centred keys), and :func:`query_span_vertices` on the span of the head's queries;
* :func:`onion_depth` the onion layer of each key in a projection (1: a vertex of the hull of all
  keys, 2: of the rest, ...).

Attention (:func:`attention_counts`): the effective support ``exp(H)``, the number of keys holding
90% of a row's mass, the participation count ``1/sum a^2`` (the inverse of the inverse
participation ratio ``sum a^2``) and the distinct hardmax leaders.

:func:`head_counts` computes all of them for one head and one input; :func:`scaling_exponents` fits
each count's growth ``count ~ n^b`` over inputs with bootstrap intervals.

How the distances are computed. The distance from ``p_i`` to the hull of the other points is a
quadratic programme over the simplex. Frank-Wolfe's algorithm on it, run for all points at once,
gives at every step a point of the hull (an upper bound on the distance) and a separating direction
(a lower bound, ``min_j <u, p_j - p_i>`` for the unit vector ``u`` from the hull point to
``p_i``). A threshold is decided when the two bounds fall on the same side of it; the points left
undecided get the exact answer from Lawson and Hanson's NNLS (``scipy.optimize.nnls``) on the dual
least-distance programme, so every decision is exact up to rounding.

Examples
--------
>>> import numpy as np
>>> square = np.array([[0.0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]])
>>> # a corner is 1/sqrt 2 from the others' hull
>>> hull_distances(square).round(6).tolist()
[0.707107, 0.707107, 0.707107, 0.707107, 0.0]
>>> robust_vertices(square, (0.01, 0.6)).tolist()    # diam = sqrt 2
[4, 0]
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import nnls
from scipy.spatial import ConvexHull, QhullError

from .. import _validate

__all__ = ["DELTAS", "EPSILONS", "DIMENSIONS", "near_top", "hull_distances", "robust_vertices", "vertex_mask",
           "principal_projection", "projected_vertices", "query_span_vertices", "onion_depth",
           "attention_counts", "head_counts", "layer_counts", "clauses", "length_ladder", "head_arrays",
           "encoder_counts", "probe", "scaling_table", "verdicts", "ATTENTION", "HULL", "scaling_exponents", "STATISTICS"]

DELTAS = (0.5, 1.0, 2.0, 4.0)
"""Margins (nats) of :func:`near_top`."""
EPSILONS = (0.01, 0.03, 0.1)
"""Relative distances (of the keys' diameter) of :func:`robust_vertices`."""
DIMENSIONS = (2, 3, 4, 8)
"""Principal dimensions of :func:`projected_vertices`."""
_FW_STEPS = 200
_RTOL = 1e-9


def _points(name, P, min_rows=1):
    P = _validate.as_float_array(name, P, ndim=2)
    if len(P) < min_rows or P.shape[1] == 0:
        raise ValueError(f"{name} must have at least {min_rows} row(s) and one column, got shape {P.shape}")
    return P


def _logits(queries, keys, scale):
    Q = _points("queries", queries)
    K = _points("keys", keys)
    if Q.shape[1] != K.shape[1]:
        raise ValueError(f"queries and keys must have the same width, got {Q.shape[1]} and {K.shape[1]}")
    s = 1 / math.sqrt(K.shape[1]) if scale is None else _validate.real_scalar("scale", scale, low=0.0)
    return Q @ K.T * s


# ------------------------------------------------------------------------------ keys near the top
def near_top(queries, keys, deltas=DELTAS, *, scale=None) -> np.ndarray:
    """How many keys come within ``delta`` nats of some query's largest logit, for each ``delta``.

    Key ``j`` counts when ``l_ij >= max_j' l_ij' - delta`` for at least one query ``i``, with
    logits ``l = queries @ keys.T * scale`` (``scale = 1/sqrt(k)`` by default). ``delta = 0``
    counts the distinct hardmax leaders, ties included. Returns an int array, one count per delta.

    Examples
    --------
    One query, logits 0, -0.3, -1.5, -5 on four keys:

    >>> q = np.array([[1.0]]); k = np.array([[0.0], [-0.3], [-1.5], [-5.0]])
    >>> near_top(q, k, (0, 0.5, 1, 2, 4), scale=1.0).tolist()
    [1, 2, 2, 3, 3]
    """
    L = _logits(queries, keys, scale)
    d = np.asarray(deltas, dtype=np.float64).reshape(-1)
    if (d < 0).any() or not np.isfinite(d).all():
        raise ValueError(f"deltas must be finite and >= 0, got {deltas!r}")
    gap = L.max(axis=1, keepdims=True) - L                        # (n_q, n) >= 0
    best = gap.min(axis=0)                                        # the smallest gap of each key
    tol = _RTOL * max(1.0, float(np.abs(L).max()))
    return (best[None, :] <= d[:, None] + tol).sum(axis=1)


# ------------------------------------------------------------------------------ distances to the others' hull
def _nnls_distance(P, i):
    """Exact distance from ``P[i]`` to the hull of the other rows (Lawson-Hanson's LDP by NNLS).

    With ``C`` the columns ``p_j - p_i`` (j != i), NNLS of ``[C; 1^T] u ~ [0; 1]`` gives at its
    solution ``||C u||^2 = sum(u) (1 - sum(u))`` (the optimality condition), and ``C u / sum(u)``
    is the point of the hull nearest ``p_i`` (Lawson and Hanson, Solving Least Squares Problems,
    ch. 23); when ``p_i`` is in the hull the residual is 0 and so is the distance."""
    C = np.delete(P, i, axis=0) - P[i]
    scale = float(np.abs(C).max())
    if scale == 0:
        return 0.0
    E = np.vstack([C.T / scale, np.ones(len(C))])
    f = np.zeros(len(E))
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * E.shape[1])
    total = u.sum()
    if total <= 0:
        return 0.0
    return float(np.linalg.norm(C.T @ u) / total)


def _fw_bounds(P, thresholds, margin: float, steps: int = _FW_STEPS, patience: int = 15):
    """Lower and upper bounds on the distance of every row of ``P`` (B, n, k) to the hull of the
    other rows of its batch, by Frank-Wolfe on the simplex, for all rows of all batches at once.

    A row leaves the loop once its bounds fall on one side of each of its batch's ``thresholds``
    (B, T) (with ``margin``); the loop ends when no row is left, or when their number has not
    fallen for ``patience`` steps (the rest go to the exact solver). Only inner products are
    carried: ``G = P P^T`` once, then per row ``<y, p_j>`` and ``||y||^2`` for its hull point
    ``y``, updated in O(n) per row and step."""
    B, n, _ = P.shape
    G = np.einsum("bik,bjk->bij", P, P)
    g = np.diagonal(G, axis1=1, axis2=2)                           # ||p_i||^2
    tot = G.sum(axis=2)                                            # <p_i, sum_j p_j>
    lo = np.full((B, n), -np.inf)
    hi = np.full((B, n), np.inf)
    # the active rows, flattened over (batch, row); y starts at the mean of the others
    rb, ri = np.divmod(np.arange(B * n), n)
    Grow = G[rb, ri]                                               # <p_i, p_j>
    YP = (tot[rb] - Grow) / max(n - 1, 1)                          # <y, p_j>
    yy = (G.sum(axis=(1, 2))[rb] - 2 * tot[rb, ri] + g[rb, ri]) / max(n - 1, 1) ** 2
    thr = np.asarray(thresholds, dtype=np.float64)
    best, since = len(rb) + 1, 0
    for _ in range(steps):
        R = np.arange(len(rb))
        own = g[rb, ri]
        yp_own = YP[R, ri]
        proj = YP - Grow - (yp_own - own)[:, None]                 # <y - p_i, p_j - p_i>
        proj[R, ri] = np.inf
        j = np.argmin(proj, axis=1)
        norm = np.sqrt(np.maximum(yy - 2 * yp_own + own, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            low = np.where(norm > 0, proj[R, j] / norm, -np.inf)
        lo[rb, ri] = np.maximum(lo[rb, ri], low)
        hi[rb, ri] = np.minimum(hi[rb, ri], norm)
        t = thr[rb]                                                # (R, T)
        open_ = (~((lo[rb, ri][:, None] > t + margin) | (hi[rb, ri][:, None] <= t - margin))).any(axis=1)
        left = int(open_.sum())
        if left == 0:
            break
        best, since = (left, 0) if left < best else (best, since + 1)
        if since >= patience:
            break
        keep = np.flatnonzero(open_)
        rb, ri, j, Grow, YP, yy, yp_own = rb[keep], ri[keep], j[keep], Grow[keep], YP[keep], yy[keep], yp_own[keep]
        R = np.arange(len(rb))
        # a step y += gamma (p_j - y), exact line search on ||y - p_i||^2
        ypj = YP[R, j]
        xd = ypj - yy - Grow[R, j] + yp_own                        # <y - p_i, p_j - y>
        dd = np.maximum(g[rb, j] - 2 * ypj + yy, 0.0)              # ||p_j - y||^2
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma = np.clip(np.where(dd > 0, -xd / dd, 0.0), 0.0, 1.0)
        yy = yy + 2 * gamma * (ypj - yy) + gamma ** 2 * dd
        YP = (1 - gamma)[:, None] * YP + gamma[:, None] * G[rb, j]
    return lo, hi


def hull_distances(points) -> np.ndarray:
    """Distance of each of ``points`` (n, k) to the convex hull of the other points, exactly.

    Every point gets the exact answer of the least-distance programme (NNLS); see the module's
    notes. A point equal to another is at distance 0; so is a point inside the others' hull.

    Examples
    --------
    A regular triangle of side 1: each vertex is at the height sqrt(3)/2 from the opposite side.

    >>> tri = np.array([[0.0, 0], [1, 0], [0.5, np.sqrt(3) / 2]])
    >>> hull_distances(tri).round(6).tolist()
    [0.866025, 0.866025, 0.866025]
    """
    P = _points("points", points, 2)
    return np.array([_nnls_distance(P, i) for i in range(len(P))])


def _decide(P, thresholds):
    """``out[b, t, i]``: is the distance of ``P[b, i]`` (P: (B, n, k)) to the hull of the other
    rows of ``P[b]`` larger than ``thresholds[b, t]``? Frank-Wolfe's bounds first, the exact NNLS
    for whatever they leave undecided."""
    P = np.asarray(P, dtype=np.float64)
    B, n, _ = P.shape
    thr = np.asarray(thresholds, dtype=np.float64).reshape(B, -1)
    if n == 1:
        return np.ones((B, thr.shape[1], 1), bool)
    C = P - P.mean(axis=1, keepdims=True)
    scale = np.abs(C).max(axis=(1, 2))
    scale = np.where(scale > 0, scale, 1.0)
    Q = C / scale[:, None, None]
    t = (thr / scale[:, None])[:, :, None]                          # (B, T, 1)
    margin = 1e-9

    def undecided(lo, hi):
        return ~((lo[:, None] > t + margin) | (hi[:, None] <= t - margin))

    lo, hi = _fw_bounds(Q, t[:, :, 0], margin)
    out = lo[:, None] > t + margin
    for b, i in zip(*np.nonzero(undecided(lo, hi).any(axis=1))):
        dist = _nnls_distance(Q[b], i)
        zero = dist <= 1e-9
        out[b, :, i] = (dist > t[b, :, 0]) & ~zero
    return out


def robust_vertices(keys, epsilons=EPSILONS) -> np.ndarray:
    """How many keys are farther than ``eps * diam`` from the hull of the other keys, per ``eps``.

    ``diam`` is the largest distance between two keys. A robust vertex is a vertex that stays one
    when every key moves by less than ``eps * diam / 2``. Returns an int array, one count per eps
    (for a single key, 1 at every eps).

    Examples
    --------
    The corners of a regular simplex of 4 points (edge 1) are at the height sqrt(2/3) = 0.816 of
    the opposite face:

    >>> S = np.eye(4) / np.sqrt(2)                  # edge 1 in R^4
    >>> robust_vertices(S, (0.5, 0.8, 0.82)).tolist()
    [4, 4, 0]
    """
    K = _points("keys", keys)
    eps = np.asarray(epsilons, dtype=np.float64).reshape(-1)
    if (eps < 0).any() or not np.isfinite(eps).all():
        raise ValueError(f"epsilons must be finite and >= 0, got {epsilons!r}")
    if len(K) == 1:
        return np.ones(len(eps), int)
    diam = _diameter(K)
    return _decide(K[None], (eps * diam)[None])[0].sum(axis=1)


def _diameter(P):
    sq = np.einsum("ij,ij->i", P, P)
    return float(np.sqrt(max(0.0, float((sq[:, None] + sq[None] - 2 * P @ P.T).max()))))


def vertex_mask(points) -> np.ndarray:
    """Which of ``points`` (n, k) are vertices of their convex hull (bool (n,)).

    Qhull in dimension 2 to 4 (its vertices); in higher dimension, or when Qhull refuses a
    degenerate set, a point is a vertex iff its distance to the hull of the other points is
    positive (Frank-Wolfe bounds, then the exact NNLS). Coincident points: no copy is a vertex
    (each lies in the hull of the others); points on an edge or a face are not vertices.

    Examples
    --------
    >>> # a square, its centre and the middle of an edge
    >>> pts = np.array([[0.0, 0], [2, 0], [2, 2], [0, 2], [1, 1], [1, 0]])
    >>> vertex_mask(pts).tolist()
    [True, True, True, True, False, False]
    """
    P = _points("points", points)
    n, k = P.shape
    if n == 1:
        return np.ones(1, bool)
    if 2 <= k <= 4 and n > k + 1:
        srt = P[np.lexsort(P.T[::-1])]
        if not (srt[1:] == srt[:-1]).all(axis=1).any():            # no coincident points
            try:
                out = np.zeros(n, bool)
                out[ConvexHull(P).vertices] = True
                return out
            except QhullError:
                pass                                               # flat: the exact test below
    return _decide(P[None], [[0.0]])[0, 0]


# ------------------------------------------------------------------------------ projections
def principal_projection(keys, k: int) -> np.ndarray:
    """The centred ``keys`` (n, d) in the coordinates of their top ``k`` principal directions
    (n, min(k, d)).

    Examples
    --------
    >>> X = np.array([[2.0, 0.1], [-2.0, -0.1], [0.0, 0.0]])
    >>> np.abs(principal_projection(X, 1)).round(3).ravel().tolist()
    [2.002, 2.002, 0.0]
    """
    K = _points("keys", keys)
    k = _validate.positive_int("k", k)
    C = K - K.mean(axis=0)
    _, _, vt = np.linalg.svd(C, full_matrices=False)
    return C @ vt[: min(k, vt.shape[0])].T


def projected_vertices(keys, dims=DIMENSIONS) -> np.ndarray:
    """Hull vertices of the keys projected on their top ``k`` principal directions, per ``k`` in
    ``dims`` (:func:`vertex_mask` of :func:`principal_projection`).

    Examples
    --------
    Eight points on an ellipse and two inside, lifted to 3-D with a small third coordinate:

    >>> t = np.arange(8) * np.pi / 4
    >>> P = np.c_[2 * np.cos(t), np.sin(t), np.zeros(8)]      # an ellipse
    >>> P = np.vstack([P, [[0.1, 0, 0.01], [-0.1, 0, -0.01]]])
    >>> projected_vertices(P, (1, 2, 3)).tolist()
    [2, 8, 10]
    """
    K = _points("keys", keys)
    return np.array([int(vertex_mask(principal_projection(K, int(k))).sum()) for k in dims])


def query_span_vertices(queries, keys, *, share: float = 0.9) -> tuple[int, int]:
    """Hull vertices of the keys projected on the span of the head's queries, and its dimension.

    The logits see a key only through its inner products with the queries, so only the keys'
    component in the queries' span matters. With ``share = 1`` the span is the exact one (all of
    ``R^k`` once there are ``k`` queries in general position); with ``share < 1`` it is the span of
    the queries' top principal directions (uncentred, as the logits are bilinear) holding that
    share of their energy ``sum ||q||^2``. Returns ``(vertices, dimension)``.

    Examples
    --------
    Queries along the first axis: the keys are seen on a line, where only two are vertices.

    >>> q = np.array([[1.0, 0, 0], [2.0, 0, 0]])
    >>> k = np.array([[0.0, 0, 0], [1, 5, 0], [2, -1, 3], [3, 0, 0]])
    >>> query_span_vertices(q, k, share=1.0)
    (2, 1)
    """
    Q = _points("queries", queries)
    K = _points("keys", keys)
    share = _validate.real_scalar("share", share, low=0.0, high=1.0)
    if share == 0:
        raise ValueError("share must be in (0, 1], got 0")
    _, s, vt = np.linalg.svd(Q, full_matrices=False)
    e = s ** 2
    if e.sum() == 0:
        raise ValueError("queries are all zero: they span nothing")
    if share >= 1:
        dim = int((s > _RTOL * s[0]).sum())
    else:
        dim = int(np.searchsorted(np.cumsum(e) / e.sum(), share - 1e-12) + 1)
    return int(vertex_mask(K @ vt[:dim].T).sum()), dim


def onion_depth(points) -> np.ndarray:
    """Onion layer of each point (n, k): 1 for the vertices of the hull of all points, 2 for the
    vertices of the hull of the rest, and so on (int (n,)).

    Examples
    --------
    >>> t = np.arange(6) * np.pi / 3
    >>> outer = np.c_[np.cos(t), np.sin(t)]
    >>> P = np.vstack([outer, 0.5 * outer[::2], [[0, 0]]])
    >>> onion_depth(P).tolist()
    [1, 1, 1, 1, 1, 1, 2, 2, 2, 3]
    """
    P = _points("points", points)
    depth = np.zeros(len(P), int)
    left = np.arange(len(P))
    layer = 0
    while len(left):
        layer += 1
        v = vertex_mask(P[left])
        if not v.any():                                           # all coincident: one layer
            v[:] = True
        depth[left[v]] = layer
        left = left[~v]
    return depth


# ------------------------------------------------------------------------------ attention
def attention_counts(logits, *, mass: float = 0.9) -> dict:
    """Counts of the keys each attention row uses, averaged over the rows, and the distinct leaders.

    ``logits`` (n_q, n): the rows' weights are their softmax. Returns ``support`` (mean of
    ``exp(entropy)``), ``mass90`` (mean of the smallest number of keys holding ``mass`` of a row),
    ``participation`` (mean of ``1 / sum_j a_ij^2``, the inverse of the inverse participation
    ratio) and ``leaders`` (keys that are the largest logit of some row, ties included).

    Examples
    --------
    A uniform row over four keys and a one-hot row:

    >>> out = attention_counts(np.array([[0.0, 0, 0, 0], [0, 0, 50, 0]]))
    >>> {k: round(float(v), 6) for k, v in out.items()}
    {'support': 2.5, 'mass90': 2.5, 'participation': 2.5, 'leaders': 4.0}
    """
    L = _validate.as_float_array("logits", logits, ndim=2)
    if L.size == 0:
        raise ValueError(f"logits must be a non-empty (queries, keys) array, got shape {L.shape}")
    mass = _validate.real_scalar("mass", mass, low=0.0, high=1.0)
    z = L - L.max(axis=1, keepdims=True)
    a = np.exp(z)
    a /= a.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(a > 0, a * np.log(a), 0.0).sum(axis=1)
    srt = -np.sort(-a, axis=1)
    cum = np.cumsum(srt, axis=1)
    need = (cum < mass - 1e-12).sum(axis=1) + 1
    tol = _RTOL * max(1.0, float(np.abs(L).max()))
    leaders = int((z >= -tol).any(axis=0).sum())
    return {"support": float(np.exp(h).mean()), "mass90": float(np.minimum(need, L.shape[1]).mean()),
            "participation": float((1 / (a * a).sum(axis=1)).mean()), "leaders": float(leaders)}


STATISTICS = (
    [f"near_top_{d:g}" for d in DELTAS] + [f"robust_{e:g}" for e in EPSILONS]
    + [f"projected_{k}" for k in DIMENSIONS] + ["query_span", "support", "mass90", "participation", "leaders"]
)
"""The names of the counts :func:`head_counts` returns, in order (then the onion depths)."""


def head_counts(queries, keys, *, scale=None, share: float = 0.9, depth_dims=(2, 3)) -> dict:
    """Every count of this module for one head on one input.

    Returns a dict with the :data:`STATISTICS` (floats), ``query_span_dim`` and, for each ``k`` in
    ``depth_dims``, ``depth_leaders_{k}`` and ``depth_others_{k}``: the mean onion depth, in the
    keys' ``k``-D principal projection, of the distinct hardmax leaders and of the other keys
    (None when there are no others), and ``depth_mass_{k}``: the depth averaged with the attention
    mass each key receives (mean over the rows). :func:`layer_counts` does the same for the
    heads of a layer at once.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> c = head_counts(rng.standard_normal((12, 4)), rng.standard_normal((12, 4)))
    >>> c["near_top_0.5"] <= c["near_top_4"] <= 12
    True
    >>> c["robust_0.1"] <= c["robust_0.01"] <= 12
    True
    """
    Q = _points("queries", queries)
    K = _points("keys", keys)
    out = layer_counts(Q[None], K[None], scale=scale, share=share, depth_dims=depth_dims)
    return {k: (None if v[0] is None or (isinstance(v[0], float) and math.isnan(v[0])) else
                (int(v[0]) if k == "query_span_dim" else float(v[0]))) for k, v in out.items()}


def layer_counts(queries, keys, *, scale=None, share: float = 0.9, depth_dims=(2, 3)) -> dict:
    """:func:`head_counts` for ``H`` heads at once: ``queries`` (H, n_q, k), ``keys`` (H, n, k);
    each value is an array (H,) (NaN where :func:`head_counts` has None).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Q, K = rng.standard_normal((2, 3, 9, 4))
    >>> c = layer_counts(Q, K)
    >>> one = [head_counts(q, k)["projected_2"] for q, k in zip(Q, K)]
    >>> c["projected_2"].tolist() == one
    True
    """
    Q = _validate.as_float_array("queries", queries, ndim=3)
    K = _validate.as_float_array("keys", keys, ndim=3)
    if Q.shape[0] != K.shape[0] or Q.shape[2] != K.shape[2] or K.shape[1] < 1 or Q.shape[1] < 1:
        raise ValueError(f"queries and keys must be (heads, rows, width) with the same heads and width, "
                         f"got {Q.shape} and {K.shape}")
    share = _validate.real_scalar("share", share, low=0.0, high=1.0)
    if share == 0:
        raise ValueError("share must be in (0, 1], got 0")
    H, n, k = K.shape
    s = 1 / math.sqrt(k) if scale is None else _validate.real_scalar("scale", scale, low=0.0)
    L = Q @ np.swapaxes(K, 1, 2) * s                                # (H, n_q, n)
    out: dict = {}
    gap = L.max(axis=2, keepdims=True) - L
    best = gap.min(axis=1)                                          # (H, n)
    tol = _RTOL * np.maximum(1.0, np.abs(L).max(axis=(1, 2)))[:, None]
    for d in DELTAS:
        out[f"near_top_{d:g}"] = (best <= d + tol).sum(axis=1).astype(float)
    # robust vertices: one batched decision
    sq = np.einsum("hij,hij->hi", K, K)
    d2 = sq[:, :, None] + sq[:, None, :] - 2 * K @ np.swapaxes(K, 1, 2)
    diam = np.sqrt(np.maximum(d2.max(axis=(1, 2)), 0.0))
    eps = np.asarray(EPSILONS)
    if n == 1:
        rob = np.ones((H, len(eps)))
    else:
        rob = _decide(K, diam[:, None] * eps[None]).sum(axis=2)
    for m, e in enumerate(EPSILONS):
        out[f"robust_{e:g}"] = rob[:, m].astype(float)
    # principal projections
    C = K - K.mean(axis=1, keepdims=True)
    _, _, vt = np.linalg.svd(C, full_matrices=False)                # (H, min(n,k), k)
    proj = {d: C @ np.swapaxes(vt[:, :d], 1, 2) for d in set(DIMENSIONS) | set(depth_dims)}
    for d in DIMENSIONS:
        P = proj[d]
        if d <= 4:
            out[f"projected_{d}"] = np.array([vertex_mask(p).sum() for p in P], float)
        else:
            out[f"projected_{d}"] = (_decide(P, np.zeros((H, 1)))[:, 0].sum(axis=1).astype(float)
                                     if n > 1 else np.ones(H))
    # the span of the queries
    _, sq_, qvt = np.linalg.svd(Q, full_matrices=False)
    energy = sq_ ** 2
    if (energy.sum(axis=1) == 0).any():
        raise ValueError("queries are all zero at some head: they span nothing")
    if share >= 1:
        dims = (sq_ > _RTOL * sq_[:, :1]).sum(axis=1)
    else:
        dims = (np.cumsum(energy, axis=1) / energy.sum(axis=1, keepdims=True) < share - 1e-12).sum(axis=1) + 1
    span = np.zeros((H, n, int(dims.max())))
    for h in range(H):
        span[h, :, : dims[h]] = K[h] @ qvt[h, : dims[h]].T
    out["query_span"] = (_decide(span, np.zeros((H, 1)))[:, 0].sum(axis=1).astype(float)
                         if n > 1 else np.ones(H))
    out["query_span_dim"] = dims.astype(int)
    # attention
    z = L - L.max(axis=2, keepdims=True)
    a = np.exp(z)
    a /= a.sum(axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(a > 0, a * np.log(a), 0.0).sum(axis=2)
    cum = np.cumsum(-np.sort(-a, axis=2), axis=2)
    out["support"] = np.exp(ent).mean(axis=1)
    out["mass90"] = np.minimum((cum < 0.9 - 1e-12).sum(axis=2) + 1, n).mean(axis=1).astype(float)
    out["participation"] = (1 / (a * a).sum(axis=2)).mean(axis=1)
    lead = (z >= -_RTOL * np.maximum(1.0, np.abs(L).max(axis=(1, 2)))[:, None, None]).any(axis=1)  # (H, n)
    out["leaders"] = lead.sum(axis=1).astype(float)
    received = a.mean(axis=1)                                       # (H, n)
    for d in depth_dims:
        dl, do, dm = np.zeros(H), np.full(H, np.nan), np.zeros(H)
        for h in range(H):
            depth = onion_depth(proj[d][h]).astype(float)
            dl[h] = depth[lead[h]].mean()
            if (~lead[h]).any():
                do[h] = depth[~lead[h]].mean()
            dm[h] = received[h] @ depth
        out[f"depth_leaders_{d}"], out[f"depth_others_{d}"], out[f"depth_mass_{d}"] = dl, do, dm
    return out


# ------------------------------------------------------------------------------ scaling in n
def scaling_exponents(n, values, *, boot: int = 2000, level: float = 0.95, rng, min_inputs: int = 6) -> dict:
    """Exponents ``b`` of ``values ~ n^b`` by least squares in log-log, with bootstrap intervals.

    ``n`` (inputs,) and ``values`` (inputs, statistics), positive. The inputs are resampled with
    replacement ``boot`` times, the same resamples for every statistic, so that differences of
    exponents get paired intervals. Returns ``exponent`` (statistics,), ``ci`` (statistics, 2),
    ``samples`` (boot, statistics) and ``reason``: None, or why no fit was made (then the
    exponents are None): fewer than ``min_inputs`` inputs or fewer than 3 distinct lengths, or a
    statistic that is not positive on every input (that column alone is None).

    Examples
    --------
    >>> n = np.array([8, 16, 32, 64, 128, 20, 40])
    >>> fit = scaling_exponents(n, np.c_[3 * n ** 0.5, n.astype(float)], boot=200, rng=0)
    >>> np.round(fit["exponent"], 6).tolist(), np.round(fit["ci"], 6).tolist()
    ([0.5, 1.0], [[0.5, 0.5], [1.0, 1.0]])
    """
    n = _validate.as_float_array("n", n, ndim=1, allow_empty=True)
    Y = _validate.as_float_array("values", values, ndim=2, allow_empty=True)
    if len(Y) != len(n):
        raise ValueError(f"values must have one row per input ({len(n)}), got shape {Y.shape}")
    if (n <= 0).any():
        raise ValueError("n must be positive")
    S = Y.shape[1]
    if len(n) < min_inputs or len(np.unique(n)) < 3:
        return {"exponent": [None] * S, "ci": [None] * S, "samples": None,
                "reason": f"{len(n)} input{'s' if len(n) != 1 else ''} with {len(np.unique(n))} distinct "
                          f"length{'s' if len(np.unique(n)) != 1 else ''}: too few for a fit "
                          f"(at least {min_inputs} inputs and 3 lengths)"}
    good = np.asarray((Y > 0).all(axis=0), dtype=bool).reshape(-1)
    x = np.log(n)
    logY = np.log(np.where(Y > 0, Y, 1.0))

    def slope(ix):
        xs, ys = x[ix], logY[ix]                                    # (..., N), (..., N, S)
        xc = xs - xs.mean(axis=-1, keepdims=True)
        yc = ys - ys.mean(axis=-2, keepdims=True)
        var = (xc * xc).sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.einsum("...n,...ns->...s", xc, yc) / var[..., None]

    gen = _validate.rng("rng", rng)
    idx = gen.integers(0, len(n), size=(int(boot), len(n)))
    samples = slope(idx)
    samples = samples[np.isfinite(samples).all(axis=1)]            # a resample of one length: dropped
    if len(samples) < 2:
        return {"exponent": [None] * S, "ci": [None] * S, "samples": None,
                "reason": "the bootstrap resamples all fell on one length"}
    b = slope(np.arange(len(n)))
    a = (1 - level) / 2
    ci = np.quantile(samples, [a, 1 - a], axis=0).T
    return {"exponent": [float(v) if g else None for v, g in zip(b, good)],
            "ci": [[float(lo), float(hi)] if g else None for (lo, hi), g in zip(ci, good)],
            "samples": np.where(good[None], samples, np.nan), "reason": None if good.all() else
            "some statistic is 0 on an input, so it has no power law there"}


# ------------------------------------------------------------------------------ inputs spread over n
_CLAUSE_END = r"(?<=[,;:.?!])\s+"


def clauses(texts) -> list[str]:
    """The clauses of ``texts`` in order: each text cut after every comma, semicolon, colon, full
    stop, question or exclamation mark that a space follows.

    Examples
    --------
    >>> clauses(["And God said, Let there be light: and there was light.", "Amen."])
    ['And God said,', 'Let there be light:', 'and there was light.', 'Amen.']
    """
    import re

    out = []
    for t in texts:
        out += [c for c in re.split(_CLAUSE_END, str(t).strip()) if c]
    return out


def length_ladder(units, count_tokens, targets, *, max_run: int = 60, overhead: int = 2) -> list[tuple[int, int, int]]:
    """Disjoint runs of consecutive ``units`` whose token counts come closest to ``targets``.

    ``count_tokens(list_of_texts)`` returns the token count of each text, ``overhead`` tokens
    ([CLS] and [SEP]) included; the count of a run of units joined by spaces is taken as the sum
    of theirs less the repeated overhead, which is exact for a tokenizer that splits on
    whitespace first (WordPiece does). The candidates are all runs of 1 to ``max_run`` consecutive
    units; the targets are served from the longest down, each taking the unused run with the
    smallest ``|log(n / target)|`` (the first on ties). Returns ``(start, stop, n)`` per target,
    in the order of ``targets``.

    Examples
    --------
    >>> words = ["a b", "c", "d e f", "g", "h i"]
    >>> length_ladder(words, lambda ts: [len(t.split()) for t in ts], [1, 3], overhead=0)
    [(3, 4, 1), (0, 2, 3)]
    """
    units = list(units)
    if not units:
        raise ValueError("units must hold at least one text")
    tg = np.asarray(targets, dtype=np.float64)
    if (tg <= 0).any():
        raise ValueError(f"targets must be positive, got {targets!r}")
    c = np.asarray(count_tokens(units), dtype=np.float64) - overhead
    cum_c = np.concatenate([[0.0], np.cumsum(c)])
    m = len(units)
    grid_st, grid_ln = np.meshgrid(np.arange(m), np.arange(1, max_run + 1), indexing="ij")
    st, sp = grid_st.ravel(), (grid_st + grid_ln).ravel()
    ok = sp <= m
    st, sp = st[ok], sp[ok]
    n = cum_c[sp] - cum_c[st] + overhead
    used = np.zeros(m, bool)
    out: dict[int, tuple[int, int, int]] = {}
    for t in np.argsort(-tg, kind="stable"):
        cum = np.concatenate([[0], np.cumsum(used)])
        free = (cum[sp] - cum[st]) == 0
        if not free.any():
            raise ValueError(f"the units are used up after {len(out)} of {len(tg)} targets")
        cost = np.where(free, np.abs(np.log(np.maximum(n, 1e-9) / tg[t])), np.inf)
        k = int(np.argmin(cost))
        out[int(t)] = (int(st[k]), int(sp[k]), int(n[k]))
        used[st[k]:sp[k]] = True
    return [out[t] for t in range(len(tg))]


# ------------------------------------------------------------------------------ the study of an encoder
def head_arrays(encoder, texts, *, special: bool):
    """Per input, per layer: queries and keys (heads, n, head_dim) of every head of ``encoder``
    (float64), with the [CLS] and [SEP] rows (the first and the last token) kept if ``special``,
    and the token ids. A generator of ``(ids, [(queries, keys) per layer])``.

    Examples
    --------
    >>> from attention_fw import encoder
    >>> text = ["And God saw the light."]
    >>> ids, layers = next(head_arrays(encoder.load(), text, special=False))
    >>> len(ids), len(layers), layers[0][1].shape       # 8 tokens, 6 kept
    (8, 6, (12, 6, 32))
    """
    t = encoder.tokenize(list(texts))
    f = encoder.forward(t.ids, t.mask, keep=True)
    for r in range(len(texts)):
        n = int(t.lengths[r])
        sl = slice(0, n) if special else slice(1, n - 1)
        yield t.ids[r, :n], [(f.heads[layer]["queries"][r, :, sl].astype(np.float64),
                              f.heads[layer]["keys"][r, :, sl].astype(np.float64)) for layer in range(encoder.layers)]


def encoder_counts(encoder, texts, *, share: float = 0.9) -> dict:
    """:func:`head_counts` at every head of ``encoder`` on every text, with [CLS] and [SEP] left
    out (``"excluded"``: their rows and columns removed, the other logits unchanged, so each row's
    weights are renormalised over the other tokens) and kept (``"included"``).

    Returns ``{"n": (inputs,), "ids": [...], "excluded": {statistic: (inputs, layers, heads)},
    "included": {...}}``; a statistic that can be None (``depth_others_k``) is NaN there.

    Examples
    --------
    >>> from attention_fw import encoder
    >>> text = ["And God saw the light, that it was good."]
    >>> out = encoder_counts(encoder.load(), text)
    >>> out["n"].tolist(), out["excluded"]["support"].shape
    ([13], (1, 6, 12))
    >>> bool((out["excluded"]["near_top_4"] <= 11).all())
    True
    >>> bool((out["included"]["near_top_4"] <= 13).all())
    True
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):            # many small products: one thread each
        return _encoder_counts(encoder, list(texts), share)


def _encoder_counts(encoder, texts, share):
    L, H = encoder.layers, encoder.heads
    n = encoder.tokenize(texts).lengths.copy()
    if (n < 5).any():
        raise ValueError("every text needs at least 3 word pieces besides [CLS] and [SEP]")
    out: dict = {"n": n, "ids": []}
    for variant, special in (("excluded", False), ("included", True)):
        table: dict = {}
        for i, (ids, layers) in enumerate(head_arrays(encoder, texts, special=special)):
            if special:
                out["ids"].append(ids)
            for layer, (Q, K) in enumerate(layers):
                for key, v in layer_counts(Q, K, share=share).items():
                    if key not in table:
                        table[key] = np.full((len(texts), L, H), np.nan)
                    table[key][i, layer] = v
        out[variant] = table
    return out


def probe(queries, keys) -> dict:
    """One head on one input as a record anyone can recompute: ``queries``, ``keys`` (lists) and
    ``near_top`` ({"0.5": ..., "1": ..., "2": ..., "4": ...}), ``robust_vertices`` ({"0.01": ...,
    "0.03": ..., "0.1": ...}) and ``projected_vertices`` ({"2": ..., "3": ..., "4": ..., "8": ...}),
    with the logits ``queries @ keys.T / sqrt(k)``.

    Examples
    --------
    >>> rec = probe(np.eye(3), 2 * np.eye(3))
    >>> rec["near_top"], rec["robust_vertices"]["0.1"]
    ({'0.5': 3, '1': 3, '2': 3, '4': 3}, 3)
    """
    Q = _points("queries", queries)
    K = _points("keys", keys)
    return {"queries": Q.tolist(), "keys": K.tolist(),
            "near_top": {f"{d:g}": int(c) for d, c in zip(DELTAS, near_top(Q, K, DELTAS))},
            "robust_vertices": {f"{e:g}": int(c) for e, c in zip(EPSILONS, robust_vertices(K, EPSILONS))},
            "projected_vertices": {f"{k}": int(c) for k, c in zip(DIMENSIONS, projected_vertices(K, DIMENSIONS))}}


# ------------------------------------------------------------------------------ exponents and verdicts
ATTENTION = ("support", "mass90", "participation", "leaders")
"""The attention-side counts among :data:`STATISTICS`."""
HULL = tuple(s for s in STATISTICS if s not in ATTENTION)
"""The hull-side counts among :data:`STATISTICS`."""


def scaling_table(n, counts: dict, *, statistics=STATISTICS, boot: int = 2000, level: float = 0.95,
                  rng, n_range=None) -> dict:
    """Exponents of every statistic against ``n``, per layer and pooled ("all").

    ``counts[statistic]`` is (inputs, layers, heads), as :func:`encoder_counts` returns it; a
    statistic is averaged over the heads of a layer (or over all heads) on each input, then
    :func:`scaling_exponents` fits ``mean count ~ n^b`` over the inputs whose ``n`` lies in
    ``n_range`` (all by default), with the same bootstrap resamples for every statistic and layer.
    Returns ``entries`` (``statistic``, ``layer``, ``exponent``, ``ci``, ``reason``) and
    ``samples`` (layer -> (boot, statistics)) for paired comparisons.

    Examples
    --------
    >>> n = np.array([8, 12, 20, 32, 50, 80, 128])
    >>> c = {"support": np.broadcast_to((n ** 0.5)[:, None, None], (7, 2, 3)).copy()}
    >>> t = scaling_table(n, c, statistics=["support"], boot=100, rng=0)
    >>> [(e["layer"], round(e["exponent"], 6)) for e in t["entries"]]
    [(0, 0.5), (1, 0.5), ('all', 0.5)]
    """
    n = np.asarray(n, dtype=np.float64)
    keep = np.ones(len(n), bool) if n_range is None else (n >= n_range[0]) & (n <= n_range[1])
    stats = list(statistics)
    L = counts[stats[0]].shape[1]
    entries, samples = [], {}
    seed = _validate.rng("rng", rng).integers(2**63)
    for layer in list(range(L)) + ["all"]:
        cols = []
        for s in stats:
            c = counts[s][keep]
            flat = c.reshape(c.shape[0], int(np.prod(c.shape[1:])))         # (inputs, layers * heads)
            cols.append(np.nanmean(flat, axis=1) if layer == "all" else np.nanmean(c[:, layer], axis=1))
        Y = np.stack(cols, axis=1) if len(stats) else np.zeros((int(keep.sum()), 0))
        fit = scaling_exponents(n[keep], Y, boot=boot, level=level, rng=np.random.default_rng(seed))
        samples[layer] = fit["samples"]
        for k, s in enumerate(stats):
            reason = fit["reason"] if fit["exponent"][k] is None else None
            entries.append({"statistic": s, "layer": layer, "exponent": fit["exponent"][k], "ci": fit["ci"][k],
                            "reason": reason})
    return {"entries": entries, "samples": samples, "statistics": stats}


def verdicts(table: dict, *, layer="all", attention=ATTENTION, hull=HULL, level: float = 0.95) -> list[dict]:
    """For each attention count: the hull counts whose exponent it matches and whether it grows
    like ``n``, at one ``layer`` of a :func:`scaling_table`.

    An attention count *tracks* a hull count when the paired bootstrap interval of the difference
    of their exponents contains 0, and *tracks n* when its own interval contains 1. Returns one
    dict per attention count: ``statistic``, ``exponent``, ``ci``, ``tracks`` (hull counts),
    ``differences`` ({hull count: [low, high]}), ``tracks_n`` (bool), or ``reason`` when no fit
    was made.

    Examples
    --------
    >>> n = np.array([8, 12, 20, 32, 50, 80, 128])
    >>> rng = np.random.default_rng(1)
    >>> wobble = np.exp(0.05 * rng.standard_normal(7))
    >>> c = {"support": (n * wobble)[:, None, None],
    ...      "projected_2": (n ** 0.3)[:, None, None],
    ...      "near_top_4": n[:, None, None] * 1.0}
    >>> t = scaling_table(n, c, statistics=list(c), boot=400, rng=0)
    >>> v = verdicts(t, attention=["support"], hull=["projected_2", "near_top_4"])[0]
    >>> v["tracks"], v["tracks_n"]
    (['near_top_4'], True)
    """
    stats = table["statistics"]
    by = {(e["statistic"], e["layer"]): e for e in table["entries"]}
    S = table["samples"][layer]
    a = (1 - level) / 2
    out = []
    for s in attention:
        e = by[(s, layer)]
        if e["exponent"] is None:
            out.append({"statistic": s, "exponent": None, "ci": None, "tracks": [], "differences": {},
                        "tracks_n": None, "reason": e["reason"]})
            continue
        diffs, tracks = {}, []
        for h in hull:
            if by[(h, layer)]["exponent"] is None:
                continue
            d = S[:, stats.index(s)] - S[:, stats.index(h)]
            lo, hi = np.quantile(d, [a, 1 - a])
            diffs[h] = [float(lo), float(hi)]
            if lo <= 0 <= hi:
                tracks.append(h)
        out.append({"statistic": s, "exponent": e["exponent"], "ci": e["ci"], "tracks": tracks,
                    "differences": diffs, "tracks_n": bool(e["ci"][0] <= 1 <= e["ci"][1]), "reason": None})
    return out
