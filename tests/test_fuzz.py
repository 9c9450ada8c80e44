"""A reader's rerun never crashes (issue 36): the contract, the harness, the known cases, legibility.

* every chapter's declaration (``PARAMETERS``, with what a parameter requires of the others) is
  read without a kernel, and the Hypothesis strategies of ``tools/fuzz.py`` built from it draw
  only runs that the runner either accepts or refuses in one line (a fixed, derandomised sample
  per chapter, found by glob: a new chapter is covered without editing this file);
* the requirement phrases accept exactly what they say;
* the known crash cases of chapters 1 and 2 run to the end through the book's runner and pass
  the harness's verdict (finished, figures written, no NaN, no "nan" printed, legible figures);
  the library functions behind them give defined numbers (a flat hull, an error that rounds to 0);
* the legibility check finds a legend over a line, overlapping texts and small text on built
  figures, and the save moves a legend that covers data to a free place or out of the panel.
"""
from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from afw_book import figures as F  # noqa: E402
from afw_book import legibility as L  # noqa: E402
from afw_book import presets as PR  # noqa: E402
from bookbuild import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
import fuzz  # noqa: E402
from run_notebook import check_parameters  # noqa: E402

CHAPTERS = fuzz.chapters()


@pytest.mark.parametrize("source", CHAPTERS, ids=lambda p: p.stem)
def test_drawn_reruns_are_accepted_or_refused_in_one_line(source):
    """A fixed sample of the harness's draws per chapter, checked as the runner checks them
    (no kernel): each is accepted, or refused with one line naming a parameter; most (those that
    respect the requirements) are accepted."""
    text = source.read_text()
    declared = PR.read_declaration(text)["parameters"]
    runs = fuzz.draws(source, 12, seed=None, derandomize=True)
    assert len(runs) >= 6
    accepted = 0
    for overrides in runs:
        assert overrides and set(overrides) <= set(declared)
        try:
            check_parameters(text, "quick", overrides)
            accepted += 1
        except ValueError as err:
            msg = str(err)
            assert "\n" not in msg and " is not accepted: expected " in msg
            assert msg.split(" = ", 1)[0] in declared, msg
    assert accepted >= len(runs) // 2, (accepted, runs)


DECL = {
    "betas": ("list[float]", "> 0", "all betas", "at least 3 items; distinct"),
    "shown": ("list[float]", "> 0", "betas shown", "each one of betas; at most 2 items"),
    "kappas": ("list[int]", ">= 3", "polygons", "contains 3"),
    "weights": ("list[float]", "", "one per beta", "as many items as betas"),
    "lo": ("float", "> 0", "lower end", "< hi"),
    "hi": ("float", "> 0", "upper end"),
}
GOOD = dict(betas=[1.0, 2.0, 4.0], shown=[2.0], kappas=[3, 5], weights=[1.0, 1.0, 1.0], lo=1.0, hi=2.0)


@pytest.mark.parametrize("name,value,phrase", [
    ("betas", [1.0, 2.0], "at least 3 items"),
    ("betas", [1.0, 1.0, 2.0], "distinct"),
    ("shown", [3.0], "each one of betas"),
    ("shown", [1.0, 2.0, 4.0], "at most 2 items"),
    ("kappas", [4, 5], "contains 3"),
    ("weights", [1.0], "as many items as betas"),
    ("lo", 2.0, "< hi"),
])
def test_each_requirement_phrase_accepts_exactly_what_it_says(name, value, phrase):
    PR.check_requires(DECL, GOOD)
    with pytest.raises(ValueError) as err:
        PR.check_requires(DECL, {**GOOD, name: value})
    msg = str(err.value)
    assert msg.startswith(f"{name} = {value!r} is not accepted: expected ") and phrase in msg and "\n" not in msg
    # a requirement on a value not known (a preset written as code) waits for the kernel
    PR.check_requires(DECL, {**GOOD, "betas": None, "shown": [9.0]})


def test_a_malformed_requirement_is_an_authoring_error():
    src = ('# %% tags=["parameters"]\npreset = "paper"\n'
           'PARAMETERS = {"n": ("list[int]", ">= 1", "m", "each one of nothing")}\n')
    with pytest.raises(ValueError, match="names 'nothing'"):
        PR.read_declaration(src)
    src = src.replace("each one of nothing", "roughly 3")
    with pytest.raises(ValueError, match="requirement 'roughly 3'"):
        PR.read_declaration(src)


def test_the_runner_checks_requirements_on_the_presets_values_before_a_kernel(tmp_path):
    """Chapter 5's histograms show betas of the jump sweep: one given alone is checked against the
    preset's list, read from the source (the one line names both)."""
    import subprocess

    out = tmp_path / "o.ipynb"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "run_notebook.py"), str(ROOT / "book" / "05-finite-beta.py"),
                           "--preset", "quick", "-p", "hist_betas", "[5.0]", "-o", str(out),
                           "--times-dir", str(tmp_path / "t")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and not out.exists() and not (tmp_path / "t").exists()
    assert proc.stderr.strip() == ("run_notebook: 05-finite-beta: hist_betas = [5.0] is not accepted: expected each one "
                                   "of jump_betas (here [4.0, 8.0, 16.0]) (inverse temperatures shown in the histograms)")


@pytest.mark.parametrize("chapter,overrides,names", [
    # two jump temperatures: no slope with an interval from two points
    ("05-finite-beta", {"jump_betas": [4.0, 8.0]}, "jump_betas"),
    # lists that contradict each other: a shown beta not run
    ("05-finite-beta", {"jump_betas": [2.0, 4.0, 8.0], "hist_betas": [16.0]}, "hist_betas"),
    # four schedules need four numbers of layers
    ("04-positive-definite", {"schedule_steps": [10, 20]}, "schedule_steps"),
])
def test_known_inconsistent_reruns_are_refused_in_one_line(chapter, overrides, names):
    """Known crash cases of issue 36 that the declaration now refuses before a kernel starts."""
    with pytest.raises(ValueError) as err:
        check_parameters((ROOT / "book" / f"{chapter}.py").read_text(), "quick", overrides)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{names} = ") and " is not accepted: expected " in msg


def test_preset_values_are_read_from_the_source_without_running_it():
    text = (ROOT / "book" / "07-deterministic-dynamics.py").read_text()
    values = PR.preset_values(text, "paper")
    assert values["cap"] == 10**7 and "configs" not in values     # list(SB.FAMILY) is code, not a literal


# ------------------------------------------------------------------------------ the known cases
def test_a_flat_hull_has_an_inside_and_an_outside():
    """outside_hull on a segment and on a point (the hull of chapter 2's tokens at gamma >= 1/2):
    a point of the segment is inside, one off it or beyond its ends by more than tol is outside."""
    from attention_fw.geometry.polytope import outside_hull

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(2), rng.standard_normal(2)
    seg = a + np.linspace(0, 1, 5)[:, None] * (b - a)
    t = rng.uniform(0, 1, 50)[:, None]
    normal = np.array([-(b - a)[1], (b - a)[0]]) / np.linalg.norm(b - a)
    assert not outside_hull(seg, a + t * (b - a)).any()
    assert outside_hull(seg, a + t * (b - a) + 1e-6 * normal).all()
    assert outside_hull(seg, np.array([a + 1.01 * (b - a), a - 0.01 * (b - a)])).all()
    point = np.repeat(a[None], 4, axis=0)
    assert outside_hull(point, np.array([a, a + 1e-13, a + 1e-3])).tolist() == [False, False, True]


def test_hull_shrinking_follows_a_hull_that_collapses():
    """gamma = 1: every token jumps onto its leader, the hull becomes a segment or a point within
    a few layers; the area is recorded as 0 and never grows, and no token leaves the hull."""
    from attention_fw.model import frank_wolfe as fw

    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 10, 2))
    res = fw.hull_shrinking(x, 1.0, np.eye(2)[None].repeat(6, axis=0) * -1, 12)
    assert res.outside == 0 and (res.areas[-1] == 0).any()
    assert (np.diff(res.areas, axis=0) <= 1e-12 * res.areas[0]).all()


def test_the_envelope_constant_is_defined_where_the_exponential_overflows():
    """err * exp(beta Delta) with an error that rounds to 0 at beta Delta = 2000 is 0, not NaN; the
    constant is the largest of the others, and NaN only when no point has beta Delta > 10."""
    from attention_fw.experiments.model_checks import _envelope

    errors = np.array([[0.0, 2 * np.exp(-20.0)], [1e-300, 1.0]])
    bD = np.array([[2000.0, 20.0], [5.0, 3.0]])
    assert _envelope(errors, bD, bD > 10) == pytest.approx(2.0, rel=1e-12)
    assert np.isnan(_envelope(errors, bD, bD > 1e4))


@pytest.mark.parametrize("chapter,overrides", [
    # no beta Delta > 10 (no constant, no dashed line); two tokens, one configuration, one sample;
    # gamma = 1 (no finite value matrix gives SAbeta)
    ("01-model", {"betas": [0.5, 1.0], "n": 2, "configs": 1, "samples": 1, "steps": 1, "gamma": 1.0}),
    # gamma = 1: the hulls of the hull-shrinking check become flat
    ("02-frank-wolfe", {"gamma": 1.0, "tie_configs": 20, "tie_steps": 3, "e7_pairs": 10, "hull_configs": 4,
                        "oracle_configs": 2}),
    # d = 64: every token owns its cell, none is led by an owner (no ratio, null in the data)
    ("06-context-length", {"run_d": 64, "run_n": 256, "own_ns": [256], "own_dims": [4], "own_tokens": 512,
                           "check_n": 256}),
    # two betas per configuration (no fit before the extension), one configuration that the
    # figure's selection does not name, and a coupling temperature at which SA-beta never exits
    ("07-deterministic-dynamics", {"configs": ["triangle, 1 per vertex"], "num_betas": 2, "coupling_beta": 40.0}),
])
def test_known_crashing_reruns_now_run_to_the_end(tmp_path, chapter, overrides):
    outcome = fuzz.run_one(ROOT / "book" / f"{chapter}.py", overrides, tmp_path)
    assert outcome.status == "ran", (outcome.command, outcome.problems, outcome.message[-3000:])


# ------------------------------------------------------------------------------ legibility
def _saved_meta(fig, tmp_path, name="f"):
    written = F.save(fig, name, {"x": [1.0]}, outdir=tmp_path, meta={"chapter": "test"})
    return json.loads(written["json"].read_text())["meta"], written


def test_the_check_finds_what_it_names():
    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 3))
    a.plot([0, 1], [0, 1], label="x")
    leg = a.legend(loc="center")                         # over the line
    a.text(0.2, 0.8, "one label", fontsize=9)
    a.text(0.2, 0.8, "one label", fontsize=9)           # the same place: overlap
    b.set_title("tiny", fontsize=6)
    fig.draw_without_rendering()
    found = L.problems(fig, fig.canvas.get_renderer())
    assert any(p.startswith("legend (x) covers data") for p in found), found
    assert any(p.startswith("texts overlap: 'one label' and 'one label'") for p in found), found
    assert "text under 8 pt: 6 pt ('tiny')" in found
    leg.remove()
    assert not any("legend" in p for p in L.problems(fig, fig.canvas.get_renderer()))
    plt.close(fig)


def test_save_moves_a_covering_legend_to_a_free_place_or_out_of_the_panel(tmp_path):
    fig, ax = plt.subplots(figsize=(4, 3))
    x = np.linspace(0, 1, 50)
    ax.plot(x, x, label="rising")
    ax.plot(x, 1 - x, label="falling")
    ax.legend(loc="upper left")
    meta, _ = _saved_meta(fig, tmp_path)
    assert meta["legibility"] == []
    # a legend anchored to a point of the panel moves to a free place inside the panel
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(x, x, label="rising")
    ax.plot([0, 0.3], [1, 1], label="top")
    leg = ax.legend(loc="upper left", bbox_to_anchor=(0, 1.0))
    meta, _ = _saved_meta(fig, tmp_path, "h")
    box, area = leg.get_window_extent(), ax.get_window_extent()
    assert meta["legibility"] == [] and area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0
    # no free place inside: a panel filled by an image goes outside
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.imshow(np.arange(100.0).reshape(10, 10))
    ax.plot([0, 9], [0, 9], label="diagonal")
    ax.legend()
    meta, written = _saved_meta(fig, tmp_path, "g")
    assert meta["legibility"] == []
    again, _ = _saved_meta(_rebuild(), tmp_path / "again", "g")
    assert (tmp_path / "again" / "g.png").read_bytes() == written["png"].read_bytes()   # still reproducible


def _rebuild():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.imshow(np.arange(100.0).reshape(10, 10))
    ax.plot([0, 9], [0, 9], label="diagonal")
    ax.legend()
    return fig


def test_save_drops_colliding_minor_tick_labels(tmp_path):
    """A log axis over less than a decade labels its minor ticks; where they collide, save drops
    them (the major labels stay)."""
    fig, ax = plt.subplots(figsize=(2.0, 2.0))
    ax.loglog([0.55, 0.95], [1, 2], "o-")
    fig.draw_without_rendering()
    assert any("overlap" in p for p in L.problems(fig, fig.canvas.get_renderer()))
    meta, _ = _saved_meta(fig, tmp_path, "ticks")
    assert meta["legibility"] == []


def _four_panels_with_legends():
    """Four panels in a constrained grid, three lines each under a legend that has no free place; drawn."""
    fig, axes = plt.subplots(2, 2, figsize=(7, 4), layout="constrained")
    t = np.linspace(0, 1, 100)
    for ax in axes.flat:
        for y, label in ((t, "rising, a long label"), (1 - t, "falling"), (0.5 + 0 * t, "flat")):
            ax.plot(t, y, label=label)
        ax.legend()
    fig.draw_without_rendering()
    return fig, axes


def test_legends_moved_out_of_a_grid_keep_the_panels_and_each_other_apart(tmp_path):
    """Four panels in a constrained grid, each legend over data with no free place: the legends
    go outside (to the right, under, or to the right of the figure), none over another, and the
    panels keep the size the layout gave them."""
    fig, axes = _four_panels_with_legends()
    widths = [ax.get_position().width for ax in axes.flat]
    meta, _ = _saved_meta(fig, tmp_path, "grid")
    assert meta["legibility"] == []
    assert [ax.get_position().width for ax in axes.flat] == pytest.approx(widths, rel=1e-9)


def test_a_legend_moved_out_is_where_a_draw_of_the_whole_figure_puts_it():
    """place_legends lays out a legend it moves outside alone, not the whole figure (the panels'
    places are frozen by then): every legend's box and its entries' texts (which the legibility
    check measures) are where a draw of the whole figure puts them afterwards."""
    fig, axes = _four_panels_with_legends()
    moved = L.place_legends(fig, draw=False)
    assert len(moved) == 4 and all("outside" in m for m in moved), moved
    renderer = fig.canvas.get_renderer()

    def boxes():
        return [[a.get_window_extent(renderer).extents.tolist() for a in (leg, *leg.get_texts())]
                for leg in (ax.get_legend() for ax in axes.flat)]

    measured = boxes()
    fig.draw_without_rendering()
    assert boxes() == measured
    plt.close(fig)


def test_legends_moved_out_of_a_row_go_under_and_keep_the_figure_width(tmp_path):
    """A row of three panels at the text width, each legend over data with no free place: the
    legends go under their panels, not to the right (a wider figure would pan in the book's
    column), and the saved figure is no wider than the row itself."""
    from attention_fw.plot.style import TWO_COLUMN

    fig, axes = plt.subplots(1, 3, figsize=(TWO_COLUMN, 2.4), layout="constrained")
    t = np.linspace(0, 1, 100)
    for ax in axes:
        for y, label in ((t, "rising, a long label"), (1 - t, "falling"), (0.5 + 0 * t, "flat")):
            ax.plot(t, y, label=label)
        ax.legend()
    meta, _ = _saved_meta(fig, tmp_path, "row")
    assert meta["legibility"] == []
    assert meta["size_in"][0] <= TWO_COLUMN + 0.05      # a tight crop may only trim the margins
    assert meta["size_in"][1] > 2.4 - 0.3               # the legends added height, not width


def test_cell_figures_at_a_readers_parameters_have_no_colliding_labels():
    """Figs. 4.1-4.3 at a reader's parameters have no colliding labels (at the published ones
    neither: tests/test_paper_ready.py)."""
    from afw_book import paper_figures as pf

    for name in ("figure1", "figure1-corrected", "figure2"):
        fig, _ = pf.FIGURES[name](kappas=(5, 7))
        fig.draw_without_rendering()
        assert not [p for p in L.problems(fig, fig.canvas.get_renderer()) if "overlap" in p], name
        plt.close(fig)


def test_a_cell_figure_without_a_draw_shows_the_missing_panel_and_says_why():
    """Found by make fuzz: with unequal norms the authors' recipe rarely puts every one of many
    points on the hull (kappa = 19 never in 500 tries); the figure keeps its other panels, the
    empty one says why, and the data record the missing panel instead of raising."""
    from afw_book import paper_figures as pf

    fig, data = pf.figure1(kappas=(3, 19), rng=405083)
    fig.draw_without_rendering()
    try:
        missing = [p for p in data["panels"] if "missing" in p]
        assert [p["kappa"] for p in missing] == [19] and "500 tries" in missing[0]["missing"]
        assert "cells" in data["panels"][0] and len(data["panels"][0]["hull"]) == 3
        shown = [t.get_text() for t in fig.axes[1].texts]
        assert any("not drawn" in t and "19" in t for t in shown), shown
        assert L.problems(fig, fig.canvas.get_renderer()) == []
    finally:
        plt.close(fig)


def test_only_no_draw_makes_an_empty_panel(monkeypatch):
    """The cell figures recognise the library's NoDrawError (its class, not its message): any other
    ValueError of the recipe still propagates."""
    from afw_book import paper_figures as pf
    from attention_fw.geometry import planar as G

    def refuse(*args, **kwargs):
        raise ValueError("no draw: a message that only looks like the recipe's")
    monkeypatch.setattr(G, "sample_vertices", refuse)
    with pytest.raises(ValueError, match="only looks like"):
        pf.figure1(kappas=(3,), rng=0)
    plt.close("all")
