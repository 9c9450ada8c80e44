"""Tokens on the circle: the sphere model of the mean-field works, with the force as an exact Fourier sum.

The model (Geshkovski-Letrouit-Polyanskiy-Rigollet's unnormalised self-attention on the sphere,
as stepped by Bruno-Pasqualotto-Agazzi 2025 on the circle): tokens ``x_i = (cos t_i, sin t_i)``
follow the projection of ``(1/N) sum_j e^{beta <x_i, x_j>} x_j`` on the tangent line at ``x_i``.
With ``e_i = (-sin t_i, cos t_i)``, ``<e_i, x_j> = sin(t_j - t_i)``, so

    d t_i / dt = -(1/N) sum_j e^{beta cos(t_i - t_j)} sin(t_i - t_j),

the sign that attracts (a token moves towards its neighbours). Differentiating the generating
function ``e^{beta cos p} = I_0(beta) + 2 sum_{k >= 1} I_k(beta) cos(k p)`` in ``p`` gives

    e^{beta cos p} sin p = (2 / beta) sum_{k >= 1} k I_k(beta) sin(k p),

so with ``S_k = sum_j e^{i k t_j}`` the force is
``-(2 / (beta N)) sum_k k I_k(beta) Im(e^{i k t_i} conj(S_k))``: ``O(N K)`` for ``K`` modes.

Truncation bound (proved here). From the series ``I_k(b) = sum_m (b/2)^{2m+k} / (m! (m+k)!)`` and
``(m+k)! >= k! (k+1)^m``, ``I_k(b) <= (b/2)^k / k! e^{b^2 / (4 (k+1))}``. Hence for ``K + 1 > b / 2``
the modes above ``K`` change every ``d t_i / dt`` by at most

    E(K) = (2/b) sum_{k > K} k I_k(b) <= (b/2)^K / K! e^{b^2 / (4 (K+2))} / (1 - b / (2 (K+1))),

(``k (b/2)^k / k! = (b/2) (b/2)^{k-1} / (k-1)!``, a geometric tail of ratio ``<= b / (2 (K+1))``).
:func:`modes` picks the smallest ``K`` with ``E(K) <= rtol e^b`` (``e^b`` bounds the kernel).

The linear growth rate of the mode ``k`` of the mean-field equation linearised at the uniform
density is ``k^2 I_k(beta) / beta`` (:func:`growth_rates`): from uniform data the mode maximising
``k^2 I_k(beta)`` grows fastest, the number of clusters it predicts.
"""
from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln, ive

from .. import _validate as chk

__all__ = ["tail_bound", "modes", "growth_rates", "predicted_clusters", "force", "force_dense", "simulate",
           "count_clusters", "s2_tail_bound", "s2_order", "force_s2", "force_s2_dense", "step_s2",
           "count_clusters_s2"]


def _beta(beta) -> float:
    b = chk.real_scalar("beta", beta, low=0.0, low_open=True)
    if b > 700.0:
        raise ValueError(f"beta must be at most 700 (the kernel e^beta overflows a double beyond), got {beta!r}")
    return b


def tail_bound(beta: float, K: int) -> float:
    """The proved bound ``E(K)`` on the change of every ``d t_i/dt`` by the modes ``k > K`` (module docstring).

    ``inf`` when ``K + 1 <= beta / 2`` (the bound needs a geometric tail).

    Examples
    --------
    >>> b = 5.0
    >>> exact = 2 / b * sum(k * float(ive(k, b)) * math.exp(b) for k in range(21, 200))
    >>> exact <= tail_bound(b, 20)
    True
    """
    b = _beta(beta)
    K = chk.positive_int("K", K, minimum=0)
    ratio = b / (2.0 * (K + 1))
    if ratio >= 1.0:
        return math.inf
    log_e = K * math.log(b / 2.0) - math.lgamma(K + 1) + b * b / (4.0 * (K + 2)) - math.log1p(-ratio)
    return math.exp(min(log_e, 700.0))


def modes(beta: float, rtol: float = 1e-13) -> int:
    """The smallest ``K`` whose proved tail bound is at most ``rtol e^beta`` (``rtol`` relative to the kernel's maximum).

    Examples
    --------
    >>> modes(5.0), modes(1.0), modes(50.0)
    (21, 13, 56)
    """
    b = _beta(beta)
    r = chk.real_scalar("rtol", rtol, low=0.0, low_open=True)
    K = int(b / 2.0)
    while tail_bound(b, K) > r * math.exp(b):
        K += 1
    return K


def growth_rates(beta: float, kmax: int = 200) -> np.ndarray:
    """``k^2 I_k(beta) / beta``, ``k`` from 1 to ``kmax``: growth rates of the modes of the linearised mean-field equation."""
    b = _beta(beta)
    k = np.arange(1, chk.positive_int("kmax", kmax) + 1)
    return k * k * ive(k, b) * math.exp(b) / b


def predicted_clusters(beta: float) -> int:
    """The mode ``k`` maximising ``k^2 I_k(beta)``.

    Examples
    --------
    >>> [predicted_clusters(b) for b in (1.0, 5.0, 20.0)]
    [1, 3, 6]
    """
    b = _beta(beta)
    k = np.arange(1, int(4 * math.sqrt(b)) + 8)
    return int(k[np.argmax(k * k * ive(k, b))])


def _weights(b, K, N):
    k = np.arange(1, K + 1)
    return -2.0 * k * ive(k, b) * math.exp(b) / (b * N)


def _kernel():
    from ._kernels import jit_decorators
    decorators = jit_decorators()
    if decorators is None:
        return None
    _, jit_sum = decorators

    @jit_sum
    def force_modes(c1, s1, w, out, pc, ps):
        N = c1.shape[0]
        K = w.shape[0]
        for j in range(N):
            out[j] = 0.0
            pc[j] = c1[j]
            ps[j] = s1[j]
        for k in range(K):
            if k > 0:
                for j in range(N):
                    a = pc[j] * c1[j] - ps[j] * s1[j]
                    ps[j] = ps[j] * c1[j] + pc[j] * s1[j]
                    pc[j] = a
            C = 0.0
            S = 0.0
            for j in range(N):
                C += pc[j]
                S += ps[j]
            wC = w[k] * C
            wS = w[k] * S
            for j in range(N):
                out[j] += ps[j] * wC - pc[j] * wS

    @jit_sum
    def run(theta, w, dt, steps, resync):
        N = theta.shape[0]
        c1 = np.cos(theta)
        s1 = np.sin(theta)
        f = np.empty(N)
        pc = np.empty(N)
        ps = np.empty(N)
        for t in range(steps):
            force_modes(c1, s1, w, f, pc, ps)
            if (t + 1) % resync == 0:
                for j in range(N):
                    theta[j] += dt * f[j]
                    c1[j] = np.cos(theta[j])
                    s1[j] = np.sin(theta[j])
            else:
                for j in range(N):
                    d = dt * f[j]
                    theta[j] += d
                    # rotate (cos, sin) by d: Taylor to order 9, exact to rounding for |d| < 0.05
                    d2 = d * d
                    cd = 1.0 - d2 / 2.0 * (1.0 - d2 / 12.0 * (1.0 - d2 / 30.0 * (1.0 - d2 / 56.0)))
                    sd = d * (1.0 - d2 / 6.0 * (1.0 - d2 / 20.0 * (1.0 - d2 / 42.0 * (1.0 - d2 / 72.0))))
                    a = c1[j] * cd - s1[j] * sd
                    s1[j] = s1[j] * cd + c1[j] * sd
                    c1[j] = a
        return theta

    return force_modes, run


_KERNEL = None


def _compiled():
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = _kernel()
        if _KERNEL is None:
            raise RuntimeError("the circle model needs numba (pip install numba)")
    return _KERNEL


def _angles(theta) -> np.ndarray:
    t = chk.as_float_array("theta", theta, min_ndim=1, max_ndim=1)
    chk.require_finite("theta", t)
    if t.size == 0:
        raise ValueError("theta must hold at least one angle")
    return np.ascontiguousarray(t, dtype=float)


def force(theta: npt.ArrayLike, beta: float, K: int | None = None, *, rtol: float = 1e-13) -> np.ndarray:
    """``d t_i / dt`` from the first ``K`` Fourier modes (``K = modes(beta, rtol)`` unless given); ``O(N K)``.

    Its distance to the exact force is at most :func:`tail_bound` ``(beta, K)`` plus rounding.

    Examples
    --------
    >>> t = np.random.default_rng(0).uniform(0, 2 * np.pi, 500)
    >>> bool(np.abs(force(t, 5.0) - force_dense(t, 5.0)).max() < 1e-10)
    True
    """
    t = _angles(theta)
    b = _beta(beta)
    K = modes(b, rtol) if K is None else chk.positive_int("K", K)
    out = np.empty_like(t)
    _compiled()[0](np.cos(t), np.sin(t), _weights(b, K, t.size), out, np.empty_like(t), np.empty_like(t))
    return out


def force_dense(theta: npt.ArrayLike, beta: float, *, block: int = 2048) -> np.ndarray:
    """The reference: ``-(1/N) sum_j e^{beta cos(t_i - t_j)} sin(t_i - t_j)`` summed densely, in row blocks (numpy)."""
    t = _angles(theta)
    b = _beta(beta)
    c, s = np.cos(t), np.sin(t)
    out = np.empty_like(t)
    for a in range(0, t.size, block):
        ca, sa = c[a:a + block, None], s[a:a + block, None]
        cos_d = ca * c + sa * s          # cos(t_i - t_j)
        sin_d = sa * c - ca * s          # sin(t_i - t_j)
        out[a:a + block] = -(np.exp(b * cos_d) * sin_d).mean(axis=1)
    return out


def simulate(theta0: npt.ArrayLike, beta: float, dt: float, steps: int, K: int | None = None, *,
             rtol: float = 1e-13, resync: int = 64) -> np.ndarray:
    """Forward Euler ``t_i <- t_i + dt F_i`` for ``steps`` steps with the ``K``-mode force; returns the final angles.

    ``(cos t_i, sin t_i)`` are carried by exact rotations between steps and recomputed from ``t_i``
    every ``resync`` steps (no drift beyond rounding).

    Examples
    --------
    >>> t0 = np.random.default_rng(1).uniform(0, 2 * np.pi, 300)
    >>> t = t0.copy()
    >>> for _ in range(20):
    ...     t = t + 1e-3 * force_dense(t, 5.0)
    >>> bool(np.abs(simulate(t0, 5.0, 1e-3, 20) - t).max() < 1e-12)
    True
    """
    t = _angles(theta0).copy()
    b = _beta(beta)
    dt = chk.real_scalar("dt", dt, low=0.0, low_open=True)
    steps = chk.positive_int("steps", steps, minimum=0)
    resync = chk.positive_int("resync", resync)
    K = modes(b, rtol) if K is None else chk.positive_int("K", K)
    return _compiled()[1](t, _weights(b, K, t.size), dt, steps, resync)


def count_clusters(theta: npt.ArrayLike, gap: float = 0.05, min_fraction: float = 0.01) -> int:
    """Number of groups of angles separated by circular gaps wider than ``gap`` that hold at least
    ``min_fraction`` of the tokens.

    Examples
    --------
    >>> count_clusters(np.r_[np.zeros(50), np.full(50, 2.0), np.full(50, 4.0)])
    3
    """
    t = np.sort(np.mod(_angles(theta), 2 * np.pi))
    gaps = np.diff(np.r_[t, t[0] + 2 * np.pi])
    cuts = np.flatnonzero(gaps > gap)
    if cuts.size == 0:
        return 1
    sizes = np.diff(np.r_[cuts, cuts[0] + t.size])
    return int((sizes >= min_fraction * t.size).sum())


# ----------------------------------------------------------------------------- the sphere S^2
# Tokens x_i on the unit sphere of R^3 follow the projection on the tangent plane at x_i of
# (1/N) sum_j e^{beta <x_i, x_j>} x_j. The fast force (:func:`force_s2`) expands the kernel in its
# Taylor series, e^{beta s} = sum_k beta^k s^k / k!, and each power by the multinomial theorem,
# <x, y>^k = sum_{|a| = k} (k! / a!) x^a y^a, so that
#
#     sum_j e^{beta <x, x_j>} x_j = sum_{k <= K} beta^k / k! sum_{|a| = k} (k! / a!) x^a M_a,
#     M_a = sum_j x_j^a x_j  (a 3-vector per multi-index),
#
# O(N K^3 / 6) for all tokens instead of O(N^2). Error (proved): on the sphere |<x, y>| <= 1, so the
# terms k > K change the sum (before the 1/N mean and the projection, both contractions) by at most
# sum_{k > K} beta^k / k! <= beta^{K+1} / (K+1)! / (1 - beta / (K+2)) for K + 2 > beta
# (:func:`s2_tail_bound`); and sum_{|a| = k} (k!/a!) |x^a| |y^a| = (sum_i |x_i| |y_i|)^k <= 1
# (Cauchy-Schwarz), so the terms summed have absolute values adding to at most e^beta: the rounding
# is a few ulps of e^beta per term. Both are stated relative to e^beta, the bound of the kernel, as
# for the circle.


def _multi_indices(k: int) -> np.ndarray:
    """The multi-indices a = (a0, a1, a2) with |a| = k, (k+1)(k+2)/2 rows."""
    return np.array([(i, j, k - i - j) for i in range(k, -1, -1) for j in range(k - i, -1, -1)], dtype=np.int64)


def s2_tail_bound(beta: float, K: int) -> float:
    """``sum_{k > K} beta^k / k! <= beta^{K+1} / (K+1)! / (1 - beta/(K+2))``: the proved bound on the change of
    ``sum_j e^{beta <x_i, x_j>} x_j / N`` (hence of the force) by the Taylor terms above ``K``; ``inf`` when
    ``K + 2 <= beta``.

    Examples
    --------
    >>> b, K = 3.0, 20
    >>> exact = sum(b**k / math.factorial(k) for k in range(K + 1, 80))
    >>> bool(exact <= s2_tail_bound(b, K) <= 1.2 * exact)
    True
    """
    b = _beta(beta)
    K = chk.positive_int("K", K, minimum=0)
    if K + 2 <= b:
        return math.inf
    return math.exp((K + 1) * math.log(b) - math.lgamma(K + 2)) / (1 - b / (K + 2))


def s2_order(beta: float, rtol: float = 1e-13) -> int:
    """The smallest ``K`` with :func:`s2_tail_bound` ``(beta, K) <= rtol e^beta``."""
    b = _beta(beta)
    rtol = chk.real_scalar("rtol", rtol, low=0.0, low_open=True)
    K = max(int(b), 0)
    while s2_tail_bound(b, K) > rtol * math.exp(b):
        K += 1
    return K


def _sphere_points(x) -> np.ndarray:
    X = chk.as_float_array("x", x, ndim=2, last_dim=3)
    r = np.linalg.norm(X, axis=1)
    if not np.all(np.abs(r - 1) <= 1e-12):
        raise ValueError("x must be points of the unit sphere (|x_i| = 1 within 1e-12)")
    return X


def _tangent(X, G):
    return G - np.einsum("nd,nd->n", G, X)[:, None] * X


def force_s2_dense(x: npt.ArrayLike, beta: float, *, block: int = 2048) -> np.ndarray:
    """The reference: ``P_{x_i} (1/N) sum_j e^{beta <x_i, x_j>} x_j`` summed densely in row blocks (numpy)."""
    X = _sphere_points(x)
    b = _beta(beta)
    out = np.empty_like(X)
    for a in range(0, len(X), block):
        out[a:a + block] = np.exp(b * (X[a:a + block] @ X.T)) @ X / len(X)
    return _tangent(X, out)


def force_s2(x: npt.ArrayLike, beta: float, K: int | None = None, *, rtol: float = 1e-13,
             method: str = "auto") -> np.ndarray:
    """``P_{x_i} (1/N) sum_j e^{beta <x_i, x_j>} x_j`` for tokens on the unit sphere of R^3 (rows of ``x``).

    ``method="taylor"``: the expansion above with ``K = s2_order(beta, rtol)`` terms unless given, ``O(N K^3/6)``,
    within ``s2_tail_bound(beta, K)`` plus rounding (a few ulps of ``e^beta`` per term) of the exact force;
    ``"dense"``: :func:`force_s2_dense`; ``"auto"``: the Taylor sum where its number of terms is below ``N``
    (cheaper than the dense sum), else dense.

    Examples
    --------
    >>> g = np.random.default_rng(0).normal(size=(400, 3))
    >>> x = g / np.linalg.norm(g, axis=1, keepdims=True)
    >>> F = force_s2(x, 4.0, method="taylor")
    >>> bool(np.abs(F - force_s2_dense(x, 4.0)).max() <= 1e-11 * math.exp(4.0))
    True
    """
    X = _sphere_points(x)
    b = _beta(beta)
    K = s2_order(b, rtol) if K is None else chk.positive_int("K", K, minimum=0)
    terms = (K + 1) * (K + 2) * (K + 3) // 6
    if method == "auto":
        method = "taylor" if terms < len(X) else "dense"
    if method == "dense":
        return force_s2_dense(X, b)
    if method != "taylor":
        raise ValueError(f"method must be 'auto', 'taylor' or 'dense', got {method!r}")
    N = len(X)
    acc = np.zeros_like(X)
    P = np.ones((N, 1))                      # the monomials x^a of degree k, one column per multi-index
    logf = 0.0                               # log(beta^k / k!)
    for k in range(K + 1):                   # a loop over degrees (K of them), not over tokens
        idx = _multi_indices(k)
        if k:
            # x^a = x^(a - e_d) x_d for the first coordinate d with a_d > 0; in degree k - 1 the multi-index
            # (i, j, .) sits at row (k-1-i)(k-i)/2 + (k-1-i-j) of _multi_indices(k - 1)
            d = np.argmax(idx > 0, axis=1)
            prev = idx.copy()
            prev[np.arange(len(idx)), d] -= 1
            i, j = prev[:, 0], prev[:, 1]
            P = P[:, (k - 1 - i) * (k - i) // 2 + (k - 1 - i - j)] * X[:, d]
            logf += math.log(b) - math.log(k)
        coef = np.exp(logf + gammaln(k + 1) - gammaln(idx + 1).sum(axis=1))    # beta^k / k! * k! / a!
        acc += (P * coef) @ (P.T @ X)        # M_a = sum_j x_j^a x_j, (terms, 3)
    return _tangent(X, acc / N)


def step_s2(x: npt.ArrayLike, beta: float, dt: float, **kw) -> np.ndarray:
    """One forward Euler step on the sphere, ``x_i <- (x_i + dt F_i) / |x_i + dt F_i|`` with ``F = force_s2(x, beta,
    **kw)`` (the normalisation is the retraction back to the sphere; it changes the step by ``O(dt^2)``)."""
    X = _sphere_points(x)
    dt = chk.real_scalar("dt", dt, low=0.0, low_open=True)
    y = X + dt * force_s2(X, beta, **kw)
    return y / np.linalg.norm(y, axis=1, keepdims=True)


def count_clusters_s2(x: npt.ArrayLike, gap: float = 0.05, min_fraction: float = 0.01) -> int:
    """Number of groups of points of the sphere, linked when closer than ``gap`` (chordal distance; the connected
    components of that graph, by a k-d tree in ``O(N log N)``), that hold at least ``min_fraction`` of the points.

    Examples
    --------
    >>> caps = np.repeat(np.eye(3), 40, axis=0)
    >>> count_clusters_s2(caps)
    3
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree
    X = _sphere_points(x)
    pairs = cKDTree(X).query_pairs(float(gap), output_type="ndarray")
    N = len(X)
    G = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(N, N))
    _, lab = connected_components(G, directed=False)
    return int((np.bincount(lab) >= min_fraction * N).sum())

