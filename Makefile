# jeeves-mcp developer targets. Everything runs from the project's own .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev test lint conformance bench run pruner clean

dev: $(STAMP)

# constraints.txt pins the versions the tests ran with (the venv systemd runs is this one).
$(STAMP): pyproject.toml setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

# The suite's time is mostly spent waiting on the processes it starts: two workers halve it.
TEST_WORKERS ?= 2

test: dev
	$(BIN)/pytest -q -n $(TEST_WORKERS)

# mypy checks the package as it is installed: supervisor/ and cli/ linked in as
# jeeves_mcp.supervisor and jeeves_mcp.cli under .lint/.
lint: dev
	$(BIN)/ruff check .
	rm -rf .lint && mkdir -p .lint && cp -rs "$(CURDIR)/jeeves_mcp" .lint/jeeves_mcp
	rm -rf .lint/jeeves_mcp/supervisor .lint/jeeves_mcp/cli __pycache__
	ln -s "$(CURDIR)/supervisor" .lint/jeeves_mcp/supervisor && ln -s "$(CURDIR)/cli" .lint/jeeves_mcp/cli
	cd .lint && ../$(BIN)/mypy --config-file ../pyproject.toml -p jeeves_mcp

# The artefact, not the tree: build the sdist and wheel, install the wheel alone into a
# fresh venv and run the smoke test from outside the source tree.
.PHONY: dist smoke-installed test-installed
dist: dev
	rm -rf dist && $(BIN)/python -m build --outdir dist . >/dev/null
	@ls dist

smoke-installed: dist
	rm -rf .installed && $(PYTHON) -m venv .installed
	.installed/bin/python -m pip install --quiet -c constraints.txt dist/jeeves_mcp-*.whl
	away="$$(mktemp -d)" && trap 'rm -rf "$$away"' EXIT && cd "$$away" && \
	    PATH="$(CURDIR)/.installed/bin:$$PATH" $(CURDIR)/.installed/bin/python $(CURDIR)/tests/smoke_installed.py

# The whole suite against the wheel: a fresh venv holding the wheel and its test extra (nothing
# editable), the tests run from a copy outside the tree. PYTEST_ARGS picks tests, e.g. -x -k install.
test-installed: dist
	rm -rf .installed-test && $(PYTHON) -m venv .installed-test
	.installed-test/bin/python -m pip install --quiet -c constraints.txt "$$(ls dist/jeeves_mcp-*.whl)[test]"
	tests/run_installed.sh "$(CURDIR)/.installed-test/bin/python" -q -n $(TEST_WORKERS) $(PYTEST_ARGS)

conformance: dev
	tests/conformance/run.sh

bench: dev
	$(BIN)/python bench/tools_http.py
	$(BIN)/python bench/daemon.py
	$(BIN)/python bench/prune_quality.py
	$(BIN)/python bench/prune_speed.py

# Long runs, out of `make test` (tests/test_chaos.py is the short version).
.PHONY: chaos load
chaos: dev
	$(BIN)/python bench/chaos.py
	$(BIN)/python bench/process_trees.py

load: dev
	$(BIN)/python bench/load.py

# 10,000 generated cases per target (/mcp both eras, /rpc, stdio, control API); `make test` runs 100.
.PHONY: fuzz
fuzz: dev
	JEEVES_FUZZ_EXAMPLES=10000 $(BIN)/pytest -q -s -p no:cacheprovider tests/test_fuzz.py

# The main job: the supervisor daemon with the built-in pruning engine.
# ARGS: daemon flags, e.g. ARGS="--state-dir /tmp/jm --socket /tmp/jm/control.sock" (README).
run: dev
	$(BIN)/jeeves-mcp daemon $(ARGS)

# One pruner child by hand, rooted at the current directory.
pruner: dev
	$(BIN)/jeeves-mcp pruner --root .

clean:
	rm -rf $(VENV) .conformance .pytest_cache .ruff_cache *.egg-info .lint .installed .installed-test dist build

# systemd units into $(SYSTEMD_DIR) with this venv's jeeves-mcp in ExecStart.
# WORKSPACES: where run roots live (space-separated); the service may write only there,
# in its state dir and in /tmp. Example: sudo make install-systemd WORKSPACES=/srv/runs
SYSTEMD_DIR ?= /etc/systemd/system
SYSUSERS_DIR ?= /etc/sysusers.d
SYSUSERS ?= systemd-sysusers
WORKSPACES ?= /srv/jeeves/workspaces
JEEVES_MCP_BIN ?= $(abspath $(BIN))/jeeves-mcp
SYSTEMCTL ?= systemctl

.PHONY: install-systemd uninstall-systemd

install-systemd:
	@test -x $(JEEVES_MCP_BIN) || { echo "no $(JEEVES_MCP_BIN): run 'make dev' first (or set JEEVES_MCP_BIN)"; exit 2; }
	@# The units as `jeeves-mcp systemd-units` fills them in (one rule for ProtectHome= and the rest).
	@units="$$(mktemp -d)" && trap 'rm -rf "$$units"' EXIT && \
	$(JEEVES_MCP_BIN) systemd-units --out "$$units" --bin $(JEEVES_MCP_BIN) $(addprefix --workspace ,$(WORKSPACES)) >/dev/null && \
	mkdir -p $(SYSTEMD_DIR) $(SYSUSERS_DIR) && \
	install -m 0644 "$$units/jeeves-mcp.service" "$$units/jeeves-mcp.socket" $(SYSTEMD_DIR)/ && \
	install -m 0644 "$$units/jeeves-mcp.sysusers" $(SYSUSERS_DIR)/jeeves-mcp.conf && \
	protect="$$(sed -n 's/^ProtectHome=//p' "$$units/jeeves-mcp.service")" && \
	echo "installed $(SYSTEMD_DIR)/jeeves-mcp.service and jeeves-mcp.socket (ExecStart=$(JEEVES_MCP_BIN) daemon, ProtectHome=$$protect), user jeeves-mcp in $(SYSUSERS_DIR)/jeeves-mcp.conf"
	@if [ -d /run/systemd/system ]; then $(SYSUSERS) $(SYSUSERS_DIR)/jeeves-mcp.conf && $(SYSTEMCTL) daemon-reload; fi
	@# The service runs as jeeves-mcp: it must be able to run the venv. Each run's commands run as
	@# the owner of its run root (README: isolation), so run roots belong to the runs' own users.
	@if id jeeves-mcp >/dev/null 2>&1 && ! runuser -u jeeves-mcp -- test -x $(JEEVES_MCP_BIN) 2>/dev/null; then \
	  echo "note: user jeeves-mcp cannot run $(JEEVES_MCP_BIN) (a venv under /root?): install it where it can, e.g. /opt (README: Installing without the source tree)"; fi
	@for dir in $(WORKSPACES); do \
	  if ! test -d $$dir; then echo "note: workspace dir $$dir does not exist; create it (sudo install -d -m 0755 $$dir) and give each run a root in it owned by that run's user"; \
	  elif id jeeves-mcp >/dev/null 2>&1 && [ "$$(stat -c %U $$dir)" = jeeves-mcp ]; then \
	    echo "note: $$dir belongs to jeeves-mcp: run roots that jeeves-mcp owns run their commands as jeeves-mcp, which can read every run's token; give each run a root owned by its own user"; fi; done
	@echo "next: sudo systemctl enable --now jeeves-mcp.socket   (starts the daemon on first use)"
	@echo "  or: sudo systemctl enable --now jeeves-mcp.service  (starts it now and at boot)"

uninstall-systemd:
	@if [ -d /run/systemd/system ]; then $(SYSTEMCTL) disable --now jeeves-mcp.socket jeeves-mcp.service || true; fi
	rm -f $(SYSTEMD_DIR)/jeeves-mcp.service $(SYSTEMD_DIR)/jeeves-mcp.socket $(SYSUSERS_DIR)/jeeves-mcp.conf
	@if [ -d /run/systemd/system ]; then $(SYSTEMCTL) daemon-reload; fi
	@echo "removed the units; slot records and logs stay in /var/lib/jeeves-mcp (rm -rf it to forget them)"
