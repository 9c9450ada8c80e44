"""Every path the project writes or reads, anchored on the repository root.

Nothing else in the library builds paths from the working directory, so
notebooks, tests and scripts behave the same wherever they are started.
``ATTENTION_FW_FIGURES`` overrides the figure folder (the tests use it to
write into a temporary directory).
"""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""Repository root (the folder holding ``_config.yml``)."""

BOOK = ROOT / "book"
BUILD = ROOT / "_build"
CACHE = ROOT / ".cache"
PUBLISHED_DATA = BOOK / "data" / "published-figures.json"
"""Geometry read from the authors' published figure PDFs, with provenance (each file's SHA-256).

Committed with the book, so the comparison with the published figures needs nothing outside
the repository; ``make published-data PDFS=dir`` rewrites it from a folder holding the PDFs
(``tools/published_data.py``).
"""


def figures_dir() -> Path:
    """Folder for generated figures (``figures/`` unless ``ATTENTION_FW_FIGURES`` is set)."""
    env = os.environ.get("ATTENTION_FW_FIGURES")
    return Path(env).resolve() if env else ROOT / "figures"


def figure_data_dir() -> Path:
    """Folder for the numbers behind each figure: ``<figures>/data``."""
    return figures_dir() / "data"
