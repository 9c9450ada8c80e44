"""The dynamics: the layer (1.3), its limits SA-inf, SA-beta and SAP, and the Frank-Wolfe reading.

``dynamics`` holds the steps, the rules and ``simulate``; ``recorders`` what a run records;
``general`` the model researchers write (query and key matrices, values, masks, LayerNorm, the
sphere), which the steps accept as keywords;
``multihead`` the multi-head block with its output projection; ``tiled`` the same steps with the
keys in tiles (``dynamics`` switches to them by itself above a memory budget); ``schedules``
the step-size rules; ``frank_wolfe`` the energy, the gaps and the linear oracle. The private
``_checks``, ``_scaling`` and ``_sampling`` hold what the two backends share (one copy of each
check, of the tie rule and of the score scaling); ``_kernels`` and ``_tile_kernels`` their passes.
"""
from typing import TYPE_CHECKING

from .. import _lazy
from . import dynamics, general, multihead, recorders, schedules, tiled

# frank_wolfe (SciPy's optimisation and spatial modules) is imported when first used.
if TYPE_CHECKING:
    from . import frank_wolfe
__getattr__, __dir__ = _lazy.submodules(__name__, ("frank_wolfe",))

__all__ = ["dynamics", "recorders", "general", "multihead", "tiled", "schedules", "frank_wolfe"]
