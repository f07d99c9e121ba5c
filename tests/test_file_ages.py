"""How lately the files a search names changed, as a prior for its rows: real git repositories,
the engine, and a real child running `grep -rn` through `bash`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from jeeves_mcp.pruning import history
from jeeves_mcp.pruning.engine import select_lines
from jeeves_mcp.pruning.history import (
    GIVE_UP_AFTER,
    MASS_COMMIT_FILES,
    RECENT_FILE_COMMITS,
    ages_from_log,
    file_ages,
    file_log,
)
from tests._child import running_child, tool_json
from tests.test_history import git
from tests.test_http import call
from tests.test_isolation import NOBODY, directory_owned_by

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0, reason="no git"
)

NAMES = [f"pkg/mod{n:02d}.py" for n in range(20)]


@pytest.fixture(autouse=True)
def fresh_history() -> object:
    """No ages cached nor timeouts counted by another test in this process."""
    history._state = history._State()
    yield
    history._state = history._State()
QUESTION = "where is handle_value returned"


def module(n: int, edit: int = 0) -> str:
    """Eight functions that each return handle_value (the rows `grep -rn handle_value` finds)."""
    return "".join(f"def f{k}(item):\n    x = {n + edit}\n    return handle_value(item, {k})\n\n" for k in range(8))


def project(root: Path) -> Path:
    """Twenty modules committed together, then mod07 changed, then one that is no source file
    and an empty commit (the newest: it changed nothing)."""
    (root / "pkg").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for n, name in enumerate(NAMES):
        (root / name).write_text(module(n))
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    (root / "pkg" / "mod07.py").write_text(module(7, edit=1))
    git(root, "commit", "-q", "-am", "change mod07", when=1_700_001_000)
    (root / "notes.txt").write_text("notes\n")
    git(root, "add", "notes.txt")
    git(root, "commit", "-q", "-m", "notes", when=1_700_002_000)
    git(root, "commit", "-q", "--allow-empty", "-m", "nothing", when=1_700_003_000)
    return root


def rows() -> list[str]:
    return [f"{name}:{4 * k + 3}:    return handle_value(item, {k})" for name in NAMES for k in range(8)]


def shallow_clone(source: Path, clone: Path, depth: int) -> Path:
    subprocess.run(["git", "-c", "protocol.file.allow=always", "clone", "-q", "--depth", str(depth),
                    f"file://{source}", str(clone)], check=True, capture_output=True)
    return clone


def head(root: Path) -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_ages_count_commits_from_the_newest_but_a_root_commit_gives_none(tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    done = subprocess.run(["git", "-C", str(root), *file_log("%x01m%x02")], capture_output=True, text=True, check=True)
    ages = ages_from_log(done.stdout, "\x01m\x02")
    assert ages == {"notes.txt": 1, "pkg/mod07.py": 2}  # "first" has no parent: it wrote the tree
    assert ages_from_log(done.stdout[:-3], "\x01m\x02") == ages  # a log cut short keeps what it read whole
    assert ages_from_log("", "\x01m\x02") == {}


async def test_a_commit_of_many_files_or_a_shallow_clones_boundary_ages_none(tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    for n in range(MASS_COMMIT_FILES + 1):  # a reformat of every file
        (root / "pkg" / f"gen{n:03d}.py").write_text("x = 1\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "vendored", when=1_700_009_000)
    (root / "pkg" / "mod03.py").write_text("changed\n")
    git(root, "commit", "-q", "-am", "mod03", when=1_700_009_500)
    ages = await file_ages(root, root=root, timeout_s=10, kill_grace_s=1)
    assert ages is not None and ages("pkg/mod03.py") == 0 and ages("pkg/gen000.py") is None
    assert ages("notes.txt") == 3 and ages("pkg/mod07.py") == 4
    clone = shallow_clone(root, tmp_path / "clone", depth=2)
    shallow = await file_ages(clone, root=clone, timeout_s=10, kill_grace_s=1)
    # The boundary commit ("vendored") lists the whole tree as if it wrote it.
    assert shallow is not None and shallow("pkg/mod03.py") == 0 and shallow("pkg/mod00.py") is None


async def test_a_searchs_files_are_found_from_the_directory_it_ran_in(tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    at_top = await file_ages(root, root=root, timeout_s=10, kill_grace_s=1)
    in_pkg = await file_ages(root / "pkg", root=root, timeout_s=10, kill_grace_s=1)
    assert at_top is not None and in_pkg is not None
    assert at_top("pkg/mod07.py") == 2 and at_top("./pkg/../pkg/mod07.py") == 2
    assert in_pkg("mod07.py") == 2 and in_pkg("../notes.txt") == 1 and in_pkg(str(root / "pkg" / "mod07.py")) == 2
    for name in ("missing.py", "pkg/mod07.py", "../../elsewhere/mod07.py", ""):
        assert in_pkg(name) is None, name


async def test_no_repository_no_commit_or_no_time_gives_no_ages(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert await file_ages(plain, root=plain, timeout_s=10, kill_grace_s=1) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert await file_ages(empty, root=empty, timeout_s=10, kill_grace_s=1) is None
    assert await file_ages(project(tmp_path / "repo"), root=tmp_path, timeout_s=0, kill_grace_s=1) is None


async def test_a_new_head_gets_new_ages(tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    before = await file_ages(root, root=root, timeout_s=10, kill_grace_s=1)
    (root / "pkg" / "mod03.py").write_text("changed\n")
    git(root, "commit", "-q", "-am", "mod03", when=1_700_009_000)
    after = await file_ages(root, root=root, timeout_s=10, kill_grace_s=1)
    assert before is not None and after is not None
    assert before("pkg/mod03.py") is None and after("pkg/mod03.py") == 0 and after("notes.txt") == 2


async def test_git_out_of_time_is_counted_and_given_up_on_as_for_blame(tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    for _ in range(GIVE_UP_AFTER):
        assert await file_ages(root, root=root, timeout_s=1e-6, kill_grace_s=1) is None
    assert history._state.timeouts == GIVE_UP_AFTER
    assert await file_ages(root, root=root, timeout_s=10, kill_grace_s=1) is None


async def test_a_log_that_fails_is_not_run_again_for_the_same_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path / "repo")
    runs: list[list[str]] = []
    real = history.run_command

    async def refused(argv: list[str], **kwargs: object) -> object:
        runs.append(argv)
        if "log" in argv:  # as a log git cannot read (a missing object) exits
            argv = [argv[0], "log", "--no-such-option"]
        return await real(argv, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(history, "run_command", refused)
    for _ in range(3):
        assert await file_ages(root, root=root, timeout_s=10, kill_grace_s=1) is None
    assert sum("log" in argv for argv in runs) == 1 and history._state.timeouts == 0


async def test_a_file_named_like_a_commit_header_moves_no_age(tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    (root / "\x01odd.txt").write_text("x\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "odd", when=1_700_009_000)
    ages = await file_ages(root, root=root, timeout_s=10, kill_grace_s=1)
    assert ages is not None and ages("\x01odd.txt") == 0 and ages("notes.txt") == 2 and ages("pkg/mod07.py") == 3


async def test_a_directory_named_with_line_breaks_takes_no_other_repositorys_ages(tmp_path: Path) -> None:
    """git prints the top and the prefix as they are, one a line: such a name could make the
    answer read as another repository's top and HEAD."""
    real = project(tmp_path / "x")
    planted = tmp_path / f"x\nA\n{head(real)}"
    planted.mkdir()
    git(planted, "init", "-q")
    (planted / "planted.py").write_text("x\n")
    git(planted, "add", ".")
    git(planted, "commit", "-q", "-m", "planted")
    git(planted, "commit", "-q", "--allow-empty", "-m", "next")
    assert await file_ages(planted, root=tmp_path, timeout_s=10, kill_grace_s=1) is None
    ages = await file_ages(real, root=tmp_path, timeout_s=10, kill_grace_s=1)
    assert ages is not None and ages("pkg/mod07.py") == 2 and ages("planted.py") is None


async def test_git_runs_as_the_runs_user() -> None:
    """With the pruner as root and the run's root owned by nobody, git runs as nobody: as root
    it would refuse a repository another user owns ("dubious ownership")."""
    with directory_owned_by(NOBODY, "jeeves-ages-") as root:
        project(root / "repo")
        for path in [root, *root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        ages = await file_ages(root / "repo" / "pkg", root=root, timeout_s=10, kill_grace_s=1)
        assert ages is not None and ages("mod07.py") == 2


async def test_only_the_last_commits_give_an_age(tmp_path: Path) -> None:
    root = project(tmp_path / "repo")
    (root / "pkg" / "mod03.py").write_text("changed\n")
    git(root, "commit", "-q", "-am", "mod03", when=1_700_009_000)
    for k in range(RECENT_FILE_COMMITS - 1):
        git(root, "commit", "-q", "--allow-empty", "-m", f"empty {k}", when=1_700_010_000 + k)
    ages = await file_ages(root, root=root, timeout_s=10, kill_grace_s=1)
    assert ages is not None and ages("pkg/mod03.py") == RECENT_FILE_COMMITS - 1 and ages("pkg/mod07.py") is None


async def test_a_workspaces_git_config_neither_runs_a_command_nor_moves_the_names(tmp_path: Path) -> None:
    """A run's bash can write .git/config: a signature check (gpg.program), a pager, names made
    relative to the directory (diff.relative), renames followed. The pruner's git log runs none
    of it and still names files from the top."""
    root = project(tmp_path / "repo")
    sign_head(root)
    proof = tmp_path / "proof"
    proof.mkdir()
    program = tmp_path / "prove"
    program.write_text(f"#!/bin/sh\ntouch {proof}/ran\n")
    program.chmod(0o755)
    with (root / ".git" / "config").open("a") as config:
        config.write(f"[log]\n\tshowSignature = true\n\tfollow = true\n[gpg]\n\tprogram = {program}\n"
                     f"[core]\n\tpager = {program}\n\tfsmonitor = {program}\n[diff]\n\trelative = true\n"
                     f"\texternal = {program}\n")
    ages = await file_ages(root / "pkg", root=root, timeout_s=10, kill_grace_s=1)
    assert ages is not None and ages("mod07.py") == 2 and ages("../notes.txt") == 1
    assert os.listdir(proof) == []


def sign_head(root: Path) -> None:
    """HEAD replaced by the same commit with a signature, which log.showSignature checks."""
    head = subprocess.run(["git", "-C", str(root), "cat-file", "commit", "HEAD"], capture_output=True, text=True,
                          check=True).stdout
    header, _, message = head.partition("\n\n")
    signature = "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----"
    signed = subprocess.run(["git", "-C", str(root), "hash-object", "-w", "-t", "commit", "--stdin"],
                            input=f"{header}\n{signature}\n\n{message}", capture_output=True, text=True, check=True)
    git(root, "update-ref", "HEAD", signed.stdout.strip())


def test_the_engine_puts_the_rows_of_a_recently_changed_file_first() -> None:
    """Rows that match alike: the file changed last leads the view, and files with no age are
    ranked as without any."""
    found = rows()
    level = select_lines(found, QUESTION, "logs", max_bytes=10240)
    recent = select_lines(found, QUESTION, "logs", max_bytes=10240, file_ages={"pkg/mod07.py": 0}.get)
    assert select_lines(found, QUESTION, "logs", max_bytes=10240, file_ages={}.get).keep == level.keep
    assert recent.order is not None and {found[i].split(":")[0] for i in recent.order[:8]} == {"pkg/mod07.py"}
    assert all(recent.keep[i] for i in range(56, 64)) and sum(recent.keep) < sum(level.keep)


def test_a_question_no_row_matches_still_puts_the_newest_files_rows_first() -> None:
    """Nothing to rank by but the ages: the rows of the files with one lead, newest first, and
    the view is no larger than without them."""
    found = rows()
    question = "fix the crash when the cache is empty"
    level = select_lines(found, question, "logs", max_bytes=10240)
    recent = select_lines(found, question, "logs", max_bytes=10240,
                          file_ages={"pkg/mod07.py": 1, "pkg/mod12.py": 0}.get)
    assert recent.order is not None
    assert [found[i].split(":")[0] for i in recent.order[:16]] == ["pkg/mod12.py"] * 8 + ["pkg/mod07.py"] * 8
    assert sum(recent.keep) <= sum(level.keep) + 1


@pytest.mark.parametrize("history_ms", ["10000", "0"])
async def test_a_search_through_bash_keeps_the_rows_of_the_file_changed_last(tmp_path: Path, history_ms: str) -> None:
    root = project(tmp_path / "repo")
    # Twenty times the rows: the view keeps a few files' rows, not all of them.
    for n, name in enumerate(NAMES):
        (root / name).write_text(module(n, edit=int(name.endswith("mod07.py"))) * 20)
    git(root, "commit", "-q", "-am", "grow", when=1_700_004_000)
    (root / "pkg" / "mod12.py").write_text(module(12) * 20 + "\n")
    git(root, "commit", "-q", "-am", "change mod12", when=1_700_005_000)
    async with running_child(root, tmp_path, env={"JEEVES_MCP_HISTORY_TIMEOUT_MS": history_ms}) as child:
        async with httpx.AsyncClient(headers=child.headers()) as http:
            result = tool_json(await call(http, child, "bash", {
                "cmd": "grep -rn handle_value .", "cwd": "pkg", "context_focus_question": QUESTION,
            }))
            moved = tool_json(await call(http, child, "bash", {
                "cmd": "cd pkg && grep -rn handle_value .", "context_focus_question": QUESTION,
            }))
            searched = tool_json(await call(http, child, "grep", {
                "pattern": "handle_value", "max_matches": 5000, "context_focus_question": QUESTION,
            }))
    for found, name, recent in ((result, "stdout", "./mod12.py"), (moved, "stdout", "./mod12.py"),
                                (searched, "matches", "pkg/mod12.py")):
        assert found["pruning"]["applied"]
        kept = {row.split("│", 1)[-1].strip().split(":")[0] for row in found[name].split("\n") if ".py:" in row}
        assert (recent in kept) is (history_ms != "0"), kept


@pytest.mark.parametrize("listing", [
    [f"./{name}" for name in NAMES],  # find . -name '*.py'
    NAMES,  # git ls-files, rg --files, grep -rl
    ["README.md", "setup.py", "src", "tests", "pyproject.toml"],  # ls, one a line to a pipe
])
def test_a_file_listing_is_told(listing: list[str]) -> None:
    from jeeves_mcp.pruning.engine import is_file_listing, is_search_output

    assert is_file_listing(listing) and not is_search_output(listing)


@pytest.mark.parametrize("text", [
    ["https://example.org/a.py", "https://example.org/b.py", "https://example.org/c.py"],  # URLs
    ["requests==2.31.0", "httpx==0.27.0", "trio==0.25.0"],  # pip freeze
    ["1.2.3", "1.2.4", "1.3.0", "2.0.0"],  # git tag
    ["pkg/a.py", "pkg/a.py", "pkg/a.py"],  # one file
    ["a1b2c3d Fix the parser", "d4e5f6a Add a test", "0a1b2c3 Bump"],  # git log --oneline
    ["src/a.py", "src/b.py"],  # two lines: too few to tell
    [f"line {n}: ok" for n in range(10)],
])
def test_text_that_is_no_file_listing_is_not_taken_for_one(text: list[str]) -> None:
    from jeeves_mcp.pruning.engine import is_file_listing

    assert not is_file_listing(text)


def test_the_engine_keeps_the_listed_file_changed_last() -> None:
    listing = [f"./{name}" for name in NAMES] * 10  # 200 lines: a view keeps a few
    listing = [f"./pkg/sub{k // 20}/{line[6:]}" for k, line in enumerate(listing)]
    recent = listing.index("./pkg/sub3/mod07.py")
    ages = {line[2:]: None for line in listing} | {"pkg/sub3/mod07.py": 0}
    question = "fix the crash when the cache is empty"
    level = select_lines(listing, question, "logs", max_bytes=10240)
    weighed = select_lines(listing, question, "logs", max_bytes=10240,
                           file_ages=lambda name: ages.get(os.path.normpath(name)))
    # Each entry ranked alone: a weighed entry keeps no block of its neighbours with it.
    assert weighed.keep[recent] and not level.keep[recent] and sum(weighed.keep) <= sum(level.keep) + 1
    assert sum(weighed.keep) <= sum(level.keep) + 1


@pytest.mark.parametrize("history_ms", ["10000", "0"])
async def test_a_listing_through_bash_keeps_the_file_changed_last(tmp_path: Path, history_ms: str) -> None:
    root = project(tmp_path / "repo")
    for k in range(12):  # 240 files: the view keeps some
        (root / "pkg" / f"sub{k:02d}").mkdir()
        for name in NAMES:
            (root / "pkg" / f"sub{k:02d}" / Path(name).name).write_text(f"x = {k}\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "more", when=1_700_004_000)
    (root / "pkg" / "sub05" / "mod12.py").write_text("x = 0\n")
    git(root, "commit", "-q", "-am", "change sub05/mod12", when=1_700_005_000)
    async with running_child(root, tmp_path, env={"JEEVES_MCP_HISTORY_TIMEOUT_MS": history_ms}) as child:
        async with httpx.AsyncClient(headers=child.headers()) as http:
            found = tool_json(await call(http, child, "bash", {
                "cmd": "find . -name '*.py' | sort", "cwd": "pkg",
                "context_focus_question": "fix the crash when the cache is empty",
            }))
    assert found["pruning"]["applied"]
    kept = {row.split("│", 1)[-1].strip() for row in found["stdout"].split("\n")}
    assert ("./sub05/mod12.py" in kept) is (history_ms != "0"), sorted(kept)[:20]


async def test_a_prior_that_fails_leaves_the_text_unweighed() -> None:
    """A read's history or a search's ages that raise (no process to be had, a bug) cost the
    prior, never the output of a command that has already run."""
    from jeeves_mcp.tools.base import fail_open

    async def broken() -> int:
        raise OSError(24, "Too many open files")

    async def answered() -> int:
        return 7

    assert await fail_open(broken) is None and await fail_open(answered) == 7 and await fail_open(None) is None


@pytest.mark.parametrize(("cmd", "cd"), [
    ("cd src && grep -rn x .", "src"), ("  cd a/b&&rg -n x", "a/b"), ("cd src/ && find .", "src/"),
    ("cd '.' && grep -rn x pkg", "."), ('cd "/abs/repo" && grep -rn x .', "/abs/repo"), ('cd "a b" && grep x', "a b"),
    ("cd src && cd sub && grep -rn x .", "src/sub"), ("cd src && cd /abs && grep -rn x .", "/abs"),
    ("cd - && grep -rn x .", None), ("cd ../x && grep -rn x .", None), ("cd '..' && grep -rn x .", None),
    ("cd -P && grep -rn x .", None), ("cd '-P' && grep -rn x .", None), ("cd -- && grep -rn x .", None),
    ("cd $HOME && grep -rn x .", None), ('cd "$X" && grep -rn x .', None), ("cd `pwd` && grep -rn x .", None),
    ("cd x; grep -rn x .", None), ("cd\ntrue && grep -rn x .", None), ("cd src\xa0&& grep -rn x .", None),
    ("cd #x && grep -rn x .", None), ("grep -rn x .", None), ("cdk ls", None),
])
def test_the_directory_a_search_ran_in_is_told_from_its_leading_cds(cmd: str, cd: str | None) -> None:
    """As bash goes: quotes taken off when nothing in them expands; no blank but a space or a
    tab; an option (`-P`, `--`), `-` or `..` not followed."""
    from jeeves_mcp.tools._shown_file import leading_cd

    assert leading_cd(cmd) == cd


@pytest.mark.parametrize(("cmd", "env", "where"), [
    ("grep -rn x .", {}, "."), ("cdk ls", {}, "."), ("cd pkg && grep -rn x .", {}, "pkg"),
    ("cd ./pkg && grep -rn x .", {"CDPATH": "/tmp"}, "pkg"),
    ("cd pkg && grep -rn x .", {"CDPATH": "/tmp"}, None),  # cd may go to /tmp/pkg
    ('cd "$X" && grep -rn x .', {}, None), ("(cd pkg && grep -rn x .)", {}, None),
    ("pushd pkg && grep -rn x .", {}, None), ("git -C pkg grep -n x", {}, None),
    ("cd /tmp && grep -rn x .", {}, None), ("cd out && grep -rn x .", {}, None),
    ("cd pkg/mod00.py && grep -rn x .", {}, None), ("cd missing && grep -rn x .", {}, None),
])
def test_a_search_whose_directory_is_not_told_or_outside_the_root_gets_no_files(
    tmp_path: Path, cmd: str, env: dict[str, str], where: str | None,
) -> None:
    from types import SimpleNamespace

    from jeeves_mcp.pruner_config import PrunerConfig
    from jeeves_mcp.tools.bash import _search_base

    root = project(tmp_path / "repo")
    (root / "out").symlink_to(tmp_path)
    ctx = SimpleNamespace(config=PrunerConfig(root=root))
    base = _search_base(ctx, root, cmd, env)  # type: ignore[arg-type]
    assert base == (None if where is None else (root / where).resolve())


def test_a_command_led_by_a_million_blanks_is_read_in_linear_time() -> None:
    """Whether a command moves before it prints is matched on the child's event loop: 130,000
    blanks before `true` held it 7.6 s (quadratic); a million would take minutes."""
    call = "from jeeves_mcp.tools.bash import _MOVES\nassert not _MOVES.match(' ' * 1_000_000 + 'true')"
    subprocess.run([sys.executable, "-c", call], check=True, timeout=30)


def test_the_tools_ask_git_only_for_a_search_or_a_listing() -> None:
    from jeeves_mcp.tools.read import _names_files

    assert _names_files("\n".join(rows())) and _names_files("\n".join(f"./{name}" for name in NAMES))
    assert not _names_files("\n".join(f"2026-11-29 10:0{n}:00 INFO worker {n} started" for n in range(9)))


def test_a_log_that_is_no_listing_is_not_weighed_by_ages_nor_is_anything_without_an_age() -> None:
    """A log line that reads as a path git knows (`pkg/mod07.py`) is still a log's; and ages that
    know no file of the output change nothing, whatever the question matches."""
    log = [f"2026-11-29 10:00:{n:02d} INFO request {n} served" for n in range(40)]
    log[20] = "pkg/mod07.py"
    ages = {"pkg/mod07.py": 0}.get
    question = "which request failed"
    assert select_lines(log, question, "logs", max_bytes=10240, file_ages=ages).keep == \
        select_lines(log, question, "logs", max_bytes=10240).keep
    for asked in (QUESTION, "fix the crash when the cache is empty"):
        assert select_lines(rows(), asked, "logs", max_bytes=10240, file_ages={}.get).keep == \
            select_lines(rows(), asked, "logs", max_bytes=10240).keep


async def test_output_of_long_dashed_names_is_told_and_pruned_in_time(tmp_path: Path) -> None:
    """Three 690 KB lines of `a-a-a-…0:x` (review24): each dash of a name was tried as the end of a
    match's path, a slice hashed each time, in the tool's sniff (outside every deadline: 101 s a
    call) and in the engine (past its deadline: the output came back unpruned)."""
    root = project(tmp_path / "repo")
    (root / "p.py").write_text("for i in range(3): print('a-' * 345000 + str(i) + ':x')\n")
    async with running_child(root, tmp_path) as child:
        async with httpx.AsyncClient(headers=child.headers(), timeout=110) as http:
            found = tool_json(await call(http, child, "bash", {"cmd": "python3 p.py", "context_focus_question": QUESTION}))
    assert found["pruning"]["attempted"] and not found["pruning"]["fallback"], found["pruning"]


async def test_a_log_git_could_not_start_is_asked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No process to be had (the run's processes or descriptors used up) says nothing of the
    repository: the next search asks again, where a log that failed is not run again."""
    root = project(tmp_path / "repo")
    real = history.run_command
    starts = {"log": 0}

    async def starved(argv: list[str], **kwargs: object) -> object:
        if "log" in argv:
            starts["log"] += 1
            if starts["log"] == 1:
                raise OSError(11, "Resource temporarily unavailable")
        return await real(argv, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(history, "run_command", starved)
    assert await file_ages(root, root=root, timeout_s=10, kill_grace_s=1) is None
    ages = await file_ages(root, root=root, timeout_s=10, kill_grace_s=1)
    assert ages is not None and ages("pkg/mod07.py") == 2 and starts["log"] == 2


def test_ls_recursive_names_are_aged_under_their_directory() -> None:
    """`ls -R` heads each directory's names with `./dir:`: a name is that directory's file, not
    the one of the same name elsewhere."""
    listing = [".:", "pkg", "", "./pkg:"] + [f"sub{k}" for k in range(10)]
    for k in range(10):
        listing += ["", f"./pkg/sub{k}:"] + [f"mod{n:02d}.py" for n in range(20)]
    from jeeves_mcp.pruning.engine import is_file_listing

    assert is_file_listing(listing)
    recent = listing.index("mod07.py", listing.index("./pkg/sub3:"))
    ages = {"pkg/sub3/mod07.py": 0}
    question = "fix the crash when the cache is empty"
    weighed = select_lines(listing, question, "logs", max_bytes=10240,
                           file_ages=lambda name: ages.get(os.path.normpath(name)))
    assert weighed.keep[recent]
    assert not any(weighed.keep[i] for i, line in enumerate(listing) if line == "mod07.py" and i != recent)


TREE = """.
├── README.md
├── pkg
│\u00a0\u00a0 ├── mod07.py
│\u00a0\u00a0 ├── run.sh*
│\u00a0\u00a0 ├── link.py -> mod07.py
│\u00a0\u00a0 └── sub/
│\u00a0\u00a0     └── mod07.py
└── setup.py

3 directories, 6 files""".split("\n")


def test_tree_output_is_a_listing_of_paths() -> None:
    """GNU tree's UTF-8 output (no-break spaces), its ASCII one, `-F` marks and links, `-f`
    whole paths: each entry's path from the directory tree ran on."""
    from jeeves_mcp.pruning.engine._matches import tree_paths

    assert tree_paths(TREE) == [None, "./README.md", "./pkg", "./pkg/mod07.py", "./pkg/run.sh", "./pkg/link.py",
                                "./pkg/sub", "./pkg/sub/mod07.py", "./setup.py", None, None]
    ascii_tree = [line.replace("├──", "|--").replace("└──", "`--").replace("│\u00a0\u00a0", "|  ") for line in TREE]
    assert tree_paths(ascii_tree) == tree_paths(TREE)
    assert tree_paths(["src", "├── src/a.py", "├── src/b.py", "└── src/c.py"]) == [None, "src/a.py", "src/b.py", "src/c.py"]
    assert tree_paths(["a", "b", "c", "d"]) is None


def test_the_engine_keeps_the_tree_entry_changed_last() -> None:
    tree = [".", "└── pkg"] + [
        line for k in range(10) for line in
        ([f"    ├── sub{k}"] + [f"    │\u00a0\u00a0 {'└' if n == 19 else '├'}── mod{n:02d}.py" for n in range(20)])
    ]
    recent = tree.index("    │\u00a0\u00a0 ├── mod07.py", tree.index("    ├── sub3"))
    ages = {"pkg/sub3/mod07.py": 0}
    question = "fix the crash when the cache is empty"
    weighed = select_lines(tree, question, "logs", max_bytes=10240, file_ages=lambda name: ages.get(os.path.normpath(name)))
    level = select_lines(tree, question, "logs", max_bytes=10240)
    # Each entry ranked alone: a weighed entry keeps no block of its neighbours with it.
    assert weighed.keep[recent] and not level.keep[recent] and sum(weighed.keep) <= sum(level.keep) + 1
