"""``make figures`` heals the figures folder (in a private copy of the quick build, see bookbuild.py).

* every file of the manifest has the notebook that wrote it on record
  (``_build/figures-state.json``, from the execution records of ``tools/run_notebook.py``);
* a deleted figure and a hand-edited one are restored, byte for byte, by re-executing only
  their writers, and ``make figures`` names them;
* after ``rm -rf figures``, ``make figures`` restores every file with the manifest's hashes.

Each test leaves the folder as it found it (that is what it checks). The tests work on their own
copy of the session's build (``bookbuild.private_copy``, taken as soon as its figures step is done),
so that the tests reading the shared build in other workers meanwhile never see a figure missing.
"""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

import bookbuild
import figrun

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def build(quick_figures, tmp_path_factory):
    """A private copy of the quick build's figures step (the HTML is not needed here)."""
    assert quick_figures.returncode == 0, f"make figures PRESET=quick failed:\n{quick_figures.log[-4000:]}"
    return bookbuild.private_copy(quick_figures, tmp_path_factory.mktemp("heal"))


def _manifest(figures):
    return dict(reversed(line.split("  ", 1)) for line in (figures / "MANIFEST.sha256").read_text().splitlines())


def _executed(proc):
    return sorted(set(re.findall(r"run_notebook\.py book/([\w-]+)\.py", proc.stdout)))


def test_every_figure_has_its_writer_on_record(build):
    repo = build.repo
    state = json.loads((repo / "_build" / "figures-state.json").read_text())
    manifest = _manifest(repo / "figures")
    assert state["preset"] == "quick"
    assert {rel: item["sha256"] for rel, item in state["files"].items()} == manifest
    sources = {p.stem: p.read_text() for p in bookbuild.chapter_sources(repo)}
    for rel, item in state["files"].items():
        assert item["notebooks"] and set(item["notebooks"]) <= set(sources), rel
        # where a figure's name is written in exactly one notebook, that notebook is its writer
        stem = rel.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        naming = [nb for nb, text in sources.items() if re.search(rf"[\"']{re.escape(stem)}[\"']", text)]
        if len(naming) == 1:
            assert naming[0] in item["notebooks"], (rel, naming, item["notebooks"])


# The chapters re-executed from nothing by the test below: two of the cheapest writers of figures, of
# two kinds (figures, an animation, widgets' stand-ins and glued numbers; a sweep through the sweep
# layer's cache), so that ``make test`` stays within its time (issue 36). ``HEAL_CHAPTERS=all``
# re-executes every chapter (about 160 CPU-s more), as ``make test-full`` does.
HEAL_CHAPTERS = ("01-model", "06-context-length")


def _heal_chapters(state) -> set[str]:
    chosen = os.environ.get("HEAL_CHAPTERS", "").strip()
    if chosen == "all":
        return {nb for item in state.values() for nb in item["notebooks"]}
    return set(chosen.split(",")) if chosen else set(HEAL_CHAPTERS)


def test_rm_rf_figures_then_make_figures_restores_every_file_and_names_it(build, tmp_path):
    """``rm -rf figures``, then the files put back but those of the chosen chapters (every chapter
    with ``HEAL_CHAPTERS=all``); of the last chosen chapter, every file but one PDF is put back,
    and one of its data files with a hand edit. ``make figures`` re-executes the chosen chapters
    only (one make for the three kinds of damage: a folder gone, a file deleted, a file edited),
    writes the same bytes, the manifest included, and names every file it restored with why and
    by which notebook; the next ``make figures`` has nothing to do."""
    repo, figures = build.repo, build.repo / "figures"
    manifest_text = (figures / "MANIFEST.sha256").read_text()
    before = figrun.files(figures)          # the quick preset writes everything under presets/quick/
    assert before and all(rel.startswith("presets/quick/") or rel == "MANIFEST.sha256" for rel in before)
    state = json.loads((repo / "_build" / "figures-state.json").read_text())["files"]
    chosen = _heal_chapters(state)
    writers = {nb for item in state.values() for nb in item["notebooks"]}
    assert chosen <= writers, f"not writers of any figure: {sorted(chosen - writers)}"
    # the last chosen chapter that alone writes a PDF and a data file loses the PDF and gets the data
    # file edited
    def own(nb):
        return sorted(rel for rel, item in state.items() if item["notebooks"] == [nb])

    last = max((nb for nb in chosen if any(r.endswith(".pdf") for r in own(nb))
                and any(r.endswith(".json") for r in own(nb))), default=None)
    assert last is not None, f"none of {sorted(chosen)} alone writes a PDF and a data file"
    deleted = next(rel for rel in own(last) if rel.endswith(".pdf"))
    edited = next(rel for rel in own(last) if rel.endswith(".json"))
    # a file is removed for good if one of its writers is re-executed (but the last chapter's files)
    others = chosen - {last}
    removed = sorted({rel for rel, item in state.items() if set(item["notebooks"]) & others} | {deleted})
    assert set(before) - {"MANIFEST.sha256"} - set(removed), "nothing is put back: the test would be vacuous"
    kept = tmp_path / "kept"
    shutil.copytree(figures, kept)
    shutil.rmtree(figures)
    for rel in before:
        if rel not in removed and rel != "MANIFEST.sha256":
            (figures / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(kept / rel, figures / rel)
    with open(figures / edited, "a") as fh:
        fh.write("hand edit\n")
    proc = bookbuild.make(repo, "figures", "PRESET=quick")
    assert proc.returncode == 0, proc.stderr[-4000:]
    # only the chosen chapters ran (and the execution report, which reads their times)
    assert _executed(proc) == sorted(chosen | {"reproducibility"})
    assert (figures / "MANIFEST.sha256").read_text() == manifest_text
    assert figrun.files(figures) == before
    restored = re.findall(r"^make figures: restored figures/(\S+) \(missing", proc.stderr, re.M)
    assert sorted(restored) == removed
    assert f"restored figures/{deleted} (missing; re-executed {last})" in proc.stderr, proc.stderr
    assert f"restored figures/{edited} (altered; re-executed {last})" in proc.stderr, proc.stderr
    # healed: the next run has nothing to do
    again = bookbuild.make(repo, "figures", "PRESET=quick")
    assert again.returncode == 0 and _executed(again) == [] and "restored" not in again.stderr


def _manifest_tool(root):
    """tools/figure_manifest.py loaded from a copy under ``root`` (its _build/ is then root's)."""
    import importlib.util

    (root / "tools").mkdir(parents=True)
    shutil.copy(bookbuild.ROOT / "tools" / "figure_manifest.py", root / "tools")
    spec = importlib.util.spec_from_file_location("figure_manifest_copy", root / "tools" / "figure_manifest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_heal_plan_names_each_damaged_file_and_only_its_writer(tmp_path, capsys):
    """Without make or notebooks: records of two notebooks, then a deletion, an edit, a file no
    notebook writes any more, and a preset change."""
    fm = _manifest_tool(tmp_path)
    fig = tmp_path / "figures"
    (fig / "data").mkdir(parents=True)
    for rel in ("a.pdf", "b.pdf", "data/a.json", "old.pdf", "README.md"):
        (fig / rel).write_text(rel)
    fm.TIMES.mkdir(parents=True)
    fm.PRESET_TAG.write_text("paper\n")
    (fig / "custom" / "data").mkdir(parents=True)
    (fig / "custom" / "data" / "c.json").write_text("c")               # a quick-preset file
    for nb, files in (("01-x", ["a.pdf", "data/a.json"]), ("02-y", ["b.pdf", "custom/data/c.json"])):
        (fm.TIMES / f"{nb}.json").write_text(json.dumps({"notebook": nb, "preset": "paper", "figures": files}))
    fm.write(fig)
    assert "README.md" not in (fig / "MANIFEST.sha256").read_text()
    capsys.readouterr()
    assert fm.heal(fig, "paper", ["01-x", "02-y"]) == 0
    assert capsys.readouterr().out.strip() == ""                       # nothing damaged
    (fig / "a.pdf").unlink()
    (fig / "b.pdf").write_text("edited")
    (fig / "old.pdf").unlink()
    (fig / "custom" / "data" / "c.json").unlink()
    fm.heal(fig, "paper", ["01-x", "02-y"])
    out, err = capsys.readouterr()
    assert out.split() == ["-W", "book/01-x.py", "-W", "book/02-y.py"]
    assert "figures/a.pdf is missing: re-executing 01-x" in err
    assert "figures/b.pdf is altered: re-executing 02-y" in err
    assert "figures/custom/data/c.json is missing: re-executing 02-y" in err
    assert "figures/old.pdf is missing, but no notebook writes it any more" in err
    # the writers run again: the manifest step names what they restored
    (fig / "a.pdf").write_text("a.pdf")
    (fig / "b.pdf").write_text("b.pdf")
    (fig / "custom" / "data" / "c.json").write_text("c")
    fm.write(fig)
    err = capsys.readouterr().err
    assert "restored figures/a.pdf (missing; re-executed 01-x)" in err
    assert "restored figures/b.pdf (altered; re-executed 02-y)" in err
    assert "restored figures/custom/data/c.json (missing; re-executed 02-y)" in err
    assert not fm.HEAL.exists()
    # another preset: make re-executes everything anyway, nothing to plan
    (fig / "a.pdf").unlink()
    fm.heal(fig, "quick", ["01-x", "02-y"])
    assert capsys.readouterr().out.strip() == ""
    # no record beyond the manifest: a damaged file of unknown origin re-executes every notebook
    fm.STATE.unlink()
    for rec in fm.TIMES.glob("*.json"):
        rec.unlink()
    fm.heal(fig, "paper", ["01-x", "02-y"])
    out, err = capsys.readouterr()
    assert out.split() == ["-W", "book/01-x.py", "-W", "book/02-y.py"] and "every notebook" in err
