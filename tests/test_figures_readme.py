"""``figures/README.md`` stays in sync with the figures the book actually generates.

Against the quick build (see ``bookbuild.py``) and the notebooks' own parameter cells:

* it describes every figure the build writes, and no other, each in the chapter whose notebook
  wrote it (from the execution records of ``tools/run_notebook.py``);
* every top-level key of each ``data/<name>.json`` is documented, and every key it documents
  exists in that file (at some depth);
* every "Redraw" command works: the ``make figure`` ones are run (into a temporary folder), the
  ``make notebook`` ones name the notebook's own parameters with values of the right type.
"""
from __future__ import annotations

import ast
import json
import math
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import yaml

import bookbuild
from afw_book import paper_figures as pf
from afw_book import presets

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "figures" / "README.md"
FIGURE_FILE = re.compile(r"\.(pdf|png|svg|json)$")


def parse_readme(text: str | None = None) -> dict[str, dict]:
    """figure name -> {"notebook", "Paper", "Shows", "Redraw", "Data"} from the README."""
    text = README.read_text() if text is None else text
    out, notebook = {}, None
    for block in re.split(r"\n(?=##+ )", text):
        head = block.split("\n", 1)[0]
        m = re.match(r"## .*\(`book/([\w-]+)\.py`\)", head)
        if m:
            notebook = m.group(1)
            continue
        m = re.match(r"### `([\w-]+)`$", head)
        if not m:
            continue
        assert m.group(1) not in out, f"{m.group(1)} is described twice"
        fields = {"notebook": notebook}
        for item in re.split(r"\n- ", "\n" + block.split("\n", 1)[1]):
            if ":" in item:
                key, value = item.split(":", 1)
                fields[key.strip()] = " ".join(value.split())
        out[m.group(1)] = fields
    return out


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    b = bookbuild.quick_book()
    assert b.returncode == 0, f"the quick book did not build:\n{b.log[-4000:]}"
    return b


def _generated(build) -> dict[str, set[str]]:
    """Figure name -> notebooks that wrote one of its files (canonical or custom)."""
    out: dict[str, set[str]] = {}
    for rec in (build.repo / "_build" / "exec-times").glob("*.json"):
        data = json.loads(rec.read_text())
        for rel in data.get("figures", []):
            if FIGURE_FILE.search(rel):
                out.setdefault(Path(rel).stem, set()).add(data["notebook"])
    return out


def _data_file(build, name: str) -> Path:
    for rel in (f"data/{name}.json", f"presets/quick/data/{name}.json", f"custom/data/{name}.json"):
        if (build.repo / "figures" / rel).is_file():
            return build.repo / "figures" / rel
    raise AssertionError(f"no data file for {name}")


def _all_keys(obj) -> set[str]:
    keys: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            keys |= {k} | _all_keys(v)
    elif isinstance(obj, list):
        for v in obj[:50]:
            keys |= _all_keys(v)
    return keys


def _parameters(notebook: str) -> tuple[list[str], dict]:
    """Names of the notebook's parameters cell, and the paper values of its presets."""
    import jupytext

    from afw_book.presets import read_declaration

    source = (ROOT / "book" / f"{notebook}.py").read_text()
    declared = read_declaration(source)["parameters"]
    if declared:      # a chapter that declares its parameters (PARAMETERS): those names, and preset
        names = ["preset", *declared]
    else:
        nb = jupytext.read(ROOT / "book" / f"{notebook}.py")
        cell = next(c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", []))
        names = [n.targets[0].id for n in ast.parse(cell.source).body if isinstance(n, ast.Assign)]
    values: dict = {}
    tree = ast.parse(Path(ROOT / "book" / f"{notebook}.py").read_text())
    # the chapter's own imports and the constants defined before its presets: presets may name them
    namespace: dict = {"np": np, "math": math}
    first = next((i for i, node in enumerate(tree.body) if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id.startswith("PRESETS") for t in node.targets)), 0)
    before = [node for node in tree.body[:first] if isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign))]
    exec(compile(ast.Module(body=before, type_ignores=[]), notebook, "exec"), namespace)  # noqa: S102
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.startswith("PRESETS")
                                                for t in node.targets):
            values.update(eval(ast.unparse(node.value), namespace)["paper"])  # noqa: S307
    return names, values


def common_keys(text: str | None = None) -> set[str]:
    """Top-level keys the README documents once for every data file (its "**Every data file**" paragraph)."""
    text = README.read_text() if text is None else text
    m = re.search(r"\*\*Every data file\*\*(.*?)(?:\n\n|$)", text, re.S)
    assert m, "figures/README.md: no '**Every data file**' paragraph"
    return {t for t in re.findall(r"`([^`]+)`", m.group(1).split(":", 1)[0])}


def test_every_generated_figure_is_described_in_its_chapter(build):
    described = parse_readme()
    generated = _generated(build)
    assert sorted(described) == sorted(generated), (sorted(set(described) ^ set(generated)))
    for name, fields in described.items():
        assert fields["notebook"] in generated[name], (name, fields["notebook"], generated[name])
        for key in ("Paper", "Shows", "Redraw", "Data"):
            assert fields.get(key), f"{name}: no '{key}:' line"


def test_the_data_keys_are_those_of_the_files(build):
    described = parse_readme()
    names = set(described)
    for name, fields in described.items():
        data = json.loads(_data_file(build, name).read_text())
        tokens = re.findall(r"`([^`]+)`", fields["Data"])
        # "as `figure1`": that figure's keys too
        tokens += [t for ref in tokens if ref in names and ref != name
                   for t in re.findall(r"`([^`]+)`", described[ref]["Data"])]
        literal = {t for t in tokens if re.fullmatch(r"[\w-]+", t)}
        patterns = [re.compile(re.sub(r"<[^>]+>", ".+", re.escape(t).replace(r"\<", "<").replace(r"\>", ">")) + "$")
                    for t in tokens if "<" in t]
        undocumented = [k for k in data if k not in literal | common_keys()
                        and not any(p.match(k) for p in patterns)]
        assert undocumented == [], f"{name}: keys of data/{name}.json not in figures/README.md: {undocumented}"
        params = set(_parameters(fields["notebook"])[0])
        unknown = sorted(t for t in literal if t not in _all_keys(data) and t not in names and t not in params)
        assert unknown == [], f"{name}: figures/README.md documents keys that data/{name}.json lacks: {unknown}"


def test_every_redraw_command_works(tmp_path):
    for name, fields in parse_readme().items():
        cmds = re.findall(r"`(make [^`]+)`", fields["Redraw"])
        assert len(cmds) == 1, f"{name}: one command expected in {fields['Redraw']!r}"
        argv = shlex.split(cmds[0])
        assert argv[:2] in (["make", "figure"], ["make", "notebook"]), cmds[0]
        opts = dict(a.split("=", 1) for a in argv[2:])
        if argv[1] == "figure":
            args = shlex.split(opts["ARGS"])
            assert args[0] == name, cmds[0]
            assert pf.main([*args, "--outdir", str(tmp_path / name)]) == 0, cmds[0]
            assert (tmp_path / name / f"{name}.pdf").is_file() and (tmp_path / name / "data" / f"{name}.json").is_file()
            continue
        assert opts["NB"] == fields["notebook"], cmds[0]
        args = shlex.split(opts.get("ARGS", ""))
        assert len(args) % 3 == 0 and args[::3] == ["-p"] * (len(args) // 3), cmds[0]
        names, paper = _parameters(opts["NB"])
        for pname, raw in zip(args[1::3], args[2::3]):
            assert pname in names, f"{name}: {opts['NB']} has no parameter {pname!r}"
            value = yaml.safe_load(raw)
            assert presets._type_ok(paper[pname], value), f"{name}: {pname}={raw} is not of the type of {paper[pname]!r}"
