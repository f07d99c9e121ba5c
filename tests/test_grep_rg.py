"""ripgrep comes with the package (the `ripgrep` wheel ships `rg` into the venv's bin/), and the
grep tool finds it there even when that bin/ is not on PATH, as under systemd."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from jeeves_mcp.tools import grep
from tests._daemon import running_daemon
from tests.test_security import call_tool


def test_rg_is_the_one_beside_the_interpreter(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    rg = grep.find_rg()
    assert rg is not None and Path(rg).parent == Path(sys.executable).parent
    version = subprocess.run([rg, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("ripgrep ")


async def test_a_daemon_without_the_venv_on_path_greps_with_rg(tmp_path: Path, run_root: Path) -> None:
    """systemd starts /venv/bin/jeeves-mcp with PATH=/usr/bin:...: no rg of the venv on it."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    (run_root / "notes.txt").write_text("alpha\nneedle here\nomega\n")
    async with running_daemon(tmp_path, {"PATH": str(empty)}) as daemon, daemon.client() as control:
        slot = await control.acquire("rg-run", run_root)
        base = slot["mcp"]["url"].removesuffix("/mcp")
        async with httpx.AsyncClient(timeout=20) as http:
            result = await call_tool(http, base, slot["mcp"]["headers"], "grep", {"pattern": "needle"})
        await control.release("rg-run")
    assert not result["isError"], result
    assert result["engine"] == "rg", result
    assert result["match_count"] == 1
