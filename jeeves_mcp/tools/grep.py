"""`grep`: a regex search of the run root, with ripgrep (a dependency: the `ripgrep` wheel).

Both paths give `path:line:text` lines sorted by path, paths relative to the
root (quoted as git quotes them when a name could pose as another row:
`quoted_path`; names holding a line break are not searched), lines counted
at LF only, other line breaks in them escaped, each clipped to 500 characters, and the fields `match_count`
(matching lines seen), `files_with_matches` and `limit_reached` (more than
`max_matches`, or ripgrep's output reached the capture cap: the counts are
then lower bounds). ripgrep honours `.gitignore`; the built-in does not.
Both skip hidden entries (whatever the glob) and binary files below the given paths.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import sys
import sysconfig
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import trio

from jeeves_mcp.mcp.errors import ToolError
from jeeves_mcp.proc import command_user, run_command
from jeeves_mcp.quoting import quoted_path
from jeeves_mcp.tools import _grep_builtin
from jeeves_mcp.tools._glob import glob_problem
from jeeves_mcp.tools.base import (
    FOCUS_PROPERTY,
    READ_ONLY,
    CallContext,
    TextOutput,
    Tool,
    ToolOutput,
    check_arg_length,
    clip_summary,
    display_path,
    invalid_argument,
    plural,
    resolve_in_root,
    timeout_ms_arg,
)
from jeeves_mcp.tools.read import with_searched_files

DEFAULT_MAX_MATCHES = 200
MAX_MATCHES = 10_000
# Bytes of ripgrep output captured per allowed match; the rest is drained.
_BYTES_PER_MATCH = 1024

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string"},
        "paths": {"type": "array", "items": {"type": "string"}},
        "glob": {"type": "string"},
        "ignore_case": {"type": "boolean"},
        "max_matches": {"type": "integer"},
        "timeout_ms": {"type": "integer"},
        "context_focus_question": FOCUS_PROPERTY,
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

# With --null a row is `path NUL line:text LF`. Files whose names hold a line break are not
# searched (--glob below, _files in the built-in), so a line without a NUL is one of rg's
# notes ("PATH: binary file matches ...", "PATH: WARNING: stopped searching ...").
_RG_ROW = re.compile(rb"(\d+):")
# A row shows this many characters of its line, as the built-in's (rg: columns, in bytes);
# rg ends a row it clipped with one of these.
MAX_COLUMNS = _grep_builtin.MAX_LINE_CHARS
_RG_CLIPPED = re.compile(r" \[\.\.\. (?:omitted end of long line|\d+ more matche?s?)\]$")
_NO_LINE_BREAK_NAMES = "!*\n*"
# A glob overrides rg's other rules, hidden entries included: `*`, or a run's `.ignore`
# holding `!*`, opened .git/ and every dot file, which the built-in skips. Given after the
# caller's glob, this one wins; a hidden path named as a target is searched still.
_NO_HIDDEN_ENTRIES = "!.*"


def _rg_rows(data: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """(path, line number, text) of each complete row of rg's --null output."""
    for row in data.split(b"\n")[:-1]:  # what follows the last LF was cut by the capture cap
        path, nul, rest = row.partition(b"\0")
        found = _RG_ROW.match(rest) if nul else None
        if found is not None:
            yield path.decode("utf-8", "surrogateescape"), found.group(1), rest[found.end() :].removesuffix(b"\r")


def find_rg() -> str | None:
    """The `rg` the `ripgrep` wheel installed beside this interpreter, else the one on PATH.

    Beside the interpreter first: a daemon started as /venv/bin/jeeves-mcp (systemd) has no
    venv on PATH, and a system rg on PATH may be older than the one the tests ran with."""
    dirs = [Path(sys.executable).parent] if sys.executable else []
    dirs.append(Path(sysconfig.get_path("scripts")))
    for folder in dirs:
        candidate = folder / "rg"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("rg")


# Each path is looked up before the search: more than an agent names, and a bound on that work.
MAX_PATHS = 1000


def _targets(ctx: CallContext, raw_paths: list[str]) -> list[tuple[Path, str]]:
    if len(raw_paths) > MAX_PATHS:
        raise invalid_argument("paths", f"at most {MAX_PATHS} items, got {len(raw_paths)}")
    targets = []
    for raw in raw_paths or ["."]:
        path = resolve_in_root(ctx.config, raw)
        shown = display_path(ctx.config, path)
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
                raise  # as Path.exists() let them through
            raise ToolError("NOT_FOUND", f"no such file or directory: {shown}") from None
        if "\n" in shown:
            # A row names its file before a colon and ends at a line break: such a name
            # could pose as rows of other files (and below a target such files are skipped).
            raise ToolError("INVALID_REQUEST", "a path holding a line break cannot be searched", hint="use bash")
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            # rg would open a FIFO and wait on it for the whole timeout.
            raise ToolError("INVALID_REQUEST", f"{shown} is not a regular file or a directory", hint="use bash")
        targets.append((path, shown))
    return targets


async def run(ctx: CallContext, args: dict[str, Any]) -> ToolOutput:
    pattern: str = args["pattern"]
    ignore_case = bool(args.get("ignore_case", False))
    glob: str | None = args.get("glob") or None
    if glob is not None and not glob.strip():
        glob = None  # ripgrep reads a blank glob as none
    # Out-of-range numbers are clamped (keeps the schema small, seed 003).
    max_matches = min(max(1, int(args.get("max_matches", DEFAULT_MAX_MATCHES))), MAX_MATCHES)
    timeout_ms = timeout_ms_arg(args, ctx.config.grep_timeout_ms)
    if not pattern:
        raise ToolError("INVALID_REQUEST", "pattern must not be empty")
    # rg takes both as arguments; the built-in is held to the same rule.
    check_arg_length("pattern", pattern)
    if glob is not None:
        check_arg_length("glob", glob)
    if "\0" in pattern:  # nor can it reach rg; a file holding one is binary, not searched
        raise ToolError("INVALID_REQUEST", "pattern must not hold a NUL byte")
    if glob is not None and (problem := glob_problem(glob)) is not None:
        raise ToolError("INVALID_REQUEST", f"invalid glob {glob[:100]!r}: {problem}",
                        hint="ripgrep's glob syntax (gitignore's, with {a,b}); escape a literal [ { or \\ with \\")
    targets = _targets(ctx, args.get("paths") or ["."])
    rg = find_rg()
    result: _grep_builtin.GrepResult | None = None
    if rg is not None:
        result = await _run_rg(
            ctx, rg, pattern, targets, glob, ignore_case, max_matches, timeout_ms
        )
        engine = "rg"
    if result is None:
        result = await _run_builtin(
            ctx.config.root, pattern, targets, glob, ignore_case, max_matches, timeout_ms
        )
        engine = "builtin"
    files = len(result.files)
    more = "+" if result.truncated else ""
    matches = "match" if result.match_count == 1 and not more else "matches"
    clipped = ""
    if result.clipped_lines:  # the rest of such a line is the file's: `read` shows it
        clipped = (f"; {plural(result.clipped_lines, 'row')} clipped at {MAX_COLUMNS} characters:"
                   " read the file at the row's line for all of it")
    summary = clip_summary(
        f"grep {pattern!r}: {result.match_count}{more} {matches} in {plural(files, 'file')}{clipped}"
    )
    fields: dict[str, Any] = {
        "match_count": result.match_count,
        "files_with_matches": files,
        # Not `truncated`: that is the response budget's cut of the rows, which every tool reports.
        "limit_reached": result.truncated,
        "engine": engine,
    }
    if result.skipped_files:
        fields["skipped_files"] = result.skipped_files
    if result.clipped_lines:
        fields["clipped_lines"] = result.clipped_lines
    return ToolOutput(
        summary=summary,
        fields=fields,
        # Its rows are ranked within the files they are lines of (a row clipped at 500
        # characters is not its line: that file's rows are then ranked as they are).
        texts=[with_searched_files(ctx, TextOutput("matches", "\n".join(result.lines), "logs"), ctx.config.root)],
    )


async def _run_builtin(
    root: Path,
    pattern: str,
    targets: list[tuple[Path, str]],
    glob: str | None,
    ignore_case: bool,
    max_matches: int,
    timeout_ms: int,
) -> _grep_builtin.GrepResult:
    try:
        rx = _grep_builtin.compile_pattern(pattern, ignore_case)
    except _grep_builtin.PatternError as exc:
        raise ToolError(
            "INVALID_REQUEST", f"invalid regex: {exc}",
            hint="RE2 syntax (as ripgrep's): no look-around or backreferences",
        ) from exc
    stop = threading.Event()
    user = command_user(root)  # the files ripgrep, run as this user, could read
    try:
        with trio.move_on_after(timeout_ms / 1000) as scope:
            return await trio.to_thread.run_sync(
                lambda: _grep_builtin.search(
                    rx, targets, root=root, user=user, glob=glob,
                    max_matches=max_matches, stop=stop,
                ),
                abandon_on_cancel=True,
            )
    except OSError as exc:
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        # Not a partial answer that reads as a whole one: what could not be opened is unknown.
        raise ToolError(
            "QUEUE_OVERLOADED", f"grep stopped: the child is out of file descriptors ({exc.strerror})",
            hint="retry when fewer calls are running",
        ) from exc
    finally:
        stop.set()  # an abandoned walk stops at its next file
    assert scope.cancelled_caught
    raise ToolError(
        "TOOL_TIMEOUT", f"grep timed out after {timeout_ms / 1000:g} s", timeoutMs=timeout_ms
    )


async def _run_rg(
    ctx: CallContext,
    rg: str,
    pattern: str,
    targets: list[tuple[Path, str]],
    glob: str | None,
    ignore_case: bool,
    max_matches: int,
    timeout_ms: int,
) -> _grep_builtin.GrepResult | None:
    """rg's result as the commands' user, or None when that user may not run it."""
    argv = [rg, "--line-number", "--no-heading", "--with-filename", "--color=never"]
    argv += ["--sort=path", "--no-messages", f"--max-columns={MAX_COLUMNS}", "--max-columns-preview", "--null"]
    if ignore_case:
        argv.append("--ignore-case")
    if glob:
        argv += ["--glob", glob]
    argv += ["--glob", _NO_HIDDEN_ENTRIES, "--glob", _NO_LINE_BREAK_NAMES]  # last: they override the caller's glob
    argv += ["-e", pattern, "--"]
    # Relative to the root (its cwd), so rg prints the paths the agent uses.
    argv += ["./" if shown == "." else shown for _, shown in targets]
    cap = min(ctx.config.max_output_bytes, max(64 * 1024, max_matches * _BYTES_PER_MATCH))
    result = await run_command(
        argv,
        cwd=ctx.config.root,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
        timeout_s=timeout_ms / 1000,
        max_output_bytes=cap,
        user=command_user(ctx.config.root),
        max_processes=ctx.config.command_max_processes,
        kill_grace_s=ctx.config.kill_grace_ms / 1000,
        keep_tail=False,
    )
    stderr = result.stderr.decode("utf-8", "replace").strip()
    if result.exit_code == 2 and "regex parse error" in stderr:
        # rg prints the pattern as it wrapped it, `(?:(...)`, then `error: <what is wrong>`: the
        # agent's own pattern and the last line are what it can act on.
        lines = stderr.rsplit("error:", 1)[-1].strip().splitlines()
        message = f"{pattern!r}: {lines[0] if lines else stderr}"
        raise ToolError(
            "INVALID_REQUEST",
            f"invalid regex {message}",
            hint="ripgrep syntax (Rust regex): no look-around or backreferences",
        )
    if result.exit_code == 126:
        # The commands' user may not run the daemon's rg (its venv is private): the built-in
        # search does the same work in the child.
        return None
    if result.exit_code not in (0, 1, 2):
        raise ToolError(
            "INTERNAL", f"rg exited with status {result.exit_code}", stderr=stderr[-2000:]
        )
    grep = _grep_builtin.GrepResult()
    # A row cut by the capture cap has no LF yet and is left out.
    grep.truncated = result.stdout_bytes > len(result.stdout)
    for path, number, text in _rg_rows(result.stdout):
        path = path.removeprefix("./")
        grep.match_count += 1
        grep.files.add(path)
        if len(grep.lines) < max_matches:
            shown = text.decode("utf-8", "replace").translate(_grep_builtin.ROW_BREAKS)  # rg clipped it
            grep.clipped_lines += len(text) > MAX_COLUMNS and _RG_CLIPPED.search(shown) is not None
            line = f"{quoted_path(path)}:{number.decode()}:{shown}"
            grep.lines.append(line)
    # Exit 2 with nothing said: --no-messages silenced a path the commands' user may not
    # read, which is skipped as the built-in grep skips it. Anything rg still says is a failure.
    if result.exit_code == 2 and stderr and not grep.match_count:
        raise ToolError("INTERNAL", "rg failed", stderr=stderr[-2000:])
    grep.truncated = grep.truncated or grep.match_count > len(grep.lines)
    return grep


TOOL = Tool(
    name="grep",
    title="Search files",
    description=("Regex over workspace files (ripgrep): path:line:text."),
    input_schema=SCHEMA,
    handler=run,
    annotations=READ_ONLY,
)
