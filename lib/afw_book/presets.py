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

A declaration may carry a fourth string, what the value needs **given the other parameters of the
run** (:func:`check_requires`): phrases separated by ``;`` among ``at least K items``, ``at most K
items``, ``as many items as NAME``, ``each one of NAME`` (every item is an item of the list
``NAME``; ``each one of package.module.NAME``: of the library's collection, e.g. the names of a
family of configurations), ``contains V`` (the list holds the value ``V``), ``distinct`` (no
item twice), ``< NAME``, ``<= NAME``, ``> NAME``, ``>= NAME`` (against
the scalar ``NAME``; for a list, each item). These are checked on the run's full set of values (the
preset's, read from the literal ``PRESETS`` by :func:`preset_values`, with the overrides), before a
kernel starts where the values can be read from the source, and again in the kernel::

    "hist_betas": ("list[float]", "> 0", "betas of the histograms", "each one of jump_betas"),
    "fit_betas": ("list[float]", "> 0", "betas of the fit", "at least 2 items; distinct"),
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


def _check_decl(name: str, decl) -> None:
    if not (isinstance(decl, tuple) and len(decl) in (3, 4) and all(isinstance(x, str) for x in decl)):
        raise ValueError(f"the declaration of {name} must be (type, range, meaning[, requires]) strings, got {decl!r}")


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
    _check_decl(name, decl)
    kind, rng, meaning = decl[:3]
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
                    if not (isinstance(name, str) and isinstance(item, tuple) and len(item) in (3, 4)
                            and all(isinstance(x, str) for x in item)):
                        raise ValueError(f"PARAMETERS[{name!r}] must be (type, range, meaning[, requires]) "
                                         f"strings, got {item!r}")
                    if item[0] not in TYPES:
                        raise ValueError(f"PARAMETERS[{name!r}]: unknown type {item[0]!r}; one of {', '.join(TYPES)}")
                    _range_test(item[1], f"PARAMETERS[{name!r}]")
                for name, item in decl.items():
                    _requirements(name, item, decl)
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


def check_run(declaration: dict, preset, overrides: dict, values: dict | None = None) -> dict:
    """The overrides checked against a :func:`read_declaration` result (values as declared).

    ``values``: the preset's values that could be read without a kernel (:func:`preset_values`);
    with them, what each parameter requires of the others (:func:`check_requires`) is checked on
    the run's values too (a requirement that names a value not known here waits for the kernel).

    Raises ``ValueError`` with one line for an unknown preset, an unknown name, a value
    outside its declaration or a requirement between parameters that the run's values break.

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
    if values is not None:
        check_requires(decl, {**values, **{k: v for k, v in out.items() if v is not None}})
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
    # what a parameter requires of the others declared in the same part (PRESETS dict)
    check_requires(declared, {k: getattr(p, k) for k in presets[preset]})
    p.declared = {k: declared[k] for k in presets[preset]}
    p.book_values = dict(presets.get("paper", {}))
    return p


# ------------------------------------------------------------------------------ requirements
_REQ_COUNT = re.compile(r"^at (least|most) (\d+) items?$")
_REQ_SAME_LEN = re.compile(r"^as many items as (\w+)$")
_REQ_MEMBER = re.compile(r"^each one of (\w+)$")
_REQ_NAMED = re.compile(r"^each one of ((?:\w+\.)+\w+)$")
_REQ_CONTAINS = re.compile(r"^contains (\S+)$")


def named_values(dotted: str) -> list:
    """The values a dotted library name accepts (``attention_fw.experiments.sabeta.FAMILY``: its
    keys, for a dict), for the phrase ``each one of <module>.<name>``."""
    import importlib

    module, _, attr = dotted.rpartition(".")
    return list(getattr(importlib.import_module(module), attr))
_REQ_COMPARE = re.compile(r"^(>=|>|<=|<) ([A-Za-z_]\w*)$")


def _requirements(name: str, decl, declared: dict) -> list[tuple[str, str | None, Any]]:
    """The phrases of the fourth element of ``decl``: ``(phrase, other parameter or None, test)``
    where ``test(value, other)`` says whether the value meets the phrase."""
    if len(decl) < 4 or not decl[3].strip():
        return []
    where = f"PARAMETERS[{name!r}]"
    is_list = decl[0].startswith("list[")
    out: list[tuple[str, str | None, Any]] = []
    for phrase in (w.strip() for w in decl[3].split(";")):
        other = None
        test: Any
        if (m := _REQ_COUNT.match(phrase)):
            k, least = int(m.group(2)), m.group(1) == "least"
            test = (lambda v, o, k=k: len(v) >= k) if least else (lambda v, o, k=k: len(v) <= k)
        elif phrase == "distinct":
            test = lambda v, o: len(set(v)) == len(v)          # noqa: E731
        elif (m := _REQ_SAME_LEN.match(phrase)):
            other = m.group(1)
            test = lambda v, o: len(v) == len(o)                # noqa: E731
        elif (m := _REQ_MEMBER.match(phrase)):
            other = m.group(1)
            test = lambda v, o: all(item in list(o) for item in v)   # noqa: E731
        elif (m := _REQ_NAMED.match(phrase)):
            test = _named_test(m.group(1))
        elif (m := _REQ_CONTAINS.match(phrase)):
            test = _contains_test(m.group(1))
        elif (m := _REQ_COMPARE.match(phrase)):
            other, op = m.group(2), m.group(1)
            cmp = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b,
                   "<=": lambda a, b: a <= b, "<": lambda a, b: a < b}[op]
            test = ((lambda v, o, cmp=cmp: all(cmp(x, o) for x in v)) if is_list
                    else (lambda v, o, cmp=cmp: cmp(v, o)))
        else:
            raise ValueError(f"{where}: requirement {phrase!r} must be 'at least K items', 'at most K items', "
                             "'as many items as NAME', 'each one of NAME' (a parameter, or a library's "
                             "module.NAME), 'contains VALUE', 'distinct', or '<, <=, >, >= NAME'")
        if phrase != "distinct" and not phrase.startswith(("<", ">")) and not is_list:
            raise ValueError(f"{where}: requirement {phrase!r} is about items, but {name} is a {decl[0]}")
        if other is not None and other not in declared:
            raise ValueError(f"{where}: requirement {phrase!r} names {other!r}, which PARAMETERS does not declare")
        out.append((phrase, other, test))
    return out


def _named_test(dotted: str):
    def test(v, o):
        return all(item in named_values(dotted) for item in v)
    return test


def _contains_test(want: str):
    def same(item) -> bool:
        if isinstance(item, numbers.Real) and not isinstance(item, bool):
            try:
                return item == float(want)
            except ValueError:
                return False
        return str(item) == want

    def test(v, o):
        return any(same(item) for item in v)
    return test


def requires_text(decl) -> str:
    """The fourth element of a declaration (what it requires of the others), or ``""``."""
    return decl[3].strip() if len(decl) > 3 else ""


def check_requires(declared: dict, values: dict) -> None:
    """Check what each declared parameter requires of the others (the fourth element of its
    declaration) on one run's ``values`` (name -> value; a parameter missing there is not checked).

    Raises
    ------
    ValueError
        One line naming the parameter, its value, the phrase it breaks and the other parameter's value.

    Examples
    --------
    >>> declared = {"betas": ("list[float]", "> 0", "all betas"),
    ...             "shown": ("list[float]", "> 0", "betas shown", "each one of betas; at most 3 items")}
    >>> check_requires(declared, {"betas": [1.0, 2.0], "shown": [2.0]})
    >>> check_requires(declared, {"betas": [1.0, 2.0], "shown": [3.0]})
    Traceback (most recent call last):
    ...
    ValueError: shown = [3.0] is not accepted: expected each one of betas (here [1.0, 2.0]) (betas shown)
    """
    for name, decl in declared.items():
        if name not in values or values[name] is None:
            continue
        for phrase, other, test in _requirements(name, decl, declared):
            if other is not None and values.get(other) is None:
                continue                                   # not known here: the kernel checks it
            if not test(values[name], values.get(other)):
                said = (f"a list that {phrase}" if phrase.startswith("contains") else phrase) \
                    + (f" (here {values[other]!r})" if other is not None else "")
                if (m := _REQ_NAMED.match(phrase)):
                    said = f"each one of {', '.join(map(repr, named_values(m.group(1))))}"
                raise ValueError(f"{name} = {values[name]!r} is not accepted: expected {said} ({decl[2]})")


def _number_expr(node):
    """The value of a literal, or of a number expression (``10**7``, ``-1e3``, ``2 * 1024``)."""
    import ast

    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
        a, b = _number_expr(node.left), _number_expr(node.right)
        if not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in (a, b)):
            raise ValueError("not a number expression")
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        return a / b if isinstance(node.op, ast.Div) else a ** b
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_number_expr(e) for e in node.elts]
    return ast.literal_eval(node)


def preset_values(source: str, preset: str | None = None) -> dict:
    """The values of ``preset`` (default: the chapter's default preset) that the chapter source
    gives as literals in its ``PRESETS*`` dicts (``dict(name=literal, ...)``), read without running
    it; a value written as an expression of the code (``list(FAMILY)``) is left out.

    Examples
    --------
    >>> src = ('# %% tags=["parameters"]\\npreset = "paper"\\nPARAMETERS = {}\\n# %%\\n'
    ...        'PRESETS = {"paper": dict(steps=10**3, betas=[1.0, 2.0], names=list(X)), "quick": dict(steps=5)}\\n')
    >>> preset_values(src), preset_values(src, "quick")
    ({'steps': 1000, 'betas': [1.0, 2.0]}, {'steps': 5})
    """
    import ast

    if preset is None:
        preset = read_declaration(source)["preset"]
    out: dict = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.startswith("PRESETS") and isinstance(node.value, ast.Dict)):
            continue
        for key, value in zip(node.value.keys, node.value.values):
            if not (isinstance(key, ast.Constant) and key.value == preset and isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Name) and value.func.id == "dict"):
                continue
            for kw in value.keywords:
                try:
                    out[kw.arg] = _number_expr(kw.value)
                except (ValueError, TypeError, SyntaxError, ZeroDivisionError, OverflowError):
                    pass
    return out
