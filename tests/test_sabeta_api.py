"""The (SA-beta) exit times of the compiled kernel (``experiments.sabeta.sabeta_exit_times``) speak the
library's one exit-time API (issue 38): the same result type and "no exit" marker as the chain's engine,
plain stepping (the chain's), the same signature shape, the one gamma interval, the
same refusal of a key-query matrix outside Theorem 5.4's setting; and its numbers are those of plain
stepping of (SA-beta) (the private numpy reference ``sabeta_kernel._stepping_exit_time``). It is the one
(SA-beta) exit-time function: ``exit_times.sabeta_exit_time`` is gone (0.3.0)."""
import inspect

import numpy as np
import pytest

from attention_fw.experiments import exit_times as ET
from attention_fw.experiments import sabeta as S
from attention_fw.experiments import sabeta_kernel as SK
from attention_fw.geometry.polytope import regular_polygon
from attention_fw.model import dynamics
from attention_fw.results import ExitTimes

TRI = regular_polygon(3)
X0, SIGMA = ET.near_vertex_configuration(TRI, 2, 0.05, rng=7)


def test_the_result_type_and_marker_are_those_of_the_other_exit_time_functions():
    """Type, dtypes and marker: ``censored`` True where no exit within the cap, the time then the cap
    (per system: two caps here), never -1 or None; ``exited`` its negation."""
    kern = S.sabeta_exit_times(X0, SIGMA, 0.1, [3.0, 30.0, 30.0], 0.1, cap=[100, 200, 300])
    engine = ET.engine_exit_times(X0, SIGMA, 0.1, 30.0, 0.1, 3, rng=1, cap=50)
    det = SK._stepping_exit_time(X0, SIGMA, 0.1, 3.0, 0.1, cap=100)
    assert type(kern) is type(engine) is type(det) is ET.ExitSample and isinstance(kern, ExitTimes)
    assert kern.censored.dtype == bool and kern.times.dtype == float
    assert kern.censored.tolist() == [False, True, True] and kern.exited.tolist() == [True, False, False]
    assert kern.times.tolist()[1:] == [200.0, 300.0] and kern.cap == 300.0
    assert np.all(kern.times[kern.censored] <= kern.cap) and not np.any(kern.times < 0)
    assert kern.n_censored == 2 and len(kern.final) == 3 and kern.path is None and kern.path_times is None


def test_the_signature_has_the_shape_of_the_other_exit_time_functions():
    """``x0, sigma, gamma, beta, eps`` positional in that order, then keyword-only ``B=None``, ``cap``
    and ``watch=None``, as in ``engine_exit_times`` and ``stepping_exit_times``; nothing is drawn, so no ``rng``
    (nor has its plain-stepping reference)."""
    want = ["x0", "sigma", "gamma", "beta", "eps"]
    for fn in (S.sabeta_exit_times, ET.engine_exit_times, ET.stepping_exit_times, SK._stepping_exit_time):
        params = inspect.signature(fn).parameters
        assert list(params)[:5] == want, fn.__name__
        assert all(params[k].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for k in want)
        assert params["cap"].kind is params["watch"].kind is inspect.Parameter.KEYWORD_ONLY
        assert params["watch"].default is None
    kern = inspect.signature(S.sabeta_exit_times).parameters
    engine = inspect.signature(ET.engine_exit_times).parameters
    single = inspect.signature(SK._stepping_exit_time).parameters
    assert kern["B"].kind is engine["B"].kind is single["B"].kind is inspect.Parameter.KEYWORD_ONLY
    assert kern["B"].default is engine["B"].default is single["B"].default is None
    assert "rng" not in kern and "rng" not in single
    assert S.sabeta_exit_times is SK.sabeta_exit_times


def test_one_public_sabeta_exit_time_function():
    """One exit-time function per dynamics: the one-run numpy function of 0.2 is gone, the kernel's is
    reachable where the chapters and the reference name it, and the chain's module does not offer a
    second one."""
    assert not hasattr(ET, "sabeta_exit_time") and "sabeta_exit_time" not in ET.__all__
    assert "sabeta_exit_times" in S.__all__ and "sabeta_exit_times" in SK.__all__
    assert "sabeta_exit_times" not in ET.__all__
    assert ET.ExitSample.__module__ == "attention_fw.experiments.exit_times"


@pytest.mark.parametrize("call, name", [
    (lambda: S.sabeta_exit_times(TRI, [0, 1, 2], 0.0, 1.0, 0.05), r"gamma must lie in \(0(\.0)?, 1(\.0)?\]"),
    (lambda: S.sabeta_exit_times(TRI, [0, 1, 2], 1.5, 1.0, 0.05), r"gamma must lie in \(0(\.0)?, 1(\.0)?\]"),
    (lambda: S.sabeta_exit_times(TRI, [0, 1, 2], [0.1, 2.0], 1.0, 0.05), r"gamma must lie in"),
    (lambda: S.sabeta_exit_times(TRI, [0, 1, 2], 0.1, -1.0, 0.05), "beta"),
    (lambda: S.sabeta_exit_times(TRI, [0, 1, 2], 0.1, 1.0, 0.0), "eps"),
    (lambda: S.sabeta_exit_times(TRI, [0, 1, 2], 0.1, 1.0, 0.05, cap=0), "cap"),
    (lambda: S.sabeta_exit_times(TRI, [0, 1], 0.1, 1.0, 0.05), "sigma"),
    (lambda: S.sabeta_exit_times(TRI, [0, 1, 2], 0.1, 1.0, 0.05, mass=[1.0, -1.0, 1.0]), "mass"),
    (lambda: S.sabeta_exit_times(TRI, [0, 1, 2], 0.1, 1.0, 0.05, record_times=[3, 1]), "record_times"),
    (lambda: S.sabeta_exit_times(np.zeros((3, 4)), [0, 1, 2], 0.1, 1.0, 0.05), "x0"),
    (lambda: S.sabeta_exit_times(TRI, [0, 1, 2], 0.1, 1.0, 0.05, B=np.eye(3)), "B must be 2 x 2"),
])
def test_bad_input_is_refused_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_gamma_one_is_accepted_as_by_every_exit_time_function():
    """The library's one interval, (0, 1]: gamma = 1 runs (the engine and plain stepping accept it too)."""
    res = S.sabeta_exit_times(TRI, [0, 1, 2], 1.0, 2.0, 0.05, cap=100)
    assert res.censored.tolist() == [False] and res.times[0] >= 1


@pytest.mark.parametrize("B, hypothesis", [
    (np.array([[1.0, 0.4], [-0.2, 0.7]]), "B must be symmetric"),            # not symmetric
    (np.array([[1.0, 0.0], [0.0, -0.5]]), "positive definite"),              # indefinite
    (np.array([[1.0, 1.0], [1.0, 1.0]]), "positive definite"),               # semi-definite, singular
])
def test_a_key_query_matrix_outside_theorem_54_is_refused_as_by_the_engine(B, hypothesis):
    """The same refusal, word for word, as ``engine_exit_times`` (one B or one per system)."""
    with pytest.raises(ValueError, match=hypothesis) as kern:
        S.sabeta_exit_times(X0, SIGMA, 0.1, 3.0, 0.1, B=B)
    with pytest.raises(ValueError) as engine:
        ET.engine_exit_times(X0, SIGMA, 0.1, 3.0, 0.1, 2, rng=0, B=B)
    assert str(kern.value) == str(engine.value)
    if hypothesis == "positive definite":
        assert "Theorem 5.4" in str(kern.value)
    with pytest.raises(ValueError, match=hypothesis):
        S.sabeta_exit_times([X0, X0], [SIGMA, SIGMA], 0.1, 3.0, 0.1, B=[np.eye(2), B])


def test_the_kernel_is_plain_stepping_and_the_other_sabeta_function():
    """The property: on one configuration (the triangle, two tokens near each vertex) and a grid of betas,
    the kernel's T2 is that of plain stepping of (SA-beta) through ``sabeta_kernel._stepping_exit_time``
    (``dynamics.simulate`` of ``softmax_step``: another implementation with other rounding), censored
    runs included, and T2 grows strictly with beta (the clusters hold longer at lower temperature)."""
    betas = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]   # T2 = 3, 6, 19, 66, 232, 836, then past the cap
    kern = S.sabeta_exit_times(X0, SIGMA, 0.1, betas, 0.1, cap=2000)
    plain = [SK._stepping_exit_time(X0, SIGMA, 0.1, b, 0.1, cap=2000) for b in betas]
    assert kern.times.tolist() == [float(p.times[0]) for p in plain]
    assert kern.censored.tolist() == [bool(p.censored[0]) for p in plain]
    assert kern.censored.any() and not kern.censored.all()           # both outcomes covered
    done = kern.times[~kern.censored]
    assert np.all(np.diff(done) > 0), done
    # with B: the same exit times as stepping softmax_step with that B
    B = np.array([[1.2, 0.3], [0.3, 0.8]])
    res = S.sabeta_exit_times(X0, SIGMA, 0.1, 4.0, 0.1, B=B, cap=2000)
    x, t = X0.copy(), 0
    while not ET.exit_mask(x, X0, SIGMA, 0.1)[0] and t < 2000:
        x, t = dynamics.softmax_step(x, 0.1, 4.0, B), t + 1
    assert res.censored.tolist() == [False] and res.times.tolist() == [float(t)]
    # and the one-run reference takes the same B, with the same exit
    one = SK._stepping_exit_time(X0, SIGMA, 0.1, 4.0, 0.1, B=B, cap=2000)
    assert one.censored.tolist() == [False] and one.times.tolist() == [float(t)]
    with pytest.raises(ValueError, match="positive definite"):
        SK._stepping_exit_time(X0, SIGMA, 0.1, 4.0, 0.1, B=-B, cap=10)


def test_records_are_the_path():
    res = S.sabeta_exit_times(X0, SIGMA, 0.1, 3.0, np.inf, cap=20, record_times=[0, 5, 20])
    assert res.censored.tolist() == [True] and res.times.tolist() == [20.0]
    assert res.path_times.tolist() == [0, 5, 20] and res.path[0].shape == (3,) + X0.shape
    np.testing.assert_array_equal(res.path[0][0], X0)
    np.testing.assert_array_equal(res.path[0][-1], res.final[0])


def test_the_first_compile_is_announced_like_the_steps(monkeypatch):
    """The kernel goes through ``announce_compile`` (one log line in a fresh numba cache, once per process)."""
    seen = []
    monkeypatch.setattr(SK, "announce_compile", lambda what, dispatchers: seen.append((what, list(dispatchers))))
    S.sabeta_exit_times(TRI, [0, 1, 2], 0.1, 2.0, 0.05, cap=10)
    assert seen and seen[0][0] == "SA-beta exit-time" and seen[0][1] == [SK._run]


def test_watch_is_that_of_the_other_exit_time_functions():
    """Only the watched tokens' exits count, as in the chain's exit-time functions: watching the vertex
    tokens alone (the near tokens leave first, drawn to their vertex's neighbours) changes T2, and the
    kernel's T2 is plain stepping's under both choices; one watch per system in a batch."""
    vertices = np.arange(len(X0)) < 3
    full = S.sabeta_exit_times(X0, SIGMA, 0.1, 3.0, 0.1, cap=2000)
    part = S.sabeta_exit_times(X0, SIGMA, 0.1, 3.0, 0.1, cap=2000, watch=vertices)
    plain = SK._stepping_exit_time(X0, SIGMA, 0.1, 3.0, 0.1, cap=2000, watch=vertices)
    assert part.times.tolist() == plain.times.tolist() and part.censored.tolist() == plain.censored.tolist()
    assert part.times[0] != full.times[0]
    both = S.sabeta_exit_times([X0, X0], [SIGMA, SIGMA], 0.1, 3.0, 0.1, cap=2000, watch=[vertices, ~vertices])
    other = SK._stepping_exit_time(X0, SIGMA, 0.1, 3.0, 0.1, cap=2000, watch=~vertices)
    assert both.times.tolist() == [part.times[0], other.times[0]]
    with pytest.raises(ValueError, match="watch"):
        S.sabeta_exit_times(X0, SIGMA, 0.1, 3.0, 0.1, watch=np.zeros(len(X0), bool))
