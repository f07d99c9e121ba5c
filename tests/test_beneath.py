"""Files the pruner reads for a run are opened beneath its root, as the run's user could (attack
review F2: a run swapped a checked file for a symlink to /etc/shadow before the pruner, root,
opened it by name).

The race is made deterministic: the check (`resolve_in_root`) runs, the swap happens, then the
open, in that order every time.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from jeeves_mcp.beneath import mode_permits, open_beneath, openat2_available, user_may
from jeeves_mcp.mcp.errors import ToolError
from jeeves_mcp.pruner_config import PrunerConfig
from jeeves_mcp.tools import base, grep
from jeeves_mcp.tools import read as read_tool
from jeeves_mcp.tools.base import CallContext
from tests._child import running_child, tool_json
from tests.test_bash_grep import make_ctx as make_tool_ctx

SECRET = "s3cr3t-canary-beneath"
NOBODY = 65534
WAYS = [pytest.param(True, id="openat2"), pytest.param(False, id="walk")]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ok.py").write_text("x = 1\n")
    (root / "abs").symlink_to(outside)  # absolute, out
    (root / "up").symlink_to("../outside")  # relative, climbing out
    (root / "etc").symlink_to("/etc")
    (root / "passwd").symlink_to("/etc/passwd")  # the last component itself
    (root / "inner").symlink_to("src")  # stays inside
    (root / "src" / "same").symlink_to("ok.py")
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    return root


@contextmanager
def dirfd(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def read_beneath(root: Path, rel: str, use_openat2: bool, **kw: Any) -> bytes:
    if use_openat2 and not openat2_available():
        pytest.skip("this kernel has no openat2 (Linux < 5.6, or a seccomp filter refuses it)")
    with dirfd(root) as top:
        fd = open_beneath(top, rel, os.O_RDONLY | os.O_CLOEXEC, use_openat2=use_openat2, **kw)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


# -- the primitive --------------------------------------------------------------------


@pytest.mark.parametrize("use_openat2", WAYS)
@pytest.mark.parametrize("rel", ["abs/secret.txt", "up/secret.txt", "etc/passwd", "passwd", "/etc/passwd",
                                 "src/../../outside/secret.txt", "inner/../up/secret.txt", ".."])
def test_a_path_leading_out_of_the_root_is_refused(tree: Path, rel: str, use_openat2: bool) -> None:
    with pytest.raises(OSError) as info:
        read_beneath(tree, rel, use_openat2)
    assert info.value.errno == errno.EXDEV, rel


@pytest.mark.parametrize("use_openat2", WAYS)
@pytest.mark.parametrize("rel", ["src/ok.py", "inner/ok.py", "src/same", "inner/same", "inner/../src/same"])
def test_links_that_stay_inside_are_followed(tree: Path, rel: str, use_openat2: bool) -> None:
    assert read_beneath(tree, rel, use_openat2) == b"x = 1\n"


@pytest.mark.parametrize("use_openat2", WAYS)
def test_a_loop_is_eloop_and_a_missing_name_enoent(tree: Path, use_openat2: bool) -> None:
    for rel, code in (("loop1", errno.ELOOP), ("loop1/x", errno.ELOOP), ("src/nope", errno.ENOENT),
                      ("src/ok.py/x", errno.ENOTDIR)):
        with pytest.raises(OSError) as info:
            read_beneath(tree, rel, use_openat2)
        assert info.value.errno == code, rel


def test_the_walk_refuses_a_directory_the_user_could_not_search(tree: Path) -> None:
    (tree / "src").chmod(0o700)  # ours; another user gets the others' bits: none
    me = (os.geteuid(), os.getegid())
    other = (os.geteuid() + 1, os.getegid() + 1)
    assert read_beneath(tree, "src/ok.py", False, search_as=me) == b"x = 1\n"
    with pytest.raises(OSError) as info:
        read_beneath(tree, "inner/ok.py", False, search_as=other)  # through the link too
    assert info.value.errno == errno.EACCES


def test_a_root_whose_ancestor_was_swapped_is_still_opened_where_it_was_pinned(
    tmp_path: Path,
) -> None:
    """The root's path is compared with the pinned root before a call, then a run renames an
    ancestor and puts a link to elsewhere in its place: the open stays in the pinned root."""
    from jeeves_mcp.proc import pin_root

    parent = tmp_path / "parent"
    root = parent / "ws"
    root.mkdir(parents=True)
    (root / "f").write_text("mine\n")
    elsewhere = tmp_path / "elsewhere" / "ws"
    elsewhere.mkdir(parents=True)
    (elsewhere / "f").write_text(f"{SECRET}\n")
    assert pin_root(root) is None
    parent.rename(tmp_path / "moved")
    parent.symlink_to(tmp_path / "elsewhere")
    fd = base.open_in_root(root, root / "f", os.O_RDONLY)
    with os.fdopen(fd) as opened:
        assert opened.read() == "mine\n"


def test_mode_permits_takes_the_owners_bits_then_the_groups_then_the_others(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("")
    path.chmod(0o604)  # owner may read, its group may not, others may
    info = os.stat(path)
    owner, group = info.st_uid, info.st_gid
    assert mode_permits(info, owner, group + 1, os.R_OK)
    assert not mode_permits(info, owner + 1, group, os.R_OK)
    assert mode_permits(info, owner + 1, group + 1, os.R_OK)
    assert not mode_permits(info, owner + 1, group + 1, os.R_OK | os.X_OK)


# -- the tools, with a swap between the check and the open ------------------------------


def make_ctx(root: Path) -> CallContext:
    return make_tool_ctx(root, history_timeout_ms=0)


@pytest.fixture
def swapping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root where, once a tool has checked its path, `d` (asked for `d` or `d/f`) or the file
    `d/g` (asked for `d/g`) is swapped for a symlink out of the root to what holds the secret,
    as the attacker's RENAME_EXCHANGE loop does, before the tool opens it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text(f"{SECRET}\n")
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_text("decoy\n")
    (root / "d" / "g").write_text("decoy\n")
    real = base.resolve_in_root

    def check_then_swap(config: PrunerConfig, raw: str, **kw: Any) -> Path:
        checked = real(config, raw, **kw)
        if raw == "d/g":
            (root / "d" / "g").unlink()
            (root / "d" / "g").symlink_to(outside / "f")
        else:
            (root / "d").rename(root / "d.real")
            (root / "d").symlink_to(outside)
        return checked

    monkeypatch.setattr(read_tool, "resolve_in_root", check_then_swap)
    monkeypatch.setattr(grep, "resolve_in_root", check_then_swap)
    return root


@pytest.mark.parametrize("path", ["d/f", "d/g"])
async def test_read_does_not_follow_a_path_swapped_out_of_the_root(swapping: Path, path: str) -> None:
    with pytest.raises(ToolError) as info:
        await read_tool.run(make_ctx(swapping), {"path": path})
    assert info.value.code == "FORBIDDEN", info.value.payload()
    assert SECRET not in json.dumps(info.value.payload())


async def test_read_follows_a_component_swapped_for_a_link_inside(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_text("first\n")
    (root / "e").mkdir()
    (root / "e" / "f").write_text("second\n")
    real = base.resolve_in_root

    def check_then_swap(config: PrunerConfig, raw: str, **kw: Any) -> Path:
        checked = real(config, raw, **kw)
        shutil.rmtree(root / "d")
        (root / "d").symlink_to("e")
        return checked

    monkeypatch.setattr(read_tool, "resolve_in_root", check_then_swap)
    out = await read_tool.run(make_ctx(root), {"path": "d/f"})
    assert out.texts[0].text == "second"


@pytest.mark.parametrize("path", ["d", "d/f", "d/g"])
async def test_builtin_grep_does_not_follow_a_path_swapped_out_of_the_root(
    swapping: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    monkeypatch.setattr(grep, "find_rg", lambda: None)
    out = await grep.run(make_ctx(swapping), {"pattern": "s3cr3t", "paths": [path]})
    assert out.fields["engine"] == "builtin"
    assert out.fields["match_count"] == 0, out.fields
    assert SECRET not in json.dumps([t.text for t in out.texts])


# -- what the run's user may not read, through a real child -------------------------------


@pytest.fixture
def nobodys_root() -> Iterator[Path]:
    """A workspace owned by nobody holding files root keeps to itself; removed after."""
    if os.geteuid() != 0:
        pytest.skip("giving a workspace to another user, and switching users, need root")
    root = Path(tempfile.mkdtemp(prefix="jeeves-beneath-"))
    try:
        root.chmod(0o755)
        os.chown(root, NOBODY, 0)  # group root, as `install -d -o nobody` leaves it
        for name, mode, owner in (("private.txt", 0o600, 0), ("group.txt", 0o640, 0), ("shared.txt", 0o644, 0),
                                  ("mine.txt", 0o600, NOBODY)):
            secret = name in ("private.txt", "group.txt")
            (root / name).write_text(f"{SECRET} {name}\n" if secret else f"{name}\n")
            (root / name).chmod(mode)
            os.chown(root / name, owner, owner)
        (root / "locked").mkdir(mode=0o700)  # root's: nobody may not cross it
        (root / "locked" / "inside.txt").write_text(f"{SECRET} inside\n")
        (root / "locked" / "inside.txt").chmod(0o644)
        (root / "link.txt").symlink_to("shared.txt")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def call(http: httpx.AsyncClient, child: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    reply = (await http.post(f"{child.base}/rpc", json=body, headers=child.headers())).json()
    return {**tool_json(reply["result"]), "isError": reply["result"].get("isError", False)}


def runnable_by_nobody(program: str | None) -> bool:
    """Whether nobody may reach and run `program` by the modes of its directories and itself."""
    if program is None:
        return False
    path = Path(program).resolve()
    return all(mode_permits(os.stat(p), NOBODY, NOBODY, os.X_OK) for p in (*path.parents, path))


@pytest.mark.parametrize("engine", ["rg", "builtin"])
async def test_a_file_the_runs_user_may_not_read_is_refused(nobodys_root: Path, tmp_path: Path, engine: str) -> None:
    # An rg nobody may not run (a venv in a 0700 clone) leaves the built-in search to do it.
    from jeeves_mcp.tools.grep import find_rg

    expected = engine if engine == "builtin" or runnable_by_nobody(find_rg()) else "builtin"
    async with running_child(nobodys_root, tmp_path, without_rg=engine == "builtin") as child, \
            httpx.AsyncClient(timeout=20) as http:
        for path in ("private.txt", "group.txt", "locked/inside.txt"):
            result = await call(http, child, "read", {"path": path})
            assert result["isError"] and result["code"] == "FORBIDDEN", (path, result)
            assert SECRET not in json.dumps(result)
        for path, text in (("shared.txt", "shared.txt"), ("mine.txt", "mine.txt"), ("link.txt", "shared.txt")):
            result = await call(http, child, "read", {"path": path})
            assert not result["isError"] and result["content"] == text, (path, result)
        for paths in ([], ["private.txt"], ["locked"]):
            found = await call(http, child, "grep", {"pattern": "s3cr3t", "paths": paths})
            assert found.get("engine", expected) == expected, found
            assert SECRET not in json.dumps(found), (engine, paths, found)
            # What the user may not read is skipped, not an INTERNAL error.
            assert not found["isError"] and found["match_count"] == 0, (engine, paths, found)


# -- POSIX ACLs (attack review of 2026-11-29: a 0644 file whose ACL denied nobody was read) ---

_ACL_ENTRY = {"user_obj": 0x01, "user": 0x02, "group_obj": 0x04, "group": 0x08, "mask": 0x10, "other": 0x20}
_NO_ID = 0xFFFFFFFF


def set_acl(path: Path, *entries: tuple[str, int, int]) -> None:
    """`setfacl --set` as Linux stores it: (tag, permission bits, id) entries."""
    raw = (2).to_bytes(4, "little") + b"".join(
        _ACL_ENTRY[tag].to_bytes(2, "little") + perm.to_bytes(2, "little") + who.to_bytes(4, "little")
        for tag, perm, who in entries
    )
    os.setxattr(path, "system.posix_acl_access", raw)


@pytest.fixture
def acl_root(nobodys_root: Path) -> Path:
    """nobodys_root with files and a directory whose ACLs deny nobody what their modes allow,
    and a file only an ACL lets nobody read."""
    denied, granted, held = nobodys_root / "acl-denied.txt", nobodys_root / "acl-granted.txt", nobodys_root / "held"
    denied.write_text(f"{SECRET} acl-denied\n")
    denied.chmod(0o644)
    granted.write_text("acl-granted.txt\n")
    granted.chmod(0o600)
    held.mkdir(mode=0o755)
    (held / "inside.txt").write_text(f"{SECRET} held\n")
    (held / "inside.txt").chmod(0o644)
    try:
        # u::rw- u:nobody:--- g::r-- m::r-- o::r--
        set_acl(denied, ("user_obj", 6, _NO_ID), ("user", 0, NOBODY), ("group_obj", 4, _NO_ID),
                ("mask", 4, _NO_ID), ("other", 4, _NO_ID))
        # u::rw- u:nobody:r-- g::--- m::r-- o::---
        set_acl(granted, ("user_obj", 6, _NO_ID), ("user", 4, NOBODY), ("group_obj", 0, _NO_ID),
                ("mask", 4, _NO_ID), ("other", 0, _NO_ID))
        # u::rwx u:nobody:--- g::r-x m::r-x o::r-x
        set_acl(held, ("user_obj", 7, _NO_ID), ("user", 0, NOBODY), ("group_obj", 5, _NO_ID),
                ("mask", 5, _NO_ID), ("other", 5, _NO_ID))
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            pytest.skip("this filesystem keeps no ACLs")
        raise
    return nobodys_root


@pytest.mark.parametrize("engine", ["rg", "builtin"])
async def test_a_files_acl_decides_what_the_runs_user_may_read(acl_root: Path, tmp_path: Path, engine: str) -> None:
    async with running_child(acl_root, tmp_path, without_rg=engine == "builtin") as child, \
            httpx.AsyncClient(timeout=20) as http:
        for path, readable in (("acl-denied.txt", False), ("held/inside.txt", False), ("acl-granted.txt", True)):
            # What the run's own command can do is the kernel's answer, ACLs and all.
            shell = await call(http, child, "bash", {"cmd": f"cat {path}"})
            assert (shell["exit_code"] == 0) == readable, (path, shell)
            result = await call(http, child, "read", {"path": path})
            if readable:
                assert not result["isError"] and result["content"] == path, (path, result)
            else:
                assert result["isError"] and result["code"] == "FORBIDDEN", (path, result)
                assert SECRET not in json.dumps(result)
        for paths in ([], ["acl-denied.txt"], ["held"]):
            found = await call(http, child, "grep", {"pattern": "s3cr3t", "paths": paths})
            assert SECRET not in json.dumps(found), (engine, paths, found)
            assert not found["isError"] and found["match_count"] == 0, (engine, paths, found)


def test_a_directory_an_acl_closes_is_not_crossed(acl_root: Path) -> None:
    fd = os.open(acl_root, os.O_PATH | os.O_DIRECTORY)
    try:
        with pytest.raises(PermissionError):
            open_beneath(fd, "held/inside.txt", os.O_RDONLY, search_as=(NOBODY, NOBODY))
        os.close(open_beneath(fd, "held/inside.txt", os.O_RDONLY, search_as=(0, 0)))
    finally:
        os.close(fd)


def test_user_may_follows_the_acl_check_of_acl5(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("")
    path.chmod(0o640)
    owner, group = os.stat(path).st_uid, os.stat(path).st_gid
    fd = os.open(path, os.O_RDONLY)
    try:
        assert user_may(fd, owner + 7, group, os.R_OK) and not user_may(fd, owner + 7, group + 1, os.R_OK)  # no ACL
        try:
            # u::rw- u:U:rw- g::--- g:G:r-- m::r-- o::---
            set_acl(path, ("user_obj", 6, _NO_ID), ("user", 6, owner + 1), ("group_obj", 0, _NO_ID),
                    ("group", 4, group + 2), ("mask", 4, _NO_ID), ("other", 0, _NO_ID))
        except OSError as exc:
            if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
                pytest.skip("this filesystem keeps no ACLs")
            raise
        assert user_may(fd, owner, group, os.R_OK | os.W_OK)  # the owner: its own entry, no mask
        assert user_may(fd, owner + 1, group, os.R_OK) and not user_may(fd, owner + 1, group, os.W_OK)  # masked
        assert not user_may(fd, owner + 3, group, os.R_OK)  # the file's group: g::---
        assert user_may(fd, owner + 3, group + 2, os.R_OK)  # a named group
        assert not user_may(fd, owner + 3, group + 3, os.R_OK)  # the others
    finally:
        os.close(fd)
