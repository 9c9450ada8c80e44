"""Figures of the experiments (optional: needs matplotlib, the ``plot`` extra).

One module per part of the book: ``model``, ``frank_wolfe``, ``convergence``, ``metastability``,
``context``, and ``animate`` (offline animations). Not imported by ``import attention_fw``.
"""

__all__ = ["model", "frank_wolfe", "convergence", "metastability", "context", "animate"]
