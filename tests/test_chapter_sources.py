"""Chapters read as prose plus short library calls (issue 16): checked on the sources.

A *visible* code cell is one the page shows the code of: not tagged ``hide-input``,
``remove-input`` or ``remove-cell``. Lines are non-blank source lines. The cell tagged
``parameters`` is the chapter's list of knobs (one a line, what papermill and ``make notebook``
override) and is shown whole: it counts towards the code lines but not against the 15-line limit.

Code is formatted to the column (issue 23): no line of code the book shows (a code cell not
removed from the page, folded or not, and a fenced code block of the prose) is longer than
:data:`MAX_CODE_COLUMNS` characters, the number of characters of the code font that an opened
cell holds in a 1280-px window (measured in headless Chromium; ``tests/test_browser.py`` checks
on the built pages that no opened cell wraps at 1280 and 1920 px). And every chapter opens with
its summary box: "What the paper says, what is true, where this page shows it".
"""
from __future__ import annotations

import ast
import re

import jupytext
import pytest

from bookbuild import ROOT

MAX_VISIBLE_LINES = 15
HIDDEN = {"hide-input", "remove-input", "remove-cell"}
REMOVED = {"remove-input", "remove-cell"}
SOURCES = sorted(ROOT.glob("book/0*.py")) + [ROOT / "book" / "errata.py"]
ALL_SOURCES = sorted(ROOT.glob("book/*.py"))
CHAPTERS = sorted(ROOT.glob("book/[0-9][0-9]-*.py"))
# An opened code cell holds 107 characters of the code font in a 1280-px window and 87 from
# 1600 px on, where the "Contents" sidebar takes its place (measured in headless Chromium,
# tests/test_browser.py::CODE_JS, which checks on the built pages that no opened cell wraps).
MAX_CODE_COLUMNS = 87
FENCE = re.compile(r"^(`{3,}|~{3,})([^`]*)$")


def _lines(cell) -> int:
    return sum(1 for line in cell.source.splitlines() if line.strip())


def visible_code_cells(source):
    nb = jupytext.read(source)
    return [c for c in nb.cells
            if c.cell_type == "code" and not HIDDEN & set(c.metadata.get("tags", []))]


def prose_lines(source) -> int:
    return sum(_lines(c) for c in jupytext.read(source).cells if c.cell_type == "markdown")


def test_the_sources_are_found():
    names = {s.stem for s in SOURCES}
    assert {"01-model", "02-frank-wolfe", "03-negative-definite", "05-finite-beta", "errata"} <= names


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_no_visible_code_cell_is_longer_than_15_lines(source):
    long = [(_lines(c), c.source.splitlines()[0]) for c in visible_code_cells(source)
            if _lines(c) > MAX_VISIBLE_LINES and "parameters" not in c.metadata.get("tags", [])]
    assert not long, (f"{source.stem}: visible code cells over {MAX_VISIBLE_LINES} lines "
                      f"(fold them with hide-input or move the code into the library): {long}")


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_visible_code_lines_are_fewer_than_prose_lines(source):
    """Issue 16 asks it of chapter 5 (the worst offender); every converted chapter meets it."""
    code = sum(_lines(c) for c in visible_code_cells(source))
    assert code < prose_lines(source), f"{source.stem}: {code} visible code lines, {prose_lines(source)} prose"


def test_the_line_count_sees_tags_and_blank_lines(tmp_path):
    src = tmp_path / "x.py"
    body = "\n".join(f"a{k} = {k}\n" for k in range(20))      # 20 code lines with blank lines between
    src.write_text(f"# %% [markdown]\n# prose\n\n# %%\n{body}\n# %% tags=[\"hide-input\"]\n{body}\n")
    cells = visible_code_cells(src)
    assert len(cells) == 1 and _lines(cells[0]) == 20
    assert prose_lines(src) == 1


def shown_code_lines(source) -> list[str]:
    """The lines of code the page of ``source`` shows: every line of a code cell not removed
    from the page (folded cells open), and every line of a fenced code block of the prose
    (```python, ```bash, ...; not a directive such as ```{glue:figure})."""
    out = []
    for cell in jupytext.read(source).cells:
        if cell.cell_type == "code" and not REMOVED & set(cell.metadata.get("tags", [])):
            out += cell.source.splitlines()
        elif cell.cell_type == "markdown":
            fence, code = None, False
            for line in cell.source.splitlines():
                m = FENCE.match(line.strip())
                if fence is None and m:            # a code block, or a directive (```{...})
                    fence, code = m.group(1), not m.group(2).strip().startswith("{")
                elif fence is not None and line.strip() == fence:
                    fence = None
                elif fence is not None and code:
                    out.append(line)
    return out


@pytest.mark.parametrize("source", ALL_SOURCES, ids=lambda p: p.stem)
def test_shown_code_fits_the_column(source):
    long = [f"{len(line)}: {line.strip()[:60]}" for line in shown_code_lines(source)
            if len(line.rstrip()) > MAX_CODE_COLUMNS]
    assert not long, (f"{source.stem}: lines of code longer than the column ({MAX_CODE_COLUMNS} "
                      f"characters at 1280 px) wrap when a reader opens the cell: {long}")


def test_the_code_line_count_sees_removed_cells_and_fences(tmp_path):
    src = tmp_path / "x.py"
    wide = "x = " + "1 + " * 40 + "1"
    src.write_text(f'# %% [markdown]\n# ```python\n# {wide}\n# ```\n# ```{{glue:figure}} f\n# {wide}\n# ```\n\n'
                   f'# %% tags=["remove-cell"]\n{wide}\n\n# %% tags=["hide-input"]\ny = 1\n{wide}\n')
    assert shown_code_lines(src) == [wide, "y = 1", wide]


@pytest.mark.parametrize("source", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_has_its_summary_box(source):
    """Before its first code cell, a chapter states in a box what the paper says, what is true
    and where the page shows it (chapter 3's box is titled "What is true and what is not")."""
    cells = jupytext.read(source).cells
    first_code = next(k for k, c in enumerate(cells) if c.cell_type == "code")
    intro = "\n".join(c.source for c in cells[:first_code] if c.cell_type == "markdown")
    box = re.search(r"^:::\{admonition\} (What[^\n]*)\n:class: important\n(.*?)^:::$", intro, re.M | re.S)
    assert box, f"{source.stem}: no summary box (admonition, class important) before the first code cell"
    title, body = box.group(1).casefold(), box.group(2)
    assert "what is true" in title, title
    assert body.count("\n* ") + body.startswith("* ") >= 3, f"{source.stem}: the box has fewer than three points"


@pytest.mark.parametrize("source", ALL_SOURCES, ids=lambda p: p.stem)
def test_the_parameters_cell_is_not_shown(source):
    """The cell tagged ``parameters`` holds the book's defaults (``preset = "paper"``); papermill
    injects the run's values after it. Shown, it would tell the reader of a quick build that the
    page used the paper's preset: it is removed from the page (the run's values are in the
    folded "Parameters of this run" table, and in the banner of a build with another preset)."""
    cells = [c for c in jupytext.read(source).cells
             if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{source.stem}: {len(cells)} parameters cells"
    assert "remove-cell" in cells[0].metadata["tags"], f"{source.stem}: the parameters cell is shown"


# A Greek letter spelled out, infinity in words, or a model's name in ASCII ("SA-beta"): the plain
# text a reader sees in the gallery, in image alt texts and in the "Parameters of this run" table
# is written with the book's typeset names ("(SAβ)", "β", "∞").
SPELLED = re.compile(r"\b(alpha|beta|gamma|delta|Delta|epsilon|eps|kappa|lambda|mu|rho|sigma|tau|"
                     r"theta|inf|infty|infinity)\b|SA-|[\\$`]")


def reader_texts(source):
    """The figure captions and statements (keywords of ``page.figure``, ``plotting.save``...)
    and the meanings of the declared parameters (the third entry of a ``(type, accepted,
    meaning)`` triple) of a source file: ``[(where, text), ...]``."""
    out = []
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.keyword) and node.arg in ("caption", "statement"):
            texts = [(node.arg, node.value)]
        elif isinstance(node, ast.Dict):
            texts = [(ast.unparse(k), v.elts[2]) for k, v in zip(node.keys, node.values)
                     if k is not None and isinstance(v, ast.Tuple) and len(v.elts) == 3]
        else:
            continue
        for where, value in texts:
            try:
                text = ast.literal_eval(value)
            except ValueError:          # an f-string or a name: its literal parts
                text = " ".join(c.value for c in ast.walk(value)
                                if isinstance(c, ast.Constant) and isinstance(c.value, str))
            if isinstance(text, str):
                out.append((where, text))
    return out


@pytest.mark.parametrize("source", ALL_SOURCES + sorted(ROOT.glob("lib/afw_book/*.py")), ids=lambda p: p.stem)
def test_captions_and_parameter_meanings_use_typeset_names(source):
    texts = reader_texts(source)
    # TeX between $...$ (a caption's math, typeset in the gallery) is not spelled out
    bad = [(where, text) for where, text in texts if SPELLED.search(re.sub(r"\$[^$]*\$", "", text))]
    assert not bad, f"{source.stem}: write β, γ, κ, ∞, (SAβ), (SA∞) in text a reader sees: {bad}"


def test_the_typeset_names_check_sees_spelled_names(tmp_path):
    src = tmp_path / "x.py"
    src.write_text('P = {"g": ("float", "> 0", "step of (SA-beta)")}\n'
                   'page.figure(fig, "a", statement="Theorem 5.4", caption=f"runs per beta {n}")\n'
                   'page.figure(fig, "b", statement="Theorem 5.4 for (SAβ)", caption="against β")\n')
    texts = reader_texts(src)
    assert len(texts) == 5
    assert [w for w, t in texts if SPELLED.search(t)] == ["'g'", "caption"]
