import pytest

from afw_book.presets import resolve

P = {"paper": dict(beta=10.0, steps=100, kappas=[5, 7]), "quick": dict(beta=4.0, steps=10, kappas=[5])}


def test_preset_values_and_overrides():
    p = resolve(P, "quick", beta=None, steps=3)
    assert (p.beta, p.steps, p.kappas, p.preset) == (4.0, 3, [5], "quick")
    assert resolve(P, "paper", beta=12).beta == 12.0  # an int is a valid float


def test_unknown_preset_lists_accepted_values():
    with pytest.raises(ValueError, match=r"preset must be one of \['paper', 'quick'\]"):
        resolve(P, "fast")


@pytest.mark.parametrize("key,value", [("beta", "12"), ("steps", 2.5), ("kappas", [5.5]), ("steps", True)])
def test_wrong_type_names_parameter(key, value):
    with pytest.raises(TypeError, match=key):
        resolve(P, "paper", **{key: value})


def test_unknown_parameter():
    with pytest.raises(ValueError, match="gamma"):
        resolve(P, "paper", gamma=0.1)
