"""Lines a question names by number: a traceback's, a linter's, an agent's "line 118"."""

from __future__ import annotations

import re
from collections.abc import Sequence

from jeeves_mcp.quoting import unquoted_path

from ._rank import Scores, line_owner
from ._units import Layout

__all__ = ["favour_named_lines", "named_lines"]

# Line numbers a question names: "line 118", "lines 40-52", a traceback's `File "app.py", line
# 118`, a linter's `app.py:459:89`. Tracebacks and linters speak in line numbers, and an agent
# quoting one asks about that line: it gains the best evidence of the text, its unit the best
# score. A reference to another file is left out. Every pattern is anchored on a literal
# ("line", ":") and looks back over a bounded tail, so a question costs time linear in its
# length whatever it holds.
_LINE_WORD = re.compile(
    r"\blines?[ \t]+(\d{1,7})(?:[ \t]*(?:-|\u2013|\u2014|to)[ \t]*(\d{1,7}))?", re.IGNORECASE
)
# The file a `line N` is in: a traceback's `File "app.py", `, YAML's `in "config.yaml", `.
_QUOTED_FILE = re.compile(r"""(?:File|in)[ \t]+["']([^"'\n]*)["'],[ \t]*$""")
_COLON_NUMBER = re.compile(r":(\d{1,7})\b")
_TOKEN_END = re.compile(r"""[\s"'(),;=`\[\]<>{}]""")
_FILE_NAME = re.compile(r"(?:[A-Za-z]:)?[\w./\\-]*\w\.\w{1,8}")
_EXTENSION = re.compile(r"[^/\\]\.\w{1,8}\Z")  # what a quoted name must end with: a JSON key has none
LOOKBACK = 300  # characters before a number searched for the file it is in
# References favoured at most: a question naming more is not about a few of them. The
# innermost frame of a traceback comes last, so the last ones naming this text are kept.
MAX_NAMED = 20
MAX_LOOKED_AT = 1000  # line references read at most, this text's or not
# At most this many lines are favoured by one range.
NAMED_SPAN = 100


def _parts(name: str) -> list[str]:
    return [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]


def _same_file(named: str, path: str) -> bool:
    """Whether a reference's file name is the text's path: the same base name, and when
    both have directories, one's parts end the other's (`/home/u/proj/app.py`, `proj/app.py`)."""
    a, b = _parts(named), _parts(path)
    if not a or not b or a[-1] != b[-1]:
        return False
    k = min(len(a), len(b))
    return k == 1 or a[-k:] == b[-k:]


def _references(question: str) -> list[tuple[str | None, int, int]]:
    """(file named or None, first line, last line) of the line references in `question`,
    in the order they appear, at most MAX_LOOKED_AT of them."""
    found: list[tuple[int, str | None, int, int]] = []
    for m in _LINE_WORD.finditer(question):
        if len(found) >= MAX_LOOKED_AT:
            break
        quoted = _QUOTED_FILE.search(question[max(0, m.start() - LOOKBACK) : m.start()])
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else first
        found.append((m.start(), quoted.group(1) if quoted else None, first, last))
    for looked, m in enumerate(_COLON_NUMBER.finditer(question)):
        if looked >= MAX_LOOKED_AT:
            break
        before = question[max(0, m.start() - LOOKBACK) : m.start()]
        token = _git_quoted(before) if before.endswith('"') else None
        if token is None or not _EXTENSION.search(token):
            token = _TOKEN_END.split(before)[-1]
            if not _FILE_NAME.fullmatch(token):
                continue
        found.append((m.start(), token, int(m.group(1)), int(m.group(1))))
    return [(name, a, b) for _, name, a, b in sorted(found, key=lambda r: r[0])]


def _git_quoted(before: str) -> str | None:
    """The path `before` ends with when it ends with one quoted as git (and grep) quote one,
    `"a:b.py"`, unquoted; None if it does not."""
    i = len(before) - 2
    while i >= 0:
        if before[i] == '"':  # the opening quote, unless a backslash escapes it
            slashes = 0
            while i - slashes > 0 and before[i - slashes - 1] == "\\":
                slashes += 1
            if slashes % 2 == 0:
                break
        i -= 1
    else:
        return None
    return unquoted_path(before[i + 1 : -1])


def named_lines(question: str, n: int, path: str | None = None) -> list[int]:
    """The 0-based lines (within the text's `n`) that `question` names by number."""
    accepted = [
        (min(a, b), max(a, b))
        for name, a, b in _references(question)
        if not (name and path and not _same_file(name, path)) and min(a, b) <= n
    ]
    out: set[int] = set()
    for a, b in accepted[-MAX_NAMED:]:
        out.update(i - 1 for i in range(max(a, 1), min(b, a + NAMED_SPAN - 1, n) + 1))
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
