"""Figures of the experiments (optional: needs matplotlib, the ``plot`` extra).

Plots of one's own arrays on a given Axes, each returning it: :func:`~attention_fw.plot.arrays.plot_tokens`,
:func:`~attention_fw.plot.arrays.plot_trajectories`, :func:`~attention_fw.plot.arrays.plot_cells`,
:func:`~attention_fw.plot.arrays.plot_hull` (module ``arrays``).
One module per part of the book: ``model``, ``frank_wolfe``, ``convergence``, ``metastability``, ``sabeta``,
``context``, ``trained``, ``animate`` (offline animations), ``colours`` (colour distances, greyscale and
colour-vision-deficiency checks, the palette of the paper-ready figures); ``style`` is the book's figure style as a
context manager (``with style.style(): ...``). Not imported by ``import attention_fw``; importing
it changes none of matplotlib's settings. The plot functions draw and return a figure, with
the numbers behind it attached (:func:`figure_data`); they write no file.
"""
import importlib
from typing import TYPE_CHECKING, Any

from ._figure import figure_data

if TYPE_CHECKING:
    from .arrays import plot_cells, plot_hull, plot_tokens, plot_trajectories

_ARRAYS = ("plot_tokens", "plot_trajectories", "plot_cells", "plot_hull")

__all__ = ["figure_data", "plot_tokens", "plot_trajectories", "plot_cells", "plot_hull", "arrays", "model",
           "frank_wolfe", "convergence", "metastability", "context", "sabeta", "trained", "animate", "style", "colours"]


def __getattr__(name: str) -> Any:
    """``plot_tokens`` and the other plots of one's own arrays, from ``arrays`` when first used: importing the
    package loads no matplotlib (``pkgutil.walk_packages`` over the library imports it)."""
    if name in _ARRAYS:
        return getattr(importlib.import_module(f"{__name__}.arrays"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
