"""The fast (SAP) sampler of attention_fw.model.fast against the exact law of the chain.

The picks' law is checked against the probabilities A_ij computed densely (float64, shifted by the
row maximum), for rows of five states (uniform disk, Gaussian, tight clusters with coincident tokens,
coincident tokens only, tokens near the origin) over beta in {0.1, 1, 10, 100, 1000}: for each state
and beta, three rows (the token farthest from the centroid, a median one, the nearest), 20,000
independent picks each (the sampler's kernel on the repeated query rows; each row draws from its own
stream), one Pearson chi-square test over the cells with expected count >= 5 (summed over the three
rows) and a two-sided Poisson test of the pooled small cells, each at level ALPHA = 1e-4. The seeds
are fixed, so the outcome is deterministic; with fresh seeds the 34 cases (25, and 9 with the rows' maxima given)
would raise a false alarm with probability at most 68 ALPHA = 0.7%.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import attention_fw as afw
from attention_fw.model import _fast_kernels
from attention_fw.model import dynamics as D
from attention_fw.model import fast as F


ALPHA = 1e-4
BETAS = (0.1, 1.0, 10.0, 100.0, 1000.0)
N_TOKENS = 2000
DRAWS = 20_000



def test_the_sampler_is_compiled():
    """numba is a pinned requirement: the fast sampler's passes exist (no test here is skipped)."""
    assert _fast_kernels.sap_impl() is not None, "numba (a pinned requirement) is not importable"

def _states():
    rng = np.random.default_rng(2026)
    n = N_TOKENS
    a, r = rng.uniform(0, 2 * np.pi, n), np.sqrt(rng.random(n))
    yield "disk", np.stack([r * np.cos(a), r * np.sin(a)], 1)
    yield "gaussian", rng.normal(size=(n, 2))
    centres = rng.normal(size=(5, 2))
    x = centres[rng.integers(0, 5, n)] + 1e-3 * rng.normal(size=(n, 2))
    x[: n // 4] = x[n // 4]                                # a quarter of the tokens on one point
    yield "clusters", x
    yield "coincident", np.array([[1.0, 0.2], [-0.3, 0.9], [0.1, -0.8]])[rng.integers(0, 3, n)]
    x = 1e-3 * rng.normal(size=(n, 2))
    x[:100] = 0.0                                          # tokens at the origin: B x_i = 0, uniform picks
    x[100] = [0.5, 0.0]                                    # and one far token
    yield "near origin", x


def _law(x, beta, rows, B=None):
    L = beta * (x[rows] @ (x if B is None else x @ B.T).T) if B is not None else beta * (x[rows] @ x.T)
    A = np.exp(L - L.max(axis=1, keepdims=True))
    return A / A.sum(axis=1, keepdims=True)


def _fast_picks(x, q, seed, known_max=False):
    """Picks of the query rows ``q`` among the tokens ``x`` by the kernel of :func:`fast.sap_step`; the rows'
    largest scores found by branch and bound, or given (``known_max``: the path of the smooth rows)."""
    counts = np.zeros(3, dtype=np.int64)
    h = (q @ x.T).max(axis=1) if known_max else None
    return F._sap_picks(F._sap_tree(x), q, np.arange(q.shape[0]), seed, counts, h)


def _pvalues(counts, expected):
    """(chi-square p-value over the cells with expected >= 5, two-sided Poisson p-value of the others
    pooled), counts and expected of shape (rows, n)."""
    big = expected >= 5
    o, e = counts[big].astype(float), expected[big]
    stat = float(((o - e) ** 2 / e).sum())
    df = int(big.sum()) - counts.shape[0]                  # one constraint per row (the row's total)
    p_chi = float(stats.chi2.sf(stat, df)) if df > 0 else 1.0
    o_small, e_small = counts[~big].sum(), expected[~big].sum()
    # two-sided: too many picks in the tail, or too few (a sampler that dropped the tail)
    p_small = min(1.0, 2 * min(float(stats.poisson.sf(o_small - 1, e_small)), float(stats.poisson.cdf(o_small, e_small))))
    return p_chi, p_small


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("state", ["disk", "gaussian", "clusters", "coincident", "near origin"])
def test_picks_follow_the_softmax_law(state, beta):
    _check_law(state, beta, known_max=False)


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("state", ["disk", "clusters", "near origin"])
def test_picks_follow_the_softmax_law_from_the_root(state, beta):
    """The smooth rows' path: the largest score given, the envelope refined from the root."""
    _check_law(state, beta, known_max=True)


def _check_law(state, beta, known_max):
    x = dict(_states())[state]
    norms = np.linalg.norm(x - x.mean(axis=0), axis=1)
    order = np.argsort(norms, kind="stable")
    rows = np.array([order[-1], order[len(order) // 2], order[0]])
    q = np.repeat(beta * x[rows], DRAWS, axis=0)
    J = _fast_picks(x, q, seed=int(beta * 1000) + len(state) + known_max, known_max=known_max)
    counts = np.stack([np.bincount(J[k * DRAWS:(k + 1) * DRAWS], minlength=len(x)) for k in range(3)])
    expected = DRAWS * _law(x, beta, rows)
    p_chi, p_small = _pvalues(counts, expected)
    assert p_chi > ALPHA and p_small > ALPHA, (state, beta, p_chi, p_small)


def test_law_with_a_general_B_in_three_and_one_dimensions():
    """The public step with one B per system (d = 3) and in d = 1: the picks of every row of 8,000
    copies of a 30-token system against A (chi-square and pooled Poisson tail, level ALPHA)."""
    rng = np.random.default_rng(5)
    for d, beta in ((3, 2.0), (1, 3.0)):
        x = rng.normal(size=(30, d))
        B = rng.normal(size=(d, d))
        xs = np.broadcast_to(x, (8000,) + x.shape)
        _, J = F.sap_step(xs, 0.5, beta, B, rng=11, return_choice=True)
        counts = np.stack([np.bincount(J[:, i], minlength=30) for i in range(30)])
        L = beta * (x @ B.T) @ x.T
        A = np.exp(L - L.max(axis=1, keepdims=True))
        A /= A.sum(axis=1, keepdims=True)
        p_chi, p_small = _pvalues(counts, 8000 * A)
        assert p_chi > ALPHA and p_small > ALPHA, (d, p_chi, p_small)


def test_a_far_token_of_probability_2e_4_is_picked_at_its_rate():
    """Three coincident tokens at (1, 0), 300 tokens spread in the disk of radius 1/2 about the origin and
    one far token at (-1, 0), beta = 2.5: from the three, the far token's probability is 2.1e-4 (computed
    densely); 2,000,000 picks, its count within 5 binomial standard deviations (and not 0)."""
    rng = np.random.default_rng(8)
    a, r = rng.uniform(0, 2 * np.pi, 300), 0.5 * np.sqrt(rng.random(300))
    x = np.vstack([np.tile([1.0, 0.0], (3, 1)), np.stack([r * np.cos(a), r * np.sin(a)], 1), [[-1.0, 0.0]]])
    beta = 2.5
    p = _law(x, beta, np.array([0]))[0, -1]
    assert 1e-4 < p < 1e-3
    N = 2_000_000
    J = _fast_picks(x, np.repeat(beta * x[:1], N, axis=0), seed=99)
    k = int((J == len(x) - 1).sum())
    assert k > 0 and abs(k - N * p) <= 5 * np.sqrt(N * p * (1 - p)), (k, N * p)


@pytest.mark.parametrize("t", [0.0, 0.5, 3.0, 8.0, 8.5, 12.0])
def test_bernoulli_from_its_negative_log(t):
    """The sampler's Bernoulli(e^{-t}) (one draw of e^{-8} per whole chunk of t, one for the rest): counts
    within 5 binomial standard deviations over enough draws for 200 expected successes."""
    K = _fast_kernels.sap_impl()
    p = np.exp(-t)
    reps = int(max(200 / p, 10_000))
    k = int(K.bernoulli_draws(np.uint64(7), np.array([t]), reps)[0])
    assert abs(k - reps * p) <= 5 * np.sqrt(reps * p * (1 - p)) + 1e-9
    assert K.bernoulli_draws(np.uint64(7), np.array([np.inf]), 1000)[0] == 0


def test_step_is_the_convex_move_to_the_pick_and_reproducible():
    x = np.random.default_rng(3).normal(size=(2, 1500, 2))
    y, J = F.sap_step(x, 0.3, 10.0, rng=5, return_choice=True)
    assert np.array_equal(y, x + 0.3 * (np.take_along_axis(x, J[..., None], axis=-2) - x))
    for seed in (5, np.random.SeedSequence(5), np.random.default_rng(5)):
        y2, J2 = F.sap_step(x, 0.3, 10.0, rng=seed, return_choice=True)
        assert np.array_equal(J, J2) and np.array_equal(y, y2)
    g = np.random.default_rng(5)
    first = F.sap_step(x, 0.3, 10.0, rng=g, return_choice=True)[1]
    assert not np.array_equal(first, F.sap_step(x, 0.3, 10.0, rng=g, return_choice=True)[1])   # advanced


def test_huge_and_tiny_tokens_and_zeros():
    """Scores that need rescaling are drawn from the rescaled tokens (the same logits): at 1e200 every
    token picks its hardmax leader; tokens all at the origin pick uniformly (and stay)."""
    x = np.random.default_rng(4).normal(size=(400, 2))
    _, J = F.sap_step(x * 1e200, 0.5, 1.0, rng=0, return_choice=True)
    assert np.array_equal(J, D.leaders(x))
    y, J = F.sap_step(np.zeros((400, 2)), 0.5, 1.0, rng=0, return_choice=True)
    assert np.array_equal(y, np.zeros((400, 2))) and len(np.unique(J)) > 200   # 253 expected
    _, J = F.sap_step(x * 1e-200, 0.5, 1.0, rng=0, return_choice=True)    # beta |x|^2 ~ 1e-400: uniform
    assert len(np.unique(J)) > 200


def test_bad_input_is_refused_naming_the_argument():
    x = np.random.default_rng(0).normal(size=(50, 2))
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="x"):
        F.sap_step(bad, 0.5, 1.0, rng=0)
    with pytest.raises(ValueError, match="gamma"):
        F.sap_step(x, 1.5, 1.0, rng=0)
    with pytest.raises(ValueError, match="beta"):
        F.sap_step(x, 0.5, -1.0, rng=0)
    with pytest.raises(ValueError, match="beta"):
        F.sap_step(x, 0.5, np.inf, rng=0)
    with pytest.raises(TypeError, match="rng"):
        F.sap_step(x, 0.5, 1.0, rng="seed")
    with pytest.raises(ValueError, match="B"):
        F.sap_step(x, 0.5, 1.0, np.eye(3), rng=0)


def test_routing():
    """method='fast' runs the sampler, 'dense' does not; 'auto' runs it in d = 2 from FAST_MIN_N tokens
    and not below (where it is the dense step, draw for draw)."""
    x = np.random.default_rng(6).normal(size=(3000, 2))
    before = dict(F.SAP_STATS)
    y = afw.sap_step(x, 0.5, 2.0, rng=1, method="fast")
    assert F.SAP_STATS["fast_systems"] == before["fast_systems"] + 1
    assert np.array_equal(y, F.sap_step(x, 0.5, 2.0, rng=1))
    afw.sap_step(x, 0.5, 2.0, rng=1, method="dense")
    y_auto = afw.sap_step(x, 0.5, 2.0, rng=1)
    assert F.SAP_STATS["fast_systems"] == before["fast_systems"] + 2      # the direct call above only
    assert np.array_equal(y_auto, afw.sap_step(x, 0.5, 2.0, rng=1, method="dense"))
    big = np.random.default_rng(7).uniform(-1, 1, size=(D.FAST_MIN_N, 2))
    afw.sap_step(big, 0.5, 0.1, rng=2)
    assert F.SAP_STATS["fast_systems"] == before["fast_systems"] + 3
    rule = afw.MarkovChain(0.5, 2.0, rng=3, method="fast")
    afw.simulate(x, rule, 2)
    assert F.SAP_STATS["fast_systems"] == before["fast_systems"] + 5
    with pytest.raises(ValueError, match="hull"):
        afw.sap_step(x, 0.5, 1.0, rng=0, method="hull")
    with pytest.raises(ValueError, match="method"):
        afw.sap_step(x, 0.5, 1.0, rng=0, method="fast", norm="sphere")
