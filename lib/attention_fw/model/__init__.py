"""The dynamics: the layer (1.3), its limits SA-inf, SA-beta and SAP, and the Frank-Wolfe reading.

``dynamics`` holds the steps, the rules and ``simulate``; ``general`` the model researchers write
(query and key matrices, values, masks, LayerNorm, the sphere), which the steps accept as keywords;
``multihead`` the multi-head block with its output projection; ``tiled`` the same steps with the
keys in tiles (``dynamics`` switches to them by itself above a memory budget); ``schedules``
the step-size rules; ``frank_wolfe`` the energy, the gaps and the linear oracle. The private
``_checks``, ``_scaling`` and ``_sampling`` hold what the two backends share (one copy of each
check, of the tie rule and of the score scaling); ``_kernels`` and ``_tile_kernels`` their passes.
"""
from . import dynamics, frank_wolfe, general, multihead, schedules, tiled

__all__ = ["dynamics", "general", "multihead", "tiled", "schedules", "frank_wolfe"]
