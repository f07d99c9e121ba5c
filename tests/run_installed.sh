#!/usr/bin/env bash
# The test suite against an installed jeeves-mcp, from outside the source tree.
#
#     tests/run_installed.sh PYTHON [PYTEST ARGS...]     # `make test-installed` calls it
#
# PYTHON is a venv's interpreter holding the wheel and its test extra. tests/ (and bench/,
# which tests/test_chaos.py imports) are copied to a temporary directory and run from there,
# so every `import jeeves_mcp` and every child (`python -m jeeves_mcp ...`) gets the installed
# package; conftest.py refuses to run if any of it comes from the tree. The tests that check
# the tree's own files (README, .ci/run, systemd units, Makefile) read them from
# JEEVES_SOURCE_TREE.
set -euo pipefail
python=$1
shift
tree=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/jeeves-installed-tests.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$tree/tests" "$work/tests"
mkdir "$work/bench" && cp "$tree"/bench/*.py "$work/bench/"
cp "$tree/pyproject.toml" "$work/"  # only for [tool.pytest.ini_options]
find "$work" -name __pycache__ -prune -exec rm -rf {} +
cd "$work"
JEEVES_SOURCE_TREE="$tree" JEEVES_TEST_INSTALLED=1 "$python" -m pytest -p no:cacheprovider "$@"
