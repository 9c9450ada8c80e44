#!/usr/bin/env python
"""The page of a rerun: one chapter executed with other parameters, rendered as the book renders it.

    python tools/rerun_page.py _build/custom/03-negative-definite.ipynb [--book-times _build/exec-times]
                               [-o _build/custom/03-negative-definite]

``make notebook`` calls :func:`build` after executing the chapter (``tools/run_notebook.py --page``).
The executed notebook gets a first cell, "This rerun and the book", with

* the parameters that differ from the book's (from the table "Parameters of this run" the chapter
  shows, whose rows the notebook carries as output metadata), and the command of the rerun;
* a table of every number the chapter quotes (its glued values, ``{glue:text}`` in the prose):
  the book's value beside the rerun's, differences marked. The book's values are those of the
  book's own execution in the paper preset (``quoted`` in ``_build/exec-times/<chapter>.json``,
  recorded by every execution); "not built" when the book has not been built here.

Then a Jupyter Book of that one page is built with the book's configuration (theme, extensions,
CSS, MathJax served locally) into ``<out>/html/``; the page is ``<out>/html/book/<chapter>.html``.
Links to the book's other chapters point into the built book (``_build/html``, through its Sphinx
inventory ``objects.inv``, read from disk: nothing is fetched); before ``make book`` has run here they
are plain text. Citations resolve on the page itself, which ends with the references it cites.
"""
from __future__ import annotations

import argparse
import ast
import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quoted_numbers(nb) -> dict[str, str]:
    """The values a notebook glued for its prose (name -> text), figures left out."""
    out = {}
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []) or []:
            md = (o.get("metadata") or {}).get("scrapbook")
            if not md or md.get("name", "").startswith("fig-"):
                continue
            text = (o.get("data") or {}).get(md.get("mime_prefix", "") + "text/plain")
            if text is None:
                continue
            try:
                value = ast.literal_eval(text)
                text = value if isinstance(value, str) else text
            except (ValueError, SyntaxError):
                pass
            out[md["name"]] = str(text)
    return out


def parameter_rows(nb) -> dict | None:
    """The rows of the table "Parameters of this run" (``afw_book.notebook.Page.parameters``)."""
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []) or []:
            md = ((o.get("metadata") or {}).get("text/html") or {}).get("afw_parameters")
            if md:
                return md
    return None


def book_values(chapter: str, times_dir: Path) -> dict[str, str] | None:
    """The numbers the book's own execution of ``chapter`` quoted (paper preset, no overrides)."""
    rec = times_dir / f"{chapter}.json"
    try:
        data = json.loads(rec.read_text())
    except (OSError, ValueError):
        return None
    if data.get("preset") != "paper" or data.get("overrides") or "quoted" not in data:
        return None
    return data["quoted"]


def _text(value) -> str:
    """A parameter value as the chapter's table writes it (10,000; lists in brackets)."""
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:,}"
    return str(value)


STYLE = ("<style>.afw-rerun table{border-collapse:collapse;margin:0.6em 0 1.2em;font-size:0.9em}"
         ".afw-rerun caption{caption-side:top;text-align:left;font-weight:600;padding-bottom:0.3em}"
         ".afw-rerun td,.afw-rerun th{padding:0.15em 0.7em;border-bottom:1px solid #8884;text-align:left}"
         ".afw-rerun tr.afw-differs td{background:#f5a62322}.afw-rerun td:first-child{white-space:nowrap}"
         ".afw-rerun{border-left:4px solid #f5a623;padding:0.2em 0 0.2em 1em;margin:1em 0}</style>")


def summary_html(chapter: str, params: dict | None, command: str, run: dict[str, str],
                 book: dict[str, str] | None) -> str:
    """The first cell of the rerun's page (HTML)."""
    e = html.escape
    parts = [STYLE, f'<div class="afw-rerun"><p><strong>A rerun of this chapter, not the book.</strong> '
             f'Command: <code>{e(command)}</code>.</p>']
    rows = [r for r in (params or {}).get("rows", []) if r["differs"]]
    preset = (params or {}).get("preset", "?")
    if rows:
        body = "".join(f"<tr><td><code>{e(r['name'])}</code></td><td><strong>{e(_text(r['value']))}</strong></td>"
                       f"<td>{e(_text(r['book']))}</td><td>{e(r['meaning'])}</td></tr>" for r in rows)
        parts.append(f'<table class="afw-rerun-parameters"><caption>Parameters that differ from the book\'s '
                     f'(preset <code>{e(preset)}</code>)</caption><thead><tr><th>parameter</th><th>this run</th>'
                     f'<th>book</th><th>meaning</th></tr></thead><tbody>{body}</tbody></table>')
    else:
        parts.append("<p>Every parameter has the book's value.</p>")
    names = sorted(set(run) | set(book or {}))
    changed = sum(1 for k in names if book is not None and run.get(k) != book.get(k))
    if book is None:
        cap = "Every number the chapter quotes: the book's values are <em>not built</em> here (run <code>make book</code>)"
    else:
        cap = f"Every number the chapter quotes: {changed} of {len(names)} differ from the book's (marked)"
    body = []
    for k in names:
        mine = run.get(k, "(not quoted)")
        theirs = "not built" if book is None else book.get(k, "(not quoted)")
        differs = book is not None and mine != theirs
        mark = ' class="afw-differs"' if differs else ""
        mine_html = f"<strong>{e(mine)}</strong>" if differs else e(mine)
        body.append(f"<tr{mark}><td><code>{e(k)}</code></td><td>{e(theirs)}</td><td>{mine_html}</td></tr>")
    parts.append(f'<table class="afw-rerun-numbers"><caption>{cap}</caption><thead><tr><th>quoted as</th>'
                 f'<th>book</th><th>this run</th></tr></thead><tbody>{"".join(body)}</tbody></table></div>')
    return "".join(parts)


_CONFIG = """\
# A one-page Jupyter Book: a rerun of {chapter}, with the book's configuration (tools/rerun_page.py).
title: "Rerun of {chapter}"
only_build_toc_files: true
exclude_patterns: ["**.ipynb_checkpoints", "book/_ext", "book/_static"]
"""


def book_links(config: dict, book_html: Path | None, html_dir: Path) -> bool:
    """Let the one-page book's references to other chapters resolve into the built book: Sphinx's
    intersphinx reads the book's inventory from disk, and the links are relative, from ``html_dir``
    (where the page's HTML will be) to ``book_html``. False (and ``config`` unchanged) when the book
    has not been built."""
    inventory = None if book_html is None else book_html / "objects.inv"
    if inventory is None or not inventory.is_file():
        return False
    sphinx = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx["extensions"] = list(sphinx.get("extensions", [])) + ["sphinx.ext.intersphinx"]
    sphinx["intersphinx_mapping"] = {"book": [os.path.relpath(book_html, html_dir) + "/", str(inventory)]}
    sphinx["intersphinx_disabled_reftypes"] = []       # plain {ref} and {doc} roles look there too
    return True


_REFERENCES = """## References

```{bibliography}
:filter: docname in docnames
```
"""


def build(executed: Path, out: Path, book_times: Path, command: str, figures: Path | None = None,
          book_html: Path | None = ROOT / "_build" / "html") -> Path:
    """Write the rerun's page under ``out`` (``out/html/book/<chapter>.html``); returns its path.

    ``figures``: the figure folder the run wrote into (default: ``$ATTENTION_FW_FIGURES``, else
    ``figures/``); the page's figure files are copied from there into ``out/html/figures/``.
    ``book_html``: the built book, which the page's links to other chapters point into (plain text
    when it has not been built).

    Raises ``RuntimeError`` when the page build fails (the message ends with the build's output).
    """
    import nbformat
    import yaml

    chapter = executed.stem
    nb = nbformat.read(executed, as_version=4)
    run = quoted_numbers(nb)
    params = parameter_rows(nb)
    summary = summary_html(chapter, params, command, run, book_values(chapter, book_times))
    first = nbformat.v4.new_code_cell("# This rerun and the book", metadata={"tags": ["remove-input"]})
    first.outputs = [nbformat.v4.new_output("display_data", data={"text/html": summary, "text/plain": "rerun"})]
    # right under the chapter's title: split its first Markdown cell after the "# Title" line
    k = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), None)
    if k is None:
        nb.cells.insert(0, first)
    else:
        lines = nb.cells[k].source.split("\n")
        t = next((i for i, line in enumerate(lines) if line.startswith("# ")), len(lines) - 1)
        head, rest = "\n".join(lines[:t + 1]), "\n".join(lines[t + 1:])
        nb.cells[k].source = head
        nb.cells[k + 1:k + 1] = [first] + ([nbformat.v4.new_markdown_cell(rest)] if rest.strip() else [])
    if any("{cite" in c.source for c in nb.cells if c.cell_type == "markdown"):
        nb.cells.append(nbformat.v4.new_markdown_cell(_REFERENCES))

    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    # the page is book/<chapter>, as in the book (its figure links are ../figures/...), beside the
    # book's extensions, static files, bibliography and icon
    (src / "book").mkdir()
    for item in ("_ext", "_static", "references.bib", "favicon.svg"):
        (src / "book" / item).symlink_to(ROOT / "book" / item)
    nbformat.write(nb, src / "book" / f"{chapter}.ipynb")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config.update(yaml.safe_load(_CONFIG.format(chapter=chapter)))
    book_links(config, None if book_html is None else book_html.resolve(), out / "html")
    (src / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (src / "_toc.yml").write_text(f"format: jb-book\nroot: book/{chapter}\n")
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", str(src), "--path-output", str(out / "jb"), "--all"],
                          capture_output=True, text=True,
                          env=dict(os.environ, **({"ATTENTION_FW_FIGURES": str(figures)} if figures else {})))
    built = out / "jb" / "_build" / "html"
    if proc.returncode != 0 or not (built / "book" / f"{chapter}.html").is_file():
        raise RuntimeError(f"the page of {chapter} could not be built:\n{(proc.stdout + proc.stderr)[-4000:]}")
    html_dir = out / "html"
    if html_dir.exists():
        shutil.rmtree(html_dir)
    shutil.move(str(built), str(html_dir))
    shutil.rmtree(out / "jb", ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)
    return html_dir / "book" / f"{chapter}.html"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("executed", type=Path, help="the executed notebook of the rerun")
    ap.add_argument("-o", "--out", type=Path, help="output folder (default: next to the notebook, <chapter>/)")
    ap.add_argument("--book-times", type=Path, default=ROOT / "_build" / "exec-times",
                    help="the execution records of the book (for its quoted numbers)")
    ap.add_argument("--command", default="", help="the command of the rerun, shown on the page")
    ap.add_argument("--figures", type=Path, default=None, help="the figure folder of the run")
    args = ap.parse_args(argv)
    out = args.out or args.executed.with_suffix("")
    try:
        page = build(args.executed.resolve(), out.resolve(), args.book_times.resolve(), args.command, args.figures)
    except RuntimeError as err:
        print(f"rerun_page: {err}", file=sys.stderr)
        return 1
    print(f"rerun_page: {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
