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
from scipy.special import ive

from .. import _validate as chk

__all__ = ["tail_bound", "modes", "growth_rates", "predicted_clusters", "force", "force_dense", "simulate",
           "count_clusters"]


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
