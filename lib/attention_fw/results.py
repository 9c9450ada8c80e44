"""What does an experiment return? One result object whose entries are also attributes.

:class:`Result` is a dict whose keys read as attributes too (``res.t`` is ``res["t"]``), in
the spirit of scipy's ``OptimizeResult``: every experiment of the library returns one, or a
dataclass with documented attributes (:class:`attention_fw.model.dynamics.SimulationResult`,
:class:`attention_fw.experiments.exit_times.ExitSample`, :class:`attention_fw.experiments.survival.CensoredFit`), and
every plot function takes such a result and returns the figure.
"""
from __future__ import annotations

from typing import Any

__all__ = ["Result"]


class Result(dict):
    """A dict of named outputs, readable as attributes.

    Examples
    --------
    >>> res = Result(t=[0, 1, 2], slope=-1.0)
    >>> res.slope, res["t"]
    (-1.0, [0, 1, 2])
    >>> sorted(res)
    ['slope', 't']
    """

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"result has no entry {name!r}; entries: {', '.join(self)}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __dir__(self) -> list[str]:
        return list(self.keys())

    def __repr__(self) -> str:
        return f"Result({', '.join(self)})"
