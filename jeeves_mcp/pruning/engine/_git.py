"""Units of git's output: `git log` (with `-p` or `--stat`), `git show`, `git diff`.

Read as log records, a patch fell apart into its `+` and `-` runs, and the commit a question
names by its subject kept its message and lost its changes. Here a commit is a unit named
by its subject; each file it changes is a unit of its own (named by its path, the commit's
subject a weaker name) that comes with the commit's header, and a long file diff is cut
into its hunks, each named by the function git's hunk header names.
"""

from __future__ import annotations

import re

from ._units import Layout, Unit

__all__ = ["git_layout", "is_git_output"]

_COMMIT = re.compile(r"commit [0-9a-f]{7,64}\b")
_FILE = "diff --git "
_HUNK = re.compile(r"@@ [^@]* @@ ?(.*)")
_PATH = re.compile(r"diff --git (?:\"?a/)?(.*?)\"? (?:\"?b/)")
# A file's diff over this many lines is cut into its hunks.
MAX_FILE_UNIT = 60
# Characters of a subject in a marker's label.
LABEL_CHARS = 60


def is_git_output(lines: list[str]) -> bool:
    """Whether the text starts as git's log, show or diff output does."""
    first = next((line for line in lines if line.strip()), "")
    return bool(_COMMIT.match(first)) or first.startswith(_FILE)


def git_layout(lines: list[str]) -> Layout:
    n = len(lines)
    units: list[Unit] = []
    follows: dict[int, int] = {}
    commit: tuple[int, int] | None = None  # the open commit's header and message
    lead = -1  # its unit
    subject = ""
    i = 0
    while i < n:
        if _COMMIT.match(lines[i]):
            end = _block_end(lines, i)
            commit, subject, lead = (i, end), _subject(lines, i, end), len(units)
            sha = lines[i].split()[1][:10]
            units.append(Unit(i, end, f"commit {sha} {subject}"[:LABEL_CHARS], name=subject, sig=(i, i)))
            i = end + 1
        elif lines[i].startswith(_FILE):
            end = _block_end(lines, i)
            for unit in _file_units(lines, i, end, commit, subject):
                if lead >= 0:  # a commit's changes are what a question about it asks for
                    follows[len(units)] = lead
                units.append(unit)
            i = end + 1
        else:  # before the first commit or file: a header of its own
            end = _block_end(lines, i)
            units.append(Unit(i, end, ""))
            i = end + 1
    return Layout(units=units, always=set(), follows=follows)


def _block_end(lines: list[str], start: int) -> int:
    """The last line before the next commit or file diff after `start`."""
    for k in range(start + 1, len(lines)):
        if lines[k].startswith(_FILE) or _COMMIT.match(lines[k]):
            return k - 1
    return len(lines) - 1


def _subject(lines: list[str], start: int, end: int) -> str:
    """The first line of a commit's message: the first indented line of its header."""
    for k in range(start + 1, end + 1):
        if lines[k].startswith("    ") and lines[k].strip():
            return lines[k].strip()
    return ""


def _file_units(
    lines: list[str], start: int, end: int, commit: tuple[int, int] | None, subject: str
) -> list[Unit]:
    """A file's diff as one unit, or as its hunks when long; each with the commit's header."""
    match = _PATH.match(lines[start])
    path = match.group(1) if match else lines[start][len(_FILE) :]
    hunks = [k for k in range(start + 1, end + 1) if lines[k].startswith("@@ ")]
    header_end = (hunks[0] if hunks else end + 1) - 1
    heads = [commit] if commit is not None else []
    if end - start + 1 <= MAX_FILE_UNIT or not hunks:
        return [Unit(start, end, path, name=path, owner=subject, sig=(start, header_end), heads=heads)]
    units = [Unit(start, header_end, path, name=path, owner=subject, sig=(start, header_end), heads=heads)]
    for a, b in zip(hunks, [*hunks[1:], end + 1], strict=True):
        hunk = _HUNK.match(lines[a])
        where = hunk.group(1).strip() if hunk else ""
        label = f"{path} {where}".strip()
        units.append(Unit(a, b - 1, label, name=where, owner=f"{path} {subject}", sig=(a, a),
                          heads=[*heads, (start, header_end)]))
    return units
