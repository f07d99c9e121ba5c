"""Who listens where a control client is about to connect: the owner of the daemon's Unix
socket, or of the LISTEN socket on its loopback TCP port. `jeeves_mcp.client` refuses either
when it is neither the caller's nor root's nor the daemon user's named by the caller."""

from __future__ import annotations

import ipaddress
import os
import struct
import urllib.parse
from pathlib import Path

__all__ = ["LISTEN", "proc_net_address", "untrusted_listener", "untrusted_socket"]


def untrusted_socket(path: Path, daemon_uid: int | None = None) -> str | None:
    """Why a client (the CLI, the runner's) will not talk to `path`, or None: it (or the
    symlink to it) is neither the caller's nor root's (systemd's socket is root's) nor
    `daemon_uid`'s (a daemon run as a service user, named by the caller)."""
    euid = os.geteuid()
    for follow in (False, True):
        try:
            owner = path.stat(follow_symlinks=follow).st_uid
        except OSError:
            return None  # absent or out of reach: the client says so
        if owner not in (euid, 0, daemon_uid):
            return (f"control socket {path} belongs to uid {owner}, not to you (uid {euid}) nor root: "
                    f"if that is the daemon's user, run the client as that user; otherwise another user may "
                    "be answering in the daemon's place (remove it and restart the daemon)")
    return None


LISTEN = "0A"  # TCP_LISTEN, /proc/net/tcp's st column
_LOOPBACK_NAMES = {"localhost": ("127.0.0.1", "::1")}  # either may be the one httpx connects to


def proc_net_address(field: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """`0100007F:1F90` (32-bit words in host byte order) as (127.0.0.1, 8080)."""
    address, port = field.split(":")
    packed = b"".join(struct.pack("=I", int(address[i:i + 8], 16)) for i in range(0, len(address), 8))
    return ipaddress.ip_address(packed), int(port, 16)


def _listener_owners(addresses: set[ipaddress.IPv4Address | ipaddress.IPv6Address], port: int) -> set[int]:
    """The uids of the LISTEN sockets on `port` that a connect to one of `addresses` may
    reach: bound to it, to its v4-mapped form, or to a wildcard (0.0.0.0, ::)."""
    reachable: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = {
        ipaddress.ip_address("0.0.0.0"), ipaddress.ip_address("::")}
    for address in addresses:
        reachable.add(address)
        if isinstance(address, ipaddress.IPv4Address):
            reachable.add(ipaddress.ip_address(f"::ffff:{address}"))
    owners = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows, None)  # the header
                for row in rows:
                    fields = row.split()
                    if len(fields) < 8 or fields[3] != LISTEN:
                        continue
                    local, local_port = proc_net_address(fields[1])
                    if local_port == port and local in reachable:
                        owners.add(int(fields[7]))
        except OSError:
            continue  # no IPv6 here (or no /proc): nothing listens there that we can see
    return owners


def untrusted_listener(url: str, daemon_uid: int | None = None) -> str | None:
    """Why a client will not connect to `url`'s loopback TCP port, or None: a LISTEN socket
    that may take the connect (/proc/net/tcp, tcp6: its uid column) is neither the caller's
    nor root's nor `daemon_uid`'s. Any local user can bind the daemon's fixed port while the
    daemon is down (a restart), and would receive the bearer token (attack-seventh C1).

    A host that is not loopback cannot be checked this way (its listener is on another
    machine, or on an address others may route to): it passes unchecked."""
    parsed = urllib.parse.urlsplit(url)
    host = (parsed.hostname or "").lower()
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        addresses = {ipaddress.ip_address(name) for name in _LOOPBACK_NAMES.get(host, (host,))}
    except ValueError:
        return None  # a bad port (httpx refuses the URL), or a name other than localhost: not checked
    if not all(address.is_loopback for address in addresses):
        return None
    euid = os.geteuid()
    strangers = sorted(owner for owner in _listener_owners(addresses, port) if owner not in (euid, 0, daemon_uid))
    if not strangers:
        return None  # ours, or nothing listens yet (the connect says so)
    return (f"{host}:{port} is listened on by uid {strangers[0]}, not by you (uid {euid}) nor root: if that is "
            "the daemon's user, pass its uid as daemon_uid or run the client as that user; otherwise another "
            "user took the daemon's port while it was down: stop that process, then restart the daemon")
