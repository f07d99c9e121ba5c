"""The reaper where the kernel has no /proc/PID/task/*/children (forced here, with real
children that exit): what has exited is reaped at the cost of what there is to reap, and
never a child whose status is someone else's to read. The spawns in flight, on either kernel."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from jeeves_mcp.proc import reaper
from jeeves_mcp.proc.procfs import pidfd_pids, proc_stat
from tests._ages import until_started_ago


@pytest.fixture
def no_children_lists(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The reaper as on such a kernel; the list of how many pids each /proc listing gave.
    What the test leaves exited is reaped after it, so a failure does not spread."""
    listings: list[int] = []
    real_list_pids = reaper.list_pids

    def list_pids() -> list[int]:
        listings.append(len(found := real_list_pids()))
        return found

    monkeypatch.setattr(reaper, "own_children", lambda: None)
    monkeypatch.setattr(reaper, "list_pids", list_pids)
    # waitid(P_ALL) would name an earlier test's exited child first: none may be there.
    assert first_exited() is None, "an exited child of this process from before the test"
    yield listings
    while (pid := first_exited()) is not None:
        os.waitpid(pid, 0)


@pytest.fixture(params=[True, False], ids=["children_lists", "no_children_lists"])
def either_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The reaper with children lists, then as on a kernel without them."""
    if not request.param:
        monkeypatch.setattr(reaper, "own_children", lambda: None)
    assert first_exited() is None, "an exited child of this process from before the test"
    yield
    while (pid := first_exited()) is not None:
        os.waitpid(pid, 0)


def exited_children(count: int, code: int = 0) -> list[int]:
    """`count` children that have exited with `code`, not reaped."""
    pids = [os.posix_spawn("/bin/sh", ["sh", "-c", f"exit {code}"], {}) for _ in range(count)]
    for pid in pids:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # until it exits; WNOWAIT: not reaped
    return pids


def first_exited() -> int | None:
    """The exited child waitid(P_ALL) names first, not reaped."""
    try:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    return None if info is None else info.si_pid


def until_a_tick_after(pid: int) -> None:
    """Until the boot clock is two ticks (of /proc/PID/stat's start times) past `pid`'s start."""
    started = int((proc_stat(pid) or [])[19])
    deadline = time.monotonic() + 10
    while time.clock_gettime_ns(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK") // 10**9 < started + 2:
        assert time.monotonic() < deadline
        time.sleep(0.005)


def unreaped(pids: list[int]) -> list[int]:
    """Those of `pids` still exited children of ours: not reaped."""
    left = []
    for pid in pids:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                left.append(pid)
        except ChildProcessError:  # reaped
            pass
    return left


def test_without_children_lists_a_pass_reaps_without_listing_proc(no_children_lists: list[int]) -> None:
    orphans = exited_children(5)
    assert reaper.reap_once() == (5, False)
    assert unreaped(orphans) == []
    assert no_children_lists == []  # waitid named each: no look at every pid of the host
    assert reaper.reap_once() == (0, False)


def test_without_children_lists_a_child_awaited_is_left_and_the_rest_reaped(no_children_lists: list[int]) -> None:
    command = exited_children(1, code=7)[0]  # the oldest: waitid names it first
    orphans = exited_children(3)
    try:
        assert first_exited() == command
        with reaper.awaiting(command):
            assert reaper.reap_once() == (3, False)
        assert unreaped(orphans) == [] and unreaped([command]) == [command]
        assert len(no_children_lists) == 1  # once, to look past the command
    finally:  # read as its awaiter would, and never left to the next test
        status = os.waitpid(command, 0) if unreaped([command]) else None
    assert status == (command, 7 << 8)


def test_without_children_lists_a_pass_stops_at_most_and_says_some_are_left(no_children_lists: list[int]) -> None:
    orphans = exited_children(3)
    assert reaper.reap_zombies(lambda: (), most=2) == (2, True)
    assert reaper.reap_zombies(lambda: (), most=2) == (1, False)
    assert unreaped(orphans) == [] and no_children_lists == []


def test_without_children_lists_a_sweep_stops_at_max_per_pass_and_wakes_the_reaper(
    no_children_lists: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill_tree's sweep runs in a thread it cannot abandon: one pass is bounded, and the rest
    is left to `reap_orphans`, woken as by a child's exit."""
    monkeypatch.setattr(reaper, "MAX_PER_PASS", 2)
    orphans = exited_children(3)
    woken: list[int] = []
    previous = signal.signal(signal.SIGCHLD, lambda signum, frame: woken.append(signum))
    try:
        assert reaper.sweep_zombies() == 2
        assert len(unreaped(orphans)) == 1 and woken == [signal.SIGCHLD]
        assert reaper.sweep_zombies() == 1
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert unreaped(orphans) == [] and woken == [signal.SIGCHLD]


def test_a_command_that_exited_while_its_spawn_was_in_flight_is_left_however_old(either_kernel: None) -> None:
    """Its pid is its runner's only once the spawn returns, which a blocked event loop delays
    past any age: the reaper's pass and kill_tree's sweep leave it, its status stays its own."""
    with reaper.spawning():
        command = exited_children(1, code=7)[0]
        until_started_ago(command)  # a blocked event loop delays the spawn's return that long
        assert reaper.reap_once() == (0, True)
        assert reaper.sweep_zombies() == 0
        assert unreaped([command]) == [command]
    assert os.waitpid(command, 0) == (command, 7 << 8)


def test_a_child_started_before_the_spawns_in_flight_is_reaped_at_once(either_kernel: None) -> None:
    orphan = exited_children(1)[0]  # young, but older than any spawn in flight
    until_a_tick_after(orphan)
    with reaper.spawning():
        command = exited_children(1, code=7)[0]
        assert reaper.reap_once() == (1, True)
        assert unreaped([orphan, command]) == [command]
    assert os.waitpid(command, 0) == (command, 7 << 8)
    assert reaper.reap_once() == (0, False)


def test_a_sweep_in_a_thread_reads_the_pidfds_again_after_a_spawn_returned(either_kernel: None) -> None:
    """kill_tree's sweep runs in a thread beside the event loop's spawns: a spawn may return
    (its pidfd open, its pid no longer in flight) after the sweep read which pids have one."""
    orphan = exited_children(1)[0]  # decided first: the held pids are read for it
    until_a_tick_after(orphan)
    spawn = reaper.spawning()
    spawn.__enter__()
    command = exited_children(1, code=7)[0]
    pidfds: list[int] = []

    def held() -> set[int]:
        found = pidfd_pids()
        if not pidfds:  # the spawn returns now, while this pass goes on
            pidfds.append(os.pidfd_open(command))
            spawn.__exit__(None, None, None)
        return found

    try:
        assert reaper.reap_zombies(held, most=10) == (1, False)
        assert unreaped([orphan, command]) == [command]
    finally:
        for fd in pidfds:
            os.close(fd)
    assert os.waitpid(command, 0) == (command, 7 << 8)


def test_a_sweep_reaps_an_exited_child_nobody_waits_for_however_young(either_kernel: None) -> None:
    """Every spawn of the daemon and of the child says so (`spawning()`), and trio holds a pidfd
    for each of its children until it has read its status: a sweep needs no age to tell them
    from an orphan, and takes one that exited a moment ago."""
    held = exited_children(1, code=7)[0]
    orphan = exited_children(1)[0]
    pidfd = os.pidfd_open(held)
    try:
        assert reaper.sweep_zombies() == 1
        assert unreaped([held, orphan]) == [held]
    finally:
        os.close(pidfd)
    assert os.waitpid(held, 0) == (held, 7 << 8)
