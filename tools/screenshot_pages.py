#!/usr/bin/env python
"""Screenshots of the built book, for looking at every page as a reader would.

    python tools/screenshot_pages.py [--html _build/html] [--out _build/screenshots] [--width 800] [--height 9000] [PAGE ...]

Runs headless Chromium (``chromium`` on PATH, or $CHROMIUM) once per page at 1280 px wide (``--width``),
with networking disabled, and cuts each long screenshot into slices of 1600 px
``<out>/<page>-<k>.png`` (``<page>-w<width>-<k>.png`` at another width) that an image viewer shows
at a readable scale. The blank bottom of a page, and slices whose article column is blank, are dropped.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image, ImageChops, ImageStat

ROOT = Path(__file__).resolve().parents[1]


def article_columns(width: int) -> tuple[int, int]:
    """The horizontal extent of the article column in a window ``width`` CSS px wide.

    At 1200 px and above the book's theme shows both sidebars and the article sits between
    x = 300 and x = 980 (at 1280 px); below, the sidebars fold away and the article spans the
    window but for its margins.
    """
    if width >= 1200:
        return round(width * 300 / 1280), round(width * 980 / 1280)
    return min(40, width // 10), width - min(40, width // 10)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("pages", nargs="*", help="pages under book/, e.g. 01-model or reference/model (default: every page)")
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "screenshots")
    ap.add_argument("--width", type=int, default=1280, help="window width in CSS px (e.g. 800 for a narrow window)")
    ap.add_argument("--height", type=int, default=16000)
    ap.add_argument("--slice", type=int, default=1600)
    args = ap.parse_args(argv)
    args.html = args.html.resolve()                      # a file URI needs an absolute path
    exe = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        print("screenshot_pages: chromium not found (sudo apt-get install -y chromium)", file=sys.stderr)
        return 2
    pages = args.pages or sorted(p.relative_to(args.html / "book").with_suffix("").as_posix()
                                 for p in (args.html / "book").rglob("*.html"))
    args.out.mkdir(parents=True, exist_ok=True)
    for stem in pages:
        page = args.html / "book" / f"{stem}.html"
        stem = stem.replace("/", "-")                             # reference/model -> reference-model
        with tempfile.TemporaryDirectory() as profile:
            full = args.out / f"{stem}-full.png"
            subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                            f"--user-data-dir={profile}", f"--window-size={args.width},{args.height}",
                            "--virtual-time-budget=8000", f"--screenshot={full}", page.as_uri()],
                           check=True, capture_output=True, timeout=120)
        img = Image.open(full).convert("RGB")
        left, right = article_columns(args.width)
        content = img.crop((left, 0, right, img.height))          # the article column, without sidebars
        box = ImageChops.difference(content, Image.new("RGB", content.size, (255, 255, 255))).getbbox()
        bottom = box[3] if box else img.height
        n = 0
        for k, top in enumerate(range(0, bottom, args.slice)):
            piece = img.crop((0, top, img.width, min(top + args.slice, bottom)))
            if ImageStat.Stat(piece.convert("L").crop((left, 0, right, piece.height))).stddev[0] < 3:
                continue                                        # blank article column
            suffix = "" if args.width == 1280 else f"-w{args.width}"
            piece.save(args.out / f"{stem}{suffix}-{k}.png")
            n += 1
        full.unlink()
        print(f"{stem}: {n} slices")
    return 0


if __name__ == "__main__":
    sys.exit(main())
