"""Slots' listening sockets kept in systemd's file descriptor store (sd_notify FDSTORE=1).

The daemon holds each slot's TCP listening socket for the slot's life (lifecycle.hold_port).
Under systemd it also hands a copy to the service manager, named by its port; a daemon that
systemd restarts (a crash, with live restore) gets them back as LISTEN_FDS, so that nobody can
bind a slot's port while the daemon is down, and it holds again the socket of a child it
re-adopts. Without NOTIFY_SOCKET (or without FileDescriptorStoreMax= in the unit) nothing is
stored and nothing comes back: the daemon binds the ports again, as it did before.
"""

from __future__ import annotations

import contextlib
import logging
import socket

from jeeves_mcp import _log
from jeeves_mcp.supervisor.notify import SystemdNotifier

__all__ = ["NAME_PREFIX", "PortStore", "port_of_name"]

log = logging.getLogger("jeeves_mcp.supervisor")

# FDNAME of a slot's socket: the port, as run ids may hold ":", which LISTEN_FDNAMES separates by.
NAME_PREFIX = "jeeves-slot-port-"


def port_of_name(name: str) -> int | None:
    """The port a stored socket's name gives, or None for another name."""
    digits = name.removeprefix(NAME_PREFIX)
    if digits == name or not digits.isdigit():
        return None
    port = int(digits)
    return port if 0 < port < 65536 else None


class PortStore:
    """The slot sockets systemd handed back at start (`inherited`, by port), and the service
    manager's store for those bound since (`notifier`; a no-op outside systemd)."""

    def __init__(
        self, notifier: SystemdNotifier | None = None, inherited: dict[int, socket.socket] | None = None
    ) -> None:
        self.notifier = notifier
        self.inherited = dict(inherited or {})

    def take(self, port: int) -> socket.socket | None:
        """The inherited listening socket of 127.0.0.1:`port`, if systemd handed one back."""
        sock = self.inherited.pop(port, None)
        if sock is None:
            return None
        try:
            address = sock.getsockname()
            listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        except OSError:
            address, listening = None, 0
        if sock.type != socket.SOCK_STREAM or address != ("127.0.0.1", port) or not listening:
            _log.event(log, "daemon.stored_socket_unusable", logging.WARNING, port=port, address=str(address))
            sock.close()
            self.forget(port)
            return None
        return sock

    def keep(self, sock: socket.socket) -> None:
        """Hand a copy of a slot's socket to systemd's store (kept until `forget`)."""
        if self.notifier is None or not self.notifier.enabled:
            return
        port = sock.getsockname()[1]
        if not self.notifier.send_fds(("FDSTORE=1", f"FDNAME={NAME_PREFIX}{port}"), [sock.fileno()]):
            _log.event(log, "daemon.socket_not_stored", logging.WARNING, port=port)

    def forget(self, port: int) -> None:
        """The slot is over: systemd closes its copy (its port is free once ours is closed)."""
        if self.notifier is not None and port:
            self.notifier.send("FDSTOREREMOVE=1", f"FDNAME={NAME_PREFIX}{port}")

    def close_unclaimed(self) -> list[int]:
        """Close (and drop from the store) what no restored slot took; their ports."""
        ports = sorted(self.inherited)
        for port in ports:
            with contextlib.suppress(OSError):
                self.inherited.pop(port).close()
            self.forget(port)
        if ports:
            _log.event(log, "daemon.stored_sockets_closed", ports=ports)
        return ports
