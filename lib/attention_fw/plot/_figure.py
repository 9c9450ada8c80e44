"""How a plot function of this package hands back its figure: the numbers travel with it, no file is written."""
from __future__ import annotations

__all__ = ["figure_data", "saved"]

_DATA = "_attention_fw_data"


def figure_data(fig) -> dict | None:
    """The numbers behind a figure drawn by a plot function of :mod:`attention_fw.plot` (``None`` for another figure).

    Examples
    --------
    >>> import matplotlib.figure
    >>> fig = saved(matplotlib.figure.Figure(), "demo", {"x": [1, 2]})
    >>> figure_data(fig)
    {'x': [1, 2]}
    """
    return getattr(fig, _DATA, None)


def saved(fig, name: str, data: dict | None = None):
    """Attach ``data`` (the numbers behind ``fig``) to ``fig`` and return it: the last line of a plot function.

    The plot functions write no files (save the figure with its :func:`figure_data` yourself, as
    the book's ``afw_book.figures.save`` does); ``name`` is the file stem they suggest.
    """
    setattr(fig, _DATA, data)
    return fig
