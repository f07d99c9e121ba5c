"""A directory tree deeper than the child's descriptor limit, searched by the built-in grep.

The built-in search (rg missing, or the commands' user may not run it) held one descriptor per
level of its walk: a run's chain of 1,100 directories under systemd's soft limit of 1,024
took every descriptor the child had (its `bash` and `read` calls and its listener failed with
EMFILE meanwhile), and the files below the limit were dropped without a word.
"""

from __future__ import annotations

import errno
import gc
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trio

from jeeves_mcp.mcp.errors import ToolError
from jeeves_mcp.tools import _grep_builtin, grep
from tests._child import running_child, tool_json
from tests.test_bash_grep import make_ctx
from tests.test_http import call

NOFILE = 128  # the child's soft limit: a chain of DEPTH levels is far deeper
DEPTH = 300
BOUND_S = 60

# The run's own script: a chain deep/d/d/... with a 2 MiB file at each level from the 60th
# (linked, not copied) to keep the walk busy there, and the needle at the bottom.
MAKE_TREE = f"""{sys.executable} - <<'EOF'
import os
with open("bulk.dat", "w") as f:
    f.write(("x" * 63 + "\\n") * 32768)
top = os.getcwd()
os.makedirs("deep"); os.chdir("deep")
for level in range(1, {DEPTH} + 1):
    os.mkdir("d")
    if level >= 60:
        os.link(os.path.join(top, "bulk.dat"), "z.txt")
    os.chdir("d")
with open("needle.txt", "w") as f:
    f.write("a needle\\n")
print("made")
EOF"""


async def test_a_tree_deeper_than_the_descriptor_limit_is_searched_whole_while_calls_go_on(
    workspace: Path, tmp_path: Path,
) -> None:
    async with running_child(workspace, tmp_path, without_rg=True, nofile=NOFILE) as child, httpx.AsyncClient(timeout=BOUND_S, headers=child.headers()) as http:
        made = tool_json(await call(http, child, "bash", {"cmd": MAKE_TREE, "timeout_ms": 60_000}))
        assert made["stdout"] == "made\n", made
        answered: dict[str, dict] = {}
        meanwhile = 0  # pairs of concurrent calls answered before the grep was
        failed: list[dict] = []

        async def search() -> None:
            found = await call(http, child, "grep", {"pattern": "needle", "paths": ["deep"]}, request_id="grep")
            answered["grep"] = found

        with trio.fail_after(BOUND_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(search)
                while "grep" not in answered:
                    ran = await call(http, child, "bash", {"cmd": "echo alive"}, request_id="bash")
                    read = await call(http, child, "read", {"path": "notes.md"}, request_id="read")
                    failed += [tool_json(result) for result in (ran, read) if result.get("isError")]
                    meanwhile += "grep" not in answered
        found = tool_json(answered["grep"])
        assert found["engine"] == "builtin", found
        assert not failed, failed[:3]
        assert meanwhile, "no call answered while the grep walked"
        bottom = "deep/" + "d/" * DEPTH + "needle.txt"
        assert found["match_count"] == 1 and found["matches"] == f"{bottom}:1:a needle", found
        assert "skipped_files" not in found, found
        assert (await http.get(f"{child.base}/health")).status_code == 200
        events = [event.get("event") for event in child.log_events()]
        assert "http.accept_failed" not in events


def _chain(top: Path, depth: int, text: str = "needle\n") -> Path:
    here = top
    for _ in range(depth):
        here = here / "d"
        here.mkdir()
        (here / "f.txt").write_text(text)
    return here


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _walk(top: Path, user: _grep_builtin.User = None, seen: Callable[[int, str, str], None] | None = None) -> tuple[list[str], _grep_builtin.GrepResult]:
    """The paths `_files` yields below `top`, each shown to `seen` as it is."""
    result = _grep_builtin.GrepResult()
    paths = []
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for dir_fd, name, rel in _grep_builtin._files(fd, ".", user, threading.Event(), result):
            if seen is not None:
                seen(dir_fd, name, rel)
            paths.append(rel)
    finally:
        os.close(fd)
    return paths, result


def test_the_walk_holds_a_bounded_number_of_descriptors_at_any_depth(tmp_path: Path) -> None:
    depth = 200
    assert 4 * _grep_builtin.MAX_OPEN_DIRS < depth
    _chain(tmp_path, depth)
    (tmp_path / "d" / "d" / "side").mkdir()
    (tmp_path / "d" / "d" / "side" / "s.txt").write_text("x\n")
    # The process's count moves only with the walk: an earlier test's garbage (a socket, a
    # pipe) closed by a collection mid-walk made it 3 lower after than before.
    gc.collect()
    gc.disable()
    try:
        before = _open_descriptors()
        most = 0

        def count(dir_fd: int, name: str, rel: str) -> None:
            nonlocal most
            most = max(most, _open_descriptors() - before)

        paths, result = _walk(tmp_path, seen=count)
        after = _open_descriptors()
    finally:
        gc.enable()
    assert most <= _grep_builtin.MAX_OPEN_DIRS + 2, most  # the top's and the listing's own
    expected = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*.txt"))
    assert paths == expected  # every level, in path order, as ripgrep --sort=path
    assert result.skipped_files == 0
    assert after == before


@pytest.mark.parametrize("swap", ["symlink", "directory"])
def test_a_directory_swapped_while_the_walk_had_it_closed_is_skipped_not_entered(tmp_path: Path, swap: str) -> None:
    depth = 3 * _grep_builtin.MAX_OPEN_DIRS
    top = tmp_path / "ws"
    top.mkdir()
    _chain(top, depth)
    (top / "d" / "z.txt").write_text("needle\n")  # read after the chain below it: d is reopened
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _chain(elsewhere, depth, "secret\n")  # the same names: only what it is tells it apart
    read: list[str] = []

    def swap_at_the_bottom(dir_fd: int, name: str, rel: str) -> None:
        file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
        with os.fdopen(file_fd) as handle:
            read.append(handle.read())
        if rel.count("/") == depth:  # d's descriptor was closed on the way down
            (top / "d").rename(tmp_path / "moved")
            if swap == "symlink":
                (top / "d").symlink_to(elsewhere / "d")
            else:
                (elsewhere / "d").rename(top / "d")

    paths, result = _walk(top, seen=swap_at_the_bottom)
    assert set(read) == {"needle\n"}
    assert paths[0] == "d/" * depth + "f.txt" and "d/z.txt" not in paths
    assert result.skipped_files == 1


def test_a_directory_the_run_may_not_list_counts_as_skipped(tmp_path: Path) -> None:
    (tmp_path / "open").mkdir()
    (tmp_path / "open" / "a.txt").write_text("needle\n")
    (tmp_path / "shut").mkdir(mode=0o700)
    (tmp_path / "shut" / "b.txt").write_text("needle\n")
    os.chmod(tmp_path, 0o755)
    nobody = (65534, 65534)
    paths, result = _walk(tmp_path, user=nobody)
    assert paths == ["open/a.txt"]
    assert result.skipped_files == 1


async def test_running_out_of_descriptors_ends_the_grep_with_an_error_not_a_partial_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _chain(tmp_path, 5)
    real_open = os.open

    def exhausted(path, flags, *args, **kwargs):  # the child's last descriptor gone mid-walk
        if flags & os.O_DIRECTORY and kwargs.get("dir_fd") is not None:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(grep, "find_rg", lambda: None)
    monkeypatch.setattr(_grep_builtin.os, "open", exhausted)
    with trio.fail_after(10), pytest.raises(ToolError) as info:
        await grep.run(make_ctx(tmp_path), {"pattern": "needle"})
    assert info.value.code == "QUEUE_OVERLOADED"
    assert "out of file descriptors" in info.value.message

