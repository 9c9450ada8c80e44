# Every target creates the virtual environment .venv from requirements.txt when it is
# missing or older than requirements.txt / lib/pyproject.toml.
SHELL      := /bin/bash
PYTHON     ?= python3.11
VENV       := .venv
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed

.PHONY: all venv test bench clean freeze figures-paper
all: book

$(STAMP): requirements.txt lib/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip==26.3
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $@

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

# Speed belongs here, not in the tests. Each tools/bench_*.py prints its own table.
bench: $(STAMP)
	@for f in tools/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# The paper's Figures 1-4 from exact geometry (figures/ + figures/data/), without the notebooks.
figures-paper: $(STAMP)
	$(PY) -m attention_fw.paper_figures all

clean:
	rm -rf _build book/*.ipynb .pytest_cache .hypothesis

# Re-resolve the exact pins from tools/requirements.in (needs the package index).
freeze:
	rm -rf _build/freeze-venv
	$(PYTHON) -m venv _build/freeze-venv
	_build/freeze-venv/bin/pip install --quiet -r tools/requirements.in
	{ head -2 requirements.txt; _build/freeze-venv/bin/pip freeze --exclude-editable; echo "-e ./lib"; } > requirements.txt.new
	mv requirements.txt.new requirements.txt
