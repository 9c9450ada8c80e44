"""The exact leader sets of the tiled hardmax steps, tile by tile, and their float32 screen.

Part of :mod:`attention_fw.model.tiled` (which re-exports its public names; the module docstring there
describes the running leader sets, their certification and the symmetric tiles): ``_leader_state``
gives the sums of the leaders' values, their counts and first maximisers of every row, exactly those
of float64 on every route; the float64 steps take the float32 screen where a probe predicts that it
pays (:data:`SCREEN_PROBE_ROWS`, :data:`SCREEN_MAX_UNSURE`, :data:`SCREEN_MIN_ROWS`).
"""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _scaling, _tile_kernels
from ._checks import leader_mask
from .tiled_plan import Plan, _one_blas_thread
from .tiled_softmax import FLOAT32_UNIT, _bx, _norm, _rescale, _Tiles

__all__ = ["BOUNDED_SCALE_TOL", "SCREEN_PROBE_ROWS", "SCREEN_MAX_UNSURE", "SCREEN_MIN_ROWS", "SCREEN_TINY_QUERY"]

BOUNDED_SCALE_TOL = 1e-9
"""Tie tolerances up to this (the default is ``8 d`` machine epsilons) let the hardmax tiles track
each row's maximum alone, the scale of the tie rule bounded by Cauchy-Schwarz (``_leader_state``);
above it the running minimum is tracked too (a wide tolerance would otherwise send many rows to
the exact recomputation)."""


def _screen(screen):
    """``screen`` of the hardmax steps: None, True or False."""
    if screen is None or isinstance(screen, (bool, np.bool_)):
        return None if screen is None else bool(screen)
    raise ValueError(f"screen must be None, True or False, got {screen!r}")


def _leader_state(x3, values3, B, tol, p: Plan, precision="float64", screen=None, symmetric=None):
    """The exact leader sets of every token, tile by tile: ``(sum of the leaders' values, count,
    first argmax)``, shapes (R, n, m), (R, n), (R, n).

    ``precision='float32'``: the tiles' scores in float32; a row's set is certified exact when it
    has one member and every other key scores more than ``2.5 e_i`` below the threshold (``e_i``
    the row's float32 score error, :func:`float32_score_error`); every other row (ties, near
    ties, and queries too small for float32's normal range) is recomputed from its float64
    scores: the leader sets, counts and first maximisers are those of float64 in every row.

    ``precision='float64'`` takes that float32 route too (the *screen*) when ``screen`` is True, or
    when it is None and :func:`_screen_pays` predicts few rows to recompute; ``screen=False`` keeps
    float64 arithmetic throughout. Each leader's value is added in key order in both routes and
    in the recomputation, so (with the numba passes) the sums are the same to the last bit.

    On the float32 route with an exactly symmetric ``B`` (or the identity) and square tiles,
    ``symmetric`` not False: only the tiles of key blocks at or after the query block are made,
    each scanned by rows for its queries and by columns for the queries of its key block
    (:func:`_symmetric_scan`, half the products); the certification's margin then covers the
    rounding of the transposed scores too.
    """
    xs, _, _ = _rescale(x3, B, 0.0)  # leader sets do not change under the exact power-of-two scaling
    Q = np.ascontiguousarray(_bx(xs, B))
    KT = np.ascontiguousarray(np.swapaxes(xs, -1, -2))
    R, n = xs.shape[0], xs.shape[1]
    TK = _tile_kernels.impl()
    q_rows = np.sqrt(np.einsum("rij,rij->ri", Q, Q))       # |B x_i| (the bounds and margins below)
    low = precision == "float32" or (screen is not False and _screen_pays(Q, KT, tol, screen))
    c = c2 = 1.0
    if low:  # powers of two bring keys and queries near 1 (float32 range); leader sets do not change
        c = _scaling.rescaled(KT) or 1.0
        c2 = _scaling.rescaled(Q) or 1.0
        tiles = _Tiles((Q * c2).astype(np.float32), (KT * c).astype(np.float32), p)
    else:
        tiles = _Tiles(Q, KT, p)
    m = values3.shape[-1]
    acc = np.zeros((R, n, m))
    fs = np.empty((R, n, 4))
    fs[..., 0], fs[..., 1], fs[..., 2], fs[..., 3] = -np.inf, np.inf, np.inf, -np.inf
    # With the usual tolerance the tiles track the running maximum alone: the smallest score is
    # replaced by -U, U_i >= max_j |S_ij| from Cauchy-Schwarz (with room for the products' rounding),
    # so the running set holds the keys within tol U_i of the top, a superset of the tie rule's
    # set (whose scale max_j |S_ij| lies between |top| and U_i); rows where the two could differ
    # (a key between tol |top| and tol U_i below the top) are recomputed below.
    track_low = not tol <= BOUNDED_SCALE_TOL
    if not track_low:
        unit = FLOAT32_UNIT if low else 2.0 ** -53
        q_norm = q_rows * (c2 if low else 1.0)
        k_norm = np.sqrt(np.einsum("rji,rji->ri", KT, KT)).max(axis=-1) * (c if low else 1.0)
        fs[..., 1] = -(q_norm * k_norm[:, None]) * (1.0 + 4.0 * (xs.shape[-1] + 4) * unit)
    ist = np.zeros((R, n, 2), dtype=np.intp)
    ist[..., 1] = -1

    def work(_, rs, qs, buf):
        fsq, istq, accq = (np.ascontiguousarray(a[rs, qs]) for a in (fs, ist, acc))
        for k0, ks, S in tiles.scores(rs, qs, buf):
            TK.leader_scan(S, values3[rs, ks], k0, fsq, istq, accq, tol, track_low)
        fs[rs, qs], ist[rs, qs], acc[rs, qs] = fsq, istq, accq

    sym = low and not track_low and symmetric is not False and _symmetric_route(B, p, n)
    if sym:
        _symmetric_scan(tiles, values3, fs, ist, acc, tol, TK)
    else:
        tiles.run(work)
    top, low_, mlow, xhigh = (fs[..., k] for k in range(4))
    thr = top - tol * np.maximum(top, -low_)  # the smallest threshold the row's scale allows
    # the largest: the tie rule's own where the minimum was tracked, else from the scale's lower bound |top|
    thr_high = thr if track_low else top - tol * np.abs(top)
    if low:
        x_rows = np.sqrt(np.einsum("rij,rij->ri", xs, xs))
        keys = x_rows.max(axis=-1)[:, None]
        qn = q_rows
        if sym:  # row j also saw fl32(<Q_i, K_j>) for S_ji, off by (d + 2) u |B x_i| |x_j| <= |B| max|x| |x_j|
            qn = np.maximum(qn, _norm(B) * x_rows)
        margin = 2.5 * (xs.shape[-1] + 2) * FLOAT32_UNIT * c * c2 * qn * keys  # in the scaled scores' units
        # one member whose every rival lies a few float32 errors below the threshold: the float64 set
        # is that member too (its score moves by at most e, the threshold by at most (1 + tol) e)
        unsure = ~((ist[..., 0] == 1) & (xhigh < thr - margin))
        # a query below float32's normal range lost relative precision that the margin does not cover
        unsure |= q_rows * c2 < SCREEN_TINY_QUERY
    else:
        unsure = ~((mlow >= thr_high) & (xhigh < thr))
    if unsure.any():
        _recompute_leaders(Q, KT, values3, tol, np.nonzero(unsure), acc, ist, p.systems * p.queries * p.keys)
    return acc, ist[..., 0], ist[..., 1]


def _symmetric_route(B, p: Plan, n: int) -> bool:
    """The tiles may be shared between the two blocks they join: ``B`` exactly symmetric (the
    identity, one matrix, or every matrix of the batch; a ``B`` symmetric but for one rounding
    does not qualify), square tiles, one system per block and more than one block."""
    if p.systems != 1 or p.queries != p.keys or n <= p.keys:
        return False
    return B is None or bool(np.array_equal(B, np.swapaxes(B, -1, -2)))


def _symmetric_scan(tiles, values3, fs, ist, acc, tol, TK):
    """The leader scan over the tiles ``(a, b)``, key block ``b >= a``, of symmetric scores:
    the rows of block ``a`` scan the tile (keys of block ``b``), those of block ``b`` its columns
    (keys of block ``a``: ``S_ji = S_ij``). The tiles are shared out in contiguous runs between
    the workers, each with its own running state of every row; the states are merged at the end
    (:func:`_merge_leader_states`), so no two threads write one row."""
    p = tiles.p
    R, n = tiles.R, tiles.n
    q = p.queries
    starts = list(range(0, n, q))
    pairs = [(r, a, b) for r in range(R) for ia, a in enumerate(starts) for b in starts[ia:]]
    w = max(1, min(p.workers, len(pairs)))
    runs = [pairs[len(pairs) * k // w:len(pairs) * (k + 1) // w] for k in range(w)]
    states = [(fs, ist, acc)] + [(fs.copy(), ist.copy(), acc.copy()) for _ in range(w - 1)]

    def work(k):
        fs_w, ist_w, acc_w = states[k]
        buf = tiles.buffer()
        cmax = np.empty(q, dtype=tiles.Q.dtype)
        for r, a, b in runs[k]:
            qa, kb = slice(a, min(n, a + q)), slice(b, min(n, b + q))
            shape = (1, qa.stop - qa.start, kb.stop - kb.start)
            S = buf[: shape[1] * shape[2]].reshape(shape)
            np.matmul(tiles.Q[r:r + 1, qa], tiles.KT[r:r + 1, :, kb], out=S)
            rows = [arr[r:r + 1, qa] for arr in (fs_w, ist_w, acc_w)]
            TK.leader_scan(S, values3[r:r + 1, kb], b, *rows, tol, False)
            if b != a:
                cm = cmax[: shape[2]]
                np.max(S[0], axis=0, out=cm)
                TK.leader_scan_cols(S[0], cm, values3[r, qa], a, fs_w[r, kb], ist_w[r, kb], acc_w[r, kb], tol)

    with contextlib.ExitStack() as stack:
        if w > 1 and stack.enter_context(_one_blas_thread()):
            with ThreadPoolExecutor(w, thread_name_prefix="attention_fw-tiles") as ex:
                list(ex.map(work, range(w)))
        else:
            for k in range(w):
                work(k)
    for fs_w, ist_w, acc_w in states[1:]:
        _merge_leader_states(fs, ist, acc, fs_w, ist_w, acc_w, tol)


def _merge_leader_states(fs, ist, acc, fs2, ist2, acc2, tol):
    """Merge into ``(fs, ist, acc)`` the running leader state of the same rows over other keys
    (the bounded-scale scan of ``_tile_kernels.leader_scan``, ``track_low=False``): the state of
    the two key sets together, as one scan over both would leave it up to the order of the sums
    and the first maximiser among equal tops (rows the caller then recomputes)."""
    top1, top2 = fs[..., 0].copy(), fs2[..., 0]
    top = np.maximum(top1, top2)
    thr = top - tol * np.maximum(top, -fs[..., 1])
    for f, i_, a_, t_ in ((fs, ist, acc, top1), (fs2, ist2, acc2, top2)):
        evict = (i_[..., 0] > 0) & (thr > t_)
        f[..., 3][evict] = np.maximum(f[..., 3][evict], t_[evict])
        i_[..., 0][evict] = 0
        f[..., 2][evict] = np.inf
        a_[evict] = 0.0
    arg = np.where(top2 > top1, ist2[..., 1], np.where(top1 > top2, ist[..., 1], np.minimum(ist[..., 1], ist2[..., 1])))
    fs[..., 0] = top
    np.minimum(fs[..., 2], fs2[..., 2], out=fs[..., 2])
    np.maximum(fs[..., 3], fs2[..., 3], out=fs[..., 3])
    ist[..., 0] += ist2[..., 0]
    ist[..., 1] = arg
    acc += acc2


def _recompute_leaders(Q, KT, values3, tol, where, acc, ist, entries):
    """The leader sets and first maximisers of the rows ``where`` from their whole rows of float64
    scores (the tie rule of :mod:`._checks`), in chunks of rows that fit the tile's size."""
    rr, ii = where
    TK = _tile_kernels.impl()
    step = max(1, entries // KT.shape[-1])
    for r in np.unique(rr):
        rows = ii[rr == r]
        for s in range(0, rows.size, step):
            i = rows[s:s + step]
            S = Q[r, i] @ KT[r]
            mask = leader_mask(S, tol)
            sums = np.empty((i.size, values3.shape[-1]))
            TK.leader_sums(mask, values3[r], sums)  # in key order, as the tiles' scan adds them
            acc[r, i] = sums
            ist[r, i, 0] = mask.sum(axis=-1)
            ist[r, i, 1] = _first_maximiser(S, Q[r, i], KT[r])


def _first_maximiser(S, Qi, K):
    """``S.argmax(axis=-1)``, except where several keys score within a product's rounding of the
    top: among those the first maximiser of their scores summed in one fixed order (so coincident
    keys score exactly alike wherever they sit in a product; a BLAS product may round two equal
    dot products differently by their position in its blocks)."""
    arg = S.argmax(axis=-1)
    d = Qi.shape[-1]
    top = S.max(axis=-1)
    slack = 4.0 * (d + 2) * 2.0 ** -53 * np.sqrt(np.einsum("ij,ij->i", Qi, Qi)) * np.sqrt(
        np.einsum("ij,ij->j", K, K)).max()
    cand = S >= (top - slack)[:, None]
    multi = np.nonzero(cand.sum(axis=-1) > 1)[0]
    if multi.size == 0:
        return arg
    pr, kj = np.nonzero(cand[multi])
    a, b = Qi[multi[pr]], K[:, kj].T
    canon = a[:, 0] * b[:, 0]
    for c in range(1, d):
        canon = canon + a[:, c] * b[:, c]
    starts = np.r_[0, np.nonzero(np.diff(pr))[0] + 1]
    best = np.maximum.reduceat(canon, starts)
    hit = np.nonzero(canon == best[pr])[0]
    first = hit[np.r_[True, np.diff(pr[hit]) > 0]]
    arg[multi[pr[first]]] = kj[first]
    return arg


SCREEN_PROBE_ROWS = 256
"""Rows whose float64 scores the float64 hardmax steps compute first to decide on the float32 screen."""

SCREEN_MAX_UNSURE = 1.0 / 32.0
"""The screen is taken when at most this share of the probed rows would need their float64 row again."""

SCREEN_MIN_ROWS = 4096
"""Below this many rows, over all systems, the steps use plain float64 (the probe would cost more than it saves)."""

SCREEN_TINY_QUERY = 2.0 ** -90
"""A query row whose scaled norm is below this (float32's normal range begins at ``2^-126``) is
always recomputed in float64 on the float32 route."""


def _screen_pays(Q, KT, tol, screen=None) -> bool:
    """Whether the float64 hardmax steps take the float32 screen (``screen=None``: decide; True: take it).

    The decision: at least :data:`SCREEN_MIN_ROWS` rows, and among :data:`SCREEN_PROBE_ROWS`
    evenly spaced rows (no randomness) scored exactly in float64, at most
    :data:`SCREEN_MAX_UNSURE` of them with a rival key within 1.5 float32 errors of the smallest
    threshold the screen may use (tied, clustered and coincident tokens: nearly every row) or a
    query too small for float32. The screen costs a float32 pass plus one float64 row per unsure
    row; plain float64 costs one float64 pass, so the screen pays while few rows are unsure.
    Either route gives the same answers; only the time depends on this.
    """
    if screen:
        return True
    R, n, d = Q.shape
    if R * n < SCREEN_MIN_ROWS:
        return False
    flat = np.unique(np.linspace(0, R * n - 1, SCREEN_PROBE_ROWS).astype(np.int64))
    rr, ii = np.divmod(flat, n)
    qn = np.sqrt(np.einsum("ij,ij->i", Q[rr, ii], Q[rr, ii]))
    kmax = np.sqrt(np.einsum("rji,rji->ri", KT, KT)).max(axis=-1)
    cq = _scaling.rescaled(Q) or 1.0
    unsure = int((qn * cq < SCREEN_TINY_QUERY).sum())
    for r in np.unique(rr):
        sel = rr == r
        Qp = Q[r, ii[sel]]
        cols = max(1, 2 ** 18 // Qp.shape[0])  # scores in slices of keys of 2 MiB each, twice
        parts = [slice(k0, k0 + cols) for k0 in range(0, n, cols)]
        top = np.max([(Qp @ KT[r][:, ks]).max(axis=-1) for ks in parts], axis=0)
        bound = qn[sel] * kmax[r]
        if tol > BOUNDED_SCALE_TOL:
            scale = np.maximum(top, -np.min([(Qp @ KT[r][:, ks]).min(axis=-1) for ks in parts], axis=0))
        else:
            scale = np.maximum(top, bound)
        edge = (top - tol * scale - 1.5 * 2.5 * (d + 2) * FLOAT32_UNIT * bound)[:, None]
        near = np.sum([(Qp @ KT[r][:, ks] >= edge).sum(axis=-1) for ks in parts], axis=0)
        unsure += int(((near > 1) & (qn[sel] * cq >= SCREEN_TINY_QUERY)).sum())
    return unsure <= SCREEN_MAX_UNSURE * flat.size

