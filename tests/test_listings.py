"""File listings as the engine reads them (`find`, `git ls-files`, `grep -rl`, `ls -R`, `tree`):
what is told a listing and what is not, the directory each record is named by, and `ls -R`'s
headings (review25's cases)."""

from __future__ import annotations

import os

from jeeves_mcp.pruning.engine import select_lines
from jeeves_mcp.pruning.engine._matches import MOST, _mostly, is_path_list, tree_paths
from jeeves_mcp.pruning.engine._planner import text_layout
from jeeves_mcp.pruning.render import plain_reason


def test_telling_a_listing_early_answers_as_counting_every_line() -> None:
    """_mostly stops at the first line too many, and answers as the whole count did: exactly a
    tenth of the lines missing is still a listing (1 - 0.9 is 0.0999… in floating point)."""
    for n in range(1, 301):
        for missing in range(n + 1):
            lines = ["x"] * missing + ["./a.py"] * (n - missing)
            assert _mostly(lines, list(range(n)), lambda line: line != "x") == (n - missing >= MOST * n), (n, missing)
    assert is_path_list([f"./src/mod{k}/file{k}.py" for k in range(18)] + ["find: './a': Permission denied"] * 2)
    assert tree_paths(["."] + [f"├── mod{k}.py" for k in range(9)] + ["[error opening dir]"]) is not None


def _ls_recursive_with_a_spaced_directory() -> list[str]:
    lines = [".:", "assets", "docs", "src", "", "./assets:"] + [f"img{k}.svg" for k in range(40)]
    lines += ["", "./docs:"] + [f"page{k}.md" for k in range(40)]
    lines += ["", "./docs/Team Area:"] + [f"note{k}.md" for k in range(5)] + ["card_refund.md"]
    return lines + ["", "./src:"] + [f"mod{k}.py" for k in range(40)]


def test_a_name_under_a_heading_with_a_blank_is_shown_under_that_heading() -> None:
    lines = _ls_recursive_with_a_spaced_directory()
    at = lines.index("card_refund.md")
    sel = select_lines(lines, "which file describes a card refund?", "logs", max_bytes=10240)
    assert sel.keep[at]
    shown = max(i for i in range(at) if sel.keep[i] and lines[i].endswith(":"))
    assert lines[shown] == "./docs/Team Area:"
    labels = {unit.label for unit in text_layout(lines, "logs", None).units}
    assert "docs/Team Area/" in labels and not any("/./" in label for label in labels), sorted(labels)


def test_a_log_after_a_listing_is_named_by_no_directory() -> None:
    """A listing is told by its first 2,000 lines; a build's log after them (`find …; make`)
    holds no paths, so its records are named by none."""
    lines = [f"./src/pkg{k % 40}/mod{k}.c" for k in range(2000)]
    lines += [f"gcc -O2 -c src/pkg{k % 40}/mod{k}.c -o build/mod{k}.o" for k in range(3000)]
    layout = text_layout(lines, "logs", None)
    assert layout.listed is not None
    assert not any(" -c " in unit.label for unit in layout.units)


def test_outputs_that_hold_slashes_are_no_file_listings() -> None:
    """A line with a slash is no file's path for all that: dates, CSV rows, base64, package
    paths (`go list`), Kubernetes names, an environment."""
    texts = {
        "base64": [os.urandom(30).hex() + "+/" + os.urandom(10).hex() for _ in range(60)],
        "csv": [f"{1000 + k},2024/{1 + k % 12:02d}/{1 + k % 28:02d},refund,{k}.50" for k in range(60)],
        "go list": [f"github.com/acme/shop/pkg/mod{k}" for k in range(60)],
        "kubectl": [f"pod/shop-{k}-7d9f" for k in range(60)],
        "env": [f"VAR_{k}=/usr/lib/jvm/java-{k}" for k in range(60)],
        "dates": [f"2024/{1 + k % 12:02d}/{1 + k % 28:02d}" for k in range(60)],
    }
    for name, lines in texts.items():
        assert text_layout(lines, "logs", None).listed is None, name
    assert text_layout([f"./src/pkg{k}/mod{k}.py" for k in range(60)], "logs", None).listed is not None


def test_a_listings_marker_shows_no_invisible_characters_of_a_name() -> None:
    """A cloned repository's directory names reach the markers: tag characters (text a model
    may read and no one sees) and private-use characters are left out, as controls are."""
    reason = plain_reason("hors focus: docs/tag\U000e0041\U000e0042x/, a\ufff9b\ue001/ +2")
    assert reason == "hors focus: docs/tagx/, ab/ +2"
