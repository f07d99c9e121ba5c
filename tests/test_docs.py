"""The README's generated parts match what the code generates."""

from __future__ import annotations

from jeeves_mcp.supervisor.daemon_config import reference_markdown
from tests._tree import SOURCE_TREE

README = SOURCE_TREE / "README.md"


def test_config_reference_in_the_readme_is_current() -> None:
    text = README.read_text()
    start = text.index("<!-- config-reference:start -->\n") + len("<!-- config-reference:start -->\n")
    end = text.index("<!-- config-reference:end -->")
    assert text[start:end] == reference_markdown(), (
        "README's configuration reference is stale: replace it with `jeeves-mcp daemon --config-reference`"
    )


def test_readme_starts_with_the_two_commands() -> None:
    head = README.read_text().split("\n## ", 1)[0]
    assert "make run" in head and "make test" in head
    assert "make test" in (SOURCE_TREE / ".ci" / "run").read_text()


def test_make_run_takes_a_private_state_dir_and_socket() -> None:
    """The README's way to try the daemon beside another one: flags reach the daemon."""
    import subprocess

    args = "--state-dir /tmp/jm-try --socket /tmp/jm-try/control.sock"
    assert f'make run ARGS="{args}"' in README.read_text()
    assert "export JEEVES_MCP_SOCKET=/tmp/jm-try/control.sock" in README.read_text()
    dry = subprocess.run(["make", "-n", "-C", str(SOURCE_TREE), "run", f"ARGS={args}"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert f"jeeves-mcp daemon {args}" in dry.stdout
