"""The figure style of the book, as values and as a context: nothing is changed at import.

``with style(): ...`` draws (and saves) with the book's fonts and sizes and restores the
caller's rcParams afterwards; :data:`STYLE` is the same as a plain dict. :data:`VENUES` and
:func:`venue_rc` give the column widths and font sizes of paper venues (ICML, NeurIPS, arXiv).

Examples
--------
>>> import matplotlib
>>> before = dict(matplotlib.rcParams)
>>> with style():
...     matplotlib.rcParams["font.size"]
9.0
>>> dict(matplotlib.rcParams) == before          # restored on exit
True
"""
from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from typing import Any, cast

import matplotlib

__all__ = ["STYLE", "VENUES", "ONE_COLUMN", "TWO_COLUMN", "TEX_PROGRAMS", "style", "venue_rc", "tex_missing"]

# Widths in inches for a one-column and a two-column paper layout.
ONE_COLUMN = 3.4
"""Width in inches of a one-column figure."""
TWO_COLUMN = 7.0
"""Width in inches of a two-column figure."""

# Column and text widths (inches) and font sizes (points) of paper venues, for
# ``make figure ARGS="... --style <venue>"`` (:func:`venue_rc`). Sources:
#  * icml: icml2025.sty sets \textwidth 6.75in and \columnsep 0.25in on US letter, two columns,
#    so \columnwidth = 3.25in; body 10pt Times (captions \small = 9pt).
#  * neurips: neurips_2025.sty: one column, textwidth=5.5in (geometry), body 10pt Times.
#  * arxiv-1col / arxiv-2col: LaTeX's standard article class at 10pt on US letter (size10.clo),
#    the layout of a preprint without a venue style: one column 345pt = 4.77in; with the
#    twocolumn option \textwidth 469pt = 6.49in, \columnsep 10pt, \columnwidth 229.5pt = 3.17in;
#    Computer Modern.
# In every 10pt class \small is 9pt and \footnotesize 8pt: labels and titles are set at 9pt,
# tick labels and legends at 8pt, so the figure's text matches the captions around it.
VENUES: dict[str, dict[str, Any]] = {
    "icml": dict(column=3.25, text=6.75, font=10, serif="Times"),
    "neurips": dict(column=5.5, text=5.5, font=10, serif="Times"),
    "arxiv-1col": dict(column=4.77, text=4.77, font=10, serif="Computer Modern"),
    "arxiv-2col": dict(column=3.17, text=6.49, font=10, serif="Computer Modern"),
}
"""Column and text widths (inches), body font size (points) and serif family of each venue."""

STYLE: dict[str, Any] = {
    "font.family": "serif",
    "font.serif": ["cmr10", "DejaVu Serif"],
    "mathtext.fontset": "cm",
    "axes.formatter.use_mathtext": True,
    "axes.unicode_minus": False,
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "figure.dpi": 100,
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "savefig.transparent": False,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.02,
    "svg.hashsalt": "attention-fw",
    "svg.fonttype": "path",
    "pdf.fonttype": 42,
    "lines.linewidth": 1.2,
    "axes.grid": False,
    "text.usetex": False,
    "path.simplify": False,
}
"""The book's rcParams, mathtext with Computer Modern (no TeX needed), 9 pt text, white background."""


@contextlib.contextmanager
def style(rc: dict | None = None) -> Iterator[None]:
    """Draw with :data:`STYLE` (updated by ``rc``, e.g. ``venue_rc("icml")``) inside the block.

    The caller's rcParams are restored on exit, also when the block raises.
    """
    with matplotlib.rc_context(cast(Any, {**STYLE, **(rc or {})})):
        yield


TEX_PROGRAMS = ("latex", "dvipng", "kpsewhich")
"""What matplotlib's ``text.usetex`` needs on PATH (``latex`` for the text, ``dvipng`` for PNG)."""


def tex_missing() -> list[str]:
    """The programs of :data:`TEX_PROGRAMS` that are not on PATH (empty: TeX is usable)."""
    return [p for p in TEX_PROGRAMS if shutil.which(p) is None]


def venue_rc(style: str | None = None, usetex: bool = False) -> dict:
    """rcParams for a venue's fonts (see :data:`VENUES`) and optionally LaTeX text.

    ``style=None`` and ``usetex=False`` give ``{}``: the book's own style, unchanged.

    Raises
    ------
    ValueError
        Unknown ``style``.
    RuntimeError
        ``usetex`` without a TeX installation (the message names the missing programs and
        how to install them).
    """
    rc: dict = {}
    if style is not None:
        if style not in VENUES:
            raise ValueError(f"style must be one of {sorted(VENUES)}, got {style!r}")
        v = VENUES[style]
        small, footnote = v["font"] - 1, v["font"] - 2
        rc.update({"font.size": small, "axes.titlesize": small, "axes.labelsize": small,
                   "legend.fontsize": footnote, "xtick.labelsize": footnote,
                   "ytick.labelsize": footnote})
        if v["serif"] == "Times":  # STIX is matplotlib's bundled Times-like font (text and math)
            rc.update({"font.serif": ["STIXGeneral", "DejaVu Serif"], "mathtext.fontset": "stix"})
    if usetex:
        missing = tex_missing()
        if missing:
            raise RuntimeError(
                "--usetex needs a TeX installation, and " + ", ".join(missing) + " "
                + ("is" if len(missing) == 1 else "are") + " not on PATH. Install one (Debian/Ubuntu: "
                "sudo apt-get install texlive-latex-extra texlive-fonts-recommended cm-super dvipng) "
                "or leave out --usetex: without it the text is drawn by matplotlib's mathtext, "
                "which needs no TeX.")
        times = style is not None and VENUES[style]["serif"] == "Times"
        rc.update({"text.usetex": True, "font.family": "serif",
                   "text.latex.preamble": r"\usepackage{amsmath,amssymb,mathrsfs}"
                   + (r"\usepackage{mathptmx}" if times else "")})
    return rc
