"""``make figures`` heals the figures folder (in the quick build's scratch copy, see bookbuild.py).

* every file of the manifest has the notebook that wrote it on record
  (``_build/figures-state.json``, from the execution records of ``tools/run_notebook.py``);
* a deleted figure and a hand-edited one are restored, byte for byte, by re-executing only
  their writers, and ``make figures`` names them;
* after ``rm -rf figures``, ``make figures`` restores every file with the manifest's hashes.

Each test leaves the folder as it found it (that is what it checks), so the other tests that
share the build are not disturbed.
"""
from __future__ import annotations

import json
import re
import shutil

import pytest

import bookbuild
import figrun

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    b = bookbuild.quick_book(tmp_path_factory.mktemp("book"))
    assert b.returncode == 0, f"the quick book did not build:\n{b.log[-4000:]}"
    return b


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


def test_a_deleted_and_an_edited_figure_are_restored_and_named(build):
    repo, figures = build.repo, build.repo / "figures"
    before = figrun.files(figures)
    state = json.loads((repo / "_build" / "figures-state.json").read_text())["files"]
    single = sorted(rel for rel, item in state.items() if len(item["notebooks"]) == 1)
    deleted = next(rel for rel in single if rel.endswith(".pdf"))
    writer = state[deleted]["notebooks"][0]
    edited = next(rel for rel in single if rel.endswith(".json") and state[rel]["notebooks"][0] != writer)
    (figures / deleted).unlink()
    with open(figures / edited, "a") as fh:
        fh.write("hand edit\n")
    proc = bookbuild.make(repo, "figures", "PRESET=quick")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"restored figures/{deleted} (missing; re-executed {writer})" in proc.stderr, proc.stderr
    assert f"restored figures/{edited} (altered; re-executed {state[edited]['notebooks'][0]})" in proc.stderr
    # only the two writers ran (and the execution report, which reads their times)
    assert _executed(proc) == sorted({writer, state[edited]["notebooks"][0], "reproducibility"})
    assert figrun.files(figures) == before
    # healed: the next run has nothing to do
    again = bookbuild.make(repo, "figures", "PRESET=quick")
    assert again.returncode == 0 and _executed(again) == [] and "restored" not in again.stderr


def test_rm_rf_figures_then_make_figures_restores_every_file(build):
    repo, figures = build.repo, build.repo / "figures"
    manifest_text = (figures / "MANIFEST.sha256").read_text()
    before = {rel: data for rel, data in figrun.files(figures).items() if not rel.startswith("custom/")}
    shutil.rmtree(figures)
    proc = bookbuild.make(repo, "figures", "PRESET=quick")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (figures / "MANIFEST.sha256").read_text() == manifest_text
    after = {rel: data for rel, data in figrun.files(figures).items() if not rel.startswith("custom/")}
    assert after == before
    restored = re.findall(r"^make figures: restored figures/(\S+) \(missing", proc.stderr, re.M)
    assert sorted(restored) == sorted(_manifest(figures))
