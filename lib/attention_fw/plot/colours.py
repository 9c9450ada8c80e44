"""Colours that survive greyscale printing and colour-vision deficiency.

* :func:`srgb_to_lab`: CIE 1976 L*a*b* (D65) of sRGB colours, and :func:`delta_e` (ΔE*ab);
* :func:`simulate_deuteranopia`: the colour a deuteranope sees, by the matrix of Machado,
  Oliveira and Fernandes (2009, severity 1), applied to linear RGB;
* :func:`greyscale_lightness`: L* of the colour printed in grey (its relative luminance Y);
* :data:`PAPER_PALETTE` and :func:`map_colours`: colours for the cells of a polygon such that any
  two cells sharing a boundary differ in lightness (so in grey) and after the deuteranopia
  simulation, by a greedy colouring of the adjacency graph of the cells.

>>> bool(delta_e(srgb_to_lab([1, 1, 1]), [100, 0, 0]) < 1e-3)
True
"""
from __future__ import annotations

import numpy as np

from attention_fw import _validate as V

__all__ = ["srgb_to_linear", "srgb_to_lab", "delta_e", "simulate_deuteranopia", "greyscale_lightness",
           "PAPER_PALETTE", "adjacent_cells", "map_colours", "MACHADO_DEUTERANOPIA"]

MACHADO_DEUTERANOPIA = np.array([[0.367322, 0.860646, -0.227968],
                                 [0.280085, 0.672501, 0.047413],
                                 [-0.011820, 0.042940, 0.968881]])
"""Machado, Oliveira & Fernandes (2009), deuteranomaly of severity 1.0, on linear RGB."""

_SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                         [0.2126729, 0.7151522, 0.0721750],
                         [0.0193339, 0.1191920, 0.9503041]])
_WHITE = _SRGB_TO_XYZ.sum(axis=1)  # D65 white of sRGB


def _rgb(rgb):
    a = V.as_float_array("rgb", rgb)
    if a.shape[-1] != 3:
        raise ValueError(f"rgb must have 3 components in its last axis, got shape {a.shape}")
    if a.min() < -1e-9 or a.max() > 1 + 1e-9:
        raise ValueError("rgb components must lie in [0, 1]")
    return np.clip(a, 0.0, 1.0)


def srgb_to_linear(rgb):
    """Linear-light components of sRGB colours in [0, 1] (IEC 61966-2-1)."""
    c = _rgb(rgb)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _linear_to_srgb(lin):
    lin = np.clip(lin, 0.0, 1.0)
    return np.where(lin <= 0.0031308, 12.92 * lin, 1.055 * lin ** (1 / 2.4) - 0.055)


def _lab_from_linear(lin):
    xyz = lin @ _SRGB_TO_XYZ.T / _WHITE
    d = 6 / 29
    f = np.where(xyz > d ** 3, np.cbrt(xyz), xyz / (3 * d * d) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1)


def srgb_to_lab(rgb):
    """CIE L*a*b* (D65) of sRGB colours in [0, 1]; shape (..., 3)."""
    return _lab_from_linear(srgb_to_linear(rgb))


def delta_e(lab1, lab2):
    """CIE 1976 colour difference ΔE*ab (Euclidean distance in L*a*b*)."""
    return np.linalg.norm(np.asarray(lab1, dtype=float) - np.asarray(lab2, dtype=float), axis=-1)


def simulate_deuteranopia(rgb):
    """The sRGB colour a deuteranope perceives (Machado et al. 2009, severity 1)."""
    return _linear_to_srgb(srgb_to_linear(rgb) @ MACHADO_DEUTERANOPIA.T)


def greyscale_lightness(rgb):
    """L* of the grey with the colour's relative luminance (how it prints in black and white)."""
    lin = srgb_to_linear(rgb)
    y = lin @ _SRGB_TO_XYZ[1]
    d = 6 / 29
    return np.where(y > d ** 3, 116 * np.cbrt(y) - 16, y * 116 / (3 * d * d))


# Five colours of distinct lightness (L* of their grey 39, 58, 74, 87, 97: any two differ by at
# least 10) and hues (blue, orange, teal, pink, cream) that stay at least ΔE 15 apart for
# deuteranopes (tests/test_paper_ready.py checks both).
PAPER_PALETTE = np.array([
    [0.20, 0.35, 0.65],   # blue
    [0.87, 0.42, 0.12],   # orange
    [0.40, 0.78, 0.70],   # teal
    [0.98, 0.80, 0.88],   # pink
    [1.00, 0.98, 0.75],   # cream
])
"""The palette of the paper-ready figures (see :func:`map_colours`)."""


def _on_segment(p, a, b, tol):
    ab, ap = b - a, p - a
    L2 = ab @ ab
    if L2 == 0:
        return False
    t = (ap @ ab) / L2
    return -tol <= t <= 1 + tol and abs(ab[0] * ap[1] - ab[1] * ap[0]) <= tol * np.sqrt(L2)


def adjacent_cells(polygons, tol=1e-9):
    """Pairs (i, j), i < j, of polygons that share a piece of boundary of positive length.

    Two cells of a tiling share an edge or a part of one; the midpoint of the shorter of the two
    edges then lies on an edge of the other polygon. Polygons with fewer than 3 corners are skipped.
    """
    polys = [np.asarray(P, dtype=float).reshape(-1, 2) for P in polygons]
    scale = max((np.ptp(P, axis=0).max() for P in polys if len(P) >= 3), default=1.0)
    eps = tol * max(scale, 1.0)

    def edges(P):
        return [(P[k], P[(k + 1) % len(P)]) for k in range(len(P))]

    pairs = []
    for i in range(len(polys)):
        for j in range(i + 1, len(polys)):
            A, B = polys[i], polys[j]
            if len(A) < 3 or len(B) < 3:
                continue
            touch = any(np.linalg.norm(b - a) > 1e3 * eps and any(_on_segment((a + b) / 2, c, d, eps)
                                                                  for c, d in edges(Q))
                        for P, Q in ((A, B), (B, A)) for a, b in edges(P))
            if touch:
                pairs.append((i, j))
    return pairs


def map_colours(polygons, palette=PAPER_PALETTE):
    """A colour of ``palette`` for each polygon, different for any two that share a boundary.

    Greedy colouring of the adjacency graph (:func:`adjacent_cells`), most-connected polygon
    first; a planar map whose cells are convex needs few colours, and five always sufficed for
    the cell figures (the function raises if the palette runs out).

    Returns
    -------
    (k, 3) array of RGB colours.
    """
    palette = np.asarray(palette, dtype=float)
    n = len(polygons)
    nbrs = {i: set() for i in range(n)}
    for i, j in adjacent_cells(polygons):
        nbrs[i].add(j)
        nbrs[j].add(i)
    order = sorted(range(n), key=lambda i: (-len(nbrs[i]), i))
    index = {}
    for i in order:
        used = {index[j] for j in nbrs[i] if j in index}
        free = [c for c in range(len(palette)) if c not in used]
        if not free:
            raise ValueError(f"palette of {len(palette)} colours is too small for this map")
        index[i] = free[0]
    return palette[[index[i] for i in range(n)]]
