"""Input checks shared by the public functions.

Every check raises ``ValueError`` (or ``TypeError`` for a wrong kind of object)
with a message that names the argument and says what was expected.
"""
from __future__ import annotations

import math
import numbers
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

#: What an ``rng`` argument accepts: a Generator, an int seed, a SeedSequence or None.
SeedLike: TypeAlias = np.random.Generator | int | np.integer | np.random.SeedSequence | None

__all__ = ["as_float_array", "require_finite", "tokens", "square_matrix", "psd_matrix", "batch", "real_scalar",
           "positive_int", "rng", "seed_record", "GAMMA_INTERVAL", "step_size"]

GAMMA_INTERVAL = "(0, 1]"
"""The step sizes every dynamics accepts (steps, rules, exit-time simulators): ``0 < gamma <= 1``.
Bounds of the paper's theorems that need ``gamma < 1`` ask for it with ``theorem=...``, naming it."""


def as_float_array(name: str, value: npt.ArrayLike, *, ndim: int | None = None, min_ndim: int | None = None,
                   max_ndim: int | None = None, last_dim: int | None = None, finite: bool = True,
                   allow_empty: bool = False) -> np.ndarray:
    """Convert ``value`` to a float64 array and check its shape and values."""
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be an array of real numbers, got {type(value).__name__}")
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} must be a rectangular array of real numbers ({exc})") from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {arr.shape}")
    if min_ndim is not None and arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {arr.shape}")
    if max_ndim is not None and arr.ndim > max_ndim:
        raise ValueError(f"{name} must have at most {max_ndim} dimensions, got shape {arr.shape}")
    if last_dim is not None and (arr.ndim == 0 or arr.shape[-1] != last_dim):
        raise ValueError(f"{name} must have last dimension {last_dim}, got shape {arr.shape}")
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    if finite:
        require_finite(name, arr)
    return arr


def require_finite(name: str, arr: np.ndarray) -> None:
    """Raise ``ValueError`` naming ``name`` unless every entry of ``arr`` is finite."""
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")


def tokens(name: str, x: npt.ArrayLike, *, batched_ok: bool = True, finite: bool = True) -> np.ndarray:
    """Tokens as an array of shape (..., n, d) with n >= 1, d >= 1.

    ``finite=False`` defers the finiteness check to a caller that reads the tokens anyway
    (it must then call :func:`require_finite` before using a result).
    """
    arr = as_float_array(name, x, min_ndim=2, max_ndim=3 if batched_ok else 2, finite=finite)
    if arr.shape[-2] < 1 or arr.shape[-1] < 1:
        raise ValueError(f"{name} must have shape (n, d) or (R, n, d) with n, d >= 1, got {arr.shape}")
    return arr


def square_matrix(name: str, m: npt.ArrayLike, d: int | None = None, *, symmetric: bool = False,
                  tol: float = 1e-12) -> np.ndarray:
    """A d x d real matrix (optionally checked symmetric up to ``tol`` relative)."""
    arr = as_float_array(name, m, ndim=2)
    if arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {arr.shape}")
    if d is not None and arr.shape[0] != d:
        raise ValueError(f"{name} must be {d} x {d} to match the tokens' dimension, got {arr.shape}")
    if symmetric:
        scale = max(1.0, float(np.abs(arr).max()))
        if np.abs(arr - arr.T).max() > tol * scale:
            raise ValueError(f"{name} must be symmetric (the Frank-Wolfe reading needs B = B^T)")
    return arr


def psd_matrix(name: str, m: npt.ArrayLike, d: int | None = None) -> np.ndarray:
    """A symmetric positive semidefinite d x d matrix (eigenvalues >= -1e-12 relative)."""
    arr = square_matrix(name, m, d, symmetric=True)
    w = np.linalg.eigvalsh(arr)
    if w.min() < -1e-12 * max(1.0, abs(w).max()):
        raise ValueError(f"{name} must be positive semidefinite, got eigenvalue {w.min():.3g}")
    return arr


def batch(name: str, x: npt.ArrayLike) -> tuple[np.ndarray, bool]:
    """Tokens as a batch (R, n, d), and whether a single system (n, d) was given."""
    arr = tokens(name, x)
    return (arr[None], True) if arr.ndim == 2 else (arr, False)


def real_scalar(name: str, value: object, *, low: float | None = None, high: float | None = None,
                low_open: bool = False, high_open: bool = False, finite: bool = True) -> float:
    """A real number in [low, high] (ends open where asked)."""
    if type(value) is not float and (isinstance(value, bool) or
                                     not isinstance(value, (numbers.Real, np.floating, np.integer))):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if math.isnan(v) or (finite and math.isinf(v)):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    lo_bad = low is not None and (v <= low if low_open else v < low)
    hi_bad = high is not None and (v >= high if high_open else v > high)
    if lo_bad or hi_bad:
        lb = "(" if low_open else "["
        hb = ")" if high_open else "]"
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        raise ValueError(f"{name} must lie in {lb}{lo}, {hi}{hb}, got {value!r}")
    return v


def step_size(name: str, value: object, *, theorem: str | None = None) -> float:
    """A step size in :data:`GAMMA_INTERVAL`, ``(0, 1]``; in ``(0, 1)`` where ``theorem`` (the hypothesis's
    source, named in the message) needs ``gamma < 1``."""
    g = real_scalar(name, value, low=0.0, high=1.0, low_open=True)
    if theorem is not None and g >= 1.0:
        raise ValueError(f"{name} must lie in (0, 1) for {theorem} (its hypothesis gamma < 1), got {value!r}")
    return g


def positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    """An integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def rng(name: str, seed: object) -> np.random.Generator:
    """A numpy Generator from a seed, a SeedSequence or a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, (numbers.Integral, np.random.SeedSequence)) and not isinstance(seed, bool):
        return np.random.default_rng(seed)  # type: ignore[arg-type]  # numpy's stubs omit numbers.Integral
    raise TypeError(f"{name} must be an int seed, a SeedSequence or a numpy Generator, got {type(seed).__name__}")


def seed_record(rng: object) -> int | None:
    """What results and data files record of an ``rng`` argument: an int seed as itself, anything
    else (a SeedSequence, a Generator, None) as None."""
    if isinstance(rng, (numbers.Integral, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        return int(rng)
    return None
