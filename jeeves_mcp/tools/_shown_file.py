"""Which file a `bash` command prints: `cat F`, `sed -n '40,120p' F`, `head -n 80 F`,
`nl -ba F | sed -n '1,200p'`, `git show REV:F`, after an optional `cd DIR &&`; or searches,
`grep -n PATTERN F`, `rg -n -C2 PATTERN F | head`, whose rows are lines of F by number.

Agents that read files through a shell (Codex does) get the file's text as command output.
Pruned as logs, it lost the lines a fix edits far more often than the same text pruned as
code; the `bash` tool prunes such output as `read` prunes that file, once it has checked
that the output is the file's lines (see `ShownFile.first_line`). Anything this grammar does
not know (a pipe to grep, a redirection, two files) stays command output.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, replace

from jeeves_mcp.pruning.engine import Around
from jeeves_mcp.pruning.recovery import Lines

__all__ = ["ShownFile", "shown_file"]

# Numbers of up to 18 digits: int() of thousands of digits raises, GNU tools take them.
_SED_WINDOW = re.compile(r"(\d{1,18})(?:,(\d{1,18}|\$))?p")
_COUNT = re.compile(r"\d{1,18}")
# What a command this grammar knows starts with; anything else is not lexed at all (shlex's
# time grows with the square of a word's length, and a command may be 2 MiB long).
_PRINTER_HEAD = re.compile(r"\s*(?:cd\s+\S+\s*&&\s*)?(?:cat|nl|sed|head|tail|git\s+show|[ef]?grep|rg)\s")
MAX_COMMAND_CHARS = 4096
# A name the shell would expand (a variable, a glob, a home) is not the name we see.
_EXPANDED = re.compile(r"[$`*?\[{]|^~")
# `nl` numbering every line (`-ba`: by default it leaves blank lines out, and its numbers are
# not the file's), at any width.
_NL_FLAGS = re.compile(r"-(?:ba|w\d{1,2})")


@dataclass(frozen=True)
class ShownFile:
    """`path` (as the command spells it, relative to `cd`, if any, then to the command's
    cwd) printed from line `start`, or its last `count` lines when `from_end`, with `cat -n` /
    `nl -ba` numbers when `numbered`. `count` (None: to the end) says what the command asked
    for; what it printed is checked against the file, not counted."""

    path: str
    cd: str | None = None
    start: int = 1
    count: int | None = None
    from_end: bool = False
    numbered: bool = False
    rev: str | None = None  # `git show REV:F`: the file as it was at REV, not the working tree's
    # A search of the file (`grep -n`): rows `12:line` (a match), `12-line` (context) and `--`.
    matches: bool = False

    def first_line(self, text: str, shown: str) -> int | None:
        """The file's line number of the first line of `shown` (the output, numbers taken off)
        when it is the file's text (`text`) from the line the command says, whole lines; None
        when it is not (the file changed, or the command did something this grammar did not
        see). The file is never split into lines: a large one would take seconds."""
        lines = Lines(text.removesuffix("\n"))
        start = max(1, len(lines) - (self.count or 0) + 1) if self.from_end else self.start
        body = shown.removesuffix("\n")
        if start > len(lines) or not body:
            return None
        at = lines.start(start - 1)
        end = at + len(body)
        if text[at:end] != body or (end < len(text) and text[end] != "\n"):
            return None
        return start

    def rows_match(self, text: str, shown: str) -> bool:
        """Whether every row of the search output `shown` is the file's (`text`'s) line of its
        number, numbers rising, or grep's `--`, as the engine checks them (Around.part). The
        file is split: it is one the engine lays out (at most 512 KiB); a row at a time, a line
        found from the last took seconds."""
        file = Around(text.removesuffix("\n").split("\n"), 0, matches=True)
        return file.part(shown.removesuffix("\n").split("\n")) is not None


# `cd DIR && ...`: DIR single-quoted, double-quoted with nothing the shell expands, or a plain
# word; blanks are the shell's (a no-break space is a letter to it).
_LEADING_CD = re.compile(
    r"[ \t]*cd[ \t]+(?:'([^']+)'|\"([^\"$`\\!]+)\"|([^#\s;&|<>()$`\\\"'*?\[~{][^\s;&|<>()$`\\\"'*?\[~{]*))[ \t]*&&"
)


def leading_cd(cmd: str) -> str | None:
    """Where the relative paths `cmd`'s output prints are from, for a command that starts with
    one or more `cd DIR &&` (the DIRs joined, as cd goes); None for any other, or a DIR the shell
    would not take as written (an option, `-`, `..` in it)."""
    dirs: list[str] = []
    while (match := _LEADING_CD.match(cmd)) is not None:
        cd = next(word for word in match.groups() if word is not None)
        if cd.startswith("-") or ".." in cd.split("/"):
            return None
        dirs.append(cd)
        cmd = cmd[match.end() :]
    return os.path.join(*dirs) if dirs else None


def shown_file(cmd: str) -> ShownFile | None:
    """The file `cmd` prints whole or a window of, or None."""
    body = cmd.strip()
    # A line break separates commands for the shell, and would be a blank to the lexer.
    if len(body) > MAX_COMMAND_CHARS or "\n" in body or "\r" in body or not _PRINTER_HEAD.match(body + " "):
        return None
    try:
        lexer = shlex.shlex(body, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""  # `cat a#b.py` prints a#b.py
        words = list(lexer)
    except ValueError:  # an unclosed quote
        return None
    cd = None
    if len(words) > 3 and words[0] == "cd" and words[2] == "&&":
        cd, words = words[1], words[3:]
        # The shell's cd is logical (`link/..`) and `cd -` goes back: not what the path says.
        if cd == "-" or ".." in cd.split("/"):
            return None
    stages: list[list[str]] = [[]]
    for word in words:
        if word == "|":
            stages.append([])
        elif word and set(word) <= set("|&;<>()"):
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
    if shown.matches:  # its rows carry their numbers: a window of them is rows still
        return replace(shown, cd=cd) if len(stages) == 1 or _window(stages[1], None) else None
    if len(stages) == 2:
        window = _window(stages[1], None)
        if window is None or shown.count is not None or shown.from_end:
            return None
        start, count, from_end = window
        if from_end and shown.start > 1:  # the last lines of a part of the file
            return None
        # A window of what the first command printed from its line `start` (review20: numbered
        # from the second window's first line alone, the lines of a file outside the root were
        # shown under another line's number).
        shown = replace(shown, start=shown.start + start - 1, count=count, from_end=from_end)
    return replace(shown, cd=cd)


def _printer(words: list[str]) -> ShownFile | None:
    """A command that prints one file (a window of it): cat, nl, sed -n, head, tail, git show."""
    name, args = words[0], words[1:]
    if not args or args[-1].startswith("-"):
        return None
    path, options = args[-1], args[:-1]
    if name == "git":
        rev, colon, path = path.partition(":")
        if options != ["show"] or not colon or not rev or not path or _EXPANDED.search(rev):
            return None
        return ShownFile(path, rev=rev)
    if name in ("grep", "egrep", "fgrep", "rg"):
        # What the options ask for is not read: only rows the file's lines by number pass
        # (ShownFile.rows_match); `-n` is what makes them so.
        numbered = any(o == "--line-number" or (o[:1] == "-" and o[1:2] != "-" and "n" in o) for o in options)
        return ShownFile(path, matches=True) if numbered else None
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
    """Whether `nl` numbers every line with these options (`-ba` or `-b a`, and a width)."""
    flags = " ".join(options).replace("-b a", "-ba").replace("-w ", "-w").split()
    return "-ba" in flags and all(_NL_FLAGS.fullmatch(flag) for flag in flags)


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
