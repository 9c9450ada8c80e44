"""Sphinx side of the book's figures and statement badges (the other side: afw_book.notebook).

* **Figures glued by** ``afw_book.notebook.Page``: in a numbered figure, the glued
  ``<div data-afw-figure=...>`` makes the figure full-width when it needs it (class
  ``afw-wide``), and the caption gets one more line: the figure's file name, download links
  (PDF, SVG, PNG, data) and a link to its entry in the gallery.
* ``{figure-gallery}``: the gallery page (``book/gallery.md``), generated at build time from
  the figures the executed notebooks glued and the metadata in their data files: thumbnail
  (a link to the SVG), one-line caption, chapter and figure number, statement, downloads and
  the command that regenerates the figure. A new figure appears there without editing.
* **Files**: when the build finishes, every figure file a page links to is copied into
  ``_build/html/figures/`` (all links are relative: the book reads offline, from ``file://``
  and under any sub-path); a missing file fails the build.
* ``{unconfirmed}`what is uncertain```: the badge of a statement whose number or printed form
  could not be confirmed; the text opens under it on hover, keyboard focus or a tap
  (explained once in the introduction).
"""
from __future__ import annotations

import html
import json
import posixpath
import re
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

from afw_book import notebook as nbh
from afw_book import paths

GALLERY = "book/gallery"
FORMATS = (("pdf", "PDF"), ("svg", "SVG"), ("png", "PNG"))
_ATTR = re.compile(r'data-afw-figure="([^"]+)" data-afw-path="([^"]+)"')
_LINK = re.compile(r'(?:href|src)="((?:\.\./)*)' + nbh.HTML_FIGURES + r'/([^"#?]+)"')


# ------------------------------------------------------------------------------ the badge
class unconfirmed(nodes.Inline, nodes.TextElement):
    """The "unconfirmed" badge; ``tip`` says what is uncertain."""


def unconfirmed_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    tip = " ".join(text.split())
    if not tip:
        msg = inliner.reporter.error("{unconfirmed} needs the text of its tooltip", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    return [unconfirmed(rawtext, "unconfirmed", tip=tip)], []


def _visit_unconfirmed_html(self, node):
    # A label with a (visually hidden) checkbox: a tap or click ticks it and the explanation
    # opens; keyboard focus and hover open it too (book/_static/custom.css). All phrasing
    # content, so the badge may sit inside a paragraph.
    tip = html.escape(node["tip"], quote=True)
    self.body.append(f'<span class="afw-unconfirmed" data-tip="{tip}"><label>'
                     f'<input type="checkbox" aria-label="unconfirmed: show what is uncertain">'
                     f'unconfirmed</label><span class="afw-tip" role="note">{tip}</span></span>')
    raise nodes.SkipNode


def _visit_unconfirmed_latex(self, node):
    self.body.append(r"\textit{(unconfirmed: " + self.encode(node["tip"]) + ")}")
    raise nodes.SkipNode


def _visit_unconfirmed_text(self, node):
    self.add_text(f"(unconfirmed: {node['tip']})")
    raise nodes.SkipNode


# ------------------------------------------------------------------------------ figures
def _figure_prefix(docname: str) -> str:
    return "../" * docname.count("/") + nbh.HTML_FIGURES + "/"


def _json_rel(rel: str) -> str:
    return posixpath.join(posixpath.dirname(rel), "data", posixpath.basename(rel)) + ".json"


def _glued_records(path: Path) -> list[dict]:
    """The figure records glued in an executed notebook, in order (names unique)."""
    try:
        nb = json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError):
        return []
    out, seen = [], set()
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            for key, value in output.get("data", {}).items():
                if not key.endswith("text/html"):
                    continue
                text = "".join(value) if isinstance(value, list) else str(value)
                for name, rel in _ATTR.findall(text):
                    name, rel = html.unescape(name), html.unescape(rel)
                    if name not in seen:
                        seen.add(name)
                        out.append({"name": name, "path": rel})
    return out


def _links(docname: str, name: str, rel: str, gallery_uri: str) -> nodes.inline:
    prefix = _figure_prefix(docname)
    line = nodes.inline(classes=["afw-files"])
    line += nodes.Text("File ")
    line += nodes.literal(text=name)
    line += nodes.Text(": ")
    for ext, label in FORMATS:
        line += nodes.reference("", label, refuri=f"{prefix}{rel}.{ext}", classes=["afw-download"])
        line += nodes.Text(" · ")
    line += nodes.reference("", "data (JSON)", refuri=prefix + _json_rel(rel), classes=["afw-download"])
    line += nodes.Text(" · ")
    line += nodes.reference("", "gallery entry", refuri=f"{gallery_uri}#gallery-{name}",
                            classes=["afw-gallery-link"])
    return line


_OPEN = re.compile(r'<div class="afw-figure[^"]*"[^>]*>')
_IMG = re.compile(r'<img src="([^"]+)\.png" alt="([^"]*)"')
PANEL = re.compile(r"\.panel-(\d+)\.png$")
PNG_DPI = 200          # afw_book.figures.PNG_DPI: pixels per inch of the saved PNGs
MIN_PHONE_TEXT_PX = 8.0


def legible_width(meta: dict) -> float:
    """The smallest width (CSS px) at which a figure's text and panels are legible
    (:func:`afw_book.notebook.display_width` without the column)."""
    w_in = float(meta["size_in"][0])
    need = 0.0
    if meta.get("font_pt"):
        need = max(need, nbh.MIN_TEXT_PX * 72.0 * w_in / float(meta["font_pt"][0]))
    if meta.get("panel_widths_in"):
        need = max(need, nbh.MIN_PANEL_PX * w_in / min(meta["panel_widths_in"]))
    return need


def panel_boxes(meta: dict, png_size: tuple[int, int]) -> list[tuple[int, int, int, int]]:
    """The pieces of a figure for a narrow screen, in pixels of its PNG: the boxes (left, top,
    right, bottom) that the figure layer recorded from matplotlib's bounding boxes when it saved
    the figure (``pieces_in`` of its data file: its columns of panels, or its panels row by
    row when they form a grid, and the legends and titles that span them;
    :func:`afw_book.figures.pieces`). [] for a figure of one column."""
    boxes = meta.get("pieces_in") or []
    w, h = png_size
    scale = w / float(meta["size_in"][0])
    out = []
    for left, top, right, bottom in boxes:
        box = (max(0, round(left * scale)), max(0, round(top * scale)),
               min(w, round(right * scale)), min(h, round(bottom * scale)))
        if box[2] - box[0] >= 2 and box[3] - box[1] >= 2:
            out.append(box)
    return out if len(out) >= 2 else []


def _write_panels(png: Path, boxes, out_stem: Path) -> list[int]:
    """Crop ``png`` to each of ``boxes`` into ``<out_stem>.panel-<k>.png``; returns their widths (px)."""
    from PIL import Image

    out_stem.parent.mkdir(parents=True, exist_ok=True)
    widths = []
    with Image.open(png) as im:
        for k, box in enumerate(boxes, start=1):
            target = out_stem.with_name(f"{out_stem.name}.panel-{k}.png")
            im.crop(box).save(target, format="PNG")
            widths.append(box[2] - box[0])
    return widths


def _pan(raw: nodes.raw, rel: str, outdir: Path) -> None:
    """Let the glued figure stay legible in a narrow window. Its link goes into a box that
    scrolls sideways (``div.afw-figure-pan``), at least as wide as the width at which its text
    and panels are legible (``--afw-min-width``); a figure of several panels side by side also
    gets them one under the other (``div.afw-panels``: the PNG cropped to the pieces the figure
    layer recorded from matplotlib's boxes, :func:`panel_boxes`, each shown at least as wide as
    its text needs to be 8 px high), which a phone shows instead."""
    text = raw.astext()
    m = _OPEN.search(text)
    if not m or "afw-figure-pan" in text:
        return
    meta = _meta(rel)
    head = m.group(0)
    var = f"--afw-min-width: {int(legible_width(meta) + 0.999)}px"
    head = (head.replace(' style="', f' style="{var}; ', 1) if ' style="' in head
            else head[:-1] + f' style="{var}">')
    end = text.rindex("</div>")
    body = text[m.end():end]
    stacked = ""
    img = _IMG.search(body)
    png = paths.figures_dir() / f"{rel}.png"
    boxes = []
    if img and png.is_file():
        from PIL import Image

        with Image.open(png) as im:
            boxes = panel_boxes(meta, im.size)
    if boxes:
        widths = _write_panels(png, boxes, Path(outdir) / nbh.HTML_FIGURES / rel)
        base, alt = img.group(1), img.group(2)
        font = float(meta["font_pt"][0]) if meta.get("font_pt") else 0.0
        parts = []
        for k, px in enumerate(widths, start=1):
            w_in = px / PNG_DPI
            need = MIN_PHONE_TEXT_PX * 72.0 * w_in / font if font else 0.0
            shown = int(max(need, w_in * nbh.CSS_PX_PER_IN) + 0.999)
            # a part wider than the phone's column pans in its own box, at its legible width
            parts.append(f'<div class="afw-figure-pan"><a class="afw-figure-link" href="{base}.svg" '
                         f'title="Open the full-size SVG" style="min-width: {int(need + 1)}px; '
                         f'max-width: {max(shown, int(need + 1))}px; margin: 0 auto">'
                         f'<img src="{base}.panel-{k}.png" alt="{alt} (part {k} of {len(widths)})" '
                         f'data-afw-width-in="{w_in:.4f}"></a></div>')
        stacked = f'<div class="afw-panels">{"".join(parts)}</div>'
        head = head.replace('class="afw-figure', 'class="afw-figure afw-stacked', 1)
    new = text[:m.start()] + head + f'<div class="afw-figure-pan">{body}</div>{stacked}' + text[end:]
    raw.children = [nodes.Text(new)]
    raw.rawsource = new


_PAPER_FIGURE = re.compile(r"figure(\d+)(?:\b|-)")


def paper_figure(name: str) -> str | None:
    """The number k of the paper's Figure k that a figure file reproduces (``figure2``,
    ``figure1-corrected``, ``figure4-delta002``), or None."""
    m = _PAPER_FIGURE.match(name)
    return m.group(1) if m else None


def collect_figures(app, doctree):
    """Record the glued figures of this page; decorate the numbered ones."""
    env = app.env
    docname = env.docname
    records = _glued_records(Path(env.doc2path(docname)))
    shown = {}
    gallery_uri = app.builder.get_relative_uri(docname, GALLERY)
    for raw in list(doctree.findall(nodes.raw)):
        m = _ATTR.search(raw.astext())
        if not m:
            continue
        name, rel = html.unescape(m.group(1)), html.unescape(m.group(2))
        figure = raw.parent
        while figure is not None and not isinstance(figure, nodes.figure):
            figure = figure.parent
        if figure is None:
            continue
        figure["classes"] += ["afw-figure-block"] + (["afw-wide"] if "afw-wide" in raw.astext() else [])
        _pan(raw, rel, app.outdir)
        captions = [c for c in figure.children if isinstance(c, nodes.caption)]
        paper = paper_figure(name)
        said = captions[0].astext() if captions else ""
        # a caption that names the paper's figure itself ("Figure 1 corrected: ...", "Figure 4
        # of the paper ...") gets no "(paper's Figure k)" before it
        if captions and paper and not re.search(rf"\b(paper's )?Figure {paper}\b", said):
            captions[0].insert(0, nodes.inline("", f"(paper's Figure {paper}) ", classes=["afw-paper-figure"]))
        if captions:
            captions[0] += nodes.Text(" ")
            captions[0] += _links(docname, name, rel, gallery_uri)
        shown.setdefault(name, figure["ids"][0] if figure["ids"] else None)
    for rec in records:
        rec["label"] = shown.get(rec["name"])
        rec["docname"] = docname
    if not hasattr(env, "afw_figures"):
        env.afw_figures = {}
    env.afw_figures[docname] = records


def purge_figures(app, env, docname):
    getattr(env, "afw_figures", {}).pop(docname, None)


def merge_figures(app, env, docnames, other):
    if not hasattr(env, "afw_figures"):
        env.afw_figures = {}
    for d in docnames:
        if d in getattr(other, "afw_figures", {}):
            env.afw_figures[d] = other.afw_figures[d]


# ------------------------------------------------------------------------------ the gallery
class gallery_placeholder(nodes.General, nodes.Element):
    pass


class GalleryDirective(SphinxDirective):
    has_content = False

    def run(self):
        return [gallery_placeholder()]


def _toc_order(env, root):
    seen, order = set(), []

    def walk(doc):
        for child in env.toctree_includes.get(doc, []):
            if child not in seen:
                seen.add(child)
                order.append(child)
                walk(child)
    walk(root)
    return order


def _meta(rel: str) -> dict:
    path = paths.figures_dir() / _json_rel(rel)
    try:
        return json.loads(path.read_text())["meta"]
    except (OSError, ValueError, KeyError) as exc:
        raise ExtensionError(f"figure gallery: no metadata for {rel!r} ({path}): {exc}") from exc


def _title_html(env, docname) -> str:
    """A page title as HTML, its math left to MathJax (as Sphinx writes inline math)."""
    if docname not in env.titles:
        return html.escape(docname)
    out = []
    for node in env.titles[docname].findall(lambda n: isinstance(n, (nodes.Text, nodes.math))):
        if isinstance(node, nodes.math):
            out.append(nbh.math_html(node.astext()))
        elif not isinstance(node.parent, nodes.math):
            out.append(html.escape(node.astext()))
    return "".join(out)


def _figure_number(env, docname, label):
    num = env.toc_fignumbers.get(docname, {}).get("figure", {}).get(label) if label else None
    return "Figure " + ".".join(map(str, num)) if num else None


GALLERY_CODE_COLUMNS = 58
"""Characters of the code font that the gallery's command box holds beside a thumbnail at
1920 px (60; 80 at 1280 px): a longer command is broken over lines (see :func:`command_lines`)."""


def command_lines(command: str, width: int = GALLERY_CODE_COLUMNS) -> str:
    """A shell command broken over lines of at most ``width`` characters (where its words allow),
    before an option (``--name`` and its values stay together) where it can, each line but the
    last ending in `` \\``, the next indented by four spaces: what a shell reads as the same
    command, a break inside double quotes included (a backslash-newline is removed there).
    Never breaks inside single quotes (a backslash is literal there, and the indent would
    become part of the value)."""
    words, word, single = [], "", False
    for ch in command:          # a single-quoted value (even inside double quotes) stays one word
        if ch == " " and not single:
            if word:
                words.append(word)
            word = ""
            continue
        single ^= ch == "'"
        word += ch
    if word:
        words.append(word)
    groups: list[list[str]] = []
    for w in words:
        if groups and not w.lstrip('"').startswith("-"):
            groups[-1].append(w)
        else:
            groups.append([w])
    pieces = [p for g in groups for p in ([" ".join(g)] if len(" ".join(g)) + 6 <= width else g)]
    lines, line = [], ""
    for w in pieces:
        if line and len(line) + 1 + len(w) + 2 > width:
            lines.append(line + " \\")
            line = "    " + w
        else:
            line = f"{line} {w}" if line else w
    return "\n".join([*lines, line])


def _entry_html(app, entries) -> str:
    env, builder = app.env, app.builder
    first = entries[0]
    name, rel = first["name"], first["path"]
    meta = _meta(rel)
    prefix = _figure_prefix(GALLERY)
    e = html.escape
    shown = []
    for rec in entries:
        uri = builder.get_relative_uri(GALLERY, rec["docname"])
        number = _figure_number(env, rec["docname"], rec["label"])
        target = f'{uri}#{rec["label"]}' if rec["label"] else uri
        paper = paper_figure(name)
        if number and paper:
            number += f" (paper's Figure {paper})"
        shown.append(f'<a href="{e(target)}">{e(number + ", " if number else "")}'
                     f'{_title_html(env, rec["docname"])}</a>')
    downloads = " · ".join(f'<a href="{prefix}{e(rel)}.{ext}" download>{label}</a>' for ext, label in FORMATS)
    downloads += f' · <a href="{prefix}{e(_json_rel(rel))}" download>data (JSON)</a>'
    return f"""
<div class="afw-gallery-entry" id="gallery-{e(name)}">
 <a class="afw-thumb" href="{prefix}{e(rel)}.svg" title="Open the full-size SVG"><img src="{prefix}{e(rel)}.png" alt="{e(nbh.caption_text(meta.get('caption', name)))}" loading="lazy"></a>
 <div class="afw-entry-text">
  <p class="afw-entry-caption">{nbh.caption_html(meta.get('caption', ''))}</p>
  <p><span class="afw-key">Statement</span> {e(meta.get('statement', ''))}<br>
     <span class="afw-key">In the book</span> {' · '.join(shown)}<br>
     <span class="afw-key">File</span> <code>{e(name)}</code>: {downloads}</p>
  <p class="afw-key">Regenerate (change the parameters to make your own)</p>
  <div class="highlight"><pre>{e(command_lines(meta.get('command', '')))}</pre></div>
 </div>
</div>"""


def fill_gallery(app, doctree, docname):
    placeholders = list(doctree.findall(gallery_placeholder))
    if not placeholders:
        return
    env = app.env
    figures = getattr(env, "afw_figures", {})
    by_name: dict[str, list] = {}
    chapters: list[tuple[str, list[str]]] = []
    for doc in _toc_order(env, app.config.root_doc):
        names = []
        for rec in figures.get(doc, []):
            if rec["name"] not in by_name:
                names.append(rec["name"])
            by_name.setdefault(rec["name"], []).append(rec)
        if names:
            chapters.append((doc, names))
    parts = []
    for doc, names in chapters:
        num = env.toc_secnumbers.get(doc, {}).get("")
        number = ".".join(map(str, num)) + ". " if num else ""
        parts.append(f'<h2 class="afw-gallery-chapter">{number}{_title_html(env, doc)}</h2>')
        parts += [_entry_html(app, by_name[n]) for n in names]
    body = "\n".join(parts) or "<p>No figure has been generated yet.</p>"
    for node in placeholders:
        node.replace_self(nodes.raw("", f'<div class="afw-gallery">{body}</div>', format="html"))


# ------------------------------------------------------------------------------ the files
def copy_figure_files(app, exception):
    """Copy every figure file a page links to into ``<outdir>/figures/``."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    source_root = paths.figures_dir()
    missing = []
    for page in out.rglob("*.html"):
        for up, rel in set(_LINK.findall(page.read_text(encoding="utf8", errors="replace"))):
            target = (page.parent / up / nbh.HTML_FIGURES / rel).resolve()
            if not target.is_relative_to((out / nbh.HTML_FIGURES).resolve()):
                continue
            src = source_root / rel
            if PANEL.search(rel) and target.is_file():
                continue                      # a column of a figure, cut when its page was read
            if not src.is_file():
                missing.append(f"{page.relative_to(out)} -> {rel}")
                continue
            if not target.exists() or target.stat().st_size != src.stat().st_size \
                    or target.read_bytes() != src.read_bytes():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, target)
    if missing:
        raise ExtensionError("figure files linked from the pages but not found in "
                             f"{source_root}: " + "; ".join(sorted(missing)[:20]))


def gallery_outdated(app, env, added, changed, removed):
    """The gallery shows every page's figures: rewrite it whenever a page changed."""
    return [GALLERY] if (added or changed or removed) and GALLERY in env.found_docs else []


def _no_borrowed_docstring(app, what, name, obj, options, lines):
    """A constant (``SMALL_WEIGHT = 2.0 ** -26``) has no docstring of its own: autodoc would show
    its type's ("Convert a string or number to a floating point number"). Its text is the one
    the reference page gives it (``.. autodata::`` with content)."""
    doc = getattr(type(obj), "__doc__", None)
    if what in ("data", "attribute") and not callable(obj) and lines and isinstance(doc, str):
        borrowed = doc.strip().splitlines()
        if borrowed and [line.strip() for line in lines if line.strip()][:1] == [borrowed[0].strip()]:
            lines.clear()


def setup(app):
    # MathJax on every page, not only on pages with math of their own: the navigation and the
    # gallery's chapter titles hold math too (a title such as "Finite $\beta$").
    app.set_html_assets_policy("always")
    app.add_node(unconfirmed, html=(_visit_unconfirmed_html, None),
                 latex=(_visit_unconfirmed_latex, None), text=(_visit_unconfirmed_text, None))
    app.add_role("unconfirmed", unconfirmed_role)
    app.add_node(gallery_placeholder)
    app.add_directive("figure-gallery", GalleryDirective)
    app.connect("doctree-read", collect_figures)
    app.connect("env-purge-doc", purge_figures)
    app.connect("env-merge-info", merge_figures)
    app.connect("env-get-outdated", gallery_outdated)
    app.connect("doctree-resolved", fill_gallery)
    app.connect("build-finished", copy_figure_files)
    app.setup_extension("sphinx.ext.autodoc")      # its event, whatever the order of the extensions
    app.connect("autodoc-process-docstring", _no_borrowed_docstring)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": False, "env_version": 1}
