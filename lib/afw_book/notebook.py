"""How a chapter of the book shows a figure, quotes a number and says where its files are.

One object per chapter, made right after the parameters are resolved::

    from afw_book.notebook import Page
    page = Page("03-negative-definite", pc)   # pc = presets.resolve(...); several allowed

    fig = cvp.fig_thm31_counterexample(cex)      # a library plot function: the numbers travel with the figure
    page.figure(fig, "fw-thm31-counterexample", statement="Theorem 3.1 (erratum E2)",
                caption="The exact counterexample to the printed bound of Theorem 3.1")
    page.paper_figure("figure2", kappas=(5, 7, 9, 10), rng=42)    # one of the paper's figures
    page.glue(first=575, ratio=(0.1234, ".3f"))                   # numbers for the prose

and in the Markdown cells::

    ```{glue:figure} fig-fw-thm31-counterexample
    :name: fig-fw-thm31-counterexample

    The caption, as long as it needs to be.
    ```

    ... the first violation is at $t=${glue:text}`first` ...

What this gives, and what the book's Sphinx extension (``book/_ext/afw_book.py``) adds:

* **One output rule** (:func:`afw_book.figures.output_dir`): a run in the ``paper`` preset
  without overrides writes ``figures/``; a run in another preset without overrides that preset's
  own ``figures/presets/<preset>/``; any run with overrides ``figures/custom/``, where the file
  names carry the preset and the overrides (:attr:`Page.tag`), so that no run replaces another's
  files (``make notebook`` never writes ``custom/custom``). Every format is written in every
  preset, so the pages can offer them.
* **Parameters**: the chapter declares them once (``PARAMETERS`` in its cell tagged
  ``parameters``, see :func:`afw_book.presets.resolve_declared`), and :meth:`Page.parameters`
  shows the table "Parameters of this run" at the top of the page.
* **Files and metadata**: :meth:`Page.figure` saves through the atomic
  :func:`afw_book.figures.save` (PDF for papers, PNG and SVG for the web, the numbers as
  ``data/<name>.json``). The JSON's ``meta`` records the layout (size in inches, smallest and
  largest font size, number and widths of panels), the chapter, the paper statement, the
  one-line caption and the exact command that regenerates the file (:meth:`Page.command`).
* **The figure on the page** is glued under ``fig-<name>``: the PNG, sized so that no text is
  smaller than :data:`MIN_TEXT_PX` CSS pixels and no panel narrower than :data:`MIN_PANEL_PX`
  (wide figures take the theme's full width), linked to the full-size SVG. The extension
  appends to the caption the figure's file name, download links and a link to its entry in the
  figure gallery (``book/gallery.md``), which it generates from the metadata of every figure
  the chapters glue: a new figure appears there without editing anything.
* **Numbers** (:meth:`Page.glue`, :func:`fmt`) read as prose: ``10,000``, ``0.125``,
  ``6.8 × 10⁻⁶``, ``0`` for an exact zero, fractions as ``p/q``.

A chapter, step by step (``book/03-negative-definite.py`` is the example):

1. after ``presets.resolve``: ``page = Page("<chapter>", pc)`` (pass every resolved namespace);
2. each figure: draw it, then ``page.figure(fig, "<name>", data, statement=..., caption=...)``;
   a library plot function (which attaches its numbers to the figure) is followed by
   ``page.figure(fig, "<name>", statement=..., caption=...)``; a paper figure is
   ``page.paper_figure("figureN", ...)``. No ``plt.close``, no ``glue`` of figures, no
   ``save_kw``;
3. the Markdown: ``{glue:figure} fig-<name>`` with ``:name: fig-<name>``; no "File: ..." line
   (the caption gets its links at build time);
4. numbers: ``page.glue(key=value, other=(value, ".3f"))`` and ``{glue:text}`key``` without a
   format spec in the text;
5. statement labels of the paper's source in code type go; where a number or text is
   uncertain, ``{unconfirmed}`what is uncertain``` follows the statement's name;
6. ``tests/test_browser.py`` then checks every page's captions, gallery entries, legibility
   (9 px text, 200 px panels) and text.
"""
from __future__ import annotations

import hashlib
import html
import shutil
import weakref
import json
import math
import numbers
import posixpath
import re
from fractions import Fraction
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from myst_nb import glue as _glue

from attention_fw.plot._figure import figure_data

from . import paper_figures as pf
from . import paths, figures as plotting

__all__ = ["Page", "Table", "stream", "fmt", "span", "caption_text", "caption_html", "math_html",
           "display_width", "MIN_TEXT_PX", "MIN_PANEL_PX", "COLUMN_PX", "HTML_FIGURES"]

MIN_TEXT_PX = 9.0
"""Smallest text height (CSS px) of a figure as displayed in the page."""
MIN_PANEL_PX = 200.0
"""Smallest width (CSS px) of a panel as displayed in the page."""
COLUMN_PX = 660.0
"""Width available to a figure in the text column of a 1280-px window (672 px there), with a margin."""
CSS_PX_PER_IN = 96.0
"""A figure is shown at its physical size on a 96-dpi screen when the column allows (and its
text stays legible)."""
HTML_FIGURES = "figures"
"""Folder of the built HTML (``_build/html/figures/``) mirroring the figure folder."""


# ------------------------------------------------------------------------------------ numbers
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_EXP = re.compile(r"^(-?)([0-9.]+)e([+-])0*([0-9]+)$")


def _times_ten(text: str) -> str:
    """'6.8e-06' -> '6.8 × 10⁻⁶'; other strings unchanged."""
    m = _EXP.match(text)
    if not m:
        return text
    sign, mant, esign, exp = m.groups()
    power = ("-" if esign == "-" else "") + exp
    if exp == "0":
        return sign + mant
    return f"{sign}{mant}\u00a0×\u00a010{power.translate(_SUPERSCRIPT)}"  # no line break inside


def fmt(value, spec: str | None = None) -> str:
    """A number as the prose shows it.

    Parameters
    ----------
    value : int, float, Fraction, numpy scalar, str or bool
        Strings and booleans are returned as they are (``str``).
    spec : str, optional
        A format specification (``".3f"``, ``".1e"``, ``".2g"``, ``","``...); by default
        integers are written in full (with thousands separators from 10,000 on) and other
        numbers with 3 significant digits.

    Returns
    -------
    str: powers of ten as ``× 10ⁿ`` (never ``e-06``; no-break spaces around ``×``), ``0`` for
    an exact zero in scientific notation, no negative zero (``-0.00`` becomes ``0.00``).

    Raises
    ------
    TypeError
        ``value`` is not a number, a string or a bool.
    ValueError
        ``value`` is NaN.
    """
    if isinstance(value, (str, bool, np.bool_)):
        return str(bool(value)) if isinstance(value, np.bool_) else str(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}" if value.denominator != 1 else str(value.numerator)
    if not isinstance(value, numbers.Real):
        raise TypeError(f"value must be a number, a string or a bool, got {type(value).__name__}")
    if spec is None:
        if isinstance(value, numbers.Integral):
            return f"{value:,}" if abs(int(value)) >= 10_000 else str(value)
        spec = ".3g"
    if value == 0 and spec.endswith(("e", "E")):
        return "0"
    if isinstance(value, numbers.Integral) and spec[-1:] in "eEfFgG%":
        value = float(value)
    if isinstance(value, float) and math.isnan(value):
        raise ValueError("value is NaN: nothing to print")
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "-∞"
    text = _times_ten(format(value, spec).lower() if spec[-1:] in "eEgG" else format(value, spec))
    if text.startswith("-") and not any(c in "123456789" for c in text.split("×")[0]):
        text = text[1:]  # no negative zero
    return text


# ------------------------------------------------------------------------------ captions
_MATH = re.compile(r"\$([^$]+)\$")
_TEX_WORDS = {"beta": "β", "gamma": "γ", "delta": "δ", "Delta": "Δ", "eta": "η", "kappa": "κ",
              "varepsilon": "ε", "epsilon": "ε", "sigma": "σ", "tau": "τ", "lambda": "λ",
              "infty": "∞", "sqrt": "√", "mathcal": "", "le": "≤", "ge": "≥", "cdot": "·"}


def caption_text(caption: str) -> str:
    r"""A figure's one-line caption (``meta["caption"]``, whose ``$...$`` is TeX) as plain text,
    for an image's ``alt`` and other text-only places.

    >>> caption_text(r"converges like $e^{-\beta\Delta}$ to the cells $\mathcal{C}_i(v)$")
    'converges like e−βΔ to the cells Ci(v)'
    """
    def plain(m: re.Match) -> str:
        tex = re.sub(r"\\([A-Za-z]+)", lambda w: _TEX_WORDS.get(w.group(1), w.group(1)), m.group(1))
        return tex.replace("-", "−").translate(str.maketrans("", "", "{}^_ "))
    return _MATH.sub(plain, caption)


def math_html(tex: str) -> str:
    r"""Inline math as Sphinx writes it for MathJax.

    >>> math_html("x < 1")
    '<span class="math notranslate nohighlight">\\(x &lt; 1\\)</span>'
    """
    return f'<span class="math notranslate nohighlight">\\({html.escape(tex)}\\)</span>'


def caption_html(caption: str) -> str:
    r"""The caption as HTML for a page that loads MathJax: the text escaped, each ``$...$`` as
    inline math (``\(...\)``, as Sphinx writes it).

    >>> caption_html("cells $C_i(v)$ & more")
    'cells <span class="math notranslate nohighlight">\\(C_i(v)\\)</span> &amp; more'
    """
    parts = _MATH.split(caption)
    return "".join(html.escape(s) if k % 2 == 0 else math_html(s) for k, s in enumerate(parts))


# ------------------------------------------------------------------------------ display size
def display_width(meta: dict) -> tuple[float, bool]:
    """Width (CSS px) at which to show a figure, and whether it needs the full-width layout.

    The figure is shown at its physical size (:data:`CSS_PX_PER_IN`), or the text column
    (:data:`COLUMN_PX`) if that is narrower, and in any case wide enough that its smallest text
    is :data:`MIN_TEXT_PX` px high and its narrowest panel :data:`MIN_PANEL_PX` px wide; when
    that does not fit the text column, it takes the theme's full width (text column plus
    margin, about 936 px at 1280 px).
    """
    w_in = float(meta["size_in"][0])
    need = 0.0
    if meta.get("font_pt"):
        need = max(need, MIN_TEXT_PX * 72.0 * w_in / float(meta["font_pt"][0]))
    if meta.get("panel_widths_in"):
        need = max(need, MIN_PANEL_PX * w_in / min(meta["panel_widths_in"]))
    return max(need, min(w_in * CSS_PX_PER_IN, COLUMN_PX)), need > COLUMN_PX


def _figure_html(name: str, rel: str, meta: dict) -> str:
    """The glued figure: the PNG at a legible width, linking to the full-size SVG."""
    need, wide = display_width(meta)
    base = f"../{HTML_FIGURES}/{rel}"
    json_url = f"../{HTML_FIGURES}/{posixpath.join(posixpath.dirname(rel), 'data', posixpath.basename(rel))}.json"
    alt = html.escape(caption_text(meta.get("caption") or name), quote=True)
    style = "" if wide else f' style="max-width: {math.ceil(need)}px"'
    return (f'<div class="afw-figure{" afw-wide" if wide else ""}" data-afw-figure="{html.escape(name)}" '
            f'data-afw-path="{html.escape(rel)}" data-afw-json="{html.escape(json_url)}"{style}>'
            f'<a class="afw-figure-link" href="{base}.svg" title="Open the full-size SVG">'
            f'<img src="{base}.png" alt="{alt}"></a></div>')


class _Glued:
    """A glued figure: HTML for the page and for Jupyter. Its ``data-afw-figure`` and
    ``data-afw-path`` attributes are what the book's Sphinx extension reads."""

    def __init__(self, name, rel, meta):
        self.name, self.rel, self.meta = name, rel, meta

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/html": _figure_html(self.name, self.rel, self.meta),
                "text/plain": f"Figure {self.name} ({self.rel}.pdf, .png, .svg)"}


# --------------------------------------------------------------------------------- the page
def stream(name: str, seed: int) -> np.random.Generator:
    """A generator for the experiment called ``name``, independent of every other experiment.

    The stream is a function of ``(seed, name)`` only: each experiment of a chapter draws from
    its own stream, so reordering or inserting cells, or drawing more numbers in one
    experiment, changes no other experiment's numbers. The name is hashed (SHA-256) into the
    entropy of a :class:`numpy.random.SeedSequence` beside the seed.

    >>> a = stream("cells", 0).standard_normal(3)
    >>> b = stream("cells", 0).standard_normal(3)
    >>> bool((a == b).all()), bool((a == stream("chain", 0).standard_normal(3)).any())
    (True, False)
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    words = np.frombuffer(hashlib.sha256(name.encode()).digest(), dtype="<u4")
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, words)]))


class Page:
    """One chapter: where its figures go, how they are described and glued.

    Parameters
    ----------
    chapter : str
        The chapter's file stem, e.g. ``"03-negative-definite"`` (its page is
        ``book/<chapter>.html``, its command ``make notebook NB=<chapter>``).
    *params
        The results of the chapter's :func:`afw_book.presets.resolve` calls (one or more,
        same preset): the preset and the overrides decide the output folder and the command.

    Attributes
    ----------
    canonical : bool
        ``paper`` preset without overrides: figures go to ``figures/``, else ``figures/custom/``.
    outdir : Path
        Where this run's chapter figures go (:func:`afw_book.figures.output_dir`).
    data_only : dict
        Keyword arguments for a library plot function that saves its own data
        (``outdir=..., formats=()``): it writes only the JSON, which :meth:`figure` reads back
        and completes; the figure itself is written once, by :meth:`figure`.
    """

    def __init__(self, chapter: str, *params):
        if not isinstance(chapter, str) or not re.fullmatch(r"[\w-]+", chapter):
            raise ValueError(f"chapter must be a file stem such as '03-negative-definite', got {chapter!r}")
        if not params:
            raise TypeError("Page needs the chapter's resolved parameters (presets.resolve(...))")
        presets = {getattr(p, "preset", None) for p in params}
        if len(presets) != 1 or None in presets:
            raise ValueError(f"params must come from presets.resolve with one preset, got {sorted(map(str, presets))}")
        self.chapter = chapter
        self.params = params
        self.preset = presets.pop()
        self.overrides: dict = {}
        for p in params:
            self.overrides.update(getattr(p, "overrides", {}))
        self.canonical = self.preset == "paper" and not self.overrides
        seeds = [getattr(p, "seed") for p in params if hasattr(p, "seed")]
        self.seed = seeds[0] if seeds else None

    @property
    def tag(self) -> str:
        """What this run changed, for its file names (:func:`afw_book.figures.run_tag`):
        ``""`` for the book's run, else the preset (when not ``paper``) and the overrides."""
        words = {} if self.preset == "paper" else {"preset": self.preset}
        return plotting.run_tag({**words, **self.overrides})

    @property
    def outdir(self) -> Path:
        """``figures/`` for the book's run, ``figures/presets/<preset>/`` for another preset
        without overrides, else ``figures/custom/`` (:func:`afw_book.figures.output_dir`)."""
        if self.canonical:
            return plotting.output_dir(True)
        return plotting.output_dir(False, preset=None if self.overrides else self.preset)

    def stem(self, name: str) -> str:
        """The file stem of figure ``name`` in this run: ``name`` in ``figures/`` and in a preset's
        folder, ``<name>--<tag>`` in ``custom/`` (see :attr:`tag`)."""
        tag = self.tag
        return f"{name}--{tag}" if tag and self.outdir.name == "custom" else name

    def stream(self, name: str, seed: int | None = None) -> np.random.Generator:
        """The random stream of one experiment: see :func:`stream`.

        ``seed`` defaults to the ``seed`` of the chapter's resolved parameters.
        """
        if seed is None:
            seed = self.seed
            if seed is None:
                raise ValueError("seed: the chapter's parameters have no 'seed'; pass seed=...")
        return stream(name, seed)

    @property
    def data_only(self) -> dict:
        """Keyword arguments for a library plot function that saves by itself: it writes its data
        only, into a private folder outside the figures (:meth:`figure` reads it back, completes it
        and writes the files, under this run's names)."""
        if getattr(self, "_staging", None) is None:
            import tempfile

            self._staging = Path(tempfile.mkdtemp(prefix="afw-page-"))
            weakref.finalize(self, shutil.rmtree, str(self._staging), True)
        return {"outdir": self._staging, "formats": ()}

    def command(self) -> str:
        """The command that reruns this chapter as it ran here (and rewrites its figures)."""
        words = [f"make notebook NB={self.chapter}"]
        if self.preset != "paper":
            words.append(f"PRESET={self.preset}")
        if self.overrides:
            args = " ".join(f"-p {k} {_yaml(v)}" for k, v in self.overrides.items())
            words.append(f'ARGS="{args}"')
        return " ".join(words)

    def figure(self, fig, name: str, data: dict | None = None, *, statement: str, caption: str,
               command: str | None = None) -> None:
        """Save ``fig`` with its data and description, close it, and glue it as ``fig-<name>``.

        Parameters
        ----------
        fig : matplotlib Figure
        name : str
            File stem (``figures/<name>.pdf`` ...).
        data : dict, optional
            The numbers behind the figure. ``None``: those a library plot function attached to
            the figure (:func:`attention_fw.plot.figure_data`), else those written by a save with
            :attr:`data_only`, read back from ``<outdir>/data/``.
        statement : str
            The paper statement the figure is about, e.g. ``"Theorem 3.1 (erratum E2)"``.
        caption : str
            One line, plain text (no Markdown or math), for the gallery and as the image's alt text.
        command : str, optional
            Defaults to :meth:`command`.

        Returns nothing, so that a cell ending with this call shows no output.
        """
        for key, value in (("statement", statement), ("caption", caption)):
            if not isinstance(value, str) or not value.strip() or "\n" in value:
                raise ValueError(f"{key} must be one non-empty line of text, got {value!r}")
        outdir = self.outdir
        if data is None:
            data = figure_data(fig)                     # drawn by a plot function of attention_fw.plot
        if data is None:
            staging = getattr(self, "_staging", None)
            source = (staging or outdir) / "data" / f"{name}.json"
            if staging is None or not source.is_file():
                raise FileNotFoundError(f"no data for figure {name!r}: pass data=..., draw it "
                                        "with a plot function of attention_fw.plot (its numbers travel with the "
                                        "figure), or save them first with **page.data_only")
            data = json.loads(source.read_text())
            source.unlink()
            data.pop("meta", None)
        meta = {"chapter": self.chapter, "statement": statement, "caption": caption,
                "command": command or self.command()}
        written = plotting.save(fig, self.stem(name), data, outdir=outdir, meta=meta, close=False)
        plt.close(fig)
        self._glue_written(name, written)

    def paper_figure(self, name: str, **params) -> dict:
        """Draw, save and glue one of the paper's figures (:mod:`afw_book.paper_figures`).

        The files are exactly those of ``make figure`` with the same parameters (same folder
        rule, same metadata, whichever chapter draws them). Returns the figure's data (as
        returned by the figure function: numpy arrays): assign it (``fig2 = page.paper_figure(...)``),
        or the cell shows it.
        """
        outdir = None if self.canonical else self.outdir
        # in custom/ the figure's own changed parameters are in its name (two reruns never share
        # a file); in a preset's folder the preset fixes them
        tagged = None if outdir is None else outdir.name == "custom"
        _, data, written = pf.render(name, outdir=outdir, close=True, tagged=tagged, **params)
        self._glue_written(name, written)
        return data

    def _glue_written(self, name, written) -> None:
        meta = json.loads(written["json"].read_text())["meta"]
        rel = written["png"].with_suffix("").relative_to(paths.figures_dir()).as_posix()
        _glue(f"fig-{name}", _Glued(name, rel, meta), display=False)

    def parameters(self) -> "_ParameterTable":
        """The table "Parameters of this run": every declared parameter with its value here, the
        book's value (the ``paper`` preset), what is accepted and its meaning; values that differ
        from the book's are marked. The last line of the chapter's first (folded) cell.

        The output also carries the rows as metadata (``afw_parameters``), which the page of a
        rerun (``make notebook``) reads from the executed notebook.
        """
        rows = []
        for p in self.params:
            for name, decl in getattr(p, "declared", {}).items():
                value, book = getattr(p, name), p.book_values.get(name)
                accepted = "; ".join(w for w in (decl[1], decl[3] if len(decl) > 3 else "") if w.strip())
                rows.append({"name": name, "value": value, "book": book, "type": decl[0],
                             "accepted": accepted, "meaning": decl[2], "differs": value != book})
        return _ParameterTable(self.preset, rows)

    def glue(self, **values) -> None:
        """Glue numbers (and short strings) for the prose: ``{glue:text}`key``` in Markdown.

        Each value is a number or string, formatted by :func:`fmt`, or a pair
        ``(value, spec)`` with a format specification, e.g. ``ratio=(0.1234, ".3f")``.
        """
        for key, value in values.items():
            spec = None
            if isinstance(value, tuple):
                if len(value) != 2 or not isinstance(value[1], str):
                    raise TypeError(f"{key}: give a value or a (value, format spec) pair, got {value!r}")
                value, spec = value
            # a str is glued as its repr, which myst-nb evaluates back to the same string
            _glue(key, fmt(value, spec), display=False)


def span(values, spec: str | None = None, sep: str = " to ") -> str:
    """The range of ``values`` as the prose says it: ``"1.2 to 1.5"``, or ``"1.2"`` once when both
    ends read the same (formatted by :func:`fmt` with ``spec``), never "1.2 to 1.2".

    Raises
    ------
    ValueError
        ``values`` is empty.
    """
    values = np.asarray(values).ravel().tolist()
    if not values:
        raise ValueError("values must hold at least one number")
    lo, hi = fmt(min(values), spec), fmt(max(values), spec)
    return lo if lo == hi else f"{lo}{sep}{hi}"


def _value_text(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return fmt(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else str(value)


_TABLE_STYLE = ("<style>table.afw-parameters{border-collapse:collapse;font-size:0.85em;margin:0.4em 0}"
                "details.afw-parameters-box>summary{font-weight:600;cursor:pointer}"
                "table.afw-parameters td,table.afw-parameters th{padding:0.1em 0.6em;text-align:left;"
                "border-bottom:1px solid #8884}table.afw-parameters td:first-child{white-space:nowrap}</style>")


class _ParameterTable:
    """The output of :meth:`Page.parameters` (HTML on the page, Markdown in a terminal)."""

    def __init__(self, preset, rows):
        self.preset, self.rows = preset, rows

    def _repr_mimebundle_(self, include=None, exclude=None):
        e = html.escape
        changed = sum(r["differs"] for r in self.rows)
        head = (f"Parameters of this run: preset <code>{e(self.preset)}</code>, "
                + (f"{changed} value(s) differ from the book's (marked)" if changed else "the book's values"))
        cells = []
        for r in self.rows:
            mark = ' class="afw-differs"' if r["differs"] else ""
            value = e(_value_text(r["value"]))
            value = f"<strong>{value}</strong>" if r["differs"] else value
            cells.append(f'<tr{mark}><td><code>{e(r["name"])}</code></td><td>{value}</td>'
                         f'<td>{e(_value_text(r["book"]))}</td>'
                         f'<td>{e((r["type"] + " " + r["accepted"]).strip())}</td><td>{e(r["meaning"])}</td></tr>')
        body = "".join(cells)
        # folded: the argument comes first; a reader opens the table when the numbers matter
        table = (_TABLE_STYLE + f'<details class="afw-parameters-box"><summary>{head}</summary>'
                 f'<table class="afw-parameters"><thead><tr><th>parameter</th>'
                 f'<th>this run</th><th>book</th><th>accepted</th><th>meaning</th></tr></thead>'
                 f'<tbody>{body}</tbody></table></details>')
        text = "\n".join([f"Parameters of this run (preset {self.preset})"]
                         + [f"{'*' if r['differs'] else ' '} {r['name']} = {_value_text(r['value'])}"
                            f"  (book: {_value_text(r['book'])}; {r['meaning']})" for r in self.rows])
        rows = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in r.items()} for r in self.rows]
        return ({"text/html": table, "text/plain": text},
                {"text/html": {"afw_parameters": {"preset": self.preset, "rows": rows}}})


class Table:
    """A table of results on the page: HTML there (it scrolls inside its own box on a phone), aligned
    text in a terminal. A printed table wraps its lines inside the column; this one does not.

    ``columns``: the headers; ``rows``: one sequence of cells per row (numbers are written with
    :func:`fmt`, or pre-formatted strings); ``caption``: optional, above the table.

    Examples
    --------
    >>> t = Table(["configuration", "n", "rate"], [["triangle", 3, 0.8125], ["square", 4, 0.75]])
    >>> print(t)
    configuration  n  rate
    triangle       3  0.812
    square         4  0.75
    >>> "<th>rate</th>" in t._repr_html_()
    True
    >>> Table(["a", "b"], [[1]])
    Traceback (most recent call last):
    ...
    ValueError: rows: row 0 has 1 cells, columns has 2
    """

    def __init__(self, columns, rows, caption: str | None = None) -> None:
        self.columns = [str(c) for c in columns]
        self.rows = [[c if isinstance(c, str) else _value_text(c) for c in row] for row in rows]
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"rows: row {i} has {len(row)} cells, columns has {len(self.columns)}")
        self.caption = caption

    def __str__(self) -> str:
        cols = [self.columns] + self.rows
        width = [max(len(r[k]) for r in cols) for k in range(len(self.columns))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip() for r in cols]
        return "\n".join(([self.caption] if self.caption else []) + lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        e = html.escape
        head = "".join(f"<th>{e(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in self.rows)
        cap = f"<caption>{e(self.caption)}</caption>" if self.caption else ""
        return (_TABLE_STYLE + f'<div class="afw-table-box"><table class="afw-parameters afw-results">{cap}'
                f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def _yaml(value) -> str:
    """A parameter value as ``-p NAME VALUE`` expects it (YAML), quoted for the shell."""
    text = json.dumps(value) if not isinstance(value, str) else value
    return f"'{text}'" if any(c in text for c in " []{},'\"") else text
