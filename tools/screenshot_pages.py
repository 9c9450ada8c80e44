#!/usr/bin/env python
"""Screenshots of the built book as a reader sees it: one window at a time, scrolling down.

    python tools/screenshot_pages.py [--html _build/html] [--out _build/screenshots]
                                     [--widths 1280,1920,390] [--height 900] [--max-shots 40] [PAGE ...]

Opens each page (``book/<page>.html``; default: every page, the library reference's included) in
headless Chromium (``chromium`` on PATH, or $CHROMIUM; networking disabled) in a window ``width`` x
``height`` CSS px for each width,
waits for MathJax and the images, then takes one screenshot of the window per scroll position,
from the top to the bottom of the page, overlapping by 10 %:
``<out>/<page>-w<width>-<k>.png``. Sticky headers and sidebars stay where a reader sees them
(a single screenshot as tall as the page would show them only at the top). Windows narrower
than 768 px are emulated as a phone (touch, device width).
"""
from __future__ import annotations

import argparse
import base64
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

from cdp import Browser, chromium_executable, evaluate  # noqa: E402
from page_ready import READY_JS  # noqa: E402


def shoot(browser: Browser, url: str, width: int, height: int, out_stem: Path, max_shots: int) -> int:
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    try:
        mobile = width < 768
        browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                            "deviceScaleFactor": 1, "mobile": mobile}, session)
        if mobile:
            browser.send("Emulation.setTouchEmulationEnabled", {"enabled": True}, session)
        for domain in ("Page", "Runtime"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Page.navigate", {"url": url}, session)
        time.sleep(0.5)
        total = int(evaluate(browser, session, READY_JS, timeout=60) or height)
        step = max(1, int(height * 0.9))
        n = 0
        for k, top in enumerate(range(0, max(1, total - height // 10), step)):
            if k >= max_shots:
                break
            evaluate(browser, session, f"window.scrollTo(0, {top}); "
                     "new Promise(r => requestAnimationFrame(() => setTimeout(r, 150)))")
            data = browser.send("Page.captureScreenshot", {"format": "png"}, session, timeout=60)["data"]
            Path(f"{out_stem}-{k}.png").write_bytes(base64.b64decode(data))
            n += 1
        return n
    finally:
        browser.send("Target.closeTarget", {"targetId": target})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("pages", nargs="*", help="pages under book/, e.g. 01-model or reference/model (default: every page)")
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "screenshots")
    ap.add_argument("--widths", default="1280,1920,390", help="window widths in CSS px, comma-separated")
    ap.add_argument("--height", type=int, default=900, help="window height in CSS px (844 for widths < 768)")
    ap.add_argument("--max-shots", type=int, default=40, help="at most this many windows per page and width")
    args = ap.parse_args(argv)
    args.html = args.html.resolve()                      # a file URI needs an absolute path
    exe = chromium_executable()
    if not exe:
        print("screenshot_pages: chromium not found (sudo apt-get install -y chromium)", file=sys.stderr)
        return 2
    widths = [int(w) for w in args.widths.split(",") if w.strip()]
    pages = args.pages or sorted(p.relative_to(args.html / "book").with_suffix("").as_posix()
                                 for p in (args.html / "book").rglob("*.html"))
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        browser = Browser(exe, Path(profile))
        try:
            for stem in pages:
                page = args.html / "book" / f"{stem}.html"
                if not page.is_file():
                    print(f"screenshot_pages: no page {page}", file=sys.stderr)
                    return 2
                name = stem.replace("/", "-")                   # reference/model -> reference-model
                for width in widths:
                    height = 844 if width < 768 and args.height == 900 else args.height
                    n = shoot(browser, page.as_uri(), width, height, args.out / f"{name}-w{width}", args.max_shots)
                    print(f"{stem} at {width} px: {n} windows")
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
