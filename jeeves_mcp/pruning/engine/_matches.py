"""Units of search output (`grep -rn`, `rg -n`, `git grep -n`, the `grep` tool, and `rg` or
`grep -r` without line numbers): a file's matches.

Read as log records, every match was a record of its own, scored by its text alone: the file a
question named lost to lines of other files that repeat its words. A file's matches (ten in a
row at most) are a unit named by its path, and its lines are ranked one by one within it, as
code's are (the layout's `by_line`).

Diagnostics (`x.c:12:5: error: ...`, mypy's `x.py:3: error:`) have the same shape but are a
build's log: they stay with the logs layout, which keeps error lines whatever the question.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from ._git import short_path
from ._logs import error_lines
from ._units import Layout, Unit

__all__ = ["is_file_listing", "is_path_list", "is_search_output", "line_paths", "row_of", "search_layout", "tree_layout", "tree_paths"]

# `path:12:text`: a path with no blank (a log line's `Nov 29 01:02:03` is not one), git-quoted
# when it holds a colon; not a time's `01:02:03` (a digit after the second colon).
_PATH = r'("(?:[^"\\]|\\.)*"|[^:\s"][^:\s]*?)'
_MATCH = re.compile(_PATH + r":(\d+):(?!\d)")
# `path-12-text`: a context line of `grep -C` / `rg -C`; not a date's `2024-01-02`.
_CONTEXT = re.compile(_PATH + r"-(\d+)-(?!\d)")
# What follows `path:line:` in a compiler's or a linter's diagnostic: a column, a severity.
_DIAGNOSTIC = re.compile(r"\d+:| (?:fatal )?(?:error|warning|note|info|hint):", re.IGNORECASE)
# A share of the matches this large being diagnostics makes the text a build's log (a search
# may meet a `x.py:3: note: ...` line of its own).
DIAGNOSTICS = 0.2
# Share of the lines that must be matches or context lines.
MOST = 0.9
# `path:text`, what `rg X` and `grep -r X` print to a pipe (a path with no blank nor colon);
# context lines are `path-text`, told by the path of a match beside them. Not `path::name`,
# pytest's node ids (`tests/x.py::test_a PASSED`).
_BARE = re.compile(r'([^:\s"][^:\s]*):')
_NODE_ID = re.compile(r":\w+(?:::\w+)*(?:\[[^\]]*\])?(?:\s|$)")
# Most of the paths have a slash or a source or text file's extension: a logger's name
# (`myshop.db:`, `uvicorn.error:`, `INFO:root:`) is none.
_EXTENSIONS = frozenset("""
    py pyi pyx pxd c h cc cpp cxx hpp hh hxx cs fs java kt kts scala groovy go rs rb php js jsx mjs cjs
    ts tsx mts cts vue svelte swift m mm sh bash zsh fish ps1 pl pm lua r jl ex exs erl clj hs ml dart
    sql md rst txt adoc json jsonc yaml yml toml ini cfg conf xml html htm css scss sass less proto
    gradle cmake mk in lock properties tf nix el vim graphql ipynb tex csv tsv j2 jinja tmpl
""".split())
_EXTENSION = re.compile(r"\.(\w{1,6})$")
# The search tool's own messages among its matches (`grep: ./a.pyc: binary file matches`).
_TOOL_MESSAGE = re.compile(r"(?:grep|rg|git grep|ag|ack): ")
# A match's text that makes a build's or a checker's report of `path:text` lines: a line and a
# column number (gcc without a caret, ruff concise), a severity (`x.go: error ...`), a status
# (`sha256sum -c`'s `pkg.tar.gz: OK`).
_REPORTED = re.compile(r"\s*(?:\d|(?:fatal )?(?:error|warning|note)\b|(?:OK|FAILED)$)", re.IGNORECASE)
# A file listing (`find . -name '*.py'`, `git ls-files`, `rg --files`, `grep -rl X`): a path a
# line, with no blank nor colon (a URL, a log's time), most of them a file's; `ls -R` heads each
# directory's names with its path and a colon.
_LISTED = re.compile(r'[^\s:"]+')
LISTED_DIRECTORY = re.compile(r'([^\s:"]+):')
# `tree`'s entries: four columns a level (`│` and blanks, no-break spaces in UTF-8 output, or
# four spaces; `|   ` in ASCII), then a branch and the name.
_TREE_ENTRY = re.compile(r"((?:[│|][ \u00a0]{3}|    )*)(?:[├└]──|[|`]--)[ \u00a0](.+)")
_TREE_SUMMARY = re.compile(r"\d+ director(?:y|ies)(?:, \d+ files?)?")
# The dashes of a name tried as the end of a match's path, for a context line (`a.yml-name:`).
MAX_DASHES = 16
# Matches of one file in a row past this many start a new unit: a file with hundreds of
# matches is not kept or pruned whole (5, 10, 40 measured on two looked-at sets: 10).
MAX_GROUP = 10


def _numbered_path(line: str) -> str | None:
    match = _MATCH.match(line) or _CONTEXT.match(line)
    return None if match is None else match.group(1)


def row_of(line: str) -> tuple[str, int, str] | None:
    """(path, line number, line) of a numbered search's match or context row; None for any
    other line, or a git-quoted path (not the name as the file system spells it)."""
    match = _MATCH.match(line) or _CONTEXT.match(line)
    if match is None or match.group(1).startswith('"') or len(match.group(2)) > 18:
        return None  # int() of thousands of digits raises
    return match.group(1), int(match.group(2)), line[match.end() :]


def _file_like(path: str) -> bool:
    ext = _EXTENSION.search(path)
    return "/" in path or (ext is not None and ext.group(1).lower() in _EXTENSIONS)


def _bare_path(line: str) -> str | None:
    match = _BARE.match(line)
    if match is None or _NODE_ID.match(line, match.end()) or _TOOL_MESSAGE.match(line):
        return None
    return match.group(1)


def _bare_paths(lines: list[str]) -> list[str | None]:
    """The path of each line of `path:text` search output (None for a line that is none)."""
    found = [_bare_path(line) for line in lines]
    known = {path for path in found if path is not None}
    # A context line whose text reads as `name:` (`./ci.yml-name: CI`) is of the path before
    # its `-`, when that path is one of a match.
    context_of: dict[str, str] = {}
    for name in known:
        cut = name.find("-")
        # A cut is a slice hashed: a name of thousands of dashes cost seconds (review24).
        tries = MAX_DASHES
        while cut > 0 and (tries := tries - 1) >= 0:
            if name[:cut] in known:
                context_of[name] = name[:cut]
                break
            cut = name.find("-", cut + 1)
    count = Counter(found)
    # A name with no slash nor extension (`CHANGES`, `.gitignore`) is a path where it has
    # several matches: once, it is an exception's `ValueError: ...` after the search.
    matched = [None if path is None or path in context_of or not (count[path] > 1 or _file_like(path)) else path
               for path in found]
    below: list[str | None] = [None] * len(lines)
    for i in range(len(lines) - 2, -1, -1):
        below[i] = matched[i + 1] or below[i + 1]
    paths: list[str | None] = []
    above: str | None = None
    for i, line in enumerate(lines):
        path = matched[i]
        if path is not None:
            above = path
        elif (named := found[i]) is not None and named in context_of:
            path = context_of[named]
        elif line:
            for near in (above, below[i]):
                if near is not None and line.startswith(near) and line.startswith("-", len(near)):
                    path = near
                    break
        paths.append(path)
    return paths


def _rows(lines: list[str]) -> list[int]:
    """The lines of the first 2,000 to tell search output by: not blank, no `--` separator,
    none of the search tool's own messages."""
    return [i for i, line in enumerate(lines[:2000])
            if line.strip() and line != "--" and not _TOOL_MESSAGE.match(line)]


def _numbered(lines: list[str]) -> bool:
    """Nearly every line a match or a context line, most of them matches, and none a
    compiler's or linter's diagnostic."""
    rows = _rows(lines)
    matches = parsed = diagnostics = 0
    for i in rows:
        match = _MATCH.match(lines[i])
        if match is not None:
            diagnostics += _DIAGNOSTIC.match(lines[i], match.end()) is not None
            matches += 1
            parsed += 1
        elif _CONTEXT.match(lines[i]):
            parsed += 1
    return len(rows) >= 3 and parsed >= MOST * len(rows) and 0 < matches and diagnostics < DIAGNOSTICS * matches


def _bare(lines: list[str], paths: list[str | None]) -> bool:
    """Nearly every line a match or a context line, of two files or more, each file's lines
    together (as a search prints them: a log's lines interleave, and a log of one logger,
    `app.db:text`, is of one "file"), most paths a file's, and not a build's or a checker's
    report."""
    rows = _rows(lines)
    parsed = [i for i in rows if paths[i] is not None]
    matches = [i for i in parsed if lines[i].startswith(f"{paths[i]}:")]
    reported = sum(_REPORTED.match(lines[i], len(paths[i]) + 1) is not None for i in matches)  # type: ignore[arg-type]
    runs = sum(k == 0 or paths[i] != paths[parsed[k - 1]] for k, i in enumerate(parsed))
    files = sum(_file_like(paths[i]) for i in parsed)  # type: ignore[arg-type]
    return (len(rows) >= 3 and len(parsed) >= MOST * len(rows) and len(matches) > 0
            and reported < DIAGNOSTICS * len(matches) and files * 2 > len(parsed)
            and runs == len({paths[i] for i in parsed}) > 1)


def line_paths(lines: list[str]) -> list[str | None] | None:
    """The file each line of search output is a match or a context line of (None for a line
    that is neither), or None when the text is no search output."""
    if _numbered(lines):
        return [_numbered_path(line) for line in lines]
    sample = lines[:2000]  # a log is told from its first lines, as by _numbered
    paths = _bare_paths(sample)
    if not _bare(sample, paths):
        return None
    return paths if len(sample) == len(lines) else _bare_paths(lines)


def is_search_output(lines: list[str]) -> bool:
    return line_paths(lines) is not None


def tree_paths(lines: list[str]) -> list[str | None] | None:
    """The path of each entry of `tree` output (its first line the directory it ran on: `.`,
    `src`), None for its other lines; None when the text is no such output."""
    if not lines or not _mostly(lines, rows := _rows(lines[:2000])[1:], _tree_line):
        return None
    rows = [i for i in rows if not _TREE_SUMMARY.fullmatch(lines[i].strip())]
    if len(rows) < 3 or sum(_TREE_ENTRY.fullmatch(lines[i]) is not None for i in rows) < MOST * len(rows):
        return None
    top = lines[0].strip()
    parents: list[str] = [top]
    paths: list[str | None] = [None] * len(lines)
    for i, line in enumerate(lines[1:], 1):
        entry = _TREE_ENTRY.fullmatch(line)
        if entry is None:
            continue
        depth = len(entry.group(1)) // 4
        name = entry.group(2).split(" -> ", 1)[0].rstrip("/*=@|")
        del parents[depth + 1 :]
        parent = parents[min(depth, len(parents) - 1)]
        path = name if name.startswith(f"{top}/") else f"{parent}/{name}"  # `tree -f` names whole paths
        paths[i] = path
        parents.append(path)
    return paths


def _tree_line(line: str) -> bool:
    return _TREE_ENTRY.fullmatch(line) is not None or _TREE_SUMMARY.fullmatch(line.strip()) is not None


def tree_layout(lines: list[str], paths: list[str | None]) -> Layout:
    """Each of `tree`'s entries a unit labelled by its path (its indentation would make it a
    log record's continuation line, kept or pruned with the entry above)."""
    units = [Unit(i, i, short_path(path)) for i, path in enumerate(paths) if path]
    return Layout(units=units, always=set(), listed=paths, tree=True)


def is_file_listing(lines: list[str]) -> bool:
    """A list of paths (is_path_list) or `tree`'s output."""
    return tree_paths(lines[:2000]) is not None or is_path_list(lines)


def is_path_list(lines: list[str]) -> bool:
    """Nearly every one of the first lines a path, of two files or more, most of them a file's
    (told from the first 2,000, as search output is)."""
    rows = _rows(lines)
    if len(rows) < 3 or not _mostly(lines, rows, listed_line):
        return False
    listed = [lines[i] for i in rows if listed_line(lines[i])]
    names = [line for line in listed if not LISTED_DIRECTORY.fullmatch(line)]
    return sum(map(names_a_file, names)) * 2 > len(names) and len(set(listed)) > 1


def names_a_file(path: str) -> bool:
    """Whether a listed path's last part has a file's extension (a letter first: not a date's
    `2024/01/02`, a CSV row's `0.50`, a package path or base64, which hold slashes too)."""
    ext = _EXTENSION.search(path)
    return ext is not None and ext.group(1)[0].isalpha()


def _mostly(lines: list[str], rows: list[int], matches: Callable[[str], bool]) -> bool:
    """Whether `matches` may hold for MOST of `rows` (a summary's or blank line aside): False as
    soon as too many lines miss, so that a log is told from a listing in a few of its lines."""
    misses = 0
    for i in rows:
        if not matches(lines[i]):
            misses += 1
            if len(rows) - misses < MOST * len(rows):  # the whole test's own comparison
                return False
    return True


def listed_line(line: str) -> bool:
    return _LISTED.fullmatch(line) is not None or LISTED_DIRECTORY.fullmatch(line) is not None


def search_layout(lines: list[str], paths: list[str | None]) -> Layout:
    """A file's matches (at most MAX_GROUP lines in a row) are a unit, named by its path; the
    lines between that are no match (a `--`, a command's own output after the search) are
    units of their own, worth more when they report an error, as in the logs layout."""
    units: list[Unit] = []
    start, path = 0, None
    for i in range(len(lines) + 1):
        here = paths[i] if i < len(lines) else None
        if i == len(lines) or here != path or i - start >= MAX_GROUP:
            if i > start:
                if path is not None:
                    units.append(Unit(start, i - 1, short_path(path), name=path.replace("/", " ")))
                else:
                    units.append(Unit(start, i - 1, "", prior=float(any(error_lines(lines[start:i])))))
            start, path = i, here
    return Layout(units=units, always=set(), by_line=True, paths=paths)
