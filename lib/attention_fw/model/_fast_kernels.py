"""Compiled passes of :mod:`attention_fw.model.fast` (numba; ``None`` without it).

Each pass reads the ``(n, d)`` tokens once. The hull leader scan repeats the arithmetic of
``_kernels.hardmax_small`` operation for operation (the score ``b_0 x_0 + b_1 x_1 + ...`` in that
order, the same threshold, the tied tokens summed in index order), so that on the same candidate
set it produces the same bits.
"""
from __future__ import annotations

import types

import numpy as np

from ._kernels import jit_decorators

__all__ = ["impl"]

_IMPL: types.SimpleNamespace | None = None
_TRIED = False


def impl() -> types.SimpleNamespace | None:
    """The compiled passes, or None when numba is not importable."""
    global _IMPL, _TRIED
    if not _TRIED:
        _TRIED = True
        _IMPL = _compile()
    return _IMPL


def _compile():
    decorators = jit_decorators()
    if decorators is None:
        return None
    jit, _ = decorators

    @jit
    def _pseudo_angle(b0, b1):
        """A monotone stand-in for the angle of ``(b0, b1) != 0`` in ``[0, 4)`` (one division, no
        trigonometry): ``b1 / (|b0| + |b1|)`` arranged by quadrant; that of ``-b`` is that of ``b``
        plus 2 (mod 4). :func:`attention_fw.model.fast.pseudo_angle_bins` gives the bins' angles."""
        if b1 >= 0.0:
            if b0 >= 0.0:
                return b1 / (b0 + b1)
            return 1.0 - b0 / (b1 - b0)
        if b0 < 0.0:
            return 2.0 - b1 / (-b0 - b1)
        return 3.0 + b0 / (b0 - b1)

    @jit
    def extremes(x, U):
        """Index of the first maximiser of ``<u, x_j>`` over ``j`` for each direction ``u`` (rows of U),
        and ``max_j |x_j|^2``."""
        n, d = x.shape
        D = U.shape[0]
        best = np.full(D, -np.inf)
        arg = np.zeros(D, dtype=np.int64)
        top_sq = 0.0
        for j in range(n):
            q = 0.0
            for k in range(d):
                q += x[j, k] * x[j, k]
            top_sq = max(top_sq, q)
            for a in range(D):
                s = 0.0
                for k in range(d):
                    s += U[a, k] * x[j, k]
                if s > best[a]:
                    best[a] = s
                    arg[a] = j
        return arg, top_sq

    @jit
    def near_boundary(x, idx, E, margin, centre, deep_sq):
        """Of the tokens ``x[idx]`` (all tokens when ``idx`` is empty), the indices of those whose distance
        ``min_f -(E_f . x + e_f)`` to the boundary of the polytope ``{E[:, :d] x + E[:, d] <= 0}`` (unit
        normals) is at most ``margin``, in the order of ``idx``. A token with ``|x - centre|^2 < deep_sq`` is
        known to be farther (the caller's ball inside the polytope) and is not scored (``deep_sq = 0``:
        every token is)."""
        d = x.shape[1]
        F = E.shape[0]
        every = idx.shape[0] == 0
        m = x.shape[0] if every else idx.shape[0]
        keep = np.empty(m, dtype=np.int64)
        kept = 0
        for t in range(m):
            j = t if every else idx[t]
            q = 0.0
            for k in range(d):
                q += (x[j, k] - centre[k]) ** 2
            if q < deep_sq:
                continue
            dmin = np.inf
            for f in range(F):
                s = E[f, d]
                for k in range(d):
                    s += E[f, k] * x[j, k]
                if -s < dmin:
                    dmin = -s
            if dmin <= margin:
                keep[kept] = j
                kept += 1
        return keep[:kept].copy()

    @jit
    def hull_bins(U, cen, slacks):
        """For the bins ``k`` of directions with unit centres ``cen[k]``, the positions ``g`` with
        ``<c_k, U_g> >= max_h <c_k, U_h> - slacks[k]`` as compressed lists: ``idx[ptr[k]:ptr[k + 1]]``
        (ascending ``g``). Planar ``U`` only."""
        u = U.shape[0]
        nb = cen.shape[0]
        ptr = np.zeros(nb + 1, dtype=np.int64)
        cap = 4 * u + 64
        idx = np.empty(cap, dtype=np.int64)
        p = np.empty(u)
        used = 0
        for k in range(nb):
            c0 = cen[k, 0]
            c1 = cen[k, 1]
            slack = slacks[k]
            top = -np.inf
            for g in range(u):
                p[g] = c0 * U[g, 0] + c1 * U[g, 1]
                top = max(top, p[g])
            for g in range(u):
                if p[g] >= top - slack:
                    if used == cap:
                        grown = np.empty(2 * cap, dtype=np.int64)
                        grown[:cap] = idx
                        idx = grown
                        cap *= 2
                    idx[used] = g
                    used += 1
            ptr[k + 1] = used
        return ptr, idx[:used].copy()

    @jit
    def hull_leaders(bx, x, cand, group, U, R, gamma, tol, tiny, out, nb, ptr, idx):
        """``out_i = x_i + gamma (mean of the tied leaders - x_i)`` with the leaders among ``cand``.

        ``U[group[c]] == x[cand[c]]``: the distinct positions of the candidates (ascending indices
        ``cand``); ``R = max_j |x_j|``. Rows with ``B x_i = 0`` tie every token (their mean, summed once);
        rows with ``max_k |(B x_i)_k| R < tiny`` (products near underflow, rounding no longer relative)
        scan all tokens as the dense pass does. Returns the number of rows scanned in full.

        ``nb > 0`` (planar tokens): the lists of :func:`hull_bins` for the bins of the direction of
        ``B x_i``, made with a ``slack`` that covers the bin's width, the tie band and the rounding
        (``attention_fw.model.fast``): a row scores only the positions of the list of its direction's
        bin (for the top and the tied) and of the opposite bin (for the minimum), which hold every
        position that can be the computed top, be tied or be the computed minimum; the same scores,
        so the same bits. ``nb = 0``: every position is scored.
        """
        n, d = x.shape
        m = cand.shape[0]
        u = U.shape[0]
        scores = np.empty(u)
        acc = np.empty(d)
        full_acc = np.zeros(d)
        have_full = False
        row = np.empty(n)
        # the tied sums by tie pattern (u <= 64: a bit mask; 0 marks an empty slot), open addressing
        cap = 4096
        keys = np.zeros(cap, dtype=np.uint64)
        sums = np.empty((cap, d))
        counts = np.zeros(cap, dtype=np.int64)
        used = 0
        full_rows = 0
        first = np.full(u, -1, dtype=np.int64)   # first and last candidate at each position
        last = np.full(u, -1, dtype=np.int64)
        mark = np.full(u, -1, dtype=np.int64)     # mark[g] == i: position g tied in row i
        Ub = np.empty((idx.shape[0], d))            # the lists' positions, in list order (binned rows)
        longest = 0
        for k in range(nb):
            longest = max(longest, ptr[k + 1] - ptr[k])
        local = np.empty(longest)
        for t in range(idx.shape[0]):
            for k in range(d):
                Ub[t, k] = U[idx[t], k]
        for c in range(m):
            g = group[c]
            if first[g] < 0:
                first[g] = c
            last[g] = c
        for i in range(n):
            bmax = 0.0
            for k in range(d):
                bmax = max(bmax, abs(bx[i, k]))
            if bmax == 0.0:
                if not have_full:
                    for k in range(d):
                        full_acc[k] = 0.0
                    for j in range(n):
                        for k in range(d):
                            full_acc[k] += x[j, k]
                    have_full = True
                for k in range(d):
                    xi = x[i, k]
                    out[i, k] = xi + gamma * (full_acc[k] / n - xi)
                continue
            if bmax * R < tiny:
                full_rows += 1
                b = bx[i, 0]
                for j in range(n):
                    row[j] = b * x[j, 0]
                for k in range(1, d):
                    b = bx[i, k]
                    for j in range(n):
                        row[j] += b * x[j, k]
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
                            acc[k] += x[j, k]
                for k in range(d):
                    xi = x[i, k]
                    out[i, k] = xi + gamma * (acc[k] / count - xi)
                continue
            if nb > 0:
                kb = min(int(_pseudo_angle(bx[i, 0], bx[i, 1]) * (nb / 4.0)), nb - 1)
                ko = (kb + nb // 2) % nb
                b0 = bx[i, 0]
                b1 = bx[i, 1]
                t0 = ptr[kb]
                top = -np.inf
                for t in range(t0, ptr[kb + 1]):
                    s = b0 * Ub[t, 0]
                    s += b1 * Ub[t, 1]
                    local[t - t0] = s
                    top = max(top, s)
                low = np.inf
                for t in range(ptr[ko], ptr[ko + 1]):
                    s = b0 * Ub[t, 0]
                    s += b1 * Ub[t, 1]
                    low = min(low, s)
                threshold = top - tol * max(top, -low)
                lone = -1  # the one tied position when exactly one is tied, -2 when several
                for t in range(t0, ptr[kb + 1]):
                    if local[t - t0] >= threshold:
                        g = idx[t]
                        lone = g if lone == -1 else -2
                        mark[g] = i
            else:
                for g in range(u):
                    s = bx[i, 0] * U[g, 0]
                    for k in range(1, d):
                        s += bx[i, k] * U[g, k]
                    scores[g] = s
                top = scores[0]
                low = scores[0]
                for g in range(1, u):
                    top = max(top, scores[g])
                    low = min(low, scores[g])
                threshold = top - tol * max(top, -low)
                lone = -1
                for g in range(u):
                    if scores[g] >= threshold:
                        lone = g if lone == -1 else -2
                        mark[g] = i
            # one tail for both paths: the positions tied in row i are those with mark[g] == i
            if lone >= 0 and first[lone] == last[lone]:
                # one tied token: the dense pass's acc = 0 + x_j, count = 1
                j = cand[first[lone]]
                for k in range(d):
                    xi = x[i, k]
                    out[i, k] = xi + gamma * ((0.0 + x[j, k]) / 1 - xi)
                continue
            slot = -1
            key = np.uint64(0)
            h = 0
            if u <= 64:   # (never binned: the binned path needs more positions)
                for g in range(u):
                    if mark[g] == i:
                        key |= np.uint64(1) << np.uint64(g)
                h = np.int64((key * np.uint64(11400714819323198485)) >> np.uint64(52))  # 12 bits: cap = 4096
                while keys[h] != 0:
                    if keys[h] == key:
                        slot = h
                        break
                    h = (h + np.int64(1)) & np.int64(cap - 1)
            if slot < 0:
                for k in range(d):
                    acc[k] = 0.0
                count = 0
                for c in range(m):
                    if mark[group[c]] == i:
                        count += 1
                        j = cand[c]
                        for k in range(d):
                            acc[k] += x[j, k]
                if u <= 64 and used < cap // 2:
                    keys[h] = key
                    counts[h] = count
                    for k in range(d):
                        sums[h, k] = acc[k]
                    used += 1
            else:
                count = counts[slot]
                for k in range(d):
                    acc[k] = sums[slot, k]
            for k in range(d):
                xi = x[i, k]
                out[i, k] = xi + gamma * (acc[k] / count - xi)
        return full_rows

    compiled = locals()
    return types.SimpleNamespace(name="numba", **{k: compiled[k] for k in ("extremes", "near_boundary",
                                                                           "hull_bins", "hull_leaders")},
                                 pseudo_angle=_pseudo_angle)


def _compile_softmax():
    decorators = jit_decorators()
    if decorators is None:
        return None
    jit, jit_sum = decorators

    @jit_sum
    def moments(y, p):
        """``M[a, b] = sum_j y_j1^a y_j2^b`` for ``a + b <= p`` (a (p+1, p+1) array, zero above the anti-diagonal)."""
        n = y.shape[0]
        M = np.zeros((p + 1, p + 1))
        pa = np.empty(p + 1)
        pb = np.empty(p + 1)
        for j in range(n):
            pa[0] = 1.0
            pb[0] = 1.0
            for a in range(1, p + 1):
                pa[a] = pa[a - 1] * y[j, 0]
                pb[a] = pb[a - 1] * y[j, 1]
            for a in range(p + 1):
                for b in range(p + 1 - a):
                    M[a, b] += pa[a] * pb[b]
        return M

    @jit_sum
    def taylor_rows(qt, rows, M, p, out):
        """For each row ``i`` of ``rows``: ``out[i] = (N1 / Z, N2 / Z)`` with ``Z = sum_{a+b<=p} qt^a/a! qt^b/b! M[a, b]``
        and ``N_k`` the same sums of ``M`` shifted by one in coordinate ``k`` (``M`` of order ``p + 1``)."""
        fa = np.empty(p + 1)
        fb = np.empty(p + 1)
        for t in range(rows.shape[0]):
            i = rows[t]
            fa[0] = 1.0
            fb[0] = 1.0
            for a in range(1, p + 1):
                fa[a] = fa[a - 1] * qt[i, 0] / a
                fb[a] = fb[a - 1] * qt[i, 1] / a
            Z = 0.0
            N1 = 0.0
            N2 = 0.0
            for a in range(p + 1):
                for b in range(p + 1 - a):
                    f = fa[a] * fb[b]
                    Z += f * M[a, b]
                    N1 += f * M[a + 1, b]
                    N2 += f * M[a, b + 1]
            out[i, 0] = N1 / Z
            out[i, 1] = N2 / Z

    @jit
    def pruned_rows(q, x, rows, h, T, order, start, lo, hi, fanout, levels, out):
        """For each row ``i`` of ``rows``: ``out[i] = sum_j w_j (x_j - x_i) / sum_j w_j``, ``w_j = e^{<q_i, x_j> - h_i}``,
        over the sources of the cells whose largest possible ``<q_i, x>`` is at least ``h_i - T``.

        A tree of ``levels`` levels of boxes, ``fanout`` children each: box ``b`` of level ``l`` has the
        children ``b * fanout ... b * fanout + fanout - 1`` at level ``l + 1``; ``lo[l], hi[l]`` (padded
        arrays) their bounding boxes, empty boxes with ``lo > hi``; the leaves are cells whose sources are
        ``x[order[start[c]:start[c + 1]]]``. Returns the number of source terms summed.
        """
        d = x.shape[1]
        terms = 0
        stack = np.empty((levels * fanout + 1, 2), dtype=np.int64)
        for t in range(rows.shape[0]):
            i = rows[t]
            low = h[i] - T
            Z = 0.0
            N0 = 0.0
            N1 = 0.0
            top = 0
            stack[0, 0] = 0
            stack[0, 1] = 0
            top = 1
            while top > 0:
                top -= 1
                lev = stack[top, 0]
                b = stack[top, 1]
                if lo[lev, b, 0] > hi[lev, b, 0]:
                    continue
                ub = 0.0
                for k in range(d):
                    ub += max(q[i, k] * lo[lev, b, k], q[i, k] * hi[lev, b, k])
                if ub < low:
                    continue
                if lev == levels - 1:
                    for s in range(start[b], start[b + 1]):
                        j = order[s]
                        e = q[i, 0] * x[j, 0] + q[i, 1] * x[j, 1] - h[i]
                        w = np.exp(e)
                        Z += w
                        N0 += w * (x[j, 0] - x[i, 0])
                        N1 += w * (x[j, 1] - x[i, 1])
                    terms += start[b + 1] - start[b]
                else:
                    for c in range(b * fanout, b * fanout + fanout):
                        stack[top, 0] = lev + 1
                        stack[top, 1] = c
                        top += 1
            out[i, 0] = N0 / Z
            out[i, 1] = N1 / Z
        return terms

    compiled = locals()
    return types.SimpleNamespace(**{k: compiled[k] for k in ("moments", "taylor_rows", "pruned_rows")})


_SOFTMAX: types.SimpleNamespace | None = None


def softmax_impl() -> types.SimpleNamespace | None:
    """The compiled passes of the fast (SA-beta) step, or None without numba."""
    global _SOFTMAX
    if _SOFTMAX is None:
        _SOFTMAX = _compile_softmax()
    return _SOFTMAX
