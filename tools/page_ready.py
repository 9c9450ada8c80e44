"""The one "page ready" script of the browser checks (tests/test_browser.py) and of the
screenshots (tools/screenshot_pages.py), so that both see a page in the same state.

:data:`READY_JS`, evaluated (awaited) in a page over the DevTools protocol, waits until the
document has loaded, MathJax (when the page has math) has typeset it, and every image has
loaded or failed (lazy images are made eager first); it returns the page's height in CSS px.
"""
from __future__ import annotations

__all__ = ["READY_JS"]

READY_JS = """
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  for (let i = 0; i < 200 && document.readyState !== 'complete'; i++) await sleep(50);
  if (document.querySelector('span.math, div.math')) {
    for (let i = 0; i < 200 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++) await sleep(50);
    if (window.MathJax && MathJax.startup) await MathJax.startup.promise;
  }
  const imgs = Array.from(document.images);
  imgs.forEach(i => { i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? 0 : new Promise(r => { i.onload = i.onerror = r; })));
  return Math.max(document.documentElement.scrollHeight, document.body.scrollHeight);
})()
"""
