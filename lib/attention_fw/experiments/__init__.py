"""The paper's questions as experiments, one module per section; each returns a
:class:`attention_fw.results.Result` or a documented dataclass.

Each module is imported when first used (``attention_fw.experiments.convergence``, or ``import
attention_fw.experiments.convergence``), so that a session pays only for the ones it uses."""
from typing import TYPE_CHECKING

__all__ = ["model_checks", "convergence", "vertex_limits", "metastability", "exit_times", "survival",
           "sabeta", "context_length", "trained_heads"]

if TYPE_CHECKING:
    from . import (context_length, convergence, exit_times, metastability, model_checks, sabeta, survival,
                   trained_heads, vertex_limits)


def __getattr__(name: str):
    if name in __all__:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
