"""Client of the supervisor's control API, for the Jeeves runner and the CLI.

    async with AsyncControlClient() as control:          # trio (or any anyio backend)
        async with control.slot("run-42", root="/work/run-42") as slot:
            url, headers = slot["mcp"]["url"], slot["mcp"]["headers"]

    with ControlClient() as control:                     # the same, blocking
        with control.slot("run-42", root="/work/run-42") as slot: ...

Both speak HTTP over the daemon's Unix socket (or loopback TCP with a token), and
refuse a socket that is neither the caller's nor root's (UNTRUSTED_SOCKET: another
user may be answering in the daemon's place), and likewise a loopback TCP port
another user listens on (UNTRUSTED_LISTENER), unless `daemon_uid` names its owner,
the service user the daemon runs as. Both are checked before every connect.
Errors are `ControlError` with the API's stable `code`; a daemon that is not
running is `DaemonUnavailable`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx

from jeeves_mcp import paths
from jeeves_mcp.listener_owners import untrusted_listener, untrusted_socket

__all__ = [
    "AsyncControlClient",
    "ControlClient",
    "ControlError",
    "DaemonUnavailable",
    "check_listener",
    "check_socket",
    "default_socket",
    "untrusted_listener",
    "untrusted_socket",
]


class ControlError(Exception):
    """The daemon refused a request; `code` is its stable error code."""

    def __init__(self, code: str, message: str, status: int | None = None, detail: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.detail = detail


class DaemonUnavailable(ControlError):
    """Nothing answers on the control socket."""


SYSTEM_SOCKET = Path("/run/jeeves-mcp/control.sock")  # where the systemd units put it
MAX_TTL_S = 7 * 24 * 3600  # the longest lease a slot may have (POST /v1/slots, renew)
RUN_ID = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}\Z")  # \Z: "$" would let a final "\n" in
RUN_ID_RULE = "run ids are 1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit"


def default_socket() -> Path:
    """The daemon's default socket for this user, else the system service's if only that exists.

    A root shell has no XDG_RUNTIME_DIR, so its default names the state dir,
    while the system units listen under /run.
    """
    configured = paths.default_socket(os.environ, paths.default_state_dir(os.environ))
    if not configured.exists() and SYSTEM_SOCKET.exists():
        return SYSTEM_SOCKET
    return configured


def _acquire_body(
    run_id: str, root: str | os.PathLike[str], env: dict[str, str] | None, ttl_s: float | None,
    labels: dict[str, str] | None, pruner_endpoint: str | None, enabled: bool,
) -> dict[str, Any]:
    # Absolute, links unresolved: the daemon refuses a root through a link the run could
    # repoint, which it cannot see once the client has resolved it (attack re-check N1).
    body: dict[str, Any] = {"run_id": run_id, "root": os.path.abspath(root), "enabled": enabled}
    for key, value in (("env", env), ("ttl_s", ttl_s), ("labels", labels), ("pruner_endpoint", pruner_endpoint)):
        if value is not None:
            body[key] = value
    return body


def _slot(run_id: str, suffix: str = "") -> str:
    """The slot's URL path, the run id one escaped segment: `a/../b` or `..` cannot name
    another route or another run (dots too, which URL normalisation would remove). A run id no
    slot can have is refused here, in the daemon's words: `bad/id` reached it as a path of two
    segments and came back 'no route GET /v1/slots/bad/id' (the operator review of 2026-11-29)."""
    if not RUN_ID.match(run_id):
        raise ControlError("INVALID_REQUEST", f"{run_id!r} is no run id: {RUN_ID_RULE}", 400)
    return "/v1/slots/" + urllib.parse.quote(run_id, safe="").replace(".", "%2E") + suffix


def _bad_response(where: str, response: httpx.Response) -> ControlError:
    kind = response.headers.get("content-type") or "no content type"
    return ControlError(
        "BAD_RESPONSE", f"{where} answered HTTP {response.status_code} ({kind}: {response.text[:80]!r}), "
        "not the daemon's JSON: is another program listening there?", response.status_code,
    )


def _result(response: httpx.Response, where: str, text: bool = False) -> Any:
    """The answer's JSON (its text for `text`); the API's error as ControlError."""
    if response.status_code < 400:
        if text:
            return response.text
        if response.headers.get("content-type", "").startswith("application/json"):
            try:
                return response.json()
            except ValueError:
                pass
        raise _bad_response(where, response)
    try:
        error = response.json()["error"]
        raise ControlError(error["code"], error["message"], response.status_code, error)
    except (ValueError, KeyError, TypeError):
        raise ControlError("HTTP_ERROR", f"HTTP {response.status_code}: {response.text[:200]}", response.status_code) from None


# A connection per request: the daemon closes an idle one (after tcp_header_timeout_s on
# TCP), and a request sent on it as it closes failed as "no daemon answers". Requests are few.
NO_KEEPALIVE = httpx.Limits(max_keepalive_connections=0)
# A failed connect sent nothing, so it is safe to try again (a daemon restarting, a socket
# not listening yet), after each of these pauses. A request that reached the daemon is never
# sent twice: an acquire could start two children. Before each try (the first included) the
# listener's owner is checked again: a path or port free when the client was made (a daemon
# restarting) may have been taken by anyone since.
CONNECT_BACKOFF_S = (0.0, 0.5, 1.0)
CONNECT_RETRIES = len(CONNECT_BACKOFF_S)
# What a failed connect raises; a connection cut before the answer is not retried.
_UNREACHED = (httpx.ConnectError, httpx.ConnectTimeout)
# A local connect is instant unless the listener's queue is full (a flood, a stuck daemon):
# then it hangs, and each try gives up after this rather than the request's whole timeout.
CONNECT_TIMEOUT_S = 5.0
TEXT_PATHS = frozenset({"/metrics"})  # answered in text; every other route in JSON


def _timeouts(timeout: float | None) -> httpx.Timeout:
    return httpx.Timeout(timeout, connect=CONNECT_TIMEOUT_S if timeout is None else min(timeout, CONNECT_TIMEOUT_S))


def _permission_denied(exc: BaseException) -> bool:
    """Whether a failed connect was EACCES (httpx keeps the OSError down its chain)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, PermissionError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _refused(where: str) -> ControlError:
    # Not DaemonUnavailable: a daemon may well be there, and waiting for one will not help.
    return ControlError(
        "PERMISSION_DENIED", f"permission denied on {where}: you may not use this daemon's control "
        "socket; run as its user or root, or join its group (the systemd socket's is jeeves-mcp: "
        "sudo usermod -aG jeeves-mcp $USER, then log in again)",
    )


def _unavailable(where: str, exc: Exception) -> DaemonUnavailable:
    if isinstance(exc, httpx.ConnectTimeout):  # a listener is there, its queue full
        return DaemonUnavailable(
            "DAEMON_UNAVAILABLE",
            f"{where} accepts no connection within {CONNECT_TIMEOUT_S:g} s (ConnectTimeout): "
            "its listen queue is full, from a flood of connections or a daemon that stopped "
            "accepting; `jeeves-mcp doctor` and the daemon's log say which",
        )
    # On the socket asked for: a plain `jeeves-mcp daemon` may listen elsewhere.
    start = f"jeeves-mcp daemon --socket {shlex.quote(where)}" if where.startswith("/") else "jeeves-mcp daemon"
    return DaemonUnavailable(
        "DAEMON_UNAVAILABLE",
        f"no daemon answers on {where} ({type(exc).__name__}); start it with `{start}` "
        "or `systemctl start jeeves-mcp`",
    )


class _Api:
    """The API's calls; `_call` makes them blocking or awaitable."""

    where: str
    _uds: str | None
    _daemon_uid: int | None

    _base: str

    def _before_connect(self) -> None:
        """Before each connect: whoever listens there receives the request (a run's env, the
        TCP token) and answers as the daemon. A check, then the connect: a listener swapped
        in between is not seen (the window is that short)."""
        if self._uds is not None:
            check_socket(self._uds, self._daemon_uid)
        else:
            check_listener(self._base, self._daemon_uid)

    def _call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError

    def acquire(
        self, run_id: str, root: str | os.PathLike[str], *, env: dict[str, str] | None = None,
        ttl_s: float | None = None, labels: dict[str, str] | None = None,
        pruner_endpoint: str | None = None, enabled: bool = True,
    ) -> Any:
        """Start (or find) the run's slot; answers once its child is healthy or the slot is disabled."""
        return self._call("POST", "/v1/slots", _acquire_body(run_id, root, env, ttl_s, labels, pruner_endpoint, enabled))

    def release(self, run_id: str) -> Any:
        return self._call("DELETE", _slot(run_id))

    def renew(self, run_id: str, ttl_s: float | None = None) -> Any:
        return self._call("POST", _slot(run_id, "/renew"), {} if ttl_s is None else {"ttl_s": ttl_s})

    def get(self, run_id: str) -> Any:
        return self._call("GET", _slot(run_id))

    def list(self) -> Any:
        return self._call("GET", "/v1/slots")

    def logs(self, run_id: str, tail: int = 200) -> Any:
        return self._call("GET", _slot(run_id, "/logs"), params={"tail": tail})

    def stats(self, run_id: str | None = None) -> Any:
        """What pruning saved, per run and in total."""
        return self._call("GET", "/v1/stats", params={"run_id": run_id} if run_id else None)

    def healthz(self) -> Any:
        return self._call("GET", "/healthz")

    def metrics(self) -> Any:
        return self._call("GET", "/metrics")


def check_socket(path: str | os.PathLike[str], daemon_uid: int | None = None) -> None:
    """Raise UNTRUSTED_SOCKET if another user made the control socket: whoever binds it
    receives every request (a run's env, its secrets) and answers as the daemon."""
    problem = untrusted_socket(Path(path), daemon_uid)
    if problem is not None:
        raise ControlError("UNTRUSTED_SOCKET", problem)


def check_listener(url: str, daemon_uid: int | None = None) -> None:
    """Raise UNTRUSTED_LISTENER if another user listens on `url`'s loopback port: it would
    receive the token and every request, and answer as the daemon."""
    problem = untrusted_listener(url, daemon_uid)
    if problem is not None:
        raise ControlError("UNTRUSTED_LISTENER", problem)


def _target(
    socket: str | os.PathLike[str] | None, url: str | None, token: str | None, daemon_uid: int | None
) -> tuple[str, str | None, dict[str, str]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if url is not None:
        return url.rstrip("/"), None, headers
    uds = str(socket or default_socket())
    check_socket(uds, daemon_uid)
    return "http://jeeves-mcp", uds, headers


class AsyncControlClient(_Api):
    def __init__(
        self, socket: str | os.PathLike[str] | None = None, *, url: str | None = None,
        token: str | None = None, timeout: float = 120.0, daemon_uid: int | None = None,
    ) -> None:
        base, uds, headers = _target(socket, url, token, daemon_uid)
        self.where, self._uds, self._base, self._daemon_uid = uds or base, uds, base, daemon_uid
        # Our transport, so the client's limits do not apply, nor any proxy from the
        # environment (the daemon is local; a proxy would see the token).
        transport = httpx.AsyncHTTPTransport(uds=uds, limits=NO_KEEPALIVE)
        self._http = httpx.AsyncClient(base_url=base, transport=transport, headers=headers, timeout=_timeouts(timeout))

    async def _call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        import anyio

        for pause in (None, *CONNECT_BACKOFF_S):
            if pause is not None:
                await anyio.sleep(pause)
            self._before_connect()
            try:
                response = await self._http.request(method, path, json=body, params=params)
            except _UNREACHED as exc:
                if _permission_denied(exc):
                    raise _refused(self.where) from exc
                unreached = exc
                continue
            except httpx.RemoteProtocolError as exc:
                raise _unavailable(self.where, exc) from exc
            return _result(response, self.where, text=path in TEXT_PATHS)
        raise _unavailable(self.where, unreached) from unreached

    async def events(self, since: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """Slot transitions as they happen (server-sent events), until the caller stops.

        `since`: the `id` of the last event seen; what came after it (kept in the
        daemon's backlog) arrives first. An id of an earlier daemon replays the
        current daemon's whole backlog, re-adoptions included.
        """
        headers = {"Last-Event-ID": since} if since else None
        self._before_connect()
        try:
            async with self._http.stream("GET", "/v1/events", timeout=_timeouts(None), headers=headers) as response:
                if response.status_code >= 400 or not response.headers.get("content-type", "").startswith(
                        "text/event-stream"):  # not the daemon's stream: say so, not end quietly
                    await response.aread()
                    _result(response, self.where)
                    raise _bad_response(self.where, response)
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        yield json.loads(line[6:])
        except _UNREACHED as exc:
            raise (_refused(self.where) if _permission_denied(exc) else _unavailable(self.where, exc)) from exc

    @asynccontextmanager
    async def slot(self, run_id: str, root: str | os.PathLike[str], **options: Any) -> AsyncIterator[dict[str, Any]]:
        """Acquire on enter, release on exit (also when the body fails or is cancelled)."""
        import anyio

        slot = await self.acquire(run_id, root, **options)
        try:
            yield slot
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(60):
                await self.release(run_id)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncControlClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class ControlClient(_Api):
    """The blocking facade, for runners that are not async."""

    def __init__(
        self, socket: str | os.PathLike[str] | None = None, *, url: str | None = None,
        token: str | None = None, timeout: float = 120.0, daemon_uid: int | None = None,
    ) -> None:
        base, uds, headers = _target(socket, url, token, daemon_uid)
        self.where, self._uds, self._base, self._daemon_uid = uds or base, uds, base, daemon_uid
        transport = httpx.HTTPTransport(uds=uds, limits=NO_KEEPALIVE)
        self._http = httpx.Client(base_url=base, transport=transport, headers=headers, timeout=_timeouts(timeout))

    def _call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        for pause in (None, *CONNECT_BACKOFF_S):
            if pause is not None:
                time.sleep(pause)
            self._before_connect()
            try:
                response = self._http.request(method, path, json=body, params=params)
            except _UNREACHED as exc:
                if _permission_denied(exc):
                    raise _refused(self.where) from exc
                unreached = exc
                continue
            except httpx.RemoteProtocolError as exc:
                raise _unavailable(self.where, exc) from exc
            return _result(response, self.where, text=path in TEXT_PATHS)
        raise _unavailable(self.where, unreached) from unreached

    @contextmanager
    def slot(self, run_id: str, root: str | os.PathLike[str], **options: Any) -> Iterator[dict[str, Any]]:
        slot = self.acquire(run_id, root, **options)
        try:
            yield slot
        finally:
            self.release(run_id)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
