"""Figures of the experiments (optional: needs matplotlib, the ``plot`` extra).

One module per part of the book: ``model``, ``frank_wolfe``, ``convergence``, ``metastability``,
``context``, ``animate`` (offline animations), and ``colours`` (colour distances, greyscale and
colour-vision-deficiency checks, the palette of the paper-ready figures). Not imported by ``import attention_fw``.
"""

__all__ = ["model", "frank_wolfe", "convergence", "metastability", "context", "animate", "colours"]
