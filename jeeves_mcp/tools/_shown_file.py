"""Which file a `bash` command prints: `cat F`, `sed -n '40,120p' F`, `head -n 80 F`,
`nl -ba F | sed -n '1,200p'`, after an optional `cd DIR &&`.

Agents that read files through a shell (Codex does) get the file's text as command output.
Pruned as logs, it lost the lines a fix edits far more often than the same text pruned as
code; the `bash` tool prunes such output as `read` prunes that file, once it has checked
that the output is the file's lines (see `ShownFile.first_line`). Anything this grammar does
not know (a pipe to grep, a redirection, two files) stays command output.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

__all__ = ["ShownFile", "shown_file"]

_SED_WINDOW = re.compile(r"(\d+)(?:,(\d+|\$))?p")
_COUNT = re.compile(r"\d+")
# A name the shell would expand (a variable, a glob, a home) is not the name we see.
_EXPANDED = re.compile(r"[$`*?\[{]|^~")
# Options of `nl` that change only the numbers' look (`-b a` numbers blank lines too).
_NL_FLAGS = re.compile(r"-(?:ba|w\d+|nln|nrn|nrz)")
_NL_WITH_VALUE = frozenset({"-b", "-w", "-n"})
_NL_VALUES = re.compile(r"a|t|\d+|ln|rn|rz")


@dataclass(frozen=True)
class ShownFile:
    """`path` (as the command spells it, relative to `cd`, if any, then to the command's
    cwd) printed from line `start` (counted from the end when `from_end`), `count` lines
    at most (None: to its end), with `cat -n` / `nl` numbers when `numbered`."""

    path: str
    cd: str | None = None
    start: int = 1
    count: int | None = None
    from_end: bool = False
    numbered: bool = False

    def first_line(self, file_lines: list[str], shown: list[str]) -> int | None:
        """The file's line number of the first line shown, when `shown` (numbers taken off)
        is a window of `file_lines` where the command says; None when it is not (the file
        changed, or the command did something this grammar did not see)."""
        if self.from_end:
            start = max(1, len(file_lines) - (self.count or 0) + 1)
        else:
            start = self.start
        window = file_lines[start - 1 : start - 1 + len(shown)]
        if not shown or window != shown:
            return None
        return start


def shown_file(cmd: str) -> ShownFile | None:
    """The file `cmd` prints whole or a window of, or None."""
    try:
        lexer = shlex.shlex(cmd, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # an unclosed quote
        return None
    cd = None
    if len(words) > 3 and words[0] == "cd" and words[2] == "&&":
        cd, words = words[1], words[3:]
    stages: list[list[str]] = [[]]
    for word in words:
        if word == "|":
            stages.append([])
        elif set(word) <= set("|&;<>()"):
            return None  # a redirection, a list, a subshell
        else:
            stages[-1].append(word)
    if len(stages) > 2 or not all(stages):
        return None
    shown = _printer(stages[0])
    if shown is None:
        return None
    if any(_EXPANDED.search(name) for name in (shown.path, cd or "")):
        return None
    if len(stages) == 2:
        window = _window(stages[1], None)
        if window is None or shown.count is not None or shown.from_end:
            return None
        start, count, from_end = window
        shown = replace(shown, start=start, count=count, from_end=from_end)
    return replace(shown, cd=cd)


def _printer(words: list[str]) -> ShownFile | None:
    """A command that prints one file (a window of it): cat, nl, sed -n, head, tail."""
    name, args = words[0], words[1:]
    if not args or args[-1].startswith("-"):
        return None
    path, options = args[-1], args[:-1]
    if name == "cat":
        if options not in ([], ["-n"]):
            return None
        return ShownFile(path, numbered=bool(options))
    if name == "nl":
        return ShownFile(path, numbered=True) if _nl_options(options) else None
    window = _window([name, *options], path)
    if window is None:
        return None
    start, count, from_end = window
    return ShownFile(path, start=start, count=count, from_end=from_end)


def _nl_options(options: list[str]) -> bool:
    rest = list(options)
    while rest:
        flag = rest.pop(0)
        if flag in _NL_WITH_VALUE and rest and _NL_VALUES.fullmatch(rest[0]):
            rest.pop(0)
        elif not _NL_FLAGS.fullmatch(flag):
            return False
    return True


def _window(words: list[str], path: str | None) -> tuple[int, int | None, bool] | None:
    """(first line, line count or None, counted from the end) of `sed -n 'A,Bp'`, `head`
    or `tail` reading `path` (None: their input)."""
    name, options = words[0], words[1:]
    if name == "sed":
        if len(options) != 2 or options[0] != "-n":
            return None
        match = _SED_WINDOW.fullmatch(options[1])
        if match is None:
            return None
        start = int(match.group(1))
        end = match.group(2)
        if start < 1:
            return None
        if end is None:
            return start, 1, False
        if end == "$":
            return start, None, False
        return (start, int(end) - start + 1, False) if int(end) >= start else None
    if name not in ("head", "tail"):
        return None
    count = _line_count(options)
    if count is None:
        return None
    number, from_start = count
    if name == "head":
        return (1, number, False) if not from_start else None
    if from_start:  # tail -n +N: from line N to the end
        return max(1, number), None, False
    return 1, number, True


def _line_count(options: list[str]) -> tuple[int, bool] | None:
    """The N of `-n N`, `-nN`, `-N`, `--lines=N` (10 when none), and whether it was `+N`."""
    if not options:
        return 10, False
    if len(options) == 2 and options[0] == "-n":
        value = options[1]
    elif len(options) == 1 and options[0].startswith("--lines="):
        value = options[0].removeprefix("--lines=")
    elif len(options) == 1 and options[0].startswith("-n"):
        value = options[0][2:]
    elif len(options) == 1 and _COUNT.fullmatch(options[0][1:]) and options[0][0] == "-":
        value = options[0][1:]
    else:
        return None
    plus = value.startswith("+")
    value = value.removeprefix("+")
    return (int(value), plus) if _COUNT.fullmatch(value) else None
