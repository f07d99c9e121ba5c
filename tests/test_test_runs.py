"""A test run that fails in many places, read through `bash` with a question: the view the
response budget leaves shows each distinct error, the first failure first, and the run's
verdict (real pytest runs, in a real pruner child)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import httpx
import pytest

from jeeves_mcp.pruning.engine import select_lines
from jeeves_mcp.pruning.engine._logs import is_error_line
from jeeves_mcp.pruning.render import trim_by_order
from tests._child import Child, tool_json
from tests.test_http import call

# A regression (a discount applied twice) that fails forty tests with long tracebacks, and a
# lookup that fails five more with another error, after them in the output.
FAILING_TESTS = '''
import pytest


def price(order):
    return round(order["amount"] * 0.9 * 0.9, 2)


def check(order, expected):
    got = price(order)
    assert got == expected, f"price of order {order['id']} is {got}"


@pytest.mark.parametrize("n", range(40))
def test_price(n):
    customer = {"name": f"customer {n}", "tier": "gold" if n % 2 else "silver"}
    lines = [{"sku": f"sku-{k}", "quantity": k + 1} for k in range(3)]
    amount = 100.0 + n
    order = {"id": n, "amount": amount, "customer": customer, "lines": lines}
    # the expected price has the discount once
    expected = round(amount * 0.9, 2)
    check(order, expected)


@pytest.mark.parametrize("n", range(5))
def test_lookup(n):
    stock = {"sku-0": 4}
    assert stock[f"sku-{n + 1}"] >= 0
'''

QUESTION = "which tests failed and why?"
# The text a view of command output starts from (PrunerConfig's response budget, less the result's fields).
RESPONSE_BUDGET = 9_000


def view(lines: list[str], question: str = QUESTION) -> list[str]:
    """The lines of a log's view at the response budget, as the pipeline cuts it."""
    selection = select_lines(lines, question, "logs", max_bytes=RESPONSE_BUDGET)
    kept = trim_by_order(lines, selection.keep, selection.order or [], RESPONSE_BUDGET) or selection.keep
    return [line for line, k in zip(lines, kept, strict=True) if k]


def run_root(workspace: Path) -> None:
    (workspace / "test_orders.py").write_text(FAILING_TESTS)


@pytest.mark.parametrize("verbosity", ["-q", "-v"])
async def test_a_failing_test_run_shows_each_error_and_its_verdict(
    verbosity: str, child: Child, workspace: Path
) -> None:
    """Ranked by records alone, such a run's view was a few whole failures or its summary of
    FAILED lines and showed neither the second kind of error nor, under -v, any error at all."""
    run_root(workspace)
    cmd = f"{sys.executable} -m pytest {verbosity} -p no:cacheprovider -p no:randomly -o addopts= test_orders.py"
    async with httpx.AsyncClient(headers=child.headers(), timeout=60) as http:
        result = tool_json(await call(http, child, "bash", {"cmd": cmd, "context_focus_question": QUESTION}))
    assert result["exit_code"] == 1 and result["pruning"]["applied"], result
    assert result["stdout_bytes"] > 40_000, result["stdout_bytes"]  # the response budget binds
    shown = result["stdout"]
    assert "E       AssertionError: price of order 0 is 81.0" in shown  # the first failure
    assert ">       assert got == expected" in shown  # the line that failed
    assert "E       KeyError: 'sku-1'" in shown  # the other error, after forty of the first kind
    assert "45 failed" in shown.rsplit("\n", 1)[-1]  # the verdict


def test_a_question_that_singles_out_errors_still_leads_the_view() -> None:
    """Errors first must not bury what the question asks about: of 300 diagnostics in ten
    files, the view of one file's errors shows them all, not the first files' in order."""
    files = ("models", "views", "forms", "db", "auth", "utils", "tasks", "api", "cache", "cli")
    lines = [f'src/app/{name}.py:{k * 7 + 3}: error: Argument {k % 3 + 1} to "call_{k}" has incompatible type '
             f'"str"; expected "int"  [arg-type]' for name in files for k in range(30)]
    lines.append("Found 300 errors in 10 files (checked 40 source files)")
    shown = view(lines, "what type errors does cli.py have?")
    assert sum(line.startswith("src/app/cli.py:") for line in shown) == 30, shown
    assert len(shown) < len(lines)  # the budget binds


# unittest's report follows its dots: tracebacks a test logs while the run goes on come first in
# the output, its failures after the first `=====` bar.
UNITTEST_FAILURES = '''
import logging
import unittest


def price(amount):
    return round(amount * 0.9 * 0.9, 2)


class Noisy(unittest.TestCase):
    def test_retries(self):
        for attempt in range(30):
            try:
                raise ConnectionError(f"attempt {attempt} refused by the mirror at port {8000 + attempt}")
            except ConnectionError:
                logging.exception("retrying the download")


class Prices(unittest.TestCase):
'''
# Sixty tests named apart, not by digits, failing alike; then one failing otherwise, last.
UNITTEST_FAILURES += "".join(
    f"    def test_price_{first}_{second}(self):\n        self.assertEqual(price(100), round(100 * 0.9, 2))\n\n"
    for first in ("cart", "order", "quote", "refund", "invoice", "basket") for second in
    ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa")
)
UNITTEST_FAILURES += "    def test_stock(self):\n        self.assertIn('sku-9', {'sku-0': 4})\n"


async def test_a_failing_unittest_run_shows_its_report_not_its_logged_noise(child: Child, workspace: Path) -> None:
    """Read in order, the errors of the run's logged tracebacks filled the view before the
    report's first FAIL; and an error is told once, whatever the names of the tests it fails."""
    (workspace / "test_prices.py").write_text(UNITTEST_FAILURES)
    cmd = f"{sys.executable} -m unittest test_prices"
    async with httpx.AsyncClient(headers=child.headers(), timeout=60) as http:
        result = tool_json(await call(http, child, "bash", {"cmd": cmd, "context_focus_question": QUESTION}))
    assert result["exit_code"] == 1 and result["pruning"]["applied"], result
    shown = result["stderr"]
    assert "FAIL: test_price_basket_alpha (test_prices.Prices.test_price_basket_alpha)" in shown, shown
    assert "AssertionError: 81.0 != 90.0" in shown, shown
    assert "AssertionError: 'sku-9' not found in {'sku-0': 4}" in shown, shown  # after sixty of the first kind
    assert "FAIL: test_stock (test_prices.Prices.test_stock)" in shown, shown  # under its title
    assert "FAILED (failures=61)" in shown
    # The logged tracebacks, alike but for their digits, come once; the report's repeats first.
    assert shown.count("ConnectionError: attempt") == 1, shown


# Node's own test runner (TAP when its output is no terminal): forty tests failing alike, then one
# failing otherwise, last.
NODE_FAILURES = """
const test = require('node:test');
const assert = require('node:assert');

function price(order) {
  return Math.round(order.amount * 0.9 * 0.9 * 100) / 100;
}

for (let n = 0; n < 40; n++) {
  test(`price of order ${n}`, () => {
    const order = { id: n, amount: 100 + n, lines: [{ sku: `sku-${n}`, quantity: n + 1 }] };
    // the expected price has the discount once
    assert.strictEqual(price(order), Math.round((100 + n) * 0.9 * 100) / 100, `price of order ${n}`);
  });
}

test('stock lookup', () => {
  const stock = new Map([['sku-0', 4]]);
  if (!stock.has('sku-1')) throw new RangeError('no stock entry for sku-1');
});
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
async def test_a_failing_node_test_run_shows_its_errors_and_its_count(child: Child, workspace: Path) -> None:
    """TAP's `not ok` blocks hold their error under a YAML `error:` key and its count is a
    `# fail` line before the tail: read by records alone, the view showed fourteen blocks of the
    first kind and no count."""
    (workspace / "orders.test.js").write_text(NODE_FAILURES)
    async with httpx.AsyncClient(headers=child.headers(), timeout=60) as http:
        result = tool_json(await call(http, child, "bash", {"cmd": "node --test orders.test.js",
                                                            "context_focus_question": QUESTION}))
    assert result["exit_code"] == 1 and result["pruning"]["applied"], result
    assert result["stdout_bytes"] > 25_000, result["stdout_bytes"]  # the response budget binds
    shown = result["stdout"]
    assert "not ok 1 - price of order 0" in shown and "81 !== 90" in shown, shown  # the first failure
    assert "error: 'no stock entry for sku-1'" in shown, shown  # the other error, after forty
    assert "# fail 41" in shown, shown  # the count


RECORDED = Path(__file__).resolve().parent / "data"


def recorded(name: str) -> list[str]:
    """The lines of a run recorded under tests/data (its README says how)."""
    return (RECORDED / name).read_text().split("\n")


def test_a_failing_jest_run_shows_its_first_failure_and_the_other_error() -> None:
    """jest's errors carry no word a log's errors were known by (`●` titles, `Expected:` and
    `Received:`, a `> 10 |` code frame): its view showed the list of failed tests and the last
    failures, not the first one's values (a real jest run, tests/data/README.md)."""
    shown = view(recorded("jest-41-failures.txt"))
    assert "  ● prices › order 0 is discounted once" in shown, shown
    assert "    Expected: 90" in shown and "    Received: 81" in shown, shown
    assert "    TypeError: Cannot read properties of undefined (reading 'quantity')" in shown, shown
    assert "Tests:       41 failed, 60 passed, 101 total" in shown, shown
    # The same assertion failing with other numbers is told once, not forty times.
    assert sum(line.lstrip().startswith("Expected:") for line in shown) < 10, shown


def test_a_failing_mocha_run_shows_its_count_and_its_first_failure() -> None:
    """mocha's `N failing` and its indented `AssertionError [ERR_ASSERTION]:` were no errors to
    the log layout: under its spec reporter the view held the progress list and the last two
    failures (a real mocha run, tests/data/README.md)."""
    shown = view(recorded("mocha-41-failures.txt"))
    assert "  41 failing" in shown, shown
    assert "       discounts order 0 once:" in shown and "81 !== 90" in shown, shown
    assert "     TypeError: Cannot read properties of undefined (reading 'quantity')" in shown, shown


@pytest.mark.parametrize("line", [
    "  ✔ when help for error then text is on stderr (0.54ms)",
    "ok 5 - when command variadic argument not last then error",
    "    ✓ should throw an error for a bad port (2 ms)",
    "tests/test_errors.py::test_error_message PASSED                  [ 10%]",
])
def test_a_test_reported_passed_is_no_error_whatever_its_name(line: str) -> None:
    """commander.js names 40 tests `... then error`: their pass lines were read as errors and
    filled a view before its failures."""
    assert not is_error_line(line)
    assert is_error_line(line.replace("✔", "✖").replace("ok 5", "not ok 5").replace("✓", "✕").replace("PASSED", "FAILED"))


def test_each_jest_failure_shown_shows_where_it_was_thrown() -> None:
    """Forty failures told apart by their values fill the view: each one shown keeps the `at`
    line under its code frame (four lines past the two kept around its last error line)."""
    lines = recorded("jest-40-distinct-failures.txt")
    shown = view(lines)
    assert len(shown) < len(lines)  # the budget binds
    titles = [k for k, line in enumerate(shown) if line.startswith("  ● labels › label of ")]
    assert len(titles) >= 5, shown
    for k in titles[:-1]:  # the last one shown may be where the budget cut
        assert "      at Object.toBe (labels.test.js:15:33)" in shown[k:k + 16], shown[k:k + 16]


def test_a_failing_vitest_run_shows_its_first_failure_whole_and_its_count() -> None:
    """vitest writes its reports at the margin: its `- Expected` diff header opened a report of its
    own, alike in every failure, so no diff was kept; the location (`❯ file:line`) is ten lines past
    the last error line; its count is above two lines of timings; and its one-line assertions,
    ranked by their error alone, led the view (a real vitest run, tests/data/README.md)."""
    shown = view(recorded("vitest-20-failures.txt"))
    first = shown.index(" FAIL  test/split.test.js > splitWords > splits amber basil coral")
    report = shown[first:first + 16]
    assert "- Expected" in report and '    "amber",' in report and '+   "",' in report, report
    assert " ❯ test/split.test.js:28:54" in report, report
    assert "      Tests  20 failed (20)" in shown, shown


def test_a_vitest_report_comes_before_the_errors_its_tests_logged() -> None:
    """vitest's report opens with a bar of `⎯`, which no log layout read as a separator: the
    thirty errors a passing test logged while the run went on came first and filled the view,
    and no failure was shown (a real vitest run, tests/data/README.md)."""
    shown = view(recorded("vitest-20-failures-logged-errors.txt"))
    first = shown.index(" FAIL  test/split.test.js > splitWords > splits amber basil coral")
    assert " ❯ test/split.test.js:28:54" in shown[first:first + 16], shown[first:first + 16]
    assert sum("mirror refused the connection" in line for line in shown) < 5, shown


def test_a_failing_go_test_run_shows_why_each_test_failed() -> None:
    """go test says why a test failed in a message of its own (`    labels_test.go:14: ...`), which
    holds no word a log's errors were known by: the view showed two of twenty, and the list of
    `--- FAIL:` lines that say only which (a real go test run, tests/data/README.md)."""
    lines = recorded("go-20-failures.txt")
    shown = view(lines)
    messages = [line for line in lines if line.startswith("    labels_test.go:14: ")]
    assert len(messages) == 20
    assert all(message in shown for message in messages), [m for m in messages if m not in shown]
    assert "FAIL\texample.com/labels\t0.003s" in shown
