"""Which lines of a file changed last, from git: a prior for pruning code.

A fix lands far more often in what a file's last commits changed than anywhere
else: on 884 commit tasks from 17 repositories the engine was not tuned on, the
lines of the file's latest commit (2.7 % of its lines) held the fix in 18 % of
the cases. The engine gives such lines a small share of its value
(`select_lines(line_prior=...)`), so a question that names nothing in them
still sees them. Commits are ranked by `git rev-list` (history order, which
holds when commit times tie), and one that wrote most of the file (its
creation, in a young repository) counts for nothing. The subject of the commit
that last changed each line comes along (`line_subjects`): a question that
shares terms with an earlier change's subject weighs what that change wrote.

A search's files get a prior of the same kind (`file_ages`): the file a fix lands in is
far more often one of the last commits' than any other file the search names (the newest
commit's files held it 5 to 7 times their share on 650 search tasks). Git runs as the user
the run's commands run as (`command_user`), with no system
or global config, and blames HEAD, not the working tree: no clean filter and no
fsmonitor hook of the workspace's config runs. Lines changed since HEAD count as
the newest. Any failure (no git, no repository, an untracked file, a timeout)
means no prior: pruning goes on without it.
"""

from __future__ import annotations

import bisect
import difflib
import functools
import logging
import os
import re
import secrets
import shutil
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

from jeeves_mcp.mcp.errors import ToolError
from jeeves_mcp.proc.runner import command_user, run_command
from jeeves_mcp.pruning.contract import FileAges, LineHistory

__all__ = ["ages_from_log", "ages_lookup", "file_ages", "file_log", "find_git", "history_from_blame", "line_history"]

log = logging.getLogger("jeeves_mcp.pruning")

# Lines of the file's last RECENT_COMMITS commits get a prior, halved per older commit.
RECENT_COMMITS = 3
DECAY = 0.5
# ... unless the commit wrote more than this share of the file's lines.
WHOLE_FILE = 0.5
# Files larger than this are not blamed (the pruner would not prune them either).
MAX_FILE_BYTES = 2 * 1024 * 1024
# Above this many lines a file that differs from HEAD is not realigned.
MAX_ALIGN_LINES = 20_000
# difflib realigns only the stretches between anchors of at most ALIGN_STRETCH x ALIGN_STRETCH
# lines (their two lengths multiplied): its matcher is cubic on repeated lines (a 4,000-line
# file of blank and rewritten lines took minutes; 100 lines against 20,000, 6.7 s), while a
# stretch this small costs milliseconds at worst. A larger one counts as changed.
ALIGN_STRETCH = 100
# ... and this much of them in all (the stretches' lengths multiplied, summed): 200 stretches of
# 100 x 100 repeated lines, a 20,000-line file rewritten between unique anchors, took 1.7 s of
# CPU past every deadline (the attack review of 2026-11-29). The stretches past it count as changed.
ALIGN_WORK = 10 * ALIGN_STRETCH * ALIGN_STRETCH
# Blames kept per child, keyed by the file's identity and modification time: this many, and
# this many lines in all (about 16 bytes a line; a run touching a 250,000-line file 32 times
# made the child keep 250 MB).
CACHE_SIZE = 32
CACHE_LINES = 400_000
# A file of more lines is not blamed: its porcelain parse alone held 83 MB at 250,000 lines.
MAX_BLAME_LINES = 50_000
# After this many git commands ran out of time, a child stops asking for RETRY_AFTER_S: in a repository that slow (a huge monorepo), every first read of a file would
# otherwise wait the whole timeout. Then it asks once more: two timeouts under a passing load
# (eight big reads at once, the attack review of 2026-11-29) turned history off for good.
GIVE_UP_AFTER = 2
RETRY_AFTER_S = 600.0
# A subject is a paragraph (the longest in 128 fetched repositories: 2,778 characters); a run's
# commits can make theirs megabytes, whose terms the engine reads on every read of the file.
MAX_SUBJECT_CHARS = 4_000
MAX_SUBJECTS_CHARS = 256 * 1024  # all a blame's subjects together; past it, no subject
# A search's files changed by the last RECENT_FILE_COMMITS commits have an age (past about 25,
# the engine's weight of one is nil); the ages of this many repository states are kept.
RECENT_FILE_COMMITS = 40
AGES_CACHE_SIZE = 8
# A commit that lists more files than this (a reformat, a vendored tree) says nothing of where a
# fix lands: its files get no age from it. The log is read up to MAX_LOG_BYTES (newest first:
# the commits read whole keep their ages).
MASS_COMMIT_FILES = 500
MAX_LOG_BYTES = 1024 * 1024
# A commit's object name (SHA-1 or SHA-256).
_OBJECT_NAME = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
# Whatever the workspace's config says: no fsmonitor hook, no transport (a partial clone would
# fetch what a command needs, with the workspace's sshCommand).
_NO_HOOKS = ["-c", "core.fsmonitor=false", "-c", "protocol.allow=never"]
# The commit git blame shows for lines changed since HEAD.
UNCOMMITTED = "0" * 40


@dataclass
class _State:
    cache: OrderedDict[tuple[str, int, int, int], LineHistory | None] = field(
        default_factory=OrderedDict
    )
    ages: OrderedDict[tuple[str, str], dict[str, int]] = field(default_factory=OrderedDict)
    timeouts: int = 0
    retry_at: float = 0.0  # time.monotonic() when a child that gave up asks again
    unstarted: int = 0  # git commands that could not start (no process, no descriptor to be had)


_state = _State()


def blame_commits(porcelain: str) -> tuple[list[str], list[str], dict[str, str]]:
    """The lines, the commit of each line and each commit's subject from `git blame
    --porcelain`."""
    lines: list[str] = []
    commits: list[str] = []
    subjects: dict[str, str] = {}
    room = MAX_SUBJECTS_CHARS
    sha = ""
    for row in porcelain.split("\n"):
        if row.startswith("\t"):
            lines.append(row[1:])
            commits.append(sha)
            continue
        head, _, rest = row.partition(" ")
        if len(head) == 40 and rest[:1].isdigit():
            sha = head
        elif head == "summary" and sha and sha not in subjects:
            subjects[sha] = rest[: min(MAX_SUBJECT_CHARS, room)]
            room -= len(subjects[sha])
    return lines, commits, subjects


def recency_prior(commits: Sequence[str], newest_first: Sequence[str]) -> list[float]:
    """Per line: DECAY ** k for a line of the k-th newest commit (k < RECENT_COMMITS), else 0.
    `newest_first`: the commits that changed the file, newest first (`git rev-list`, whose
    order holds when commit times tie, as after a rebase); lines changed since HEAD come
    before them all."""
    order = [UNCOMMITTED] if UNCOMMITTED in commits else []
    order += [c for c in newest_first if c != UNCOMMITTED]
    lines_of = Counter(commits)
    weight = {
        c: DECAY**k
        for k, c in enumerate(order[:RECENT_COMMITS])
        # A commit that wrote most of the file (its creation, a rewrite) says nothing of where.
        if lines_of[c] <= WHOLE_FILE * len(commits)
    }
    return [weight.get(c, 0.0) for c in commits]


def align(head_lines: list[str], head_commits: list[str], lines: Sequence[str]) -> list[str] | None:
    """The commits of HEAD's lines carried over to `lines` (the file as it is now); lines
    not in HEAD are uncommitted."""
    # Line ends aside: a checkout with core.autocrlf shows CRLF lines of LF blobs.
    head = [line.removesuffix("\r") for line in head_lines]
    now = [line.removesuffix("\r") for line in lines]
    if head == now:
        return head_commits
    if max(len(head), len(now)) > MAX_ALIGN_LINES:
        return None
    out = [UNCOMMITTED] * len(lines)
    for a, b, size in _matching_runs(head, now):
        out[b : b + size] = head_commits[a : a + size]
    return out


def _matching_runs(a: list[str], b: list[str]) -> Iterator[tuple[int, int, int]]:
    """Runs (i, j, n) with a[i:i+n] == b[j:j+n], in order: the common head and tail, then in
    between the lines found once in each (in the longest order both agree on, as patience
    diff anchors them), and difflib's matches in the short stretches between anchors."""
    most = min(len(a), len(b))
    head = 0
    while head < most and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < most - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    yield 0, 0, head
    a_end, b_end = len(a) - tail, len(b) - tail
    seen_a = Counter(a[head:a_end])
    seen_b = Counter(b[head:b_end])
    where_b = {b[j]: j for j in range(head, b_end) if seen_b[b[j]] == 1}
    pairs = [(i, where_b[a[i]]) for i in range(head, a_end) if seen_a[a[i]] == 1 and a[i] in where_b]
    i0, j0 = head, head
    work = ALIGN_WORK
    for i, j in [*_increasing_by_second(pairs), (a_end, b_end)]:
        if 0 < (i - i0) * (j - j0) <= min(ALIGN_STRETCH * ALIGN_STRETCH, work):
            work -= (i - i0) * (j - j0)
            matcher = difflib.SequenceMatcher(None, a[i0:i], b[j0:j], autojunk=False)
            yield from ((i0 + x, j0 + y, n) for x, y, n in matcher.get_matching_blocks() if n)
        if i < a_end:
            yield i, j, 1
        i0, j0 = i + 1, j + 1
    yield a_end, b_end, tail


def _increasing_by_second(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of `pairs` (sorted by their first) whose seconds increase."""
    tails: list[int] = []  # tails[k]: index in pairs of the smallest end of a run of k + 1
    ends: list[int] = []  # ends[k] = pairs[tails[k]][1]
    before = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        at = bisect.bisect_left(ends, j)
        if at:
            before[k] = tails[at - 1]
        if at == len(tails):
            tails.append(k)
            ends.append(j)
        else:
            tails[at], ends[at] = k, j
    run: list[tuple[int, int]] = []
    k = tails[-1] if tails else -1
    while k >= 0:
        run.append(pairs[k])
        k = before[k]
    return run[::-1]


def history_from_blame(
    porcelain: str, newest_first: Sequence[str], lines: Sequence[str]
) -> LineHistory | None:
    """The recency prior of `lines` and the subject of the commit that last changed each
    (None: changed since) from git's answers: `git blame --porcelain` of the file at some
    commit and `git rev-list` of the file's commits from it, newest first."""
    head_lines, head_commits, subjects = blame_commits(porcelain)
    if not head_lines or not newest_first:
        return None
    commits = align(head_lines, head_commits, lines)
    if commits is None:
        return None
    return LineHistory(recency_prior(commits, newest_first), [subjects.get(c) for c in commits])


@functools.cache
def find_git() -> str | None:
    """The git the history prior runs (on a fixed PATH: not one a workspace could put first)."""
    return shutil.which("git", path=_git_env()["PATH"])


def _git_env() -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_NO_LAZY_FETCH": "1",
        # No transport: a workspace's protocol.<name>.allow overrides -c protocol.allow=never.
        "GIT_ALLOW_PROTOCOL": "",
        "HOME": "/nonexistent",
    }


async def line_history(
    path: Path, lines: Sequence[str], *, root: Path, timeout_s: float, kill_grace_s: float
) -> LineHistory | None:
    """The history of each of `lines` (the whole file at `path`, as read), or None."""
    try:
        info = os.stat(path)  # the read that came before blocked as long
    except OSError:
        return None
    if info.st_size > MAX_FILE_BYTES or len(lines) > MAX_BLAME_LINES or _given_up():
        return None
    key = (str(path), info.st_ino, info.st_mtime_ns, info.st_size)
    cache = _state.cache
    if key in cache:
        cache.move_to_end(key)
        prior = cache[key]
    else:
        prior = await _blame(path, lines, root, timeout_s, kill_grace_s)
        cache[key] = prior
        kept = sum(len(h) for h in cache.values() if h is not None)
        while len(cache) > CACHE_SIZE or kept > CACHE_LINES:
            _, dropped = cache.popitem(last=False)
            kept -= 0 if dropped is None else len(dropped)
    if prior is None or len(prior) != len(lines):
        return None
    return prior


async def _blame(
    path: Path, lines: Sequence[str], root: Path, timeout_s: float, kill_grace_s: float
) -> LineHistory | None:
    git = find_git()
    if git is None or timeout_s <= 0:
        return None
    deadline = trio.current_time() + timeout_s
    # No textconv; HEAD, so no clean filter reads the working tree.
    safe = [git, *_NO_HOOKS]
    newest = await _git(
        [*safe, "rev-list", f"--max-count={RECENT_COMMITS}", "HEAD", "--", path.name],
        path.parent, root, deadline, kill_grace_s,
    )
    if not newest:
        return None
    # The workspace may set blame.ignoreRevsFile (a missing file fails the blame, a listed
    # commit hides its lines). Git sorts those files, so an empty one does not reset them;
    # --no-ignore-revs-file drops them all.
    porcelain = await _git(
        [*safe, "blame", "--porcelain", "--no-textconv", "--no-ignore-revs-file", "HEAD",
         "--", path.name],
        path.parent, root, deadline, kill_grace_s,
    )
    if porcelain is None:
        return None
    return await trio.to_thread.run_sync(history_from_blame, porcelain, newest.split(), lines)


def file_log(marker: str, rev: str = "HEAD") -> list[str]:
    """`git log` (the arguments after `git`) naming the files each of the last
    RECENT_FILE_COMMITS commits from `rev` changed, each commit's header `marker` (its `%x01`,
    `%x02` as git's format escapes them) and its parents: names from the top whatever the
    workspace's diff.relative, no rename detection (its cost grows with a commit's files), no
    signature check (log.showSignature runs gpg)."""
    return ["log", "-z", "--name-only", "--no-relative", "--no-renames", "--no-show-signature",
            f"--max-count={RECENT_FILE_COMMITS}", f"--format={marker}%P", rev, "--"]


def ages_from_log(log_z: str, marker: str) -> dict[str, int]:
    """Per file (its path from the repository's top), how many commits ago it last changed
    (0: the newest), from file_log's output (`marker` as git prints it). A commit with no
    parent (a root, a shallow clone's boundary: it lists the whole tree) or with more than
    MASS_COMMIT_FILES files gives its files no age; a last name cut short is dropped."""
    ages: dict[str, int] = {}
    age = -1
    files: list[str] = []
    counts = False

    def close() -> None:
        if counts and len(files) <= MASS_COMMIT_FILES:
            for name in files:
                ages.setdefault(name, age)

    for token in log_z[: log_z.rfind("\0") + 1].split("\0"):
        name = token.removeprefix("\n")  # the line break after a commit's header
        if name.startswith(marker):
            close()
            age, files, counts = age + 1, [], bool(name[len(marker) :].strip())
        elif name and age >= 0 and len(files) <= MASS_COMMIT_FILES:
            files.append(name)
    close()
    return ages


async def file_ages(
    base: Path, *, root: Path, timeout_s: float, kill_grace_s: float
) -> FileAges | None:
    """How many commits ago the file a search run in `base` names (a path relative to it, as
    its rows say) last changed, among HEAD's last RECENT_FILE_COMMITS; None: no git, no
    repository or commit, a timeout. Uncommitted changes do not count (only HEAD is read)."""
    git = find_git()
    if git is None or timeout_s <= 0 or _given_up():
        return None
    deadline = trio.current_time() + timeout_s
    safe = [git, *_NO_HOOKS]
    where = await _git([*safe, "rev-parse", "--show-toplevel", "--show-prefix", "HEAD"], base, root, deadline,
                       kill_grace_s)
    # Paths are printed as they are, one a line: a directory named with line breaks is refused.
    fields = [] if where is None else where.split("\n")
    if len(fields) != 4 or fields[3] or not fields[0] or not _OBJECT_NAME.fullmatch(fields[2]):
        return None
    top, prefix, head = fields[:3]
    key = (top, head)
    ages = _state.ages.get(key)
    if ages is None:
        before = (_state.timeouts, _state.unstarted)
        # A header no name in the repository can pass for: a commit's files are told by it.
        nonce = secrets.token_hex(8)
        log_z = await _git([*safe, *file_log(f"%x01{nonce}%x02")], base, root, deadline, kill_grace_s,
                           max_bytes=MAX_LOG_BYTES, cut_ok=True)
        if log_z is None and (_state.timeouts, _state.unstarted) != before:
            return None  # asked again next time (until git is given up on, for timeouts)
        ages = {} if log_z is None else await trio.to_thread.run_sync(ages_from_log, log_z, f"\x01{nonce}\x02")
        _state.ages[key] = ages  # a failure too: it would fail again for this HEAD
        while len(_state.ages) > AGES_CACHE_SIZE:
            _state.ages.popitem(last=False)
    _state.ages.move_to_end(key)
    return ages_lookup(ages, top, prefix) if ages else None


def ages_lookup(ages: dict[str, int], top: str, prefix: str) -> FileAges:
    """The age of a file named relative to the directory `prefix` (from the top, `top`, of the
    repository whose `ages` they are), or absolute."""
    return functools.partial(_age_of, ages, top, prefix)


def _age_of(ages: dict[str, int], top: str, prefix: str, name: str) -> int | None:
    where = os.path.normpath(os.path.join(prefix, name))
    if os.path.isabs(where):
        where = os.path.relpath(where, top)
    return ages.get(where)


async def _git(
    argv: list[str], cwd: Path, root: Path, deadline: float, kill_grace_s: float, *,
    max_bytes: int = 8 * MAX_FILE_BYTES, cut_ok: bool = False,
) -> str | None:
    """What a git command printed, or None if it failed or ran out of time; past `max_bytes`,
    its first `max_bytes` with `cut_ok`, else None."""
    timeout_s = deadline - trio.current_time()
    if timeout_s <= 0:
        _timed_out()
        return None
    try:
        result = await run_command(
            argv,
            cwd=cwd,
            env=_git_env(),
            timeout_s=timeout_s,
            max_output_bytes=max_bytes,
            kill_grace_s=kill_grace_s,
            keep_tail=False,
            user=command_user(root),
        )
    except ToolError as exc:
        if exc.code == "TOOL_TIMEOUT":
            _timed_out()
        log.debug("history.git_failed", extra={"reason": exc.code})
        return None
    except OSError as exc:  # no process to be had (descriptors, processes): no prior
        _state.unstarted += 1
        log.debug("history.git_failed", extra={"reason": exc.strerror})
        return None
    if result.exit_code != 0 or (result.truncated and not cut_ok):
        return None
    return result.stdout.decode("utf-8", "replace")


def _timed_out() -> None:
    _state.timeouts += 1
    if _state.timeouts == GIVE_UP_AFTER:
        _state.retry_at = time.monotonic() + RETRY_AFTER_S
        log.warning("history.given_up", extra={"reason": "git ran out of time twice",
                                               "retry_after_s": RETRY_AFTER_S})


def _given_up() -> bool:
    """Whether git ran out of time GIVE_UP_AFTER times, the last less than RETRY_AFTER_S ago;
    past that, one more try (a timeout gives up again at once)."""
    if _state.timeouts < GIVE_UP_AFTER:
        return False
    if time.monotonic() < _state.retry_at:
        return True
    _state.timeouts = GIVE_UP_AFTER - 1
    return False
