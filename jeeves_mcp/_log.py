"""One JSON object per line on stderr, with seed 000's event names."""

from __future__ import annotations

import enum
import json
import logging
import os
import sys
import time
from logging.handlers import RotatingFileHandler
from typing import Any

_RESERVED = frozenset(vars(logging.makeLogRecord({})))
# syslog priorities (sd-daemon(3)) from the highest level each covers: what journald
# files a `<N>`-prefixed line under.
_PRIORITIES = ((logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4), (logging.INFO, 6))


class LogLevel(enum.StrEnum):
    """`--log-level`: a choice, so a typo is a usage error rather than INFO."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"

    @property
    def level(self) -> int:
        return int(getattr(logging, self.name.upper()))


def to_journal(fd: int = 2) -> bool:
    """Whether `fd` is the journal's stream: systemd names it in JOURNAL_STREAM as
    DEVICE:INODE, and a redirected stderr (a file, a pipe) does not match."""
    named = os.environ.get("JOURNAL_STREAM", "")
    try:
        device, inode = (int(part) for part in named.split(":"))
        status = os.fstat(fd)
    except (ValueError, OSError):
        return False
    return (status.st_dev, status.st_ino) == (device, inode)


def priority_prefix(level: int) -> str:
    """`<N>` for a line logged at `level`."""
    return f"<{next((p for floor, p in _PRIORITIES if level >= floor), 7)}>"


class JournalLineFormatter(logging.Formatter):
    """A JSON line behind its `<N>` priority, so `journalctl -p warning` finds warnings."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return priority_prefix(record.levelno) + self.inner.format(record)


# Fields often quote what a client sent (a tool name, a request id, a cancel reason): each
# is cut to this, so a line stays readable and its log file bounded.
MAX_FIELD_CHARS = 1000
MAX_FIELD_ITEMS = 100
MAX_FIELD_DEPTH = 4
MAX_STACK_CHARS = 16 * 1024
# Characters in one line: at most 256 KiB, half of a child's log file and its rotation as
# the supervisor sizes them by default (child_log_bytes).
MAX_LINE_CHARS = 64 * 1024


class JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "event": quoted(record.getMessage(), MAX_FIELD_CHARS),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = bounded(value)
        if record.exc_info:
            entry["stack"] = _head_and_tail(self.formatException(record.exc_info), MAX_STACK_CHARS)
        line = json.dumps(entry, default=str, ensure_ascii=False)
        if len(line) > MAX_LINE_CHARS:
            # A log file is bounded by rotation, which only bounds it if no one line fills it.
            stub = {key: entry[key] for key in ("ts", "level", "event")}
            line = json.dumps({**stub, "line_chars_dropped": len(line)}, ensure_ascii=False)
        # translate is slow on non-ASCII text: most lines are ASCII, with no DEL to escape.
        return line if line.isascii() and "\x7f" not in line else line.translate(_UNSAFE)


# Characters a terminal acts on or that reorder what is shown (C1 controls such as CSI
# U+009B, line separators, bidi overrides) written as JSON escapes: a log line quotes
# what a client sent, and `jeeves-mcp logs` prints lines as they are.
_UNSAFE = {
    c: f"\\u{c:04x}"
    for c in [*range(0x7F, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
}


class Throttle:
    """At most one event per `interval_s`: what a client can make the server log must not
    be able to fill (and so rotate away) the log."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._next = 0.0
        self._suppressed = 0

    def allow(self) -> int | None:
        """None while throttled; else how many events were held back since the last one."""
        now = time.monotonic()
        if now < self._next:
            self._suppressed += 1
            return None
        self._next = now + self.interval_s
        held, self._suppressed = self._suppressed, 0
        return held


def quoted(value: str, limit: int = 200) -> str:
    """`value` cut to `limit` characters, saying how long it was."""
    return value if len(value) <= limit else f"{value[:limit]}... ({len(value)} chars)"


def bounded(value: Any, depth: int = 0) -> Any:
    """`value` with its strings cut to MAX_FIELD_CHARS, its lists and objects to
    MAX_FIELD_ITEMS items, and no deeper than MAX_FIELD_DEPTH."""
    if isinstance(value, str):
        return quoted(value, MAX_FIELD_CHARS)
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):  # JSON takes one of 4,000 digits
        return value if value.bit_length() <= 64 else f"({value.bit_length()}-bit integer)"
    if depth >= MAX_FIELD_DEPTH:
        return "..."
    if isinstance(value, list | tuple | set | frozenset):
        items = [bounded(item, depth + 1) for _, item in zip(range(MAX_FIELD_ITEMS), value, strict=False)]
        return items if len(value) <= MAX_FIELD_ITEMS else [*items, f"... ({len(value)} items)"]
    if isinstance(value, dict):
        shown = {quoted(str(key), MAX_FIELD_CHARS): bounded(item, depth + 1)
                 for _, (key, item) in zip(range(MAX_FIELD_ITEMS), value.items(), strict=False)}
        return shown if len(value) <= MAX_FIELD_ITEMS else {**shown, "...": f"{len(value)} keys"}
    return quoted(str(value), MAX_FIELD_CHARS)


def _head_and_tail(text: str, limit: int) -> str:
    """A stack's first and last lines, where its calls start and where it failed."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... ({len(text) - 2 * half} chars) ...\n{text[-half:]}"


class _PrivateFileHandler(RotatingFileHandler):
    """Log files (and their rotations) created 0600 whatever the umask, never through a
    symlink: they live in the daemon's state dir, which may be looser than it should be."""

    def _open(self) -> Any:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(self.baseFilename, flags, 0o600)
        return os.fdopen(fd, self.mode, encoding=self.encoding, errors=self.errors)


def configure(
    level: int = logging.INFO, stream: Any = None, *, file: str | None = None, file_bytes: int = 0
) -> None:
    """Route the `jeeves_mcp` loggers to `stream` (stderr), or to a size-bounded `file`."""
    handler: logging.Handler
    formatter: logging.Formatter = JsonLineFormatter()
    if file is not None:
        handler = _PrivateFileHandler(file, maxBytes=max(file_bytes // 2, 1024), backupCount=1)
    else:
        handler = logging.StreamHandler(stream or sys.stderr)
        if stream is None and to_journal():
            formatter = JournalLineFormatter(formatter)
    handler.setFormatter(formatter)
    root = logging.getLogger("jeeves_mcp")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def event(logger: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log the event `name` with structured `fields` (kept as top-level JSON keys)."""
    if logger.isEnabledFor(level):
        clean = {k if k not in _RESERVED else f"{k}_": v for k, v in fields.items()}
        logger.log(level, name, extra=clean)


def monotonic_ms(start: float) -> int:
    return int((time.monotonic() - start) * 1000)
