"""Named parameter presets for the notebooks, declared once and checked before any computation.

Every chapter declares its parameters once, in its cell tagged ``parameters`` (papermill injects
the values of a run after it; the cell is also tagged ``remove-cell``)::

    preset = "paper"   # "paper": full quality (default); "quick": seconds, for tests
    PARAMETERS = {     # name: (type, accepted values, meaning)
        "beta": ("float", "> 0", "inverse temperature"),
        "runs": ("int", ">= 1", "Monte Carlo runs"),
    }

followed by::

    PRESETS = {"paper": dict(beta=10.0, runs=1000), "quick": dict(beta=4.0, runs=10)}
    p = resolve_declared(PRESETS, preset, PARAMETERS, globals())

``tools/run_notebook.py`` reads the declaration and the preset names from the source
(:func:`read_declaration`, no kernel) and refuses an unknown preset, an unknown name or a value
outside its declaration (:func:`check_run`, :func:`check_value`) before a kernel starts, with one
line naming the parameter, the value and what is accepted. :func:`resolve_declared` applies the
same checks in the kernel (the lab, papermill started by hand) and also checks every preset's own
values. :func:`resolve` is the plain form, for presets without a declaration.
"""
from __future__ import annotations

import numbers
import re
from types import SimpleNamespace
from typing import Any

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


# ------------------------------------------------------------------------------ declarations
# Each chapter declares its parameters once, in its cell tagged ``parameters``::
#
#     preset = "paper"
#     PARAMETERS = {          # name: (type, accepted values, meaning)
#         "cex_steps": ("int", ">= 1", "steps of the exact (Fraction) counterexample"),
#         "gamma": ("float", "(0, 1]", "constant step"),
#         "betas": ("list[float]", "> 0", "inverse temperatures"),
#         "executor": ("str", "", "serial, processes, local-dask or a Dask address"),
#     }
#
# ``tools/run_notebook.py`` reads this literal with :func:`read_declaration` (no kernel) and checks
# every ``-p`` value and the preset name with :func:`check_value` before a kernel starts; in the
# kernel :func:`resolve_declared` applies the same checks (the lab, papermill from elsewhere).

TYPES = ("int", "float", "bool", "str", "list[int]", "list[float]", "list[str]")
"""The parameter types a declaration may name (a list is non-empty; its range applies to each item)."""

_BOUND = re.compile(r"^(>=|>|<=|<)\s*(\S+)$")
_INTERVAL = re.compile(r"^([\[(])\s*([^,\s]+)\s*,\s*([^,\s]+)\s*([\])])$")
_ONE_OF = re.compile(r"^one of\s+(.+)$")


def _number(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not a number") from None


def _range_test(rng: str, where: str):
    """A predicate for the range text of a declaration (see :func:`check_value`)."""
    rng = (rng or "").strip()
    if not rng:
        return lambda v: True
    m = _BOUND.match(rng)
    if m:
        op, b = m.group(1), _number(m.group(2), where)
        return {">=": lambda v: v >= b, ">": lambda v: v > b,
                "<=": lambda v: v <= b, "<": lambda v: v < b}[op]
    m = _INTERVAL.match(rng)
    if m:
        lo_c, lo, hi, hi_c = m.group(1) == "[", _number(m.group(2), where), _number(m.group(3), where), m.group(4) == "]"
        return lambda v: (v >= lo if lo_c else v > lo) and (v <= hi if hi_c else v < hi)
    m = _ONE_OF.match(rng)
    if m:
        allowed = [w.strip() for w in m.group(1).split(",") if w.strip()]
        return lambda v: str(v) in allowed
    raise ValueError(f"{where}: range {rng!r} must be '', '>= a', '> a', '<= a', '< a', "
                     "an interval such as '(0, 1]', or 'one of a, b, c'")


def _of_type(kind: str, value) -> tuple[bool, object]:
    """(whether ``value`` is of the scalar type ``kind``, the value as that type)."""
    if kind == "bool":
        return isinstance(value, bool), value
    if kind == "int":
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        return ok, int(value) if ok else value
    if kind == "float":
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    if kind == "str":
        return isinstance(value, str), value
    raise ValueError(f"unknown type {kind!r}; declare one of {', '.join(TYPES)}")


def expected_text(decl) -> str:
    """What a declaration ``(type, range, meaning)`` accepts, as the messages write it.

    Examples
    --------
    >>> expected_text(("int", ">= 1", "layers")), expected_text(("list[float]", "> 0", "betas"))
    ('int >= 1', 'a non-empty list[float], each > 0')
    """
    kind, rng = decl[0], (decl[1] or "").strip()
    if kind.startswith("list[") and rng:
        return f"a non-empty {kind}, each {rng}"
    if kind.startswith("list["):
        return f"a non-empty {kind}"
    return f"{kind} {rng}".strip()


def check_value(name: str, value, decl):
    """``value`` as the declared type, or ``ValueError`` with one line naming ``name``, the value
    given and what is accepted.

    ``decl`` is ``(type, range, meaning)``: ``type`` one of :data:`TYPES`; ``range`` ``""`` (any),
    ``">= a"``, ``"> a"``, ``"<= a"``, ``"< a"``, an interval ``"[a, b]"``/``"(a, b]"``/...
    or ``"one of a, b, c"``; for a list it applies to each item. ``None`` is always accepted
    (it keeps the preset's value).

    Examples
    --------
    >>> check_value("steps", 5, ("int", ">= 1", "layers"))
    5
    >>> check_value("gamma", 1, ("float", "(0, 1]", "step")), check_value("betas", [2, 4], ("list[float]", "> 0", "b"))
    (1.0, [2.0, 4.0])
    >>> check_value("steps", -5, ("int", ">= 1", "layers"))
    Traceback (most recent call last):
    ...
    ValueError: steps = -5 is not accepted: expected int >= 1 (layers)
    """
    if value is None:
        return None
    if not (isinstance(decl, tuple) and len(decl) == 3 and all(isinstance(x, str) for x in decl)):
        raise ValueError(f"the declaration of {name} must be (type, range, meaning) strings, got {decl!r}")
    kind, rng, meaning = decl
    if kind not in TYPES:
        raise ValueError(f"the declaration of {name}: unknown type {kind!r}; declare one of {', '.join(TYPES)}")
    test = _range_test(rng, f"the declaration of {name}")
    bad = ValueError(f"{name} = {value!r} is not accepted: expected {expected_text(decl)} ({meaning})")
    if kind.startswith("list["):
        if not isinstance(value, (list, tuple)) or not value:
            raise bad
        out = []
        for item in value:
            ok, item = _of_type(kind[5:-1], item)
            if not ok or not test(item):
                raise bad
            out.append(item)
        return out
    ok, value = _of_type(kind, value)
    if not ok or not test(value):
        raise bad
    return value


_PARAMETERS_CELL = re.compile(r"^# %%.*\btags=\[[^\]]*[\"']parameters[\"']", re.M)


def read_declaration(source: str) -> dict:
    """What a chapter source (py:percent text) declares, read without running it.

    Returns
    -------
    dict with ``parameters`` (name -> (type, range, meaning), from the literal ``PARAMETERS``
    of the cell tagged ``parameters``, empty when there is none), ``preset`` (the default preset
    name assigned there) and ``presets`` (the names of the presets: the keys of every top-level
    dict assigned to a name starting with ``PRESETS``; ``None`` if there is none).

    Raises
    ------
    ValueError
        No cell tagged ``parameters``, or a declaration that is not a literal of the documented form.

    Examples
    --------
    >>> src = ('# %% tags=["parameters"]\\npreset = "paper"\\nPARAMETERS = {"steps": ("int", ">= 1", "layers")}\\n'
    ...        '# %%\\nPRESETS = {"paper": dict(steps=100), "quick": dict(steps=5)}\\n')
    >>> d = read_declaration(src)
    >>> d["parameters"], d["preset"], d["presets"]
    ({'steps': ('int', '>= 1', 'layers')}, 'paper', ['paper', 'quick'])
    """
    import ast

    cells = list(_PARAMETERS_CELL.finditer(source))
    if len(cells) != 1:
        raise ValueError(f"expected exactly one cell tagged 'parameters', found {len(cells)}")
    start = cells[0].end()
    nxt = re.compile(r"^# %%", re.M).search(source, start)
    cell = source[source.index("\n", start) + 1 if "\n" in source[start:] else len(source):
                  nxt.start() if nxt else len(source)]
    out: dict[str, Any] = {"parameters": {}, "preset": None, "presets": None}
    for node in ast.parse(cell).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
            if target == "PARAMETERS":
                decl = ast.literal_eval(node.value)
                if not isinstance(decl, dict):
                    raise ValueError("PARAMETERS must be a dict literal")
                for name, item in decl.items():
                    if not (isinstance(name, str) and isinstance(item, tuple) and len(item) == 3
                            and all(isinstance(x, str) for x in item)):
                        raise ValueError(f"PARAMETERS[{name!r}] must be (type, range, meaning) strings, got {item!r}")
                    if item[0] not in TYPES:
                        raise ValueError(f"PARAMETERS[{name!r}]: unknown type {item[0]!r}; one of {', '.join(TYPES)}")
                    _range_test(item[1], f"PARAMETERS[{name!r}]")
                out["parameters"] = decl
            elif target == "preset" and isinstance(node.value, ast.Constant):
                out["preset"] = node.value.value
    names = None
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.startswith("PRESETS") and isinstance(node.value, ast.Dict)):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            names = sorted(set(keys) | set(names or []))
    out["presets"] = names
    return out


def check_run(declaration: dict, preset, overrides: dict) -> dict:
    """The overrides checked against a :func:`read_declaration` result (values as declared).

    Raises ``ValueError`` with one line for an unknown preset, an unknown name or a value
    outside its declaration.

    Examples
    --------
    >>> decl = {"parameters": {"steps": ("int", ">= 1", "layers")}, "presets": ["paper", "quick"]}
    >>> check_run(decl, "quick", {"steps": 7})
    {'steps': 7}
    >>> check_run(decl, "fast", {})
    Traceback (most recent call last):
    ...
    ValueError: preset = 'fast' is not accepted: expected one of paper, quick
    """
    names = declaration.get("presets")
    if preset is not None and names is not None and (not isinstance(preset, str) or preset not in names):
        raise ValueError(f"preset = {preset!r} is not accepted: expected one of {', '.join(names)}")
    decl = declaration["parameters"]
    out = {}
    for name, value in overrides.items():
        if name not in decl:
            raise ValueError(f"{name} is not a parameter of this notebook: accepted parameters are "
                             f"{', '.join(sorted(decl)) or '(none)'} and preset")
        out[name] = check_value(name, value, decl[name])
    return out


def resolve_declared(presets: dict, preset, declared: dict, namespace: dict) -> SimpleNamespace:
    """:func:`resolve` for a chapter that declares its parameters (``PARAMETERS``).

    The value of each declared parameter that ``presets`` holds is taken from ``namespace``
    (the notebook's ``globals()``: papermill's injected cell, or a line added in the lab),
    ``None`` or absent keeping the preset's; every value given, and every preset's own value,
    is checked against the declaration (:func:`check_value`). A declared parameter that no
    ``PRESETS`` dict holds may be resolved by another call (a chapter in parts).

    Raises
    ------
    ValueError
        Unknown preset, a preset key that is not declared, or a value outside its declaration.

    Examples
    --------
    >>> PARAMETERS = {"steps": ("int", ">= 1", "layers")}
    >>> PRESETS = {"paper": dict(steps=100), "quick": dict(steps=5)}
    >>> p = resolve_declared(PRESETS, "quick", PARAMETERS, {"steps": 8})
    >>> p.steps, p.overrides, p.book_values
    (8, {'steps': 8}, {'steps': 100})
    """
    if not isinstance(preset, str) or preset not in presets:
        raise ValueError(f"preset = {preset!r} is not accepted: expected one of {', '.join(sorted(presets))}")
    for pname, values in presets.items():
        for key, value in values.items():
            if key not in declared:
                raise ValueError(f"preset {pname!r} sets {key!r}, which PARAMETERS does not declare")
            check_value(f"{key} (preset {pname!r})", value, declared[key])
    given = {k: check_value(k, namespace.get(k), declared[k]) for k in presets[preset]}
    p = resolve(presets, preset, **given)
    p.declared = {k: declared[k] for k in presets[preset]}
    p.book_values = dict(presets.get("paper", {}))
    return p
