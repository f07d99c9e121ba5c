"""Lines a question names by number: a traceback's, a linter's, an agent's "line 118"."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ._rank import Scores, line_owner
from ._units import Layout

__all__ = ["favour_named_lines", "named_lines"]

# Line numbers a question names: "line 118", "lines 40-52", a traceback's `File "app.py", line
# 118`, a linter's `app.py:459:89`. Tracebacks and linters speak in line numbers, and an agent
# quoting one asks about that line: it gains the best evidence of the text, its unit the best
# score. A reference to another file (by its name) is left out. Every pattern is anchored on a
# literal ("line", ":") and looks back over a bounded tail, so a question costs time linear in
# its length whatever it holds.
_LINE_WORD = re.compile(r"\blines?\s+(\d{1,7})(?:\s*(?:-|\u2013|to)\s*(\d{1,7}))?", re.IGNORECASE)
_TRACEBACK_FILE = re.compile(r"""File\s+["']([^"'\n]*)["'],\s*$""")
_COLON_NUMBER = re.compile(r":(\d{1,7})\b")
_TOKEN_END = re.compile(r"""[\s"'(),;=]""")
_FILE_NAME = re.compile(r"[\w./\\-]*\w\.\w{1,8}")
LOOKBACK = 300  # characters before a number searched for the file it is in
MAX_REFERENCES = 20  # a question naming more lines than this is not about a few of them
# At most this many lines are favoured by one range.
NAMED_SPAN = 100


def _base_name(name: str) -> str:
    return name.replace("\\", "/").rsplit("/", 1)[-1]


def _references(question: str) -> list[tuple[str | None, int, int]]:
    """(file named or None, first line, last line) of each line reference in `question`."""
    refs: list[tuple[str | None, int, int]] = []
    for m in _LINE_WORD.finditer(question):
        if len(refs) >= MAX_REFERENCES:
            return refs
        traceback = _TRACEBACK_FILE.search(question[max(0, m.start() - LOOKBACK) : m.start()])
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else first
        refs.append((traceback.group(1) if traceback else None, first, last))
    for looked, m in enumerate(_COLON_NUMBER.finditer(question)):
        if len(refs) >= MAX_REFERENCES or looked >= 5 * MAX_REFERENCES:
            break
        token = _TOKEN_END.split(question[max(0, m.start() - LOOKBACK) : m.start()])[-1]
        if _FILE_NAME.fullmatch(token):
            refs.append((token, int(m.group(1)), int(m.group(1))))
    return refs


def named_lines(question: str, n: int, path: str | None = None) -> list[int]:
    """The 0-based lines (within the text's `n`) that `question` names by number."""
    mine = _base_name(path) if path else None
    out: set[int] = set()
    for name, a, b in _references(question):
        if name and mine and _base_name(name) != mine:
            continue
        if b < a or b - a >= NAMED_SPAN:
            b = a
        out.update(i - 1 for i in range(max(a, 1), min(b, n) + 1))
    return sorted(out)


def favour_named_lines(scored: Scores, layout: Layout, named: Sequence[int]) -> None:
    """The lines a question names by number, and their units, outrank every other."""
    best_line = max(scored.lines, default=0.0) or 1.0
    best_unit = max(scored.units, default=0.0) or 1.0
    owner = line_owner(layout.units, len(scored.lines))
    for i in named:
        scored.lines[i] += 2 * best_line
        if owner[i] >= 0:
            scored.units[owner[i]] = max(scored.units[owner[i]], 2 * best_unit)
