"""Step-size schedules gamma^t of the Frank-Wolfe step (SA-inf), (SA-beta), (SAP).

Time origin: ``t = 0`` is the first step, i.e. the update from layer 0 to layer 1
uses ``gamma^0``. The classical Frank-Wolfe rule ``2/(t+2)`` therefore starts
with ``gamma^0 = 1`` (a full step to the oracle's answer), as in Theorem 3.1.

Each schedule is a small object: ``s(t)`` gives ``gamma^t`` (``t`` an int or an
integer array), ``s.product(t)`` gives ``prod_{tau < t} (1 - gamma^tau)``, the
factor of Theorem 4.2 by which the distance to the vertex shrinks in ``t`` steps.
Every value lies in ``(0, 1]``.
"""
from __future__ import annotations

from typing import Callable, TypeAlias, cast, overload

import math
import numbers

import numpy as np
import numpy.typing as npt

from .. import _validate as V

#: A time argument: an integer, or an array of integers.
Times: TypeAlias = int | np.integer | np.ndarray

__all__ = ["Schedule", "Constant", "FrankWolfe", "Harmonic", "Halving", "ToOne", "FromValue", "get_schedule"]


def _times(t):
    arr = np.asarray(t)
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.floor(arr))):
        raise TypeError(f"t must be a non-negative integer (or integer array), got {t!r}")
    if np.any(arr < 0):
        raise ValueError(f"t must be >= 0 (t = 0 is the first step), got {t!r}")
    return arr.astype(np.int64) if arr.ndim else int(arr)


class Schedule:
    """Base class: ``gamma(t)`` in (0, 1] for integer ``t >= 0``.

    A subclass defines ``gamma(t)`` for an int or an integer array ``t``; calling the schedule
    checks ``t``, and :meth:`product` is computed from ``gamma`` unless overridden by a closed form.

    Examples
    --------
    ``gamma^t = 1/(t+3)``: the product telescopes, ``prod_{tau < t} (tau+2)/(tau+3) = 2/(t+2)``:

    >>> class Third(Schedule):
    ...     name = "1/(t+3)"
    ...     def gamma(self, t):
    ...         return 1.0 / (np.asarray(t, dtype=float) + 3.0)
    >>> t = np.arange(4)
    >>> np.round(Third().product(t) * (t + 2), 12)
    array([2., 2., 2., 2.])
    """

    name = "schedule"

    def gamma(self, t: Times) -> float | np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @overload
    def __call__(self, t: int | np.integer) -> float: ...
    @overload
    def __call__(self, t: npt.ArrayLike) -> float | np.ndarray: ...
    def __call__(self, t: npt.ArrayLike) -> float | np.ndarray:
        return self.gamma(_times(t))

    def product(self, t: Times) -> float | np.ndarray:
        """``prod_{tau=0}^{t-1} (1 - gamma^tau)`` (empty product 1 at t = 0), computed in log space."""
        t = _times(t)
        tmax = int(np.max(t)) if np.ndim(t) else int(t)
        g = np.asarray(self.gamma(np.arange(max(tmax, 1))), dtype=float)
        with np.errstate(divide="ignore"):
            logs = np.concatenate([[0.0], np.cumsum(np.log1p(-g))])
        return np.exp(logs[t])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class Constant(Schedule):
    """``gamma^t = gamma`` (exponential rate ``(1-gamma)^t`` in Theorem 4.2).

    Examples
    --------
    >>> s = Constant(0.25)
    >>> s(np.arange(3)), round(float(s.product(3)), 12)     # (3/4)^3 = 0.421875
    (array([0.25, 0.25, 0.25]), 0.421875)
    """

    def __init__(self, gamma: float) -> None:
        self.value = V.real_scalar("gamma", gamma, low=0.0, high=1.0, low_open=True)
        self.name = f"{self.value:g}"

    def gamma(self, t: Times) -> float | np.ndarray:
        return np.full(np.shape(t), self.value) if np.ndim(t) else self.value

    def product(self, t: Times) -> float | np.ndarray:
        t = _times(t)
        if self.value == 1.0:
            return np.where(np.asarray(t) == 0, 1.0, 0.0) if np.ndim(t) else float(t == 0)
        return np.exp(np.asarray(t) * math.log1p(-self.value)) if np.ndim(t) else math.exp(t * math.log1p(-self.value))


class FrankWolfe(Schedule):
    """``gamma^t = 2/(t+2)``: the Frank-Wolfe rule of Theorem 3.1 (``gamma^0 = 1``; E3: not 2/(t+1)).

    Examples
    --------
    >>> s = FrankWolfe()
    >>> np.round(s(np.arange(3)), 6)          # 1, 2/3, 1/2
    array([1.      , 0.666667, 0.5     ])
    >>> # gamma^0 = 1: the first step lands on the oracle's answer
    >>> s.product(np.arange(3))
    array([1., 0., 0.])
    """

    name = "2/(t+2)"

    def gamma(self, t: Times) -> float | np.ndarray:
        return 2.0 / (np.asarray(t, dtype=float) + 2.0) if np.ndim(t) else 2.0 / (t + 2.0)

    def product(self, t: Times) -> float | np.ndarray:
        t = _times(t)
        return np.where(np.asarray(t) == 0, 1.0, 0.0) if np.ndim(t) else float(t == 0)


class Harmonic(Schedule):
    """``gamma^t = 1/(t+2)``: product ``1/(t+1)``, polynomial convergence only (E4).

    Examples
    --------
    >>> s = Harmonic()
    >>> np.round(s(np.arange(3)), 6)                          # 1/2, 1/3, 1/4
    array([0.5     , 0.333333, 0.25    ])
    >>> # closed form 1/(t+1) = the product of the steps
    >>> s.product(3), round(float(Schedule.product(s, 3)), 12)
    (0.25, 0.25)
    """

    name = "1/(t+2)"

    def gamma(self, t: Times) -> float | np.ndarray:
        return 1.0 / (np.asarray(t, dtype=float) + 2.0) if np.ndim(t) else 1.0 / (t + 2.0)

    def product(self, t: Times) -> float | np.ndarray:
        t = _times(t)
        return 1.0 / (np.asarray(t, dtype=float) + 1.0) if np.ndim(t) else 1.0 / (t + 1.0)


class Halving(Schedule):
    """``gamma^t = 2^{-t-1}``: summable, the product tends to 0.288788... > 0: no convergence (E4).

    Examples
    --------
    >>> s = Halving()
    >>> # prod_{k >= 1} (1 - 2^-k) = 0.288788...
    >>> s(np.arange(3)), round(float(s.product(60)), 6)
    (array([0.5  , 0.25 , 0.125]), 0.288788)
    """

    name = "2^(-t-1)"

    def gamma(self, t: Times) -> float | np.ndarray:
        return np.exp2(-np.asarray(t, dtype=float) - 1.0) if np.ndim(t) else 2.0 ** (-t - 1.0)


class ToOne(Schedule):
    """``gamma^t = 1 - exp(-a(t+1))``: product ``exp(-a t(t+1)/2)``, super-exponential.

    Examples
    --------
    >>> s = ToOne(0.5)
    >>> # 1 - e^{-1/2}, 1 - e^{-1}, 1 - e^{-3/2}
    >>> np.round(s(np.arange(3)), 6)
    array([0.393469, 0.632121, 0.77687 ])
    >>> (
    ...     math.isclose(s.product(4), math.exp(-0.5 * 4 * 5 / 2)),
    ...     math.isclose(s.product(4), Schedule.product(s, 4)),
    ... )
    (True, True)
    """

    def __init__(self, a: float = 0.5) -> None:
        self.a = V.real_scalar("a", a, low=0.0, low_open=True)
        self.name = f"1-exp(-{self.a:g}(t+1))"

    def gamma(self, t: Times) -> float | np.ndarray:
        return -np.expm1(-self.a * (np.asarray(t, dtype=float) + 1.0)) if np.ndim(t) else -math.expm1(-self.a * (t + 1.0))

    def product(self, t: Times) -> float | np.ndarray:
        t = _times(t)
        tt = np.asarray(t, dtype=float)
        out = np.exp(-self.a * tt * (tt + 1.0) / 2.0)
        return out if np.ndim(t) else float(out)


class FromValue(Schedule):
    """``gamma^t = h^t / (1 + h^t)`` from the value matrix ``V^t = h^t I`` (Section 1.6).

    ``h`` is a positive number or a callable ``t -> h^t > 0``.

    Examples
    --------
    >>> # V = I: P = (I + V)^{-1} V = I/2
    >>> FromValue(1.0)(np.arange(3))
    array([0.5, 0.5, 0.5])
    >>> # h^t = t + 1: (t+1)/(t+2)
    >>> np.round(FromValue(lambda t: t + 1)(np.arange(3)), 6)
    array([0.5     , 0.666667, 0.75    ])
    """

    def __init__(self, h: float | Callable[[int], float]) -> None:
        self.h: Callable[[int], float]
        if callable(h):
            self.h = h
            self.name = "h/(1+h)"
        else:
            hv = V.real_scalar("h", h, low=0.0, low_open=True)
            self.h = lambda t, hv=hv: hv  # type: ignore[misc]  # mypy cannot type a default-bound lambda
            self.name = f"h/(1+h), h={hv:g}"

    def gamma(self, t: Times) -> float | np.ndarray:
        if np.ndim(t):
            h: float | np.ndarray = np.array([float(self.h(int(s))) for s in np.ravel(t)]).reshape(np.shape(t))
        else:
            h = float(self.h(int(t)))
        if np.any(~np.isfinite(h)) or np.any(h <= 0):
            raise ValueError(f"h must be positive and finite at every t, got {h!r}")
        return h / (1.0 + h)


_NAMES = {
    "constant": Constant,
    "fw": FrankWolfe,
    "harmonic": Harmonic,
    "halving": Halving,
    "to-one": ToOne,
    "value": FromValue,
}


def get_schedule(spec: Schedule | float | str, **params: float) -> Schedule:
    """Build a schedule from a Schedule, a number (constant step) or a name.

    Names: ``"constant"`` (needs ``gamma``), ``"fw"`` (2/(t+2)), ``"harmonic"`` (1/(t+2)),
    ``"halving"`` (2^{-t-1}), ``"to-one"`` (1-e^{-a(t+1)}, optional ``a``), ``"value"`` (needs ``h``).

    Raises
    ------
    ValueError
        Unknown name (the message lists the accepted ones) or a step outside (0, 1].
    TypeError
        ``spec`` of another kind.

    Examples
    --------
    >>> get_schedule("fw"), get_schedule(0.3), get_schedule("to-one", a=1.0)
    (FrankWolfe(2/(t+2)), Constant(0.3), ToOne(1-exp(-1(t+1))))
    >>> get_schedule("harmonic")(0)                       # gamma^0 = 1/2
    0.5
    """
    if isinstance(spec, Schedule):
        if params:
            raise ValueError("schedule parameters cannot be combined with a Schedule object")
        return spec
    if isinstance(spec, numbers.Real) and not isinstance(spec, bool):
        return Constant(cast(float, spec))
    if isinstance(spec, str):
        if spec not in _NAMES:
            raise ValueError(f"schedule must be one of {sorted(_NAMES)} (or a number, or a Schedule), got {spec!r}")
        try:
            return _NAMES[spec](**params)
        except TypeError as exc:
            raise ValueError(f"schedule {spec!r}: {exc}") from None
    raise TypeError(f"schedule must be a Schedule, a number in (0, 1] or a name, got {type(spec).__name__}")
