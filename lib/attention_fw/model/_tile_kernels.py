"""Passes over one tile of scores for the tiled steps (``attention_fw.model.tiled``): numba, numpy otherwise.

A tile is a block ``Z[r, i, j]`` of scores of ``Rb`` systems, ``q`` queries ``i`` and ``k`` keys
``j`` (C-contiguous, shape ``(Rb, q, k)``). The products that make it and its exponential run in
BLAS and in numpy's ``exp``; the passes here carry the running state of each query row from one
tile of keys to the next:

* ``online_shift``   running maximum of a softmax row: shift the tile by it (clamped at
                     ``EXP_FLOOR``) and rescale what was accumulated when the maximum grows;
* ``leader_scan``    running leader set of a hardmax row with the tie rule of ``dynamics``
                     (see :func:`attention_fw.model.tiled.hardmax_step`);
* ``leader_scan_cols`` the same for the queries of a tile's columns (keys its rows: the transposed
                     tile of symmetric scores), given the columns' maxima (bounded scale only);
* ``leader_sums``    the sum of the values of each row's leaders (a 0/1 mask over the keys), in
                     key order from 0 as ``leader_scan`` adds them (numba; numpy: one product);
* ``row_sums``       the tile's row sums;
* ``tile_split``     for selected rows: the largest weight, and the sums of the weights below and
                     not below ``threshold`` times it (the two groups of ``dynamics.sap_step``);
* ``tile_pick``      for selected rows: inversion of the cumulative weights within one group;
* ``race_terms``     the chain's streaming sampler at one tile: which rows take their first pick
                     here, and for the others the ``-log`` of the probability of switching to this
                     tile (``log1p(T / W)``); adds the tile's weights to the running totals;
* ``switch_rows``    the rows that switch, in row-major order, from those flags and the draws.

Tiles of the float32 path are float32 arrays; the running state (maxima, sums, leader
sets, picks) is float64 in either precision, and the sums over a tile are made in float64.

Both implementations have the same contract and are tested against each other
(``tests/test_tiled.py``). Which one runs follows ``attention_fw.model._kernels`` (numba unless
``ATTENTION_FW_KERNELS=numpy``).
"""
from __future__ import annotations

import types

import numpy as np

from . import _kernels

__all__ = ["EXP_FLOOR", "impl", "KERNELS", "NUMPY"]

EXP_FLOOR = _kernels.EXP_FLOOR


def impl() -> types.SimpleNamespace:
    """The tile passes of the backend that ``_kernels.impl()`` chose (numba or numpy)."""
    if _kernels.impl().name == "numba":
        global _NUMBA
        if _NUMBA is None:
            _NUMBA = _numba_kernels()
        if _NUMBA is not None:
            return _NUMBA
    return NUMPY


_NUMBA = None


# ----------------------------------------------------------------------------- numpy versions
def _np_online_shift(Z, c, acc):
    """Per row ``(r, i)``: ``m = max(c[r, i], max_j Z[r, i, j])``; ``acc[r, i, :] *= exp(c - m)``;
    ``c[r, i] = m``; ``Z[r, i, :] = max(Z[r, i, :] - m, EXP_FLOOR)``.

    ``c = -inf`` (nothing accumulated yet) is allowed: the factor is then 0.
    """
    new = np.maximum(c, Z.max(axis=-1))
    acc *= np.exp(c - new)[..., None]
    c[...] = new
    Z -= new[..., None]
    np.maximum(Z, EXP_FLOOR, out=Z)


def _np_leader_scan(S, vals, k0, fs, ist, acc, tol, track_low=True):
    """One tile of scores ``S`` (keys ``k0, k0 + 1, ...``, values ``vals`` of shape (Rb, k, m)).

    State per row: ``fs[..., 0:4] = top, low, mlow, xhigh`` (running max and min of the scores,
    smallest score among the current members, largest score among the non-members seen) and
    ``ist[..., 0:2] = count, first argmax``; ``acc`` the sum of the members' values. Members are the
    keys with ``S >= top - tol max(top, -low)`` for the running ``top`` and ``low``; when the
    threshold passes the previous top, every member so far drops out (its score is at most that
    top). The caller checks at the end that ``mlow`` and ``xhigh`` lie on the right sides of the
    final threshold.

    ``track_low=False``: ``low`` is left as the caller set it, a lower bound ``-U`` of every score
    (``U >= max_j |S_ij|``), so the members are the keys with ``S >= top - tol U``, a superset of
    the tie rule's; the caller then checks that ``mlow`` lies above the largest possible threshold.
    """
    top, low, mlow, xhigh = (fs[..., k] for k in range(4))
    cnt, arg = ist[..., 0], ist[..., 1]
    old_top = top.copy()
    tmax = S.max(axis=-1)
    better = tmax > top
    arg[better] = k0 + S.argmax(axis=-1)[better]
    np.maximum(top, tmax, out=top)
    if track_low:
        np.minimum(low, S.min(axis=-1), out=low)
    thr = top - tol * np.maximum(top, -low)
    evict = (cnt > 0) & (thr > old_top)
    xhigh[evict] = np.maximum(xhigh[evict], old_top[evict])
    cnt[evict] = 0
    mlow[evict] = np.inf
    acc[evict] = 0.0
    mask = S >= thr[..., None]
    acc += np.matmul(mask.astype(np.float64), vals)
    cnt += mask.sum(axis=-1)
    np.minimum(mlow, np.min(S, axis=-1, where=mask, initial=np.inf), out=mlow)
    np.maximum(xhigh, np.max(S, axis=-1, where=~mask, initial=-np.inf), out=xhigh)


def _np_leader_scan_cols(S, cmax, vals, k0, fs, ist, acc, tol):
    """``leader_scan`` of the transposed tile ``S.T`` (one system: ``S`` (q, k), the state of the k
    column queries ``fs`` (k, 4), ``ist`` (k, 2), ``acc`` (k, m); keys ``k0 + i`` of values
    ``vals`` (q, m)), with ``track_low=False``; ``cmax`` holds the columns' maxima."""
    _np_leader_scan(np.ascontiguousarray(S.T)[None], vals[None], k0, fs[None], ist[None], acc[None], tol, False)


def _np_leader_sums(mask, vals, out):
    """``out[t] = sum_j mask[t, j] vals[j]`` (mask (rows, n) of bools, vals (n, m))."""
    np.matmul(mask.astype(np.float64), vals, out=out)


def _np_row_sums(Z, out):
    """``out[r, i] = sum_j Z[r, i, j]``."""
    np.add.reduce(Z, axis=-1, out=out)


def _row_chunks(Z, count):
    """Slices of at most a quarter of a tile's rows: the numpy passes below copy the rows they
    read, and the copies must stay well inside the memory budget."""
    step = max(1, Z.shape[0] * Z.shape[1] // 4)
    return (slice(s, min(count, s + step)) for s in range(0, count, step))


def _np_tile_split(Z, rr, ii, threshold, top, s_small, s_big):
    """For each selected row ``(rr[k], ii[k])``: ``top[k] = max_j Z``, and the sums of the weights
    ``w_j = Z_j / top[k]`` below ``threshold`` and not below it."""
    for c in _row_chunks(Z, rr.size):
        W = Z[rr[c], ii[c]]
        np.max(W, axis=-1, out=top[c])
        W /= top[c, None]
        small = W < threshold
        np.sum(W, axis=-1, where=small, out=s_small[c])
        np.sum(W, axis=-1, where=~small, out=s_big[c])


def _np_tile_pick(Z, rr, ii, top, threshold, pick_small, U, J):
    """For each selected row: the first j of the chosen group (``w_j < threshold`` if
    ``pick_small[k]``, else the others; ``w_j = Z_j / top[k]``) where the cumulative group weight
    reaches ``U[k]`` times the group's total, among the positive weights (``U`` in (0, 1])."""
    for c in _row_chunks(Z, rr.size):
        W = Z[rr[c], ii[c]] / top[c, None]
        G = np.where((W < threshold) == pick_small[c, None], W, 0.0)
        cum = np.cumsum(G, axis=-1)
        hit = (cum >= U[c, None] * cum[:, -1:]) & (G > 0.0)
        last = W.shape[-1] - 1 - np.argmax((G > 0.0)[:, ::-1], axis=-1)
        J[c] = np.where(hit.any(axis=-1), np.argmax(hit, axis=-1), last)


def _np_race_terms(w, total, t, flag):
    """Per row ``(r, i)`` with tile weight ``w[r, i] > 0``: ``flag = 1`` when nothing was seen
    before (``total[r, i, 0] == 0``: the first pick, probability 1), else ``flag = 2`` and the next
    entry of ``t`` (row-major order) is ``-log(w / (T + w)) = log1p(T / w)`` for ``T = total``
    (``log(T) - log(w)`` where ``T / w`` overflows); ``flag = 0`` otherwise. Then ``total += w``.
    Returns the number of entries of ``t`` written."""
    before = total[..., 0]
    positive = w > 0.0
    race = (before > 0.0) & positive
    flag[...] = np.where(race, 2, np.where((before == 0.0) & positive, 1, 0))
    b, p = before[race], w[race]
    with np.errstate(divide="ignore", over="ignore"):
        ratio = b / p
        out = np.log1p(ratio)
        far = np.isinf(ratio)
        out[far] = np.log(b[far]) - np.log(p[far])
    t[:out.size] = out
    before += w
    return out.size


def _np_switch_rows(flag, hits, rr, ii):
    """The rows ``(rr, ii)`` (row-major) with ``flag == 1``, or ``flag == 2`` and a true draw:
    ``hits`` holds one draw per ``flag == 2`` row in row-major order. Returns their number."""
    switch = flag == 1
    switch[flag == 2] = hits
    r, i = np.nonzero(switch)
    rr[:r.size], ii[:r.size] = r, i
    return r.size


KERNELS = ("online_shift", "leader_scan", "leader_scan_cols", "leader_sums",
           "row_sums", "tile_split", "tile_pick", "race_terms", "switch_rows")

NUMPY = types.SimpleNamespace(name="numpy", **{k: globals()["_np_" + k] for k in KERNELS})


# ----------------------------------------------------------------------------- numba versions
def _numba_kernels():
    decorators = _kernels.jit_decorators()
    if decorators is None:  # pragma: no cover - numba is pinned
        return None
    jit, jit_sum = decorators

    @jit
    def online_shift(Z, c, acc):
        Rb, q, k = Z.shape
        m = acc.shape[2]
        for r in range(Rb):
            for i in range(q):
                top = Z[r, i, 0]
                for j in range(1, k):
                    if Z[r, i, j] > top:
                        top = Z[r, i, j]
                old = c[r, i]
                if top > old:
                    f = np.exp(old - top)
                    for a in range(m):
                        acc[r, i, a] *= f
                    c[r, i] = top
                else:
                    top = old
                for j in range(k):
                    Z[r, i, j] = max(Z[r, i, j] - top, -750.0)  # EXP_FLOOR

    @jit
    def leader_scan(S, vals, k0, fs, ist, acc, tol, track_low=True):
        Rb, q, k = S.shape
        m = vals.shape[2]
        for r in range(Rb):
            for i in range(q):
                if not track_low:  # the running maximum alone (the caller's bound stands for the minimum)
                    a0 = S[r, i, 0]
                    a1, a2, a3, a4, a5, a6, a7 = a0, a0, a0, a0, a0, a0, a0
                    j = 0
                    while j + 8 <= k:
                        s0, s1, s2, s3 = S[r, i, j], S[r, i, j + 1], S[r, i, j + 2], S[r, i, j + 3]
                        a0 = s0 if s0 > a0 else a0
                        a1 = s1 if s1 > a1 else a1
                        a2 = s2 if s2 > a2 else a2
                        a3 = s3 if s3 > a3 else a3
                        s0, s1, s2, s3 = S[r, i, j + 4], S[r, i, j + 5], S[r, i, j + 6], S[r, i, j + 7]
                        a4 = s0 if s0 > a4 else a4
                        a5 = s1 if s1 > a5 else a5
                        a6 = s2 if s2 > a6 else a6
                        a7 = s3 if s3 > a7 else a7
                        j += 8
                    while j < k:
                        s0 = S[r, i, j]
                        a0 = s0 if s0 > a0 else a0
                        j += 1
                    tmax = max(max(max(a0, a1), max(a2, a3)), max(max(a4, a5), max(a6, a7)))
                    low = fs[r, i, 1]
                else:
                    # largest and smallest score of the row, with four accumulators each (a short
                    # dependency chain); written out here, as a call to another compiled function
                    # would keep numba from caching this one on disk
                    a0 = S[r, i, 0]
                    a1, a2, a3 = a0, a0, a0
                    b0, b1, b2, b3 = a0, a0, a0, a0
                    j = 0
                    while j + 4 <= k:
                        s0, s1, s2, s3 = S[r, i, j], S[r, i, j + 1], S[r, i, j + 2], S[r, i, j + 3]
                        a0 = s0 if s0 > a0 else a0
                        a1 = s1 if s1 > a1 else a1
                        a2 = s2 if s2 > a2 else a2
                        a3 = s3 if s3 > a3 else a3
                        b0 = s0 if s0 < b0 else b0
                        b1 = s1 if s1 < b1 else b1
                        b2 = s2 if s2 < b2 else b2
                        b3 = s3 if s3 < b3 else b3
                        j += 4
                    while j < k:
                        s0 = S[r, i, j]
                        a0 = s0 if s0 > a0 else a0
                        b0 = s0 if s0 < b0 else b0
                        j += 1
                    tmax = max(max(a0, a1), max(a2, a3))
                    tmin = min(min(b0, b1), min(b2, b3))
                    low = min(fs[r, i, 1], tmin)
                old_top = fs[r, i, 0]
                top = max(old_top, tmax)
                thr = top - tol * max(top, -low)
                mlow = fs[r, i, 2]
                xhigh = fs[r, i, 3]
                cnt = ist[r, i, 0]
                if cnt > 0 and thr > old_top:  # every member so far scores <= old_top < thr
                    xhigh = max(xhigh, old_top)
                    cnt = 0
                    mlow = np.inf
                    for a in range(m):
                        acc[r, i, a] = 0.0
                if tmax < thr:  # no member in this tile (the usual case): one pass was enough
                    xhigh = max(xhigh, tmax)
                else:
                    new_arg = tmax > old_top
                    for j in range(k):
                        s = S[r, i, j]
                        if s >= thr:
                            cnt += 1
                            if s < mlow:
                                mlow = s
                            for a in range(m):
                                acc[r, i, a] += vals[r, j, a]
                            if new_arg and s == tmax:
                                ist[r, i, 1] = k0 + j
                                new_arg = False
                        elif s > xhigh:
                            xhigh = s
                fs[r, i, 0] = top
                fs[r, i, 1] = low
                fs[r, i, 2] = mlow
                fs[r, i, 3] = xhigh
                ist[r, i, 0] = cnt

    @jit
    def leader_scan_cols(S, cmax, vals, k0, fs, ist, acc, tol):
        q, k = S.shape
        m = vals.shape[1]
        for j in range(k):
            tmax = cmax[j]
            old_top = fs[j, 0]
            top = max(old_top, tmax)
            thr = top - tol * max(top, -fs[j, 1])
            mlow = fs[j, 2]
            xhigh = fs[j, 3]
            cnt = ist[j, 0]
            if cnt > 0 and thr > old_top:
                xhigh = max(xhigh, old_top)
                cnt = 0
                mlow = np.inf
                for a in range(m):
                    acc[j, a] = 0.0
            if tmax < thr:
                xhigh = max(xhigh, tmax)
            else:
                new_arg = tmax > old_top
                for i in range(q):
                    s = S[i, j]
                    if s >= thr:
                        cnt += 1
                        if s < mlow:
                            mlow = s
                        for a in range(m):
                            acc[j, a] += vals[i, a]
                        if new_arg and s == tmax:
                            ist[j, 1] = k0 + i
                            new_arg = False
                    elif s > xhigh:
                        xhigh = s
            fs[j, 0] = top
            fs[j, 2] = mlow
            fs[j, 3] = xhigh
            ist[j, 0] = cnt

    @jit
    def leader_sums(mask, vals, out):
        rows, n = mask.shape
        m = vals.shape[1]
        for t in range(rows):
            for a in range(m):
                out[t, a] = 0.0
            for j in range(n):
                if mask[t, j]:
                    for a in range(m):
                        out[t, a] += vals[j, a]

    @jit_sum
    def row_sums(Z, out):
        Rb, q, k = Z.shape
        for r in range(Rb):
            for i in range(q):
                s = 0.0
                for j in range(k):
                    s += Z[r, i, j]
                out[r, i] = s

    @jit
    def tile_split(Z, rr, ii, threshold, top, s_small, s_big):
        k = Z.shape[2]
        for t in range(rr.shape[0]):
            r, i = rr[t], ii[t]
            mx = Z[r, i, 0]
            for j in range(1, k):
                if Z[r, i, j] > mx:
                    mx = Z[r, i, j]
            top[t] = mx
            a = 0.0
            b = 0.0
            for j in range(k):
                w = Z[r, i, j] / mx
                if w < threshold:
                    a += w
                else:
                    b += w
            s_small[t] = a
            s_big[t] = b

    @jit
    def tile_pick(Z, rr, ii, top, threshold, pick_small, U, J):
        k = Z.shape[2]
        for t in range(rr.shape[0]):
            r, i = rr[t], ii[t]
            mx = top[t]
            want = pick_small[t]
            total = 0.0
            last = k - 1
            for j in range(k):
                w = Z[r, i, j] / mx
                if (w < threshold) == want:
                    total += w
                    if w > 0.0:
                        last = j
            target = U[t] * total
            acc = 0.0
            pick = last
            for j in range(k):
                w = Z[r, i, j] / mx
                if (w < threshold) == want:
                    acc += w
                    if acc >= target and w > 0.0:
                        pick = j
                        break
            J[t] = pick

    @jit
    def race_terms(w, total, t, flag):
        Rb, q = w.shape
        c = 0
        for r in range(Rb):
            for i in range(q):
                b = total[r, i, 0]
                p = w[r, i]
                f = 0
                if p > 0.0:
                    if b > 0.0:
                        f = 2
                        ratio = b / p
                        if np.isinf(ratio):
                            t[c] = np.log(b) - np.log(p)
                        else:
                            t[c] = np.log1p(ratio)
                        c += 1
                    elif b == 0.0:
                        f = 1
                flag[r, i] = f
                total[r, i, 0] = b + p
        return c

    @jit
    def switch_rows(flag, hits, rr, ii):
        Rb, q = flag.shape
        c = 0
        h = 0
        for r in range(Rb):
            for i in range(q):
                f = flag[r, i]
                take = f == 1
                if f == 2:
                    take = hits[h]
                    h += 1
                if take:
                    rr[c] = r
                    ii[c] = i
                    c += 1
        return c

    compiled = locals()
    _kernels.announce_compile("tiled-step", [compiled[k] for k in KERNELS])
    return types.SimpleNamespace(name="numba", **{k: compiled[k] for k in KERNELS})
