"""The regenerated Figures 1-4: fidelity to the published PDFs, reproducibility, data.

The authors' published PDFs are compared through the data read from them and committed with
the book (``book/data/published-figures.json``, :func:`afw_book.paper_figures.published_shapes`;
``make published-data PDFS=dir`` rewrites it from the PDFs, see ``tests/test_published_data.py``),
in two independent ways: their vector paths (hull corners and the filled cell polygons, mapped
back to data coordinates) and the pixel counts of their rendering by pdftoppm. Our own figures
are rendered by pdftoppm here (install with ``apt-get install poppler-utils``).
"""
import json

import numpy as np
import pytest

from attention_fw.geometry import planar as g
from afw_book import paper_figures as pf
from afw_book import published_pdfs


def _published(name):
    """Shapes of the authors' file ``name`` (from the committed data, not from the PDF)."""
    return pf.published_shapes(name)


def _seg_dist(X, P):
    """Distance from points X to the boundary of polygon P (brute force over segments)."""
    X = np.atleast_2d(X)
    a, b = P, np.roll(P, -1, axis=0)
    ab = b - a
    t = np.clip(np.einsum("nmj,mj->nm", X[:, None] - a, ab) / np.maximum(np.einsum("mj,mj->m", ab, ab), 1e-300), 0, 1)
    return np.sqrt(((X[:, None] - (a + t[..., None] * ab)) ** 2).sum(-1)).min(1)


def _corner_tolerance(P, h):
    """How far the grid-hull of a convex polygon can stay from each corner of P.

    The grid (spacing h) misses a strip of width up to ~h along each edge; at a corner with
    interior angle alpha that strip reaches h / sin(alpha / 2) into the corner.
    """
    a = np.roll(P, 1, axis=0) - P
    b = np.roll(P, -1, axis=0) - P
    cosang = np.einsum("ij,ij->i", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    alpha = np.arccos(np.clip(cosang, -1, 1))
    return 2.0 * h / np.sin(alpha / 2)


def _grid_step(K):
    """Spacing of the authors' 1000 x 1000 grid over the hull's box padded by 0.1."""
    return float(((K.max(0) - K.min(0)) + 0.2).max() / 999)


def _coloured_fills(pub):
    return [(rgb, P) for rgb, P in pub["fills"] if not np.allclose(rgb, 1.0)]


CELL_FILES = [  # (published file, kappa, equal_norm, labelling that the file shows)
    ("cells-k5-var-bij-unit-noself", 5, False, "unit"),
    ("cells-k7-var-bij-unit-noself", 7, False, "unit"),
    ("cells-k9-var-bij-unit-noself", 9, False, "unit"),
    ("cells-k10-var-bij-unit-noself", 10, False, "unit"),
    ("cells-k5-var-bij-raw-noself", 5, False, "exact"),
    ("cells-k9-var-bij-raw-noself", 9, False, "exact"),
    ("cells-k5-eq-bij-unit-noself", 5, True, "exact"),
    ("cells-k7-eq-bij-unit-noself", 7, True, "exact"),
    ("cells-k9-eq-bij-unit-noself", 9, True, "exact"),
    ("cells-k10-eq-bij-unit-noself", 10, True, "exact"),
]


# --------------------------------------------------------------------------------------------
# Fidelity: vector geometry of the published PDFs
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,kappa,eq,labelling", CELL_FILES)
def test_seed_42_reproduces_the_published_polygon_and_cells(name, kappa, eq, labelling):
    panel = pf.cell_panel(kappa, rng=42, equal_norm=eq, labelling=labelling)
    K = panel["hull"]
    pub = pf.published_geometry(_published(name), K)
    # hull corners: PDF coordinates carry 6 decimals in points, i.e. ~1e-8 in data units
    assert pub["hull_residual"] < 1e-7
    np.testing.assert_allclose(pub["hull"], K, atol=1e-7)
    # the hollow vertex markers sit on the same corners
    assert len(pub["markers"]) == kappa
    assert _seg_dist(pub["markers"], K).max() < 1e-7
    # every published cell (convex hull of the grid points of one label) lies inside our exact
    # cell of the same colour and reaches to within about one grid diagonal of its corners
    h = _grid_step(K)
    colours = pf.hue_colours(kappa)
    fills = _coloured_fills(pub)
    assert len(fills) == sum(c["area"] > 2 * h * h for c in panel["cells"])
    for rgb, P in fills:
        i = int(np.argmin(np.abs(colours - rgb).sum(1)))
        assert np.abs(colours[i] - rgb).max() < 1e-3
        ours = panel["cells"][i]["polygon"]
        assert np.all(g.point_in_polygon(P, ours, tol=1e-7))
        assert np.all(_seg_dist(ours, P) < _corner_tolerance(ours, h))
        perimeter = np.linalg.norm(np.roll(ours, -1, 0) - ours, axis=1).sum()
        assert 0 <= panel["cells"][i]["area"] - g.polygon_area(P) < 1.5 * h * perimeter


def test_published_figure_1_is_not_the_cells_C_i_E18():
    """The published unequal-norm panels show the unit-direction labelling, not C_i(v)."""
    for name, kappa in (("cells-k7-var-bij-unit-noself", 7), ("cells-k10-var-bij-unit-noself", 10)):
        exact = pf.cell_panel(kappa, rng=42, labelling="exact")
        pub = pf.published_geometry(_published(name), exact["hull"])
        colours = pf.hue_colours(kappa)
        worst = 0.0
        for rgb, P in _coloured_fills(pub):
            i = int(np.argmin(np.abs(colours - rgb).sum(1)))
            worst = max(worst, g.symmetric_difference_area(P, exact["cells"][i]["polygon"]))
        assert worst > 0.02


@pytest.mark.parametrize("kappa", [5, 7])
def test_figure3_polygon_needs_B_diag_1_2_E17(kappa):
    fig, data = pf.figure3(kappas=(kappa,))
    panel = data["panels"][0]
    pub = pf.published_geometry(_published(f"quadratic_{kappa}"), panel["hull"])
    assert pub["hull_residual"] < 1e-6
    np.testing.assert_allclose(panel["J_vertices"], 0.5, rtol=1e-13)
    # the committed script's B = diag(1, 1) gives a different polygon
    u, hull = g.sample_vertices(kappa, rng=42, equal_norm=True)
    wrong = g.level_set_vertices(u, np.eye(2))[hull]
    assert pf.published_geometry(_published(f"quadratic_{kappa}"), wrong)["hull_residual"] > 1e-2


def test_figure4_cone_and_erosion_match_the_published_files_with_delta_003_E16():
    fig, data = pf.figure4()
    K = np.array(data["hull"])
    h = _grid_step(K)
    cone = np.array(data["cone"]["polygon"])
    pub_cone = [P for rgb, P in pf.published_geometry(_published("dominance_cells_k7"), K)["fills"]
                if np.allclose(rgb, [0, 1, 0])]
    assert len(pub_cone) == 1
    assert np.all(g.point_in_polygon(pub_cone[0], cone, tol=1e-7))
    assert np.all(_seg_dist(cone, pub_cone[0]) < _corner_tolerance(cone, h))
    pub = pf.published_geometry(_published("erosion_k7"), K)
    grey = [P for rgb, P in pub["fills"] if np.allclose(rgb, 0.95)]
    assert len(grey) == 1 and np.all(g.point_in_polygon(grey[0], data["cells"][2]["polygon"], tol=1e-7))
    pub_eroded = [P for rgb, P in pub["fills"] if np.allclose(rgb, [1, 0, 1])]
    assert len(pub_eroded) == 1
    ours = np.array(data["eroded_cone"]["polygon"])
    captioned = np.array(pf.figure4_delta002()[1]["eroded_cone"]["polygon"])
    assert np.all(g.point_in_polygon(pub_eroded[0], ours, tol=1e-7))
    assert np.all(_seg_dist(ours, pub_eroded[0]) < _corner_tolerance(ours, h))
    # the captioned delta = 0.02 leaves a strip of width 0.01 = 4.7 grid steps uncovered
    d_caption = _seg_dist(captioned, pub_eroded[0])
    assert np.all(d_caption > 0.0099) and d_caption.min() > 4 * h


# --------------------------------------------------------------------------------------------
# Fidelity: rasterised with pdftoppm, ours against the published files
# --------------------------------------------------------------------------------------------
def _colour_fractions(img, colours, tol=40):
    img = img.astype(int)
    counts = np.array([(np.abs(img - np.round(255 * np.asarray(c))).max(-1) <= tol).sum() for c in colours])
    return counts / counts.sum()


@pytest.mark.parametrize("kappa", [5, 7, 9, 10])
def test_rasterised_figure1_has_the_published_colour_partition(kappa, tmp_path):
    raster = _published(f"cells-k{kappa}-var-bij-unit-noself")["raster"]
    colours = pf.hue_colours(kappa)
    assert (raster["dpi"], raster["tolerance"]) == (60, 40)
    np.testing.assert_allclose(raster["colours"], colours, atol=1e-12)
    theirs = np.array(raster["pixels"]) / sum(raster["pixels"])
    fig, _ = pf.figure1(kappas=(kappa,), width=4.0)
    out = pf.plotting.save(fig, "f1", outdir=tmp_path, formats=("pdf",))
    ours = _colour_fractions(pf.rasterise_pdf(out["pdf"], dpi=60), colours)
    assert np.abs(ours - theirs).max() < 0.008, (ours, theirs)
    # and the corrected figure (true C_i(v), same polygons) visibly differs (E18)
    fig, _ = pf.figure1_corrected(kappas=(kappa,), width=4.0)
    out = pf.plotting.save(fig, "f1c", outdir=tmp_path, formats=("pdf",))
    corrected = _colour_fractions(pf.rasterise_pdf(out["pdf"], dpi=60), colours)
    assert np.abs(corrected - theirs).max() > 0.05


def test_rasterised_figure4_erosion_ratio_matches_delta_003(tmp_path):
    green, magenta = (0.38, 0.98, 0.38), (0.98, 0.38, 0.98)  # alpha 0.6 over the grey cell

    def count(img, colour):
        return int((np.abs(img.astype(int) - np.round(255 * np.array(colour))).max(-1) <= 20).sum())

    # pixel-area ratio eroded cone / cone: independent of dpi, figure size and fonts
    ero, dom = _published("erosion_k7")["raster"], _published("dominance_cells_k7")["raster"]
    assert (ero["dpi"], ero["tolerance"], ero["colours"]) == (100, 20, [list(magenta)])
    assert (dom["dpi"], dom["tolerance"], dom["colours"]) == (100, 20, [list(green)])
    pub_ratio = ero["pixels"][0] / dom["pixels"][0]
    res = {}
    for name in ("figure4", "figure4-delta002"):
        out = pf.make(name, outdir=tmp_path)
        img = pf.rasterise_pdf(out["pdf"], 100)
        res[name] = count(img, magenta) / count(img, green)
    exact = pf.figure4()[1]
    assert abs(res["figure4"] - exact["eroded_cone"]["area"] / exact["cone"]["area"]) < 0.03
    assert abs(pub_ratio - res["figure4"]) < 0.01
    assert res["figure4-delta002"] - pub_ratio > 0.08


def test_rasterise_names_the_missing_tool(monkeypatch, tmp_path):
    out = pf.make("figure4", outdir=tmp_path)
    monkeypatch.setattr(published_pdfs.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install poppler-utils"):
        pf.rasterise_pdf(out["pdf"])


# --------------------------------------------------------------------------------------------
# Reproducibility and the data behind each figure
# --------------------------------------------------------------------------------------------
def test_every_figure_regenerates_byte_identically(tmp_path):
    a = pf.make_all(outdir=tmp_path / "a")
    b = pf.make_all(outdir=tmp_path / "b")
    assert set(a) == set(pf.FIGURES)
    for name in a:
        for fmt, path in a[name].items():
            assert path.read_bytes() == b[name][fmt].read_bytes(), (name, fmt)


@pytest.mark.parametrize("name", ["figure1", "figure1-corrected", "figure2", "figure3"])
def test_cell_figure_json_is_consistent(name, tmp_path):
    out = pf.make(name, outdir=tmp_path)
    data = json.loads(out["json"].read_text())
    for panel in data["panels"]:
        K = np.array(panel["hull"])
        x, y = K.T
        assert 0.5 * np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y) > 0          # CCW
        assert abs(g.polygon_area(K) - panel["hull_area"]) < 1e-15
        assert len(panel["cells"]) == len(K) == len(panel["hull_labels"])
        total = 0.0
        for i, cell in enumerate(panel["cells"]):
            P = np.array(cell["polygon"]).reshape(-1, 2)
            assert cell["vertex"] == panel["hull_labels"][i]
            np.testing.assert_array_equal(np.array(panel["vertices"])[cell["vertex"] - 1], K[i])
            assert abs(g.polygon_area(P) - cell["area"]) < 1e-15
            assert np.all(g.point_in_polygon(P, K, tol=1e-12))
            if panel["labelling"] == "unit" or panel["owns_cell"][i]:
                assert g.point_in_polygon(K[i], P, tol=1e-12)
            total += cell["area"]
        assert abs(total - panel["hull_area"]) < 1e-12
    if name in ("figure2", "figure3"):
        assert max(p["voronoi_mismatch"] for p in data["panels"]) < 1e-12


def test_figure4_json_is_consistent(tmp_path):
    data = json.loads(pf.make("figure4", outdir=tmp_path)["json"].read_text())
    assert (data["kappa"], data["seed"], data["target"], data["eta"], data["delta"]) == (7, 42, 2, 0.05, 0.03)
    K = np.array(data["hull"])
    cone = np.array(data["cone"]["polygon"])
    eroded = np.array(data["eroded_cone"]["polygon"])
    assert abs(sum(c["area"] for c in data["cells"]) - data["hull_area"]) < 1e-12
    assert np.all(g.point_in_polygon(cone, np.array(data["cells"][2]["polygon"]), tol=1e-12))
    assert np.all(g.point_in_polygon(eroded, cone, tol=1e-12))
    assert abs(g.polygon_area(cone) - data["cone"]["area"]) < 1e-15
    assert abs(g.polygon_area(eroded) - data["eroded_cone"]["area"]) < 1e-15
    assert np.all(_seg_dist(eroded, cone) >= 0.03 - 1e-12)
    assert np.all(g.point_in_polygon(cone, K, tol=1e-12))


@pytest.mark.parametrize("kappa", [5, 9])
def test_drawn_polygons_are_the_json_polygons(kappa, tmp_path):
    """Read our own PDF back: every filled path is a JSON cell polygon (to PDF precision)."""
    fig, data = pf.figure1_corrected(kappas=(kappa,), width=3.4)
    out = pf.plotting.save(fig, "one", data, outdir=tmp_path)
    panel = json.loads(out["json"].read_text())["panels"][0]
    K = np.array(panel["hull"])
    drawn = pf.published_geometry(out["pdf"], K)
    assert drawn["hull_residual"] < 1e-5
    fills = _coloured_fills(drawn)
    cells = [c for c in panel["cells"] if c["area"] > 0]
    assert len(fills) == len(cells)
    for rgb, P in fills:
        cell = min(cells, key=lambda c: np.abs(np.array(c["colour"]) - rgb).sum())
        Q = np.array(cell["polygon"])
        assert _seg_dist(P, Q).max() < 1e-5 and _seg_dist(Q, P).max() < 1e-5


# --------------------------------------------------------------------------------------------
# make() and the command line
# --------------------------------------------------------------------------------------------
def test_make_rejects_unknown_names_and_parameters(tmp_path):
    with pytest.raises(ValueError, match="name"):
        pf.make("figure5", outdir=tmp_path)
    with pytest.raises(ValueError, match="kappa"):
        pf.make("figure4", outdir=tmp_path, kappas=(5,))
    with pytest.raises(ValueError, match="delta"):
        pf.make("figure4", outdir=tmp_path, delta=-1.0)


def test_command_line_custom_parameters_go_to_figures_custom(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path))
    assert pf.main(["figure2", "--kappas", "6", "--seed", "7"]) == 0
    printed = capsys.readouterr().out.split()
    (written,) = list((tmp_path / "custom" / "data").glob("figure2--*.json"))
    assert written.name.startswith("figure2--kappas-6_seed-7-")    # the name carries the parameters
    assert str(written) in printed                                   # and is printed
    data = json.loads(written.read_text())
    assert [(p["kappa"], p["seed"]) for p in data["panels"]] == [(6, 7)]
    assert not (tmp_path / "figure2.pdf").exists()      # canonical file untouched
    assert pf.main(["figure2"]) == 0                      # defaults: canonical location
    data = json.loads((tmp_path / "data" / "figure2.json").read_text())
    assert [p["kappa"] for p in data["panels"]] == [5, 7, 9, 10]
    assert pf.main(["figure4", "--delta", "0.05", "--outdir", str(tmp_path / "mine")]) == 0
    assert json.loads((tmp_path / "mine" / "data" / "figure4.json").read_text())["delta"] == 0.05
    assert pf.main(["figure4", "--delta", "0.03"]) == 0   # the default value is not "custom"
    assert (tmp_path / "figure4.pdf").exists() and not (tmp_path / "custom" / "figure4.pdf").exists()
    assert pf.main(["figure1", "--kappas", "12"]) == 2   # no 12-gon in 500 draws: a clear message
    assert "no draw with 12 hull vertices in 500 tries" in capsys.readouterr().err
    assert not list((tmp_path / "custom").glob("figure1--kappas-12*"))          # nothing written
    with pytest.raises(SystemExit):
        pf.main(["--help"])
    assert "figures/custom" in capsys.readouterr().out


def test_every_panel_draws_from_the_start_of_the_stream_and_a_generator_is_not_advanced():
    """As the authors' scripts re-seed 42 for every panel: each panel of a figure is the panel drawn
    alone with the same seed; a Generator passed in is copied (its next draw is unchanged) and the
    data record an int seed only; the recorded command gives the seed as --seed."""
    import matplotlib.pyplot as plt
    gen = np.random.default_rng(42)
    fig, data = pf.figure2(kappas=(5, 7), rng=gen)
    plt.close(fig)
    assert gen.random() == np.random.default_rng(42).random()
    for p in data["panels"]:
        alone = pf.cell_panel(p["kappa"], rng=42, equal_norm=True)
        assert np.array_equal(p["vertices"], alone["vertices"])
        assert p["seed"] is None and alone["seed"] == 42
    assert "--seed 7" in pf.command("figure2", {"rng": 7})
    assert "Python API only: rng=" in pf.command("figure2", {"rng": np.random.SeedSequence(7)})
