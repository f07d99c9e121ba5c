from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests._child import Child, running_child
from tests._daemon import Daemon, running_daemon


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
