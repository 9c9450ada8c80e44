"""Determinism and offline builds.

* Two consecutive runs of the figure writer give byte-identical files.
* The whole book builds with the network unavailable: the session's one
  ``make book PRESET=quick`` (``bookbuild.quick_book``, shared with the browser tests) runs inside
  a fresh network namespace (``unshare -n`` with only loopback up) when the machine allows it,
  and always under a Python-level guard that refuses and logs every non-loopback connection or
  name lookup of every Python process of the build (make -> runner -> papermill -> kernel,
  jupyter-book -> Sphinx). The guard's log must stay empty.
* The built HTML requests nothing outside ``_build/html``: no script, stylesheet, font, image
  or frame from a remote URL (plain hyperlinks are allowed), and every local resource exists.
* ``figures/MANIFEST.sha256`` written by the pipeline lists every figure file with its SHA-256
  (that re-executing every notebook rewrites the same bytes is checked once, from nothing, in
  ``test_figures_heal.py``).
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

import figrun


def test_two_figure_generations_are_byte_identical(tmp_path_factory):
    first = figrun.files(figrun.reference("new", tmp_path_factory.mktemp("figrefs-det")))
    second = figrun.files(figrun.run_writer(tmp_path_factory.mktemp("again") / "figs"))
    assert set(first) == set(second) and len(first) >= 20
    differ = sorted(k for k in first if first[k] != second[k])
    assert differ == [], f"regenerated files differ: {differ}"


# ------------------------------------------------------------------------------ offline book
@pytest.fixture(scope="module")
def offline_book(tmp_path_factory):
    """The session's one quick build (``bookbuild.quick_book``), which runs offline."""
    import bookbuild

    build = bookbuild.quick_book()
    proc = subprocess.CompletedProcess(["make", "book", "PRESET=quick"], build.returncode, build.log, build.stderr)
    return {"repo": build.repo, "env": build.env, "proc": proc, "how": build.offline, "log": build.guard_log}


@pytest.mark.slow
def test_book_builds_with_the_network_unavailable(offline_book):
    proc = offline_book["proc"]
    assert proc.returncode == 0, f"offline build ({offline_book['how']}) failed:\n{proc.stderr[-5000:]}"
    assert (offline_book["repo"] / "_build" / "html" / "index.html").exists()
    log = offline_book["log"]
    attempts = log.read_text() if log.exists() else ""
    assert attempts == "", f"the build tried to reach the network:\n{attempts[:3000]}"


def test_the_network_guard_blocks_and_logs(tmp_path):
    """The guard itself works (else an empty log would prove nothing)."""
    import os

    env = figrun.guarded_env(dict(os.environ), tmp_path / "guard")
    code = ("import socket, urllib.request\n"
            "try:\n    urllib.request.urlopen('https://example.org', timeout=5)\nexcept OSError as e:\n"
            "    print('blocked', e)\n")
    proc = subprocess.run([figrun.PY, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert "blocked" in proc.stdout
    assert "example.org" in (tmp_path / "guard" / "attempts.log").read_text()


_REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)
_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)['"]?\s*\)|@import\s+['"]([^'"]+)['"]""", re.I)
# (tag, attribute) pairs that make a browser fetch something when the page loads
_FETCHING = [("script", "src"), ("img", "src"), ("img", "srcset"), ("source", "src"), ("source", "srcset"),
             ("iframe", "src"), ("embed", "src"), ("object", "data"), ("video", "src"), ("video", "poster"),
             ("audio", "src"), ("input", "src"), ("image", "href"), ("use", "href")]


def _local_target(page: Path, ref: str, html: Path) -> Path | None:
    ref = ref.split("#", 1)[0].split("?", 1)[0]
    if not ref or ref.startswith("data:"):
        return None
    u = urlparse(ref)
    if u.scheme == "file":
        return Path(unquote(u.path))
    return (page.parent / unquote(ref)).resolve() if not ref.startswith("/") else Path(unquote(ref))


@pytest.mark.slow
def test_built_html_requests_nothing_outside_build_html(offline_book):
    from bs4 import BeautifulSoup

    assert offline_book["proc"].returncode == 0
    html = (offline_book["repo"] / "_build" / "html").resolve()
    problems = []
    # _static/*.html are the theme's Jinja macro files copied verbatim, never served as pages
    pages = sorted(p for p in html.rglob("*.html") if p.relative_to(html).parts[0] != "_static")
    assert pages
    for page in pages:
        soup = BeautifulSoup(page.read_text(errors="replace"), "html.parser")
        refs = []
        for tag, attr in _FETCHING:
            for el in soup.find_all(tag):
                val = el.get(attr) or el.get(f"xlink:{attr}")
                if val:
                    refs += [v.strip().split(" ")[0] for v in val.split(",")] if "srcset" in attr else [val]
        for el in soup.find_all("link"):
            rel = {r.lower() for r in (el.get("rel") or [])}
            if rel & {"stylesheet", "preload", "icon", "modulepreload", "prefetch", "manifest"} and el.get("href"):
                refs.append(el["href"])
        for el in soup.find_all(style=True):
            refs += [a or b for a, b in _CSS_URL.findall(el["style"])]
        for el in soup.find_all("style"):
            refs += [a or b for a, b in _CSS_URL.findall(el.get_text())]
        for ref in refs:
            if _REMOTE.match(ref) and not ref.startswith("file:"):
                problems.append(f"{page.relative_to(html)}: remote {ref}")
                continue
            target = _local_target(page, ref, html)
            if target is None:
                continue
            if not target.is_relative_to(html):
                problems.append(f"{page.relative_to(html)}: outside _build/html: {ref}")
            elif not target.exists():
                problems.append(f"{page.relative_to(html)}: missing {ref}")
    for css in html.rglob("*.css"):
        for a, b in _CSS_URL.findall(css.read_text(errors="replace")):
            ref = a or b
            if _REMOTE.match(ref):
                problems.append(f"{css.relative_to(html)}: remote {ref}")
    assert problems == [], "\n".join(problems[:50])


def _manifest(folder: Path) -> dict[str, str]:
    text = (folder / "MANIFEST.sha256").read_text()
    out = {}
    for line in text.splitlines():
        digest, rel = line.split("  ", 1)
        out[rel] = digest
    return out


@pytest.mark.slow
def test_manifest_matches_the_figures(offline_book):
    repo = offline_book["repo"]
    assert offline_book["proc"].returncode == 0
    figures = repo / "figures"
    manifest = _manifest(figures)
    listed = set(manifest)
    on_disk = {p.relative_to(figures).as_posix() for p in figures.rglob("*") if p.is_file()
               and p.name != "MANIFEST.sha256" and not p.relative_to(figures).parts[0] == "custom"
               and not any(s.startswith(".") for s in p.relative_to(figures).parts)}
    assert listed == on_disk, f"manifest and folder disagree: {sorted(listed ^ on_disk)[:20]}"
    assert len(listed) >= 10
    for rel, digest in manifest.items():
        assert hashlib.sha256((figures / rel).read_bytes()).hexdigest() == digest, f"{rel}: hash mismatch"
    if shutil.which("sha256sum"):
        assert subprocess.run(["sha256sum", "--quiet", "-c", "MANIFEST.sha256"], cwd=figures).returncode == 0
    # That a rebuild rewrites the same bytes is checked once, where every notebook runs again from
    # nothing: test_figures_heal.test_rm_rf_figures_then_make_figures_restores_every_file_and_names_it (every
    # file restored, equal to the first build's bytes). A change under lib/ re-executes every
    # notebook by make's dependency rule: test_book's dry runs of make check the rule itself.
