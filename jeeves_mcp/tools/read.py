"""`read`: a file of the run root, whole or a window of lines."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import trio

from jeeves_mcp.beneath import user_may
from jeeves_mcp.mcp.errors import ToolError
from jeeves_mcp.proc import command_user
from jeeves_mcp.pruner_config import PrunerConfig
from jeeves_mcp.pruning.contract import FileAges, LineHistory
from jeeves_mcp.pruning.history import MAX_FILE_BYTES as HISTORY_MAX_BYTES
from jeeves_mcp.pruning.history import file_ages, line_history
from jeeves_mcp.pruning.pruner import AROUND_MAX_CHARS
from jeeves_mcp.pruning.recovery import Lines
from jeeves_mcp.tools.base import (
    FOCUS_PROPERTY,
    READ_ONLY,
    CallContext,
    TextOutput,
    Tool,
    ToolOutput,
    clip_summary,
    display_path,
    human_bytes,
    open_in_root,
    path_error,
    plural,
    resolve_in_root,
)

MAX_FILE_BYTES = 64 * 1024 * 1024  # refuse to load larger files whole
# Smaller regular files are read in the event loop: a read from the page cache
# costs less than the hop to a worker thread and back, and the stat calls
# before it block as long. Larger files and anything else (a FIFO would block
# the loop until a writer came) are read in a thread.
INLINE_READ_BYTES = 256 * 1024
DOCS_SUFFIXES = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc"})
# Command output saved to a file, and patches (laid out as git prints them, see engine/_git.py).
LOG_SUFFIXES = frozenset({".log", ".out", ".err", ".diff", ".patch"})

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "offset": {"type": "integer", "minimum": 1},
        "limit": {"type": "integer", "minimum": 1},
        "context_focus_question": FOCUS_PROPERTY,
    },
    "required": ["path"],
    "additionalProperties": False,
}


def source_type_for(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in DOCS_SUFFIXES:
        return "docs"
    if suffix in LOG_SUFFIXES:
        return "logs"
    return "code"


def _open_regular(root: Path, path: Path, shown: str) -> tuple[BinaryIO, int]:
    """`path` opened, with its size, if it is a regular file the run's commands could read.

    Opened through the root's descriptor, never following a link out of it, and
    checked on the descriptor: what is read is what was checked, even if a run's
    command swaps a component for a symlink meanwhile (attack review F2). The
    pruner may be root: a file its commands' user could not reach or read by its
    mode and ACL is refused. A FIFO or a device would block a read until some writer
    came: refused.
    """
    user = command_user(root)
    fd = open_in_root(root, path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, user)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError("INVALID_REQUEST", f"{shown} is a directory", hint="use bash ls or grep")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError("INVALID_REQUEST", f"{shown} is not a regular file", hint="use bash")
        if user is not None and not user_may(fd, *user, os.R_OK):
            raise ToolError("FORBIDDEN", f"permission denied: {shown}",
                            hint="its mode or ACL does not let the run's user read it")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb"), info.st_size


def _decode(handle: BinaryIO, limit: int = MAX_FILE_BYTES) -> tuple[str, bool]:
    data = handle.read(limit + 1)  # never more: a file may grow after its size was told
    if len(data) > limit:
        raise ToolError(
            "INVALID_REQUEST",
            f"file is larger than {human_bytes(limit)}",
            hint="read a window with offset/limit or use grep",
        )
    if b"\x00" in data[:8192]:
        raise ToolError("INVALID_REQUEST", "binary file", hint="use bash with xxd or file")
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), True


# Source code by its name: the files a search's rows are ranked within (see file_reader), and
# those printed through bash that the pruner does not read (tools/bash.py).
SOURCE_SUFFIXES = frozenset(
    ".py .pyi .pyx .c .h .cc .cpp .cxx .hpp .cs .java .kt .scala .go .rs .rb .php .js .mjs .cjs .ts .tsx"
    " .jsx .swift .lua .pl .pm .ex .exs .erl .hs .ml .dart".split()
)


def source_text(config: PrunerConfig, path: Path, shown: str) -> str | None:
    """The text of `path` (resolved in the root) as `read` would open it, when it is source code
    by its name and no larger than AROUND_MAX_CHARS (a file the engine lays out to rank a
    search's rows within it); None otherwise, the size told before a byte is read. Blocking."""
    if path.suffix.lower() not in SOURCE_SUFFIXES:
        return None
    try:
        handle, size = _open_regular(config.root, path, shown)
        with handle:
            return None if size > AROUND_MAX_CHARS else _decode(handle, AROUND_MAX_CHARS)[0]
    except (ToolError, OSError):
        return None


# Output is told to be a search's or a file listing by its first lines, as the engine tells it,
# before git runs.
SEARCH_SNIFF_LINES = 2000


def with_searched_files(ctx: CallContext, output: TextOutput, base: Path) -> TextOutput:
    """`output` (command output), whose rows, if it is a search's run in `base` (`src/a.py:12:
    line`), are ranked within the files they name (file_reader), and whose files, if it is a
    search's or a file listing, are weighed by how lately they changed (pruning.history.
    file_ages, asked for only when the text is pruned)."""
    output.files = file_reader(ctx.config, base)
    timeout_ms = ctx.config.history_timeout_ms
    if timeout_ms <= 0:
        return output

    async def ages() -> FileAges | None:
        if not await trio.to_thread.run_sync(_names_files, output.text, abandon_on_cancel=True):
            return None
        return await file_ages(
            base, root=ctx.config.root, timeout_s=timeout_ms / 1000, kill_grace_s=ctx.config.kill_grace_ms / 1000
        )

    output.file_ages = ages
    return output


def _names_files(text: str) -> bool:
    """Whether `text` is search output or a file listing, by its first lines."""
    from jeeves_mcp.pruning.engine import (  # the engine prunes next anyway
        is_file_listing,
        is_search_output,
    )

    first = text.split("\n", SEARCH_SNIFF_LINES)[:SEARCH_SNIFF_LINES]
    return is_search_output(first) or is_file_listing(first)


def file_reader(config: PrunerConfig, base: Path) -> Callable[[str], str | None]:
    """source_text of the file a search output's row names, relative to `base` (the command's
    directory), for the engine to call in its own thread; None for a name `read` would refuse."""

    def text_of(name: str) -> str | None:
        if name.startswith("~"):
            return None
        try:
            path = resolve_in_root(config, os.path.join(base, name))
        except ToolError:
            return None
        return source_text(config, path, name)

    return text_of


async def file_text(root: Path, path: Path, shown: str) -> tuple[str, bool]:
    """The text of the regular file `path` (resolved in `root`) and whether bytes that are
    not UTF-8 were replaced; ToolError when `read` would refuse it."""
    try:
        await trio.lowlevel.checkpoint()  # a cancel point, as the thread hop is
        handle, size = _open_regular(root, path, shown)
        with handle:
            if size <= INLINE_READ_BYTES:
                return _decode(handle)
            return await trio.to_thread.run_sync(_decode, handle)
    except OSError as exc:
        raise path_error(exc, shown) from exc


def with_file(ctx: CallContext, content: TextOutput, path: Path, text: str) -> TextOutput:
    """`content`, lines from its `first_line` of the file `path` whose text is `text`, given
    that file (a window of code is ranked within it) and the recency prior of its lines (see
    pruning.history) when it is code and small enough to have one: splitting a large file
    into lines would hold the event loop for seconds."""
    if content.source_type != "code":
        return content
    content.whole = text
    timeout_ms = ctx.config.history_timeout_ms
    # A character is a byte at least: a longer text is over history's limit, it gets no prior.
    if timeout_ms <= 0 or len(text) > HISTORY_MAX_BYTES:
        return content

    async def file_history() -> LineHistory | None:
        return await line_history(
            path,
            text.removesuffix("\n").split("\n") if text else [],
            root=ctx.config.root,
            timeout_s=timeout_ms / 1000,
            kill_grace_s=ctx.config.kill_grace_ms / 1000,
        )

    content.line_prior = file_history
    return content


async def run(ctx: CallContext, args: dict[str, Any]) -> ToolOutput:
    path = resolve_in_root(ctx.config, args["path"])
    shown = display_path(ctx.config, path)
    text, replaced = await file_text(ctx.config.root, path, shown)
    body = text.removesuffix("\n")  # a final newline ends the last line, it does not start a new one
    lines = Lines(body)  # newlines counted by block: a window is found, the file never split
    total = len(lines) if text else 0
    offset = int(args.get("offset", 1))
    limit = int(args["limit"]) if "limit" in args else None
    if offset > max(total, 1):
        raise ToolError(
            "INVALID_REQUEST",
            f"offset {offset} is past the end of {shown} ({plural(total, 'line')})",
            total_lines=total,
            hint=f"use an offset from 1 to {max(total, 1)}",
        )
    returned = max(0, (total if limit is None else min(total, offset - 1 + limit)) - offset + 1)
    window = body[lines.start(offset - 1) : lines.start(offset - 1 + returned) - 1] if returned else ""
    fields: dict[str, Any] = {
        "path": shown,
        "total_lines": total,
        "offset": offset,
        "lines_returned": returned,
    }
    if replaced:
        fields["encoding_note"] = "not valid UTF-8: undecodable bytes shown as U+FFFD"
    size = len(text.encode("utf-8", "surrogatepass"))
    span = "" if returned == total else f" (lines {offset}-{offset + returned - 1})"
    summary = clip_summary(f"read {shown}: {plural(total, 'line')}, {human_bytes(size)}{span}")
    # Output texts end with a terminator or none; a window ending in "\n" ends with a blank
    # line, whose "\n" a pruner would otherwise take for the terminator and drop the line.
    text_out = window + "\n" if window.endswith("\n") else window
    content = TextOutput("content", text_out, source_type_for(path), shown, first_line=offset)
    content = with_file(ctx, content, path, text)
    return ToolOutput(summary=summary, fields=fields, texts=[content])


TOOL = Tool(
    name="read",
    title="Read file",
    description="A workspace file, whole or `limit` lines from `offset` (1-based).",
    input_schema=SCHEMA,
    handler=run,
    annotations=READ_ONLY,
)
