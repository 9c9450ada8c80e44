"""Reruns keep every result apart, and a rerun is a page (issue 24).

* ``make figure``: two commands with different parameters write different files (the names carry
  the parameters), neither replaces the other, the same command writes the same files again with
  the same bytes, and what is printed is exactly the set of files written;
* the manifest lists the files of the preset of the last ``make figures``: the book's files for
  ``paper``, only ``presets/<preset>/`` for another preset;
* a quick rerun of chapter 3 through ``tools/run_notebook.py --rerun`` (as ``make notebook`` runs it):
  its executed notebook, record and page in a folder named by its parameters, its figures under
  ``custom/`` named by them, the printed list equal to the files written, and a page in the book's
  theme whose top shows the parameter that differs and every quoted number beside the book's
  ("not built" without a book; with the book's record, the differing numbers marked).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zlib

import pytest

from afw_book import paper_figures as pf
from bookbuild import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import figure_manifest as fm  # noqa: E402
import rerun_page as rp  # noqa: E402


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_make_figure_never_replaces_another_command(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTENTION_FW_FIGURES", str(tmp_path / "figures"))
    assert pf.main(["figure2", "--kappas", "6"]) == 0
    first = _files(tmp_path / "figures")
    printed = {line.removeprefix("wrote ") for line in capsys.readouterr().out.splitlines()}
    assert printed == {f"figures/{rel}" for rel in first} and len(first) == 4
    assert pf.main(["figure2", "--kappas", "8"]) == 0
    both = _files(tmp_path / "figures")
    assert len(both) == 8 and all(both[rel] == payload for rel, payload in first.items())
    printed = {line.removeprefix("wrote ") for line in capsys.readouterr().out.splitlines()}
    assert printed == {f"figures/{rel}" for rel in set(both) - set(first)}
    assert all(re.search(r"figure2--kappas-[68]-[0-9a-f]{6}\.", rel) for rel in both)
    assert pf.main(["figure2", "--kappas", "6"]) == 0          # the same command: the same files, bytes
    assert _files(tmp_path / "figures") == both


def test_the_manifest_lists_the_files_of_one_preset(tmp_path):
    for rel in ("a.pdf", "data/a.json", "custom/b--x-123456.pdf", "presets/quick/a.pdf",
                "presets/quick/data/a.json", "presets/other/a.pdf", "README.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    assert [p.as_posix() for p in fm.listed_files(tmp_path, "paper")] == ["a.pdf", "data/a.json"]
    assert [p.as_posix() for p in fm.listed_files(tmp_path, "quick")] == ["presets/quick/a.pdf",
                                                                          "presets/quick/data/a.json"]


def test_quoted_numbers_and_the_summary_table():
    nb = {"cells": [{"outputs": [
        {"metadata": {"scrapbook": {"name": "first", "mime_prefix": "application/papermill.record/"}},
         "data": {"application/papermill.record/text/plain": "'575'"}},
        {"metadata": {"scrapbook": {"name": "fig-x", "mime_prefix": ""}}, "data": {"text/plain": "Figure"}},
        {"metadata": {"scrapbook": {"name": "ratio", "mime_prefix": ""}}, "data": {"text/plain": "0.125"}}]}]}
    assert rp.quoted_numbers(nb) == {"first": "575", "ratio": "0.125"}
    params = {"preset": "quick", "rows": [
        {"name": "seed", "value": 7, "book": 3, "differs": True, "meaning": "seed"},
        {"name": "n", "value": 5, "book": 5, "differs": False, "meaning": "tokens"}]}
    page = rp.summary_html("03-x", params, "make notebook NB=03-x", {"first": "575", "ratio": "0.2"},
                           {"first": "575", "ratio": "0.125"})
    assert "<code>seed</code></td><td><strong>7</strong></td><td>3</td>" in page and "<code>n</code>" not in page
    assert "1 of 2 differ" in page
    assert '<tr class="afw-differs"><td><code>ratio</code></td><td>0.125</td><td><strong>0.2</strong></td>' in page
    assert '<tr><td><code>first</code></td><td>575</td><td>575</td></tr>' in page
    assert "not built" in rp.summary_html("03-x", params, "c", {"first": "575"}, None)


@pytest.fixture(scope="module")
def rerun(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rerun")
    env = dict(os.environ, ATTENTION_FW_FIGURES=str(tmp / "figures" / "custom"))
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "run_notebook.py"),
                           str(ROOT / "book" / "03-negative-definite.py"), "--preset", "quick", "-p", "seed", "7",
                           "--rerun", str(tmp / "custom"), "--book-times", str(tmp / "no-book")],
                          capture_output=True, text=True, env=env, timeout=1500, cwd=tmp)
    return tmp, proc


def test_a_rerun_keeps_its_files_apart_and_prints_them(rerun):
    tmp, proc = rerun
    assert proc.returncode == 0, proc.stderr[-4000:]
    (run_dir,) = list((tmp / "custom" / "03-negative-definite").iterdir())
    assert run_dir.name.startswith("preset-quick_seed-7-")
    assert (run_dir / "03-negative-definite.ipynb").is_file() and (run_dir / "03-negative-definite.json").is_file()
    written = {p for p in (tmp / "figures" / "custom").rglob("*") if p.is_file()}
    printed = {line.strip() for line in proc.stdout.splitlines() if line.startswith("  ")}
    assert printed == {str(p) for p in written} and len(written) >= 8
    assert all(p.name.split(".")[0].endswith(run_dir.name) for p in written)
    record = json.loads((run_dir / "03-negative-definite.json").read_text())
    assert record["overrides"] == {"seed": 7} and record["quoted"]["first"] == "575"


def test_a_rerun_is_a_page_of_the_book_with_the_numbers_beside_the_books(rerun):
    tmp, proc = rerun
    assert proc.returncode == 0, proc.stderr[-4000:]
    (run_dir,) = list((tmp / "custom" / "03-negative-definite").iterdir())
    page = run_dir / "html" / "book" / "03-negative-definite.html"
    text = page.read_text()
    assert "sphinx-book-theme" in text and "custom.css" in text                # the book's theme
    top = text.index('class="afw-rerun"')
    assert text.index("<h1>Negative definite key") < top < text.index('id="theorem-3-1-as-printed"')   # its top
    assert re.search(r"<code>seed</code></td><td><strong>7</strong></td><td>3</td>", text)
    assert "make notebook NB=03-negative-definite PRESET=quick ARGS=&quot;-p seed 7&quot;" in text
    record = json.loads((run_dir / "03-negative-definite.json").read_text())
    assert "<em>not built</em>" in text
    for key in record["quoted"]:
        assert f"<code>{key}</code>" in text
    for src in re.findall(r'src="\.\./(figures/[^"]+\.png)"', text):      # every figure of the page is there
        assert (run_dir / "html" / src).is_file(), src
    # with the book's record (paper preset) the table puts the book's values beside the rerun's
    book = tmp / "book-times"
    book.mkdir()
    quoted = dict(record["quoted"], first="999")
    (book / "03-negative-definite.json").write_text(json.dumps({"preset": "paper", "overrides": {}, "quoted": quoted}))
    # ... and with a built book (its Sphinx inventory), the links to other chapters point into it
    built = tmp / "built-book"
    built.mkdir()
    entry = b"frank-wolfe std:label -1 book/02-frank-wolfe.html#$ Frank-Wolfe\n"
    (built / "objects.inv").write_bytes(b"# Sphinx inventory version 2\n# Project: book\n# Version: \n"
                                        b"# The remainder of this file is compressed using zlib.\n" + zlib.compress(entry))
    again = rp.build(run_dir / "03-negative-definite.ipynb", tmp / "again", book, "cmd", tmp / "figures" / "custom",
                     book_html=built)
    text = again.read_text()
    assert f"1 of {len(quoted)} differ" in text
    link = os.path.relpath(built, tmp / "again" / "html" / "book") + "/book/02-frank-wolfe.html#frank-wolfe"
    assert f'href="{link}"' in text, "the link to chapter 2 points into the built book"
    # the citations resolve on the page: it ends with the references it cites
    cites = re.findall(r'<a class="reference internal" href="#(id\d+)"', text)
    assert cites and all(f'id="{c}"' in text for c in cites)
    assert '<tr class="afw-differs"><td><code>first</code></td><td>999</td><td><strong>575</strong></td>' in text
