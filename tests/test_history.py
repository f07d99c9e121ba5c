"""Git history as a prior for focused reads of code: real git repositories, a real child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from jeeves_mcp.pruning.engine import select_lines
from jeeves_mcp.pruning.history import line_history
from tests._child import running_child, tool_json
from tests.test_http import call

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0, reason="no git"
)


def git(repo: Path, *args: str, when: int = 1_700_000_000) -> None:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@example.org",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@example.org",
        "GIT_AUTHOR_DATE": f"@{when} +0000",
        "GIT_COMMITTER_DATE": f"@{when} +0000",
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


WORDS = (
    "apple banana cherry damson elder fig grape guava hazel iris jasmine kale lemon lime mango "
    "melon nectar olive orange papaya peach pear pepper plum quince radish raisin rhubarb sage "
    "spinach squash sorrel tamarind thyme tomato turnip vanilla walnut wasabi yam zucchini acorn "
    "almond basil bean beet borage caper carrot celery chive clove cress cumin date dill endive "
    "fennel garlic ginger"
).split()


def module(changed: dict[int, str] | None = None) -> str:
    """Sixty small functions, one per word; `changed` replaces the body line of some."""
    out = []
    for n, word in enumerate(WORDS[:60]):
        body = (changed or {}).get(n, f"    return value + {n}")
        out.append(f"def {word}_handler(value):\n{body}\n\n")
    return "".join(out)


def body_line(n: int) -> int:
    """0-based index of the n-th function's body line in `module()`."""
    return 3 * n + 1


def repository(root: Path, *, same_second: bool = False) -> Path:
    """A repository whose module.py was committed whole, then changed in functions 5, 30 and
    50, one commit each (50 the newest); `same_second`: every commit at the same time, as a
    script or a rebase leaves them."""
    root.mkdir(exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    path = root / "module.py"
    path.write_text(module())
    git(root, "add", "module.py")
    git(root, "commit", "-q", "-m", "first")
    changes: dict[int, str] = {}
    for k, n in enumerate((5, 30, 50), 1):
        changes[n] = f"    return value * {n}  # change {k}"
        path.write_text(module(changes))
        git(root, "commit", "-q", "-am", f"change {k}", when=1_700_000_000 + (0 if same_second else 1000 * k))
    return path


@pytest.mark.parametrize("same_second", [False, True])
async def test_the_last_commits_lines_weigh_most_and_uncommitted_lines_count_as_newest(
    tmp_path: Path, same_second: bool
) -> None:
    path = repository(tmp_path / "repo", same_second=same_second)
    lines = path.read_text().split("\n")[:-1]
    history = await line_history(path, lines, root=path.parent, timeout_s=10, kill_grace_s=1)
    assert history is not None and len(history) == len(lines)
    prior = history.prior
    # Newest first: function 50, then 30, then 5; the first commit's lines get nothing.
    assert prior[body_line(50)] == 1.0
    assert prior[body_line(30)] == 0.5
    assert prior[body_line(5)] == 0.25
    assert sum(1 for p in prior if p) == 3

    lines[body_line(10)] = "    return value - 10  # not committed"
    path.write_text("\n".join(lines) + "\n")
    history = await line_history(path, lines, root=path.parent, timeout_s=10, kill_grace_s=1)
    assert history is not None
    prior = history.prior
    assert prior[body_line(10)] == 1.0
    assert (prior[body_line(50)], prior[body_line(30)], prior[body_line(5)]) == (0.5, 0.25, 0.0)


async def test_a_checkout_with_crlf_line_ends_keeps_its_history(tmp_path: Path) -> None:
    """core.autocrlf shows LF blobs as CRLF lines: the same lines, not all uncommitted."""
    path = repository(tmp_path / "repo")
    lines = [line + "\r" for line in path.read_text().split("\n")[:-1]]
    path.write_bytes("".join(line + "\n" for line in lines).encode())
    history = await line_history(path, lines, root=path.parent, timeout_s=10, kill_grace_s=1)
    assert history is not None
    prior = history.prior
    assert (prior[body_line(50)], prior[body_line(30)], prior[body_line(5)]) == (1.0, 0.5, 0.25)
    assert sum(1 for p in prior if p) == 3


async def test_the_commit_that_wrote_the_file_gives_no_prior(tmp_path: Path) -> None:
    """In a young repository the file's creation is among its last commits: its lines are the
    whole file and say nothing of where to look."""
    root = tmp_path / "young"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    path = root / "module.py"
    path.write_text(module())
    git(root, "add", "module.py")
    git(root, "commit", "-q", "-m", "first")
    path.write_text(module({20: "    return value * 20  # the only change"}))
    git(root, "commit", "-q", "-am", "second")
    lines = path.read_text().split("\n")[:-1]
    history = await line_history(path, lines, root=root, timeout_s=10, kill_grace_s=1)
    assert history is not None
    assert [i for i, p in enumerate(history.prior) if p] == [body_line(20)]


async def test_no_repository_or_an_untracked_file_gives_no_prior_and_edits_are_followed(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "module.py").write_text(module())
    lines = module().split("\n")[:-1]
    got = await line_history(loose / "module.py", lines, root=loose, timeout_s=10, kill_grace_s=1)
    assert got is None
    path = repository(tmp_path / "repo")
    untracked = path.parent / "new.py"
    untracked.write_text(module())
    got = await line_history(untracked, lines, root=path.parent, timeout_s=10, kill_grace_s=1)
    assert got is None
    # Lines added since HEAD shift the rest: the blame follows each line to its new place.
    now = ["import os", "import sys", "", *path.read_text().split("\n")[:-1]]
    path.write_text("\n".join(now) + "\n")
    got = await line_history(path, now, root=path.parent, timeout_s=10, kill_grace_s=1)
    assert got is not None and got.prior[:3] == [1.0, 1.0, 1.0]
    prior = got.prior
    assert (prior[3 + body_line(50)], prior[3 + body_line(30)], prior[3 + body_line(5)]) == (0.5, 0.25, 0)


async def test_a_workspaces_git_config_and_attributes_run_nothing(tmp_path: Path) -> None:
    """What a run's bash can write into its workspace (.git/config, .gitattributes) must not
    make the pruner's git run a command: hooks, filters and textconv all stay unused."""
    path = repository(tmp_path / "repo")
    root = path.parent
    proof = tmp_path / "proof"
    proof.mkdir()
    with (root / ".git" / "config").open("a") as config:
        for key, name in (("core", "fsmonitor"), ("core", "pager"), ("filter \"x\"", "clean"),
                          ("filter \"x\"", "smudge"), ("diff \"x\"", "textconv")):
            config.write(f"[{key}]\n\t{name} = touch {proof}/{name}\n")
    (root / ".gitattributes").write_text("*.py filter=x diff=x\n")
    lines = path.read_text().split("\n")[:-1]
    # The working tree differs from HEAD (.gitattributes is new): blame must still not read it.
    history = await line_history(path, lines, root=root, timeout_s=10, kill_grace_s=1)
    assert history is not None and history.prior[body_line(50)] == 1.0
    assert sorted(os.listdir(proof)) == []


def head_commit(repo: Path) -> str:
    done = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


async def test_a_workspaces_blame_settings_do_not_turn_the_history_off(tmp_path: Path) -> None:
    """A run's bash can point blame.ignoreRevsFile at a file that is not there, or ignore the
    newest commit: the pruner's blame still sees the history as committed."""
    path = repository(tmp_path / "repo")
    root = path.parent
    (root / "ignored-revs").write_text(head_commit(root) + "\n")
    with (root / ".git" / "config").open("a") as config:
        config.write(f"[blame]\n\tignoreRevsFile = {root / 'missing'}\n"
                     f"\tignoreRevsFile = {root / 'ignored-revs'}\n\tmarkIgnoredLines = true\n")
    lines = path.read_text().split("\n")[:-1]
    history = await line_history(path, lines, root=root, timeout_s=10, kill_grace_s=1)
    assert history is not None and history.prior[body_line(50)] == 1.0


def test_the_pruners_git_reaches_no_transport_whatever_the_workspace_allows(tmp_path: Path) -> None:
    """A workspace's protocol.file.allow = always overrides `-c protocol.allow=never`; in a
    partial clone, blame's lazy fetch would then run the workspace's remote.*.uploadpack.
    GIT_NO_LAZY_FETCH stops that fetch; no transport at all is the second wall."""
    from jeeves_mcp.pruning.history import _git_env, find_git

    path = repository(tmp_path / "repo")
    root = path.parent
    with (root / ".git" / "config").open("a") as config:
        config.write("[protocol \"file\"]\n\tallow = always\n")
    git_path = find_git()
    assert git_path is not None
    done = subprocess.run([git_path, "-c", "protocol.allow=never", "ls-remote", f"file://{root}"],
                          cwd=root, env=_git_env(), capture_output=True, text=True)
    assert done.returncode != 0 and "not allowed" in done.stderr, done


def test_the_engine_keeps_a_recently_changed_line_no_question_word_names() -> None:
    lines = module({50: "    return value * 50  # the recent change"}).split("\n")[:-1]
    question = "what does the mango handler return?"
    prior = [0.0] * len(lines)
    prior[body_line(50)] = 1.0
    plain = select_lines(lines, question, "code")
    with_history = select_lines(lines, question, "code", line_prior=prior)
    assert plain.keep[body_line(14)] and with_history.keep[body_line(14)]
    assert not plain.keep[body_line(50)]
    assert with_history.keep[body_line(50)]
    # A prior of the wrong length is ignored, not misapplied.
    wrong = select_lines(lines, question, "code", line_prior=prior[:-1])
    assert wrong.keep == plain.keep
    # Docs and logs have no history prior.
    assert select_lines(lines, question, "logs", line_prior=prior).keep == select_lines(
        lines, question, "logs"
    ).keep


async def test_each_line_carries_the_subject_of_the_commit_that_last_changed_it(
    tmp_path: Path,
) -> None:
    path = repository(tmp_path / "repo")
    lines = path.read_text().split("\n")[:-1]
    lines[body_line(10)] = "    return value - 10  # not committed"
    path.write_text("\n".join(lines) + "\n")
    history = await line_history(path, lines, root=path.parent, timeout_s=10, kill_grace_s=1)
    assert history is not None and len(history.subjects) == len(lines)
    subjects = history.subjects
    assert (subjects[body_line(5)], subjects[body_line(30)], subjects[body_line(50)]) == (
        "change 1", "change 2", "change 3")
    assert subjects[0] == "first" and subjects[body_line(10)] is None
    # A window of the file is a window of both.
    window = history[body_line(30) : body_line(50) + 1]
    assert window.subjects[0] == "change 2" and window.subjects[-1] == "change 3"
    assert window.prior[0] == history.prior[body_line(30)]


async def test_a_commit_subject_of_megabytes_reaches_the_engine_cut(tmp_path: Path) -> None:
    """A run's commits can carry any subject; the engine reads each one's terms on every read
    of the file. One of 6 MB (and 2,000 more of 4 KB) reach it bounded."""
    path = repository(tmp_path / "repo")
    message = tmp_path / "message"
    message.write_text(" ".join(f"w{i:x}" for i in range(800_000)) + "\n")
    path.write_text(module({7: "    return value * 7"}))
    git(path.parent, "commit", "-q", "-a", "-F", str(message))
    lines = path.read_text().split("\n")[:-1]
    history = await line_history(path, lines, root=path.parent, timeout_s=20, kill_grace_s=1)
    assert history is not None
    assert history.subjects[body_line(7)].startswith("w0 w1 w2")
    assert max(len(subject or "") for subject in history.subjects) <= 10_000
    assert history.subjects[0] == "first"
    from jeeves_mcp.pruning.history import MAX_SUBJECT_CHARS, MAX_SUBJECTS_CHARS, blame_commits

    assert max(len(subject or "") for subject in history.subjects) <= MAX_SUBJECT_CHARS

    def entry(k: int) -> str:
        return f"{k:040x} {k + 1} {k + 1} 1\nsummary {'s' * 3_990} {k}\nfilename m.py\n\tline {k}\n"

    _, _, subjects = blame_commits("".join(entry(k) for k in range(2_000)))
    assert sum(map(len, subjects.values())) <= MAX_SUBJECTS_CHARS
    assert len(subjects) == 2_000 and subjects[f"{0:040x}"].endswith(" 0")


def test_an_earlier_change_on_the_questions_topic_is_kept() -> None:
    """Lines written by a commit whose subject shares two terms with the question are worth
    more; one shared term is not enough."""
    lines = module().split("\n")[:-1]
    question = "overflow of large walnut values"
    subjects: list[str | None] = ["first"] * len(lines)
    subjects[body_line(20)] = "Guard against overflow in large inputs"
    plain = select_lines(lines, question, "code")
    on_topic = select_lines(lines, question, "code", line_subjects=subjects)
    assert plain.keep[body_line(37)] and on_topic.keep[body_line(37)]  # walnut_handler
    assert not plain.keep[body_line(20)]
    assert on_topic.keep[body_line(20)]
    subjects[body_line(20)] = "Guard against overflow"
    assert select_lines(lines, question, "code", line_subjects=subjects).keep == plain.keep
    assert select_lines(lines, question, "code", line_subjects=subjects[:-1]).keep == plain.keep


async def test_the_pruner_hands_the_commit_subjects_to_the_engine() -> None:
    from jeeves_mcp.pruner_config import PrunerConfig
    from jeeves_mcp.pruning import LocalEngine, PruneOptions, Pruner
    from jeeves_mcp.pruning.contract import LineHistory
    from jeeves_mcp.pruning.recovery import RecoveryStore

    lines = module().split("\n")[:-1]
    subjects: list[str | None] = ["first"] * len(lines)
    subjects[body_line(20)] = "Guard against overflow in large inputs"
    history = LineHistory([0.0] * len(lines), subjects)
    pruner = Pruner(PrunerConfig(), RecoveryStore(60, 1 << 20), LocalEngine())
    question = "overflow of large walnut values"
    shown = {}
    for given in (None, history):
        outcome = await pruner.prune("\n".join(lines), question, "code", PruneOptions(),
                                     line_prior=given)
        shown[given is None] = outcome.contract()["pruned_text"]
    assert "def walnut_handler(value):" in shown[True] and "def walnut_handler(value):" in shown[False]
    assert "def peach_handler(value):" not in shown[True]
    assert "def peach_handler(value):" in shown[False]


@pytest.mark.parametrize("history_ms", ["1000", "0"])
async def test_a_focused_read_in_a_git_workspace_shows_the_last_change(
    tmp_path: Path, history_ms: str
) -> None:
    path = repository(tmp_path / "repo")
    question = "what does the mango handler return?"
    env = {"JEEVES_MCP_HISTORY_TIMEOUT_MS": history_ms}
    async with running_child(path.parent, tmp_path, env=env) as child:
        async with httpx.AsyncClient(headers=child.headers()) as http:
            result = tool_json(await call(http, child, "read", {
                "path": "module.py", "context_focus_question": question,
            }))
            # A window of the file gets the window's share of the prior, at the right lines.
            window = tool_json(await call(http, child, "read", {
                "path": "module.py", "offset": 31, "limit": 150, "context_focus_question": question,
            }))
    assert window["pruning"]["applied"]
    numbered = [row for row in window["content"].split("\n") if "# change 3" in row]
    if history_ms == "0":
        assert not numbered
    else:
        assert len(numbered) == 1 and int(numbered[0].split("│")[0]) == body_line(50) + 1
    assert result["pruning"]["applied"]
    shown = result["content"]
    assert "def mango_handler(value):" in shown
    assert ("# change 3" in shown) is (history_ms != "0")


@pytest.mark.parametrize("flag", ["--history", "--no-history"])
def test_the_prune_command_weighs_history_in_a_repository(tmp_path: Path, flag: str) -> None:
    path = repository(tmp_path / "repo")
    done = subprocess.run(
        [sys.executable, "-m", "jeeves_mcp", "prune", str(path), "-q",
         "what does the mango handler return?", flag],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "def mango_handler(value):" in done.stdout
    assert ("# change 3" in done.stdout) is (flag == "--history")


async def test_a_child_stops_asking_git_after_it_ran_out_of_time_twice(tmp_path: Path) -> None:
    """In a repository too slow for the timeout, every first read of a file would wait for it:
    after two timeouts the child gives history up (the rest of pruning goes on)."""
    from jeeves_mcp.pruning import history

    path = repository(tmp_path / "repo")
    lines = path.read_text().split("\n")[:-1]
    kwargs = {"root": path.parent, "kill_grace_s": 1.0}
    history._state = history._State()  # this process's own count, as a fresh child has
    try:
        assert await line_history(path, lines, timeout_s=10, **kwargs) is not None
        for n in range(history.GIVE_UP_AFTER):
            path.write_text(path.read_text() + f"# edit {n}\n")  # a new key: not from the cache
            lines = path.read_text().split("\n")[:-1]
            assert await line_history(path, lines, timeout_s=1e-6, **kwargs) is None
        path.write_text(path.read_text() + "# one more\n")
        lines = path.read_text().split("\n")[:-1]
        assert await line_history(path, lines, timeout_s=10, **kwargs) is None
    finally:
        history._state = history._State()


def difflib_asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The lengths of the two sides of every stretch difflib is asked to match from now on."""
    import difflib

    asked: list[tuple[int, int]] = []
    real = difflib.SequenceMatcher

    def recording(isjunk: object, a: list[str], b: list[str], autojunk: bool = True) -> difflib.SequenceMatcher:
        asked.append((len(a), len(b)))
        return real(None, a, b, autojunk=autojunk)

    monkeypatch.setattr(difflib, "SequenceMatcher", recording)
    return asked


def test_realigning_an_edited_file_never_hands_difflib_a_long_stretch(monkeypatch: pytest.MonkeyPatch) -> None:
    """difflib's matcher is cubic on lines that repeat (blank lines between rewritten ones: a
    4,000-line file took minutes, in a thread nothing cancels). The realignment matches the
    common head and tail and the lines unique to both first, and asks difflib only about the
    short stretches between them; a longer stretch counts as changed."""

    from jeeves_mcp.pruning import history

    asked = difflib_asked(monkeypatch)
    head = [f"value_{i} = {i}" if i % 2 else "" for i in range(4000)]
    commits = [f"{i % 7:040x}" for i in range(4000)]
    now = [f"value_{i} = {i} + 1" if i % 2 else "" for i in range(4000)]  # every line rewritten
    aligned = history.align(head, commits, now)
    assert aligned is not None and all(c == history.UNCOMMITTED for c in aligned[1::2])
    assert all(a * b <= history.ALIGN_STRETCH ** 2 for a, b in asked), asked[:3]
    # Short on one side is not enough: 100 lines of HEAD against 20,000 now, no line unique to
    # both, took 6.7 s of CPU (a run's bash commits a file, then rewrites it).
    head = ["A", *["x"] * 98, "B"]
    now = ["C", *["x", "y"] * 9998, "D"]
    for old, new in ((head, now), (now, head)):
        asked.clear()
        aligned = history.align(old, ["c" * 40] * len(old), new)
        assert aligned is not None and len(aligned) == len(new)
        assert all(a * b <= history.ALIGN_STRETCH ** 2 for a, b in asked), asked[:3]
    # An ordinary edit still carries every untouched line's commit over.
    code = [f"def f{i}(x):\n    return x + {i}\n" for i in range(600)]
    head = "\n".join(code).split("\n")
    commits = [f"{i:040x}" for i in range(len(head))]
    now = [*head[:900], "    # a new comment", *head[900:1500], *head[1502:]]
    aligned = history.align(head, commits, now)
    assert aligned is not None
    assert aligned[900] == history.UNCOMMITTED
    assert aligned[:900] == commits[:900] and aligned[901:1501] == commits[900:1500]
    assert aligned[1501:] == commits[1502:]


def test_realigning_gives_difflib_a_bounded_amount_of_work_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each stretch short, but 200 of them: a 20,000-line file of repeated lines between unique
    anchors, rewritten in the working tree, took 1.7 s of CPU in a thread no deadline reaches
    (the attack review of 2026-11-29). The stretches past ALIGN_WORK count as changed."""

    from jeeves_mcp.pruning import history

    asked = difflib_asked(monkeypatch)
    head: list[str] = []
    now: list[str] = []
    for k in range(200):
        head += [f"# anchor {k}", *["x = 1"] * 99]
        now += [f"# anchor {k}", *["x = 1", "y = 2"] * 49, "x = 1"]
    head[-1], now[-1] = "last", "changed last"  # no common tail to take the stretches away
    aligned = history.align(head, ["c" * 40] * len(head), now)
    assert aligned is not None and len(aligned) == len(now)
    assert sum(a * b for a, b in asked) <= history.ALIGN_WORK
    assert all(aligned[100 * k] == "c" * 40 for k in range(200))  # every anchor carried over


async def test_the_blames_kept_are_bounded_by_their_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run touching a 250,000-line file between reads made the child keep 32 blames of it,
    250 MB (the attack review of 2026-11-29): the blames kept are bounded by their lines too,
    and a file over MAX_BLAME_LINES is not blamed."""
    from jeeves_mcp.pruning import history

    path = repository(tmp_path / "repo")
    lines = path.read_text().split("\n")[:-1]
    monkeypatch.setattr(history, "CACHE_LINES", 2 * len(lines))
    monkeypatch.setattr(history, "_state", history._State())
    for k in range(5):
        os.utime(path, ns=(1_700_000_000_000_000_000 + k, 1_700_000_000_000_000_000 + k))  # a new key each time
        assert await line_history(path, lines, root=path.parent, timeout_s=10, kill_grace_s=1) is not None
    kept = [h for h in history._state.cache.values() if h is not None]
    assert len(kept) == 2 and sum(len(h) for h in kept) <= history.CACHE_LINES
    monkeypatch.setattr(history, "MAX_BLAME_LINES", len(lines) - 1)
    os.utime(path, ns=(1_700_000_000_000_000_100, 1_700_000_000_000_000_100))
    assert await line_history(path, lines, root=path.parent, timeout_s=10, kill_grace_s=1) is None


async def test_a_child_that_gave_git_up_asks_again_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two timeouts under a passing load (eight big reads at once) turned history off for the
    child's life (the attack review of 2026-11-29): after RETRY_AFTER_S it asks again, once."""
    from jeeves_mcp.pruning import history

    path = repository(tmp_path / "repo")
    kwargs = {"root": path.parent, "kill_grace_s": 1.0}
    monkeypatch.setattr(history, "_state", history._State())

    async def read_after_edit(n: int, timeout_s: float) -> object:
        path.write_text(path.read_text() + f"# edit {n}\n")  # a new key: not from the cache
        return await line_history(path, path.read_text().split("\n")[:-1], timeout_s=timeout_s, **kwargs)

    for n in range(history.GIVE_UP_AFTER):
        assert await read_after_edit(n, 1e-6) is None
    assert await read_after_edit(10, 10) is None  # given up: not asked
    monkeypatch.setattr(history._state, "retry_at", 0.0)  # the wait is over
    assert await read_after_edit(11, 10) is not None  # asked again, answered
    assert await read_after_edit(12, 1e-6) is None  # one more timeout gives up again at once
    assert await read_after_edit(13, 10) is None
