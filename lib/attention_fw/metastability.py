"""Section 5 of the paper: clustering (Theorem 5.2), metastability (Theorem 5.4), collapse (Prop 5.1).

Standing choices of section 5: key-query matrix ``B = I_d`` and a constant step ``gamma``.
The chain (SAP) moves token ``i`` to ``(1 - gamma) x_i + gamma x_j`` with probability
``softmax_j(beta <x_i, x_j>)``, independently for every token (NOTES section 1.8).

What lives here
---------------
* geometry of the hypotheses: ``c0`` (``eq: bound.max``), the vertex angles of (5.1)
  (read as an angle, erratum E15), the eroded cones ``I_i(eta) (-) delta B_1`` and the
  smallest ``beta`` for which they are non-empty, the configurations of Theorem 5.2;
* phase 1 (Theorem 5.2): ``m``, ``tau``, ``T1`` and the event at ``T1`` (the constant ``C``
  is not universal, erratum E9: its default is the proof's ratio of initial distances);
* phase 2 (Theorem 5.4): the exit time ``T2`` from ``conv{x_ji^0}_j + B(0, eps)``, measured
  by plain stepping of (SAP) or by the rejection-free engine below, always with right
  censoring at a cap (no run is ever dropped), censored maximum-likelihood fits, and the
  lower bound of Theorem 5.4 as printed and as corrected by the audit (erratum E11);
* Prop 5.1: the deterministic (SA-beta) collapses to a point of the initial hull (E5, E12).

The rejection-free (kinetic Monte Carlo) engine
-----------------------------------------------
Under (SAP) a token that picks a token sitting at *its own point* does not move.
Group the tokens of a configuration by exact equality of their coordinates. For token
``i`` let ``s_i`` be the total softmax weight of the tokens at its own point; the step is
a no-op with probability ``q = prod_i s_i``, independently of the past. So the number of
steps until something happens is geometric, ``P(T > t) = q^t``, and is drawn in one go as
``T = 1 + floor(E / lambda)`` with ``E ~ Exp(1)`` and ``lambda = -log q = sum_i log1p(e^{d_i})``
(``d_i`` the log-odds of moving, so tiny escape probabilities keep full precision). At that
step the set of moving tokens has the law of independent Bernoulli(``1 - s_i``) draws
conditioned on "at least one": the first mover ``k`` is drawn with weight
``prod_{l<k} s_l (1 - s_k)``, later tokens move independently, and every mover picks its
target among the tokens *not* at its point with the softmax weights. This is an exact
simulation of (SAP) for **every** configuration; it is *efficient* when ``q`` is close to 1.

Regimes it covers efficiently (documented in the book, section 5):

1. *Single-jump regime* ``eps < gamma * min_{i != j} |v_i - v_j|`` with every group started
   as a cluster of coincident tokens at its vertex: the first off-cluster pick moves a
   token by ``gamma |v_a - v_b| > eps``, so ``T2`` **is** the first event time, geometric
   with closed-form ``q`` (:func:`frozen_escape_rate`). One event per exit, whatever beta.
2. *One token per vertex* (``n = kappa``): every event is an inter-vertex pick, the lone
   tokens never re-merge, so each event costs one draw whatever beta, and exits in the
   theorem regime ``eps / gamma >= 2 d(K)`` (several jumps needed) are also cheap.
3. Groups of several tokens in the theorem regime: after the first jump the displaced token
   is pulled back by its group, the group spreads into distinct points, and intra-group
   moves happen at almost every step; the engine stays exact but is no faster than plain
   stepping there (no approximate re-snapping of clusters is done).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, spatial, stats

from . import _validate as V

__all__ = [
    "regular_simplex", "triangle_on_circle", "c0", "diameter", "vertex_angles", "satisfies_51",
    "eroded_cone_mask", "hypothesis_beta_min", "configuration_beta_min", "sample_eroded_cone", "phase1_configuration",
    "phase1_constants", "phase1_event", "run_phase1",
    "cluster_configuration", "near_vertex_configuration", "distance_to_hull", "exit_mask",
    "move_log_odds", "frozen_escape_rate", "engine_exit_times", "engine_state_at",
    "stepping_exit_times", "sabeta_exit_time", "excursion_paths", "ExitSample", "CensoredFit", "fit_geometric_censored",
    "fit_exponential_censored", "fit_log_mean_slope", "metastability_bound",
    "collapse_sabeta", "bench",
]


# ----------------------------------------------------------------------------------------
# geometry of the hypotheses (NOTES section 5.2)
# ----------------------------------------------------------------------------------------

def regular_simplex(d: int) -> np.ndarray:
    """Vertices of a regular simplex inscribed in the unit sphere of R^d, shape (d + 1, d).

    For ``d = 2`` this is the equilateral triangle on S^1 (``c0 = 1.5``); in general
    ``<v_i, v_j> = -1/d`` for ``i != j`` so ``c0 = 1 + 1/d``. Its edge angles are 60 degrees,
    so it satisfies (5.1).

    Raises
    ------
    TypeError, ValueError
        ``d`` not an integer >= 1.
    """
    d = V.positive_int("d", d)
    e = np.eye(d + 1) - 1.0 / (d + 1)            # centred basis of the hyperplane sum = 0
    q, _ = np.linalg.qr(e[:, :d])                # orthonormal basis of that hyperplane
    pts = e @ q                                   # (d + 1, d), centred at the origin
    return pts / np.linalg.norm(pts, axis=1, keepdims=True)


def triangle_on_circle(angles_deg=(90.0, 210.0, 330.0)) -> np.ndarray:
    """Three points ``(cos a, sin a)`` on S^1 (default: the equilateral triangle), shape (3, 2).

    Raises
    ------
    ValueError
        ``angles_deg`` not three finite numbers, or two of them coincide mod 360.
    """
    a = V.as_float_array("angles_deg", angles_deg, ndim=1)
    if a.shape[0] != 3:
        raise ValueError(f"angles_deg must hold 3 angles, got {a.shape[0]}")
    r = np.deg2rad(a)
    pts = np.stack([np.cos(r), np.sin(r)], axis=1)
    if np.min(spatial.distance.pdist(pts)) < 1e-12:
        raise ValueError("angles_deg must be distinct modulo 360")
    return pts


def _vertices(name, v) -> np.ndarray:
    v = V.as_float_array(name, v, ndim=2)
    if v.shape[0] < 2:
        raise ValueError(f"{name} must hold at least 2 vertices, got shape {v.shape}")
    if np.min(spatial.distance.pdist(v)) <= 0:
        raise ValueError(f"{name} must hold distinct vertices")
    return v


def c0(vertices) -> float:
    """The constant of ``eq: bound.max``: ``min_{i != l} (<v_i, v_i> - <v_i, v_l>)``.

    Regular kappa-gon on S^1: ``1 - cos(2 pi / kappa)`` (equilateral triangle: 1.5).
    The hypothesis needs ``c0 > 0``; the value is returned even when it is not positive.

    Parameters
    ----------
    vertices : (kappa, d) array
    """
    v = _vertices("vertices", vertices)
    g = v @ v.T
    gap = np.diag(g)[:, None] - g
    np.fill_diagonal(gap, np.inf)
    return float(gap.min())


def diameter(vertices) -> float:
    """``d(K) = max_{i, j} |v_i - v_j|`` for a vertex list of shape (kappa, d)."""
    v = _vertices("vertices", vertices)
    return float(spatial.distance.pdist(v).max())


def vertex_angles(vertices) -> np.ndarray:
    """``sup_{x, y in K} angle(x - v_i, y - v_i)`` at every vertex, in radians, shape (kappa,).

    Condition (5.1) read as an angle (erratum E15; printed as ``arccos<x - v_i, y - v_i>``
    without normalisation). The tangent cone of ``K = conv(v)`` at ``v_i`` is generated by the
    edges ``v_j - v_i``, so the supremum is the largest angle between two of them (in 2-D:
    the interior angle of the polygon). Every point must be a vertex of its hull.

    Raises
    ------
    ValueError
        Fewer than 3 points, or a point that is not a vertex of the hull.
    """
    v = _vertices("vertices", vertices)
    k = v.shape[0]
    if k < 3:
        raise ValueError("vertices must hold at least 3 points")
    if v.shape[1] >= 2 and k > v.shape[1]:
        try:
            hull = spatial.ConvexHull(v)
        except spatial.QhullError:
            raise ValueError("vertices are degenerate (all in a lower-dimensional affine subspace)") from None
        if len(hull.vertices) != k:
            raise ValueError("every point of vertices must be a vertex of its convex hull")
    out = np.empty(k)
    for i in range(k):                        # loop over vertices (kappa is small), not tokens
        e = np.delete(v, i, axis=0) - v[i]
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        out[i] = np.arccos(np.clip(e @ e.T, -1.0, 1.0)).max()
    return out


def satisfies_51(vertices) -> bool:
    """True when every vertex angle of (5.1) (see :func:`vertex_angles`) is < pi/2."""
    return bool(np.all(vertex_angles(vertices) < np.pi / 2 - 1e-12))


def _facets(v):
    """Unit outer normals and offsets of K: x in K iff a @ x <= b (full-dimensional K)."""
    hull = spatial.ConvexHull(v)
    eq = hull.equations                       # n . x + c <= 0 inside, |n| = 1
    return eq[:, :-1], -eq[:, -1]


def eroded_cone_mask(x, vertices, i: int, eta: float, delta: float) -> np.ndarray:
    """Membership in ``I_i(eta) (-) delta B_1``, intersected with ``K (-) delta B_1``.

    ``I_i(eta) = {x in K : <v_i - v_j, x> >= eta for all j != i}`` (section 5 cones) and
    ``A (-) delta B_1 = {x : x + delta B_1 in A}`` (erosion). For an intersection of
    half-spaces the erosion is exact: ``<v_i - v_j, x> >= eta + delta |v_i - v_j|`` for all
    ``j != i`` and ``<a_f, x> + delta <= b_f`` for every facet ``f`` of K (unit normals).

    Parameters
    ----------
    x : (..., d) array
    vertices : (kappa, d) array, K = conv(vertices) full-dimensional
    i : vertex index
    eta, delta : float >= 0

    Returns
    -------
    bool array of shape ``x.shape[:-1]``.
    """
    v = _vertices("vertices", vertices)
    x = V.as_float_array("x", x, min_ndim=1, last_dim=v.shape[1])
    i = V.positive_int("i", i, minimum=0)
    if i >= v.shape[0]:
        raise ValueError(f"i must be < kappa = {v.shape[0]}, got {i}")
    eta = V.real_scalar("eta", eta, low=0)
    delta = V.real_scalar("delta", delta, low=0)
    diff = np.delete(v[i] - v, i, axis=0)                     # (kappa-1, d)
    cone = np.all(x @ diff.T >= eta + delta * np.linalg.norm(diff, axis=1), axis=-1)
    a, b = _facets(v)
    inside = np.all(x @ a.T + delta <= b, axis=-1)
    return cone & inside


def _eroded_slack(v, i, beta):
    """max over x of the smallest slack of the eroded-cone inequalities at beta (LP)."""
    eta, delta = beta ** (-1 / 8), beta ** (-1 / 4)
    diff = np.delete(v[i] - v, i, axis=0)
    a, b = _facets(v)
    d = v.shape[1]
    # variables (x, s): maximise s subject to  -diff x + s <= -(eta + delta |diff|),  a x + s <= b - delta
    A = np.vstack([np.hstack([-diff, np.ones((len(diff), 1))]), np.hstack([a, np.ones((len(a), 1))])])
    rhs = np.concatenate([-(eta + delta * np.linalg.norm(diff, axis=1)), b - delta])
    res = optimize.linprog(np.r_[np.zeros(d), -1.0], A_ub=A, b_ub=rhs,
                           bounds=[(None, None)] * d + [(None, 10.0)], method="highs")
    return -res.fun


def hypothesis_beta_min(vertices, *, beta_hi: float = 1e12) -> float:
    """Smallest beta for which every eroded cone ``I_i(beta^{-1/8}) (-) beta^{-1/4} B_1`` (within
    the eroded K) is non-empty: below it Theorem 5.2 has no admissible interior token.

    Computed (not a claim of the paper) by bisection on log(beta) of a linear programme; the
    cones shrink monotonically as beta decreases. Returns ``inf`` if empty even at ``beta_hi``.
    """
    v = _vertices("vertices", vertices)
    ok = lambda beta: min(_eroded_slack(v, i, beta) for i in range(len(v))) >= 0  # noqa: E731
    if not ok(beta_hi):
        return math.inf
    lo, hi = 0.0, math.log(beta_hi)
    if ok(1.0):
        return 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(math.exp(mid)) else (mid, hi)
    return math.exp(hi)


def configuration_beta_min(x0, vertices, sigma, *, beta_hi: float = 1e12) -> float:
    """Smallest beta at which the interior tokens of ``x0`` lie in their eroded cones
    ``I_sigma(j)(beta^{-1/8}) (-) beta^{-1/4} B_1`` (Theorem 5.2's hypothesis); the sets grow
    with beta, so the hypothesis then holds for every larger beta. ``inf`` if never (up to beta_hi).
    """
    v = _vertices("vertices", vertices)
    x0 = V.tokens("x0", x0, batched_ok=False)
    k = len(v)
    sigma = _sigma("sigma", sigma, len(x0), k)

    def ok(beta):
        return all(bool(np.all(eroded_cone_mask(x0[k:][sigma[k:] == i], v, i, beta ** (-1 / 8), beta ** (-1 / 4))))
                   for i in range(k))
    if not ok(beta_hi):
        return math.inf
    if ok(1.0):
        return 1.0
    lo, hi = 0.0, math.log(beta_hi)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(math.exp(mid)) else (mid, hi)
    return math.exp(hi)


def sample_eroded_cone(vertices, i: int, eta: float, delta: float, size: int, rng=None,
                       *, min_dist: float = 0.0, max_tries: int = 10_000) -> np.ndarray:
    """``size`` points uniform in ``(I_i(eta) (-) delta B_1) cap (K (-) delta B_1)``, shape (size, d).

    Rejection sampling from the bounding box of K (vectorised). With ``min_dist > 0`` only
    points at distance >= ``min_dist`` from ``v_i`` are kept (to control ``m`` and so ``T1``).

    Raises
    ------
    ValueError
        If the set is empty or too small to hit within ``max_tries`` batches.
    """
    v = _vertices("vertices", vertices)
    size = V.positive_int("size", size)
    g = V.rng("rng", rng)
    lo, hi = v.min(0), v.max(0)
    out = []
    have = 0
    for _ in range(max_tries):
        cand = g.uniform(lo, hi, size=(max(256, 4 * size), v.shape[1]))
        ok = eroded_cone_mask(cand, v, i, eta, delta) & (np.linalg.norm(cand - v[i], axis=1) >= min_dist)
        keep = cand[ok]
        out.append(keep)
        have += len(keep)
        if have >= size:
            return np.concatenate(out)[:size]
    raise ValueError(f"the eroded cone of vertex {i} (eta={eta}, delta={delta}) is empty or too small")


def phase1_configuration(vertices, per_vertex: int, beta: float, rng=None, *, min_dist: float = 0.0):
    """A configuration satisfying the hypotheses of Theorem 5.2 at ``beta`` (and every larger beta).

    Tokens ``0..kappa-1`` are the vertices (``x_i^0 = v_i``); then ``per_vertex`` tokens per
    vertex, uniform in ``I_i(beta^{-1/8}) (-) beta^{-1/4} B_1`` intersected with the eroded K.

    Returns
    -------
    x0 : (kappa * (1 + per_vertex), d) array
    sigma : (n,) int array, ``sigma[j]`` = the vertex whose cell holds token j.
    """
    v = _vertices("vertices", vertices)
    per_vertex = V.positive_int("per_vertex", per_vertex, minimum=0)
    beta = V.real_scalar("beta", beta, low=0, low_open=True)
    g = V.rng("rng", rng)
    k = len(v)
    xs, sig = [v], [np.arange(k)]
    if per_vertex:
        for i in range(k):
            xs.append(sample_eroded_cone(v, i, beta ** (-1 / 8), beta ** (-1 / 4), per_vertex, g,
                                         min_dist=min_dist))
            sig.append(np.full(per_vertex, i))
    return np.concatenate(xs), np.concatenate(sig)


# ----------------------------------------------------------------------------------------
# phase 1: Theorem 5.2
# ----------------------------------------------------------------------------------------

def _sigma(name, sigma, n, k):
    s = np.asarray(sigma)
    if s.shape != (n,) or s.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer array of shape ({n},), got {s.shape} {s.dtype}")
    if s.min() < 0 or s.max() >= k:
        raise ValueError(f"{name} must take values in 0..{k - 1}")
    return s.astype(np.intp)


def phase1_constants(x0, vertices, sigma, gamma: float) -> dict:
    """``m``, ``tau``, ``T1`` and the proof's constant ``C`` of Theorem 5.2 (NOTES section 5.3).

    ``m = min_{j > kappa} |x_j^0 - v_sigma(j)|``,
    ``tau = min{c0 / (2 max|v_i - v_j|), sqrt(2 c0) / 2, (1 - gamma) m}``,
    ``T1 = floor(log(tau / m) / log(1 - gamma))`` (>= 1, independent of beta).
    ``C`` is *not* universal (erratum E9): following the review's reading of the proof
    (A.3, Step 4.4; uncertain) ``C = max_j |x_j^0 - v_sigma(j)| / (m (1 - gamma))``.

    Parameters
    ----------
    x0 : (n, d) array, first kappa rows are the vertices
    vertices : (kappa, d) array
    sigma : (n,) int array
    gamma : float in (0, 1)

    Raises
    ------
    ValueError
        ``n == kappa`` (the statement is vacuous, ``m`` undefined), or the first kappa tokens
        are not the vertices, or ``m == 0``.
    """
    v = _vertices("vertices", vertices)
    x0 = V.tokens("x0", x0, batched_ok=False)
    gamma = V.real_scalar("gamma", gamma, low=0, high=1, low_open=True, high_open=True)
    k, n = len(v), len(x0)
    if x0.shape[1] != v.shape[1]:
        raise ValueError("x0 and vertices must have the same dimension")
    if n <= k:
        raise ValueError("x0 must hold more tokens than vertices: with n == kappa, m is undefined "
                         "and Theorem 5.2 is vacuous")
    sigma = _sigma("sigma", sigma, n, k)
    if not np.array_equal(x0[:k], v) or not np.array_equal(sigma[:k], np.arange(k)):
        raise ValueError("x0[:kappa] must be the vertices and sigma[:kappa] = 0..kappa-1")
    dist = np.linalg.norm(x0[k:] - v[sigma[k:]], axis=1)
    m = float(dist.min())
    if m <= 0:
        raise ValueError("an interior token sits on its vertex (m = 0)")
    cc = c0(v)
    tau = min(cc / (2 * diameter(v)), math.sqrt(2 * cc) / 2, (1 - gamma) * m)
    T1 = int(math.floor(math.log(tau / m) / math.log(1 - gamma)))
    C = float(dist.max() / (m * (1 - gamma)))
    return {"m": m, "tau": tau, "T1": T1, "C": C, "c0": cc, "max_dist": float(dist.max())}


def phase1_event(xT, vertices, sigma, beta: float, tau: float, C: float) -> dict:
    """The event of Theorem 5.2 at time ``T1``, for each of R runs.

    ``|x_i^{T1} - v_i| < beta^{-1/4}`` for the vertex tokens ``i < kappa`` and
    ``|x_i^{T1} - v_sigma(i)| < C tau`` for the others.

    Parameters
    ----------
    xT : (R, n, d) or (n, d) array, the configurations at ``T1``

    Returns
    -------
    dict of bool arrays of shape (R,): ``"event"``, ``"vertices"`` (first part), ``"interior"``
    (second part), and float arrays ``"vertex_drift"`` (max over vertex tokens) and
    ``"interior_radius"`` (max over the others, in units of ``tau``).
    """
    v = _vertices("vertices", vertices)
    xT = V.tokens("xT", xT)
    if xT.ndim == 2:
        xT = xT[None]
    k, n = len(v), xT.shape[1]
    sigma = _sigma("sigma", sigma, n, k)
    beta = V.real_scalar("beta", beta, low=0, low_open=True)
    tau = V.real_scalar("tau", tau, low=0, low_open=True)
    C = V.real_scalar("C", C, low=0, low_open=True)
    dist = np.linalg.norm(xT - v[sigma], axis=-1)
    vd = dist[:, :k].max(axis=1)
    ir = dist[:, k:].max(axis=1) if n > k else np.zeros(len(xT))
    ok_v = vd < beta ** (-1 / 4)
    ok_i = ir < C * tau
    return {"event": ok_v & ok_i, "vertices": ok_v, "interior": ok_i,
            "vertex_drift": vd, "interior_radius": ir / tau}


def run_phase1(x0, vertices, sigma, gamma: float, beta: float, runs: int, seed=0,
               C: float | None = None, horizon: int | None = None) -> dict:
    """Monte Carlo of Theorem 5.2: ``runs`` independent (SAP) chains for ``horizon`` steps
    (default ``3 T1``).

    Uses :func:`attention_fw.dynamics.sap_step` (B = I). Returns the summary of
    :func:`phase1_event` at ``T1`` (fractions), the fraction meeting the event at every
    ``t <= horizon`` (``fraction_by_time``), ``T1``, ``tau``, ``C`` and the paper's lower bound
    ``1 - beta^{-1/8}``.
    """
    from . import dynamics
    consts = phase1_constants(x0, vertices, sigma, gamma)
    C = consts["C"] if C is None else V.real_scalar("C", C, low=0, low_open=True)
    runs = V.positive_int("runs", runs)
    g = V.rng("seed", seed)
    horizon = V.positive_int("horizon", horizon if horizon is not None else 3 * consts["T1"])
    x = np.broadcast_to(np.asarray(x0, float), (runs,) + np.shape(x0)).copy()
    curve = np.empty(horizon + 1)
    curve[0] = phase1_event(x, vertices, sigma, beta, consts["tau"], C)["event"].mean()
    for t in range(1, horizon + 1):
        x = dynamics.sap_step(x, gamma, beta, g)
        if t == consts["T1"]:
            ev = phase1_event(x, vertices, sigma, beta, consts["tau"], C)
            curve[t] = ev["event"].mean()
        else:
            curve[t] = phase1_event(x, vertices, sigma, beta, consts["tau"], C)["event"].mean()
    return {"beta": float(beta), "T1": consts["T1"], "tau": consts["tau"], "C": C, "runs": runs,
            "fraction_by_time": curve,
            "fraction": float(ev["event"].mean()), "fraction_vertices": float(ev["vertices"].mean()),
            "fraction_interior": float(ev["interior"].mean()),
            "vertex_drift_max": float(ev["vertex_drift"].max()),
            "interior_radius_q99": float(np.quantile(ev["interior_radius"], 0.99)),
            "bound": 1.0 - beta ** (-1 / 8)}


# ----------------------------------------------------------------------------------------
# exit time T2 (Theorem 5.4)
# ----------------------------------------------------------------------------------------

def cluster_configuration(vertices, counts) -> tuple[np.ndarray, np.ndarray]:
    """Tokens started exactly at their vertices: ``counts[i]`` coincident tokens at ``v_i``.

    Returns ``x0`` of shape (sum(counts), d) and the group labels ``sigma``.
    """
    v = _vertices("vertices", vertices)
    c = np.asarray(counts)
    if c.shape != (len(v),) or c.dtype.kind not in "iu" or c.min() < 1:
        raise ValueError(f"counts must be {len(v)} positive integers, got {counts!r}")
    sigma = np.repeat(np.arange(len(v)), c)
    return v[sigma].copy(), sigma


def near_vertex_configuration(vertices, per_vertex: int, radius: float, rng=None):
    """Vertex tokens plus ``per_vertex`` tokens at distance ``radius`` from each vertex, in random
    directions of the tangent cone of K at that vertex (so inside K for small radius): a
    configuration "after phase 1" in the sense of Theorem 5.4 (every token close to its vertex).

    Returns ``x0`` (kappa (1 + per_vertex), d) and ``sigma`` as :func:`phase1_configuration`.
    """
    v = _vertices("vertices", vertices)
    per_vertex = V.positive_int("per_vertex", per_vertex, minimum=0)
    radius = V.real_scalar("radius", radius, low=0, low_open=True)
    g = V.rng("rng", rng)
    k = len(v)
    xs, sig = [v], [np.arange(k)]
    for i in range(k):
        e = np.delete(v, i, axis=0) - v[i]
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        u = g.dirichlet(np.ones(k - 1), size=per_vertex) @ e
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        xs.append(v[i] + radius * u)
        sig.append(np.full(per_vertex, i))
    return np.concatenate(xs), np.concatenate(sig)


class _HullDistance:
    """Distance to conv(P) with the face geometry precomputed (see :func:`distance_to_hull`)."""

    def __init__(self, P):
        P = np.unique(P, axis=0)
        self.P = P
        m, d = P.shape
        self.faces = []
        for r in range(2, min(m, d + 1) + 1):
            for sub in itertools.combinations(range(m), r):
                Q = P[list(sub)]
                E = (Q[1:] - Q[0]).T                          # (d, r-1)
                G = E.T @ E
                if np.linalg.matrix_rank(G) < r - 1:
                    continue
                self.faces.append((Q[0], E, E @ np.linalg.inv(G)))   # G symmetric

    def __call__(self, x):
        best = np.min(np.linalg.norm(x[..., None, :] - self.P, axis=-1), axis=-1)
        for base, E, EG in self.faces:
            y = x - base
            lam = y @ EG                                      # (..., r-1) affine coordinates
            ok = np.all(lam >= -1e-12, axis=-1) & (lam.sum(-1) <= 1 + 1e-12)
            dist = np.linalg.norm(y - lam @ E.T, axis=-1)
            best = np.where(ok, np.minimum(best, dist), best)
        return best


def distance_to_hull(x, points) -> np.ndarray:
    """Euclidean distance from each row of ``x`` (..., d) to ``conv(points)`` ((m, d) array).

    Exact: the nearest point lies in the relative interior of a face spanned by at most
    ``d + 1`` of the points, so the minimum over all such subsets of the distance to their
    affine hull (kept when the barycentric coordinates are >= 0) is the distance.
    Vectorised over x; meant for small m (group sizes).
    """
    P = V.as_float_array("points", points, ndim=2)
    x = V.as_float_array("x", x, min_ndim=1, last_dim=P.shape[1])
    return _HullDistance(P)(x)


class _ExitRegion:
    """Precomputed exit region ``conv{x_k^0 : sigma_k = sigma_j} + B(0, eps)`` of every token."""

    def __init__(self, x0, sigma, eps, watch=None):
        self.eps = eps
        n = len(x0)
        watch = np.ones(n, bool) if watch is None else watch
        groups = [x0[sigma == g] for g in range(int(sigma.max()) + 1)]
        point = np.array([len(np.unique(groups[g], axis=0)) == 1 for g in sigma])
        self.pt_idx = np.flatnonzero(watch & point)           # tokens whose hull is a point
        self.pt_center = x0[self.pt_idx]
        self.hull_sets = [(np.flatnonzero(watch & ~point & (sigma == g)), groups[g])
                          for g in range(len(groups))]
        self.hull_sets = [(i, _HullDistance(P)) for i, P in self.hull_sets if i.size]

    def __call__(self, x):
        """x (R, n, d) -> bool (R,): True where some watched token is outside its region."""
        out = np.zeros(x.shape[0], bool)
        if self.pt_idx.size:
            diff = x[:, self.pt_idx] - self.pt_center
            out |= np.any(np.einsum("rjd,rjd->rj", diff, diff) > self.eps ** 2, axis=1)
        for idx, hd in self.hull_sets:
            out |= np.any(hd(x[:, idx]) > self.eps, axis=1)
        return out


def exit_mask(x, x0, sigma, eps: float, watch=None) -> np.ndarray:
    """True for the runs of ``x`` (R, n, d) where some token ``j`` is farther than ``eps`` from
    the hull of its group's initial positions ``conv{x0_k : sigma_k = sigma_j}``: ``x^t`` has
    left ``conv{x_ji^0}_j + B(0, eps)`` (closed ball; exit means distance > eps), the event
    defining ``T2`` in Theorem 5.4. Only tokens with ``watch[j]`` True count (default: all).
    """
    x0, sigma, _, _, eps = _check_common(x0, sigma, 0.5, 0.0, eps)
    x = V.tokens("x", x)
    if x.ndim == 2:
        x = x[None]
    return _ExitRegion(x0, sigma, eps, _watch(watch, len(x0)))(x)


@dataclass
class ExitSample:
    """Exit times of R runs; ``censored[r]`` means run r had not exited by ``times[r]``.

    No run is ever dropped: a censored run contributes ``T2 > times[r]`` to the fits.
    """
    times: np.ndarray
    censored: np.ndarray
    events: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cap: float = math.inf

    @property
    def n_censored(self) -> int:
        return int(np.count_nonzero(self.censored))

    def survival(self, t) -> np.ndarray:
        """Empirical ``P[T2 >= t]`` (Kaplan-Meier; equals the plain fraction when every
        censoring time is the common cap). Valid for t up to the smallest censoring time."""
        t = np.atleast_1d(np.asarray(t, float))
        T, c = self.times, self.censored
        order = np.argsort(T, kind="stable")
        T, c = T[order], c[order]
        at_risk = len(T) - np.arange(len(T))
        factors = np.where(c, 1.0, 1.0 - 1.0 / at_risk)
        surv_after = np.cumprod(factors)                          # S just after T[k]
        k = np.searchsorted(T, t, side="left")                    # number of times < t
        return np.where(k == 0, 1.0, surv_after[np.maximum(k - 1, 0)])


def _watch(watch, n):
    if watch is None:
        return None
    w = np.asarray(watch)
    if w.shape != (n,) or w.dtype != bool or not w.any():
        raise ValueError(f"watch must be a boolean array of shape ({n},) with at least one True")
    return w


def _check_common(x0, sigma, gamma, beta, eps):
    x0 = V.tokens("x0", x0, batched_ok=False)
    n = len(x0)
    sigma = np.asarray(sigma)
    if sigma.shape != (n,) or sigma.dtype.kind not in "iu" or sigma.min() < 0:
        raise ValueError(f"sigma must be a non-negative integer array of shape ({n},)")
    gamma = V.real_scalar("gamma", gamma, low=0, high=1, low_open=True, high_open=True)
    beta = V.real_scalar("beta", beta, low=0)
    eps = V.real_scalar("eps", eps, low=0, low_open=True)
    return x0, sigma.astype(np.intp), gamma, beta, eps


def _masked_lse(L, mask):
    """log sum exp of L over the last axis restricted to mask; -inf when the mask is empty."""
    m = np.max(np.where(mask, L, -np.inf), axis=-1)
    ms = np.where(np.isfinite(m), m, 0.0)
    s = np.sum(np.exp(np.where(mask, L - ms[..., None], -np.inf)), axis=-1)
    out = np.full(s.shape, -np.inf)
    np.log(s, out=out, where=s > 0)
    return out + ms


def move_log_odds(x, beta: float):
    """Per-token log-odds ``d_i = log((1 - s_i) / s_i)`` of moving under one (SAP) step.

    ``s_i`` is the softmax weight of the tokens coincident with ``x_i`` (exact equality).
    Returns ``(d, logits, same)`` with shapes (R, n), (R, n, n), (R, n, n); ``d = -inf`` for a
    token whose point holds every token of its system.
    """
    S = np.einsum("rid,rjd->rij", x, x)
    L = beta * S
    same = np.all(x[:, :, None, :] == x[:, None, :, :], axis=-1)
    d = _masked_lse(L, ~same) - _masked_lse(L, same)
    return d, L, same


def frozen_escape_rate(points, counts, beta: float) -> float:
    """Closed form of ``-log q`` for a frozen configuration (SAP, B = I).

    Tokens sit at distinct ``points`` (K, d) with multiplicities ``counts`` (K,). A token at
    ``p_a`` stays with probability ``w_aa = 1 / (1 + sum_{b != a} (n_b/n_a) e^{beta(<p_a,p_b> - |p_a|^2)})``,
    so ``-log q = sum_a n_a log(1 + sum_{b != a} (n_b/n_a) e^{beta(<p_a,p_b> - |p_a|^2)})`` and the
    waiting time is geometric: ``P(T > t) = q^t``, ``E[T] = 1 / (1 - q)``. For the regular
    kappa-gon (or simplex) with m tokens per vertex, at large beta
    ``E[T] ~ e^{beta c0} / (n N)`` with N the number of nearest neighbours of a vertex
    (2 for the kappa-gon, kappa >= 4; kappa - 1 for the simplex), so ``log E[T]`` has slope c0.

    Parameters
    ----------
    points : (K, d) array of distinct points;  counts : (K,) positive numbers;  beta >= 0

    Returns
    -------
    float ``lambda = -log q`` (0.0 when the escape probability underflows, e.g. beta = 1e6).
    """
    p = V.as_float_array("points", points, ndim=2)
    c = V.as_float_array("counts", counts, ndim=1)
    if len(c) != len(p) or np.any(c < 1):
        raise ValueError("counts must hold one positive count per point")
    beta = V.real_scalar("beta", beta, low=0)
    g = p @ p.T
    expo = beta * (g - np.diag(g)[:, None]) + np.log(c)[None, :] - np.log(c)[:, None]
    np.fill_diagonal(expo, -np.inf)
    lse = np.logaddexp.reduce(expo, axis=1)
    return float(np.sum(c * np.logaddexp(0.0, lse)))


def _event_step(x, d, L, same, gamma, g):
    """Apply the (conditioned on 'something moves') step to every system of x (R, n, d)."""
    R, n, _ = x.shape
    log_s = -np.logaddexp(0.0, d)                     # log P(stay)
    log_p = d + log_s                                 # log P(move)
    prefix = np.concatenate([np.zeros((R, 1)), np.cumsum(log_s, axis=1)[:, :-1]], axis=1)
    first = np.argmax(prefix + log_p + g.gumbel(size=(R, n)), axis=1)
    idx = np.arange(n)[None, :]
    later = (idx > first[:, None]) & (g.random((R, n)) < np.exp(log_p))
    move = later | (idx == first[:, None])
    scores = np.where(same, -np.inf, L) + g.gumbel(size=(R, n, n))
    target = np.argmax(scores, axis=2)
    xt = np.take_along_axis(x, target[:, :, None], axis=1)
    # same floating-point form as dynamics.sap_step, so both simulators hit identical atoms
    return np.where(move[:, :, None], x + gamma * (xt - x), x), move


def engine_exit_times(x0, sigma, gamma: float, beta: float, eps: float, runs: int, seed=0, *,
                      cap: float = 1e300, max_events: int = 10_000, watch=None) -> ExitSample:
    """Exit time ``T2`` of Theorem 5.4 by the rejection-free (kinetic) engine, ``runs`` chains at once.

    ``T2 = inf{t : x_j^t not in conv{x_k^0 : sigma_k = sigma_j} + B(0, eps) for some j}``.
    Exact for every configuration (module docstring); one event per exit in the single-jump
    regime, where ``T2`` is geometric with ``-log q = frozen_escape_rate``.

    Parameters
    ----------
    x0 : (n, d) array;  sigma : (n,) int group labels;  gamma in (0, 1);  beta >= 0;  eps > 0
    runs : number of independent chains (vectorised)
    seed : int, SeedSequence or Generator
    cap : runs whose exit would happen after ``cap`` are censored at ``cap``
    max_events : runs still inside after this many events are censored at their current time
    watch : optional (n,) bool, the tokens whose exit counts (default all)

    Returns
    -------
    ExitSample with ``times`` (float, may exceed 2^53), ``censored`` and per-run ``events``.
    """
    x0, sigma, gamma, beta, eps = _check_common(x0, sigma, gamma, beta, eps)
    runs = V.positive_int("runs", runs)
    cap = V.real_scalar("cap", cap, low=1)
    max_events = V.positive_int("max_events", max_events)
    watch = _watch(watch, len(x0))
    g = V.rng("seed", seed)
    region = _ExitRegion(x0, sigma, eps, watch)
    x = np.broadcast_to(x0, (runs,) + x0.shape).copy()
    t = np.zeros(runs)
    nev = np.zeros(runs, np.int64)
    done = np.zeros(runs, bool)
    cens = np.zeros(runs, bool)
    for _ in range(max_events):
        act = np.flatnonzero(~done)
        if act.size == 0:
            break
        xa = x[act]
        d, L, same = move_log_odds(xa, beta)
        lam = np.sum(np.logaddexp(0.0, d), axis=1)       # -log q, accurate for tiny escapes
        E = g.exponential(size=act.size)
        wait = np.full(act.size, np.inf)
        np.divide(E, lam, out=wait, where=lam > 0)
        tn = t[act] + 1.0 + np.floor(wait)
        over = ~(tn <= cap)
        t[act[over]] = cap
        cens[act[over]] = True
        done[act[over]] = True
        go = ~over
        if go.any():
            ia = act[go]
            xn, _ = _event_step(xa[go], d[go], L[go], same[go], gamma, g)
            x[ia] = xn
            t[ia] = tn[go]
            nev[ia] += 1
            done[ia[region(xn)]] = True
    left = ~done
    cens[left] = True
    return ExitSample(times=t, censored=cens, events=nev, cap=cap)


def engine_state_at(x0, gamma: float, beta: float, t_final: int, runs: int, seed=0) -> np.ndarray:
    """State of ``runs`` (SAP) chains at time ``t_final`` simulated by the rejection-free engine.

    For validation against plain stepping: the same law as ``t_final`` calls of ``sap_step``.
    Returns an array of shape (runs, n, d).
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    gamma = V.real_scalar("gamma", gamma, low=0, high=1, low_open=True, high_open=True)
    beta = V.real_scalar("beta", beta, low=0)
    t_final = V.positive_int("t_final", t_final, minimum=0)
    runs = V.positive_int("runs", runs)
    g = V.rng("seed", seed)
    x = np.broadcast_to(x0, (runs,) + x0.shape).copy()
    t = np.zeros(runs)
    act = np.arange(runs)
    while act.size:
        xa = x[act]
        d, L, same = move_log_odds(xa, beta)
        lam = np.sum(np.logaddexp(0.0, d), axis=1)
        wait = np.full(act.size, np.inf)
        np.divide(g.exponential(size=act.size), lam, out=wait, where=lam > 0)
        tn = t[act] + 1.0 + np.floor(wait)
        go = tn <= t_final
        if go.any():
            x[act[go]], _ = _event_step(xa[go], d[go], L[go], same[go], gamma, g)
            t[act[go]] = tn[go]
        act = act[go]
    return x


def stepping_exit_times(x0, sigma, gamma: float, beta: float, eps: float, runs: int, seed=0, *,
                        cap: int = 10_000, watch=None) -> ExitSample:
    """Exit time ``T2`` (Theorem 5.4) by plain step-by-step (SAP), ``runs`` chains at once.

    Uses :func:`attention_fw.dynamics.sap_step` with B = I on the chains still inside; runs
    still inside after ``cap`` steps are censored at ``cap``. Cost: one step per unit of time.
    ``watch`` as in :func:`engine_exit_times`.
    """
    from . import dynamics
    x0, sigma, gamma, beta, eps = _check_common(x0, sigma, gamma, beta, eps)
    runs = V.positive_int("runs", runs)
    cap = V.positive_int("cap", cap)
    watch = _watch(watch, len(x0))
    g = V.rng("seed", seed)
    region = _ExitRegion(x0, sigma, eps, watch)
    x = np.broadcast_to(x0, (runs,) + x0.shape).copy()
    times = np.full(runs, float(cap))
    cens = np.ones(runs, bool)
    act = np.arange(runs)
    for t in range(1, cap + 1):
        xa = dynamics.sap_step(x[act], gamma, beta, g)
        ex = region(xa)
        times[act[ex]] = t
        cens[act[ex]] = False
        x[act] = xa
        act = act[~ex]
        if act.size == 0:
            break
    return ExitSample(times=times, censored=cens, events=np.zeros(0), cap=float(cap))


def sabeta_exit_time(x0, sigma, gamma: float, beta: float, eps: float, *, cap: int = 10**6,
                     watch=None, record_times=None) -> dict:
    """Deterministic (SA-beta) counterpart of ``T2``: first step at which a watched token leaves
    ``conv{x_ji^0}_j + B(0, eps)``; no theorem covers it (erratum E6), it is an observation.

    Uses :func:`attention_fw.dynamics.softmax_step` (B = I). Returns ``{"T": exit step or
    None if still inside after cap, "times": recorded steps, "x": (len(times), n, d)}`` with
    the configuration stored at the steps in ``record_times`` that are <= T.
    """
    from . import dynamics
    x0, sigma, gamma, beta, eps = _check_common(x0, sigma, gamma, beta, eps)
    cap = V.positive_int("cap", cap)
    watch = _watch(watch, len(x0))
    region = _ExitRegion(x0, sigma, eps, watch)
    rec = set(int(t) for t in (record_times if record_times is not None else []))
    x = x0.copy()
    times, xs = [0], [x0.copy()]
    T = None
    for t in range(1, cap + 1):
        x = dynamics.softmax_step(x, gamma, beta)
        if t in rec:
            times.append(t)
            xs.append(x.copy())
        if region(x[None])[0]:
            T = t
            if t not in rec:
                times.append(t)
                xs.append(x.copy())
            break
    return {"T": T, "times": np.array(times), "x": np.array(xs)}


def excursion_paths(x0, sigma, gamma: float, beta: float, steps: int, *, runs: int = 0, seed=0,
                    every: int = 1) -> dict:
    """Largest distance of a token to its group's initial hull, ``max_j dist(x_j^t, conv{x_k^0})``,
    along (SA-beta) and along ``runs`` (SAP) chains from the same start, for ``t <= steps``.

    ``T2`` is the first time this exceeds ``eps``. Returns ``{"t": (T',), "sabeta": (T',),
    "sap": (runs, T')}`` sampled every ``every`` steps. Uses ``dynamics.softmax_step`` and
    ``dynamics.sap_step`` (B = I).
    """
    from . import dynamics
    x0, sigma, gamma, beta, _ = _check_common(x0, sigma, gamma, beta, 1.0)
    steps = V.positive_int("steps", steps)
    runs = V.positive_int("runs", runs, minimum=0)
    every = V.positive_int("every", every)
    g = V.rng("seed", seed)
    groups = [x0[sigma == k] for k in range(int(sigma.max()) + 1)]
    hd = [_HullDistance(P) for P in groups]

    def dist(x):                                  # (R, n, d) -> (R,)
        return np.max(np.stack([hd[k](x[:, sigma == k]).max(axis=1) for k in range(len(hd))], 1), axis=1)
    xd = x0[None].copy()
    xs = np.broadcast_to(x0, (max(runs, 1),) + x0.shape).copy()
    ts, a, b = [0], [dist(xd)[0]], [dist(xs)]
    for t in range(1, steps + 1):
        xd = dynamics.softmax_step(xd, gamma, beta)
        if runs:
            xs = dynamics.sap_step(xs, gamma, beta, g)
        if t % every == 0:
            ts.append(t)
            a.append(dist(xd)[0])
            b.append(dist(xs))
    return {"t": np.array(ts), "sabeta": np.array(a), "sap": np.array(b).T[:runs]}


# ----------------------------------------------------------------------------------------
# censored fits
# ----------------------------------------------------------------------------------------

@dataclass
class CensoredFit:
    """Maximum-likelihood fit of a geometric (or exponential) law to right-censored times."""
    model: str
    rate: float            # geometric: success probability p; exponential: rate lambda
    mean: float            # 1 / rate (inf when no exit was observed)
    log_mean_ci: tuple     # confidence interval for log(mean), Wald on the log scale
    n: int
    n_exits: int
    n_censored: int
    exposure: float        # sum of all observed times (exits and censoring times)
    level: float

    @property
    def median(self) -> float:
        """Median of the fitted law (geometric: smallest t with P(T <= t) >= 1/2)."""
        if self.rate <= 0:
            return math.inf
        if self.model == "geometric":
            return float(math.ceil(-math.log(2) / math.log1p(-self.rate))) if self.rate < 1 else 1.0
        return math.log(2) / self.rate


def _times(times, censored):
    T = V.as_float_array("times", times, ndim=1, finite=True)
    c = np.asarray(censored)
    if c.shape != T.shape or c.dtype != bool:
        raise ValueError("censored must be a boolean array with the shape of times")
    return T, c


def fit_geometric_censored(times, censored, level: float = 0.95) -> CensoredFit:
    """MLE of a geometric law on {1, 2, ...} from right-censored data.

    Exits contribute ``(1-p)^{T-1} p``, censored runs ``P(T > c) = (1-p)^c``, hence
    ``p_hat = D / (sum of exit times + sum of censoring times)`` with D the number of exits.
    The interval for ``log(1/p)`` uses the observed information,
    ``se(log p_hat) = sqrt((1 - p_hat) / D)``. With ``D = 0`` the MLE is ``p = 0`` (mean
    infinite); the interval is then the one-sided ``[log(exposure / -log(1 - level)), inf)``.
    """
    return _censored_rate_fit("geometric", times, censored, level, lambda p, D: math.sqrt(max(1 - p, 0.0) / D))


def fit_exponential_censored(times, censored, level: float = 0.95) -> CensoredFit:
    """MLE of an exponential law from right-censored data: ``lambda_hat = D / sum(times)``,
    ``se(log lambda_hat) = 1 / sqrt(D)``."""
    return _censored_rate_fit("exponential", times, censored, level, lambda lam, D: 1 / math.sqrt(D))


def _censored_rate_fit(kind, times, censored, level, se_log_rate) -> CensoredFit:
    """Shared MLE of the geometric and exponential laws from right-censored data.

    Both estimate the rate as (number of exits D) / (total exposure), the mean as its inverse,
    and give a normal interval for the log of the mean with standard error
    ``se_log_rate(rate, D)``; with no exit the interval is one-sided (see the callers).
    """
    T, c = _times(times, censored)
    level = V.real_scalar("level", level, low=0, high=1, low_open=True, high_open=True)
    D = int(np.count_nonzero(~c))
    expo = float(T.sum())
    z = stats.norm.ppf(0.5 + level / 2)
    if D == 0:
        return CensoredFit(kind, 0.0, math.inf, (math.log(expo / -math.log1p(-level)), math.inf),
                           len(T), 0, len(T), expo, level)
    rate = D / expo
    se = se_log_rate(rate, D)
    lm = -math.log(rate)
    return CensoredFit(kind, rate, 1 / rate, (lm - z * se, lm + z * se), len(T), D, len(T) - D, expo, level)


def fit_log_mean_slope(betas, fits, level: float = 0.95) -> dict:
    """Weighted least-squares line ``log E[T2] = a + s beta`` through censored fits.

    Weights are the inverse variances of ``log(mean)`` from each fit. Returns the slope, the
    intercept, the standard error of the slope, its ``level`` confidence interval (normal) and
    the ``weights``.
    """
    b = V.as_float_array("betas", betas, ndim=1)
    if len(fits) != len(b) or len(b) < 2:
        raise ValueError("fits must hold one CensoredFit per beta (at least 2)")
    y = np.array([math.log(f.mean) for f in fits])
    z = stats.norm.ppf(0.5 + level / 2)
    se = np.array([(f.log_mean_ci[1] - f.log_mean_ci[0]) / (2 * stats.norm.ppf(0.5 + f.level / 2)) for f in fits])
    if not np.all(np.isfinite(y)) or not np.all(se > 0):
        raise ValueError("every fit must have at least one exit and a positive standard error")
    w = 1 / se ** 2
    X = np.stack([np.ones_like(b), b], axis=1)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    a, s = cov @ (X.T @ (w * y))
    ses = math.sqrt(cov[1, 1])
    return {"slope": float(s), "intercept": float(a), "slope_se": ses,
            "slope_ci": (float(s - z * ses), float(s + z * ses)), "level": level, "weights": w}


# ----------------------------------------------------------------------------------------
# the bound of Theorem 5.4
# ----------------------------------------------------------------------------------------

def metastability_bound(t, beta: float, n: int, gamma: float, eps: float, c0_: float,
                        diam: float | None = None, form: str = "printed") -> np.ndarray:
    """Lower bound on ``P[T2 >= t]`` of Theorem 5.4 (``eq: metastability.bound``), clipped at 0.

    ``form="printed"``: ``1 - exp((1 + eps/gamma) log(gamma t / eps) + (1 + eps/gamma) log n
    - beta c0 eps / (2 gamma))`` as printed (NOTES section 5.4).

    ``form="corrected"``: our reconstruction of the audit's correction (erratum E11; the
    corrected statement itself is not available, so this form is *uncertain*): an exit needs
    ``M = ceil(eps / (gamma d(K)))`` bad steps among the ``n t`` token-steps, each of
    probability at most ``p = n e^{-beta c0 / 2}`` (``cl: group.cluster.bound``), so by a
    union bound ``P[T2 < t] <= binom(n t, M) p^M``. It also needs the clusters to stay within
    radius r with ``4 R r + 2 r^2 <= c0 / 2`` and disjoint balls (not checked here).

    Parameters
    ----------
    t : array of times (> 1)
    diam : ``d(K)``, required for the corrected form
    """
    t = V.as_float_array("t", t, min_ndim=0)
    beta = V.real_scalar("beta", beta, low=0)
    n = V.positive_int("n", n)
    gamma = V.real_scalar("gamma", gamma, low=0, high=1, low_open=True, high_open=True)
    eps = V.real_scalar("eps", eps, low=0, low_open=True)
    c0_ = V.real_scalar("c0_", c0_, low=0, low_open=True)
    if form == "printed":
        k = 1 + eps / gamma
        expo = k * np.log(gamma * t / eps) + k * math.log(n) - beta * c0_ * eps / (2 * gamma)
    elif form == "corrected":
        if diam is None:
            raise ValueError("diam must be given for form='corrected'")
        diam = V.real_scalar("diam", diam, low=0, low_open=True)
        M = math.ceil(eps / (gamma * diam) - 1e-12)
        N = n * t
        # log binom(N, M) = sum_{k<M} log(N - k) - log M!, accurate for huge N (no gammaln cancellation)
        k = np.arange(M).reshape((M,) + (1,) * np.ndim(N))
        ok = N >= M
        terms = np.log(np.where(ok, N - k, 1.0))
        log_binom = np.where(ok, terms.sum(axis=0) - math.lgamma(M + 1), -np.inf)
        expo = log_binom + M * (math.log(n) - beta * c0_ / 2)
    else:
        raise ValueError(f"form must be 'printed' or 'corrected', got {form!r}")
    return np.clip(-np.expm1(np.minimum(expo, 700.0)), 0.0, 1.0)


# ----------------------------------------------------------------------------------------
# Prop 5.1: collapse of (SA-beta)
# ----------------------------------------------------------------------------------------

def collapse_sabeta(x0, gamma: float, beta: float, *, tol: float = 1e-8, max_steps: int = 10**6,
                    record_every: int = 1) -> dict:
    """Run the deterministic (SA-beta) (B = I, constant gamma) until the diameter is < ``tol``.

    Prop 5.1 (``prop: origin``): all tokens converge to one point ``x*`` of
    ``conv{x_i^0}``, in general **not** the origin (erratum E5; proof for every beta and
    gamma in (0, 1] as in the formalization, E12). Uses :func:`attention_fw.dynamics.softmax_step`.

    Returns
    -------
    dict with ``limit`` (d,) (mean of the final tokens), ``steps`` (first t with diameter
    < tol, or ``max_steps`` with ``converged=False``), ``times`` and ``diameters`` (recorded
    every ``record_every`` steps) and ``x`` (final tokens).
    """
    from . import dynamics
    x = V.tokens("x0", x0, batched_ok=False).copy()
    gamma = V.real_scalar("gamma", gamma, low=0, high=1, low_open=True)
    beta = V.real_scalar("beta", beta)
    tol = V.real_scalar("tol", tol, low=0, low_open=True)
    max_steps = V.positive_int("max_steps", max_steps)
    record_every = V.positive_int("record_every", record_every)
    def diam(y):
        return float(np.max(np.linalg.norm(y[:, None, :] - y[None, :, :], axis=-1)))
    times, diams = [0], [diam(x)]
    steps, conv = max_steps, False
    for t in range(1, max_steps + 1):
        x = dynamics.softmax_step(x, gamma, beta)
        dm = diam(x)
        if dm < tol or t % record_every == 0 or t == max_steps:
            times.append(t)
            diams.append(dm)
        if dm < tol:
            steps, conv = t, True
            break
    return {"limit": x.mean(0), "steps": steps, "converged": conv, "times": np.array(times),
            "diameters": np.array(diams), "x": x}


# ----------------------------------------------------------------------------------------
# benchmark helper (not a test): ``make bench`` / tools/bench_metastability.py
# ----------------------------------------------------------------------------------------

def bench(betas=(3.0, 4.0, 5.0, 6.0, 7.0, 16.0, 20.0, 25.0), *, exits: int = 10_000,
          step_runs: int = 1000, step_budget_s: float = 5.0, gamma: float = 0.1, eps: float = 0.05,
          counts=(2, 2, 2), seed: int = 0) -> list[dict]:
    """Exits per second of the engine and chain-steps per second of plain (SAP) stepping.

    Setting: equilateral triangle, ``counts`` coincident tokens per vertex, single-jump
    regime (``eps < gamma sqrt(3)``). For each beta: time ``exits`` engine exits; time plain
    stepping of ``step_runs`` chains for at most ``step_budget_s`` seconds (or until all
    exit) and convert to exits per second with the exact ``E[T2] = 1 / (1 - q)``. Plain
    stepping is reported as feasible when ``E[T2] * exits / steps_per_s`` is below one hour.
    """
    import time

    from . import dynamics
    v = triangle_on_circle()
    x0, sigma = cluster_configuration(v, np.asarray(counts))
    out = []
    for beta in betas:
        lam = frozen_escape_rate(v, np.asarray(counts), beta)
        mean_T2 = 1.0 / -math.expm1(-lam)
        t0 = time.perf_counter()
        es = engine_exit_times(x0, sigma, gamma, beta, eps, exits, seed)
        t_eng = time.perf_counter() - t0
        g = np.random.default_rng(seed)
        x = np.broadcast_to(x0, (step_runs,) + x0.shape).copy()
        steps = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < step_budget_s and steps < 10 * mean_T2:
            x = dynamics.sap_step(x, gamma, beta, g)
            steps += 1
        t_step = time.perf_counter() - t0
        sps = steps * step_runs / t_step
        plain_exits_ps = sps / mean_T2
        out.append({"beta": float(beta), "E_T2": mean_T2, "engine_exits": exits,
                    "engine_seconds": t_eng, "engine_exits_per_s": exits / t_eng,
                    "engine_censored": es.n_censored,
                    "plain_chain_steps_per_s": sps, "plain_exits_per_s": plain_exits_ps,
                    "plain_feasible": bool(mean_T2 * exits / sps < 3600.0),
                    "speedup": (exits / t_eng) / plain_exits_ps})
    return out


# ----------------------------------------------------------------------------------------
# Theorem 5.4: the hypotheses its proof mechanism needs (issue 12)
# ----------------------------------------------------------------------------------------

def theorem54_radius(vertices) -> float:
    """Largest ``r`` with ``4 R r + 2 r^2 <= c0 / 2``, ``R = max_a |v_a|``: ``sqrt(R^2 + c0/4) - R``.

    The proof of Theorem 5.4 bounds the total softmax weight a token gives to the other
    groups by ``n e^{-beta c0 / 2}`` as long as every token stays within ``r`` of its vertex
    and ``4 R r + 2 r^2 <= c0 / 2`` (for ``x`` within ``r`` of ``v_i``, ``y`` within ``r`` of
    ``v_j`` and ``z`` within ``r`` of ``v_i``: ``<x, z> - <x, y> >= c0 - 4 R r - 2 r^2``).
    Before the exit time the tokens stay in ``conv{x_ji^0}_j + B(0, eps)``, so ``r`` must cover
    the start radius plus ``eps``. Returns 0.0 when ``c0 <= 0`` (no admissible radius).
    """
    v = _vertices("vertices", vertices)
    R = float(np.linalg.norm(v, axis=1).max())
    c = c0(v)
    if c <= 0:
        return 0.0
    # sqrt(R^2 + c/4) - R without cancellation when c << R^2
    return (c / 4) / (math.sqrt(R * R + c / 4) + R)


def theorem54_hypotheses(vertices, eps: float, gamma: float, rho: float = 0.0) -> dict:
    """Which hypotheses of Theorem 5.4, as its proof uses them, hold for ``(eps, gamma)``.

    ``rho`` is the start radius ``max_j |x_j^0 - v_sigma(j)|`` (0 for clusters at the vertices;
    the theorem allows up to ``C tau``, the output radius of Theorem 5.2). Keys:

    * ``angle_51``: condition (5.1) read as an angle (E15); ``equal_norms``: ``|v_i| = |v_j|``;
      ``c0_positive``: ``eq: bound.max`` holds with ``c0 > 0``;
    * ``ratio``: ``eps / gamma >= 2 d(K)``, i.e. ``gamma <= gamma_max = eps / (2 d(K))``;
    * ``radius``: ``4 R (rho + eps) + 2 (rho + eps)^2 <= c0 / 2``, i.e. ``eps <= eps_max =``
      :func:`theorem54_radius` ``- rho`` (the proof's ``eps_*`` for this start radius);
    * ``disjoint``: ``rho < min_{i != j} |v_i - v_j| / 3`` (the balls of the relabelling are
      disjoint; the review's suggested condition);
    * ``all``: every item above, plus ``gamma in (0, 1)``.

    Also returns the numbers ``eps_max``, ``gamma_max``, ``r_star``, ``M = ceil(eps / (gamma d(K)))``
    (bad steps an exit needs) and ``d`` (the diameter).
    """
    v = _vertices("vertices", vertices)
    eps = V.real_scalar("eps", eps, low=0, low_open=True)
    gamma = V.real_scalar("gamma", gamma, low=0, high=1, low_open=True, high_open=True)
    rho = V.real_scalar("rho", rho, low=0)
    d = diameter(v)
    c = c0(v)
    norms = np.linalg.norm(v, axis=1)
    R = float(norms.max())
    r_star = theorem54_radius(v)
    r = rho + eps
    out = {
        "angle_51": satisfies_51(v),
        "equal_norms": bool(np.ptp(norms) <= 1e-12 * max(R, 1.0)),
        "c0_positive": bool(c > 0),
        "ratio": bool(eps / gamma >= 2 * d * (1 - 1e-12)),
        "radius": bool(c > 0 and 4 * R * r + 2 * r * r <= c / 2 * (1 + 1e-12)),
        "disjoint": bool(rho < spatial.distance.pdist(v).min() / 3),
        "eps_max": r_star - rho, "gamma_max": eps / (2 * d), "r_star": r_star,
        "M": math.ceil(eps / (gamma * d) - 1e-12), "d": d,
    }
    out["all"] = all(out[k] for k in ("angle_51", "equal_norms", "c0_positive", "ratio", "radius", "disjoint"))
    return out


def theorem54_region(vertices, rho: float = 0.0) -> np.ndarray:
    """The admissible ``(eps, gamma)`` set of :func:`theorem54_hypotheses` as a polygon.

    ``{0 < eps <= eps_max, 0 < gamma <= eps / (2 d(K))}`` is the triangle with corners
    ``(0, 0)``, ``(eps_max, 0)``, ``(eps_max, eps_max / (2 d(K)))`` (counter-clockwise, shape (3, 2));
    empty (shape (0, 2)) when ``eps_max <= 0``. (``eps_max / (2 d) < 1`` always, so ``gamma < 1``
    is implied.)
    """
    v = _vertices("vertices", vertices)
    rho = V.real_scalar("rho", rho, low=0)
    e = theorem54_radius(v) - rho
    if e <= 0:
        return np.zeros((0, 2))
    return np.array([[0.0, 0.0], [e, 0.0], [e, e / (2 * diameter(v))]])


# ----------------------------------------------------------------------------------------
# the exact mean of the single-jump exit time, and its slope in beta (issue 12)
# ----------------------------------------------------------------------------------------

def frozen_log_mean_exit(points, counts, beta: float) -> float:
    """``log E[T]`` of the geometric first-event time of a frozen configuration, exactly.

    ``E[T] = 1 / (1 - q)``, ``q = e^{-lambda}`` with ``lambda`` of :func:`frozen_escape_rate`;
    in the single-jump regime ``T`` is the exit time ``T2``. Computed in log space, so the
    value stays exact when ``lambda`` underflows (``beta = 1e6``): then
    ``log E[T] = -log lambda + lambda / 2 + O(lambda^2)``.
    """
    p = V.as_float_array("points", points, ndim=2)
    c = V.as_float_array("counts", counts, ndim=1)
    if len(c) != len(p) or np.any(c < 1):
        raise ValueError("counts must hold one positive count per point")
    beta = V.real_scalar("beta", beta, low=0)
    g = p @ p.T
    expo = beta * (g - np.diag(g)[:, None]) + np.log(c)[None, :] - np.log(c)[:, None]
    np.fill_diagonal(expo, -np.inf)
    x = np.logaddexp.reduce(expo, axis=1)              # log sum_b (n_b/n_a) e^{...}, per point a
    # log(log1p(e^x)): x - e^x/2 (+ O(e^{2x})) far in the tail, direct otherwise
    with np.errstate(divide="ignore"):
        log_soft = np.where(x < -30, x - np.exp(np.minimum(x, 0)) / 2,
                            np.log(np.logaddexp(0.0, np.maximum(x, -30))))
    log_lam = float(np.logaddexp.reduce(np.log(c) + log_soft))
    lam = math.exp(log_lam) if log_lam < 700 else math.inf
    if lam > 1e-8:
        return -math.log(-math.expm1(-lam))
    return -log_lam + lam / 2


def frozen_mean_slope(points, counts, betas, weights=None) -> float:
    """Weighted least-squares slope of ``beta -> log E[T]`` (:func:`frozen_log_mean_exit`).

    The exact counterpart of :func:`fit_log_mean_slope` on the same grid: pass the weights of
    a Monte Carlo fit (its ``"weights"``) to compare like with like. Tends to ``c0`` for the
    regular kappa-gon (and the simplex) as the grid moves to large beta.
    """
    b = V.as_float_array("betas", betas, ndim=1)
    if len(b) < 2 or np.ptp(b) == 0:
        raise ValueError("betas must hold at least 2 distinct values")
    w = np.ones_like(b) if weights is None else V.as_float_array("weights", weights, ndim=1)
    if w.shape != b.shape or np.any(w <= 0):
        raise ValueError("weights must be positive, one per beta")
    y = np.array([frozen_log_mean_exit(points, counts, bb) for bb in b])
    bm = np.sum(w * b) / w.sum()
    return float(np.sum(w * (b - bm) * (y - np.sum(w * y) / w.sum())) / np.sum(w * (b - bm) ** 2))


def frozen_slope_windows(points, counts, starts, width: float, num: int = 5) -> np.ndarray:
    """Unweighted slopes of :func:`frozen_mean_slope` on moving windows ``[s, s + width]``.

    Each window holds ``num`` equally spaced betas; returns one slope per start, shape (len(starts),).
    """
    s = V.as_float_array("starts", starts, ndim=1)
    width = V.real_scalar("width", width, low=0, low_open=True)
    num = V.positive_int("num", num, minimum=2)
    if np.any(s < 0):
        raise ValueError("starts must be >= 0")
    return np.array([frozen_mean_slope(points, counts, np.linspace(a, a + width, num)) for a in s])
