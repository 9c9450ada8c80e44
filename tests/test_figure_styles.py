"""``make figure --style <venue>`` and ``--usetex`` (paper_figures with plotting.VENUES).

* the default output is unchanged by the style machinery (no venue: the same bytes as a plain
  draw-and-save of the figure function in the book's ``style()``);
* a venue style gives the venue's width (column for one panel, text width for several) and
  its font sizes (\\small labels, \\footnotesize ticks and legends of a 10pt class), in files
  named after the venue under figures/custom/;
* ``--usetex`` without a TeX installation stops with a message that says what is missing and
  how to install it; an unknown style is rejected by name.
"""
from __future__ import annotations

import json
import shutil

import pytest

from afw_book import paper_figures as pf
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


@pytest.mark.parametrize("style", sorted(plotting.VENUES))
def test_venue_style_sets_width_and_fonts(tmp_path, monkeypatch, style):
    """Figure 3 (two panels and a colour bar): the venue's text width, its font sizes."""
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path))
    _, _, written = pf.render("figure3", style=style)
    assert written["pdf"] == tmp_path / "custom" / f"figure3-{style}.pdf"
    meta = json.loads(written["json"].read_text())["meta"]
    venue = plotting.VENUES[style]
    # several panels: the text width (cropped tightly: the labels never make it wider)
    assert 0.9 * venue["text"] <= meta["size_in"][0] <= venue["text"]
    small, footnote = venue["font"] - 1, venue["font"] - 2   # \small and \footnotesize of a 10pt class
    assert meta["font_pt"] == [footnote, small]
    assert meta["command"].endswith(f'--style {style}"')


@pytest.mark.parametrize("style", ["icml", "neurips"])
def test_one_panel_takes_one_column(tmp_path, monkeypatch, style):
    """One panel: a column of a two-column venue, half the text width of a one-column venue."""
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path))
    _, _, written = pf.render("figure2", style=style, kappas=(7,))
    venue = plotting.VENUES[style]
    expected = venue["column"] if venue["column"] < venue["text"] else venue["text"] / 2
    meta = json.loads(written["json"].read_text())["meta"]
    assert 0.9 * expected <= meta["size_in"][0] <= expected
    assert meta["panels"] == 1


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
