"""Plots of one's own arrays: tokens, trajectories, cells and hulls drawn on a given Axes.

Each function draws on the ``matplotlib.axes.Axes`` it is given (no figure is made, no
pyplot state is touched, nothing is computed but the geometry of what is drawn) and returns
that Axes, so that they compose::

    fig, ax = plt.subplots()
    plot_cells(ax, v, B)
    plot_tokens(ax, run.x)

Planar data only (the last axis of length 2); a batch of systems (R, n, 2) draws the first
system unless ``system`` says otherwise.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.patches import Polygon

from .. import _validate as chk
from ..geometry import planar

__all__ = ["plot_tokens", "plot_trajectories", "plot_cells", "plot_hull"]


def _planar(name: str, a: npt.ArrayLike, ndim: tuple[int, ...], system: int) -> np.ndarray:
    arr = chk.as_float_array(name, a, min_ndim=min(ndim), max_ndim=max(ndim), last_dim=2)
    if arr.ndim == max(ndim) and max(ndim) > min(ndim):
        if not -arr.shape[0] <= system < arr.shape[0]:
            raise ValueError(f"system must index the {arr.shape[0]} systems of {name}, got {system}")
        arr = arr[system]
    return arr


def _axes(ax: Any) -> Any:
    if not hasattr(ax, "scatter") or not hasattr(ax, "add_patch"):
        raise TypeError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
    return ax


def plot_tokens(ax: Any, x: npt.ArrayLike, *, system: int = 0, **scatter: Any) -> Any:
    """The tokens ``x`` (n, 2) or (R, n, 2) as points on ``ax``; ``scatter`` goes to ``ax.scatter``.

    Examples
    --------
    >>> import matplotlib.figure
    >>> ax = matplotlib.figure.Figure().add_subplot()
    >>> plot_tokens(ax, np.array([[0.0, 1.0], [1.0, 0.0]])) is ax
    True
    """
    x = _planar("x", x, (2, 3), system)
    ax = _axes(ax)
    ax.scatter(x[:, 0], x[:, 1], **{"s": 12, "color": "k", "zorder": 3, **scatter})
    ax.set_aspect("equal", adjustable="datalim")
    return ax


def plot_trajectories(ax: Any, trajectory: npt.ArrayLike, *, system: int = 0, start: bool = True,
                      **line: Any) -> Any:
    """Paths of the tokens, ``trajectory`` (T, n, 2) or (T, R, n, 2) (``simulate(..., trajectory=True)``).

    One line per token through its T positions; ``start`` marks the initial tokens with open
    circles and the final ones with dots. ``line`` goes to ``ax.plot``.

    Examples
    --------
    >>> import matplotlib.figure
    >>> import attention_fw as afw
    >>> x0 = np.array([[0.0, 1.0], [1.0, 0.0], [0.2, 0.3]])
    >>> run = afw.simulate(x0, afw.Hardmax(0.5), 5, trajectory=True)
    >>> ax = matplotlib.figure.Figure().add_subplot()
    >>> ax = plot_trajectories(ax, run.trajectory)
    >>> len(ax.lines)                     # one path per token
    3
    """
    tr = chk.as_float_array("trajectory", trajectory, min_ndim=3, max_ndim=4, last_dim=2)
    if tr.ndim == 4:
        if not -tr.shape[1] <= system < tr.shape[1]:
            raise ValueError(f"system must index the {tr.shape[1]} systems of trajectory, got {system}")
        tr = tr[:, system]
    ax = _axes(ax)
    for i in range(tr.shape[1]):
        ax.plot(tr[:, i, 0], tr[:, i, 1], **{"lw": 0.8, "color": f"C{i % 10}", **line})
    if start:
        ax.scatter(tr[0, :, 0], tr[0, :, 1], s=14, facecolors="none", edgecolors="0.3", zorder=3)
        ax.scatter(tr[-1, :, 0], tr[-1, :, 1], s=10, color="k", zorder=4)
    ax.set_aspect("equal", adjustable="datalim")
    return ax


def plot_cells(ax: Any, vertices: npt.ArrayLike, B: npt.ArrayLike | None = None, *, alpha: float = 0.35,
               colors: Any = None, edgecolor: str = "white") -> Any:
    """The exact cells ``C_i(v)`` of ``vertices`` (k, 2) for ``B`` (symmetric; identity by default), filled.

    The cells come from :func:`attention_fw.geometry.planar.cells` (exact polygons); cell ``i``
    gets colour ``C{i}`` unless ``colors`` is given, and its vertex is drawn on top.

    Examples
    --------
    >>> import matplotlib.figure
    >>> from attention_fw.geometry.polytope import regular_polygon
    >>> ax = plot_cells(matplotlib.figure.Figure().add_subplot(), regular_polygon(5))
    >>> len(ax.patches)                   # one polygon per cell
    5
    """
    v = _planar("vertices", vertices, (2,), 0)
    ax = _axes(ax)
    for i, cell in enumerate(planar.cells(v, B)):
        if len(cell) == 0:
            continue
        colour = f"C{i % 10}" if colors is None else colors[i]
        ax.add_patch(Polygon(cell, closed=True, facecolor=colour, alpha=alpha, edgecolor=edgecolor, lw=0.6))
    ax.scatter(v[:, 0], v[:, 1], s=18, color="k", zorder=4)
    ax.set_aspect("equal", adjustable="datalim")
    ax.autoscale_view()
    return ax


def plot_hull(ax: Any, points: npt.ArrayLike, *, system: int = 0, fill: bool = False, **line: Any) -> Any:
    """The convex hull of ``points`` (m, 2) or (R, m, 2) as a closed polygon (filled if ``fill``).

    Examples
    --------
    >>> import matplotlib.figure
    >>> ax = matplotlib.figure.Figure().add_subplot()
    >>> square = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.5, 0.5]])
    >>> len(plot_hull(ax, square).lines[0].get_xydata())    # 4 corners, closed
    5
    """
    p = _planar("points", points, (2, 3), system)
    ax = _axes(ax)
    corners = p[planar.convex_hull(p)] if len(p) >= 3 else p
    closed = np.vstack([corners, corners[:1]])
    ax.plot(closed[:, 0], closed[:, 1], **{"lw": 1.0, "color": "k", **line})
    if fill:
        ax.add_patch(Polygon(corners, closed=True, facecolor="0.9", edgecolor="none", zorder=0))
    ax.set_aspect("equal", adjustable="datalim")
    return ax
