"""Self-attention as a particle system and as Frank-Wolfe.

Simulation library behind the reproduction book of Alcalde, Geshkovski and
Ruiz-Balet, "Attention's forward pass and Frank-Wolfe" (arXiv 2508.09628).
Equation numbers in docstrings refer to that paper; where a number could not
be confirmed the docstring says so.

Modules
-------
Each answers one question; the vocabulary they share is documented once, in ``dynamics``.
model
  dynamics        how do tokens move? the layer (1.3), SA-inf, SA-beta, SAP, ``simulate`` with recorders
  _kernels        the fused passes of the batched steps (numba, numpy fallback)
  tiled           the same steps with the keys in tiles, in O(R n (d + tile)) memory (real context lengths)
  _tile_kernels   the passes of the tiled steps (numba, numpy fallback)
  schedules       step-size rules gamma^t (small objects with one method)
  frank_wolfe     is one SA-inf step one Frank-Wolfe step? energy, gaps, the oracle, the shrinking hull
geometry
  geometry        planar cells C_i(v), B-Voronoi cells, polygon clipping, cones and erosion in the plane
  polytope        hulls in any dimension: regular polygons and simplices, diameter, c0, (5.1), eroded cones, distances
experiments
  model_checks    Section 1: how close are (1.3) and SA-inf (beta -> infinity), and SAP and SA-beta in expectation?
  convergence     Section 3: Theorem 3.1 and its counterexample, rates on the current and on a fixed hull
  vertex_limits   Section 4: Theorem 4.2, the duality gap, Remark 4.6, the ODE limit (Theorem 4.8)
  metastability   Section 5: hypotheses and phase 1 (Theorem 5.2), the bound of Theorem 5.4, collapse (Prop 5.1)
  exit_times      Section 5: exit times T2 by plain stepping and by the rejection-free engine
  survival        censored maximum-likelihood fits and Kaplan-Meier curves of exit times
  context_length  Chapter 6: which of n tokens own their cells, at real context lengths
  results         the result object every experiment returns
figures
  paper_figures   the paper's Figures 1-4 from exact geometry (also a command line)
  model_plots     the figures of Section 1 (the model)
  frank_wolfe_plots  the figures of Section 2 (the Frank-Wolfe reading)
  convergence_plots  the figures of Sections 3 and 4
  metastability_plots  the figures of Section 5 (phase 1, exit times, survival, SAP vs SA-beta, collapse)
  context_plots   the figures of Chapter 6
  animate         offline animations of trajectories
infra
  paths           every path of the project, anchored on the repository root
  plotting        figure style, venue styles and the single atomic, reproducible ``save``
  notebook        how a chapter saves, glues and describes a figure and quotes a number
  presets         the named parameter sets of the notebooks
  sweeps          parameter grids over an executor, cached on disk
  _validate       input checks with messages that name the argument
"""

__version__ = "0.1.0"
