"""The `grep` fallback when ripgrep is not on PATH: RE2 over a file walk.

RE2 (google-re2) matches in time linear in the text, like ripgrep's engine,
so no pattern can stall a child: `(a+)+$` over a long line costs what `a`
does. The syntax is ripgrep's too (no look-around, no backreferences), and
matching releases the GIL, so the event loop keeps serving meanwhile.

Same result shape as the ripgrep path (`path:line:text` lines, sorted by
path). Like ripgrep it skips hidden files and directories (so `.git`) below
the given paths and binary files (a NUL byte in the first 64 KiB; one later
ends the search there); unlike
ripgrep it does not read `.gitignore`. Blocking: run it in a thread, and
set `stop` to make it return early. Its walk holds a bounded number of
descriptors at any depth; running out of them (EMFILE, ENFILE) raises.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import re2

from jeeves_mcp.beneath import user_may
from jeeves_mcp.quoting import quoted_path
from jeeves_mcp.tools._glob import glob_matcher
from jeeves_mcp.tools.base import open_in_root

MAX_LINE_CHARS = 500
MAX_FILE_BYTES = 64 * 1024 * 1024  # larger files are skipped (counted in skipped_files)
# ripgrep's first read of a file: a NUL byte in it makes the file binary, not searched; one
# further on stops the search there (the matches before it are shown).
_BINARY_PROBE = 64 * 1024


@dataclass
class GrepResult:
    lines: list[str] = field(default_factory=list)  # at most max_matches
    match_count: int = 0  # matching lines seen (may exceed len(lines))
    files: set[str] = field(default_factory=set)
    truncated: bool = False
    skipped_files: int = 0
    clipped_lines: int = 0  # rows of `lines` showing only the head of a long line


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


# Characters that end a line for str.splitlines and some renderers, other than LF: in a
# row's text they could start what reads as a row of another file. Shown escaped.
ROW_BREAKS = str.maketrans({char: char.encode("unicode_escape").decode() for char in "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def row_text(text: str) -> str:
    """A matching line as a row shows it: line breaks escaped, clipped to MAX_LINE_CHARS."""
    text = text.translate(ROW_BREAKS)
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " […]"


# Every file and directory is opened relative to its parent's descriptor, never following
# a link, and checked on the descriptor (attack review F2: a run may swap a component for a
# symlink out of the root while the pruner, possibly root, reads).
# Directory descriptors a walk holds at most, whatever its depth (ripgrep's walker, walkdir,
# holds 10): one a level let a run's chain of directories take every one the child had.
MAX_OPEN_DIRS = 16
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
User = tuple[int, int] | None  # the run's commands' (uid, gid); None: the pruner's own


def _may(fd: int, user: User, want: int) -> bool:
    """Whether the run's user could do `want` to what `fd` is (ripgrep runs as that user)."""
    return user is None or user_may(fd, *user, want)


def _out_of_descriptors(exc: OSError) -> bool:
    return exc.errno in (errno.EMFILE, errno.ENFILE)


def _entries(dir_fd: int) -> list[tuple[str, bool]]:
    """(name, is a directory) of the files and directories in `dir_fd`, by name, hidden skipped."""
    found = []
    with os.scandir(dir_fd) as scan:  # OSError: the directory cannot be listed
        for entry in sorted(scan, key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    found.append((entry.name, True))
                elif entry.is_file(follow_symlinks=False):
                    found.append((entry.name, False))
            except OSError:
                continue
    return found


def _open_dir(parent: int, name: str, user: User) -> tuple[int, tuple[int, int]] | None:
    """A descriptor of the directory `name` in `parent` (a link is not followed) and its
    (device, inode); None if it cannot be opened or the run's user could not list it.
    Running out of descriptors raises: a walk that went on would drop what it could not open."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if _out_of_descriptors(exc):
            raise
        return None
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if user is not None and not user_may(fd, *user, os.R_OK | os.X_OK):
        os.close(fd)
        return None
    return fd, (info.st_dev, info.st_ino)


@dataclass
class _Level:
    """A directory the walk is in; `fd` is None while it is closed to bound the walk's count."""

    name: str
    rel: str
    entries: Iterator[tuple[str, bool]]
    identity: tuple[int, int]
    fd: int | None


def _list(fd: int, name: str, rel: str, identity: tuple[int, int]) -> _Level | None:
    try:
        return _Level(name, rel, iter(_entries(fd)), identity, fd)
    except OSError as exc:
        if _out_of_descriptors(exc):  # scandir opens one of its own
            raise
        return None


def _close_shallowest(levels: list[_Level]) -> None:
    """Past MAX_OPEN_DIRS open below the top (whose descriptor is the caller's), the shallowest
    is closed. The open ones are always the deepest, so that is the one MAX_OPEN_DIRS above."""
    index = len(levels) - 1 - MAX_OPEN_DIRS
    if index >= 1 and (fd := levels[index].fd) is not None:
        levels[index].fd = None
        os.close(fd)


def _reopen(levels: list[_Level], user: User) -> int | None:
    """Reopen the closed levels from the top down, by name and never through a link, the
    deepest MAX_OPEN_DIRS kept open; each must be the directory walked before (a run may have
    renamed or swapped it since). The index of the first that is not, else None."""
    keep_from = max(1, len(levels) - MAX_OPEN_DIRS)
    for index in range(1, len(levels)):
        level, parent = levels[index], levels[index - 1]
        if level.fd is not None:
            continue
        assert parent.fd is not None
        try:
            opened = _open_dir(parent.fd, level.name, user)
        finally:
            if 1 <= index - 1 < keep_from:  # only on the way down to the kept ones
                os.close(parent.fd)
                parent.fd = None
        if opened is not None and opened[1] != level.identity:
            os.close(opened[0])
            opened = None
        if opened is None:
            return index
        level.fd = opened[0]
    return None


def _files(
    top: int, prefix: str, user: User, stop: threading.Event, result: GrepResult
) -> Iterator[tuple[int, str, str]]:
    """(directory fd, name, path) of the files below the directory `top`, in path order,
    holding at most MAX_OPEN_DIRS descriptors more at any depth. A directory the run's user
    could not list is skipped, as ripgrep run as it would, and counted in skipped_files."""
    first = _list(top, "", prefix, (0, 0))
    if first is None:
        result.skipped_files += 1
        return
    levels = [first]
    try:
        while levels and not stop.is_set():
            level = levels[-1]
            entry = next(level.entries, None)
            if entry is None:
                levels.pop()
                if level.fd is not None and level.fd != top:
                    os.close(level.fd)
                continue
            name, is_dir = entry
            if "\n" in name:
                continue  # its rows could pose as rows of other files (as rg is told too)
            if level.fd is None and (lost := _reopen(levels, user)) is not None:
                result.skipped_files += 1  # the rest of a directory that cannot be reentered
                for gone in levels[lost:]:
                    if gone.fd is not None:
                        os.close(gone.fd)
                del levels[lost:]
                continue
            assert level.fd is not None
            rel = name if level.rel in ("", ".") else f"{level.rel}/{name}"
            if not is_dir:
                yield level.fd, name, rel
                continue
            opened = _open_dir(level.fd, name, user)
            sub = None if opened is None else _list(opened[0], name, rel, opened[1])
            if sub is None:
                if opened is not None:
                    os.close(opened[0])
                result.skipped_files += 1
                continue
            levels.append(sub)
            _close_shallowest(levels)
    finally:
        for level in levels:
            if level.fd is not None and level.fd != top:
                os.close(level.fd)


def search(
    rx: Pattern,
    targets: list[tuple[Path, str]],
    *,
    root: Path,
    user: User,
    glob: str | None,
    max_matches: int,
    stop: threading.Event,
) -> GrepResult:
    result = GrepResult()
    wanted = glob_matcher(glob)
    for target, shown in targets:
        try:
            fd = open_in_root(root, target, _FILE_FLAGS, user)
        except OSError as exc:
            if _out_of_descriptors(exc):
                raise
            result.skipped_files += 1
            continue
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode):  # a file named explicitly: the glob does not apply
                _search_file(rx, fd, shown, result, max_matches, user)
                continue
            if not stat.S_ISDIR(mode):
                continue
            if not _may(fd, user, os.R_OK | os.X_OK):
                result.skipped_files += 1
                continue
            for dir_fd, name, rel in _files(fd, shown, user, stop, result):
                if stop.is_set():
                    return result
                if not wanted(rel):
                    continue
                try:
                    file_fd = os.open(name, _FILE_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
                except OSError as exc:
                    if _out_of_descriptors(exc):
                        raise
                    result.skipped_files += 1
                    continue
                try:
                    _search_file(rx, file_fd, rel, result, max_matches, user)
                finally:
                    os.close(file_fd)
        finally:
            os.close(fd)
    result.truncated = result.truncated or result.match_count > len(result.lines)
    return result


def _search_file(
    rx: Pattern, fd: int, rel: str, result: GrepResult, max_matches: int, user: User
) -> None:
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return  # swapped for a FIFO or a device since the listing
        if info.st_size > MAX_FILE_BYTES or (user is not None and not user_may(fd, *user, os.R_OK)):
            result.skipped_files += 1
            return
        data = bytearray()
        while len(data) <= MAX_FILE_BYTES and (chunk := os.read(fd, 1 << 20)):
            data += chunk
    except OSError:
        result.skipped_files += 1
        return
    if len(data) > MAX_FILE_BYTES:  # grew since the fstat
        result.skipped_files += 1
        return
    nul = data.find(b"\0")
    if 0 <= nul < _BINARY_PROBE:
        return
    if nul >= 0:
        del data[data.rfind(b"\n", 0, nul) + 1 :]  # the lines before the one holding it
    text = data.decode("utf-8", "replace")
    if rx.text is not None and rx.text.search(text) is None:
        return
    # Lines end at LF (and CRLF) only, as rg and `read` count them: str.splitlines would also
    # end one at a form feed or a U+2028 and number every line after it wrong.
    for number, row in enumerate(text.removesuffix("\n").split("\n") if text else [], 1):
        if not rx.search(row):  # its CR included: ripgrep's `$` is not before it either
            continue
        line = row.removesuffix("\r")
        result.match_count += 1
        result.files.add(rel)
        if len(result.lines) < max_matches:
            shown = row_text(line)
            result.clipped_lines += len(shown) != len(line)
            result.lines.append(f"{quoted_path(rel)}:{number}:{shown}")
