"""The paper's four figures, regenerated from exact geometry.

Each figure function returns ``(fig, data)``: a matplotlib figure drawn from exact polygons
(:mod:`attention_fw.geometry.planar`, no rasters) in the published colour conventions, and a dict of
the numbers behind it. :func:`make` saves both through :func:`afw_book.figures.save`
(``figures/<name>.{pdf,png,svg}`` and ``figures/data/<name>.json``).

Figures (the recipes of the authors' figure scripts, and the book's errata E16-E18)
--------------------------------------------
figure1             cells for unequal-norm vertices, kappa = 5, 7, 9, 10, AS PUBLISHED: the
                    authors' "unit" labelling argmax_j <x, v_j/|v_j|>, which is not C_i(v) (E18)
figure1-corrected   the true cells C_i(v) (B = I) of the same four polygons
figure2             equal norms: C_i(v) = Vor(v_i) cap K (Proposition 4.5), kappa = 5, 7, 9, 10
figure3             1/2 <Bx, x> over K with B = diag(1, 2) (E17), kappa = 5 and 7, vertices mapped
                    onto the level set {1/2 <Bx, x> = c/2}
figure4             cone I_i(eta) and eroded cone I_i(eta) ominus delta B_1, kappa = 7, cell 2 in
                    hull order, eta = 0.05, delta = 0.03 (the published file; E16)
figure4-delta002    the same with the captioned delta = 0.02

Random vertices
---------------
Every figure function and :func:`cell_panel` take the keyword-only ``rng`` of the library (an int
seed, a ``SeedSequence`` or a ``Generator``; published: 42). Each panel draws its vertices from the
start of that stream, as the authors' scripts re-seed ``numpy.random.default_rng(42)`` for every
panel: a Generator is copied, not advanced, so ``rng=42``, ``rng=SeedSequence(42)`` and
``rng=default_rng(42)`` draw the same figure. The data files record an int seed as ``seed``
(``None`` for a SeedSequence or a Generator); the command line takes it as ``--seed``.

Command line
------------
Regenerate one figure, or all of them::

    python -m afw_book.paper_figures figure2 --kappas 6 --seed 7
    python -m afw_book.paper_figures figure2 --style icml [--usetex]
    python -m afw_book.paper_figures all

Without parameters the canonical files in ``figures/`` are (re)written. With any non-default
parameter, a ``--style``, a ``--width``, ``--usetex`` or ``--paper-ready`` the output goes to
``figures/custom/`` unless ``--outdir`` is given, named by :func:`stem`
(``<name>[-paper-ready][-<style>][-<width>][-tex]--<changed parameters>-<hash>``), so the canonical
figures, and every other command's files, are never overwritten (:func:`afw_book.figures.output_dir`);
the command prints every file it wrote. ``--style`` sets the fonts and the widths of a venue
(:data:`afw_book.figures.VENUES`); ``--width column|text`` (or inches) chooses the width, by default
the column for one row of panels and the text width for several (:func:`target_width`), and the
saved page is exactly that wide. ``--usetex`` sets the text with LaTeX and stops with a clear
message when no TeX installation is found. ``--paper-ready`` draws the variant of
:data:`VARIANTS` (panel labels, vertex labels that do not collide, a palette distinct in grey and
for deuteranopes); the faithful files are unchanged by it.

JSON data (``figures/data/<name>.json``)
---------------------------------------
Cell figures (1, 1-corrected, 2, 3): ``panels``, a list with one entry per panel holding
``kappa``, ``seed``, ``B``, ``labelling`` ("unit" or "exact"), ``vertices`` (all sampled points,
sampling order, so v_j is ``vertices[j-1]``), ``hull`` ([x, y] pairs, counter-clockwise),
``hull_labels`` (j of each hull corner), ``hull_area``, and ``cells`` aligned with ``hull``, each
with ``vertex`` (j), ``polygon`` ([x, y] pairs, CCW), ``area`` and ``colour`` (RGB). Figure 4
has ``hull``, ``cells``, ``target`` (0-based hull index), ``eta``, ``delta``, ``cone`` and
``eroded_cone`` (each ``polygon`` and ``area``). Every data file also has ``meta``: the layout
of the saved figure (:func:`afw_book.figures.layout`) and :data:`INFO` (chapter, statement,
one-line caption) with the command that regenerates it (:func:`command`).

The helpers that compare a figure with the authors' published PDFs (:func:`read_pdf_paths`,
:func:`pdf_shapes`, :func:`published_geometry`, :func:`rasterise_pdf`, :func:`published_shapes`)
live in :mod:`afw_book.published_pdfs` and are re-exported here.
"""
from __future__ import annotations

import argparse
import copy
import inspect
import sys
import textwrap
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import hsv_to_rgb
from matplotlib.patches import Polygon as MplPolygon

from attention_fw import _validate as V
from attention_fw.geometry import planar as G
from attention_fw.plot import colours as C
from . import figures as plotting
from .published_pdfs import (fit_similarity, pdf_shapes, published_geometry, published_shapes,  # noqa: F401
                             rasterise_pdf, read_pdf_paths)

__all__ = ["figure1", "figure1_corrected", "figure2", "figure3", "figure4", "figure4_delta002",
           "FIGURES", "DEFAULTS", "INFO", "make", "make_all", "render", "is_default", "command", "main",
           "cell_panel", "hue_colours",
           "published_label_overlaps", "read_pdf_paths", "pdf_shapes", "published_shapes",
           "published_geometry", "fit_similarity", "rasterise_pdf"]


SEED = 42
KAPPAS = (5, 7, 9, 10)

# Published line widths and marker sizes were for an 8 x 8 inch panel; ours are about
# 3.4 inches, so everything is scaled down by about this factor.
_S = 0.5


def hue_colours(k):
    """The published colours: HSV hues i/k (i = 0..k-1, hull order), full saturation and value."""
    k = V.positive_int("k", k)
    h = np.arange(k) / k
    return hsv_to_rgb(np.stack([h, np.ones(k), np.ones(k)], axis=1))


# ---------------------------------------------------------------------------------------------
# Panels
# ---------------------------------------------------------------------------------------------
def _stream_start(rng):
    """A function giving, at each call, a Generator at the start of the stream of ``rng`` (a copy:
    a Generator passed in is not advanced), so every panel draws as if freshly seeded."""
    start = V.rng("rng", rng)
    return lambda: copy.deepcopy(start)


def cell_panel(kappa, *, rng=SEED, equal_norm=False, enforce_bijection=True, labelling="exact",
               B=None, points=None):
    """Geometry of one cell panel: sampled vertices, hull (CCW), cells aligned with the hull.

    Parameters
    ----------
    kappa : int
        Number of sampled vertices (the authors' k).
    rng : int, SeedSequence or Generator (keyword-only)
        The stream of :func:`attention_fw.geometry.planar.sample_vertices` (published: 42).
    equal_norm : bool
        As in :func:`attention_fw.geometry.planar.sample_vertices`.
    enforce_bijection : bool
        As in :func:`attention_fw.geometry.planar.sample_vertices`.
    labelling : {"exact", "unit"}
        "exact": the cells C_i(v) (eq: cells) with matrix B; "unit": the authors'
        argmax_j <x, v_j/|v_j|> (published Figure 1, E18).
    B : array (2, 2), optional
    points : array (kappa, 2), optional
        Use these points instead of sampling (e.g. the level-set vertices of Figure 3).

    Returns
    -------
    dict with the JSON keys documented in the module docstring.
    """
    return _panel(kappa, _stream_start(rng)(), V.seed_record(rng), equal_norm=equal_norm,
                  enforce_bijection=enforce_bijection, labelling=labelling, B=B, points=points)


def _panel(kappa, gen, seed, *, equal_norm=False, enforce_bijection=True, labelling="exact", B=None,
           points=None):
    """:func:`cell_panel` drawing from the Generator ``gen``, recording ``seed``."""
    if labelling not in ("exact", "unit"):
        raise ValueError(f"labelling must be 'exact' or 'unit', got {labelling!r}")
    if points is None:
        pts, hull = G.sample_vertices(kappa, rng=gen, equal_norm=equal_norm,
                                      enforce_bijection=enforce_bijection)
    else:
        pts = V.as_float_array("points", points, ndim=2, last_dim=2)
        hull = G.convex_hull(pts)
    K = pts[hull]
    Bm = np.eye(2) if B is None else V.square_matrix("B", B, 2)
    polys = G.unit_direction_cells(K) if labelling == "unit" else G.cells(K, Bm)
    colours = hue_colours(len(K))
    return {
        "kappa": int(kappa), "seed": seed, "equal_norm": bool(equal_norm),
        "enforce_bijection": bool(enforce_bijection), "labelling": labelling, "B": Bm,
        "vertices": pts, "hull": K, "hull_labels": (hull + 1).tolist(),
        "hull_area": G.polygon_area(K),
        "owns_cell": G.owns_cell(K, Bm).tolist(),
        "cells": [{"vertex": int(j + 1), "polygon": P, "area": G.polygon_area(P),
                   "colour": colours[i]} for i, (j, P) in enumerate(zip(hull, polys))],
    }


def _panel_or_missing(kappa, gen, seed, **panel_kw):
    """:func:`_panel`, or, where the authors' recipe finds no draw with every point a hull vertex
    (likely from kappa = 10 on with unequal norms: 11 of 40 seeds at kappa = 10, none at 11), the
    record of the missing panel: ``{"kappa", "seed", "missing": reason}``."""
    try:
        return _panel(kappa, gen, seed, **panel_kw)
    except G.NoDrawError as err:
        # the library's reason, in words ("in max_tries=500 tries" -> "in 500 tries")
        return {"kappa": int(kappa), "seed": seed, "missing": str(err).replace("max_tries=", "")}


def _panel_limits(panels, margin=0.13):
    """Common half-widths so all panels share one metric scale (published caption)."""
    boxes = [(p["hull"].min(0), p["hull"].max(0)) for p in panels]
    half = np.max([(hi - lo) / 2 for lo, hi in boxes], axis=0) + margin
    return [((lo + hi) / 2, half) for lo, hi in boxes]


def _grid_axes(n, width, half, ncols=None, extra_bottom=0.0, title_h=0.0):
    """Panels on a grid filling ``width``; ``title_h`` inches above each row for its titles."""
    ncols = (1 if n == 1 else 2) if ncols is None else V.positive_int("ncols", ncols)
    nrows = -(-n // ncols)
    panel_w = width / ncols
    panel_h = panel_w * half[1] / half[0]
    row_h = panel_h + title_h if title_h else panel_h
    fig = plt.figure(figsize=(width, row_h * nrows + extra_bottom))
    axes = []
    H = row_h * nrows + extra_bottom
    for idx in range(n):
        r, c = divmod(idx, ncols)
        ax = fig.add_axes([c / ncols, (extra_bottom + (nrows - 1 - r) * row_h) / H,
                           1 / ncols, panel_h / H])
        axes.append(ax)
    return fig, axes


VARIANTS = ("faithful", "paper-ready")
"""``faithful``: the paper's layout and colours, as published. ``paper-ready``: the same geometry
with panel labels (κ of each panel), vertex labels moved apart until no two overlap, and the
colours of :data:`attention_fw.plot.colours.PAPER_PALETTE` (distinct in grey and for deuteranopes)."""

_TITLE_H = 0.24  # inches above each row of a paper-ready figure for the panel labels


def _variant(variant):
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    return variant


def _panel_title(ax, idx, text):
    ax.set_title(f"({chr(ord('a') + idx)}) {text}", fontsize=matplotlib.rcParams["axes.titlesize"], pad=3)


def _boxes_overlap(a, b, pad=0.5):
    return not (a.x1 + pad <= b.x0 or b.x1 + pad <= a.x0 or a.y1 + pad <= b.y0 or b.y1 + pad <= a.y0)


def text_overlaps(ax, renderer=None):
    """Pairs of the texts drawn in ``ax`` (labels, title) whose boxes, as the renderer lays them
    out, overlap: [(text_i, text_j), ...]. Empty for a figure whose labels do not collide."""
    fig = ax.figure
    renderer = renderer or fig.canvas.get_renderer()
    texts = [t for t in [*ax.texts, ax.title] if t.get_visible() and t.get_text().strip()]
    boxes = [t.get_window_extent(renderer) for t in texts]
    return [(texts[i].get_text(), texts[j].get_text()) for i in range(len(texts)) for j in range(i + 1, len(texts))
            if _boxes_overlap(boxes[i], boxes[j], pad=0.0)]


def _outward(K):
    """Unit outward directions at the corners of the CCW polygon K: the bisector of the outward
    normals of the two edges meeting there."""
    prev, nxt = K - np.roll(K, 1, axis=0), np.roll(K, -1, axis=0) - K
    normals = lambda e: np.stack([e[:, 1], -e[:, 0]], axis=1) / np.linalg.norm(e, axis=1, keepdims=True)  # noqa: E731
    d = normals(prev) + normals(nxt)
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def _declutter(ax, labels, out, base=9.0, steps=60):
    """Move the labels (annotations with offsets in points) apart until no two texts of the axes
    overlap: each starts ``base`` points along its direction ``out`` (unit vectors); a colliding
    label is pushed away from the other's centre, and along its direction."""
    renderer = ax.figure.canvas.get_renderer()
    out = np.asarray(out, dtype=float)
    offsets = base * out
    for a, o in zip(labels, offsets):
        a.set_position(tuple(o))
    fixed = [t for t in [*ax.texts, ax.title] if t not in labels and t.get_text().strip()]
    for _ in range(steps):
        boxes = [a.get_window_extent(renderer) for a in labels]
        moved = False
        for i, bi in enumerate(boxes):
            others = [b for k, b in enumerate(boxes) if k != i] + [t.get_window_extent(renderer) for t in fixed]
            for b in others:
                if _boxes_overlap(bi, b):
                    away = np.array([(bi.x0 + bi.x1) - (b.x0 + b.x1), (bi.y0 + bi.y1) - (b.y0 + b.y1)])
                    n = np.linalg.norm(away)
                    away = out[i] if n == 0 else away / n
                    offsets[i] = offsets[i] + 1.5 * away + 0.5 * out[i]
                    moved = True
            labels[i].set_position(tuple(offsets[i]))
        if not moved:
            return offsets
    return offsets


def label_clearance(ax, text, polygon, renderer=None) -> float:
    """How far (points) the box of ``text``, as drawn, stays inside the convex ``polygon`` (data
    coordinates): the least signed distance of its corners to the polygon's edges; negative
    when a corner is outside, that is when the label runs over an edge."""
    renderer = renderer or ax.figure.canvas.get_renderer()
    b = text.get_window_extent(renderer)
    corners = np.array([[b.x0, b.y0], [b.x1, b.y0], [b.x1, b.y1], [b.x0, b.y1]])
    return float(_clearance(ax.transData.transform(np.asarray(polygon, dtype=float)), corners[None])[0]
                 * 72.0 / ax.figure.dpi)


def _clearance(P, corners):
    """Least signed distance (display units) of each set of ``corners`` (m, 4, 2) to the edges of
    the convex polygon ``P`` (display coordinates), positive inside."""
    P = P if 0.0 <= np.sum(P[:, 0] * np.roll(P[:, 1], -1) - np.roll(P[:, 0], -1) * P[:, 1]) else P[::-1]
    a, e = P, np.roll(P, -1, axis=0) - P
    length = np.linalg.norm(e, axis=1)
    keep = length > 1e-9
    a, e, length = a[keep], e[keep], length[keep]
    q = corners[:, :, None, :] - a[None, None]                                  # (m, 4, edges, 2)
    dist = (e[None, None, :, 0] * q[..., 1] - e[None, None, :, 1] * q[..., 0]) / length
    return dist.min(axis=(1, 2))


def _place_cell_labels(ax, cells, texts, grid=41, min_pt=0.0):
    """Move each cell's label to the point of its (convex) cell where its box, as drawn, keeps
    the largest distance from the cell's edges, the hull's among them (the centroid, where they
    start, may put a label over an edge of a narrow cell). A cell where its label, even at 85%
    of the size, cannot sit without crossing an edge loses it (Figure 1's unequal norms give such slivers at column width):
    ``ax.afw_cell_labels`` keeps the labels drawn, ``ax.afw_dropped_labels`` the cells' vertices
    whose label was dropped. ``min_pt``: no label is made smaller than this (points)."""
    renderer = ax.figure.canvas.get_renderer()
    margin = 1.5 * ax.figure.dpi / 72.0                     # 1.5 pt, in display units
    signs = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]])
    kept, dropped = [], []
    for cell, text in zip(cells, texts):
        P = ax.transData.transform(np.asarray(cell["polygon"], dtype=float))
        lo, hi = P.min(axis=0), P.max(axis=0)
        gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], grid), np.linspace(lo[1], hi[1], grid))
        centres = np.stack([gx.ravel(), gy.ravel()], axis=1)
        size = text.get_fontsize()
        for shrink in [f for f in (1.0, 0.92, 0.85) if f == 1.0 or size * f >= min_pt]:   # a narrow cell: smaller
            text.set_fontsize(size * shrink)
            b = text.get_window_extent(renderer)
            half = np.array([b.width, b.height]) / 2
            room = _clearance(P, centres[:, None, :] + signs[None] * half)
            best = int(np.argmax(room))
            if room[best] >= margin:
                break
        if room[best] <= 0:                                # it would run over an edge
            text.remove()
            dropped.append(cell["vertex"])
            continue
        text.set_position(tuple(ax.transData.inverted().transform(centres[best])))
        kept.append((cell, text))
    ax.afw_cell_labels = kept
    ax.afw_dropped_labels = dropped


def _finish_axis(ax, centre, half):
    ax.set_xlim(centre[0] - half[0], centre[0] + half[0])
    ax.set_ylim(centre[1] - half[1], centre[1] + half[1])
    ax.set_aspect("equal", adjustable="box")
    ax.axis("off")


def _draw_hull_and_vertices(ax, K, labels=None, origin_label=True):
    """Hull outline, corner circles, labels v_j, the origin; returns the label annotations."""
    ax.plot(*np.vstack([K, K[:1]]).T, color="k", lw=1.0 * _S * 1.6, solid_capstyle="projecting",
            zorder=3)
    ax.scatter(K[:, 0], K[:, 1], s=80 * _S**2, facecolors="none", edgecolors="k",
               linewidths=1.5 * _S * 1.4, zorder=4)
    anns = []
    if labels is not None:
        c = K.mean(axis=0)
        for v, j in zip(K, labels):
            d = v - c
            # published: 0.05 data units outward from the mean of the corners (about 14 pt at
            # 8 inches and 13 pt text); here a fixed 9 pt, so any figure width reads the same
            u = d / np.linalg.norm(d)
            anns.append(ax.annotate(f"$v_{{{j}}}$", xy=v, xytext=9 * u, textcoords="offset points",
                                    ha="center", va="center", zorder=5))
    ax.scatter([0], [0], marker="x", color="k", s=80 * _S**2, linewidths=2 * _S * 1.4, zorder=5)
    if origin_label:
        ax.text(0.02, 0.02, "$0$", zorder=5)
    return anns


def _draw_cell_panel(ax, panel, region_labels=None):
    """Cells, their labels (at the centroids; :func:`_place_cell_labels` moves them), the hull
    and its corners; returns the corner labels. ``ax.afw_cell_labels``: [(cell, label), ...]."""
    K = panel["hull"]
    for cell in panel["cells"]:
        if len(cell["polygon"]) >= 3:
            ax.add_patch(MplPolygon(cell["polygon"], closed=True, facecolor=cell["colour"],
                                    edgecolor="k", linewidth=0.3, zorder=1))
    show = panel["kappa"] <= 5 if region_labels is None else region_labels
    ax.afw_cell_labels = []
    if show:
        for cell in panel["cells"]:
            if cell["area"] > 0:
                c = G.polygon_centroid(cell["polygon"])
                ax.afw_cell_labels.append((cell, ax.text(c[0], c[1], rf"$\mathscr{{C}}_{{{cell['vertex']}}}(v)$",
                                                         ha="center", va="center", zorder=2)))
    return _draw_hull_and_vertices(ax, K, panel["hull_labels"])


def _kappas(kappas):
    if isinstance(kappas, (int, np.integer)):
        kappas = (kappas,)
    if not isinstance(kappas, (list, tuple)) or not kappas:
        raise TypeError(f"kappas must be a non-empty list of integers, got {kappas!r}")
    return tuple(V.positive_int("kappas", k, minimum=3) for k in kappas)


def _width(width, n_panels):
    """Default width: one column for a single panel, two columns otherwise (inches)."""
    if width is None:
        return plotting.ONE_COLUMN if n_panels == 1 else plotting.TWO_COLUMN
    return V.real_scalar("width", width, low=0.5, high=30)


_CELL_PANELS = {
    "figure1": dict(equal_norm=False, enforce_bijection=True, labelling="unit"),
    "figure1-corrected": dict(equal_norm=False, enforce_bijection=True, labelling="exact"),
    "figure2": dict(equal_norm=True, enforce_bijection=True, labelling="exact"),
}
"""The panel options of each cell figure (:func:`_panel`)."""


def _cells_figure(name, kappas, rng, width, ncols, variant="faithful", published_labels=False):
    panel_kw = _CELL_PANELS[name]
    kappas = _kappas(kappas)
    width = _width(width, len(kappas))
    ready = _variant(variant) == "paper-ready"
    # the vertex labels are moved apart in every variant (colours and titles stay those of the
    # paper in the faithful one): at the published parameters two pairs of labels collide in the
    # paper's Figure 1 (published_label_overlaps keeps that finding checkable)
    apart = ready or not published_labels
    start = _stream_start(rng)
    panels = [_panel_or_missing(k, start(), V.seed_record(rng), **panel_kw) for k in kappas]
    drawn = [p for p in panels if "missing" not in p]
    drawn_lims = iter(_panel_limits(drawn) if drawn else [])
    lims = [None if "missing" in p else next(drawn_lims) for p in panels]
    common = next((lim[1] for lim in lims if lim is not None), np.array([1.1, 1.1]))
    lims = [(np.zeros(2), common) if lim is None else lim for lim in lims]
    fig, axes = _grid_axes(len(panels), width, common, ncols, title_h=_TITLE_H if ready else 0.0)
    for idx, (ax, panel, (centre, half)) in enumerate(zip(axes, panels, lims)):
        if "missing" in panel:          # an outcome, not a crash: the panel says why it is empty
            _finish_axis(ax, centre, half)
            ax.text(0.5, 0.5, f"$\\kappa = {panel['kappa']}$: not drawn\n"
                    + textwrap.fill(f"({panel['missing']})", 32), transform=ax.transAxes,
                    ha="center", va="center", fontsize=9)
            if ready:
                _panel_title(ax, idx, rf"$\kappa = {panel['kappa']}$")
            continue
        if ready:
            for cell, colour in zip(panel["cells"], C.map_colours([c["polygon"] for c in panel["cells"]])):
                cell["colour"] = colour
        labels = _draw_cell_panel(ax, panel)
        _finish_axis(ax, centre, half)
        if ready:
            _panel_title(ax, idx, rf"$\kappa = {panel['kappa']}$")
        if apart:
            ax.apply_aspect()
            if ax.afw_cell_labels:      # the book's figures keep every text at 8 pt or more
                _place_cell_labels(ax, *zip(*ax.afw_cell_labels), min_pt=0.0 if ready else 8.0)
            origin = [t for t in ax.texts if t.get_text() == "$0$"]
            for t in origin:   # the origin's label moves too (it may meet a cell's label)
                t.remove()
            zero = ax.annotate("$0$", xy=(0.0, 0.0), xytext=(6, 6), textcoords="offset points",
                               ha="center", va="center", zorder=5)
            dirs = np.vstack([_outward(panel["hull"]), [[2 ** -0.5, 2 ** -0.5]]])
            _declutter(ax, [*labels, zero], dirs)
    data = {"figure": name, "panels": panels}
    if ready:
        data["variant"] = variant
    return fig, data


# ---------------------------------------------------------------------------------------------
# The figures
# ---------------------------------------------------------------------------------------------
def figure1(kappas=KAPPAS, width=None, ncols=None, *, rng=SEED, variant="faithful"):
    """Figure 1 as published: unequal norms, the authors' "unit" labelling (E18).

    Vertices from ``sample_vertices(kappa, rng=rng, equal_norm=False, enforce_bijection=True)``;
    each coloured region is {x in K : argmax_j <x, v_j/|v_j|> = i}
    (:func:`attention_fw.geometry.planar.unit_direction_cells`), which is what the committed PDFs
    ``cells-k{5,7,9,10}-var-bij-unit-noself.pdf`` show. For the true C_i(v) see
    :func:`figure1_corrected`. Panels share one metric scale; 2 columns unless one panel.

    Returns
    -------
    (matplotlib.figure.Figure, dict)
    """
    return _cells_figure("figure1", kappas, rng, width, ncols, variant)


def published_label_overlaps(name="figure1", kappas=KAPPAS, *, rng=SEED) -> list[list[tuple[str, str]]]:
    """The pairs of vertex labels that overlap, panel by panel, when the labels of a cell figure
    (``figure1``, ``figure1-corrected``, ``figure2``) stand where the paper puts them: beside each
    vertex, outward from the mean of the corners. The figures themselves move such labels apart;
    at the published parameters Figure 1 has the collisions v2/v6 and v4/v10 that were reported.
    """
    if name not in _CELL_PANELS:
        raise ValueError(f"name must be one of {sorted(_CELL_PANELS)}, got {name!r}")
    fig, _ = _cells_figure(name, kappas, rng, None, None, "faithful", published_labels=True)
    try:
        fig.canvas.draw()
        return [text_overlaps(ax) for ax in fig.axes]
    finally:
        plt.close(fig)


def figure1_corrected(kappas=KAPPAS, width=None, ncols=None, *, rng=SEED, variant="faithful"):
    """Figure 1 corrected: the true cells C_i(v) (eq: cells, B = I) of the same polygons."""
    return _cells_figure("figure1-corrected", kappas, rng, width, ncols, variant)


def figure2(kappas=KAPPAS, width=None, ncols=None, *, rng=SEED, variant="faithful"):
    """Figure 2: equal norms, so C_i(v) = Vor(v_i) cap K (Proposition 4.5 with B = I)."""
    fig, data = _cells_figure("figure2", kappas, rng, width, ncols, variant)
    for p in data["panels"]:
        if "missing" not in p:
            p["voronoi_mismatch"] = G.voronoi_mismatch(p["hull"])
    return fig, data


def figure3(kappas=(5, 7), B=((1.0, 0.0), (0.0, 2.0)), c=1.0, width=None, ncols=None, n_levels=25, *,
            rng=SEED, variant="faithful"):
    """Figure 3: x -> 1/2 <Bx, x> over K, B = diag(1, 2) as in the published PDFs (E17).

    Directions come from ``sample_vertices(kappa, rng=rng, equal_norm=True)`` (no bijection flag)
    and are mapped onto the level set {1/2 <Bx, x> = c/2} by x = sqrt(c) B^{-1/2} u
    (:func:`attention_fw.geometry.planar.level_set_vertices`). The filled contours (``n_levels`` bands
    from 0 to c/2, plasma) are clipped by the exact hull polygon; vertices are black crosses.

    Returns
    -------
    (Figure, dict); each panel also records ``J_vertices`` (all equal to c/2), ``levels`` and the
    cells C_i(v) for this B with ``voronoi_mismatch`` (Proposition 4.5 for B != I).
    """
    kappas = _kappas(kappas)
    Bm = V.square_matrix("B", B, 2, symmetric=True)
    c = V.real_scalar("c", c, low=0.0, low_open=True)
    n_levels = V.positive_int("n_levels", n_levels, minimum=2)
    start = _stream_start(rng)
    panels = []
    for k in kappas:
        u, _ = G.sample_vertices(k, rng=start(), equal_norm=True, enforce_bijection=False)
        pts = G.level_set_vertices(u, Bm, c)
        p = _panel(k, None, V.seed_record(rng), labelling="exact", B=Bm, points=pts)
        p["c"] = c
        p["J_vertices"] = 0.5 * np.einsum("ij,jk,ik->i", pts, Bm, pts)
        p["voronoi_mismatch"] = G.voronoi_mismatch(p["hull"], Bm)
        panels.append(p)
    levels = np.linspace(0.0, c / 2, n_levels + 1)
    lims = _panel_limits(panels, margin=0.06)
    width = _width(width, len(panels))
    bar_h = 0.45
    ready = _variant(variant) == "paper-ready"
    fig, axes = _grid_axes(len(panels), width, lims[0][1], ncols, extra_bottom=bar_h,
                           title_h=_TITLE_H if ready else 0.0)
    cs = None
    for idx, (ax, p, (centre, half)) in enumerate(zip(axes, panels, lims)):
        if ready:
            _panel_title(ax, idx, rf"$\kappa = {p['kappa']}$")
        p["levels"] = levels
        K = p["hull"]
        lo, hi = K.min(0) - 0.02, K.max(0) + 0.02
        xs, ys = np.linspace(lo[0], hi[0], 600), np.linspace(lo[1], hi[1], 600)
        xx, yy = np.meshgrid(xs, ys)
        J = 0.5 * (Bm[0, 0] * xx**2 + (Bm[0, 1] + Bm[1, 0]) * xx * yy + Bm[1, 1] * yy**2)
        cs = ax.contourf(xx, yy, np.minimum(J, levels[-1]), levels=levels, cmap="plasma",
                         zorder=1)
        clip = MplPolygon(K, closed=True, transform=ax.transData, facecolor="none",
                          edgecolor="none")
        ax.add_patch(clip)
        cs.set_clip_path(clip)
        ax.plot(*np.vstack([K, K[:1]]).T, "k-", lw=0.8, zorder=3)
        ax.scatter(p["vertices"][:, 0], p["vertices"][:, 1], marker="x", color="k",
                   s=30 * _S, linewidths=0.8, zorder=4)
        _finish_axis(ax, centre, half)
    H = fig.get_figheight()
    cax = fig.add_axes([0.1, 0.3 * bar_h / H, 0.8, 0.18 * bar_h / H])
    cb = fig.colorbar(cs, cax=cax, orientation="horizontal")
    cb.set_ticks(np.linspace(0.0, c / 2, 6))
    cb.set_label(r"$\frac{1}{2}\langle Bx, x\rangle$")
    data = {"figure": "figure3", "panels": panels}
    if ready:
        data["variant"] = variant
    return fig, data


def _figure4(name, kappa, target, eta, delta, width, rng, variant="faithful"):
    kappa = V.positive_int("kappa", kappa, minimum=3)
    eta = V.real_scalar("eta", eta, low=0.0)
    delta = V.real_scalar("delta", delta, low=0.0)
    width = V.real_scalar("width", width, low=0.5, high=30)
    panel = _panel(kappa, _stream_start(rng)(), V.seed_record(rng), equal_norm=True, enforce_bijection=False,
                   labelling="exact")
    K = panel["hull"]
    target = V.positive_int("target", target, minimum=0)
    if target >= len(K):
        raise ValueError(f"target must be < the number of hull vertices ({len(K)}), got {target}")
    cone = G.cone(K, target, eta)
    eroded = G.erode(cone, delta) if len(cone) else cone
    (centre, half), = _panel_limits([panel], margin=0.06)
    ready = _variant(variant) == "paper-ready"
    fig, axes = _grid_axes(2, width, half, title_h=_TITLE_H if ready else 0.0)
    fills = ((cone, hsv_to_rgb([1 / 3, 1, 1])), (eroded, hsv_to_rgb([5 / 6, 1, 1])))
    if ready:  # blue and orange of the paper palette: apart in grey and for deuteranopes
        fills = ((cone, C.PAPER_PALETTE[0]), (eroded, C.PAPER_PALETTE[1]))
        titles = (rf"cone $\mathcal{{I}}_i(\eta)$, $\eta = {eta:g}$",
                  rf"eroded, $\delta = {delta:g}$")
    for idx, (ax, (poly, colour)) in enumerate(zip(axes, fills)):
        for i, cell in enumerate(panel["cells"]):
            if len(cell["polygon"]) >= 3:
                face = (0.95, 0.95, 0.95) if i == target else "white"
                ax.add_patch(MplPolygon(cell["polygon"], closed=True, facecolor=face,
                                        edgecolor="k", linewidth=0.5 * _S * 1.4, zorder=1))
        if len(poly) >= 3:
            ax.add_patch(MplPolygon(poly, closed=True, facecolor=colour, alpha=0.6,
                                    edgecolor="k", linewidth=0.5 * _S * 1.4, zorder=2))
        _draw_hull_and_vertices(ax, K, labels=None, origin_label=False)
        _finish_axis(ax, centre, half)
        if ready:
            _panel_title(ax, idx, titles[idx])
    data = {"figure": name, "kappa": kappa, "seed": panel["seed"], "eta": eta, "delta": delta,
            "target": target, "target_vertex": panel["hull_labels"][target],
            "vertices": panel["vertices"], "hull": K, "hull_labels": panel["hull_labels"],
            "hull_area": panel["hull_area"],
            "cells": [{k: c[k] for k in ("vertex", "polygon", "area")} for c in panel["cells"]],
            "cone": {"polygon": cone, "area": G.polygon_area(cone)},
            "eroded_cone": {"polygon": eroded, "area": G.polygon_area(eroded)}}
    if ready:
        data["variant"] = variant
    return fig, data


def figure4(kappa=7, target=2, eta=0.05, delta=0.03, width=plotting.TWO_COLUMN, *, rng=SEED, variant="faithful"):
    """Figure 4: cone I_i(eta) (left, green) and eroded cone I_i(eta) ominus delta B_1 (right,
    magenta) for the cell ``target`` in hull CCW order, equal norms, B = I (section 5).

    Defaults are those of the published file (delta = 0.03; the caption says 0.02, E16).
    The erosion is exact (:func:`attention_fw.geometry.planar.erode`).
    """
    return _figure4("figure4", kappa, target, eta, delta, width, rng, variant)


def figure4_delta002(kappa=7, target=2, eta=0.05, delta=0.02, width=plotting.TWO_COLUMN, *, rng=SEED,
                     variant="faithful"):
    """Figure 4 with the captioned delta = 0.02 (E16)."""
    return _figure4("figure4-delta002", kappa, target, eta, delta, width, rng, variant)


FIGURES = {
    "figure1": figure1,
    "figure1-corrected": figure1_corrected,
    "figure2": figure2,
    "figure3": figure3,
    "figure4": figure4,
    "figure4-delta002": figure4_delta002,
}


def _defaults(fn):
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()}


DEFAULTS = {name: _defaults(fn) for name, fn in FIGURES.items()}
"""Default parameters of every figure (the published ones)."""

CHAPTER = "04-positive-definite"
"""The book chapter that shows and discusses the paper's figures."""

INFO = {
    "figure1": dict(statement="Figure 1, cells lemma (erratum E18)",
                    caption="Figure 1, most likely variant: unit-direction regions of unequal-norm vertices"),
    "figure1-corrected": dict(statement="Figure 1, cells lemma (erratum E18)",
                              caption=r"Figure 1 corrected: the true cells $\mathcal{C}_i(v)$ of the same polygons"),
    "figure2": dict(statement="Figure 2, Proposition 4.5 (erratum E13)",
                    caption="Equal norms: the cells are the Voronoi cells of the vertices, clipped to the hull"),
    "figure3": dict(statement="Figure 3 (erratum E17)",
                    caption="The quadratic ½⟨Bx, x⟩ over the hull, B = diag(1, 2), vertices on a level set"),
    "figure4": dict(statement="Figure 4, hypotheses of Theorem 5.2 (erratum E16)",
                    caption=r"A cone $\mathcal{I}_i(\eta)$ in its cell and its erosion by δ = 0.03, as in the published file"),
    "figure4-delta002": dict(statement="Figure 4, hypotheses of Theorem 5.2 (erratum E16)",
                             caption="Figure 4 with the captioned erosion δ = 0.02"),
}
"""Statement and one-line caption of each paper figure, recorded in its data file."""


_FLAGS = ("kappas", "kappa", "target", "eta", "delta", "B", "width")


def _cli_number(v):
    v = float(v)
    return str(int(v)) if v.is_integer() else repr(v)


def command(name, params=None, style=None, usetex=False, width=None):
    """The command that regenerates figure ``name`` with ``params`` (all parameters spelled out).

    The same figure gives the same command however its parameters were passed (defaults are
    filled in), so the recorded metadata, and the file's bytes, do not depend on the caller.
    """
    if name not in FIGURES:
        raise ValueError(f"name must be one of {sorted(FIGURES)}, got {name!r}")
    full = {**DEFAULTS[name], **(params or {})}
    keys = [k for k in full if k not in ("rng", "variant")]
    keys.insert(1 if keys[0] in ("kappas", "kappa") else 0, "rng")  # --seed right after --kappas
    words = [name]
    extra = []
    for key in keys:
        value = full[key]
        if value is None:
            continue
        if key == "width" and is_default(name, {"width": value}):
            continue
        if key == "rng":
            if V.seed_record(value) is not None:
                words += ["--seed", str(int(value))]
            else:
                extra.append(f"rng={value!r}")
        elif key in ("kappas", "kappa"):
            ks = [value] if np.ndim(value) == 0 else list(value)
            words += ["--kappas", *(str(int(k)) for k in ks)]
        elif key == "B":
            words += ["--B", *(_cli_number(b) for b in np.asarray(value, dtype=float).ravel())]
        elif key in _FLAGS:
            words += [f"--{key}", _cli_number(value)]
        elif not is_default(name, {key: value}):
            extra.append(f"{key}={value!r}")
    if full.get("variant", "faithful") != "faithful":
        words.append(f"--{full['variant']}")
    if style is not None:
        words += ["--style", style]
    if width is not None:
        words += ["--width", width]
    if usetex:
        words.append("--usetex")
    cmd = f'make figure ARGS="{" ".join(words)}"'
    return cmd + (f"  (Python API only: {', '.join(extra)})" if extra else "")


WIDTHS = ("column", "text")
"""The width choices of ``--width`` besides a number of inches (see :func:`target_width`)."""


def _rows(name, params):
    """Rows of panels of figure ``name`` drawn with ``params``."""
    if "kappas" in DEFAULTS[name]:
        kappas = params.get("kappas", DEFAULTS[name]["kappas"])
        n = 1 if np.ndim(kappas) == 0 else len(kappas)
    else:
        n = 2  # figure 4: the cone and its erosion
    ncols = params.get("ncols") or (1 if n == 1 else 2)
    return -(-n // ncols)


def target_width(name, params, style=None, width=None):
    """Width (inches) of the saved figure for a venue ``style`` and a ``width`` choice, and the choice.

    ``width``: ``"column"`` or ``"text"`` (of the venue, :data:`afw_book.figures.VENUES`; of
    the book's one- and two-column widths without a style), or ``None``: the column for a figure
    of one row of panels, the text width for a figure of several rows.

    Returns
    -------
    (inches, choice)
    """
    if width is not None and width not in WIDTHS:
        raise ValueError(f"width must be one of {list(WIDTHS)} or a number of inches, got {width!r}")
    if style is not None and style not in plotting.VENUES:
        raise ValueError(f"style must be one of {sorted(plotting.VENUES)}, got {style!r}")
    v = plotting.VENUES[style] if style else {"column": plotting.ONE_COLUMN, "text": plotting.TWO_COLUMN}
    choice = width or ("column" if _rows(name, params) == 1 else "text")
    return float(v[choice]), choice


def make(name, outdir=None, **params):
    """Draw figure ``name`` with ``params`` and save it with :func:`afw_book.figures.save`.

    Parameters
    ----------
    name : str, one of :data:`FIGURES`
    outdir : path, optional
        Defaults to ``figures/`` (``afw_book.paths.figures_dir()``).
    **params
        Passed to the figure function (see its signature).

    Returns
    -------
    dict format -> written path.

    Raises
    ------
    ValueError
        Unknown name or unknown parameter.
    """
    if name not in FIGURES:
        raise ValueError(f"name must be one of {sorted(FIGURES)}, got {name!r}")
    unknown = set(params) - set(DEFAULTS[name])
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)} for {name}; "
                         f"accepted: {sorted(DEFAULTS[name])}")
    with plotting.style():
        fig, data = FIGURES[name](**params)
        return plotting.save(fig, name, data, outdir=outdir, meta=_meta(name, params))


def _meta(name, params, style=None, usetex=False, width=None):
    return {"chapter": CHAPTER, **INFO[name], "command": command(name, params, style, usetex, width)}


def make_all(outdir=None):
    """Write every paper figure with its published parameters; returns {name: paths}."""
    return {name: make(name, outdir=outdir) for name in FIGURES}


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
_EPILOG = """\
Without parameters the canonical files figures/<name>.{pdf,png,svg} and
figures/data/<name>.json are (re)written with the published parameters. With any
non-default parameter the files go to figures/custom/ unless --outdir is given,
so the canonical figures are never overwritten silently.

examples:
  python -m afw_book.paper_figures all
  python -m afw_book.paper_figures figure2 --kappas 6
  python -m afw_book.paper_figures figure4 --kappas 9 --target 0 --delta 0.05
  python -m afw_book.paper_figures figure2 --style icml --usetex
"""


def _parser():
    ap = argparse.ArgumentParser(
        prog="python -m afw_book.paper_figures",
        description="Regenerate the paper's Figures 1-4 from exact geometry.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=[*FIGURES, "all"], help="figure to draw, or all")
    ap.add_argument("--kappas", type=int, nargs="+",
                    help="numbers of vertices, one panel each (figure4: the first value)")
    ap.add_argument("--seed", type=int, help="seed of numpy.random.default_rng (published: 42)")
    ap.add_argument("--eta", type=float, help="figure4: cone margin eta (published 0.05)")
    ap.add_argument("--delta", type=float, help="figure4: erosion radius delta")
    ap.add_argument("--target", type=int, help="figure4: cell index in hull CCW order (published 2)")
    ap.add_argument("--B", type=float, nargs=4, metavar=("B11", "B12", "B21", "B22"),
                    help="figure3: the matrix B, row by row (published 1 0 0 2)")
    ap.add_argument("--width", type=_width_arg,
                    help="column or text (of the --style venue; without a style the book's 3.4 and 7.0 in), "
                         "or inches; default: the column for one row of panels, the text width for several. "
                         "The PDF page is exactly this wide")
    ap.add_argument("--style", choices=sorted(plotting.VENUES),
                    help="a venue's widths and font sizes (files named <name>-<style>)")
    ap.add_argument("--paper-ready", action="store_true",
                    help="panel labels, vertex labels that do not collide, colours that survive greyscale "
                         "and colour-blind readers (files named <name>-paper-ready; the faithful files are untouched)")
    ap.add_argument("--usetex", action="store_true",
                    help="set the text with LaTeX (needs a TeX installation; files named <name>-tex)")
    ap.add_argument("--outdir", help="output folder (default figures/, or figures/custom/ "
                                     "when parameters are changed)")
    return ap


def _params_for(name, args):
    accepted = DEFAULTS[name]
    p = {}
    if args.kappas is not None:
        if "kappas" in accepted:
            p["kappas"] = tuple(args.kappas)
        elif "kappa" in accepted:
            p["kappa"] = args.kappas[0]
    if args.paper_ready:
        p["variant"] = "paper-ready"
    if isinstance(args.width, float):
        p["width"] = args.width
    for key, param in (("seed", "rng"), ("eta", "eta"), ("delta", "delta"), ("target", "target")):
        val = getattr(args, key)
        if val is not None and param in accepted:
            p[param] = val
    if args.B is not None and "B" in accepted:
        p["B"] = np.array(args.B, dtype=float).reshape(2, 2)
    return p


def is_default(name, params):
    """True when ``params`` only repeat the published parameters of figure ``name``."""
    if name not in FIGURES:
        raise ValueError(f"name must be one of {sorted(FIGURES)}, got {name!r}")
    d = DEFAULTS[name]
    for k, v in params.items():
        if k not in d:
            raise ValueError(f"unknown parameter {k!r} for {name}; accepted: {sorted(d)}")
        if v is None or d[k] is None:
            same = v is None and d[k] is None
            if not same:
                return False
            continue
        if isinstance(v, str) or isinstance(d[k], str):
            same = v == d[k]
            if not same:
                return False
            continue
        try:
            same = np.array_equal(np.asarray(v, dtype=float), np.asarray(d[k], dtype=float))
        except (TypeError, ValueError):
            same = False
        if not same:
            return False
    return True


def _changed(name, params):
    """The parameters that differ from the published ones, in signature order (``rng`` as ``seed``)."""
    out = {}
    for key in DEFAULTS[name]:
        if key in params and key != "variant" and not is_default(name, {key: params[key]}):
            value = params[key]
            if key == "rng":
                seed = V.seed_record(value)
                key, value = "seed", seed if seed is not None else repr(value)
            out[key] = value
    return out


def stem(name, params=None, style=None, usetex=False, width=None, tagged=True):
    """The file stem of figure ``name``: ``<name>[-paper-ready][-<style>][-<width>][-tex]``, then
    ``--<tag>`` of the parameters that differ from the published ones
    (:func:`afw_book.figures.run_tag`) when ``tagged``.

    >>> stem("figure2"), stem("figure1", {"variant": "paper-ready"}, "icml", width="column")
    ('figure2', 'figure1-paper-ready-icml-column')
    >>> stem("figure2", {"kappas": (6,)}).startswith("figure2--kappas-6-")
    True
    """
    params = params or {}
    variant = params.get("variant", "faithful")
    words = [name] + (["paper-ready"] if variant == "paper-ready" else []) + ([style] if style else []) \
        + ([width] if width else []) + (["tex"] if usetex else [])
    tag = plotting.run_tag(_changed(name, params)) if tagged else ""
    return "-".join(words) + (f"--{tag}" if tag else "")


def render(name, outdir=None, close=True, style=None, usetex=False, width_choice=None, tagged=None,
           require_panel=False, **params):
    """Draw and save figure ``name``, protecting the canonical files and every earlier run.

    With the published parameters the files go to ``figures/``; with any other parameter, a
    ``style``, a width, ``usetex`` or the paper-ready ``variant``, to ``figures/custom/``
    (:func:`afw_book.figures.output_dir`) unless ``outdir`` is given, named by :func:`stem`:
    the changed parameters are in the name (``tagged``; default: when the folder is chosen here),
    so two different commands never write the same file. Used by the command line and the notebooks.

    Parameters
    ----------
    style : str, optional
        A venue of :data:`afw_book.figures.VENUES`: its font sizes, and its width.
    width_choice : {"column", "text"}, optional
        The venue's (or, without a style, the book's) column or text width; default: the column
        for one row of panels, the text width for several (:func:`target_width`). With a style, a
        width choice or a numeric ``width``, the saved PDF's page is exactly that wide.
    usetex : bool
        Text set by LaTeX.
    require_panel : bool
        Refuse (``ValueError``, nothing written) a cell figure none of whose panels could be
        drawn (the command line); otherwise such panels are drawn empty, saying why.
    **params
        The figure function's parameters, ``variant="paper-ready"`` among them.

    Returns
    -------
    (fig, data, written): the figure (closed unless ``close=False``), its data and the paths.

    Raises
    ------
    ValueError
        Unknown name, parameter, style or width.
    RuntimeError
        ``usetex`` without a TeX installation.
    """
    default = is_default(name, params)  # validates the name and the parameter names
    rc = plotting.venue_rc(style, usetex)  # validates the style, checks for TeX
    canonical = default and not rc and width_choice is None
    if tagged is None:
        tagged = outdir is None and not canonical
    if outdir is None:
        outdir = plotting.output_dir(canonical=canonical)
    target = None
    if params.get("width") is not None and not is_default(name, {"width": params["width"]}):
        target = V.real_scalar("width", params["width"], low=0.5, high=30)
    elif style is not None or width_choice is not None:
        target = target_width(name, params, style, width_choice)[0]
    file_stem = stem(name, params, style, usetex, width_choice, tagged)
    with plotting.style(rc):
        bbox = None
        if target is not None:
            fig, data = _fit_width(name, {k: v for k, v in params.items() if k != "width"}, target)
            bbox = _exact_width_box(fig, target)
        else:
            fig, data = FIGURES[name](**params)
        if require_panel and data.get("panels") and all("missing" in q for q in data["panels"]):
            plt.close(fig)
            raise ValueError("no panel to draw: " + "; ".join(
                f"kappa = {q['kappa']}: {q['missing']}" for q in data["panels"])
                + " (the authors' recipe; another --seed or fewer vertices may succeed)")
        written = plotting.save(fig, file_stem, data, outdir=outdir, close=close, bbox=bbox,
                                meta=_meta(name, params, style, usetex, width_choice))
    return fig, data, written


def _exact_width_box(fig, target):
    """The tight bounding box of ``fig`` (inches, padded as saved), widened symmetrically to
    ``target`` inches: the saved page is then exactly ``target`` wide."""
    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()
    box = fig.get_tightbbox(renderer).padded(matplotlib.rcParams["savefig.pad_inches"])
    extra = (target - box.width) / 2
    return Bbox.from_extents(box.x0 - extra, box.y0, box.x1 + extra, box.y1)


def _fit_width(name, params, target):
    """Draw with a width such that the saved (tightly cropped) figure is at most ``target``
    inches wide: labels placed outside the panels would otherwise widen it."""
    width = target
    for _ in range(6):
        fig, data = FIGURES[name](**params, width=width)
        saved = plotting.layout(fig)["size_in"][0]
        if saved <= target:
            break
        plt.close(fig)
        width *= (target - 0.01) / saved
    return fig, data


def main(argv=None):
    """Command-line entry point (see the module docstring and ``--help``)."""
    args = _parser().parse_args(argv)
    names = list(FIGURES) if args.name == "all" else [args.name]
    for name in names:
        params = _params_for(name, args)
        choice = args.width if isinstance(args.width, str) else None
        try:
            _, _, written = render(name, outdir=args.outdir, style=args.style, usetex=args.usetex,
                                   width_choice=choice, require_panel=True, **params)
        except (ValueError, TypeError, RuntimeError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return 2
        for path in written.values():
            print(f"wrote {_shown(path)}")
    return 0


def _width_arg(text):
    if text in WIDTHS:
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected column, text or a number of inches, got {text!r}") from None


def _shown(path):
    """``path`` relative to the working directory when it is inside it."""
    path = Path(path).resolve()
    try:
        return path.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


if __name__ == "__main__":
    matplotlib.use("Agg")                 # the command line never opens a window
    sys.exit(main())
