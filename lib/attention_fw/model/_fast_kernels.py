"""Compiled passes of :mod:`attention_fw.model.fast` (numba; ``None`` without it).

Each pass reads the ``(n, d)`` tokens once. The hull leader scan repeats the arithmetic of
``_kernels.hardmax_small`` operation for operation (the score ``b_0 x_0 + b_1 x_1 + ...`` in that
order, the same threshold, the tied tokens summed in index order), so that on the same candidate
set it produces the same bits.
"""
from __future__ import annotations

import functools
import math
import types

import numpy as np

from ._kernels import jit_decorators

__all__ = ["impl"]

# Each family of passes is compiled once per process, on first use (functools.cache keeps the None
# of a process without numba too, so that it is not tried again).
@functools.cache
def impl() -> types.SimpleNamespace | None:
    """The compiled passes, or None when numba is not importable."""
    return _compile()


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
    def hull_leaders(bx, x, cand, group, U, R, gamma, tol, tiny, out, nb, ptr, idx, i0, i1):
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
        so the same bits. ``nb = 0``: every position is scored. Only the rows ``i0 <= i < i1`` are written (each
        row's bits do not depend on the range: ranges can run on separate threads).
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
        for i in range(i0, i1):
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
    def _row_bound(q, i, lo, hi, lev, b):
        """The largest ``<q_i, x>`` over box ``b`` of level ``lev`` (at a corner), as every pruned walk bounds it."""
        ub = 0.0
        for k in range(q.shape[1]):
            ub += max(q[i, k] * lo[lev, b, k], q[i, k] * hi[lev, b, k])
        return ub

    @jit
    def _leaf_sum(q, x, i, h, xs, s0, s1, Z, N0, N1):
        """Row ``i``'s sums ``(Z, N0, N1)`` with the sources ``xs[s0:s1]`` added in order (``w = e^{<q_i, x_s> - h_i}``)."""
        for s in range(s0, s1):
            e = q[i, 0] * xs[s, 0] + q[i, 1] * xs[s, 1] - h[i]
            w = np.exp(e)
            Z += w
            N0 += w * (xs[s, 0] - x[i, 0])
            N1 += w * (xs[s, 1] - x[i, 1])
        return Z, N0, N1

    @jit
    def pruned_rows(q, x, rows, h, T, xs, start, lo, hi, fanout, levels, out):
        """For each row ``i`` of ``rows``: ``out[i] = sum_j w_j (x_j - x_i) / sum_j w_j``, ``w_j = e^{<q_i, x_j> - h_i}``,
        over the sources of the cells whose largest possible ``<q_i, x>`` is at least ``h_i - T``.

        A tree of ``levels`` levels of boxes, ``fanout`` children each: box ``b`` of level ``l`` has the
        children ``b * fanout ... b * fanout + fanout - 1`` at level ``l + 1``; ``lo[l], hi[l]`` (padded
        arrays) their bounding boxes, empty boxes with ``lo > hi``; the leaves are cells whose sources are
        ``xs[start[c]:start[c + 1]]`` (the tokens sorted by cell, read in memory order; ``x`` holds the rows'
        own tokens). Returns the number of source terms summed and of boxes bounded.
        """
        terms = 0
        boxes = 0
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
                boxes += 1
                if _row_bound(q, i, lo, hi, lev, b) < low:
                    continue
                if lev == levels - 1:
                    Z, N0, N1 = _leaf_sum(q, x, i, h, xs, start[b], start[b + 1], Z, N0, N1)
                    terms += start[b + 1] - start[b]
                else:
                    for c in range(b * fanout, b * fanout + fanout):
                        stack[top, 0] = lev + 1
                        stack[top, 1] = c
                        top += 1
            out[i, 0] = N0 / Z
            out[i, 1] = N1 / Z
        return terms, boxes

    @jit
    def pruned_groups(q, x, rows, group, h, T, xs, start, lo, hi, fanout, levels, out):
        """:func:`pruned_rows` for rows taken ``group`` at a time (consecutive rows, best with nearby ``q``), each
        result bitwise that of ``pruned_rows``: a group walks the tree once, keeping a box when its largest
        ``<q, x>`` over the group's box of ``q`` (a bilinear form: at a corner) reaches the least ``h_i - T``;
        that bound is at least each row's own (floating-point products and sums are monotone), so the kept
        leaves hold every leaf a row keeps, in the same (depth-first) order. A leaf is kept by a row iff it
        passes the row's test, since a box contains its children's and the bound grows with the box. Each row
        then tests the group's leaves and sums as ``pruned_rows`` does. Returns the terms and boxes bounded."""
        d = x.shape[1]
        terms = 0
        boxes = 0
        stack = np.empty((levels * fanout + 1, 2), dtype=np.int64)
        leaves = np.empty(lo.shape[1], dtype=np.int64)
        qlo = np.empty(d)
        qhi = np.empty(d)
        for g0 in range(0, rows.shape[0], group):
            g1 = min(g0 + group, rows.shape[0])
            low = np.inf
            for k in range(d):
                qlo[k] = np.inf
                qhi[k] = -np.inf
            for t in range(g0, g1):
                i = rows[t]
                low = min(low, h[i] - T)
                for k in range(d):
                    qlo[k] = min(qlo[k], q[i, k])
                    qhi[k] = max(qhi[k], q[i, k])
            nl = 0
            stack[0, 0] = 0
            stack[0, 1] = 0
            top = 1
            while top > 0:
                top -= 1
                lev = stack[top, 0]
                b = stack[top, 1]
                if lo[lev, b, 0] > hi[lev, b, 0]:
                    continue
                boxes += 1
                ub = 0.0
                for k in range(d):
                    ub += max(max(qlo[k] * lo[lev, b, k], qlo[k] * hi[lev, b, k]),
                              max(qhi[k] * lo[lev, b, k], qhi[k] * hi[lev, b, k]))
                if ub < low:
                    continue
                if lev == levels - 1:
                    leaves[nl] = b
                    nl += 1
                else:
                    for c in range(b * fanout, b * fanout + fanout):
                        stack[top, 0] = lev + 1
                        stack[top, 1] = c
                        top += 1
            L = levels - 1
            for t in range(g0, g1):
                i = rows[t]
                low_i = h[i] - T
                Z = 0.0
                N0 = 0.0
                N1 = 0.0
                for m in range(nl):
                    b = leaves[m]
                    boxes += 1
                    if _row_bound(q, i, lo, hi, L, b) < low_i:
                        continue
                    Z, N0, N1 = _leaf_sum(q, x, i, h, xs, start[b], start[b + 1], Z, N0, N1)
                    terms += start[b + 1] - start[b]
                out[i, 0] = N0 / Z
                out[i, 1] = N1 / Z
        return terms, boxes

    @jit_sum
    def _cell_basis(t, lo, h, ncell, nodes, wts, L):
        """The cell of ``t`` among ``ncell`` cells of width ``2 h`` from ``lo`` (clipped to the first and the
        last) and, in ``L``, the Lagrange basis at the cell's Chebyshev nodes ``centre + h nodes`` (barycentric
        weights ``wts``); exactly 1 and 0 at a node."""
        c = int(math.floor((t - lo) / (2.0 * h)))
        c = min(max(c, 0), ncell - 1)
        u = (t - (lo + (2 * c + 1) * h)) / h
        p = nodes.shape[0]
        tot = 0.0
        for a in range(p):      # no branch in this loop: it vectorises
            L[a] = wts[a] / (u - nodes[a])
            tot += L[a]
        if math.isfinite(tot):
            inv = 1.0 / tot
            for a in range(p):
                L[a] *= inv
        else:                   # u on a node (a division by zero above)
            for a in range(p):
                L[a] = 1.0 if u == nodes[a] else 0.0
        return c

    @jit
    def morton_leaves(x, lo, span, g, L):
        """The quadtree's leaves of :func:`fast._grid`: each point's cell ``(i, j)`` of a ``g x g`` grid over the box
        from ``lo`` of sides ``span`` (``g = 2^L``), its Morton key (the bits of ``i`` and ``j`` interleaved), the
        points in the order of their keys (a counting sort: stable), the start of each leaf, and each leaf's
        bounding box (``inf, -inf`` when empty). Returns ``(order, start, blo, bhi)``."""
        n = x.shape[0]
        key = np.empty(n, dtype=np.int64)
        start = np.zeros(g * g + 1, dtype=np.int64)
        blo = np.full((g * g, 2), np.inf)
        bhi = np.full((g * g, 2), -np.inf)
        for j in range(n):
            i0 = min(int(((x[j, 0] - lo[0]) / span[0]) * g), g - 1)
            i1 = min(int(((x[j, 1] - lo[1]) / span[1]) * g), g - 1)
            c = 0
            for bit in range(L - 1, -1, -1):
                c = c * 4 + ((i0 >> bit) & 1) * 2 + ((i1 >> bit) & 1)
            key[j] = c
            start[c + 1] += 1
            for k in range(2):
                if x[j, k] < blo[c, k]:
                    blo[c, k] = x[j, k]
                if x[j, k] > bhi[c, k]:
                    bhi[c, k] = x[j, k]
        for c in range(g * g):
            start[c + 1] += start[c]
        fill = start[:-1].copy()
        order = np.empty(n, dtype=np.int64)
        for j in range(n):
            order[fill[key[j]]] = j
            fill[key[j]] += 1
        return order, start, blo, bhi

    @jit
    def hull_row_max(q, rows, V, alpha, k0, h):
        """``h[i] = max_j <q_i, x_j>`` for ``i`` in ``rows`` over a hull's vertices ``V`` (counter-clockwise), whose
        edges' outward normals have the angles ``alpha`` (increasing, from edge ``k0`` on): the vertex at the end of
        the last edge whose normal's angle is at most ``q_i``'s (a binary search), and its two neighbours."""
        m = V.shape[0]
        for t in range(rows.shape[0]):
            i = rows[t]
            ang = math.atan2(q[i, 1], q[i, 0])
            lo = 0
            hi = alpha.shape[0]
            while lo < hi:
                mid = (lo + hi) // 2
                if alpha[mid] <= ang:
                    lo = mid + 1
                else:
                    hi = mid
            top = (lo + k0) % m
            best = -np.inf
            for s in range(-1, 2):
                k = (top + s + m) % m
                val = q[i, 0] * V[k, 0] + q[i, 1] * V[k, 1]
                if val > best:
                    best = val
            h[i] = best

    @jit
    def sector_select(xs, start, leaves, R, rlo, rhi, low, idx, xr):
        """The sources of the leaves ``leaves`` (``xs[start[l]:start[l + 1]]``) turned by ``R``, kept where
        ``max(rlo_0 a, rhi_0 a) + max(rlo_1 b, rhi_1 b) >= low`` (``(a, b)`` the turned source): their
        indices into ``xs`` in ``idx`` and the turned sources in ``xr``, in order; returns their number."""
        m = 0
        for t in range(leaves.shape[0]):
            lf = leaves[t]
            for j in range(start[lf], start[lf + 1]):
                a = R[0, 0] * xs[j, 0] + R[0, 1] * xs[j, 1]
                b = R[1, 0] * xs[j, 0] + R[1, 1] * xs[j, 1]
                if max(rlo[0] * a, rhi[0] * a) + max(rlo[1] * b, rhi[1] * b) >= low:
                    idx[m] = j
                    xr[m, 0] = a
                    xr[m, 1] = b
                    m += 1
        return m

    @jit
    def cell_order(t, rows, lo, h, ncell):
        """The rows ``rows`` of the points ``t`` (n, 2) sorted by their cell (counting sort, row-major cells of
        width ``2 h`` from ``lo``, clipped as in :func:`_cell_basis`), and the start of each cell's rows (cell
        ``c1 ncell[1] + c2`` holds ``order[start[c]:start[c + 1]]``)."""
        m = rows.shape[0]
        key = np.empty(m, dtype=np.int64)
        count = np.zeros(ncell[0] * ncell[1] + 1, dtype=np.int64)
        for s in range(m):
            i = rows[s]
            c0 = min(max(int(math.floor((t[i, 0] - lo[0]) / (2.0 * h[0]))), 0), ncell[0] - 1)
            c1 = min(max(int(math.floor((t[i, 1] - lo[1]) / (2.0 * h[1]))), 0), ncell[1] - 1)
            key[s] = c0 * ncell[1] + c1
            count[key[s] + 1] += 1
        for c in range(1, count.shape[0]):
            count[c] += count[c - 1]
        start = count.copy()
        out = np.empty(m, dtype=np.int64)
        for s in range(m):
            out[count[key[s]]] = rows[s]
            count[key[s]] += 1
        return out, start

    @jit_sum
    def grid_spread(y, w, start, lo, h, ncell, nodes, wts, Q, first, last):
        """Anterpolation over the cells ``first <= c < last`` (row-major; the sources sorted by cell, those of cell
        ``c`` are ``y[start[c]:start[c + 1]]``, of weights ``w``): each source ``y_j`` of cell ``(c1, c2)``
        adds ``w_j L_a(y_j1) L_b(y_j2) (1, y_j1, y_j2)`` to ``Q[:, c1 p + a, c2 p + b]`` (the Lagrange bases of
        :func:`_cell_basis`), summed per cell in a ``p x 3p`` block (contiguous rows), four sources to a pass
        over the block, and added once to ``Q``: each cell writes its own block of ``Q``."""
        p = nodes.shape[0]
        A = np.zeros((4, p))
        R = np.zeros((4, 3 * p))
        C = np.empty((p, 3 * p))
        for c in range(first, last):
            s0 = start[c]
            s1 = start[c + 1]
            if s1 == s0:
                continue
            c1 = c // ncell[1]
            c2 = c - c1 * ncell[1]
            C[:, :] = 0.0
            for j in range(s0, s1, 4):
                m = min(4, s1 - j)
                for t in range(m):
                    _cell_basis(y[j + t, 0], lo[0], h[0], ncell[0], nodes, wts, A[t])
                    _cell_basis(y[j + t, 1], lo[1], h[1], ncell[1], nodes, wts, R[t])
                    wj = w[j + t]
                    for b in range(p):
                        R[t, b] *= wj
                        R[t, p + b] = R[t, b] * y[j + t, 0]
                        R[t, 2 * p + b] = R[t, b] * y[j + t, 1]
                for t in range(m, 4):      # the last pass of a cell: the missing sources weigh nothing
                    A[t, :] = 0.0
                for a in range(p):
                    f0 = A[0, a]
                    f1 = A[1, a]
                    f2 = A[2, a]
                    f3 = A[3, a]
                    for k in range(3 * p):
                        C[a, k] += f0 * R[0, k] + f1 * R[1, k] + f2 * R[2, k] + f3 * R[3, k]
            for r in range(3):
                for a in range(p):
                    for b in range(p):
                        Q[r, c1 * p + a, c2 * p + b] += C[a, r * p + b]

    @jit_sum
    def grid_gather(q, start, lo, h, ncell, nodes, wts, sc1, sc2, Phi, out, first, last):
        """Interpolation over the target cells ``first <= c < last`` (the targets sorted by cell, those of cell ``c``
        are ``q[start[c]:start[c + 1]]``): for each target ``i`` of cell ``(c1, c2)``,
        ``out[i] = (N1 / Z, N2 / Z)`` with ``(Z, N1, N2)`` the Lagrange interpolant at ``q_i`` of ``Phi`` (its
        nodes scaled by ``sc1[l1] sc2[l2]``), as the row ``(L1 sc1) [Phi_0, Phi_1, Phi_2]`` (the cell's block
        copied once, contiguous; four targets to a pass over it) dotted with ``L2 sc2``. A row whose ``Z`` is
        not positive and finite gets NaN; returns their number."""
        p = nodes.shape[0]
        A = np.zeros((4, p))
        L2 = np.zeros((4, p))
        P = np.empty((p, 3 * p))
        T = np.empty((4, 3 * p))
        bad = 0
        for c in range(first, last):
            s0 = start[c]
            s1 = start[c + 1]
            if s1 == s0:
                continue
            c1 = c // ncell[1]
            c2 = c - c1 * ncell[1]
            for r in range(3):
                for a in range(p):
                    for b in range(p):
                        P[a, r * p + b] = Phi[r, c1 * p + a, c2 * p + b]
            for i in range(s0, s1, 4):
                m = min(4, s1 - i)
                for t in range(m):
                    _cell_basis(q[i + t, 0], lo[0], h[0], ncell[0], nodes, wts, A[t])
                    _cell_basis(q[i + t, 1], lo[1], h[1], ncell[1], nodes, wts, L2[t])
                    for a in range(p):
                        A[t, a] *= sc1[c1 * p + a]
                T[:, :] = 0.0
                for a in range(p):
                    f0 = A[0, a]
                    f1 = A[1, a]
                    f2 = A[2, a]
                    f3 = A[3, a]
                    for k in range(3 * p):
                        v = P[a, k]
                        T[0, k] += f0 * v
                        T[1, k] += f1 * v
                        T[2, k] += f2 * v
                        T[3, k] += f3 * v
                for t in range(m):
                    Z = 0.0
                    N1 = 0.0
                    N2 = 0.0
                    for b in range(p):
                        g = L2[t, b] * sc2[c2 * p + b]
                        Z += T[t, b] * g
                        N1 += T[t, p + b] * g
                        N2 += T[t, 2 * p + b] * g
                    if Z > 0.0 and Z < np.inf:
                        out[i + t, 0] = N1 / Z
                        out[i + t, 1] = N2 / Z
                    else:
                        out[i + t, 0] = np.nan
                        out[i + t, 1] = np.nan
                        bad += 1
        return bad

    compiled = locals()
    return types.SimpleNamespace(**{k: compiled[k] for k in ("moments", "taylor_rows", "pruned_rows",
                                                              "pruned_groups", "cell_order", "grid_spread", "grid_gather",
                                                              "sector_select", "morton_leaves",
                                                              "hull_row_max")})


@functools.cache
def softmax_impl() -> types.SimpleNamespace | None:
    """The compiled passes of the fast (SA-beta) step, or None without numba."""
    return _compile_softmax()


# ----------------------------------------------------------------------------- the chain (SAP)
SAP_DELTA = 4.0    # the ladder's groups of frontier elements span a factor e^4 of mass each
SAP_CHUNK = 8.0    # a Bernoulli(e^{-t}) is drawn as Bernoulli(e^{-8}) draws and one of e^{-(t mod 8)}
SAP_GROUPS = 64    # ... at most 64 groups; the last holds every element lighter than e^{-252} of the heaviest


def _compile_sap():
    decorators = jit_decorators()
    if decorators is None:
        return None
    jit, _ = decorators
    delta, chunk, ngroups = SAP_DELTA, SAP_CHUNK, SAP_GROUPS
    e_chunk = float(np.exp(-chunk))

    @jit
    def kdtree(x, leaf):
        """A binary tree of boxes over the tokens ``x`` (n, d): each node is split at the midpoint of
        the widest side of its tight bounding box (both halves are then non-empty), down to at most
        ``leaf`` tokens or a box of zero width (coincident tokens). Returns ``perm`` (the tokens in
        tree order: node ``v`` holds ``perm[start[v]:end[v]]``), ``start``, ``end``, the boxes ``lo``,
        ``hi`` (m, d) and the children ``left``, ``right`` (-1: a leaf); node 0 is the root."""
        n, d = x.shape
        cap = 2 * n + 1
        perm = np.arange(n)
        start = np.empty(cap, dtype=np.int64)
        end = np.empty(cap, dtype=np.int64)
        left = np.full(cap, -1, dtype=np.int64)
        right = np.full(cap, -1, dtype=np.int64)
        lo = np.empty((cap, d))
        hi = np.empty((cap, d))
        stack = np.empty(cap, dtype=np.int64)
        start[0] = 0
        end[0] = n
        m = 1
        stack[0] = 0
        top = 1
        while top > 0:
            top -= 1
            v = stack[top]
            a = start[v]
            b = end[v]
            for k in range(d):
                lo[v, k] = np.inf
                hi[v, k] = -np.inf
            for s in range(a, b):
                j = perm[s]
                for k in range(d):
                    lo[v, k] = min(lo[v, k], x[j, k])
                    hi[v, k] = max(hi[v, k], x[j, k])
            if b - a <= leaf:
                continue
            ax = 0
            w = hi[v, 0] - lo[v, 0]
            for k in range(1, d):
                if hi[v, k] - lo[v, k] > w:
                    w = hi[v, k] - lo[v, k]
                    ax = k
            if not w > 0.0:
                continue
            mid = 0.5 * lo[v, ax] + 0.5 * hi[v, ax]
            i0 = a
            i1 = b - 1
            while True:
                while i0 <= i1 and x[perm[i0], ax] < mid:
                    i0 += 1
                while i0 <= i1 and x[perm[i1], ax] >= mid:
                    i1 -= 1
                if i0 > i1:
                    break
                t = perm[i0]
                perm[i0] = perm[i1]
                perm[i1] = t
                i0 += 1
                i1 -= 1
            if i0 == a or i0 == b:      # no double between the two sides: the box stays a leaf
                continue
            c = m
            m += 2
            start[c] = a
            end[c] = i0
            start[c + 1] = i0
            end[c + 1] = b
            left[v] = c
            right[v] = c + 1
            stack[top] = c
            stack[top + 1] = c + 1
            top += 2
        return perm, start[:m].copy(), end[:m].copy(), lo[:m].copy(), hi[:m].copy(), left[:m].copy(), \
            right[:m].copy()

    @jit
    def _mix(z):
        """SplitMix64's finaliser (a bijection of the 64-bit words)."""
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))

    @jit
    def _seed(s, seed, i):
        """The xoshiro256** state of row ``i`` of the stream ``seed``: four SplitMix64 outputs from
        ``seed + mix(i)`` (each row its own stream, whatever the order in which rows are drawn)."""
        z = seed + _mix(np.uint64(i) + np.uint64(0x9E3779B97F4A7C15))
        for k in range(4):
            z += np.uint64(0x9E3779B97F4A7C15)
            s[k] = _mix(z)

    @jit
    def _rotl(v, k):
        return (v << np.uint64(k)) | (v >> np.uint64(64 - k))

    @jit
    def _uniform(s):
        """A uniform double in [0, 1) with 53 random bits (xoshiro256**, Blackman and Vigna)."""
        result = _rotl(s[1] * np.uint64(5), 7) * np.uint64(9)
        t = s[1] << np.uint64(17)
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return float(result >> np.uint64(11)) * (1.0 / 9007199254740992.0)

    @jit
    def _bernoulli(s, t):
        """True with probability ``e^{-t}`` (``t >= 0``, inf: False), exact however small: the event is
        that of independent draws with probabilities ``e^{-8}`` (one per whole chunk of 8 in ``t``) and
        ``e^{-(rest)}``; each is a uniform below a probability >= e^{-8}, so the 53-bit grid of the
        uniforms changes it by at most a relative 2^-53 e^8 = 3e-13."""
        if t == np.inf:
            return False
        while t > chunk:
            if not _uniform(s) < e_chunk:
                return False
            t -= chunk
        return _uniform(s) < np.exp(-t)

    @jit
    def _push(key, ids, size, k, v):
        """Push ``(k, v)`` on the max-heap ``key[:size], ids[:size]``; returns the new size."""
        p = size
        key[p] = k
        ids[p] = v
        while p > 0:
            par = (p - 1) // 2
            if key[par] >= key[p]:
                break
            tk = key[par]
            key[par] = key[p]
            key[p] = tk
            tv = ids[par]
            ids[par] = ids[p]
            ids[p] = tv
            p = par
        return size + 1

    @jit
    def _pop(key, ids, size):
        """Remove the top of the max-heap (its id is ``ids[0]`` before the call); returns the new size."""
        size -= 1
        key[0] = key[size]
        ids[0] = ids[size]
        p = 0
        while True:
            c = 2 * p + 1
            if c >= size:
                break
            if c + 1 < size and key[c + 1] > key[c]:
                c += 1
            if key[p] >= key[c]:
                break
            tk = key[c]
            key[c] = key[p]
            key[p] = tk
            tv = ids[c]
            ids[c] = ids[p]
            ids[p] = tv
            p = c
        return size

    @jit
    def _pick_in_logs(s, lm, order, a, b, suf):
        """One of the elements ``order[a:b]`` with probability proportional to ``e^{lm}``, each in turn
        kept or passed by a Bernoulli draw from its -log (exact however far apart the masses); ``suf``
        scratch. The lightest group's pick: reached with probability below e^{-4 (SAP_GROUPS - 1)}."""
        logt = -np.inf
        for p in range(b - 1, a - 1, -1):
            lg = lm[order[p]]
            logt = max(lg, logt) + math.log1p(math.exp(-abs(lg - logt)))
            suf[p] = logt
        for p in range(a, b - 1):
            # P(pass p | reached p) = (mass after p) / (mass from p) = e^{-t}
            if not _bernoulli(s, math.log1p(math.exp(lm[order[p]] - suf[p + 1]))):
                return order[p]
        return order[b - 1]

    @jit
    def _bound(q, i, lo, hi, v, eps4):
        """``max_{y in box v} <q_i, y>`` computed from the box's corners, raised by four roundings of a
        score (so that no computed score of a token in the box exceeds it), and ``span``, the bound minus
        the minimum over the box: ``sum_k |q_ik| (hi_vk - lo_vk)``."""
        ub = 0.0
        ab = 0.0
        span = 0.0
        for k in range(q.shape[1]):
            a1 = q[i, k] * lo[v, k]
            a2 = q[i, k] * hi[v, k]
            ub += max(a1, a2)
            ab += max(abs(a1), abs(a2))
            span += abs(q[i, k]) * (hi[v, k] - lo[v, k])
        return ub + eps4 * ab, span

    @jit
    def _score(q, i, x, p):
        sc = 0.0
        for k in range(x.shape[1]):
            sc += q[i, k] * x[p, k]
        return sc

    @jit
    def sap_rows(q, x, h, start, end, lo, hi, left, right, lcnt, rowid, seed, omega, J, counts):
        """The picks ``J_i``, ``P(J_i = p) = e^{<q_i, x_p>} / sum_k e^{<q_i, x_k>}``, by rejection from an
        envelope made of the boxes of the tree of :func:`kdtree` (``attention_fw.model.fast.sap_step``
        states the argument). ``x`` the tokens in the tree's order (box ``v`` holds ``x[start[v]:end[v]]``),
        ``lcnt`` the log of each box's count, the picks are positions in that order.

        ``h[i]``: the row's largest score when known (NaN: found here by branch and bound over the boxes).
        Row ``i`` draws from its own generator, seeded by ``seed`` and ``rowid[i]``. ``omega``: the
        envelope is refined until its excess over its lower bound is at most ``omega`` times that bound.
        ``counts`` += (boxes opened, frontier elements, proposals), summed over the rows.
        """
        n, d = x.shape
        m = start.shape[0]
        eps4 = 4.0 * 2.220446049250313e-16
        nub = np.empty(m)        # per box of this row's frontier: bound, log-mass, waste, lower-bound mass
        nlm = np.empty(m)
        nwaste = np.empty(m)
        nlbm = np.empty(m)
        hkey = np.empty(m)
        hid = np.empty(m, dtype=np.int64)
        flist = np.empty(m, dtype=np.int64)
        cap = m + n
        e_pos = np.empty(cap, dtype=np.int64)   # frontier elements: the tokens x[pos:pos + cnt] of a box,
        e_cnt = np.empty(cap, dtype=np.int64)   # or one token (cnt = 1), with the bound e_ub of their
        e_ub = np.empty(cap)                    # scores and the log-mass e_lm = log(cnt) + e_ub - best
        e_lm = np.empty(cap)
        e_grp = np.empty(cap, dtype=np.int64)
        e_ord = np.empty(cap, dtype=np.int64)
        cum = np.empty(cap)
        gsum = np.empty(ngroups)
        glog = np.empty(ngroups)
        gptr = np.empty(ngroups + 1, dtype=np.int64)
        gfill = np.empty(ngroups, dtype=np.int64)
        tneg = np.empty(ngroups)
        s = np.empty(4, dtype=np.uint64)
        opened = 0
        elements = 0
        proposals = 0
        for i in range(q.shape[0]):
            _seed(s, seed, rowid[i])
            # ---- the row's largest score: best-first over the boxes by their bound (branch and bound)
            hsize = 0
            nf = 0
            ne = 0
            best = -np.inf
            nub[0] = _bound(q, i, lo, hi, 0, eps4)[0]
            if h[i] == h[i]:
                best = h[i]
            else:
                hsize = _push(hkey, hid, hsize, nub[0], 0)
            while hsize > 0 and hkey[0] > best:
                v = hid[0]
                hsize = _pop(hkey, hid, hsize)
                opened += 1
                if left[v] >= 0:
                    for c in (left[v], right[v]):
                        nub[c] = _bound(q, i, lo, hi, c, eps4)[0]
                        hsize = _push(hkey, hid, hsize, nub[c], c)
                else:
                    last = start[v] + 1      # coincident tokens: one score
                    for k in range(d):
                        if hi[v, k] > lo[v, k]:
                            last = end[v]
                    for p in range(start[v], last):
                        best = max(best, _score(q, i, x, p))
                    flist[nf] = v
                    nf += 1
            for t in range(hsize):      # the frontier so far: the boxes left and the leaves scanned
                flist[nf] = hid[t]
                nf += 1
            if nf == 0:                 # the largest score given: the root alone
                flist[0] = 0
                nf = 1
            # ---- the envelope: refined best-first by waste, the mass above the box's lower bound (heap
            # keys: its log, exact at any beta; the sums W, LB with masses capped at e^600, added up again
            # before stopping when they met larger ones)
            hsize = 0
            W = 0.0
            LB = 0.0
            for t in range(nf):
                v = flist[t]
                span = _bound(q, i, lo, hi, v, eps4)[1]
                if span == 0.0:      # coincident tokens (or q orthogonal to the box): one score for all
                    nub[v] = _score(q, i, x, start[v])
                lm = lcnt[v] + nub[v] - best
                nlm[v] = lm
                nlbm[v] = math.exp(lm - span)
                nwaste[v] = -math.exp(min(lm, 600.0)) * math.expm1(-span)
                W += nwaste[v]
                LB += nlbm[v]
                hsize = _push(hkey, hid, hsize, lm + math.log(-math.expm1(-span)) if span > 0.0 else -np.inf, v)
            Wmax = W
            while hsize > 0:
                if not W > omega * LB:
                    if not Wmax > 1e8 * omega * LB:
                        break
                    W = 0.0         # the running sums met large masses: add them up again
                    LB = 0.0
                    for t in range(hsize):
                        W += nwaste[hid[t]]
                        LB += nlbm[hid[t]]
                    for e in range(ne):
                        LB += math.exp(e_lm[e])
                    Wmax = W
                    if not W > omega * LB:
                        break
                v = hid[0]
                hsize = _pop(hkey, hid, hsize)
                opened += 1
                W -= nwaste[v]
                LB -= nlbm[v]
                if left[v] >= 0:
                    for c in (left[v], right[v]):
                        ub, span = _bound(q, i, lo, hi, c, eps4)
                        nub[c] = _score(q, i, x, start[c]) if span == 0.0 else ub
                        lm = lcnt[c] + nub[c] - best
                        nlm[c] = lm
                        nlbm[c] = math.exp(lm - span)
                        nwaste[c] = -math.exp(min(lm, 600.0)) * math.expm1(-span)
                        W += nwaste[c]
                        LB += nlbm[c]
                        hsize = _push(hkey, hid, hsize, lm + math.log(-math.expm1(-span)) if span > 0.0
                                      else -np.inf, c)
                    Wmax = max(Wmax, W)
                else:
                    for p in range(start[v], end[v]):
                        sc = _score(q, i, x, p)
                        e_pos[ne] = p
                        e_cnt[ne] = 1
                        e_ub[ne] = sc
                        e_lm[ne] = sc - best
                        LB += math.exp(sc - best)
                        ne += 1
            for t in range(hsize):
                v = hid[t]
                e_pos[ne] = start[v]
                e_cnt[ne] = end[v] - start[v]
                e_ub[ne] = nub[v]
                e_lm[ne] = nlm[v]
                ne += 1
            elements += ne
            # ---- the ladder: groups of elements by log-mass, e^{-4} apart (the last of SAP_GROUPS holds
            # every lighter element); the groups' masses and the tail sums in logs
            lmax = -np.inf
            lmin = np.inf
            for e in range(ne):
                lmax = max(lmax, e_lm[e])
                lmin = min(lmin, e_lm[e])
            G = ngroups if (lmax - lmin) / delta >= ngroups - 1 else int((lmax - lmin) / delta) + 1
            for g in range(G):
                gfill[g] = 0
            for e in range(ne):
                gf = (lmax - e_lm[e]) / delta     # in floats: the scores may reach 1e300
                g = G - 1 if gf >= G - 1 else int(gf)
                e_grp[e] = g
                gfill[g] += 1
            gptr[0] = 0
            for g in range(G):
                gptr[g + 1] = gptr[g] + gfill[g]
                gfill[g] = gptr[g]
            for e in range(ne):
                g = e_grp[e]
                e_ord[gfill[g]] = e
                gfill[g] += 1
            for g in range(G):
                ref = lmax - g * delta
                if g == ngroups - 1:     # the lightest group: its log-mass about its own largest
                    ref = -np.inf
                    for p in range(gptr[g], gptr[g + 1]):
                        ref = max(ref, e_lm[e_ord[p]])
                run = 0.0
                for p in range(gptr[g], gptr[g + 1]):
                    run += math.exp(e_lm[e_ord[p]] - ref)
                    cum[p] = run
                gsum[g] = run
                glog[g] = math.log(run) + ref if run > 0.0 else -np.inf
            # tneg[g] = -log P(go past group g | reached it) = log(1 + mass_g / mass of the later groups)
            logt = -np.inf
            for g in range(G - 1, -1, -1):
                lg = glog[g]
                if lg > -np.inf:
                    tneg[g] = math.log1p(math.exp(lg - logt))
                    logt = max(lg, logt) + math.log1p(math.exp(-abs(lg - logt)))
                else:
                    tneg[g] = 0.0
            # ---- propose from the envelope, accept with e^{score - bound}
            while True:
                proposals += 1
                g = 0
                while _bernoulli(s, tneg[g]):
                    g += 1
                if g == ngroups - 1:
                    e = _pick_in_logs(s, e_lm, e_ord, gptr[g], gptr[g + 1], cum)
                else:
                    u = _uniform(s) * gsum[g]
                    a = gptr[g]
                    b = gptr[g + 1] - 1
                    while a < b:
                        c = (a + b) // 2
                        if cum[c] > u:
                            b = c
                        else:
                            a = c + 1
                    e = e_ord[a]
                cnt = e_cnt[e]
                if cnt == 1:
                    j = e_pos[e]
                    break
                j = e_pos[e] + min(int(_uniform(s) * cnt), cnt - 1)
                sc = _score(q, i, x, j)
                if _bernoulli(s, max(e_ub[e] - sc, 0.0)):
                    break
            J[i] = j
        counts[0] += opened
        counts[1] += elements
        counts[2] += proposals

    @jit
    def bernoulli_draws(seed, t, reps):
        """``reps`` draws of :func:`_bernoulli` at each ``t`` (row ``r`` of the output from stream
        ``seed``, row ``r``): the count of successes per ``t``, for the tests."""
        out = np.zeros(t.shape[0], dtype=np.int64)
        s = np.empty(4, dtype=np.uint64)
        for r in range(t.shape[0]):
            _seed(s, seed, r)
            for _ in range(reps):
                if _bernoulli(s, t[r]):
                    out[r] += 1
        return out

    compiled = locals()
    return types.SimpleNamespace(**{k: compiled[k] for k in ("kdtree", "sap_rows", "bernoulli_draws")})


@functools.cache
def sap_impl() -> types.SimpleNamespace | None:
    """The compiled passes of the fast (SAP) step, or None without numba."""
    return _compile_sap()
