"""The reaper where the kernel has no /proc/PID/task/*/children (forced here, with real
children that exit): what has exited is reaped at the cost of what there is to reap, and
never a child whose status is someone else's to read."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from jeeves_mcp.proc import reaper


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
    assert reaper.reap_zombies(lambda: (), young_too=True, most=2) == (2, True)
    assert reaper.reap_zombies(lambda: (), young_too=True, most=2) == (1, False)
    assert unreaped(orphans) == [] and no_children_lists == []


def test_without_children_lists_a_young_child_is_left_while_a_spawn_is_in_flight(
    no_children_lists: list[int],
) -> None:
    young = exited_children(1)
    with reaper.spawning():  # its pid may be a spawn's whose owner does not know it yet
        assert reaper.reap_once() == (0, True)
    assert unreaped(young) == young
    assert reaper.reap_once() == (1, False)


def test_without_children_lists_a_sweep_stops_at_max_per_pass_and_wakes_the_reaper(
    no_children_lists: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill_tree's sweep runs in a thread it cannot abandon: one pass is bounded, and the rest
    is left to `reap_orphans`, woken as by a child's exit."""
    monkeypatch.setattr(reaper, "MAX_PER_PASS", 2)
    monkeypatch.setattr(reaper, "old_enough", lambda stat, now_ticks: True)  # no second's wait
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
