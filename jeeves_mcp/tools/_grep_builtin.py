"""The `grep` fallback when ripgrep is not on PATH: Python `re` over a file walk.

Same result shape as the ripgrep path (`path:line:text` lines, sorted by
path). Like ripgrep it skips hidden files and directories (so `.git`) below
the given paths and binary files (a NUL byte in the first 8 KiB); unlike
ripgrep it does not read `.gitignore`. Blocking: run it in a thread, and
set `stop` to make it return early.
"""

from __future__ import annotations

import fnmatch
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

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


def compile_pattern(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    """re.error for a bad pattern; the caller maps it to INVALID_REQUEST."""
    return re.compile(pattern, re.IGNORECASE if ignore_case else 0)


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
    rx: re.Pattern[str],
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
    rx: re.Pattern[str], path: Path, rel: str, result: GrepResult, max_matches: int
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
    if rx.search(text) is None:
        return
    for number, line in enumerate(text.splitlines(), 1):
        if rx.search(line) is None:
            continue
        result.match_count += 1
        result.files.add(rel)
        if len(result.lines) < max_matches:
            result.lines.append(f"{rel}:{number}:{clip_line(line)}")
