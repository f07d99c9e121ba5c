"""Raw-socket pieces of the attacks the listener tests replay (no token, from another user)."""

from __future__ import annotations

import os
import socket

import trio


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def h2_frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def h2_stalled_get(path: bytes) -> bytes:
    """HTTP/2 with prior knowledge: a window of 0 for what the server sends, then GET `path`
    without a token (HPACK: :method GET, :scheme http, :path and :authority as literals).
    The answer's headers can be sent, never its body."""
    return (
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + h2_frame(4, 0, 0, (4).to_bytes(2, "big") + (0).to_bytes(4, "big"))
        + h2_frame(1, 5, 1, b"\x82\x86" + b"\x04" + bytes([len(path)]) + path + b"\x01\x09127.0.0.1")
    )


async def closed_by_the_server(sock: socket.socket) -> None:
    """Until the server closes `sock` (anything it sends before is read and dropped)."""
    while True:
        await trio.lowlevel.wait_readable(sock)
        try:
            if not sock.recv(4096, socket.MSG_DONTWAIT):
                return
        except BlockingIOError:
            continue
        except ConnectionResetError:
            return
