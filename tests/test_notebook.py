"""The chapters' figure and number helper (afw_book.notebook) and the figure layout record.

* ``fmt`` writes numbers as prose: the printed text, read back, is the number to the precision
  asked for; powers of ten as ``× 10ⁿ``; no negative zero;
* ``plotting.layout`` reports what a reader sees: the saved size (that of the PNG), the font
  sizes of the drawn text only, the panels (colour bars excepted) and their widths;
* ``display_width`` shows every figure with text of at least 9 px and panels of at least 200 px;
* ``Page`` follows the one output rule and records chapter, statement, caption and command;
* ``plotting.output_dir``: ``make notebook``'s ``figures/custom`` never becomes ``custom/custom``.
"""
from __future__ import annotations

import json
import re
from fractions import Fraction

import matplotlib.pyplot as plt
import numpy as np
import pytest

from afw_book import notebook as nbh
from afw_book import paper_figures as pf
from afw_book import figures as plotting
from afw_book.presets import resolve

_SUP = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")


def _read_back(text: str) -> float:
    m = re.fullmatch(r"(-?[0-9.,]+)(?:\u00a0×\u00a010([⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+))?", text)
    assert m, f"not a number as prose: {text!r}"
    mant = float(m.group(1).replace(",", ""))
    return mant * 10.0 ** int(m.group(2).translate(_SUP)) if m.group(2) else mant


@pytest.mark.parametrize("value,spec,digits", [
    (6.8e-6, ".1e", 2), (1.234e-17, ".3e", 4), (123456.0, None, 3), (0.1234, ".3f", 3),
    (-2.5e-8, ".2g", 2), (9.99e5, ".1e", 2), (3.0e12, None, 3), (0.5, None, 3)])
def test_fmt_reads_back_as_the_number_to_the_precision_asked(value, spec, digits):
    text = nbh.fmt(value, spec)
    assert "e" not in text, text
    back = _read_back(text)
    if spec and spec.endswith("f"):
        assert abs(back - value) <= 0.5 * 10.0 ** -int(spec[1:-1]) + 1e-15
    else:
        assert abs(back - value) <= 0.5 * 10.0 ** (np.floor(np.log10(abs(value))) - digits + 1) * 1.0001


def test_span_says_a_range_once_when_its_ends_read_the_same():
    assert nbh.span([1.21, 1.5, 1.3], ".1f") == "1.2 to 1.5"
    assert nbh.span(np.array([1.21, 1.24]), ".1f") == "1.2"          # equal once rounded
    assert nbh.span([3], None) == "3" and nbh.span([2, 30_000]) == "2 to 30,000"
    assert nbh.span([0.5, 0.25], ".2f", sep="-") == "0.25-0.50"
    with pytest.raises(ValueError, match="values"):
        nbh.span([])


def test_fmt_integers_fractions_zero_and_strings():
    assert nbh.fmt(575) == "575" and nbh.fmt(np.int64(9999)) == "9999"
    assert nbh.fmt(10_000) == "10,000" and nbh.fmt(-1_234_567) == "-1,234,567"
    assert nbh.fmt(Fraction(1, 18)) == "1/18" and nbh.fmt(Fraction(4, 2)) == "2"
    assert nbh.fmt(0.0, ".1e") == "0" and nbh.fmt(np.float64(0.0), ".2e") == "0"
    assert nbh.fmt(-0.001, ".2f") == "0.00" and nbh.fmt(-0.02, ".2f") == "-0.02"
    assert nbh.fmt("(5/3, 1/3)") == "(5/3, 1/3)" and nbh.fmt(True) == "True"
    assert nbh.fmt(float("inf")) == "∞"
    with pytest.raises(ValueError, match="NaN"):
        nbh.fmt(float("nan"))
    with pytest.raises(TypeError, match="value"):
        nbh.fmt([1, 2])


# ------------------------------------------------------------------------------ layout record
def _figure():
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(7.0, 2.5), gridspec_kw=dict(width_ratios=[2, 1, 1]))
    a.plot([1, 2, 3], label="line")
    a.legend(fontsize=6.5)
    a.set_xlabel("x", fontsize=11)
    b.axis("off")
    b.set_title("a title", fontsize=8)          # visible although the axis is off
    b.set_xticks([0.5])
    b.set_xticklabels(["hidden"], fontsize=4)    # not drawn: the axis is off
    c.text(0.5, 0.5, "", fontsize=3)             # empty: not drawn
    im = c.imshow(np.eye(3))
    fig.colorbar(im, ax=c)
    c.tick_params(labelsize=7)
    fig.tight_layout()
    return fig


def test_layout_records_the_drawn_text_panels_and_saved_size(tmp_path):
    fig = _figure()
    written = plotting.save(fig, "demo", {"x": 1}, outdir=tmp_path, meta={"chapter": "c"})
    meta = json.loads(written["json"].read_text())["meta"]
    assert meta["chapter"] == "c"
    assert meta["font_pt"] == [6.5, 11.0]
    png = written["png"].read_bytes()
    w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert meta["size_in"] == pytest.approx([w / plotting.PNG_DPI, h / plotting.PNG_DPI], abs=1e-4)
    assert meta["panels"] == 3                   # the colour bar is not a panel
    axes = [ax for ax in fig.axes if getattr(ax, "_colorbar", None) is None]
    assert meta["panel_widths_in"] == pytest.approx([ax.get_position().width * 7.0 for ax in axes], abs=1e-3)
    assert meta["panel_widths_in"][0] > 1.5 * meta["panel_widths_in"][1]


def test_the_record_does_not_change_the_image_bytes(tmp_path):
    a = plotting.save(_figure(), "a", {"x": 1}, outdir=tmp_path / "1")
    b = plotting.save(_figure(), "a", {"x": 1}, outdir=tmp_path / "2", meta={"caption": "c"})
    for fmt in plotting.FORMATS:
        assert a[fmt].read_bytes() == b[fmt].read_bytes(), fmt


def test_a_data_only_save_records_no_layout(tmp_path):
    written = plotting.save(_figure(), "d", {"x": 1}, outdir=tmp_path, formats=())
    assert set(written) == {"json"}
    assert "meta" not in json.loads(written["json"].read_text())


@pytest.mark.parametrize("size,font,panels", [((7.0, 2.5), 6.0, [1.5, 3.0]), ((3.4, 3.0), 9.0, [3.2]),
                                              ((6.5, 2.2), 7.0, [0.9, 2.6, 2.6]), ((4.9, 2.7), 6.0, [4.0])])
def test_display_width_gives_legible_text_and_panels(size, font, panels):
    meta = {"size_in": list(size), "font_pt": [font, 9.0], "panel_widths_in": panels}
    width, wide = nbh.display_width(meta)
    assert font / 72 * width / size[0] >= nbh.MIN_TEXT_PX - 1e-9
    assert min(panels) * width / size[0] >= nbh.MIN_PANEL_PX - 1e-9
    assert wide == (width > nbh.COLUMN_PX)     # full width only when the column is too narrow
    assert width >= min(size[0] * nbh.CSS_PX_PER_IN, nbh.COLUMN_PX)


# ------------------------------------------------------------------------------ output rule
def test_output_dir_rule(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path / "figs"))
    assert plotting.output_dir(True) == tmp_path / "figs"
    assert plotting.output_dir(False) == tmp_path / "figs" / "custom"
    assert plotting.output_dir(False, preset="quick") == tmp_path / "figs" / "presets" / "quick"
    with pytest.raises(ValueError, match="preset"):
        plotting.output_dir(False, preset="../x")
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path / "figs" / "custom"))   # make notebook
    assert plotting.output_dir(True) == plotting.output_dir(False) == tmp_path / "figs" / "custom"
    assert plotting.output_dir(False, preset="quick") == tmp_path / "figs" / "custom"


def test_render_under_make_notebook_never_writes_custom_custom(tmp_path, monkeypatch):
    """The reported bug: render('figure4', delta=0.05) with ATTENTION_FW_FIGURES=.../custom."""
    custom = tmp_path / "figures" / "custom"
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(custom))
    _, _, written = pf.render("figure4", delta=0.05)
    assert written["png"].parent == custom and written["png"].is_file()
    assert written["png"].name.startswith("figure4--delta-0p05-")
    assert not (custom / "custom").exists()


# ------------------------------------------------------------------------------ the page
P = {"paper": dict(steps=100, gamma=0.3), "quick": dict(steps=10, gamma=0.3)}


def test_page_canonical_folder_and_command(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path))
    page = nbh.Page("03-negative-definite", resolve(P, "paper"))
    assert page.canonical and page.outdir == tmp_path
    assert page.command() == "make notebook NB=03-negative-definite"
    page = nbh.Page("03-negative-definite", resolve(P, "paper"), resolve(P, "paper", gamma=0.5))
    assert not page.canonical and page.outdir == tmp_path / "custom"
    assert page.command() == 'make notebook NB=03-negative-definite ARGS="-p gamma 0.5"'
    page = nbh.Page("x", resolve(P, "quick", steps=7))
    assert page.command() == 'make notebook NB=x PRESET=quick ARGS="-p steps 7"'
    with pytest.raises(ValueError, match="preset"):
        nbh.Page("x", resolve(P, "quick"), resolve(P, "paper"))
    with pytest.raises(ValueError, match="chapter"):
        nbh.Page("../x", resolve(P, "quick"))
    with pytest.raises(TypeError, match="resolve"):
        nbh.Page("x")


@pytest.fixture
def glued(monkeypatch):
    store = {}
    monkeypatch.setattr(nbh, "_glue", lambda key, value, display=True: store.__setitem__(key, value))
    return store


def test_page_figure_saves_describes_and_glues(tmp_path, monkeypatch, glued):
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path))
    page = nbh.Page("03-negative-definite", resolve(P, "quick"))
    fig = _figure()
    # a library plot function writes the data only (outside the figures); the page completes it
    plotting.save(fig, "demo", {"numbers": [1, 2]}, **page.data_only)
    assert not any(tmp_path.rglob("*.json"))
    assert page.figure(fig, "demo", statement="Theorem 3.1", caption="One line") is None
    quick = tmp_path / "presets" / "quick"       # a preset without overrides: its own folder
    record = json.loads((quick / "data" / "demo.json").read_text())
    assert record["numbers"] == [1, 2]
    assert {k: record["meta"][k] for k in ("chapter", "statement", "caption", "command")} == {
        "chapter": "03-negative-definite", "statement": "Theorem 3.1", "caption": "One line",
        "command": "make notebook NB=03-negative-definite PRESET=quick"}
    assert all((quick / f"demo.{ext}").is_file() for ext in plotting.FORMATS)
    assert not plt.fignum_exists(fig.number)
    html = glued["fig-demo"]._repr_mimebundle_()["text/html"]
    assert 'data-afw-figure="demo" data-afw-path="presets/quick/demo"' in html
    assert 'href="../figures/presets/quick/demo.svg"' in html and 'src="../figures/presets/quick/demo.png"' in html
    assert 'data-afw-json="../figures/presets/quick/data/demo.json"' in html
    # overrides: figures/custom/, the name carries them; two runs never share a file
    names = []
    for steps in (7, 8):
        run = nbh.Page("03-negative-definite", resolve(P, "quick", steps=steps))
        run.figure(_figure(), "demo", {"x": steps}, statement="s", caption="c")
        (json_file,) = [f for f in (tmp_path / "custom" / "data").glob("demo--*.json") if f.name not in names]
        assert json_file.name.startswith(f"demo--preset-quick_steps-{steps}-")
        assert json.loads(json_file.read_text())["meta"]["command"].endswith(f'ARGS="-p steps {steps}"')
        names.append(json_file.name)
    with pytest.raises(ValueError, match="caption"):
        page.figure(_figure(), "demo", {"x": 1}, statement="s", caption="two\nlines")
    with pytest.raises(FileNotFoundError, match="data_only"):
        page.figure(_figure(), "never-saved", statement="s", caption="c")


def test_page_glue_formats_numbers(glued):
    page = nbh.Page("x", resolve(P, "quick"))
    page.glue(n=10_000, r=(0.12345, ".3f"), z=(0.0, ".1e"), s="(5/3, 1/3)")
    assert glued == {"n": "10,000", "r": "0.123", "z": "0", "s": "(5/3, 1/3)"}
    with pytest.raises(TypeError, match="spec"):
        page.glue(bad=(1, 2, 3))


def test_paper_figure_files_do_not_depend_on_the_caller(tmp_path, monkeypatch, glued):
    """Two chapters draw Figure 4 (one passing the defaults explicitly): same bytes."""
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path / "a"))
    nbh.Page("04-positive-definite", resolve(P, "quick")).paper_figure("figure4", rng=42, eta=0.05)
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path / "b"))
    pf.render("figure4")
    a = tmp_path / "a" / "presets" / "quick"          # the quick preset's folder
    for rel in ("figure4.pdf", "figure4.png", "figure4.svg", "data/figure4.json"):
        assert (a / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    assert not (tmp_path / "a" / "figure4.pdf").exists()     # the book's files are not touched
    meta = json.loads((a / "data" / "figure4.json").read_text())["meta"]
    assert meta["chapter"] == pf.CHAPTER and meta["statement"] == pf.INFO["figure4"]["statement"]
    assert meta["command"] == 'make figure ARGS="figure4 --kappas 7 --seed 42 --target 2 --eta 0.05 --delta 0.03"'


def test_a_paper_figure_of_a_rerun_carries_its_parameters(tmp_path, monkeypatch, glued):
    """Two reruns of a chapter that draw Figure 2 with different kappas never share a file."""
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path / "figures" / "custom"))   # make notebook
    for k in (6, 8):
        nbh.Page("04-positive-definite", resolve(P, "paper", steps=k)).paper_figure("figure2", kappas=(k,))
    names = sorted(p.name for p in (tmp_path / "figures" / "custom").glob("figure2*.pdf"))
    assert len(names) == 2 and names[0].startswith("figure2--kappas-6-") and names[1].startswith("figure2--kappas-8-")


def test_resolve_reports_the_overrides():
    assert resolve(P, "paper").overrides == {}
    assert resolve(P, "paper", steps=None, gamma=0.5).overrides == {"gamma": 0.5}


def test_streams_depend_on_seed_and_name_only():
    """Named streams: a function of (seed, name); distinct names give independent draws."""
    from afw_book.notebook import stream

    a = stream("cells", 7).standard_normal(1000)
    assert np.array_equal(a, stream("cells", 7).standard_normal(1000))
    b = stream("chain", 7).standard_normal(1000)
    c = stream("cells", 8).standard_normal(1000)
    # independent standard normals: the sample correlation of 1000 pairs has sd 1/sqrt(1000);
    # |r| < 0.15 fails with probability about 2e-6 for independent streams
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.15 and abs(np.corrcoef(a, c)[0, 1]) < 0.15
    for bad in ("", None):
        with pytest.raises(ValueError, match="name"):
            stream(bad, 0)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="seed"):
            stream("x", bad)


# ------------------------------------------------------------------------------ pieces for a phone
def _inches_in_image(fig, box, b):
    """A display-pixel Bbox as [left, top, right, bottom] inches from the saved image's top-left."""
    return [b.x0 / fig.dpi - box.x0, box.y1 - b.y1 / fig.dpi, b.x1 / fig.dpi - box.x0, box.y1 - b.y0 / fig.dpi]


def test_pieces_are_the_columns_of_panels_with_everything_they_draw(tmp_path):
    """Each column of panels (a colour bar with its panel) is one piece, left to right, holding the
    drawn extent of its axes; a suptitle above the panels is a piece of its own, first; every
    panel's drawn extent (labels, legend, colour bar) lies inside one piece (nothing is cut off)."""
    fig = _figure()
    fig.suptitle("a title over the three panels")
    written = plotting.save(fig, "demo", {"x": 1}, outdir=tmp_path)
    meta = json.loads(written["json"].read_text())["meta"]
    pieces = meta["pieces_in"]
    # measured as the PNG was drawn: with its renderer, at its dpi
    with plotting._renderer_at(fig, plotting.PNG_DPI) as renderer:
        box = fig.get_tightbbox(renderer).padded(plotting.STYLE["savefig.pad_inches"])
        assert len(pieces) == 1 + 3                                   # the title, then three columns
        title = _inches_in_image(fig, box, fig._suptitle.get_window_extent(renderer))
        assert pieces[0][0] <= title[0] and pieces[0][2] >= title[2] and pieces[0][1] <= title[1]
        assert (title[1] + title[3]) / 2 < pieces[1][1] + 0.03      # above the panels' pieces
        columns = pieces[1:]
        assert [c[0] for c in columns] == sorted(c[0] for c in columns)
        main = [ax for ax in fig.axes if getattr(ax, "_colorbar", None) is None]
        for ax, piece in zip(main, columns):
            b = _inches_in_image(fig, box, ax.get_tightbbox(renderer))
            assert piece[0] <= b[0] + 1e-3 and piece[2] >= min(b[2], meta["size_in"][0]) - 1e-3
        cbar = _inches_in_image(fig, box, fig.axes[-1].get_tightbbox(renderer))
        assert columns[2][2] >= min(cbar[2], meta["size_in"][0]) - 1e-3   # the colour bar is in the last piece

        def inside(t):
            return any(p[0] - 1e-3 <= t[0] and t[2] <= p[2] + 1e-3 and p[1] - 1e-3 <= t[1] and t[3] <= p[3] + 1e-3
                       for p in pieces)
        w, h = meta["size_in"]
        drawn = [_inches_in_image(fig, box, ax.get_tightbbox(renderer)) for ax in fig.axes] + [title]
        drawn = [[max(d[0], 0), max(d[1], 0), min(d[2], w), min(d[3], h)] for d in drawn]   # within the image
        assert all(inside(d) for d in drawn)     # every panel with its labels, and the title, in one piece
    plt.close(fig)


def test_a_grid_of_panels_is_cut_row_by_row_in_the_order_of_its_labels(tmp_path):
    """Panels in rows and columns give one piece per panel, row by row ((a), (b), (c), ... as a
    phone reads them), each holding its panel's drawn extent; a colour bar beside two rows keeps
    the columns whole."""
    fig, axes = plt.subplots(3, 2, figsize=(6, 7))
    for k, ax in enumerate(axes.flat):
        ax.plot([0, 1], [k, 0])
        ax.set_title(f"({'abcdef'[k]})")
        ax.set_xlabel("x")
    written = plotting.save(fig, "grid", {"x": 1}, outdir=tmp_path, close=False)
    pieces = json.loads(written["json"].read_text())["meta"]["pieces_in"]
    with plotting._renderer_at(fig, plotting.PNG_DPI) as renderer:
        box = fig.get_tightbbox(renderer).padded(plotting.STYLE["savefig.pad_inches"])
        drawn = [_inches_in_image(fig, box, ax.get_tightbbox(renderer)) for ax in axes.flat]
    assert len(pieces) == 6
    for piece, d in zip(pieces, drawn):            # piece k holds panel k, whole
        assert piece[0] <= d[0] + 1e-3 and piece[1] <= d[1] + 1e-3
        assert piece[2] >= d[2] - 1e-3 and piece[3] >= d[3] - 1e-3
    # row by row: left then right within a row, each row below the previous one
    assert [p[0] < pieces[1][0] for p in pieces] == [True, False] * 3
    assert pieces[0][1] < pieces[2][1] < pieces[4][1]
    plt.close(fig)
    fig, axes = plt.subplots(2, 2, figsize=(6, 5))
    image = axes[0, 1].imshow([[0, 1], [1, 0]])
    fig.colorbar(image, ax=axes[:, 1])             # one colour bar beside both rows
    written = plotting.save(fig, "grid-cbar", {"x": 1}, outdir=tmp_path)
    assert len(json.loads(written["json"].read_text())["meta"]["pieces_in"]) == 2   # the two columns


def test_a_colour_bar_under_two_panels_is_a_piece_of_its_own(tmp_path):
    """A horizontal colour bar shared by two panels side by side (the layout of the paper's
    Figure 3) is a third piece, below them; each panel's piece stays within its own column."""
    fig, axes = plt.subplots(1, 2, figsize=(6, 3.5))
    image = axes[0].imshow([[0, 1], [1, 0]])
    axes[1].imshow([[1, 0], [0, 1]])
    fig.colorbar(image, ax=axes, orientation="horizontal", label="level")
    written = plotting.save(fig, "cbar-below", {"x": 1}, outdir=tmp_path, close=False)
    pieces = json.loads(written["json"].read_text())["meta"]["pieces_in"]
    with plotting._renderer_at(fig, plotting.PNG_DPI) as renderer:
        box = fig.get_tightbbox(renderer).padded(plotting.STYLE["savefig.pad_inches"])
        left, right, bar = (_inches_in_image(fig, box, ax.get_tightbbox(renderer)) for ax in fig.axes)
    assert len(pieces) == 3
    first, second, third = pieces
    assert first[2] < right[0] + 0.1 and second[0] > left[2] - 0.1   # the columns do not repeat each other
    assert third[0] <= bar[0] + 1e-3 and third[2] >= bar[2] - 1e-3 and third[1] > first[1]   # the bar, whole, below
    plt.close(fig)


def test_a_figure_of_one_column_has_no_pieces(tmp_path):
    fig, axes = plt.subplots(2, 1, figsize=(4, 5))
    axes[0].plot([0, 1])
    axes[1].set_title("below")
    written = plotting.save(fig, "col", {"x": 1}, outdir=tmp_path)
    assert json.loads(written["json"].read_text())["meta"]["pieces_in"] == []


@pytest.mark.parametrize("command", [
    'make figure ARGS="figure4-delta002 --kappas 7 --seed 42 --target 2 --eta 0.05 --delta 0.02"',
    'make figure ARGS="figure3 --kappas 5 7 --seed 42 --B 1 0 0 2"',
    "make notebook NB=07-deterministic-dynamics PRESET=quick",
    "make notebook NB=05-finite-beta ARGS=\"-p label 'a long value with many words in it, kept whole' -p b 2\"",
])
def test_gallery_commands_are_broken_to_the_column_and_read_the_same(command):
    """The gallery's regenerate commands are broken over lines that fit its code box; bash reads
    the broken text as the same words (make then splits ARGS on blanks, so extra blanks inside
    double quotes do not matter; inside single quotes nothing is broken)."""
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))
    from afw_sphinx import GALLERY_CODE_COLUMNS, command_lines

    shown = command_lines(command)
    lines = shown.split("\n")
    assert all(len(line) <= GALLERY_CODE_COLUMNS for line in lines), lines
    assert (len(command) > GALLERY_CODE_COLUMNS) == (len(lines) > 1), lines

    def words(text):
        out = subprocess.run(["bash", "-c", f"set -- {text}; printf '%s\\0' \"$@\""], capture_output=True,
                             text=True, check=True).stdout
        return [shlex.split(w) if w.startswith("ARGS=") else w for w in out.split("\0")]

    assert words(shown) == words(command)
