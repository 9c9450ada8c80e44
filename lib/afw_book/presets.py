"""Named parameter presets for the notebooks, with early, explicit validation.

Every notebook has a cell tagged ``parameters`` (papermill injects overrides
after it)::

    preset = "paper"   # "paper": full quality (default); "quick": seconds, for tests
    beta = None        # None: take the value of the preset

followed by::

    PRESETS = {"paper": dict(beta=10.0), "quick": dict(beta=4.0)}
    p = resolve(PRESETS, preset, beta=beta)

``resolve`` fails before any computation when the preset is unknown or an
override has the wrong type, and its message lists what is accepted.
"""
from __future__ import annotations

import numbers
from types import SimpleNamespace

__all__ = ["resolve"]


def _type_ok(default, value) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, numbers.Integral):
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if isinstance(default, numbers.Real):
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if isinstance(default, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            return False
        if default and value:
            return all(_type_ok(default[0], v) for v in value)
        return True
    return isinstance(value, type(default))


def _type_name(default) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, numbers.Integral):
        return "int"
    if isinstance(default, numbers.Real):
        return "float"
    if isinstance(default, (list, tuple)):
        inner = _type_name(default[0]) if default else "any"
        return f"list of {inner}"
    return type(default).__name__


def resolve(presets: dict, preset, **overrides) -> SimpleNamespace:
    """Return the parameters of ``preset`` with the non-``None`` ``overrides`` applied.

    Parameters
    ----------
    presets : dict
        ``{"paper": {...}, "quick": {...}}``; every preset must have the same keys.
    preset : str
        Name of the preset.
    **overrides
        Values from the notebook's ``parameters`` cell; ``None`` keeps the preset's value.

    Returns
    -------
    SimpleNamespace with every parameter of the preset, ``preset`` (its name) and
    ``overrides`` (the non-``None`` overrides, by name, as given).

    Raises
    ------
    ValueError
        Unknown preset (the message lists the accepted names) or unknown parameter.
    TypeError
        An override whose type does not match the preset's value (message gives the expected type).

    Examples
    --------
    >>> PRESETS = {"paper": dict(beta=10.0, runs=1000), "quick": dict(beta=4.0, runs=10)}
    >>> p = resolve(PRESETS, "quick", beta=6, runs=None)
    >>> p.beta, p.runs, p.preset, p.overrides        # the override wins (as a float), None keeps the preset's value
    (6.0, 10, 'quick', {'beta': 6})
    """
    names = sorted(presets)
    if not isinstance(preset, str) or preset not in presets:
        raise ValueError(f"preset must be one of {names}, got {preset!r}")
    base = dict(presets[preset])
    for key, value in overrides.items():
        if key not in base:
            raise ValueError(f"unknown parameter {key!r}; accepted parameters: {sorted(base)}")
        if value is None:
            continue
        if not _type_ok(base[key], value):
            raise TypeError(f"parameter {key} must be {_type_name(base[key])} "
                            f"(preset {preset!r} has {base[key]!r}), got {value!r}")
        if isinstance(base[key], float) and not isinstance(value, bool):
            value = float(value)
        base[key] = value
    base["preset"] = preset
    base["overrides"] = {k: v for k, v in overrides.items() if v is not None}
    return SimpleNamespace(**base)
