"""The library's version, written only here (``lib/pyproject.toml`` reads it; see CHANGELOG.md)."""

__all__ = ["__version__"]

__version__ = "0.3.0"
