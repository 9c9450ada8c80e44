#!/usr/bin/env python
"""Read the authors' published figure PDFs into ``book/data/published-figures.json``.

    make published-data PDFS=<folder>          # the same as:
    python tools/published_data.py <folder> [--out FILE] [--files NAME.pdf ...]
                                   [--repository URL] [--commit HASH]

The book and the tests compare the regenerated Figures 1-4 with the authors' files
(``tests/test_paper_figures.py``, chapter 4). They do it from this data file, committed with
the book, so a clone needs nothing beside it. Anyone holding the PDFs (the ``figures/`` folder
of the authors' repository) can rewrite the file and see with ``git diff`` that it is unchanged.

For each PDF the file records:

* ``sha256`` and ``bytes`` of the PDF, and its ``producer`` and ``created`` entries;
* ``outlines``, ``fills`` and ``markers``: the shapes :func:`afw_book.paper_figures.pdf_shapes`
  reads from the page, in PDF points, exactly as parsed (hull outlines, filled cell polygons
  with their RGB colour, marker positions);
* ``raster``: for the files the tests compare pixel by pixel, the number of pixels of the
  pdftoppm rendering (at ``dpi``) within ``tolerance`` (0-255, every channel) of each colour.

The filled contour bands of ``quadratic_*.pdf`` (about 12,000 points per file) are left out and
said so (``omitted``): only their hull outline and markers are compared.

Provenance (``source``): the repository and commit the PDFs come from are not written in the
PDFs; they are kept from the existing data file unless ``--repository`` / ``--commit`` are given.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from afw_book import paper_figures as pf
from afw_book import paths

FILES = [
    "cells-k5-var-bij-unit-noself.pdf", "cells-k7-var-bij-unit-noself.pdf",
    "cells-k9-var-bij-unit-noself.pdf", "cells-k10-var-bij-unit-noself.pdf",
    "cells-k5-var-bij-raw-noself.pdf", "cells-k9-var-bij-raw-noself.pdf",
    "cells-k5-eq-bij-unit-noself.pdf", "cells-k7-eq-bij-unit-noself.pdf",
    "cells-k9-eq-bij-unit-noself.pdf", "cells-k10-eq-bij-unit-noself.pdf",
    "quadratic_5.pdf", "quadratic_7.pdf", "dominance_cells_k7.pdf", "erosion_k7.pdf",
]
"""The authors' files that the book compares (Figures 1-4 and the variants of Figure 1)."""

SOURCE = {
    "repository": "https://github.com/borjanG/2025-transformers-frank-wolfe",
    "folder": "figures/",
    "commit": "79e3255",
    "commit_note": "abbreviated hash, as recorded when the PDFs were copied from the repository; "
                   "the full 40-digit hash was not recorded and is not written in the PDFs",
}
"""Provenance used when there is no earlier data file and no --repository/--commit."""

ABOUT = ("Shapes read from the authors' published figure PDFs by tools/published_data.py "
         "(make published-data PDFS=<folder>), for the comparisons in tests/test_paper_figures.py "
         "and chapter 4. Coordinates are PDF points (1/72 inch) as written in each page; outlines "
         "are closed stroked paths (first point repeated), fills are [RGB, polygon] of filled "
         "paths in drawing order, markers are marker positions. The figures themselves belong to "
         "their authors; only these measurements are stored here.")

# Pixel counts of the rendering, for the files the tests compare pixel by pixel.
_MAGENTA_ON_GREY = [0.98, 0.38, 0.98]   # hsv(5/6, 1, 1) at alpha 0.6 over the grey cell (0.95)
_GREEN_ON_GREY = [0.38, 0.98, 0.38]     # (0, 1, 0) at alpha 0.6 over the same grey


def raster_spec(name: str) -> dict | None:
    """dpi, tolerance and colours whose pixels are counted for file ``name`` (None: none)."""
    m = re.match(r"cells-k(\d+)-", name)
    if m:
        return {"dpi": 60, "tolerance": 40, "colours": pf.hue_colours(int(m.group(1))).tolist()}
    if name.startswith("erosion_"):
        return {"dpi": 100, "tolerance": 20, "colours": [_MAGENTA_ON_GREY]}
    if name.startswith("dominance_cells_"):
        return {"dpi": 100, "tolerance": 20, "colours": [_GREEN_ON_GREY]}
    return None


def keeps_fills(name: str) -> bool:
    return not name.startswith("quadratic_")


def count_pixels(img: np.ndarray, colours, tolerance: int) -> list[int]:
    """Pixels of an (h, w, 3) uint8 image within ``tolerance`` of each RGB colour in [0, 1]."""
    img = img.astype(int)
    return [int((np.abs(img - np.round(255 * np.asarray(c, dtype=float))).max(-1) <= tolerance).sum())
            for c in colours]


def _info_entry(data: bytes, key: bytes) -> str | None:
    m = re.search(rb"/" + key + rb" \(([^)]*)\)", data)
    return m.group(1).decode("latin-1") if m else None


def _pdftoppm_version() -> str:
    proc = subprocess.run(["pdftoppm", "-v"], capture_output=True, text=True)
    return (proc.stderr or proc.stdout).splitlines()[0].strip()


def _points(P) -> list:
    return [[float(x), float(y)] for x, y in np.asarray(P, dtype=float)]


def extract(pdf: Path) -> dict:
    """The data-file entry of one PDF."""
    data = pdf.read_bytes()
    shapes = pf.pdf_shapes(pdf)
    entry = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
             "producer": _info_entry(data, b"Producer"), "created": _info_entry(data, b"CreationDate"),
             "outlines": [_points(P) for P in shapes["outlines"]],
             "markers": _points(shapes["markers"])}
    if keeps_fills(pdf.name):
        entry["fills"] = [{"rgb": [float(c) for c in rgb], "polygon": _points(P)} for rgb, P in shapes["fills"]]
    else:
        n = sum(len(P) for _, P in shapes["fills"])
        entry["omitted"] = (f"fills: {len(shapes['fills'])} filled paths ({n} points), the contour "
                            "bands, are not compared")
    spec = raster_spec(pdf.name)
    if spec is not None:
        img = pf.rasterise_pdf(pdf, dpi=spec["dpi"])
        entry["raster"] = {**spec, "shape": list(img.shape[:2]),
                           "pixels": count_pixels(img, spec["colours"], spec["tolerance"])}
    return entry


def dumps(obj) -> str:
    """Indented JSON with every innermost list of numbers on one line (readable diffs)."""
    text = json.dumps(obj, indent=1, sort_keys=True, allow_nan=False)
    return re.sub(r"\[\s*([-0-9.eE+,\s]+?)\s*\]", lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]",
                  text) + "\n"


def build(folder: Path, names: list[str], source: dict) -> dict:
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise SystemExit(f"published_data: {folder} lacks {missing} (expected the authors' figure PDFs: "
                         f"{names})")
    files = {n: extract(folder / n) for n in sorted(names)}
    rasterised = [n for n in files if "raster" in files[n]]
    out = {"about": ABOUT, "source": source, "files": files}
    if rasterised:
        out["rasteriser"] = _pdftoppm_version()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="folder holding the authors' figure PDFs")
    ap.add_argument("--out", type=Path, default=paths.PUBLISHED_DATA, help="data file to write "
                    "(default: book/data/published-figures.json)")
    ap.add_argument("--files", nargs="+", default=FILES, help="PDF names to read (default: the 14 the book compares)")
    ap.add_argument("--repository", help="URL of the repository the PDFs come from")
    ap.add_argument("--commit", help="commit of that repository")
    args = ap.parse_args(argv)
    if not args.folder.is_dir():
        print(f"published_data: no such folder {args.folder}", file=sys.stderr)
        return 2
    before = args.out.read_text() if args.out.is_file() else None
    source = dict(SOURCE)
    if before is not None:
        source = json.loads(before).get("source", source)
    if args.repository or args.commit:
        source = {**source, **({"repository": args.repository} if args.repository else {}),
                  **({"commit": args.commit, "commit_note": "given on the command line"} if args.commit else {})}
    text = dumps(build(args.folder, list(args.files), source))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_text(text)
    tmp.replace(args.out)
    state = "unchanged" if text == before else ("written" if before is None else "CHANGED (see git diff)")
    print(f"published_data: {len(args.files)} PDFs -> {args.out}: {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
