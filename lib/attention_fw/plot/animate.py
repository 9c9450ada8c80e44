"""Animations for the book that work in a static, offline page.

``matplotlib.animation.FuncAnimation.to_jshtml`` embeds every frame as a PNG inside a
self-contained HTML/JavaScript player (play, pause, step, a frame slider): no server,
no kernel, no network. The book uses it in two ways:

* :func:`trajectory_animation`: tokens moving layer by layer (motion shows what a still
  cannot: straight runs to a vertex, the shrinking hull, clusters forming);
* :func:`frames_view`: a *precomputed* parameter explorer: one frame per parameter value
  (for example one per ``beta``); the player's slider stands in for a live widget, which a
  static page cannot run.
"""
from __future__ import annotations

import re

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.animation import FuncAnimation
from matplotlib.text import Text
from scipy.spatial import ConvexHull, QhullError

from .. import _validate as V

__all__ = ["ANIMATION_DPI", "offline_player", "jshtml", "trajectory_animation", "frames_view"]

ANIMATION_DPI = 80
"""Resolution of the animation frames (dots per inch)."""

# matplotlib's player links Font Awesome 4 from a CDN for its button icons. The book must
# read offline, so the link is dropped and each icon becomes a small inline SVG.
_ICON_PATHS = {
    "fa-minus": "M2 7h12v2H2z",
    "fa-plus": "M7 2h2v5h5v2H9v5H7V9H2V7h5z",
    "fa-fast-backward": "M2 2h2v12H2zM9 2v12L4 8zM15 2v12L10 8z",
    "fa-step-backward": "M3 2h2v12H3zM13 2v12L6 8z",
    "fa-play fa-flip-horizontal": "M13 2v12L3 8z",
    "fa-pause": "M3 2h4v12H3zM9 2h4v12H9z",
    "fa-play": "M3 2l10 6-10 6z",
    "fa-step-forward": "M11 2h2v12h-2zM3 2l7 6-7 6z",
    "fa-fast-forward": "M12 2h2v12h-2zM1 2l5 6-5 6zM6 2l5 6-5 6z",
}
_CDN_LINK = re.compile(r'<link rel="stylesheet"\s+href="https?://[^"]*font-awesome[^"]*">')
_ICON = re.compile(r'<i class="fa ([^"]+)"></i>')


def _icon_svg(match) -> str:
    path = _ICON_PATHS.get(match.group(1))
    if path is None:
        raise ValueError(f"unknown player icon {match.group(1)!r}")
    return (f'<svg viewBox="0 0 16 16" width="12" height="12" aria-hidden="true">'
            f'<path fill="currentColor" d="{path}"/></svg>')


def offline_player(html: str) -> str:
    """Remove the CDN stylesheet from a ``to_jshtml`` player and inline its icons as SVG.

    Raises
    ------
    ValueError
        If the player still refers to a remote resource afterwards (a matplotlib change).
    """
    html = _CDN_LINK.sub("", html)
    html = _ICON.sub(_icon_svg, html)
    if re.search(r'(src|href)="https?://', html):
        raise ValueError("the animation player refers to a remote resource")
    return html


def jshtml(fig, update, frames: int, *, interval: int = 200, default_mode: str = "once") -> str:
    """Render ``update(k)`` for ``k = 0..frames-1`` into a self-contained HTML player.

    Parameters
    ----------
    fig : matplotlib Figure
        Closed afterwards.
    update : callable
        ``k -> None``, redrawing the figure for frame ``k``.
    frames : int
        Number of frames (>= 1).
    interval : int
        Milliseconds between frames when playing.
    default_mode : "once", "loop" or "reflect"

    Returns
    -------
    str
        HTML to show with ``IPython.display.HTML``: the player inside
        ``<div class="afw-animation" data-afw-font-pt=... data-afw-width-in=...>``, the
        smallest font size (points) of the figure's text and its width (inches), from which
        a page can tell how large its text is shown (font size x shown width / (72 x width)).
    """
    frames = V.positive_int("frames", frames)
    if default_mode not in ("once", "loop", "reflect"):
        raise ValueError(f"default_mode must be 'once', 'loop' or 'reflect', got {default_mode!r}")
    # fixed frame size (no tight bbox, which could make frames jitter)
    with matplotlib.rc_context({"animation.embed_limit": 60.0, "savefig.bbox": "standard"}):
        anim = FuncAnimation(fig, lambda k: update(k), frames=frames, interval=interval, blit=False)
        html = anim.to_jshtml(default_mode=default_mode)
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    width_in = float(fig.get_size_inches()[0])
    plt.close(fig)
    font = f' data-afw-font-pt="{min(sizes):g}"' if sizes else ""
    return (f'<div class="afw-animation"{font} data-afw-width-in="{width_in:g}">'
            f"{offline_player(html)}</div>")


def _hull_polygon(points):
    try:
        h = ConvexHull(points)
    except (QhullError, ValueError):
        return None
    v = points[h.vertices]
    return np.vstack([v, v[:1]])


def trajectory_animation(trajectory, *, colors=None, title=None, limits=None, figsize=(4.2, 4.2),
                         show_hull: bool = True, trail: int = 8, interval: int = 150,
                         marker_size: float = 22.0) -> str:
    """Animate planar tokens over time: current positions, short trails and the current hull.

    Parameters
    ----------
    trajectory : array (T, n, 2)
        Token positions at ``T`` consecutive recorded times.
    colors : sequence of n matplotlib colours, optional
    title : callable ``k -> str``, optional (frame title)
    limits : ((xmin, xmax), (ymin, ymax)), optional (default: the trajectory's box, padded)
    show_hull : draw ``conv{x_i^t}`` (the shrinking hull of Section 2.3)
    trail : how many past positions to draw as a fading trail

    Returns
    -------
    str : self-contained HTML player (see :func:`jshtml`).

    Raises
    ------
    ValueError
        ``trajectory`` not of shape (T, n, 2).
    """
    X = V.as_float_array("trajectory", trajectory, ndim=3, last_dim=2)
    T, n, _ = X.shape
    if limits is None:
        lo, hi = X.reshape(-1, 2).min(0), X.reshape(-1, 2).max(0)
        pad = 0.08 * max(float((hi - lo).max()), 1e-9)
        limits = ((lo[0] - pad, hi[0] + pad), (lo[1] - pad, hi[1] + pad))
    if colors is None:
        colors = plt.get_cmap("tab10")(np.arange(n) % 10)
    fig, ax = plt.subplots(figsize=figsize, dpi=ANIMATION_DPI)

    def update(k):
        ax.clear()
        ax.set_xlim(*limits[0])
        ax.set_ylim(*limits[1])
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        if show_hull:
            poly = _hull_polygon(X[k])
            if poly is not None:
                ax.fill(poly[:, 0], poly[:, 1], color="0.92", zorder=0)
                ax.plot(poly[:, 0], poly[:, 1], color="0.55", lw=0.8, zorder=1)
            start = _hull_polygon(X[0])
            if start is not None:
                ax.plot(start[:, 0], start[:, 1], color="0.55", lw=0.6, ls=":", zorder=1)
        lo = max(0, k - trail)
        for i in range(n):
            ax.plot(X[lo:k + 1, i, 0], X[lo:k + 1, i, 1], color=colors[i], lw=1.0, alpha=0.6, zorder=2)
        ax.scatter(X[k, :, 0], X[k, :, 1], s=marker_size, c=colors, edgecolors="k", linewidths=0.5, zorder=3)
        if title is not None:
            ax.set_title(title(k), fontsize=11)

    return jshtml(fig, update, T, interval=interval)


def frames_view(draw, values, *, figsize=(4.2, 4.2), interval: int = 500) -> str:
    """A precomputed parameter explorer: frame ``k`` is ``draw(ax, values[k])``.

    Returns a self-contained HTML player whose slider steps through ``values``.
    """
    values = list(values)
    if not values:
        raise ValueError("values must not be empty")
    fig, ax = plt.subplots(figsize=figsize, dpi=ANIMATION_DPI)

    def update(k):
        ax.clear()
        draw(ax, values[k])

    return jshtml(fig, update, len(values), interval=interval)
