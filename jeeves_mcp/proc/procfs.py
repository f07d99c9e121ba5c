"""What Linux tells about processes: /proc readers and prctl switches.

Every reader tolerates a process that vanishes while it is read (None, False or
an empty list), since the processes it looks at may exit at any moment.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import pwd
import time

_PR_SET_DUMPABLE = 4
_PR_SET_NAME = 15
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
HAVE_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
# Re-reads of our own children lists before a walk gives up for a /proc scan.
_WALK_PASSES = 3
_PF_KTHREAD = 0x00200000  # /proc/PID/stat flags: a kernel thread, which has no environment
# Between re-reads of the environment of a process in the middle of an exec.
_EXEC_POLL_S = 0.001


def become_subreaper(enable: bool = True) -> bool:
    """Make this process the subreaper of its descendants (prctl); False if refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, int(enable), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def is_subreaper() -> bool:
    """Whether this process is a child subreaper (prctl PR_GET_CHILD_SUBREAPER)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        value = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    return value.value != 0


def set_dumpable(enable: bool) -> bool:
    """prctl(PR_SET_DUMPABLE): when off, processes of the same user (a run's commands
    when they run as the pruner's user) cannot open our /proc/PID/mem or environ;
    root still can. Reset to on by execve, so commands are unaffected."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, int(enable), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


# Capability bits (linux/capability.h) and prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL).
CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522  # capget/capset with two 32-bit words a set


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def capabilities(kind: str = "CapEff", pid: int | str = "self") -> int:
    """A capability set of a process as a bit mask (`CapEff`, `CapPrm`, `CapAmb`...); 0 if unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(kind + ":"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


@functools.cache
def can_switch_users() -> bool:
    """Whether this process may run commands as another user: root, or a service user
    given CAP_SETUID and CAP_SETGID (systemd's AmbientCapabilities=). Asked once: clearing
    the ambient set later leaves the effective one as it was."""
    if os.geteuid() == 0:
        return True
    needed = (1 << CAP_SETUID) | (1 << CAP_SETGID)
    return capabilities() & needed == needed


def own_group(uid: int) -> int:
    """The group `uid`'s commands run in: its passwd entry's. An owner with no entry (a
    container's uid) gets the kernel's overflow group: not the run root's group, which other
    runs may share and which may write the dir holding their roots."""
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        pass
    try:
        with open("/proc/sys/kernel/overflowgid") as overflow:
            return int(overflow.read())
    except (OSError, ValueError):
        return 65534


def user_name(uid: int) -> str | None:
    """The login name of `uid`, or None when it has no passwd entry."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def clear_ambient_capabilities() -> bool:
    """Empty the ambient and the inheritable sets: capabilities the daemon was given then
    stay with this process (effective and permitted) but no program it executes inherits
    them. Without this, a command run as another user would keep CAP_SETUID and could become
    anyone; and with CapInh left set (systemd's AmbientCapabilities= sets it too), a program
    carrying inheritable file capabilities would get them back at exec. False if either
    could not be emptied. Both act on the calling thread only: call it before any thread
    starts (trio's workers spawn the commands)."""
    ambient = not capabilities("CapAmb") or _clear_ambient()
    return (not capabilities("CapInh") or _clear_inheritable()) and ambient


def _clear_ambient() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _clear_inheritable() -> bool:
    """capget, then capset with the same effective and permitted sets and no inheritable one
    (lowering it needs no privilege)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
        data = (_CapData * 2)()
        if libc.capget(ctypes.byref(header), data) != 0:
            return False
        for word in data:
            word.inheritable = 0
        return libc.capset(ctypes.byref(header), data) == 0
    except (OSError, AttributeError):
        return False


def set_process_name(name: str) -> None:
    """Name this process in ps/top/pkill (prctl PR_SET_NAME, 15 bytes at most)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def set_process_title(title: str, name: str) -> None:
    """Show `title` as this process's command line (ps, /proc/PID/cmdline) and `name` as its
    comm (set_process_name). setproctitle rewrites the argv area, which Python cannot; with
    SPT_NOENV it stays in the room the original command line had (the title is cut to fit)
    and leaves /proc/PID/environ alone: the daemon finds its children there."""
    import setproctitle

    prepare_process_title()
    setproctitle.setproctitle("".join(c if c.isprintable() else "?" for c in title))
    set_process_name(name)  # setproctitle also sets comm, to the title's first 15 bytes


def prepare_process_title() -> None:
    """Let this process and the children it forks set a title (set_process_title) later.

    setproctitle finds the argv area by walking back from `environ` once, on its first call;
    a forked child that has replaced its environment (the zygote's) could not. SPT_NOENV is
    read then too. It also renames comm: set_process_name after it."""
    import setproctitle

    os.environ["SPT_NOENV"] = "1"
    try:
        setproctitle.getproctitle()
    finally:
        os.environ.pop("SPT_NOENV", None)


def proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: state, ppid, pgrp, session, ...

    (field 0 is the state, 1 the ppid, 19 the start time in clock ticks); None
    when the process is gone.
    """
    return _stat_at(f"/proc/{pid}")


def _stat_at(where: str) -> list[str] | None:
    """proc_stat of the process or task directory `where`."""
    try:
        with open(f"{where}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def process_alive(pid: int) -> bool:
    """Running: not gone, and not a zombie waiting for its parent to reap it."""
    return live_task(pid) is not None


def live_task(pid: int) -> int | None:
    """A thread of `pid` that is neither gone nor dead: `pid` itself, or another when its
    main thread ended alone (raw SYS_exit), which makes /proc/PID/stat read Z and
    /proc/PID/environ fail while the process runs on; None when the whole process is dead."""
    stat = proc_stat(pid)
    if stat is None:
        return None
    if stat[0] not in ("Z", "X"):
        return pid
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task") if t != str(pid)]
    except (OSError, ValueError):
        return None
    for tid in tids:
        stat = _stat_at(f"/proc/{pid}/task/{tid}")
        if stat is not None and stat[0] not in ("Z", "X"):
            return tid
    return None


def list_pids() -> list[int]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [int(n) for n in names if n.isdigit()]


def _task_children(pid: int) -> tuple[list[int], bool]:
    """Children of every thread of `pid`, and False if a thread was gone or dead
    once its list was read (its children may have moved to another list)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return [], False
    children: list[int] = []
    ok = True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                children.extend(int(c) for c in f.read().split())
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            ok = False
            continue
        if raw[raw.rfind(b")") + 2 : raw.rfind(b")") + 3] in (b"Z", b"X"):
            ok = False
    return children, ok


def dead_process(pid: int) -> bool:
    """Every thread of `pid` is gone or dead (its children went to its reaper)."""
    return live_task(pid) is None


def descendants(me: int) -> list[int] | None:
    """Every descendant of this process, or None when the walk may have missed
    one (a process died while read and its children moved under an ancestor
    already read, other than us).

    A process that dies reparents its children to another of its threads or
    to its nearest subreaper ancestor. When that is one of our direct
    children, the orphans land on our own lists, which are read again until
    they show nothing new; anywhere else deeper, the walk gives up.
    """
    found: set[int] = set()
    for _ in range(_WALK_PASSES):
        top, ok = _task_children(me)
        if not ok:
            return None
        stack = [pid for pid in top if pid not in found]
        if not stack and found:
            return list(found)
        direct = set(top)
        while stack:
            pid = stack.pop()
            if pid in found:
                continue
            found.add(pid)
            children, ok = _task_children(pid)
            if not ok and not (pid in direct and dead_process(pid)):
                return None
            stack.extend(children)
        if not found:
            return []
    return None


def descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(64):  # deeper trees are walked by descendants
        stat = proc_stat(pid)
        if stat is None:
            return False
        parent = int(stat[1])
        if parent == ancestor:
            return True
        if parent <= 1:
            return False
        pid = parent
    return False


def own_children() -> list[int] | None:
    """Children of this process (every thread's), or None when unsupported."""
    if not HAVE_CHILDREN:
        return None
    children, _ok = _task_children(os.getpid())
    return children


def reap_children() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def has_env_entry(pid: int, tag_entries: tuple[bytes, ...], deadline: float = 0.0) -> bool | None:
    """Whether the environment of `pid` holds one of `tag_entries` (`NAME=value`); None when
    it is still in the middle of an exec at `deadline` (time.monotonic(); the default does
    not wait).

    Also as `NAME\\0value`: bash, importing its environment as it starts, splits each entry
    in place, its `=` a NUL for a moment (variables.c, initialize_shell_variables).
    """
    environ = read_environ(pid, deadline)
    if environ is None:
        return None
    environ = b"\0" + environ + b"\0"
    return any(
        b"\0" + form + b"\0" in environ for entry in tag_entries for form in (entry, entry.replace(b"=", b"\0", 1))
    )


# No exec passes a larger environment (argv and environment together get at most a quarter
# of the stack limit, capped at 6 MiB). A process can point /proc/PID/environ at any mapping
# of its own (prctl PR_SET_MM_MAP, unprivileged): an untouched one of gigabytes costs it
# nothing, and a scan reading it whole cost the daemon as much memory and time.
ENVIRON_MAX = 6 * 1024 * 1024


def _posed_environ(stat: list[str] | None) -> bool:
    """The environment's extent (proc(5) fields 50-51, shown to a reader allowed to trace the
    process, else 0) is larger than any exec passes."""
    try:
        return stat is not None and int(stat[48]) - int(stat[47]) > ENVIRON_MAX
    except (IndexError, ValueError):
        return False


def read_environ(pid: int, deadline: float = 0.0) -> bytes | None:
    """/proc/PID/environ (b"" when gone, unreadable or larger than ENVIRON_MAX), or None when
    `pid` is still in the middle of an exec at `deadline` (time.monotonic()).

    Mid-exec the file reads empty (the new image's environment is not set up yet, or the
    read got the old image, already released), though the tag is back once the exec ends.
    The exec sets the image's end_code last, after the environment: until then, re-read.
    """
    task = live_task(pid)  # the main thread's files fail once it has ended alone
    if task is None:
        return b""
    # Through the process's own task directory: a bare /proc/TID could be a recycled number.
    where = f"/proc/{pid}" if task == pid else f"/proc/{pid}/task/{task}"
    settled = False
    while True:
        if _posed_environ(_stat_at(where)):
            return b""
        try:
            with open(f"{where}/environ", "rb") as f:
                environ = f.read(ENVIRON_MAX + 1)
        except OSError:
            return b""
        if len(environ) > ENVIRON_MAX:
            return b""
        if environ:
            return environ
        stat = _stat_at(where)
        if stat is None or len(stat) < 25 or stat[0] in ("Z", "X") or int(stat[6]) & _PF_KTHREAD:
            return b""
        if stat[24] != "0":  # end_code: no exec under way; read once more in case one just ended
            if settled:
                return b""
            settled = True
            continue
        settled = False
        if time.monotonic() >= deadline:
            return None
        time.sleep(_EXEC_POLL_S)


def pidfd_pids() -> set[int]:
    """Pids this process holds a pidfd for (trio holds one per unreaped child)."""
    held: set[int] = set()
    try:
        fds = os.listdir("/proc/self/fdinfo")
    except OSError:
        return held
    for fd in fds:
        try:
            with open(f"/proc/self/fdinfo/{fd}", "rb") as f:
                info = f.read()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith(b"Pid:"):
                held.add(int(line.split()[1]))
    return held


def process_real_uid(pid: int) -> int | None:
    """The real uid of `pid` (/proc/PID/status), None if gone. Not the owner of /proc/PID,
    which a non-dumpable process hands to root; a setuid program keeps its caller's real uid."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def processes_with_env(entry: bytes) -> list[int]:
    """Pids (not this one) whose environment holds `entry` (`NAME=value`)."""
    me = os.getpid()
    return [pid for pid in list_pids() if pid != me and has_env_entry(pid, (entry,))]
