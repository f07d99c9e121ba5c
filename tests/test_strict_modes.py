"""StrictModes for the daemon's own files (attack review F5, F6): a state dir, socket dir or
config another local user owns or may write is refused, so that user never reads the tokens,
points the daemon's writes at files of its choosing, or answers in the daemon's place."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

from jeeves_mcp.client import ControlError
from jeeves_mcp.pruner_config import ConfigError, load_config
from jeeves_mcp.supervisor.daemon_config import load_daemon_config
from tests._child import stop_process_group
from tests._daemon import TEST_ENV, running_daemon, watch_events
from tests.test_isolation import NOBODY, bash, directory_owned_by

OTHER_UID = 2001  # another local user, e.g. a run's command user


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")


def refused(code: int | None, output: str) -> str:
    """The daemon's last line, once it has exited with status 1: refused to start."""
    assert code == 1, output
    return output.splitlines()[-1]


async def daemon_outcome(tmp: Path, *args: str) -> tuple[int | None, str]:
    """Start `jeeves-mcp daemon ARGS`: (exit code, output) once it exits, or (None, output)
    if it got as far as READY=1 (it is then stopped)."""
    notify = tmp / "outcome-notify.sock"
    receiver = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    await receiver.bind(str(notify))
    output = tmp / "outcome.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JEEVES_")}
    with output.open("wb") as out:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "jeeves_mcp", "daemon", *args], stdin=subprocess.DEVNULL,
            stdout=out, stderr=out, env={**env, **TEST_ENV, "NOTIFY_SOCKET": str(notify)},
            start_new_session=True, cwd=tmp,
        )
    ready = False

    async def wait_ready(done: trio.CancelScope) -> None:
        nonlocal ready
        while b"READY=1" not in (await receiver.recv(4096)).split(b"\n"):
            pass
        ready = True
        done.cancel()

    async def wait_exit(done: trio.CancelScope) -> None:
        await process.wait()
        done.cancel()

    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(wait_ready, nursery.cancel_scope)
                nursery.start_soon(wait_exit, nursery.cancel_scope)
    finally:
        with trio.CancelScope(shield=True):
            await stop_process_group(process)
        receiver.close()
    return (None if ready else process.returncode), output.read_text(errors="replace")


def listing(path: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry below `path` with its owner, mode and size: what a refusal must leave as is."""
    found = {}
    for entry in sorted(path.rglob("*")):
        info = entry.lstat()
        found[str(entry.relative_to(path))] = (info.st_uid, info.st_mode, info.st_size)
    return found


def planted_state_dir(state: Path) -> None:
    """What an attacker leaves in a shared place before the daemon starts (the review's F5)."""
    (state / "logs").mkdir(parents=True)
    (state / "slots.sqlite3").write_bytes(b"")
    (state / "logs" / "victim.log").symlink_to("/etc/passwd")
    for entry in (state, state / "logs", state / "slots.sqlite3"):
        entry.chmod(0o777 if entry.is_dir() else 0o666)


# -- the state dir ------------------------------------------------------------------------------


async def test_a_state_dir_owned_by_another_user_is_refused_untouched(tmp_path: Path) -> None:
    needs_root()
    state = tmp_path / "shared"
    planted_state_dir(state)
    for entry in (state, state / "logs", state / "slots.sqlite3"):
        os.chown(entry, OTHER_UID, OTHER_UID)
    state.chmod(0o755)  # even closed to others: its owner still reads and plants
    before = listing(state)
    code, output = await daemon_outcome(tmp_path, "--state-dir", str(state), "--socket", str(state / "control.sock"))
    assert f"state dir {state} is owned by uid {OTHER_UID}, not 0: remove it or choose another --state-dir" \
        in refused(code, output), output
    assert listing(state) == before  # no lock, no socket, no database: nothing touched


async def test_a_state_dir_writable_by_others_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "open"
    planted_state_dir(state)
    before = listing(state)
    code, output = await daemon_outcome(tmp_path, "--state-dir", str(state), "--socket", str(tmp_path / "d.sock"))
    assert f"state dir {state} is mode 0777, writable by group and others" in refused(code, output), output
    assert listing(state) == before and not (tmp_path / "d.sock").exists()


async def test_an_absent_state_dir_is_created_0700(tmp_path: Path) -> None:
    previous = os.umask(0)  # the daemon's own mode, whatever the umask
    try:
        async with running_daemon(tmp_path) as daemon:
            assert daemon.state_dir.stat().st_mode & 0o777 == 0o700
    finally:
        os.umask(previous)


async def test_a_state_dir_below_another_users_dir_is_refused(tmp_path: Path) -> None:
    """Attack re-check N3: only the last dir was checked. The owner of a dir above it swaps
    the state dir (rename) for one of its own while the daemon runs, and the runners' acquires
    and the daemon's log appends go to that user's."""
    needs_root()
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    state = theirs / "jm" / "state"
    code, output = await daemon_outcome(tmp_path, "--state-dir", str(state), "--socket", str(tmp_path / "d.sock"))
    assert f"state dir {state} is below {theirs}, owned by uid {OTHER_UID}" in refused(code, output), output
    assert not (tmp_path / "d.sock").exists()
    assert list(theirs.iterdir()) == []  # checked before it was made: no root-owned dir left in theirs


async def test_a_socket_dir_below_another_users_dir_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    """N3 for the socket's dir; both dirs' ancestors are checked before either dir is made."""
    needs_root()
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    state, socket_path = tmp_path / "state", theirs / "run" / "d.sock"
    code, output = await daemon_outcome(tmp_path, "--state-dir", str(state), "--socket", str(socket_path))
    assert f"socket dir {socket_path.parent} is below {theirs}, owned by uid {OTHER_UID}" \
        in refused(code, output), output
    assert list(theirs.iterdir()) == [] and not state.exists()


async def test_a_state_dir_through_another_users_symlink_is_refused(tmp_path: Path) -> None:
    """A link on the way that another user owns: it could repoint the path (N3)."""
    needs_root()
    (tmp_path / "real").mkdir(mode=0o755)
    link = tmp_path / "via"
    link.symlink_to(tmp_path / "real")
    os.lchown(link, OTHER_UID, OTHER_UID)
    state = link / "state"
    code, output = await daemon_outcome(tmp_path, "--state-dir", str(state), "--socket", str(tmp_path / "d.sock"))
    assert f"state dir {state} passes through {link}, a symlink of uid {OTHER_UID}" in refused(code, output), output


@pytest.mark.parametrize("what", ["state dir", "socket dir"])
@pytest.mark.parametrize(("mode", "refused"), [
    pytest.param(0o777, True, id="0777"), pytest.param(0o775, True, id="0775"),
    pytest.param(0o1777, False, id="1777"), pytest.param(0o755, False, id="0755"),
])
async def test_a_dir_above_the_state_or_socket_dir_others_may_write_is_refused_unless_sticky(
    tmp_path: Path, what: str, mode: int, refused: bool
) -> None:
    """As /tmp: others may write a sticky dir, but not rename or remove what is not theirs."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    state, socket_path = tmp_path / "state", tmp_path / "d.sock"
    if what == "state dir":
        state = shared / "state"
    else:
        socket_path = shared / "run" / "d.sock"
    code, output = await daemon_outcome(tmp_path, "--state-dir", str(state), "--socket", str(socket_path))
    if not refused:
        assert code is None, output  # it started
        return
    assert code == 1, output
    below = state if what == "state dir" else socket_path.parent
    assert f"{what} {below} is below {shared}, mode {mode:04o}, writable by group" in output.splitlines()[-1], output
    assert list(shared.iterdir()) == [] and not state.exists()  # nothing made: checked first


@pytest.mark.parametrize("entry", ["slots.sqlite3", "slots.sqlite3-wal", "daemon.lock", "logs"])
async def test_a_planted_entry_in_a_private_state_dir_is_refused(tmp_path: Path, entry: str) -> None:
    """A dir that was open once (or chmod-ed 0700 after the fact) may still hold what
    another user left there: a file of theirs, or a symlink to a file of the daemon's."""
    needs_root()
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    target = tmp_path / "root-only"
    target.write_text("root only\n")
    target.chmod(0o600)
    planted = state / entry
    if entry == "logs":
        planted.mkdir()
        os.chown(planted, OTHER_UID, OTHER_UID)
    elif entry == "slots.sqlite3":
        planted.symlink_to(target)
    else:
        planted.write_bytes(b"")
        os.chown(planted, OTHER_UID, OTHER_UID)
    code, output = await daemon_outcome(tmp_path, "--state-dir", str(state), "--socket", str(tmp_path / "d.sock"))
    last = refused(code, output)
    assert f"state dir {state} holds {entry}" in last and "remove it" in last, output
    assert target.read_text() == "root only\n" and not (tmp_path / "d.sock").exists()


async def test_a_symlinked_child_log_is_not_followed(tmp_path: Path, run_root: Path) -> None:
    """The child appends its log as the daemon's user: a symlink there would make it append
    to any file the link names."""
    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    target = tmp_path / "victim-target"
    target.write_text("untouched\n")
    target.chmod(0o600)
    (state / "logs" / "victim.log").symlink_to(target)
    async with running_daemon(tmp_path) as daemon, daemon.client() as control:
        slot = await control.acquire("victim", run_root)
        try:
            assert slot["state"] == "disabled", slot
            assert "holds victim.log as a symlink: remove it" in slot["reason"], slot
            other = await control.acquire("bystander", run_root)  # the other slots are not affected
            assert other["state"] == "running", other
        finally:
            await control.release("victim")
            await control.release("bystander")
    assert target.read_text() == "untouched\n"


# -- the control socket -------------------------------------------------------------------------


async def test_a_socket_dir_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    needs_root()
    sockets = tmp_path / "sockets"
    sockets.mkdir(mode=0o755)
    os.chown(sockets, OTHER_UID, OTHER_UID)
    code, output = await daemon_outcome(
        tmp_path, "--state-dir", str(tmp_path / "state"), "--socket", str(sockets / "control.sock"))
    assert f"socket dir {sockets} is owned by uid {OTHER_UID}, not 0: remove it or choose another --socket" \
        in refused(code, output), output
    assert list(sockets.iterdir()) == []


async def test_a_socket_dir_writable_by_others_is_refused(tmp_path: Path) -> None:
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    sockets.chmod(0o1777)  # sticky like /tmp: others still squat the name before the daemon binds it
    code, output = await daemon_outcome(
        tmp_path, "--state-dir", str(tmp_path / "state"), "--socket", str(sockets / "control.sock"))
    assert f"socket dir {sockets} is mode 1777, writable by group and others" in refused(code, output), output


async def test_another_users_listening_socket_is_named_as_such(tmp_path: Path) -> None:
    """A foreign server on the socket path is not "another daemon": the operator is told whose it is."""
    needs_root()
    path = tmp_path / "control.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        listener.listen(8)
        os.chown(path, OTHER_UID, OTHER_UID)
        code, output = await daemon_outcome(tmp_path, "--state-dir", str(tmp_path / "state"), "--socket", str(path))
    finally:
        listener.close()
    assert f"control socket {path} is owned by uid {OTHER_UID}, not 0, and answers" in refused(code, output), output


async def test_another_users_stale_socket_is_replaced_with_a_warning(tmp_path: Path) -> None:
    needs_root()
    path = tmp_path / "control.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # nothing listens: left behind
    os.chown(path, OTHER_UID, OTHER_UID)
    async with running_daemon(tmp_path) as daemon:
        assert path.lstat().st_uid == 0  # the daemon's own socket now
        warned = [json.loads(line) for line in daemon.log_path.read_text().splitlines()
                  if '"daemon.foreign_socket_removed"' in line]
        assert [(w["path"], w["owner_uid"], w["level"]) for w in warned] == [(str(path), OTHER_UID, "warning")]


async def test_the_cli_does_not_talk_to_another_users_socket(tmp_path: Path) -> None:
    """The review's attacker bound its own listener on the socket path: the CLI must not send
    it the request (its env, the run's secrets) nor print its answer as the daemon's."""
    needs_root()
    path = tmp_path / "control.sock"
    listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await listener.bind(str(path))
    listener.listen(8)
    os.chown(path, OTHER_UID, OTHER_UID)
    received: list[bytes] = []

    async def fake_daemon() -> None:
        while True:
            conn, _ = await listener.accept()
            with conn:
                received.append(await conn.recv(65536))

    env = {k: v for k, v in os.environ.items() if not k.startswith("JEEVES_")}
    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(fake_daemon)
                done = await trio.run_process(
                    [sys.executable, "-m", "jeeves_mcp", "--socket", str(path), "acquire", "newrun",
                     "--root", str(tmp_path), "--env", "OPENAI_API_KEY=sk-secret", "--json"],
                    capture_stdout=True, capture_stderr=True, check=False, env=env, stdin=subprocess.DEVNULL,
                )
                nursery.cancel_scope.cancel()
    finally:
        listener.close()
    err = done.stderr.decode()
    assert received == [], received
    assert done.returncode == 1, err
    assert f"control socket {path} belongs to uid {OTHER_UID}, not to you (uid 0) nor root" in err, err


@pytest.mark.parametrize("blocking", [True, False])
async def test_the_runners_client_does_not_talk_to_another_users_socket(
    tmp_path: Path, blocking: bool
) -> None:
    """The library client the runner uses refuses the socket as the CLI does: nothing sent."""
    from jeeves_mcp.client import AsyncControlClient, ControlClient, ControlError

    needs_root()
    path = tmp_path / "control.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(8)
        listener.setblocking(False)
        os.chown(path, OTHER_UID, OTHER_UID)
        with pytest.raises(ControlError) as refused:
            secret = {"OPENAI_API_KEY": "sk-secret"}
            if blocking:
                ControlClient(path, timeout=5).acquire("newrun", tmp_path, env=secret)
            else:
                async with AsyncControlClient(path, timeout=5) as control:
                    await control.acquire("newrun", tmp_path, env=secret)
        # A connection the client made would be waiting in the backlog by now.
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert refused.value.code == "UNTRUSTED_SOCKET"
    assert f"belongs to uid {OTHER_UID}" in str(refused.value)


def test_a_log_file_is_never_written_through_a_symlink(tmp_path: Path) -> None:
    """Defence behind the daemon's check of a child's log before each spawn."""
    from jeeves_mcp import _log

    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    (tmp_path / "child.log").symlink_to(victim)
    with pytest.raises(OSError):
        _log._PrivateFileHandler(str(tmp_path / "child.log"), maxBytes=1024, backupCount=1)
    assert victim.read_text() == "untouched\n"


# -- run roots through another user's symlink (attack review N1) ------------------------------


def foreign_link(tmp_path: Path) -> Path:
    """A run's workspace path that its user turned into a link to a root-owned directory."""
    target = tmp_path / "root-owned"
    target.mkdir()
    (target / "hello.py").write_text("x = 1\n")
    link = tmp_path / "ws"
    link.symlink_to(target)
    os.lchown(link, OTHER_UID, OTHER_UID)
    return link


async def test_an_acquire_through_another_users_symlink_is_refused(tmp_path: Path) -> None:
    """A run swapped its root for a link to /etc: the next acquire of that path must not pin
    /etc, whose commands would run as root."""
    from tests._daemon import running_daemon

    needs_root()
    link = foreign_link(tmp_path)
    async with running_daemon(tmp_path) as daemon:
        transport = httpx.AsyncHTTPTransport(uds=str(daemon.socket))
        async with httpx.AsyncClient(transport=transport, base_url="http://d") as http:
            refused = await http.post("/v1/slots", json={"run_id": "again", "root": str(link)})
            trusted = await http.post("/v1/slots", json={"run_id": "real", "root": str(link.resolve())})
            await http.delete("/v1/slots/real")
        # The runner's client and the CLI send the path as given, links unresolved.
        async with daemon.client() as control:
            with pytest.raises(ControlError) as by_client:
                await control.acquire("client", link)
        by_cli = await trio.run_process(
            [sys.executable, "-m", "jeeves_mcp", "--socket", str(daemon.socket), "acquire", "cli",
             "--root", str(link)], capture_stdout=True, capture_stderr=True, check=False)
    assert refused.status_code == 400, refused.text
    assert f"a symlink of uid {OTHER_UID}" in refused.text
    assert trusted.status_code == 201, trusted.text
    assert by_client.value.status == 400 and f"a symlink of uid {OTHER_UID}" in str(by_client.value.detail)
    assert by_cli.returncode != 0 and f"a symlink of uid {OTHER_UID}" in by_cli.stderr.decode()


@pytest.mark.parametrize("owner", [OTHER_UID, 0])
def test_a_child_resolves_its_root_only_through_trusted_symlinks(tmp_path: Path, owner: int) -> None:
    """A restarted child resolves its root again: through a link its run could repoint, never."""
    from jeeves_mcp.pruner_config import PrunerConfig

    needs_root()
    link = foreign_link(tmp_path)
    os.lchown(link, owner, owner)
    if owner == 0:
        assert PrunerConfig(root=link).root == link.resolve()
        return
    with pytest.raises(ValueError, match=f"a symlink of uid {OTHER_UID}"):
        PrunerConfig(root=link)


# -- the configuration (F6) ---------------------------------------------------------------------


def config_file(tmp_path: Path, text: str, mode: int) -> Path:
    path = tmp_path / "jeeves.toml"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(("text", "mode", "problem"), [
    ('tcp_token = "s3cret"\n', 0o644, "holds tcp_token and is mode 0644, readable by group and others"),
    ('tcp_token = "s3cret"\n', 0o604, "holds tcp_token and is mode 0604, readable by others"),
    ('tcp_token = "s3cret"\n', 0o640, "holds tcp_token and is mode 0640, readable by group"),
    ('[pruner]\ntoken = "s3cret"\n', 0o644, "holds [pruner] token and is mode 0644"),
    ("max_slots = 3\n", 0o664, "is mode 0664, writable by group"),
    ("max_slots = 3\n", 0o666, "is mode 0666, writable by group and others"),
])
def test_a_config_file_others_may_read_or_write_is_refused(tmp_path: Path, text: str, mode: int, problem: str) -> None:
    path = config_file(tmp_path, text, mode)
    with pytest.raises(ConfigError) as refused:
        load_daemon_config(path, {}, state_dir=tmp_path / "state")
    assert str(refused.value).startswith(f"config file {path} {problem}"), refused.value
    assert f"chmod {'600' if 'token' in text else 'go-w'} {path}" in str(refused.value)


@pytest.mark.parametrize(("text", "mode"), [
    ('tcp_token = "s3cret"\n', 0o600),
    ('tcp_token = "s3cret"\n', 0o400),
    ("max_slots = 3\n", 0o644),  # nothing secret: readable like sshd_config
])
def test_a_private_config_file_is_accepted(tmp_path: Path, text: str, mode: int) -> None:
    load_daemon_config(config_file(tmp_path, text, mode), {}, state_dir=tmp_path / "state")


def test_a_config_file_reached_through_a_symlink_is_read(tmp_path: Path) -> None:
    """As an operator links /etc/jeeves-mcp/jeeves.toml to a file their config tool manages."""
    link = tmp_path / "linked.toml"
    link.symlink_to(config_file(tmp_path, "max_slots = 3\n", 0o600))
    assert load_daemon_config(link, {}, state_dir=tmp_path / "state").max_slots == 3


def wake_fifo_openers(path: Path) -> None:
    """Let whoever is blocked opening the FIFO `path` for reading go on: a writer that closes at once."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # no FIFO there, or nobody waiting on it


def not_a_config_file(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "device":
        path.symlink_to("/dev/null")  # as /dev/zero, without the endless read if this regressed
    elif kind == "directory":
        path.mkdir(0o700)
    else:
        path.write_text("max_slots = 3\n" + "# padding\n" * (1 << 17))  # 1.25 MiB
        path.chmod(0o600)


@pytest.mark.parametrize(("kind", "problem"), [
    ("fifo", "is a FIFO, not a regular file: replace it with a regular file"),
    ("device", "is a character device, not a regular file: replace it with a regular file"),
    ("directory", "is a directory, not a regular file: replace it with a regular file"),
    ("large", "is larger than 1 MiB: not a config file, check the path"),
])
async def test_a_config_file_that_is_no_regular_file_or_too_large_is_refused(
    tmp_path: Path, kind: str, problem: str
) -> None:
    """Neither the daemon nor a child waits on a FIFO, reads a device or a file of any size:
    each refuses it, in the same words (a thread each, so that a wait fails the test)."""
    path = tmp_path / "jeeves.toml"
    not_a_config_file(path, kind)
    env = {"JEEVES_MCP_CONFIG": str(path)}
    try:
        with trio.fail_after(10):
            for load in (lambda: load_daemon_config(path, {}, state_dir=tmp_path / "state"), lambda: load_config(env)):
                with pytest.raises(ConfigError) as refused:
                    await trio.to_thread.run_sync(load, abandon_on_cancel=True)
                assert str(refused.value) == f"config file {path} {problem}", refused.value
    finally:
        wake_fifo_openers(path)


def test_a_config_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    needs_root()
    path = config_file(tmp_path, "max_slots = 3\n", 0o600)
    os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(ConfigError, match=rf"^config file {path} is owned by uid {OTHER_UID}, not 0: "):
        load_daemon_config(path, {}, state_dir=tmp_path / "state")


@pytest.mark.parametrize(("loosen", "problem"), [
    pytest.param("chmod", "is mode 0666, writable by group and others: chmod go-w ", id="0666"),
    pytest.param("chown", f"is owned by uid {OTHER_UID}, not 0: its owner would configure", id="another-owner"),
])
def test_a_child_refuses_a_config_file_loosened_after_the_daemon_started(
    tmp_path: Path, loosen: str, problem: str
) -> None:
    """Attack re-check N4: every child re-reads the daemon's file by path; a run that could
    swap it (it sat in a dir the run's user made) pointed the children at its own endpoint.
    The child checks the file as the daemon does, with the same words."""
    path = config_file(tmp_path, "[pruner]\nmax_concurrent_calls = 8\n", 0o600)
    child_env = load_daemon_config(path, {}, state_dir=tmp_path / "state").child_env
    assert child_env["JEEVES_MCP_CONFIG"] == str(path)
    if loosen == "chown":
        needs_root()
        os.chown(path, OTHER_UID, OTHER_UID)
    else:
        path.chmod(0o666)
    with pytest.raises(ConfigError) as by_child:
        load_config(child_env)
    assert str(by_child.value).startswith(f"config file {path} {problem}"), by_child.value
    with pytest.raises(ConfigError) as by_daemon:
        load_daemon_config(path, {}, state_dir=tmp_path / "state")
    assert str(by_daemon.value) == str(by_child.value)


async def test_a_child_the_daemon_starts_refuses_a_config_file_made_writable(tmp_path: Path, run_root: Path) -> None:
    """N4 end to end: the file passed the daemon's check at start; made 0666 later, it starts
    no child (the run gets no slot it configured), and the slot says why in the check's words
    (a child's own refusal went to its stderr, nowhere); put back, the next acquire runs."""
    path = config_file(tmp_path, "[pruner]\nmax_concurrent_calls = 8\n", 0o600).resolve()
    async with running_daemon(tmp_path, {"JEEVES_MCP_CONFIG": str(path)}) as daemon, daemon.client() as control:
        path.chmod(0o666)
        refused = await control.acquire("loosened", run_root)
        listed = await control.get("loosened")
        path.chmod(0o600)
        accepted = await control.acquire("restored", run_root)
        try:
            why = f"start_failed: config file {path} is mode 0666, writable by group and others: chmod go-w {path}"
            assert (refused["state"], refused["reason"]) == ("disabled", why), refused
            assert listed["reason"] == why, listed
            assert accepted["state"] == "running", accepted
        finally:
            await control.release("loosened")
            await control.release("restored")


async def test_a_config_file_a_run_swaps_for_a_fifo_is_refused_without_freezing_the_daemon(tmp_path: Path) -> None:
    """The config sat in a dir the run's user owns: its bash put a FIFO in the file's place.
    The check before the next child's start opened it in the daemon's event loop and waited
    there for a writer, the control API and every slot's health checks with it. The acquire
    is now refused at once, saying what is wrong, and the daemon goes on answering."""
    with directory_owned_by(NOBODY, "jeeves-run-") as attackers_root, \
            directory_owned_by(NOBODY, "jeeves-run-") as victims_root:
        config = config_file(attackers_root, "[pruner]\nmax_concurrent_calls = 8\n", 0o600)
        async with running_daemon(tmp_path, {"JEEVES_MCP_CONFIG": str(config)}) as daemon, \
                daemon.client() as control:
            attacker = await control.acquire("attacker", attackers_root)
            assert attacker["state"] == "running", attacker
            swapped = await bash(attacker, f"rm -f {config.name} && mkfifo {config.name} && stat -c %F {config.name}")
            assert swapped["stdout"] == "fifo\n", swapped
            try:
                with trio.fail_after(20):
                    refused = await control.acquire("victim", victims_root)
                    health = await control.healthz()
                    kept = await control.get("victim")
                    still = await control.get("attacker")
            finally:
                wake_fifo_openers(config)
            why = f"start_failed: config file {config} is a FIFO, not a regular file: replace it with a regular file"
            assert (refused["state"], refused["reason"]) == ("disabled", why), refused
            assert health["status"] == "ok", health
            assert kept["reason"] == why, kept
            assert still["state"] == "running", still
            await control.release("victim")
            await control.release("attacker")


@pytest.mark.parametrize("fork_server", ["true", "false"])
async def test_a_child_refusing_a_value_edited_after_the_daemon_started_says_why(
    tmp_path: Path, run_root: Path, fork_server: str
) -> None:
    """The daemon checks the file's owner, mode and syntax before a start, not the children's
    values: a child that refuses one says why on its ready channel, zygote-forked or cold."""
    path = config_file(tmp_path, "[pruner]\nmax_concurrent_calls = 8\n", 0o600).resolve()
    env = {"JEEVES_MCP_CONFIG": str(path), "JEEVES_MCP_FORK_SERVER": fork_server}
    async with running_daemon(tmp_path, env) as daemon, daemon.client() as control:
        path.write_text("[pruner]\nmax_concurrent_calls = 0\n")
        refused = await control.acquire("edited", run_root)
        await control.release("edited")
    assert refused["state"] == "disabled", refused
    assert refused["reason"].startswith("start_failed: child refused to start: "), refused
    assert "max_concurrent_calls" in refused["reason"] and str(path) in refused["reason"], refused


async def test_a_restart_refused_for_a_config_file_made_writable_says_why(tmp_path: Path, run_root: Path) -> None:
    """A child that crashes after the file was loosened is restarted as any other: each attempt
    checks the file again (one fixed within the backoff recovers); the slot degrades with why."""
    path = config_file(tmp_path, "[pruner]\nmax_concurrent_calls = 8\n", 0o600).resolve()
    env = {"JEEVES_MCP_CONFIG": str(path), "JEEVES_MCP_MAX_RESTARTS": "1", "JEEVES_MCP_RESTART_BACKOFF_S": "0"}
    async with running_daemon(tmp_path, env) as daemon, daemon.client() as control, watch_events(daemon) as log:
        slot = await control.acquire("crashy", run_root)
        assert slot["state"] == "running", slot
        path.chmod(0o666)
        os.kill(slot["pid"], signal.SIGKILL)
        degraded = await log.wait_for("mcp_pruner.degraded", "crashy")
        why = f"restart failed: config file {path} is mode 0666, writable by group and others: chmod go-w {path}"
        assert (degraded["error"], degraded["restarts"]) == (why, 1), degraded
        assert (await control.get("crashy"))["reason"] == f"degraded: {why}"
        await control.release("crashy")


async def test_the_daemon_refuses_a_token_file_others_can_read(tmp_path: Path) -> None:
    """The review read a 0644 config's tcp_token from a run's bash with plain `cat`."""
    path = config_file(tmp_path, 'tcp_host = "127.0.0.1"\ntcp_token = "s3cret"\n', 0o644)
    code, output = await daemon_outcome(
        tmp_path, "--config", str(path), "--state-dir", str(tmp_path / "state"), "--socket", str(tmp_path / "d.sock"))
    assert code == 2, output
    assert output.splitlines()[-1].startswith(
        f"jeeves-mcp daemon: bad configuration: config file {path} holds tcp_token and is mode 0644"), output
    assert not (tmp_path / "state").exists()


# -- doctor -------------------------------------------------------------------------------------


async def test_doctor_fails_a_state_dir_others_may_write(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JEEVES_")}
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "jeeves_mcp", "--socket", str(tmp_path / "absent.sock"), "doctor", "--json",
             "--state-dir", str(state)], capture_stdout=True, capture_stderr=True, check=False, env=env,
        )
    checks = {check["name"]: check for check in json.loads(done.stdout)["checks"]}
    assert checks["state dir"]["status"] == "fail", checks["state dir"]
    assert f"state dir {state} is mode 0777, writable by group and others" in checks["state dir"]["detail"]


async def test_doctor_fails_a_group_socket_of_another_user(tmp_path: Path) -> None:
    """0660 with our group used to pass whoever owned it: the CLI's commands refuse it now."""
    needs_root()
    path = tmp_path / "group.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JEEVES_")}
    try:
        listener.bind(str(path))
        path.chmod(0o660)
        os.chown(path, OTHER_UID, os.getegid())
        with trio.fail_after(60):
            done = await trio.run_process(
                [sys.executable, "-m", "jeeves_mcp", "--socket", str(path), "doctor", "--json",
                 "--state-dir", str(tmp_path)], capture_stdout=True, capture_stderr=True, check=False, env=env,
            )
    finally:
        listener.close()
    checks = {check["name"]: check for check in json.loads(done.stdout)["checks"]}
    assert checks["socket"]["status"] == "fail", checks["socket"]
    assert f"belongs to uid {OTHER_UID}, not to you (uid 0) nor root" in checks["socket"]["detail"]
