"""The supervisor daemon as the runner meets it: real daemon, real children, real sockets."""

from __future__ import annotations

import json
import os
import platform
import secrets
import signal
import stat
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from jeeves_mcp import __version__
from jeeves_mcp.client import AsyncControlClient, ControlClient, ControlError, DaemonUnavailable
from jeeves_mcp.proc import process_alive
from tests._child import tool_json
from tests._daemon import Daemon, running_daemon, stop_group, watch_events


async def read_through(slot: dict[str, Any], path: str = "hello.py") -> dict[str, Any]:
    """Call `read` on the slot's endpoint the way an agent would (stateless MCP POST)."""
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            slot["mcp"]["url"].removesuffix("/mcp") + "/rpc",
            headers=slot["mcp"]["headers"],
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "read", "arguments": {"path": path}}},
        )
    response.raise_for_status()
    return tool_json(response.json()["result"])


def process_name(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as handle:
        return handle.read().strip()


alive = process_alive  # running, not a zombie waiting for whoever its parent now is


async def test_acquire_read_release_leaves_nothing(daemon: Daemon, run_root: Path) -> None:
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    async with daemon.client() as control:
        slot = await control.acquire("run-1", run_root, labels={"issue": "4"})
        assert slot["state"] == "running"
        assert slot["mcp"]["headers"]["Authorization"].startswith("Bearer ")
        assert (await read_through(slot))["content"].startswith("def hello():")
        again = await control.acquire("run-1", run_root)
        assert (again["port"], again["mcp"]) == (slot["port"], slot["mcp"])
        listed = await control.list()
        assert [s["run_id"] for s in listed["slots"]] == ["run-1"]
        logs = await control.logs("run-1", tail=5)
        assert any("tool.exec_ok" in line for line in logs["lines"])
        final = await control.release("run-1")
        assert final["state"] == "shutdown" and final["mcp"] is None
        assert not alive(slot["pid"])
        assert daemon.our_processes() == []
        assert (await control.release("run-1"))["state"] == "shutdown"  # idempotent
        with pytest.raises(ControlError) as missing:
            await control.get("run-1")
        assert (missing.value.code, missing.value.status) == ("NOT_FOUND", 404)


async def test_reacquire_with_another_root_is_a_conflict(daemon: Daemon, run_root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    async with daemon.client() as control:
        slot = await control.acquire("same", run_root, env={"A": "1"})
        with pytest.raises(ControlError) as root_differs:
            await control.acquire("same", other)
        assert (root_differs.value.code, root_differs.value.status) == ("CONFLICT", 409)
        assert f"root {run_root}" in root_differs.value.message and str(other) in root_differs.value.message
        with pytest.raises(ControlError) as env_differs:
            await control.acquire("same", run_root, env={"A": "2"})
        assert env_differs.value.code == "CONFLICT" and "env (A differ)" in env_differs.value.message
        assert "2" not in env_differs.value.message.split("differ")[0].split("env")[1]  # no values
        again = await control.acquire("same", run_root, ttl_s=60)  # same run: the same slot
        assert again["pid"] == slot["pid"]
        await control.release("same")


async def test_the_other_slots_token_is_refused(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control:
        first = await control.acquire("a", run_root)
        second = await control.acquire("b", run_root)
        crossed = {**first, "mcp": {"url": first["mcp"]["url"], "headers": second["mcp"]["headers"]}}
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await read_through(crossed)
        assert refused.value.response.status_code == 401
        await control.release("a")
        await control.release("b")


async def test_bad_requests_get_structured_errors(daemon: Daemon, run_root: Path) -> None:
    transport = httpx.AsyncHTTPTransport(uds=str(daemon.socket))
    async with httpx.AsyncClient(transport=transport, base_url="http://d") as http:
        bad = await http.post("/v1/slots", json={"run_id": "x", "root": "relative", "colour": 1})
        assert bad.status_code == 400
        fields = {f["field"] for f in bad.json()["error"]["fields"]}
        assert fields == {"root", "colour"}
        not_json = await http.post("/v1/slots", content=b"{nope")
        assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "INVALID_REQUEST"
        bad_id = await http.post("/v1/slots", json={"run_id": "../../etc", "root": str(run_root)})
        assert bad_id.status_code == 400
        unknown = await http.delete("/v1/slots/nope")
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "NOT_FOUND"
        route = await http.get("/v2/everything")
        assert route.status_code == 404
        health = await http.get("/healthz")
        assert health.json()["status"] == "ok"


async def test_slot_cap_gives_429(tmp_path: Path, run_root: Path) -> None:
    async with running_daemon(tmp_path, {"JEEVES_MCP_MAX_SLOTS": "2"}) as daemon, daemon.client() as control:
        await control.acquire("one", run_root)
        await control.acquire("two", run_root)
        with pytest.raises(ControlError) as full:
            await control.acquire("three", run_root)
        assert (full.value.code, full.value.status) == ("QUEUE_OVERLOADED", 429)
        await control.release("one")
        assert (await control.acquire("three", run_root))["state"] == "running"


async def test_disabled_slots_have_no_child(tmp_path: Path, run_root: Path) -> None:
    async with running_daemon(tmp_path, {"JEEVES_MCP_PRUNER_ENABLED": "false"}) as daemon, daemon.client() as control:
        slot = await control.acquire("off", run_root)
        assert (slot["state"], slot["mcp"], slot["reason"]) == ("disabled", None, "config_disabled")
        assert daemon.our_processes() == []
        health = await control.healthz()
        assert health["enabled"] is False and health["fork_server"] is None  # nothing to fork for
        assert daemon.fork_server_pids() == set()
        assert (await control.release("off"))["state"] == "shutdown"


async def test_start_timeout_disables_the_slot_and_leaves_no_child(tmp_path: Path, run_root: Path) -> None:
    # A cold child needs far more than 10 ms to start; a forked one might not.
    env = {"JEEVES_MCP_STARTUP_TIMEOUT_S": "0.01", "JEEVES_MCP_FORK_SERVER": "false"}
    async with running_daemon(tmp_path, env) as daemon, daemon.client() as control:
        slot = await control.acquire("slow", run_root)
        assert slot["state"] == "disabled"
        assert slot["reason"].startswith("start_failed")
        assert daemon.our_processes() == []


async def test_killed_child_restarts_on_the_same_endpoint_then_degrades(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control, watch_events(daemon) as log:
        slot = await control.acquire("crashy", run_root)
        for attempt in (1, 2):
            seen = len(log.events)
            os.kill((await control.get("crashy"))["pid"], signal.SIGKILL)
            await log.wait_for("mcp_pruner.restarted", "crashy", after=seen)
            now = await control.get("crashy")
            assert now["restarts"] == attempt
            assert now["mcp"] == slot["mcp"]  # same port and token: the runner's endpoint stays valid
            assert (await read_through(now))["path"] == "hello.py"
        os.kill((await control.get("crashy"))["pid"], signal.SIGKILL)
        degraded = await log.wait_for("mcp_pruner.degraded", "crashy")
        assert degraded["restarts"] == 2
        final = await control.get("crashy")
        assert (final["state"], final["mcp"]) == ("degraded", None)
        await control.release("crashy")
        assert daemon.our_processes() == []


async def test_a_hung_child_is_detected(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control, watch_events(daemon) as log:
        slot = await control.acquire("hung", run_root)
        os.kill(slot["pid"], signal.SIGSTOP)
        unreachable = await log.wait_for("mcp_pruner.unreachable", "hung")
        assert "unreachable" in unreachable["error"]
        await log.wait_for("mcp_pruner.restarted", "hung")
        assert not alive(slot["pid"])
        assert (await read_through(await control.get("hung")))["path"] == "hello.py"
        await control.release("hung")


async def test_lease_expiry_releases_the_slot(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control, watch_events(daemon) as log:
        slot = await control.acquire("leased", run_root, ttl_s=1.5)
        assert slot["expires_at"] is not None
        renewed = await control.renew("leased", ttl_s=2)
        assert renewed["expires_at"] > slot["expires_at"]
        await log.wait_for("mcp_pruner.lease_expired", "leased")
        stopped = await log.wait_for("mcp_pruner.stopped", "leased")
        assert stopped["state"] == "shutdown"
        assert (await control.list())["slots"] == []
        assert not alive(slot["pid"])


async def test_daemon_crash_then_restart_readopts_children(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control:
        slot = await control.acquire("survivor", run_root)
        with trio.fail_after(10):
            async with aclosing(control.events(since="before-0")) as events:  # the backlog
                async for event in events:
                    last_id = event["id"]
                    if event["event"] == "mcp_pruner.ready":
                        break
    os.kill(daemon.process.pid, signal.SIGKILL)
    await daemon.process.wait()
    assert alive(slot["pid"])  # the child outlives its daemon
    assert (await read_through(slot))["path"] == "hello.py"
    daemon.process = await daemon.restart()  # type: ignore[attr-defined]
    await daemon.wait_ready(2)
    async with daemon.client() as control:
        with trio.fail_after(10):  # what the new daemon did before its API served is replayed
            async with aclosing(control.events(since=last_id)) as events:
                async for event in events:
                    if event["event"] == "mcp_pruner.adopted" and event["run_id"] == "survivor":
                        break
        adopted = await control.get("survivor")
        assert (adopted["state"], adopted["pid"], adopted["mcp"]) == ("running", slot["pid"], slot["mcp"])
        assert (await read_through(adopted))["path"] == "hello.py"
        await control.release("survivor")
    assert not alive(slot["pid"])


async def test_sigterm_releases_every_slot_and_notifies_systemd(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control:
        slots = [await control.acquire(f"r{n}", run_root) for n in range(3)]
    await stop_group(daemon.process)
    assert "READY=1" in daemon.notifications and "STOPPING=1" in daemon.notifications
    assert not any(alive(slot["pid"]) for slot in slots)
    assert daemon.our_processes() == []
    assert not daemon.socket.exists()


async def test_live_restore_leaves_children_for_the_next_daemon(tmp_path: Path, run_root: Path) -> None:
    async with running_daemon(tmp_path, {"JEEVES_MCP_LIVE_RESTORE": "true"}) as daemon:
        async with daemon.client() as control:
            slot = await control.acquire("kept", run_root)
        await stop_group(daemon.process)
        assert alive(slot["pid"])
        daemon.process = await daemon.restart()  # type: ignore[attr-defined]
        await daemon.wait_ready(2)
        async with daemon.client() as control:
            assert (await control.get("kept"))["pid"] == slot["pid"]
            await control.release("kept")
        assert not alive(slot["pid"])


async def test_thirty_concurrent_acquires(daemon: Daemon, run_root: Path) -> None:
    results: dict[str, dict[str, Any]] = {}
    async with daemon.client() as control:
        async with trio.open_nursery() as nursery:
            for n in range(30):
                async def one(run_id: str = f"c{n}") -> None:
                    results[run_id] = await control.acquire(run_id, run_root)
                nursery.start_soon(one)
        assert len(results) == 30
        assert all(slot["state"] == "running" for slot in results.values())
        assert len({slot["port"] for slot in results.values()}) == 30
        async with trio.open_nursery() as nursery:
            for run_id in results:
                nursery.start_soon(control.release, run_id)
    assert daemon.our_processes() == []


async def test_sync_client_and_context_manager(daemon: Daemon, run_root: Path) -> None:
    def work() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        with ControlClient(daemon.socket) as control:
            with control.slot("sync-run", run_root) as slot:
                inside = control.list()["slots"]
            return slot, inside

    slot, inside = await trio.to_thread.run_sync(work)
    assert [s["run_id"] for s in inside] == ["sync-run"]
    assert not alive(slot["pid"])


async def test_no_daemon_is_a_clear_error(tmp_path: Path) -> None:
    async with AsyncControlClient(tmp_path / "nothing.sock") as control:
        with pytest.raises(DaemonUnavailable) as down:
            await control.healthz()
    assert "jeeves-mcp daemon" in down.value.message


def metric(text: str, name: str, **labels: str) -> float | None:
    """One sample's value, read with prometheus-client's own parser (None when absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


async def test_metrics_count_slots_and_latencies(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control:
        await control.acquire("m", run_root)
        text = await control.metrics()
        assert metric(text, "jeeves_mcp_slots", state="running") == 1
        assert metric(text, "jeeves_mcp_slots", state="degraded") == 0
        assert metric(text, "jeeves_mcp_acquire_seconds_count") == 1
        await control.release("m")
        text = await control.metrics()
        assert metric(text, "jeeves_mcp_release_seconds_count") == 1
        # What the daemon is, and what it costs.
        assert metric(text, "jeeves_mcp_build_info", version=__version__, python=platform.python_version()) == 1
        assert (metric(text, "process_resident_memory_bytes") or 0) > 0
        assert (metric(text, "process_start_time_seconds") or 0) > 0
        assert metric(text, "jeeves_mcp_fork_server_up") == 1


async def test_savings_counters_never_go_down_when_a_run_id_comes_back(daemon: Daemon, run_root: Path) -> None:
    """Counted when a child reports, not recomputed from records: a second run with the same
    id (its record replaces the first's) adds to the totals."""
    totals = []
    async with daemon.client() as control:
        for _ in range(2):
            slot = await control.acquire("again", run_root)
            assert (await read_through(slot))["path"] == "hello.py"
            await control.release("again")
            totals.append(metric(await control.metrics(), "jeeves_mcp_tool_calls_total", tool="read"))
    assert totals == [1, 2]


async def test_tcp_control_needs_its_token(tmp_path: Path, run_root: Path) -> None:
    env = {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_PORT": "0", "JEEVES_MCP_TCP_TOKEN": "tcp-secret-for-the-tests"}
    async with running_daemon(tmp_path, env) as daemon:
        ready = next(json.loads(line) for line in daemon.log_path.read_text().splitlines()
                     if '"daemon.ready"' in line)
        url = ready["tcp"]
        assert url.startswith("http://127.0.0.1:")
        async with AsyncControlClient(url=url) as anonymous:
            with pytest.raises(ControlError) as refused:
                await anonymous.list()
            assert (refused.value.code, refused.value.status) == ("UNAUTHORIZED", 401)
        async with AsyncControlClient(url=url, token="wrong") as wrong:
            with pytest.raises(ControlError):
                await wrong.list()
        async with AsyncControlClient(url=url, token="tcp-secret-for-the-tests") as control:
            assert (await control.list())["slots"] == []
        async with daemon.client() as local:  # the Unix socket needs no token
            assert (await local.healthz())["status"] == "ok"


async def test_toml_config_then_env_then_flags(tmp_path: Path) -> None:
    from jeeves_mcp.supervisor.daemon_config import load_daemon_config

    config_file = tmp_path / "jeeves.toml"
    config_file.write_text('max_slots = 7\nhealth_interval_s = 2.5\nmax_restarts = 4\n')
    env = {"JEEVES_MCP_MAX_SLOTS": "9", "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    config = load_daemon_config(config_file, env, state_dir=tmp_path / "state", max_restarts=1)
    assert (config.max_slots, config.health_interval_s, config.max_restarts) == (9, 2.5, 1)
    assert config.socket == tmp_path / "run" / "jeeves-mcp" / "control.sock"
    config_file.write_text("max_slots = 'many'\n")
    from jeeves_mcp.pruner_config import ConfigError

    with pytest.raises(ConfigError, match="max_slots"):
        load_daemon_config(config_file, {})
    config_file.write_text("colour = 'red'\n")
    with pytest.raises(ConfigError, match="colour"):
        load_daemon_config(config_file, {})


async def test_savings_are_collected_per_run_also_after_release(daemon: Daemon, run_root: Path) -> None:
    source = "".join(f"def helper_{n}(x):\n    return x + {n}\n\n\n" for n in range(200))
    (run_root / "big.py").write_text(source + "def load_settings(path):\n    return open(path).read()\n")
    async with daemon.client() as control:
        slot = await control.acquire("saver", run_root)
        async with httpx.AsyncClient(timeout=10) as http:
            for question in ("where are the settings loaded?", None):
                arguments: dict[str, Any] = {"path": "big.py"}
                if question:
                    arguments["context_focus_question"] = question
                await http.post(
                    slot["mcp"]["url"].removesuffix("/mcp") + "/rpc", headers=slot["mcp"]["headers"],
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "read", "arguments": arguments}},
                )
        live = (await control.stats("saver"))["runs"]["saver"]
        read = live["tools"]["read"]
        assert read["calls"] == 2 and read["prunings"] == 1
        assert read["returned_bytes"] < read["raw_bytes"]
        assert 0 < live["summary"]["saved_share"] < 1
        await control.release("saver")
        after = (await control.stats("saver"))["runs"]["saver"]
        assert after["tools"]["read"] == read
        metrics = await control.metrics()
        assert metric(metrics, "jeeves_mcp_tool_prunings_total", tool="read") == 1
        assert metric(metrics, "jeeves_mcp_tool_raw_bytes_total", tool="read") == read["raw_bytes"]


async def test_children_come_from_the_fork_server_and_cold_when_it_is_gone(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control, watch_events(daemon) as log:
        health = await control.healthz()
        zygote = health["fork_server"]["pid"]
        assert health["fork_server"]["up"] and zygote
        forked = await control.acquire("forked", run_root)
        assert (await read_through(forked))["path"] == "hello.py"
        # Told apart in ps/top/pkill although a forked child shares its zygote's command line.
        assert process_name(forked["pid"]) == "jeeves-pruner"
        assert process_name(zygote) == "jeeves-zygote"
        assert metric(await control.metrics(), "jeeves_mcp_spawns_total", mode="fork") == 1
        os.kill(zygote, signal.SIGKILL)
        await log.wait_for("fork_server.exited")
        cold = await control.acquire("cold", run_root)
        assert (await read_through(cold))["path"] == "hello.py"
        assert metric(await control.metrics(), "jeeves_mcp_spawns_total", mode="cold") == 1
        assert alive(forked["pid"])  # a zygote's death does not take its children
        await log.wait_for("fork_server.ready")
        assert (await control.healthz())["fork_server"]["pid"] != zygote
        await control.release("forked")
        await control.release("cold")
        assert not alive(forked["pid"])


def mapped_libraries(pid: int) -> set[str]:
    """File names of the shared objects a process has mapped."""
    return {Path(line.split()[-1]).name for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if ".so" in line.rsplit("/", 1)[-1]}


async def test_the_fork_server_imports_what_a_child_runs_before_it_forks(daemon: Daemon) -> None:
    """A forked child starts in milliseconds only when its zygote imported the child's code
    first; then the compiled modules a child uses (pydantic-core for the tool schemas, RE2 for
    grep) are mapped in the zygote before any child exists."""
    async with daemon.client() as control:
        zygote = (await control.healthz())["fork_server"]["pid"]
    libraries = mapped_libraries(zygote)
    for module in ("_pydantic_core", "_re2"):
        assert any(name.startswith(module + ".") for name in libraries), sorted(libraries)


@pytest.mark.parametrize("fork_server", ["true", "false"])
async def test_a_release_during_the_acquire_answers_409_and_leaves_nothing(
    tmp_path: Path, run_root: Path, fork_server: str
) -> None:
    async with running_daemon(tmp_path, {"JEEVES_MCP_FORK_SERVER": fork_server}) as daemon, \
            daemon.client() as control, watch_events(daemon) as log:
        outcome: dict[str, Any] = {}

        async def acquire() -> None:
            try:
                outcome["slot"] = await control.acquire("racy", run_root)
            except ControlError as exc:
                outcome["error"] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(acquire)
            await log.wait_for("mcp_pruner.starting", "racy")
            await control.release("racy")
        if "error" in outcome:  # released before the child was up
            assert (outcome["error"].code, outcome["error"].status) == ("RELEASED", 409)
        else:  # the child won the race: a normal slot, released right after
            assert outcome["slot"]["state"] == "running"
        assert daemon.our_processes() == []
        # The fork server is still in step: the next acquire gets a working child.
        again = await control.acquire("after", run_root)
        assert (await read_through(again))["path"] == "hello.py"
        await control.release("after")


async def test_a_runs_env_cannot_reconfigure_its_child(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control:
        for name in ("JEEVES_MCP_ALLOW_OUTSIDE_ROOT", "MCP_PRUNER_HOST", "JEEVES_PRUNER_ENDPOINT"):
            with pytest.raises(ControlError) as refused:
                await control.acquire("sneaky", run_root, env={name: "1"})
            assert (refused.value.code, refused.value.status) == ("INVALID_REQUEST", 400)
            assert "reserved" in str(refused.value.detail)
        assert (await control.list())["slots"] == []


async def test_tcp_control_must_be_loopback_with_a_token(tmp_path: Path) -> None:
    from jeeves_mcp.pruner_config import ConfigError
    from jeeves_mcp.supervisor.daemon_config import load_daemon_config

    base = {"state_dir": tmp_path / "s"}
    with pytest.raises(ConfigError, match="tcp_token"):
        load_daemon_config(None, {"JEEVES_MCP_TCP_HOST": "127.0.0.1"}, **base)
    token = secrets.token_urlsafe(32)
    with pytest.raises(ConfigError, match="loopback"):
        load_daemon_config(None, {"JEEVES_MCP_TCP_HOST": "0.0.0.0", "JEEVES_MCP_TCP_TOKEN": token}, **base)
    assert load_daemon_config(None, {"JEEVES_MCP_TCP_HOST": "::1", "JEEVES_MCP_TCP_TOKEN": token}, **base).tcp_host == "::1"
    # Every run's commands can reach the port: a token they could guess is refused (attack T4).
    with pytest.raises(ConfigError, match="tcp_token has 1 characters, fewer than 16"):
        load_daemon_config(None, {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_TOKEN": "x"}, **base)


@pytest.mark.parametrize(("token", "found"), [
    ("a" * 16, "16 characters, 1 distinct, about 0 bits"),
    ("1234567890123456", "16 characters, 10 distinct, about 53 bits"),
    ("ab" * 40, "80 characters, 2 distinct, about 80 bits"),  # enough "bits", too few distinct
])
def test_a_guessable_tcp_token_is_refused_with_how_to_make_one(tmp_path: Path, token: str, found: str) -> None:
    """NF3: the length alone let `"a" * 16` through."""
    from jeeves_mcp.pruner_config import ConfigError
    from jeeves_mcp.supervisor.daemon_config import load_daemon_config

    with pytest.raises(ConfigError) as refused:
        load_daemon_config(None, {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_TOKEN": token},
                           state_dir=tmp_path / "s")
    message = str(refused.value)
    assert f"tcp_token looks guessable: {found} by length x log2(distinct); it needs 8 distinct and 64 bits" in message
    assert "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'" in message
    assert token not in message  # a refused token may still be someone's secret


def test_a_tcp_token_with_spaces_around_it_is_refused(tmp_path: Path) -> None:
    """A client's Authorization header is read without its spaces: a token with some around it
    could never match, and the daemon started with a TCP API nobody could use."""
    from jeeves_mcp.pruner_config import ConfigError
    from jeeves_mcp.supervisor.daemon_config import load_daemon_config

    token = secrets.token_urlsafe(32)
    for spaced in (f" {token}", f"{token}\n", f"\t{token} "):
        with pytest.raises(ConfigError, match="tcp_token starts or ends with whitespace"):
            load_daemon_config(None, {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_TOKEN": spaced},
                               state_dir=tmp_path / "s")


def test_generated_tcp_tokens_are_accepted(tmp_path: Path) -> None:
    """What the refusal suggests passes, and so does a random 32-character hex token (one in
    tens of millions has fewer than 8 distinct characters)."""
    from jeeves_mcp.supervisor.daemon_config import load_daemon_config

    for token in [secrets.token_urlsafe(32) for _ in range(200)] + [secrets.token_hex(16) for _ in range(20)]:
        config = load_daemon_config(None, {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_TOKEN": token},
                                    state_dir=tmp_path / "s")
        assert config.tcp_token == token
