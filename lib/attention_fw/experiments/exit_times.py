"""How long do the clusters of Section 5 hold? Exit times ``T2`` of Theorem 5.4, simulated.

``T2 = inf{t : x_j^t not in conv{x_k^0 : sigma_k = sigma_j} + B(0, eps) for some j}`` under
the chain (SAP) with ``B = I`` and a constant step ``gamma``, measured by plain stepping
(:func:`stepping_exit_times`, on :func:`attention_fw.model.dynamics.simulate`) or by the exact
rejection-free engine below (:func:`engine_exit_times`), always with right censoring at a cap:
no run is ever dropped. One exit-time function per dynamics, all with the signature shape
``x0, sigma, gamma, beta, eps[, runs], *, ...`` (``rng`` keyword-only and required where anything is
drawn, ``B=None``, ``cap``, ``watch``), one result type (:class:`ExitSample`) and one "no exit" marker
(``censored``, the time then the cap): the chain by the engine or by plain stepping here, the
deterministic (SA-beta) by :func:`attention_fw.experiments.sabeta.sabeta_exit_times` (exact stepping
in a compiled kernel, batched; used by :func:`e6_task`). The excursion paths are here too; the
censored fits of the times are in :mod:`attention_fw.experiments.survival`.

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

import math

import numpy as np
import numpy.typing as npt

from .._validate import SeedLike
from .. import _validate as V
from ..model import dynamics
from ..geometry.polytope import HullDistance, _around_vertices, _vertices, c0, points_on_circle, regular_polygon
from ..results import Result
from ._exit_common import ExitSample, _check_common, _ExitRegion, _key_query, _watch
from .sabeta_kernel import sabeta_exit_times

__all__ = [
    "cluster_configuration", "near_vertex_configuration", "tokens_per_vertex", "exit_mask",
    "ExitSample", "move_log_odds", "frozen_escape_rate", "frozen_log_mean_exit", "frozen_mean_slope",
    "frozen_slope_windows", "engine_exit_times", "engine_state_at",
    "stepping_exit_times", "excursion_paths", "zoom_paths", "exit_time_task", "e6_task",
]


def cluster_configuration(vertices: npt.ArrayLike, counts: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Tokens started exactly at their vertices: ``counts[i]`` coincident tokens at ``v_i``.

    Returns ``x0`` of shape (sum(counts), d) and the group labels ``sigma``.

    Examples
    --------
    >>> x0, sigma = cluster_configuration(regular_polygon(3), np.array([2, 1, 1]))
    >>> sigma.tolist(), bool(np.array_equal(x0[0], x0[1]))
    ([0, 0, 1, 2], True)
    """
    v = _vertices("vertices", vertices)
    c = np.asarray(counts)
    if c.shape != (len(v),) or c.dtype.kind not in "iu" or c.min() < 1:
        raise ValueError(f"counts must be {len(v)} positive integers, got {counts!r}")
    sigma = np.repeat(np.arange(len(v)), c)
    return v[sigma].copy(), sigma


def near_vertex_configuration(vertices: npt.ArrayLike, per_vertex: int, radius: float, *,
                              rng: SeedLike) -> tuple[np.ndarray, np.ndarray]:
    """Vertex tokens plus ``per_vertex`` tokens at distance ``radius`` from each vertex, in random
    directions of the tangent cone of K at that vertex (so inside K for small radius): a
    configuration "after phase 1" in the sense of Theorem 5.4 (every token close to its vertex).

    Returns ``x0`` (kappa (1 + per_vertex), d) and ``sigma`` as
    :func:`attention_fw.experiments.metastability.phase1_configuration`.

    Examples
    --------
    >>> x0, sigma = near_vertex_configuration(regular_polygon(3), 2, 0.05, rng=0)
    >>> sigma.tolist(), np.linalg.norm(x0[3:] - x0[sigma[3:]], axis=1).round(12).tolist()
    ([0, 1, 2, 0, 0, 1, 1, 2, 2], [0.05, 0.05, 0.05, 0.05, 0.05, 0.05])
    """
    radius = V.real_scalar("radius", radius, low=0, low_open=True)

    def draw(v, i, g):
        e = np.delete(v, i, axis=0) - v[i]
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        u = g.dirichlet(np.ones(len(v) - 1), size=per_vertex) @ e
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        return v[i] + radius * u

    return _around_vertices(vertices, per_vertex, rng, draw)


def exit_mask(x: npt.ArrayLike, x0: npt.ArrayLike, sigma: npt.ArrayLike, eps: float,
              watch: npt.ArrayLike | None = None) -> np.ndarray:
    """True for the runs of ``x`` (R, n, d) where some token ``j`` is farther than ``eps`` from
    the hull of its group's initial positions ``conv{x0_k : sigma_k = sigma_j}``: ``x^t`` has
    left ``conv{x_ji^0}_j + B(0, eps)`` (closed ball; exit means distance > eps), the event
    defining ``T2`` in Theorem 5.4. Only tokens with ``watch[j]`` True count (default: all).
    One system ``x`` (n, d) counts as a batch of one: the result has shape (1,).

    Examples
    --------
    Group 0 starts on the segment ``[(0, 0), (1, 0)]``, group 1 at ``(0, 1)``; ``eps = 0.05``:

    >>> x0, sigma = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), np.array([0, 0, 1])
    >>> x = np.stack([x0, x0, x0])
    >>> x[0, 0], x[1, 0], x[2, 2] = [0.5, 0.04], [0.5, 0.06], [0.0, 1.06]
    >>> # 0.04 from the group's hull: inside; 0.06: exit
    >>> exit_mask(x, x0, sigma, 0.05)
    array([False,  True,  True])
    >>> exit_mask(x[1], x0, sigma, 0.05)   # one system
    array([ True])
    """
    x0, sigma, _, _, eps = _check_common(x0, sigma, 0.5, 0.0, eps)
    x = V.tokens("x", x)
    if x.ndim == 2:
        x = x[None]
    return _ExitRegion(x0, sigma, eps, _watch(watch, len(x0)))(x)


def _masked_lse(L, mask):
    """log sum exp of L over the last axis restricted to mask; -inf when the mask is empty."""
    m = np.max(np.where(mask, L, -np.inf), axis=-1)
    ms = np.where(np.isfinite(m), m, 0.0)
    s = np.sum(np.exp(np.where(mask, L - ms[..., None], -np.inf)), axis=-1)
    out = np.full(s.shape, -np.inf)
    np.log(s, out=out, where=s > 0)
    return out + ms


def move_log_odds(x: np.ndarray, beta: float, B: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-token log-odds ``d_i = log((1 - s_i) / s_i)`` of moving under one (SAP) step.

    ``s_i`` is the softmax weight of the tokens coincident with ``x_i`` (exact equality), with
    the logits ``beta <B x_i, x_j>`` (``B = None``: the identity, the standing choice of Section 5).
    Returns ``(d, logits, same)`` with shapes (R, n), (R, n, n), (R, n, n); ``d = -inf`` for a
    token whose point holds every token of its system.

    Examples
    --------
    At ``beta = 0`` the weights are uniform, so the odds ``e^{d_i}`` are (tokens elsewhere) /
    (tokens at ``x_i``'s point): 1/2 for the pair at the origin, 2 for the lone token:

    >>> x = np.array([[[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]])      # one system (R = 1)
    >>> d, logits, same = move_log_odds(x, 0.0)
    >>> np.exp(d).round(6), same[0, 0].tolist()
    (array([[0.5, 0.5, 2. ]]), [True, True, False])
    >>> # all at one point: never moves
    >>> move_log_odds(np.zeros((1, 3, 2)), 1.0)[0]
    array([[-inf, -inf, -inf]])
    """
    S = np.einsum("rid,rjd->rij", x, x) if B is None else np.einsum("rie,rje->rij", x @ B.T, x)
    L = beta * S
    same = np.all(x[:, :, None, :] == x[:, None, :, :], axis=-1)
    d = _masked_lse(L, ~same) - _masked_lse(L, same)
    return d, L, same


def _frozen_log_odds(points, counts, beta):
    """Checked counts ``n_a`` and ``log sum_{b != a} (n_b/n_a) e^{beta(<p_a,p_b> - |p_a|^2)}`` per point ``a``
    (the log-odds of leaving ``p_a`` in one step)."""
    p = V.as_float_array("points", points, ndim=2)
    c = V.as_float_array("counts", counts, ndim=1)
    if len(c) != len(p) or np.any(c < 1):
        raise ValueError("counts must hold one positive count per point")
    beta = V.real_scalar("beta", beta, low=0)
    g = p @ p.T
    expo = beta * (g - np.diag(g)[:, None]) + np.log(c)[None, :] - np.log(c)[:, None]
    np.fill_diagonal(expo, -np.inf)
    return c, np.logaddexp.reduce(expo, axis=1)


def frozen_escape_rate(points: npt.ArrayLike, counts: npt.ArrayLike, beta: float) -> float:
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
    points : array (K, d)
        The distinct points where the tokens sit.
    counts : array (K,)
        The number of tokens at each point (positive).
    beta : float >= 0
        Inverse temperature.

    Returns
    -------
    float ``lambda = -log q`` (0.0 when the escape probability underflows, e.g. beta = 1e6).

    Examples
    --------
    One token per vertex of the equilateral triangle: ``<p_a, p_b> - |p_a|^2 = -3/2``, so
    ``lambda = 3 log(1 + 2 e^{-3 beta / 2})``; at ``beta = 0``, ``q = (1/3)^3``:

    >>> v = regular_polygon(3)
    >>> math.isclose(
    ...     frozen_escape_rate(v, [1, 1, 1], 2.0), 3 * math.log1p(2 * math.exp(-3.0))
    ... )
    True
    >>> math.isclose(frozen_escape_rate(v, [1, 1, 1], 0.0), 3 * math.log(3))
    True
    """
    c, lse = _frozen_log_odds(points, counts, beta)
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


def engine_exit_times(x0: npt.ArrayLike, sigma: npt.ArrayLike, gamma: float, beta: float, eps: float, runs: int, *,
                      rng: SeedLike, cap: float = 1e300, max_events: int = 10_000,
                      watch: npt.ArrayLike | None = None, B: npt.ArrayLike | None = None) -> ExitSample:
    """Exit time ``T2`` of Theorem 5.4 by the rejection-free (kinetic) engine, ``runs`` chains at once.

    ``T2 = inf{t : x_j^t not in conv{x_k^0 : sigma_k = sigma_j} + B(0, eps) for some j}``.
    Exact for every configuration (module docstring); one event per exit in the single-jump
    regime, where ``T2`` is geometric with ``-log q = frozen_escape_rate``.

    Parameters
    ----------
    x0 : array (n, d)
        The initial tokens (one configuration; the runs all start from it).
    sigma : int array (n,)
        Group labels: token ``j`` must stay within ``eps`` of the hull of its group's initial tokens.
    gamma : float in (0, 1]
        The step size (the library's one interval).
    beta : float >= 0
        Inverse temperature.
    eps : float > 0
        Radius of the exit region around each group's initial hull.
    runs : int >= 1
        Number of independent chains, advanced together.
    rng : int, SeedSequence or Generator, keyword-only
        Source of randomness (required).
    cap : float >= 1
        Runs whose exit would happen after step ``cap`` are censored at ``cap``.
    max_events : int >= 1
        Runs still inside after this many events are censored at their current step.
    watch : bool array (n,), optional
        The tokens whose exit counts (default: all).
    B : array (d, d), optional
        Key-query matrix of the logits ``beta <B x_i, x_j>``, symmetric positive definite (the
        setting of Theorem 5.4; default the identity). The engine's exactness does not depend on
        ``B``: only the weights of the picks change.

    Returns
    -------
    ExitSample with ``times`` (float, may exceed 2^53), ``censored`` and per-run ``events``.

    Examples
    --------
    Single-jump regime: ``T2`` is geometric with the closed-form rate.

    >>> v = regular_polygon(3)
    >>> x0, sigma = cluster_configuration(v, np.array([2, 2, 2]))
    >>> es = engine_exit_times(x0, sigma, 0.1, 3.0, 0.05, 20000, rng=1)
    >>> mean = 1 / -math.expm1(-frozen_escape_rate(v, [2, 2, 2], 3.0))
    >>> bool(abs(es.times.mean() / mean - 1) < 0.05), int(es.events.max())
    (True, 1)
    """
    x0, sigma, gamma, beta, eps = _check_common(x0, sigma, gamma, beta, eps)
    runs = V.positive_int("runs", runs)
    cap = V.real_scalar("cap", cap, low=1)
    max_events = V.positive_int("max_events", max_events)
    watch = _watch(watch, len(x0))
    Bm = _key_query(B, x0.shape[1])
    g = V.rng("rng", rng)
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
        d, L, same = move_log_odds(xa, beta, Bm)
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


def engine_state_at(x0: npt.ArrayLike, gamma: float, beta: float, t_final: int, runs: int, *,
                    rng: SeedLike, B: npt.ArrayLike | None = None) -> np.ndarray:
    """State of ``runs`` (SAP) chains at time ``t_final`` simulated by the rejection-free engine.

    For validation against plain stepping: the same law as ``t_final`` calls of ``sap_step``
    (with the key-query matrix ``B``, default the identity). Returns an array of shape (runs, n, d).

    Examples
    --------
    Every move is a convex combination of tokens, so the tokens never leave ``conv(x0)``;
    the first event happens at ``t >= 1``, so at ``t_final = 0`` every run is still ``x0``:

    >>> from attention_fw.geometry.polytope import distance_to_hull
    >>> v = regular_polygon(3)
    >>> xs = engine_state_at(v, 0.5, 1.0, 50, 8, rng=0)
    >>> xs.shape, bool(distance_to_hull(xs.reshape(-1, 2), v).max() < 1e-12)
    ((8, 3, 2), True)
    >>> bool(np.array_equal(engine_state_at(v, 0.5, 1.0, 0, 2, rng=0), np.stack([v, v])))
    True
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    gamma = V.step_size("gamma", gamma)
    beta = V.real_scalar("beta", beta, low=0)
    t_final = V.positive_int("t_final", t_final, minimum=0)
    runs = V.positive_int("runs", runs)
    Bm = _key_query(B, x0.shape[1])
    g = V.rng("rng", rng)
    x = np.broadcast_to(x0, (runs,) + x0.shape).copy()
    t = np.zeros(runs)
    act = np.arange(runs)
    while act.size:
        xa = x[act]
        d, L, same = move_log_odds(xa, beta, Bm)
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


def stepping_exit_times(x0: npt.ArrayLike, sigma: npt.ArrayLike, gamma: float, beta: float, eps: float, runs: int, *,
                        rng: SeedLike, cap: int = 10_000, watch: npt.ArrayLike | None = None,
                        B: npt.ArrayLike | None = None) -> ExitSample:
    """Exit time ``T2`` (Theorem 5.4) by plain step-by-step (SAP), ``runs`` chains at once.

    :func:`attention_fw.model.dynamics.simulate` of the chain (:class:`~attention_fw.model.dynamics.MarkovChain`,
    key-query matrix ``B``, default the identity) with the exit as its stop condition, so only the
    chains still inside are stepped; runs still inside after ``cap`` steps are censored at ``cap``.
    Cost: one step per unit of time. ``watch`` as in :func:`engine_exit_times`.

    Examples
    --------
    >>> x0, sigma = cluster_configuration(regular_polygon(3), [1, 1, 1])
    >>> es = stepping_exit_times(x0, sigma, 0.1, 1.0, 0.05, 50, rng=0, cap=1000)
    >>> es.n_censored, bool(es.times.min() >= 1)
    (0, True)
    """
    x0, sigma, gamma, beta, eps = _check_common(x0, sigma, gamma, beta, eps)
    runs = V.positive_int("runs", runs)
    cap = V.positive_int("cap", cap)
    watch = _watch(watch, len(x0))
    region = _ExitRegion(x0, sigma, eps, watch)
    x = np.broadcast_to(x0, (runs,) + x0.shape)
    Bm = _key_query(B, x0.shape[1])
    res = dynamics.simulate(x, dynamics.MarkovChain(gamma, beta, Bm, rng=rng), cap, stop=lambda x, t: region(x))
    exited = res.stopped > 0
    times = np.where(exited, res.stopped, cap).astype(float)
    return ExitSample(times=times, censored=~exited, events=np.zeros(0), cap=float(cap))


def excursion_paths(x0: npt.ArrayLike, sigma: npt.ArrayLike, gamma: float, beta: float, steps: int, *, runs: int = 0,
                    rng: SeedLike, every: int = 1) -> Result:
    """Largest distance of a token to its group's initial hull, ``max_j dist(x_j^t, conv{x_k^0})``,
    along (SA-beta) and along ``runs`` (SAP) chains from the same start, for ``t <= steps``.

    ``T2`` is the first time this exceeds ``eps``. Returns a Result with ``t`` (T',),
    ``sabeta`` (T',) and ``sap`` (runs, T'), sampled every ``every`` steps; both dynamics run
    through :func:`attention_fw.model.dynamics.simulate` (B = I).

    Examples
    --------
    >>> x0, sigma = near_vertex_configuration(regular_polygon(3), 2, 0.05, rng=7)
    >>> ex = excursion_paths(x0, sigma, 0.1, 3.0, 20, runs=4, rng=0, every=10)
    >>> ex.t.tolist(), ex.sap.shape, float(ex.sabeta[0])
    ([0, 10, 20], (4, 3), 0.0)
    """
    x0, sigma, gamma, beta, _ = _check_common(x0, sigma, gamma, beta, 1.0)
    steps = V.positive_int("steps", steps)
    runs = V.positive_int("runs", runs, minimum=0)
    every = V.positive_int("every", every)
    groups = [x0[sigma == k] for k in range(int(sigma.max()) + 1)]
    hd = [HullDistance(P) for P in groups]

    def dist(x, t):                               # (R, n, d) -> (R,)
        return np.max(np.stack([hd[k](x[:, sigma == k]).max(axis=1) for k in range(len(hd))], 1), axis=1)
    at = range(0, steps + 1, every)
    det = dynamics.simulate(x0[None], dynamics.Softmax(gamma, beta), steps,
                            [dynamics.FunctionRecorder("dist", dist, times=at)])
    out = Result(t=det.record_times["dist"], sabeta=det.records["dist"][:, 0], sap=np.zeros((0, len(at))))
    if runs:
        chains = dynamics.simulate(np.broadcast_to(x0, (runs,) + x0.shape), dynamics.MarkovChain(gamma, beta, rng=rng),
                                   steps, [dynamics.FunctionRecorder("dist", dist, times=at)])
        out.sap = chains.records["dist"].T
    return out


def zoom_paths(x0: npt.ArrayLike, sigma: npt.ArrayLike, gamma: float, beta: float, t_det: int, eps: float = 0.1, *,
               rng: SeedLike) -> tuple[np.ndarray, np.ndarray]:
    """Token paths from the same start: (SA-beta) for ``t_det`` steps and one (SAP) run until its exit
    (``T2`` with radius ``eps``, at most ``1.3 t_det`` steps); for the zoom of
    :func:`attention_fw.plot.metastability.fig_sap_vs_sabeta` (moved here from the plot module in
    0.3.0: plots run no dynamics). Returns ``(sabeta, sap)``, arrays of shape (steps + 1, n, d).

    Examples
    --------
    >>> x0, sigma = near_vertex_configuration(regular_polygon(3), 2, 0.05, rng=7)
    >>> det, sap = zoom_paths(x0, sigma, 0.1, 3.0, 10, rng=0)
    >>> det.shape, bool(np.array_equal(det[0], sap[0]))
    ((11, 9, 2), True)
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    sabeta = dynamics.simulate(x0, dynamics.Softmax(gamma, beta), t_det, trajectory=True)
    sap = dynamics.simulate(x0, dynamics.MarkovChain(gamma, beta, rng=rng), int(1.3 * t_det), trajectory=True,
                            stop=lambda x, t: bool(exit_mask(x, x0, sigma, eps)[0]))
    return sabeta.trajectory, sap.trajectory


# ----------------------------------------------------------------------------------------
# the exact mean of the single-jump exit time, and its slope in beta
# ----------------------------------------------------------------------------------------

def frozen_log_mean_exit(points: npt.ArrayLike, counts: npt.ArrayLike, beta: float) -> float:
    """``log E[T]`` of the geometric first-event time of a frozen configuration, exactly.

    ``E[T] = 1 / (1 - q)``, ``q = e^{-lambda}`` with ``lambda`` of :func:`frozen_escape_rate`;
    in the single-jump regime ``T`` is the exit time ``T2``. Computed in log space, so the
    value stays exact when ``lambda`` underflows (``beta = 1e6``): then
    ``log E[T] = -log lambda + lambda / 2 + O(lambda^2)``.

    Examples
    --------
    Equilateral triangle, one token per vertex: ``log E[T] = -log(1 - e^{-lambda})``, and at
    ``beta = 1e6``, where ``lambda = 6 e^{-3 beta / 2}`` underflows, ``log E[T] = 3 beta / 2 - log 6``:

    >>> v = regular_polygon(3)
    >>> math.isclose(
    ...     frozen_log_mean_exit(v, [1, 1, 1], 2.0),
    ...     -math.log(-math.expm1(-frozen_escape_rate(v, [1, 1, 1], 2.0))),
    ... )
    True
    >>> (
    ...     frozen_escape_rate(v, [1, 1, 1], 1e6),
    ...     math.isclose(frozen_log_mean_exit(v, [1, 1, 1], 1e6), 1.5e6 - math.log(6)),
    ... )
    (0.0, True)
    """
    c, x = _frozen_log_odds(points, counts, beta)
    # log(log1p(e^x)): x - e^x/2 (+ O(e^{2x})) far in the tail, direct otherwise
    with np.errstate(divide="ignore"):
        log_soft = np.where(x < -30, x - np.exp(np.minimum(x, 0)) / 2,
                            np.log(np.logaddexp(0.0, np.maximum(x, -30))))
    log_lam = float(np.logaddexp.reduce(np.log(c) + log_soft))
    lam = math.exp(log_lam) if log_lam < 700 else math.inf
    if lam > 1e-8:
        return -math.log(-math.expm1(-lam))
    return -log_lam + lam / 2


def frozen_mean_slope(points: npt.ArrayLike, counts: npt.ArrayLike, betas: npt.ArrayLike,
                      weights: npt.ArrayLike | None = None) -> float:
    """Weighted least-squares slope of ``beta -> log E[T]`` (:func:`frozen_log_mean_exit`).

    The exact counterpart of :func:`attention_fw.experiments.survival.fit_log_mean_slope` on the same grid: pass the weights of
    a Monte Carlo fit (its ``weights``) to compare like with like. Tends to ``c0`` for the
    regular kappa-gon (and the simplex) as the grid moves to large beta.

    Examples
    --------
    >>> v = regular_polygon(3)
    >>> # slope = c0 = 3/2
    >>> round(frozen_mean_slope(v, [1, 1, 1], [20.0, 25.0, 30.0]), 6), round(c0(v), 6)
    (1.5, 1.5)
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


def frozen_slope_windows(points: npt.ArrayLike, counts: npt.ArrayLike, starts: npt.ArrayLike, width: float,
                         num: int = 5) -> np.ndarray:
    """Unweighted slopes of :func:`frozen_mean_slope` on moving windows ``[s, s + width]``.

    Each window holds ``num`` equally spaced betas; returns one slope per start, shape (len(starts),).

    Examples
    --------
    The slope rises to ``c0 = 3/2`` (equilateral triangle) as the window moves to large beta:

    >>> w = frozen_slope_windows(regular_polygon(3), [1, 1, 1], [0.0, 5.0, 20.0], 5.0)
    >>> w.shape, bool(np.all(np.diff(w) > 0)), round(float(w[-1]), 6)
    ((3,), True, 1.5)
    """
    s = V.as_float_array("starts", starts, ndim=1)
    width = V.real_scalar("width", width, low=0, low_open=True)
    num = V.positive_int("num", num, minimum=2)
    if np.any(s < 0):
        raise ValueError("starts must be >= 0")
    return np.array([frozen_mean_slope(points, counts, np.linspace(a, a + width, num)) for a in s])


# ----------------------------------------------------------------------------------------
# tasks of the book's sweeps (module level and keyword-only, so that they pickle and cache)
# ----------------------------------------------------------------------------------------

def tokens_per_vertex(n: int, kappa: int) -> np.ndarray:
    """Split ``n >= kappa`` tokens over kappa vertices as evenly as possible (first ones get more).

    Examples
    --------
    >>> tokens_per_vertex(8, 3).tolist()
    [3, 3, 2]
    """
    n = V.positive_int("n", n)
    kappa = V.positive_int("kappa", kappa)
    if n < kappa:
        raise ValueError(f"n must be >= kappa = {kappa}, got {n}")
    return np.array([n // kappa + (i < n % kappa) for i in range(kappa)])


def exit_time_task(*, beta: float, rng: int, n: int = 6, kappa: int = 3, gamma: float = 0.1,
                   eps: float = 0.05, runs: int = 10_000, cap: float = 1e300, method: str = "engine",
                   max_events: int = 10_000) -> Result:
    """Exit times ``T2`` (Theorem 5.4) of ``runs`` (SAP) chains from clusters at the vertices of
    the regular kappa-gon (n tokens, split evenly), by the engine or by plain stepping.

    Returns a Result with the arrays ``times``, ``censored`` and the parameters, ``c0`` and
    the exact single-jump mean ``E_T2_frozen = 1/(1 - q)``.

    Examples
    --------
    The defaults are in the single-jump regime (``eps < gamma |v_a - v_b|``): every run exits
    at its first event, so none is censored, and ``E_T2_frozen`` is the closed form:

    >>> r = exit_time_task(beta=1.0, rng=0, runs=50)
    >>> print(*sorted(r))
    E_T2_frozen beta c0 cap censored eps gamma kappa method n rng times
    >>> r.times.shape, int(r.censored.sum()), round(r.c0, 6)
    ((50,), 0, 1.5)
    >>> math.isclose(
    ...     r.E_T2_frozen,
    ...     1 / -math.expm1(-frozen_escape_rate(regular_polygon(3), [2, 2, 2], 1.0)),
    ... )
    True
    """
    v = regular_polygon(kappa)
    counts = tokens_per_vertex(n, kappa)
    x0, sigma = cluster_configuration(v, counts)
    if method == "engine":
        es = engine_exit_times(x0, sigma, gamma, beta, eps, runs, rng=rng, cap=cap, max_events=max_events)
    elif method == "stepping":
        es = stepping_exit_times(x0, sigma, gamma, beta, eps, runs, rng=rng, cap=int(min(cap, 10**9)))
    else:
        raise ValueError(f"method must be 'engine' or 'stepping', got {method!r}")
    lam = frozen_escape_rate(v, counts, beta)
    return Result(beta=float(beta), rng=rng, n=n, kappa=kappa, gamma=gamma, eps=eps,
                  method=method, times=es.times, censored=es.censored, cap=es.cap,
                  c0=c0(v), E_T2_frozen=(1.0 / -math.expm1(-lam)) if lam > 0 else math.inf)


def e6_task(*, beta: float, rng: int, per_vertex: int = 2, radius: float = 0.05, config_rng: int = 7,
            gamma: float = 0.1, eps: float = 0.1, runs: int = 300, cap: int = 10_000,
            sabeta_cap: int = 10**6) -> Result:
    """Erratum E6 of the book: from one configuration "after phase 1" (equilateral triangle,
    ``per_vertex`` tokens at distance ``radius`` from each vertex), the exit time ``T2`` of
    ``runs`` (SAP) chains (plain stepping, censored at ``cap``) and of the deterministic (SA-beta).

    Returns a Result with ``times``, ``censored`` (runs,) and ``cap`` of the chains,
    ``sabeta_T`` (None if no exit by ``sabeta_cap``) and ``sabeta_cap``, ``beta``, and the
    configuration ``x0`` (kappa (1 + per_vertex), 2) with its labels ``sigma``.

    Examples
    --------
    >>> r = e6_task(beta=3.0, rng=0, runs=5, cap=200, sabeta_cap=100)
    >>> sorted(r)
    ['beta', 'cap', 'censored', 'sabeta_T', 'sabeta_cap', 'sigma', 'times', 'x0']
    >>> # 3 (1 + 2) tokens; 1 <= T2 <= cap
    >>> r.x0.shape, r.times.shape, bool(np.all((1 <= r.times) & (r.times <= r.cap)))
    ((9, 2), (5,), True)
    """
    v = points_on_circle()
    x0, sigma = near_vertex_configuration(v, per_vertex, radius, rng=config_rng)
    es = stepping_exit_times(x0, sigma, gamma, beta, eps, runs, rng=rng, cap=cap)
    det = sabeta_exit_times(x0, sigma, gamma, beta, eps, cap=sabeta_cap)
    return Result(beta=float(beta), times=es.times, censored=es.censored, cap=cap,
                  sabeta_T=None if det.censored[0] else int(det.times[0]), sabeta_cap=sabeta_cap, x0=x0, sigma=sigma)
