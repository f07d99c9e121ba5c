from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import jeeves_mcp
import jeeves_mcp.cli
import jeeves_mcp.supervisor
from tests._child import Child, running_child
from tests._daemon import Daemon, running_daemon
from tests._tree import SOURCE_TREE


def pytest_configure(config: pytest.Config) -> None:
    """Under `make test-installed`, refuse to run if any of the package comes from the tree."""
    if not os.environ.get("JEEVES_TEST_INSTALLED"):
        return
    sources = [(SOURCE_TREE / folder).resolve() for folder in ("jeeves_mcp", "supervisor", "cli")]
    for module in (jeeves_mcp, jeeves_mcp.supervisor, jeeves_mcp.cli):
        where = Path(module.__file__ or "").resolve()
        if any(where.is_relative_to(source) for source in sources) or "site-packages" not in where.parts:
            raise pytest.UsageError(f"{module.__name__} is imported from {where}, not from an installed wheel")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text(
        "import os\n\n\ndef greet(name):\n    return f'hello {name}'\n\n\n"
        "def add(a, b):\n    return a + b\n"
    )
    (root / "notes.md").write_text("# Notes\n\nSome text.\n")
    return root


@pytest.fixture
async def child(workspace: Path, tmp_path: Path) -> AsyncIterator[Child]:
    async with running_child(workspace, tmp_path) as started:
        yield started


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    async with running_daemon(tmp_path) as started:
        yield started


@pytest.fixture
def run_root(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    root.mkdir()
    (root / "hello.py").write_text("def hello():\n    return 'hi'\n")
    return root
