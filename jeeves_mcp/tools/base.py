"""What every tool is made of, and the run-root rule they share."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from jeeves_mcp.beneath import open_beneath
from jeeves_mcp.mcp.errors import INVALID_PARAMS, McpError, ToolError
from jeeves_mcp.proc import pinned_root

# Re-exported: the tools import them from here.
from jeeves_mcp.pruning.render import human_bytes as human_bytes
from jeeves_mcp.pruning.render import line_count as line_count
from jeeves_mcp.pruning.render import plural as plural

if TYPE_CHECKING:
    from jeeves_mcp.mcp.progress import ProgressReporter
    from jeeves_mcp.pruner_config import PrunerConfig
    from jeeves_mcp.pruning import Pruner
    from jeeves_mcp.pruning.contract import FileAges, LineHistory
    from jeeves_mcp.pruning.recovery import RecoveryStore

SCHEMA_VERSION = 1

MAX_TIMEOUT_MS = 86_400_000  # a day: a 400-digit timeout is a bad request, not an overflow


def invalid_argument(field: str, problem: str) -> McpError:
    """-32602 with the shape the schema validator gives (kept out of the schemas: seed 003)."""
    message = f"{field}: {problem}"
    return McpError(INVALID_PARAMS, f"invalid arguments: {message}", {"code": "INVALID_REQUEST", "errors": [message]})


# Bytes of one argv string or environment entry, its NUL included, that exec takes:
# past it, E2BIG (the kernel's MAX_ARG_STRLEN, 32 pages).
MAX_ARG_STRLEN = 32 * os.sysconf("SC_PAGESIZE")


def check_arg_length(field: str, value: str) -> None:
    """INVALID_REQUEST when `value` could not reach a process as one argument."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size >= MAX_ARG_STRLEN:
        raise ToolError("INVALID_REQUEST", f"{field} is too long: {size:,} bytes, over the "
                        f"{MAX_ARG_STRLEN - 1:,} the kernel passes to a command in one argument")


def timeout_ms_arg(args: dict[str, Any], default: int, field: str = "timeout_ms") -> int:
    """The call's `timeout_ms` (an integer by the schema), 1 ms to a day; `field` names it."""
    value = int(args.get("timeout_ms", default))
    if not 1 <= value <= MAX_TIMEOUT_MS:
        raise invalid_argument(field, f"must be 1 to {MAX_TIMEOUT_MS}")
    return value


# No description: the name says what it does and the server instructions explain
# the markers; three copies of a sentence would push tools/list past 3 KB (seed 003).
FOCUS_PROPERTY = {"type": "string"}


@dataclass
class CallContext:
    """What a running tool may use; built per call by the pipeline."""

    config: PrunerConfig
    store: RecoveryStore
    pruner: Pruner
    progress: ProgressReporter
    request_id: str
    log: logging.Logger


@dataclass
class TextOutput:
    """One output text of a tool, subject to pruning and to the response budget."""

    name: str  # key in the result: "content", "stdout", "stderr", "matches"
    text: str
    source_type: str  # "code" | "logs" | "docs"
    path_hint: str | None = None
    first_line: int = 1  # original number of its first line (a window of a file)
    # Per line, a worth known before the question is read (recently changed lines of a
    # file, see pruning.history); asked for only when the text is pruned. With `whole`, the
    # whole file's.
    line_prior: Callable[[], Awaitable[LineHistory | None]] | None = None
    # The file `text` is lines of from first_line (a read, a printed file): a window of it
    # is ranked within it.
    whole: str | None = None
    # `text` is rows `grep -n` printed of the file `whole` (`12:line`): ranked within it.
    grep_rows: bool = False
    # The text of a file a search's row names (`path:12:line`), or None: the rows are ranked
    # within their files (read in the engine's thread, only for search output).
    files: Callable[[str], str | None] | None = None
    # How many commits ago such a file last changed (see pruning.history.file_ages); asked for
    # only when the text is pruned.
    file_ages: Callable[[], Awaitable[FileAges | None]] | None = None


T = TypeVar("T")


async def fail_open(prior: Callable[[], Awaitable[T]] | None) -> T | None:
    """A prior of a text to prune (its history, its files' ages), or None: its failure is no
    reason to lose a command's output that has already run."""
    if prior is None:
        return None
    try:
        return await prior()
    except Exception:
        logging.getLogger("jeeves_mcp.tools").exception("prior.failed")
        return None


@dataclass
class ToolOutput:
    summary: str  # one line, at most 100 characters (seed 002)
    fields: dict[str, Any] = field(default_factory=dict)
    texts: list[TextOutput] = field(default_factory=list)
    # Set when the tool ran but failed in a way whose output still matters
    # (a command that exited non-zero): answered with isError and the texts.
    error: ToolError | None = None
    # A tool whose whole result is its own contract (prune_text) skips the
    # shared pruning step and formatting: `raw_result` as it is, or `fit_raw`
    # called with a text budget (bytes) until the serialized result fits.
    raw_result: dict[str, Any] | None = None
    fit_raw: Callable[[int], dict[str, Any]] | None = None


ToolHandler = Callable[[CallContext, dict[str, Any]], Awaitable[ToolOutput]]


# MCP tool annotations, only the hints that differ from the spec's defaults
# (readOnly false, destructive true, idempotent false, openWorld true), to keep
# tools/list small (seed 003); `destructiveHint` is spelled out for bash because
# approval prompts key on it.
READ_ONLY: dict[str, bool] = {"readOnlyHint": True}
RUNS_COMMANDS: dict[str, bool] = {"destructiveHint": True}

# The revision that introduced each optional field of a tool definition: an
# older client is sent only what its revision defines.
DEFINITION_FIELD_SINCE = {"annotations": "2025-03-26", "title": "2025-06-18", "_meta": "2025-06-18"}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    title: str = ""
    annotations: dict[str, bool] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @property
    def prunable(self) -> bool:
        return "context_focus_question" in self.input_schema.get("properties", {})

    def definition(self, version: str | None = None) -> dict[str, Any]:
        """The tools/list entry for protocol `version` (None: every field)."""
        full: dict[str, Any] = {"name": self.name, "title": self.title,
                                "description": self.description, "inputSchema": self.input_schema}
        if self.annotations:
            full["annotations"] = self.annotations
        full["_meta"] = {"schemaVersion": self.schema_version}
        if version is None:
            return full
        # Revision dates sort as strings; an unknown (newer) one gets everything.
        return {key: value for key, value in full.items()
                if version >= DEFINITION_FIELD_SINCE.get(key, "")}


PATH_MAX = 4096  # bytes, with the final NUL (Linux)
NAME_MAX = 255  # bytes of one name


def resolve_in_root(config: PrunerConfig, raw: str, *, what: str = "path") -> Path:
    """Resolve `raw` against the run root; FORBIDDEN if it leaves the root.

    Symlinks and `..` are resolved before the check, so a link pointing out
    of the root is refused like an absolute path outside it. The check is on
    names: open what it returns with `open_in_root`, never by the path. A path
    no file can have (a lone surrogate, a symlink loop, too long) is
    INVALID_REQUEST rather than an internal error.
    """
    if "\x00" in raw:
        raise ToolError("INVALID_REQUEST", f"{what} contains a NUL byte")
    if unencodable(raw):
        raise ToolError("INVALID_REQUEST", f"{what} is not valid Unicode (a lone surrogate)")
    if _too_long(os.fsencode(raw)):  # as the kernel refuses it; resolving it first costs its length squared
        raise path_error(OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG)), raw, what)
    try:
        expanded = Path(raw).expanduser()
    except RuntimeError as exc:  # ~user with no such user
        raise ToolError("INVALID_REQUEST", f"{what} {raw!r}: no such user's home") from exc
    try:
        candidate = (config.root / expanded).resolve()
    except RuntimeError as exc:  # Python before 3.13 says a symlink loop so
        raise path_error(OSError(errno.ELOOP, os.strerror(errno.ELOOP)), raw, what) from exc
    except OSError as exc:  # e.g. EINVAL while a run swaps a component
        raise path_error(exc, raw, what) from exc
    if not config.allow_outside_root and not candidate.is_relative_to(config.root):
        raise ToolError(
            "FORBIDDEN",
            f"{what} {raw!r} is outside the run root",
            hint=f"use a path inside {config.root}",
        )
    if _too_long(os.fsencode(candidate)):
        raise path_error(OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG)), raw, what)
    return candidate


def _too_long(path: bytes) -> bool:
    return len(path) >= PATH_MAX or any(len(name) > NAME_MAX for name in path.split(b"/"))


def unencodable(text: str) -> bool:
    """Whether `text` holds a lone surrogate: JSON allows `\\ud800`, no file name or argv does."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def unencodable_argument(args: dict[str, Any]) -> str | None:
    """The first argument holding a lone surrogate (in a string, list or object), if any."""

    def holds(value: Any) -> bool:
        if isinstance(value, str):
            return unencodable(value)
        if isinstance(value, dict):
            return any(holds(key) or holds(item) for key, item in value.items())
        if isinstance(value, list):
            return any(holds(item) for item in value)
        return False

    return next((name for name, value in args.items() if holds(value)), None)


def path_error(exc: OSError, shown: str, what: str = "path") -> ToolError:
    """What a failed lookup or open of an agent's path means, as a tool error."""
    if len(shown) > 200:
        shown = shown[:200] + "…"
    code = exc.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        return ToolError("NOT_FOUND", f"no such file: {shown}")
    if code in (errno.EACCES, errno.EPERM):
        return ToolError("FORBIDDEN", f"permission denied: {shown}")
    if code == errno.EXDEV:  # open_beneath: a component now leads out of the root
        return ToolError("FORBIDDEN", f"{what} {shown!r} is outside the run root")
    if code == errno.ELOOP:
        return ToolError("INVALID_REQUEST", f"{what} {shown!r}: too many levels of symbolic links",
                         hint="a symlink loop?")
    if code == errno.ENAMETOOLONG:
        return ToolError("INVALID_REQUEST", f"{what} is too long",
                         hint=f"names up to {NAME_MAX} bytes, paths up to {PATH_MAX - 1}")
    if code in (errno.EMFILE, errno.ENFILE):  # the child's state, not the path's: worth a retry
        return ToolError("QUEUE_OVERLOADED", f"the child is out of file descriptors ({exc.strerror})",
                         hint="retry once other calls have ended")
    return ToolError("NOT_FOUND", f"{what} {shown!r}: {exc.strerror or exc}")


def open_in_root(root: Path, path: Path, flags: int, user: tuple[int, int] | None = None) -> int:
    """A descriptor of `path` (as `resolve_in_root` gave it), opened through one of the root:
    a component swapped for a symlink out of the root since the check is EXDEV, not followed
    (the attack review's F2). `user`: the run's commands' (uid, gid), who must be able to
    search every directory crossed (EACCES). A path outside the root (allow_outside_root)
    is opened beneath /."""
    if path.is_relative_to(root):
        # The root as the child first opened it: an ancestor swapped since cannot redirect the
        # open (attack re-check N2); the path was only compared with it before the call.
        pinned = pinned_root(root)
        if pinned is None:
            raise OSError(errno.ENOENT, "the run root could not be opened", str(root))
        return open_beneath(pinned, str(path.relative_to(root)), flags, search_as=user)
    base_fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return open_beneath(base_fd, str(path.relative_to("/")), flags, search_as=user)
    finally:
        os.close(base_fd)


def display_path(config: PrunerConfig, path: Path) -> str:
    """The path as the agent should see it: relative to the root when inside it."""
    try:
        return str(path.relative_to(config.root)) or "."
    except ValueError:
        return str(path)


MIN_PRUNE_BYTES = 512  # smaller outputs are returned whole: a marker would cost as much

# What a result holds besides its texts (summary, fields, pruning, a marker).
ENVELOPE_BYTES = 1024


def text_budget(config: PrunerConfig) -> int:
    """Bytes of output text one result starts with; the pipeline lowers it until
    the serialized result fits `response_budget_bytes`."""
    return max(256, config.response_budget_bytes - ENVELOPE_BYTES)


SUMMARY_CHARS = 100  # seed 002: summaries up to 100 characters


def clip_summary(text: str, limit: int = SUMMARY_CHARS, tail: str = "") -> str:
    """One line of at most `limit` characters (seed 002: summaries up to 100), `tail` kept
    whole at its end (`text` is clipped to make room)."""
    text = " ".join(text.split())
    room = limit - len(tail)
    return (text if len(text) <= room else text[: room - 1] + "…") + tail
