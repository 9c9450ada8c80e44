"""The Frank-Wolfe reading (Section 2.2) and its quantities."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import minimize

from attention_fw.model import dynamics as D
from attention_fw.model import frank_wolfe as F
from attention_fw.geometry import polytope as P


def test_token_argmax_equals_linprog_oracle():
    """The hardmax oracle over tokens equals the LP oracle over the hull (residual ~1e-16)."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        pts = rng.normal(size=(9, 3))
        dirs = rng.normal(size=(5, 3))
        a = F.lmo(pts, dirs)
        b = F.lmo_linprog(pts, dirs)
        np.testing.assert_allclose(np.einsum("kd,kd->k", dirs, a), np.einsum("kd,kd->k", dirs, b), atol=1e-12)
        np.testing.assert_allclose(a, b, atol=1e-9)  # generic data: the minimiser is unique


def test_hardmax_step_is_frank_wolfe_step():
    """SA-inf with symmetric B is x + gamma (s - x), s = LMO of the gradient of -J (Section 2.2)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(7, 2))
    M = rng.normal(size=(2, 2))
    B = M + M.T
    grad_negJ = -(x @ B)  # gradient of -J at each token
    s = F.lmo(x, grad_negJ)
    np.testing.assert_allclose(D.hardmax_step(x, 0.4, B), x + 0.4 * (s - x), atol=1e-14)


def test_batched_lmo_matches_single():
    rng = np.random.default_rng(2)
    pts = rng.normal(size=(4, 6, 2))
    dirs = rng.normal(size=(4, 3, 2))
    out = F.lmo(pts, dirs)
    for r in range(4):
        np.testing.assert_array_equal(out[r], F.lmo(pts[r], dirs[r]))


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000))
def test_fw_gap_nonnegative_and_bounds_primal_gap(seed):
    """For convex f and x in K: 0 <= f(x) - min_K f <= FW gap(x) (the standard duality bound)."""
    rng = np.random.default_rng(seed)
    pts = rng.normal(size=(6, 2)) + rng.normal(size=2)
    M = rng.normal(size=(2, 2))
    Bs = M @ M.T
    x = rng.dirichlet(np.ones(6), size=4) @ pts
    gap = F.fw_gap(x, x @ Bs, pts)
    pg = F.primal_gap(x, pts, Bs)
    assert np.all(gap >= -1e-12) and np.all(pg >= -1e-12) and np.all(pg <= gap + 1e-10)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_min_energy_over_hull_against_generic_optimiser(d):
    rng = np.random.default_rng(3 + d)
    for _ in range(10):
        pts = rng.normal(size=(6, d)) + 2.0 * rng.normal(size=d)
        M = rng.normal(size=(d, d))
        Bs = M @ M.T + 0.1 * np.eye(d)
        m = len(pts)
        G = pts @ Bs @ pts.T
        best = min(minimize(lambda w: 0.5 * w @ G @ w, w0, method="SLSQP", bounds=[(0, 1)] * m,
                            constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1}],
                            options={"ftol": 1e-15}).fun
                   for w0 in rng.dirichlet(np.ones(m), size=5))
        assert F.min_energy_over_hull(pts, Bs) == pytest.approx(best, rel=1e-6, abs=1e-12)


def test_min_energy_is_zero_when_origin_inside():
    pts = np.array([[1.0, 0.0], [-1.0, 1.0], [-1.0, -1.0]])
    assert F.min_energy_over_hull(pts, np.diag([1.0, 3.0])) == 0.0
    # singular B: the null line x = 0 ... crosses the triangle, so the minimum is 0 too
    assert F.min_energy_over_hull(pts + [5.0, 0.0], np.diag([0.0, 1.0])) == 0.0
    # and a segment away from the origin: min of x^2/2 on [1/3, 5/3] is 1/18 (Theorem 3.1 counterexample)
    assert F.min_energy_over_hull(np.array([[1 / 3], [5 / 3]]), np.eye(1)) == pytest.approx(1 / 18)


def test_hull_diameter_and_area_of_known_shapes():
    sq = np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 2.0], [0.0, 2.0], [1.0, 1.0]])
    assert P.hull_area(sq) == pytest.approx(4.0)
    assert P.diameter(sq) == pytest.approx(np.sqrt(8.0))
    assert P.hull_area(np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])) == 0.0  # collinear
    np.testing.assert_allclose(P.hull_area(np.stack([sq, 2 * sq])), [4.0, 16.0])


def test_energy_rejects_non_symmetric_B():
    with pytest.raises(ValueError, match="B must be symmetric"):
        F.energy(np.ones((2, 2)), np.array([[1.0, 2.0], [0.0, 1.0]]))


def test_min_energy_over_degenerate_hulls():
    """Coincident points and segments collinear with the origin have no interior (regression)."""
    B = np.eye(2)
    assert F.min_energy_over_hull(np.tile([0.6, 0.3], (4, 1)), B) == pytest.approx(0.225)
    assert F.min_energy_over_hull(np.array([[1.0, 1.0], [2.0, 2.0], [1.5, 1.5]]), B) == pytest.approx(1.0)
    assert F.min_energy_over_hull(np.array([[-1.0, -1.0], [2.0, 2.0]]), B) == 0.0
