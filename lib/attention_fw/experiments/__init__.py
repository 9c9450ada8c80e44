"""The paper's questions as experiments, one module per section; each returns a
:class:`attention_fw.results.Result` or a documented dataclass."""
from . import (context_length, convergence, exit_times, metastability, model_checks, sabeta, survival, trained_heads,
               vertex_limits)

__all__ = ["model_checks", "convergence", "vertex_limits", "metastability", "exit_times", "survival",
           "sabeta", "context_length", "trained_heads"]
