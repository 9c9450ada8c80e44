"""The paper's questions as experiments, one module per section; each returns a
:class:`attention_fw.results.Result` or a documented dataclass.

Each module is imported when first used (``attention_fw.experiments.convergence``, or ``import
attention_fw.experiments.convergence``), so that a session pays only for the ones it uses."""
from typing import TYPE_CHECKING

from .._lazy import submodules

__all__ = ["model_checks", "convergence", "vertex_limits", "metastability", "exit_times", "survival",
           "sabeta", "sabeta_kernel", "sabeta_reduced", "sabeta_family", "sabeta_exponent", "context_length",
           "trained_heads", "hull_counts", "many_tokens"]

if TYPE_CHECKING:
    from . import (context_length, convergence, exit_times, hull_counts, many_tokens, metastability, model_checks,
                   sabeta, sabeta_exponent, sabeta_family, sabeta_kernel, sabeta_reduced, survival,
                   trained_heads, vertex_limits)
__getattr__, __dir__ = submodules(__name__, __all__)
