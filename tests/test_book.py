"""The book pipeline: every notebook runs in the quick preset and the book builds with -W.

Slow: one kernel per notebook plus a Sphinx build (about a minute on two cores). The build
happens once, in a scratch copy of the repository (see ``bookbuild.py``).
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess

import jupytext
import nbformat
import pytest

import bookbuild
from bookbuild import ROOT, chapter_sources

pytestmark = pytest.mark.slow
RUNNER = [str(bookbuild.VENV / "bin" / "python"), str(ROOT / "tools" / "run_notebook.py")]
NOTEBOOKS = chapter_sources()
CHAPTER_FILES = ["book/01-model.py", "book/02-frank-wolfe.py", "book/03-negative-definite.py",
                 "book/04-positive-definite.py", "book/05-finite-beta.py", "book/06-context-length.py",
                 "book/07-deterministic-dynamics.py",
                 "book/errata.py"]


@pytest.fixture(scope="session")
def build(tmp_path_factory):
    return bookbuild.quick_book()


def _executed(build, source):
    return nbformat.read(build.repo / "book" / (source.stem + ".ipynb"), as_version=4)


def test_book_builds_with_warnings_as_errors(build):
    assert build.returncode == 0, f"make book PRESET=quick failed:\n{build.log[-6000:]}"
    assert "build succeeded" in build.log
    # Sphinx warnings (the kernels' own "[IPKernelApp] WARNING | ... TCP" notice is not one)
    warnings = re.findall(r"^(?!\[IPKernelApp\]).*\bWARNING\b.*$", build.log, re.M)
    assert warnings == [], "\n".join(warnings)


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executed_once_in_quick_preset_without_errors(build, source):
    assert build.returncode == 0, build.log[-6000:]
    nb = _executed(build, source)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and 'preset = "quick"' in injected[0].source
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    skipped = [c for c in code if "skip-execution" in c.metadata.get("tags", [])]
    # Only live-widget cells may be left unexecuted (see the widget test below).
    assert all("widgets.interact" in c.source and not c.get("execution_count") for c in skipped)
    assert all(c.get("execution_count") for c in code if c not in skipped)
    record = json.loads((build.repo / "_build" / "exec-times" / f"{source.stem}.json").read_text())
    assert record["preset"] == "quick" and record["seconds"] > 0


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_has_a_page_offering_its_ipynb(build, source):
    page = build.html / "book" / f"{source.stem}.html"
    assert page.is_file(), f"no page for {source.name}"
    html = page.read_text()
    assert f"_sources/book/{source.stem}.ipynb" in html, "no .ipynb download link"
    assert (build.html / "_sources" / "book" / f"{source.stem}.ipynb").is_file()


def test_toc_lists_exactly_the_chapter_files(build):
    """The sidebar of the intro page links every chapter present and nothing else."""
    html = (build.html / "book" / "intro.html").read_text()
    nav = html.split('bd-sidebar-primary')[1]
    linked = set(re.findall(r'href="([0-9]+-[a-z0-9-]+|errata|reproducibility)\.html"', nav))
    present = {p.stem for p in NOTEBOOKS}
    assert linked == present
    planned = {p for p in CHAPTER_FILES if (ROOT / p).exists()}
    assert {f"book/{p}.py" for p in present} >= planned


def test_quick_build_is_idempotent_and_dependencies_are_tracked(build, tmp_path):
    """Nothing re-executes on a rebuild; an edit to a notebook, lib/, requirements.txt or
    the preset re-executes exactly what depends on it (make dry runs, nothing is executed).
    In a private copy of the build (timestamps kept): a dry run rewrites the preset's tag file."""
    assert build.returncode == 0, build.log[-6000:]
    repo = bookbuild.private_copy(build, tmp_path).repo

    def would_run(*args):
        out = bookbuild.make(repo, "-n", "figures/MANIFEST.sha256", *args).stdout
        return sorted(re.findall(r"run_notebook\.py book/([\w-]+)\.py", out))

    everything = sorted(p.stem for p in NOTEBOOKS)
    assert would_run("PRESET=quick") == []
    first = NOTEBOOKS[0].stem
    expected = sorted({first, "reproducibility"} & set(everything))
    assert would_run("PRESET=quick", "-W", f"book/{first}.py") == expected
    assert would_run("PRESET=quick", "-W", "lib/afw_book/paths.py") == everything
    assert would_run("PRESET=quick", "-W", "requirements.txt") == everything
    # A different preset re-executes everything. Even a dry run records the new preset in
    # the tag file, so put the tag back afterwards for the last check.
    tag = repo / "_build" / "exec-times" / ".preset"
    before = (tag.read_text(), tag.stat().st_mtime_ns)
    try:
        assert would_run("PRESET=paper") == everything
    finally:
        tag.write_text(before[0])
        os.utime(tag, ns=(before[1], before[1]))
    assert would_run("PRESET=quick") == []


def _parameters_cell(source):
    nb = jupytext.read(source)
    code = [c for c in nb.cells if c.cell_type == "code"]
    return code[0], code[1]


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_parameters_follow_the_convention(source):
    params, following = _parameters_cell(source)
    assert "parameters" in params.metadata.get("tags", []), "first code cell must be tagged parameters"
    values = {}
    for node in ast.parse(params.source).body:
        assert isinstance(node, ast.Assign), f"parameters cell must only assign: {ast.unparse(node)}"
        values[node.targets[0].id] = ast.literal_eval(node.value)
    assert values.pop("preset") == "paper"
    declared = values.pop("PARAMETERS", None)
    if declared is not None:   # the declaration: name -> (type, accepted values, meaning), nothing else
        from afw_book.presets import read_declaration

        assert values == {}, f"a chapter that declares PARAMETERS assigns nothing else there: {values}"
        assert read_declaration(source.read_text())["parameters"] == declared
        assert "remove-cell" in params.metadata.get("tags", []), "the declaration is shown as the table"
        assert "resolve_declared(" in following.source, "the next cell must call presets.resolve_declared"
        assert "page.parameters()" in following.source, "and show the table 'Parameters of this run'"
        return
    assert all(v is None for v in values.values()), f"tunable parameters must default to None: {values}"
    assert "resolve(" in following.source, "the cell after the parameters must call presets.resolve"


def _run(source, *args):
    return subprocess.run([*RUNNER, str(source), *args], capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_unknown_preset_fails_before_any_computation(tmp_path, source):
    """Refused from the source, before a kernel starts: exit status 2, one line, nothing executed."""
    out = tmp_path / "out.ipynb"
    proc = _run(source, "--preset", "fast", "-o", str(out), "--times-dir", str(tmp_path / "t"),
                "--failed-dir", str(tmp_path / "failed"))
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr.strip() == (f"run_notebook: {source.stem}: preset = 'fast' is not accepted: "
                                   "expected one of paper, quick")
    assert not (tmp_path / "failed").exists() and not (tmp_path / "t").exists()


def test_wrong_type_and_unknown_name_are_rejected_with_the_accepted_values(tmp_path):
    from afw_book.presets import read_declaration

    source = ROOT / "book" / "01-model.py"
    names = list(read_declaration(source.read_text())["parameters"])
    assert names, "01-model must have tunable parameters"
    proc = _run(source, "--preset", "quick", "-p", names[0], "not-a-number", "-o", str(tmp_path / "o.ipynb"),
                "--times-dir", str(tmp_path / "t"), "--failed-dir", str(tmp_path / "failed"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert f"{names[0]} = 'not-a-number' is not accepted: expected int" in proc.stderr
    proc = _run(source, "-p", "no_such_parameter", "1", "-o", str(tmp_path / "o.ipynb"))
    assert proc.returncode == 2
    assert "no_such_parameter is not a parameter of this notebook" in proc.stderr and names[0] in proc.stderr
    assert not (tmp_path / "o.ipynb").exists()


def test_injected_parameters_cell_is_removed_from_the_page(tmp_path):
    """Papermill's injected cell is tagged remove-cell (kept in the notebook, never shown)."""
    source = tmp_path / "book" / "tiny.py"
    source.parent.mkdir()
    source.write_text('# %% tags=["parameters"]\npreset = "paper"\nk = 1\n\n# %%\nprint(k)\n')
    out = tmp_path / "tiny.ipynb"
    proc = _run(source, "-p", "k", "2", "-o", str(out), "--times-dir", str(tmp_path / "t"))
    assert proc.returncode == 0, proc.stderr
    code = [c for c in nbformat.read(out, as_version=4).cells if c.cell_type == "code"]
    injected = [c for c in code if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "k = 2" in injected[0].source
    assert "remove-cell" in injected[0].metadata["tags"]
    shown = [c for c in code if "remove-cell" not in c.metadata.get("tags", [])]
    assert "2" in "".join(o.get("text", "") for c in shown for o in c.get("outputs", []))


def test_a_failing_cell_fails_the_build_loudly(tmp_path):
    repo = bookbuild.make_copy(tmp_path / "repo")
    for p in (repo / "book").glob("*.py"):
        p.unlink()
    (repo / "book" / "09-failing.py").write_text(
        '# %% tags=["parameters"]\npreset = "paper"\n\n# %%\nfrom afw_book.presets import resolve\n'
        'p = resolve({"paper": {}, "quick": {}}, preset)\n\n# %%\nx = 1\n\n# %%\n'
        'raise ArithmeticError("deliberate failure " + str(x))\n')
    proc = bookbuild.make(repo, "figures", "PRESET=quick")
    assert proc.returncode != 0
    assert "NOTEBOOK 09-failing FAILED in cell" in proc.stderr
    assert "ArithmeticError: deliberate failure 1" in proc.stderr
    assert not (repo / "book" / "09-failing.ipynb").exists(), "a failed run must not look up to date"


def test_figure_manifest_lists_and_verifies_every_generated_figure(build):
    """figures/MANIFEST.sha256 covers every figure file the quick build wrote, in sha256sum format."""
    assert build.returncode == 0, build.log[-6000:]
    figures = build.repo / "figures"
    lines = (figures / "MANIFEST.sha256").read_text().splitlines()
    listed = [line.split("  ", 1)[1] for line in lines]
    on_disk = sorted(p.relative_to(figures).as_posix() for p in figures.rglob("*")
                     if p.is_file() and p.name != "MANIFEST.sha256" and not p.relative_to(figures).parts[0] == "custom")
    assert listed == on_disk and any(name.endswith(".pdf") for name in listed)
    check = subprocess.run(["sha256sum", "--check", "--quiet", "MANIFEST.sha256"], cwd=figures,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_every_figure_named_in_the_introduction_is_generated(build):
    """The intro's result map names figure files; the build must produce each of them. Some
    chapters write the canonical figures/ in the paper preset and figures/presets/quick/ in the
    quick one, so any of these counts."""
    assert build.returncode == 0, build.log[-6000:]
    rows = [line for line in (ROOT / "book" / "intro.md").read_text().splitlines()
            if line.startswith("| **")]
    names = {n for row in rows for n in re.findall(r"`([\w-]+)`", row.split("|")[3])}
    assert len(names) >= 10
    fig = build.repo / "figures"
    candidates = ("{}.pdf", "data/{}.json", "presets/quick/{}.pdf", "presets/quick/data/{}.json")
    missing = sorted(n for n in names if not any((fig / c.format(n)).is_file() for c in candidates))
    assert missing == [], f"named in book/intro.md but not generated: {missing}"


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_figure_is_shown_once(build, source):
    """A figure glued for a numbered {glue:figure} must not also appear as the cell's own output
    (the inline backend shows every figure left open at the end of a cell)."""
    assert build.returncode == 0, build.log[-6000:]
    doubled = []
    for k, cell in enumerate(_executed(build, source).cells):
        outs = cell.get("outputs", [])
        glued = [o for o in outs if o.get("metadata", {}).get("scrapbook")
                 and any("image/" in m for m in o.get("data", {}))]
        shown = [o for o in outs if o.get("output_type") in ("display_data", "execute_result")
                 and not o.get("metadata", {}).get("scrapbook")
                 and any(m.startswith("image/") for m in o.get("data", {}))]
        if glued and shown:
            doubled.append(k)
    assert doubled == [], f"cells {doubled} show a glued figure a second time (close it after glue)"


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_live_widgets_are_left_out_of_the_static_page_and_replaced_by_a_player(build, source):
    """Issue 4: an ipywidgets explorer is for local use only. Its cell is tagged remove-output
    and skip-execution, the rendered page holds no widget (a dead control in a static page) and the page has a
    precomputed player (animate.frames_view) in its place."""
    assert build.returncode == 0, build.log[-6000:]
    html = (build.html / "book" / f"{source.stem}.html").read_text()
    assert "application/vnd.jupyter.widget-view+json" not in html, "a dead widget in the static page"
    assert 'class="jupyter-widgets' not in html and "widget-state+json" not in html
    live = [c for c in jupytext.read(source).cells if c.cell_type == "code" and "widgets.interact" in c.source]
    for cell in live:
        assert "remove-output" in cell.metadata.get("tags", []), cell.source[:200]
        # Never executed headless: a widget cell stalls papermill/nbclient now and then
        # (jupyter/nbclient#312; here about one chapter-1 run in twelve hung forever).
        assert "skip-execution" in cell.metadata.get("tags", []), cell.source[:200]
    if live:
        assert "_anim_slider" in html, "a live explorer needs a precomputed player in the static page"


def _glued(nb) -> dict:
    """The scalars a notebook glued for the prose, by name (their text/plain form)."""
    out = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            key = "application/papermill.record/text/plain"
            if name and key in o.get("data", {}):
                out[name] = o["data"][key]
    return out


def test_theorem54_experiment_satisfies_the_hypotheses_the_text_claims(build):
    """Issue 12: chapter 5 says its theorem-regime experiments (eps, gamma) lie inside the region
    where the proof of Theorem 5.4 applies. Check it from first principles for the equilateral
    triangle on S^1 (R = 1, c0 = 3/2, d(K) = sqrt 3, clusters started at the vertices, rho = 0):
    eps / gamma >= 2 d(K) and 4 R eps + 2 eps^2 <= c0 / 2; and that the experiments use them."""
    source = (ROOT / "book" / "05-finite-beta.py").read_text()
    values = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            names = [getattr(t, "id", None) for t in node.targets[0].elts]
            if "EPS_THM" in names:
                values = dict(zip(names, ast.literal_eval(node.value)))
    eps, gamma = values["EPS_THM"], values["GAMMA_THM"]
    assert eps / gamma >= 2 * 3 ** 0.5
    assert 4 * eps + 2 * eps ** 2 <= 1.5 / 2
    assert 0 < gamma < 1
    # every theorem-regime sweep of the chapter runs with exactly these parameters
    grids = re.findall(r"grid_thm\w* = sweeps\.grid\((.*?)\)\n", source, re.S)
    assert len(grids) == 2 and all("eps=EPS_THM" in g and "gamma=GAMMA_THM" in g for g in grids)
    # and the executed chapter states the verdict computed by the library
    assert build.returncode == 0, build.log[-6000:]
    glued = _glued(_executed(build, ROOT / "book" / "05-finite-beta.py"))
    assert glued["thm_hyp_ok"].strip("'\"") == "all hold"
    # glued as the prose shows them (afw_book.notebook.fmt), i.e. as strings
    assert float(glued["thm_eps"].strip("'\"")) == eps and float(glued["thm_gamma"].strip("'\"")) == gamma


def test_no_page_cites_the_specification_or_shows_a_placeholder(build):
    """Issue 12: the book stands alone: no page refers to the specification file (NOTES) and no
    bibliography entry carries a placeholder title."""
    assert build.returncode == 0, build.log[-6000:]
    spec = re.compile(r"\bNOTES\b")                      # the specification file, in any form
    bad = re.compile(r"not checked here|title not checked|\bTODO\b|\bplaceholder\b", re.I)
    hits = []
    for page in sorted(build.html.rglob("*.html")):
        text = re.sub(r"<(script|style)\b.*?</\1>", " ", page.read_text(errors="replace"), flags=re.S)
        text = re.sub(r"<[^>]+>", " ", text)
        hits += [f"{page.relative_to(build.html)}: {m.group(0)!r}"
                 for pat in (spec, bad) for m in pat.finditer(text)]
    assert hits == []
    bib = (ROOT / "book" / "references.bib").read_text()
    titles = re.findall(r"^\s*title\s*=\s*\{(.*)\},?\s*$", bib, re.M)
    keys = re.findall(r"^@\w+\{([^,]+),", bib, re.M)
    assert len(titles) == len(keys) >= 8 and not any(bad.search(t) or "[" in t for t in titles)
    # one key scheme: first author's surname, year, first significant word of the title
    assert all(re.fullmatch(r"[a-z]+(19|20)\d\d[a-z]+", k) for k in keys), keys


def test_every_figure_of_the_quick_book_is_legible(build):
    """Issue 36: every figure the quick build wrote records, when saved, that it is legible
    (``meta.legibility`` empty: no text under 8 pt, no two texts overlapping, no legend, colour bar
    or boxed text over drawn data; see ``afw_book.legibility``)."""
    assert build.returncode == 0, build.log[-6000:]
    metas = {f.relative_to(build.repo / "figures").as_posix(): json.loads(f.read_text()).get("meta", {})
             for f in (build.repo / "figures").rglob("data/*.json")}
    checked = {rel: m["legibility"] for rel, m in metas.items() if "legibility" in m}
    assert len(checked) >= 20
    assert {rel: found for rel, found in checked.items() if found} == {}


def test_no_figure_text_is_smaller_than_four_fifths_of_the_axis_labels(build):
    """Consistent font sizes (issue 24), from the sizes every figure records when saved
    (``meta.font_pt``: smallest and largest text drawn): no legend, annotation or tick label below
    0.8 of the book's axis-label size, in any figure the quick build wrote."""
    from afw_book.figures import STYLE

    assert build.returncode == 0, build.log[-6000:]
    floor = 0.8 * STYLE["axes.labelsize"]
    metas = {f.relative_to(build.repo / "figures").as_posix(): json.loads(f.read_text()).get("meta", {})
             for f in (build.repo / "figures").rglob("data/*.json")}
    sized = {rel: m["font_pt"] for rel, m in metas.items() if m.get("font_pt")}
    assert len(sized) >= 20
    small = {rel: sizes for rel, sizes in sized.items() if sizes[0] < floor}
    assert small == {}, f"text smaller than {floor} pt: {small}"
