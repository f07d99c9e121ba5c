from __future__ import annotations

import os
import traceback
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A skip says why. pytest-trio re-raises a skip from inside trio as a bare
    `pytest.skip()` (shown as "Skipped" at its own line): take the reason and the
    line from the original, which it leaves as the new one's context; a skip with
    no reason at all fails the test."""
    report = yield
    if not (report.skipped and isinstance(report.longrepr, tuple)) or report.longrepr[2] != "Skipped":
        return report
    original = _inner_skip(call.excinfo.value if call.excinfo else None)
    if original is None or not str(original.msg):
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} skipped without a reason"
        return report
    frames = [f for f in traceback.extract_tb(original.__traceback__) if "site-packages" not in f.filename]
    where = frames[-1] if frames else None
    report.longrepr = (
        where.filename if where else report.longrepr[0],
        where.lineno if where and where.lineno is not None else report.longrepr[1],
        f"Skipped: {original.msg}",
    )
    return report


def _inner_skip(exc: BaseException | None) -> Any:
    """The `Skipped` inside the exception group that `exc` was raised while handling."""
    queue = [exc.__context__] if exc is not None and exc.__context__ is not None else []
    while queue:
        current = queue.pop()
        if isinstance(current, BaseExceptionGroup):
            queue.extend(current.exceptions)
        elif type(current).__name__ == "Skipped":
            return current
    return None


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
