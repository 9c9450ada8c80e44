"""The exit time of (SA-beta) by exact stepping: the compiled kernel and :func:`sabeta_exit_times`.

Part of :mod:`attention_fw.experiments.sabeta` (which re-exports its public names); see there for the
dynamics and the exit event.

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
import os
from typing import Any

import numpy as np
from scipy import spatial

from .. import _validate as V
from ..geometry.polytope import regular_polygon  # noqa: F401  (the Examples use it)
from ..model import dynamics
from ..model._kernels import announce_compile
from ..results import Result
from ._exit_common import ExitSample, _check_common, _ExitRegion, _key_query, _watch

__all__ = ["hull_primitives", "sabeta_exit_times"]

_KIND_POINT, _KIND_SEGMENT, _KIND_TRIANGLE = 1, 2, 3
# The kernel's symmetric path (the blocks of 4 rows on and right of the diagonal: about n^2 / 2 exponentials
# per step) for symmetric positive semi-definite B; False sends every system through the per-row path (n^2),
# as the tests do to compare the two.
_SYMMETRIC_PATH = True


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


def _plain(f):
    return f


if _numba is not None and os.environ.get("ATTENTION_FW_KERNELS", "numba").strip().lower() != "numpy":
    jit = _numba.njit(cache=True, nogil=True, error_model="numpy")
    jit_sum = _numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc", "nsz", "contract"})
    pjit = _numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
    jit_exp = _numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
    prange = _numba.prange
else:                                    # plain Python: same numbers, for small cases only
    jit = pjit = jit_sum = jit_exp = _plain
    prange = range


_f64_bits: Any
_bits_f64: Any
if _numba is not None and jit is not _plain:
    from llvmlite import ir as _ir
    from numba.extending import intrinsic as _intrinsic

    @_intrinsic
    def _f64_bits(typingctx, x):
        """The bits of a float64 as an int64 (an LLVM bitcast, which vectorises)."""
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], _ir.IntType(64))
        return _numba.types.int64(_numba.types.float64), codegen

    @_intrinsic
    def _bits_f64(typingctx, x):
        """The float64 whose bits are the int64 ``x``."""
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], _ir.DoubleType())
        return _numba.types.float64(_numba.types.int64), codegen
else:
    def _f64_bits_py(x):
        return int(np.float64(x).view(np.int64))

    def _bits_f64_py(x):
        return float(np.int64(x).view(np.float64))
    _f64_bits, _bits_f64 = _f64_bits_py, _bits_f64_py


# unsigned indices for the symmetric path's loops (numba's uint64 in compiled code, numpy's otherwise)
_u64: Any = _numba.uint64 if _numba is not None and jit is not _plain else np.uint64


def _kernel():
    """The kernel (compiled with numba, one system per thread, unless ``ATTENTION_FW_KERNELS=numpy``);
    its first compile in a fresh cache is announced once, as the steps' are."""
    announce_compile("SA-beta exit-time", [_run])
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


# exp(r) on |r| <= log(2) / 2 by its degree-11 interpolant at the 12 Chebyshev nodes (computed in 60-digit
# decimal arithmetic, rounded to doubles): relative error below 1.7e-17 with these double coefficients
# (the degree-13 Taylor polynomial of an earlier version: 4e-18), two multiply-adds fewer per exponential
_EXP_C = (1.0, 1.0, 0.5000000000000019, 0.1666666666666668, 0.0416666666664881, 0.008333333333319601,
          0.0013888888952314775, 0.00019841269890047113, 2.4801485482328494e-05, 2.755724091857897e-06,
          2.763263963904103e-07, 2.5110037605963777e-08)
_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238           # Cody-Waite split of log(2): k * _LN2_HI is exact for |k| < 2^20
_LN2_LO = 1.9082149292705877e-10
_ROUND = 6755399441055744.0            # 1.5 * 2^52: t + _ROUND - _ROUND rounds t to an integer (|t| < 2^51)
_ROUND_BITS = int(np.float64(_ROUND).view(np.int64))


@jit_exp
def _exp1(x):
    """``exp(x)`` for ``-708 <= x <= 709``, about 1 ulp, branch-free (LLVM vectorises a loop of it).

    ``exp(x) = 2^k exp(r)``, ``k = round(x / log 2)``, ``r = x - k log 2`` (Cody-Waite), ``exp(r)``
    by a polynomial of degree 11 on ``|r| <= log(2) / 2`` (its Chebyshev interpolant, error below
    1.7e-17; Horner, fused multiply-adds where the CPU has them). Measured against a long-double
    exponential: at most 0.63 ulp (the degree-13 Taylor polynomial of the previous version: 0.60).
    ``k`` is rounded by adding and subtracting ``1.5 * 2^52`` (no float-to-integer conversion, which
    AVX2 cannot vectorise), and ``2^k`` is written into the exponent bits from the integer bits of that
    sum (a bit cast, no memory).
    """
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11 = _EXP_C
    t = x * _LOG2E + _ROUND
    k = t - _ROUND
    r = (x - k * _LN2_HI) - k * _LN2_LO
    p = c11
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
    return p * _bits_f64((_f64_bits(t) - _ROUND_BITS + 1023) << 52)


@jit_exp
def _exp_into(a, out, n, low):
    """``out[:n] = exp(a[:n])`` for ``a <= 709``, in one loop LLVM vectorises (numba's scalar ``exp``
    is a library call per entry, and numpy's ``exp`` on float64 is one too on CPUs without AVX-512):
    :func:`_exp1` of ``max(a, -708)``. Accurate to about 1 ulp (tested against numpy's ``exp``).
    With ``low`` the arguments below -708 (where ``2^k`` would be subnormal) are
    then redone by ``math.exp``; ``low=False`` skips that pass, for a caller that knows every
    argument is at least -708 (it would otherwise get ``exp(-708)`` for them).
    """
    for j in range(n):
        out[j] = _exp1(max(a[j], -708.0))
    if low:
        for j in range(n):
            if a[j] < -708.0:
                out[j] = math.exp(a[j])


@jit_exp
def _exp_row(a, out, bits, scale, n):
    """``out[:n] = exp(a[:n])`` for ``a <= 709``: :func:`_exp_into` with its pass for arguments below
    -708 (``bits`` and ``scale``, the scratch arrays of an earlier version, are not used)."""
    _exp_into(a, out, n, True)


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


# ----------------------------------------------------------------------------------------
# the symmetric path: blocks of 4 rows
# ----------------------------------------------------------------------------------------
# The tokens are padded with zeros to nb = 4 ceil(n / 4) (coordinates, hb_j and the weights: a padded
# column adds exact zeros to every sum). Row i of the scores holds the columns j = s .. nb - 1 with
# s = 4 floor(i / 4): its diagonal block of 4 and every block to its right; the 4 rows of a block are
# stored one after the other (P = 8 K (K + 1) entries, K = nb / 4). The indices are unsigned (numba then
# emits no wrap-around test and no reference counting in the loops), so that LLVM vectorises the loops
# along j, and every loop runs over a multiple of 4 entries.


@jit
def _blk_entries(nb):
    """The number of stored scores for ``nb`` (a multiple of 4) padded tokens: ``8 K (K + 1)``, K = nb / 4."""
    K = nb // 4
    return 8 * K * (K + 1)


@jit
def _blk_scores(xt, Bm, r, hb, a, b, nb, D):
    """The scores ``a = beta <B x_i, x_j> - hb_i - hb_j`` (``B = Bm[r]``, D = 2 or 3) in the block layout:
    rows ``i < nb``, columns ``j >= 4 floor(i / 4)``; returns their number. The operations and their
    order are those of the earlier packed triangle's pair scores (the same numbers for ``j >= i``).
    Computing each score inside the exponential's loop instead (one loop per row) was measured slower:
    the loop then reloads the polynomial's constants at every iteration."""
    if D == 2:
        return _blk_scores2(xt, Bm, r, hb, a, b, nb)
    return _blk_scores3(xt, Bm, r, hb, a, b, nb)


@jit
def _blk_scores2(xt, Bm, r, hb, a, b, nb):
    zero = _u64(0)
    one = _u64(1)
    three = _u64(3)
    n_ = _u64(nb)
    o = _u64(0)
    for ii in range(nb):
        i = _u64(ii)
        bx0 = b * (Bm[r, 0, 0] * xt[zero, i] + Bm[r, 0, 1] * xt[one, i])
        bx1 = b * (Bm[r, 1, 0] * xt[zero, i] + Bm[r, 1, 1] * xt[one, i])
        h = hb[i]
        s = i - (i & three)
        m = n_ - s
        for q in range(m):
            j = s + q
            a[o + q] = ((-h - hb[j]) + bx0 * xt[zero, j]) + bx1 * xt[one, j]
        o += m
    return o


@jit
def _blk_scores3(xt, Bm, r, hb, a, b, nb):
    zero = _u64(0)
    one = _u64(1)
    two = _u64(2)
    three = _u64(3)
    n_ = _u64(nb)
    o = _u64(0)
    for ii in range(nb):
        i = _u64(ii)
        x0 = xt[zero, i]
        x1 = xt[one, i]
        x2 = xt[two, i]
        bx0 = b * ((Bm[r, 0, 0] * x0 + Bm[r, 0, 1] * x1) + Bm[r, 0, 2] * x2)
        bx1 = b * ((Bm[r, 1, 0] * x0 + Bm[r, 1, 1] * x1) + Bm[r, 1, 2] * x2)
        bx2 = b * ((Bm[r, 2, 0] * x0 + Bm[r, 2, 1] * x1) + Bm[r, 2, 2] * x2)
        h = hb[i]
        s = i - (i & three)
        m = n_ - s
        for q in range(m):
            j = s + q
            a[o + q] = (((-h - hb[j]) + bx0 * xt[zero, j]) + bx1 * xt[one, j]) + bx2 * xt[two, j]
        o += m
    return o


@jit_sum
def _blk_sums3(V0, V1, V2, e, R0, R1, R2, C0, C1, C2, nb):
    """``R_c[i] = sum_j E_ij V_c[j]`` (c = 0, 1, 2; ``i < nb``) from the block layout ``e`` of the symmetric E.

    Per block of 4 rows (columns ``j >= s``): one loop over j with the 12 row sums (each row's sum runs
    along its columns, in lanes of 4 with the reassociation LLVM chooses); then the block's columns to
    the right receive ``E_ij V_c[i]`` of the 4 rows (in ``C_c``, read when row j's block comes), in one
    loop over j for every c, written out (a call per loop costs more than the loop). The column loop also
    runs over the diagonal block, whose ``C_c`` entries have been read by then.
    """
    for j in range(nb):
        C0[j] = 0.0
        C1[j] = 0.0
        C2[j] = 0.0
    one = _u64(1)
    two = _u64(2)
    three = _u64(3)
    four = _u64(4)
    n_ = _u64(nb)
    o = _u64(0)
    s = _u64(0)
    while s < n_:
        m = n_ - s
        pa = o
        pb = o + m
        pc = pb + m
        pd = pc + m
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        b0 = 0.0
        b1 = 0.0
        b2 = 0.0
        c0 = 0.0
        c1 = 0.0
        c2 = 0.0
        d0 = 0.0
        d1 = 0.0
        d2 = 0.0
        for q in range(m):
            j = s + q
            ta = e[pa + q]
            tb = e[pb + q]
            tc = e[pc + q]
            td = e[pd + q]
            u0 = V0[j]
            u1 = V1[j]
            u2 = V2[j]
            a0 += ta * u0
            a1 += ta * u1
            a2 += ta * u2
            b0 += tb * u0
            b1 += tb * u1
            b2 += tb * u2
            c0 += tc * u0
            c1 += tc * u1
            c2 += tc * u2
            d0 += td * u0
            d1 += td * u1
            d2 += td * u2
        R0[s] = C0[s] + a0
        R1[s] = C1[s] + a1
        R2[s] = C2[s] + a2
        R0[s + one] = C0[s + one] + b0
        R1[s + one] = C1[s + one] + b1
        R2[s + one] = C2[s + one] + b2
        R0[s + two] = C0[s + two] + c0
        R1[s + two] = C1[s + two] + c1
        R2[s + two] = C2[s + two] + c2
        R0[s + three] = C0[s + three] + d0
        R1[s + three] = C1[s + three] + d1
        R2[s + three] = C2[s + three] + d2
        ga0 = V0[s]
        gb0 = V0[s + one]
        gc0 = V0[s + two]
        gd0 = V0[s + three]
        ga1 = V1[s]
        gb1 = V1[s + one]
        gc1 = V1[s + two]
        gd1 = V1[s + three]
        ga2 = V2[s]
        gb2 = V2[s + one]
        gc2 = V2[s + two]
        gd2 = V2[s + three]
        for q in range(m):
            ta = e[pa + q]
            tb = e[pb + q]
            tc = e[pc + q]
            td = e[pd + q]
            C0[s + q] += (ta * ga0 + tb * gb0) + (tc * gc0 + td * gd0)
            C1[s + q] += (ta * ga1 + tb * gb1) + (tc * gc1 + td * gd1)
            C2[s + q] += (ta * ga2 + tb * gb2) + (tc * gc2 + td * gd2)
        o = pd + m
        s += four


@jit_sum
def _blk_sums4(V0, V1, V2, V3, e, R0, R1, R2, R3, C0, C1, C2, C3, nb):
    """:func:`_blk_sums3` with four right-hand sides (D = 3)."""
    for j in range(nb):
        C0[j] = 0.0
        C1[j] = 0.0
        C2[j] = 0.0
        C3[j] = 0.0
    one = _u64(1)
    two = _u64(2)
    three = _u64(3)
    four = _u64(4)
    n_ = _u64(nb)
    o = _u64(0)
    s = _u64(0)
    while s < n_:
        m = n_ - s
        pa = o
        pb = o + m
        pc = pb + m
        pd = pc + m
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        b0 = 0.0
        b1 = 0.0
        b2 = 0.0
        b3 = 0.0
        c0 = 0.0
        c1 = 0.0
        c2 = 0.0
        c3 = 0.0
        d0 = 0.0
        d1 = 0.0
        d2 = 0.0
        d3 = 0.0
        for q in range(m):
            j = s + q
            ta = e[pa + q]
            tb = e[pb + q]
            tc = e[pc + q]
            td = e[pd + q]
            u0 = V0[j]
            u1 = V1[j]
            u2 = V2[j]
            u3 = V3[j]
            a0 += ta * u0
            a1 += ta * u1
            a2 += ta * u2
            a3 += ta * u3
            b0 += tb * u0
            b1 += tb * u1
            b2 += tb * u2
            b3 += tb * u3
            c0 += tc * u0
            c1 += tc * u1
            c2 += tc * u2
            c3 += tc * u3
            d0 += td * u0
            d1 += td * u1
            d2 += td * u2
            d3 += td * u3
        R0[s] = C0[s] + a0
        R1[s] = C1[s] + a1
        R2[s] = C2[s] + a2
        R3[s] = C3[s] + a3
        R0[s + one] = C0[s + one] + b0
        R1[s + one] = C1[s + one] + b1
        R2[s + one] = C2[s + one] + b2
        R3[s + one] = C3[s + one] + b3
        R0[s + two] = C0[s + two] + c0
        R1[s + two] = C1[s + two] + c1
        R2[s + two] = C2[s + two] + c2
        R3[s + two] = C3[s + two] + c3
        R0[s + three] = C0[s + three] + d0
        R1[s + three] = C1[s + three] + d1
        R2[s + three] = C2[s + three] + d2
        R3[s + three] = C3[s + three] + d3
        ga0 = V0[s]
        gb0 = V0[s + one]
        gc0 = V0[s + two]
        gd0 = V0[s + three]
        ga1 = V1[s]
        gb1 = V1[s + one]
        gc1 = V1[s + two]
        gd1 = V1[s + three]
        ga2 = V2[s]
        gb2 = V2[s + one]
        gc2 = V2[s + two]
        gd2 = V2[s + three]
        ga3 = V3[s]
        gb3 = V3[s + one]
        gc3 = V3[s + two]
        gd3 = V3[s + three]
        for q in range(m):
            ta = e[pa + q]
            tb = e[pb + q]
            tc = e[pc + q]
            td = e[pd + q]
            C0[s + q] += (ta * ga0 + tb * gb0) + (tc * gc0 + td * gd0)
            C1[s + q] += (ta * ga1 + tb * gb1) + (tc * gc1 + td * gd1)
            C2[s + q] += (ta * ga2 + tb * gb2) + (tc * gc2 + td * gd2)
            C3[s + q] += (ta * ga3 + tb * gb3) + (tc * gc3 + td * gd3)
        o = pd + m
        s += four


@jit
def _half_self_scores(xt, Bm, r, hb, b, n, D):
    """``hb_j = beta <B x_j, x_j> / 2`` for ``j < n`` (``B = Bm[r]``, D = 2 or 3): the operations of the
    loops over k and m in their order (from a sum at 0.0), written out so that LLVM vectorises along j."""
    zero = _u64(0)
    one = _u64(1)
    if D == 2:
        B00, B01, B10, B11 = Bm[r, 0, 0], Bm[r, 0, 1], Bm[r, 1, 0], Bm[r, 1, 1]
        for jj in range(n):
            j = _u64(jj)
            x0 = xt[zero, j]
            x1 = xt[one, j]
            b0 = (0.0 + B00 * x0) + B01 * x1
            b1 = (0.0 + B10 * x0) + B11 * x1
            hb[j] = 0.5 * b * ((0.0 + b0 * x0) + b1 * x1)
        return
    two = _u64(2)
    for jj in range(n):
        j = _u64(jj)
        x0 = xt[zero, j]
        x1 = xt[one, j]
        x2 = xt[two, j]
        b0 = ((0.0 + Bm[r, 0, 0] * x0) + Bm[r, 0, 1] * x1) + Bm[r, 0, 2] * x2
        b1 = ((0.0 + Bm[r, 1, 0] * x0) + Bm[r, 1, 1] * x1) + Bm[r, 1, 2] * x2
        b2 = ((0.0 + Bm[r, 2, 0] * x0) + Bm[r, 2, 1] * x1) + Bm[r, 2, 2] * x2
        hb[j] = 0.5 * b * (((0.0 + b0 * x0) + b1 * x1) + b2 * x2)


@jit
def _sym_step(xt, yt, Bm, r, hb, V0, V1, V2, V3, a, e, R0, R1, R2, R3, C0, C1, C2, C3, b, gm, n, nb, D, low):
    """One (SA-beta) step ``xt -> yt`` for symmetric positive semi-definite B (``Bm[r]``, D x D), D = 2 or 3,
    the tokens padded with zeros to ``nb`` columns; ``V0`` holds the weights ``w_j = m_j e^{hb_j}``.

    With ``hb_j = beta <B x_j, x_j> / 2`` the shifted scores ``E_ij = exp(beta <B x_i, x_j> - hb_i - hb_j)``
    are at most 1 (Cauchy-Schwarz for the form of B) and symmetric, so only the blocks on and right of
    the diagonal (blocks of 4 rows) are evaluated: ``8 K (K + 1)`` exponentials (K = nb / 4; 1248 for
    n = 48, against ``n (n + 1) / 2 = 1176`` for the triangle and ``n^2`` for all pairs), in one vectorised
    call. Every argument is at least ``-2 (hb_i + hb_j)`` (Cauchy-Schwarz again), so when ``hb_j <= 176``
    for all j none is below -708 and the caller passes ``low=False``: the exponentials skip their pass
    for such arguments. A pair in different blocks enters row i with the weight ``w_j`` and row j with
    ``w_i`` (its score computed once, from ``B x_i``, i the row of the upper block); a pair in the same
    block is computed from both rows. ``A_ij = E_ij w_j / sum_l E_il w_l`` is the softmax of
    ``beta <B x_i, x_j> + log m_j``; the sums ``sum_j E_ij w_j`` and ``sum_j E_ij w_j x_kj`` are those
    of ``V_0 = w`` and ``V_{k+1} = w x_k`` (:func:`_blk_sums3`, :func:`_blk_sums4`).
    """
    for j in range(n):
        V1[j] = V0[j] * xt[0, j]
        V2[j] = V0[j] * xt[1, j]
    if D == 3:
        for j in range(n):
            V3[j] = V0[j] * xt[2, j]
    o = _blk_scores(xt, Bm, r, hb, a, b, nb, D)
    _exp_into(a, e, o, low)
    if D == 2:
        _blk_sums3(V0, V1, V2, e, R0, R1, R2, C0, C1, C2, nb)
    else:
        _blk_sums4(V0, V1, V2, V3, e, R0, R1, R2, R3, C0, C1, C2, C3, nb)
    zero = _u64(0)
    one = _u64(1)
    two = _u64(2)
    for ii in range(n):
        i = _u64(ii)
        yt[zero, i] = xt[zero, i] + gm * (R1[i] / R0[i] - xt[zero, i])
        yt[one, i] = xt[one, i] + gm * (R2[i] / R0[i] - xt[one, i])
    if D == 3:
        for ii in range(n):
            i = _u64(ii)
            yt[two, i] = xt[two, i] + gm * (R3[i] / R0[i] - xt[two, i])


@pjit
def _run(X0, W, nact, Bm, sym, beta, gamma, eps, check, gid, hs_lo, hs_hi, HS, pr_lo, pr_hi, PK, PC,
         cap, rec_t, T_out, X_out, X_rec):
    """Step every system r until its exit or ``cap[r]`` steps; one system per thread.

    Two paths per step, with ``hb_j = beta <B x_j, x_j> / 2``: for symmetric positive semi-definite B
    (``sym[r]``) and ``0 <= hb_j <= 600`` for all j, the symmetric path (:func:`_sym_step`: about
    ``n^2 / 2`` exponentials, each at most 1, the row sums at least ``w_i = m_i e^{hb_i}``, at
    most ``sum_j m_j e^{600}``: no overflow, no underflow of a row sum), with its pass for exponential
    arguments below -708 only when some ``hb_j > 176``; otherwise the per-row path (shift: the row
    maximum; ``n^2`` exponentials, every argument through that pass).

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
        nb = (n + 3) // 4 * 4                  # padded with zeros to blocks of 4 (the symmetric path)
        xt = np.zeros((D, nb))                 # the tokens, transposed: the inner loops run over j
        yt = np.zeros((D, nb))
        for i in range(n):
            for k in range(D):
                xt[k, i] = X0[r, i, k]
        P = _blk_entries(nb)                   # the scores of the symmetric path's blocks
        a = np.empty(P)
        e = np.empty(P)
        w = np.zeros(nb)                       # weights w_j = m_j e^{hb_j}, then w_j x_kj (zero-padded)
        V1 = np.zeros(nb)
        V2 = np.zeros(nb)
        V3 = np.zeros(nb)
        R0 = np.empty(nb)                      # the row sums and the column parts (separate 1-d arrays:
        R1 = np.empty(nb)                      # views of a 2-d array cost reference counting per step)
        R2 = np.empty(nb)
        R3 = np.empty(nb)
        C0 = np.empty(nb)
        C1 = np.empty(nb)
        C2 = np.empty(nb)
        C3 = np.empty(nb)
        hb = np.zeros(nb)
        logm = np.empty(n)
        bxi = np.empty(D)
        p = np.empty(D)
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
            _half_self_scores(xt, Bm, r, hb, b, n, D)   # beta <B x_j, x_j> / 2
            top = 0.0
            low = np.inf
            for j in range(n):
                top = max(top, hb[j])
                low = min(low, hb[j])
            if sym[r] and low >= 0.0 and top <= 600.0:
                # B symmetric positive semi-definite: beta S_ij <= hb_i + hb_j, so with the shift
                # hb_i + hb_j every exponential is <= 1 and A_ij ∝ exp(beta S_ij - hb_i - hb_j) w_j.
                for j in range(n):
                    a[j] = hb[j] + logm[j]
                _exp_into(a, w, n, True)
                _sym_step(xt, yt, Bm, r, hb, w, V1, V2, V3, a, e, R0, R1, R2, R3, C0, C1, C2, C3, b, gm, n, nb, D,
                          top > 176.0)
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
                    _exp_into(a, e, n, True)
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


def _broadcast(name, value, R, *, check):
    """``value`` as one float per system (R,), each checked by ``check(name, v)``."""
    a = np.asarray(value, float)
    if a.ndim > 1 or (a.ndim == 1 and a.size not in (1, R)):
        raise ValueError(f"{name} must be a number or one value per system ({R}), got shape {a.shape}")
    a = np.broadcast_to(a.reshape(-1) if a.ndim else a, (R,)).astype(float)
    for v in a:
        check(name, float(v))
    return a


def sabeta_exit_times(x0, sigma, gamma, beta, eps, *, B=None, cap=10**6, watch=None, mass=None, record_times=None,
                      region=None) -> ExitSample:
    """Exit time ``T2`` of (SA-beta) from a clustered configuration, exact stepping, batched.

    ``T2`` is the first ``t >= 1`` at which some token ``x_i^t`` lies farther than ``eps``
    from ``conv{x_k^0 : sigma_k = sigma_i}`` (the exit time of Theorem 5.4, for the
    deterministic dynamics), with ``x_i^{t+1} = x_i^t + gamma (sum_j A_ij x_j^t - x_i^t)`` and
    ``A_ij ∝ m_j exp(beta <B x_i^t, x_j^t>)``, self-interaction included. The library's one exit-time
    function of (SA-beta): its signature and result are those of the chain's
    (:func:`attention_fw.experiments.exit_times.engine_exit_times`, ``stepping_exit_times``);
    nothing is drawn, so there is no ``rng``. Its numbers are those of plain stepping of
    (SA-beta) by :func:`attention_fw.model.dynamics.simulate` (tested against a numpy reference,
    censored runs included).

    Parameters
    ----------
    x0 : (n, d), (R, n, d), or a list of R arrays (n_r, d_r)
        A list holds configurations of different sizes and dimensions in one call; d <= 3.
    sigma : (n,) group labels, or one per system
    gamma : number or one per system (R)
        The step size, ``0 < gamma <= 1`` (the library's one interval).
    beta : number or one per system (R)
        Inverse temperature, ``beta >= 0``. A single configuration with a vector of betas is R systems.
    eps : number or one per system (R)
        ``eps > 0``, or ``inf`` (never exits: just step ``cap`` times).
    B : None (identity), (d, d), or one per system
        Key-query matrix, symmetric positive definite (the setting of Theorem 5.4; anything else is
        refused, naming the hypothesis, as by the other exit-time functions).
    cap : number or one per system
        Steps simulated at most.
    watch : bool array (n,), or one per system, optional
        The tokens whose exit counts (default: all), as in the other exit-time functions.
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
    :class:`~attention_fw.experiments.exit_times.ExitSample`
        The library's one exit-time result: ``times`` (R,) the exit steps, or for a run that had
        not exited within its cap the cap, with ``censored`` (R,) True (the one "no exit"
        marker); ``cap`` the largest cap; ``final`` the list of final configurations
        (n_r, d_r); with ``record_times``, ``path_times`` (those steps) and ``path`` (a list of
        (len(record_times), n_r, d_r), NaN after the exit).

    Examples
    --------
    Three tokens at the vertices of the equilateral triangle: the hull of each group is a point,
    and the three tokens drift inwards together; a larger beta holds them longer:

    >>> v = regular_polygon(3)
    >>> res = sabeta_exit_times(v, [0, 1, 2], 0.1, [2.0, 4.0, 6.0], 0.05, cap=10**5)
    >>> res.times.tolist(), res.censored.tolist()
    ([4.0, 53.0, 917.0], [False, False, False])

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
    gamma = _broadcast("gamma", gamma, R, check=V.step_size)
    beta = _broadcast("beta", beta, R, check=lambda n, v: V.real_scalar(n, v, low=0))
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
    D = max(D, 2)                                    # the kernel's symmetric path: D = 2 or 3 (a zero coordinate)
    if isinstance(B, (list, tuple)):
        Bs = list(B)
    elif B is None:
        Bs = [None] * R
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
        b = _key_query(Bs[r], d)                     # symmetric positive definite, (d, d): Theorem 5.4's B
        b = np.eye(d) if b is None else b
        X0[r, :n, :d] = a
        nact[r] = n
        Bm[r, :d, :d] = b
        Bm[r, d:, d:] = np.eye(D - d)
        sym[r] = _SYMMETRIC_PATH and bool(np.allclose(b, b.T, rtol=0, atol=0) and np.linalg.eigvalsh(b).min() >= 0)
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
        w = None if watch is None else _watch(watch[r] if isinstance(watch, (list, tuple)) else watch, n)
        if w is not None and not w.all():         # tokens not watched: a region holding every point
            gid[r, ~w] = len(hs_lo)
            HS.append(np.r_[np.zeros(D), 1.0][None])  # <0, x> <= 1: never violated, distance 0
            PC.append(np.zeros((0, 3, D)))
            PK.append(np.zeros(0, np.int64))
            hs_lo.append(nh)
            nh += 1
            hs_hi.append(nh)
            pr_lo.append(npr)
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
    censored = T <= 0                                # the kernel writes -1 for "no exit within the cap"
    out = ExitSample(times=np.where(censored, caps, T).astype(float), censored=censored, cap=float(caps.max()),
                     final=[X_out[r, :n, :d].copy() for r, (n, d) in enumerate(shapes)])
    if record_times is not None:
        out.path_times = rec.copy()
        out.path = [X_rec[r, :, :n, :d].copy() for r, (n, d) in enumerate(shapes)]
    return out


def _stepping_exit_time(x0, sigma, gamma, beta, eps, *, B=None, cap=10**6, watch=None) -> ExitSample:
    """The plain numpy reference of :func:`sabeta_exit_times` for one system (for the tests): one run
    stepped by :func:`attention_fw.model.dynamics.simulate` of :class:`~attention_fw.model.dynamics.Softmax`
    (``softmax_step``: another implementation, with other rounding) with the exit as its stop
    condition. The same arguments (one configuration, one value of each parameter; no ``mass`` or
    ``region``) and the same result: ``times`` (1,), ``censored`` (1,) (no exit within ``cap``, the
    time then ``cap``), ``cap``, ``final`` (a list of one (n, d) array).

    Examples
    --------
    >>> x0 = regular_polygon(3)
    >>> ref = _stepping_exit_time(x0, [0, 1, 2], 0.1, 4.0, 0.05, cap=1000)
    >>> kern = sabeta_exit_times(x0, [0, 1, 2], 0.1, 4.0, 0.05, cap=1000)
    >>> ref.times.tolist(), ref.censored.tolist(), kern.times.tolist()
    ([53.0], [False], [53.0])
    """
    x0, sigma, gamma, beta, eps = _check_common(x0, sigma, gamma, beta, eps)
    Bm = _key_query(B, x0.shape[1])
    cap = V.positive_int("cap", cap)
    region = _ExitRegion(x0, sigma, eps, _watch(watch, len(x0)))
    res = dynamics.simulate(x0, dynamics.Softmax(gamma, beta, Bm), cap, stop=lambda x, t: region(x[None])[0])
    exited = res.stopped > 0
    return ExitSample(times=np.array([float(res.stopped if exited else cap)]), censored=np.array([not exited]),
                      cap=float(cap), final=[res.x.copy()])
