"""The sphere S^2 model (attention_fw.model.sphere, force_s2): against the dense sum, the proved Taylor bound,
the circle as the equator, tangency and rotation equivariance."""
import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from attention_fw.model import sphere as S


def _unit(g):
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def _states(rng, n=600):
    uniform = _unit(rng.normal(size=(n, 3)))
    centres = _unit(rng.normal(size=(4, 3)))
    clustered = _unit(centres[rng.integers(0, 4, n)] + 0.02 * rng.normal(size=(n, 3)))
    coincident = np.repeat(centres[:2], n // 2, axis=0)
    antipodal = np.r_[coincident[: n // 2], -coincident[: n // 2]]
    return {"uniform": uniform, "clustered": clustered, "coincident": coincident, "antipodal": antipodal}


@pytest.mark.parametrize("beta", [0.1, 1.0, 5.0, 12.0])
def test_force_s2_against_dense(beta):
    rng = np.random.default_rng(int(beta * 10))
    K = S.s2_order(beta)
    bound = S.s2_tail_bound(beta, K) + 64 * (K + 1) ** 2 * np.finfo(float).eps * math.exp(beta)
    for name, x in _states(rng).items():
        err = np.abs(S.force_s2(x, beta, method="taylor") - S.force_s2_dense(x, beta)).max()
        assert err <= bound, (name, err, bound)
    # a truncation below the default: the error stays below its own proved bound
    x = _states(rng)["uniform"]
    for K in (beta + 2, beta + 6):
        K = int(K)
        err = np.abs(S.force_s2(x, beta, K, method="taylor") - S.force_s2_dense(x, beta)).max()
        assert err <= S.s2_tail_bound(beta, K) + 1e-14 * math.exp(beta)


def test_s2_tail_bound_is_a_bound():
    for b in (0.5, 3.0, 10.0):
        for K in range(int(b) + 1, int(b) + 30, 4):
            tail = sum(math.exp(k * math.log(b) - math.lgamma(k + 1)) for k in range(K + 1, K + 200))
            assert tail <= S.s2_tail_bound(b, K) * (1 + 1e-12)
    assert S.s2_tail_bound(10.0, 7) == math.inf


def test_force_s2_is_tangent_equivariant_and_the_circle_on_the_equator():
    rng = np.random.default_rng(4)
    x = _unit(rng.normal(size=(300, 3)))
    F = S.force_s2(x, 3.0, method="taylor")
    assert np.abs(np.einsum("nd,nd->n", F, x)).max() < 1e-12 * math.exp(3.0)       # tangent
    R = Rotation.random(random_state=5).as_matrix()
    assert np.abs(S.force_s2(x @ R.T, 3.0, method="taylor") - F @ R.T).max() < 1e-12 * math.exp(3.0)
    # tokens on the equator stay there and move as the circle model: F = theta' (-sin t, cos t)
    t = rng.uniform(0, 2 * np.pi, 400)
    eq = np.c_[np.cos(t), np.sin(t), np.zeros_like(t)]
    F = S.force_s2(eq, 5.0, method="taylor")
    circle = S.force(t, 5.0)
    assert np.abs(F[:, 2]).max() == 0.0
    assert np.abs(F[:, :2] - circle[:, None] * np.c_[-np.sin(t), np.cos(t)]).max() < 1e-11 * math.exp(5.0)


def test_step_s2_stays_on_the_sphere_and_contracts_a_cap():
    rng = np.random.default_rng(6)
    x = _unit(np.array([0.0, 0.0, 1.0]) + 0.3 * rng.normal(size=(200, 3)))
    spread = np.linalg.norm(x - _unit(x.mean(axis=0)[None]), axis=1).max()
    for _ in range(50):
        x = S.step_s2(x, 2.0, 0.05)
    assert np.abs(np.linalg.norm(x, axis=1) - 1).max() < 1e-14
    assert np.linalg.norm(x - _unit(x.mean(axis=0)[None]), axis=1).max() < spread   # attraction within a cap
    with pytest.raises(ValueError, match="unit sphere"):
        S.force_s2(2 * x, 1.0)
    with pytest.raises(ValueError, match="method"):
        S.force_s2(x, 1.0, method="fft")


def test_count_clusters_s2_and_sphere_clusters():
    rng = np.random.default_rng(9)
    caps = np.repeat(_unit(rng.normal(size=(5, 3))), 30, axis=0)
    caps = _unit(caps + 0.002 * rng.normal(size=caps.shape))
    assert S.count_clusters_s2(caps) == 5
    assert S.count_clusters_s2(np.r_[caps, _unit(rng.normal(size=(1, 3)))]) == 5      # a lone token: below 1%
    from attention_fw.experiments import many_tokens as MT
    r = MT.sphere_clusters(1.0, 200, 5, 0.05, rng=0)
    assert r.force_error <= r.bound + 1e-15 and np.allclose(np.linalg.norm(r.x, axis=1), 1, atol=1e-14)
