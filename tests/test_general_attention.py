"""General attention (query and key matrices, values, heads, masks, LayerNorm, the sphere) against a plain
numpy transcription of the formulas, written here loop by loop over systems, heads and queries; and the
defaults are the paper's model exactly (the same numbers, bit for bit, as the fast paths).

Tolerances: 1e-12 relative to the tokens' scale for float64 (products of length d and n, n <= 12).
"""
import numpy as np
import pytest

import attention_fw as afw
from attention_fw.model import general

RNG = np.random.default_rng(20261203)


def _softmax_row(z):
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


def _reference_step(x, gamma, beta, W_Q, W_K, V, allowed, norm):
    """One system: x_i <- norm((1 - gamma) x_i + gamma sum_j A_ij V x_j), A the masked softmax of (x W_Q)(x W_K)^T."""
    n, d = x.shape
    out = np.empty_like(x)
    for i in range(n):
        q = x[i] @ W_Q
        s = np.array([q @ (x[j] @ W_K) for j in range(n)])
        keys = np.flatnonzero(allowed[i])
        a = np.zeros(n)
        a[keys] = _softmax_row(beta * s[keys])
        att = sum(a[j] * (V @ x[j]) for j in range(n))
        out[i] = (1 - gamma) * x[i] + gamma * att
    return _reference_norm(out, norm)


def _reference_norm(y, norm):
    if norm is None:
        return y
    out = np.empty_like(y)
    for i, row in enumerate(y):
        if norm == "sphere":
            out[i] = row / np.sqrt(np.sum(row ** 2))
        else:
            c = row - row.mean()
            out[i] = c / np.sqrt(np.mean(c ** 2) + 1e-12)
    return out


def _reference_multihead(x, W_Q, W_K, W_V, W_O, beta, allowed, norm):
    n, d = x.shape
    y = x.copy()
    for h in range(W_Q.shape[0]):
        Q, K, Vh = x @ W_Q[h], x @ W_K[h], x @ W_V[h]
        for i in range(n):
            keys = np.flatnonzero(allowed[i])
            a = np.zeros(n)
            a[keys] = _softmax_row(beta * (K[keys] @ Q[i]))
            y[i] += (a @ Vh) @ W_O[h]
    return _reference_norm(y, norm)


def _close(a, b, tol=1e-12):
    return np.abs(a - b).max() <= tol * max(1.0, np.abs(b).max())


@pytest.mark.parametrize("mask", [None, "causal", "random"])
@pytest.mark.parametrize("norm", [None, "layernorm", "sphere"])
def test_softmax_step_with_separate_queries_keys_values_mask_and_norm(mask, norm):
    R, n, d, dk = 3, 7, 3, 2
    x = RNG.normal(size=(R, n, d))
    W_Q, W_K = RNG.normal(size=(d, dk)), RNG.normal(size=(d, dk))        # W_Q != W_K, B not symmetric
    V = RNG.normal(size=(d, d))
    allowed = np.tril(np.ones((n, n), bool)) if mask == "causal" else np.ones((n, n), bool)
    if mask == "random":
        allowed = RNG.random((n, n)) < 0.5
        allowed[np.arange(n), RNG.integers(0, n, n)] = True              # every query sees a key
    m = allowed if mask == "random" else mask
    y = afw.softmax_step(x, 0.3, 1.7, W_Q=W_Q, W_K=W_K, V=V, mask=m, norm=norm)
    want = np.stack([_reference_step(x[r], 0.3, 1.7, W_Q, W_K, V, allowed, norm) for r in range(R)])
    assert y.shape == x.shape and _close(y, want)


def test_one_value_matrix_per_system_and_the_key_query_convention():
    R, n, d = 4, 6, 2
    x = RNG.normal(size=(R, n, d))
    V = RNG.normal(size=(R, d, d))
    W_Q, W_K = RNG.normal(size=(d, d)), RNG.normal(size=(d, d))
    y = afw.softmax_step(x, 0.5, 2.0, W_Q=W_Q, W_K=W_K, V=V)
    allowed = np.ones((n, n), bool)
    want = np.stack([_reference_step(x[r], 0.5, 2.0, W_Q, W_K, V[r], allowed, None) for r in range(R)])
    assert _close(y, want)
    # W_Q, W_K are B = W_K W_Q^T in the library's <B x_i, x_j>: the fast path gives the same step
    assert _close(afw.softmax_step(x, 0.5, 2.0, W_Q=W_Q, W_K=W_K), afw.softmax_step(x, 0.5, 2.0, W_K @ W_Q.T))
    assert _close(afw.scores(x, W_K @ W_Q.T), (x @ W_Q) @ np.swapaxes(x @ W_K, 1, 2))


@pytest.mark.parametrize("norm", [None, "sphere"])
def test_hardmax_step_moves_to_the_value_of_the_leader_among_allowed_keys(norm):
    n, d = 9, 2
    x = RNG.normal(size=(n, d))
    V = np.array([[0.5, 0.2], [-0.1, 1.0]])
    y = afw.hardmax_step(x, 0.4, mask="causal", V=V, norm=norm)
    want = np.empty_like(x)
    for i in range(n):
        j = max(range(i + 1), key=lambda j: x[i] @ x[j])                  # no ties for Gaussian tokens
        want[i] = 0.6 * x[i] + 0.4 * V @ x[j]
    assert _close(y, _reference_norm(want, norm))
    # the hardmax is the limit of the softmax, with the mask
    assert _close(afw.softmax_step(x, 0.4, 1e7, mask="causal", V=V, norm=norm), y, 1e-6)


def test_sap_step_picks_only_allowed_keys_with_the_softmax_law():
    n, d, R = 4, 2, 20000
    x0 = RNG.normal(size=(n, d))
    x = np.broadcast_to(x0, (R, n, d))
    allowed = np.array([[1, 0, 1, 1], [0, 1, 0, 0], [1, 1, 1, 0], [0, 0, 1, 1]], bool)
    _, J = afw.sap_step(x, 0.5, 1.5, rng=7, mask=allowed, V=2 * np.eye(d), return_choice=True)
    S = x0 @ x0.T
    for i in range(n):
        counts = np.bincount(J[:, i], minlength=n)
        assert np.all(counts[~allowed[i]] == 0)
        p = np.zeros(n)
        p[allowed[i]] = _softmax_row(1.5 * S[i, allowed[i]])
        # each frequency within 5 binomial standard deviations of its probability
        assert np.all(np.abs(counts / R - p) <= 5 * np.sqrt(p * (1 - p) / R) + 1e-12)
    y, J = afw.sap_step(x0, 0.5, 1.5, rng=3, V=2 * np.eye(d), return_choice=True)
    assert _close(y, 0.5 * x0 + 0.5 * 2 * x0[J])                        # moves towards V x_J


@pytest.mark.parametrize("mask", [None, "causal"])
@pytest.mark.parametrize("norm", [None, "layernorm", "sphere"])
def test_multihead_step_against_the_transcription(mask, norm):
    R, n, d, H, dh, dv = 2, 6, 4, 3, 2, 3
    x = RNG.normal(size=(R, n, d))
    W_Q, W_K = RNG.normal(size=(H, d, dh)), RNG.normal(size=(H, d, dh))
    W_V, W_O = RNG.normal(size=(H, d, dv)), RNG.normal(size=(H, dv, d))
    allowed = np.tril(np.ones((n, n), bool)) if mask else np.ones((n, n), bool)
    y = afw.multihead_step(x, W_Q, W_K, W_V, W_O, beta=0.8, mask=mask, norm=norm)
    want = np.stack([_reference_multihead(x[r], W_Q, W_K, W_V, W_O, 0.8, allowed, norm) for r in range(R)])
    assert _close(y, want)
    assert _close(afw.multihead_step(x[0], W_Q, W_K, W_V, W_O, beta=0.8, mask=mask, norm=norm), want[0])
    run = afw.simulate(x, afw.MultiHead(W_Q, W_K, W_V, W_O, beta=0.8, mask=mask, norm=norm), 2)
    assert _close(run.x, np.stack([_reference_multihead(w, W_Q, W_K, W_V, W_O, 0.8, allowed, norm)
                                    for w in want]))


def test_one_head_is_the_paper_layer():
    """One head, identity weights, W_O = V = gamma I: the layer (1.1), whose proxy form (1.3) is SA-beta with
    step gamma / (1 + gamma)."""
    x = RNG.normal(size=(5, 2))
    eye = np.eye(2)[None]
    g = 0.25
    y = afw.multihead_step(x, eye, eye, eye, g * eye, beta=1.3)
    assert _close(y, x + g * afw.attention(x, 1.3) @ x)
    assert _close(y / (1 + g), afw.softmax_step(x, g / (1 + g), 1.3))


def test_the_defaults_are_the_paper_model_bit_for_bit():
    """With V = I, no mask and no norm the general model equals the fast path to rounding, and the
    fast path itself is what the steps run by default (identical arrays)."""
    x = RNG.normal(size=(3, 8, 2))
    B = np.array([[1.0, 0.3], [0.3, 0.8]])
    tol = general.LAYERNORM_EPS
    for step, args in ((afw.softmax_step, (0.3, 2.0, B)), (afw.hardmax_step, (0.3, B))):
        fast = step(x, *args)
        assert _close(step(x, *args, V=np.eye(2)), fast, 1e-13)
        assert _close(step(x, *args, mask=np.ones((8, 8), bool)), fast, 1e-13)
        assert tol == 1e-12
    a = afw.sap_step(x, 0.3, 2.0, B, rng=5)
    b = afw.sap_step(x, 0.3, 2.0, B, rng=5, V=np.eye(2))            # the same exact sampler, same stream
    assert np.array_equal(a, b)


def test_float32_in_float32_out():
    x = RNG.normal(size=(2, 5, 2)).astype(np.float32)
    for y in (afw.softmax_step(x, 0.5, 1.0), afw.hardmax_step(x, 0.5), afw.sap_step(x, 0.5, 1.0, rng=0),
              afw.softmax_step(x, 0.5, 1.0, norm="sphere"), afw.layer_step(x, 1.0, None, np.eye(2)),
              afw.multihead_step(x, *(np.eye(2)[None],) * 4), afw.simulate(x, afw.Softmax(0.5, 1.0), 3).x):
        assert y.dtype == np.float32
    # computed in float64 and rounded once: within float32's rounding of the float64 step
    y64 = afw.softmax_step(x.astype(np.float64), 0.5, 1.0)
    assert np.abs(afw.softmax_step(x, 0.5, 1.0) - y64).max() <= 2 ** -23 * np.abs(y64).max()
    assert afw.softmax_step(x.astype(np.float64), 0.5, 1.0).dtype == np.float64
    assert afw.softmax_step([[1, 0], [0, 1]], 0.5, 1.0).dtype == np.float64


def test_a_drawing_rule_gives_the_same_path_on_every_simulate():
    x = RNG.normal(size=(6, 5, 2))
    for seed in (3, np.random.SeedSequence(3), np.random.default_rng(3)):
        rule = afw.MarkovChain(0.5, 2.0, rng=seed)
        a, b = afw.simulate(x, rule, 20).x, afw.simulate(x, rule, 20).x
        assert np.array_equal(a, b)
    assert np.array_equal(afw.simulate(x, afw.MarkovChain(0.5, 2.0, rng=3), 20).x,
                          afw.simulate(x, afw.MarkovChain(0.5, 2.0, rng=np.random.default_rng(3)), 20).x)


def test_one_value_matrix_per_system_in_the_layer():
    x = RNG.normal(size=(3, 5, 2))
    V = np.stack([0.5 * np.eye(2), np.eye(2), np.diag([1.0, 2.0])])
    y = afw.layer_step(x, 1.0, None, V)
    for r in range(3):
        assert _close(y[r], afw.layer_step(x[r], 1.0, None, V[r]))


@pytest.mark.parametrize("kwargs, match", [
    (dict(W_Q=np.eye(2)), "W_Q and W_K must be given together"),
    (dict(W_Q=np.eye(2), W_K=np.eye(2), B=np.eye(2)), "either B or W_Q and W_K"),
    (dict(W_Q=np.eye(2), W_K=np.ones((2, 3))), "same shape"),
    (dict(V=np.ones((2, 3))), "V must be 2 x 2"),
    (dict(mask="future"), "mask must be None, 'causal'"),
    (dict(mask=np.ones((3, 3), bool)), r"mask must have shape \(4, 4\)"),
    (dict(mask=np.eye(4, dtype=bool) & False), "at least one key"),
    (dict(norm="rms"), "norm must be None, 'layernorm' or 'sphere'"),
])
def test_bad_general_arguments_are_named(kwargs, match):
    x = RNG.normal(size=(4, 2))
    with pytest.raises((ValueError, TypeError), match=match):
        afw.softmax_step(x, 0.5, 1.0, **kwargs)


def test_bad_multihead_weights_are_named():
    x = RNG.normal(size=(4, 2))
    W = np.ones((2, 2, 3))
    with pytest.raises(ValueError, match="W_O must have shape"):
        afw.multihead_step(x, W, W, W, np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="W_K must hold one matrix per head"):
        afw.multihead_step(x, W, np.ones((1, 2, 3)), W, np.ones((2, 3, 2)))
    with pytest.raises(ValueError, match="origin"):
        afw.softmax_step(np.zeros((3, 2)), 0.5, 1.0, norm="sphere")


def test_what_needs_the_paper_hypotheses_refuses_a_non_symmetric_or_indefinite_B():
    """The steps accept any B (the model); the cells, the Frank-Wolfe energy and the exit-time engine need
    B = B^T (and the engine B > 0), and say so."""
    from attention_fw.experiments import exit_times as ET
    from attention_fw.geometry import planar
    from attention_fw.geometry.polytope import regular_polygon
    from attention_fw.model import frank_wolfe

    v = regular_polygon(3)
    skew = np.array([[1.0, 0.5], [0.0, 1.0]])
    assert afw.hardmax_step(v, 0.5, skew).shape == v.shape                 # the model itself: any B
    with pytest.raises(ValueError, match="symmetric"):
        planar.cells(v, skew)
    with pytest.raises(ValueError, match="symmetric"):
        planar.owns_cell(v, skew)
    with pytest.raises(ValueError, match="B = B\\^T"):
        frank_wolfe.energy(v, skew)
    x0, sigma = ET.cluster_configuration(v, np.array([2, 2, 2]))
    with pytest.raises(ValueError, match="symmetric"):
        ET.engine_exit_times(x0, sigma, 0.1, 1.0, 0.05, 10, rng=0, B=skew)
    with pytest.raises(ValueError, match="positive definite"):
        ET.engine_exit_times(x0, sigma, 0.1, 1.0, 0.05, 10, rng=0, B=-np.eye(2))
    with pytest.raises(ValueError, match="positive definite"):
        ET.stepping_exit_times(x0, sigma, 0.1, 1.0, 0.05, 10, rng=0, B=np.diag([1.0, 0.0]))
