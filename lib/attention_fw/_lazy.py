"""Sub-modules of a package imported when first used (PEP 562): the one ``__getattr__`` and
``__dir__`` of the packages that defer theirs (``attention_fw``, ``attention_fw.experiments``)."""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from types import ModuleType


def submodules(package: str, names: Iterable[str]) -> tuple[Callable[[str], ModuleType], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``package.<name>`` imports the sub-module
    ``name`` (one of ``names``) on first use; ``dir(package)`` lists them before they are."""
    lazy = tuple(names)

    def __getattr__(name: str) -> ModuleType:
        if name in lazy:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *lazy})

    return __getattr__, __dir__
