"""One API per question: randomness is never drawn from a silent default seed, the step size has one accepted
interval, and every exit-time simulator returns the one exit-time type with the one "no exit" marker."""
import inspect

import numpy as np
import pytest

import attention_fw as afw
from attention_fw import _validate
from attention_fw.experiments import convergence as C
from attention_fw.experiments import exit_times as ET
from attention_fw.experiments import hull_counts as HC
from attention_fw.experiments import metastability as M
from attention_fw.experiments import sabeta as SB
from attention_fw.experiments import trained_heads as TH
from attention_fw.experiments import vertex_limits as VL
from attention_fw.geometry import planar
from attention_fw.geometry.polytope import regular_polygon
from attention_fw.results import ExitTimes

TRI = regular_polygon(3)
X0, SIGMA = ET.cluster_configuration(TRI, np.array([2, 2, 2]))

DRAWING = [planar.sample_vertices, C.symmetric_cloud, C.shifted_cloud, C.thm31_shifted, ET.engine_exit_times,
           ET.engine_state_at, ET.stepping_exit_times, ET.excursion_paths, ET.zoom_paths, VL.owns_cell_probability,
           M.run_phase1, afw.sap_step, afw.MarkovChain, SB.coupling_distances, HC.scaling_exponents, HC.scaling_table,
           TH.corpus_study]


@pytest.mark.parametrize("fn", DRAWING, ids=lambda f: f.__name__)
def test_rng_is_required_where_randomness_is_drawn(fn):
    p = inspect.signature(fn).parameters["rng"]
    assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty


def test_a_call_without_rng_is_refused_naming_it():
    with pytest.raises(TypeError, match="rng"):
        ET.engine_exit_times(X0, SIGMA, 0.1, 3.0, 0.05, 10)          # type: ignore[call-arg]
    with pytest.raises(TypeError, match="rng"):
        VL.ode_continuity(TRI, np.eye(2), [0.1], T=0.1, dt=0.05)     # the direction is drawn: rng needed


def test_one_gamma_interval_for_every_dynamics():
    """(0, 1] for the steps and for the exit-time simulators; the theorems' bounds, which need gamma < 1,
    say so by name."""
    assert _validate.GAMMA_INTERVAL == "(0, 1]"
    x = X0 + 0.01 * np.arange(12).reshape(6, 2)
    afw.softmax_step(x, 1.0, 1.0)
    es = ET.engine_exit_times(X0, SIGMA, 1.0, 3.0, 0.05, 200, rng=0)
    st = ET.stepping_exit_times(X0, SIGMA, 1.0, 3.0, 0.05, 200, rng=0, cap=10_000)
    # gamma = 1, single-jump regime: T2 is geometric with the closed-form rate for both simulators
    q = np.exp(-ET.frozen_escape_rate(TRI, [2, 2, 2], 3.0))
    for sample in (es, st):
        mean, se = sample.times.mean(), sample.times.std() / np.sqrt(200)
        assert abs(mean - 1 / (1 - q)) < 5 * se
    for bad in (0.0, 1.5):
        for call in (lambda g: afw.softmax_step(x, g, 1.0), lambda g: ET.engine_exit_times(X0, SIGMA, g, 3.0, 0.05, 5,
                                                                                            rng=0)):
            with pytest.raises(ValueError, match=r"gamma must lie in \(0(\.0)?, 1(\.0)?\]"):
                call(bad)
    with pytest.raises(ValueError, match="Theorems 5.2 and 5.4"):
        M.theorem54_hypotheses(TRI, 0.05, 1.0)


def test_every_exit_time_simulator_returns_the_one_type_and_marker():
    x0, sigma = ET.near_vertex_configuration(TRI, 2, 0.05, rng=7)
    samples = [ET.engine_exit_times(X0, SIGMA, 0.1, 30.0, 0.05, 4, rng=1, cap=50),
               ET.stepping_exit_times(X0, SIGMA, 0.1, 30.0, 0.05, 4, rng=1, cap=50),
               SB.sabeta_exit_times(x0, sigma, 0.1, 30.0, 0.1, cap=200),
               SB.sabeta_exit_times(x0, sigma, 0.1, [3.0, 30.0], 0.1, cap=200)]
    for s in samples:
        assert isinstance(s, ExitTimes)
        assert s.censored.dtype == bool and s.times.dtype == float
        assert np.all(s.times[s.censored] == s.cap)                   # no exit: censored at the cap, never None/-1
    assert samples[2].censored.tolist() == [True] and samples[3].censored.tolist() == [False, True]
    det = SB.sabeta_exit_times(x0, sigma, 0.1, 3.0, 0.1, cap=100, record_times=[0, 5])
    assert det.censored.tolist() == [False] and det.path_times.tolist() == [0, 5] and det.times[0] < 100
