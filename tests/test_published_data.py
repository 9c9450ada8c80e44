"""The reader of the authors' PDFs (``tools/published_data.py``) and the data it committed.

The reader is tested on PDFs that the test draws itself with matplotlib, with known polygons,
colours and markers, so no external file is needed: the shapes must come back to PDF precision,
the pixel counts of the pdftoppm rendering must match the areas up to one pixel per pixel of
perimeter, and the file must record each PDF's SHA-256. The committed data file
(``book/data/published-figures.json``) must hold every file the book compares, with provenance.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Polygon  # noqa: E402

from attention_fw.geometry import planar as g  # noqa: E402
from afw_book import paper_figures as pf  # noqa: E402
from afw_book import paths  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOL = [sys.executable, str(ROOT / "tools" / "published_data.py")]
sys.path.insert(0, str(ROOT / "tools"))
import published_data  # noqa: E402

INCH = 4.0                      # figure side, inches; the axes fill it and show [0, 1]^2
PT_PER_UNIT = 72 * INCH         # PDF points per data unit
# A pentagon split into three convex pieces, each a "cell" with its own colour.
HULL = np.array([[0.1, 0.1], [0.9, 0.15], [0.85, 0.7], [0.5, 0.92], [0.12, 0.6]])
CENTRE = np.array([0.5, 0.45])
PIECES = [np.array([HULL[0], HULL[1], CENTRE]),
          np.array([HULL[1], HULL[2], HULL[3], CENTRE]),
          np.array([HULL[3], HULL[4], HULL[0], CENTRE])]


def _canvas():
    fig = plt.figure(figsize=(INCH, INCH))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    return fig, ax


def _save(fig, path: Path) -> None:
    """The whole page (no tight bounding box: the book's style sets one), so that the page is
    INCH x INCH and the data square fills it."""
    with matplotlib.rc_context({"savefig.bbox": "standard", "savefig.pad_inches": 0.0}):
        fig.savefig(path, format="pdf")
    plt.close(fig)


def _cells_pdf(path: Path, colours) -> None:
    fig, ax = _canvas()
    for P, c in zip(PIECES, colours):
        ax.add_patch(Polygon(P, closed=True, facecolor=c, edgecolor="none"))
    ax.plot(*np.vstack([HULL, HULL[:1]]).T, color="k", lw=0.5)
    ax.scatter(HULL[:, 0], HULL[:, 1], s=20, facecolors="none", edgecolors="k", linewidths=0.5)
    _save(fig, path)


def _erosion_pdf(path: Path, inner) -> None:
    """A grey cell (0.95) and, on top, a magenta polygon at alpha 0.6, as in erosion_k7.pdf."""
    fig, ax = _canvas()
    ax.add_patch(Polygon(HULL, closed=True, facecolor=(0.95, 0.95, 0.95), edgecolor="none"))
    ax.add_patch(Polygon(inner, closed=True, facecolor=(1, 0, 1), alpha=0.6, edgecolor="none"))
    ax.plot(*np.vstack([HULL, HULL[:1]]).T, color="k", lw=0.5)
    _save(fig, path)


def _perimeter(P):
    return float(np.linalg.norm(np.roll(P, -1, 0) - P, axis=1).sum())


def _run(*args):
    return subprocess.run([*TOOL, *map(str, args)], capture_output=True, text=True, timeout=300)


def _same_polygon(A, B, tol):
    """A equals B up to a cyclic shift of the corners (matplotlib keeps the order)."""
    A, B = np.asarray(A), np.asarray(B)
    if A.shape != B.shape:
        return False
    return any(np.abs(np.roll(B, -r, 0) - A).max() < tol for r in range(len(B)))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pdfs")
    colours = pf.hue_colours(3)
    _cells_pdf(folder / "cells-k3-test.pdf", colours)
    _cells_pdf(folder / "quadratic_3.pdf", colours)
    inner = np.array([[0.3, 0.3], [0.7, 0.32], [0.6, 0.6], [0.35, 0.55]])
    _erosion_pdf(folder / "erosion_k3.pdf", inner)
    out = folder / "data.json"
    names = ["cells-k3-test.pdf", "quadratic_3.pdf", "erosion_k3.pdf"]
    proc = _run(folder, "--out", out, "--files", *names)
    assert proc.returncode == 0, proc.stderr
    return folder, out, names, colours, inner, proc.stdout


def test_reader_recovers_known_polygons_colours_and_markers(synthetic):
    folder, out, _, colours, _, _ = synthetic
    shapes = pf.published_shapes("cells-k3-test", data=out)
    geo = pf.published_geometry(shapes, HULL)
    # PDF coordinates carry 6 decimals in points: ~1e-8 in data units here
    assert abs(geo["scale"] - PT_PER_UNIT) < 1e-6
    assert geo["hull_residual"] < 1e-8
    np.testing.assert_allclose(geo["hull"], HULL, atol=1e-8)
    np.testing.assert_allclose(geo["markers"], HULL, atol=1e-8)
    fills = [(rgb, P) for rgb, P in geo["fills"] if not np.allclose(rgb, 1.0)]   # the white page
    assert len(fills) == len(PIECES)
    for (rgb, P), piece, colour in zip(fills, PIECES, colours):
        np.testing.assert_allclose(rgb, colour, atol=1e-6)
        assert _same_polygon(P, piece, 1e-8), (P, piece)
    # the data file holds exactly what the reader finds in the PDF itself
    direct = pf.pdf_shapes(folder / "cells-k3-test.pdf")
    assert len(direct["fills"]) == len(shapes["fills"])
    for (a, P), (b, Q) in zip(direct["fills"], shapes["fills"]):
        assert np.array_equal(a, b) and np.array_equal(P, Q)


def test_pixel_counts_match_the_areas(synthetic):
    """pdftoppm's rendering: each colour covers its polygon's area, give or take one pixel per
    pixel of perimeter (anti-aliased edge pixels may or may not pass the tolerance)."""
    _, out, _, colours, inner, _ = synthetic
    raster = pf.published_shapes("cells-k3-test", data=out)["raster"]
    assert (raster["dpi"], raster["tolerance"]) == (60, 40)
    np.testing.assert_allclose(raster["colours"], colours)
    px = raster["dpi"] * INCH          # pixels per data unit
    assert raster["shape"] == [round(px), round(px)]
    for count, piece in zip(raster["pixels"], PIECES):
        assert abs(count - g.polygon_area(piece) * px**2) <= _perimeter(piece) * px, (count, piece)
    # the eroded cone, magenta at alpha 0.6 over the grey cell, is counted by its blended colour
    raster = pf.published_shapes("erosion_k3", data=out)["raster"]
    assert raster["colours"] == [[0.98, 0.38, 0.98]] and raster["dpi"] == 100
    px = raster["dpi"] * INCH
    assert abs(raster["pixels"][0] - g.polygon_area(inner) * px**2) <= _perimeter(inner) * px


def test_contour_bands_of_the_quadratic_figures_are_left_out_and_said_so(synthetic):
    _, out, _, _, _, _ = synthetic
    entry = json.loads(out.read_text())["files"]["quadratic_3.pdf"]
    assert "fills" not in entry and "raster" not in entry
    assert entry["omitted"].startswith("fills: 4 filled paths")   # the page and three pieces
    geo = pf.published_geometry(pf.published_shapes("quadratic_3", data=out), HULL)
    assert geo["hull_residual"] < 1e-8 and geo["fills"] == []


def test_provenance_hashes_and_a_deterministic_file(synthetic, tmp_path):
    folder, out, names, _, _, stdout = synthetic
    data = json.loads(out.read_text())
    for name in names:
        raw = (folder / name).read_bytes()
        entry = data["files"][name]
        assert entry["sha256"] == hashlib.sha256(raw).hexdigest() and entry["bytes"] == len(raw)
        assert entry["producer"].startswith("Matplotlib pdf backend")
    assert data["source"] == published_data.SOURCE and "written" in stdout
    assert data["rasteriser"].startswith("pdftoppm version")
    # the same PDFs give the same bytes, and the tool says so
    again = _run(folder, "--out", out, "--files", *names)
    assert again.returncode == 0 and "unchanged" in again.stdout
    # a stated commit replaces the recorded one; other provenance is kept
    copy = tmp_path / "copy.json"
    copy.write_text(out.read_text())
    proc = _run(folder, "--out", copy, "--files", *names, "--commit", "0123abc")
    assert proc.returncode == 0 and "CHANGED" in proc.stdout
    source = json.loads(copy.read_text())["source"]
    assert source["commit"] == "0123abc" and source["repository"] == published_data.SOURCE["repository"]


def test_missing_pdfs_are_named(synthetic, tmp_path):
    folder, _, _, _, _, _ = synthetic
    proc = _run(folder, "--out", tmp_path / "x.json")          # the 14 default names are absent
    assert proc.returncode != 0 and "cells-k5-var-bij-unit-noself.pdf" in proc.stderr
    assert not (tmp_path / "x.json").exists()
    proc = _run(tmp_path / "nowhere", "--out", tmp_path / "x.json")
    assert proc.returncode == 2 and "no such folder" in proc.stderr


def test_committed_data_covers_every_compared_file_with_provenance():
    data = json.loads(paths.PUBLISHED_DATA.read_text())
    assert sorted(data["files"]) == sorted(published_data.FILES)
    src = data["source"]
    assert src["repository"].startswith("https://github.com/") and re.fullmatch(r"[0-9a-f]{7,40}", src["commit"])
    assert "commit_note" in src or len(src["commit"]) == 40
    for name, entry in data["files"].items():
        assert re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]), name
        assert entry["producer"].startswith("Matplotlib"), name
        assert entry["outlines"] and entry["markers"], name
        assert ("raster" in entry) == (published_data.raster_spec(name) is not None), name
        assert ("fills" in entry) != ("omitted" in entry), name
    # every cell figure has its hull outline: kappa corners plus the repeated first one
    for name, entry in data["files"].items():
        m = re.match(r"cells-k(\d+)-", name)
        if m:
            assert int(m.group(1)) + 1 in {len(P) for P in entry["outlines"]}, name


def test_nothing_in_the_repository_reads_outside_it():
    """No source, tool, test or notebook names a folder beside the clone (the authors' PDFs
    used to be read from one)."""
    pattern = re.compile(r"\.\./shared|/work/shared|parent\s*/\s*\"shared\"|ROOT\.parent")
    offenders = []
    for folder in ("lib", "book", "tools", "tests", ".ci", ".github"):
        for p in (ROOT / folder).rglob("*"):
            if p.is_file() and p.suffix in (".py", ".md", ".yml", ".yaml", ".sh", ".cfg", ".toml", ".json", "") \
                    and p.resolve() != Path(__file__).resolve() and ".egg-info" not in str(p):
                if pattern.search(p.read_text(errors="replace")):
                    offenders.append(str(p.relative_to(ROOT)))
    for name in ("Makefile", "_config.yml", "_toc.yml", "README.md", "pytest.ini"):
        if pattern.search((ROOT / name).read_text()):
            offenders.append(name)
    assert offenders == []
