"""Step-size schedules: closed-form products (Theorem 4.2's factor) and the time origin."""
import numpy as np
import pytest

from attention_fw.model import schedules as S

ALL = [S.Constant(0.3), S.FrankWolfe(), S.Harmonic(), S.Halving(), S.ToOne(0.7), S.FromValue(0.5)]


@pytest.mark.parametrize("s", ALL, ids=repr)
def test_values_in_unit_interval_and_product_matches_cumulative(s):
    t = np.arange(60)
    g = s(t)
    assert np.all((g > 0) & (g <= 1))
    direct = np.concatenate([[1.0], np.cumprod(1 - g)])
    # 1 - g loses relative accuracy when g is close to 1; compare while the product is not tiny
    keep = direct > 1e-8
    np.testing.assert_allclose(s.product(np.arange(61))[keep], direct[keep], rtol=1e-12)
    assert np.all(np.diff(s.product(np.arange(61))) <= 0)


def test_time_origin_of_the_frank_wolfe_rule():
    """gamma^0 = 2/(0+2) = 1 (E3: the paper's 2/(t+1) would give gamma^0 = 2, outside (0,1])."""
    assert S.FrankWolfe()(0) == 1.0 and S.FrankWolfe()(1) == pytest.approx(2 / 3)


def test_closed_forms_of_the_products():
    t = np.arange(1, 50)
    np.testing.assert_allclose(S.Harmonic().product(t), 1 / (t + 1), rtol=1e-13)
    np.testing.assert_allclose(S.ToOne(0.3).product(t), np.exp(-0.3 * t * (t + 1) / 2), rtol=1e-12)
    np.testing.assert_allclose(S.Constant(0.2).product(t), 0.8 ** t, rtol=1e-13)
    # prod_{k>=1} (1 - 2^-k) = 0.2887880950866024... (E4: no convergence)
    assert S.Halving().product(200) == pytest.approx(0.2887880950866024, rel=1e-13)


@pytest.mark.parametrize("spec,kw,err", [("nope", {}, ValueError), (1.5, {}, ValueError), (0.0, {}, ValueError),
                                         ("constant", {}, ValueError), (None, {}, TypeError), (True, {}, TypeError)])
def test_bad_schedules(spec, kw, err):
    with pytest.raises(err, match="schedule|gamma"):
        S.get_schedule(spec, **kw)


def test_get_schedule_by_name():
    assert S.get_schedule("constant", gamma=0.25)(7) == 0.25
    assert S.get_schedule("to-one", a=1.0)(0) == pytest.approx(1 - np.exp(-1))
    assert isinstance(S.get_schedule(0.5), S.Constant)
