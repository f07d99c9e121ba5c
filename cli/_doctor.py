"""`jeeves-mcp doctor`: what a new user gets wrong, checked one by one.

Each check is pass, warn or fail with one line of detail saying what to do.
Exit 1 when any check fails (warnings do not count).
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from jeeves_mcp import __version__
from jeeves_mcp.cli._common import (
    EXIT_FAILURE,
    Settings,
    print_table,
    settings,
    visible,
    whole_when_piped,
)
from jeeves_mcp.client import untrusted_socket
from jeeves_mcp.pruning.render import plural
from jeeves_mcp.supervisor.strictmodes import state_dir_problem

if TYPE_CHECKING:
    from rich.console import Console

Status = Literal["pass", "warn", "fail"]
STYLES = {"pass": "green", "warn": "yellow", "fail": "bold red"}
UNIT_DIRS = (
    Path("/etc/systemd/system"),
    Path("/run/systemd/system"),
    Path("/usr/local/lib/systemd/system"),
    Path("/usr/lib/systemd/system"),
    Path("/lib/systemd/system"),
)
PRUNER_HEALTH_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str


def check_python() -> Check:
    # Older Pythons cannot import this module at all (requires-python >= 3.11).
    version = ".".join(map(str, sys.version_info[:3]))
    return Check("python", "pass", f"Python {version} ({sys.executable})")


def check_socket(path: Path) -> Check:
    """The control socket exists, is a socket, 0600, ours (or root's when we are root)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        # Said with the path asked for: `--socket` may be the one already given.
        return Check("socket", "fail", f"no control socket at {path}: start the daemon on it (`jeeves-mcp "
                     f"daemon --socket {shlex.quote(str(path))}` or `systemctl start jeeves-mcp`), or point "
                     "--socket at the one it listens on")
    except PermissionError:
        return Check("socket", "fail", f"cannot see {path}: its directory is not readable by you "
                     "(run as the daemon's user)")
    if not stat.S_ISSOCK(info.st_mode):
        return Check("socket", "fail", f"{path} is not a socket; remove it and restart the daemon")
    mode = stat.S_IMODE(info.st_mode)
    owner = _user(info.st_uid)
    if mode & 0o007:
        return Check("socket", "fail", f"{path} is mode {mode:04o}: other users can drive the daemon; "
                     "it should be 0600, or 0660 for an operators' group (jeeves-mcp.socket)")
    # 0660 under systemd: the socket's group (jeeves-mcp) is the operators'.
    in_group = mode & 0o060 == 0o060 and info.st_gid in {os.getegid(), *os.getgroups()}
    if info.st_uid != os.geteuid() and not in_group:
        return Check("socket", "fail", f"{path} belongs to {owner}, you are {_user(os.geteuid())}: "
                     f"run the CLI as {owner} (sudo) or the daemon as yourself")
    if (problem := untrusted_socket(path)) is not None:  # the CLI's commands refuse it too
        return Check("socket", "fail", problem)
    return Check("socket", "pass", f"{path} (mode {mode:04o}, owner {owner})")


def check_daemon(config: Settings) -> Check:
    """Something answers /healthz, and it is our version."""
    import httpx

    from jeeves_mcp.client import ControlError, DaemonUnavailable

    try:
        with config.client(timeout=5.0) as control:
            health = control.healthz()
    except DaemonUnavailable as exc:
        return Check("daemon", "fail", exc.message)
    except (ControlError, httpx.HTTPError) as exc:
        return Check("daemon", "fail", f"{config.where()} answers but not as expected: {exc}")
    version = health.get("version") if isinstance(health, dict) else None
    slots = health.get("slots") if isinstance(health, dict) else None
    count = f"{slots} slot{'' if slots == 1 else 's'}"
    socket = health.get("socket") if isinstance(health, dict) else None
    if socket and not config.url and Path(socket) != Path(config.where()):
        count += f", its socket is {socket}"
    if version != __version__:
        return Check("daemon", "warn", f"the daemon runs {version}, this CLI is {__version__}: "
                     "restart the daemon after an upgrade (with live_restore, runs keep going)")
    return Check("daemon", "pass", f"jeeves-mcp {version} answers on {config.where()} ({count})")


def check_fork_server(health: dict | None) -> Check:
    """Whether acquires get forked children (~20 ms) or cold ones (~0.3 s)."""
    if health is None:
        return Check("fork server", "warn", "unknown: the daemon does not answer")
    fork = health.get("fork_server")
    if fork is None and health.get("enabled") is False:
        return Check("fork server", "pass", "not started: pruning is disabled (enabled = false), slots get no child")
    if fork is None:
        return Check("fork server", "warn", "disabled (fork_server = false): every child starts cold")
    if not fork.get("up"):
        return Check("fork server", "warn", "down: children start cold until it is back (see the daemon log)")
    return Check("fork server", "pass",
                 f"pid {fork['pid']}, {plural(fork['spawns'], 'child', 'children')} forked, "
                 f"started {'once' if fork['starts'] == 1 else plural(fork['starts'], 'time')}")


def check_store(health: dict | None) -> Check:
    """Whether every slot record reached the state dir's database (a full disk keeps them in
    memory, retried on each write). A restart then brings their runs back degraded only if
    the note naming them was written (`noted`): not on a copy-on-write filesystem, nor where
    the note was refused."""
    if health is None:
        return Check("store", "warn", "unknown: the daemon does not answer")
    store = health.get("store")
    if not isinstance(store, dict):
        return Check("store", "warn", "not reported by this daemon")
    pending, failures = store.get("pending", 0), store.get("write_failures", 0)
    if pending:
        restart = ("a restart brings those runs back degraded" if store.get("noted") is True
                   else "a restart may bring released runs back: free space before restarting")
        return Check("store", "warn",
                     f"{plural(pending, 'run record')} not saved ({plural(failures, 'write')} failed): "
                     f"is the state dir's disk full? They are retried on each write; {restart}")
    if failures:
        return Check("store", "pass", f"every record saved ({plural(failures, 'write')} failed, then saved)")
    return Check("store", "pass", "every record saved")


def daemon_health(config: Settings) -> dict | None:
    try:
        with config.client(timeout=5.0) as control:
            health = control.healthz()
    except Exception:  # reported by check_daemon already
        return None
    return health if isinstance(health, dict) else None


def check_state_dir(path: Path, whose: str = "") -> Check:
    """The daemon's state dir is writable (or can be created); `whose` says where the path came from."""
    check = _check_state_dir(path)
    return Check(check.name, check.status, check.detail + whose) if whose else check


def _check_state_dir(path: Path) -> Check:
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe != path:
        if os.access(probe, os.W_OK | os.X_OK):
            return Check("state dir", "pass", f"{path} does not exist yet; the daemon will create it")
        return Check("state dir", "fail", f"{path} does not exist and {probe} is not writable: "
                     "create it for the daemon's user or pass --state-dir")
    if not path.is_dir():
        return Check("state dir", "fail", f"{path} is not a directory")
    info = path.stat()
    # What the daemon refuses at start. Another user's dir is only judged when others may
    # write it: the system service's is its user's, and doctor may run as an operator.
    if info.st_uid == os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = state_dir_problem(path)
        if problem is not None:
            return Check("state dir", "fail", problem)
    if not os.access(path, os.W_OK | os.X_OK):
        return Check("state dir", "fail", f"{path} is not writable by {_user(os.geteuid())}: "
                     "run as the daemon's user, fix its owner, or pass --state-dir")
    return Check("state dir", "pass", f"{path} is writable")


def version_line(program: str, fallback: str) -> str:
    """The first line `program --version` prints, or `fallback`."""
    try:
        done = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=5, check=False)
        return done.stdout.splitlines()[0].strip()
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return fallback


def check_ripgrep() -> Check:
    from jeeves_mcp.tools.grep import find_rg

    rg = find_rg()
    if rg is None:
        return Check("ripgrep", "warn", "rg not found beside the interpreter nor on PATH: the grep tool "
                     "uses its slower built-in search (reinstall jeeves-mcp, whose ripgrep wheel ships rg)")
    return Check("ripgrep", "pass", f"{version_line(rg, 'ripgrep')} ({rg})")


def check_git() -> Check:
    from jeeves_mcp.pruning.history import find_git

    git = find_git()
    if git is None:
        return Check("git", "warn", "git not found on /usr/local/bin:/usr/bin:/bin: focused reads of code "
                     "get no history prior, searches and file listings no file ages (install git to "
                     "weigh recent changes)")
    return Check("git", "pass", f"{version_line(git, 'git')} ({git}): focused reads, searches and file "
                 "listings in a git workspace weigh recent changes")


def check_pruner_endpoint(endpoint: str | None) -> Check:
    """The external SWE-Pruner service answers GET /health (only when one is configured)."""
    if not endpoint:
        return Check("pruner endpoint", "pass", "none configured: the built-in engine prunes locally")
    import trio

    from jeeves_mcp.pruning import EngineError
    from jeeves_mcp.pruning.swe_client import ExternalEngine

    async def probe() -> dict:
        engine = ExternalEngine(endpoint)
        try:
            return await engine.health(PRUNER_HEALTH_TIMEOUT_S)
        finally:
            await engine.aclose()

    try:
        health = trio.run(probe)
    except EngineError as exc:
        return Check("pruner endpoint", "fail", f"{endpoint}/health: {exc} ({exc.kind}); "
                     "children fall back to raw output until it answers")
    status = health.get("status")
    if status not in ("healthy", "ok") or not health.get("model_loaded"):
        return Check("pruner endpoint", "warn", f"{endpoint} answers status={status} "
                     f"model_loaded={health.get('model_loaded')}")
    return Check("pruner endpoint", "pass", f"{endpoint} is {status}, model loaded")


def check_systemd(unit_dirs: tuple[Path, ...] = UNIT_DIRS) -> Check:
    found = {name: next((d / name for d in unit_dirs if (d / name).exists()), None)
             for name in ("jeeves-mcp.service", "jeeves-mcp.socket")}
    if found["jeeves-mcp.service"] is None:
        return Check("systemd unit", "warn", "jeeves-mcp.service is not installed: the daemon runs only by hand "
                     "(`jeeves-mcp systemd-units --help`, or `make install-systemd` in a source tree; then "
                     "`systemctl enable --now jeeves-mcp.socket`)")
    if found["jeeves-mcp.socket"] is None:
        return Check("systemd unit", "warn", f"{found['jeeves-mcp.service']} is installed but not "
                     "jeeves-mcp.socket: no socket activation")
    return Check("systemd unit", "pass", f"{found['jeeves-mcp.service']} and {found['jeeves-mcp.socket']}")


def check_isolation(health: dict | None = None) -> Check:
    """Which isolation between runs is in force (README: isolation), as the running daemon
    reports it; without one, as a daemon started now by this user would have it."""
    reported = health.get("isolation") if health is not None else None
    if isinstance(reported, dict):
        user, switch, whose = str(reported.get("user")), bool(reported.get("switch_users")), ""
    else:
        from jeeves_mcp.proc import can_switch_users

        user, switch = _user(os.geteuid()), can_switch_users()
        whose = " (no daemon answers: as a daemon started now would run)"
    if switch:
        how = "as root" if user == "root" else f"as {user} with CAP_SETUID/CAP_SETGID"
        owners = "root" if user == "root" else f"root or {user}"  # not "root or root"
        return Check("isolation", "pass", f"daemon {how}: commands run as their run root's owner "
                     f"(roots owned by {owners}: as {user}); children non-dumpable{whose}")
    return Check("isolation", "warn", f"single user: commands run as {user} like the daemon and can "
                 "read its state dir (tokens); children are non-dumpable, so not their memory. Give the "
                 f"daemon CAP_SETUID and CAP_SETGID (or root) for per-owner commands{whose}")


def check_children() -> Check:
    """The daemon's own start-up check: a fresh interpreter imports what a pruner child runs."""
    import trio

    from jeeves_mcp.preflight import child_start_problem

    problem = trio.run(child_start_problem)
    if problem is not None:
        return Check("children", "fail", f"a pruner child cannot start: {problem}; reinstall jeeves-mcp "
                     "(the daemon refuses to serve until this passes)")
    return Check("children", "pass", f"a pruner child's modules import ({sys.executable})")


def _user(uid: int) -> str:
    from jeeves_mcp.proc import user_name

    return user_name(uid) or f"uid {uid}"


def run_checks(config: Settings, config_file: Path | None, state_dir: Path | None) -> list[Check]:
    from jeeves_mcp.pruner_config import ConfigError
    from jeeves_mcp.supervisor.daemon_config import load_daemon_config

    checks = [check_python(), check_children()]
    try:
        daemon = load_daemon_config(config_file, state_dir=state_dir)
    except ConfigError as exc:
        checks.append(Check("config", "fail", f"bad daemon configuration: {exc}"))
        daemon = None
    if config.url:
        checks.append(Check("socket", "pass", f"using the TCP control API at {config.url}"))
    else:
        checks.append(check_socket(Path(config.where())))
    checks.append(check_daemon(config))
    health = daemon_health(config)
    checks.append(check_fork_server(health))
    checks.append(check_store(health))
    reported = health.get("state_dir") if health is not None else None
    if state_dir is None and isinstance(reported, str):  # the running daemon's, not a guess
        checks.append(check_state_dir(Path(reported), " (the running daemon's)"))
    elif daemon is not None:
        whose = " (--state-dir)" if state_dir is not None else " (as a daemon started now would use it)"
        checks.append(check_state_dir(daemon.state_dir, whose))
    checks.append(check_ripgrep())
    checks.append(check_git())
    checks.append(check_isolation(health))
    endpoint = daemon.pruner_endpoint if daemon else (
        os.environ.get("JEEVES_MCP_PRUNER_ENDPOINT") or os.environ.get("JEEVES_PRUNER_ENDPOINT")
    )
    checks.append(check_pruner_endpoint(endpoint))
    checks.append(check_systemd())
    return checks


def render_checks(checks: list[Check], console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("check", no_wrap=True)  # the detail wraps, by words, at a narrow terminal
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for check in checks:
        table.add_row(check.name, Text(check.status, style=STYLES[check.status]), visible(check.detail))
    print_table(console, table)


def doctor(
    ctx: typer.Context,
    config_file: Annotated[Path | None, typer.Option(
        "--config", metavar="FILE", envvar="JEEVES_MCP_CONFIG",
        help="The daemon's TOML configuration, for its state dir and pruner endpoint.", show_default=False)] = None,
    state_dir: Annotated[Path | None, typer.Option(
        "--state-dir", metavar="DIR", help="The daemon's state dir (default: as the daemon resolves it).",
        show_default=False)] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help='Print {"ok": bool, "checks": [{"name", "status", "detail"}]}.')] = False,
) -> None:
    """Check the installation: Python, children, socket, daemon, store, state dir, ripgrep, git, pruner endpoint, systemd.

    Each check is pass, warn or fail with what to do; exit 1 if any check fails.
    """
    from rich.console import Console

    checks = run_checks(settings(ctx), config_file, state_dir)
    ok = all(check.status != "fail" for check in checks)
    if as_json:
        typer.echo(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        render_checks(checks, whole_when_piped(Console(highlight=False)))
    if not ok:
        raise typer.Exit(EXIT_FAILURE)



__all__ = ["Check", "render_checks", "run_checks"]
