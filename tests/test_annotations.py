"""Every public callable of the annotated modules carries a type on each parameter and on its return.

(``attention_fw.results`` is not listed: ``Result`` has no public callable of its own, its constructor is
dict's.) The list of modules grows as modules are annotated; a module in it cannot lose its coverage.
"""
import importlib
import inspect

import pytest

ANNOTATED = [
    "attention_fw._validate",
    "attention_fw.model.dynamics",
    "attention_fw.model.schedules",
    "attention_fw.model.frank_wolfe",
    "attention_fw.geometry.planar",
    "attention_fw.geometry.polytope",
    "attention_fw.experiments.model_checks",
    "attention_fw.experiments.convergence",
    "attention_fw.experiments.vertex_limits",
    "attention_fw.experiments.metastability",
    "attention_fw.experiments.exit_times",
    "attention_fw.experiments.survival",
]


def public_callables(mod):
    """(qualified name, function) of every public function, class constructor and public method of ``mod``."""
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    for name in names:
        obj = getattr(mod, name)
        if inspect.isclass(obj) and obj.__module__ == mod.__name__:
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
                fn = fn.fget if isinstance(fn, property) else fn
                if inspect.isfunction(fn) and fn.__module__ == mod.__name__:
                    yield f"{name}.{attr}", fn
        elif inspect.isfunction(obj) and obj.__module__ == mod.__name__:
            yield name, obj


def missing_annotations(fn):
    sig = inspect.signature(fn)
    missing = [p.name for i, p in enumerate(sig.parameters.values())
               if not (i == 0 and p.name in ("self", "cls")) and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


@pytest.mark.parametrize("module", ANNOTATED)
def test_public_signatures_are_annotated(module):
    mod = importlib.import_module(module)
    found = list(public_callables(mod))
    assert found, f"{module} exposes no public callable: the check would be empty"
    gaps = {name: miss for name, fn in found if (miss := missing_annotations(fn))}
    assert not gaps, f"{module}: unannotated parameters or returns: {gaps}"


def test_the_check_sees_a_missing_annotation():
    def f(x, y: int) -> int:
        return y

    def g(x: int):
        return x

    assert missing_annotations(f) == ["x"]
    assert missing_annotations(g) == ["return"]
