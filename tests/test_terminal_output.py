"""What a run or its runner can make the operator's terminal show: the CLI prints their
strings (a root, labels, a reason, a file's lines, a pruner service's answers) with
control characters made visible, never as escape sequences the terminal obeys."""

from __future__ import annotations

import json
import re
from pathlib import Path

import trio

from jeeves_mcp.cli._render import format_event
from tests._daemon import Daemon
from tests.fake_swe_pruner import ESCAPES, running_fake
from tests.test_cli import acquired, cli
from tests.test_swe_pruner import run_cli

# ESC, BEL, CSI as one C1 character, and the bidi overrides of "Trojan Source".
RAW_CONTROLS = re.compile("[\x1b\x07\x9b\u202e]")


def raw_controls(text: str) -> list[str]:
    return RAW_CONTROLS.findall(text)


async def test_show_prints_a_runners_root_and_labels_without_their_escapes(daemon: Daemon, tmp_path: Path) -> None:
    root = tmp_path / "ws\x1b[2J\u202ex"
    root.mkdir()
    await acquired(daemon, "run-esc", root, "--label", f"note={ESCAPES}", "--label", "two=a\nreason  forged")
    try:
        with trio.fail_after(30):
            shown = await cli(daemon.socket, "show", "run-esc")
        assert shown.code == 0, shown.err
        assert raw_controls(shown.out) == [], shown.out
        assert "\\x1b]52;c;cm0gLXJmIH4K\\x07" in shown.out
        assert "a\\nreason  forged" in shown.out  # a label cannot forge a row of its own
    finally:
        await cli(daemon.socket, "release", "run-esc")


def test_event_lines_show_control_characters_escaped() -> None:
    line = format_event({"ts": 0, "event": "mcp_pruner.start_failed", "run_id": "r", "error": ESCAPES})
    assert raw_controls(line) == [] and "\\x1b[2J" in line


async def test_doctor_prints_a_pruner_services_health_without_its_escapes(daemon: Daemon) -> None:
    async with running_fake("escapes") as fake:
        with trio.fail_after(60):
            result = await cli(daemon.socket, "doctor", "--state-dir", str(daemon.state_dir),
                               env={"JEEVES_PRUNER_ENDPOINT": fake.endpoint})
    assert "pruner endpoint" in result.out, result.err
    assert raw_controls(result.out) == [], result.out


async def test_prune_prints_a_files_lines_and_name_without_their_escapes(tmp_path: Path) -> None:
    source = tmp_path / "notes\x1b]8;;http:x\x07.txt"
    source.write_text("".join(f"line {n} {ESCAPES}\n" for n in range(40)))
    with trio.fail_after(60):
        shown = await run_cli(str(source), "-q", "line 3")
        missing = await run_cli(str(tmp_path / "gone\x1b[2J.txt"), "-q", "x")
    out = shown.stdout.decode()
    assert shown.returncode == 0, shown.stderr
    assert raw_controls(out) == [] and "\\x1b[2J" in out, out
    assert missing.returncode == 2
    assert raw_controls(missing.stderr.decode()) == [], missing.stderr


async def test_json_output_escapes_what_json_leaves_raw(daemon: Daemon, tmp_path: Path) -> None:
    # JSON escapes C0 itself; a C1 CSI and a bidi override went out raw with ensure_ascii off.
    label = "\x9b2J\u202eevil"
    await acquired(daemon, "run-json", tmp_path, "--label", f"note={label}")
    try:
        with trio.fail_after(30):
            shown = await cli(daemon.socket, "show", "run-json", "--json")
        assert shown.code == 0, shown.err
        assert raw_controls(shown.out) == [], shown.out
        assert json.loads(shown.out)["labels"]["note"] == label  # the same value, escaped
        assert "\\u009b" in shown.out
    finally:
        await cli(daemon.socket, "release", "run-json")
