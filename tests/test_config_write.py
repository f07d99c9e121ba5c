"""`jeeves-mcp config ... --write FILE` into a directory a run's user may write.

The README's flow has an operator (often root) write `.mcp.json` into a run's workspace, whose
owner is the run's user: anything there may be a link, a FIFO or a file made to be read. The
write must neither follow nor wait on such a thing, nor lend its mode to what it writes.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from jeeves_mcp.cli import _config
from tests.test_cli import acquired, cli
from tests.test_isolation import NOBODY, directory_owned_by


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    path = tmp_path / "canary"
    path.write_text("root secret\n")
    path.chmod(0o600)
    return path


def test_a_temporary_file_swapped_for_a_link_never_has_its_target_changed(
    tmp_path: Path, canary: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run's user owns the directory: between the temporary file's creation and its mode
    # being set, it may rename it away and put a link to any file in its place.
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    target = workspace / ".mcp.json"
    target.write_text("{}")
    target.chmod(0o777)
    real_mkstemp = tempfile.mkstemp

    def swapped(*args: Any, **kwargs: Any) -> tuple[int, str]:
        handle, name = real_mkstemp(*args, **kwargs)
        os.rename(name, workspace / "moved-away")
        os.symlink(canary, name)
        return handle, name

    monkeypatch.setattr(_config.tempfile, "mkstemp", swapped)
    _config.write_atomically(target, '{"mcpServers": {}}\n')
    assert stat.S_IMODE(canary.stat().st_mode) == 0o600
    assert canary.read_text() == "root secret\n"


@pytest.fixture
def nobodys_workspace() -> Iterator[Path]:
    with directory_owned_by(NOBODY, "jeeves-config-") as path:
        yield path


def test_a_file_another_user_owns_lends_no_mode_to_what_is_written(nobodys_workspace: Path) -> None:
    target = nobodys_workspace / ".mcp.json"
    target.write_text("{}")
    target.chmod(0o777)
    os.chown(target, NOBODY, NOBODY)
    found = _config.read_existing(target, "config")
    assert found is not None
    _config.write_atomically(target, _config.merge_json(target, found, ["mcpServers"], {}), existing=found)
    written = target.stat()
    assert written.st_uid == os.geteuid()
    assert stat.S_IMODE(written.st_mode) & 0o022 == 0, oct(written.st_mode)  # not 0777


async def test_a_target_that_is_a_link_a_fifo_or_huge_is_refused_at_once(
    daemon: Any, run_root: Path, tmp_path: Path, canary: Path
) -> None:
    await acquired(daemon, "run-w", run_root)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "link.json").symlink_to(canary)
    (workspace / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(workspace / "fifo.json")
    (workspace / "huge.json").write_text("[" + "0," * (1024 * 1024) + "0]")
    cases = {"link.json": "symbolic link", "zero.json": "symbolic link", "fifo.json": "not a regular file",
             "huge.json": "larger than"}
    for name, problem in cases.items():
        for client in ("claude", "codex", "agent-sdk"):
            with trio.fail_after(30):  # a FIFO held the CLI forever, /dev/zero took gigabytes
                result = await cli(daemon.socket, "config", client, "run-w", "--write", str(workspace / name))
            assert result.code != 0 and problem in result.err, (name, client, result)
            assert "Traceback" not in result.err
    with open(canary) as kept:  # noqa: ASYNC230 - a small local file
        assert stat.S_IMODE(os.fstat(kept.fileno()).st_mode) == 0o600 and kept.read() == "root secret\n"
