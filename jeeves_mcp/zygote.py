"""Fork server for pruner children: import everything once, fork a child per slot.

A cold child pays ~0.25 s of interpreter start and imports; a child forked
from this process is listening ~10 ms later and shares the imported code
copy-on-write (its unique memory is a third of a cold child's).

Protocol, over the SOCK_SEQPACKET socket passed as fd argv[1]:
  zygote → daemon   {"ready": true, "pid": N}               once, after the imports
  daemon → zygote   {"root", "port", "env", "log_file", "log_bytes"} + one or two fds
                    (SCM_RIGHTS): the write end of the pipe that becomes the child's stdout,
                    then the slot's listening socket, if any, which the child serves on
  zygote → daemon   {"pid": N} or {"error": "..."}

Each child starts a new session, takes the request's cwd and environment in
full (nothing of a previous run exists in this process: it never serves), and
runs the ordinary pruner main. The zygote reaps its children, and exits when
the daemon's end of the socket closes; the children live on in their own
sessions, where a restarted daemon re-adopts them.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import socket
import sys
import traceback
from typing import Any

MAX_MESSAGE = 1024 * 1024


def _preload() -> None:
    """Import, once and before any fork, every module a child runs: a child that imported
    them after the fork took 0.2-0.3 s to start and held its own copy of each."""
    import ast  # noqa: F401  (the engine parses Python lazily)

    from jeeves_mcp.preflight import import_child_modules

    import_child_modules(with_cli=False)



def _reap(signum: int, frame: Any) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _child(request: dict[str, Any], stdout_fd: int, listen_fd: int | None, control: socket.socket) -> None:
    """In the forked child: become a pruner for one run. Never returns."""
    code = 1
    try:
        control.close()
        os.setsid()
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(stdout_fd, 1)
        os.dup2(null, 2)
        os.close(null)
        os.close(stdout_fd)
        os.chdir(request["root"])
        os.environ.clear()
        os.environ.update(request["env"])
        if listen_fd is not None:  # above 2 (our 0-2 were open when it came): kept by the dup2s
            os.set_inheritable(listen_fd, False)
            os.environ["JEEVES_MCP_LISTEN_FD"] = str(listen_fd)
        import logging

        import trio

        from jeeves_mcp import _log
        from jeeves_mcp.mcp.server import run_pruner
        from jeeves_mcp.pruner_config import ConfigError, failed_line, load_config

        _log.configure(logging.INFO, file=request["log_file"], file_bytes=request["log_bytes"])
        try:
            config = load_config(os.environ, root=request["root"], port=request["port"])
        except ConfigError as exc:
            os.write(1, failed_line(exc, log_it=True).encode() + b"\n")  # where the daemon waits for ready
            code = 2
            return
        trio.run(run_pruner, config)
        code = 0
    except BaseException as exc:
        from jeeves_mcp.pruner_config import start_failure_line

        line = start_failure_line(exc)
        if line is not None:
            with contextlib.suppress(OSError):
                os.write(1, line.encode() + b"\n")  # where the daemon waits for ready
        traceback.print_exc()
    finally:
        os._exit(code)


def serve(control: socket.socket) -> None:
    _preload()
    from jeeves_mcp.proc import prepare_process_title, set_process_name

    prepare_process_title()  # before the fork: each child names its run once it has one
    set_process_name("jeeves-zygote")  # after: setproctitle's setup renames comm
    gc.collect()
    gc.freeze()  # keep the imported objects out of later collections: fewer copied pages
    signal.signal(signal.SIGCHLD, _reap)
    control.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, 2)
        except OSError:
            return
        if not message:
            return  # the daemon is gone
        try:
            request = json.loads(message)
            if len(fds) not in (1, 2):
                raise ValueError("expected one or two file descriptors")
            pid = os.fork()
        except (ValueError, OSError) as exc:
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            continue
        if pid == 0:
            _child(request, fds[0], fds[1] if len(fds) == 2 else None, control)
        for fd in fds:
            os.close(fd)
        control.send(json.dumps({"pid": pid}).encode())


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(control)


if __name__ == "__main__":
    main()
