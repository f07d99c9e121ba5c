"""The files a search's rows name, as the engine reads them to rank the rows within them:
only what `read` would open for the run, and never more than the engine lays out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jeeves_mcp.pruner_config import PrunerConfig
from jeeves_mcp.pruning.engine._matches import line_paths
from jeeves_mcp.pruning.pruner import AROUND_MAX_CHARS
from jeeves_mcp.tools import read
from jeeves_mcp.tools.read import file_reader
from tests.test_engine import shop_source
from tests.test_isolation import directory_owned_by

SOURCE = "def f():\n    return 1\n"


def test_a_row_names_only_source_files_beneath_the_root(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "lib.py").write_text(SOURCE)
    (workspace / "src" / "mod.py").write_text(SOURCE)
    (workspace / "src" / "notes.txt").write_text(SOURCE)
    (workspace / "src" / "big.py").write_text("x = 1\n" * (AROUND_MAX_CHARS // 6 + 1))
    (workspace / "src" / "out.py").symlink_to(outside / "lib.py")
    os.mkfifo(workspace / "src" / "pipe.py")  # would block a read until a writer came
    text_of = file_reader(PrunerConfig(root=workspace), workspace / "src")
    assert text_of("mod.py") == SOURCE
    assert text_of("../src/mod.py") == SOURCE  # beneath the root still
    for name in ("notes.txt", "big.py", "out.py", "pipe.py", "missing.py", f"{outside}/lib.py",
                 "../../outside/lib.py", "~/mod.py", "mod.py\x00", "x" * 5000 + ".py", "/proc/self/cwd/mod.py"):
        assert text_of(name) is None, name


def test_a_file_grown_after_its_size_was_told_is_not_read_past_the_limit(
    workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = workspace / "grows.py"
    path.write_text(SOURCE)
    opened = read._open_regular

    def open_then_grow(*args: object) -> object:
        handle = opened(*args)  # type: ignore[arg-type]
        with path.open("a") as more:
            more.write("x = 1\n" * (AROUND_MAX_CHARS // 6 + 1))
        return handle

    monkeypatch.setattr(read, "_open_regular", open_then_grow)
    assert file_reader(PrunerConfig(root=workspace), workspace)("grows.py") is None


def test_a_file_the_runs_user_could_not_read_is_not_read_for_it() -> None:
    """The pruner may be root, its commands another user's: a row naming a file that user may
    not read is not looked at (its content would tell the run whether its rows are the file's)."""
    with directory_owned_by(65534, "jeeves-rows-", gid=0) as root:
        (root / "open.py").write_text(SOURCE)
        (root / "secret.py").write_text(SOURCE)
        (root / "secret.py").chmod(0o600)  # root's
        text_of = file_reader(PrunerConfig(root=root), root)
        assert text_of("open.py") == SOURCE
        assert text_of("secret.py") is None


def test_the_files_layouts_stop_when_their_time_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `until`, no more files are laid out, and a file whose layout ran past it keeps the
    search's values: the rest of the engine's time is the view's."""
    import time

    from jeeves_mcp.pruning.engine import _searched
    from jeeves_mcp.pruning.engine._text import query_identifiers, query_terms

    shop = shop_source()
    rows = [f"shop.py:{i + 1}:{line}" for i, line in enumerate(shop) if "offset" in line]
    question = "which offset does a card refund add?"
    args = (rows, line_paths(rows), [1.0] * len(rows), {"shop.py": "\n".join(shop)}.get, question,
            query_terms(question), query_identifiers(question))
    assert _searched.within_files(*args) != [1.0] * len(rows)
    assert _searched.within_files(*args, until=time.monotonic() - 1) == [1.0] * len(rows)
    late = iter([0.0, 1e12])  # in time before the file, out of it once it is laid out
    clock = type("Clock", (), {"monotonic": staticmethod(lambda: next(late))})
    monkeypatch.setattr(_searched, "time", clock)
    assert _searched.within_files(*args, until=1.0) == [1.0] * len(rows)


def test_rows_of_a_crlf_file_are_its_lines() -> None:
    """The grep tool takes a line's `\\r` off its row, grep keeps it: both are the file's lines."""
    from jeeves_mcp.pruning.engine import _searched
    from jeeves_mcp.pruning.engine._text import query_identifiers, query_terms

    shop = shop_source()
    question = "which offset does a card refund add?"
    crlf = {"shop.py": "\r\n".join(shop) + "\r\n"}.get
    for ending in ("", "\r"):
        rows = [f"shop.py:{i + 1}:{line}{ending}" for i, line in enumerate(shop) if "offset" in line]
        found = _searched.within_files(rows, line_paths(rows), [1.0] * len(rows), crlf, question, query_terms(question),
                                       query_identifiers(question))
        assert found != [1.0] * len(rows), repr(ending)
