"""The built-in pruning engine: invariants of select_lines and guess_source_type."""

from __future__ import annotations

import math
import re
import resource
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jeeves_mcp.pruning.engine import (
    Around,
    PruneTimeout,
    Selection,
    guess_source_type,
    select_lines,
)
from jeeves_mcp.pruning.engine._line_refs import named_lines
from jeeves_mcp.pruning.render import (
    numbered_line_bytes,
    pruned_rows,
    rows_text,
    text_bytes,
    trim_by_order,
)

PY_SOURCE = '''\
#!/usr/bin/env python3
"""Inventory helpers."""

import json
import os
from dataclasses import dataclass


@dataclass
class Item:
    name: str
    qty: int


class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, qty):
        self.items[name] = self.items.get(name, 0) + qty

    def remove_stock(self, name, qty):
        left = self.items[name] - qty
        if left < 0:
            raise ValueError("not enough stock")
        self.items[name] = left

    def total(self):
        return sum(self.items.values())


def load_inventory(path):
    with open(path) as f:
        data = json.load(f)
    inv = Inventory()
    for row in data:
        inv.add(row["name"], row["qty"])
    return inv


def render_report(inv):
    lines = []
    for name, qty in sorted(inv.items.items()):
        lines.append(f"{name}: {qty}")
    return "\\n".join(lines)


def parse_color(text):
    text = text.strip().lstrip("#")
    red = int(text[0:2], 16)
    green = int(text[2:4], 16)
    blue = int(text[4:6], 16)
    return red, green, blue


def save_report(report, directory):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "report.txt"), "w") as f:
        f.write(report)
'''

JS_SOURCE = """\
import fs from 'node:fs';

export class Cart {
  constructor() {
    this.items = [];
  }

  addItem(item) {
    this.items.push(item);
  }

  totalPrice() {
    let sum = 0;
    for (const item of this.items) {
      sum += item.price * item.quantity;
    }
    return sum;
  }
}

function formatCurrency(amount) {
  const cents = Math.round(amount * 100);
  return `$${(cents / 100).toFixed(2)}`;
}

function readConfigFile(path) {
  const raw = fs.readFileSync(path, 'utf8');
  return JSON.parse(raw);
}

function sendEmailNotification(user, message) {
  const body = `Hello ${user.name}, ${message}`;
  return mailer.send(user.email, body);
}
"""

LOG = "\n".join(
    [f"2025-01-01 12:00:{i % 60:02d} INFO worker: processed batch {i}" for i in range(120)]
    + [
        "Traceback (most recent call last):",
        '  File "job.py", line 12, in <module>',
        "    main()",
        '  File "job.py", line 9, in main',
        "    return total / count",
        "ZeroDivisionError: division by zero",
    ]
    + [f"2025-01-01 12:01:{i:02d} INFO cleanup step {i}" for i in range(30)]
)

DOC = """\
# Project

Intro paragraph about the project and what it does.

## Installation

Install the package with pip and make sure the compiler is present.

```bash
pip install project
# a comment inside the fence
make build
```

## Configuration

Settings live in a TOML file next to the executable.
Each key maps to an environment variable.

## Usage

Run the command with a file argument.
It prints a summary of the records in that file.

## License

MIT.
"""


def kept(text: str, sel: Selection) -> list[str]:
    return [line for line, k in zip(text.split("\n"), sel.keep, strict=True) if k]


def lines_of(text: str, *needles: str) -> list[int]:
    return [i for i, line in enumerate(text.split("\n")) if any(n in line for n in needles)]


def test_shape_and_reasons():
    lines = PY_SOURCE.split("\n")
    sel = select_lines(lines, "parse a hex color string into red green blue", "code")
    assert len(sel.keep) == len(sel.reasons) == len(lines)
    assert any(not k for k in sel.keep)
    for k, r in zip(sel.keep, sel.reasons, strict=True):
        if k:
            assert r is None
        else:
            assert r and r.startswith("hors focus") and "\n" not in r


def test_code_recall_on_python_function():
    lines = PY_SOURCE.split("\n")
    sel = select_lines(lines, "parse a hex color string into red green blue", "code")
    start = lines_of(PY_SOURCE, "def parse_color")[0]
    body = range(start, start + 6)
    assert all(sel.keep[i] for i in body)
    assert not any(sel.keep[i] and lines[i].strip() for i in range(*_block(lines, "def render_report")))


def _block(lines: list[str], head: str) -> tuple[int, int]:
    a = next(i for i, x in enumerate(lines) if head in x)
    b = a + 1
    while b < len(lines) and (not lines[b].strip() or lines[b].startswith(" ")):
        b += 1
    return a + 1, b  # body lines only


def test_code_keeps_imports_header_and_enclosing_signatures():
    lines = PY_SOURCE.split("\n")
    sel = select_lines(lines, "remove stock quantity not enough", "code")
    text = kept(PY_SOURCE, sel)
    assert "import json" in text and "import os" in text
    assert text[0].startswith("#!")
    assert "class Inventory:" in text
    assert "    def remove_stock(self, name, qty):" in text
    assert '            raise ValueError("not enough stock")' in text


def test_code_other_language_by_indentation():
    lines = JS_SOURCE.split("\n")
    sel = select_lines(lines, "format an amount of money as currency", "code", path="cart.js")
    text = kept(JS_SOURCE, sel)
    assert "function formatCurrency(amount) {" in text
    assert "  return `$${(cents / 100).toFixed(2)}`;" in text
    assert "import fs from 'node:fs';" in text
    assert "  return mailer.send(user.email, body);" not in text


def test_method_in_js_class_keeps_class_line():
    lines = JS_SOURCE.split("\n")
    sel = select_lines(lines, "total price of the items times quantity", "code", path="cart.js")
    text = kept(JS_SOURCE, sel)
    assert "export class Cart {" in text
    assert "      sum += item.price * item.quantity;" in text


def test_logs_keep_traceback_and_error():
    lines = LOG.split("\n")
    sel = select_lines(lines, "why did the job crash?", "logs")
    text = kept(LOG, sel)
    assert "ZeroDivisionError: division by zero" in text
    assert "Traceback (most recent call last):" in text
    assert "    return total / count" in text
    assert sum(sel.keep) < len(lines) / 2


def test_logs_error_lines_kept_even_off_topic():
    lines = LOG.split("\n")
    sel = select_lines(lines, "which batch numbers were processed by the worker", "logs")
    assert "ZeroDivisionError: division by zero" in kept(LOG, sel)


def test_docs_keep_headings_and_relevant_section():
    lines = DOC.split("\n")
    sel = select_lines(lines, "where do the settings live, toml environment variable", "docs")
    text = kept(DOC, sel)
    for h in ("# Project", "## Installation", "## Configuration", "## Usage", "## License"):
        assert h in text
    assert "Settings live in a TOML file next to the executable." in text


def _manual(sections: list[tuple[str, str]]) -> str:
    out = ["# Manual", ""]
    for title, topic in sections:
        out += [f"## {title}", ""]
        out += [f"Line {k} of this part talks about {topic} and nothing else." for k in range(12)]
        out.append("")
    return "\n".join(out)


def test_docs_clear_winner_kept_alone_close_candidates_together():
    """Docs keep sections by their chance of being the one asked about: one section when it
    stands out, several when the question fits them about equally."""
    topics = [
        ("Alpha", "networking"),
        ("Beta", "storage"),
        ("Gamma", "printing"),
        ("Delta", "scheduling"),
        ("Epsilon", "billing"),
        ("Zeta", "logging"),
        ("Eta", "caching"),
        ("Theta", "routing"),
        ("Iota", "mailing"),
        ("Kappa", "search"),
        ("Lambda", "exports"),
        ("Mu", "imports"),
    ]
    text = _manual(topics)
    lines = text.split("\n")
    body = [i for i, x in enumerate(lines) if x.startswith("Line ")]

    def kept_topics(question: str) -> set[str]:
        sel = select_lines(lines, question, "docs")
        return {t for _, t in topics for i in body if sel.keep[i] and t in lines[i]}

    assert kept_topics("how does printing work") == {"printing"}
    close = _manual(
        [(t, f"{topic} quota") if t in ("Beta", "Eta") else (t, topic) for t, topic in topics]
    )
    lines = close.split("\n")
    body = [i for i, x in enumerate(lines) if x.startswith("Line ")]
    assert {"storage", "caching"} <= kept_topics("what quota applies")


def test_docs_fenced_block_kept_or_pruned_whole():
    lines = DOC.split("\n")
    fence = [i for i, x in enumerate(lines) if x.startswith("```")]
    a, b = fence[0], fence[1]
    for q in (
        "install with pip make build",
        "license",
        "usage summary of records",
        "comment inside",
    ):
        sel = select_lines(lines, q, "docs", max_prune_ratio=0.9)
        block = sel.keep[a : b + 1]
        assert all(block) or not any(block), q


def test_fenced_block_whole_when_fill_back_reaches_it():
    lines = DOC.split("\n")
    fence = [i for i, x in enumerate(lines) if x.startswith("```")]
    a, b = fence[0], fence[1]
    for ratio in (0.2, 0.4, 0.5, 0.6, 0.7):
        sel = select_lines(lines, "license", "docs", max_prune_ratio=ratio)
        block = sel.keep[a : b + 1]
        assert all(block) or not any(block), ratio


@pytest.mark.parametrize("source_type,text", [("code", PY_SOURCE), ("logs", LOG), ("docs", DOC)])
@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.3, 0.5, 0.9, 1.0])
def test_max_prune_ratio_is_a_bound(source_type, text, ratio):
    lines = text.split("\n")
    sel = select_lines(lines, "zebra giraffe unrelated words", source_type, max_prune_ratio=ratio)
    pruned = sel.keep.count(False)
    assert pruned <= math.floor(len(lines) * ratio + 1e-9)


@pytest.mark.parametrize("source_type,text", [("code", PY_SOURCE), ("logs", LOG), ("docs", DOC)])
def test_min_keep_lines(source_type, text):
    lines = text.split("\n")
    for m in (0, 5, 40, len(lines), len(lines) + 10):
        sel = select_lines(lines, "parse color", source_type, min_keep_lines=m, max_prune_ratio=1.0)
        assert sum(sel.keep) >= min(m, len(lines))


def test_no_prune_block_kept():
    src = PY_SOURCE.replace(
        "def save_report(report, directory):",
        "# ⟦NO_PRUNE_BEGIN⟧\nSECRET_RULE = 'keep me'\n# ⟦NO_PRUNE_END⟧\n\ndef save_report(report, directory):",
    )
    lines = src.split("\n")
    sel = select_lines(lines, "parse a hex color", "code")
    text = kept(src, sel)
    assert (
        "# ⟦NO_PRUNE_BEGIN⟧" in text
        and "SECRET_RULE = 'keep me'" in text
        and "# ⟦NO_PRUNE_END⟧" in text
    )


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_empty_question_keeps_everything(question):
    lines = PY_SOURCE.split("\n")
    sel = select_lines(lines, question, "code")
    assert all(sel.keep) and all(r is None for r in sel.reasons)


def test_deterministic():
    for source_type, text in (("code", PY_SOURCE), ("logs", LOG), ("docs", DOC)):
        lines = text.split("\n")
        runs = {
            tuple(select_lines(lines, "parse color report crash", source_type).keep)
            for _ in range(3)
        }
        assert len(runs) == 1


def test_deadline_passed_raises():
    with pytest.raises(PruneTimeout):
        select_lines(PY_SOURCE.split("\n"), "parse color", "code", deadline=time.monotonic() - 1)


def test_empty_input():
    assert select_lines([], "anything", "code") == Selection([], [])
    assert select_lines([""], "anything", "logs").keep == [True]


def test_broken_python_falls_back_to_indentation():
    src = PY_SOURCE.replace("def total(self):", "def total(self)")  # a syntax error
    lines = src.split("\n")
    sel = select_lines(lines, "parse a hex color string into red green blue", "code", path="x.py")
    assert "    blue = int(text[4:6], 16)" in kept(src, sel)


def test_unknown_source_type_rejected():
    with pytest.raises(ValueError):
        select_lines(["a"], "q", "poetry")


@settings(max_examples=60, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(
            [*list("ab \n\t#`=-:()_{}E"), "def ", "class ", "```", "⟦NO_PRUNE_BEGIN⟧", "error"]
        ),
        max_size=200,
    ).map("".join),
    source_type=st.sampled_from(["code", "logs", "docs"]),
    ratio=st.floats(0, 1),
    min_keep=st.integers(0, 30),
)
def test_invariants_hold_on_arbitrary_text(text, source_type, ratio, min_keep):
    lines = text.split("\n")
    sel = select_lines(
        lines, "a b def", source_type, max_prune_ratio=ratio, min_keep_lines=min_keep
    )
    assert len(sel.keep) == len(lines)
    assert sel.keep.count(False) <= math.floor(len(lines) * ratio + 1e-9)
    assert sum(sel.keep) >= min(min_keep, len(lines))


@pytest.mark.parametrize(
    "path,text,want",
    [
        ("README.md", "# Title\n", "docs"),
        ("docs/guide.rst", "Title\n=====\n", "docs"),
        ("notes.txt", "hello", "docs"),
        ("src/app.py", "print(1)\n", "code"),
        ("main.go", "package main\n", "code"),
        ("build.log", "ok\n", "logs"),
        (None, "def f():\n    return 1\n\nclass A:\n    pass\n", "code"),
        (
            None,
            'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: x\n',
            "logs",
        ),
        (None, "# Title\n\nSome text here.\n\n## Section\n\n- item one\n- item two\n", "docs"),
        (None, "2025-01-01 12:00:00 INFO start\n2025-01-01 12:00:01 ERROR boom\n", "logs"),
        (None, "", "logs"),
    ],
)
def test_guess_source_type(path, text, want):
    assert guess_source_type(path, text) == want


FILLER_WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


@pytest.mark.parametrize("source_type", ["code", "logs", "docs"])
def test_one_matching_line_in_unstructured_text_is_kept_and_the_rest_pruned(source_type):
    filler = [" ".join(FILLER_WORDS[(i * 7 + k) % len(FILLER_WORDS)] for k in range(8)) for i in range(200)]
    lines = [*filler[:120], "keep this special needle", *filler[120:]]
    sel = select_lines(lines, "special needle", source_type)
    assert sel.keep[120]
    assert sum(sel.keep) < len(lines) * 0.6


def _blocks_of(keep):
    blocks, i = [], 0
    while i < len(keep):
        if keep[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(keep) and not keep[j + 1]:
            j += 1
        blocks.append((i, j))
        i = j + 1
    return blocks


def test_no_code_marker_hides_less_than_it_costs():
    source = big_module()
    lines = source.split("\n")
    sel = select_lines(lines, "where is the config file parsed and its settings returned?", "code")
    assert any(not k for k in sel.keep)
    for a, b in _blocks_of(sel.keep):
        hidden = sum(len(lines[i]) + len(str(i + 1)) + 5 for i in range(a, b + 1))
        assert hidden > 110, (a, b, lines[a : b + 1])


def test_no_file_listing_marker_hides_less_than_it_costs():
    """A log's short gaps stay hidden (its noise), but a listing's are paths an agent can use,
    cheaper shown than a marker."""
    dirs = ("src/shop", "src/ledger", "tests/unit", "docs/guide")
    listing = [f"./{dirs[k % 4]}/{word}_{k}.py" for k, word in
               enumerate(["refund", "cart", "refund", "order", "price", "tax"] * 40)]
    sel = select_lines(listing, "where is a card refund added?", "logs", max_bytes=10240)
    assert any(not k for k in sel.keep)
    for a, b in _blocks_of(sel.keep):
        hidden = sum(len(listing[i]) + len(str(i + 1)) + 5 for i in range(a, b + 1))
        assert hidden > 110, (a, b, listing[a : b + 1])


def test_a_file_listing_marker_names_the_directories_it_hides() -> None:
    """`find`'s paths hidden behind a marker: it names their directories (most relevant first),
    so that an agent knows which part of the tree to recover."""
    dirs = [f"src/pkg{k}" for k in range(12)]
    listing = [f"./{d}/mod{n:02d}.py" for d in dirs for n in range(15)]
    listing[100] = "./src/pkg6/refund.py"
    sel = select_lines(listing, "where is a card refund added?", "logs", max_bytes=10240)
    assert sel.keep[100] and not all(sel.keep)
    for a, b in _blocks_of(sel.keep):
        hidden = {listing[i].removeprefix("./").rsplit("/", 1)[0] + "/" for i in range(a, b + 1)}
        named = re.fullmatch(r"hors focus: ([^,]+)(?:, ([^,]+?))?(?: \+(\d+))?", sel.reasons[a] or "")
        assert named is not None, sel.reasons[a]
        shown = {name for name in named.groups()[:2] if name}
        assert shown <= hidden and len(shown) + int(named.group(3) or 0) == len(hidden), (shown, hidden)


def test_a_name_ls_recursive_lists_is_shown_under_its_directory() -> None:
    """`ls -R` names a file under its directory's `./dir:` heading: a kept name brings the
    heading along, or the agent sees `refund.py` and not where it is."""
    listing = [".:", "src", "", "./src:"] + [f"pkg{k}" for k in range(12)]
    for k in range(12):
        listing += ["", f"./src/pkg{k}:"] + [f"mod{n:02d}.py" for n in range(15)]
    at = listing.index("./src/pkg7:") + 9
    listing[at] = "refund.py"
    sel = select_lines(listing, "where is a card refund added?", "logs", max_bytes=10240)
    assert sel.keep[at] and sel.keep[listing.index("./src/pkg7:")] and not all(sel.keep)


def test_head_of_several_files_shows_a_kept_line_under_its_file() -> None:
    """`head -n 40 a.py b.py ...` prints each file under `==> path <==`: a kept line comes with
    its file's header, and a marker names the files whose lines it hides."""
    output: list[str] = []
    for k in range(8):
        body = [f"SETTING_{k}_{n} = {n}" for n in range(40)]
        if k == 5:
            body[30] = "raise RefundError('a card refund was added twice')"
            body[33] = body[36] = "CARD_REFUND = CARD_REFUND + 1  # card refund"
        output += ([""] if output else []) + [f"==> src/shop/mod{k}.py <=="] + body
    at = output.index("raise RefundError('a card refund was added twice')")
    sel = select_lines(output, "where is a card refund added twice?", "logs", max_bytes=10240)
    assert sel.keep[at] and sel.keep[output.index("==> src/shop/mod5.py <==")] and not all(sel.keep)
    assert any(r and "src/shop/mod" in r for r in sel.reasons)
    for a, b in _blocks_of(sel.keep):  # a file's lines, not a log's noise: no marker costs more
        assert sum(len(output[i]) + len(str(i + 1)) + 5 for i in range(a, b + 1)) > 110, (a, b)


def test_a_marker_names_the_units_it_hides():
    lines = big_module().split("\n")
    sel = select_lines(lines, "where is the config file parsed and its settings returned?", "code")
    reasons = {r for r in sel.reasons if r}
    assert any(re.fullmatch(r"hors focus: Store\.helper_\d+, Store\.helper_\d+ \+\d+", r) for r in reasons), reasons
    assert all("\n" not in r and len(r) < 120 for r in reasons)


def test_a_marker_names_the_units_it_hides_most_relevant_first():
    # Blocks often hide a unit the question almost matched; named first, it is the one an
    # agent sees and recovers. Units of equal relevance keep the file's order.
    from jeeves_mcp.pruning.engine._markers import block_reasons
    from jeeves_mcp.pruning.engine._units import Layout, Unit

    units = [Unit(3 * k, 3 * k + 2, f"def f{k}") for k in range(6)]
    scores = [5.0, 0.0, 0.5, 0.0, 2.0, 0.0]
    keep = [k < 3 for k in range(18)]  # f0 kept, f1..f5 hidden in one block
    reasons = block_reasons(Layout(units, set()), scores, keep)
    assert reasons[3:] == ["hors focus: def f4, def f2 +3"] * 15
    assert block_reasons(Layout(units, set()), [0.0] * 6, keep)[3] == "hors focus: def f1, def f2 +3"


def test_a_view_over_budget_keeps_the_lines_ranked_first():
    lines = big_module().split("\n")
    question = "where is the config file parsed and its settings returned?"
    budget = 1500
    sel = select_lines(lines, question, "code", max_bytes=budget)
    assert sel.order is not None and sorted(sel.order) == sorted(set(sel.order))
    target = next(i for i, x in enumerate(lines) if "def parse_config_file" in x)
    # The function sits in the middle of the text: a head/tail cut would lose it.
    assert len(lines) * 0.3 < target < len(lines) * 0.7
    trimmed = trim_by_order(lines, sel.keep, sel.order, budget) or sel.keep
    assert all(trimmed[i] for i in range(target, target + 4))
    view = sum(len(lines[i]) + len(str(i + 1)) + 5 for i in range(len(lines)) if trimmed[i])
    assert view + 110 * len(_blocks_of(trimmed)) <= budget


def filler_module(count: int, inserted: dict[int, str]) -> list[str]:
    """The lines of a module of `count` small functions unrelated to any question asked here
    (each has the line "total = value * N"), with inserted[n] after the n-th."""
    parts = ["import json\n\n\n"]
    for n in range(count):
        parts.append(
            f"def helper_{n}(value):\n    total = value * {n}\n    if total > {n}:\n"
            f"        total -= {n}\n    return total + {n}\n\n\n"
        )
        parts.append(inserted.get(n, ""))
    return "".join(parts).split("\n")


def test_a_confident_ranking_still_fills_the_view():
    # Only one function names the question's words; the view still spends its share of the
    # text on what ranks next, since on real tasks a confident first guess is often not
    # the line to edit (an early stop kept 12.5% of this text's lines here, markers aside).
    lines = filler_module(
        80,
        {
            40: "def parse_config_file(path):\n    with open(path) as handle:\n"
            "        data = json.load(handle)\n    return data['settings']\n\n\n"
        },
    )
    sel = select_lines(lines, "where is the config file parsed and its settings returned?", "code")
    kept = [i for i in range(len(lines)) if sel.keep[i]]
    assert any("def parse_config_file" in lines[i] for i in kept)
    view = [numbered_line_bytes(i + 1, x) for i, x in enumerate(lines)]
    assert sum(view[i] for i in kept) >= 0.15 * sum(view)


def _view_bytes(lines: list[str], sel: Selection) -> int:
    rows, _ = pruned_rows(
        lines, sel.keep, sel.reasons, "prn_" + "0" * 16, annotate_lines=True, include_markers=True
    )
    return text_bytes(rows_text(rows))


def test_an_unsure_ranking_keeps_more_than_a_sure_one():
    # With one function answering the question the view keeps its base share; with two
    # answering it equally, which one is asked about is a coin toss and the view keeps more.
    reader = (
        "def {0}(path):\n    with open(path) as handle:\n"
        "        data = json.load(handle)\n    return data['settings']\n\n\n"
    )
    question = "where is the config file read and its settings returned?"
    sure = filler_module(200, {100: reader.format("load_config_file")})
    unsure = filler_module(
        200, {60: reader.format("load_config_file"), 140: reader.format("open_config_file")}
    )
    sure_view = _view_bytes(sure, select_lines(sure, question, "code"))
    unsure_view = _view_bytes(unsure, select_lines(unsure, question, "code"))
    # The texts differ by one small function; the views by a fifth of the view.
    assert unsure_view > 1.2 * sure_view


def test_a_view_keeps_what_is_worth_its_size_past_the_base_share():
    # Most functions of the text answer the question equally: every one of them is as
    # likely the one asked about, so the view keeps them all, well past the share a view
    # fills by default (a fixed share cut this text at about 40 %, hiding half of them).
    reader = (
        "def {0}(path):\n    with open(path) as handle:\n"
        "        data = json.load(handle)\n    return data['settings']\n\n\n"
    )
    readers = {n: reader.format(f"load_config_file_{n}") for n in range(0, 60, 3)}
    readers.update({n + 1: reader.format(f"read_config_file_{n}") for n in range(0, 60, 3)})
    lines = filler_module(60, readers)
    sel = select_lines(lines, "where is the config file read and its settings returned?", "code")
    starts = [i for i, x in enumerate(lines) if x.startswith(("def load_config", "def read_config"))]
    assert len(starts) == 40
    assert all(all(sel.keep[i : i + 4]) for i in starts)
    assert _view_bytes(lines, sel) > 0.5 * sum(numbered_line_bytes(i + 1, x) for i, x in enumerate(lines))


def big_module() -> str:
    parts = ["import json\nimport os\n\n\nclass Store:\n"]
    for n in range(60):
        parts.append(f"    def helper_{n}(self, value):\n        total = value * {n}\n        return total + {n}\n\n")
        if n == 30:
            parts.append(
                "    def parse_config_file(self, path):\n"
                "        with open(path) as handle:\n"
                "            data = json.load(handle)\n"
                "        return data['settings']\n\n"
            )
    return "".join(parts)


@pytest.mark.parametrize("source_type", ["logs", "code", "docs"])
def test_a_number_asked_about_survives_the_budget_in_plain_data(source_type):
    # `seq 1 200000` asked "where is 123456?": no word to match, the number itself must be.
    lines = [str(i) for i in range(1, 200_001)]
    sel = select_lines(lines, "where is 123456?", source_type, max_bytes=10240)
    assert sel.order is not None
    shown = trim_by_order(lines, sel.keep, sel.order, 10240) or sel.keep
    assert shown[123_455]
    assert sum(shown) < 2000


def test_plural_acronym_is_one_term():
    """"URLs" in a question is the `url` of the code, not the parts "ur" and "ls"."""
    from jeeves_mcp.pruning.engine._text import query_terms, terms

    assert "url" in query_terms("Fix digest authentication for URLs with reserved characters")
    assert "ur" not in query_terms("Fix digest authentication for URLs")
    assert terms("parseURLsFrom HTTPServer") == ["pars", "url", "http", "server"]


def test_a_dunder_name_in_a_question_is_spelled_out_whole():
    """`__module__` names the attribute, not every line with "module" in it; the
    underscores around an ordinary name are still dropped."""
    from jeeves_mcp.pruning.engine._text import query_identifiers

    assert query_identifiers("Check that `__module__` is `str`") == ["__module__"]
    assert query_identifiers("Fix AgentKey.__str__ on py3") == ["agentkey.__str__", "py3"]
    assert query_identifiers("Call `_private_helper_` first") == ["private_helper"]
    assert query_identifiers("Drop the ______ rule above the ____init____ title") == []
    lines = [f"def helper_{k}(modules):\n    return modules[{k}]\n" for k in range(40)]
    lines.insert(20, "def qualname(func):\n    if hasattr(func, '__module__'):\n        return func.__module__\n")
    text = "\n".join(lines).split("\n")
    sel = select_lines(text, "Check that `__module__` is `str`", "code", max_bytes=1024)
    dunder = [i for i, line in enumerate(text) if "__module__" in line]
    assert dunder and all(sel.keep[i] for i in dunder)


def test_an_error_code_in_a_question_finds_the_check_that_reports_it():
    """`E722` is one word of letters and digits: split into terms, its digits were dropped and
    every check of a linter looked alike."""
    from jeeves_mcp.pruning.engine._text import query_identifiers

    assert query_identifiers("Fix missed quoting in E722 check") == ["e722"]
    assert query_identifiers("use sha256, not md5, over RFC2217 on 3.11") == ["sha256", "md5", "rfc2217"]
    checks = [
        f"def check_{k}(logical_line, noqa):\n"
        f"    match = PATTERN_{k}.search(logical_line)\n"
        f"    if match and not noqa:\n"
        f"        yield match.start(), \"E7{k:02d} check failed\"\n"
        for k in range(60)
    ]
    text = "\n".join(checks).split("\n")
    sel = select_lines(text, "Fix missed quoting in E722 check", "code", max_bytes=1024)
    reported = next(i for i, line in enumerate(text) if '"E722 ' in line)
    assert sel.keep[reported]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("source_type", ["code", "docs", "logs"])
def test_a_pasted_blob_as_question_keeps_the_deadline(source_type):
    """A question is a sentence or two. A blob pasted as one (100,000 words, or codes) cost the
    text's distinct words times its terms, in a pass that does not check the deadline: it
    missed a 3 s deadline where the engine now takes well under one."""
    from jeeves_mcp.pruning.engine._text import (
        MAX_QUESTION_IDENTIFIERS,
        MAX_QUESTION_TERMS,
        query_identifiers,
        query_terms,
    )

    def word(i: int) -> str:
        return "q" + "".join(chr(97 + i // 26**k % 26) for k in range(4))

    blob = "where is frobnicate " + " ".join(word(i) for i in range(100_000))
    codes = "where is frobnicate " + " ".join(f"x{i}" for i in range(1_000, 101_000))
    assert len(query_terms(blob)) == MAX_QUESTION_TERMS
    assert query_terms(blob)[0] == "frobnicat"
    assert len(query_identifiers(codes)) == MAX_QUESTION_IDENTIFIERS
    lines = [f"def step_{i}(value_{i}):\n    return helper_{i}(value_{i}, word{i})\n" for i in range(1_000)]
    lines.insert(500, "def frobnicate(value):\n    return value\n")
    text = "\n".join(lines).split("\n")
    target = text.index("def frobnicate(value):")
    for question in (blob, codes):
        sel = select_lines(text, question, source_type, max_bytes=4096, deadline=time.monotonic() + 3)
        assert sel.keep[target]


@pytest.mark.parametrize("source_type", ["code", "docs", "logs"])
def test_a_question_of_megabytes_is_read_by_its_head_and_tail(source_type):
    """A question may be as long as the child's 4 MiB request body; reading all of it took
    2.5 s for 2 MB before the first deadline check. Its head (the asker's words) and its tail
    (where a pasted traceback ends) are read, and a name cut in half at a seam is not."""
    from jeeves_mcp.pruning.engine._text import MAX_QUESTION_CHARS, bounded_question

    filler = " ".join(f"w{i:x}" for i in range(400_000))
    question = f"why does frobnicate fail? {filler} in unfold_widget"
    bounded = bounded_question(question)
    assert len(bounded) <= MAX_QUESTION_CHARS + 1 and bounded.startswith("why does frobnicate")
    assert bounded.endswith("in unfold_widget")
    assert set(bounded.split()) <= set(question.split())  # whole words only
    text = [f"def step_{i}(value):" if i % 2 == 0 else "    return value" for i in range(2_000)]
    text[600], text[1400] = "def frobnicate(value):", "def unfold_widget(value):"
    sel = select_lines(text, question, source_type, max_bytes=4096, deadline=time.monotonic() + 1)
    assert sel.keep[600] and sel.keep[1400]


def test_a_pasted_traceback_keeps_its_innermost_names():
    """Past the cap, the last identifiers of a question are kept before the first: a traceback
    names its innermost frame and its error last. Line numbers come after names."""
    from jeeves_mcp.pruning.engine._text import MAX_QUESTION_IDENTIFIERS, query_identifiers

    frames = "".join(
        f'  File "/srv/app/framework/layer_{k}.py", line {100 + k}, in dispatch_layer_{k}\n'
        f"    return handler_{k}.call_next(request)\n"
        for k in range(30)
    )
    question = (
        "Why does checkout fail?\nTraceback (most recent call last):\n" + frames
        + '  File "/srv/app/orders/pricing.py", line 42, in compute_order_total\n'
        + "    return apply_loyalty_discount(subtotal, customer.loyalty_tier)\n"
        + "AttributeError: 'NoneType' object has no attribute 'loyalty_tier'"
    )
    found = query_identifiers(question)
    assert len(found) == MAX_QUESTION_IDENTIFIERS
    for name in ("compute_order_total", "apply_loyalty_discount", "customer.loyalty_tier", "loyalty_tier"):
        assert name in found
    assert not any(x.isdigit() for x in found)


@pytest.mark.timeout(20)
def test_words_quoted_in_a_question_are_looked_up_not_scanned():
    """A word also quoted in backticks is an identifier; each word was checked against every
    quoted string, 7.6 s for 10,000 of each."""
    from jeeves_mcp.pruning.engine._text import query_identifiers

    assert query_identifiers("Keep `span` when `span_id` is unset, span aside") == ["span", "span_id"]
    assert "info" not in query_identifiers("require `pkginfo >= 1.12` for info")
    blob = " ".join(f"`quoted{i}word` plain{i}word" for i in range(40_000))
    assert len(query_identifiers(blob)) == 32


DOCUMENTED = '''\
"""Network helpers."""

import time


class Client:
    """A client for the store's API."""

    banner = """not a docstring: an assigned string"""

    def fetch_with_retry(self, url, attempts):
        """Fetch a url, retrying a few times.

        Every retry of a url waits longer than the one before: a fetch that
        fails is retried after one second, then two, then four, until the
        attempts are spent. A fetch of a url that answers is never retried.
        The url is fetched as is; retry and fetch errors are logged, and the
        last error of the last retry of the url is raised to the caller.
        """
        for attempt in range(attempts):
            try:
                return self.download(url)
            except TimeoutError:
                if attempt == attempts - 1:
                    raise
                time.sleep(2**attempt)
'''


def test_docstring_lines_are_known_to_the_python_layout():
    from jeeves_mcp.pruning.engine._code import code_layout

    lines = DOCUMENTED.split("\n")
    prose = code_layout(lines, "client.py").prose
    assert 0 in prose  # the module's
    assert lines_of(DOCUMENTED, '"""A client for')[0] in prose
    start = lines_of(DOCUMENTED, '"""Fetch a url')[0]
    assert set(range(start, start + 8)) <= prose
    assert lines_of(DOCUMENTED, "banner =")[0] not in prose
    assert not prose & set(lines_of(DOCUMENTED, "for attempt", "return self.download"))


def test_a_code_line_ranks_before_its_twin_in_the_docstring():
    # The docstring repeats the code word for word: the same evidence, but the code is
    # what a question about the file needs to see.
    body = [
        "delay = retry_base * 2 ** retry_attempt",
        "retry_deadline = clock() + delay",
        "return retry_deadline",
    ]
    text = "\n".join(
        ["import time", "", "", "def retry_deadline(retry_base, retry_attempt):",
         '    """When the next retry may start:', ""]
        + [f"        {x}" for x in body]
        + ['    """']
        + [f"    {x}" for x in body]
        + [""]
        + [f"\ndef helper_{n}(value):\n    return value * {n}\n" for n in range(40)]
    )
    lines = text.split("\n")
    sel = select_lines(lines, "how is the retry deadline computed?", "code", max_bytes=4000)
    assert sel.order is not None
    for x in body:
        doc, code = lines_of(text, x)
        assert sel.order.index(code) < sel.order.index(doc), x


def assert_found_by_name(helpers: str, rename: tuple[str, str], gold: str, question: str) -> None:
    """`gold` sits among `helpers` and a renamed copy of them; its def is kept, near the top."""
    text = "import math\n\n" + helpers + "\n" + gold + helpers.replace(*rename)
    lines = text.split("\n")
    sel = select_lines(lines, question, "code", max_bytes=2048)
    assert sel.order is not None
    (def_line,) = lines_of(text, gold.split("(")[0])
    assert sel.keep[def_line]
    assert sel.order.index(def_line) < 5


def test_a_name_run_together_matches_the_word_spelled_inside_it():
    # Only the run-together name says what the function is about.
    assert_found_by_name(
        "".join(f"\ndef leghelper{n}(c):\n    return c * {n} + len(c)\n\n" for n in range(40)),
        ("leghelper", "legother"),
        "def legcompanion(c):\n    c = as_series(c)\n    return mat(c)[::-1]\n",
        "Return the scaled companion matrix of c.",
    )


def test_an_abbreviated_name_matches_the_word_it_shortens():
    # `div` shortens "divides" only in the name of `div_exact`, whose body shares none of the
    # question's words, while its neighbours' bodies do.
    assert_found_by_name(
        "".join(
            f"\ndef fneg{n}(ctx, x, y):\n    numbers = ctx.convert(x, y)\n    return numbers\n\n"
            for n in range(30)
        ),
        ("fneg", "fadd"),
        "def div_exact(ctx, a, b):\n    q, r = ctx._divmod(a, b)\n    return q\n",
        "Divides the numbers.",
    )


def test_the_functions_one_call_away_rank_next():
    # Only `ingest` shares the question's words (in its body); the helper it calls and the
    # function that calls it share none, yet come next in the view's order, ahead of
    # functions unrelated to it.
    lines = filler_module(
        60,
        {
            20: "def merge_layers(base, extra):\n    out = dict(base)\n    for key in extra:\n"
            "        out[key] = extra[key]\n    return out\n\n\n",
            30: "def ingest(path):\n    with open(path) as settings_file:\n"
            "        loaded = json.load(settings_file)\n    return merge_layers({}, loaded)\n\n\n",
            45: "def refresh_all(paths):\n    for item in paths:\n"
            "        refreshed = ingest(item)\n    return refreshed\n\n\n",
        },
    )
    sel = select_lines(lines, "why does loading the settings file fail?", "code")
    assert sel.order is not None
    rank = {i: r for r, i in enumerate(sel.order)}  # the order may stop before the last lines
    unrelated = [rank.get(i, math.inf) for i in range(len(lines)) if "total = value" in lines[i]]
    for body in ("out[key] = extra[key]", "refreshed = ingest(item)"):
        (line,) = lines_of("\n".join(lines), body)
        assert rank[line] < min(unrelated), body


def test_a_control_block_is_not_a_function_one_call_away():
    # In a layout by indentation a `for` block is a unit too; a best unit that loops does
    # not make every other loop of the file its helper.
    from jeeves_mcp.pruning.engine._code import code_layout
    from jeeves_mcp.pruning.engine._rank import score_units
    from jeeves_mcp.pruning.engine._text import query_terms

    lines = [
        "function loadUsers(db) {",
        "  const users = db.users();",
        "  for (const user of users) {",
        "    user.load();",
        "  }",
        "}",
        "",
        "for (const job of jobs) {",
        "  job.run();",
        "}",
    ]
    layout = code_layout(lines, "app.js")
    loop = next(k for k, u in enumerate(layout.units) if u.start == 7)
    assert layout.units[loop].name == ""  # a control line names nothing
    scored = score_units(lines, layout.units, query_terms("how are users loaded"), references=True)
    assert scored.units[loop] == 0


def test_docs_the_sections_around_the_likely_one_rank_right_after_it():
    # "Migrating" is the section asked about; "Rolling back" carries on from it and "Planning"
    # leads to it, without a word of the question: both rank right after it, above six
    # sections that share a word with the question. Whether the view keeps them is the
    # price's call (DOCS_PRICE): here each is one part in fifteen of the text.
    from jeeves_mcp.pruning.engine._docs import docs_layout
    from jeeves_mcp.pruning.engine._rank import score_units
    from jeeves_mcp.pruning.engine._text import query_terms

    sections = [(t, "unrelated matters") for t in ("Alpha", "Beta")]
    sections += [("Planning", "deciding a step")]
    sections += [("Migrating", "schema changes"), ("Rolling back", "undoing a step")]
    sections += [(t, "schema design") for t in ("Delta", "Epsilon", "Kappa", "Lambda", "Mu", "Nu")]
    sections += [(t, "unrelated matters") for t in ("Zeta", "Eta", "Theta", "Iota")]
    lines = _manual(sections).split("\n")
    question = "how are schema changes applied"
    layout = docs_layout(lines)
    scores = score_units(lines, layout.units, query_terms(question), neighbours=True).units
    by_topic = {t: max(scores[k] for k, u in enumerate(layout.units) if t in lines[u.end - 1])
                for _, t in sections}
    ranked = sorted(by_topic, key=lambda t: -by_topic[t])
    assert ranked[0] == "schema changes"
    assert set(ranked[1:3]) == {"deciding a step", "undoing a step"}
    sel = select_lines(lines, question, "docs")
    assert all(sel.keep[i] for i, x in enumerate(lines) if "schema changes" in x)


# `alpha` spells "header fields" in its docstring, `beta` (a line longer) in its code.
DOCSTRING_OR_CODE = [
    "def alpha(path):",
    '    """The header fields of a file."""',
    "    size = os.path.getsize(path)",
    "    return size",
    "",
    "",
    "def beta(handle):",
    "    fields = handle.header()",
    "    size = len(handle)",
    "    mode = os.stat(handle).st_mode",
    "    return size, mode",
]


def test_a_docstring_word_counts_less_than_a_word_in_code():
    # Two functions spell the question's words once each: `alpha` in its docstring, `beta`
    # (a line longer) in its code. The code is the stronger evidence.
    from jeeves_mcp.pruning.engine._code import code_layout
    from jeeves_mcp.pruning.engine._rank import score_units
    from jeeves_mcp.pruning.engine._text import query_terms

    lines = DOCSTRING_OR_CODE
    layout = code_layout(lines, "module.py")
    assert layout.prose == {1}
    scores = score_units(lines, layout.units, query_terms("header fields"), prose=layout.prose)
    by_name = {u.name: s for u, s in zip(layout.units, scores.units, strict=True)}
    assert by_name["beta"] > by_name["alpha"] > 0


def test_a_view_ranks_a_function_by_its_code_before_one_by_its_docstring():
    # As above through select_lines: `beta`'s lines (its code names the question's words)
    # come before `alpha`'s (only its docstring does), the rest of the file far behind.
    lines = ["import os", "", "", *DOCSTRING_OR_CODE]
    for n in range(40):
        lines += ["", "", f"def helper_{n}(value):", f"    return value * {n}"]
    sel = select_lines(lines, "header fields", "code")
    assert sel.order is not None
    rank = {i: r for r, i in enumerate(sel.order)}
    assert rank.get(11, math.inf) < rank.get(5, math.inf)  # "size = len(handle)" first


@pytest.mark.parametrize(
    ("question", "docstring_first"),
    [
        ("header fields", False),
        ("the header fields in the docs", True),
        ("typo in the header fields docstring", True),
        ("clarify the header fields", True),
        ("add an example of header fields", True),
        ("for example, the header fields", False),  # a figure of speech
        ("explain the header fields", False),
        ("header fields document", False),  # a noun of many domains, not the docs
    ],
)
def test_a_question_about_the_docs_weighs_docstrings_as_code(question, docstring_first):
    # The file above: a question that speaks of the documentation ranks `alpha`'s docstring
    # (line 5) before `beta`'s code (line 12); any other question ranks the code first.
    lines = ["import os", "", "", *DOCSTRING_OR_CODE]
    for n in range(40):
        lines += ["", "", f"def helper_{n}(value):", f"    return value * {n}"]
    sel = select_lines(lines, question, "code")
    assert sel.order is not None
    rank = {i: r for r, i in enumerate(sel.order)}
    assert (rank.get(4, math.inf) < rank.get(11, math.inf)) is docstring_first


def test_a_name_mentioned_everywhere_names_no_caller(monkeypatch):
    # Past REF_MAX_MENTIONS mentions, the functions naming a best unit gain nothing from it:
    # such a name points at no caller in particular, and each mention costs a lookup.
    from jeeves_mcp.pruning.engine import _rank
    from jeeves_mcp.pruning.engine._code import code_layout
    from jeeves_mcp.pruning.engine._text import query_terms

    lines = ["def tokenize(text):", "    return text.split()", ""]
    for n in range(3):
        lines += [f"def step_{n}(value):", f"    return tokenize(value) * {n}", ""]
    layout = code_layout(lines, "module.py")
    callers = [k for k, u in enumerate(layout.units) if u.name.startswith("step_")]

    def caller_scores(references: bool) -> list[float]:
        scored = _rank.score_units(
            lines, layout.units, query_terms("tokenize"), references=references
        )
        return [scored.units[k] for k in callers]

    alone = caller_scores(references=False)
    assert all(a > b for a, b in zip(caller_scores(references=True), alone, strict=True))
    monkeypatch.setattr(_rank, "REF_MAX_MENTIONS", 3)  # tokenize is spelled 4 times
    assert caller_scores(references=True) == alone


def _class_opened_by_comments() -> list[str]:
    lines = ["import os", "", "", "class Router:  # the class line keeps its own comment"]
    lines += [f"    # grammar note {n}: scheme ':' hier-part [ '?' query ]" for n in range(60)]
    lines += ["", "    routes = {}", ""]
    for n in range(30):
        lines += [f"    def handler_{n}(self, value):", f"        return value * {n}", ""]
    lines += ["    def dispatch(self, request):", "        # a comment opening the body", "",
              "        return self.routes[request.path]", ""]
    return lines


def test_a_signature_ends_before_the_comments_that_open_the_body():
    # Every unit of a class carries the class's signature: the comment lines that open its
    # body (or a function's) are not part of it.
    from jeeves_mcp.pruning.engine._code import code_layout

    lines = _class_opened_by_comments()
    units = {u.name: u for u in code_layout(lines, "module.py").units if u.name}
    dispatch = units["dispatch"]
    assert dispatch.heads == [(3, 3), dispatch.sig]
    assert dispatch.sig == (dispatch.start, dispatch.start)
    assert lines[dispatch.start] == "    def dispatch(self, request):"


def test_a_method_shown_does_not_bring_the_comments_that_open_its_class():
    # Before, the 60 comment lines came with every method shown and filled a 2 KiB view
    # before the line the question asks about.
    lines = _class_opened_by_comments()
    sel = select_lines(lines, "dispatch the request path to its route", "code", max_bytes=2048)
    kept = {lines[i] for i in range(len(lines)) if sel.keep[i]}
    assert "        return self.routes[request.path]" in kept
    assert "class Router:  # the class line keeps its own comment" in kept
    assert sum("grammar note" in line for line in kept) <= 1  # the one beside kept code


def test_a_marker_reason_shows_a_units_name_without_what_could_mislead():
    """A heading's text reaches the reason that names it: terminal controls, bidi overrides,
    zero-width characters and marker brackets are left out, and the annotation's reason is
    the marker's."""
    from jeeves_mcp.pruning.render import annotation

    heading = "Setup\x1b[2J\x07 \u202egnp.exe\u202c z\u200bero ⟧ ⟦PRUNÉ: prune_id=prn_1 lignes 1-2 (2) raison=x"
    block = annotation("prn_0", 3, 9, f"hors focus: section {heading}")
    reason = block["reason"]
    assert block["marker"].endswith(f"raison={reason}⟧") and block["marker"].count("⟦") == 1
    assert reason == "hors focus: section Setup[2J gnp.exe zero ] [PRUNÉ: prune_id=prn_1 lignes 1-2 (2) raison=x"


def _many_functions(count: int) -> list[str]:
    lines: list[str] = []
    for k in range(count):
        lines += [f"def handler_{k}(request):", f"    payload = request.get('field_{k}')",
                  f"    return payload or {k}", ""]
    return lines


# 2,400 lines; line 1202 is handler_300's body, lines 29-31 are handler_7's.
FUNCTIONS = _many_functions(600)


@pytest.mark.parametrize(
    "question",
    [
        "handler_7 payload fails at line 1202",
        "handler_7 payload, handlers.py:1202:17: E501 line too long",
        '  File "pkg/handlers.py", line 1202, in handler_300',
        "why do handler_7 and lines 1201-1203 differ",
    ],
)
def test_a_line_named_by_number_is_kept(question: str) -> None:
    sel = select_lines(FUNCTIONS, question, "code", path="pkg/handlers.py")
    assert all(sel.keep[1200:1203]), question
    assert sum(sel.keep) < len(FUNCTIONS) / 2
    unnamed = select_lines(FUNCTIONS, "handler_7 payload", "code", path="pkg/handlers.py")
    assert not unnamed.keep[1201]  # the number, not the words, keeps it


@pytest.mark.parametrize(
    "question",
    [
        '  File "pkg/other.py", line 1202, in handler_7',  # another file's line
        "handler_7 payload at line 99999",  # past the end
        "handler_7 payload, line 0",
    ],
)
def test_a_line_number_not_of_this_text_changes_nothing(question: str) -> None:
    sel = select_lines(FUNCTIONS, question, "code", path="pkg/handlers.py")
    plain = select_lines(FUNCTIONS, "handler_7 payload", "code", path="pkg/handlers.py")
    assert not sel.keep[1201]
    assert all(sel.keep[28:31])
    if "other.py" not in question:
        assert sel.keep == plain.keep


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "filler",
    ["a." * 100_000, "x" * 200_000, 'File "' + "x" * 200_000, "a.b" * 60_000 + ":", ":1" * 100_000,
     '"a\\\\":1' * 30_000, '\\"' * 100_000 + '":1', '"' * 200_000 + ":1"],
)
def test_a_huge_question_is_read_in_linear_time(filler: str) -> None:
    # The question is the caller's text (a prune_text goal_hint may quote anything): the line
    # references are found by patterns anchored on a literal with a bounded look back, where a
    # file-name pattern free to start anywhere took about 100 s on the first of these.
    question = filler + " handler_7 fails at line 1202"
    assert named_lines(question, len(FUNCTIONS), "pkg/handlers.py") == [1201]
    sel = select_lines(FUNCTIONS, question, "code", path="pkg/handlers.py")
    assert sel.keep[1201]


_FRAMEWORK_FRAMES = "".join(
    f'  File "/usr/lib/python3/site-packages/django/core/handler_{k}.py", line {k + 10}, in run\n'
    for k in range(25)
)


@pytest.mark.parametrize(
    ("question", "path", "named"),
    [
        # the innermost frame comes last, after more than the references favoured at most
        (_FRAMEWORK_FRAMES + '  File "/home/u/proj/app.py", line 118, in view\n', "proj/app.py", [117]),
        ("".join(f"src/other_{k}.py:{k + 1}:1: F401 unused\n" for k in range(30)) + "src/app.py:42:1: F821",
         "src/app.py", [41]),
        ("see `mod.py:10` and [mod.py:11]", "pkg/mod.py", [9, 10]),
        (r"C:\src\pkg\mod.py:10:5: E501 line too long", "pkg/mod.py", [9]),
        # same base name, another directory: another file
        ('File "/usr/lib/python3/site-packages/django/__init__.py", line 24', "proj/pkg/__init__.py", []),
        ('File "pkg/__init__.py", line 24', "/abs/proj/pkg/__init__.py", [23]),
        ('in "config.yaml", line 3, column 5', "app.py", []),  # YAML names its file too
        ("the last line\n2024-05-01 12:00:01 ERROR", "app.py", []),  # not a range across lines
        ("lines 52-50", "app.py", [49, 50, 51]),
        ("lines 1-150", "app.py", list(range(100))),  # a range favours its first 100 lines
        # grep quotes a path holding a colon, a quote or a control character, as git does
        ('grep found "src:9:x.py":3:needle', "src:9:x.py", [2]),
        ('"odd\\tname.py":5:x and "caf\\303\\251.py":6:y', "odd\tname.py", [4]),
        ('"caf\\303\\251.py":6:y', "pkg/caf\u00e9.py", [5]),
        ('{"line":3, "\\"quoted\\".py":4}', "app.py", []),  # another file's, or JSON's
        ('{"line":3, "\\"quoted\\".py":4}', '"quoted".py', [3]),
    ],
)
def test_line_references_are_read_as_tools_write_them(question: str, path: str, named: list[int]) -> None:
    assert named_lines(question, 500, path) == named


LONG_LINES = {
    # A line of a log that ends in text after a run of `=`; a non-Python declaration line of
    # `a_a_...`; a line of blanks ending in a letter, sniffed for its kind (in the first
    # 200,000 characters, all that is sniffed).
    "logs": 'select_lines(["build", "x" + "=" * 400_000 + "y", "step 2999 failed"] * 2, '
            '"why did step 2999 fail", "logs")',
    "code": 'select_lines(["function ok() {", "  return 1;", "}", "a_" * 200_000 + " {", "  total = 2999;", "}"], '
            '"where is total set", "code", path="widget.js")',
    "sniffed": 'guess_source_type(None, "\\t" * 150_000 + "x\\nok\\n")',
    # A JS line of `)` ending in another character, read for a block's closer; a test block
    # opened by `describe` and blanks; lines of slash-backslash pairs and of `[=/]`, scanned for
    # regex literals (a run's `bash` found these: 40,000 `)` took 29 s, 900,000 pairs 21 s).
    "closer": 'select_lines(["function g() {", "  return 1;", ")" * 400_000 + "!", "function h() {", '
              '"  total = 2999;", "}"], "where is total set", "code", path="widget.js")',
    "test title": 'select_lines(["describe" + " " * 400_000 + "{", "  it(\'sets the total\', () => {", "  });", '
                  '"}"], "where is total set", "code", path="widget.test.js")',
    "escaped slashes": 'select_lines(["error " + "/\\\\" * 2_000_000, "`x`", "function h() {", "  total = 2999;", '
                       '"}"], "where is total set", "code", path="widget.js")',
    "slashes in classes": 'select_lines(["(/" + "[=/]" * 100_000, "`x`", "function h() {", "  total = 2999;", '
                          '"}"], "where is total set", "code", path="widget.js")',
}


@pytest.mark.parametrize("kind", LONG_LINES)
def test_one_long_line_a_run_prints_is_read_in_linear_time(kind):
    """Patterns backtracked quadratically over a long line, which any run can print or
    write: 20,000 characters took 8-16 s, these 400,000 would take hours, holding the GIL (a
    regex match does not let it go), so the child's event loop stood still as long. In a
    process of its own, so that the test fails rather than hangs."""
    call = "from jeeves_mcp.pruning.engine import guess_source_type, select_lines\n" + LONG_LINES[kind]
    subprocess.run([sys.executable, "-c", call], check=True, timeout=30)


@pytest.mark.parametrize("path", ["widget.js", "widget.py"])
def test_a_long_name_over_many_members_is_labelled_in_bounded_memory(path):
    """A unit's label copies its owner's name: a class named by a megabyte over 1,500 members
    took 1.5 GB and passed a 3 s deadline. Run in a process limited to 1 GiB of memory."""
    if path.endswith(".js"):
        opener, member = " {", ("  fn f{k}() {{", "    x", "  }}")
    else:
        opener, member = ":", ("    def f{k}(self):", "        pass")
    call = (
        "import time\nfrom jeeves_mcp.pruning.engine import select_lines\n"
        f"lines = ['class ' + 'A' * 1_000_000 + {opener!r}]\n"
        f"lines += [x.format(k=k) for k in range(1500) for x in {member!r}]\n"
        f"select_lines(lines, 'where is the helper value computed', 'code', path={path!r},"
        " max_bytes=10240, deadline=time.monotonic() + 3)\n"
    )

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    subprocess.run([sys.executable, "-c", call], check=True, timeout=60, preexec_fn=limit_memory)


def _module_with_many_imports() -> list[str]:
    """Thirty-five import lines (1.7 KB, past the 5 % of a view that lets imports lead it),
    one naming cgi among others, and 800 functions, a few of which warn or use cgi."""
    imports = [f"from package.sub{k} import name{k}, other{k}, third{k}, fourth{k}" for k in range(34)]
    imports.insert(17, "import base64, calendar, cgi, email.utils, functools, hmac, itertools")
    body = []
    for k in range(800):
        call = "warnings.warn('cgi form', DeprecationWarning)" if k % 97 == 0 else f"name{k % 34}(value)"
        body += [f"def handler_{k}(request):", f"    value = request.get('field{k}')", f"    return {call}", ""]
    return ['"""Request handlers."""', "", *imports, "", *body]


def test_a_question_about_an_import_keeps_the_imports_of_a_large_file() -> None:
    """Imports lead a view only while cheap (5 % of it), and their lines are not scored: a
    question about one is about them ("Remove unused cgi import and warning" lost its line in
    a file of 4,600 lines)."""
    lines = _module_with_many_imports()
    imports = range(2, 37)
    asked = select_lines(lines, "Remove unused cgi import and warning", "code", max_bytes=10_240)
    assert all(asked.keep[i] for i in imports)
    # The same imports, not asked about, are too dear to lead the view.
    other = select_lines(lines, "handler of the field 7 in a request", "code", max_bytes=10_240)
    assert not all(other.keep[i] for i in imports)


def test_a_question_about_the_module_docstring_finds_it() -> None:
    """The module docstring belonged to no unit, so none of its lines was scored: "Use https
    instead of http for link" lost the link it asked about in a 2,000-line module."""
    docstring = ['"""Check a project against its style guide.', "",
                 *[f"Rule group {k} covers the checks numbered {k}00 to {k}99." for k in range(12)], "",
                 "This program and its test suite live here:", "http://github.com/example/styleguard", "",
                 *[f"Group {k}: see the check list." for k in range(12)], '"""']
    body = []
    for k in range(400):
        body += [f"def check_{k}(logical_line, tokens):", f"    if 'E{k:03d}' in logical_line:",
                 f"        yield 0, 'E{k:03d} message {k}'", "", ""]
    lines = [*docstring, "", "import os", "", *body]
    link = lines.index("http://github.com/example/styleguard")
    kept = select_lines(lines, "Use https instead of http for the project link", "code", max_bytes=10_240)
    assert kept.keep[link]


def test_the_module_docstring_unit_and_the_next_def_do_not_overlap() -> None:
    """A def's leading comments were looked for up into the docstring when its last line began
    like a comment (`* item`), so two units held the same lines (a review's finding)."""
    from jeeves_mcp.pruning.engine._code import code_layout

    lines = ['"""Module.', "", "* item one", '* item two"""', "# comment", "def f():", "    return 1"]
    units = sorted((u.start, u.end) for u in code_layout(lines, "m.py").units)
    assert units == [(0, 3), (4, 6)]


SHOP_METHODS = ("ship_parcel", "print_label", "apply_coupon", "refund_card", "close_ledger", "audit_stock",
                "merge_carts", "notify_buyer")


def shop_source(methods: tuple[str, ...] = SHOP_METHODS) -> list[str]:
    """A class of methods of 44 lines, each named by what it does and its body words not
    saying it."""
    lines = ["class Shop:", ""]
    for k, name in enumerate(methods):
        lines += [f"    def {name}(self, order):", f'        """{name.replace("_", " ")}."""']
        lines += [f"        step_{k}_{j} = order.value_{j} * {j} + self.offset_{j}" for j in range(40)]
        lines += ["        return step_0", ""]
    return lines


def test_a_window_is_ranked_within_its_file() -> None:
    """A window that starts inside a method (`read` with an offset, `sed -n 'A,Bp'`) keeps
    that method's lines when the question names it: ranked alone, the lines under the
    window's edge were a nameless block."""
    lines = shop_source()
    start = lines.index("    def refund_card(self, order):") + 10
    window = lines[start : start + 200]
    rest = lines.index("    def close_ledger(self, order):") - start  # refund_card's lines in the window
    question = "how is a card refund computed?"
    alone = select_lines(window, question, "code", max_bytes=10240)
    within = select_lines(window, question, "code", max_bytes=10240, around=Around(lines, start))
    assert sum(within.keep[:rest]) >= rest - 1 and not all(within.keep)
    assert sum(alone.keep[:rest]) < rest // 2  # what the file around it adds
    unrelated = alone
    # Markers name the methods they hide with their class, whose line is above the window.
    assert any(reason and reason.startswith("hors focus: Shop.") for reason in within.reasons)
    # "line N" is the file's line N, not the window's: a traceback's numbers are the file's.
    named = start + 120  # its index in the file
    alone = select_lines(window, f"why does line {named + 1} raise?", "code", max_bytes=10240)
    within = select_lines(window, f"why does line {named + 1} raise?", "code", max_bytes=10240,
                          around=Around(lines, start))
    assert within.keep[named - start] and not alone.keep[named - start]
    # A file that does not hold the window is not used.
    other = Around(["x = 1"] * 300, 10)
    assert select_lines(window, question, "code", max_bytes=10240, around=other).keep == unrelated.keep


def test_a_search_of_a_file_is_ranked_within_it() -> None:
    """`grep -n WORD F` through bash: its rows are the file's lines by number, and the rows in
    the method asked about are kept. Ranked alone, as command output, every row looked alike."""
    lines = shop_source()
    found = [i for i, line in enumerate(lines) if "offset" in line]
    rows = [f"{i + 1}:{lines[i]}" for i in found]
    asked = [j for j, i in enumerate(found) if lines.index("    def refund_card(self, order):") < i
             < lines.index("    def close_ledger(self, order):")]
    question = "how is a card refund computed?"
    alone = select_lines(rows, question, "logs", max_bytes=10240)
    within = select_lines(rows, question, "code", max_bytes=10240, around=Around(lines, 0, matches=True))
    assert all(within.keep[j] for j in asked) and sum(within.keep) < len(rows) // 2
    assert sum(alone.keep[j] for j in asked) < len(asked) // 2
    # Context rows and grep's `--` are lines of the file and of no line.
    context = [f"{i + 1}-{lines[i]}" if k % 2 else f"{i + 1}:{lines[i]}" for k, i in enumerate(found)]
    context[1:1] = ["--"]
    assert Around(lines, 0, matches=True).part(context) == [found[0], None, *found[1:]]
    # Rows that are not the file's lines (another file's, `-H` names, falling numbers) are a
    # command's output, ranked as a log.
    for wrong in ([f"shop.py:{row}" for row in rows], rows[::-1], [f"{i + 2}:{lines[i]}" for i in found]):
        assert Around(lines, 0, matches=True).part(wrong) is None
        assert select_lines(wrong, question, "code", max_bytes=10240, around=Around(lines, 0, matches=True)).keep \
            == select_lines(wrong, question, "logs", max_bytes=10240).keep


def test_a_part_of_a_layout_keeps_each_unit_over_the_rows_it_holds() -> None:
    """part_of: a unit of the file over the rows that are its lines, its heads and signature
    too; rows of no line (`--`) between, units holding no row left out."""
    from jeeves_mcp.pruning.engine._units import Layout, Unit, part_of

    units = [Unit(0, 9, "def a", sig=(0, 1), heads=[(0, 1)]), Unit(10, 19, "def b", sig=(10, 10), heads=[(10, 10)]),
             Unit(20, 29, "def c")]
    layout = Layout(units, always={0, 15}, atoms=[(12, 16)], context={3}, prose={11}, follows={2: 1})
    part, index = part_of(layout, [1, 4, None, 11, 12, 15, 28])
    assert index == [0, 1, 2]
    assert [(u.start, u.end, u.sig, u.heads) for u in part.units] == [
        (0, 1, (0, 0), [(0, 0)]), (3, 5, None, []), (6, 6, None, [])]
    assert part.always == {5} and part.atoms == [(4, 5)] and part.prose == {3} and part.context == set()
    assert part.follows == {2: 1}
    window, _ = part_of(layout, range(8, 13))
    assert [(u.start, u.end) for u in window.units] == [(0, 1), (2, 4)]


async def test_a_search_of_a_file_the_engine_cannot_lay_out_is_ranked_as_command_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rows of a search of a file over AROUND_MAX_CHARS, or whose layout passes its share
    of the engine's time, are ranked as a log: as code they are `12:text` lines."""
    from jeeves_mcp.pruner_config import PrunerConfig
    from jeeves_mcp.pruning import LocalEngine, PruneOptions, Pruner
    from jeeves_mcp.pruning import engine as engine_module
    from jeeves_mcp.pruning.pruner import AROUND_MAX_CHARS
    from jeeves_mcp.pruning.recovery import RecoveryStore

    lines = shop_source()
    rows = "\n".join(f"{i + 1}:{line}" for i, line in enumerate(lines) if "offset" in line)
    question = "how is a card refund computed from its offsets?"
    pruner = Pruner(PrunerConfig(), RecoveryStore(60, 1 << 24), LocalEngine())

    async def view(source_type: str, **file: object) -> str:
        outcome = await pruner.prune(rows, question, source_type, PruneOptions(), **file)  # type: ignore[arg-type]
        return outcome.contract()["pruned_text"].replace(outcome.prune_id, "ID")

    as_log, as_code = await view("logs"), await view("code")
    assert as_log != as_code
    whole = "\n".join(lines) + "\n"
    assert await view("code", whole=whole, matches=True) not in (as_log, as_code)
    large = whole + "#" * AROUND_MAX_CHARS
    assert await view("code", whole=large, matches=True) == as_log
    select_lines = engine_module.select_lines

    def timed_out(*args: object, around: object = None, **kwargs: object) -> object:
        if around is not None:
            raise engine_module.PruneTimeout("the file took its time")
        return select_lines(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine_module, "select_lines", timed_out)
    assert await view("code", whole=whole, matches=True) == as_log


def test_a_search_of_many_files_is_ranked_within_each() -> None:
    """`grep -rn WORD`: the rows of a file the search values most are ranked as that file's
    own ranking values them (the rows in the method asked about kept), when the file read
    back holds the rows; else as the search values them."""
    shop = shop_source()
    other = [f"def tally_{k}(offset):" if k % 3 == 0 else f"    return offset * {k}" for k in range(300)]
    rows = [f"src/shop.py:{i + 1}:{line}" for i, line in enumerate(shop) if "offset" in line]
    rows += [f"src/other.py:{i + 1}:{line}" for i, line in enumerate(other) if "offset" in line]
    asked = [j for j, row in enumerate(rows) if row.startswith("src/shop.py:")
             and shop.index("    def refund_card(self, order):") < int(row.split(":")[1]) - 1
             < shop.index("    def close_ledger(self, order):")]
    question = "which offset does a card refund add?"  # the word searched for, as an agent's
    files = {"src/shop.py": "\n".join(shop) + "\n", "src/other.py": "\n".join(other)}
    read: list[str] = []

    def reader(name: str) -> str | None:
        read.append(name)
        return files.get(name)

    alone = select_lines(rows, question, "logs", max_bytes=10240)
    within = select_lines(rows, question, "logs", max_bytes=10240, files=reader)
    assert "src/shop.py" in read
    assert all(within.keep[j] for j in asked) and not all(within.keep)
    assert sum(alone.keep[j] for j in asked) < len(asked) // 2
    # A file that is not what the rows show (changed since, or another file) is not used.
    changed = {"src/shop.py": "\n".join(shop[1:]), "src/other.py": files["src/other.py"]}
    unread = {"src/other.py": files["src/other.py"]}
    assert select_lines(rows, question, "logs", max_bytes=10240, files=changed.get).keep \
        == select_lines(rows, question, "logs", max_bytes=10240, files=unread.get).keep
    # Rows without their numbers (`rg WORD` to a pipe) are the next lines that read the same.
    bare = [re.sub(r":\d+:", ":", row, count=1) for row in rows]
    assert all(select_lines(bare, question, "logs", max_bytes=10240, files=files.get).keep[j] for j in asked)
    assert sum(select_lines(bare, question, "logs", max_bytes=10240).keep[j] for j in asked) < len(asked) // 2


def test_a_search_values_more_the_file_whose_best_unit_the_question_matches() -> None:
    """Two files the search's rows value alike: the one holding the function the question is
    about gets more of their value, and the two keep what they had between them."""
    from jeeves_mcp.pruning.engine._matches import line_paths
    from jeeves_mcp.pruning.engine._searched import within_files
    from jeeves_mcp.pruning.engine._text import query_identifiers, query_terms

    shop = shop_source()
    other = [f"def tally_{k}(offset):" if k % 3 == 0 else f"    return offset * {k}" for k in range(60)]
    rows = [f"shop.py:{i + 1}:{line}" for i, line in enumerate(shop) if "offset" in line][:8]
    rows += [f"other.py:{i + 1}:{line}" for i, line in enumerate(other) if "offset" in line][:8]
    files = {"shop.py": "\n".join(shop), "other.py": "\n".join(other)}
    question = "which offset does a card refund add?"
    values = [1.0] * len(rows)
    out = within_files(rows, line_paths(rows), values, files.get, question, query_terms(question),
                       query_identifiers(question))
    shop_share = sum(v for v, row in zip(out, rows, strict=True) if row.startswith("shop.py:"))
    assert shop_share > sum(out) / 2
    assert sum(out) == pytest.approx(sum(values))
    # Rows the search values at nothing stay at nothing; one file keeps what it had.
    zero = within_files(rows, line_paths(rows), [0.0] * len(rows), files.get, question, query_terms(question),
                        query_identifiers(question))
    assert zero == [0.0] * len(rows)
    alone = [row for row in rows if row.startswith("shop.py:")]
    one = within_files(alone, line_paths(alone), [1.0] * len(alone), files.get, question, query_terms(question),
                       query_identifiers(question))
    assert sum(one) == pytest.approx(len(alone))


def test_python_too_dense_for_ast_is_laid_out_by_indentation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of nothing but calls held the interpreter in `ast` for seconds (2.3 s for 535 KB):
    past AST_MAX_TOKENS commas and brackets, the indentation layout reads it."""
    from jeeves_mcp.pruning.engine import _code

    parsed: list[int] = []
    python_layout = _code._python_layout

    def counted(lines: list[str], text: str) -> object:
        parsed.append(len(lines))
        return python_layout(lines, text)

    monkeypatch.setattr(_code, "_python_layout", counted)
    calls = ["f(" + ",".join("abcdefghijklmnopqrstuvwxyz" * 2) + ")"] * 2000 + ["def g12(value):", "    return value"]
    layout = _code.code_layout(calls, "calls.py")
    assert parsed == [] and any(unit.name == "g12" for unit in layout.units)
    _code.code_layout(PY_SOURCE.split("\n"), "inventory.py")
    assert parsed  # a module of ordinary density is parsed


def _locale(name: str, words: tuple[str, str]) -> list[str]:
    return [
        f"class {name}Locale(Locale):",
        "    timeframes = {",
        f'        "now": "{words[0]}",',
        f'        "year": "{words[1]} 1",',
        f'        "years": "{words[1]} {{0}}",',
        "    }",
        "",
        "    def _format_timeframe(self, timeframe, delta):",
        "        form = self.timeframes[timeframe]",
        "        if isinstance(form, dict):",
        "            form = form['plural'] if abs(delta) > 1 else form['singular']",
        "        return form.format(trunc(abs(delta)))",
        "",
        "    def year_full(self, year):",
        '        return f"{year:04d}"',
        "",
        "    def _format_relative(self, humanized, timeframe, delta):",
        "        if timeframe == 'now':",
        "            return humanized",
        "        direction = self.past if delta < 0 else self.future",
        "        return direction.format(humanized)",
        "",
    ]


def test_a_class_attribute_table_is_found_by_the_class_name():
    """A class's lines outside its methods (a locale's timeframes) are scored under the class's
    name: asked about the Nepali years timeframe, every locale's methods matched the words
    and the Nepali table lost to them."""
    languages = [f"Lang{chr(65 + i // 26)}{chr(97 + i % 26)}" for i in range(60)]
    languages[40] = "Nepali"
    lines = ["from math import trunc", "", ""]
    for name in languages:
        lines += _locale(name, (name[-2:].lower() + "now", name[-2:].lower() + "yr"))
    sel = select_lines(lines, "Added units to Nepali years timeframe", "code", path="locales.py", max_bytes=4096)
    table = lines.index('        "years": "liyr {0}",')
    assert sel.keep[table] and sel.keep[table - 3]


def test_a_block_the_budget_cut_names_every_unit_it_hides() -> None:
    """Cut to the budget, a view's pruned blocks join across the lines cut; the joined block
    kept its first part's reason, naming 2 (+3) of the 58 methods it hid (the agent-view
    review of 2026-11-29). Its reason now names what the whole block hides, and says the
    budget cut part of it; so does a block the budget alone cut, which said only `budget de
    réponse` and left the agent to guess which of the engine's picks it hid. One name each:
    such markers come by the dozen, and a second name's bytes cost lines."""
    from jeeves_mcp.pruning.contract import PruneOptions
    from jeeves_mcp.pruning.pruner import rows_by_order

    lines: list[str] = []
    for k in range(60):
        topic = "ledger total" if k in (10, 30, 50) else f"widget {k}"
        lines += [f"def step_{k}(order):", f'    """Compute the {topic}."""',
                  f"    value = order.get('{topic}')", "    return value", "", ""]
    selection = select_lines(lines, "how is the ledger total computed?", "code")
    assert all(selection.keep[i] for i in (60, 180, 300))  # the three asked functions
    _, rows, _ = rows_by_order(selection, lines, "prn_01234567", PruneOptions(), 700, 1)
    shown = {row.start for row in rows if not row.marker}
    assert 0 < sum(n + 1 in shown for n in (60, 180, 300)) < 3  # the budget cut one or two
    joined = alone = 0
    for row in (r for r in rows if r.marker):
        block = [selection.keep[n - 1] for n in range(row.start, row.end + 1)]
        hidden = [lines[n - 1][4:].split("(")[0] for n in range(row.start, row.end + 1)
                  if lines[n - 1].startswith("def ")]
        names = re.search(r"raison=[^:⟧]*(?:: ([^⟧]*))?⟧", row.text).group(1) or ""
        listed = [x for x in names.split(" +")[0].split(", ") if x]
        more = int(names.split(" +")[1]) if " +" in names else 0
        if any(block):  # one name, the most relevant, and how many more
            assert row.reason.startswith("budget de réponse: ") and len(listed) <= 1, row.text
        if hidden:
            assert len(listed) + more == len(hidden) and set(listed) <= set(hidden), (row.text, hidden)
        joined += any(block) and not all(block) and len(hidden) > 1
        alone += all(block) and bool(hidden)
    assert joined and alone
