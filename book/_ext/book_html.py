"""A small Sphinx extension for the book's HTML (listed in _config.yml, sphinx.local_extensions).

* MathJax on every page: the sidebar's chapter titles carry math ("Finite $\\beta$") on every
  page, including the index and search pages, where Sphinx would otherwise not load MathJax and
  show the raw TeX.
* The redirecting ``index.html`` at the root of the site (a project's GitHub Pages address,
  ``https://<owner>.github.io/<repository>/``) is a complete page that names the book's icon;
  the one-line redirect sphinx-external-toc writes otherwise (only when the file is missing)
  names none, so browsers ask for ``/favicon.ico`` at the server's root, outside the site.
* The reference list in the style of the citations (``bibtex_default_style: authoryear``):
  labels "Frank and Wolfe 1956", "Alcalde et al. 2025", the list sorted by author, then year.
* ``_static/wide-math.js`` on every page: an inline formula wider than its column (MathJax 3
  does not break inline math; on a phone) becomes a box of the column's width that scrolls.
* The preset banner: a page executed with a preset other than ``paper``, or with overridden
  parameters (``tools/run_notebook.py`` records both in the notebook's metadata), opens with a
  banner that names them and gives the command that builds the paper's version.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from docutils import nodes
from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as _UnsrtStyle
from pybtex.style.labels import BaseLabelStyle

_INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
{icon}<meta http-equiv="Refresh" content="0; url={target}">
</head>
<body><p><a href="{target}">{title}</a></p></body>
</html>
"""


def _write_index(app, exception):
    if exception is not None or app.builder.format != "html" or app.config.master_doc == "index":
        return
    root = str(app.config.master_doc)
    target = f"{root}/index.html" if app.builder.name == "dirhtml" else f"{root}.html"
    icon = ""
    if app.config.html_favicon:
        icon = f'<link rel="icon" href="_static/{Path(app.config.html_favicon).name}">\n'
    title = html.escape(str(app.config.html_title or app.config.project))
    Path(app.outdir, "index.html").write_text(_INDEX.format(title=title, icon=icon, target=target),
                                               encoding="utf8")


# ------------------------------------------------------------------ author-year reference list
def _last_names(person) -> str:
    return Text.from_latex(" ".join(person.prelast_names + person.last_names)).render_as("text")


class AuthorYearLabels(BaseLabelStyle):
    """"Bach 2024", "Frank and Wolfe 1956", "Alcalde et al. 2025" (a letter after the year
    when two entries would get the same label)."""

    def format_labels(self, sorted_entries):
        labels = []
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            names = [_last_names(p) for p in people]
            who = (names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2
                   else f"{names[0]} et al." if names else entry.key)
            labels.append(f"{who} {entry.fields.get('year', 'n.d.')}")
        for i, label in enumerate(labels):
            same = [j for j, other in enumerate(labels) if other == label]
            if len(same) > 1:
                labels[i] = label + "abcdefghijklmnopqrstuvwxyz"[same.index(i)]
        yield from labels


class AuthorYearStyle(_UnsrtStyle):
    """pybtex's ``unsrt`` entry formatting, sorted by author, year and title, author-year labels."""

    default_sorting_style = "author_year_title"
    default_label_style = AuthorYearLabels


register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels)
register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)


# ------------------------------------------------------------------------- the preset banner
def run_of(path: Path) -> dict | None:
    """The preset and overrides an executed notebook was run with (None: not a notebook)."""
    if path.suffix != ".ipynb":
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf8")).get("metadata", {})
    except (OSError, ValueError):
        return None
    return meta.get("attention_fw_run")


def _banner_html(run: dict, docname: str) -> str:
    preset = html.escape(str(run.get("preset", "")))
    over = run.get("overrides") or {}
    stem = html.escape(Path(docname).name)
    what = f"the <strong>{preset}</strong> preset" if preset != "paper" else "the paper preset"
    if over:
        what += " with " + ", ".join(f"<code>{html.escape(k)} = {html.escape(json.dumps(v))}</code>"
                                     for k, v in over.items())
    return (f'<div class="afw-preset-banner" role="note" data-afw-preset="{preset}">'
            f"<p><strong>Not the paper's parameters.</strong> This page was computed with {what}: "
            "its numbers and figures come from a smaller (or changed) run and are not those the "
            "book quotes for the paper. To build the paper's version, run <code>make book</code> "
            f"(this page alone: <code>make notebook NB={stem}</code>).</p></div>")


def add_preset_banner(app, doctree):
    """Put the banner at the top of a page executed with another preset than ``paper``."""
    docname = app.env.docname
    run = run_of(Path(app.env.doc2path(docname)))
    if not run or (run.get("preset") == "paper" and not run.get("overrides")):
        return
    sections = list(doctree.findall(nodes.section))
    where = sections[0] if sections else doctree
    titles = [i for i, child in enumerate(where.children) if isinstance(child, nodes.title)]
    where.insert(titles[0] + 1 if titles else 0,
                 nodes.raw("", _banner_html(run, docname), format="html"))


def setup(app):
    app.set_html_assets_policy("always")
    app.add_js_file("wide-math.js", loading_method="defer")   # _static/: inline math wider than its column
    app.connect("build-finished", _write_index, priority=400)   # before sphinx-external-toc's (500)
    app.connect("doctree-read", add_preset_banner)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
