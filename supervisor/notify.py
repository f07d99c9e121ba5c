"""sd_notify(3) without libsystemd: READY=1, STATUS=, STOPPING=1, WATCHDOG=1, FDSTORE=1."""

from __future__ import annotations

import array
import os
import socket
from collections.abc import Mapping


class SystemdNotifier:
    """Sends to $NOTIFY_SOCKET when systemd set it; does nothing otherwise."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        address = env.get("NOTIFY_SOCKET", "")
        self.address: str | None = None
        self._sock: socket.socket | None = None
        if address:
            # A leading "@" names the Linux abstract namespace.
            self.address = "\0" + address[1:] if address.startswith("@") else address
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        self.watchdog_s: float | None = None
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_s = int(usec) / 1_000_000

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *fields: str) -> bool:
        return self.send_fds(fields, [])

    def send_fds(self, fields: tuple[str, ...], fds: list[int]) -> bool:
        """`fields`, with `fds` attached (SCM_RIGHTS) as sd_pid_notify_with_fds(3) sends them."""
        if self.address is None:
            return False
        message = "\n".join(fields).encode()
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        try:
            if self._sock is None:  # opened once: out of descriptors, a notification still goes
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            # Not socket.send_fds: before Python 3.12 it drops its address argument.
            self._sock.sendmsg([message], rights, 0, self.address)
        except OSError:
            return False
        return True
