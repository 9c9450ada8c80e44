"""Figures of the experiments (optional: needs matplotlib, the ``plot`` extra).

One module per part of the book: ``model``, ``frank_wolfe``, ``convergence``, ``metastability``, ``sabeta``,
``context``, ``trained``, ``animate`` (offline animations), ``colours`` (colour distances, greyscale and
colour-vision-deficiency checks, the palette of the paper-ready figures); ``style`` is the book's figure style as a
context manager (``with style.style(): ...``). Not imported by ``import attention_fw``; importing
it changes none of matplotlib's settings. The plot functions draw and return a figure, with
the numbers behind it attached (:func:`figure_data`); they write no file.
"""
from ._figure import figure_data

__all__ = ["figure_data", "model", "frank_wolfe", "convergence", "metastability", "context", "sabeta", "trained",
           "animate", "style", "colours"]
