"""The `bash` and `grep` tool handlers, called directly with a CallContext."""

from __future__ import annotations

import json
import logging
import os
import pwd
import threading
from pathlib import Path

import pytest
import trio

from jeeves_mcp.mcp.errors import INVALID_PARAMS, McpError, ToolError
from jeeves_mcp.mcp.progress import NullProgress
from jeeves_mcp.pruner_config import PrunerConfig
from jeeves_mcp.pruning.recovery import RecoveryStore
from jeeves_mcp.tools import _grep_builtin, grep
from jeeves_mcp.tools import bash as bash_tool
from jeeves_mcp.tools.base import CallContext


def make_ctx(root: Path, **config) -> CallContext:
    return CallContext(
        config=PrunerConfig(root=root, kill_grace_ms=300, **config),
        store=RecoveryStore(60, 1024 * 1024),
        pruner=None,  # type: ignore[arg-type]  # not needed by these handlers
        progress=NullProgress(),
        request_id="test",
        log=logging.getLogger("jeeves_mcp.test"),
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / ".git").mkdir()
    (ws / "src" / "app.py").write_text("import os\n\ndef Greet(name):\n    return 'hello'\n")
    (ws / "src" / "pkg" / "util.py").write_text("def greet_all():\n    pass\n# greet\n")
    (ws / "README.md").write_text("greet people\n")
    (ws / ".git" / "config").write_text("greet hidden\n")
    (ws / "blob.bin").write_bytes(b"greet\x00\x01\x02binary\n")
    return ws


def definition_size(tool) -> int:
    return len(json.dumps(tool.definition(), separators=(",", ":")).encode())


def test_definitions_stay_small():
    assert definition_size(bash_tool.TOOL) <= 500
    assert definition_size(grep.TOOL) <= 600
    for tool in (bash_tool.TOOL, grep.TOOL):
        assert tool.input_schema["additionalProperties"] is False
        assert tool.prunable


# ------------------------------------------------------------------ bash


async def test_bash_success(root):
    out = await bash_tool.run(make_ctx(root), {"cmd": "echo hi; echo warn >&2; pwd"})
    assert out.error is None
    assert out.fields["exit_code"] == 0
    assert out.fields["cwd"] == "."
    texts = {t.name: t for t in out.texts}
    assert texts["stdout"].text == f"hi\n{root}\n"
    assert texts["stderr"].text == "warn\n"
    assert texts["stdout"].source_type == "logs"
    assert out.summary.startswith('bash "echo hi; echo warn >&2; pwd": exit 0 in ')
    assert out.summary.endswith(", 3 lines")


async def test_bash_nonzero_exit_is_command_failed_with_output(root):
    out = await bash_tool.run(make_ctx(root), {"cmd": "echo partial; exit 7"})
    assert out.error is not None
    assert out.error.code == "COMMAND_FAILED"
    assert out.error.details["exit_code"] == 7
    assert out.fields["exit_code"] == 7
    assert out.texts[0].text == "partial\n"


async def test_bash_summary_is_clipped(root):
    out = await bash_tool.run(make_ctx(root), {"cmd": "true " + "x" * 300})
    assert len(out.summary) <= 100
    assert out.summary.endswith("lines")


async def test_bash_cwd_inside_root(root):
    out = await bash_tool.run(make_ctx(root), {"cmd": "pwd", "cwd": "src/pkg"})
    assert out.texts[0].text == f"{root / 'src' / 'pkg'}\n"
    assert out.fields["cwd"] == "src/pkg"


@pytest.mark.parametrize("cwd", ["..", "/", "src/../../"])
async def test_bash_cwd_outside_root_is_forbidden(root, cwd):
    with pytest.raises(ToolError) as info:
        await bash_tool.run(make_ctx(root), {"cmd": "pwd", "cwd": cwd})
    assert info.value.code == "FORBIDDEN"


async def test_bash_cwd_symlink_escape_is_forbidden(root, tmp_path):
    (root / "escape").symlink_to(tmp_path)
    with pytest.raises(ToolError) as info:
        await bash_tool.run(make_ctx(root), {"cmd": "pwd", "cwd": "escape"})
    assert info.value.code == "FORBIDDEN"


async def test_bash_missing_cwd_is_not_found(root):
    with pytest.raises(ToolError) as info:
        await bash_tool.run(make_ctx(root), {"cmd": "pwd", "cwd": "nope"})
    assert info.value.code == "NOT_FOUND"


async def test_bash_env_allow_list(root, monkeypatch):
    monkeypatch.setenv("JEEVES_TEST_DAEMON_SECRET", "s3cret-value")
    monkeypatch.setenv("LANG", "C.UTF-8")
    out = await bash_tool.run(make_ctx(root), {"cmd": "env", "env": {"FOO": "bar baz"}})
    stdout = out.texts[0].text
    assert "s3cret-value" not in stdout
    assert "JEEVES_TEST_DAEMON_SECRET" not in stdout
    assert "FOO=bar baz\n" in stdout
    assert "LANG=C.UTF-8\n" in stdout  # allow-listed names pass


@pytest.mark.parametrize(
    "env", [{"A": 1}, {"": "x"}, {"A=B": "x"}, {"JEEVES_MCP_CALL": "x"}, {"A": "x\x00y"}]
)
async def test_bash_bad_env_is_invalid_request(root, env):
    with pytest.raises(McpError) as info:  # -32602 like any bad argument, not a tool result
        await bash_tool.run(make_ctx(root), {"cmd": "true", "env": env})
    assert info.value.code == INVALID_PARAMS and info.value.data["code"] == "INVALID_REQUEST"


async def test_bash_timeout(root):
    with pytest.raises(ToolError) as info:
        await bash_tool.run(make_ctx(root), {"cmd": "echo begun; sleep 300", "timeout_ms": 1000})
    assert info.value.code == "TOOL_TIMEOUT"
    assert info.value.details["timeoutMs"] == 1000
    assert info.value.details["stdout"] == "begun\n"


async def test_bash_default_timeout_comes_from_config(root):
    with pytest.raises(ToolError) as info:
        await bash_tool.run(make_ctx(root, bash_timeout_ms=500), {"cmd": "sleep 300"})
    assert info.value.details["timeoutMs"] == 500


async def test_bash_output_cap(root):
    out = await bash_tool.run(
        make_ctx(root, max_output_bytes=4096), {"cmd": "head -c 100000 /dev/zero | tr '\\0' x"}
    )
    assert out.fields["stdout_bytes"] == 100_000
    assert out.fields["output_capped"] is True
    assert "bytes omitted" in out.texts[0].text


async def test_bash_signal_death_is_reported(root):
    out = await bash_tool.run(make_ctx(root), {"cmd": "kill -KILL $$"})
    assert out.fields["signal"] == 9
    assert out.error is not None and out.error.details["exit_code"] == 137


# ------------------------------------------------------------------ grep


@pytest.fixture(params=["rg", "builtin"])
def engine(request, monkeypatch):
    if request.param == "builtin":
        monkeypatch.setattr(grep, "find_rg", lambda: None)
    return request.param


async def call_grep(root: Path, **args):
    return await grep.run(make_ctx(root), args)


def lines(out) -> list[str]:
    (text,) = [t.text for t in out.texts if t.name == "matches"]
    return text.splitlines() if text else []


async def test_grep_matches(root, engine):
    out = await call_grep(root, pattern="greet")
    assert out.fields["engine"] == engine
    assert lines(out) == [
        "README.md:1:greet people",
        "src/pkg/util.py:1:def greet_all():",
        "src/pkg/util.py:3:# greet",
    ]
    assert out.fields["match_count"] == 3
    assert out.fields["files_with_matches"] == 2
    assert out.fields["limit_reached"] is False
    assert out.summary == "grep 'greet': 3 matches in 2 files"


async def test_grep_ignore_case(root, engine):
    out = await call_grep(root, pattern="greet", ignore_case=True, paths=["src"])
    assert lines(out) == [
        "src/app.py:3:def Greet(name):",
        "src/pkg/util.py:1:def greet_all():",
        "src/pkg/util.py:3:# greet",
    ]


async def test_grep_glob(root, engine):
    out = await call_grep(root, pattern="greet", glob="*.md")
    assert lines(out) == ["README.md:1:greet people"]
    out = await call_grep(root, pattern="greet", glob="!*.md")
    assert [line.split(":")[0] for line in lines(out)] == ["src/pkg/util.py"] * 2


@pytest.mark.parametrize(("glob", "files"), [
    ("**/*.py", ["src/app.py", "src/pkg/util.py", "top.py"]),
    ("src/*.py", ["src/app.py"]),  # a star does not cross a slash
    ("src/**/*.py", ["src/app.py", "src/pkg/util.py"]),  # nor does ** need a directory
    ("/top.py", ["top.py"]),  # a leading slash anchors at the root
    ("util.py", ["src/pkg/util.py"]),  # no slash: the name, at any depth
    ("!src", ["README.md", "top.py"]),  # a directory excluded with all beneath it
    ("!src/pkg/**", ["README.md", "src/app.py", "top.py"]),
    ("src", []),  # a file is picked by its own path, not by a directory above it
    ("*g", []),  # (src/pkg/ ends in g; none of its files does)
    ("{top,util}.py", ["src/pkg/util.py", "top.py"]),  # ripgrep's alternates
    ("{top.py,src/app.py}", ["src/app.py", "top.py"]),  # a slash anywhere anchors them all
])
async def test_grep_globs_mean_what_they_mean_to_ripgrep(root, engine, glob, files):
    """rg's `--glob` has gitignore syntax, with alternates; the built-in read it with fnmatch:
    `**/*.py` missed the top-level files, `src/*.py` crossed into src/pkg/, `/top.py` and
    `!src` matched nothing, `{top,util}.py` was a name with braces."""
    (root / "top.py").write_text("greet = 1\n")
    out = await call_grep(root, pattern="greet", glob=glob, ignore_case=True)
    assert sorted({line.split(":")[0] for line in lines(out)}) == files


async def test_grep_skips_a_file_with_a_nul_byte_wherever_it_is(root, engine):
    """The built-in looked for NUL in the first 8 KiB only: a log with one later showed its
    rows, NUL and all, where ripgrep (which reads a 64 KiB buffer first) skips the file."""
    (root / "late.log").write_bytes(b"greet early\n" + b"x" * 20_000 + b"\ngreet\x00late\n")
    # Past the first 64 KiB a NUL ends the search: the matches before it are shown.
    (root / "later.log").write_bytes(b"greet early\n" + b"x" * 99_999 + b"\ngreet\x00late\ngreet after\n")
    out = await call_grep(root, pattern="greet")
    assert [line for line in lines(out) if line.startswith(("late", "blob.bin"))] == ["later.log:1:greet early"]
    assert out.fields["match_count"] == 4


async def test_grep_anchors_see_a_crlf_line_as_ripgrep_does(root, engine):
    """ripgrep matches `$` before the CR of a CRLF line only with --crlf, which it is not
    given: the built-in matched the line with its CR removed, so `^$` and `greet$` found
    lines there that ripgrep does not."""
    (root / "dos.txt").write_bytes(b"greet\r\n\r\nend\r\n")
    for pattern in ("^$", "greet$"):
        out = await call_grep(root, pattern=pattern, paths=["dos.txt"])
        assert out.fields["match_count"] == 0, (pattern, lines(out))
    out = await call_grep(root, pattern="^greet", paths=["dos.txt"])
    assert lines(out) == ["dos.txt:1:greet"]


@pytest.mark.parametrize(("glob", "problem"), [
    ("a[b", "unclosed character class; missing ']'"),
    ("[z-a]", "invalid range; 'z' > 'a'"),
    ("a\\", "dangling '\\'"),
    ("{a,{b,c}}", "nested alternate groups are not allowed"),
    ("{a.py", "unclosed alternate group; missing '}'"),
    ("!", "nothing after '!'"),
    ("#x", "ripgrep reads a glob starting with '#' as a comment"),
    ("a\x00b", "a glob cannot hold a NUL byte or a line break"),
    ("{a,b}" * 11, "its alternates spell out more than 1024 globs"),
])
async def test_grep_refuses_a_glob_ripgrep_refuses_in_its_words(root, engine, glob, problem):
    """ripgrep's refusal was an INTERNAL "rg failed" (a NUL raised from building its argv);
    the built-in took `[` for a character and raised on `\\`. Both refuse now, alike."""
    with pytest.raises(ToolError) as refused:
        await call_grep(root, pattern="greet", glob=glob)
    assert refused.value.code == "INVALID_REQUEST"
    assert problem in refused.value.message, refused.value.message


async def test_grep_quotes_a_path_a_bidirectional_control_would_disguise(root, engine):
    """U+202E reverses what follows on a screen: the row read `eviltxt.py` to a person."""
    (root / "evil\u202eyp.txt").write_text("greet\n")
    out = await call_grep(root, pattern="greet", paths=["."], glob="evil*")
    assert lines(out) == ['"evil\\342\\200\\256yp.txt":1:greet']


async def test_grep_explicit_file(root, engine):
    out = await call_grep(root, pattern="import", paths=["src/app.py"])
    assert lines(out) == ["src/app.py:1:import os"]


async def test_grep_max_matches_truncates(root, engine):
    (root / "many.txt").write_text("".join(f"hit {i}\n" for i in range(50)))
    out = await call_grep(root, pattern="hit", max_matches=5, paths=["many.txt"])
    assert lines(out) == [f"many.txt:{i + 1}:hit {i}" for i in range(5)]
    assert out.fields["limit_reached"] is True
    assert out.fields["match_count"] == 50


async def test_grep_out_of_range_numbers_are_clamped(root, engine):
    out = await call_grep(root, pattern="greet", max_matches=0, paths=["src"])
    assert len(lines(out)) == 1
    assert out.fields["limit_reached"] is True


async def test_grep_empty_pattern_is_invalid_request(root, engine):
    with pytest.raises(ToolError) as info:
        await call_grep(root, pattern="")
    assert info.value.code == "INVALID_REQUEST"


async def test_grep_no_match_is_success(root, engine):
    out = await call_grep(root, pattern="zzz_not_there")
    assert out.error is None
    assert out.fields["match_count"] == 0
    assert lines(out) == []


@pytest.mark.parametrize("pattern", ["(", "a[", "*x"])
async def test_grep_bad_regex_is_invalid_request(root, engine, pattern):
    with pytest.raises(ToolError) as info:
        await call_grep(root, pattern=pattern)
    assert info.value.code == "INVALID_REQUEST"
    assert "regex" in info.value.message
    assert "(?:" not in info.value.message  # rg's wrapping of the pattern, not the agent's


@pytest.mark.parametrize("path", ["..", "/etc", "src/../../"])
async def test_grep_path_outside_root_is_forbidden(root, engine, path):
    with pytest.raises(ToolError) as info:
        await call_grep(root, pattern="x", paths=[path])
    assert info.value.code == "FORBIDDEN"


async def test_grep_missing_path_is_not_found(root, engine):
    with pytest.raises(ToolError) as info:
        await call_grep(root, pattern="x", paths=["src", "missing.py"])
    assert info.value.code == "NOT_FOUND"


async def test_grep_on_a_fifo_is_refused_at_once(root, engine):
    """Attack T6: rg opened a FIFO named in paths and waited on it for the whole timeout."""
    os.mkfifo(root / "pipe")
    with trio.fail_after(5), pytest.raises(ToolError) as info:
        await call_grep(root, pattern="x", paths=["pipe"], timeout_ms=20_000)
    assert info.value.code == "INVALID_REQUEST"
    assert "not a regular file or a directory" in info.value.message


async def test_grep_pattern_starting_with_dash(root, engine):
    (root / "flags.txt").write_text("use --force here\n")
    out = await call_grep(root, pattern="--force")
    assert lines(out) == ["flags.txt:1:use --force here"]


async def test_grep_long_lines_are_clipped(root, engine):
    (root / "min.js").write_text("var a='" + "x" * 5000 + "';\n")
    out = await call_grep(root, pattern="var a")
    (line,) = lines(out)
    assert line.startswith("min.js:1:var a='xxx")
    assert len(line) < 700
    # Said, with where the rest is: a clipped row is not its line.
    assert out.fields["clipped_lines"] == 1
    assert "1 row clipped at 500 characters: read the file" in out.summary


async def test_grep_rows_that_fit_are_not_called_clipped(root, engine):
    (root / "a.txt").write_text("x" * 499 + "\n" + "short x [... omitted end of long line]\n")
    out = await call_grep(root, pattern="x")
    assert len(lines(out)) == 2
    assert "clipped_lines" not in out.fields and "clipped" not in out.summary


async def test_builtin_grep_timeout_stops_the_walk(root, monkeypatch):
    monkeypatch.setattr(grep, "find_rg", lambda: None)
    entered, stopped = threading.Event(), threading.Event()

    def slow_search(rx, targets, *, root, user, glob, max_matches, stop):
        entered.set()
        stop.wait(30)  # a walk that only ends when told to
        stopped.set()
        return _grep_builtin.GrepResult()

    monkeypatch.setattr(_grep_builtin, "search", slow_search)
    with pytest.raises(ToolError) as info:
        await call_grep(root, pattern="x", timeout_ms=200)
    assert info.value.code == "TOOL_TIMEOUT"
    assert info.value.details["timeoutMs"] == 200
    assert entered.is_set()
    with trio.fail_after(5):
        await trio.to_thread.run_sync(stopped.wait)


async def test_rg_gets_a_clean_environment(root, monkeypatch):
    # A config file named by the parent's environment must not change results.
    config = root.parent / "rgrc"
    config.write_text("--fixed-strings\n")
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(config))
    out = await call_grep(root, pattern="gre+t", paths=["README.md"])
    assert lines(out) == ["README.md:1:greet people"]
    assert os.environ["RIPGREP_CONFIG_PATH"] == str(config)


async def test_grep_anchors_are_per_line(root, engine):
    (root / "anchors.txt").write_text("foo\nbar foo\nfoo bar\n")
    assert lines(await call_grep(root, pattern="foo$", paths=["anchors.txt"])) == [
        "anchors.txt:1:foo", "anchors.txt:2:bar foo"]
    assert lines(await call_grep(root, pattern="^foo", paths=["anchors.txt"])) == [
        "anchors.txt:1:foo", "anchors.txt:3:foo bar"]


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?<=a)b"])
async def test_grep_backreferences_and_lookaround_are_invalid_like_ripgrep(root, engine, pattern):
    with pytest.raises(ToolError) as info:
        await call_grep(root, pattern=pattern)
    assert info.value.code == "INVALID_REQUEST"


def test_a_command_user_without_a_passwd_entry_gets_no_home_or_name_of_the_pruners():
    """F8: a root owned by a uid with no passwd entry (a container's) ran commands with the
    pruner's HOME=/root, USER=root; they get HOME=/ and no USER or LOGNAME instead."""
    uid = next(u for u in range(2001, 60000) if not _has_passwd_entry(u))
    pruners = {"HOME": "/root", "USER": "root", "LOGNAME": "root", "PATH": "/usr/bin:/bin"}
    assert bash_tool.owner_env(pruners, uid, keep=set()) == {"HOME": "/", "PATH": "/usr/bin:/bin"}
    # What the call's env sets stays.
    asked = {**pruners, "HOME": "/tmp/h", "USER": "me"}
    assert bash_tool.owner_env(asked, uid, keep={"HOME", "USER"}) == {"HOME": "/tmp/h", "USER": "me", "PATH": "/usr/bin:/bin"}


def _has_passwd_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
