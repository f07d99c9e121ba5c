"""Units of command output: log records, tracebacks, compiler diagnostics."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate, islice

from ._git import short_path
from ._plan import line_bytes
from ._units import Layout, Unit

__all__ = ["error_lines", "failures_first", "file_sections", "is_error_line", "logs_layout", "name_sections"]

# `head` and `tail` run on several files print each under a `==> path <==` header.
_SECTION_HEADER = re.compile(r"==> (.+) <==")

# A diff's header under a failed assertion (jest's `Expected:`, vitest's `- Expected` at the margin).
_DIFF_HEAD = r"^\s*(?:[-+] )?(?:Expected|Received)\b"
# Words for an error, pytest's `E` and `>` lines, unittest's `FAIL:`, an exception's name; and test
# runners' own: jest's `●` failure title and `> 12 |` code-frame line, a diff's header, a failing
# test's mark (jest ✕, vitest ×, node ✖), a `FAIL` file or title, mocha's `N failing`, node's
# `# fail N`, go test's message of a failed test (`    x_test.go:12: got 81, want 90`).
_ERROR = re.compile(
    r"\b(?:errors?|exceptions?|traceback|fatal|panic(?:ked)?|failed|failures?|critical|aborted"
    r"|segmentation fault|undefined reference|assertion|cannot|could not|unable to|denied|not found|not ok)\b"
    r"|^[E>]\s{2,}\S|^FAIL:|ERR!|^\s*\w+(?:\.\w+)*(?:Error|Exception|Exit|Interrupt)(?: \[\w+\])?:"
    r"|^\s*error(?:\[\w+\])?:"
    rf"|^\s*● (?!Console)|^\s+> \d+ \||{_DIFF_HEAD}|^\s*[✕×✖]\s|^\s*FAIL\s"
    r"|^\s*[1-9]\d* failing$|^(?:# |ℹ )fail [1-9]|^\s+\S+_test\.go:\d+: ",
    re.IGNORECASE,
)
# Substrings one of which every match of _ERROR contains (lower case), to find candidate lines fast.
_ERROR_KEYS = (
    "error",
    "exception",
    "traceback",
    "fatal",
    "panic",
    "fail",
    "critical",
    "abort",
    "segmentation",
    "undefined reference",
    "assertion",
    "cannot",
    "could not",
    "unable to",
    "denied",
    "not found",
    "not ok",
    "err!",
    "exit:",
    "interrupt:",
    "\ne  ",
    "\n>  ",
    "\nfail:",
    "●",
    " > ",
    "expected",
    "received",
    "✕",
    "×",
    "✖",
    "_test.go:",
)
_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):")
_CHAIN = re.compile(
    r"^(?:During handling of the above exception|The above exception was the direct cause)"
)
# A separator line starts with five of these (after blanks) or ends with five of the
# second kind after some text. As one regex (`\S.*[=_\-*#~!]{5,}\s*$`) it backtracked
# quadratically: a 20,000-character line `x=====...y` took 3.4 s.
_SEPARATOR_CHARS = "=_-*#~+!⎯─━═"  # (box-drawing bars: vitest's `⎯⎯⎯ Failed Tests 3 ⎯⎯⎯`)
_SEPARATOR_END = frozenset(_SEPARATOR_CHARS) - {"+"}
_SEPARATOR_START = re.compile(rf"\s*[{re.escape(_SEPARATOR_CHARS)}]{{5}}")
# Five of these in a row, which every separator line holds: found in one pass over the text.
_SEPARATOR_RUN = re.compile(rf"[{re.escape(_SEPARATOR_CHARS)}]{{5,}}")


def is_separator(line: str) -> bool:
    if _SEPARATOR_START.match(line):
        return True
    text = line.strip()
    return len(text) > 5 and all(char in _SEPARATOR_END for char in text[-5:])
_CONT = re.compile(r"^(?:\s|E\s|>\s|\||\^|at\s|Caused by:|\.\.\.|-->|= )")
# Lines kept around an error line: before, after.
CONTEXT = (2, 2)
# A JavaScript or Java stack frame, and how far after an error line its first one is looked for.
_FRAME = re.compile(r"^\s+at \S|^\s*❯ \S+:\d+")  # (vitest's `❯ test/x.test.ts:39:34`)
TO_FRAME = 16
MAX_RECORD = 40
MAX_TRACEBACK = 60
# A failure section (between separator lines) up to this size is kept whole with its errors.
MAX_SECTION = 50
# A record of up to this many lines right before an error record is its header.
MAX_HEADER = 4


# A test reported passed (TAP's `ok 3 -`, a ✓ or ✔ mark, pytest's `PASSED`) is no error, whatever
# its name says (`✔ when help for error then text is on stderr`).
_PASSED = re.compile(r"^\s*(?:ok \d+\b|[✓✔√] )|::\S+ PASSED\b")


def is_error_line(line: str) -> bool:
    return bool(_ERROR.search(line)) and not _PASSED.search(line)


def error_lines(lines: list[str]) -> list[bool]:
    """Which lines report an error; substring search first, the regex only on candidates."""
    low = "\n" + "\n".join(lines).lower()
    starts = list(accumulate((len(x) + 1 for x in lines), initial=1))
    candidates: set[int] = set()
    for key in _ERROR_KEYS:
        pos = low.find(key)
        while pos >= 0:
            i = bisect_right(starts, pos + (key[0] == "\n")) - 1
            candidates.add(i)
            nxt = starts[i + 1] if i + 1 < len(starts) else len(low)
            pos = low.find(key, max(pos + 1, nxt - 1))
    out = [False] * len(lines)
    for i in candidates:
        if 0 <= i < len(lines) and is_error_line(lines[i]):
            out[i] = True
    return out


def separator_lines(lines: list[str]) -> list[int]:
    """Indices of the separator lines, in order; is_separator runs only on lines holding a
    run of five separator characters (a regex per line cost a 50,000-line log 35 ms)."""
    text = "\n".join(lines)
    starts = list(accumulate((len(x) + 1 for x in lines), initial=0))
    found: list[int] = []
    line_end = 0
    for run in _SEPARATOR_RUN.finditer(text):
        if run.start() < line_end:
            continue  # a line is tried once: a long one holds many runs
        i = bisect_right(starts, run.start()) - 1
        line_end = starts[i + 1]
        if is_separator(lines[i]):
            found.append(i)
    return found


def logs_layout(lines: list[str]) -> Layout:
    n = len(lines)
    errors = error_lines(lines)
    cuts = separator_lines(lines)
    separators = set(cuts)
    records: list[tuple[int, int]] = []
    always: set[int] = set()
    start: int | None = None
    last = -1  # last non-blank line of the open record
    in_tb = False
    tb_start = 0

    def close() -> None:
        nonlocal start
        if start is not None:
            records.append((start, last))
        start = None

    for i, line in enumerate(lines):
        if not line.strip():
            continue
        gap = start is not None and i > last + 1  # blank lines since the record's last line
        if _TRACEBACK.match(line):
            if not in_tb:
                close()
                start, tb_start = i, i
            in_tb = True
        elif in_tb:
            if not (_CHAIN.match(line) or line[:1].isspace()):
                in_tb = False  # the exception line ends a traceback
                always.update(range(max(tb_start, i - MAX_TRACEBACK), i + 1))
                last = i
                close()
                continue
        else:
            new = start is None or i in separators or i - start >= MAX_RECORD
            if not new:
                # an indented line continues the record, even across blank lines
                new = not _CONT.match(line) or (gap and not line[:1].isspace())
            if new:
                close()
                start = i
        last = i
    close()

    before, after = CONTEXT
    frame = n  # the first stack frame after the line (jest's `at file:line` under a code frame)
    for i in range(n - 1, -1, -1):
        if errors[i]:
            end = i + after
            # ... through the first stack frame after it, if no other error comes first: where it was thrown.
            if frame < n and frame - i <= TO_FRAME and not any(errors[i + 1 : frame]):
                end = max(end, frame)
            always.update(range(max(0, i - before), min(n, end + 1)))
        if ("at " in lines[i] or "❯" in lines[i]) and _FRAME.match(lines[i]):
            frame = i
    order, repeated = _errors_first(lines, always, errors, cuts)

    units: list[Unit] = []
    for k, (a, b) in enumerate(records):
        err = any(errors[a : b + 1])
        heads: list[tuple[int, int]] = []
        if err:
            if k > 0 and a - records[k - 1][1] <= 2:
                pa, pb = records[k - 1]
                if pb - pa + 1 <= MAX_HEADER:
                    heads.append((pa, pb))
            sec = _section(cuts, a, n)
            if sec and sec[1] - sec[0] + 1 <= MAX_SECTION:
                heads.append(sec)
        # A record whose errors were all said before (forty tests failing alike) has no error's prior.
        says_new = err and not all(i in repeated for i in range(a, b + 1) if errors[i])
        units.append(Unit(a, b, "", sig=(a, a), heads=heads, prior=float(says_new)))
    # Nor are such errors kept for their own sake: their first telling is; the rest come after
    # every other error while the view has room.
    return Layout(units=units, always=always - repeated, errors_first=order)


def file_sections(lines: list[str]) -> list[int] | None:
    """The header lines of `head`'s or `tail`'s output of several files (its first line that is
    not blank a header, two headers or more), or None."""
    first = next((i for i, line in enumerate(lines[:2000]) if line.strip()), None)
    if first is None or not _SECTION_HEADER.fullmatch(lines[first]):
        return None
    headers = [i for i, line in enumerate(lines) if line.startswith("==> ") and _SECTION_HEADER.fullmatch(line)]
    return headers if len(headers) >= 2 else None


def name_sections(layout: Layout, lines: list[str], headers: list[int]) -> None:
    """Each record of `head`'s or `tail`'s output named by its file, and its file's header kept
    with it (a line shown without it is no file's)."""
    layout.sections = True
    k = -1
    for unit in layout.units:
        while k + 1 < len(headers) and headers[k + 1] <= unit.start:
            k += 1
        if k < 0:
            continue
        header = headers[k]
        unit.label = short_path(lines[header][4:-4])
        if header < unit.start:
            unit.heads.append((header, header))


def _section(cuts: list[int], line: int, n: int) -> tuple[int, int] | None:
    """The range from the separator at or before `line` to the line before the next one (the
    separator opening a section belongs to it); None before the first."""
    k = bisect_right(cuts, line) - 1
    if k < 0:
        return None
    return cuts[k], (cuts[k + 1] if k + 1 < len(cuts) else n) - 1


# A number, its decimals too (jest's `Expected: 90.9` repeats `Expected: 90`).
_DIGITS = re.compile(r"\d+(?:\.\d+)*")
# Words that say that something failed, not what (a run of tests' progress, a summary); not
# `error:`, a diagnostic's severity before its message.
_VERDICT = re.compile(r"\b(?:fail(?:ed|ing|ures?)?|errors?|not ok)\b(?!:)|^\s*[✕×✖](?=\s)", re.IGNORECASE)
# A diff's header is part of its failure's report, never the start of one of its own.
_AT_DIFF = re.compile(_DIFF_HEAD, re.IGNORECASE)
# A failure's title under a runner's report (jest's `●`, vitest's `FAIL file > test`): it opens a run
# of errors, as a bar does, and what the run's errors say leaves it out, as it leaves out a bar's title.
_TITLE = re.compile(r"^\s*(?:● |FAIL\s)")
# The records a question ranks this near the best lead a log's view the response budget cuts,
# while they take at most LEAD_SHARE of it.
LEAD_CLOSE = 0.8
LEAD_SHARE = 0.7
# The best records looked at for a lead, at most: 50,000 `FAILED` lines that rank first and
# cannot lead (they only say that a test failed) cost a log's view half a second to pass over.
LEAD_LOOK = 1000
# A runner's closing count may stand this many lines above the log's last (timings after it).
TAIL_LINES = 8


def failures_first(
    lines: list[str], layout: Layout, scores: list[float], keep: list[bool], max_bytes: int | None
) -> tuple[list[int] | None, list[int]]:
    """How a log the response budget cuts is read: the records the question singles out first,
    then layout.errors_first, then the other records. Records by rank alone spent a test run's
    budget on a few whole failures, or on its summary of FAILED lines, and showed no error.
    Singled out: the kept records ranked near the best (LEAD_CLOSE), when they fit in the view
    (a question that matches every failure alike singles out none), best first, up to LEAD_SHARE
    of it; not a section's title alone, nor records that only say that something failed (they
    come with the errors). Returns the leading records (None: the order by rank) and the lines
    after them."""
    if max_bytes is None or layout.errors_first is None or layout.listed is not None or not layout.units:
        return None, []
    lead: list[int] = []
    top = used = 0.0
    taken: set[int] = set()
    for k in islice(sorted(range(len(scores)), key=lambda k: (-scores[k], k)), LEAD_LOOK):
        u = layout.units[k]
        if scores[k] <= 0 or scores[k] < LEAD_CLOSE * top:
            break
        if not any(keep[u.start : u.end + 1]) or (u.start == u.end and is_separator(lines[u.start])):
            continue
        # A record that only says that tests failed does not lead, but ranks: records far below
        # it (vitest's one-line assertions, scored by their error alone) are not singled out.
        top = top or scores[k]
        if _only_verdicts([line for line in lines[u.start : u.end + 1] if is_error_line(line)]):
            continue
        rows = {i for a, b in [*u.heads, (u.start, u.end)] for i in range(a, b + 1)} - taken
        taken |= rows
        used += sum(line_bytes(i, lines[i]) for i in rows)
        if used <= LEAD_SHARE * max_bytes:
            lead.append(k)
        elif used > max_bytes:
            return [], layout.errors_first  # the question singles nothing out
    return lead, layout.errors_first


def _only_verdicts(errors: Sequence[str]) -> bool:
    """Whether error lines (some) only say that something failed, not what."""
    return bool(errors) and not any(_ERROR.search(_VERDICT.sub("", line)) for line in errors)


def _verdict_tail(lines: list[str], errors: list[bool], last: int) -> list[int]:
    """The log's last line, and the lines before it from the first count of failures among its
    last TAIL_LINES lines (jest's `Tests: 41 failed` above its timing, node's `# fail 41`)."""
    start = last
    seen = 0
    for i in range(last, -1, -1):
        if not lines[i].strip():
            continue
        seen += 1
        if seen > TAIL_LINES:
            break
        if errors[i] and any(c.isdigit() for c in lines[i]) and _only_verdicts([lines[i]]):
            start = i
    return list(range(start, last + 1))


def _errors_first(
    lines: list[str], always: set[int], errors: list[bool], cuts: list[int]
) -> tuple[list[int], set[int]]:
    """A log's last line (a tool's verdict) with a count of failures just above it, then each
    error line with its context (`always`;
    a section's bar or title starts anew) under the title of its section (the separator line
    before it that has words): first the errors that say what failed, in order, those of the
    report (from the first separator line on) before those printed while the tool ran (a test's
    logged tracebacks); then those that only say that something failed (a test run's progress,
    its summary); then any said before (digits aside), the report's first. Also returns the
    lines only such repeats hold."""
    titles = [i for i in cuts if any(c.isalnum() for c in lines[i])]
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip()), None)
    opens = {i for i in cuts if lines[i].lstrip().startswith("=") or any(c.isalnum() for c in lines[i])}
    separators = set(cuts)
    runs: list[list[int]] = []
    for i in sorted(always):
        # An error at the margin opens a report of its own (a logged traceback, a diagnostic), unless
        # it ends the indented lines above (a traceback's exception) or a separator line above makes
        # it a section's (unittest's `-----` under its `FAIL:` title).
        starts = (
            errors[i] and not lines[i][:1].isspace() and not _CONT.match(lines[i])
            and i - 1 not in separators and not lines[i - 1][:1].isspace() and not _AT_DIFF.match(lines[i])
        )
        if runs and runs[-1][-1] == i - 1 and i not in opens and not starts and not _TITLE.match(lines[i]):
            runs[-1].append(i)
        else:
            runs.append([i])
    said: set[tuple[str, ...]] = set()
    first: list[int] = [] if last is None else _verdict_tail(lines, errors, last)
    stray: list[int] = []
    verdicts: list[int] = []
    again: list[int] = []
    stray_again: list[int] = []
    report = cuts[0] if cuts else 0
    for run in runs:
        # What the run's errors say, digits aside and not the title a bar opens (unittest's
        # `ERROR: test_x`): the same error in two tests is said twice.
        told = tuple(_DIGITS.sub("0", lines[i].strip()) for i in run
                     if errors[i] and i - 1 not in opens and not _TITLE.match(lines[i]))
        in_report = next((i for i in run if errors[i]), run[0]) >= report
        if told in said:
            into = again if in_report else stray_again
        elif _only_verdicts(told):
            into = verdicts
        else:
            into = first if in_report else stray
        said.add(told)
        k = bisect_right(titles, run[0]) - 1
        if k >= 0:
            into.append(titles[k])
        into.extend(run)
    told_once = first + stray + verdicts
    return told_once + again + stray_again, set(again + stray_again) - set(told_once)
