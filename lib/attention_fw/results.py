"""What does an experiment return? One result object whose entries are also attributes.

:class:`Result` is a dict whose keys read as attributes too (``res.t`` is ``res["t"]``), in
the spirit of scipy's ``OptimizeResult``: every experiment of the library returns one, or a
dataclass with documented attributes (:class:`attention_fw.model.dynamics.SimulationResult`,
:class:`ExitTimes`, :class:`attention_fw.experiments.survival.CensoredFit`), and
every plot function takes such a result and returns the figure.

Exit times, whatever the dynamics (the chain by the engine or by stepping, the deterministic
(SA-beta)), come back as one type, :class:`ExitTimes`, with one "no exit" marker: ``censored[r]``
is True when run ``r`` had not exited by ``times[r]`` (its censoring time, the cap). Never
``None``, never ``-1``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Result", "ExitTimes"]


@dataclass
class ExitTimes:
    """Exit times ``T2`` of R runs, with right censoring: the one exit-time result of the library.

    Its attributes:

    - ``times``: float, shape (R,), the exit step of each run, or for a censored run the step up
      to which it was followed;
    - ``censored``: bool, shape (R,), the "no exit" marker: True where the run had not exited by
      ``times[r]``;
    - ``cap``: the largest step any run was followed to;
    - ``events``: events per run (the rejection-free engine), empty where not counted;
    - ``path_times``, ``path``: recorded steps and states of deterministic runs
      (``sabeta.sabeta_exit_times`` with ``record_times``): a list of one (len(path_times), n_r, d_r)
      array per run, else None;
    - ``final``: the states at the end of deterministic runs (a list of (n_r, d_r) arrays, one per
      run), else None.

    Examples
    --------
    >>> es = ExitTimes(
    ...     times=np.array([3.0, 10.0]), censored=np.array([False, True]), cap=10.0
    ... )
    >>> es.n_censored, es.exited.tolist()
    (1, [True, False])
    """
    times: np.ndarray
    censored: np.ndarray
    events: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cap: float = math.inf
    path_times: Any = None
    path: Any = None
    final: Any = None

    @property
    def n_censored(self) -> int:
        return int(np.count_nonzero(self.censored))

    @property
    def exited(self) -> np.ndarray:
        """Where the run exited (``~censored``)."""
        return ~np.asarray(self.censored, dtype=bool)


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
