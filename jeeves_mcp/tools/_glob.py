"""grep's `glob`, as ripgrep reads it (its globset crate), for both engines.

`glob_problem` refuses what ripgrep refuses, in its words, before either engine runs: the
agent gets the same INVALID_REQUEST whichever searches. `glob_matcher` is the built-in's
reading: gitignore syntax (pathspec, on RE2), ripgrep's `{a,b}` alternates expanded first.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice

import re2

__all__ = ["MAX_ALTERNATIVES", "MAX_GLOB_CHARS", "glob_matcher", "glob_problem"]

# Paths a glob's alternates may spell out ({a,b}{c,d}: four); ripgrep has no such bound, but
# a glob needing more is not one an agent writes.
MAX_ALTERNATIVES = 1024
MAX_GLOB_CHARS = 4096


def glob_problem(glob: str) -> str | None:
    """Why ripgrep would refuse `glob` (or why it cannot be passed to it), else None."""
    if "\0" in glob or "\n" in glob or "\r" in glob:
        return "a glob cannot hold a NUL byte or a line break"
    if len(glob) > MAX_GLOB_CHARS:
        return f"longer than {MAX_GLOB_CHARS} characters"
    if glob.startswith("!") and not glob[1:].strip():
        return "nothing after '!'"
    if glob.removeprefix("!").startswith("#"):
        return "ripgrep reads a glob starting with '#' as a comment; write '\\#' for the character"
    in_group = False
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "\\":
            if i + 1 == n:
                return "dangling '\\'"
            i += 2
            continue
        if c == "[":
            end, problem = _class_end(glob, i)
            if problem:
                return problem
            i = end + 1
            continue
        if c == "{":
            if in_group:
                return "nested alternate groups are not allowed"
            in_group = True
        elif c == "}":
            in_group = False
        i += 1
    if in_group:
        return "unclosed alternate group; missing '}'"
    if len(_alternatives(glob.removeprefix("!"))) > MAX_ALTERNATIVES:
        return f"its alternates spell out more than {MAX_ALTERNATIVES} globs"
    return None


def _class_end(glob: str, start: int) -> tuple[int, str | None]:
    """The index of the `]` closing the class opened at `start`, or why there is none."""
    i = start + 1
    if i < len(glob) and glob[i] in "!^":
        i += 1
    if i < len(glob) and glob[i] == "]":
        i += 1  # a `]` first is one of the class's characters
    while i < len(glob) and glob[i] != "]":
        if i + 2 < len(glob) and glob[i + 1] == "-" and glob[i + 2] != "]" and glob[i] > glob[i + 2]:
            return i, f"invalid range; '{glob[i]}' > '{glob[i + 2]}'"
        i += 1
    if i >= len(glob):
        return i, "unclosed character class; missing ']'"
    return i, None


def _alternatives(glob: str) -> list[str]:
    """`glob` with each `{a,b}` spelled out (ripgrep's alternates; they do not nest); past
    MAX_ALTERNATIVES, only their count matters and the list stops there."""
    choices: list[list[str]] = []  # the glob as a sequence of parts, each with its choices
    literal_from = i = 0
    n = len(glob)
    while i < n:
        c = glob[i]
        if c == "\\":
            i += 2
        elif c == "[":
            i = _class_end(glob, i)[0] + 1
        elif c == "{" and (close := glob.find("}", i)) > 0:
            choices += [[glob[literal_from:i]], glob[i + 1 : close].split(",")]
            i = literal_from = close + 1
        else:
            i += 1
    choices.append([glob[literal_from:]])
    out = [""]
    for part in choices:
        out = list(islice((x + choice for x in out for choice in part), MAX_ALTERNATIVES + 1))
    return out


def glob_matcher(glob: str | None) -> Callable[[str], bool]:
    """ripgrep's `--glob`, for a glob glob_problem accepts: gitignore syntax (a name without
    a slash matches at any depth, `**` spans directories, `*` stops at a slash, a leading `/`
    anchors at the root), matched against the path from the root; `!` negates. As ripgrep
    does, a glob picks a file by the file's own path, and `!` leaves out a directory with all
    beneath it (gitignore's reading, which pathspec gives)."""
    if not glob:
        return lambda rel: True
    import pathspec  # here: 22 ms a child's start would pay for a grep with a glob, rarely

    negate = glob.startswith("!")
    body = glob.removeprefix("!")
    # ripgrep decides once for the whole glob whether it names a path (it holds a slash)
    # or a name at any depth; an alternate without a slash is anchored then.
    anchored = "/" in body
    lines = []
    for alternative in _alternatives(body):
        if anchored and "/" not in alternative:
            alternative = "/" + alternative
        elif alternative.startswith("!"):
            alternative = "\\" + alternative  # not gitignore's negation
        lines.append(alternative)
    if negate:
        # RE2, as for the pattern: as backtracking regexes, some globs take hours over one name.
        spec = pathspec.GitIgnoreSpec.from_lines(lines, backend="re2")
        return lambda rel: not spec.match_file(rel)
    own = [rx for rx in map(_own_path_regex, lines) if rx is not None]
    if not own:
        return lambda rel: False
    matcher = re2.compile("|".join(f"(?:{rx})" for rx in own))
    return lambda rel: matcher.search(rel) is not None


# How pathspec ends a pattern's regex: the path itself, or a directory with what is below it;
# a pattern ending in `/` names directories only.
_ITSELF_OR_BELOW = "(?:(?P<ps_d>/)|$)"
_DIRECTORY_ONLY = "(?P<ps_d>/)"


def _own_path_regex(line: str) -> str | None:
    """The regex of a gitignore pattern matching a file by its own path, not by a directory
    above it; None if no file can match (a directory pattern, a blank)."""
    import pathspec

    patterns = pathspec.GitIgnoreSpec.from_lines([line]).patterns
    regex = patterns[0].regex if patterns else None
    if regex is None:
        return None
    text = regex.pattern
    if text.endswith(_DIRECTORY_ONLY):
        return None
    return text.replace(_ITSELF_OR_BELOW, "$")
