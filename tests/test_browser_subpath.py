"""The built book served under a sub-path, as GitHub Pages serves a project site.

A project's pages live at ``https://<owner>.github.io/<repository>/``, so every link of the
book must be relative. Here ``python -m http.server`` (the server ``make serve`` uses) serves a
folder whose only entry is ``<sub-path>/ -> _build/html`` of the quick build, and headless
Chromium (the DevTools client of ``cdp.py``, with ``test_browser.py``'s page check) opens every
HTML page: each page, image, stylesheet, script and font must load with no 404 and no request
outside the sub-path (anything addressed from the server's root is a 404 here), and MathJax must
typeset the math. Every link of every page (other pages, the downloads of the executed notebooks
and page sources) must stay under the sub-path and answer 200.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from urllib.parse import urljoin, urlparse

import pytest

import bookbuild
from cdp import evaluate
from test_browser import check_page, page_problems

pytestmark = [pytest.mark.slow, pytest.mark.browser]
SUBPATH = "attention-fw"

@pytest.fixture(scope="module")
def subpath_server(tmp_path_factory):
    build = bookbuild.quick_book()
    assert build.returncode == 0, f"the quick book did not build:\n{build.log[-4000:]}"
    site = tmp_path_factory.mktemp("site")
    (site / SUBPATH).symlink_to(build.html, target_is_directory=True)
    # the server logs every request on stderr: into a file, never into a pipe that nobody reads (a
    # full pipe blocks the server once a few hundred requests have been logged)
    log = tmp_path_factory.mktemp("server") / "requests.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
                                 "--directory", str(site)], stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        line = proc.stdout.readline()        # "Serving HTTP on 127.0.0.1 port N (http://...) ..."
        m = re.search(r"port (\d+)", line)
        assert m, f"http.server did not start: {line!r} {log.read_text() if proc.poll() is not None else ''}"
        root = f"http://127.0.0.1:{m.group(1)}/"
        yield build.html, root, root + SUBPATH + "/"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=180) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


class _Links(HTMLParser):
    """Every URL a page names: anchors (pages, downloads), stylesheets, scripts, images."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("href", "src"):
            if a.get(key) and tag in ("a", "link", "script", "img", "source"):
                self.found.append((tag, a[key]))


def _page_links(html_file, url: str) -> list[tuple[str, str]]:
    parser = _Links()
    parser.feed(html_file.read_text(errors="replace"))
    return [(tag, urljoin(url, ref).split("#", 1)[0]) for tag, ref in parser.found
            if not ref.startswith(("#", "mailto:", "data:", "javascript:"))]


def test_every_page_and_resource_loads_under_a_sub_path(subpath_server, browser):
    html, root, base = subpath_server
    assert _status(root + "book/intro.html") == 404, "the server must not serve the book from its root"
    pages = sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                   if not p.relative_to(html).parts[0].startswith("_"))
    assert "index.html" in pages and "book/intro.html" in pages
    # index.html only redirects (a meta refresh): loading it races the redirect, so it is checked by
    # test_the_redirecting_index_lands_on_the_introduction_under_the_sub_path instead
    pages.remove("index.html")
    failures, math_pages, requests = {}, 0, 0
    links: dict[str, set[str]] = {}
    for page in pages:
        r = check_page(browser, base + page, base)
        bad = page_problems(r, base)
        math_pages += bool(r["math"])
        requests += r["requests"]
        if bad:
            failures[page] = bad
        for tag, url in _page_links(html / page, base + page):
            if url.startswith(root):
                links.setdefault(url, set()).add(page)
            elif tag != "a":
                failures.setdefault(page, []).append(f"<{tag}> outside the site: {url}")
    assert failures == {}, json.dumps(failures, indent=1)
    assert math_pages >= 3 and requests > 10 * len(pages)
    # every link of every page stays under the sub-path and resolves (downloads included)
    outside = sorted(u for u in links if not u.startswith(base))
    assert outside == [], f"links that leave {base}: {outside[:20]}"
    downloads = [u for u in links if urlparse(u).path.endswith(".ipynb")]
    assert {f"{base}_sources/book/{p.stem}.ipynb" for p in bookbuild.chapter_sources()} <= set(downloads)
    missing = {u: sorted(links[u]) for u in sorted(links) if _status(u) != 200}
    assert missing == {}, json.dumps(missing, indent=1)


def test_the_redirecting_index_lands_on_the_introduction_under_the_sub_path(subpath_server, browser):
    html, _, base = subpath_server
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    try:
        browser.send("Page.enable", session=session)
        browser.send("Page.navigate", {"url": base}, session)
        deadline, where = time.monotonic() + 180, ""
        while time.monotonic() < deadline:
            where = evaluate(browser, session, "location.href") or ""
            if where.endswith("book/intro.html") and evaluate(browser, session, "document.readyState") == "complete":
                break
            time.sleep(0.2)
        assert where == urljoin(base, "book/intro.html"), where
        assert "Frank" in (evaluate(browser, session, "document.title") or "")
    finally:
        browser.send("Target.closeTarget", {"targetId": target})
