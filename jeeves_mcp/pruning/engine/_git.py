"""Units of git's output: `git log` (with `-p` or `--stat`), `git show`, `git diff`.

Read as log records, a patch fell apart into its `+` and `-` runs, and the commit a question
names by its subject kept its message and lost its changes. Here a commit is a unit named
by its subject; each file it changes is a unit of its own (named by its path, the commit's
subject a weaker name) that comes with the commit's first lines, and a long file diff is cut
into its hunks, each named by the function git's hunk header names.

Only a text that is git's output from end to end is read so: `git log -1 && make` is a build
log with a commit on top, and its errors are found by the logs layout.
"""

from __future__ import annotations

import re

from ._units import Layout, Unit

__all__ = ["git_layout", "is_git_output", "short_path"]

_COMMIT = re.compile(r"commit [0-9a-f]{7,64}\b")
_FILES = ("diff --git ", "diff --cc ", "diff --combined ")
_HUNK = re.compile(r"@@@? [^@]* @@@? ?(.*)")
_PATH = re.compile(r"diff --(?:git|cc|combined) (?:\"?a/)?(.*?)\"?(?: (?:\"?b/)|$)")
# Lines git writes in a commit's header and a file's diff header, besides its hunks.
_HEADER = re.compile(
    r"(?:Author|AuthorDate|Commit|CommitDate|Date|Merge|Reflog|Notes):|index |--- |\+\+\+ |(?:new file )?mode |"
    r"deleted file mode|old mode|new mode|similarity index|dissimilarity index|rename from|rename to|"
    r"copy from|copy to|Binary files|GIT binary patch|literal \d|delta \d"
)
# A `--stat` line: ` path | 12 ++--`, ` 3 files changed, ...`.
_STAT = re.compile(r" \S.* \| +(?:\d+|Bin)| \d+ files? changed")
# Lines that are not git's at most (a `warning:` of git's own, a pager's `(END)`).
MAX_OTHER_LINES = 2
# A file's diff over this many lines is cut into its hunks.
MAX_FILE_UNIT = 60
# Characters of a name in a label (markers show 40 of a unit's label).
LABEL_CHARS = 38


def is_git_output(lines: list[str]) -> bool:
    """Whether the text is git's log, show or diff output: it starts as they do, and every line
    but MAX_OTHER_LINES is one git writes where it stands (a `+` or `-` line only in a hunk:
    CMake's `-- Detecting C compiler` lines are not a diff's)."""
    first = next((line for line in lines if line.strip()), "")
    if not (_COMMIT.match(first) or first.startswith(_FILES)):
        return False
    other = 0
    in_hunk = False
    for line in lines:
        if line.startswith("@@"):
            in_hunk = True
        elif line.startswith(_FILES) or _COMMIT.match(line):
            in_hunk = False
        elif not line or line[0] in " \t":  # a message, a stat line, a hunk's context
            pass
        elif line[0] in "+-\\":
            if not (in_hunk or line.startswith(("--- ", "+++ "))):
                other += 1
        elif not _HEADER.match(line):
            other += 1
        if other > MAX_OTHER_LINES:
            return False
    return True


def git_layout(lines: list[str]) -> Layout:
    n = len(lines)
    units: list[Unit] = []
    follows: dict[int, int] = {}
    head: tuple[int, int] | None = None  # the open commit's lines from `commit` to its subject
    lead = -1  # its unit
    subject = ""
    i = 0
    while i < n:
        end = _block_end(lines, i)
        if _COMMIT.match(lines[i]):
            at, subject = _subject(lines, i, end)
            head, lead = (i, at), len(units)
            sha = lines[i].split()[1][:7]
            units.append(Unit(i, end, f"{_clip(subject, LABEL_CHARS - 10)} ({sha})", name=subject, sig=(i, i)))
        elif lines[i].startswith(_FILES):
            for unit in _file_units(lines, i, end, head, subject):
                if lead >= 0:  # a commit's changes are what a question about it asks for
                    follows[len(units)] = lead
                units.append(unit)
        else:  # before the first commit or file: a header of its own
            units.append(Unit(i, end, ""))
        i = end + 1
    return Layout(units=units, always=set(), follows=follows)


def _block_end(lines: list[str], start: int) -> int:
    """The last line before the next commit or file diff after `start`."""
    for k in range(start + 1, len(lines)):
        if lines[k].startswith(_FILES) or _COMMIT.match(lines[k]):
            return k - 1
    return len(lines) - 1


def _subject(lines: list[str], start: int, end: int) -> tuple[int, str]:
    """The line and text of a commit's subject: the first indented line of its header."""
    for k in range(start + 1, end + 1):
        if lines[k].startswith("    ") and lines[k].strip():
            return k, lines[k].strip()
    return start, ""


def _clip(name: str, most: int = LABEL_CHARS) -> str:
    return name if len(name) <= most else name[: most - 1] + "…"


def short_path(path: str) -> str:
    """A path a label can show whole: its end, where the file's name is."""
    return path if len(path) <= LABEL_CHARS else "…" + path[-(LABEL_CHARS - 1) :]


def _file_units(
    lines: list[str], start: int, end: int, head: tuple[int, int] | None, subject: str
) -> list[Unit]:
    """A file's diff as one unit, or as its hunks when long; each with the commit's first lines."""
    hunks = [k for k in range(start + 1, end + 1) if lines[k].startswith("@@")]
    header_end = (hunks[0] if hunks else end + 1) - 1
    path = _path(lines, start, header_end)
    heads = [head] if head is not None else []
    label = short_path(path)
    if end - start + 1 <= MAX_FILE_UNIT or not hunks:
        return [Unit(start, end, label, name=path, owner=subject, sig=(start, header_end), heads=heads)]
    units = [Unit(start, header_end, label, name=path, owner=subject, sig=(start, header_end), heads=heads)]
    base = path.rsplit("/", 1)[-1]
    for a, b in zip(hunks, [*hunks[1:], end + 1], strict=True):
        hunk = _HUNK.match(lines[a])
        where = hunk.group(1).strip() if hunk else ""
        # The function first: a marker shows 40 characters of a label.
        shown = _clip(where, 26)
        where_label = f"{shown} ({_clip(base, max(8, LABEL_CHARS - 3 - len(shown)))})"
        units.append(Unit(a, b - 1, where_label if where else label, name=where,
                          owner=f"{path} {subject}", sig=(a, a), heads=[*heads, (start, header_end)]))
    return units


def _path(lines: list[str], start: int, header_end: int) -> str:
    """The file's path after the change (`+++ b/x`, `rename to x`), else as `diff --git` names it."""
    for k in range(start + 1, header_end + 1):
        line = lines[k]
        if line.startswith("+++ ") and line != "+++ /dev/null":
            return line[4:].removeprefix("b/")
        if line.startswith("rename to "):
            return line[len("rename to ") :]
    match = _PATH.match(lines[start])
    return match.group(1) if match else lines[start].split(" ", 2)[-1]
