"""``make figure --style <venue> [--width column|text]`` and ``--usetex`` (paper_figures with VENUES).

* the default output is unchanged by the style machinery (no venue: the same bytes as a plain
  draw-and-save of the figure function in the book's ``style()``);
* a venue style gives the venue's font sizes (\\small labels, \\footnotesize ticks and legends of a
  10pt class) and its width: by default the column for one row of panels, the text width for
  several; ``--width column|text`` (or inches) chooses; the PDF's page (its MediaBox) is exactly
  that wide; the widths are those stated in figures/README.md; files named after the venue and
  the width under figures/custom/;
* ``--usetex`` without a TeX installation stops with a message that says what is missing and
  how to install it; an unknown style is rejected by name.
"""
from __future__ import annotations

import json
import re
import shutil

import pytest

from afw_book import paper_figures as pf
from bookbuild import ROOT
from afw_book import figures as plotting


def test_default_render_is_a_plain_save(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path / "figs"))
    _, _, written = pf.render("figure2")
    with plotting.style():                               # the book's style, as the render applies it
        fig, data = pf.figure2()
        plain = plotting.save(fig, "figure2", data, outdir=tmp_path / "plain")
    for fmt in plotting.FORMATS:
        assert written[fmt].read_bytes() == plain[fmt].read_bytes(), fmt
    assert written["png"].parent == tmp_path / "figs"


def media_box(pdf):
    """(width, height) in points of the first page's /MediaBox, read from the PDF's bytes."""
    m = re.search(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]", pdf.read_bytes())
    x0, y0, x1, y1 = map(float, m.groups())
    return x1 - x0, y1 - y0


# The venues' widths (inches), from their style files; figures/README.md states the same.
WIDTHS = {"icml": (3.25, 6.75), "neurips": (5.5, 5.5), "arxiv-1col": (4.77, 4.77), "arxiv-2col": (3.17, 6.49)}


def test_the_venue_table_is_the_stated_one():
    assert {k: (v["column"], v["text"]) for k, v in plotting.VENUES.items()} == WIDTHS
    readme = (ROOT / "figures" / "README.md").read_text()
    rows = dict((m.group(1), (float(m.group(2)), float(m.group(3))))
                for m in re.finditer(r"^\| `([\w-]+)` \| ([\d.]+) in \| ([\d.]+) in \|", readme, re.M))
    assert rows == WIDTHS


@pytest.mark.parametrize("style", sorted(plotting.VENUES))
def test_venue_style_sets_width_and_fonts(tmp_path, monkeypatch, style):
    """Figure 3 (one row of two panels and a colour bar): by default the venue's column, exactly
    (the PDF's MediaBox), and the venue's font sizes."""
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path))
    _, _, written = pf.render("figure3", style=style)
    assert written["pdf"] == tmp_path / "custom" / f"figure3-{style}.pdf"
    meta = json.loads(written["json"].read_text())["meta"]
    column = WIDTHS[style][0]
    assert media_box(written["pdf"])[0] == pytest.approx(72 * column, abs=0.01)
    assert meta["size_in"][0] == pytest.approx(column, abs=0.01)   # the PNG too (200 dpi)
    small, footnote = plotting.VENUES[style]["font"] - 1, plotting.VENUES[style]["font"] - 2
    assert meta["font_pt"] == [footnote, small]     # \small labels, \footnotesize ticks of a 10pt class
    assert meta["command"].endswith(f'--style {style}"')


@pytest.mark.parametrize("style", sorted(plotting.VENUES))
@pytest.mark.parametrize("name,rows", [("figure1", 2), ("figure4", 1)])
def test_default_width_is_the_column_for_one_row_and_the_text_for_more(tmp_path, monkeypatch, style, name, rows):
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path))
    assert pf._rows(name, {}) == rows
    _, _, written = pf.render(name, style=style)
    expected = WIDTHS[style][0 if rows == 1 else 1]
    assert media_box(written["pdf"])[0] == pytest.approx(72 * expected, abs=0.01)


# Each choice on two venues (a render each): that every venue's column and text widths are right is
# checked above, through the default width of a one-row and a two-row figure.
@pytest.mark.parametrize("style,choice", [("icml", "column"), ("arxiv-2col", "column"), ("neurips", "text"),
                                          ("arxiv-1col", "text")])
def test_width_choice_sets_the_page_width(tmp_path, monkeypatch, style, choice):
    """--width column|text: the PDF page is exactly the venue's column or text width, in files of
    their own (figure1-icml-column ...)."""
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path))
    assert pf.main(["figure1", "--style", style, "--width", choice]) == 0
    pdf = tmp_path / "custom" / f"figure1-{style}-{choice}.pdf"
    expected = WIDTHS[style][0 if choice == "column" else 1]
    assert media_box(pdf)[0] == pytest.approx(72 * expected, abs=0.01)
    meta = json.loads((tmp_path / "custom" / "data" / f"figure1-{style}-{choice}.json").read_text())["meta"]
    assert meta["command"].endswith(f'--style {style} --width {choice}"')


def test_numeric_width_and_book_widths(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path))
    assert pf.main(["figure2", "--width", "5"]) == 0
    (pdf,) = (tmp_path / "custom").glob("figure2--width-5-*.pdf")
    assert media_box(pdf)[0] == pytest.approx(360, abs=0.01)
    assert pf.main(["figure2", "--width", "column"]) == 0            # no style: the book's column
    assert media_box(tmp_path / "custom" / "figure2-column.pdf")[0] == pytest.approx(72 * plotting.ONE_COLUMN, abs=0.01)
    with pytest.raises(SystemExit):
        pf.main(["figure2", "--width", "page"])
    assert "expected column, text or a number" in capsys.readouterr().err


def test_times_venues_use_a_times_like_font():
    rc = plotting.venue_rc("icml")
    assert rc["mathtext.fontset"] == "stix" and rc["font.serif"][0] == "STIXGeneral"
    assert "mathtext.fontset" not in plotting.venue_rc("arxiv-2col")   # Computer Modern, as the book
    assert plotting.venue_rc() == {}


def test_unknown_style_is_rejected_by_name(capsys):
    with pytest.raises(ValueError, match="style must be one of"):
        pf.render("figure2", style="nature")
    with pytest.raises(SystemExit):
        pf.main(["figure2", "--style", "nature"])
    assert "invalid choice: 'nature'" in capsys.readouterr().err


def test_usetex_without_tex_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert pf.main(["figure2", "--usetex"]) == 2
    err = capsys.readouterr().err
    assert "--usetex needs a TeX installation" in err and "latex" in err and "apt-get install" in err
    assert not any(tmp_path.rglob("*.pdf")), "nothing is written"


def test_usetex_settings_when_tex_is_present(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    rc = plotting.venue_rc("neurips", usetex=True)
    assert rc["text.usetex"] is True
    assert r"\usepackage{mathptmx}" in rc["text.latex.preamble"]        # Times, as the venue
    assert r"\usepackage{mathptmx}" not in plotting.venue_rc("arxiv-1col", usetex=True)["text.latex.preamble"]
    assert plotting.tex_missing() == []


def test_command_spells_out_every_parameter():
    assert pf.command("figure3") == 'make figure ARGS="figure3 --kappas 5 7 --seed 42 --B 1 0 0 2"'
    assert pf.command("figure2", {"kappas": (6,)}, style="icml", usetex=True) == \
        'make figure ARGS="figure2 --kappas 6 --seed 42 --style icml --usetex"'
    assert pf.command("figure4", {"width": 3.0}).endswith("--delta 0.03 --width 3\"")
