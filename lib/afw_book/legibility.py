"""Is a drawn figure legible? Three rules, measured on the renderer's boxes.

:func:`problems` lists, in words, every place where a drawn figure breaks one of them:

* **no text under** :data:`MIN_PT` points (tick labels, labels, titles, legends, annotations);
* **no two texts overlap** (their drawn boxes share more than :data:`SLACK_PT` in both directions);
* **no box over data**: a legend (its entries, not its margin), a colour bar, or a text drawn in a
  box (an annotation with a frame, an anchored text) covers no drawn data of any panel: no line
  segment, marker, patch, collection or image.

:func:`afw_book.figures.save` records the list in every figure's metadata (``meta["legibility"]``,
empty when the figure is legible); the tests and ``make fuzz`` require it empty for every figure
of the book and of every rerun. A figure is drawn before it is measured (:func:`problems` takes
the renderer of the save).
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import Collection, PathCollection
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.offsetbox import AnchoredOffsetbox, AnnotationBbox
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

__all__ = ["problems", "MIN_PT", "SLACK_PT"]

MIN_PT = 8.0
"""Smallest font size (points) of any text of a figure."""
SLACK_PT = 1.0
"""Overlaps smaller than this (points, in either direction) are not counted: anti-aliasing."""


def _texts(fig, renderer) -> Iterator[Text]:
    """The non-empty texts a draw of ``fig`` paints (tick labels: only those of drawn ticks)."""
    def walk(artist):
        if not artist.get_visible():
            return
        if isinstance(artist, Text):
            if artist.get_text().strip():
                yield artist
            return
        if isinstance(artist, Axes):
            if artist.axison:
                for axis in artist._axis_map.values():
                    if not axis.get_visible():
                        continue
                    for tick in axis._update_ticks():
                        for label in (tick.label1, tick.label2):
                            if label.get_visible() and label.get_text().strip():
                                yield label
                    if axis.label.get_visible() and axis.label.get_text().strip():
                        yield axis.label
                    off = axis.offsetText
                    if off.get_visible() and off.get_text().strip():
                        yield off
            children = [c for c in artist.get_children() if c not in set(artist._axis_map.values())
                        and not hasattr(c, "spine_type")]
        else:
            children = artist.get_children()
        for child in children:
            yield from walk(child)
    yield from walk(fig)


def _name(t: Text) -> str:
    text = t.get_text().strip().replace("\n", " ")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _overlap(a: Bbox, b: Bbox, slack: float) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > slack) and (min(a.y1, b.y1) - max(a.y0, b.y0) > slack)


def _segments_hit(xy: np.ndarray, box: Bbox) -> bool:
    """Whether the polyline ``xy`` (display coordinates; NaN rows break it) meets ``box``
    (Liang-Barsky clipping of every segment, vectorised)."""
    if len(xy) == 0:
        return False
    if len(xy) == 1:
        return bool(np.isfinite(xy).all() and box.contains(*xy[0]))
    p, q = xy[:-1], xy[1:]
    ok = np.isfinite(p).all(axis=1) & np.isfinite(q).all(axis=1)
    p, q = p[ok], q[ok]
    if not len(p):
        return False
    d = q - p
    t0, t1 = np.zeros(len(p)), np.ones(len(p))
    for k, lo, hi in ((0, box.x0, box.x1), (1, box.y0, box.y1)):
        for pk, qk in ((-d[:, k], p[:, k] - lo), (d[:, k], hi - p[:, k])):
            with np.errstate(divide="ignore", invalid="ignore"):
                r = qk / pk
            par = pk == 0
            t0 = np.where(par, t0, np.where(pk < 0, np.maximum(t0, r), t0))
            t1 = np.where(par, t1, np.where(pk > 0, np.minimum(t1, r), t1))
            t1 = np.where(par & (qk < 0), -1.0, t1)          # parallel and outside
    return bool((t0 <= t1).any())


def _points_hit(xy: np.ndarray, box: Bbox, radius: float) -> bool:
    if len(xy) == 0:
        return False
    xy = xy[np.isfinite(xy).all(axis=1)]
    grown = box.padded(radius)
    return bool(((xy[:, 0] > grown.x0) & (xy[:, 0] < grown.x1) & (xy[:, 1] > grown.y0) & (xy[:, 1] < grown.y1)).any())


def _polylines(path, transform) -> list[np.ndarray]:
    """The drawn pieces of ``path`` in display coordinates (closed polygons closed)."""
    out = []
    for poly in path.to_polygons(transform=transform, closed_only=False):
        if len(poly):
            out.append(np.asarray(poly, dtype=float))
    return out


def _data_hit(artist, box: Bbox, renderer, px_per_pt: float) -> bool:
    """Whether the drawn data ``artist`` meets ``box`` (display coordinates)."""
    if not artist.get_visible() or (artist.get_alpha() is not None and artist.get_alpha() == 0):
        return False
    if isinstance(artist, Line2D):
        xs, ys = (np.asarray(a, dtype=float).ravel() for a in artist.get_data(orig=False))
        xy = artist.get_transform().transform(np.column_stack([xs, ys])) if xs.size else np.empty((0, 2))
        hit = False
        if artist.get_linestyle() not in ("None", "none", " ", "") and artist.get_linewidth() > 0:
            hit = _segments_hit(xy, box.padded(artist.get_linewidth() * px_per_pt / 2))
        if not hit and artist.get_marker() not in (None, "None", "none", " ", ""):
            hit = _points_hit(xy, box, artist.get_markersize() * px_per_pt / 2)
        return hit
    if isinstance(artist, PathCollection):
        offsets = np.asarray(artist.get_offsets(), dtype=float).reshape(-1, 2)
        if len(offsets) == 0:
            return False
        xy = artist.get_offset_transform().transform(np.asarray(offsets, dtype=float))
        sizes = artist.get_sizes()
        radius = float(np.sqrt(sizes.max()) / 2 * px_per_pt) if len(sizes) else 0.0
        return _points_hit(xy, box, radius)
    if isinstance(artist, Collection):
        transform = artist.get_transform()
        filled = len(artist.get_facecolor()) and np.asarray(artist.get_facecolor())[:, 3].max() > 0
        for path in artist.get_paths():
            if filled and path.transformed(transform).intersects_bbox(box, filled=True):
                return True
            if any(_segments_hit(xy, box) for xy in _polylines(path, transform)):
                return True
        return False
    if isinstance(artist, Patch):
        path = artist.get_path().transformed(artist.get_transform())
        filled = artist.get_fill() and float(np.asarray(artist.get_facecolor(), dtype=float)[3]) > 0
        if filled:
            return bool(path.intersects_bbox(box, filled=True))
        return any(_segments_hit(xy, box) for xy in _polylines(artist.get_path(), artist.get_transform()))
    if isinstance(artist, AxesImage):
        ext = artist.get_window_extent(renderer)
        return _overlap(ext, box, 0.0)
    return False


def _data(ax: Axes) -> list:
    return [*ax.lines, *ax.collections, *[p for p in ax.patches], *ax.images]


def _boxes(fig, renderer) -> Iterator[tuple[str, Bbox, object]]:
    """(what, display box, owner) of every legend, colour bar and boxed text of ``fig``."""
    legends = [*fig.legends, *[ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]]
    for leg in legends:
        if isinstance(leg, Legend) and leg.get_visible():
            inner = leg._legend_box.get_window_extent(renderer)   # type: ignore[attr-defined]
            title = leg.get_title().get_text().strip()
            yield (f"legend ({title or ', '.join(t.get_text() for t in leg.get_texts())[:40]})", inner, leg)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        if getattr(ax, "_colorbar", None) is not None:
            yield ("colour bar", ax.get_window_extent(renderer), ax)
        for t in ax.texts:
            if t.get_visible() and t.get_text().strip() and t.get_bbox_patch() is not None:
                yield (f"boxed text {_name(t)}", t.get_bbox_patch().get_window_extent(renderer), t)
        for a in ax.artists:
            if isinstance(a, (AnchoredOffsetbox, AnnotationBbox)) and a.get_visible():
                yield ("annotation box", a.get_window_extent(renderer), a)


def problems(fig, renderer, draw: bool = True) -> list[str]:
    """Every break of the three rules of this module in the drawn ``fig``, one line each (sorted,
    so that the list is the same for the same figure). ``draw=False``: the figure has been drawn
    with ``renderer`` since its last change."""
    # the positions of a legend's entries are those of the last draw, which a tight-cropped save
    # shifts: drawn again here (nothing is written), they are those of the figure as it is
    if draw:
        fig.draw(renderer)
    px_per_pt = fig.dpi / 72.0
    slack = SLACK_PT * px_per_pt
    out: set[str] = set()
    texts = list(_texts(fig, renderer))
    small = sorted({round(float(t.get_fontsize()), 2) for t in texts if float(t.get_fontsize()) < MIN_PT - 1e-9})
    for size in small:
        first = next(t for t in texts if round(float(t.get_fontsize()), 2) == size)
        out.add(f"text under {MIN_PT:g} pt: {size:g} pt ({_name(first)})")
    extents = [(t, t.get_window_extent(renderer)) for t in texts]
    for i, (a, ba) in enumerate(extents):
        for b, bb in extents[i + 1:]:
            if _overlap(ba, bb, slack):
                out.add(f"texts overlap: {_name(a)} and {_name(b)}")
    panels = [ax for ax in fig.axes if ax.get_visible() and getattr(ax, "_colorbar", None) is None]
    for what, box, owner in _boxes(fig, renderer):
        inner = box.padded(-slack) if box.width > 2 * slack and box.height > 2 * slack else box
        for ax in panels:
            if ax is owner:
                continue
            area = ax.get_window_extent(renderer)
            if not _overlap(area, inner, 0.0):
                continue
            clip = Bbox.intersection(area, inner)
            if clip is None:
                continue
            for artist in _data(ax):
                if artist is not owner and _data_hit(artist, clip, renderer, px_per_pt):
                    title = ax.get_title() or f"panel {fig.axes.index(ax) + 1}"
                    out.add(f"{what} covers data of {title!r} ({type(artist).__name__}"
                            + (f" {artist.get_label()!r}" if not str(artist.get_label()).startswith("_") else "") + ")")
                    break
    return sorted(out)


# ------------------------------------------------------------------------------ placing legends
_LOCS = ("upper right", "upper left", "lower left", "lower right", "right", "center left", "center right",
         "lower center", "upper center", "center")
_LOC_CODES = {name: code for code, name in enumerate(
    ("best", "upper right", "upper left", "lower left", "lower right", "right", "center left", "center right",
     "lower center", "upper center", "center"))}


def _covers(ax: Axes, box: Bbox, renderer, px_per_pt: float) -> bool:
    area = ax.get_window_extent(renderer)
    if not _overlap(area, box, 0.0):
        return False
    clip = Bbox.intersection(area, box)
    return clip is not None and any(_data_hit(a, clip, renderer, px_per_pt) for a in _data(ax))


def thin_tick_labels(fig, draw: bool = True) -> list[str]:
    """Drop the labels of the minor ticks of every axis where two drawn tick labels overlap and
    one of them is a minor tick's (a log axis over a short range labels its minor ticks, which
    then collide). Returns what was changed, in words. Called by :func:`repair`."""
    from matplotlib.ticker import NullFormatter

    if draw:
        fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer() if hasattr(fig.canvas, "get_renderer") else fig._get_renderer()
    slack = SLACK_PT * fig.dpi / 72.0
    changed = []
    for ax in fig.axes:
        if not (ax.get_visible() and ax.axison):
            continue
        for name, axis in ax._axis_map.items():
            minor = set(map(id, axis.minorTicks))
            drawn = [(id(t) in minor, lab.get_window_extent(renderer)) for t in axis._update_ticks()
                     for lab in (t.label1, t.label2) if lab.get_visible() and lab.get_text().strip()]
            if any((m1 or m2) and _overlap(b1, b2, slack)
                   for i, (m1, b1) in enumerate(drawn) for m2, b2 in drawn[i + 1:]):
                axis.set_minor_formatter(NullFormatter())
                changed.append(f"minor tick labels of the {name} axis of panel {fig.axes.index(ax) + 1} dropped")
    if changed:
        fig.draw_without_rendering()
    return changed


def repair(fig) -> tuple[list[str], list[str]]:
    """What :func:`afw_book.figures.save` does to a figure before it renders it, so that a rerun's
    figure stays legible at any parameters: colliding minor tick labels dropped
    (:func:`thin_tick_labels`), legends over data moved (:func:`place_legends`); then what is
    still illegible (:func:`problems`). Returns (the changes, the problems), in words. The same
    figure gets the same changes, so saves stay byte-identical. Overlaps do not change when a
    save crops the figure (every artist moves by the same amount), so they are measured here,
    on the one draw the changes needed."""
    changes = thin_tick_labels(fig) + place_legends(fig, draw=False)
    renderer = fig.canvas.get_renderer() if hasattr(fig.canvas, "get_renderer") else fig._get_renderer()
    return changes, problems(fig, renderer, draw=False)


def place_legends(fig, draw: bool = True) -> list[str]:
    """Move every panel's legend that covers drawn data of its panel to the first place inside the
    panel where it covers none (upper right, upper left, lower left, ... as matplotlib names
    them), or, when there is no such place, outside the panel: under it when no other panel
    stands there, else to its right when no panel stands there, else to the right of the whole
    figure at the panel's height. Under comes first: a figure of the book has the width of its
    column, and a legend moved to the right would widen it (the page would then shrink or pan
    it). Returns what was moved (for the record), in words.

    Deterministic: the same figure gives the same places. Called by
    :func:`afw_book.figures.save` before the figure is rendered.
    """
    legends = [(ax, ax.get_legend()) for ax in fig.axes
               if ax.get_visible() and ax.get_legend() is not None and ax.get_legend().get_visible()
               and getattr(ax, "_colorbar", None) is None]
    if not legends:
        return []
    if draw:
        fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer() if hasattr(fig.canvas, "get_renderer") else fig._get_renderer()
    px_per_pt = fig.dpi / 72.0
    moved: list[str] = []
    outside: list[Bbox] = []
    for ax, leg in legends:
        outer = leg.get_window_extent(renderer)
        inner = leg._legend_box.get_window_extent(renderer)
        if not _covers(ax, inner, renderer, px_per_pt):
            continue
        # the entries' box relative to the legend's, to test a candidate place as the check does
        dx0, dy0, dx1, dy1 = inner.x0 - outer.x0, inner.y0 - outer.y0, outer.x1 - inner.x1, outer.y1 - inner.y1
        parent = ax.bbox          # the places inside the panel (whatever the legend was anchored to)
        free = None
        for loc in _LOCS:
            x, y = leg._get_anchored_bbox(_LOC_CODES[loc], Bbox.from_bounds(0, 0, outer.width, outer.height),
                                          parent, renderer)
            cand = Bbox.from_extents(x + dx0, y + dy0, x + outer.width - dx1, y + outer.height - dy1)
            if not _covers(ax, cand, renderer, px_per_pt):
                free = loc
                break
        if free is not None:
            leg.set_bbox_to_anchor(None)
            leg.set_loc(free)
            moved.append(f"legend of panel {fig.axes.index(ax) + 1} moved to {free}")
            continue
        pos = ax.get_position()
        others = [o for o in fig.axes if o is not ax and o.get_visible()]

        def beside(o) -> bool:      # o stands to the right of ax, at a height that meets it
            q = o.get_position()
            return q.x0 >= pos.x1 - 1e-9 and min(q.y1, pos.y1) > max(q.y0, pos.y0)

        def below(o) -> bool:       # o stands under ax, at a width that meets it
            q = o.get_position()
            return q.y1 <= pos.y0 + 1e-9 and min(q.x1, pos.x1) > max(q.x0, pos.x0)

        number = fig.axes.index(ax) + 1
        # the panels keep the places the layout gave them: a layout engine run again would shrink
        # the panels to take the legend in (constrained layout collapses a grid that way)
        if fig.get_layout_engine() is not None and not outside:
            fig.draw_without_rendering()
            fig.set_layout_engine("none")
            pos = ax.get_position()
        to_fig = fig.transFigure.inverted()
        if not any(below(o) for o in others):
            under = ax.get_tightbbox(renderer)
            leg.set_loc("upper center")
            anchor = ((pos.x0 + pos.x1) / 2, float(to_fig.transform((0, under.y0))[1]) - 0.01)
            where = "outside, under the panel"
        elif not any(beside(o) for o in others):
            leg.set_loc("upper left")
            anchor = (pos.x1 + 0.02 * pos.width, pos.y1)
            where = "outside, to the right"
        else:                       # a grid: to the right of the whole figure, at the panel's height
            leg.set_loc("upper left")
            anchor = (max(o.get_position().x1 for o in [ax, *others]) + 0.02, pos.y1)
            where = "outside, to the right of the figure"
        # a legend moved out earlier may stand there already: go down past it
        for _ in range(len(outside) + 1):
            leg.set_bbox_to_anchor(anchor, transform=fig.transFigure)
            _draw_alone(leg, renderer)
            box = leg.get_window_extent(renderer)
            hit = [b for b in outside if _overlap(b, box, 0.0)]
            if not hit:
                break
            low = min(b.y0 for b in hit)
            anchor = (anchor[0], float(to_fig.transform((0, low))[1]) - 0.01)
        outside.append(leg.get_window_extent(renderer))
        moved.append(f"legend of panel {number} moved {where}")
    return moved


def _draw_alone(leg, renderer) -> None:
    """Lay out the legend ``leg`` at its anchor without painting, as a draw of its figure would.

    For a figure whose panels' places are frozen (:func:`place_legends` removes the layout engine
    before it moves a legend outside): a draw of the whole figure would then change nothing but this
    legend's place, and its entries' texts (which :func:`problems` measures) are placed by a draw.
    Drawing the legend alone places them the same for a fraction of the cost."""
    with getattr(renderer, "_draw_disabled", contextlib.nullcontext)():
        leg.draw(renderer)
