"""The paper-ready variant of the paper's figures, beside the faithful one (issue 24).

* colour science: CIELAB of sRGB white, black and mid-grey; the deuteranopia simulation of Machado
  et al. (2009) keeps greys grey and makes pure red and green nearly alike (the case it models);
* the palette: any two cells that share a boundary, in every panel of the cell figures and over
  many random polygons, differ by ΔE*ab >= 10 after the deuteranopia simulation and by ΔL* >= 10
  in greyscale; the published hue palette fails the same check (the check can fail);
* labels: in the paper-ready figures no two texts of a panel overlap (boxes from the renderer),
  nor in the faithful ones the book draws, while the labels at the paper's own places collide
  (v2/v6 and v4/v10 in Figure 1, as reported);
  each panel is labelled with its κ;
* the faithful files are byte-identical whether or not a paper-ready variant was drawn, and the
  paper-ready files have names of their own.
"""
from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pytest

from afw_book import figures as plotting
from afw_book import paper_figures as pf
from attention_fw.plot import colours as C

MIN_DE, MIN_DL = 10.0, 10.0
CELL_FIGURES = ["figure1", "figure1-corrected", "figure2"]


@pytest.fixture(autouse=True)
def book_style():
    """Figures drawn as the book and ``make figure`` draw them: in the book's style."""
    with plotting.style():
        yield


def test_cielab_of_reference_colours():
    lab = C.srgb_to_lab([[1, 1, 1], [0, 0, 0], [0.5, 0.5, 0.5]])
    assert lab[0] == pytest.approx([100, 0, 0], abs=1e-3)
    assert lab[1] == pytest.approx([0, 0, 0], abs=1e-9)
    assert lab[2][0] == pytest.approx(53.389, abs=0.01) and abs(lab[2][1:]).max() < 1e-3
    assert C.greyscale_lightness([0.5, 0.5, 0.5]) == pytest.approx(53.389, abs=0.01)
    with pytest.raises(ValueError, match="rgb"):
        C.srgb_to_lab([1.2, 0, 0])


def test_deuteranopia_simulation_keeps_greys_and_confuses_red_with_green():
    assert np.allclose(C.MACHADO_DEUTERANOPIA.sum(axis=1), 1, atol=1e-5)     # white stays white
    greys = np.linspace(0, 1, 11)[:, None].repeat(3, axis=1)
    assert np.allclose(C.simulate_deuteranopia(greys), greys, atol=2e-4)
    red, green = C.srgb_to_lab([[0.8, 0.2, 0.2], [0.45, 0.55, 0.2]])
    sr, sg = C.srgb_to_lab(C.simulate_deuteranopia([[0.8, 0.2, 0.2], [0.45, 0.55, 0.2]]))
    assert C.delta_e(red, green) > 40 and C.delta_e(sr, sg) < 0.4 * C.delta_e(red, green)


def _adjacent_differences(cells, colours):
    polys = [c["polygon"] for c in cells]
    rgb = np.asarray(colours, dtype=float)
    deut = C.srgb_to_lab(C.simulate_deuteranopia(rgb))
    grey = C.greyscale_lightness(rgb)
    return [(C.delta_e(deut[i], deut[j]), abs(grey[i] - grey[j])) for i, j in C.adjacent_cells(polys)]


@pytest.mark.parametrize("name", CELL_FIGURES)
def test_adjacent_cells_stay_apart_in_grey_and_for_deuteranopes(name):
    fig, data = pf.FIGURES[name](variant="paper-ready")
    plt.close(fig)
    pairs = [d for p in data["panels"] for d in _adjacent_differences(p["cells"], [c["colour"] for c in p["cells"]])]
    assert len(pairs) >= 20
    assert min(de for de, _ in pairs) >= MIN_DE and min(dl for _, dl in pairs) >= MIN_DL


def test_the_published_palette_fails_the_same_check():
    fig, data = pf.figure1()
    plt.close(fig)
    pairs = [d for p in data["panels"] for d in _adjacent_differences(p["cells"], [c["colour"] for c in p["cells"]])]
    assert min(dl for _, dl in pairs) < MIN_DL


def test_the_palette_works_for_many_random_polygons():
    """Greedy colouring of the cells of random polygons (3 to 12 vertices, random SPD B, both labellings)."""
    rng = np.random.default_rng(24)
    worst_de, worst_dl, pairs = np.inf, np.inf, 0
    for k in range(60):
        kappa = int(rng.integers(3, 13))
        A = rng.normal(size=(2, 2))
        panel = pf.cell_panel(kappa, rng=int(rng.integers(1 << 30)), enforce_bijection=False,
                              labelling=("exact", "unit")[k % 2], B=A @ A.T + 0.3 * np.eye(2))
        colours = C.map_colours([c["polygon"] for c in panel["cells"]])
        for de, dl in _adjacent_differences(panel["cells"], colours):
            worst_de, worst_dl, pairs = min(worst_de, de), min(worst_dl, dl), pairs + 1
    assert pairs > 300 and worst_de >= MIN_DE and worst_dl >= MIN_DL
    # every pair of the palette is apart, not only the pairs a colouring happened to use
    lab = C.srgb_to_lab(C.simulate_deuteranopia(C.PAPER_PALETTE))
    grey = C.greyscale_lightness(C.PAPER_PALETTE)
    for i, j in itertools.combinations(range(len(grey)), 2):
        assert C.delta_e(lab[i], lab[j]) >= MIN_DE and abs(grey[i] - grey[j]) >= MIN_DL


def test_adjacency_of_a_tiling():
    square = [np.array([[0, 0], [1, 0], [1, 1], [0, 1]]), np.array([[1, 0], [2, 0], [2, 1], [1, 1]]),
              np.array([[2, 1], [3, 1], [3, 2], [2, 2]]), np.array([[0, 1], [2, 1], [2, 2], [0, 2]])]
    # 0-1 share an edge, 1-3 and 0-3 share parts of an edge, 2 touches 1 and 3 at a corner / an edge
    assert C.adjacent_cells(square) == [(0, 1), (0, 3), (1, 3), (2, 3)]
    cols = C.map_colours(square)
    for i, j in C.adjacent_cells(square):
        assert not np.array_equal(cols[i], cols[j])


@pytest.mark.parametrize("name", CELL_FIGURES + ["figure3", "figure4"])
def test_paper_ready_labels_never_overlap_and_each_panel_says_what_it_shows(name):
    fig, data = pf.FIGURES[name](variant="paper-ready")
    fig.canvas.draw()
    try:
        for ax in fig.axes:
            if ax.get_title():
                assert pf.text_overlaps(ax) == [], (name, ax.get_title())
        titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
        if "panels" in data:
            assert titles == [f"({chr(97 + i)}) $\\kappa = {p['kappa']}$" for i, p in enumerate(data["panels"])]
        else:
            assert len(titles) == 2 and titles[0].startswith("(a) cone") and titles[1].startswith("(b) eroded")
    finally:
        plt.close(fig)


def test_figure1_labels_collide_where_the_paper_puts_them_and_nowhere_in_the_book():
    """The reported collisions v2/v6 and v4/v10 are those of the labels at the paper's places
    (the finding reproduced); the faithful figure the book draws moves them apart (issue 36:
    every figure of the book legible), as every variant does."""
    placed = {frozenset(pair) for panel in pf.published_label_overlaps("figure1") for pair in panel}
    assert {frozenset({"$v_{2}$", "$v_{6}$"}), frozenset({"$v_{10}$", "$v_{4}$"})} <= placed
    for name in CELL_FIGURES:
        fig, _ = pf.FIGURES[name]()
        fig.canvas.draw()
        try:
            assert [pair for ax in fig.axes for pair in pf.text_overlaps(ax)] == [], name
        finally:
            plt.close(fig)
    with pytest.raises(ValueError, match="name"):
        pf.published_label_overlaps("figure3")


def test_faithful_files_are_untouched_by_the_variant(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path / "a"))
    assert pf.main(["figure1"]) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    assert pf.main(["figure1", "--paper-ready"]) == 0
    assert pf.main(["figure1", "--paper-ready", "--style", "icml", "--width", "column"]) == 0
    after = {p.name: p.read_bytes() for p in (tmp_path / "a").glob("*") if p.is_file()}
    after.update({f"{p.name}": p.read_bytes() for p in (tmp_path / "a" / "data").glob("*")})
    for name, payload in before.items():
        assert after[name] == payload, name
    custom = sorted(p.name for p in (tmp_path / "a" / "custom").glob("*.pdf"))
    assert custom == ["figure1-paper-ready-icml-column.pdf", "figure1-paper-ready.pdf"]
    # and the faithful bytes are those of a plain draw-and-save of the figure function
    fig, data = pf.figure1()
    plain = plotting.save(fig, "figure1", data, outdir=tmp_path / "plain", formats=("pdf", "png"))
    assert plain["pdf"].read_bytes() == (tmp_path / "a" / "figure1.pdf").read_bytes()
    assert "variant" not in pf.command("figure1") and pf.command("figure1", {"variant": "paper-ready"}).endswith(
        '--paper-ready"')


@pytest.mark.parametrize("name", CELL_FIGURES)
@pytest.mark.parametrize("width", [3.4, 7.0])
def test_paper_ready_cell_labels_stay_inside_their_cells(name, width):
    """The labels C_i(v) of the kappa = 5 panel sit inside their cells, clear of every edge
    (the hull's among them), at column and at text width: the box of each label, as drawn, has
    all four corners inside its convex cell. Figure 1's unequal norms make some cells slivers
    too narrow for a label at column width: those lose their label (every cell of positive area
    is either labelled inside itself or listed as dropped), while Figure 2's equal norms leave
    room for every label."""
    fig, _ = pf.FIGURES[name](width=width, variant="paper-ready")
    fig.canvas.draw()
    try:
        labelled = [ax for ax in fig.axes if getattr(ax, "afw_cell_labels", None)]
        assert labelled, "no panel with cell labels: vacuous"
        for ax in labelled:
            assert len(ax.afw_cell_labels) >= 2, (name, width, "most labels dropped")
            for cell, text in ax.afw_cell_labels:
                assert text in ax.texts
                room = pf.label_clearance(ax, text, cell["polygon"])
                assert room > 0, (name, width, text.get_text(), f"{room:.2f} pt")
            drawn = {cell["vertex"] for cell, _ in ax.afw_cell_labels}
            assert not drawn & set(ax.afw_dropped_labels)
            shown = [t.get_text() for t in ax.texts if t.get_text().startswith(r"$\mathscr")]
            assert len(shown) == len(drawn), "a dropped label is still drawn"
            if name == "figure2":
                assert ax.afw_dropped_labels == [], (width, ax.afw_dropped_labels)
    finally:
        plt.close(fig)

