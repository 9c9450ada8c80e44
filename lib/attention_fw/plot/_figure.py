"""How a plot function of this package hands back its figure: the numbers travel with it, no file is written."""
from __future__ import annotations

import warnings

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


def saved(fig, name: str, data: dict | None = None, outdir=None, formats=None):
    """Attach ``data`` (the numbers behind ``fig``) to ``fig`` and return it: the last line of a plot function.

    ``outdir`` and ``formats`` are accepted for one release only and ignored: the plot functions
    no longer write files (save the figure with its :func:`figure_data` yourself, as the book's
    ``afw_book.figures.save`` does).
    """
    if outdir is not None or formats is not None:
        warnings.warn(f"{name}: plot functions no longer write files; outdir and formats are ignored "
                      "(save the returned figure and figure_data(fig) yourself)", DeprecationWarning, stacklevel=3)
    setattr(fig, _DATA, data)
    return fig
