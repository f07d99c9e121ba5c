"""Slots' listening sockets kept in systemd's file descriptor store (sd_notify FDSTORE=1).

The daemon holds each slot's TCP listening socket for the slot's life (SlotLifecycle.hold_port).
Under systemd it also hands a copy to the service manager, named by its run and port; a daemon
that systemd restarts (a crash, `systemctl restart`, with live restore) gets them back as
LISTEN_FDS, so that nobody can bind a slot's port while the daemon is down, and it holds again
the socket of a child it re-adopts. Without NOTIFY_SOCKET (or without FileDescriptorStoreMax= in
the unit) nothing is stored and nothing comes back: the daemon binds the ports again.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import socket
import struct

import trio

from jeeves_mcp import _log
from jeeves_mcp.supervisor.notify import SystemdNotifier

__all__ = ["PortStore", "is_slot_socket_name", "refuse_connections", "slot_socket_name"]

log = logging.getLogger("jeeves_mcp.supervisor")

# FDNAME of a slot's socket: a digest of its run id (which may hold ":", LISTEN_FDNAMES's
# separator) and its port. The run matters: a port is reused once its slot ends, and a record
# left stale by a full disk must not take the socket of the run that has the port now.
_NAME = re.compile(r"\Ajeeves-slot-([0-9a-f]{16})-([0-9]{1,5})\Z")


def _run_digest(run_id: str) -> str:
    return hashlib.sha256(run_id.encode()).hexdigest()[:16]


def slot_socket_name(run_id: str, port: int) -> str:
    return f"jeeves-slot-{_run_digest(run_id)}-{port}"


def is_slot_socket_name(name: str) -> bool:
    return _NAME.match(name) is not None


class PortStore:
    """The slot sockets systemd handed back at start (`inherited`, by FDNAME), and the service
    manager's store for those bound since (`notifier`; nothing happens outside systemd)."""

    def __init__(
        self, notifier: SystemdNotifier | None = None, inherited: dict[str, socket.socket] | None = None
    ) -> None:
        self.notifier = notifier
        self.inherited = dict(inherited or {})

    def take(self, run_id: str, port: int) -> socket.socket | None:
        """The inherited listening socket of `run_id` on 127.0.0.1:`port`, if systemd kept one."""
        name = slot_socket_name(run_id, port)
        sock = self.inherited.pop(name, None)
        if sock is None:
            return None
        try:
            address = sock.getsockname()
            listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        except OSError:
            address, listening = None, 0
        if sock.type != socket.SOCK_STREAM or address != ("127.0.0.1", port) or not listening:
            _log.event(log, "daemon.stored_socket_unusable", logging.WARNING, run_id=run_id, port=port,
                       address=str(address))
            sock.close()
            self._remove(name)
            return None
        return sock

    def keep(self, run_id: str, sock: socket.socket) -> None:
        """Hand a copy of a slot's socket to systemd's store (kept until `forget`)."""
        if self.notifier is None or not self.notifier.enabled:
            return
        name = slot_socket_name(run_id, sock.getsockname()[1])
        if not self.notifier.send_fds(("FDSTORE=1", f"FDNAME={name}"), [sock.fileno()]):
            _log.event(log, "daemon.socket_not_stored", logging.WARNING, run_id=run_id, fdname=name)

    def forget(self, run_id: str, sock: socket.socket) -> None:
        """The slot is over: systemd closes its copy (the port is free once ours is closed)."""
        with contextlib.suppress(OSError):  # a socket that cannot say its port was never stored
            self._remove(slot_socket_name(run_id, sock.getsockname()[1]))

    def _remove(self, name: str) -> None:
        if self.notifier is not None and self.notifier.enabled:
            if not self.notifier.send("FDSTOREREMOVE=1", f"FDNAME={name}"):
                _log.event(log, "daemon.stored_socket_not_removed", logging.WARNING, fdname=name)

    def close_unclaimed(self) -> list[str]:
        """Close (and drop from the store) what no restored slot took; their names."""
        names = sorted(self.inherited)
        for name in names:
            with contextlib.suppress(OSError):
                self.inherited.pop(name).close()
            self._remove(name)
        if names:
            _log.event(log, "daemon.stored_sockets_closed", fdnames=names)
        return names


async def refuse_connections(listener: socket.socket | None) -> None:
    """A degraded slot keeps its port, so that nobody else answers at its URL, and resets each
    connection there at once: the agent learns now, rather than waiting on a queue nobody reads."""
    if listener is None:
        await trio.sleep_forever()
    try:
        sock = trio.socket.from_stdlib_socket(listener.dup())
    except OSError:
        await trio.sleep_forever()
    with sock:
        while True:
            try:
                connection, _ = await sock.accept()
            except OSError:  # out of descriptors, a connection reset while queued: later
                await trio.sleep(0.1)
                continue
            with contextlib.suppress(OSError):
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            connection.close()
