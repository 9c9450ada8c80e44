"""One save function for every figure of the book (the style itself is :mod:`attention_fw.plot.style`).

``save`` writes a figure as vector PDF (for papers), PNG and SVG (for the web),
plus the numbers behind it as JSON, with three guarantees:

* atomic: each file is rendered in memory, then written to a temporary file in
  the same folder and renamed over the old one, with SIGINT/SIGTERM held back
  during the write and the rename. An interrupted run leaves either the old
  file or the new one, never a torn file or a temporary file;
* byte-reproducible: dates and tool versions are stripped from the metadata
  and the SVG ids are salted with a fixed string, so regenerating a figure
  from the same numbers gives identical bytes;
* opaque: white background, so figures read in dark mode too;
* described: the data JSON carries a ``meta`` entry with the figure's layout as saved
  (:func:`layout`: size in inches, smallest and largest font size, number and widths of
  panels), merged with what the caller passes as ``meta`` (chapter, statement, caption,
  command; see :mod:`afw_book.notebook`). The book checks legibility on the page from it.

Where files go is decided in one place, :func:`output_dir`. Venue layouts for papers (column
widths and font sizes of ICML, NeurIPS, arXiv) are in :data:`VENUES`.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import logging
import signal
import threading
from pathlib import Path
from typing import Any, cast

import matplotlib
import matplotlib.figure
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.spines import Spine
from matplotlib.text import Text

from attention_fw.plot.style import (ONE_COLUMN, STYLE, TEX_PROGRAMS, TWO_COLUMN, VENUES, style, tex_missing,
                                     venue_rc)

from . import legibility, paths

__all__ = ["FORMATS", "PNG_DPI", "ONE_COLUMN", "TWO_COLUMN", "STYLE", "VENUES", "TEX_PROGRAMS", "style", "venue_rc",
           "tex_missing", "use_style", "output_dir", "write_bytes_atomic", "layout", "pieces", "figure_bytes",
           "render_formats", "saved", "save"]

FORMATS = ("pdf", "png", "svg")
PNG_DPI = 200

# What makes the files reproducible and opaque, whatever the caller's rcParams at saving time.
_SAVE_RC = {k: v for k, v in STYLE.items() if k.startswith(("savefig.", "svg.", "pdf."))}
_PAD = float(cast(float, _SAVE_RC["savefig.pad_inches"]))     # the margin of the tight crop (inches)

_METADATA = {
    "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
    "svg": {"Date": None, "Creator": None},
    "png": {"Software": None},
}


def use_style() -> None:
    """Apply the book's figure style for the rest of the session (a chapter's first cell calls it).

    This is the book's explicit, global switch (the library itself changes nothing at import;
    elsewhere use ``with style(): ...``).
    """
    matplotlib.rcParams.update(cast(Any, STYLE))


def output_dir(canonical: bool = True, preset: str | None = None) -> Path:
    """The one rule for where figure files go.

    * ``canonical``: the published parameters (a paper figure with its defaults, or a chapter run
      in the ``paper`` preset without overrides) go to :func:`afw_book.paths.figures_dir`
      (``figures/``, or ``$ATTENTION_FW_FIGURES``);
    * ``preset``: a chapter run in another named preset without overrides goes to that preset's own
      folder, ``presets/<preset>/`` (``make figures PRESET=quick`` never touches the book's files,
      and two presets never share a file);
    * anything else goes to ``custom/``, where every file name carries its parameters
      (:func:`run_tag`), so that two different commands never write the same file.

    When the figure folder is itself a ``custom`` folder (``make notebook`` sets
    ``ATTENTION_FW_FIGURES=figures/custom``), everything goes there: never ``custom/custom``.
    """
    base = paths.figures_dir()
    if canonical or base.name == "custom":
        return base
    if preset is not None:
        if not isinstance(preset, str) or not preset.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"preset must be a name of letters, digits, '-' or '_', got {preset!r}")
        return base / "presets" / preset
    return base / "custom"


def _tag_word(value) -> str:
    if isinstance(value, (list, tuple, np.ndarray)):
        return "-".join(_tag_word(v) for v in np.asarray(value, dtype=object).ravel().tolist())
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        v = float(value)
        text = str(int(v)) if v.is_integer() else repr(v)
    else:
        text = str(value)
    text = text.replace(".", "p").replace("-", "m").replace("+", "")
    return "".join(c for c in text if c.isalnum() or c == "_")


def run_tag(params: dict, width: int = 40) -> str:
    """A file-name tag for a run with ``params``: readable words and a short hash of all of them.

    The words (``kappas-6``, ``seed-7``, ``gamma-0p3`` ..., in the order of the names) say what was changed, at most
    ``width`` characters of them; the 6 hexadecimal digits of the SHA-256 of the parameters
    (sorted keys, JSON) keep two different runs apart even when the words are cut or coincide.
    The same parameters give the same tag (a rerun replaces its own files, and nothing else).
    ``{}`` gives ``""``.

    >>> run_tag({"kappas": [6], "seed": 7})
    'kappas-6_seed-7-0062af'
    >>> run_tag({"kappas": [6], "seed": 7}) != run_tag({"kappas": [6], "seed": 8})
    True
    """
    if not params:
        return ""
    words = "_".join(f"{_tag_word(k)}-{_tag_word(params[k])}" for k in sorted(params))[:width].strip("_-")
    digest = hashlib.sha256(json.dumps(_jsonable(params), sort_keys=True).encode()).hexdigest()[:6]
    return f"{words}-{digest}"


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        if not np.isfinite(v):
            raise ValueError(f"figure data must be finite, got {v}")
        return v
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


@contextlib.contextmanager
def _signals_held():
    """Hold back SIGINT and SIGTERM while a file is replaced, then deliver them.

    A signal mask would not do: it applies to the calling thread only, and a process-directed
    signal is then delivered to another thread (numpy's BLAS pool), whose default action ends
    the process mid-write. Python-level handlers are process-wide: they record the signal,
    and after the write the previous handlers are restored and the signal is raised again
    (default action, KeyboardInterrupt or the caller's own handler). Main thread only; in
    other threads the write is not protected.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending = []
    sigs = (signal.SIGINT, signal.SIGTERM)
    old = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)  # None: set outside Python
        for s in dict.fromkeys(pending):
            signal.raise_signal(s)


def write_bytes_atomic(path: Path, payload: bytes) -> Path:
    """Replace ``path`` by ``payload`` atomically (see the module docstring)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with _signals_held():
        try:
            with open(tmp, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
    _log_written(path)
    return path


def _drawn_texts(artist):
    """The non-empty Text artists that a draw of ``artist`` paints (invisible subtrees, and the
    axis decorations of an Axes drawn with ``axis("off")``, are skipped)."""
    if not artist.get_visible():
        return
    if isinstance(artist, Text):
        if artist.get_text().strip():
            yield artist
        return
    children = artist.get_children()
    if isinstance(artist, Axes) and not artist.axison:
        children = [c for c in children if not isinstance(c, (Axis, Spine))]
    for child in children:
        yield from _drawn_texts(child)


def _png_size(png: bytes) -> tuple[int, int]:
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def layout(fig, png: bytes | None = None, dpi: int = PNG_DPI, bbox=None, illegible: list[str] | None = None) -> dict:
    """How ``fig`` is laid out once saved; call it after the figure has been drawn (saved).

    ``bbox``: the region saved (inches), when it is not the tight crop (see :func:`figure_bytes`).

    Returns
    -------
    dict with ``size_in`` ([width, height] of the saved, tightly cropped figure in inches: from
    the PNG when ``png`` is given, else from the tight bounding box), ``font_pt`` ([smallest,
    largest] font size in points of the text artists drawn), ``panels`` (number of visible
    axes, colour bars excepted), ``panel_widths_in`` (their widths in inches, in
    ``fig.axes`` order), ``pieces_in`` (:func:`pieces`: the saved figure cut into its
    columns of panels, for a narrow screen) and ``legibility`` (:func:`afw_book.legibility.problems`:
    texts under 8 pt, overlapping texts, legends or boxes over data; empty when legible).
    Displayed at ``w`` CSS px, a text of ``s`` pt is
    ``s / 72 * w / size_in[0]`` px high and a panel ``width * w / size_in[0]`` px wide.
    """
    with _renderer_at(fig, dpi) as renderer:    # the PNG's own, after a PNG save at dpi
        box = bbox if bbox is not None else fig.get_tightbbox(renderer).padded(_PAD)
        cut = pieces(fig, renderer, box)
        if illegible is None:       # measured on this renderer (save measures before it renders)
            illegible = legibility.problems(fig, renderer)
    if png is not None:
        w, h = _png_size(png)
        size = [w / dpi, h / dpi]
    else:
        size = [box.width, box.height]
    sizes = [float(t.get_fontsize()) for t in _drawn_texts(fig)]
    panels = [ax for ax in fig.axes if ax.get_visible() and getattr(ax, "_colorbar", None) is None]
    width = fig.get_figwidth()
    return {"size_in": [round(float(x), 4) for x in size],
            "font_pt": [round(min(sizes), 3), round(max(sizes), 3)] if sizes else [],
            "panels": len(panels),
            "panel_widths_in": [round(float(ax.get_position().width * width), 4) for ax in panels],
            "pieces_in": cut,
            "legibility": illegible}


@contextlib.contextmanager
def _renderer_at(fig, dpi):
    """The figure's renderer at ``dpi``, with the figure at that dpi meanwhile (as during a save).

    On an Agg canvas (the book's, pyplot's, the notebooks'), right after a PNG save at ``dpi`` this
    is the renderer of that save, whose text measurements are cached: the tight crop and the
    panels' boxes measured here are the PNG's own, without measuring every text again (at the
    figure's own dpi, most of the cost of the crop). Another canvas: its renderer at ``dpi``."""
    canvas = fig.canvas
    manager, old = getattr(canvas, "manager", None), fig.dpi
    canvas.manager = None               # as savefig: no window is resized meanwhile
    fig.dpi = dpi
    try:
        with _shared_mathtext():
            yield canvas.get_renderer() if hasattr(canvas, "get_renderer") else fig._get_renderer()
    finally:
        fig.dpi = old
        canvas.manager = manager


def _meet(a0: float, a1: float, b0: float, b1: float) -> bool:
    """Whether the intervals [a0, a1] and [b0, b1] overlap (by more than 1e-6)."""
    return min(a1, b1) - max(a0, b0) > 1e-6


def _span(ax, along: str) -> tuple[float, float]:
    """The extent of ``ax``'s position (figure fraction) along ``"x"`` or ``"y"``."""
    pos = ax.get_position()
    return (pos.x0, pos.x1) if along == "x" else (pos.y0, pos.y1)


def _bands(axes: list, along: str) -> list[list]:
    """``axes`` grouped by overlapping extents along ``"x"`` (columns, left first) or ``"y"``
    (rows, top first): ``[[[lo, hi], axes], ...]``. Taken in order of the extents' leading edge,
    an axis overlaps at most the last group, so the groups stay disjoint."""
    lead = (lambda a: _span(a, "x")[0]) if along == "x" else (lambda a: -_span(a, "y")[1])
    groups: list[list] = []
    for ax in sorted(axes, key=lead):
        lo, hi = _span(ax, along)
        for g in groups:
            if _meet(g[0][0], g[0][1], lo, hi):
                g[0] = [min(g[0][0], lo), max(g[0][1], hi)]
                g[1].append(ax)
                break
        else:
            groups.append([[lo, hi], [ax]])
    return groups


def _grid_cells(main: list, columns: list) -> dict | None:
    """``{(row, column): axes}`` when the panels ``main`` form rows (:func:`_bands` along y) as
    well as the ``columns`` of :func:`pieces` and every colour bar lies within one row; None for
    fewer than two rows or a colour bar across rows."""
    rows = _bands(main, "y")
    if len(rows) < 2:
        return None
    cells: dict[tuple[int, int], list] = {}
    for c, (_, members) in enumerate(columns):
        for ax in members:
            y0, y1 = _span(ax, "y")
            overlaps = [r for r, (band, _) in enumerate(rows) if _meet(band[0], band[1], y0, y1)]
            if len(overlaps) != 1:     # a colour bar over several rows (or none): columns only
                return None
            cells.setdefault((overlaps[0], c), []).append(ax)
    return cells


def pieces(fig, renderer, box) -> list[list[float]]:
    """The saved figure cut into the pieces a narrow screen shows one under the other, from the
    bounding boxes matplotlib draws (not from the pixels): ``[[left, top, right, bottom], ...]``
    in inches from the top-left corner of the saved image ``box`` (a Bbox in inches), in reading
    order. [] for a figure of one column of panels.

    A column is a group of panels (visible axes) whose axes overlap horizontally; a colour bar
    joins the column it is drawn beside, an inset or twin axes the column of its parent. Each
    column's piece spans the drawn extent (tick labels, titles, legends included) of its axes
    and runs over the height of the panels; a figure-level legend, text or title above or below
    the panels, or beside them but over several columns, becomes a piece of its own (its own
    extent), before or after the columns; so does a colour bar across several columns.
    When the panels also form rows (groups whose axes overlap vertically, each panel in one row
    and one column, no colour bar across rows), each column is cut at the rows and the pieces
    run row by row, so that a phone reads (a), (b), (c), ... in the order of their labels; a
    piece then spans its column's width and its row's drawn height.
    Neighbouring pieces may share a strip of the image (a label that reaches into the next
    column), so nothing drawn is cut off.
    """
    axes = [ax for ax in fig.axes if ax.get_visible()]
    if len(axes) < 2:
        return []
    pad = _PAD
    dpi = fig.dpi

    def inches(b):                    # display px -> inches from the saved image's top-left corner
        return [b.x0 / dpi - box.x0, box.y1 - b.y1 / dpi, b.x1 / dpi - box.x0, box.y1 - b.y0 / dpi]

    main = [ax for ax in axes if getattr(ax, "_colorbar", None) is None]
    columns = _bands(main, "x")        # [[x0, x1 (figure fraction, the axes' positions)], axes]
    if len(columns) < 2:
        return []
    spanning = []                      # colour bars across two columns or more: pieces of their own
    for ax in axes:                    # colour bars: the column whose axes are nearest
        if getattr(ax, "_colorbar", None) is not None:
            pos = ax.get_position()
            if sum(1 for c in columns if _meet(c[0][0], c[0][1], pos.x0, pos.x1)) >= 2:
                spanning.append(ax)
                continue
            centre = (pos.x0 + pos.x1) / 2
            min(columns, key=lambda c: 0.0 if c[0][0] <= centre <= c[0][1]
                else min(abs(centre - c[0][0]), abs(centre - c[0][1])))[1].append(ax)
    def union(b):
        return [min(v[0] for v in b), min(v[1] for v in b), max(v[2] for v in b), max(v[3] for v in b)]

    extent = {ax: inches(ax.get_tightbbox(renderer)) for ax in axes}    # drawn extents, measured once
    boxes = [union([extent[ax] for ax in members]) for _, members in columns]
    cells = _grid_cells(main, columns)
    top, bottom = min(b[1] for b in boxes), max(b[3] for b in boxes)
    above: list = []                   # figure-level artists: a piece of their own, or their column's
    below: list = []
    beside: list = []
    for ax in spanning:
        a = extent[ax]
        (above if (a[1] + a[3]) / 2 < (top + bottom) / 2 else below).append(a)
    artists = [*fig.legends, *fig.texts, getattr(fig, "_suptitle", None), getattr(fig, "_supxlabel", None)]
    for artist in dict.fromkeys(a for a in artists if a is not None):   # the suptitle is a text too
        if not artist.get_visible() or (isinstance(artist, Text) and not artist.get_text().strip()):
            continue
        a = inches(artist.get_window_extent(renderer))
        middle = (a[1] + a[3]) / 2
        if middle < top:
            above.append(a)
        elif middle > bottom or sum(1 for b in boxes if min(a[2], b[2]) - max(a[0], b[0]) > 0) >= 2:
            below.append(a)
        else:                          # beside the panels, within one column: that column's piece
            k = max(range(len(boxes)), key=lambda i: min(a[2], boxes[i][2]) - max(a[0], boxes[i][0]))
            boxes[k] = [min(boxes[k][0], a[0]), boxes[k][1], max(boxes[k][2], a[2]), boxes[k][3]]
            beside.append(a)
    w, h = box.width, box.height

    def clip(b):
        return [float(round(max(0.0, b[0] - pad), 4)), float(round(max(0.0, b[1] - pad), 4)),
                float(round(min(w, b[2] + pad), 4)), float(round(min(h, b[3] + pad), 4))]
    if cells is None:
        cols = [[b[0], top, b[2], bottom] for b in boxes]
    else:                              # row by row: each column's width, each row's drawn height
        drawn = {rc: union([extent[ax] for ax in members]) for rc, members in cells.items()}
        bands = {r: (min(b[1] for (rr, _), b in drawn.items() if rr == r),
                     max(b[3] for (rr, _), b in drawn.items() if rr == r)) for r, _ in drawn}
        cols = [[boxes[c][0], bands[r][0], boxes[c][2], bands[r][1]] for r, c in sorted(drawn)]
        for a in beside:               # a legend or text beside the panels: the piece it overlaps most
            j = max(range(len(cols)), key=lambda i: max(0.0, min(a[2], cols[i][2]) - max(a[0], cols[i][0]))
                    * max(0.0, min(a[3], cols[i][3]) - max(a[1], cols[i][1])))
            cols[j] = [min(cols[j][0], a[0]), min(cols[j][1], a[1]), max(cols[j][2], a[2]), max(cols[j][3], a[3])]
    order = sorted(above, key=lambda s: s[1]) + cols + sorted(below, key=lambda s: s[1])
    return [clip(b) for b in order]


def _log_written(path: Path) -> None:
    """Append ``path`` to the file named by ``ATTENTION_FW_WRITE_LOG``, if set.

    ``tools/run_notebook.py`` sets it, so that each notebook's execution record lists the
    figure files it wrote (``make figures`` re-executes the writer of a missing or altered file).
    """
    log = os.environ.get("ATTENTION_FW_WRITE_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(f"{Path(path).resolve()}\n")


@contextlib.contextmanager
def _fonttools_quiet():
    """fontTools warns about the (deliberately) fixed font timestamps when it subsets fonts into a
    PDF: noise in every notebook's output. Quieted while a figure is rendered, then restored."""
    logger = logging.getLogger("fontTools")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


# Parsed mathtext shared by every renderer of a save (see _shared_mathtext): at most this many.
_MATH_PARSES: dict = {}
_MATH_PARSES_MAX = 4096


def _math_rc() -> tuple:
    """The rcParams a mathtext parse depends on beyond its arguments (fonts, mathtext, text)."""
    rc = matplotlib.rcParams
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(rc.items())
                 if k.startswith(("font.", "mathtext.", "text.")))


@contextlib.contextmanager
def _shared_mathtext():
    """Inside the block, every renderer reuses the mathtext parses of the others.

    matplotlib caches a parsed expression per renderer (its own ``MathTextParser``, 50 entries),
    so the formats of one figure, and its crop and panel measurements, each parse every tick
    label and formula again: a third of the cost of a save. Here the parses are shared by
    their full key (output type, expression, dpi, font properties, hinting, antialiasing, and
    the font, mathtext and text rcParams at entry), so a shared parse is one that this renderer
    would have computed itself and every byte is unchanged. matplotlib's own method is put back
    on exit; outside the block nothing of matplotlib's is changed. A block inside another (its
    method already installed) shares the outer one's; on another matplotlib without the private
    method, a plain block.
    """
    from matplotlib import mathtext

    own = mathtext.MathTextParser.__dict__.get("_parse_cached")
    plain = getattr(own, "__wrapped__", None)
    if plain is None or getattr(own, "_afw_shared", False):
        yield
        return
    rc = _math_rc()

    def parse_cached(self, s, dpi, prop, antialiased, load_glyph_flags):
        key = (self._output_type, s, dpi, prop, antialiased, load_glyph_flags, rc)
        hit = _MATH_PARSES.get(key)
        if hit is None:
            if len(_MATH_PARSES) >= _MATH_PARSES_MAX:
                _MATH_PARSES.clear()
            hit = _MATH_PARSES[key] = plain(self, s, dpi, prop, antialiased, load_glyph_flags)
        return hit

    parse_cached._afw_shared = True
    mathtext.MathTextParser._parse_cached = parse_cached
    try:
        yield
    finally:
        mathtext.MathTextParser._parse_cached = own


def figure_bytes(fig, fmt: str, dpi: int = PNG_DPI, bbox=None) -> bytes:
    """Render ``fig`` to bytes in format ``fmt`` with reproducible metadata.

    ``bbox``: a :class:`matplotlib.transforms.Bbox` in inches, the part of the figure to save
    (the page size of the PDF), instead of the tight crop of the book's style."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    buf = io.BytesIO()
    with matplotlib.rc_context(cast(Any, _SAVE_RC)), _fonttools_quiet(), _shared_mathtext():
        kw = {} if bbox is None else {"bbox_inches": bbox}
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=_METADATA[fmt], **kw)
    return buf.getvalue()


def render_formats(fig, formats=FORMATS, dpi: int = PNG_DPI, bbox=None) -> tuple[dict[str, bytes], Any]:
    """``{format: bytes}`` of ``fig`` in each of ``formats`` (as :func:`figure_bytes`), laid out once,
    and the region saved (``bbox``, or the tight crop: a Bbox in inches).

    The first format is saved exactly as :func:`figure_bytes` saves it: its layout engine
    (constrained layout) runs and the crop is the tight one. The others are drawn at the
    positions and in the crop that this first save left, without running the layout engine or
    the crop again: a figure's formats then share one layout (savefig alone would redo both
    for every format, each with its own backend's text metrics, at about the cost of the
    drawing itself), and the saves of a figure in three formats cost about half as much.
    The PNG, when asked for, comes first, so its bytes are those of a plain save.
    """
    order = sorted(formats, key=lambda f: f != "png")
    if not order:
        return {}, bbox
    out = {order[0]: figure_bytes(fig, order[0], dpi, bbox)}
    if bbox is not None:
        box = bbox
    else:
        with _renderer_at(fig, dpi) as renderer:
            box = fig.get_tightbbox(renderer).padded(_PAD)
    engine = fig.get_layout_engine()
    fig._layout_engine = None          # the positions stay those of the first save
    try:
        for fmt in order[1:]:
            out[fmt] = figure_bytes(fig, fmt, dpi, box)
    finally:
        fig._layout_engine = engine
    return {fmt: out[fmt] for fmt in formats}, box


def saved(fig, name: str, data: dict | None = None, outdir=None, formats=None):
    """:func:`save` ``fig`` (left open; ``formats=None``: every format) and return it: the last
    line of a library plot function, which draws, writes its figure and data, and hands the
    figure back.

    Examples
    --------
    >>> import tempfile, matplotlib.pyplot as plt
    >>> fig = plt.figure()
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     back = saved(fig, "demo", {"x": [1, 2]}, tmp, formats=())   # the data only
    ...     files = sorted(p.name for p in Path(tmp).rglob("*.*"))
    >>> back is fig, files
    (True, ['demo.json'])
    >>> plt.close(fig)
    """
    kw = {} if formats is None else dict(formats=formats)
    save(fig, name, data, outdir=outdir, close=False, **kw)
    return fig


def save(fig, name: str, data: dict | None = None, *, formats=FORMATS, dpi: int = PNG_DPI,
         outdir: str | Path | None = None, close: bool = True, meta: dict | None = None,
         bbox=None) -> dict[str, Path]:
    """Write ``fig`` as ``<outdir>/<name>.{pdf,png,svg}`` and ``data`` as ``<outdir>/data/<name>.json``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    name : str
        File stem, letters, digits, ``-`` and ``_`` only.
    data : dict, optional
        The numbers behind the figure (arrays allowed); written as sorted, indented JSON.
    formats : iterable of {"pdf", "png", "svg"}
    dpi : int
        Resolution of the PNG.
    outdir : path, optional
        Defaults to :func:`afw_book.paths.figures_dir`.
    meta : dict, optional
        Description of the figure (chapter, statement, caption, command, ...). When a data
        file is written together with at least one image, the JSON gets a ``meta`` entry:
        these keys plus the :func:`layout` of the saved figure. A JSON is written when
        ``data`` or ``meta`` is given.
    bbox : matplotlib.transforms.Bbox, optional
        The region to save, in inches (default: the tight crop); see :func:`figure_bytes`.

    Returns
    -------
    dict mapping each format (and ``"json"``) to the written path.

    Raises
    ------
    TypeError
        ``fig`` is not a matplotlib Figure.
    ValueError
        For an empty or unsafe ``name``, an unknown format, or non-finite data.
    """
    if not isinstance(fig, matplotlib.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"name must be a non-empty file stem of letters, digits, '-' or '_', got {name!r}")
    formats = tuple(formats)
    for fmt in formats:
        if fmt not in FORMATS:
            raise ValueError(f"formats must be drawn from {FORMATS}, got {fmt!r}")
    out = Path(outdir) if outdir is not None else paths.figures_dir()
    written: dict[str, Path] = {}
    # Colliding minor tick labels go, a legend over data moves to a free place of its panel or
    # outside it (afw_book.legibility.repair).
    illegible = None
    if formats:
        with matplotlib.rc_context(cast(Any, _SAVE_RC)), _shared_mathtext():
            illegible = legibility.repair(fig)[1]
    # Render everything first, so a failure in one format writes nothing at all.
    payloads, box = render_formats(fig, formats, dpi, bbox)
    if data is not None or meta is not None:
        record = dict(data or {})
        if meta is not None and not isinstance(meta, dict):
            raise TypeError(f"meta must be a dict, got {type(meta).__name__}")
        if payloads:  # described once drawn, so that the image bytes are those of a plain save
            record["meta"] = {**(meta or {}), **layout(fig, payloads.get("png"), dpi, box, illegible)}
        elif meta is not None:
            record["meta"] = dict(meta)
        text = json.dumps(_jsonable(record), sort_keys=True, indent=1, allow_nan=False) + "\n"
        payloads["json"] = text.encode()
    for fmt, payload in payloads.items():
        target = (out / "data" / f"{name}.json") if fmt == "json" else (out / f"{name}.{fmt}")
        written[fmt] = write_bytes_atomic(target, payload)
    if close:
        plt.close(fig)
    return written
