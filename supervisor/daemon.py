"""The daemon's main: one trio.run, one root nursery owning the API and the slots."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import logging
import os
import signal
import socket
from functools import partial
from pathlib import Path

import httpx
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from jeeves_mcp import __version__, _log
from jeeves_mcp.capped_listener import listening_socket, serve_capped
from jeeves_mcp.preflight import child_start_problem
from jeeves_mcp.supervisor import descriptors
from jeeves_mcp.supervisor.api import create_app
from jeeves_mcp.supervisor.daemon_config import DaemonConfig
from jeeves_mcp.supervisor.events import EventBus
from jeeves_mcp.supervisor.metrics import Metrics
from jeeves_mcp.supervisor.notify import SystemdNotifier
from jeeves_mcp.supervisor.port_store import PortStore, is_slot_socket_name
from jeeves_mcp.supervisor.slot import SlotState
from jeeves_mcp.supervisor.slots import SlotManager
from jeeves_mcp.supervisor.store import (
    SlotStore,
    StateDirInUse,
    StoreTooNew,
    StoreUnavailable,
    lock_state_dir,
)
from jeeves_mcp.supervisor.strictmodes import ancestor_problem, dir_problem, state_dir_problem

log = logging.getLogger("jeeves_mcp.supervisor")

LISTEN_FDS_START = 3  # sd_listen_fds(3)
PR_SET_DUMPABLE = 4


class DaemonError(Exception):
    """The daemon cannot start (socket in use, state dir not writable, ...)."""


def listen_fds(env: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """The descriptors systemd handed this very process (sd_listen_fds_with_names(3)): the
    control socket of jeeves-mcp.socket, and slot sockets from its store (port_store.py)."""
    env = dict(os.environ) if env is None else env
    count = env.get("LISTEN_FDS", "0")
    if env.get("LISTEN_PID") != str(os.getpid()) or not count.isdigit():
        return []
    names = env.get("LISTEN_FDNAMES", "").split(":")
    return [(LISTEN_FDS_START + i, names[i] if i < len(names) else "") for i in range(int(count))]


def socket_activated(env: dict[str, str] | None = None) -> bool:
    """systemd handed this very process its control socket (socket activation)."""
    return any(not is_slot_socket_name(name) for _, name in listen_fds(env))


def stored_slot_sockets(env: dict[str, str] | None = None) -> dict[str, socket.socket]:
    """The slot sockets systemd kept for the previous daemon, by name (port_store.py)."""
    found: dict[str, socket.socket] = {}
    for fd, name in listen_fds(env):
        if not is_slot_socket_name(name):
            continue
        try:
            sock = socket.socket(fileno=fd)
        except OSError:  # not a socket: nothing this daemon stored
            os.close(fd)
            continue
        found[name] = sock
    return found


def control_socket(path: Path, env: dict[str, str] | None = None) -> socket.socket:
    """The control socket: inherited from systemd socket activation, or created 0600."""
    passed = listen_fds(env)
    for fd, _ in passed:  # whatever systemd passed, none of it for the processes we start
        with contextlib.suppress(OSError):
            os.set_inheritable(fd, False)
    for fd, name in passed:
        if not is_slot_socket_name(name):  # the socket unit's (named by it, or unnamed)
            return socket.socket(fileno=fd)
    # Its dir: made and checked by run_daemon, before anything else.
    try:
        owner: int | None = path.lstat().st_uid
    except FileNotFoundError:
        owner = None
    if owner is not None:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink()  # left by a daemon that died
            if owner != os.geteuid():  # in a dir that once was open to others
                _log.event(log, "daemon.foreign_socket_removed", logging.WARNING, path=str(path), owner_uid=owner)
        except OSError as exc:
            raise DaemonError(f"cannot use control socket {path}: {exc.strerror}") from exc
        else:
            if owner != os.geteuid():
                raise DaemonError(
                    f"control socket {path} is owned by uid {owner}, not {os.geteuid()}, and answers: "
                    "another user's server listens there; stop it and remove the socket, or choose another --socket"
                )
            raise DaemonError(f"another daemon is listening on {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket is born 0600: no window where others can connect
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise DaemonError(f"cannot bind control socket {path}: {exc.strerror}") from exc
    finally:
        os.umask(old_umask)
    sock.listen(128)
    return sock


def tcp_control_socket(host: str, port: int, backlog: int) -> socket.socket:
    """The TCP control listener, or a DaemonError that names the address and the errno."""
    try:
        return listening_socket(host, port, backlog)
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        hint = (f": another process holds it (a daemon still stopping, or another user's): "
                f"find it with `ss -ltnp 'sport = :{port}'`" if exc.errno == errno.EADDRINUSE else "")
        raise DaemonError(f"cannot listen on TCP {address} (tcp_host, tcp_port): {exc.strerror} [{name}]{hint}") from None


def _hypercorn_config(binds: list[str]) -> HypercornConfig:
    hyper = HypercornConfig()
    hyper.bind = binds
    hyper.accesslog = None
    hyper.errorlog = logging.getLogger("jeeves_mcp.hypercorn")
    hyper.graceful_timeout = 5.0
    hyper.include_server_header = False
    return hyper


def _not_dumpable() -> None:
    """Keep our /proc entries (environ, memory) from processes of the same user:
    every run's commands descend from this daemon. Root sees them regardless."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


async def run_daemon(config: DaemonConfig, *, ready: trio.Event | None = None) -> None:
    _not_dumpable()
    # systemd's default soft limit is 1024: a flood of connections took them all (T1).
    # The processes the daemon starts get the soft limit it was started with back.
    was, soft, hard = descriptors.raise_soft_limit()
    _log.event(log, "daemon.open_files_limit", soft=soft, hard=hard, was=was)
    notifier = SystemdNotifier()
    activated = socket_activated()
    own_socket = not activated  # an activated socket's dir is systemd's
    try:  # before anything there is read or written (attack review F5); the dirs above both
        # before either is made, so a refused daemon leaves no dir below another user's (N3)
        problem = ancestor_problem(config.state_dir, "state dir", "--state-dir")
        if problem is None and own_socket:
            problem = ancestor_problem(config.socket.parent, "socket dir", "--socket")
        if problem is None:
            config.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            problem = state_dir_problem(config.state_dir)
        if problem is None and own_socket:
            config.socket.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            problem = dir_problem(config.socket.parent, "socket dir", "--socket")
    except OSError as exc:
        raise DaemonError(f"cannot use {exc.filename}: {exc.strerror}") from None
    if problem is not None:
        raise DaemonError(problem)
    if not os.access(config.state_dir, os.W_OK):
        raise DaemonError(f"state dir {config.state_dir} is not writable")
    try:
        lock = lock_state_dir(config.state_dir)  # before anything there is touched
    except StateDirInUse as exc:
        raise DaemonError(str(exc)) from None
    try:
        # Before serving (and before systemd hears READY=1): an installation that cannot
        # start a child would answer every acquire with a disabled slot.
        problem = await child_start_problem()
        if problem is not None:
            raise DaemonError(f"cannot start a pruner child: {problem} [INSTALL_BROKEN]")
        try:  # before the socket: a refused store leaves no socket file behind
            store = SlotStore(config.db_path)
        except StoreTooNew as exc:
            raise DaemonError(f"{exc} [STORE_TOO_NEW]") from None
        except StoreUnavailable as exc:
            raise DaemonError(str(exc)) from None
        try:
            sock = control_socket(config.socket)
        except BaseException:
            store.close()
            raise
        # Both listeners before any child is re-adopted or touched: a port taken while the
        # daemon was down (attack-seventh C1) ends the start here, and a live-restore
        # restart leaves every child and record as it found them for the next daemon.
        try:
            listener = None if not config.tcp_host else tcp_control_socket(
                config.tcp_host, config.tcp_port, HypercornConfig.backlog)
        except BaseException:
            store.close()
            sock.close()
            if not activated:
                with contextlib.suppress(FileNotFoundError):
                    config.socket.unlink()
            raise
    except BaseException:
        os.close(lock)
        raise
    events = EventBus()
    metrics = Metrics()
    shutdown = trio.Event()
    try:
        # No keep-alive: each health ping proves the child still accepts a connection (a
        # pooled one went on answering for a child whose descriptors were all used up).
        no_pool = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=config.health_timeout_s, limits=no_pool) as http, \
                trio.open_nursery() as root:
            manager = SlotManager(config, store, events, metrics, http, PortStore(notifier, stored_slot_sockets()))
            metrics.watch(
                manager.counts, [str(state) for state in SlotState],
                lambda: None if manager.fork_server is None else manager.fork_server.up.is_set(),
            )
            root.start_soon(_watch_signals, shutdown)
            await root.start(manager.run)
            app = create_app(manager, tcp_token=config.tcp_token)
            # hypercorn closes the socket it is given: hand it a duplicate.
            served = os.dup(sock.fileno())
            hyper = _hypercorn_config([f"fd://{served}"])
            async with trio.open_nursery() as servers:
                await servers.start(
                    lambda task_status: serve(app, hyper, shutdown_trigger=shutdown.wait, task_status=task_status)
                )
                # hypercorn marks what it serves inheritable (for its reloader's workers): not ours.
                os.set_inheritable(served, False)
                tcp_url = None
                if listener is not None:  # served apart, capped, with a header deadline (capped_listener.py)
                    tcp_url = await servers.start(partial(
                        serve_capped, app, hyper, listener, config.tcp_max_connections,
                        config.tcp_header_timeout_s, shutdown, events="daemon.tcp_",
                    ))
                events.publish(
                    "daemon.ready", version=__version__, socket=str(config.socket),
                    tcp=tcp_url, slots=len(manager.slots),
                )
                gc.freeze()  # start-up objects live forever: keep them out of later collections
                notifier.send("READY=1", f"STATUS=serving {len(manager.slots)} slots")
                if notifier.watchdog_s:
                    servers.start_soon(_watchdog, notifier)
                if ready is not None:
                    ready.set()
                await shutdown.wait()
                notifier.send("STOPPING=1", "STATUS=stopping")
                if config.live_restore:
                    events.publish("daemon.stopping", live_restore=True, slots=len(manager.slots))
                    manager.detach_all()
                else:
                    events.publish("daemon.stopping", live_restore=False, slots=len(manager.slots))
                    await manager.release_all()
                servers.cancel_scope.cancel()
            root.cancel_scope.cancel()
    finally:
        store.close()
        sock.close()
        if listener is not None:  # never served if the start failed after the bind
            listener.close()
        if not activated:  # an activated socket belongs to systemd
            with contextlib.suppress(FileNotFoundError):
                config.socket.unlink()
        _log.event(log, "daemon.stopped")
        os.close(lock)  # last: the next daemon finds everything put away


async def _watchdog(notifier: SystemdNotifier) -> None:
    assert notifier.watchdog_s is not None
    while True:
        notifier.send("WATCHDOG=1")
        await trio.sleep(notifier.watchdog_s / 2)


async def _watch_signals(shutdown: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            _log.event(log, "daemon.signal", signal=signal.Signals(signum).name)
            shutdown.set()
