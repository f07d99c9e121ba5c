# jeeves-mcp developer targets. Everything runs from the project's own .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev test lint conformance bench run pruner clean

dev: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: dev
	$(BIN)/pytest -q

lint: dev
	$(BIN)/ruff check .

conformance: dev
	tests/conformance/run.sh

bench: dev
	$(BIN)/python bench/tools_http.py
	$(BIN)/python bench/daemon.py
	$(BIN)/python bench/prune_quality.py
	$(BIN)/python bench/prune_speed.py

# The main job: the supervisor daemon with the built-in pruning engine.
run: dev
	$(BIN)/jeeves-mcp daemon

# One pruner child by hand, rooted at the current directory.
pruner: dev
	$(BIN)/jeeves-mcp pruner --root .

clean:
	rm -rf $(VENV) .conformance .pytest_cache .ruff_cache *.egg-info
