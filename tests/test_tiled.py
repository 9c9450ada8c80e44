"""The tiled steps (attention_fw.model.tiled) compute the same dynamics as the untiled ones.

Softmax: the same numbers to 1e-12 relative (relative to the largest |x|). Hardmax: the same
leader sets -- first maximisers and tie counts identical, ties across tile boundaries included.
The chain (SAP): the same transition law, by chi-square tests (a false-alarm rate of 1e-3 each,
fixed seeds, so a run either passes or fails deterministically) and by the exact escape
probability of a frozen configuration, read off the sampler's own Bernoulli draws.

Every test with the ``kernels`` fixture runs with the numba tile passes and with their numpy versions.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from scipy import stats

from attention_fw.model import _kernels as KN
from attention_fw.model import _tile_kernels as TK
from attention_fw.model import dynamics as D
from attention_fw.model import tiled as T
from attention_fw.model import tiled_leaders as TL

ALPHA = 1e-3  # false-alarm rate of each chi-square test below


@pytest.fixture(params=["numba", "numpy"])
def kernels(request, monkeypatch):
    monkeypatch.setattr(KN, "_IMPL", None)
    monkeypatch.setenv("ATTENTION_FW_KERNELS", request.param)
    assert TK.impl().name == request.param
    return request.param


def rel_err(a, b, x):
    return float(np.abs(a - b).max() / np.abs(x).max())


def regular_polygon(k, phase=np.pi / 2):
    th = phase + 2 * np.pi * np.arange(k) / k
    return np.c_[np.cos(th), np.sin(th)]


# ----------------------------------------------------------------- softmax
@pytest.mark.parametrize("shape", [(37, 5), (3, 50, 4), (2, 130, 16)])
@pytest.mark.parametrize("beta", [0.0, 1e-3, 1.0, 25.0, 1e3, 1e6])
def test_softmax_step_equals_the_untiled_step(kernels, shape, beta):
    """Tiles of 1, 7 and 64 keys (last tile shorter), and a budget so small that queries are split too."""
    x = np.random.default_rng(1).standard_normal(shape)
    ref = D.softmax_step(x, 0.3, beta)
    for kw in (dict(key_tile=1), dict(key_tile=7), dict(key_tile=64), dict(budget=8 * 2 * 64 * 9)):
        assert rel_err(T.softmax_step(x, 0.3, beta, **kw), ref, x) <= 1e-12, kw


def test_query_blocks_and_system_chunks_are_planned_from_the_budget(monkeypatch):
    """Tiles of TILE_CACHE_FACTOR x the L2 cache of float64 scores, square powers of two of keys, capped
    by the budget shared out between the workers (ARRAYS_PER_TILE arrays each)."""
    monkeypatch.setenv("ATTENTION_FW_CACHE_BYTES", str(2 ** 20))  # 2 MiB tiles: 2^18 scores
    p = T.plan((70, 5), budget=8 * 2 * 64 * 9, workers=1)
    assert (p.systems, p.queries, p.keys, p.workers) == (1, 9, 64, 1)
    p = T.plan((70, 5), budget=8 * 2 * 64 * 9, workers=2)  # half the budget each: 4 queries
    assert (p.systems, p.queries, p.keys, p.workers) == (1, 4, 64, 2)
    p = T.plan((100, 30, 4), budget=8 * 2 * 6080, workers=1)  # 6080 scores: six systems of 30 x 30
    assert (p.systems, p.queries, p.keys) == (6, 30, 30)
    p = T.plan((65536, 64), budget=256 * 2 ** 20, workers=2)  # the default budget: cache-sized blocks
    assert (p.systems, p.queries, p.keys, p.workers) == (1, 512, 512, 2) and p.tile_bytes == 2 * 2 ** 20
    p = T.plan((65536, 64), budget=2 ** 20, workers=2)  # 2^15 scores per worker: 128 keys x 256 queries
    assert (p.queries, p.keys) == (256, 128) and 2 * ARRAYS * p.tile_bytes <= 2 ** 20
    p = T.plan((65536, 64), key_tile=100, query_tile=1000, workers=3)
    assert (p.systems, p.queries, p.keys, p.workers) == (1, 1000, 100, 3)
    assert T.plan((4, 100, 2), workers=8).workers == 1  # one block: one worker
    monkeypatch.setenv("ATTENTION_FW_CACHE_BYTES", str(2 ** 18))
    assert T.plan((65536, 64), workers=1).keys == 256
    assert not T.fits((65536, 64)) and T.fits((1000, 64, 8)) and T.fits((2, 2800, 64)) and not T.fits((2, 2900, 64))


ARRAYS = T.ARRAYS_PER_TILE


def test_cache_size_and_threads_are_read_and_checked(monkeypatch):
    monkeypatch.delenv("ATTENTION_FW_CACHE_BYTES", raising=False)
    assert T.cache_bytes() >= 2 ** 14
    monkeypatch.setenv("ATTENTION_FW_CACHE_BYTES", "3e6")
    assert T.cache_bytes() == 3_000_000
    for bad in ("lots", "100"):
        monkeypatch.setenv("ATTENTION_FW_CACHE_BYTES", bad)
        with pytest.raises(ValueError, match="ATTENTION_FW_CACHE_BYTES"):
            T.cache_bytes()
    monkeypatch.delenv("ATTENTION_FW_CACHE_BYTES")
    monkeypatch.setenv("ATTENTION_FW_THREADS", "3")
    assert T.threads() == 3 and T.plan((4096, 8)).workers == 3
    monkeypatch.setenv("ATTENTION_FW_THREADS", "0")
    with pytest.raises(ValueError, match="ATTENTION_FW_THREADS"):
        T.threads()


@pytest.mark.parametrize("beta", [0.5, 40.0])
def test_softmax_with_a_key_query_matrix_and_one_per_system(kernels, beta):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 33, 3))
    B = rng.standard_normal((3, 3))
    assert rel_err(T.softmax_step(x, 0.4, beta, B, key_tile=5), D.softmax_step(x, 0.4, beta, B), x) <= 1e-12
    Bs = rng.standard_normal((4, 3, 3))
    ref = np.stack([D.softmax_step(s, 0.4, beta, b) for s, b in zip(x, Bs)])
    assert rel_err(T.softmax_step(x, 0.4, beta, Bs, key_tile=5), ref, x) <= 1e-12


def test_attention_apply_is_attention_times_values(kernels):
    rng = np.random.default_rng(3)
    x, v = rng.standard_normal((2, 40, 3)), rng.standard_normal((2, 40, 5))
    for beta in (0.0, 2.0, 300.0):
        ref = D.attention(x, beta) @ v
        assert rel_err(T.attention_apply(x, v, beta, key_tile=6), ref, v) <= 1e-12
    np.testing.assert_allclose(T.attention_apply(x, v, key_tile=6), D.attention(x) @ v, rtol=0, atol=1e-14)


@pytest.mark.parametrize("e", [-170, 160])
def test_extreme_token_scales_behave_as_today(kernels, e):
    """Tokens of size 2^-170 or 2^160 (scores that would underflow or overflow): the same step."""
    x = np.random.default_rng(4).standard_normal((30, 3)) * 2.0 ** e
    for beta in (0.0, 1.0, 1e6):
        assert rel_err(T.softmax_step(x, 0.5, beta, key_tile=4), D.softmax_step(x, 0.5, beta), x) <= 1e-12
    assert rel_err(T.hardmax_step(x, 0.5, key_tile=4), D.hardmax_step(x, 0.5), x) <= 1e-15


def test_beta_1e6_is_the_hardmax_and_tiny_gamma_does_not_overflow(kernels):
    x = np.random.default_rng(5).uniform(-1, 1, size=(20, 12, 3))
    np.testing.assert_allclose(T.softmax_step(x, 0.4, 1e6, key_tile=5), D.hardmax_step(x, 0.4), atol=1e-12)
    y = T.softmax_step(x, 1e-250, 3.0, key_tile=5)
    assert np.isfinite(y).all() and rel_err(y, x, x) <= 1e-15


# ----------------------------------------------------------------- hardmax
def check_same_leaders(x, tiles, B=None):
    counts, first = D.tie_counts(x, B), D.leaders(x, B)
    step = D.hardmax_step(x, 0.5, B)
    for k in tiles:
        np.testing.assert_array_equal(T.tie_counts(x, B, key_tile=k), counts, err_msg=f"key_tile={k}")
        np.testing.assert_array_equal(T.leaders(x, B, key_tile=k), first, err_msg=f"key_tile={k}")
        assert rel_err(T.hardmax_step(x, 0.5, B, key_tile=k), step, x) <= 1e-15
    return counts


def test_generic_leaders_are_identical(kernels):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 60, 4))
    assert (check_same_leaders(x, (1, 7, 60)) == 1).all()
    check_same_leaders(x, (3, 16), B=rng.standard_normal((4, 4)))


def test_coincident_tokens_tie_across_tiles(kernels):
    """Five copies of each of three vertices, shuffled over the tiles, and a centre token tied with
    all fifteen: the tie counts (with multiplicity) and the averages are those of the untiled step."""
    v = np.eye(3)
    x = np.repeat(v, 5, axis=0)[np.random.default_rng(7).permutation(15)]
    x = np.vstack([x, [[0.2, 0.2, 0.2]]])
    counts = check_same_leaders(x, (1, 2, 3, 4, 16))
    assert counts.tolist() == [5] * 15 + [15]


def test_rounding_spoilt_ties_of_a_rotated_square(kernels):
    sq = regular_polygon(4, phase=0.1234)
    x = np.vstack([sq, [[0.0, 0.0]]])
    assert check_same_leaders(np.c_[x, np.zeros(5)], (1, 2, 3))[4] == 5  # d = 3: the BLAS path


def test_near_ties_straddling_the_tolerance_between_tiles(kernels):
    """Scores 1 + m 5e-16 for random m, within a few tie tolerances (16 eps) of each other: the
    running set of one tile is partly wrong for the final threshold, and the exact set is recovered."""
    rng = np.random.default_rng(8)
    for _ in range(60):
        m = rng.integers(0, 12, size=20) * 0.5e-15 * rng.choice([1, 3], size=20)
        x = np.c_[1 + m, rng.uniform(-0.01, 0.01, size=20), np.zeros(20)]
        x[0] = [1.0, 0.0, 0.0]  # scores of token 0 are exactly the first coordinates
        for k in (1, 2, 3, 5):
            assert T.tie_counts(x, key_tile=k)[0] == D.tie_counts(x)[0]
            np.testing.assert_allclose(T.attention_apply(x, x, key_tile=k)[0], D.attention(x)[0] @ x, rtol=0, atol=1e-15)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_keys_between_the_top_scale_and_the_cauchy_schwarz_scale_are_decided_exactly(kernels, precision):
    """The tiles track each row's maximum alone, the tie rule's scale max_j |S_ij| bounded by
    |x_i| max_j |x_j| (here 200, the true scale 100): keys whose gap to the top lies between tol |top|
    and tol 200 are neither certainly in nor certainly out, and their rows are decided exactly."""
    tol = T._checks.tie_tol(None, 2)
    for gap in (0.5, 50.0, 99.0, 101.0, 150.0, 199.0, 250.0):
        x = np.array([[1.0, 0.0], [-100.0, 0.0], [1.0 - gap * tol, 0.0], [0.0, 200.0], [1.0, 0.0]])
        for k in (1, 2, 5):
            np.testing.assert_array_equal(T.tie_counts(x, key_tile=k, precision=precision), D.tie_counts(x))
            # token 0's leaders: itself, token 4, and token 2 exactly when gap < 100 (the scale is 100)
            assert T.tie_counts(x, key_tile=k, precision=precision)[0] == (3 if gap < 100 else 2)


def test_exact_tie_rule_and_tolerance_are_passed_on(kernels):
    x = np.array([[1.0, 0.0, 0.0], [1.0, 1e-9, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    for rtol in (0.0, 1e-6, 1e-2):  # 1e-2: above BOUNDED_SCALE_TOL, the running minimum tracked
        np.testing.assert_array_equal(T.tie_counts(x, tie_rtol=rtol, key_tile=1), D.tie_counts(x, tie_rtol=rtol))


# ----------------------------------------------------------------- the chain (SAP)
def chi_square_pvalue(observed, expected):
    """Pearson's statistic over cells with expected count >= 5 (the others pooled into one cell)."""
    observed, expected = np.ravel(observed).astype(float), np.ravel(expected).astype(float)
    big = expected >= 5
    o = np.append(observed[big], observed[~big].sum())
    e = np.append(expected[big], expected[~big].sum())
    keep = e > 0
    stat = float(((o[keep] - e[keep]) ** 2 / e[keep]).sum())
    return float(stats.chi2.sf(stat, keep.sum() - 1))


def test_sap_jump_targets_follow_the_softmax_law(kernels):
    """A frozen configuration of 12 tokens copied over 20,000 systems, tiles of 5 keys (5, 5, 2):
    the counts of every (token, target) pair against N A_ij, one chi-square test (false alarm 1e-3)."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((12, 3))
    N, beta = 20_000, 1.5
    _, J = T.sap_step(np.broadcast_to(x, (N,) + x.shape), 0.2, beta, rng=10, key_tile=5, return_choice=True)
    counts = np.stack([np.bincount(J[:, i], minlength=12) for i in range(12)])
    assert chi_square_pvalue(counts, N * D.attention(x, beta)) > ALPHA


def test_sap_chain_over_many_steps_has_the_untiled_transition_law(kernels):
    """A running chain (200 systems of 10 tokens, 60 steps, tiles of 3 keys): at every step each
    pick J_i is mapped through the randomised probability integral transform of the untiled law
    A_i. (at the current state), which makes it uniform on (0, 1) exactly when the laws agree;
    the 240,000 values in 20 equal bins, one chi-square test (false alarm 1e-3)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((200, 10, 2))
    beta, u = 2.0, []
    for _ in range(60):
        A = D.attention(x, beta)
        y, J = T.sap_step(x, 0.3, beta, rng=rng, key_tile=3, return_choice=True)
        cum = np.cumsum(A, axis=-1) - A
        pj = np.take_along_axis(A, J[..., None], -1)[..., 0]
        u.append(np.take_along_axis(cum, J[..., None], -1)[..., 0] + rng.random(J.shape) * pj)
        x = y
    counts = np.histogram(np.concatenate(u).ravel(), bins=20, range=(0, 1))[0]
    assert chi_square_pvalue(counts, np.full(20, counts.sum() / 20)) > ALPHA


def test_tiled_and_untiled_samples_are_homogeneous(kernels):
    """Two-sample chi-square (false alarm 1e-3): the targets of one token among coincident and
    distinct tokens, from the tiled and from the untiled sampler."""
    x = np.array([[1.0, 0.0], [1.0, 0.0], [0.2, 0.9], [-0.5, 0.3], [0.0, -1.0]])
    N, beta = 100_000, 2.0
    xs = np.broadcast_to(x, (N,) + x.shape)
    _, Jt = T.sap_step(xs, 0.5, beta, rng=12, key_tile=2, return_choice=True)
    _, Ju = D.sap_step(xs, 0.5, beta, rng=np.random.default_rng(13), return_choice=True)
    table = np.stack([np.bincount(Jt[:, 2], minlength=5), np.bincount(Ju[:, 2], minlength=5)])
    assert stats.chi2_contingency(table)[1] > ALPHA


def _tiled_escape_of_token_0(seen, x, beta, key_tile):
    """The probability with which the tiled sampler moves token 0 away from its cluster, read off its
    Bernoulli draws (their -log-probabilities, collected in ``seen`` by the ``neg_logs`` fixture).
    Token 0's cluster lies in the first tile, so it ends
    outside exactly when a later tile wins a race (probabilities p_t) or the first tile's pick
    falls in its small-weight group (probability q_0): escape = 1 - (1 - q_0) prod_t (1 - p_t)."""
    T.sap_step(x, 0.1, beta, rng=0, key_tile=key_tile)
    n = len(x)
    first_pick = seen[0]  # tile 0: every row switches (it is the first), then draws its group
    races = [t for t in seen[1:] if t.shape == (n,)]  # one race per later tile, every row in it
    assert len(races) == -(-n // key_tile) - 1
    log_stay = np.log1p(-np.exp(-first_pick[0])) + sum(np.log1p(-np.exp(-t[0])) for t in races)
    return -np.expm1(log_stay)


@pytest.mark.parametrize("key_tile", [2, 3, 4, 6])
def test_escape_probability_of_a_frozen_configuration_is_exact(kernels, neg_logs, key_tile):
    """Two tokens on each vertex of a triangle at beta = 40: token 0 leaves its point with
    probability 4e^{-60} / (2 + 4e^{-60}) ~ 1.8e-26, for every tiling (1e-12 relative)."""
    x = np.repeat(regular_polygon(3), 2, axis=0)
    beta = 40.0
    w = 4 * np.exp(-1.5 * beta)
    assert _tiled_escape_of_token_0(neg_logs, x, beta, key_tile) == pytest.approx(w / (2 + w), rel=1e-12)


@pytest.mark.parametrize("key_tile", [1, 2, 4])
def test_escape_law_from_coincident_clusters(kernels, key_tile):
    """Something moves with probability 1 - s^6, s = 2 / (2 + 4 e^{-3 beta / 2}) (Monte Carlo, 5 s.e.)."""
    x, beta, N = np.repeat(regular_polygon(3), 2, axis=0), 5.0, 200_000
    s = 2 / (2 + 4 * np.exp(-1.5 * beta))
    p = 1 - s ** 6
    y = T.sap_step(np.broadcast_to(x, (N,) + x.shape), 0.1, beta, rng=14, key_tile=key_tile)
    moved = (y != x).any(axis=(1, 2)).mean()
    assert abs(moved - p) <= 5 * np.sqrt(p * (1 - p) / N)


def test_sap_moves_are_convex_steps_and_reproducible(kernels):
    x = np.random.default_rng(15).standard_normal((6, 40, 3))
    out, J = T.sap_step(x, 0.25, 3.0, rng=16, key_tile=7, return_choice=True)
    np.testing.assert_allclose(out, 0.75 * x + 0.25 * np.take_along_axis(x, J[..., None], -2), atol=1e-14)
    again, J2 = T.sap_step(x, 0.25, 3.0, rng=np.random.SeedSequence(16), key_tile=7, return_choice=True)
    np.testing.assert_array_equal(J, J2)
    big = T.sap_step(x * 30.0, 0.25, 3.0, rng=16, key_tile=7)  # beta |x|^2 > 200: the running maximum
    assert np.isfinite(big).all()


# ----------------------------------------------------------------- dispatch, memory, input
def test_dynamics_uses_the_tiles_exactly_when_the_budget_is_exceeded(monkeypatch):
    x = np.random.default_rng(17).standard_normal((2, 300, 4))
    calls = []
    for name in ("softmax_step", "hardmax_step", "sap_step", "leaders", "tie_counts", "attention_apply"):
        real = getattr(T, name)
        monkeypatch.setattr(T, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    small = [D.softmax_step(x, 0.2, 1.0), D.hardmax_step(x, 0.2), D.leaders(x), D.tie_counts(x),
             D.layer_step(x, 3.0, None, np.eye(4))]
    assert calls == []  # 2 * 300^2 doubles fit the default budget: today's path
    with T.budget(2 ** 20):
        tiled = [D.softmax_step(x, 0.2, 1.0), D.hardmax_step(x, 0.2), D.leaders(x), D.tie_counts(x),
                 D.layer_step(x, 3.0, None, np.eye(4))]
        D.sap_step(x, 0.2, 1.0, rng=0)
        D.hardmax_step(x[..., :2], 0.2)  # d <= 2: the untiled pass never holds the scores
    assert calls == ["softmax_step", "hardmax_step", "leaders", "tie_counts", "attention_apply", "sap_step"]
    for a, b in zip(small, tiled):
        assert rel_err(a, b, x) <= 1e-12


def test_peak_memory_is_that_of_the_tiles_not_of_the_score_matrix():
    """n = 2048 tokens in d = 8 under a 1 MiB budget: the untiled step would hold 32 MiB of scores;
    the tiled one (numpy allocations, traced) stays within the budget plus O(n d) state."""
    x = np.random.default_rng(18).standard_normal((2048, 8)) / 3
    state = 16 * x.nbytes  # queries, keys, values + 1, accumulators, the result: a few copies of x
    steps = (lambda y, **k: T.softmax_step(y, 0.1, 1.0, **k), lambda y, **k: T.hardmax_step(y, 0.1, **k),
             lambda y, **k: T.sap_step(y, 0.1, 1.0, rng=0, **k))
    for step in steps:
        step(x[:100], key_tile=7)  # compiles the kernels outside the traced call
        tracemalloc.start()
        step(x, budget=2 ** 20)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak <= 2 ** 20 + state, peak
    assert 2 ** 20 + state < 2048 ** 2 * 8 / 8


def test_budget_is_settable_and_checked(monkeypatch):
    assert T.memory_budget() == T.DEFAULT_BUDGET
    with T.budget(2 ** 30):
        assert T.memory_budget() == 2 ** 30
    assert T.memory_budget() == T.DEFAULT_BUDGET
    monkeypatch.setenv("ATTENTION_FW_MEMORY_BUDGET", "1e9")
    assert T.memory_budget() == 10 ** 9
    monkeypatch.setenv("ATTENTION_FW_MEMORY_BUDGET", "lots")
    with pytest.raises(ValueError, match="ATTENTION_FW_MEMORY_BUDGET"):
        T.memory_budget()


@pytest.mark.parametrize("call, match", [
    (lambda x: T.set_memory_budget(100), "budget must be at least"),
    (lambda x: T.set_memory_budget(-1), "budget must be >= 1"),
    (lambda x: T.softmax_step(x, 0.1, 1.0, key_tile=0), "key_tile must be >= 1"),
    (lambda x: T.softmax_step(x, 0.1, 1.0, np.eye(2)), "B must be 3 x 3"),
    (lambda x: T.softmax_step(x[None], 0.1, 1.0, np.ones((2, 3, 3))), r"B must be 3 x 3 or one matrix per system, \(1, 3, 3\)"),
    (lambda x: T.sap_step(x, 0.1, 1.0, rng="seed"), "rng must be"),
    (lambda x: T.hardmax_step(x, 1.5), "gamma must lie"),
    (lambda x: T.softmax_step(x, 0.1, -1.0), "beta must lie"),
    (lambda x: T.softmax_step(np.where(x > 0, np.nan, x), 0.1, 1.0), "x must be finite"),
    (lambda x: T.attention_apply(x, x[:3]), "values must have shape"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(np.random.default_rng(0).standard_normal((8, 3)))


@pytest.mark.parametrize("x_shape, B", [((8, 3), np.eye(2)), ((1, 8, 3), np.ones((2, 3, 3))), ((8, 3), np.ones((1, 3, 3))),
                                        ((8, 3), np.ones((3, 4))), ((8, 3), np.ones(3)), ((8, 3), [[np.nan] * 3] * 3)])
def test_the_same_bad_B_gets_the_same_message_from_both_backends(x_shape, B):
    """One copy of the check (model._checks): the dense and the tiled steps reject a bad B alike."""
    x = np.random.default_rng(0).standard_normal(x_shape)
    messages = []
    for step in (lambda: D.hardmax_step(x, 0.5, B), lambda: T.hardmax_step(x, 0.5, B),
                 lambda: D.softmax_step(x, 0.5, 1.0, B), lambda: T.softmax_step(x, 0.5, 1.0, B)):
        with pytest.raises((ValueError, TypeError)) as err:
            step()
        messages.append(str(err.value))
    assert len(set(messages)) == 1 and messages[0].startswith("B "), messages


def test_numba_and_numpy_tile_passes_agree():
    """Each tile pass of the two implementations on the same arrays (ties, -inf initial states included)."""
    nb = TK._numba_kernels()
    assert nb is not None, "numba is pinned in requirements.txt"
    rng = np.random.default_rng(19)
    Rb, q, k, m = 3, 11, 9, 4
    S = rng.standard_normal((Rb, q, k))
    S[:, :, 4] = S.max(axis=-1)  # exact ties with the maximum
    vals = rng.standard_normal((Rb, k, m))
    rr, ii = np.nonzero(rng.random((Rb, q)) < 0.6)
    w = rng.random((Rb, q))  # a tile's weights and the running totals of the chain's sampler
    w[0, :3] = 0.0  # no weight in this tile
    total0 = np.where(rng.random((Rb, q, 1)) < 0.3, 0.0, rng.random((Rb, q, 1)))
    total0[1, :2], w[1, :2] = 1e300, 1e-300  # T / w overflows
    out = {}
    for impl in (nb, TK.NUMPY):
        Z, c, acc = S.copy(), np.full((Rb, q), -np.inf), np.zeros((Rb, q, m))
        c[0] = 10.0  # an earlier maximum above this tile's: no rescaling for those rows
        acc[0] = 1.0
        impl.online_shift(Z, c, acc)
        fs = np.empty((Rb, q, 4))
        fs[...] = [-np.inf, np.inf, np.inf, -np.inf]
        ist = np.zeros((Rb, q, 2), dtype=np.intp)
        ist[..., 1] = -1
        la = np.zeros((Rb, q, m))
        for k0 in (0, k):  # the same tile twice: every tie of the first reappears in the second
            impl.leader_scan(S, vals, k0, fs, ist, la, 1e-12)
        # the running maximum alone, the minimum replaced by a bound -U (U >= max |S| per row)
        U = 1.5 * np.abs(S).max(axis=-1)
        fsb = np.empty((Rb, q, 4))
        fsb[...] = [-np.inf, 0.0, np.inf, -np.inf]
        fsb[..., 1] = -U
        istb = np.zeros((Rb, q, 2), dtype=np.intp)
        istb[..., 1] = -1
        lab = np.zeros((Rb, q, m))
        for k0 in (0, k):
            impl.leader_scan(S, vals, k0, fsb, istb, lab, 1e-3, False)
        total = total0.copy()
        t, flag = np.full(Rb * q, -1.0), np.empty((Rb, q), dtype=np.int8)
        races = impl.race_terms(w, total, t, flag)
        hits = np.arange(races) % 3 == 0
        sw_r, sw_i = np.empty(Rb * q, dtype=np.intp), np.empty(Rb * q, dtype=np.intp)
        switched = impl.switch_rows(flag, hits, sw_r, sw_i)
        E = np.exp(S)
        sums = np.empty((Rb, q))
        impl.row_sums(E, sums)
        top, ss, sb = np.empty(rr.size), np.empty(rr.size), np.empty(rr.size)
        impl.tile_split(E, rr, ii, 0.3, top, ss, sb)
        J = np.empty(rr.size, dtype=np.intp)
        impl.tile_pick(E, rr, ii, top, 0.3, sb == 0, 1.0 - np.linspace(0, 1, rr.size, endpoint=False), J)
        out[impl.name] = dict(Z=Z, c=c, acc=acc, fs=fs, ist=ist, la=la, sums=sums, top=top, ss=ss, sb=sb, J=J,
                              fsb=fsb, istb=istb, lab=lab, total=total, t=t[:races], flag=flag,
                              switched=np.stack([sw_r[:switched], sw_i[:switched]]))
    for key, a in out["numba"].items():
        np.testing.assert_allclose(a, out["numpy"][key], rtol=1e-13, atol=1e-15, err_msg=key)
    o = out["numba"]
    np.testing.assert_array_equal(o["c"][1:], S.max(axis=-1)[1:])
    assert (o["c"][0] == 10.0).all() and (o["acc"][0] == 1.0).all()
    near_top = S >= S.max(-1, keepdims=True) - 1e-12 * np.abs(S).max(-1, keepdims=True)
    np.testing.assert_array_equal(o["ist"][..., 0], 2 * near_top.sum(-1))
    np.testing.assert_array_equal(o["ist"][..., 1], S.argmax(-1))
    np.testing.assert_allclose(o["sums"], np.exp(S).sum(-1), rtol=1e-14)
    # the bounded-scale scan holds the keys within tol U of the top, twice (the tile seen twice)
    near_bound = S >= S.max(-1, keepdims=True) - 1e-3 * U[..., None]
    np.testing.assert_array_equal(o["istb"][..., 0], 2 * near_bound.sum(-1))
    np.testing.assert_array_equal(o["fsb"][..., 1], -U)
    np.testing.assert_allclose(o["lab"], 2 * np.matmul(near_bound.astype(float), vals), rtol=1e-13)
    # the sampler's race: first weights (flag 1), races with -log(w / (T + w)) (flag 2), totals updated
    T0 = total0[..., 0]
    np.testing.assert_array_equal(o["flag"], np.where(w > 0, np.where(T0 > 0, 2, 1), 0))
    np.testing.assert_allclose(o["total"][..., 0], T0 + w, rtol=1e-15)
    race = o["flag"] == 2
    with np.errstate(over="ignore"):
        ratio = T0[race] / w[race]
    far = np.isinf(ratio)  # rows (1, 0) and (1, 1): -log(w / (T + w)) = log T - log w = 1381.55
    assert far.sum() == 2
    np.testing.assert_allclose(o["t"], np.where(far, np.log(T0[race]) - np.log(w[race]), np.log1p(ratio)),
                               rtol=1e-12)
    won = np.zeros_like(race)
    won[race] = np.arange(race.sum()) % 3 == 0  # the draws given to switch_rows, in row-major order
    np.testing.assert_array_equal(o["switched"], np.stack(np.nonzero((o["flag"] == 1) | won)))


# ----------------------------------------------------------------- cache-blocked tiles, threads
@pytest.mark.parametrize("qt, kt", [(7, 13), (1, 64), (50, 3), (64, 1)])
def test_blocked_tiles_with_ragged_edges_equal_the_untiled_steps(kernels, monkeypatch, qt, kt):
    """Query blocks x key tiles that do not divide n (ragged last block and tile in both directions),
    three worker threads: softmax to 1e-12 (beta up to 1e6, no NaN), hardmax leaders identical."""
    monkeypatch.setenv("ATTENTION_FW_THREADS", "3")
    x = np.random.default_rng(20).standard_normal((2, 101, 5))
    for beta in (0.0, 1.0, 40.0, 1e6):
        y = T.softmax_step(x, 0.3, beta, query_tile=qt, key_tile=kt)
        assert np.isfinite(y).all() and rel_err(y, D.softmax_step(x, 0.3, beta), x) <= 1e-12, beta
    np.testing.assert_array_equal(T.leaders(x, query_tile=qt, key_tile=kt), D.leaders(x))
    np.testing.assert_array_equal(T.tie_counts(x, query_tile=qt, key_tile=kt), D.tie_counts(x))
    assert rel_err(T.hardmax_step(x, 0.5, query_tile=qt, key_tile=kt), D.hardmax_step(x, 0.5), x) <= 1e-15


def test_ties_across_query_blocks_and_key_tiles(kernels, monkeypatch):
    """Coincident copies of three vertices and centre tokens tied with all of them, spread over
    query blocks of 3 and key tiles of 2 in two threads: the tie counts and averages of the untiled step."""
    monkeypatch.setenv("ATTENTION_FW_THREADS", "2")
    v = np.eye(3)
    x = np.repeat(v, 4, axis=0)
    x = np.vstack([x, [[0.2, 0.2, 0.2]] * 3])[np.random.default_rng(21).permutation(15)]
    counts = D.tie_counts(x)
    assert sorted(counts.tolist()) == [4] * 12 + [12] * 3
    for precision in ("float64", "float32"):
        kw = dict(query_tile=3, key_tile=2, precision=precision)
        np.testing.assert_array_equal(T.tie_counts(x, **kw), counts)
        np.testing.assert_array_equal(T.leaders(x, **kw), D.leaders(x))
        assert rel_err(T.hardmax_step(x, 0.5, **kw), D.hardmax_step(x, 0.5), x) <= 1e-15


def test_results_do_not_depend_on_the_number_of_threads(monkeypatch):
    """The same blocks in 1 or 3 threads: the same softmax step (each row sums its tiles in the
    same order) and the same SAP picks (one random stream per block, spawned from rng)."""
    x = np.random.default_rng(22).standard_normal((3, 90, 4))
    out = {}
    for threads in ("1", "3"):
        monkeypatch.setenv("ATTENTION_FW_THREADS", threads)
        out[threads] = (T.softmax_step(x, 0.2, 3.0, query_tile=16, key_tile=16),
                        T.sap_step(x, 0.2, 3.0, rng=23, query_tile=16, key_tile=16, return_choice=True)[1])
    assert rel_err(out["1"][0], out["3"][0], x) <= 1e-15
    np.testing.assert_array_equal(out["1"][1], out["3"][1])


def test_blas_threads_are_restored_after_a_threaded_step(monkeypatch):
    """The workers' one-thread BLAS limit is lifted afterwards: two BLAS threads before (set here,
    whatever the test process's default), two after."""
    import threadpoolctl

    def blas():
        return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]

    monkeypatch.setenv("ATTENTION_FW_THREADS", "2")
    with threadpoolctl.threadpool_limits(2, "blas"):
        before = blas()
        assert before and all(t == 2 for t in before)
        T.softmax_step(np.random.default_rng(24).standard_normal((200, 4)), 0.1, 1.0, query_tile=32)
        assert blas() == before


# ----------------------------------------------------------------- the float32 path
U32 = 2.0 ** -24


def float32_bound(gamma, xmax, beta_sq, d, k):
    """The error law of one float32 step (first order, worst case): gamma max|x| u (2 (d + 2) beta |B|
    max|x|^2 + 2 k + 3), u = 2^-24 -- scores off by (d + 2) u beta max|x|^2 move the weights' average
    by twice that; a tile's float32 sums of k weights add k u to sum and normaliser; exp and values u."""
    return gamma * xmax * U32 * (2 * (d + 2) * beta_sq + 2 * k + 3)


@pytest.mark.parametrize("d", [4, 16, 64])
def test_float32_step_error_follows_its_law(kernels, d):
    """Against float64, for beta max|x|^2 = 0.5, 5, 50: the error stays within the law (tolerance:
    none beyond the first-order bound), is that of float32 (at least u / 8: a float64 computation
    would be ~1e-16: at least u max|x| / 64 here), and grows with beta max|x|^2 as the score term says
    (x 5 at least over x 100)."""
    rng = np.random.default_rng(25)
    x = rng.standard_normal((2, 400, d)) / np.sqrt(d)
    M = float(np.einsum("...i,...i->...", x, x).max())
    gamma, k = 1.0, 64
    errs = []
    for beta_sq in (0.5, 5.0, 50.0):
        beta = beta_sq / M
        ref = T.softmax_step(x, gamma, beta, key_tile=k)
        y = T.softmax_step(x, gamma, beta, key_tile=k, precision="float32")
        assert y.dtype == np.float64
        err = float(np.abs(y - ref).max())
        assert U32 * np.abs(x).max() / 64 <= err <= float32_bound(gamma, np.abs(x).max(), beta_sq, d, k), (beta_sq, err)
        assert err <= T.float32_step_error(beta_sq, d, k) * gamma * np.abs(x).max()
        errs.append(err)
    assert errs[2] >= 5 * errs[0]


def test_float32_tiles_are_summed_in_float64(kernels):
    """Token 0's weights are 1 on itself and e^-17 = 4.1e-8 (below half a float32 ulp of 1, 6.0e-8)
    on each of 8,191 others, in tiles of one key: float64 sums keep the tail's mass 3.4e-4, a
    float32 running sum would drop every one of its terms (an error ~100 times the law's bound)."""
    n, beta = 8192, 10.0
    assert np.exp(-17.0) < 2.0 ** -24 < 2 * np.exp(-17.0)        # below half an ulp of 1, not far below
    rng = np.random.default_rng(26)
    x = np.c_[np.full(n, 1 - 17.0 / beta), rng.uniform(-0.5, 0.5, n)]
    x[0] = [1.0, 0.0]
    ref = T.attention_apply(x, x, beta, key_tile=1)[0]
    y = T.attention_apply(x, x, beta, key_tile=1, precision="float32")[0]
    M = float((x ** 2).sum(axis=1).max())
    bound = float32_bound(1.0, np.abs(x).max(), beta * M, 2, 1)
    assert np.abs(ref - x[0]).max() > 50 * bound  # the tail moves the average far beyond the bound
    assert np.abs(y - ref).max() <= bound


def test_float32_sap_and_attention_apply_keep_the_law(kernels):
    """SAP in float32: the chi-square test of the softmax law (weights within 1e-6 of float64)."""
    rng = np.random.default_rng(27)
    x = rng.standard_normal((12, 3))
    N, beta = 20_000, 1.5
    _, J = T.sap_step(np.broadcast_to(x, (N,) + x.shape), 0.2, beta, rng=28, key_tile=5, return_choice=True,
                      precision="float32")
    counts = np.stack([np.bincount(J[:, i], minlength=12) for i in range(12)])
    assert chi_square_pvalue(counts, N * D.attention(x, beta)) > ALPHA
    v = rng.standard_normal((12, 4)) * 1e30  # values far outside float32's range are scaled exactly
    out = T.attention_apply(x, v, beta, key_tile=5, precision="float32")
    assert np.isfinite(out).all() and rel_err(out, D.attention(x, beta) @ v, v) <= 1e-5


def test_float32_hardmax_has_the_float64_leaders(kernels):
    """Generic tokens, a rounding-spoilt tie (rotated square and its centre), coincident tokens
    and near ties within a float32 error: every leader set, count and first maximiser of float64."""
    rng = np.random.default_rng(29)
    x = rng.standard_normal((3, 70, 6))
    sq = np.vstack([regular_polygon(4, phase=0.1234), [[0.0, 0.0]]])
    near = np.c_[1 + rng.integers(0, 4, 20) * 3e-8, rng.uniform(-0.01, 0.01, 20), np.zeros(20)]
    near[0] = [1.0, 0.0, 0.0]
    for y in (x, np.c_[sq, np.zeros(5)], np.repeat(np.eye(3), 3, axis=0), near):
        for k in (1, 4, 64):
            kw = dict(key_tile=k, precision="float32")
            np.testing.assert_array_equal(T.leaders(y, **kw), D.leaders(y))
            np.testing.assert_array_equal(T.tie_counts(y, **kw), D.tie_counts(y))
            assert rel_err(T.hardmax_step(y, 0.5, **kw), D.hardmax_step(y, 0.5), y) <= 1e-15


def test_float32_is_refused_or_warned_about_where_its_scores_are_coarse():
    x = np.random.default_rng(30).standard_normal((50, 64)) / 8
    M = float(np.einsum("ij,ij->i", x, x).max())
    limit = 1 / (66 * U32)  # (d + 2) u beta max|x|^2 = 1
    with pytest.raises(ValueError, match="precision='float32' cannot resolve"):
        T.softmax_step(x, 0.1, 1.01 * limit / M, precision="float32")
    with pytest.raises(ValueError, match="precision='float32' cannot resolve"):
        T.sap_step(x, 0.1, 1e6, rng=0, precision="float32")  # beta = 1e6: the hardmax regime
    with pytest.warns(T.Float32PrecisionWarning, match="precision='float32'"):
        T.softmax_step(x, 0.1, 0.5 * limit / M, precision="float32")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        T.softmax_step(x, 0.1, 0.005 * limit / M, precision="float32")  # below 1%: silent
    assert np.isfinite(T.hardmax_step(x * 1e30, 0.5, precision="float32")).all()  # leaders: scale-free


@pytest.mark.parametrize("call, match", [
    (lambda x: T.softmax_step(x, 0.1, 1.0, precision="float16"), "precision must be 'float64' or 'float32'"),
    (lambda x: T.hardmax_step(x, 0.1, precision=32), "precision must be"),
    (lambda x: T.sap_step(x, 0.1, 1.0, rng=0, precision=None), "precision must be"),
    (lambda x: T.leaders(x, query_tile=0), "query_tile must be >= 1"),
    (lambda x: T.tie_counts(x, key_tile=2.5), "key_tile must be an integer"),
    (lambda x: T.attention_apply(x, x, 1.0, query_tile=-3), "query_tile must be >= 1"),
    (lambda x: T.plan(x.shape, workers=0), "workers must be >= 1"),
])
def test_bad_precision_and_block_arguments_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(np.random.default_rng(0).standard_normal((8, 3)))


def test_float32_tile_passes_agree_between_numba_and_numpy():
    """online_shift and the SAP passes on float32 tiles with float64 state, both implementations."""
    nb = TK._numba_kernels()
    rng = np.random.default_rng(31)
    S = rng.standard_normal((2, 9, 7)).astype(np.float32)
    rr, ii = np.nonzero(rng.random((2, 9)) < 0.7)
    out = {}
    for impl in (nb, TK.NUMPY):
        Z, c, acc = S.copy(), np.full((2, 9), -np.inf), np.zeros((2, 9, 3))
        impl.online_shift(Z, c, acc)
        E = np.exp(Z)
        sums = np.empty((2, 9))
        impl.row_sums(E, sums)
        top, ss, sb = np.empty(rr.size), np.empty(rr.size), np.empty(rr.size)
        impl.tile_split(E, rr, ii, 0.3, top, ss, sb)
        out[impl.name] = dict(Z=Z, c=c, sums=sums, top=top, ss=ss, sb=sb)
    for key, a in out["numba"].items():
        np.testing.assert_allclose(a, out["numpy"][key], rtol=1e-6, atol=1e-7, err_msg=key)
    np.testing.assert_allclose(out["numba"]["sums"], np.exp(S - S.max(-1, keepdims=True)).sum(-1), rtol=1e-6)


# ----------------------------------------------------------------- float64 hardmax through the float32 screen
def screen_cases():
    """Random tokens, an exact tie (a square's centre), coincident tokens, clustered states (tight
    clusters: nearly every row has a rival within a float32 error), a non-symmetric B, and norms
    near the ends of float64's range."""
    rng = np.random.default_rng(41)
    x = rng.standard_normal((2, 90, 5))
    sq = np.c_[np.vstack([regular_polygon(4), [[0.0, 0.0]]]), np.zeros(5)]  # exact ties: 4 at the centre
    coincident = np.repeat(rng.standard_normal((6, 3)), 7, axis=0)[rng.permutation(42)]
    centres = rng.standard_normal((4, 6))
    clustered = centres[rng.integers(0, 4, 120)] + 1e-7 * rng.standard_normal((120, 6))
    B = rng.standard_normal((5, 5))
    return [("random", x, None), ("square", sq, None), ("coincident", coincident, None),
            ("clustered", clustered, None), ("B", x, B), ("large", x * 1e150, None), ("small", x * 1e-150, None),
            ("large B", x * 1e-200, B * 1e150), ("symmetric B", x, B + B.T)]


def check_screen_is_float64(x, B, k, kernels, q=7):
    """The screen's leaders, counts, first maximisers, step and averages against plain float64 and
    the untiled step: identical with the numba passes; with the numpy passes identical in the rows
    of one leader, the others to the rounding of the sum of their c leaders (c u max|x|)."""
    counts, first = D.tie_counts(x, B), D.leaders(x, B)
    for screen in (True, False, None):
        kw = dict(key_tile=k, query_tile=q, screen=screen)
        np.testing.assert_array_equal(T.tie_counts(x, B, **kw), counts)
        a, c = T.leaders(x, B, return_counts=True, **kw)
        np.testing.assert_array_equal(a, first)
        np.testing.assert_array_equal(c, counts)
    plain = T.hardmax_step(x, 0.5, B, key_tile=k, query_tile=q, screen=False)
    apply_plain = T.attention_apply(x, x, np.inf, B, key_tile=k, query_tile=q, screen=False)
    for screen in (True, None):
        step = T.hardmax_step(x, 0.5, B, key_tile=k, query_tile=q, screen=screen)
        applied = T.attention_apply(x, x, np.inf, B, key_tile=k, query_tile=q, screen=screen)
        if kernels == "numba":
            np.testing.assert_array_equal(step, plain)
            np.testing.assert_array_equal(applied, apply_plain)
        else:
            one = counts == 1
            np.testing.assert_array_equal(step[one], plain[one])
            tol = 2.0 ** -52 * counts.max() * np.abs(x).max()
            np.testing.assert_allclose(applied, apply_plain, rtol=0, atol=tol)
        assert rel_err(step, D.hardmax_step(x, 0.5, B), x) <= 1e-15


@pytest.mark.parametrize("case", range(9))
def test_float64_hardmax_through_the_float32_screen_is_plain_float64(kernels, case):
    name, x, B = screen_cases()[case]
    # one key per tile with the compiled passes; the numpy passes loop over tiles in Python, and
    # two keys per tile still put a tile boundary beside every other key
    for k in (1 if kernels == "numba" else 2, 16, 200):
        check_screen_is_float64(x, B, k, kernels)


def test_screen_recomputes_queries_below_float32s_normal_range(monkeypatch):
    """A query of norm 1e-44 to 1e-40 among keys of norm 1 is subnormal in float32 (a few bits
    left): its leader among keys within a few degrees is decided in float64. Without that rule
    (SCREEN_TINY_QUERY = 0) the screen gets some of these leaders wrong, so this test can fail."""
    rng = np.random.default_rng(0)
    cases = []
    for _ in range(200):
        th = rng.uniform(0, 0.05, 40)
        x = np.c_[np.cos(th), np.sin(th), np.zeros(40)] * (1 + 0.01 * rng.standard_normal((40, 1)))
        x[0] = np.array([1.0, 0.3 * rng.standard_normal(), 0.0]) * 10.0 ** rng.uniform(-44, -40)
        cases.append(x)
    for x in cases:
        np.testing.assert_array_equal(T.leaders(x, screen=True, key_tile=8), D.leaders(x))
    monkeypatch.setattr(TL, "SCREEN_TINY_QUERY", 0.0)   # read where the leaders are scanned
    assert any((T.leaders(x, screen=True, key_tile=8) != D.leaders(x)).any() for x in cases)


def test_the_screen_is_taken_where_few_rows_are_unsure(monkeypatch):
    """The probe: random tokens (a clear leader in nearly every row) take the screen; clustered
    and coincident tokens (a rival within a float32 error in nearly every row) and problems of
    fewer than SCREEN_MIN_ROWS rows keep float64; the default route is recorded from the tiles' dtype."""
    rng = np.random.default_rng(43)
    n = T.SCREEN_MIN_ROWS
    x = rng.standard_normal((n, 8))
    clustered = rng.standard_normal((16, 8))[rng.integers(0, 16, n)] + 1e-9 * rng.standard_normal((n, 8))
    coincident = np.repeat(rng.standard_normal((n // 4, 8)), 4, axis=0)
    seen = []
    real = TL._Tiles

    def spy(Q, KT, p):
        seen.append(Q.dtype)
        return real(Q, KT, p)

    monkeypatch.setattr(TL, "_Tiles", spy)
    for y, want in ((x, np.float32), (clustered, np.float64), (coincident, np.float64),
                    (x[: n // 2], np.float64), (x.reshape(2, n // 2, 8), np.float32)):
        seen.clear()
        T.tie_counts(y)
        assert seen == [np.dtype(want)], (y.shape, seen)
        seen.clear()
        T.tie_counts(y, screen=False)
        assert seen == [np.dtype(np.float64)]
        seen.clear()
        T.tie_counts(y, screen=True)
        assert seen == [np.dtype(np.float32)]
    with pytest.raises(ValueError, match="screen must be None, True or False"):
        T.leaders(x, screen="yes")


def test_leader_sums_agree_between_numba_and_numpy():
    """The sums of the leaders' values in key order (numba) and as one product (numpy): to rounding."""
    nb = TK._numba_kernels()
    rng = np.random.default_rng(44)
    mask = rng.random((9, 30)) < 0.3
    vals = rng.standard_normal((30, 4))
    a, b = np.empty((9, 4)), np.empty((9, 4))
    nb.leader_sums(mask, vals, a)
    TK.NUMPY.leader_sums(mask, vals, b)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-14)
    np.testing.assert_allclose(a, [vals[m].sum(axis=0) for m in mask], rtol=0, atol=1e-14)


# ----------------------------------------------------------------- symmetric scores: half the tiles
@pytest.fixture
def symmetric_calls(monkeypatch):
    calls = []
    real = TL._symmetric_scan

    def spy(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(TL, "_symmetric_scan", spy)
    return calls


@pytest.mark.parametrize("case", range(9))
def test_symmetric_scores_share_their_tiles_and_keep_the_float64_leaders(kernels, case, symmetric_calls):
    """Square tiles, B = I or exactly symmetric: the screen makes only the tiles at or after the
    diagonal and scans each by rows and by columns; leaders, counts, first maximisers and the step
    are still those of plain float64 (identical with the numba passes), on every case of the screen's
    tests; a non-symmetric B keeps every tile."""
    name, x, B = screen_cases()[case]
    for k in (8, 32):
        symmetric_calls.clear()
        check_screen_is_float64(x, B, k, kernels, q=k)
        took = bool(symmetric_calls)
        # (one block holds every token when n <= k: nothing to share)
        assert took == ((B is None or np.array_equal(B, B.T)) and x.shape[-2] > k), (name, k)
        symmetric_calls.clear()
        np.testing.assert_array_equal(T.leaders(x, B, key_tile=k, query_tile=k, precision="float32"), D.leaders(x, B))
        assert bool(symmetric_calls) == took


def test_a_key_query_matrix_symmetric_but_for_one_rounding_keeps_every_tile(symmetric_calls):
    rng = np.random.default_rng(45)
    x = rng.standard_normal((2, 64, 4))
    B = rng.standard_normal((4, 4))
    B = B + B.T
    B1 = B.copy()
    B1[0, 1] = np.nextafter(B1[0, 1], np.inf)  # one unit in the last place off symmetric
    for M, want in ((B, True), (B1, False), (np.stack([B, B1]), False), (np.stack([B, 2 * B]), True)):
        symmetric_calls.clear()
        np.testing.assert_array_equal(T.leaders(x, M, key_tile=16, query_tile=16, screen=True), D.leaders(x, M))
        assert bool(symmetric_calls) == want


def test_symmetric_tiles_do_not_depend_on_the_number_of_threads(monkeypatch, symmetric_calls):
    """The workers' running states are merged at the end: one, two or three threads, the same answers."""
    rng = np.random.default_rng(46)
    x = np.vstack([rng.standard_normal((150, 3)), np.repeat(rng.standard_normal((5, 3)), 6, axis=0)])
    out = {}
    for w in ("1", "2", "3"):
        monkeypatch.setenv("ATTENTION_FW_THREADS", w)
        out[w] = (T.leaders(x, key_tile=16, query_tile=16, return_counts=True, screen=True),
                  T.hardmax_step(x, 0.5, key_tile=16, query_tile=16, screen=True))
    assert symmetric_calls
    for w in ("2", "3"):
        for a, b in zip(out["1"][0] + (out["1"][1],), out[w][0] + (out[w][1],)):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(out["1"][0][0], D.leaders(x))


def test_column_scan_agrees_between_numba_and_numpy_and_with_the_row_scan():
    """leader_scan_cols on a tile is leader_scan on its transpose (both implementations)."""
    nb = TK._numba_kernels()
    rng = np.random.default_rng(47)
    S = rng.standard_normal((9, 7)).astype(np.float32)
    S[3, 2] = S[5, 2] = S[:, 2].max() + 1  # a tie in column 2
    vals = rng.standard_normal((9, 3))
    res = {}
    for name, impl in (("numba", nb), ("numpy", TK.NUMPY), ("rows", None)):
        fs = np.empty((7, 4))
        fs[:, 0], fs[:, 1], fs[:, 2], fs[:, 3] = -np.inf, -10.0, np.inf, -np.inf
        ist = np.zeros((7, 2), dtype=np.intp)
        ist[:, 1] = -1
        acc = np.zeros((7, 3))
        if impl is None:
            nb.leader_scan(np.ascontiguousarray(S.T)[None], vals[None], 4, fs[None], ist[None], acc[None], 1e-3, False)
        else:
            impl.leader_scan_cols(S, S.max(axis=0), vals, 4, fs, ist, acc, 1e-3)
        res[name] = (fs, ist, acc)
    for name in ("numba", "numpy"):
        for a, b in zip(res[name], res["rows"]):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12, err_msg=name)
    assert res["numba"][1][2].tolist() == [2, 7]  # two leaders, the first at key 4 + 3
