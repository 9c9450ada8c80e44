# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# (reproducibility)=
# # Reproducibility and execution report
#
# Everything in this book is regenerated from source by two commands on a machine with
# Python 3.11 and `make`:
#
# ```bash
# make book              # .venv, every notebook once, figures/, _build/html
# make book PRESET=quick # the same in seconds, small parameters (the tests use it)
# ```
#
# **What runs.** Each chapter is a [jupytext](https://jupytext.readthedocs.io) text file
# `book/NN-name.py` (py:percent format: plain Python that diffs cleanly, imports into an
# editor, and opens as a notebook in Jupyter). `tools/run_notebook.py` executes it once with
# [papermill](https://papermill.readthedocs.io), with the chosen preset, into
# `book/NN-name.ipynb`; Jupyter Book renders those executed notebooks with execution turned
# off. `make` re-executes a notebook only when its source, the library `lib/`,
# `requirements.txt` or the preset changed, so a rebuild with nothing changed executes nothing.
# A failing cell stops the build with the notebook's name and the cell's traceback.
#
# **Figures.** Every figure goes through the one function `afw_book.figures.save`,
# which writes `figures/<name>.pdf` (for papers), `.png` and `.svg` (for the web) and the
# numbers behind the figure in `figures/data/<name>.json`. The files are byte-reproducible
# (no dates or versions in the metadata); `figures/MANIFEST.sha256` lists the SHA-256 of each,
# so `cd figures && sha256sum -c MANIFEST.sha256` checks that a regeneration gave the same bytes.
#
# **Your own parameters.** Any parameter a chapter declares (its first cell lists them, with what
# each accepts) can be overridden for one run, which writes the executed copy and its page to
# `_build/custom/<chapter>/<what changed>-<hash>/` and its figures to `figures/custom/` under
# names that carry the parameters (the book's own files, and other runs', are left alone):
#
# ```bash
# make notebook NB=02-frank-wolfe ARGS="-p gamma 0.3"
# make notebook NB=01-model PRESET=quick ARGS="-p betas '[1.0, 5.0, 25.0]'"
# ```
#
# An unknown preset, an unknown parameter name or a value outside its declaration is rejected
# before a kernel starts, with one line naming the parameter, the value and what is accepted.

# %% tags=["parameters", "remove-cell"]
preset = "paper"  # no tunable parameters here; the preset is recorded for the report

# %% tags=["hide-input"]
import json
import os
import platform
from pathlib import Path

from IPython.display import Markdown, display

from afw_book import paths
from afw_book.presets import resolve

PRESETS = {"paper": {}, "quick": {}}
p = resolve(PRESETS, preset)
times_dir = Path(
    os.environ.get("ATTENTION_FW_EXEC_TIMES", paths.BUILD / "exec-times")
)
records = sorted(
    (json.loads(f.read_text()) for f in times_dir.glob("*.json")),
    key=lambda r: r["notebook"],
)
records = [r for r in records if r["notebook"] != "reproducibility"]

# %% [markdown]
# ## Execution report
#
# Wall time of the last papermill execution of each notebook (kernel start included), as
# recorded by `tools/run_notebook.py` in `_build/exec-times/`. A notebook that did not need
# re-executing keeps the time of its last run.

# %% tags=["hide-input"]
def _fmt_overrides(r):
    return ", ".join(f"`{k}={v!r}`" for k, v in r["overrides"].items()) or "none"


rows = [
    "| notebook | preset | overrides | code cells | wall time (s) | finished (UTC) |",
    "| --- | --- | --- | ---: | ---: | --- |",
]
for r in records:
    day, clock = r["finished_utc"].split(" ")
    rows.append(
        f"| {r['notebook']} | {r['preset']} | {_fmt_overrides(r)} | {r['cells']} "
        f"| {r['seconds']:.1f} | {clock} ({day}) |"
    )
total = sum(r["seconds"] for r in records)
rows.append(f"| **total** | | | | **{total:.1f}** | |")
machine = records[0]["machine"] if records else platform.machine()
display(
    Markdown(
        "\n".join(rows)
        + f"\n\nMachine: {machine}; Python {platform.python_version()}."
    )
)

# %% [markdown]
# ## Environment and pins
#
# `requirements.txt` pins every package, direct or indirect, to an exact version
# (`make freeze` regenerates it from the short list in `tools/requirements.in`). The
# versions that matter most for the numbers and the pages, as imported by the kernel that
# executed this page:

# %% tags=["hide-input"]
import importlib.metadata as md

key = [
    "numpy", "numba", "llvmlite", "scipy", "POT", "matplotlib", "shapely", "papermill",
    "jupytext", "jupyter-book", "myst-nb", "Sphinx", "sphinxcontrib-bibtex",
    "sphinx-mathjax-offline", "ipywidgets",
]
rows = ["| package | version |", "| --- | --- |"]
rows += [f"| {name} | {md.version(name)} |" for name in key]
pins = [
    line
    for line in (paths.ROOT / "requirements.txt").read_text().splitlines()
    if "==" in line and not line.startswith("#")
]
from attention_fw.model import _kernels

display(
    Markdown(
        "\n".join(rows)
        + f"\n\n({len(pins)} exact pins in `requirements.txt`.) The short passes of "
        f"the batched steps ran as **{_kernels.backend()}** kernels "
        "(`ATTENTION_FW_KERNELS=numpy` selects their numpy versions; numba compiles "
        "for the machine's CPU, so, like BLAS, it may round the last bits differently "
        "on another processor)."
    )
)

# %% [markdown]
# ## Regenerating a figure with other parameters
#
# | figure | one command | writes |
# | --- | --- | --- |
# | Figure 2 with $\kappa = 6$ | `make figure ARGS="figure2 --kappas 6"` | `figures/custom/figure2--kappas-6-<hash>.*` |
# | Figure 1 for an ICML column, paper-ready | `make figure ARGS="figure1 --style icml --width column --paper-ready"` | `figures/custom/figure1-paper-ready-icml-column.*` |
# | Figure 2 for an ICML paper | `make figure ARGS="figure2 --style icml --usetex"` | `figures/custom/figure2-icml-tex.*` |
# | any paper figure, other parameters | `make figure ARGS="--help"` lists figures and options | `figures/custom/` |
# | any chapter's figures, own parameters | `make notebook NB=<chapter> ARGS="-p <name> <value>"` | `_build/custom/<chapter>/<tag>/` (notebook and page), `figures/custom/` |
# | the whole book, quick | `make book PRESET=quick` | `book/*.ipynb`, `figures/presets/quick/`, `_build/html` |
#
# The accepted parameters of a chapter are those it declares in its cell tagged `parameters`
# (type, accepted values, meaning); each takes the value of the preset unless it is given. The
# {ref}`figure gallery <gallery>` gives the exact command behind every figure of the book.
