"""Every path the project writes or reads, anchored on the repository root.

The root is *found*, never derived from where this file is installed: it is
``$ATTENTION_FW_ROOT`` if set, else the nearest folder at or above the working directory that
holds the book (``_config.yml``, ``_toc.yml`` and ``book/``). Notebooks (run from ``book/``),
tests, scripts and the Sphinx build all start inside the repository, so they agree; nothing
else builds paths from the working directory. ``ATTENTION_FW_FIGURES`` overrides the figure
folder (the tests use it to write into a temporary directory).

``ROOT``, ``BOOK``, ``BUILD``, ``CACHE`` and ``PUBLISHED_DATA`` are looked up when first used,
so that importing this module works anywhere.
"""
from __future__ import annotations

import os
from pathlib import Path

# ROOT, BOOK, BUILD, CACHE and PUBLISHED_DATA are attributes too, found on first use (``__getattr__``).
__all__ = ["MARKERS", "find_root", "figures_dir", "figure_data_dir"]

MARKERS = ("_config.yml", "_toc.yml", "book")
"""What makes a folder the repository root: the Jupyter Book configuration, its table of contents, ``book/``."""


def find_root(start: str | Path | None = None) -> Path:
    """The repository root: ``$ATTENTION_FW_ROOT``, else the nearest folder at or above ``start``
    (default: the working directory) holding every one of :data:`MARKERS`.

    Raises
    ------
    FileNotFoundError
        No such folder (the message says how to point at the repository).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     root = Path(tmp).resolve()
    ...     for name in ("_config.yml", "_toc.yml"):
    ...         _ = (root / name).write_text("")
    ...     (root / "book" / "data").mkdir(parents=True)
    ...     find_root(root / "book" / "data") == root
    True
    """
    env = os.environ.get("ATTENTION_FW_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if all((folder / m).exists() for m in MARKERS):
            return folder
    raise FileNotFoundError(f"no book repository (a folder with {', '.join(MARKERS)}) at or above {here}: "
                            "run from inside the repository or set ATTENTION_FW_ROOT")


_DERIVED = {
    "ROOT": lambda root: root,
    "BOOK": lambda root: root / "book",
    "BUILD": lambda root: root / "_build",
    "CACHE": lambda root: root / ".cache",
    # Geometry read from the authors' published figure PDFs, with provenance (each file's SHA-256).
    # Committed with the book, so the comparison with the published figures needs nothing outside
    # the repository; ``make published-data PDFS=dir`` rewrites it from a folder holding the PDFs
    # (``tools/published_data.py``).
    "PUBLISHED_DATA": lambda root: root / "book" / "data" / "published-figures.json",
}


def __getattr__(name: str) -> Path:
    if name in _DERIVED:
        return _DERIVED[name](find_root())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def figures_dir() -> Path:
    """Folder for generated figures (``<root>/figures`` unless ``ATTENTION_FW_FIGURES`` is set)."""
    env = os.environ.get("ATTENTION_FW_FIGURES")
    return Path(env).resolve() if env else find_root() / "figures"


def figure_data_dir() -> Path:
    """Folder for the numbers behind each figure: ``<figures>/data``."""
    return figures_dir() / "data"
