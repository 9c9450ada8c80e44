"""Self-attention as a particle system and as Frank-Wolfe.

Simulation library behind the reproduction book of Alcalde, Geshkovski and
Ruiz-Balet, "Attention's forward pass and Frank-Wolfe" (arXiv 2508.09628).
Equation numbers in docstrings refer to that paper; where a number could not
be confirmed the docstring says so.

Modules
-------
schedules      step-size rules gamma^t (small objects with one method)
dynamics       the layer (1.3), hardmax (SA-inf), softmax (SA-beta), the chain (SAP), ``simulate``
frank_wolfe    energy, Frank-Wolfe gap, primal gap, linear minimisation oracle, hull size
geometry       vertex sampling, exact cells C_i(v), B-Voronoi cells, cones and erosion
metastability  phase-1 event, exit times, the rejection-free engine
plotting       figure style, venue styles and the single atomic, reproducible ``save``
notebook       how a chapter saves, glues and describes a figure and quotes a number
paths          every path of the project, anchored on the repository root
"""

__version__ = "0.1.0"
