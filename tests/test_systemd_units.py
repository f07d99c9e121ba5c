"""`jeeves-mcp systemd-units`: the units an installation from the wheel alone can install,
filled in for the interpreter that runs it, from the one copy the package carries."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import trio

from tests._tree import SOURCE_TREE
from tests.test_build import build

UNITS = SOURCE_TREE / "systemd"
NAMES = ("jeeves-mcp.service", "jeeves-mcp.socket", "jeeves-mcp.sysusers")


def unit(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=("#", ";"))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string(text)
    return parser


async def units_command(*args: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process([sys.executable, "-m", "jeeves_mcp", "systemd-units", *args],
                                      capture_stdout=True, capture_stderr=True, check=False)


async def test_units_are_written_for_this_installation(tmp_path: Path) -> None:
    out = tmp_path / "units"
    out.mkdir()
    done = await units_command("--out", str(out), "--workspace", "/srv/runs", "--workspace", "/home/ops/runs")
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in out.iterdir()) == sorted(NAMES)
    service = unit((out / "jeeves-mcp.service").read_text())["Service"]
    installed = Path(sysconfig.get_path("scripts")) / "jeeves-mcp"  # the venv's, as pip put it there
    assert service["ExecStart"] == f"{installed} daemon"
    assert service["ReadWritePaths"].split() == ["-/srv/runs", "-/home/ops/runs", "/tmp", "/var/tmp"]
    assert service["ProtectHome"] == "read-only"  # a workspace under /home must stay visible
    assert not re.search(r"@[A-Z_]+@", "\n".join(
        line for line in (out / "jeeves-mcp.service").read_text().splitlines() if not line.startswith("#")))
    for name in ("jeeves-mcp.socket", "jeeves-mcp.sysusers"):
        assert (out / name).read_text() == (UNITS / name).read_text()
    said = done.stdout.decode()
    assert f"sudo install -m 0644 {out}/jeeves-mcp.sysusers /etc/sysusers.d/jeeves-mcp.conf" in said, said
    assert "sudo systemctl enable --now jeeves-mcp.socket" in said, said

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (the units were written and checked)")
    with trio.fail_after(60):
        verified = await trio.run_process(
            [analyze, "verify", str(out / "jeeves-mcp.socket"), str(out / "jeeves-mcp.service")],
            capture_stdout=True, capture_stderr=True, check=False)
    assert (verified.returncode, verified.stderr.decode().strip()) == (0, ""), verified.stderr.decode()


async def test_units_printed_and_help_says_where_they_go(tmp_path: Path) -> None:
    printed = await units_command("--bin", "/opt/jeeves-mcp/bin/jeeves-mcp")
    assert printed.returncode == 0, printed.stderr
    text = printed.stdout.decode()
    headers = re.findall(r"^# ==> (\S+) <==$", text, re.M)
    assert headers == ["/etc/systemd/system/jeeves-mcp.service", "/etc/systemd/system/jeeves-mcp.socket",
                       "/etc/sysusers.d/jeeves-mcp.conf"], text[:400]
    assert "ExecStart=/opt/jeeves-mcp/bin/jeeves-mcp daemon\n" in text and "ProtectHome=yes\n" in text
    helped = await units_command("--help")
    words = " ".join(helped.stdout.decode().split())
    for phrase in ("/etc/systemd/system", "/etc/sysusers.d/jeeves-mcp.conf", "systemd-sysusers",
                   "systemctl enable --now jeeves-mcp.socket"):
        assert phrase in words, (phrase, words)
    refused = await units_command("--out", str(tmp_path / "absent"))
    assert refused.returncode == 2 and refused.stdout == b"", refused
    assert refused.stderr.decode().endswith("[USAGE]\n"), refused.stderr


def test_the_wheel_carries_the_units(tmp_path: Path) -> None:
    wheel = build(tmp_path, "wheel")
    with zipfile.ZipFile(wheel) as archive:
        carried = {name: archive.read(name) for name in archive.namelist() if "/systemd/" in name}
    assert carried == {f"jeeves_mcp/systemd/{name}": (UNITS / name).read_bytes() for name in NAMES}
