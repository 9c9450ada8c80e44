"""What makes the repository a citable, publishable product.

* ``CITATION.cff`` is valid against the Citation File Format 1.2.0 schema (``check-jsonschema``,
  pinned, with the schema it ships: no network), cites this book and lists the paper; the
  intro's "How to cite" gives the same two works in BibTeX;
* the licence files exist and say which folders are code (BSD-3-Clause) and which are prose
  and figures (CC-BY-4.0);
* ``.github/workflows/book.yml`` does what the book needs (test, build, upload the HTML as a
  Pages artifact, deploy from main only, with the least permissions) and ``actionlint`` and
  ``zizmor --offline`` (both pinned, from PyPI) report nothing on it, while they do report a
  deliberately broken workflow.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

import figrun

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
SHA = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def _tool(name: str) -> str:
    """A console script of the pinned environment (the venv that runs the tests)."""
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    assert found, f"{name} is not installed: it is pinned in requirements.txt (run `make venv`)"
    return found


def _offline(cmd: list[str]) -> list[str]:
    """Run without network where the machine allows it (a fresh network namespace)."""
    return ["unshare", "-n", *cmd] if figrun.unshare_works() else cmd


# ------------------------------------------------------------------------------ citation
def _check_cff(path: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = figrun.guarded_env(dict(__import__("os").environ), tmp_path / "guard")
    proc = subprocess.run(_offline([_tool("check-jsonschema"), "--builtin-schema", "vendor.citation-file-format",
                                    str(path)]), capture_output=True, text=True, timeout=600, env=env)
    log = tmp_path / "guard" / "attempts.log"
    assert not log.exists() or log.read_text() == "", f"check-jsonschema tried the network: {log.read_text()}"
    return proc


def test_citation_cff_is_valid_against_the_cff_1_2_0_schema(tmp_path):
    import check_jsonschema.builtin_schemas.vendor as vendor

    schema = json.loads((Path(vendor.__file__).parent / "citation-file-format.json").read_text())
    assert schema["$id"].endswith("/1.2.0/schema.json")
    proc = _check_cff(ROOT / "CITATION.cff", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the check can fail: a licence that is not an SPDX identifier, a missing title
    bad = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    bad["license"] = "BSD-ish"
    del bad["title"]
    (tmp_path / "CITATION.cff").write_text(yaml.safe_dump(bad, allow_unicode=True))
    proc = _check_cff(tmp_path / "CITATION.cff", tmp_path)
    assert proc.returncode != 0 and "title" in proc.stdout + proc.stderr


def _bib_entries(text: str) -> dict[str, dict[str, str]]:
    out = {}
    for key, body in re.findall(r"@\w+\{([\w:-]+),(.*?)\n\}", text, re.S):
        out[key] = {k.lower(): v.strip() for k, v in re.findall(r"^\s*(\w+)\s*=\s*\{(.*)\},?\s*$", body, re.M)}
    return out


def test_citation_cites_the_book_and_the_paper_as_the_intro_and_the_bibliography_do():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["title"] == config["title"]
    assert cff["license"] == ["BSD-3-Clause", "CC-BY-4.0"]
    (paper,) = cff["references"]
    assert [a["family-names"] for a in paper["authors"]] == ["Alcalde", "Geshkovski", "Ruiz-Balet"]
    assert "2508.09628" in paper["url"]
    bib = _bib_entries((ROOT / "book" / "references.bib").read_text())["alcalde2025attention"]
    assert bib["eprint"] == "2508.09628" and int(bib["year"]) == paper["year"]
    # the intro ends with "How to cite": BibTeX for the book and for the paper
    intro = (ROOT / "book" / "intro.md").read_text()
    section = intro.split("\n## How to cite\n", 1)
    assert len(section) == 2, "book/intro.md has no '## How to cite' section"
    blocks = re.findall(r"```bibtex\n(.*?)```", section[1], re.S)
    assert len(blocks) == 1
    entries = _bib_entries(blocks[0])
    assert len(entries) == 2
    book = next(e for e in entries.values() if "reproduction" in e["title"])
    cited = next(e for e in entries.values() if e.get("eprint") == "2508.09628")
    assert book["title"].replace("{", "").replace("}", "").replace("--", "-") == cff["title"]
    assert cited["author"] == bib["author"] and cited["title"] == bib["title"]
    assert "CITATION.cff" in section[1] and "BSD-3-Clause" in section[1] and "CC-BY-4.0" in section[1]


# ------------------------------------------------------------------------------ licences
def test_licence_files_say_which_folders_are_code_and_which_are_prose_and_figures():
    code = (ROOT / "LICENSE").read_text()
    prose = (ROOT / "LICENSE-CC-BY-4.0").read_text()
    assert "BSD 3-Clause License" in code and "Redistribution and use in source and binary forms" in code
    assert "Creative Commons Attribution 4.0 International Public License" in prose
    assert all(f"Section {k}" in prose for k in range(1, 9))        # the whole legal code
    code_part = code.split("Prose and figures:")[0]
    for folder in ("lib/", "tools/", "tests/", ".github/", "Makefile"):
        assert folder in code_part, folder
        assert (ROOT / folder.rstrip("/")).exists(), folder
    for folder in ("book/", "figures/"):
        assert folder in prose and folder in code.split("Prose and figures:")[1], folder
    readme = (ROOT / "README.md").read_text()
    assert "BSD-3-Clause" in readme and "CC-BY-4.0" in readme and "LICENSE" in readme


# ------------------------------------------------------------------------------ workflow
def test_workflow_tests_builds_uploads_and_deploys_from_main_only():
    wf = yaml.safe_load(WORKFLOW.read_text())
    on = wf[True] if True in wf else wf["on"]         # YAML 1.1 reads the key `on` as True
    assert on["push"]["branches"] == ["main"] and "pull_request" in on
    assert wf["permissions"] == {}
    build, deploy = wf["jobs"]["build"], wf["jobs"]["deploy"]
    assert build["runs-on"].startswith("ubuntu") and deploy["runs-on"].startswith("ubuntu")
    assert build["permissions"] == {"contents": "read"}
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    steps = build["steps"]
    setup = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"] == {"python-version": "3.11"}
    # the caches are those the Makefile fills: uv's downloads and the encoder's files, keyed by the pins
    cache = next(s for s in steps if s.get("uses", "").startswith("actions/cache@"))
    assert cache["with"]["path"].split() == ["~/.cache/uv", "~/.cache/attention_fw"]
    assert "hashFiles('requirements.txt')" in cache["with"]["key"]
    assert steps.index(cache) < next(k for k, s in enumerate(steps) if s.get("run") == "make test")
    runs = [s["run"] for s in steps if "run" in s]
    assert runs == ["make test", "make book"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == "_build/html"
    assert deploy["needs"] == "build"
    assert deploy["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]
    uses = [s["uses"] for job in wf["jobs"].values() for s in job["steps"] if "uses" in s]
    assert uses and all(SHA.match(u) for u in uses), f"actions not pinned by commit: {uses}"


BROKEN = """\
name: broken
on: [push, pull_request_target]
permissions: write-all
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.pull_request.title }}" && echo ${{ github.nope }}
"""


def _lint(path: Path) -> dict[str, subprocess.CompletedProcess]:
    # -shellcheck= -pyflakes=: actionlint would run these when installed; the lint must not
    # depend on what else the machine has.
    return {
        "actionlint": subprocess.run(_offline([_tool("actionlint"), "-shellcheck=", "-pyflakes=", "-no-color",
                                               str(path)]), capture_output=True, text=True, timeout=600),
        "zizmor": subprocess.run(_offline([_tool("zizmor"), "--offline", "--persona=auditor", "--no-progress",
                                           str(path)]), capture_output=True, text=True, timeout=600),
    }


def test_actionlint_and_zizmor_report_nothing_on_the_workflow(tmp_path):
    for tool, proc in _lint(WORKFLOW).items():
        assert proc.returncode == 0 and (tool != "actionlint" or proc.stdout == ""), \
            f"{tool} reports:\n{proc.stdout}\n{proc.stderr}"
    assert "No findings to report" in _lint(WORKFLOW)["zizmor"].stdout
    # both can fail: a broken workflow gets findings from each
    bad = tmp_path / ".github" / "workflows" / "broken.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(BROKEN)
    res = _lint(bad)
    assert res["actionlint"].returncode != 0 and "nope" in res["actionlint"].stdout
    assert res["zizmor"].returncode != 0 and "unpinned" in res["zizmor"].stdout + res["zizmor"].stderr


# ------------------------------------------------------------------------------ README
def test_readme_layout_lists_every_module_and_tool():
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    modules = sorted(p.stem for package in ("attention_fw", "afw_book") for p in (ROOT / "lib" / package).rglob("*.py")
                     if p.stem not in ("__init__", "__main__") and "__pycache__" not in p.parts)
    tools = sorted(p.name for p in (ROOT / "tools").iterdir() if p.is_file() and not p.name.startswith("."))
    missing = [m for m in modules if f"`{m}`" not in layout] + [t for t in tools if f"`{t}`" not in layout]
    assert missing == [], f"README.md's layout table does not name: {missing}"
    assert "https://<owner>.github.io/<repository>/" in readme and "make serve" in readme
