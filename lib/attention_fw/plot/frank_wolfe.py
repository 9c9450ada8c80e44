"""How do the figures of the Frank-Wolfe chapter look? Each function takes the numbers and returns the figure.

The numbers come from :mod:`attention_fw.model.frank_wolfe` and :mod:`attention_fw.model.dynamics`; the
chapter saves and glues the figures (``afw_book.notebook.Page.figure``). Every function returns a
Figure with the numbers it drew attached (:func:`attention_fw.plot.figure_data`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from scipy.spatial import ConvexHull

from ..model import frank_wolfe as fw
from . import style as plotting
from ._figure import saved

__all__ = ["fig_oracle", "fig_ties", "fig_hull_area", "fig_diagonal_V"]


def _bare(ax):
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def fig_oracle(pts, B, i: int, *, extent=None, name: str = "ch2-oracle"):
    """One Frank-Wolfe step of token ``i``: level sets of <B x_i, .>, the oracle's vertex, the step (gamma = 1/2).

    ``pts`` (n, 2) planar tokens, ``B`` (2, 2), ``extent`` ``(xmin, xmax, ymin, ymax)`` of the
    level-set grid (default: the tokens' bounding box widened by a tenth of its size on each side).
    Returns the Figure; its :func:`~attention_fw.plot.figure_data` holds ``points``, ``B``, ``i``,
    ``lmo`` (the oracle's vertex ``s_i``) and ``extent``.
    """
    pts, B = np.asarray(pts, dtype=float), np.asarray(B, dtype=float)
    g = B @ pts[i]
    s = fw.lmo(pts, -g[None, :])[0]
    hull = ConvexHull(pts)
    if extent is None:
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        pad = 0.1 * (hi - lo).max()
        extent = (lo[0] - pad, hi[0] + pad, lo[1] - pad, hi[1] + pad)
    x0, x1, y0, y1 = (float(e) for e in extent)
    fig, ax = plt.subplots(figsize=(plotting.ONE_COLUMN, plotting.ONE_COLUMN))
    poly = pts[np.r_[hull.vertices, hull.vertices[0]]]
    gx, gy = np.meshgrid(np.linspace(x0, x1, 200), np.linspace(y0, y1, 200))
    ax.contour(gx, gy, g[0] * gx + g[1] * gy, levels=12, colors="0.75", linewidths=0.5)
    ax.fill(poly[:, 0], poly[:, 1], color="C0", alpha=0.12)
    ax.plot(poly[:, 0], poly[:, 1], color="C0", lw=1)
    ax.scatter(pts[:, 0], pts[:, 1], c="k", s=14, zorder=3)
    ax.annotate("", xy=pts[i] + 0.25 * g / np.linalg.norm(g), xytext=pts[i],
                arrowprops=dict(arrowstyle="->", color="C3"))
    ax.scatter(s[0], s[1], s=90, facecolors="none", edgecolors="C3", lw=1.5, zorder=4)
    ax.annotate("", xy=pts[i] + 0.5 * (s - pts[i]), xytext=pts[i],
                arrowprops=dict(arrowstyle="->", color="C2", lw=1.3))
    ax.text(pts[i][0] - 0.12, pts[i][1] - 0.13, "$x_i$")
    ax.text(s[0] + 0.05, s[1] + 0.06, "$s_i$", color="C3")
    _bare(ax)
    ax.set_title(r"$s_i=\arg\max_{y\in\mathcal{K}}\langle Bx_i,y\rangle$", fontsize=9)
    return saved(fig, name, {"points": pts, "B": B, "i": i, "lmo": s, "extent": [x0, x1, y0, y1]})


def fig_ties(corners, run_a, run_b, count_centre: int, count_edge: int, name: str = "ch2-ties"):
    """Engineered ties in a square: (a) the centre token stays, (b) a token on a cell boundary walks."""
    fig, ax = plt.subplots(figsize=(plotting.ONE_COLUMN, plotting.ONE_COLUMN))
    ax.plot(*np.r_[corners, corners[:1]].T, color="0.5", lw=0.8)
    ax.plot(run_b[:, 4, 0], run_b[:, 4, 1], "o-", ms=2.5, color="C2", lw=0.8)
    ax.scatter(run_a[-1, 4, 0], run_a[-1, 4, 1], s=40, facecolors="none", edgecolors="C3", lw=1.5, zorder=4)
    ax.scatter(corners[:, 0], corners[:, 1], c="k", s=18, zorder=3)
    ax.annotate(f"(a) centre: {count_centre} tied leaders,\nstays put", run_a[-1, 4], xytext=(-0.9, 0.45),
                fontsize=8, arrowprops=dict(arrowstyle="->", lw=0.6))
    ax.annotate(f"(b) (1/2, 0): {count_edge} tied leaders,\nwalks to (1, 0)", run_b[0, 4], xytext=(-0.3, -0.6),
                fontsize=8, arrowprops=dict(arrowstyle="->", lw=0.6))
    _bare(ax)
    ax.set_xlim(-1.2, 1.3)
    ax.set_ylim(-1.2, 1.2)
    return saved(fig, name, {"corners": corners, "trajectory_edge": run_b[:, 4], "centre_final": run_a[-1, 4],
                             "count_centre": count_centre, "count_edge": count_edge})


def fig_hull_area(areas, curves: int = 40, name: str = "ch2-hull-area"):
    """Hull area relative to the initial one: up to ``curves`` systems and the median over all."""
    fig, ax = plt.subplots(figsize=(plotting.ONE_COLUMN, 2.3))
    norm = areas / areas[0]
    positive = norm[norm > 0]
    # a hull that became flat (area 0: a segment or a point) is drawn on a floor below the rest
    floor = 10.0 ** (np.floor(np.log10(positive.min())) - 1) if positive.size else 1e-16
    flat = (norm == 0).any()
    shown = np.where(norm > 0, norm, floor)
    ax.semilogy(shown[:, :curves], color="C0", lw=0.6, alpha=0.5)
    ax.semilogy(np.maximum(np.median(norm, axis=1), floor), color="k", lw=1.5, label="median")
    if flat:
        ax.axhline(floor, color="0.5", lw=0.8, ls=":", label="area 0 (flat hull)")
    ax.set_xlabel("layer $t$")
    ax.set_ylabel(r"area$(\mathcal{K}^t)\,/\,$area$(\mathcal{K}^0)$")
    ax.legend(frameon=False)
    return saved(fig, name, {"relative_area": norm, "median": np.median(norm, axis=1)})


def fig_diagonal_V(tri, new, name: str = "ch2-diagonal-V"):
    """One layer with a diagonal value matrix: the old triangle, the moves, and the larger new hull."""
    fig, ax = plt.subplots(figsize=(plotting.ONE_COLUMN, plotting.ONE_COLUMN * 0.95))
    ax.fill(*tri[[0, 1, 2, 0]].T, color="C0", alpha=0.15, label=r"$\mathcal{K}$")
    ax.plot(*tri[[0, 1, 2, 0]].T, color="C0", lw=1)
    hv = ConvexHull(new).vertices
    ax.plot(*new[np.r_[hv, hv[0]]].T, color="C3", lw=1, ls="--", label=r"$\mathcal{K}^{1}$ (new hull)")
    for k in range(3):
        ax.annotate("", xy=new[k], xytext=tri[k], arrowprops=dict(arrowstyle="->", color="0.3", lw=0.8))
    ax.scatter(tri[:, 0], tri[:, 1], c="C0", s=20, zorder=3)
    ax.scatter(new[:, 0], new[:, 1], c="C3", s=20, zorder=3)
    ax.text(new[1, 0] + 0.03, new[1, 1] + 0.03, f"({new[1, 0]:.1f}, {new[1, 1]:.1f})", color="C3", fontsize=8)
    ax.set_aspect("equal")
    ax.set_xlim(-0.1, 1.15)
    ax.set_ylim(-0.1, 1.1)
    ax.legend(frameon=False, loc="upper right")
    return saved(fig, name, {"triangle": tri, "new": new})
