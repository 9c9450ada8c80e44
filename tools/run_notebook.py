#!/usr/bin/env python
"""Execute one jupytext notebook of the book with papermill.

    python tools/run_notebook.py book/02-frank-wolfe.py [--preset quick] [-p gamma 0.3 ...] [-o OUT.ipynb]

* reads the py:percent source with jupytext (no .ipynb is committed);
* checks the preset name and every override against the chapter's declaration (the literal
  ``PARAMETERS`` of the cell tagged ``parameters``: type, accepted values and meaning of each
  parameter, read with ``ast``, no kernel) and stops *before* starting a kernel, with one line
  naming the parameter, the value given and what is accepted (exit status 2, no traceback);
  a notebook without a declaration has its names checked against the assignments of that cell;
* executes with papermill (working directory: the notebook's folder), writing the result
  atomically: the output file exists only if every cell ran without error, so ``make``
  never mistakes a failed run for an up-to-date one;
* records the wall time in ``<times-dir>/<name>.json`` for the execution report, with the
  figure files the notebook wrote (``figures``, relative to the figure folder), which
  ``make figures`` uses to re-execute the writer of a missing or altered figure;
* prints every figure file the run wrote; records the numbers the notebook quotes (its glued
  values, ``quoted``) in the execution record;
* ``--page DIR`` (or ``--rerun DIR``, which ``make notebook`` uses: the executed notebook, its
  record and its page in ``DIR/<name>/<tag>/``, the tag naming the preset and overrides, so that
  no rerun replaces another's) renders the executed notebook as a page of the book's theme, with
  the parameters and every quoted number beside the book's (``tools/rerun_page.py``);
* on failure prints the notebook name, the failing cell and its traceback, keeps the
  partially executed notebook in ``_build/failed/<name>.ipynb`` and exits with status 1.

Values given with ``-p`` are parsed as YAML, as papermill's own command line does:
``-p beta 12`` gives the int 12, ``-p gamma 0.3`` a float, ``-p kappas "[5, 7]"`` a list,
``-p label '"12"'`` the string "12".
"""
from __future__ import annotations

import argparse
import ast
import datetime as _dt
import json
import os
import platform
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def check_parameters(source: str, preset, overrides: dict) -> dict:
    """The overrides of one run, checked against the chapter source's declaration.

    With a ``PARAMETERS`` declaration (see ``afw_book.presets.read_declaration``): the preset
    must be one of the chapter's presets, every name declared, every value of its declared type
    and range (values come back as declared, e.g. ``-p gamma 1`` as the float 1.0), and what each
    parameter requires of the others (``afw_book.presets.check_requires``) holds for the run's values
    (the overrides over the preset's values written as literals in the source). Without one:
    the names must be assigned in the cell tagged ``parameters``.

    Raises
    ------
    ValueError
        One line naming the parameter, the value given and what is accepted.
    """
    from afw_book.presets import check_run, preset_values, read_declaration

    decl = read_declaration(source)
    if decl["parameters"]:
        names = decl["presets"]
        known = preset if isinstance(preset, str) and (names is None or preset in names) else None
        return check_run(decl, preset, overrides, preset_values(source, known))
    cell = source[_PARAMETERS_CELL.search(source).end():]
    cell = cell[cell.find("\n") + 1:]
    nxt = re.search(r"^# %%", cell, re.M)
    accepted = [n for n in _assigned(cell[:nxt.start()] if nxt else cell) if n != "preset"]
    names = decl["presets"]
    if preset is not None and names is not None and (not isinstance(preset, str) or preset not in names):
        raise ValueError(f"preset = {preset!r} is not accepted: expected one of {', '.join(names)}")
    unknown = sorted(set(overrides) - set(accepted))
    if unknown:
        raise ValueError(f"{unknown[0]} is not a parameter of this notebook: accepted parameters are "
                         f"{', '.join(sorted(accepted)) or '(none)'} and preset")
    return dict(overrides)


_PARAMETERS_CELL = re.compile(r"^# %%.*\btags=\[[^\]]*[\"']parameters[\"']", re.M)


def _assigned(code: str) -> list[str]:
    names = []
    for node in ast.parse(code).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def default_preset(nb) -> str | None:
    """The literal value of ``preset = ...`` in the cell tagged ``parameters`` (None if absent)."""
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            for node in ast.parse(cell.source).body:
                if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "preset"
                                                         for t in node.targets)):
                    try:
                        return ast.literal_eval(node.value)
                    except ValueError:
                        return None
    return None


def rerun_command(name: str, preset, overrides: dict) -> str:
    """``make notebook NB=<name> [PRESET=...] [ARGS="-p ..."]`` for this run."""
    import yaml

    words = [f"make notebook NB={name}"] + ([f"PRESET={preset}"] if preset not in (None, "paper") else [])
    if overrides:
        vals = []
        for k, v in overrides.items():
            text = yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("...").strip()
            vals.append(f"-p {k} " + (f"'{text}'" if any(c in text for c in " []{},") else text))
        words.append('ARGS="' + " ".join(vals) + '"')
    return " ".join(words)


def quoted_numbers(nb) -> dict:
    """The numbers (and short texts) the notebook glued for its prose: ``tools/rerun_page.py``."""
    from rerun_page import quoted_numbers as read

    return read(nb)


def kernel_config(socket_dir: str):
    """Kernels talk over Unix sockets in a private folder, not over TCP.

    No port (or socket name) can then be taken by another kernel started at the same moment
    (parallel builds, other test runs on the machine), which could leave a notebook waiting
    on a silent kernel or failing with "Invalid Signature"; and nothing listens on the network.
    """
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(socket_dir, "kernel")}})


def parse_overrides(pairs) -> dict:
    import yaml

    out = {}
    for name, raw in pairs or []:
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        out[name] = value
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", type=Path, help="book/NN-name.py (jupytext py:percent)")
    ap.add_argument("-o", "--output", type=Path, help="executed notebook (default: next to the source)")
    ap.add_argument("--preset", default=None, help="named preset, e.g. paper or quick")
    ap.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"),
                    help="override one parameter (value parsed as YAML); repeatable")
    ap.add_argument("--times-dir", type=Path, default=None,
                    help="where to record the wall time (default: <root>/_build/exec-times)")
    ap.add_argument("--failed-dir", type=Path, default=None,
                    help="where a failed notebook is kept (default: <root>/_build/failed)")
    ap.add_argument("--timeout", type=int, default=3600,
                    help="per-cell timeout in seconds (chapter 7's family sweep, one cell, took over 900 s "
                         "on a loaded 2-core machine from an empty cache)")
    ap.add_argument("--page", type=Path, default=None,
                    help="also render the executed notebook as a page of the book's theme into this folder "
                         "(tools/rerun_page.py: the parameters and quoted numbers beside the book's)")
    ap.add_argument("--book-times", type=Path, default=None,
                    help="the book's execution records, for its quoted numbers (default: <root>/_build/exec-times)")
    ap.add_argument("--rerun", type=Path, default=None, metavar="DIR",
                    help="make notebook: everything of this run in DIR/<name>/<tag>/ (the executed notebook, "
                         "its execution record and its page), <tag> naming the preset and the overrides")
    args = ap.parse_args(argv)

    src = args.source.resolve()
    if not src.is_file():
        print(f"run_notebook: no such notebook {args.source}", file=sys.stderr)
        return 2
    name = src.stem
    root = src.parent.parent  # <root>/book/<name>.py
    out = (args.output or src.with_suffix(".ipynb")).resolve()
    times_dir = (args.times_dir or root / "_build" / "exec-times").resolve()

    # Everything about the parameters is checked on the source text, before the (slow) imports
    # of jupytext and papermill and long before a kernel starts.
    params = parse_overrides(args.parameter)
    if "preset" in params:          # -p preset quick is --preset quick
        given = params.pop("preset")
        args.preset = given if args.preset is None else args.preset
    try:
        checked = check_parameters(src.read_text(), args.preset, params)
    except ValueError as err:
        print(f"run_notebook: {name}: {err}", file=sys.stderr)
        return 2
    params = dict(checked)
    if args.preset is not None:
        params["preset"] = args.preset
    command = rerun_command(name, args.preset, checked)
    if args.rerun is not None:
        sys.path.insert(0, str(root / "lib"))
        from afw_book.figures import run_tag

        words = {} if args.preset in (None, "paper") else {"preset": args.preset}
        run_dir = (args.rerun / name / (run_tag({**words, **checked}) or "book-parameters")).resolve()
        out = run_dir / f"{name}.ipynb"
        times_dir = run_dir
        args.page = run_dir

    import jupytext
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    # The names were checked against the declaration above; papermill looks for them among the
    # assignments of the parameters cell, which holds the declaration instead, and would warn.
    import logging

    logging.getLogger("papermill").addFilter(lambda rec: not rec.getMessage().startswith("Passed unknown parameter"))
    nb = jupytext.read(src)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp{os.getpid()}.ipynb")
    # SIGTERM (kill, make interrupted from outside) unwinds like Ctrl-C, so the handler below
    # removes the temporary notebook and papermill shuts the kernel down.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    env_backup = os.environ.get("ATTENTION_FW_EXEC_TIMES")
    os.environ["ATTENTION_FW_EXEC_TIMES"] = str(times_dir)
    socket_dir = tempfile.mkdtemp(prefix="afw-kernel-")
    write_log = Path(socket_dir) / "written.log"       # afw_book.figures appends to it
    log_backup = os.environ.get("ATTENTION_FW_WRITE_LOG")
    os.environ["ATTENTION_FW_WRITE_LOG"] = str(write_log)
    t0 = time.perf_counter()
    try:
        papermill.execute_notebook(nb, str(tmp), parameters=params, kernel_name="python3",
                                   cwd=str(src.parent), progress_bar=False, log_output=False,
                                   request_save_on_cell_execute=False,
                                   execution_timeout=args.timeout, config=kernel_config(socket_dir))
    except PapermillExecutionError as err:
        failed = (args.failed_dir or root / "_build" / "failed").resolve() / f"{name}.ipynb"
        failed.parent.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            os.replace(tmp, failed)
        tb = ANSI.sub("", "\n".join(err.traceback))
        print(f"\nrun_notebook: NOTEBOOK {name} FAILED in cell {err.cell_index} "
              f"(execution count {err.exec_count}) with preset={params.get('preset', 'default')}\n"
              f"--- cell source ---\n{err.source}\n--- traceback ---\n{tb}\n"
              f"--- partially executed notebook kept at {failed} ---", file=sys.stderr)
        return 1
    except Exception as err:  # a dead kernel, a timeout, a missing kernel...: still say which notebook
        if tmp.exists():
            tmp.unlink()
        print(f"\nrun_notebook: NOTEBOOK {name} FAILED ({type(err).__name__}: {err})", file=sys.stderr)
        return 1
    except BaseException:  # KeyboardInterrupt: leave no half-written output behind
        if tmp.exists():
            tmp.unlink()
        raise
    finally:
        written = write_log.read_text().splitlines() if write_log.exists() else []
        shutil.rmtree(socket_dir, ignore_errors=True)
        if log_backup is None:
            os.environ.pop("ATTENTION_FW_WRITE_LOG", None)
        else:
            os.environ["ATTENTION_FW_WRITE_LOG"] = log_backup
        if env_backup is None:
            os.environ.pop("ATTENTION_FW_EXEC_TIMES", None)
        else:
            os.environ["ATTENTION_FW_EXEC_TIMES"] = env_backup
    seconds = time.perf_counter() - t0

    # Drop the papermill timing metadata that changes on every run (keeps the page stable),
    # and the saved widget state: with it, myst-nb would load require.js and the widget
    # manager from a CDN, and the book must read offline. In the static book every widget
    # has a precomputed stand-in; the downloaded notebook re-creates its widgets when run.
    executed = nbformat.read(tmp, as_version=4)
    executed.metadata.pop("widgets", None)
    # What the page was computed with: the book's Sphinx extension (book/_ext/book_html.py)
    # puts a banner on every page whose preset is not "paper" or whose parameters were changed.
    executed.metadata["attention_fw_run"] = {
        "preset": params.get("preset", default_preset(nb)),
        "overrides": {k: v for k, v in params.items() if k != "preset"}}
    # Papermill's injected-parameters cell is bookkeeping, not part of the argument: it stays in
    # the downloadable notebook (a reader sees what was overridden) but never on the page.
    for cell in executed.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
    nbformat.write(executed, tmp)
    os.replace(tmp, out)

    figures_dir = Path(os.environ.get("ATTENTION_FW_FIGURES") or root / "figures").resolve()
    figures = sorted({Path(w).relative_to(figures_dir).as_posix() for w in written
                      if Path(w).is_relative_to(figures_dir)})
    times_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "notebook": name,
        "source": f"book/{src.name}",
        "preset": params.get("preset", "(notebook default)"),
        "overrides": {k: v for k, v in params.items() if k != "preset"},
        "seconds": round(seconds, 2),
        "cells": sum(c.cell_type == "code" for c in executed.cells),
        "finished_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "figures": figures,
        "quoted": quoted_numbers(executed),
    }
    (times_dir / f"{name}.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    def shown(path):
        path = Path(path).resolve()
        return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)

    print(f"run_notebook: {name} ({record['preset']}) executed in {seconds:.1f} s -> {shown(out)}")
    files = sorted({shown(w) for w in written if Path(w).is_file()})
    print(f"run_notebook: {name} wrote {len(files)} figure file(s)" + (":" if files else ""))
    for f in files:
        print(f"  {f}")
    if args.page is not None:
        from rerun_page import build

        try:
            page = build(out, args.page.resolve(), (args.book_times or root / "_build" / "exec-times").resolve(),
                         command, figures_dir)
        except RuntimeError as err:
            print(f"run_notebook: {name}: {err}", file=sys.stderr)
            return 1
        print(f"run_notebook: {name}: its page is {shown(page)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
