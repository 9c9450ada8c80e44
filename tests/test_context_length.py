"""Chapter 6: the probability that a Gaussian token owns its cell among n, and the hardmax runs at scale."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, special, stats

from attention_fw.experiments import context_length as CL
from attention_fw.model import dynamics as D
from attention_fw.model import tiled as T


@pytest.mark.parametrize("n", [1, 2, 3, 4, 10, 1000])
def test_probability_in_dimension_one_is_a_uniform_moment(n):
    """d = 1: Phi(|Z|) is uniform on (1/2, 1), so E[Phi(|Z|)^(n-1)] = (2/n)(1 - 2^-n)."""
    assert CL.own_cell_probability(n, 1) == pytest.approx(2 / n * (1 - 2.0 ** -n), rel=1e-10)


@pytest.mark.parametrize("n, d", [(5, 3), (1024, 12), (65536, 20), (65536, 64)])
def test_probability_agrees_with_adaptive_quadrature(n, d):
    def f(r):
        return np.exp((n - 1) * special.log_ndtr(r)) * stats.chi.pdf(r, d)
    ref = integrate.quad(f, 0, np.inf, limit=200, epsabs=1e-14, epsrel=1e-12)[0]
    assert CL.own_cell_probability(n, d) == pytest.approx(ref, rel=1e-10, abs=1e-14)


def test_probability_grows_with_d_falls_with_n_and_half_dimension_solves_it():
    p = CL.own_cell_probability(1000, np.arange(1, 80))
    assert (np.diff(p) > 0).all() and p[-1] > 1 - 1e-9
    assert (np.diff(CL.own_cell_probability([10, 100, 1000, 10_000], 12)) < 0).all()
    halves = [CL.half_dimension(n) for n in (16, 1024, 65536)]
    assert np.all(np.diff(halves) > 0)
    for n, dh in zip((16, 1024, 65536), halves):
        assert CL.own_cell_probability(n, dh) == pytest.approx(0.5, abs=1e-6)
        assert dh < 2 * np.log(n)  # the crude rule 2 ln n overshoots
    with pytest.raises(ValueError, match="n must be >= 4"):
        CL.half_dimension(3)
    with pytest.raises(ValueError, match="d must be >= 1"):
        CL.own_cell_probability(10, 0.5)


def test_sampled_ownership_matches_the_probability():
    """400 systems of 64 tokens in d = 6: the per-system fractions of owners (independent across
    systems) average to the exact probability within 5 standard errors."""
    n, d, R = 64, 6, 400
    x = np.random.default_rng(0).standard_normal((R, n, d))
    first, count = T.leaders(x, return_counts=True, key_tile=16)
    frac = ((first == np.arange(n)) & (count == 1)).mean(axis=1)
    se = frac.std(ddof=1) / np.sqrt(R)
    assert abs(frac.mean() - CL.own_cell_probability(n, d)) <= 5 * se
    r = CL.ownership_task(n=n, d=d, systems=R, rng=1)
    assert r["tokens"] == n * R and 0 < r["owners"] < r["tokens"]
    assert abs(r["fraction"] - r["probability"]) <= 5 * se


def test_owners_never_move_and_the_led_follow_the_closed_form():
    r = CL.hardmax_run_task(n=600, d=8, gamma=0.4, steps=6, rng=2)
    assert r["never_moved_are_owners"] and r["never_moved"] == r["owners"]
    assert r["moved"] == [r["n"] - r["owners"]] * r["steps"]
    assert 0 < r["owners"] < r["n"] and r["led_by_owner"] > 0
    assert max(r["closed_form_error"]) < 1e-13
    np.testing.assert_allclose(r["ratio_max"], 0.6 ** np.arange(1, 7), rtol=1e-12)


def test_tasks_use_the_same_tokens_as_a_direct_run():
    """The run's owners are the ownership sweep's owners for the same (n, d, rng), and one layer
    moves exactly the non-owners of those tokens, as the untiled step does; the tokens are keyed
    by one draw of rng and by (n, d), so another (n, d) is another draw, not a reshaped one."""
    r_own = CL.ownership_task(n=300, d=7, systems=1, rng=5)
    r_run = CL.hardmax_run_task(n=300, d=7, gamma=0.5, steps=1, rng=5)
    assert r_own.owners == r_run.owners
    word = int(np.random.default_rng(5).integers(2 ** 63))
    x = np.random.default_rng(np.random.SeedSequence([word, 300, 7])).standard_normal((300, 7))
    first, count = T.leaders(x, return_counts=True)
    assert ((first == np.arange(300)) & (count == 1)).sum() == r_own.owners
    assert ((D.hardmax_step(x, 0.5) != x).any(axis=1).sum()) == r_run.moved[0]
    y = np.random.default_rng(np.random.SeedSequence([word, 300, 8])).standard_normal((300, 8))
    assert not np.isin(y.ravel()[:100], x.ravel()).any()


def test_tiled_check_agrees_and_sees_a_tile_boundary():
    """Tiles of 64 keys over 300 tokens (five tiles, the last one short): the tiled softmax step
    agrees with the untiled one to 1e-12 relative and the leader sets are identical."""
    c = CL.tiled_check(300, 16, key_tile=64, rng=np.random.default_rng(4))
    assert (c.n, c.d, c.key_tile) == (300, 16, 64)
    assert 0 <= c.softmax_error < 1e-12 and c.same_leaders
    assert CL.tiled_check(40, 4, key_tile=256, rng=1).key_tile == 40   # one tile of every key
    with pytest.raises(ValueError, match="n"):
        CL.tiled_check(1, 4, rng=0)


def test_step_memory_counts_the_scores_and_covers_every_key():
    """Untiled: n^2 float64 scores; tiled: ceil(n / k) tiles of k keys cover the n keys, and the
    tile of k keys against all n queries takes 8 n k bytes (within the budget)."""
    budget = 64 * 2 ** 20
    for n in (100, 1000, 5000, 65536):
        m = CL.step_memory(n, 64, budget=budget)
        assert m.untiled_bytes == 8 * n * n
        assert CL.step_memory(n, 64, systems=3, budget=budget).untiled_bytes == 3 * 8 * n * n
        assert (m.tiles - 1) * m.tile_keys < n <= m.tiles * m.tile_keys
        assert m.tile_bytes <= max(budget, 8 * n * T.MIN_KEY_TILE)
    assert CL.step_memory(100, 8, budget=budget).tiles == 1                 # small problems: one tile


def test_size_text_reads_back_to_three_digits():
    for nbytes, text in ((0, "0 bytes"), (1023, "1023 bytes"), (1024, "1 KiB"), (8 * 2 ** 20, "8 MiB"),
                         (2 ** 35, "32 GiB"), (3 * 2 ** 29, "1.5 GiB"), (5 * 2 ** 40, "5 TiB")):
        assert CL.size_text(nbytes) == text
    value, unit = CL.size_text(123_456_789).split()
    assert unit == "MiB" and abs(float(value) * 2 ** 20 - 123_456_789) <= 0.005 * 123_456_789
    with pytest.raises(ValueError, match="nbytes"):
        CL.size_text(-1)


def test_variance_ratio_is_one_for_binomial_counts_and_the_beta_binomial_factor_otherwise():
    """Synthetic per-system counts with a known law: binomial counts give a ratio of 1, and
    beta-binomial counts (intra-class correlation rho) give 1 + (n - 1) rho; 4,000 systems put
    the estimate within 4 standard errors, sqrt(2 / 3999) relative."""
    rng = np.random.default_rng(3)
    n, p, systems = 500, 0.3, 4000
    tol = 4 * np.sqrt(2 / (systems - 1))

    def result(counts):
        return {"n": n, "probability": p, "owners_per_system": counts.tolist()}

    assert abs(CL.variance_ratio([result(rng.binomial(n, p, systems))]) - 1) < tol
    rho = 0.002                                   # Beta(a, b) with mean p and 1 / (a + b + 1) = rho
    a = p * (1 / rho - 1)
    b = (1 - p) * (1 / rho - 1)
    counts = rng.binomial(n, rng.beta(a, b, systems))
    want = 1 + (n - 1) * rho
    assert abs(CL.variance_ratio([result(counts)]) / want - 1) < tol
    with pytest.raises(ValueError, match="at least 2 systems"):
        CL.variance_ratio([{"n": n, "probability": p, "owners_per_system": [3]}])


def test_ownership_counts_per_system_and_pvalue():
    r = CL.ownership_task(n=100, d=5, systems=30, rng=4)
    assert len(r.owners_per_system) == 30 and sum(r.owners_per_system) == r.owners
    assert r.pvalue == pytest.approx(stats.binomtest(r.owners, r.tokens, r.probability).pvalue, rel=1e-12)
    assert 0.0 <= r.pvalue <= 1.0
