"""Open a file below a directory descriptor, whatever its path's components are swapped for.

A path checked and then opened by name can be a different file at the open: a run's own
command may replace a component with a symlink out of the workspace in between (the attack
review's F2). `open_beneath(dirfd, rel, flags)` resolves `rel` as openat2(2) does with
RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS: `..` and symlinks are followed only while they stay
below `dirfd`; an absolute path or symlink, or one climbing out, fails with EXDEV. Linux >= 5.6
does that in one syscall; where openat2 is missing (ENOSYS, a seccomp filter) a walk of the
components does the same with O_NOFOLLOW opens relative to the directory reached so far.

`user_may` says whether a user could read (or search) a file by its mode and its POSIX ACL:
the pruner opens files as its own user (often root) on behalf of commands run as another.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
from typing import Any

__all__ = ["mode_permits", "open_beneath", "openat2_available", "user_may"]

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(platform.machine())
_MAX_SYMLINKS = 40  # the kernel's limit on links followed in one lookup
_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.cache
def _syscall() -> Any:
    try:
        function = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_long
    return function


def _openat2(dirfd: int, rel: str, flags: int) -> int:
    function = _syscall()
    if _SYS_OPENAT2 is None or function is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    how = _OpenHow(flags, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    path = os.fsencode(rel)
    while True:
        fd = function(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dirfd), ctypes.c_char_p(path),
                      ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        if code != errno.EINTR:
            raise OSError(code, os.strerror(code), rel)


@functools.cache
def openat2_available() -> bool:
    """Whether this kernel (and any seccomp filter) lets openat2 through; asked once."""
    try:
        root = os.open("/", _DIR_FLAGS)
    except OSError:
        return False
    try:
        os.close(_openat2(root, ".", _DIR_FLAGS))
        return True
    except OSError:
        return False
    finally:
        os.close(root)


def open_beneath(
    dirfd: int, rel: str, flags: int, *, search_as: tuple[int, int] | None = None,
    use_openat2: bool | None = None,
) -> int:
    """A descriptor of `rel` resolved below `dirfd` only; OSError(EXDEV) if it would leave it.

    `flags` are os.open's (O_CREAT is not supported). `search_as` (uid, gid): also EACCES if
    that user could not search a directory on the way, `dirfd` included, by its mode; the walk
    does it, as openat2 does not show the directories it crosses. `use_openat2` forces one way
    (tests); by default openat2 when the kernel has it, else the walk.
    """
    if flags & os.O_CREAT:
        raise ValueError("open_beneath does not create files")
    if use_openat2 is None:
        use_openat2 = search_as is None and openat2_available()
    if use_openat2:
        try:
            return _openat2(dirfd, rel, flags)
        except OSError as exc:
            if exc.errno != errno.EAGAIN:  # EAGAIN: a rename raced a `..`; the walk is immune
                raise
    return _walk(dirfd, rel, flags, search_as)


def _error(code: int, rel: str) -> OSError:
    return OSError(code, os.strerror(code), rel)


def _link_target(name: str, dirfd: int) -> str | None:
    try:
        return os.readlink(name, dir_fd=dirfd)
    except OSError:
        return None  # not a symlink (EINVAL) or gone: the open's own error stands


def _walk(dirfd: int, rel: str, flags: int, search_as: tuple[int, int] | None) -> int:
    """openat2's RESOLVE_BENEATH by hand: one component at a time, never following a symlink
    in the kernel; a link's target is spliced into the components still to walk. Each
    directory is checked on its own descriptor, so the check is on what is crossed."""
    if rel.startswith("/"):
        raise _error(errno.EXDEV, rel)
    if search_as is not None and not user_may(dirfd, *search_as, os.X_OK):
        raise _error(errno.EACCES, rel)
    todo = rel.split("/")[::-1]  # components left, next one last
    opened: list[int] = []  # directories below dirfd, deepest last: `..` pops, never climbs
    links = 0
    try:
        while True:
            here = opened[-1] if opened else dirfd
            part = todo.pop() if todo else "."
            last = not todo
            if part == "..":
                if not opened:
                    raise _error(errno.EXDEV, rel)
                os.close(opened.pop())
                here = opened[-1] if opened else dirfd
                part = "."
            if part in ("", "."):
                if last:
                    return os.open(".", flags, dir_fd=here)
                continue
            target = _link_target(part, here) if last and flags & os.O_PATH else None
            if target is None:
                try:
                    if last:
                        return os.open(part, flags | os.O_NOFOLLOW, dir_fd=here)
                    opened.append(os.open(part, _DIR_FLAGS, dir_fd=here))
                    if search_as is not None and not user_may(opened[-1], *search_as, os.X_OK):
                        raise _error(errno.EACCES, rel)
                    continue
                except OSError as exc:
                    # A symlink gives ELOOP (last) or ENOTDIR (a directory expected).
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    target = _link_target(part, here)
                    if target is None:
                        raise
            links += 1
            if links > _MAX_SYMLINKS:
                raise _error(errno.ELOOP, rel)
            if target.startswith("/"):
                raise _error(errno.EXDEV, rel)  # as RESOLVE_BENEATH: no absolute link
            todo.extend(target.split("/")[::-1])
    finally:
        for fd in opened:
            os.close(fd)


def mode_permits(info: os.stat_result, uid: int, gid: int, want: int) -> bool:
    """Whether (uid, gid), with no supplementary groups (how commands run), may do `want`
    (os.R_OK | os.X_OK ...) by the file's owner and mode: the owner's bits for its owner,
    else the group's, else the others'. A file's ACL is not read here (user_may reads it)."""
    if info.st_uid == uid:
        bits = info.st_mode >> 6
    elif info.st_gid == gid:
        bits = info.st_mode >> 3
    else:
        bits = info.st_mode
    return bits & want == want


# POSIX ACLs as Linux stores them (the `system.posix_acl_access` attribute, acl(5)): a version,
# then (tag, permissions, id) entries. A file's mode alone let `read` show a file whose ACL
# denies the run's user (`setfacl -m u:nobody:--- F` on a 0644 file: the attack review of
# 2026-11-29), and refuse one an ACL lets it read.
_ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2
_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK, _ACL_OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_NO_ACL = (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP)


def user_may(fd: int, uid: int, gid: int, want: int) -> bool:
    """Whether (uid, gid), with no supplementary groups, may do `want` to what `fd` is, by its
    mode and, where it has one, its access ACL (acl(5)'s check); an ACL that cannot be read or
    parsed denies."""
    info = os.fstat(fd)
    try:
        entries = _access_acl(fd)
    except OSError:
        return False
    if entries is None:
        return mode_permits(info, uid, gid, want)
    if info.st_uid == uid:
        return (info.st_mode >> 6) & want == want  # the ACL's owner entry is the mode's
    mask = next((perm for tag, perm, _ in entries if tag == _ACL_MASK), 7)
    named = [perm for tag, perm, who in entries if tag == _ACL_USER and who == uid]
    if named:
        return named[0] & mask & want == want
    groups = [
        perm for tag, perm, who in entries
        if (tag == _ACL_GROUP_OBJ and info.st_gid == gid) or (tag == _ACL_GROUP and who == gid)
    ]
    if groups:
        return any(perm & mask & want == want for perm in groups)
    return info.st_mode & want == want  # the ACL's other entry is the mode's


def _access_acl(fd: int) -> list[tuple[int, int, int]] | None:
    """The (tag, permissions, id) entries of the access ACL of what `fd` is; None when it has
    none (or its filesystem keeps none). OSError when it cannot be read or makes no sense."""
    try:
        raw = os.getxattr(fd, _ACL_XATTR)
    except OSError as exc:
        if exc.errno in _NO_ACL:
            return None
        if exc.errno != errno.EBADF:
            raise
        # An O_PATH descriptor (a directory the walk crossed) has no attributes to read:
        # its directory is opened again, for reading, to read them.
        again = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        try:
            raw = os.getxattr(again, _ACL_XATTR)
        except OSError as retry:
            if retry.errno in _NO_ACL:
                return None
            raise
        finally:
            os.close(again)
    if len(raw) < 4 or (len(raw) - 4) % 8 or int.from_bytes(raw[:4], "little") != _ACL_VERSION:
        raise OSError(errno.EINVAL, "an access ACL in an unknown form")
    return [
        (int.from_bytes(raw[k : k + 2], "little"), int.from_bytes(raw[k + 2 : k + 4], "little") & 7,
         int.from_bytes(raw[k + 4 : k + 8], "little"))
        for k in range(4, len(raw), 8)
    ]
