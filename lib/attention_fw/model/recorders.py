"""What does a run record? Recorders that :func:`~attention_fw.model.dynamics.simulate` calls at chosen steps.

A run of ``10^6`` steps over ``10^3`` systems keeps ``O(R n d)`` memory: the recorders see ``(x, t)`` at
their own times and keep summaries (a function's values, the first time a predicate holds), never the
whole ``T x R x n x d`` trajectory. Re-exported by :mod:`attention_fw.model.dynamics` (and
``attention_fw``), where ``simulate`` lives.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from .. import _validate as chk

__all__ = ["Recorder", "FunctionRecorder", "FirstTime"]


class Recorder:
    """Something :func:`~attention_fw.model.dynamics.simulate` calls as ``recorder(x, t)`` at the times it is ``due``.

    :func:`~attention_fw.model.dynamics.simulate` asks ``due(t, first, last)`` before each step (``first`` the initial layer,
    ``last`` whether ``t`` is the final one), calls the recorder when it is due, and at the end
    stores ``result()`` under ``name`` in ``records`` and the list ``times`` (the steps it
    recorded, kept by the recorder) in ``record_times``.

    Examples
    --------
    >>> from attention_fw.model.dynamics import Softmax, simulate

    A recorder of the spread of the tokens at the last step; at ``beta = 0`` with
    ``gamma = 1/2`` each step halves it, so ``2 -> 2 / 2^3``:

    >>> class FinalSpread(Recorder):
    ...     name = "spread"
    ...     def __init__(self):
    ...         self.times, self.values = [], []
    ...     def due(self, t: int, first: int, last: bool) -> bool:
    ...         return last
    ...     def __call__(self, x: np.ndarray, t: int) -> None:
    ...         self.times.append(t)
    ...         self.values.append(float(np.ptp(x[:, 0])))
    ...     def result(self) -> Any:
    ...         return self.values
    >>> run = simulate(
    ...     np.array([[1.0, 0.0], [-1.0, 0.0]]), Softmax(0.5, 0.0), 3, [FinalSpread()]
    ... )
    >>> run.records["spread"], run.record_times["spread"].tolist()
    ([0.25], [3])
    """

    name: str = "record"
    times: list[int]

    def due(self, t: int, first: int, last: bool) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, x: np.ndarray, t: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def result(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class FunctionRecorder(Recorder):
    """Record ``fn(x, t)`` at ``t = t0, t0 + every, ...`` and at the last step, or exactly at ``times``.

    ``fn`` returns an array or a dict of arrays; :meth:`~Recorder.result` stacks them over the recorded
    times (a dict of stacks for dicts).

    Examples
    --------
    >>> x = np.array([[0.0, 1.0], [1.0, 0.0], [0.2, 0.3]])
    >>> from attention_fw.model.dynamics import Hardmax, simulate
    >>> rec = FunctionRecorder("x3", lambda x, t: x[2, 1], times=[0, 2])
    >>> simulate(x, Hardmax(0.5), 4, [rec]).records["x3"]     # 1 - 0.7 / 2^t
    array([0.3  , 0.825])
    """

    def __init__(self, name: str, fn: Callable[[np.ndarray, int], Any], every: int = 1, *,
                 times: Iterable[int] | None = None) -> None:
        if not callable(fn):
            raise TypeError("fn must be callable as fn(x, t)")
        self.name = name
        self.fn = fn
        self.every = chk.positive_int("every", every)
        self.wanted = None if times is None else frozenset(int(t) for t in np.ravel(list(times)))
        self.times: list[int] = []
        self.values: list = []

    def due(self, t: int, first: int, last: bool) -> bool:
        if self.wanted is not None:
            return t in self.wanted
        return (t - first) % self.every == 0 or last

    def __call__(self, x: np.ndarray, t: int) -> None:
        self.times.append(t)
        v = self.fn(x, t)
        self.values.append({k: np.asarray(a) for k, a in v.items()} if isinstance(v, dict) else np.asarray(v))

    def result(self) -> Any:
        if self.values and isinstance(self.values[0], dict):
            return {k: np.stack([v[k] for v in self.values]) for k in self.values[0]}
        return np.stack(self.values) if self.values else np.zeros(0)


class FirstTime(Recorder):
    """Per system, the first step ``t`` at which ``predicate(x, t)`` holds (``-1`` if never); checked at every step.

    ``predicate`` returns a bool array of shape (R,) for tokens (R, n, d) (a bool for (n, d)).

    Examples
    --------
    >>> x = np.array([[0.0, 1.0], [1.0, 0.0], [0.2, 0.3]])
    >>> from attention_fw.model.dynamics import Hardmax, simulate
    >>> near = FirstTime("near", lambda x, t: np.linalg.norm(x[2] - x[0]) < 0.1)
    >>> int(simulate(x, Hardmax(0.5), 10, [near]).records["near"])
    3
    """

    def __init__(self, name: str, predicate: Callable[[np.ndarray, int], Any]) -> None:
        if not callable(predicate):
            raise TypeError("predicate must be callable as predicate(x, t)")
        self.name = name
        self.predicate = predicate
        self.first: np.ndarray | None = None
        self.times: list[int] = []

    def due(self, t: int, first: int, last: bool) -> bool:
        return True

    def __call__(self, x: np.ndarray, t: int) -> None:
        hit = np.asarray(self.predicate(x, t), dtype=bool)
        if self.first is None:
            self.first = np.full(hit.shape, -1)
        self.first[(self.first < 0) & hit] = t

    def result(self) -> Any:
        return self.first
