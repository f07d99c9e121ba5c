"""Which file a `bash` command prints, and whether its output is that file's lines."""

from __future__ import annotations

import pytest

from jeeves_mcp.pruning.engine import select_lines, without_line_numbers
from jeeves_mcp.tools._shown_file import ShownFile, shown_file
from tests.test_pruned_tools import module_source


@pytest.mark.parametrize(
    ("cmd", "shown"),
    [
        ("cat a.py", ShownFile("a.py")),
        ("cat -n a.py", ShownFile("a.py", numbered=True)),
        ("nl -ba a.py", ShownFile("a.py", numbered=True)),
        ("nl -b a -w 3 a.py", ShownFile("a.py", numbered=True)),
        ("sed -n '40,120p' src/x.py", ShownFile("src/x.py", start=40, count=81)),
        ("sed -n 5p x.py", ShownFile("x.py", start=5, count=1)),
        ("sed -n '10,$p' x.py", ShownFile("x.py", start=10)),
        ("head -n 80 a.py", ShownFile("a.py", count=80)),
        ("head -80 a.py", ShownFile("a.py", count=80)),
        ("head a.py", ShownFile("a.py", count=10)),
        ("tail -n 20 a.py", ShownFile("a.py", count=20, from_end=True)),
        ("tail -n +30 a.py", ShownFile("a.py", start=30)),
        ("nl -ba a.py | sed -n '1,200p'", ShownFile("a.py", count=200, numbered=True)),
        ("cd src && cat x.py", ShownFile("x.py", cd="src")),
        ("cat 'a b.py'", ShownFile("a b.py")),
    ],
)
def test_commands_that_print_one_file(cmd: str, shown: ShownFile) -> None:
    assert shown_file(cmd) == shown


@pytest.mark.parametrize(
    "cmd",
    [
        "cat a.py | grep x",  # a filter that is not a window
        "cat a.py b.py",
        "cat a.py > b.py",
        "cat a.py; rm x",
        "cat a.py && echo done",
        "(cat a.py)",
        "cat $FILE",  # names the shell expands are not the names we see
        "cat `ls`",
        "cat *.py",
        "cat ~/a.py",
        "cat 'unclosed",
        "sed -n '1,200p' a.py | head -n 5",  # two windows
        "sed -n '20,10p' a.py",
        "sed -e 's/x/y/' a.py",
        "head -c 100 a.py",
        "cat -A a.py",
        "nl -s: a.py",  # another separator: not the numbers we take off
        "cat",
        "",
    ],
)
def test_commands_that_do_not(cmd: str) -> None:
    assert shown_file(cmd) is None


def test_the_output_must_be_the_files_lines_where_the_command_says() -> None:
    file_lines = [f"line {n}" for n in range(1, 101)]
    assert ShownFile("a", start=40, count=3).first_line(file_lines, ["line 40", "line 41", "line 42"]) == 40
    assert ShownFile("a", count=5, from_end=True).first_line(file_lines, file_lines[-5:]) == 96
    assert ShownFile("a", count=500, from_end=True).first_line(file_lines, file_lines) == 1
    # The file changed since the command ran, or the grammar misread the command.
    assert ShownFile("a", start=40).first_line(file_lines, ["line 41", "line 42"]) is None
    assert ShownFile("a").first_line(file_lines, []) is None


def test_line_numbers_are_taken_off_only_when_every_line_has_the_next_one() -> None:
    assert without_line_numbers(["     1\tdef f():", "     2\t", "     3\t    return 1"]) == [
        "def f():", "", "    return 1"]
    # `nl` leaves blank lines blank and unnumbered.
    assert without_line_numbers(["     1\ta", "       ", "     2\tb", "     3\tc"]) == ["a", "", "b", "c"]
    assert without_line_numbers(["     1\ta", "     3\tb", "     4\tc"]) is None
    assert without_line_numbers(["     1\ta", "b", "     2\tc", "     3\td"]) is None
    assert without_line_numbers(["     1\ta", "     2\tb"]) is None  # too few to tell
    assert without_line_numbers(["x\ty", "z\tw", "u\tv"]) is None


def test_numbered_code_is_pruned_as_the_code_it_numbers() -> None:
    question = "where is the config file parsed and its settings returned?"
    plain = module_source().split("\n")
    numbered = [f"{n:6d}\t{line}" for n, line in enumerate(plain, 1)]
    got = select_lines(numbered, question, "code")
    target = plain.index("def parse_config_file(path):")
    assert all(got.keep[target : target + 4])
    assert not all(got.keep)
    # Read as code, not as lines of text: a hidden block is named by the functions it holds.
    reasons = [reason for reason in got.reasons if reason]
    assert reasons and all("helper_" in reason for reason in reasons)
