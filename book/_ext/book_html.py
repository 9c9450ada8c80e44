"""A small Sphinx extension for the book's HTML (listed in _config.yml, sphinx.local_extensions).

* MathJax on every page: the sidebar's chapter titles carry math ("Finite $\\beta$") on every
  page, including the index and search pages, where Sphinx would otherwise not load MathJax and
  show the raw TeX.
* The redirecting ``index.html`` at the root of the site (a project's GitHub Pages address,
  ``https://<owner>.github.io/<repository>/``) is a complete page that names the book's icon;
  the one-line redirect sphinx-external-toc writes otherwise (only when the file is missing)
  names none, so browsers ask for ``/favicon.ico`` at the server's root, outside the site.
"""
from __future__ import annotations

import html
from pathlib import Path

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


def setup(app):
    app.set_html_assets_policy("always")
    app.connect("build-finished", _write_index, priority=400)   # before sphinx-external-toc's (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
