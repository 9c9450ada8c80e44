"""The fused passes of the steps (attention_fw.model._kernels): numba and numpy agree with the maths.

Every test that takes the ``kernels`` fixture runs twice, once with the numba kernels and once
with their numpy versions, against formulas written out here independently of the library.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from attention_fw.model import _kernels as KN
from attention_fw.model import dynamics as D


@pytest.fixture(params=["numba", "numpy"])
def kernels(request, monkeypatch):
    monkeypatch.setattr(KN, "_IMPL", None)
    monkeypatch.setenv("ATTENTION_FW_KERNELS", request.param)
    impl = KN.impl()
    assert impl.name == request.param, "numba must be installed (requirements.txt pins it)"
    return impl


def softmax_reference(x, gamma, beta, B=None):
    """x_i + gamma (sum_j A_ij x_j - x_i), A the row softmax of beta <B x_i, x_j>, written out."""
    bx = x if B is None else x @ B.T
    S = beta * np.einsum("...ik,...jk->...ij", bx, x)
    S = S - S.max(axis=-1, keepdims=True)
    E = np.exp(S)
    A = E / E.sum(axis=-1, keepdims=True)
    return x + gamma * (np.einsum("...ij,...jk->...ik", A, x) - x)


def hardmax_reference(x, gamma, B=None, rtol=None):
    """Average of the tied maximisers of <B x_i, x_j> (relative tie tolerance), written out."""
    d = x.shape[-1]
    rtol = 8 * d * np.finfo(float).eps if rtol is None else rtol
    bx = x if B is None else x @ B.T
    S = np.einsum("...ik,...jk->...ij", bx, x)
    top = S.max(axis=-1, keepdims=True)
    lead = S >= top - rtol * np.abs(S).max(axis=-1, keepdims=True)
    target = np.einsum("...ij,...jk->...ik", lead.astype(float), x) / lead.sum(axis=-1)[..., None]
    return x + gamma * (target - x)


def test_the_pinned_environment_uses_numba():
    """requirements.txt pins numba; without it the steps silently run at the numpy speed."""
    if os.environ.get("ATTENTION_FW_KERNELS", "numba") == "numpy":
        pytest.fail("ATTENTION_FW_KERNELS=numpy is set for the test run")
    assert KN.backend() == "numba"


def test_unknown_backend_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(KN, "_IMPL", None)
    monkeypatch.setenv("ATTENTION_FW_KERNELS", "cuda")
    with pytest.raises(ValueError, match="ATTENTION_FW_KERNELS"):
        KN.impl()


@pytest.mark.parametrize("shape", [(7, 3), (5, 9, 2), (64, 32, 16), (3, 40, 1)])
@pytest.mark.parametrize("gamma", [1.0, 0.37, 1e-6])
@pytest.mark.parametrize("beta", [0.0, 1e-3, 1.0, 25.0, 1e3, 1e6])
def test_softmax_step_is_the_softmax_average(kernels, shape, gamma, beta):
    rng = np.random.default_rng(hash((shape, gamma, beta)) % 2**32)
    x = rng.standard_normal(shape)
    y = D.softmax_step(x, gamma, beta)
    assert y.shape == x.shape and np.isfinite(y).all()
    # Condition of the weights: a relative perturbation eps of the scores moves them by beta |S| eps.
    cond = 50 * np.finfo(float).eps * (1 + beta * np.max(np.sum(x * x, -1)))
    np.testing.assert_allclose(y, softmax_reference(x, gamma, beta), rtol=1e-12, atol=cond * np.abs(x).max())


@pytest.mark.parametrize("B", [np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([[1.0, 3.0], [-1.0, 0.5]]),
                               -np.eye(2)])
@pytest.mark.parametrize("beta", [0.5, 40.0, 1e5])
def test_softmax_step_with_key_query_matrix(kernels, B, beta):
    x = np.random.default_rng(5).standard_normal((6, 11, 2))
    cond = 50 * np.finfo(float).eps * (1 + beta * np.linalg.norm(B) * np.max(np.sum(x * x, -1)))
    np.testing.assert_allclose(D.softmax_step(x, 0.3, beta, B), softmax_reference(x, 0.3, beta, B),
                               rtol=1e-12, atol=cond * np.abs(x).max())


@pytest.mark.parametrize("shape", [(64, 2), (300, 64, 2), (2, 16, 5), (400, 32, 5), (50, 20, 12)])
@pytest.mark.parametrize("gamma", [1.0, 0.5, 1e-3])
def test_hardmax_step_is_the_leader_average(kernels, shape, gamma):
    """Both routes (scores inside the fused pass for small d, one BLAS product for larger d)."""
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    np.testing.assert_allclose(D.hardmax_step(x, gamma), hardmax_reference(x, gamma), rtol=1e-13, atol=1e-15)
    B = np.diag(np.linspace(-1.0, 2.0, shape[-1]))
    np.testing.assert_allclose(D.hardmax_step(x, gamma, B), hardmax_reference(x, gamma, B), rtol=1e-13,
                               atol=1e-15)


@pytest.mark.parametrize("d", [2, 12])
def test_hardmax_exact_ties_and_coincident_tokens(kernels, d):
    """Square +-e1 +-e2 with its centre and a doubled vertex: closed-form leaders.

    A vertex leads itself (its doubled copy counts twice, which moves nothing); the centre
    scores 0 against everyone, so all six tokens tie and it moves to their mean, (e1 + e2)/6.
    """
    v = np.zeros((6, d))
    v[0, :2], v[1, :2], v[2, :2], v[3, :2], v[5, :2] = (1, 1), (1, -1), (-1, -1), (-1, 1), (1, 1)
    gamma = 0.25
    y = D.hardmax_step(np.stack([v] * 3), gamma)
    expected = v.copy()
    expected[4, :2] = gamma * np.array([1.0, 1.0]) / 6
    np.testing.assert_allclose(y, np.stack([expected] * 3), rtol=0, atol=1e-16)


@pytest.mark.parametrize("e", [-700, -400, -150, 150, 300, 500, 1000])
def test_steps_commute_with_power_of_two_scaling(kernels, e):
    """step(2^e x) = 2^e step(x): no overflow or underflow of the scores at extreme token norms.

    Hardmax: the leader sets are scale-invariant and powers of two multiply exactly, so the
    equality is exact. Softmax: beta <x_i, x_j> is invariant when beta is divided by 4^e.
    """
    x = np.random.default_rng(11).standard_normal((4, 9, 3))
    c = math.ldexp(1.0, e)
    np.testing.assert_array_equal(D.hardmax_step(x * c, 0.4), D.hardmax_step(x, 0.4) * c)
    B = np.array([[1.0, 0.2, 0.0], [0.2, 0.5, 0.1], [0.0, 0.1, 2.0]])
    np.testing.assert_array_equal(D.hardmax_step(x * c, 0.4, B), D.hardmax_step(x, 0.4, B) * c)
    if abs(e) <= 500:
        beta = math.ldexp(3.0, -2 * e)
        y = D.softmax_step(x * c, 0.4, beta)
        assert np.isfinite(y).all()
        np.testing.assert_allclose(y / c, D.softmax_step(x, 0.4, 3.0), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("gamma", [1e-300, 1e-150, 1e-12])
def test_tiny_gamma_without_overflow(kernels, gamma):
    """beta |x|^2 = 199 keeps the unshifted exp (totals up to n e^199): the diagonal-shift form of
    the convex combination would overflow for gamma = 1e-300; the step must still be x + O(gamma)."""
    x = np.random.default_rng(8).standard_normal((4, 30, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    y = D.softmax_step(x, gamma, 199.0)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, x, rtol=0, atol=4 * gamma + 4e-16)


@pytest.mark.parametrize("B", [None, 3 * np.eye(2), np.array([[1e6, 0.0], [0.0, 1.0]])])
def test_huge_beta_is_the_hardmax(kernels, B):
    """beta = 1e300 (beta |B| |x|^2 far beyond the largest double): the hardmax step, no NaN."""
    for scale in (1e5, 0.75 / 3.5):  # the second: tokens already of order one, only beta is too large
        x = np.random.default_rng(9).standard_normal((5, 7, 2)) * scale
        y = D.softmax_step(x, 0.5, 1e300, B)
        np.testing.assert_allclose(y, D.hardmax_step(x, 0.5, B), rtol=1e-15, atol=1e-10 * scale)
        assert np.isfinite(D.sap_step(x, 0.5, 1e300, B, rng=0)).all()
        assert np.isfinite(D.attention(x, 1e300, B)).all()


@pytest.mark.parametrize("e", [-500, -120, 120, 500])
def test_attention_is_scale_covariant(e):
    """A(2^e x, beta 4^-e) = A(x, beta) and the hardmax leaders of 2^e x are those of x: no overflow."""
    x = np.random.default_rng(12).standard_normal((3, 8, 2))
    c = math.ldexp(1.0, e)
    np.testing.assert_allclose(D.attention(x * c, math.ldexp(2.0, -2 * e)), D.attention(x, 2.0),
                               rtol=1e-13, atol=1e-300)
    np.testing.assert_array_equal(D.attention(x * c), D.attention(x))
    np.testing.assert_array_equal(D.leaders(x * c), D.leaders(x))


def test_tokens_at_the_origin_stay(kernels):
    x = np.zeros((2, 5, 3))
    assert np.array_equal(D.hardmax_step(x, 0.5), x)
    assert np.array_equal(D.softmax_step(x, 0.5, 7.0), x)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("step", ["hardmax", "softmax"])
@pytest.mark.parametrize("shape", [(8, 2), (30, 16, 12)])
def test_non_finite_tokens_are_refused_by_name(kernels, bad, step, shape):
    x = np.random.default_rng(0).standard_normal(shape)
    x.flat[7] = bad
    with pytest.raises(ValueError, match="x must be finite"):
        D.hardmax_step(x, 0.5) if step == "hardmax" else D.softmax_step(x, 0.5, 2.0)


def test_batch_is_the_stack_of_its_systems(kernels):
    """Systems are independent: a batched step equals the steps of the systems one by one."""
    x = np.random.default_rng(2).standard_normal((40, 24, 3))
    for step in (lambda y: D.hardmax_step(y, 0.3), lambda y: D.softmax_step(y, 0.3, 4.0)):
        np.testing.assert_allclose(step(x), np.stack([step(s) for s in x]), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("small_weight", [2.0 ** -26, 0.01])
def test_sap_step_law_with_each_backend(kernels, monkeypatch, small_weight, check_coincident_pick):
    """The coincident-token law of the chain with each backend, also with the tail group in play."""
    monkeypatch.setattr(D, "SMALL_WEIGHT", small_weight)
    # weight of a relative to b: e^{-5.2} = 0.0055, in the tail group at SMALL_WEIGHT = 0.01
    check_coincident_pick(beta=8.0, N=200_000)


def test_numba_and_numpy_passes_agree():
    """Each fused pass against its numpy version, and against its definition, on the same arrays."""
    nb = KN._numba_kernels()
    if nb is None:
        pytest.fail("numba is not importable (requirements.txt pins it)")
    rng = np.random.default_rng(4)
    R, n, d = 17, 13, 5
    x = rng.standard_normal((R, n, d))
    E = np.exp(rng.standard_normal((R, n, n)))
    Y = rng.standard_normal((R, n, d))
    T = rng.random((R, n)) + 0.5
    W = rng.standard_normal((R, n, n))
    S = rng.standard_normal((R, n, n))
    S[:, :, 3] = S.max(axis=-1)  # exact ties with the maximum
    W[0, 0, :4] = [-1e4, -800.0, -749.0, -1e300]  # far below the exp floor after the shift
    P = np.exp(-np.abs(rng.standard_normal((R, n, n))) * rng.choice([1.0, 30.0], size=(R, n, 1)))
    P[..., 0] = 1.0
    pick_small = rng.random((R, n)) < 0.5
    U = 1.0 - rng.random((R, n))
    out = {}
    for impl in (nb, KN.NUMPY):
        xt = np.empty((R, d, n))
        top, tot = impl.scaled_transpose(x, 2.5, xt)
        Z, total = E.copy(), np.empty((R, n))
        impl.row_sums_shift(Z, 0.7, total)
        y, t = Y.copy(), T.copy()
        impl.scale_rows(y, 0.3, t)
        w = W.copy()
        impl.shift_rows(w)
        h1, h2 = np.empty((R, n, d)), np.empty((R, n, d))
        impl.hardmax_combine(S, x, 0.4, 1e-14, h1)
        top2, tot2 = impl.hardmax_small(x, x, 0.4, 1e-14, h2)
        ss, sb, J = np.empty((R, n)), np.empty((R, n)), np.empty((R, n), dtype=np.intp)
        impl.weight_split(P, 1e-6, ss, sb)
        impl.group_pick(P, 1e-6, pick_small, U, J)
        out[impl.name] = dict(xt=xt, top=top, tot=tot, Z=Z, total=total, y=y, w=w, h1=h1, h2=h2,
                              top2=top2, tot2=tot2, ss=ss, sb=sb, J=J)
    for key in set(out["numpy"]) - {"J"}:
        np.testing.assert_allclose(out["numba"][key], out["numpy"][key], rtol=1e-13, atol=1e-15, err_msg=key)
    o = out["numba"]
    sq = np.sum(x * x, -1)
    np.testing.assert_array_equal(o["xt"], 2.5 * np.swapaxes(x, 1, 2))
    assert o["top"] == o["top2"] == pytest.approx(sq.max(), rel=1e-15)
    assert o["tot"] == o["tot2"] == pytest.approx(sq.sum(), rel=1e-13)
    np.testing.assert_allclose(o["total"], E.sum(-1), rtol=1e-14)
    np.testing.assert_allclose(o["Z"], E + 0.7 * np.eye(n) * E.sum(-1)[..., None], rtol=1e-14)
    np.testing.assert_allclose(o["y"], Y * (0.3 / T)[..., None], rtol=1e-15)
    np.testing.assert_array_equal(o["w"], np.maximum(W - W.max(-1, keepdims=True), KN.EXP_FLOOR))
    assert (o["w"].max(-1) == 0).all() and o["w"][0, 0, 0] == o["w"][0, 0, 3] == KN.EXP_FLOOR
    small = P < 1e-6
    assert small.any() and (small.sum(-1) < n).all()
    np.testing.assert_allclose(o["ss"], np.where(small, P, 0).sum(-1), rtol=1e-13)
    np.testing.assert_allclose(o["sb"], np.where(small, 0, P).sum(-1), rtol=1e-13)
    has_group = np.where(pick_small, small.any(-1), True)  # the contract: the group is not empty
    assert not has_group.all()  # (the test asks for some empty groups, whose pick is unspecified)
    # Same sums in the same order, so the same picks:
    np.testing.assert_array_equal(out["numba"]["J"][has_group], out["numpy"]["J"][has_group])
    in_group = np.take_along_axis(small, o["J"][..., None], -1)[..., 0] == pick_small
    assert in_group[has_group].all()  # the pick lies in the requested group
    G = np.where(small == pick_small[..., None], P, 0.0)
    cum = np.cumsum(G, -1)
    below = np.take_along_axis(cum - G, o["J"][..., None], -1)[..., 0]
    at = np.take_along_axis(cum, o["J"][..., None], -1)[..., 0]
    u = U * cum[..., -1]
    ok = has_group
    assert (below[ok] < u[ok]).all() and (u[ok] <= at[ok]).all()  # inversion of the group's cumulative weights
    lead = S >= S.max(-1, keepdims=True) - 1e-14 * np.abs(S).max(-1, keepdims=True)
    assert lead[..., 3].all() and (lead.sum(-1) == 2).mean() > 0.8  # the engineered ties are there
    target = np.einsum("rij,rjk->rik", lead.astype(float), x) / lead.sum(-1)[..., None]
    np.testing.assert_allclose(o["h1"], x + 0.4 * (target - x), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(o["h2"], hardmax_reference(x, 0.4, rtol=1e-14), rtol=1e-14, atol=1e-15)
