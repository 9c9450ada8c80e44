"""The vocabulary of attention_fw.model.dynamics, checked over every public function: one seed, one result
(identical output for the same seed passed as an int, a SeedSequence or a Generator), randomness
only through ``rng``, and one argument order."""
import dataclasses
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pytest
from scipy import stats

import afw_book
import attention_fw
from attention_fw.experiments import context_length as CTX
from attention_fw.experiments import convergence as C
from attention_fw.model import dynamics as D
from attention_fw.model import fast as FAST
from attention_fw.model import tiled as T
from attention_fw.experiments import exit_times as ET
from attention_fw.geometry import planar as G
from attention_fw.experiments import metastability as M
from attention_fw.experiments import model_checks as MC
from attention_fw.experiments import sabeta as SB
from attention_fw.experiments import sabeta_family as SBF
from afw_book import paper_figures as PF
from attention_fw.experiments import vertex_limits as VL
from attention_fw.experiments import trained_heads as TH
from attention_fw.experiments import hull_counts as HCN
from attention_fw.experiments import many_tokens as MTK
from attention_fw.geometry.polytope import points_on_circle, regular_polygon

TRI = points_on_circle()
NS = np.array([8.0, 11, 16, 23, 32, 45, 64, 90, 128])      # lengths for the exponents' bootstrap
X2 = np.array([[0.0, 0.0], [1.0, 0.0], [0.3, 0.8]])
CL, SIG = ET.cluster_configuration(TRI, np.array([1, 1, 1]))
P1, P1SIG = M.phase1_configuration(TRI, 1, 1e4, rng=0, min_dist=0.55)


def _drawn(figure, **params):
    """The data of a paper figure (the figure itself is closed)."""
    fig, data = figure(**params)
    plt.close(fig)
    return data


# every public function (or class) of the library with an ``rng`` parameter, called with small inputs
CALLS = {
    "experiments.sabeta.coupling_distances": lambda rng: SB.coupling_distances(X2, 0.3, 2.0, [0, 3], 5, rng=rng),
    "experiments.sabeta.family_task": lambda rng: SB.family_task(name="triangle, 1 per vertex", t_lo=10, t_hi=100,
                                                                 num=2, cap=10**4, chain_runs=5, chain_budget=100,
                                                                 rng=rng),
    "experiments.sabeta_family.family_task": lambda rng: SBF.family_task(
        name="triangle, 1 per vertex", t_lo=10, t_hi=100, num=2, cap=10**4, chain_runs=5, chain_budget=100, rng=rng),
    "experiments.trained_heads.corpus_study": lambda rng: TH.corpus_study(
        _minilm(), ["And God saw the light.", "And the evening and the morning were the first day."],
        shares=(0.9,), token_sample=5, rng=rng)["states"],
    "experiments.hull_counts.scaling_exponents": lambda rng: HCN.scaling_exponents(
        NS, np.c_[NS ** 0.5 * (1 + 0.1 * np.sin(NS))], boot=30, rng=rng),
    "experiments.hull_counts.scaling_table": lambda rng: HCN.scaling_table(
        NS, {"support": (NS ** 0.5 * (1 + 0.1 * np.sin(NS)))[:, None, None]}, statistics=["support"], boot=30,
        rng=rng)["samples"]["all"],
    "experiments.convergence.symmetric_cloud": lambda rng: C.symmetric_cloud(3, 2, rng=rng),
    "experiments.convergence.shifted_cloud": lambda rng: C.shifted_cloud(3, 4, rng=rng),
    "experiments.convergence.thm31_shifted": lambda rng: C.thm31_shifted([3, 4], 2, 10, rng=rng),
    "experiments.context_length.tiled_check": lambda rng: CTX.tiled_check(50, 4, key_tile=16, rng=rng),
    "experiments.context_length.ownership_task": lambda rng: CTX.ownership_task(n=40, d=3, systems=2, rng=rng),
    "experiments.context_length.hardmax_run_task": lambda rng: CTX.hardmax_run_task(n=40, d=3, gamma=0.5, steps=2, rng=rng),
    "model.dynamics.sap_step": lambda rng: D.sap_step(np.stack([X2] * 5), 0.5, 2.0, rng=rng, return_choice=True),
    "model.fast.sap_step": lambda rng: FAST.sap_step(np.stack([X2] * 5), 0.5, 2.0, rng=rng, return_choice=True),
    "model.tiled.sap_step": lambda rng: T.sap_step(np.stack([X2] * 5), 0.5, 2.0, rng=rng, key_tile=2, return_choice=True),
    "model.dynamics.bernoulli_from_neg_log": lambda rng: D.bernoulli_from_neg_log(np.linspace(0, 3, 50), rng=rng),
    "model.dynamics.MarkovChain": lambda rng: D.simulate(np.stack([X2] * 4), D.MarkovChain(0.5, 2.0, rng=rng), 5).x,
    "experiments.exit_times.near_vertex_configuration": lambda rng: ET.near_vertex_configuration(TRI, 2, 0.05, rng=rng),
    "experiments.exit_times.engine_exit_times": lambda rng: ET.engine_exit_times(CL, SIG, 0.1, 2.0, 0.05, 50, rng=rng),
    "experiments.exit_times.engine_state_at": lambda rng: ET.engine_state_at(CL, 0.2, 1.0, 5, 20, rng=rng),
    "experiments.exit_times.stepping_exit_times": lambda rng: ET.stepping_exit_times(CL, SIG, 0.1, 1.0, 0.05, 20, rng=rng,
                                                                         cap=200),
    "experiments.exit_times.excursion_paths": lambda rng: ET.excursion_paths(CL, SIG, 0.1, 2.0, 10, runs=3, rng=rng),
    "experiments.exit_times.exit_time_task": lambda rng: ET.exit_time_task(beta=2.0, rng=rng, runs=30),
    "experiments.exit_times.e6_task": lambda rng: ET.e6_task(beta=2.0, rng=rng, runs=5, cap=50, sabeta_cap=50),
    "geometry.planar.sample_vertices": lambda rng: G.sample_vertices(6, rng=rng),
    "experiments.metastability.sample_eroded_cone": lambda rng: M.sample_eroded_cone(TRI, 0, 0.05, 0.03, 5, rng=rng),
    "experiments.metastability.phase1_configuration": lambda rng: M.phase1_configuration(TRI, 2, 1e4, rng=rng),
    "experiments.metastability.run_phase1": lambda rng: M.run_phase1(P1, TRI, P1SIG, 0.5, 3.0, 20, rng=rng, horizon=4),
    "experiments.metastability.phase1_task": lambda rng: M.phase1_task(beta=3.0, rng=rng, gamma=0.5, runs=10, config_beta=1e4,
                                                           per_vertex=1, min_dist=0.5, config_rng=1, horizon=3),
    "experiments.exit_times.zoom_paths": lambda rng: ET.zoom_paths(CL, SIG, 0.1, 2.0, 5, rng=rng),
    "experiments.many_tokens.sample_polygon": lambda rng: MTK.sample_polygon(TRI, 50, rng=rng),
    "experiments.many_tokens.sample_disk": lambda rng: MTK.sample_disk(50, rng=rng),
    "experiments.many_tokens.sample_sphere": lambda rng: MTK.sample_sphere(50, rng=rng),
    "experiments.many_tokens.sphere_clusters": lambda rng: MTK.sphere_clusters(2.0, 60, 3, 0.05, rng=rng).x,
    "experiments.many_tokens.sector_configuration": lambda rng: MTK.sector_configuration(TRI, 5, 0.05, rng=rng)[0],
    "experiments.many_tokens.exit_at_scale_task": lambda rng: MTK.exit_at_scale_task(per_vertex=3, rep=0, rng=rng, cap=2000,
                                                                                      beta=5.0),
    "experiments.many_tokens.sample_gaussian_polygon": lambda rng: MTK.sample_gaussian_polygon(
        TRI, 50, TRI.mean(axis=0), 0.1 * np.eye(2), rng=rng),
    "experiments.many_tokens.hardmax_limit": lambda rng: MTK.hardmax_limit(TRI, 200, 30, rng=rng),
    "experiments.many_tokens.circle_clusters": lambda rng: MTK.circle_clusters(3.0, 200, 50, rng=rng),
    "experiments.many_tokens.sabeta_measure": lambda rng: MTK.sabeta_measure(100, 0.5, 5.0, 3, rng=rng),
    "experiments.many_tokens.low_temperature": lambda rng: MTK.low_temperature(60, [5.0, 20.0], [0, 2], 0.5, rng=rng),
    "experiments.many_tokens.chaos": lambda rng: MTK.chaos([20, 40], 80, 0.5, 5.0, 2, 2, rng=rng, directions=8),
    "experiments.model_checks.sap_mean": lambda rng: MC.sap_mean(X2, 0.5, 2.0, 3000, rng=rng),
    "afw_book.paper_figures.cell_panel": lambda rng: PF.cell_panel(6, rng=rng),
    "afw_book.paper_figures.figure1": lambda rng: _drawn(PF.figure1, kappas=(5, 6), rng=rng),
    "afw_book.paper_figures.figure1_corrected": lambda rng: _drawn(PF.figure1_corrected, kappas=(5,), rng=rng),
    "afw_book.paper_figures.figure2": lambda rng: _drawn(PF.figure2, kappas=(5, 6), rng=rng),
    "afw_book.paper_figures.figure3": lambda rng: _drawn(PF.figure3, kappas=(5,), rng=rng),
    "afw_book.paper_figures.figure4": lambda rng: _drawn(PF.figure4, rng=rng),
    "afw_book.paper_figures.figure4_delta002": lambda rng: _drawn(PF.figure4_delta002, kappa=5, rng=rng),
    "afw_book.paper_figures.published_label_overlaps":
        lambda rng: PF.published_label_overlaps("figure2", kappas=(6,), rng=rng),
    "experiments.vertex_limits.owns_cell_probability": lambda rng: VL.owns_cell_probability([2, 3], 3, 50, rng=rng),
    "experiments.vertex_limits.ode_continuity": lambda rng: VL.ode_continuity(regular_polygon(4) * [1.0, 0.9], np.eye(2),
                                                                  [1e-3], T=0.1, dt=0.05, rng=rng),
}


def _minilm():
    """The trained encoder of chapter 8 (fetched and verified by make test's set-up), loaded once."""
    from attention_fw import encoder
    if not hasattr(_minilm, "model"):
        _minilm.model = encoder.load()
    return _minilm.model


def _public_signatures():
    """``(module.name, parameters)`` of every public function or class of the public modules."""
    for info in [*pkgutil.walk_packages(attention_fw.__path__, "attention_fw."),
                 *pkgutil.walk_packages(afw_book.__path__, "afw_book.")]:
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        mod = importlib.import_module(info.name)
        key = info.name.removeprefix("attention_fw.")
        public = getattr(mod, "__all__", None)      # the public names; else those defined in the module
        for name, obj in vars(mod).items():
            if name.startswith("_") or not callable(obj) or isinstance(obj, type(mod)):
                continue
            if (name not in public) if public is not None else getattr(obj, "__module__", None) != mod.__name__:
                continue
            try:
                yield f"{key}.{name}", inspect.signature(obj).parameters
            except (TypeError, ValueError):
                continue


def _library_functions_with_rng():
    return {key for key, params in _public_signatures() if "rng" in params}


def _same(a, b):
    if dataclasses.is_dataclass(a):
        return _same(dataclasses.asdict(a), dataclasses.asdict(b))
    if isinstance(a, dict):                 # a task echoes its rng argument, a figure its seed: not results
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a if k not in ("rng", "seed"))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=np.asarray(a).dtype.kind == "f")


def test_every_function_with_rng_is_covered():
    """The table above lists exactly the library's public callables with an ``rng`` parameter."""
    assert _library_functions_with_rng() == set(CALLS)


def test_no_function_takes_a_seed_instead():
    """One vocabulary: randomness comes in as ``rng``. The exceptions are the stream factories
    ``notebook.stream(name, seed)`` (and ``Page.stream``), which turns a chapter's seed into the
    Generators that are then passed as ``rng``, and the sweeps' ``run(..., seed=)``, ``seeded`` and
    ``task_seed``, which turn a run's seed into each task's ``rng``."""
    found = {key for key, params in _public_signatures() if any("seed" in p for p in params)}
    assert found == {"afw_book.notebook.stream", "afw_book.sweeps.run", "afw_book.sweeps.task_seed",
                     "afw_book.sweeps.seeded"}


def test_one_argument_order():
    """The positional arguments of every public function and class come in the order of the
    vocabulary, ``(x, gamma, beta, B, V)`` (``schedule`` stands for ``gamma``, ``Bstar`` for ``B``),
    any of them skipped; the bound of Theorem 5.4, a formula in the theorem's own parameters
    ``(t, beta, n, gamma, ...)``, is the one exception."""
    rank = {"gamma": 0, "schedule": 0, "beta": 1, "B": 2, "Bstar": 2, "V": 3}
    out_of_order = set()
    for key, params in _public_signatures():
        seq = [rank[p] for p, par in params.items() if p in rank and par.kind is not par.KEYWORD_ONLY]
        if seq != sorted(seq):
            out_of_order.add(key)
    assert out_of_order == {"experiments.metastability.metastability_bound"}


def test_rng_is_keyword_only():
    for key in CALLS:
        mod, name = key.rsplit(".", 1)
        fn = getattr(importlib.import_module(mod if mod.startswith("afw_book.") else f"attention_fw.{mod}"), name)
        assert inspect.signature(fn).parameters["rng"].kind is inspect.Parameter.KEYWORD_ONLY, key


@pytest.mark.parametrize("key", sorted(CALLS))
def test_same_seed_same_result_however_passed(key):
    """rng=11, rng=SeedSequence(11) and rng=default_rng(11) give identical results; another seed differs."""
    call = CALLS[key]
    a = call(11)
    assert _same(a, call(np.random.SeedSequence(11)))
    assert _same(a, call(np.random.default_rng(11)))
    assert _same(a, call(11))                               # and reproducibly so
    assert not _same(a, call(12))                           # the result does depend on rng


def test_thm31_shifted_reproducible_from_a_generator():
    """The bug fixed here: a Generator or SeedSequence was replaced by fresh OS entropy."""
    a = C.thm31_shifted([3, 5], 3, 30, rng=np.random.default_rng(2))
    b = C.thm31_shifted([3, 5], 3, 30, rng=np.random.default_rng(2))
    c = C.thm31_shifted([3, 5], 3, 30, rng=np.random.default_rng(3))
    assert _same(a, b)
    assert not np.array_equal(a.diam0, c.diam0)


# ---- independent streams for the tasks of a sweep (afw_book.sweeps: seed=, seeded, task_seed) ----

def _square_with_rng(*, x, rng, counter):
    """A task that draws: leaves one line in ``counter`` per actual computation."""
    with open(counter, "a") as fh:
        fh.write(f"{x}\n")
    return np.random.default_rng(rng).standard_normal(4) * x


def test_every_task_of_a_seeded_sweep_draws_its_own_numbers():
    """The bug of issue 39: every (beta, kappa, n) of chapter 5 drew the same exponentials, so the
    exit times at two beta were one sample rescaled (rank correlation 1). With seed=, the tasks'
    seeds are distinct, their first draws differ, and the exit times of two tasks are
    independent: in the single-jump regime T = 1 + floor(E / lambda), a monotone function of one
    exponential E per run, so shared draws give Spearman's rho = 1 between the two samples in run
    order, and independent ones rho ~ N(0, 1/(runs - 1)): |rho| < 0.25 is 5 standard errors at 400 runs."""
    from afw_book import sweeps
    params = sweeps.grid(beta=[4.0, 8.0, 16.0], kappa=[3, 4], n=6, runs=400)
    params += sweeps.grid(beta=[4.0, 8.0, 16.0], kappa=3, n=[3, 12], runs=400)
    out = sweeps.run(ET.exit_time_task, params, seed=0, executor="serial", cache=False, progress=False)
    seeds = [r.rng for r in out]
    assert len(set(seeds)) == len(params)
    first = np.array([np.random.default_rng(s).standard_normal(8) for s in seeds])
    assert len({tuple(row) for row in first}) == len(params)        # no two streams start alike
    for a in range(len(out)):
        for b in range(a + 1, len(out)):
            rho = stats.spearmanr(out[a].times, out[b].times).statistic
            assert abs(rho) < 0.25, (params[a], params[b], rho)
    # the design this replaces: one rng for every task gives one sample, rescaled
    shared = sweeps.run(ET.exit_time_task, sweeps.grid(beta=[4.0, 8.0], rng=0, runs=400), executor="serial",
                        cache=False, progress=False)
    assert stats.spearmanr(shared[0].times, shared[1].times).statistic > 0.99


def test_task_seed_is_a_function_of_the_parameters_only():
    """Not of the order of the keys, of the spelling of a number (12 or 12.0, numpy or Python), of the
    task's place in the grid, nor of the process: Python's hash() of a string changes with
    PYTHONHASHSEED, the seeds must not."""
    from afw_book import sweeps
    p = {"beta": 12.0, "n": 6, "kappa": 3, "eps": 0.05, "x0": ((0.0, 1.0), (1.0, 0.0))}
    s = sweeps.task_seed(7, p)
    assert s == sweeps.task_seed(7, {"x0": np.array([[0, 1], [1, 0]]), "eps": 0.05, "kappa": np.int64(3),
                                     "n": 6.0, "beta": 12})
    assert s == sweeps.task_seed(7, {**p, "rng": 99})                 # the rng of a task is not an input
    for key, other in (("beta", 12.5), ("n", 7), ("kappa", 4), ("eps", 0.050000001), ("x0", ((0.0, 1.0),))):
        assert sweeps.task_seed(7, {**p, key: other}) != s, key       # every parameter moves it
    assert sweeps.task_seed(8, p) != s and sweeps.task_seed(7, {**p, "extra": None}) != s
    # the same in fresh interpreters with different string hashing
    code = ("from afw_book.sweeps import task_seed; "
            "print(task_seed(7, {'beta': 12.0, 'n': 6, 'kappa': 3, 'eps': 0.05, 'x0': ((0.0, 1.0), (1.0, 0.0))}))")
    other = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"     # not this process's string hashing
    env = {**os.environ, "PYTHONHASHSEED": other}
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert int(got.stdout) == s
    # a seeded grid's tasks are those of the grid plus their rng, in order
    grid = sweeps.grid(beta=[1.0, 2.0], n=[3, 6])
    assert [{k: v for k, v in t.items() if k != "rng"} for t in sweeps.seeded(grid, 5)] == grid
    assert [t["rng"] for t in sweeps.seeded(grid[::-1], 5)] == [t["rng"] for t in sweeps.seeded(grid, 5)][::-1]


def test_seeded_refuses_what_would_share_or_double_a_stream():
    from afw_book import sweeps
    with pytest.raises(ValueError, match=r"params\[1\] already has rng"):
        sweeps.seeded([{"beta": 1.0}, {"beta": 2.0, "rng": 3}], 0)
    with pytest.raises(ValueError, match=r"params\[0\] and params\[2\] are the same task"):
        sweeps.seeded([{"beta": 1.0}, {"beta": 2.0}, {"beta": 1}], 0)
    for bad in (-1, 1.5, True, "0"):
        with pytest.raises(ValueError, match="seed must be a non-negative integer"):
            sweeps.task_seed(bad, {"beta": 1.0})
    with pytest.raises(TypeError, match=r"params\['f'\]: cannot encode a function"):
        sweeps.task_seed(0, {"f": lambda: 0})


def test_seeded_sweep_is_cached_under_its_task_seeds(tmp_path):
    """The cache is keyed by each task's parameters with its derived rng: the same seed loads
    everything, another seed recomputes everything, and the loaded results are the computed ones."""
    from afw_book import sweeps
    counter = tmp_path / "calls.txt"
    params = sweeps.grid(x=[1.0, 2.0, 3.0], counter=str(counter))
    kw = dict(cache_dir=tmp_path / "cache", progress=False, executor="serial")
    a = sweeps.run(_square_with_rng, params, seed=0, **kw)
    b = sweeps.run(_square_with_rng, params, seed=0, **kw)
    assert len(counter.read_text().split()) == 3
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    c = sweeps.run(_square_with_rng, params, seed=1, **kw)
    assert len(counter.read_text().split()) == 6
    assert not any(np.array_equal(u, v) for u, v in zip(a, c))
