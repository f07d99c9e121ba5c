"""`bash`: a shell command in the run root, as a process tree that always dies."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import pwd
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import trio

from jeeves_mcp import _log
from jeeves_mcp._log import quoted
from jeeves_mcp.mcp.errors import ToolError
from jeeves_mcp.proc import TAG_VAR, TREE_VAR, command_user, process_alive, run_command
from jeeves_mcp.proc.namespaces import SHM
from jeeves_mcp.pruning.engine import without_line_numbers
from jeeves_mcp.tools import grep
from jeeves_mcp.tools._shown_file import ShownFile, leading_cd, shown_file
from jeeves_mcp.tools.base import (
    FOCUS_PROPERTY,
    MIN_PRUNE_BYTES,
    RUNS_COMMANDS,
    CallContext,
    TextOutput,
    Tool,
    ToolOutput,
    check_arg_length,
    clip_summary,
    display_path,
    invalid_argument,
    line_count,
    plural,
    resolve_in_root,
    timeout_ms_arg,
)
from jeeves_mcp.tools.read import (
    SOURCE_SUFFIXES,
    file_text,
    source_text,
    source_type_for,
    with_file,
    with_searched_files,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "cmd": {"type": "string"},
        "cwd": {"type": "string"},
        "env": {"type": "object"},
        "timeout_ms": {"type": "integer"},
        "context_focus_question": FOCUS_PROPERTY,
    },
    "required": ["cmd"],
    "additionalProperties": False,
}


log = logging.getLogger("jeeves_mcp.tools.bash")

# How bash exports a function in the environment (BASH_FUNC_name%%), and imports it back.
BASH_FUNCTION_PREFIX = "BASH_FUNC_"

# The directory `bundled_rg_dir` made, last on the PATH of this process's commands.
_rg_dir: str | None = None


def shell() -> str:
    return shutil.which("bash") or "/bin/sh"


@contextlib.contextmanager
def bundled_rg_dir() -> Iterator[None]:
    """While inside: a directory holding only `rg`, a link to find_rg()'s (the wheel's, beside
    the interpreter, which a daemon run by systemd has not on PATH), that `run` puts last on
    the PATH of the commands it starts; removed after. Not the venv's bin/, which holds python
    and pip: a command's `pip install` could write into the daemon's venv."""
    global _rg_dir
    rg = grep.find_rg()  # looked up in grep: a child started without rg has none here either
    _rg_dir = None if rg is None else _linked_dir(rg)
    try:
        yield
    finally:
        if _rg_dir is not None:
            shutil.rmtree(_rg_dir, ignore_errors=True)
            _rg_dir = None


def _linked_dir(rg: str) -> str | None:
    """A new 0755 directory holding only a link `rg` to `rg`. In /dev/shm: the child's own once
    `private_ipc_and_devices` made it, freed by the kernel even when the child is SIGKILLed;
    else systemd's for the unit, or the host's, where what a child killed outright left is
    removed first (_remove_left_behind). In the temp dir where there is no /dev/shm.
    None, logged, when it cannot be made (no space left): commands go without, the child starts."""
    made = None
    where = SHM if os.access(SHM, os.W_OK | os.X_OK) else None
    _remove_left_behind(where or tempfile.gettempdir())
    try:
        made = tempfile.mkdtemp(prefix=f"{_RG_DIR_PREFIX}{os.getpid()}-", dir=where)
        # Through a descriptor: TMPDIR may be a directory where a run's user can swap names.
        fd = os.open(made, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fchmod(fd, 0o755)  # searched by commands run as the root's owner, written by us alone
            os.symlink(os.path.abspath(rg), "rg", dir_fd=fd)
        finally:
            os.close(fd)
        return made
    except OSError as exc:
        _log.event(log, "bash.rg_not_on_path", logging.WARNING, error=str(exc))
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        return None


_RG_DIR_PREFIX = "jeeves-rg-"
_RG_DIR_NAME = re.compile(re.escape(_RG_DIR_PREFIX) + r"(\d+)-\w+")
# A start reads no more names than SWEEP_NAMES and looks at no more such ones than SWEEP_MOST:
# anyone may make names in /dev/shm, and a million would cost each start's thread the memory of
# the list and seconds of /proc reads.
SWEEP_NAMES = 10_000
SWEEP_MOST = 64


def _remove_left_behind(where: str) -> None:
    """The directories children of our user killed outright left in `where` (a SIGKILL runs no
    cleanup; the host's /dev/shm, or the temp dir, keep them until reboot): each names its
    child's pid, and those whose child is gone are removed. In a thread of its own, never
    waited for: another local user can name a FUSE mount of theirs so, whose first lookup
    never returns, and a start must not wait on it."""
    threading.Thread(target=_sweep, args=(where,), name="jeeves-rg-sweep", daemon=True).start()


def _sweep(where: str) -> None:
    try:
        with os.scandir(where) as entries:
            names = [entry.name for entry in itertools.islice(entries, SWEEP_NAMES)]
    except OSError:
        return
    uid = os.geteuid()
    candidates = (found for name in names if (found := _RG_DIR_NAME.fullmatch(name)))
    for found in itertools.islice(candidates, SWEEP_MOST):
        name = found.group()
        if process_alive(int(found.group(1))):
            continue
        try:
            fd = os.open(os.path.join(where, name), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if os.fstat(fd).st_uid != uid:  # another user's: not ours to touch
                continue
            # What we made holds `rg` alone: nothing else is removed, nothing descended into.
            with contextlib.suppress(OSError):
                os.unlink("rg", dir_fd=fd)
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(where, name))


def sanitized_env(
    allow: tuple[str, ...], extra: Mapping[str, Any] | None, parent: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Only the allow-listed variables of `parent` (default os.environ), then `extra`."""
    parent = os.environ if parent is None else parent
    env = {name: parent[name] for name in allow if name in parent}
    env.setdefault("PATH", os.defpath)
    for name, value in (extra or {}).items():
        shown = f"env.{quoted(name, 50)}"  # a name may be megabytes: never echoed whole
        if not isinstance(value, str):
            raise invalid_argument(shown, "expected string")
        if not name or "=" in name or "\x00" in name or "\x00" in value:
            raise invalid_argument("env", f"invalid variable {quoted(name, 50)}")
        if name in (TAG_VAR, TREE_VAR):
            raise invalid_argument(shown, "reserved")
        if name.startswith(BASH_FUNCTION_PREFIX):
            # Where /bin/sh is bash, the wrapper that sets the command's limits would run it.
            raise invalid_argument(shown, "bash reads it as a shell function definition")
        check_arg_length(shown, f"{name}={value}")
        env[name] = value
    return env


def owner_env(env: dict[str, str], uid: int, keep: set[str]) -> dict[str, str]:
    """A command run as another user gets that user's USER and LOGNAME, and its HOME unless the
    HOME it would inherit is that user's own (one the runner set for the run) or the call's `env`
    sets it: the pruner's HOME is not theirs to write. A uid with no passwd entry gets HOME=/
    and no USER or LOGNAME, as container runtimes give one."""
    owner: dict[str, str | None]
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        owner = {"USER": None, "LOGNAME": None, "HOME": "/"}
    else:
        owner = {"USER": entry.pw_name, "LOGNAME": entry.pw_name, "HOME": entry.pw_dir}
    if _owned_by(env.get("HOME"), uid):
        del owner["HOME"]
    out = dict(env)
    for name, value in owner.items():
        if name in keep:
            continue
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def _owned_by(path: str | None, uid: int) -> bool:
    try:
        return path is not None and os.stat(path).st_uid == uid
    except OSError:
        return False


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f} s" if ms < 60_000 else f"{ms / 60_000:.1f} min"


def _quote(cmd: str, room: int) -> str:
    flat = " ".join(cmd.split())
    return flat if len(flat) <= room else flat[: room - 1] + "…"


async def run(ctx: CallContext, args: dict[str, Any]) -> ToolOutput:
    config = ctx.config
    cmd: str = args["cmd"]
    if "\x00" in cmd:  # exec's strings end at a NUL: subprocess raised, and the call was INTERNAL
        raise ToolError("INVALID_REQUEST", "cmd contains a NUL byte, which no command's argument can hold")
    check_arg_length("cmd", cmd)
    user = command_user(config.root)  # first: a replaced root is refused as such
    cwd = resolve_in_root(config, args.get("cwd", "."), what="cwd")
    if not cwd.is_dir():
        raise ToolError("NOT_FOUND", f"cwd is not a directory: {display_path(config, cwd)}")
    env = sanitized_env(config.env_allow, args.get("env"))
    if _rg_dir is not None and "PATH" not in (args.get("env") or {}):
        env["PATH"] = f"{env['PATH']}:{_rg_dir}" if env["PATH"] else _rg_dir  # last: an rg on PATH wins
    if user is not None:
        env = owner_env(env, user[0], keep=set(args.get("env") or ()))
    timeout_ms = timeout_ms_arg(args, config.bash_timeout_ms)
    result = await run_command(
        [shell(), "-c", cmd],
        cwd=cwd,
        env=env,
        timeout_s=timeout_ms / 1000,
        max_output_bytes=config.max_output_bytes,
        user=user,
        max_processes=config.command_max_processes,
        kill_grace_s=config.kill_grace_ms / 1000,
        on_output=ctx.progress.report,
    )
    stdout = result.stdout.decode("utf-8", "replace")
    stderr = result.stderr.decode("utf-8", "replace")
    lines = line_count(stdout) + line_count(stderr)
    if result.signal is not None:
        status, status_word = f"signal {result.signal}", f"killed by signal {result.signal}"
    else:
        status, status_word = f"exit {result.exit_code}", f"exited with status {result.exit_code}"
    tail = f": {status} in {_seconds(result.duration_ms)}, {plural(lines, 'line')}"
    summary = clip_summary(f'bash "{_quote(cmd, max(10, 100 - len(tail) - 7))}"{tail}')
    fields: dict[str, Any] = {
        "exit_code": result.exit_code,
        "duration_ms": result.duration_ms,
        "cwd": display_path(config, cwd),
        "stdout_bytes": result.stdout_bytes,
        "stderr_bytes": result.stderr_bytes,
    }
    if result.signal is not None:
        fields["signal"] = result.signal
    if result.truncated:
        fields["output_capped"] = True
    error = None
    if result.exit_code != 0:
        code = result.exit_code if result.exit_code is not None else 128 + (result.signal or 0)
        error = ToolError("COMMAND_FAILED", f"command {status_word}", exit_code=code)
    # A search's rows (`grep -rn`, `rg -n`) are ranked within the files they name.
    out = TextOutput("stdout", stdout, "logs")
    if (base := _search_base(ctx, cwd, cmd, args.get("env") or {})) is not None:
        out = with_searched_files(ctx, out, base)
    question = args.get("context_focus_question")
    # Only output that will be pruned: a smaller one is shown whole, a larger one is not pruned.
    if (
        ctx.config.pruning_enabled and isinstance(question, str) and question.strip()
        and result.exit_code == 0 and not result.truncated
        and MIN_PRUNE_BYTES <= len(stdout) <= ctx.config.max_prune_input_bytes
    ):
        out = await _as_file(ctx, cwd, cmd, stdout) or out
    return ToolOutput(
        summary=summary, fields=fields, texts=[out, TextOutput("stderr", stderr, "logs")], error=error
    )


# Files the pruner does not read (outside the run root, at a git revision) whose printed lines
# are laid out as their name says: source code and documentation (anything else, a log, a
# config, stays command output).
BY_NAME_SUFFIXES = SOURCE_SUFFIXES | {".md", ".rst", ".adoc"}


async def _as_file(ctx: CallContext, cwd: Path, cmd: str, stdout: str) -> TextOutput | None:
    """`stdout` as `read` shows the file `cmd` printed (a window of it): pruned as that file
    is, with its lines' history and numbers. None when `cmd` is no such command, or its
    output is not the file's lines as they are now."""
    shown = shown_file(cmd)
    if shown is None:
        return None
    raw = os.path.join(cwd, shown.cd or ".", shown.path)
    if shown.rev is not None:  # a directory's listing (`tree REV:src`) is no file's lines
        return None if stdout.startswith("tree ") else _by_name(shown, shown.path, stdout)
    try:
        path = resolve_in_root(ctx.config, raw)
    except ToolError as exc:
        return _by_name(shown, raw, stdout) if exc.code == "FORBIDDEN" and not shown.matches else None
    if shown.matches:
        return await _search_of_file(ctx, path, shown, stdout)
    try:
        text, _ = await file_text(ctx.config.root, path, shown.path)
    except ToolError:
        return None
    first = _first_line(shown, text, stdout)
    if first is None:
        return None
    output = TextOutput("stdout", stdout, source_type_for(path), display_path(ctx.config, path), first)
    return with_file(ctx, output, path, text)


async def _search_of_file(ctx: CallContext, path: Path, shown: ShownFile, stdout: str) -> TextOutput | None:
    """`stdout`, the rows a search of the source file `path` printed (`grep -n`), to be ranked
    within the file when every row is its line of that number; None otherwise, and for a file
    the engine would not lay out (over AROUND_MAX_CHARS), which is then neither read whole nor
    checked (review21: a 60 MB file's check held the child's event loop 16 s). Read and
    checked in a thread: the check splits the file."""

    def checked() -> str | None:
        text = source_text(ctx.config, path, shown.path)
        return text if text is not None and shown.rows_match(text, stdout) else None

    text = await trio.to_thread.run_sync(checked)
    if text is None:
        return None
    output = TextOutput("stdout", stdout, "code", display_path(ctx.config, path), grep_rows=True)
    return with_file(ctx, output, path, text)


# A command that moves before its output is printed, in a way leading_cd does not follow.
# Possessive: matched on the event loop, and 130,000 blanks before a command took 7.6 s.
_MOVES = re.compile(r"[ \t]*+(?:\(?+[ \t]*+cd|pushd|git[ \t]++-C)(?:[ \t\n]|$)")


def _search_base(ctx: CallContext, cwd: Path, cmd: str, env: Mapping[str, Any]) -> Path | None:
    """Where the relative paths of `cmd`'s output are from: its directory, or that of its leading
    `cd DIR &&`s; None when not told (`cd "$X" && ...`, `(cd x && ...)`, `pushd`, `git -C`, a DIR
    CDPATH may send elsewhere), outside the root or no directory: its files are then not read."""
    cd = leading_cd(cmd)
    if cd is None:
        return None if _MOVES.match(cmd) else cwd
    if "CDPATH" in env and not cd.startswith(("/", "./")):
        return None
    try:
        base = resolve_in_root(ctx.config, os.path.join(cwd, cd))
    except ToolError:
        return None
    return base if base.is_dir() else None  # the command failed: no output to read files for


def _by_name(shown: ShownFile, raw: str, stdout: str) -> TextOutput | None:
    """`stdout` as the lines of a source or documentation file the pruner does not read (one
    outside the run root, a library's module the agent looks into; a `git show REV:F`): laid
    out by the file's name, numbered from the line the command starts at, with no history. Not
    the last lines of a file (`tail -n N`), whose first line only the file tells, nor a name
    that does not say what the file holds (`/var/log/syslog` is a log, pruned as one)."""
    path = Path(os.path.normpath(raw))
    if shown.from_end or path.suffix.lower() not in BY_NAME_SUFFIXES:
        return None
    return TextOutput("stdout", stdout, source_type_for(path), str(path), shown.start)


def _first_line(shown: ShownFile, text: str, stdout: str) -> int | None:
    """Where in the file `text` the output `stdout` starts (see ShownFile.first_line); its
    numbers taken off first when the command numbered it. `stdout` is at most
    max_prune_input_bytes, the file is not split."""
    if shown.numbered:
        plain = without_line_numbers(stdout.removesuffix("\n").split("\n"))
        if plain is None:
            return None
        stdout = "\n".join(plain)
    return shown.first_line(text, stdout)


TOOL = Tool(
    name="bash",
    title="Run shell command",
    description=("Runs cmd in the workspace: exit_code, stdout, stderr."),
    input_schema=SCHEMA,
    handler=run,
    annotations=RUNS_COMMANDS,
)
