"""The Chebyshev grid of the fast (SA-beta) step (issue 37, middle temperatures): against the dense float64
step over beta and states, its error bound against measured errors, the routing, bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest

from attention_fw.model import dynamics as D
from attention_fw.model import fast as F

B = np.array([[1.0, 0.3], [0.1, 0.8]])     # not symmetric: the grid needs no eigenbasis


def _states(rng, n=1024):
    a, rr = rng.uniform(0, 2 * np.pi, n), np.sqrt(rng.random(n))
    yield "disk", np.stack([rr * np.cos(a), rr * np.sin(a)], 1)
    yield "gaussian", rng.normal(size=(n, 2))
    yield "clusters", np.concatenate([rng.normal(m, 0.01, (n // 4, 2)) for m in ([1, 0], [0, 1], [-1, -1], [1, 1])])
    yield "coincident", np.tile([[0.3, 0.4]], (n, 1))
    half = np.tile([[0.5, -0.2]], (n // 2, 1))
    yield "two points", np.concatenate([half, half + [0.1, 0.3]])
    near = rng.normal(size=(n, 2)) * 1e-3
    near[: n // 50] += [1.0, 0.0]                     # most tokens near the origin, a few far
    yield "near the origin", near
    yield "shifted", rng.normal(size=(n, 2)) * 0.3 + 2.0


def _bound(x):
    r = np.sqrt(((x - x.mean(0)) ** 2).sum(1).max())
    return F.STEP_TOL * r + 64 * np.finfo(float).eps * np.abs(x).max()


@pytest.fixture
def grid_first(monkeypatch):
    """The routing's costs of the other sums made huge: every row the grid can take, it takes."""
    for name in ("COST_TERM", "COST_BOX", "COST_DENSE", "COST_TAYLOR", "COST_SETUP"):
        monkeypatch.setattr(F, name, 1.0)


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0, 100.0, 1000.0])
def test_grid_step_within_tolerance_of_the_dense_step(beta, grid_first):
    """|m_fast - m_dense| <= 1e-8 r + 64 eps max|x| for every token, the grid taking every row it can."""
    rng = np.random.default_rng(int(beta * 10) + 1)
    taken = 0
    for name, x in _states(rng):
        for Bm in (None, B):
            before = F.SOFTMAX_STATS["grid_rows"]
            a, b = F.softmax_step(x, 1.0, beta, Bm), D.softmax_step(x, 1.0, beta, Bm)
            assert np.linalg.norm(a - b, axis=1).max() <= _bound(x), (name, Bm is None)
            taken += F.SOFTMAX_STATS["grid_rows"] - before
    if beta <= 100.0:
        assert taken > 0


def test_grid_rows_direct_over_rates():
    """``_grid_rows`` at every rate of GRID_RATES (its p of grid_order) meets GRID_TOL on a disk and a cloud."""
    rng = np.random.default_rng(3)
    a_, rr = rng.uniform(0, 2 * np.pi, 2000), np.sqrt(rng.random(2000))
    for x in (np.stack([rr * np.cos(a_), rr * np.sin(a_)], 1), rng.normal(size=(2000, 2))):
        y = np.ascontiguousarray(x - x.mean(0))
        r = np.sqrt((y ** 2).sum(1).max())
        for beta in (3.0, 30.0):
            q = np.ascontiguousarray(beta * x @ B.T)
            ref = _dense_mean(q, y)
            for a in F.GRID_RATES:
                lay = F._grid_layout_at(q.min(0), q.max(0), y.min(0), y.max(0), len(x), len(x), a, F._GRID_ORDERS[a])
                if lay is None:
                    continue
                out = np.empty_like(x)
                assert F._grid_rows(q, y, np.arange(len(x)), lay, out).size == 0
                assert np.linalg.norm(out - ref, axis=1).max() <= F.GRID_TOL * r + 1e-13 * r, a


def _dense_mean(q, y):
    S = q @ y.T
    S -= S.max(axis=1, keepdims=True)
    W = np.exp(S)
    return (W @ y) / W.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("a", [0.5, 2.0, 5.0])
def test_error_bound_against_measured_errors(a):
    """Orders far below the tolerance's: the measured error is below the bound, and the bound is not
    loose by more than a few orders of magnitude where it is far above rounding."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(1500, 2))
    y = np.ascontiguousarray(x - x.mean(0))
    r = np.sqrt((y ** 2).sum(1).max())
    q = np.ascontiguousarray(4.0 * x)
    ref = _dense_mean(q, y)
    for p in (3, 5, 7, 9):
        bound = F.grid_error_bound(a, a, p)
        if not bound < 0.5:           # no bound (a >= 2p + 2) or a useless one: not checked
            continue
        lay = F._grid_layout_at(q.min(0), q.max(0), y.min(0), y.max(0), len(x), len(x), a, p)
        out = np.empty_like(x)
        F._grid_rows(q, y, np.arange(len(x)), lay, out)
        err = np.linalg.norm(out - ref, axis=1).max() / r
        assert err <= bound, (a, p, err, bound)
        if 1e-3 > bound > 1e-9:
            assert err > bound * 1e-6, (a, p, err, bound)


def test_grid_order_meets_its_bound():
    for a in (0.5, 1.0, 3.0, 6.0):
        p = F.grid_order(a)
        assert F.grid_error_bound(a, a, p) <= F.GRID_TOL < F.grid_error_bound(a, a, p - 1)
    # the 1-D term against the exact Bessel sum it bounds: 4 e^a sum_{k >= p} I_k(a)
    from scipy.special import iv
    for a in (0.5, 2.0, 6.0):
        for p in (4, 10, 20):
            exact = 4 * math.exp(a) * sum(iv(k, a) for k in range(p, p + 60))
            assert exact <= F._cheb_error(a, p) <= 10 * exact + 1e-300


def test_routing_where_the_grid_goes():
    """Defaults: a disk at beta = 10 and 100 goes to the grid; beta = 1000 (exponents beyond 700) never;
    the Gaussian cloud at beta = 10 splits (rim pruned, bulk on the grid) at n = 50,000; the plan agrees
    with the step's counters."""
    rng = np.random.default_rng(8)
    n = 50_000
    a_, rr = rng.uniform(0, 2 * np.pi, n), np.sqrt(rng.random(n))
    disk = np.stack([rr * np.cos(a_), rr * np.sin(a_)], 1)
    for beta in (10.0, 100.0):
        plan = F.softmax_plan(disk, beta)
        assert plan["grid_rows"] >= 0.9 * n and plan["dense_rows"] == 0, plan
        before = dict(F.SOFTMAX_STATS)
        F.softmax_step(disk, 0.5, beta)
        for k in ("taylor_rows", "grid_rows", "pruned_rows", "dense_rows"):
            assert F.SOFTMAX_STATS[k] - before[k] == plan[k], (k, plan)
    plan = F.softmax_plan(disk, 1000.0)
    assert plan["grid_rows"] == 0 and plan["grid_p"] == 0
    g = rng.normal(size=(n, 2))
    plan = F.softmax_plan(g, 10.0)
    assert plan["grid_rows"] > n / 2 and plan["pruned_rows"] > 0 and plan["dense_rows"] == 0, plan
    # the underflow guard and the node cap
    assert F._grid_layout(np.array([-400.0, -1.0]), np.array([400.0, 1.0]), np.array([-1.0, -1.0]),
                          np.array([1.0, 1.0]), 10, 10) is None


def test_bad_input():
    with pytest.raises(ValueError):
        F.grid_error_bound(-1.0, 1.0, 5)
    with pytest.raises(ValueError):
        F.grid_error_bound(1.0, 1.0, 0)
    with pytest.raises(ValueError):
        F.grid_error_bound(1.0, 1.0, 2.5)
    with pytest.raises(ValueError):
        F.grid_order(float("nan"))
    with pytest.raises(ValueError):
        F.softmax_plan(np.zeros((10, 3)), 1.0)
    with pytest.raises(ValueError):
        F.softmax_plan(np.zeros((10, 2)), -1.0)
    assert F.grid_error_bound(1.0, 1.0, 1) == math.inf or F.grid_error_bound(1.0, 1.0, 1) > 1.0


def test_pruned_sum_bits_do_not_depend_on_the_order_or_the_split_of_its_rows():
    """The pruned sum takes its rows in the order of their tokens' cells, 16 at a time through the tree, split
    between threads: each row's result is bitwise that of the rows summed one by one in index order (the
    group keeps every leaf a row keeps, in the same order, and each row tests them as it would alone)."""
    rng = np.random.default_rng(21)
    x = rng.normal(size=(6000, 2))
    q = 100.0 * x
    out = np.empty_like(x)
    route = F._Route(x, x - x.mean(0), q, np.arange(x.shape[0]), out)
    rows = np.arange(x.shape[0])
    h = route.row_max(rows)
    one = np.empty_like(x)
    terms = F._softmax_kernels().pruned_rows(q, x, rows, h, route.T, *route.tree(), one)[0]
    split = np.full_like(x, np.nan)
    assert route.pruned_sum(rows[::-1].copy(), h, split, workers=3, per_worker=1000) == terms
    assert np.array_equal(split, one)


def test_routing_estimates_the_pruned_sum_of_a_wide_cloud():
    """A Gaussian cloud at beta = 100 (n = 200,000): the rows nearest the origin (|q| small, a cap holding most
    of the cloud) are not sent to the pruned sum, whose terms per row the plan estimates within a factor 1.5
    of what the step sums. (Bands of the rows by |q| that were 25 % wide at the bottom sent every row to the
    pruned sum at 47 estimated and 878 summed terms per row.)"""
    rng = np.random.default_rng(8)
    n = 200_000
    g = rng.normal(size=(n, 2))
    plan = F.softmax_plan(g, 100.0)
    before = dict(F.SOFTMAX_STATS)
    F.softmax_step(g, 0.5, 100.0)
    rows = F.SOFTMAX_STATS["pruned_rows"] - before["pruned_rows"]
    summed = (F.SOFTMAX_STATS["pruned_terms"] - before["pruned_terms"]) / rows
    assert rows == plan["pruned_rows"] and plan["grid_rows"] + plan["dense_rows"] > 0, plan
    assert plan["terms_per_pruned_row"] / 1.5 <= summed <= 1.5 * plan["terms_per_pruned_row"], (summed, plan)
    near = np.argsort(np.abs(g).max(axis=1))[:100]      # the hundred tokens nearest the origin (max norm)
    q = 100.0 * g
    c = g.mean(0)
    route = F._Route(g, g - c, q, np.flatnonzero(np.sqrt((q * q).sum(1)) * np.sqrt(((g - c) ** 2).sum(1).max())
                                                  > F.RHO_TAYLOR), np.empty_like(g))
    assert not np.isin(near, route.pruned).any()


@pytest.mark.parametrize("beta", [30.0, 100.0, 1000.0])
def test_sector_grids_within_tolerance_of_the_dense_step(beta, monkeypatch):
    """The sector grids taking every band they can (their costs set to 0): within 1e-8 r + 64 eps max|x| of the
    dense float64 step for every token, over the states, a general B and B = -I; they take rows at every beta."""
    monkeypatch.setattr(F, "COST_SECTOR", 0.0)
    monkeypatch.setattr(F._Route, "_sector_estimate", lambda self, rows, mean: 0.0)
    rng = np.random.default_rng(int(beta) + 7)
    taken = 0
    for name, x in _states(rng, 2000):
        for Bm in (None, B, -np.eye(2)):
            before = F.SOFTMAX_STATS["sector_rows"]
            a, b = F.softmax_step(x, 1.0, beta, Bm), D.softmax_step(x, 1.0, beta, Bm)
            assert np.linalg.norm(a - b, axis=1).max() <= _bound(x), (name, Bm is None)
            taken += F.SOFTMAX_STATS["sector_rows"] - before
    assert taken > 0


def test_sector_sources_hold_every_term_a_row_of_the_cell_needs():
    """``_sector_sources`` keeps every source ``x_j`` with ``<q_i, x_j> >= h_i - T - 1`` for some row ``i`` of the cell
    (the bound the step's error rests on), and drops most of the others on a disk at beta = 1000."""
    rng = np.random.default_rng(12)
    n = 20_000
    a_, rr = rng.uniform(0, 2 * np.pi, n), np.sqrt(rng.random(n))
    x = np.stack([rr * np.cos(a_), rr * np.sin(a_)], 1)
    q = 1000.0 * x
    route = F._Route(x, x - x.mean(0), q, np.arange(n), np.empty_like(x))
    xs, start, LO, HI, _, levels = route.tree()
    lo, hi = LO[levels - 1], HI[levels - 1]
    T1 = route.T + 1.0
    for theta in np.linspace(-np.pi, np.pi, 7)[:-1]:
        ang = np.arctan2(x[:, 1], x[:, 0])
        rows = np.flatnonzero((np.abs(np.angle(np.exp(1j * (ang - theta)))) < 0.1) & (rr > 0.5))
        h = (q[rows] @ x.T).max(axis=1)
        mag = np.linalg.norm(q[rows], axis=1)
        R = np.array([[np.cos(theta), np.sin(theta)], [-np.sin(theta), np.cos(theta)]])
        kept, xr = F._sector_sources(q[rows] / mag[:, None], float(((h - T1) / mag).min()), R, xs, start, lo, hi,
                                     lo[:, 0] <= hi[:, 0])
        need = np.flatnonzero(((q[rows] @ xs.T) >= (h - T1)[:, None]).any(axis=0))
        assert np.isin(need, kept).all() and np.allclose(xr, xs[kept] @ R.T)
        assert kept.size < 0.5 * n


def test_hull_row_max_is_the_largest_score():
    """``_hull_row_max`` (a binary search over the hull's edge normals) gives ``max_j <q_i, x_j>`` within 4 eps of
    ``max_i |q_i| max_j |x_j|`` per coordinate, over the states whose hull is not flat."""
    rng = np.random.default_rng(3)
    for name, x in _states(rng, 3000):
        cand = F._candidates(np.ascontiguousarray(x), 0.0)[0]
        if cand is None:
            continue
        q = rng.normal(size=(5000, 2)) * 100.0
        q[:8] = [[1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, 1], [1e-300, 0], [-3, 1e-12]]
        exact = (q @ x.T).max(axis=1)
        scale = np.abs(q).max(axis=1) * np.abs(x).max()
        assert (np.abs(F._hull_row_max(q, x, cand) - exact) <= 4 * np.finfo(float).eps * scale).all(), name


def _disk(rng, n):
    a_, rr = rng.uniform(0, 2 * np.pi, n), np.sqrt(rng.random(n))
    return np.stack([rr * np.cos(a_), rr * np.sin(a_)], 1)


def test_routing_sends_a_wide_sharp_disk_to_the_sector_grids():
    """Defaults: a uniform disk at beta = 1000 with n = 200,000 (caps of about 1.3 % of the tokens) goes to the sector
    grids, and the step's counters agree with the plan."""
    disk = _disk(np.random.default_rng(8), 200_000)
    plan = F.softmax_plan(disk, 1000.0)
    assert plan["sector_rows"] >= 0.9 * disk.shape[0], plan
    before = dict(F.SOFTMAX_STATS)
    F.softmax_step(disk, 0.5, 1000.0)
    for k in ("taylor_rows", "grid_rows", "sector_rows", "pruned_rows", "dense_rows"):
        assert F.SOFTMAX_STATS[k] - before[k] == plan[k], (k, plan)


def test_sector_grids_agree_with_the_pruned_sum_at_scale(monkeypatch):
    """n = 40,000 on a disk at beta = 1000 and, with a general B, 300: the step by the sector grids (forced) and by the
    pruned sum (forced; the grid keeps the rows nearest the origin) agree within twice the step's tolerance (each is
    within it of the exact step)."""
    x = _disk(np.random.default_rng(9), 40_000)
    monkeypatch.setattr(F._Route, "_sector_estimate", lambda self, rows, mean: 0.0)
    for beta, Bm in ((1000.0, None), (300.0, B)):
        monkeypatch.setattr(F, "COST_SECTOR", 0.0)
        before = F.SOFTMAX_STATS["sector_rows"]
        a = F.softmax_step(x, 1.0, beta, Bm)
        assert F.SOFTMAX_STATS["sector_rows"] - before > 0.25 * x.shape[0]
        monkeypatch.setattr(F, "COST_SECTOR", math.inf)
        b = F.softmax_step(x, 1.0, beta, Bm)
        assert np.linalg.norm(a - b, axis=1).max() <= 2 * _bound(x), (beta, Bm is None)


def test_quadtree_leaves_are_the_morton_cells_of_their_points():
    """``_grid``: the points in the stable order of their Morton keys (bits of the cell's column and row
    interleaved), each leaf's box the bounding box of its points, each parent's box that of its four children;
    on a cloud with coincident points, a degenerate (flat) one and a tiny one."""
    rng = np.random.default_rng(21)
    clouds = [rng.normal(size=(5000, 2)), np.repeat(rng.uniform(size=(40, 2)), 50, axis=0),
              np.stack([rng.uniform(size=3000), np.full(3000, 0.5)], 1), rng.uniform(size=(3, 2))]
    for x in clouds:
        order, start, LO, HI, fan, levels = F._grid(x)
        L = levels - 1
        g = 2 ** L
        lo, hi = x.min(0), x.max(0)
        span = np.where(hi > lo, hi - lo, 1.0)
        ij = np.minimum((((x - lo) / span) * g).astype(np.int64), g - 1)
        key = np.zeros(len(x), dtype=np.int64)
        for bit in range(L - 1, -1, -1):
            key = key * 4 + ((ij[:, 0] >> bit) & 1) * 2 + ((ij[:, 1] >> bit) & 1)
        assert np.array_equal(order, np.argsort(key, kind="stable"))
        assert np.array_equal(np.diff(start), np.bincount(key, minlength=g * g))
        for c in np.flatnonzero(np.diff(start)):
            pts = x[order[start[c]:start[c + 1]]]
            assert np.array_equal(LO[L, c], pts.min(0)) and np.array_equal(HI[L, c], pts.max(0))
        for lev in range(L):
            m = 4 ** lev
            assert np.array_equal(LO[lev, :m], LO[lev + 1, :4 * m].reshape(m, 4, 2).min(axis=1))
            assert np.array_equal(HI[lev, :m], HI[lev + 1, :4 * m].reshape(m, 4, 2).max(axis=1))
        assert fan == 4 and np.array_equal(LO[0, 0], lo) and np.array_equal(HI[0, 0], hi)


def test_grids_pass_by_pass_are_bitwise_one_at_a_time():
    """``_run_grids`` (grids made and spread on two threads, transformed in turn, gathered on the threads) gives
    each grid bitwise what ``_grid_rows`` gives it alone (on one thread or two), keeps a task without a grid as
    None, and returns the early grids first."""
    from concurrent.futures import ThreadPoolExecutor
    rng = np.random.default_rng(11)
    x = _disk(rng, 6000)
    y = np.ascontiguousarray(x - x.mean(0))
    jobs = []
    for beta, part in ((20.0, slice(0, 3000)), (60.0, slice(1000, 6000)), (5.0, slice(0, 6000))):
        q = np.ascontiguousarray(beta * x @ B.T)
        rows = np.arange(x.shape[0])[part]
        lay = F._grid_layout(*F._span(q[rows]), *F._span(y), y.shape[0], rows.size)
        assert lay is not None
        alone = []
        for workers in (1, 2):
            out = np.full_like(x, np.nan)
            assert F._grid_rows(q, y, rows, lay, out, workers).size == 0
            alone.append(out[rows])
        assert np.array_equal(alone[0], alone[1])
        jobs.append((q, rows, lay, alone[0]))
    with ThreadPoolExecutor(2) as ex:
        q0, rows0, lay0, _ = jobs[0]
        early = [ex.submit(F._made, lambda: F._GridJob(q0, y, rows0, lay0))]
        tasks = [(rows.size, (lambda q=q, rows=rows, lay=lay: F._GridJob(q, y, rows, lay))) for q, rows, lay, _ in jobs[1:]]
        tasks.insert(1, (10**9, lambda: None))
        res = F._run_grids(tasks, ex, early)
    assert len(res) == 4 and res[2] is None
    for (q, rows, lay, ref), got in zip(jobs, [res[0], res[1], res[3]]):
        vals, bad = got
        assert bad.size == 0 and np.array_equal(vals, ref)


def test_route_row_max_over_states():
    """The route's row maxima (the hull's normals made once, or the candidates where the hull is flat) are the
    largest scores within 4 eps of ``|q_i| max_j |x_j|`` per coordinate, also when asked again for some rows."""
    rng = np.random.default_rng(12)
    for name, x in _states(rng, 2000):
        x = np.ascontiguousarray(x)
        q = np.ascontiguousarray(300.0 * x @ B.T)
        route = F._Route(x, x - x.mean(0), q, np.arange(x.shape[0]), np.empty_like(x))
        if route.candidates() is None:
            continue
        rows = rng.permutation(x.shape[0])
        route.row_max(rows[:500])
        h = route.row_max(rows)
        exact = (q @ x.T).max(axis=1)
        scale = np.abs(q).max(axis=1) * np.abs(x).max()
        assert (np.abs(h - exact) <= 4 * np.finfo(float).eps * scale + 1e-300).all(), name


def test_small_argsort_is_the_stable_sort():
    rng = np.random.default_rng(13)
    for bound in (7, 2**16, 2**16 + 1, 10**6):
        key = rng.integers(0, bound, size=5000)
        assert np.array_equal(F._small_argsort(key, bound), np.argsort(key, kind="stable"))


def test_hull_row_max_falls_back_where_qhull_cannot_make_the_hull():
    """Candidates that qhull cannot take (two points, three on a line): ``_hull_normals`` says so (False) and the
    maxima come from the candidates themselves, exactly."""
    rng = np.random.default_rng(14)
    x = rng.normal(size=(50, 2))
    x[:3] = [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    q = rng.normal(size=(400, 2)) * 50.0
    for cand in (np.array([0, 2]), np.array([0, 1, 2])):
        assert F._hull_normals(x, cand) is False
        assert np.array_equal(F._hull_row_max(q, x, cand), (q @ x[cand].T).max(axis=1))
