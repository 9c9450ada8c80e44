"""Is the deterministic softmax dynamics (SA-beta) metastable, and how fast does it leave its clusters?

Theorems 5.2 and 5.4 of the paper are proved for the Markov chain (SAP) only. The process a
transformer computes is the deterministic update (SA-beta)

    x_i^{t+1} = x_i^t + gamma (sum_j A_ij(x^t) x_j^t - x_i^t),   A_ij ∝ m_j exp(beta <B x_i, x_j>)

(self-interaction included; the masses ``m_j`` are 1 for tokens, the cluster sizes in the
reduced model). Nothing about its exit times is proved; this module computes them.

* :func:`sabeta_exit_times`: the exit time ``T2`` of Theorem 5.4 for (SA-beta), by exact
  stepping in a compiled kernel, batched over configurations, betas, gammas, key-query matrices
  (one system per core, ``prange``): the first ``t >= 1`` at which some token lies farther than
  ``eps`` from ``conv{x_k^0 : sigma_k = sigma_i}``. No approximation: every step is the full
  softmax update; the exit test is an exact distance to each group's hull (see below).
* :func:`settled_points` and :func:`reduced_exit_times`: the reduced model (its derivation,
  assumptions and leading-order error are in the docstring of :func:`reduced_exit_times`).
* :func:`fit_rate`: the slope of ``log T2`` against ``beta`` with its interval;
  :func:`coupling_distances`: how far one (SAP) path, and the mean of many, are from (SA-beta).

Exact hull test. For each group the hull of its initial tokens is stored as half-spaces
(when it is full-dimensional) and as boundary primitives (points, segments, triangles whose
union is the boundary, or the whole hull when it is lower-dimensional). For a token ``x``:
if some half-space ``<a, x> <= b`` (``|a| = 1``) is violated by more than ``eps``, the distance
exceeds ``eps`` (a lower bound: exit); if none is violated, ``x`` is inside (distance 0);
otherwise the distance is the minimum of the exact distances to the primitives (for a point
outside a convex polytope the nearest point lies on its boundary). Dimensions 1, 2 and 3.
"""
from __future__ import annotations

import math
from typing import Any
import os

import numpy as np
from scipy import spatial, stats

from .. import _validate as V
from ..geometry.polytope import regular_polygon, regular_simplex
from ..model import dynamics
from ..results import Result
from .exit_times import engine_exit_times, near_vertex_configuration
from .metastability import theorem54_hypotheses
from .survival import fit_exponential_censored

__all__ = ["hull_primitives", "sabeta_exit_times", "settled_points", "reduced_exit_times",
           "leading_order_exit", "fit_rate", "fit_chain_rate", "coupling_distances", "FAMILY", "family_configuration",
           "beta_grid", "family_task"]

_KIND_POINT, _KIND_SEGMENT, _KIND_TRIANGLE = 1, 2, 3


# ----------------------------------------------------------------------------------------
# the hull of one group: half-spaces and boundary primitives
# ----------------------------------------------------------------------------------------

def hull_primitives(points) -> Result:
    """Exact description of ``conv(points)`` ((m, d), d <= 3) for distance tests.

    Returns a Result with ``halfspaces`` (h, d + 1) rows ``(a, b)`` with ``|a| = 1`` and
    ``conv = {<a, x> <= b}`` (h = 0 when the hull is not full-dimensional), ``kinds`` (p,)
    (1 point, 2 segment, 3 triangle) and ``corners`` (p, 3, d) (unused corners repeat the
    first), such that ``dist(x, conv) = 0`` inside and ``min_p dist(x, primitive_p)``
    outside, and ``dim`` (the affine dimension).

    Examples
    --------
    A square in the plane: 4 half-spaces and its 4 edges; three collinear points: one segment;
    a triangle in R^3 (lower-dimensional): the triangle itself, no half-space.

    >>> sq = hull_primitives([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]])
    >>> sq.dim, sq.halfspaces.shape, sq.kinds.tolist()
    (2, (4, 3), [2, 2, 2, 2])
    >>> (
    ...     hull_primitives([[0, 0], [1, 1], [2, 2]]).kinds.tolist(),
    ...     hull_primitives([[1, 2]]).kinds.tolist(),
    ... )
    ([2], [1])
    >>> t3 = hull_primitives([[0, 0, 0], [1, 0, 0], [0, 1, 0]])
    >>> t3.dim, t3.halfspaces.shape[0], t3.kinds.tolist()
    (2, 0, [3])
    """
    P = np.unique(V.as_float_array("points", points, ndim=2), axis=0)
    m, d = P.shape
    if d > 3:
        raise ValueError(f"points must be in dimension 1, 2 or 3, got {d}")
    scale = max(float(np.abs(P).max()), 1e-300)
    Q = P - P[0]
    sv = np.linalg.svd(Q, compute_uv=False) if m > 1 else np.zeros(1)
    dim = int(np.sum(sv > 1e-10 * scale))
    hs = np.zeros((0, d + 1))
    corners, kinds = [], []
    if dim == 0:
        kinds, corners = [_KIND_POINT], [[P[0]] * 3]
    elif dim == 1:
        u = np.linalg.svd(Q)[2][0]
        s = Q @ u
        a, b = P[np.argmin(s)], P[np.argmax(s)]
        kinds, corners = [_KIND_SEGMENT], [[a, b, a]]
    elif dim == d:                                   # full-dimensional: half-spaces and the boundary
        hull = spatial.ConvexHull(P)
        eq = hull.equations
        hs = np.c_[eq[:, :-1], -eq[:, -1]]
        if d == 2:
            for i, j in hull.simplices:
                kinds.append(_KIND_SEGMENT)
                corners.append([P[i], P[j], P[i]])
        else:
            for tri in hull.simplices:
                kinds.append(_KIND_TRIANGLE)
                corners.append(list(P[tri]))
    else:                                            # a planar group in R^3: fan of triangles
        basis = np.linalg.svd(Q)[2][:2]
        hull = spatial.ConvexHull(Q @ basis.T)
        ring = P[hull.vertices]
        for k in range(1, len(ring) - 1):
            kinds.append(_KIND_TRIANGLE)
            corners.append([ring[0], ring[k], ring[k + 1]])
    return Result(halfspaces=np.asarray(hs, float), kinds=np.asarray(kinds, np.int64),
                  corners=np.asarray(corners, float).reshape(len(kinds), 3, d), dim=dim)


# ----------------------------------------------------------------------------------------
# the compiled kernel
# ----------------------------------------------------------------------------------------

_numba: Any
try:                                     # compiled lazily, at the first call, and cached on disk
    import numba as _numba
except ImportError:                      # pragma: no cover - numba is pinned in requirements.txt
    _numba = None
prange: Any
if _numba is not None and os.environ.get("ATTENTION_FW_KERNELS", "numba").strip().lower() != "numpy":
    jit = _numba.njit(cache=True, nogil=True, error_model="numpy")
    jit_sum = _numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc", "nsz", "contract"})
    pjit = _numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
    jit_exp = _numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
    prange = _numba.prange
else:                                    # plain Python: same numbers, for small cases only
    def jit(f):
        return f
    pjit = jit_sum = jit_exp = jit
    prange = range


def _kernel():
    """The kernel (compiled with numba, one system per thread, unless ``ATTENTION_FW_KERNELS=numpy``)."""
    return _run


@jit
def _seg_d2(p, a, b, D):
    """Squared distance from p to the segment [a, b] (D coordinates)."""
    ab2 = 0.0
    t = 0.0
    for k in range(D):
        e = b[k] - a[k]
        ab2 += e * e
        t += (p[k] - a[k]) * e
    if ab2 > 0.0:
        t = min(max(t / ab2, 0.0), 1.0)
    else:
        t = 0.0
    s = 0.0
    for k in range(D):
        w = p[k] - a[k] - t * (b[k] - a[k])
        s += w * w
    return s


@jit
def _tri_d2(p, a, b, c, D):
    """Squared distance from p to the (non-degenerate) triangle abc."""
    d11 = 0.0
    d12 = 0.0
    d22 = 0.0
    w1 = 0.0
    w2 = 0.0
    for k in range(D):
        e1 = b[k] - a[k]
        e2 = c[k] - a[k]
        w = p[k] - a[k]
        d11 += e1 * e1
        d12 += e1 * e2
        d22 += e2 * e2
        w1 += w * e1
        w2 += w * e2
    den = d11 * d22 - d12 * d12
    u = (d22 * w1 - d12 * w2) / den
    v = (d11 * w2 - d12 * w1) / den
    if u >= 0.0 and v >= 0.0 and u + v <= 1.0:
        s = 0.0
        for k in range(D):
            w = p[k] - a[k] - u * (b[k] - a[k]) - v * (c[k] - a[k])
            s += w * w
        return s
    return min(_seg_d2(p, a, b, D), min(_seg_d2(p, b, c, D), _seg_d2(p, a, c, D)))


@jit
def _dist2(p, g, eps, hs_lo, hs_hi, HS, pr_lo, pr_hi, PK, PC, D):
    """Squared distance from p to the hull of group g, exact when it is at most ``eps^2``; a number
    above ``eps^2`` (a lower bound of it) otherwise."""
    if hs_hi[g] > hs_lo[g]:
        worst = -np.inf
        for f in range(hs_lo[g], hs_hi[g]):
            s = -HS[f, D]
            for k in range(D):
                s += HS[f, k] * p[k]
            if s > worst:
                worst = s
        if worst <= 0.0:
            return 0.0
        if worst > eps:
            return worst * worst
    best = np.inf
    for q in range(pr_lo[g], pr_hi[g]):
        kind = PK[q]
        if kind == 1:
            s = 0.0
            for k in range(D):
                w = p[k] - PC[q, 0, k]
                s += w * w
        elif kind == 2:
            s = _seg_d2(p, PC[q, 0], PC[q, 1], D)
        else:
            s = _tri_d2(p, PC[q, 0], PC[q, 1], PC[q, 2], D)
        if s < best:
            best = s
    return best


# exp(r) = sum_k r^k / k! on |r| <= log(2) / 2: the degree-13 Taylor remainder is below 4e-18
_EXP_C = tuple(1.0 / math.factorial(k) for k in range(14))
_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238           # Cody-Waite split of log(2): k * _LN2_HI is exact for |k| < 2^20
_LN2_LO = 1.9082149292705877e-10
_ROUND = 6755399441055744.0            # 1.5 * 2^52: t + _ROUND - _ROUND rounds t to an integer (|t| < 2^51)
_ROUND_BITS = int(np.float64(_ROUND).view(np.int64))


@jit_exp
def _exp_row(a, out, bits, scale, n):
    """``out[:n] = exp(a[:n])`` for ``a <= 709``, in loops LLVM vectorises (numba's scalar ``exp``
    is a library call per entry, and numpy's ``exp`` on float64 is one too on CPUs without AVX-512).

    ``exp(a) = 2^k exp(r)``, ``k = round(a / log 2)``, ``r = a - k log 2`` (Cody-Waite), ``exp(r)``
    by its Taylor polynomial of degree 13 (Horner, fused multiply-adds where the CPU has them).
    ``k`` is rounded by adding and subtracting ``1.5 * 2^52`` (no float-to-integer conversion, which
    AVX2 cannot vectorise), and ``2^k`` is written into the exponent bits from the integer bits of
    that sum (``scale`` is a float64 view of the int64 scratch ``bits``). Accurate to about 1 ulp
    (tested against numpy's ``exp``); arguments below -708 (where ``2^k`` would be subnormal) go
    through ``math.exp``.
    """
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13 = _EXP_C
    for j in range(n):
        x = max(a[j], -708.0)
        t = x * _LOG2E + _ROUND
        k = t - _ROUND
        r = (x - k * _LN2_HI) - k * _LN2_LO
        p = c13
        p = p * r + c12
        p = p * r + c11
        p = p * r + c10
        p = p * r + c9
        p = p * r + c8
        p = p * r + c7
        p = p * r + c6
        p = p * r + c5
        p = p * r + c4
        p = p * r + c3
        p = p * r + c2
        p = p * r + c1
        p = p * r + c0
        out[j] = p
        scale[j] = t
    for j in range(n):
        bits[j] = (bits[j] - _ROUND_BITS + 1023) << 52
    for j in range(n):
        out[j] *= scale[j]
    for j in range(n):
        if a[j] < -708.0:
            out[j] = math.exp(a[j])


@jit_sum
def _sum(e, n):
    s = 0.0
    for j in range(n):
        s += e[j]
    return s


@jit_sum
def _dot(e, v, n):
    s = 0.0
    for j in range(n):
        s += e[j] * v[j]
    return s


@jit_sum
def _wsum(e, w, m):
    s = 0.0
    for q in range(m):
        s += e[q] * w[q]
    return s


@jit_sum
def _wdot(e, w, x, m):
    s = 0.0
    for q in range(m):
        s += e[q] * w[q] * x[q]
    return s


@jit
def _sym_scores(xt, Br, hb, a, bxi, b, n, D):
    """The packed upper triangle ``a[o_i + j - i] = beta <B x_i, x_j> - hb_i - hb_j`` (j >= i); returns its length."""
    o = 0
    for i in range(n):
        for k in range(D):
            bk = 0.0
            for m in range(D):
                bk += Br[k, m] * xt[m, i]
            bxi[k] = b * bk
        h = hb[i]
        m_ = n - i
        ar = a[o:o + m_]
        hr = hb[i:]
        for q in range(m_):
            ar[q] = -h - hr[q]
        for k in range(D):
            c = bxi[k]
            xr = xt[k, i:]
            for q in range(m_):
                ar[q] += c * xr[q]
        o += m_
    return o


@jit
def _sym_sums(xt, w, e, tot, acc, n, D):
    """``tot_i = sum_j E_ij w_j`` and ``acc_ki = sum_j E_ij w_j x_kj`` from the packed upper triangle ``e`` of E."""
    for j in range(n):
        tot[j] = 0.0
        for k in range(D):
            acc[k, j] = 0.0
    o = 0
    for i in range(n):
        m_ = n - i
        er = e[o:o + m_]
        wr = w[i:]
        tot[i] += _wsum(er, wr, m_)               # row i, j >= i: weights w_j
        for k in range(D):
            acc[k, i] += _wdot(er, wr, xt[k, i:], m_)
        wi = w[i]                                  # rows j > i: the same E_ij with the weight w_i
        tr = tot[i:]
        for q in range(1, m_):
            tr[q] += er[q] * wi
        for k in range(D):
            c = wi * xt[k, i]
            ak = acc[k, i:]
            for q in range(1, m_):
                ak[q] += er[q] * c
        o += m_


@jit
def _sym_step(xt, yt, Br, hb, w, a, e, bits, scale, tot, acc, bxi, b, gm, n, D):
    """One (SA-beta) step ``xt -> yt`` for symmetric positive semi-definite B (``Br``, D x D).

    With ``hb_j = beta <B x_j, x_j> / 2`` the shifted scores ``E_ij = exp(beta <B x_i, x_j> - hb_i - hb_j)``
    are at most 1 (Cauchy-Schwarz for the form of B) and symmetric, so only ``j >= i`` is
    evaluated: ``n (n + 1) / 2`` exponentials instead of ``n^2``, in one vectorised call over the
    packed upper triangle (``a``, ``e``, ``bits`` hold ``n (n + 1) / 2`` entries).
    ``E_ij`` enters row i with the weight ``w_j = m_j e^{hb_j}`` and row j with ``w_i``, and
    ``A_ij = E_ij w_j / sum_l E_il w_l`` is the softmax of ``beta <B x_i, x_j> + log m_j``
    (the score of a pair is computed once, from ``B x_i`` with ``i <= j``; the difference to a
    row-by-row evaluation is rounding). The loops run over row views (``a[o:o + m]``), whose
    indices numba knows to be non-negative, so that LLVM vectorises them.
    """
    o = _sym_scores(xt, Br, hb, a, bxi, b, n, D)
    _exp_row(a, e, bits, scale, o)
    _sym_sums(xt, w, e, tot, acc, n, D)
    for i in range(n):
        for k in range(D):
            yt[k, i] = xt[k, i] + gm * (acc[k, i] / tot[i] - xt[k, i])


@pjit
def _run(X0, W, nact, Bm, sym, beta, gamma, eps, check, gid, hs_lo, hs_hi, HS, pr_lo, pr_hi, PK, PC,
         cap, rec_t, T_out, X_out, X_rec):
    """Step every system r until its exit or ``cap[r]`` steps; one system per thread.

    The exit test runs only when it can matter: the distance of a token to its group's hull is
    1-Lipschitz, so after an exact test that leaves every token at least ``slack`` inside its
    ``eps``-neighbourhood, no exit is possible until the largest displacements of the tokens,
    summed over the steps since, reach ``slack`` (less a margin of ``1e-6 eps``, far above the
    rounding of that running sum, at most about ``1e-16 eps`` per step, over 10^10 steps).
    """
    R, N, D = X0.shape
    K = rec_t.shape[0]
    for r in prange(R):
        n = nact[r]
        xt = np.empty((D, n))                  # the tokens, transposed: the inner loops run over j
        yt = np.empty((D, n))
        for i in range(n):
            for k in range(D):
                xt[k, i] = X0[r, i, k]
        P = n * (n + 1) // 2                   # the packed upper triangle of the symmetric path
        a = np.empty(P)
        e = np.empty(P)
        bits = np.empty(P, np.int64)
        scale = bits.view(np.float64)
        w = np.empty(n)
        hb = np.empty(n)
        logm = np.empty(n)
        bxi = np.empty(D)
        p = np.empty(D)
        tot = np.empty(n)
        acc = np.empty((D, n))
        for j in range(n):
            logm[j] = math.log(W[r, j])
        b = beta[r]
        gm = gamma[r]
        ep = eps[r]
        margin = 1e-6 * ep
        slack = -1.0
        T_out[r] = -1
        kr = 0
        while kr < K and rec_t[kr] == 0:
            for i in range(n):
                for k in range(D):
                    X_rec[r, kr, i, k] = xt[k, i]
            kr += 1
        t = 0
        while t < cap[r]:
            t += 1
            top = 0.0
            low = np.inf
            for j in range(n):                 # half the scaled self-scores, beta <B x_j, x_j> / 2
                s = 0.0
                for k in range(D):
                    bk = 0.0
                    for m in range(D):
                        bk += Bm[r, k, m] * xt[m, j]
                    s += bk * xt[k, j]
                hb[j] = 0.5 * b * s
                top = max(top, hb[j])
                low = min(low, hb[j])
            if sym[r] and low >= 0.0 and top <= 600.0:
                # B symmetric positive semi-definite: beta S_ij <= hb_i + hb_j, so with the shift
                # hb_i + hb_j every exponential is <= 1 and A_ij ∝ exp(beta S_ij - hb_i - hb_j) w_j.
                for j in range(n):
                    a[j] = hb[j] + logm[j]
                _exp_row(a, w, bits, scale, n)
                _sym_step(xt, yt, Bm[r], hb, w, a, e, bits, scale, tot, acc, bxi, b, gm, n, D)
            else:
                for i in range(n):             # any B: the row maximum as the shift
                    for k in range(D):
                        bk = 0.0
                        for m in range(D):
                            bk += Bm[r, k, m] * xt[m, i]
                        bxi[k] = b * bk
                    for j in range(n):
                        a[j] = logm[j]
                    for k in range(D):
                        c = bxi[k]
                        for j in range(n):
                            a[j] += c * xt[k, j]
                    mx = a[0]
                    for j in range(1, n):
                        mx = max(mx, a[j])
                    for j in range(n):
                        a[j] -= mx
                    _exp_row(a, e, bits, scale, n)
                    tot_i = _sum(e, n)
                    for k in range(D):
                        acc_k = _dot(e, xt[k], n)
                        yt[k, i] = xt[k, i] + gm * (acc_k / tot_i - xt[k, i])
            move = 0.0
            for i in range(n):
                s = 0.0
                for k in range(D):
                    dlt = yt[k, i] - xt[k, i]
                    s += dlt * dlt
                move = max(move, s)
            xt, yt = yt, xt
            while kr < K and rec_t[kr] == t:
                for i in range(n):
                    for k in range(D):
                        X_rec[r, kr, i, k] = xt[k, i]
                kr += 1
            if check[r]:
                slack -= math.sqrt(move)
                if slack <= margin:            # an exact test
                    hit = False
                    slack = np.inf
                    for i in range(n):
                        for k in range(D):
                            p[k] = xt[k, i]
                        v = _dist2(p, gid[r, i], ep, hs_lo, hs_hi, HS, pr_lo, pr_hi, PK, PC, D)
                        if v > ep * ep:
                            hit = True
                            break
                        slack = min(slack, ep - math.sqrt(v))
                    if hit:
                        T_out[r] = t
                        break
        for i in range(n):
            for k in range(D):
                X_out[r, i, k] = xt[k, i]


# ----------------------------------------------------------------------------------------
# the public function
# ----------------------------------------------------------------------------------------

def _as_list(name, value, conv):
    if isinstance(value, (list, tuple)):
        return [conv(name, v) for v in value]
    return None


def _systems(x0, sigma):
    """Lists of (n_r, d_r) starts and (n_r,) labels from one system, a batch or lists."""
    if isinstance(x0, (list, tuple)):
        xs = [V.tokens("x0", np.asarray(a, float), batched_ok=False) for a in x0]
    else:
        a = V.tokens("x0", x0)
        xs = list(a) if a.ndim == 3 else [a]
    if isinstance(sigma, (list, tuple)) and len(sigma) and np.ndim(sigma[0]) == 1:
        sg = [np.asarray(s) for s in sigma]
    else:
        s = np.asarray(sigma)
        sg = list(s) if s.ndim == 2 else [s]
    return xs, sg


def _broadcast(name, value, R, *, low=None, high=None, low_open=False, high_open=False):
    a = np.asarray(value, float)
    if a.ndim > 1 or (a.ndim == 1 and a.size not in (1, R)):
        raise ValueError(f"{name} must be a number or one value per system ({R}), got shape {a.shape}")
    a = np.broadcast_to(a.reshape(-1) if a.ndim else a, (R,)).astype(float)
    for v in a:
        V.real_scalar(name, float(v), low=low, high=high, low_open=low_open, high_open=high_open)
    return a


def sabeta_exit_times(x0, sigma, gamma, beta, eps, *, B=None, cap=10**6, mass=None, record_times=None,
                      region=None) -> Result:
    """Exit time ``T2`` of (SA-beta) from a clustered configuration, exact stepping, batched.

    ``T2`` is the first ``t >= 1`` at which some token ``x_i^t`` lies farther than ``eps``
    from ``conv{x_k^0 : sigma_k = sigma_i}`` (the exit time of Theorem 5.4, for the
    deterministic dynamics), with ``x_i^{t+1} = x_i^t + gamma (sum_j A_ij x_j^t - x_i^t)`` and
    ``A_ij ∝ m_j exp(beta <B x_i^t, x_j^t>)``, self-interaction included.

    Parameters
    ----------
    x0 : (n, d), (R, n, d), or a list of R arrays (n_r, d_r)
        A list holds configurations of different sizes and dimensions in one call; d <= 3.
    sigma : (n,) group labels, or one per system
    gamma, beta, eps : numbers or one per system (R)
        gamma in (0, 1], beta >= 0, eps > 0 or ``inf`` (never exits: just step ``cap``
        times). A single configuration with a vector of betas is R systems.
    B : None (identity), (d, d), or one per system
        Any real matrix (symmetric positive semi-definite ones take the faster symmetric
        path, with identical mathematics).
    cap : number or one per system
        Steps simulated at most.
    mass : array, optional
        Positive weights ``m_j``, (n,) (one per token, same for every system), or one per
        system.
    record_times : sequence of int, optional
        Increasing step numbers at which to keep the configuration.
    region : (points, labels) or one pair per system, optional
        The group hulls ``conv{points_k : labels_k = g}`` define the exit region of the tokens
        with ``sigma = g`` (default: ``(x0, sigma)``); the reduced model starts from other
        points than the region's.

    Returns
    -------
    Result
        Entries ``T`` (R,) int64 (``-1`` when not exited within ``cap``), ``exited`` (R,)
        bool, ``cap`` (R,) int64, ``x`` (list of final configurations) and, with
        ``record_times``, ``records`` (list of (len(record_times), n_r, d_r)) holding NaN
        after the exit.

    Examples
    --------
    Three tokens at the vertices of the equilateral triangle: the hull of each group is a point,
    and the three tokens drift inwards together; a larger beta holds them longer:

    >>> v = regular_polygon(3)
    >>> res = sabeta_exit_times(v, [0, 1, 2], 0.1, [2.0, 4.0, 6.0], 0.05, cap=10**5)
    >>> res.T.tolist()
    [4, 53, 917]

    The same T as plain stepping of (SA-beta) (:func:`attention_fw.model.dynamics.softmax_step`):

    >>> x, t = v.copy(), 0
    >>> while np.linalg.norm(x - v, axis=1).max() <= 0.05:
    ...     x, t = dynamics.softmax_step(x, 0.1, 4.0), t + 1
    >>> t
    53
    """
    xs, sg = _systems(x0, sigma)
    if len(sg) == 1 and len(xs) > 1:
        sg = sg * len(xs)
    if region is None:
        regions = list(zip(xs, sg))
    elif isinstance(region, tuple) and len(region) == 2 and np.ndim(region[1]) == 1:
        regions = [(np.asarray(region[0], float), np.asarray(region[1]))]
    else:
        regions = [(np.asarray(a, float), np.asarray(b)) for a, b in region]
    # broadcast one configuration over vectors of parameters
    sizes = {np.size(gamma), np.size(beta), np.size(eps), np.size(cap), len(xs)}
    R = max(sizes)
    if len(xs) == 1 and R > 1:
        xs, sg, regions = xs * R, sg * R, regions * R
    if len(sg) != R or len(regions) != R:
        raise ValueError(f"sigma and region must hold one entry per system ({R})")
    gamma = _broadcast("gamma", gamma, R, low=0, high=1, low_open=True)
    beta = _broadcast("beta", beta, R, low=0)
    eps_a = np.asarray(eps, float)
    if np.any(eps_a <= 0) or np.any(np.isnan(eps_a)):
        raise ValueError(f"eps must be > 0 (or inf), got {eps!r}")
    eps = np.broadcast_to(eps_a.reshape(-1) if eps_a.ndim else eps_a, (R,)).astype(float)
    caps = np.asarray(cap)
    if caps.dtype.kind not in "iuf" or np.any(caps < 1) or np.any(caps != np.floor(caps)):
        raise ValueError(f"cap must be a positive integer or one per system, got {cap!r}")
    caps = np.broadcast_to(caps.reshape(-1) if caps.ndim else caps, (R,)).astype(np.int64)
    N = max(len(a) for a in xs)
    D = max(a.shape[1] for a in xs)
    if D > 3:
        raise ValueError(f"x0 must be in dimension 1, 2 or 3, got {D}")
    Bs = _as_list("B", B, lambda n, b: V.as_float_array(n, b, ndim=2)) if isinstance(B, (list, tuple)) else None
    if Bs is None:
        if B is None:
            Bs = [np.eye(a.shape[1]) for a in xs]
        else:
            Ba = V.as_float_array("B", B, min_ndim=2)
            Bs = list(Ba) if Ba.ndim == 3 else [Ba] * R
    if len(Bs) != R:
        raise ValueError(f"B must be one matrix or one per system ({R})")
    X0 = np.zeros((R, N, D))
    Wm = np.ones((R, N))
    nact = np.zeros(R, np.int64)
    Bm = np.zeros((R, D, D))
    sym = np.zeros(R, bool)
    gid = np.zeros((R, N), np.int64)
    HS: list[Any] = []
    PK: list[Any] = []
    PC: list[Any] = []
    hs_lo: list[int] = []
    hs_hi: list[int] = []
    pr_lo: list[int] = []
    pr_hi: list[int] = []
    nh = npr = 0
    for r in range(R):
        a, s = xs[r], np.asarray(sg[r])
        reg, rlab = regions[r]
        n, d = a.shape
        if s.shape != (n,) or s.dtype.kind not in "iu" or (n and s.min() < 0):
            raise ValueError(f"sigma must be non-negative integer labels, one per token ({n}), in system {r}")
        if reg.ndim != 2 or reg.shape[1] != d or rlab.shape != (len(reg),):
            raise ValueError(f"region must be (points (m, {d}), labels (m,)) in system {r}")
        if not set(np.unique(s).tolist()) <= set(np.unique(rlab).tolist()):
            raise ValueError(f"region has no points for some label of sigma in system {r}")
        b = Bs[r]
        if b.shape != (d, d) or not np.all(np.isfinite(b)):
            raise ValueError(f"B must be a finite ({d}, {d}) matrix, got shape {b.shape} in system {r}")
        X0[r, :n, :d] = a
        nact[r] = n
        Bm[r, :d, :d] = b
        Bm[r, d:, d:] = np.eye(D - d)
        sym[r] = bool(np.allclose(b, b.T, rtol=0, atol=0) and np.linalg.eigvalsh(b).min() >= 0)
        if mass is not None:
            ms = mass[r] if isinstance(mass, (list, tuple)) else mass
            ms = V.as_float_array("mass", ms, ndim=1)
            if ms.shape != (n,) or np.any(ms <= 0):
                raise ValueError(f"mass must hold {n} positive weights in system {r}")
            Wm[r, :n] = ms
        for g in np.unique(s):
            hp = hull_primitives(reg[rlab == g])
            gid[r, np.flatnonzero(s == g)] = len(hs_lo)
            h = hp.halfspaces
            hpad = np.zeros((len(h), D + 1))
            hpad[:, :d] = h[:, :d]
            hpad[:, D] = h[:, d]
            HS.append(hpad)
            c = np.zeros((len(hp.kinds), 3, D))
            c[:, :, :d] = hp.corners
            PC.append(c)
            PK.append(hp.kinds)
            hs_lo.append(nh)
            nh += len(h)
            hs_hi.append(nh)
            pr_lo.append(npr)
            npr += len(hp.kinds)
            pr_hi.append(npr)
    rec = np.zeros(0, np.int64) if record_times is None else np.asarray(record_times, np.int64)
    if rec.ndim != 1 or np.any(rec < 0) or np.any(np.diff(rec) <= 0):
        raise ValueError("record_times must be increasing non-negative step numbers")
    T = np.zeros(R, np.int64)
    X_out = np.zeros((R, N, D))
    X_rec = np.full((R, len(rec), N, D), np.nan)
    check = np.isfinite(eps)
    _kernel()(X0, Wm, nact, Bm, sym, beta, gamma, np.where(check, eps, 1.0), check, gid,
              np.array(hs_lo, np.int64), np.array(hs_hi, np.int64), np.concatenate(HS),
              np.array(pr_lo, np.int64), np.array(pr_hi, np.int64), np.concatenate(PK).astype(np.int64),
              np.concatenate(PC), caps, rec, T, X_out, X_rec)
    shapes = [a.shape for a in xs]
    out = Result(T=T, exited=T > 0, cap=caps,
                 x=[X_out[r, :n, :d].copy() for r, (n, d) in enumerate(shapes)])
    if record_times is not None:
        out["records"] = [X_rec[r, :, :n, :d].copy() for r, (n, d) in enumerate(shapes)]
    return out


# ----------------------------------------------------------------------------------------
# the reduced model
# ----------------------------------------------------------------------------------------

def settled_points(x0, sigma, gamma: float, beta, *, B=None, tol: float = 1e-13, max_steps: int = 10**6,
                   chunk: int = 500) -> Result:
    """Where each cluster of (SA-beta) contracts to when it is left alone: the point ``p_g(beta)``.

    Group ``g`` (the tokens with ``sigma = g``) is run by (SA-beta) *on its own* (no other group
    present) until its diameter is below ``tol`` times the size of the configuration
    (Proposition 5.1 for that group: it collapses to a point of its own hull). At large ``beta``
    the weights inside a cluster tend to hardmax, every token follows its leader and the point
    tends to the group's extreme token (the vertex); at small ``beta`` it tends to the mean of the
    group. Batched over the groups and ``beta`` (one kernel call per chunk of steps).

    Returns a Result with ``points`` (len(beta), kappa, d), ``masses`` (kappa,) (tokens per
    group), ``labels`` (kappa,) and ``steps`` (len(beta), kappa) (the steps the collapse took).

    Examples
    --------
    Two tokens of one group at (1, 0) and (0.9, 0): at ``beta = 0`` both move to their mean, so
    the point is 0.95; at larger beta the token nearer the vertex (larger inner products) wins:

    >>> x0 = np.array([[1.0, 0.0], [0.9, 0.0], [-1.0, 0.0]])
    >>> sp = settled_points(x0, [0, 0, 1], 0.1, [0.0, 20.0])
    >>> sp.points[:, 0, 0].round(6).tolist(), sp.masses.tolist()
    ([0.95, 0.972197], [2.0, 1.0])
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    sigma = np.asarray(sigma)
    if sigma.shape != (len(x0),) or sigma.dtype.kind not in "iu":
        raise ValueError(f"sigma must be integer labels, one per token ({len(x0)})")
    gamma = V.real_scalar("gamma", gamma, low=0, high=1, low_open=True)
    betas = V.as_float_array("beta", beta, min_ndim=0).reshape(-1)
    tol = V.real_scalar("tol", tol, low=0, low_open=True)
    labels = np.unique(sigma)
    groups = [x0[sigma == g] for g in labels]
    size = max(float(np.ptp(x0, axis=0).max()), 1e-300)
    sys_x = [g for _ in betas for g in groups]
    sys_b = np.repeat(betas, len(groups))
    x = [a.copy() for a in sys_x]
    steps = np.zeros(len(x), np.int64)
    todo = [k for k in range(len(x)) if len(x[k]) > 1]
    while todo:
        res = sabeta_exit_times([x[k] for k in todo], [np.zeros(len(x[k]), np.int64) for k in todo], gamma,
                                sys_b[todo], np.inf, B=B, cap=chunk)
        left = []
        for k, xn in zip(todo, res.x):
            x[k] = xn
            steps[k] += chunk
            if np.ptp(xn, axis=0).max() > tol * size and steps[k] < max_steps:
                left.append(k)
        todo = left
    pts = np.array([a.mean(axis=0) for a in x]).reshape(len(betas), len(groups), x0.shape[1])
    return Result(points=pts, masses=np.array([len(g) for g in groups], float), labels=labels,
                  steps=steps.reshape(len(betas), len(groups)))


def reduced_exit_times(x0, sigma, gamma: float, beta, eps: float, *, B=None, cap=10**7) -> Result:
    """Exit time ``T2`` of (SA-beta) predicted by the reduced model of clustered configurations.

    Derivation. In a clustered configuration (every group of tokens close to its vertex, the
    groups far apart) the (SA-beta) weights split into intra-group weights of order 1 and
    inter-group weights ``A_ij ≈ (m_h / m_g) e^{-beta (<B p_g, p_g> - <B p_g, p_h>)}`` for ``i`` in
    group g, ``j`` in group h. Two time scales follow:

    1. *fast*: each group contracts, as if it were alone, to a point ``p_g(beta)`` in about
       ``log(spread / tol) / gamma`` steps (:func:`settled_points`); where it settles depends on
       beta (hardmax-like weights at large beta pull it to the vertex, near-uniform weights at
       small beta to the group's mean) and on the group's tokens;
    2. *slow*: coincident tokens stay coincident under (SA-beta), so once contracted the system
       **is** the kappa-point (SA-beta) with masses ``m_g`` (the group sizes), whose points drift
       at speeds ``gamma sum_h (m_h / m_g) e^{-beta gap_gh} |p_h - p_g|``,
       ``gap_gh = <B p_g, p_g> - <B p_g, p_h>``, until one leaves
       ``conv{x_k^0 : sigma_k = g} + B(0, eps)``.

    The model steps (2) exactly from the points of (1) (its clock starts at 0 at the settled
    points). Assumptions: the groups are separated (every inter-group gap at the settled points is
    positive, so the inter-group weights are exponentially small) and no token leaves its region
    during the contraction. Leading-order error: the contraction takes ``T_A`` steps, during which
    the inter-group pull (``O(e^{-beta gap})`` per step) is ignored and the clock is shifted by at
    most ``T_A``; so ``T2_reduced / T2 - 1 = O(T_A / T2)``, which vanishes like ``e^{-beta gap}``
    as ``beta`` grows. It fails when the scales do not separate: at small ``beta``, where ``T2``
    is of the order of ``T_A`` (the exit happens during the contraction), and when a group's
    settled point is not separated from another group's.

    Returns a Result with ``T`` (len(beta),) (``-1`` where the model does not exit within
    ``cap``), ``points``, ``masses`` and ``contraction_steps`` of :func:`settled_points`.

    Examples
    --------
    Coincident clusters are already contracted, so there the model *is* (SA-beta): the same T.

    >>> v = regular_polygon(3)
    >>> x0, sigma = np.repeat(v, 2, axis=0), np.repeat([0, 1, 2], 2)
    >>> reduced_exit_times(
    ...     x0, sigma, 0.1, [3.0, 5.0], 0.05
    ... ).T.tolist() == sabeta_exit_times(x0, sigma, 0.1, [3.0, 5.0], 0.05).T.tolist()
    True
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    sigma = np.asarray(sigma)
    betas = V.as_float_array("beta", beta, min_ndim=0).reshape(-1)
    sp = settled_points(x0, sigma, gamma, betas, B=B)
    pts = [p for p in sp.points]
    res = sabeta_exit_times(pts, [sp.labels] * len(betas), gamma, betas, eps, B=B, cap=cap,
                            mass=[sp.masses] * len(betas), region=[(x0, sigma)] * len(betas))
    return Result(T=res.T, points=sp.points, masses=sp.masses, contraction_steps=sp.steps.max(axis=1))


class _GroupDistance:
    """Exact distance to ``conv(points)`` through the kernel's primitives (fast, for many queries)."""

    def __init__(self, points):
        hp = hull_primitives(points)
        self.d = hp.corners.shape[2]
        self.args = (np.array([0]), np.array([len(hp.halfspaces)]), np.ascontiguousarray(hp.halfspaces).reshape(-1, self.d + 1),
                     np.array([0]), np.array([len(hp.kinds)]), hp.kinds, np.ascontiguousarray(hp.corners))

    def __call__(self, p, eps):
        """The distance when it is at most ``eps``, a number above ``eps`` otherwise."""
        lo, hi, HS, plo, phi, PK, PC = self.args
        return math.sqrt(_dist2(np.ascontiguousarray(p, dtype=float), 0, eps, lo, hi, HS, plo, phi, PK, PC, self.d))


def _ray_exit(p, u, gd, eps):
    """Smallest s >= 0 with dist(p + s u, hull) = eps (u a unit vector, gd a _GroupDistance; inf if never)."""
    def out(s):
        return gd(p + s * u, eps) > eps
    if out(0.0):
        return 0.0
    hi = 1.0
    while not out(hi):
        hi *= 2
        if hi > 1e6:
            return math.inf
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if out(mid) else (mid, hi)
    return hi


def leading_order_exit(x0, sigma, gamma: float, beta, eps: float, *, B=None) -> Result:
    """The reduced model to leading order: constant drift of the settled points.

    Group g's point moves by ``u_g = gamma sum_{h != g} (m_h / m_g) e^{-beta gap_gh} (p_h - p_g)``
    per step (the inter-group weights at first order), so it reaches the boundary of its exit
    region after ``s_g / |u_g|`` steps, ``s_g`` the distance along ``u_g`` from ``p_g`` to that
    boundary. ``T_lead = min_g s_g / |u_g|`` and its rate ``d log T_lead / d beta`` is about the
    smallest gap ``min_h gap_gh`` *at the settled points*: the effective barrier of (SA-beta),
    below ``c0`` when the points sit inside the vertices. It ignores the change of speed along
    the way (the speed grows by a factor ``e^{beta O(eps)}`` while a point moves by ``eps``),
    so it overestimates ``T2`` by a factor that does not vanish as beta grows; it is an
    explanation of the rate, not a prediction of ``T2`` (that is :func:`reduced_exit_times`).

    Returns a Result with ``T`` (len(beta),), ``gap`` (len(beta),) (the smallest gap of the exiting
    group), ``points`` and ``group`` (the exiting group per beta).

    Examples
    --------
    One token per vertex of the equilateral triangle: the gap is ``c0 = 3/2`` at every beta:

    >>> lo = leading_order_exit(regular_polygon(3), [0, 1, 2], 0.1, [5.0, 10.0], 0.05)
    >>> lo.gap.round(12).tolist(), bool(lo.T[1] / lo.T[0] > math.exp(1.5 * 5) * 0.99)
    ([1.5, 1.5], True)
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    sigma = np.asarray(sigma)
    betas = V.as_float_array("beta", beta, min_ndim=0).reshape(-1)
    d = x0.shape[1]
    Bm = np.eye(d) if B is None else V.as_float_array("B", B, ndim=2)
    sp = settled_points(x0, sigma, gamma, betas, B=B)
    T = np.full(len(betas), np.inf)
    gaps = np.zeros(len(betas))
    grp = np.zeros(len(betas), np.int64)
    m = sp.masses
    gds = [_GroupDistance(x0[sigma == g]) for g in sp.labels]
    for k, b in enumerate(betas):
        p = sp.points[k]
        S = p @ Bm.T @ p.T                                    # S_gh = <B p_g, p_h>
        gap = np.diag(S)[:, None] - S
        np.fill_diagonal(gap, np.inf)
        for g in range(len(p)):
            wgt = (m / m[g]) * np.exp(-b * np.where(np.isinf(gap[g]), 0.0, gap[g]))
            wgt[g] = 0.0
            u = gamma * (wgt[:, None] * (p - p[g])).sum(axis=0)
            speed = float(np.linalg.norm(u))
            if speed == 0:
                continue
            s = _ray_exit(p[g], u / speed, gds[g], eps)
            if s / speed < T[k]:
                T[k], gaps[k], grp[k] = s / speed, float(gap[g].min()), g
    return Result(T=T, gap=gaps, points=sp.points, group=grp)


# ----------------------------------------------------------------------------------------
# rates and the coupling
# ----------------------------------------------------------------------------------------

def fit_rate(betas, T, level: float = 0.95) -> Result:
    """Least-squares line ``log T = a + c beta`` with a ``level`` interval for the rate ``c``.

    For the deterministic (SA-beta) the times carry no noise: the interval (Student t on the
    residuals, n - 2 degrees of freedom) measures how far ``log T`` is from a straight line over
    the grid, i.e. how much the rate changes with beta. Entries ``T <= 0`` (not exited within
    the cap) are left out; ``n`` says how many were used (at least 3 are needed for an interval).

    Examples
    --------
    >>> r = fit_rate(
    ...     [1.0, 2.0, 3.0, 4.0], np.exp(0.5 * np.array([1.0, 2.0, 3.0, 4.0]) + 2)
    ... )
    >>> (
    ...     round(r.slope, 12),
    ...     round(r.intercept, 12),
    ...     r.n,
    ...     [round(c, 9) for c in r.slope_ci],
    ... )
    (0.5, 2.0, 4, [0.5, 0.5])
    """
    b = V.as_float_array("betas", betas, ndim=1)
    t = V.as_float_array("T", T, ndim=1)
    if t.shape != b.shape:
        raise ValueError("T must hold one time per beta")
    ok = t > 0
    if ok.sum() < 2:
        raise ValueError("T must hold at least 2 exit times (> 0)")
    bb, y = b[ok], np.log(t[ok])
    lr = stats.linregress(bb, y)
    n = int(ok.sum())
    if n > 2:
        q = stats.t.ppf(0.5 + level / 2, n - 2)
        ci = (float(lr.slope - q * lr.stderr), float(lr.slope + q * lr.stderr))
    else:
        ci = (math.nan, math.nan)
    return Result(slope=float(lr.slope), intercept=float(lr.intercept), slope_ci=ci, n=n, level=level)


def fit_chain_rate(betas, mean, ci, level: float = 0.95) -> Result:
    """Weighted least-squares rate of the chain's mean exit times: ``log mean = a + c beta``.

    ``ci`` (k, 2) are the intervals of the means at ``level`` (Wald on the log scale, as
    :func:`attention_fw.experiments.survival.fit_exponential_censored` gives them); the weights
    are the inverse variances of ``log mean``. Entries with a NaN mean are left out.

    Examples
    --------
    >>> b = np.array([1.0, 2.0, 3.0])
    >>> m = np.exp(2.0 * b)
    >>> r = fit_chain_rate(b, m, np.c_[m / 1.2, m * 1.2])
    >>> round(r.slope, 9), r.n
    (2.0, 3)
    """
    b = V.as_float_array("betas", betas, ndim=1)
    m = np.asarray(mean, float)
    c = np.asarray(ci, float)
    if m.shape != b.shape or c.shape != b.shape + (2,):
        raise ValueError("mean must hold one value and ci one (low, high) pair per beta")
    ok = np.isfinite(m) & np.all(np.isfinite(c), axis=1) & (c[:, 0] > 0)
    if ok.sum() < 2:
        raise ValueError("at least 2 finite means are needed")
    z = stats.norm.ppf(0.5 + level / 2)
    se = (np.log(c[ok, 1]) - np.log(c[ok, 0])) / (2 * z)
    w = 1 / se ** 2
    X = np.stack([np.ones(ok.sum()), b[ok]], axis=1)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    a0, sl = cov @ (X.T @ (w * np.log(m[ok])))
    ses = math.sqrt(cov[1, 1])
    return Result(slope=float(sl), intercept=float(a0), slope_ci=(float(sl - z * ses), float(sl + z * ses)),
                  n=int(ok.sum()), level=level)


def coupling_distances(x0, gamma: float, beta: float, times, runs: int, *, rng=0) -> Result:
    """How far (SAP) paths are from the (SA-beta) path started at the same ``x0`` (B = I).

    At each step of ``times``: ``one`` (runs, T') the largest token distance
    ``max_i |X_i^t - x_i^t|`` of every chain path to the deterministic path, and ``mean`` (T')
    the same for the empirical mean of the ``runs`` chains, ``max_i |mean_r X_{r,i}^t - x_i^t|``
    (one (SAP) step is one (SA-beta) step in expectation, but the map is not linear, so the
    mean drifts too). The chains are stepped together by :func:`attention_fw.model.dynamics.simulate`.

    Examples
    --------
    At ``t = 0`` every distance is 0; with one token the chain cannot move at all:

    >>> c = coupling_distances(np.array([[1.0, 0.0]]), 0.1, 2.0, [0, 5], 4, rng=0)
    >>> c.one.tolist(), c.mean.tolist()
    ([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])
    """
    x0 = V.tokens("x0", x0, batched_ok=False)
    t = np.asarray(times, np.int64)
    if t.ndim != 1 or np.any(t < 0) or np.any(np.diff(t) <= 0):
        raise ValueError("times must be increasing non-negative step numbers")
    runs = V.positive_int("runs", runs)
    det = sabeta_exit_times(x0, np.zeros(len(x0), np.int64), gamma, beta, np.inf, cap=max(int(t[-1]), 1),
                            record_times=t).records[0]
    rec = dynamics.FunctionRecorder("x", lambda x, s: x.copy(), times=t)
    chains = dynamics.simulate(np.broadcast_to(x0, (runs,) + x0.shape), dynamics.MarkovChain(gamma, beta, rng=rng),
                               int(t[-1]), [rec])
    X = np.asarray(chains.records["x"])                          # (T', runs, n, d)
    one = np.linalg.norm(X - det[:, None], axis=-1).max(axis=-1).T
    mean = np.linalg.norm(X.mean(axis=1) - det, axis=-1).max(axis=-1)
    return Result(t=t, one=one, mean=mean, sabeta=det)


# ----------------------------------------------------------------------------------------
# the family of configurations of the book's chapter
# ----------------------------------------------------------------------------------------

def _random_polygon(kappa, seed, *, radii=None):
    g = np.random.default_rng(seed)
    while True:
        a = np.sort(g.uniform(0, 2 * np.pi, kappa))
        gaps = np.diff(np.r_[a, a[0] + 2 * np.pi])
        if gaps.min() > 0.6 * 2 * np.pi / kappa and gaps.max() < np.pi * 0.9:
            break
    r = 1.0 if radii is None else g.uniform(*radii, kappa)[:, None]
    return r * np.c_[np.cos(a), np.sin(a)]


def _random_sphere(kappa, seed):
    g = np.random.default_rng(seed)
    while True:
        v = g.normal(size=(kappa, 3))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        if spatial.distance.pdist(v).min() > 0.9 and np.linalg.norm(v.mean(0)) < 0.3:
            return v


_B2 = np.array([[1.4, 0.0], [0.0, 0.6]])
_B2R = np.array([[1.2, 0.3], [0.3, 0.8]])
_B3 = np.diag([1.3, 1.0, 0.7])

#: The family of configurations of chapter 7, ``name -> (vertices, tokens, gamma, eps, B)``; ``tokens`` is ``("c", m)``
#: for m coincident tokens per vertex or ``("n", m, r)`` for the vertex plus m tokens at distance r in
#: its tangent cone (seeded by the name's position in the family); ``B = None`` is the identity.
#: :func:`family_configuration` turns a name into tokens, groups and the hypotheses check.
FAMILY: dict[str, tuple[Any, ...]] = {
    "triangle, 1 per vertex": ("tri", ("c", 1), 0.1, 0.05, None),
    "triangle, 3 coincident": ("tri", ("c", 3), 0.1, 0.05, None),
    "triangle, 1+2 near": ("tri", ("n", 2, 0.05), 0.1, 0.1, None),
    "triangle, 1+6 near, gamma 0.3": ("tri", ("n", 6, 0.1), 0.3, 0.1, None),
    "square, 1 per vertex": ("sq", ("c", 1), 0.3, 0.1, None),
    "square, 1+3 near": ("sq", ("n", 3, 0.08), 0.1, 0.1, None),
    "pentagon, 2 coincident": ("pent", ("c", 2), 0.05, 0.05, None),
    "pentagon, 1+7 near": ("pent", ("n", 7, 0.1), 0.1, 0.1, None),
    "hexagon, 1 per vertex": ("hex", ("c", 1), 0.3, 0.1, None),
    "hexagon, 1+3 near": ("hex", ("n", 3, 0.05), 0.05, 0.05, None),
    "random triangle, 1+2 near": ("rtri", ("n", 2, 0.06), 0.1, 0.1, None),
    "random quadrilateral, 2 coincident": ("rquad", ("c", 2), 0.1, 0.05, None),
    "random pentagon, 1+2 near": ("rpent", ("n", 2, 0.05), 0.3, 0.1, None),
    "random hexagon, 1 per vertex": ("rhex", ("c", 1), 0.1, 0.05, None),
    "unequal-norm triangle, 1 per vertex": ("utri", ("c", 1), 0.1, 0.05, None),
    "triangle, 1+2 near, B diagonal": ("tri", ("n", 2, 0.05), 0.1, 0.1, _B2),
    "square, 1 per vertex, B rotated": ("sq", ("c", 1), 0.1, 0.05, _B2R),
    "pentagon, 1+3 near, B diagonal": ("pent", ("n", 3, 0.06), 0.05, 0.05, _B2),
    "tetrahedron, 1 per vertex": ("tet", ("c", 1), 0.1, 0.05, None),
    "tetrahedron, 1+3 near": ("tet", ("n", 3, 0.06), 0.1, 0.1, None),
    "octahedron, 1 per vertex": ("oct", ("c", 1), 0.3, 0.1, None),
    "random 5 points on the sphere, 1+2 near": ("rs5", ("n", 2, 0.05), 0.1, 0.1, None),
    "tetrahedron, 2 coincident, B diagonal": ("tet", ("c", 2), 0.05, 0.05, _B3),
    "triangle, 1 per vertex, in the hypotheses": ("tri", ("c", 1), 0.04, 0.17, None),
    "tetrahedron, 1 per vertex, in the hypotheses": ("tet", ("c", 1), 0.04, 0.15, None),
    "triangle, 2 coincident, in the hypotheses": ("tri", ("c", 2), 0.04, 0.17, None),
}


def _polytope(key):
    if key in ("tri", "sq", "pent", "hex"):
        return regular_polygon({"tri": 3, "sq": 4, "pent": 5, "hex": 6}[key])
    if key == "tet":
        return regular_simplex(3)
    if key == "oct":
        return np.vstack([np.eye(3), -np.eye(3)])
    if key == "rs5":
        return _random_sphere(5, 11)
    if key == "utri":
        return _random_polygon(3, 5, radii=(0.8, 1.2))
    return _random_polygon({"rtri": 3, "rquad": 4, "rpent": 5, "rhex": 6}[key], {"rtri": 1, "rquad": 2,
                                                                                 "rpent": 3, "rhex": 4}[key])


def family_configuration(name: str) -> Result:
    """One configuration of the book's family (:data:`FAMILY`), with the hypotheses of Theorem 5.4 it meets.

    Returns a Result with ``x0`` (n, d), ``sigma``, ``B`` (d, d), ``gamma``, ``eps``, ``vertices``,
    ``rho`` (start radius ``max_j |x_j^0 - v_sigma(j)|``), ``c0`` (with B: ``min <B v_i, v_i - v_l>``),
    ``hypotheses`` (the Result of :func:`attention_fw.experiments.metastability.theorem54_hypotheses`, whose
    ``all`` also requires ``B = I``, the standing choice of Section 5) and ``coincident`` (every
    group starts at one point).

    Examples
    --------
    >>> c = family_configuration("triangle, 1 per vertex, in the hypotheses")
    >>> (
    ...     c.x0.shape,
    ...     bool(c.hypotheses.all),
    ...     family_configuration("triangle, 1+2 near").hypotheses.all,
    ... )
    ((3, 2), True, False)
    """
    if name not in FAMILY:
        raise ValueError(f"name must be one of the family's configurations, got {name!r}")
    key, tok, gamma, eps, B = FAMILY[name]
    v = _polytope(key)
    d = v.shape[1]
    if tok[0] == "c":
        sigma = np.repeat(np.arange(len(v)), tok[1])
        x0 = v[sigma].copy()
    else:
        x0, sigma = near_vertex_configuration(v, tok[1], tok[2], rng=list(FAMILY).index(name))
    Bm = np.eye(d) if B is None else np.asarray(B, float)
    rho = float(np.linalg.norm(x0 - v[sigma], axis=1).max())
    h = theorem54_hypotheses(v, eps, gamma, rho)
    h["B_identity"] = bool(np.array_equal(Bm, np.eye(d)))
    h["all"] = bool(h["all"] and h["B_identity"])
    G = v @ Bm.T @ v.T                                   # G_il = <B v_i, v_l>
    gap = np.diag(G)[:, None] - G
    np.fill_diagonal(gap, np.inf)
    return Result(name=name, x0=x0, sigma=sigma, B=Bm, gamma=gamma, eps=eps, vertices=v, rho=rho,
                  c0=float(gap.min()), hypotheses=h, coincident=tok[0] == "c", per_vertex=tok[1])


def beta_grid(config: Result, t_lo: float, t_hi: float, num: int) -> np.ndarray:
    """``num`` equally spaced betas from where the leading-order time (:func:`leading_order_exit`)
    is ``t_lo`` to where it is ``t_hi`` (bisection on beta; the grid only has to span the decades,
    the times themselves are then measured).

    Examples
    --------
    >>> b = beta_grid(family_configuration("triangle, 1 per vertex"), 1e2, 1e4, 3)
    >>> len(b), bool(b[0] < b[1] < b[2])
    (3, True)
    """
    num = V.positive_int("num", num, minimum=2)

    def logT(b):
        return np.log(leading_order_exit(config.x0, config.sigma, config.gamma, b, config.eps, B=config.B).T)

    hi = 1.0
    while logT([hi])[0] < math.log(t_hi):
        hi *= 2
        if hi > 1e4:
            raise ValueError(f"no beta below 1e4 reaches T = {t_hi:g} in {config.name!r}")
    grid = np.linspace(0.0, hi, 65)
    y = np.maximum.accumulate(logT(grid))                # log T is increasing in beta here; guard rounding

    def solve(target):
        k = int(np.searchsorted(y, math.log(target)))
        k = min(max(k, 1), len(grid) - 1)
        y0, y1 = y[k - 1], y[k]
        f = 0.0 if y1 == y0 else (math.log(target) - y0) / (y1 - y0)
        return grid[k - 1] + f * (grid[k] - grid[k - 1])
    return np.round(np.linspace(solve(t_lo), solve(t_hi), num), 3)


def _reach_grid(cfg: Result, t_lo: float, t_hi: float, num: int, t_reach, cap: int):
    """The betas and (SA-beta) exit times of one configuration: ``num`` betas spaced as :func:`beta_grid`
    ``(t_lo, t_hi)``, then more at the same spacing until the measured ``T2`` reaches ``t_reach``
    (None: no extension), or a run does not exit within ``cap``, or 40 more betas."""
    betas = beta_grid(cfg, t_lo, t_hi, num)
    T = sabeta_exit_times(cfg.x0, cfg.sigma, cfg.gamma, betas, cfg.eps, B=cfg.B, cap=cap).T
    if t_reach is None or num < 2:
        return betas, T
    step = float(betas[-1] - betas[-2]) if betas[-1] > betas[-2] else 0.0
    added = 0
    while step > 0 and T[-1] > 0 and T[-1] < t_reach and added < 40:
        nxt = np.round(betas[-1] + step * np.arange(1, 3), 3)
        Tn = sabeta_exit_times(cfg.x0, cfg.sigma, cfg.gamma, nxt, cfg.eps, B=cfg.B, cap=cap).T
        betas, T = np.r_[betas, nxt], np.r_[T, Tn]
        added += 2
    if t_reach is not None:                               # keep up to the first time at or above the target
        hit = np.flatnonzero((T >= t_reach) | (T < 0))
        if hit.size:
            betas, T = betas[:hit[0] + 1], T[:hit[0] + 1]
    return betas, T


def _model_times(cfg: Result, betas) -> tuple[np.ndarray, float | None, float | None]:
    """The next-order model (:func:`attention_fw.experiments.sabeta_exponent.drift_integral_exit`) at
    ``betas``, and its exponent with its error bar (:func:`~attention_fw.experiments.sabeta_exponent.model_exponent`)."""
    from .sabeta_exponent import drift_integral_exit, model_exponent
    labels = np.unique(cfg.sigma)
    regions = [(lambda q, gd=_GroupDistance(cfg.x0[cfg.sigma == g]): gd(q, 1e300)) for g in labels]
    far = (20.0, 40.0, 80.0, 160.0)
    allb = np.r_[np.asarray(betas, float), far]
    sp = settled_points(cfg.x0, cfg.sigma, cfg.gamma, allb, B=cfg.B)
    out = np.array([drift_integral_exit(sp.points[k], sp.masses, regions, cfg.gamma, b, cfg.eps, B=cfg.B)
                    for k, b in enumerate(allb)])
    logs = dict(zip(far, np.log(out[len(betas):])))
    c, err = model_exponent(lambda b: float(logs[b]))
    return out[:len(betas)], c, err


def family_task(*, name: str, t_lo: float, t_hi: float, num: int, cap: int, chain_runs: int,
                chain_budget: float, rng: int, t_reach: float | None = None) -> Result:
    """Everything the chapter computes for one configuration of the family (a sweep task).

    The grid: :func:`beta_grid` ``(t_lo, t_hi, num)``, extended at the same spacing until the measured
    ``T2`` reaches ``t_reach`` (``None``: not extended; the last beta is the first whose ``T2`` reaches
    it). On it: ``T2_sabeta`` (-1: not within ``cap``), ``T2_reduced`` (the reduced model),
    ``T2_lead`` (its leading order), ``T2_ode`` (its next order, :func:`attention_fw.experiments.sabeta_exponent.drift_integral_exit`)
    with its exponent ``c_ode`` ± ``c_ode_err``, the settled points' smallest gap ``gap``; and the
    chain (SAP) with the same ``B`` by the rejection-free engine
    (:func:`attention_fw.experiments.exit_times.engine_exit_times`, ``chain_runs`` runs, each beta
    with its own seed ``chain_seed`` from the configuration's name, beta and ``rng``): at every beta
    when the engine is efficient there (coincident groups in the single-jump regime, or one token per
    vertex), otherwise only at the betas whose (SA-beta) time is at most ``chain_budget``. Where no
    run was censored, ``T2_sap_mean`` is the sample mean with its 95% interval ``T2_sap_ci`` from
    the sample (Student t on the sample variance) and ``T2_sap_se_log`` the standard error of its
    log; with censored runs, the censored exponential fit's mean and Wald interval (``se_log`` NaN:
    left out of rate fits); NaN where not computed. Returns the configuration's entries too.

    Examples
    --------
    >>> r = family_task(
    ...     name="triangle, 1 per vertex",
    ...     t_lo=10,
    ...     t_hi=100,
    ...     num=3,
    ...     cap=10**4,
    ...     chain_runs=50,
    ...     chain_budget=100,
    ...     rng=0,
    ... )
    >>> (
    ...     r.T2_sabeta.shape,
    ...     bool(np.all(r.T2_sabeta > 0)),
    ...     bool(np.all(np.isfinite(r.T2_sap_mean))),
    ... )
    ((3,), True, True)
    """
    from .sabeta_exponent import chain_seed, mean_interval
    cfg = family_configuration(name)
    base = int(V.rng("rng", rng).integers(2**31)) if not isinstance(rng, (int, np.integer)) else int(rng)
    betas, T = _reach_grid(cfg, t_lo, t_hi, num, t_reach, cap)
    num = len(betas)
    red = reduced_exit_times(cfg.x0, cfg.sigma, cfg.gamma, betas, cfg.eps, B=cfg.B, cap=cap)
    lead = leading_order_exit(cfg.x0, cfg.sigma, cfg.gamma, betas, cfg.eps, B=cfg.B)
    T_ode, c_ode, c_ode_err = _model_times(cfg, betas)
    n, kappa = len(cfg.x0), len(cfg.vertices)
    vd = spatial.distance.pdist(cfg.vertices).min()
    efficient = cfg.coincident and (n == kappa or cfg.eps < cfg.gamma * vd)
    mean = np.full(num, np.nan)
    ci = np.full((num, 2), np.nan)
    se_log = np.full(num, np.nan)
    cens = np.zeros(num, np.int64)
    seeds = np.zeros(num, np.int64)
    Bk = None if cfg.hypotheses.B_identity else cfg.B
    for k, b in enumerate(betas):
        seeds[k] = chain_seed(name, float(b), base)
        if not efficient and not (0 < T[k] <= chain_budget):
            continue
        ccap = 1e300 if efficient else 50.0 * chain_budget
        es = engine_exit_times(cfg.x0, cfg.sigma, cfg.gamma, b, cfg.eps, chain_runs, rng=int(seeds[k]), B=Bk,
                               cap=ccap, max_events=10_000 if efficient else int(60 * chain_budget))
        f = fit_exponential_censored(es.times, es.censored)
        cens[k] = f.n_censored
        if f.n_censored == 0:
            m, lo, hi = mean_interval(es.times)
            mean[k], ci[k] = m, (lo, hi)
            if chain_runs > 1 and m > 0:
                se_log[k] = float(np.std(es.times, ddof=1) / math.sqrt(chain_runs) / m)
        elif f.n_exits:
            mean[k] = f.mean
            ci[k] = np.exp(f.log_mean_ci)
    return Result(name=name, betas=betas, x0=cfg.x0, sigma=cfg.sigma, B=cfg.B, gamma=cfg.gamma, eps=cfg.eps,
                  cap=cap, T2_sabeta=T, T2_reduced=red.T, T2_lead=lead.T, T2_ode=T_ode, c_ode=c_ode,
                  c_ode_err=c_ode_err, gap=lead.gap,
                  contraction_steps=red.contraction_steps, T2_sap_mean=mean, T2_sap_ci=ci, T2_sap_se_log=se_log,
                  sap_censored=cens, chain_seed=seeds, chain_runs=chain_runs, c0=cfg.c0, hypotheses=dict(cfg.hypotheses),
                  rho=cfg.rho, kappa=kappa, d=cfg.x0.shape[1], n=n, chain_efficient=bool(efficient),
                  coincident=bool(cfg.coincident))
