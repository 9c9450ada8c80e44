"""One figure style and one save function for every figure of the book.

``save`` writes a figure as vector PDF (for papers), PNG and SVG (for the web),
plus the numbers behind it as JSON, with three guarantees:

* atomic: each file is rendered in memory, then written to a temporary file in
  the same folder and renamed over the old one, with SIGINT/SIGTERM held back
  during the write and the rename. An interrupted run leaves either the old
  file or the new one, never a torn file or a temporary file;
* byte-reproducible: dates and tool versions are stripped from the metadata
  and the SVG ids are salted with a fixed string, so regenerating a figure
  from the same numbers gives identical bytes;
* opaque: white background, so figures read in dark mode too.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import threading
from pathlib import Path

import logging

import matplotlib


def _in_ipython_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is pinned
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


# Scripts and tests never open a window; inside a Jupyter kernel the inline backend is kept,
# so figures still display in notebooks run locally.
if not _in_ipython_kernel():
    matplotlib.use("Agg")
# fontTools warns about the (deliberately) fixed font timestamps when it subsets
# Computer Modern into PDFs; the warning is noise in every notebook's output.
logging.getLogger("fontTools").setLevel(logging.ERROR)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from . import paths  # noqa: E402

FORMATS = ("pdf", "png", "svg")
PNG_DPI = 200

# Widths in inches for a one-column and a two-column paper layout.
ONE_COLUMN = 3.4
TWO_COLUMN = 7.0

STYLE = {
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

_METADATA = {
    "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
    "svg": {"Date": None, "Creator": None},
    "png": {"Software": None},
}


def use_style() -> None:
    """Apply the book's figure style (mathtext with Computer Modern, no TeX needed)."""
    matplotlib.rcParams.update(STYLE)


use_style()


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


def _log_written(path: Path) -> None:
    """Append ``path`` to the file named by ``ATTENTION_FW_WRITE_LOG``, if set.

    ``tools/run_notebook.py`` sets it, so that each notebook's execution record lists the
    figure files it wrote (``make figures`` re-executes the writer of a missing or altered file).
    """
    log = os.environ.get("ATTENTION_FW_WRITE_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(f"{Path(path).resolve()}\n")


def figure_bytes(fig, fmt: str, dpi: int = PNG_DPI) -> bytes:
    """Render ``fig`` to bytes in format ``fmt`` with reproducible metadata."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": STYLE["svg.hashsalt"]}):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
    return buf.getvalue()


def save(fig, name: str, data: dict | None = None, *, formats=FORMATS, dpi: int = PNG_DPI,
         outdir: str | Path | None = None, close: bool = True) -> dict[str, Path]:
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
        Defaults to :func:`attention_fw.paths.figures_dir`.

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
    # Render everything first, so a failure in one format writes nothing at all.
    payloads = {fmt: figure_bytes(fig, fmt, dpi) for fmt in formats}
    if data is not None:
        text = json.dumps(_jsonable(data), sort_keys=True, indent=1, allow_nan=False) + "\n"
        payloads["json"] = text.encode()
    for fmt, payload in payloads.items():
        target = (out / "data" / f"{name}.json") if fmt == "json" else (out / f"{name}.{fmt}")
        written[fmt] = write_bytes_atomic(target, payload)
    if close:
        plt.close(fig)
    return written
