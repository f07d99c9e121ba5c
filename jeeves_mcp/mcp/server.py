"""The pruner child: build the MCP server from a config and serve it."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass
from functools import partial

import trio
from hypercorn.config import Config as HypercornConfig

from jeeves_mcp import _log
from jeeves_mcp.capped_listener import (
    inherited_listening_socket,
    listening_socket,
    serve_capped,
    unix_listening_socket,
)
from jeeves_mcp.mcp.protocol import Dispatcher
from jeeves_mcp.mcp.transports.http import McpHttpApp
from jeeves_mcp.mcp.transports.stdio import serve_stdio
from jeeves_mcp.pipeline import ToolRunner
from jeeves_mcp.pruner_config import PrunerConfig, mark_ready
from jeeves_mcp.pruning import Pruner, make_engine, swe_server
from jeeves_mcp.pruning.recovery import RecoveryStore
from jeeves_mcp.tools import ALIASES, DEFAULT_TOOLS
from jeeves_mcp.tools.bash import bundled_rg_dir

log = logging.getLogger("jeeves_mcp.server")


@dataclass
class PrunerServer:
    config: PrunerConfig
    store: RecoveryStore
    pruner: Pruner
    runner: ToolRunner
    dispatcher: Dispatcher


def build_server(config: PrunerConfig) -> PrunerServer:
    store = RecoveryStore(config.store_ttl_s, config.store_max_bytes)
    pruner = Pruner(config, store, make_engine(config))
    runner = ToolRunner(config, DEFAULT_TOOLS, store, pruner, aliases=ALIASES)
    return PrunerServer(config, store, pruner, runner, Dispatcher(runner))


def _hypercorn_config() -> HypercornConfig:
    hyper = HypercornConfig()  # its keep-alive timeout (5 s) is the header deadline
    hyper.accesslog = None
    hyper.errorlog = logging.getLogger("jeeves_mcp.hypercorn")
    hyper.graceful_timeout = 2.0
    hyper.include_server_header = False
    return hyper


async def serve_http(
    server: PrunerServer,
    *,
    shutdown: trio.Event,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve /mcp, /rpc and /health; reports the bound port once listening.

    Any local user can see the port in `ps` and connect, and /health needs no token: the
    listener is capped (`max_connections`), as the daemon's TCP control port is, and bounds
    every answer the app does not vouch for (attack F3: 1,100 tokenless HTTP/2 requests that
    never took their answer used up the child's descriptors, and its slot was degraded)."""
    config = server.config
    app = McpHttpApp(config, server.dispatcher, swe_server.routes(server.pruner, config))
    hyper = _hypercorn_config()
    if config.listen_fd is not None:  # the supervisor's, held across restarts: not ours to bind
        sock = inherited_listening_socket(config.listen_fd, hyper.backlog)
    else:
        sock = listening_socket(config.host, config.port, hyper.backlog)

    async def close_sessions_at_shutdown() -> None:
        await shutdown.wait()
        app.close_sessions()

    # The supervisor's health checks come here: a flood of the TCP port by another local
    # user fills its listen queue, and pings timed out and restarted the child (attack F5).
    # Same app, token still required; only the daemon's user can reach the directory.
    try:
        private = None if config.health_socket is None else unix_listening_socket(config.health_socket, hyper.backlog)
    except BaseException:
        sock.close()
        raise
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(close_sessions_at_shutdown)
            for listener, events in ((sock, "http."), (private, "health_socket.")):
                if listener is not None:
                    await nursery.start(partial(
                        serve_capped, app, hyper, listener, config.max_connections, hyper.keep_alive_timeout,
                        shutdown, events=events,
                    ))
            task_status.started(sock.getsockname()[1])
    finally:
        if config.health_socket is not None:
            with contextlib.suppress(OSError):
                config.health_socket.unlink()


async def run_pruner(config: PrunerConfig, *, stdio: bool = False) -> None:
    """The child's main: serve until SIGTERM/SIGINT (or stdin EOF for stdio)."""
    from jeeves_mcp.proc import (
        become_subreaper,
        clear_ambient_capabilities,
        kill_descendants,
        pin_root,
        set_dumpable,
        set_process_name,
    )
    from jeeves_mcp.proc.namespaces import private_ipc_and_devices

    become_subreaper()
    # Before any command or worker thread: what the commands share dies with us (review 7, M2).
    logs = [handler.baseFilename for handler in logging.getLogger("jeeves_mcp").handlers
            if isinstance(handler, logging.FileHandler)]
    in_use: list[str | os.PathLike[str]] = [config.root, *logs]
    if config.health_socket is not None:
        in_use.append(config.health_socket)
    # Whom commands run as is decided now, from the root directory itself (attack review F1).
    # Pinned before our mount namespace is made, so the handle holds the host's mount: the host
    # cannot unmount the run's filesystem while the run uses it (review 9, L3).
    unusable = pin_root(config.root)
    if unusable is not None:
        _log.event(log, "pruner.root_unusable", level=logging.ERROR, root=str(config.root), reason=unusable)
    shared = private_ipc_and_devices(in_use)
    if shared is not None:
        _log.event(log, "pruner.ipc_shared", reason=shared)
    set_dumpable(False)  # our memory holds the token: not for processes of our user to read
    clear_ambient_capabilities()  # what lets us run commands as their owner is not theirs to keep
    set_process_name("jeeves-pruner")  # forked children would otherwise look like their zygote
    server = build_server(config)
    shutdown = trio.Event()
    # After the namespaces: made in the /dev/shm our commands see, ours alone when we could.
    with bundled_rg_dir():
        try:
            await _serve(server, config, shutdown, stdio)
        finally:
            # Whatever the commands left below us (setsid, double forks, scrubbed
            # environments) goes with us: we are their subreaper.
            killed = kill_descendants()
            if killed:
                _log.event(log, "pruner.descendants_killed", count=killed)
    await server.pruner.engine.aclose()
    _log.event(log, "pruner.stopped")


async def _serve(server: PrunerServer, config: PrunerConfig, shutdown: trio.Event, stdio: bool) -> None:
    from jeeves_mcp.proc import reap_orphans

    async with trio.open_nursery() as outer:
        outer.start_soon(_watch_signals, shutdown, outer.cancel_scope)
        # What commands leave behind is reaped as it exits, not at the next call (attack review F3).
        await outer.start(reap_orphans)
        if stdio:
            await serve_stdio(server.dispatcher)
        else:
            async with trio.open_nursery() as inner:
                port = await inner.start(
                    lambda task_status: serve_http(server, shutdown=shutdown, task_status=task_status)
                )
                host = f"[{config.host}]" if ":" in config.host else config.host
                ready = {"event": "ready", "url": f"http://{host}:{port}/mcp", "port": port,
                         "pid": os.getpid()}
                sys.stdout.write(json.dumps(ready) + "\n")
                sys.stdout.flush()
                mark_ready()
                _log.event(log, "pruner.ready", port=port, root=str(config.root),
                           engine=server.pruner.engine.name)
                _name_process(config, port)
            # hypercorn returns once its graceful shutdown is over
        outer.cancel_scope.cancel()


def _name_process(config: PrunerConfig, port: int) -> None:
    """ps shows which run a child serves: `jeeves-pruner RUN_ID port=N root=PATH`, not the
    command line it was started or forked with (`python -m jeeves_mcp.zygote 14`)."""
    from jeeves_mcp.proc import set_process_title

    run = os.environ.get("JEEVES_MCP_RUN_ID")  # set by the supervisor for its children
    words = ["jeeves-pruner", *([run] if run else []), f"port={port}", f"root={config.root}"]
    set_process_title(" ".join(words), "jeeves-pruner")


async def _watch_signals(shutdown: trio.Event, scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            _log.event(log, "pruner.signal", signal=signal.Signals(signum).name)
            if not shutdown.is_set():
                # Now, not after the graceful shutdown: the supervisor's grace may end first.
                from jeeves_mcp.proc import kill_descendants

                kill_descendants(reap=False)
            if shutdown.is_set():
                scope.cancel()  # second signal: stop now
                return
            shutdown.set()
