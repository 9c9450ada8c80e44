"""The dynamics: the layer (1.3), its limits SA-inf, SA-beta and SAP, and the Frank-Wolfe reading.

``dynamics`` holds the steps, the rules and ``simulate``; ``tiled`` the same steps with the
keys in tiles (``dynamics`` switches to them by itself above a memory budget); ``schedules``
the step-size rules; ``frank_wolfe`` the energy, the gaps and the linear oracle.
"""
from . import dynamics, frank_wolfe, schedules, tiled

__all__ = ["dynamics", "tiled", "schedules", "frank_wolfe"]
