"""The `grep` fallback when ripgrep is not on PATH: RE2 over a file walk.

RE2 (google-re2) matches in time linear in the text, like ripgrep's engine,
so no pattern can stall a child: `(a+)+$` over a long line costs what `a`
does. The syntax is ripgrep's too (no look-around, no backreferences), and
matching releases the GIL, so the event loop keeps serving meanwhile.

Same result shape as the ripgrep path (`path:line:text` lines, sorted by
path). Like ripgrep it skips hidden files and directories (so `.git`) below
the given paths and binary files (a NUL byte in the first 8 KiB); unlike
ripgrep it does not read `.gitignore`. Blocking: run it in a thread, and
set `stop` to make it return early.
"""

from __future__ import annotations

import fnmatch
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import re2

MAX_LINE_CHARS = 500
MAX_FILE_BYTES = 64 * 1024 * 1024  # larger files are skipped (counted in skipped_files)
_BINARY_PROBE = 8192


@dataclass
class GrepResult:
    lines: list[str] = field(default_factory=list)  # at most max_matches
    match_count: int = 0  # matching lines seen (may exceed len(lines))
    files: set[str] = field(default_factory=set)
    truncated: bool = False
    skipped_files: int = 0


class PatternError(ValueError):
    """The pattern is not valid RE2 syntax (or too big); INVALID_REQUEST for the caller."""


@dataclass(frozen=True)
class Pattern:
    line: re2._Regexp  # what a line must match
    text: re2._Regexp | None  # a cheap whole-file test no matching line can fail, if there is one

    def search(self, line: str) -> bool:
        return self.line.search(line) is not None


def _compile(pattern: str, ignore_case: bool) -> re2._Regexp:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every bad pattern on stderr
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        message = exc.args[0] if exc.args else "bad pattern"
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        raise PatternError(str(message)) from None


def compile_pattern(pattern: str, ignore_case: bool) -> Pattern:
    """PatternError for a bad pattern; the caller maps it to INVALID_REQUEST."""
    line = _compile(pattern, ignore_case)
    # The whole-file prefilter: ^ and $ at every line break, so a line's match is one in
    # the file; \A and \z would not be, so such patterns go line by line.
    text = None if ("\\A" in pattern or "\\z" in pattern) else _compile(f"(?m:{pattern})", ignore_case)
    return Pattern(line, text)


def clip_line(text: str) -> str:
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " […]"


def glob_matcher(glob: str | None):
    """ripgrep-like: no slash = the file name; with a slash = the path; `!` negates."""
    if not glob:
        return lambda rel: True
    negate = glob.startswith("!")
    pattern = glob[1:] if negate else glob
    by_name = "/" not in pattern

    def matches(rel: str) -> bool:
        subject = rel.rsplit("/", 1)[-1] if by_name else rel
        return fnmatch.fnmatchcase(subject, pattern) != negate

    return matches


def _walk(target: Path, shown: str, stop: threading.Event) -> Iterator[tuple[Path, str]]:
    """Files under `target` in path order, hidden entries skipped, symlinks not followed."""
    if target.is_file():
        yield target, shown
        return
    stack = [_entries(target, shown)]
    while stack and not stop.is_set():
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        path, rel, is_dir = entry
        if is_dir:
            stack.append(_entries(path, rel))
        else:
            yield path, rel


def _entries(directory: Path, prefix: str) -> Iterator[tuple[Path, str, bool]]:
    try:
        with os.scandir(directory) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        rel = entry.name if prefix in ("", ".") else f"{prefix}/{entry.name}"
        try:
            if entry.is_dir(follow_symlinks=False):
                yield Path(entry.path), rel, True
            elif entry.is_file(follow_symlinks=False):
                yield Path(entry.path), rel, False
        except OSError:
            continue


def search(
    rx: Pattern,
    targets: list[tuple[Path, str]],
    *,
    glob: str | None,
    max_matches: int,
    stop: threading.Event,
) -> GrepResult:
    result = GrepResult()
    wanted = glob_matcher(glob)
    for target, shown in targets:
        explicit_file = target.is_file()
        for path, rel in _walk(target, shown, stop):
            if stop.is_set():
                return result
            if not explicit_file and not wanted(rel):
                continue
            _search_file(rx, path, rel, result, max_matches)
    result.truncated = result.truncated or result.match_count > len(result.lines)
    return result


def _search_file(
    rx: Pattern, path: Path, rel: str, result: GrepResult, max_matches: int
) -> None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            result.skipped_files += 1
            return
        with path.open("rb") as handle:
            data = handle.read()
    except OSError:
        result.skipped_files += 1
        return
    if b"\0" in data[:_BINARY_PROBE]:
        return
    text = data.decode("utf-8", "replace")
    if rx.text is not None and rx.text.search(text) is None:
        return
    for number, line in enumerate(text.splitlines(), 1):
        if not rx.search(line):
            continue
        result.match_count += 1
        result.files.add(rel)
        if len(result.lines) < max_matches:
            result.lines.append(f"{rel}:{number}:{clip_line(line)}")
