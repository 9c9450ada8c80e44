"""Malformed input to the public functions: a ValueError or TypeError that names the argument.

One table, one test. Each row is ``(id, call, exception type(s), argument name)``: the call
must raise one of the exception types, and the message must contain the argument's name as
a word (so a user reading the message knows which argument to fix). A NaN result, another
exception type (IndexError, AttributeError, LinAlgError, ...) or a message that does not
name the argument fails the row.
"""
from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attention_fw.model import dynamics as D  # noqa: E402
from attention_fw.model import frank_wolfe as FW  # noqa: E402
from attention_fw.plot import animate as AN  # noqa: E402
from attention_fw.experiments import convergence as C  # noqa: E402
from attention_fw.geometry import planar as G  # noqa: E402
from afw_book import paper_figures as PF  # noqa: E402
from afw_book import sweeps as SW  # noqa: E402
from attention_fw.experiments import metastability as M  # noqa: E402
from attention_fw.experiments import exit_times as ET  # noqa: E402
from attention_fw.geometry import polytope as P  # noqa: E402
from attention_fw.experiments import survival as SV  # noqa: E402
from attention_fw.experiments import vertex_limits as VL  # noqa: E402
from afw_book import figures as plotting, presets  # noqa: E402
from attention_fw.model import schedules as S  # noqa: E402

X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])          # n = 3 tokens in R^2
XN = X.copy(); XN[1, 0] = np.nan                              # noqa: E702
XI = X.copy(); XI[2, 1] = np.inf                              # noqa: E702
B_NONSYM = np.array([[1.0, 2.0], [0.0, 1.0]])
SQUARE = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])   # a convex polygon, CCW
COLLINEAR = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
DUPLICATE = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, 1.0]])
TRI = np.array([[0.0, 1.0], [-0.8660254037844386, -0.5], [0.8660254037844386, -0.5]])
SLIVER = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, 1e-13]])  # area 5e-14 < 1e-12 diameter^2
X0 = np.repeat(TRI, 2, axis=0)           # two coincident tokens per vertex of the triangle
SIGMA = np.repeat(np.arange(3), 2)
RNG = np.random.default_rng(0)
PRESETS = {"paper": {"beta": 10.0, "n": 32}, "quick": {"beta": 4.0, "n": 8}}


def _fig():
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    return fig


def _save(tmp_path_factory=None, **kw):
    import tempfile

    args = dict(fig=_fig(), name="bad-input", data=None, outdir=tempfile.mkdtemp())
    args.update(kw)
    try:
        return plotting.save(args.pop("fig"), args.pop("name"), args.pop("data"), **args)
    finally:
        plt.close("all")


E = (ValueError,)
T = (TypeError,)
VT = (ValueError, TypeError)

CASES = [
    # ------------------------------------------------------------------ dynamics: tokens
    ("scores-x-1d", lambda: D.scores(np.ones(3)), E, "x"),
    ("scores-x-4d", lambda: D.scores(np.ones((2, 2, 3, 2))), E, "x"),
    ("scores-x-nan", lambda: D.scores(XN), E, "x"),
    ("scores-x-inf", lambda: D.scores(XI), E, "x"),
    ("scores-x-strings", lambda: D.scores(np.array([["a", "b"], ["c", "d"]])), T, "x"),
    ("scores-x-complex", lambda: D.scores(X + 1j), T, "x"),
    ("scores-x-object", lambda: D.scores(np.array([[1.0, None]], dtype=object)), T, "x"),
    ("scores-x-none", lambda: D.scores(None), T, "x"),
    ("scores-x-ragged", lambda: D.scores([[1.0, 2.0], [3.0]]), VT, "x"),
    ("scores-x-empty", lambda: D.scores(np.empty((0, 2))), E, "x"),
    ("scores-x-no-dims", lambda: D.scores(np.empty((3, 0))), E, "x"),
    ("attention-x-empty-batch", lambda: D.attention(np.empty((0, 3, 2)), beta=1.0), E, "x"),
    # ------------------------------------------------------------------ dynamics: B, beta, gamma
    ("scores-B-wrong-size", lambda: D.scores(X, np.eye(3)), E, "B"),
    ("scores-B-not-square", lambda: D.scores(X, np.ones((2, 3))), E, "B"),
    ("scores-B-nan", lambda: D.scores(X, np.array([[1.0, np.nan], [0.0, 1.0]])), E, "B"),
    ("attention-beta-negative", lambda: D.attention(X, beta=-1.0), E, "beta"),
    ("attention-beta-nan", lambda: D.attention(X, beta=float("nan")), E, "beta"),
    ("attention-beta-string", lambda: D.attention(X, beta="5"), T, "beta"),
    ("attention-beta-array", lambda: D.attention(X, beta=np.array([1.0, 2.0])), T, "beta"),
    ("softmax-beta-inf", lambda: D.softmax_step(X, 0.5, np.inf), E, "beta"),
    ("softmax-beta-negative", lambda: D.softmax_step(X, 0.5, -0.1), E, "beta"),
    ("softmax-gamma-nan", lambda: D.softmax_step(X, float("nan"), 1.0), E, "gamma"),
    ("hardmax-gamma-zero", lambda: D.hardmax_step(X, 0.0), E, "gamma"),
    ("hardmax-gamma-above-one", lambda: D.hardmax_step(X, 1.5), E, "gamma"),
    ("hardmax-gamma-negative", lambda: D.hardmax_step(X, -0.2), E, "gamma"),
    ("hardmax-gamma-bool", lambda: D.hardmax_step(X, True), T, "gamma"),
    ("hardmax-gamma-string", lambda: D.hardmax_step(X, "0.5"), T, "gamma"),
    ("sap-rng-string", lambda: D.sap_step(X, 0.5, 1.0, rng="seed"), T, "rng"),
    ("sap-gamma-inf", lambda: D.sap_step(X, np.inf, 1.0, rng=RNG), E, "gamma"),
    ("bernoulli-negative-t", lambda: D.bernoulli_from_neg_log(np.array([1.0, -0.5]), rng=RNG), E, "t must"),
    ("bernoulli-nan-t", lambda: D.bernoulli_from_neg_log(np.array([np.nan]), rng=RNG), E, "t must"),
    ("bernoulli-string-t", lambda: D.bernoulli_from_neg_log("1.0", rng=RNG), T, "t must"),
    ("layer-V-singular", lambda: D.layer_step(X, 1.0, np.eye(2), -np.eye(2)), E, "V"),
    ("layer-V-wrong-size", lambda: D.layer_step(X, 1.0, np.eye(2), np.eye(3)), E, "V"),
    ("layer-V-nan", lambda: D.layer_step(X, 1.0, np.eye(2), np.full((2, 2), np.nan)), E, "V"),
    ("Layer-V-shape-vs-B", lambda: D.Layer(1.0, np.eye(2), np.eye(3)), E, "V"),
    ("simulate-steps-negative", lambda: D.simulate(X, D.Hardmax(), -1), E, "steps"),
    ("simulate-steps-float", lambda: D.simulate(X, D.Hardmax(), 2.5), T, "steps"),
    ("simulate-every-zero", lambda: D.simulate(X, D.Hardmax(), 3, every=0), E, "every"),
    ("simulate-rule-not-rule", lambda: D.simulate(X, object(), 3), T, "rule"),
    ("simulate-recorders-wrong", lambda: D.simulate(X, D.Hardmax(), 3, recorders=[len]), T, "recorders"),
    ("simulate-x0-nan", lambda: D.simulate(XN, D.Hardmax(), 3), E, "x"),
    ("FunctionRecorder-fn", lambda: D.FunctionRecorder("r", 3), T, "fn"),
    ("Hardmax-schedule-unknown", lambda: D.Hardmax(schedule="cosine"), E, "schedule"),
    ("Hardmax-B-not-square", lambda: D.Hardmax(B=np.ones((2, 3))), E, "B"),
    ("Softmax-beta-negative", lambda: D.Softmax(0.5, -1.0), E, "beta"),
    ("MarkovChain-rng-float", lambda: D.MarkovChain(0.5, 1.0, rng=1.5), T, "rng"),
    # ------------------------------------------------------------------ schedules
    ("schedule-unknown-name", lambda: S.get_schedule("cosine"), E, "schedule"),
    ("schedule-none", lambda: S.get_schedule(None), T, "schedule"),
    ("schedule-constant-missing-gamma", lambda: S.get_schedule("constant"), E, "gamma"),
    ("schedule-number-zero", lambda: S.get_schedule(0.0), E, "gamma"),
    ("Constant-above-one", lambda: S.Constant(1.01), E, "gamma"),
    ("Constant-nan", lambda: S.Constant(float("nan")), E, "gamma"),
    ("Constant-inf", lambda: S.Constant(float("inf")), E, "gamma"),
    ("schedule-t-negative", lambda: S.FrankWolfe()(-1), E, "t"),
    ("schedule-t-fractional", lambda: S.Harmonic()(1.5), T, "t"),
    ("schedule-product-t-negative", lambda: S.Halving().product(-3), E, "t"),
    ("ToOne-a-negative", lambda: S.ToOne(a=-1.0), E, "a"),
    ("FromValue-h-zero", lambda: S.FromValue(0.0), E, "h"),
    ("FromValue-h-callable-negative", lambda: S.FromValue(lambda t: -1.0)(0), E, "h"),
    # ------------------------------------------------------------------ frank_wolfe
    ("energy-B-nonsymmetric", lambda: FW.energy(X, B_NONSYM), E, "B"),
    ("energy-B-wrong-size", lambda: FW.energy(X, np.eye(3)), E, "B"),
    ("energy-x-nan", lambda: FW.energy(XN, np.eye(2)), E, "x"),
    ("lmo-direction-wrong-dim", lambda: FW.lmo(X, np.ones((1, 3))), E, "direction"),
    ("lmo-points-empty", lambda: FW.lmo(np.empty((0, 2)), np.ones((1, 2))), E, "points"),
    ("lmo-points-inf", lambda: FW.lmo(XI, np.ones((1, 2))), E, "points"),
    ("lmo_linprog-points-batched", lambda: FW.lmo_linprog(np.ones((2, 3, 2)), np.ones((1, 2))), E, "points"),
    ("fw_gap-grad-shape", lambda: FW.fw_gap(X, np.ones((2, 2)), X), E, "grad"),
    ("min_energy-B-indefinite", lambda: FW.min_energy_over_hull(X, np.diag([1.0, -1.0])), E, "B"),
    ("min_energy-B-nonsymmetric", lambda: FW.min_energy_over_hull(X, B_NONSYM), E, "B"),
    ("hull_area-points-3d", lambda: P.hull_area(np.ones((4, 3))), E, "points"),
    ("hull_diameter-points-1d", lambda: P.diameter(np.ones(4)), E, "points"),
    # ------------------------------------------------------------------ geometry
    ("cells-two-vertices", lambda: G.cells(SQUARE[:2]), E, "vertices"),
    ("cells-collinear", lambda: G.cells(COLLINEAR), E, "vertices"),
    ("cells-duplicate", lambda: G.cells(DUPLICATE), E, "vertices"),
    ("cells-nearly-collinear", lambda: G.cells(SLIVER), E, "vertices"),
    ("unit-cells-nearly-collinear", lambda: G.unit_direction_cells(SLIVER + 1.0), E, "vertices"),
    ("voronoi-nearly-collinear", lambda: G.voronoi_cells(SLIVER), E, "vertices"),
    ("cells-nan", lambda: G.cells(np.where(SQUARE == 1.0, np.nan, SQUARE)), E, "vertices"),
    ("cells-3d", lambda: G.cells(np.ones((4, 3))), E, "vertices"),
    ("cells-B-wrong-size", lambda: G.cells(SQUARE, np.eye(3)), E, "B"),
    ("voronoi-B-nonsymmetric", lambda: G.voronoi_cells(SQUARE, B_NONSYM), E, "B"),
    ("voronoi-B-indefinite", lambda: G.voronoi_cells(SQUARE, np.diag([1.0, -1.0])), E, "B"),
    ("voronoi-duplicate", lambda: G.voronoi_cells(DUPLICATE), E, "vertices"),
    ("unit-cells-zero-vertex", lambda: G.unit_direction_cells(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])), E, "vertices"),
    ("cone-eta-negative", lambda: G.cone(SQUARE, 0, -0.1), E, "eta"),
    ("cone-i-out-of-range", lambda: G.cone(SQUARE, 4, 0.1), E, "i"),
    ("cone-collinear", lambda: G.cone(COLLINEAR, 0, 0.1), E, "vertices"),
    ("erode-delta-negative", lambda: G.erode(SQUARE, -0.1), E, "delta"),
    ("erode-clockwise", lambda: G.erode(SQUARE[::-1], 0.1), E, "polygon"),
    ("hull-distance-dimension", lambda: P.HullDistance(TRI)(np.zeros((4, 3))), E, "x"),
    ("beta-min-lonely-vertex", lambda: M.configuration_beta_min(np.vstack([TRI, 0.5 * TRI[:2]]), TRI,
                                                                np.array([0, 1, 2, 0, 1])), E, "sigma"),
    ("point-in-polygon-clockwise", lambda: G.point_in_polygon([[0.5, 0.5]], SQUARE[::-1]), E, "polygon"),
    ("clip-clockwise", lambda: G.clip_halfplanes(SQUARE[::-1], [[1.0, 0.0]]), E, "polygon"),
    ("intersection-clockwise-Q", lambda: G.polygon_intersection(SQUARE, SQUARE[::-1]), E, "Q"),
    ("distance-clockwise", lambda: G.distance_to_complement([[0.5, 0.5]], SQUARE[::-1]), E, "polygon"),
    ("sample-k-two", lambda: G.sample_vertices(2, rng=0), E, "k"),
    ("sample-k-float", lambda: G.sample_vertices(4.5, rng=0), T, "k"),
    ("sample-rng-string", lambda: G.sample_vertices(5, rng="42"), T, "rng"),
    ("raster-n-one", lambda: G.raster_cells(SQUARE, n=1), E, "n"),
    ("raster-duplicate", lambda: G.raster_cells(DUPLICATE, n=10), E, "vertices"),
    ("cell_labels-x-dim", lambda: G.cell_labels(np.ones((3, 3)), SQUARE), E, "x"),
    ("owns_cell-inf", lambda: G.owns_cell(np.where(SQUARE == 1.0, np.inf, SQUARE)), E, "vertices"),
    ("convex_hull-coincident", lambda: G.convex_hull(np.ones((4, 2))), E, "points"),
    ("level_set-B-nonsymmetric", lambda: G.level_set_vertices(SQUARE, B_NONSYM), E, "B"),
    # ------------------------------------------------------------------ metastability
    ("c0-duplicate", lambda: P.c0(np.array([TRI[0], TRI[0], TRI[1]])), E, "vertices"),
    ("c0-nan", lambda: P.c0(np.where(TRI > 0.5, np.nan, TRI)), E, "vertices"),
    ("satisfies_51-collinear", lambda: P.satisfies_51(COLLINEAR[:3]), E, "vertices"),
    ("engine-gamma-zero", lambda: ET.engine_exit_times(X0, SIGMA, 0.0, 5.0, 0.05, 10, rng=0), E, "gamma"),
    ("engine-gamma-above-one", lambda: ET.engine_exit_times(X0, SIGMA, 1.5, 5.0, 0.05, 10, rng=0), E, "gamma"),
    ("engine-beta-negative", lambda: ET.engine_exit_times(X0, SIGMA, 0.1, -5.0, 0.05, 10, rng=0), E, "beta"),
    ("engine-beta-inf", lambda: ET.engine_exit_times(X0, SIGMA, 0.1, np.inf, 0.05, 10, rng=0), E, "beta"),
    ("engine-eps-zero", lambda: ET.engine_exit_times(X0, SIGMA, 0.1, 5.0, 0.0, 10, rng=0), E, "eps"),
    ("engine-sigma-length", lambda: ET.engine_exit_times(X0, SIGMA[:3], 0.1, 5.0, 0.05, 10, rng=0), E, "sigma"),
    ("engine-sigma-float", lambda: ET.engine_exit_times(X0, SIGMA + 0.5, 0.1, 5.0, 0.05, 10, rng=0), E, "sigma"),
    ("engine-runs-zero", lambda: ET.engine_exit_times(X0, SIGMA, 0.1, 5.0, 0.05, 0, rng=0), E, "runs"),
    ("engine-x0-nan", lambda: ET.engine_exit_times(np.full((6, 2), np.nan), SIGMA, 0.1, 5.0, 0.05, 10, rng=0), E, "x0"),
    ("stepping-cap-zero", lambda: ET.stepping_exit_times(X0, SIGMA, 0.1, 5.0, 0.05, 10, cap=0, rng=0), E, "cap"),
    ("frozen-counts-zero", lambda: ET.frozen_escape_rate(TRI, np.array([0, 1, 1]), 5.0), E, "counts"),
    ("frozen-beta-nan", lambda: ET.frozen_escape_rate(TRI, np.array([1, 1, 1]), float("nan")), E, "beta"),
    ("fit-censored-shape", lambda: SV.fit_geometric_censored(np.ones(3), np.zeros(2, bool)), E, "censored"),
    ("fit-level", lambda: SV.fit_geometric_censored(np.ones(3), np.zeros(3, bool), level=1.5), E, "level"),
    ("bound-gamma-zero", lambda: M.metastability_bound(10, 5.0, 6, 0.0, 0.1, 1.5), E, "gamma"),
    ("collapse-beta-negative", lambda: M.collapse_sabeta(X0, 0.1, -1.0), E, "beta"),
    ("cluster-counts-length", lambda: ET.cluster_configuration(TRI, np.array([1, 1])), E, "counts"),
    ("simplex-d-zero", lambda: P.regular_simplex(0), E, "d"),
    # ------------------------------------------------------------------ convergence, sweeps
    ("log_times-steps-zero", lambda: C.log_times(0), E, "steps"),
    ("symmetric_cloud-R-zero", lambda: C.symmetric_cloud(0, 3, rng=0), E, "R"),
    ("shifted_cloud-concentration", lambda: C.shifted_cloud(2, 3, concentration=-1.0, rng=0), E, "concentration"),
    ("origin_in_hull-3d", lambda: P.origin_in_hull_2d(np.ones((2, 3, 3))), E, "x"),
    ("thm31_ratio-Bstar-negative", lambda: C.thm31_ratio(X[None], -np.eye(2), 5), E, "Bstar"),
    ("section3-schedule-unknown", lambda: C.section3_rates(X[None], np.eye(2), 5, schedule="nope"), E, "schedule"),
    ("vertex_convergence-B-size", lambda: VL.vertex_convergence(X, 0.5 * X, 0.5, np.eye(3), 5), E, "B"),
    ("wilson-trials-zero", lambda: VL.wilson_interval(1, 0), E, "trials"),
    ("owns_cell_probability-kappa", lambda: VL.owns_cell_probability([2], 1, 10, rng=0), E, "kappa"),
    ("ode_solution-t-negative", lambda: VL.ode_solution(X, np.eye(2), -1.0), E, "t"),
    ("euler_error-dts-zero", lambda: VL.euler_error(X, np.eye(2), [0.0]), E, "dts"),
    ("sweeps-run-fn", lambda: SW.run(3, [{}]), T, "fn"),
    ("sweeps-regular_polygon-kappa", lambda: P.regular_polygon(2), E, "kappa"),
    ("sweeps-tokens_per_vertex-n", lambda: ET.tokens_per_vertex(2, 3), E, "n"),
    # ------------------------------------------------------------------ paper figures, animations
    ("paper_figures-name", lambda: PF.make("figure9"), E, "name"),
    ("paper_figures-parameter", lambda: PF.make("figure2", zeta=3), E, "zeta"),
    ("paper_figures-kappas", lambda: PF.figure1(kappas=(2,)), E, "kappas"),
    ("paper_figures-delta", lambda: PF.figure4(delta=-0.1), E, "delta"),
    ("paper_figures-B-nonsymmetric", lambda: PF.figure3(B=((1.0, 2.0), (0.0, 1.0))), E, "B"),
    ("animate-empty", lambda: AN.trajectory_animation(np.zeros((0, 3, 2))), E, "trajectory"),
    ("animate-nan", lambda: AN.trajectory_animation(np.full((3, 3, 2), np.nan)), E, "trajectory"),
    # ------------------------------------------------------------------ presets
    ("resolve-preset-unknown", lambda: presets.resolve(PRESETS, "fast"), E, "preset"),
    ("resolve-preset-not-string", lambda: presets.resolve(PRESETS, 1), E, "preset"),
    ("resolve-parameter-unknown", lambda: presets.resolve(PRESETS, "quick", gamma=0.1), E, "gamma"),
    ("resolve-parameter-wrong-type", lambda: presets.resolve(PRESETS, "quick", n="8"), T, "n"),
    ("resolve-parameter-float-for-int", lambda: presets.resolve(PRESETS, "quick", n=8.5), T, "n"),
    # ------------------------------------------------------------------ plotting.save
    ("save-name-path", lambda: _save(name="../escape"), E, "name"),
    ("save-name-empty", lambda: _save(name=""), E, "name"),
    ("save-format-unknown", lambda: _save(formats=("jpg",)), E, "formats"),
    ("save-data-nan", lambda: _save(data={"v": [1.0, float("nan")]}), E, "data"),
    ("save-fig-not-figure", lambda: _save(fig="figure"), T, "fig"),
]


def _check(call, exc, name):
    with pytest.raises(exc) as info:
        out = call()
        # Reached only when nothing was raised: say what came back instead.
        pytest.fail(f"no exception; returned {type(out).__name__}"
                    + (" with NaN" if isinstance(out, np.ndarray) and np.isnan(out).any() else ""))
    msg = str(info.value)
    assert re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", msg), (
        f"message does not name the argument {name!r}: {msg!r}")


@pytest.mark.parametrize("case_id, call, exc, name", CASES, ids=[c[0] for c in CASES])
def test_malformed_input_is_rejected_naming_the_argument(case_id, call, exc, name):
    _check(call, exc, name)


def test_the_table_is_large_and_covers_every_module():
    assert len(CASES) >= 30
    prefixes = {c[0].split("-")[0] for c in CASES}
    for needed in ("scores", "softmax", "hardmax", "schedule", "energy", "cells", "engine",
                   "resolve", "save"):
        assert needed in prefixes
