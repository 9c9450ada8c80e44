"""The built book in a real browser: headless Chromium driven over the DevTools protocol.

Every page of the quick build (see ``bookbuild.py``) is opened twice, from a loopback HTTP
server and straight from disk (``file://``), and must show that:

* the math is typeset by the locally served MathJax (one ``mjx-container`` per math element,
  no ``mjx-merror``);
* every image has loaded (``naturalWidth > 0``);
* there is no console error, no uncaught exception, no failed request;
* no request leaves the machine (only the page's own origin, ``data:`` and ``blob:``); host
  name resolution is disabled as well, so an attempt is both reported and harmless.

The DevTools protocol client is ``cdp.py`` (over ``--remote-debugging-pipe``: no extra
Python package, no port).
Chromium is required: without it the test fails and says how to install it.
"""
from __future__ import annotations

import functools
import http.server
import json
import queue
import threading
import time
from pathlib import Path

import pytest

import bookbuild
from cdp import INSTALL_HINT, PAGE_TIMEOUT, Browser, chromium_executable, evaluate

pytestmark = [pytest.mark.slow, pytest.mark.browser]
LOCAL_SCHEMES = ("data:", "blob:", "about:")


# Waits for MathJax (if the page has math) and for every image, then reports.
PAGE_REPORT_JS = """
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const mathNodes = document.querySelectorAll('span.math, div.math');
  if (mathNodes.length) {
    for (let i = 0; i < 200 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++) await sleep(50);
    if (window.MathJax && MathJax.startup) await MathJax.startup.promise;
  }
  const imgs = Array.from(document.images);
  imgs.forEach(i => { i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? 0 : new Promise(r => { i.onload = i.onerror = r; })));
  return {
    math: mathNodes.length,
    typeset: document.querySelectorAll('mjx-container').length,
    merror: document.querySelectorAll('mjx-merror').length,
    mathjax: !!(window.MathJax && MathJax.version),
    images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.currentSrc || i.src),
    title: document.title,
  };
})()
"""


def check_page(browser, url: str, origin: str) -> dict:
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    try:
        for domain in ("Page", "Network", "Runtime", "Log"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Page.navigate", {"url": url}, session)
        deadline = time.monotonic() + PAGE_TIMEOUT
        requests, problems, loaded = [], [], False
        while time.monotonic() < deadline and not loaded:
            try:
                ev = browser.events.get(timeout=0.5)
            except queue.Empty:
                continue
            if ev.get("sessionId") != session:
                continue
            loaded = ev["method"] == "Page.loadEventFired"
            _collect(ev, requests, problems)
        assert loaded, f"{url} did not finish loading in {PAGE_TIMEOUT} s"
        report = evaluate(browser, session, PAGE_REPORT_JS)
        time.sleep(0.3)  # let late console messages arrive
        while True:
            try:
                ev = browser.events.get_nowait()
            except queue.Empty:
                break
            if ev.get("sessionId") == session:
                _collect(ev, requests, problems)
        report["remote"] = [u for u in requests if not (u.startswith(origin) or u.startswith(LOCAL_SCHEMES))]
        report["problems"] = problems
        report["requests"] = len(requests)
        return report
    finally:
        browser.send("Target.closeTarget", {"targetId": target})


def _collect(ev, requests, problems):
    method, params = ev["method"], ev.get("params", {})
    if method == "Network.requestWillBeSent":
        requests.append(params["request"]["url"])
    elif method == "Network.loadingFailed" and not params.get("canceled"):
        problems.append(f"request failed: {params.get('errorText')} ({params.get('type')})")
    elif method == "Network.responseReceived" and params["response"].get("status", 200) >= 400:
        problems.append(f"HTTP {params['response']['status']} for {params['response']['url']}")
    elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        problems.append("console error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                     for a in params.get("args", [])))
    elif method == "Runtime.exceptionThrown":
        d = params.get("exceptionDetails", {})
        problems.append(f"uncaught exception: {d.get('exception', {}).get('description', d.get('text'))}")
    elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
        problems.append(f"log error: {params['entry'].get('text')} {params['entry'].get('url', '')}")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served_book(tmp_path_factory):
    build = bookbuild.quick_book(tmp_path_factory.mktemp("book"))
    assert build.returncode == 0, f"the quick book did not build:\n{build.log[-4000:]}"
    handler = functools.partial(_QuietHandler, directory=str(build.html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield build.html, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    exe = chromium_executable()
    if exe is None:
        pytest.fail(INSTALL_HINT)
    b = Browser(exe, tmp_path_factory.mktemp("chromium-profile"))
    try:
        b.send("Browser.getVersion", timeout=60)
        yield b
    finally:
        b.close()


def book_pages(html: Path) -> list[str]:
    return sorted(p.relative_to(html).as_posix() for p in (html / "book").glob("*.html"))


def test_chromium_is_installed():
    assert chromium_executable() is not None, INSTALL_HINT


@pytest.mark.parametrize("scheme", ["http", "file"])
def test_every_page_renders_offline(served_book, browser, scheme):
    """Served from a loopback server (as online) and opened straight from disk (file://)."""
    html, origin = served_book
    if scheme == "file":
        origin = html.as_uri() + "/"
    pages = book_pages(html)
    expected = {f"book/{p.stem}.html" for p in bookbuild.chapter_sources()} | {"book/intro.html"}
    assert expected <= set(pages)
    failures = {}
    for page in pages:
        r = check_page(browser, origin + page, origin)
        bad = []
        if r["math"] and not (r["mathjax"] and r["typeset"] >= r["math"] and r["merror"] == 0):
            bad.append(f"math not typeset: {r['typeset']} of {r['math']} elements, "
                       f"{r['merror']} errors, MathJax loaded: {r['mathjax']}")
        if r["broken"]:
            bad.append(f"images not loaded: {r['broken']}")
        if r["remote"]:
            bad.append(f"requests leaving the machine: {r['remote']}")
        bad += r["problems"]
        if bad:
            failures[page] = bad
    assert failures == {}, json.dumps(failures, indent=1)


def test_math_and_figures_are_present_where_expected(served_book, browser):
    """Guards the check above against passing vacuously: the model chapter has typeset
    math, and the book as a whole has loaded images."""
    html, origin = served_book
    r = check_page(browser, origin + "book/01-model.html", origin)
    assert r["math"] > 0 and r["typeset"] >= r["math"]
    images = sum(check_page(browser, origin + p, origin)["images"] for p in book_pages(html))
    assert images > 0
