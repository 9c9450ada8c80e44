"""Comparing a figure with the authors' published PDFs, without the PDFs.

:func:`read_pdf_paths` and :func:`pdf_shapes` read the filled and stroked paths of a PDF page
(matplotlib's own output: one content stream, no fonts needed); :func:`published_shapes` reads
the same shapes from the data committed with the book (``book/data/published-figures.json``,
written by ``make published-data PDFS=dir``), so that no comparison needs the PDFs themselves;
:func:`published_geometry` maps them onto a hull by the similarity :func:`fit_similarity`;
:func:`rasterise_pdf` rasterises a page with pdftoppm (poppler-utils). Re-exported by
:mod:`afw_book.paper_figures`.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
from matplotlib.image import imread

from attention_fw import _validate as V
from . import paths

__all__ = ["read_pdf_paths", "pdf_shapes", "published_shapes", "published_geometry", "fit_similarity",
           "rasterise_pdf"]


def _pairs(P):
    return np.asarray(P, dtype=float).reshape(-1, 2)


_TOKEN = re.compile(rb"\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f\s]*>|\[|\]|/[^\s/\[\]()<>]+|"
                    rb"[-+]?(?:\d+\.?\d*|\.\d+)|[A-Za-z'\"*]+")


def _page_content(data):
    m = re.search(rb"/Contents (\d+) 0 R", data)
    if not m:
        raise ValueError("no page content stream found")
    obj = re.search(rb"(?:^|\n)" + m.group(1) + rb" 0 obj(.*?)stream\r?\n", data, re.S)
    start = obj.end()
    return zlib.decompressobj().decompress(data[start:])


def read_pdf_paths(pdf):
    """Vector paths and marker positions of a single-page matplotlib PDF.

    A minimal content-stream reader (enough for matplotlib's output): returns the painted
    paths with their fill and stroke colours, line width and painting operator, in PDF points,
    and the positions where form XObjects (scatter markers) are drawn.

    Returns
    -------
    dict with ``paths`` (list of dicts: ``subpaths`` list of (m, 2) arrays, ``fill`` RGB or None,
    ``stroke`` RGB or None, ``lw``, ``op``) and ``markers`` ((q, 2) array).
    """
    data = Path(pdf).read_bytes()
    content = _page_content(data)
    ctm, stack = np.eye(3), []
    fill, stroke, lw = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0
    subpaths, current, ops = [], [], []
    out, markers = [], []

    def tr(x, y):
        return tuple((np.array([x, y, 1.0]) @ ctm)[:2])

    for tok in _TOKEN.findall(content):
        if tok[:1] in b"(<[]/" or tok[:1] in b"+-.0123456789":
            if tok[:1] in b"+-.0123456789":
                ops.append(float(tok))
            else:
                ops.append(tok)
            continue
        op = tok.decode()
        nums = [x for x in ops if isinstance(x, float)]
        if op == "q":
            stack.append((ctm.copy(), fill, stroke, lw))
        elif op == "Q" and stack:
            ctm, fill, stroke, lw = stack.pop()
        elif op == "cm":
            a, b, c, d, e, f = nums[-6:]
            ctm = np.array([[a, b, 0], [c, d, 0], [e, f, 1.0]]) @ ctm
        elif op == "w":
            lw = nums[-1]
        elif op == "rg":
            fill = tuple(nums[-3:])
        elif op == "RG":
            stroke = tuple(nums[-3:])
        elif op == "g":
            fill = (nums[-1],) * 3
        elif op == "G":
            stroke = (nums[-1],) * 3
        elif op == "m":
            if len(current) > 1:
                subpaths.append(np.array(current))
            current = [tr(*nums[-2:])]
        elif op == "l":
            current.append(tr(*nums[-2:]))
        elif op in ("c", "v", "y"):
            current.append(tr(*nums[-2:]))
        elif op == "re":
            x, y, w, h = nums[-4:]
            subpaths.append(np.array([tr(x, y), tr(x + w, y), tr(x + w, y + h), tr(x, y + h)]))
        elif op in ("f", "F", "f*", "B", "B*", "b", "b*", "S", "s", "n"):
            if len(current) > 1:
                subpaths.append(np.array(current))
            if op != "n" and subpaths:
                out.append({"subpaths": subpaths, "op": op, "lw": lw,
                            "fill": fill if op not in ("S", "s") else None,
                            "stroke": stroke if op not in ("f", "F", "f*") else None})
            subpaths, current = [], []
        elif op == "Do":
            markers.append(tr(0.0, 0.0))
        ops = []
    return {"paths": out, "markers": np.array(markers).reshape(-1, 2)}


def pdf_shapes(pdf):
    """The shapes of a single-page matplotlib PDF that the comparisons use, in PDF points.

    Returns
    -------
    dict with ``outlines`` (list of (m, 2) arrays: closed, stroked, unfilled single paths, the
    first point repeated at the end; hull outlines are among them), ``fills`` (list of
    (RGB array, (m, 2) polygon): filled single paths of at least 3 points, in drawing order) and
    ``markers`` ((q, 2) array of marker positions).
    """
    info = read_pdf_paths(pdf)
    outlines, fills = [], []
    for p in info["paths"]:
        if len(p["subpaths"]) != 1:
            continue
        pts = p["subpaths"][0]
        if p["fill"] is None:
            if len(pts) >= 4 and np.allclose(pts[0], pts[-1]):
                outlines.append(pts)
        elif len(pts) >= 3:
            fills.append((np.array(p["fill"], dtype=float), pts))
    return {"outlines": outlines, "fills": fills, "markers": info["markers"]}


def published_shapes(name, data=None):
    """Shapes of the authors' published figure ``name`` (e.g. ``"quadratic_5"``), as
    :func:`pdf_shapes` returned them from the PDF, read from the committed data file.

    Parameters
    ----------
    name : str
        File name with or without ``.pdf``.
    data : path, optional
        Defaults to :data:`afw_book.paths.PUBLISHED_DATA`.

    Returns
    -------
    dict with ``outlines``, ``fills``, ``markers`` (as :func:`pdf_shapes`), ``sha256`` of the
    PDF the shapes were read from, and ``raster`` (pixel counts of its pdftoppm rendering, or
    None). Shapes the data file leaves out (``omitted``) come back as empty lists.

    Raises
    ------
    KeyError
        ``name`` is not in the data file (the message lists the names it holds).
    """
    path = Path(data) if data is not None else paths.PUBLISHED_DATA
    files = json.loads(path.read_text())["files"]
    key = name if name.endswith(".pdf") else f"{name}.pdf"
    if key not in files:
        raise KeyError(f"{key!r} is not in {path}; it holds {sorted(files)}")
    e = files[key]
    return {"outlines": [np.array(P, dtype=float) for P in e.get("outlines", [])],
            "fills": [(np.array(f["rgb"], dtype=float), np.array(f["polygon"], dtype=float))
                      for f in e.get("fills", [])],
            "markers": np.array(e.get("markers", []), dtype=float).reshape(-1, 2),
            "sha256": e["sha256"], "raster": e.get("raster")}


def fit_similarity(src, dst):
    """Least-squares scale s and shift t with dst ~ s * src + t; returns (s, t, max residual)."""
    src = _pairs(src)
    dst = _pairs(dst)
    ms, md = src.mean(0), dst.mean(0)
    s = float(((src - ms) * (dst - md)).sum() / ((src - ms) ** 2).sum())
    t = md - s * ms
    return s, t, float(np.abs(s * src + t - dst).max())


def _cyclic_match(A, B):
    """Rotate/reverse closed polygon B (same length as A) to best match A after similarity fit."""
    best = None
    for cand in (B, B[::-1]):
        for r in range(len(cand)):
            Br = np.roll(cand, -r, axis=0)
            fit = fit_similarity(A, Br)
            if best is None or fit[2] < best[1][2]:
                best = (Br, fit)
    return best


def published_geometry(source, hull):
    """Recover the polygons of a published cell/cone figure in data coordinates.

    The hull outline (the stroked closed path with as many corners as ``hull``) fixes the map
    from data to PDF points (a scale and a shift: the scripts use ``axis('equal')``); the
    filled paths are mapped back with it.

    Parameters
    ----------
    source : path of a PDF, or its shapes (:func:`pdf_shapes`, :func:`published_shapes`)
    hull : array (k, 2), our hull polygon (CCW), used to find and align the outline

    Returns
    -------
    dict: ``scale``, ``shift``, ``hull_residual`` (max deviation of the published hull corners
    from ours, in data units), ``hull`` (published corners in data units, aligned with ours),
    ``fills`` (list of (RGB, polygon in data units, alpha-free colour as printed)), ``markers``
    (marker positions in data units).
    """
    K = _pairs(hull)
    shapes = source if isinstance(source, dict) else pdf_shapes(source)
    best = None
    for pts in shapes["outlines"]:
        if len(pts) == len(K) + 1:
            Br, fit = _cyclic_match(K, pts[:-1])
            if best is None or fit[2] < best[1][2]:
                best = (Br, fit)
    if best is None:
        where = "the given shapes" if isinstance(source, dict) else source
        raise ValueError(f"no hull outline with {len(K)} corners in {where}")
    Br, (s, t, res) = best
    fills = [(rgb, (P - t) / s) for rgb, P in shapes["fills"]]
    return {"scale": s, "shift": t, "hull_residual": res / s, "hull": (Br - t) / s,
            "fills": fills, "markers": (shapes["markers"] - t) / s}


def rasterise_pdf(pdf, dpi=60):
    """Rasterise the first page of ``pdf`` with pdftoppm; returns an (h, w, 3) uint8 array.

    Raises
    ------
    RuntimeError
        If pdftoppm is missing (install it with ``apt-get install poppler-utils``).
    """
    exe = shutil.which("pdftoppm")
    if exe is None:
        raise RuntimeError("pdftoppm not found: install it with `apt-get install poppler-utils`")
    dpi = V.positive_int("dpi", dpi)
    with tempfile.TemporaryDirectory() as tmp:
        stem = Path(tmp) / "page"
        subprocess.run([exe, "-png", "-r", str(dpi), "-f", "1", "-l", "1", "-singlefile",
                        str(pdf), str(stem)], check=True, capture_output=True)
        img = imread(str(stem) + ".png")
    if img.dtype != np.uint8:
        img = np.round(img * 255).astype(np.uint8)
    return img[..., :3]
