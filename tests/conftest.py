"""Fixtures shared by the test files (regular polygons come from attention_fw.geometry.polytope.regular_polygon)."""
import os

import numpy as np
import pytest

from attention_fw.model import _sampling
from attention_fw.model import dynamics as D
from cdp import INSTALL_HINT, Browser, chromium_executable

# The library leaves matplotlib's backend alone; the tests (and the processes they start) never open a window.
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def check_coincident_pick():
    """Check the law of one (SAP) step with two coincident tokens, as a function of (beta, N).

    Tokens ``[a, a, b]``: token 2 picks one of the two copies of ``a`` with probability
    ``2 e^{beta <b, a>} / (2 e^{beta <b, a>} + e^{beta <b, b>})`` (coincident indices add their
    weights); the frequency over ``N`` independent chains must lie within 5 binomial standard errors.
    """
    def check(beta: float, N: int, seed: int = 2):
        a, b = np.array([1.0, 0.0]), np.array([0.2, 0.9])
        x = np.array([a, a, b])
        _, J = D.sap_step(np.broadcast_to(x, (N, 3, 2)), 0.5, beta, rng=seed, return_choice=True)
        p_exact = 2 * np.exp(beta * b @ a) / (2 * np.exp(beta * b @ a) + np.exp(beta * b @ b))
        p_hat = np.isin(J[:, 2], [0, 1]).mean()
        assert abs(p_hat - p_exact) <= 5 * np.sqrt(p_exact * (1 - p_exact) / N)
    return check


@pytest.fixture
def neg_logs(monkeypatch):
    """The arguments of every ``bernoulli_from_neg_log`` call of the dense and the tiled samplers
    during the test (copies, in call order): the exact -log-probabilities with which they draw
    their Bernoulli events. The draws themselves are unchanged."""
    seen = []
    real = _sampling._bernoulli

    def spy(t, rng):
        seen.append(np.array(t, copy=True))
        return real(t, rng)

    # every draw goes through this one function: the dense steps' bernoulli_from_neg_log after its
    # checks, the tiled steps directly (their arguments are made by the library, once per tile)
    monkeypatch.setattr(_sampling, "_bernoulli", spy)
    return seen


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium per test module (the DevTools client of ``cdp.py``); fails, saying
    how to install it, when there is none."""
    exe = chromium_executable()
    if exe is None:
        pytest.fail(INSTALL_HINT)
    b = Browser(exe, tmp_path_factory.mktemp("chromium-profile"))
    try:
        b.send("Browser.getVersion", timeout=60)
        yield b
    finally:
        b.close()
