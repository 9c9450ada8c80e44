"""The single save function: atomic, byte-reproducible, complete."""
import json
import re

import matplotlib.pyplot as plt
import numpy as np
import pytest

from afw_book import figures as plotting


def _fig():
    fig, ax = plt.subplots(figsize=(2, 2))
    t = np.linspace(0, 1, 50)
    ax.plot(t, t**2, label=r"$\frac{1}{2}\langle Bx, x\rangle$")
    ax.legend()
    return fig


def test_save_writes_all_formats_and_data(tmp_path):
    out = plotting.save(_fig(), "demo", {"x": np.arange(3), "y": 0.5}, outdir=tmp_path)
    assert set(out) == {"pdf", "png", "svg", "json"}
    assert (tmp_path / "demo.pdf").read_bytes().startswith(b"%PDF")
    assert (tmp_path / "demo.png").read_bytes().startswith(b"\x89PNG")
    assert b"<svg" in (tmp_path / "demo.svg").read_bytes()
    record = json.loads((tmp_path / "data" / "demo.json").read_text())
    assert set(record.pop("meta")) == {"size_in", "font_pt", "panels", "panel_widths_in", "pieces_in",
                                       "legibility"}  # the layout, and what makes it hard to read
    assert record == {"x": [0, 1, 2], "y": 0.5}
    assert not [p for p in tmp_path.rglob(".*tmp*")], "temporary files left behind"


def test_save_is_byte_reproducible(tmp_path):
    a = plotting.save(_fig(), "a", outdir=tmp_path / "1")
    b = plotting.save(_fig(), "a", outdir=tmp_path / "2")
    for fmt in ("pdf", "png", "svg"):
        assert a[fmt].read_bytes() == b[fmt].read_bytes(), fmt


def _constrained_fig():
    fig, axes = plt.subplots(1, 2, figsize=(5, 2), layout="constrained")
    for k, ax in enumerate(axes):
        ax.plot([0, 1, 2], [k, 2 * k, 1])
        ax.set_xlabel(r"$x_i$ and a long label")
        ax.set_title(f"panel {k}")
    return fig


def test_the_formats_share_one_layout_and_the_png_is_a_plain_save():
    """``render_formats`` lays the figure out once: its PNG is byte for byte the plain save, the PDF and
    SVG have the PNG's crop, measured with the PNG's own renderer (the PNG is that crop cut down to
    whole pixels: crop x dpi - PNG size in [0, 1) px), and the figure's layout engine is back
    afterwards."""
    fig = _constrained_fig()
    engine = fig.get_layout_engine()
    out, box = plotting.render_formats(fig, ("pdf", "svg", "png"))
    assert list(out) == ["pdf", "svg", "png"] and fig.get_layout_engine() is engine
    plain = _constrained_fig()
    assert out["png"] == plotting.figure_bytes(plain, "png")
    w_px = int.from_bytes(out["png"][16:20], "big")
    h_px = int.from_bytes(out["png"][20:24], "big")
    page = re.search(rb"/MediaBox \[\s*0 0 ([\d.]+) ([\d.]+)", out["pdf"])
    assert page is not None
    dpi = plotting.PNG_DPI
    assert 0 <= box.width * dpi - w_px < 1 and 0 <= box.height * dpi - h_px < 1
    assert abs(float(page.group(1)) / 72 - box.width) < 1e-6 and abs(float(page.group(2)) / 72 - box.height) < 1e-6
    svg_w = float(re.search(rb'width="([\d.]+)pt"', out["svg"]).group(1))
    assert abs(svg_w / 72 - box.width) < 1e-4
    plt.close(fig)
    plt.close(plain)


def _math_fig():
    fig, axes = plt.subplots(1, 2, figsize=(5, 2), layout="constrained")
    for k, ax in enumerate(axes):
        x = np.logspace(0, 3, 20)
        ax.loglog(x, x ** -(k + 1), label=rf"$\beta^{{-{k + 1}}}$, mean $\bar x_i$")
        ax.set_xlabel(r"$\beta$ (inverse temperature)")
        ax.set_title(rf"$\mathbb{{P}}(T_1 > t)$, $d = {k + 2}$")
        ax.legend()
    return fig


def test_shared_mathtext_parses_change_no_byte_and_leave_matplotlib_as_it_was(monkeypatch):
    """A figure's renderers share their mathtext parses (``_shared_mathtext``): every format is byte
    for byte what matplotlib's own per-renderer parses give, also after a change of the serif font
    that leaves every text's font properties equal (the parse depends on the rcParams, so they are
    part of the key); each expression is parsed once per dpi and font where matplotlib parses it
    for every renderer; and matplotlib's method is its own again afterwards."""
    import contextlib
    from matplotlib import _mathtext, mathtext

    own = mathtext.MathTextParser.__dict__["_parse_cached"]
    parses: list = []
    real_parse = _mathtext.Parser.parse

    def counting(self, s, fonts_object, fontsize, dpi):
        parses.append((s, fontsize, dpi, tuple(plt.rcParams["font.serif"])))
        return real_parse(self, s, fonts_object, fontsize, dpi)

    monkeypatch.setattr(_mathtext.Parser, "parse", counting)
    shared = plotting._shared_mathtext
    plotting._MATH_PARSES.clear()
    out, counts = {}, {}
    styles = ({}, {"font.serif": ["DejaVu Serif"]})          # the book's cmr10, then another serif
    for mode in ("plain", "shared"):                         # the second style's parses follow the first's
        monkeypatch.setattr(plotting, "_shared_mathtext", shared if mode == "shared" else contextlib.nullcontext)
        for k, rc in enumerate(styles):
            parses.clear()
            with plotting.style(rc):
                fig = _math_fig()
                formats, _ = plotting.render_formats(fig)
                plotting.layout(fig, formats["png"])
            plt.close(fig)
            out[mode, k], counts[mode, k] = formats, list(parses)
    assert out["plain", 0]["png"] != out["plain", 1]["png"]   # the serif font shows
    for k, rc in enumerate(styles):
        assert out["shared", k] == out["plain", k], rc
        assert len(set(counts["shared", k])) == len(counts["shared", k]), "an expression parsed twice"
        assert len(counts["shared", k]) < len(counts["plain", k])
    assert mathtext.MathTextParser.__dict__["_parse_cached"] is own
    with shared():                                           # a block inside another keeps the outer's
        outer = mathtext.MathTextParser.__dict__["_parse_cached"]
        with shared():
            assert mathtext.MathTextParser.__dict__["_parse_cached"] is outer is not own
        assert mathtext.MathTextParser.__dict__["_parse_cached"] is outer
    assert mathtext.MathTextParser.__dict__["_parse_cached"] is own


@pytest.mark.parametrize("name", ["", "../x", "a b", None])
def test_save_rejects_bad_names(tmp_path, name):
    with pytest.raises(ValueError, match="name"):
        plotting.save(_fig(), name, outdir=tmp_path)


def test_save_rejects_non_finite_data_and_keeps_old_files(tmp_path):
    plotting.save(_fig(), "keep", {"v": 1.0}, outdir=tmp_path)
    before = (tmp_path / "keep.pdf").read_bytes()
    with pytest.raises(ValueError, match="finite"):
        plotting.save(_fig(), "keep", {"v": float("nan")}, outdir=tmp_path)
    assert (tmp_path / "keep.pdf").read_bytes() == before
