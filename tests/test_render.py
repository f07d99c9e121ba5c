"""The response budget's cut: head and tail of the text, and of a line too long to fit."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from jeeves_mcp.pruning.render import fit_rows, fit_text, raw_rows, rows_text, text_bytes

MARKER = re.compile(r"^⟦PRUNÉ: prune_id=(\S+) lignes (\d+)-(\d+) \((\d+)\) raison=(.*)⟧$", re.M)


def test_a_long_line_in_the_middle_shows_its_head_not_nothing():
    # bash "echo hi; cat min.json; echo bye": one 40 KiB line between two short ones.
    blob = '{"items": [' + ", ".join(f'{{"id": {i}, "name": "item-{i}"}}' for i in range(1500)) + "]}"
    lines = ["hi", blob, "bye"]
    text, cut = fit_text("\n".join(lines), 1, 4096, "prn_test")
    assert cut is not None and text_bytes(text) <= 4096
    shown = text.split("\n")
    assert shown[0] == "hi" and shown[-1] == "bye"
    assert blob[:1000] in text and blob[-500:] in text  # the start and the end of the JSON
    marker = MARKER.search(text)
    assert marker and (int(marker.group(2)), int(marker.group(3))) == (2, 2)  # recover line 2 whole


def test_rows_get_the_same_cut():
    blob = "a" * 30_000
    rows = raw_rows(["first", blob, "last"])
    fitted, cut = fit_rows(rows, 4096, "prn_test")
    text = rows_text(fitted)
    assert cut is not None and text_bytes(text) <= 4096
    assert text.startswith("first\n" + "a" * 1000) and text.endswith("a" * 500 + "\nlast")
    assert (cut["original_start_line"], cut["original_end_line"]) == (2, 2)


def test_a_text_of_one_long_line_shows_its_head_and_tail():
    # read of a minified JSON file: one 64 KiB line and nothing else.
    blob = '{"items": [' + ", ".join(f'{{"id": {i}}}' for i in range(6000)) + "]}"
    for text, cut in (fit_text(blob, 1, 4096, "prn_test"),
                      (lambda r: (rows_text(r[0]), r[1]))(fit_rows(raw_rows([blob]), 4096, "prn_test"))):
        assert cut is not None and text_bytes(text) <= 4096
        head, marker, tail = text.split("\n")
        assert blob.startswith(head.removesuffix("…")) and blob.endswith(tail.removeprefix("…"))
        assert len(head) > 1500 and len(tail) > 1000 and MARKER.match(marker)
        assert (cut["original_start_line"], cut["original_end_line"]) == (1, 1)


def test_short_lines_are_cut_whole_as_before():
    lines = [f"line {i}" for i in range(5000)]
    text, cut = fit_text("\n".join(lines), 1, 4096, "prn_test")
    assert cut is not None and text_bytes(text) <= 4096
    assert all(line.startswith(("line ", "⟦PRUNÉ")) for line in text.split("\n"))
    assert "…" not in text


async def test_a_final_newline_is_not_a_line_of_its_own():
    # read says 632 lines, prune said "kept 159 of 633" and seq's view ended with "20001│".
    from jeeves_mcp.pruner_config import PrunerConfig
    from jeeves_mcp.pruning import LocalEngine, PruneOptions, Pruner
    from jeeves_mcp.pruning.recovery import RecoveryStore

    pruner = Pruner(PrunerConfig(), RecoveryStore(60, 1 << 20), LocalEngine())
    text = "".join(f"{i}\n" for i in range(1, 2001))
    outcome = await pruner.prune(text, "where is 1234?", "logs", PruneOptions(max_bytes=4096))
    assert outcome.stats["original_lines"] == 2000
    view = outcome.contract()["pruned_text"].split("\n")
    assert "1234│ 1234" in view
    assert not any(line.strip() in ("2001│", "2001│ ") for line in view)
    for annotation in outcome.annotations:
        assert annotation["original_end_line"] <= 2000


# Lines of every kind a budget cut meets: empty, short, multi-byte, longer than the budget.
_LINE = st.one_of(st.just(""), st.text("ab é€", max_size=12), st.text("xy", min_size=300, max_size=3000))


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_LINE, min_size=1, max_size=400), budget=st.integers(200, 3000), first=st.integers(1, 50))
def test_a_text_is_cut_as_its_rows_are_without_splitting_all_of_it(lines: list[str], budget: int, first: int) -> None:
    # fit_text splits only the two ends of a long text; the rows of every line are the reference.
    text = "\n".join(lines)
    fitted, cut = fit_text(text, first, budget, "prn_test")
    rows, rows_cut = fit_rows(raw_rows(lines, first), budget, "prn_test")
    assert (fitted, cut) == (rows_text(rows), rows_cut)
