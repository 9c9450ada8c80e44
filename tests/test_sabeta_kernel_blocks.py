"""The SA-beta kernel's symmetric path in blocks of 4 rows (issue 35): its layout and its sums.

The symmetric path pads the n tokens with zeros to nb = 4 ceil(n / 4) and evaluates, for each row i,
the columns j >= 4 floor(i / 4) (its diagonal block and the blocks right of it, 8 K (K + 1) entries,
K = nb / 4). Here: those entries are the shifted scores beta <B x_i, x_j> - hb_i - hb_j of that
layout (their exponentials at most 1); the block sums are the products of the full symmetric matrix with the weight vectors
(row parts and mirrored column parts, padded columns adding nothing), for D = 2 and 3 and n not a
multiple of 4; and one-dimensional systems (run with a zero second coordinate) exit when plain
stepping does. That the kernel's T2 equals plain stepping on the family is tested in
test_sabeta_kernel_paths.py and test_sabeta_api.py.
"""
import numpy as np
import pytest

from attention_fw.experiments import sabeta_kernel as SK


def _layout(nb):
    """(row, column) of each stored entry, in the kernel's order."""
    rows, cols = [], []
    for s in range(0, nb, 4):
        for i in range(s, s + 4):
            rows += [i] * (nb - s)
            cols += list(range(s, nb))
    return np.array(rows), np.array(cols)


def _system(n, D, rng):
    nb = (n + 3) // 4 * 4
    xt = np.zeros((D, nb))
    xt[:, :n] = rng.normal(size=(D, n))
    A = rng.normal(size=(D, D))
    B = A @ A.T + 0.5 * np.eye(D)
    b = 1.7
    hb = np.zeros(nb)
    hb[:n] = 0.5 * b * np.einsum("kj,kl,lj->j", xt[:, :n], B, xt[:, :n])
    return nb, xt, B, b, hb


@pytest.mark.parametrize("n,D", [(3, 2), (5, 2), (8, 2), (13, 2), (6, 3), (11, 3)])
def test_block_scores_are_the_shifted_scores_of_the_layout(n, D):
    nb, xt, B, b, hb = _system(n, D, np.random.default_rng(n + 10 * D))
    P = SK._blk_entries(nb)
    e = np.full(P, np.nan)
    a = np.empty(P)
    assert SK._blk_scores(xt, B[None], 0, hb, a, b, nb, D) == P
    SK._exp_into(a, e, P, False)
    rows, cols = _layout(nb)
    assert len(rows) == P
    want = np.exp(b * np.einsum("kp,kl,lp->p", xt[:, rows], B, xt[:, cols]) - hb[rows] - hb[cols])
    np.testing.assert_allclose(e, want, rtol=1e-13, atol=0)
    assert np.all(e <= 1 + 1e-13)                  # Cauchy-Schwarz: every shifted exponential is at most 1


@pytest.mark.parametrize("n,D", [(3, 2), (5, 2), (8, 2), (13, 2), (48, 2), (6, 3), (11, 3), (16, 3)])
def test_block_sums_are_the_symmetric_products(n, D):
    """R_c = E V_c for the full symmetric E (rows i < n), from the blocks only; the padded columns
    (V = 0) add nothing and the padded rows are never read."""
    rng = np.random.default_rng(n + 100 * D)
    nb, xt, B, b, hb = _system(n, D, rng)
    P = SK._blk_entries(nb)
    e = np.empty(P)
    a = np.empty(P)
    SK._exp_into(a, e, SK._blk_scores(xt, B[None], 0, hb, a, b, nb, D), False)
    V = np.zeros((D + 1, nb))
    V[0, :n] = rng.uniform(0.5, 2.0, n)
    V[1:, :n] = V[0, :n] * xt[:, :n]
    R = [np.full(nb, np.nan) for _ in range(D + 1)]
    C = [np.full(nb, np.nan) for _ in range(D + 1)]
    if D == 2:
        SK._blk_sums3(V[0], V[1], V[2], e, *R, *C, nb)
    else:
        SK._blk_sums4(V[0], V[1], V[2], V[3], e, *R, *C, nb)
    full = np.exp(b * xt[:, :n].T @ B @ xt[:, :n] - hb[:n, None] - hb[None, :n])
    want = full @ V[:, :n].T
    np.testing.assert_allclose(np.array(R)[:, :n].T, want, rtol=1e-12, atol=0)


def test_one_dimensional_systems_exit_when_plain_stepping_does():
    """d = 1 runs through the D = 2 path with a zero second coordinate; alone and beside a d = 2 system."""
    x0 = np.array([[-1.0], [-0.9], [-1.1], [1.0], [1.05]])
    sigma = np.array([0, 0, 0, 1, 1])
    for beta in (2.0, 5.0):
        plain = SK._stepping_exit_time(x0, sigma, 0.2, beta, 0.05, cap=5000)
        alone = SK.sabeta_exit_times(x0, sigma, 0.2, beta, 0.05, cap=5000)
        mixed = SK.sabeta_exit_times([x0, np.c_[x0, x0]], [sigma, sigma], 0.2, beta, 0.05, cap=5000)
        assert not plain.censored[0]
        assert alone.times.tolist() == plain.times.tolist() == mixed.times[:1].tolist()
        assert alone.final[0].shape == (5, 1)
        np.testing.assert_allclose(alone.final[0], plain.final[0], rtol=0, atol=1e-12)
