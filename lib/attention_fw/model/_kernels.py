"""Fused passes of the batched steps: compiled with numba when it is available, numpy otherwise.

The matrix products and the exponential of a step run in BLAS and in numpy's vectorised
``exp``; what is left are short passes over the arrays (a scaled transpose, row sums, a
row scaling, the leader scan of the hardmax, the two-group weight sums and picks of SAP). Each pass done by a separate numpy call
re-reads megabytes from memory and pays numpy's per-call overhead, which together cost
as much as the products themselves (see ``make bench``). Here every such pass is one
loop that touches each entry once.

Both implementations have the same contract and are tested against each other and
against the unfused formulas (``tests/test_kernels.py``). Numba is chosen at the first
call; ``ATTENTION_FW_KERNELS=numpy`` forces the numpy versions (for machines without
numba wheels, and for the tests). The compiled code is cached next to this file
(``__pycache__``), so only the first run on a fresh checkout compiles (about a second), and
says so once (:func:`announce_compile`, a line on the ``attention_fw`` logger).

Shapes: every kernel takes 3-d arrays ``(R, n, d)`` (a single system is ``(1, n, d)``),
C-contiguous where it writes.
"""
from __future__ import annotations

import logging
import os
import sys
import types

import numpy as np

from ._checks import leader_mask

__all__ = ["backend", "impl", "EXP_FLOOR", "KERNELS", "NUMPY", "jit_decorators", "announce_compile", "LOGGER"]

LOGGER = logging.getLogger("attention_fw")
"""The library's logger: one line when compiled kernels are first compiled (``announce_compile``)."""

_ANNOUNCED: set[str] = set()


def _cached(dispatcher) -> bool:
    """True when numba's on-disk cache holds compiled code of ``dispatcher`` (its index file exists)."""
    try:
        return os.path.exists(dispatcher._cache._cache_file._index_path)
    except AttributeError:  # another numba layout: say nothing rather than guess
        return True


def announce_compile(what: str, dispatchers) -> None:
    """Say once per process, in one log line, that the kernels of ``what`` are compiled now (no cache yet).

    Numba compiles a kernel at its first call and keeps it in its cache (``__pycache__`` beside
    the module, or numba's user-wide cache when that folder is read-only), so later processes
    load it in milliseconds. The line goes to the ``attention_fw`` logger, at WARNING level when
    standard error is a terminal (shown without any logging set-up) and INFO otherwise (so that
    notebooks and logs stay clean unless one asks: ``logging.getLogger("attention_fw")``).
    """
    if what in _ANNOUNCED:
        return
    _ANNOUNCED.add(what)
    if any(_cached(d) for d in dispatchers):   # a cache from an earlier run (kernels never called stay uncached)
        return
    level = logging.WARNING if getattr(sys.stderr, "isatty", lambda: False)() else logging.INFO
    LOGGER.log(level, "attention_fw: compiling the %s kernels once (seconds); later runs load them from "
               "numba's cache", what)

_IMPL = None


def backend() -> str:
    """``"numba"`` or ``"numpy"``: which implementation the steps use."""
    return impl().name


def impl() -> types.SimpleNamespace:
    """The kernels (numba if importable and not disabled, else numpy), chosen once."""
    global _IMPL
    if _IMPL is None:
        choice = os.environ.get("ATTENTION_FW_KERNELS", "numba").strip().lower()
        if choice not in ("numba", "numpy"):
            raise ValueError(f"ATTENTION_FW_KERNELS must be 'numba' or 'numpy', got {choice!r}")
        _IMPL = _numba_kernels() if choice == "numba" else None
        if _IMPL is None:
            _IMPL = NUMPY
    return _IMPL


# ----------------------------------------------------------------------------- numpy versions
def _np_scaled_transpose(x, beta, xt):
    """``xt[r, k, i] = beta x[r, i, k]``; returns ``(max_i |x_i|^2, sum_i |x_i|^2)``.

    The sum is NaN or inf whenever an entry of x is (or the squares overflow): the caller's
    cue to run the full finiteness check, so that finite input is read only once.
    """
    with np.errstate(over="ignore"):  # overflow is reported through the returned squares
        np.multiply(np.swapaxes(x, -1, -2), beta, out=xt)
    return _np_squares(x)


def _np_squares(x):
    """``(max_i |x_i|^2, sum_i |x_i|^2)`` without overflow warnings (an overflow shows as inf)."""
    with np.errstate(over="ignore"):
        sq = np.einsum("...i,...i->...", x, x)
        return float(sq.max()), float(sq.sum())


def _np_row_sums_shift(Z, c, total):
    """``total[r, i] = sum_j Z[r, i, j]``, then ``Z[r, i, i] += c total[r, i]``."""
    np.add.reduce(Z, axis=-1, out=total)
    if c != 0.0:
        n = Z.shape[-1]
        diagonal = Z.reshape(Z.shape[:-2] + (n * n,))[..., :: n + 1]
        diagonal += c * total


def _np_scale_rows(y, g, total):
    """``y[r, i, :] *= g / total[r, i]`` (``total`` is overwritten)."""
    np.divide(g, total, out=total)
    y *= total[..., None]


EXP_FLOOR = -750.0  # exp of anything below is 0.0 in double precision; numpy's exp is slow down there


def _np_shift_rows(Z):
    """``Z[r, i, :] -= max_j Z[r, i, j]``, clamped below at ``EXP_FLOOR`` (which changes no exp)."""
    np.subtract(Z, Z.max(axis=-1)[..., None], out=Z)
    np.maximum(Z, EXP_FLOOR, out=Z)


def _np_weight_split(W, threshold, s_small, s_big):
    """Per row of ``W`` (R, n, n): the sums of the weights below and not below ``threshold``."""
    small = W < threshold
    np.sum(W, axis=-1, where=small, out=s_small)
    np.sum(W, axis=-1, where=~small, out=s_big)


def _np_group_pick(W, threshold, pick_small, U, J):
    """Per row: the index j of the group (weights below ``threshold`` if ``pick_small`` else the
    others) where the cumulative group weight first reaches ``U`` times the group's total (U in (0, 1])."""
    small = W < threshold
    G = np.where(small == pick_small[..., None], W, 0.0)
    cum = np.cumsum(G, axis=-1)
    u = U[..., None] * cum[..., -1:]
    J[...] = np.minimum((cum < u).sum(axis=-1), W.shape[-1] - 1)


def _np_hardmax_combine(S, x, gamma, tol, out):
    """``out_i = x_i + gamma (mean of the tied leaders x_j - x_i)``, leaders ``S_ij >= top_i - tol scale_i``.

    ``top_i = max_j S_ij`` and ``scale_i = max_j |S_ij|``: the tie rule of :mod:`._checks`.
    """
    W = leader_mask(S, tol).astype(np.float64)
    np.matmul(W, x, out=out)
    out /= W.sum(axis=-1, keepdims=True)
    out -= x
    out *= gamma
    out += x


def _np_hardmax_small(bx, x, gamma, tol, out):
    """:func:`_np_hardmax_combine` with the scores ``S_ij = <bx_i, x_j>`` computed inside (small d).

    Returns ``(max_i |x_i|^2, sum_i |x_i|^2)`` as :func:`_np_scaled_transpose` does.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # the caller redoes a step whose scores overflow
        _np_hardmax_combine(np.matmul(bx, np.swapaxes(x, -1, -2)), x, gamma, tol, out)
    return _np_squares(x)


# The contract: every implementation provides exactly these kernels.
KERNELS = ("scaled_transpose", "row_sums_shift", "scale_rows", "shift_rows", "hardmax_combine",
           "hardmax_small", "weight_split", "group_pick")

NUMPY = types.SimpleNamespace(name="numpy", **{k: globals()["_np_" + k] for k in KERNELS})


# ----------------------------------------------------------------------------- numba versions
def jit_decorators():
    """``(jit, jit_sum)``: numba's ``njit`` with the options of every kernel here and in
    ``_tile_kernels``, or None when numba is not importable.

    ``jit_sum`` also lets LLVM reassociate additions, which vectorises row sums (the result
    differs from a left-to-right sum only by rounding); no "no NaN / no inf" assumptions are made.
    """
    try:
        import numba
    except ImportError:
        return None
    # error_model="numpy": a division by zero gives inf or NaN as in numpy, not an exception.
    jit = numba.njit(cache=True, nogil=True, error_model="numpy")
    jit_sum = numba.njit(cache=True, nogil=True, error_model="numpy",
                         fastmath={"reassoc", "nsz", "contract"})
    return jit, jit_sum


def _numba_kernels():
    decorators = jit_decorators()
    if decorators is None:
        return None
    jit, jit_sum = decorators

    @jit
    def scaled_transpose(x, beta, xt):
        R, n, d = x.shape
        top = 0.0
        acc = 0.0
        for r in range(R):
            for i in range(n):
                s = 0.0
                for k in range(d):
                    v = x[r, i, k]
                    xt[r, k, i] = beta * v
                    s += v * v
                acc += s
                if s > top:
                    top = s
        return top, acc

    @jit_sum
    def row_sums_shift(Z, c, total):
        R, n, m = Z.shape
        for r in range(R):
            for i in range(n):
                s = 0.0
                for j in range(m):
                    s += Z[r, i, j]
                total[r, i] = s
                Z[r, i, i] += c * s

    @jit
    def scale_rows(y, g, total):
        R, n, d = y.shape
        for r in range(R):
            for i in range(n):
                f = g / total[r, i]
                total[r, i] = f
                for k in range(d):
                    y[r, i, k] *= f

    @jit
    def shift_rows(Z):
        R, n, m = Z.shape
        for r in range(R):
            for i in range(n):
                top = Z[r, i, 0]
                for j in range(1, m):
                    if Z[r, i, j] > top:
                        top = Z[r, i, j]
                for j in range(m):
                    Z[r, i, j] = max(Z[r, i, j] - top, -750.0)  # EXP_FLOOR

    @jit
    def hardmax_combine(S, x, gamma, tol, out):
        R, n, d = x.shape
        acc = np.empty(d)
        for r in range(R):
            for i in range(n):
                top = S[r, i, 0]
                low = top
                for j in range(1, n):
                    s = S[r, i, j]
                    if s > top:
                        top = s
                    if s < low:
                        low = s
                scale = max(top, -low)
                threshold = top - tol * scale
                for k in range(d):
                    acc[k] = 0.0
                count = 0
                for j in range(n):
                    if S[r, i, j] >= threshold:
                        count += 1
                        for k in range(d):
                            acc[k] += x[r, j, k]
                for k in range(d):
                    xi = x[r, i, k]
                    out[r, i, k] = xi + gamma * (acc[k] / count - xi)

    @jit
    def hardmax_small(bx, x, gamma, tol, out):
        R, n, d = x.shape
        xt = np.empty((d, n))  # the system's tokens, transposed: the score loops run over j
        row = np.empty(n)
        acc = np.empty(d)
        top_sq = 0.0
        sum_sq = 0.0  # NaN or inf as soon as an entry is (or the squares overflow)
        for r in range(R):
            for j in range(n):
                s = 0.0
                for k in range(d):
                    v = x[r, j, k]
                    s += v * v
                    xt[k, j] = v
                sum_sq += s
                if s > top_sq:
                    top_sq = s
            for i in range(n):
                b = bx[r, i, 0]
                for j in range(n):
                    row[j] = b * xt[0, j]
                for k in range(1, d):
                    b = bx[r, i, k]
                    for j in range(n):
                        row[j] += b * xt[k, j]
                top = row[0]
                low = row[0]
                for j in range(1, n):
                    top = max(top, row[j])
                    low = min(low, row[j])
                threshold = top - tol * max(top, -low)
                for k in range(d):
                    acc[k] = 0.0
                count = 0
                for j in range(n):
                    if row[j] >= threshold:
                        count += 1
                        for k in range(d):
                            acc[k] += xt[k, j]
                for k in range(d):
                    xi = x[r, i, k]
                    out[r, i, k] = xi + gamma * (acc[k] / count - xi)
        return top_sq, sum_sq

    @jit
    def weight_split(W, threshold, s_small, s_big):
        R, n, m = W.shape
        for r in range(R):
            for i in range(n):
                a = 0.0
                b = 0.0
                for j in range(m):
                    w = W[r, i, j]
                    if w < threshold:
                        a += w
                    else:
                        b += w
                s_small[r, i] = a
                s_big[r, i] = b

    @jit
    def group_pick(W, threshold, pick_small, U, J):
        R, n, m = W.shape
        for r in range(R):
            for i in range(n):
                want = pick_small[r, i]
                total = 0.0
                last = m - 1
                for j in range(m):
                    w = W[r, i, j]
                    if (w < threshold) == want:
                        total += w
                        if w > 0.0:
                            last = j
                target = U[r, i] * total
                acc = 0.0
                pick = last
                for j in range(m):
                    w = W[r, i, j]
                    if (w < threshold) == want:
                        acc += w
                        if acc >= target and w > 0.0:
                            pick = j
                            break
                J[r, i] = pick

    compiled = locals()
    announce_compile("batched-step", [compiled[k] for k in KERNELS])
    return types.SimpleNamespace(name="numba", **{k: compiled[k] for k in KERNELS})
