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
        ("cat a#b.py", ShownFile("a#b.py")),  # `#` starts a comment only after a blank
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
        ("git show HEAD~3:src/x.py", ShownFile("src/x.py", rev="HEAD~3")),
        # A window of a window: numbered from where the first starts (review20).
        ("sed -n '100,$p' a.py | sed -n '20,100p'", ShownFile("a.py", start=119, count=81)),
        ("tail -n +100 a.py | head -n 80", ShownFile("a.py", start=100, count=80)),
        ("git show v1.2:x.py | sed -n '40,120p'", ShownFile("x.py", start=40, count=81, rev="v1.2")),
        # Searches of one file whose rows are numbered: what the rows hold is checked, not the options.
        ("grep -n refund a.py", ShownFile("a.py", matches=True)),
        ("grep -in -C 2 'card refund' src/a.py", ShownFile("src/a.py", matches=True)),
        ("rg -n -w -e refund -e card a.py | head -n 50", ShownFile("a.py", matches=True)),
        ("rg --line-number refund a.py", ShownFile("a.py", matches=True)),
        ("cd src && egrep -n 'a|b' a.py", ShownFile("a.py", cd="src", matches=True)),
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
        "nl a.py",  # numbers only the lines that are not blank: not the file's numbers
        "nl -nln a.py",
        "cat\na.py",  # two commands to the shell
        "cd - && cat a.py",  # the directory before, not one named "-"
        "cd src/.. && cat a.py",  # logical for the shell, physical for us
        "sed -n '1," + "9" * 5000 + "p' a.py",  # more digits than int() takes
        "cat " + "a" * 5000,  # longer than a command that prints a file
        "true '" + "|" * 5000 + "'",
        "sed -n '100,$p' a.py | tail -n 5",  # the last lines of a part of the file
        "git show HEAD",  # a commit, not a file
        "git show --stat HEAD:x.py",
        "git show HEAD:",
        "git show :x.py",
        "git show HEAD@{1}:x.py",  # the shell expands the braces
        "grep refund a.py",  # no line numbers: which lines they are is not known
        "rg -N refund a.py",
        "grep -n refund a.py | sort -r",
        "grep -n refund $F",
    ],
)
def test_commands_that_do_not(cmd: str) -> None:
    assert shown_file(cmd) is None


def test_the_output_must_be_the_files_lines_where_the_command_says() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 101))
    assert ShownFile("a", start=40, count=3).first_line(text, "line 40\nline 41\nline 42\n") == 40
    assert ShownFile("a", count=5, from_end=True).first_line(text, "line 96\nline 97\nline 98\nline 99\nline 100\n") == 96
    assert ShownFile("a", count=500, from_end=True).first_line(text, text) == 1
    assert ShownFile("a", start=100).first_line(text.removesuffix("\n"), "line 100") == 100  # no final newline
    # The file changed since the command ran, or the grammar misread the command.
    assert ShownFile("a", start=40).first_line(text, "line 41\nline 42\n") is None
    assert ShownFile("a", start=40).first_line(text, "line 40\nline 4") is None  # not whole lines
    assert ShownFile("a", start=101).first_line(text, "line 100\n") is None
    assert ShownFile("a").first_line(text, "") is None


def test_a_search_must_print_the_files_lines_by_their_numbers() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 101))
    search = ShownFile("a", matches=True)
    assert search.rows_match(text, "4:line 4\n5-line 5\n--\n40:line 40\n")
    assert search.rows_match(text.removesuffix("\n"), "100:line 100")
    assert not search.rows_match(text, "a:4:line 4\n")  # `grep -H`: the file's name first
    assert not search.rows_match(text, "40:line 40\n4:line 4\n")  # numbers falling
    assert not search.rows_match(text, "4:line 4\n4:line 4\n")  # `-o`: a line twice
    assert not search.rows_match(text, "4:line 5\n")  # the file changed since
    assert not search.rows_match(text, "101:line 101\n")
    assert not search.rows_match(text, "4:line\n")  # not the line whole (`-o`)
    assert not search.rows_match(text, "--\n")
    assert not search.rows_match(text, "3\n")  # `grep -c`


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
