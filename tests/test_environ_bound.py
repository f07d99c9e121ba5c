"""A process sets what /proc/PID/environ reads back: the daemon must not read it whole.

With prctl(PR_SET_MM, PR_SET_MM_MAP) (no privilege needed where the kernel has checkpoint/restore)
a process points its environment at any mapping of its own; an untouched one costs it nothing
and reads back as gigabytes of zeros. The daemon reads the environment of every process on the
host to find a slot's escaped commands (kill_tree's scan at each release, the stray scan at
start): a run's command with a 3 GiB environment made one release take 22 s and 9 GiB of the
daemon's memory. No exec passes an environment that large, so such a process is not read.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import trio

from jeeves_mcp.proc import procfs

# Maps `size` bytes holding `entry` at the end, makes them the process's environment, says
# "ready" (or "unsupported" where the kernel refuses), then waits to be killed.
_POSE = r"""
import ctypes, mmap, sys
size, entry = int(sys.argv[1]), sys.argv[2].encode()
region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
region[size - len(entry) - 1 : size - 1] = entry
start = ctypes.addressof(ctypes.c_char.from_buffer(region))
fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
field = lambda n: int(fields[n - 3])  # proc(5) numbers the fields from 1, state is 3
libc = ctypes.CDLL(None, use_errno=True)
libc.sbrk.restype = ctypes.c_void_p
class MmMap(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "start_code", "end_code", "start_data", "end_data", "start_brk", "brk", "start_stack",
        "arg_start", "arg_end", "env_start", "env_end")] + [
        ("auxv", ctypes.c_void_p), ("auxv_size", ctypes.c_uint32), ("exe_fd", ctypes.c_uint32)]
mm = MmMap(field(26), field(27), field(45), field(46), field(47), libc.sbrk(0), field(28),
           field(48), field(49), start, start + size, None, 0, 0xFFFFFFFF)
PR_SET_MM, PR_SET_MM_MAP = 35, 14
if libc.prctl(PR_SET_MM, PR_SET_MM_MAP, ctypes.byref(mm), ctypes.sizeof(mm), 0) != 0:
    print("unsupported", ctypes.get_errno(), flush=True)
else:
    print("ready", flush=True)
sys.stdin.read()
"""


async def _posing(size: int, entry: str) -> tuple[trio.Process, str]:
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", _POSE, str(size), entry], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    said = b""
    with trio.fail_after(20):
        while not said.endswith(b"\n") and (chunk := await proc.stdout.receive_some()):
            said += chunk
    return proc, said.decode().strip()


@pytest.mark.parametrize(("size", "read"), [(1 << 20, True), (64 << 20, False)], ids=["1MiB", "64MiB"])
async def test_an_environment_larger_than_any_exec_passes_is_not_read(size: int, read: bool) -> None:
    entry = "JEEVES_MCP_TEST_TAG=posed"
    proc, said = await _posing(size, entry)
    try:
        if said.startswith("unsupported"):
            pytest.skip(f"this kernel refuses PR_SET_MM_MAP ({said})")
        assert said == "ready"
        # One that an exec could have passed is still read, so the bound is what decides.
        found = await trio.to_thread.run_sync(procfs.has_env_entry, proc.pid, (entry.encode(),), time.monotonic())
        assert found is read
        assert await trio.to_thread.run_sync(procfs.processes_with_env, entry.encode()) == ([proc.pid] if read else [])
    finally:
        proc.kill()
        await proc.wait()
