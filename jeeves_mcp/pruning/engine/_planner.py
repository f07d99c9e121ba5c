"""The planner's part shared by select_lines and the learned model's fit: a text's layout, its
scores, and for code the line values the learned model weighs."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

from ._ages import listed_file_ages, listed_paths, name_directories
from ._code import code_layout
from ._docs import docs_layout
from ._git import git_layout, is_git_output
from ._line_model import PlannedText
from ._line_refs import favour_named_lines, named_lines
from ._logs import file_sections, logs_layout, name_sections
from ._matches import line_paths, search_layout, tree_layout
from ._plan import line_values, unit_chances
from ._prior import SUBJECT_SHARE, on_topic, with_priors
from ._rank import Scores, score_units
from ._text import Matcher, query_identifiers, query_terms
from ._units import Layout

__all__ = [
    "ABOUT_DOCS", "CODE_TEMP", "PRIOR_SHARE", "code_layouts", "plan_code", "planned_code", "scored_text", "text_layout",
]

# Softmax temperature of code unit scores, relative to the best score (docs: DOCS_TEMP).
# 0.12 rather than 0.1 (with the fixed share of the view then, 0.265 rather than 0.27):
# function needles share >= 0.9 +1.6 points tuned on and +1.5 held out, held-out commit
# tasks level, their tuning set -0.3. On sets made afterwards, case by case: needles from 15
# libraries 10 up / 4 down (+0.1), commit tasks from 12 repositories 4 up / 4 down (-0.5).
CODE_TEMP = 0.12
# Share of the value of code lines given by the caller's prior (recent changes, see
# pruning.history): +4.4 points of recall on held-out commit tasks, -0.9 on function
# needles from the same repositories.
PRIOR_SHARE = 0.05

# Words of a question about a text's documentation (a docstring's wording, a typo): its
# docstrings then weigh as much as its code. Not "comment" (a `#` comment is code already,
# and lexers have comment tokens) nor "document" (a noun of many domains). Commit tasks
# whose fix edits a docstring and whose subject says so: 0.66 -> 0.71 recall held out
# (49 cases; all held-out commit tasks +0.2 points, tuning set +0.3, needles level).
# "example" (not "for example") and "clarify": a docstring's example or wording (tuning sets: 4
# cases up, none down; needles level). Not "explain": agents ask to explain code.
ABOUT_DOCS = re.compile(
    r"\b(?:docs?|docstrings?|documentation|documented|typos?|spelling|misspel\w*|wording"
    r"|jsdoc|javadoc|rustdoc|godoc|tsdoc|doxygen"
    r"|grammar|codespell|reword\w*|rephrase\w*|(?<!for )examples?|clarif\w*)\b",
    re.IGNORECASE,
)


# A run reads and searches the same files again and again (a window of a file is ranked within
# the whole file, each page of it; a search lays out the ten files it values most): a code
# layout depends on the text and the path alone, so the newest are kept, the least recently used
# out first. A 10,000-line module read again: 108 -> 31 ms (bench/prune_speed.py's `again` rows);
# about 100 to 120 bytes a line kept (64 modules of 68,000 lines: 7 MiB; 96,000 lines of dense
# generated classes: 11 MiB). The characters are bounded too:
# a run may print texts of 2 MiB in few lines.
LAYOUTS_ENTRIES = 64
LAYOUTS_LINES = 100_000
LAYOUTS_CHARS = 8 * 1024 * 1024


class _Layouts:
    """Code layouts by (path, text), at most LAYOUTS_ENTRIES of them, LAYOUTS_LINES lines and
    LAYOUTS_CHARS characters in all; shared by the engine's threads (a call past its deadline is
    abandoned, not stopped). A layout handed out is read, never changed, by whoever gets it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str | None, str], tuple[Layout, int]] = OrderedDict()
        self._lines = 0
        self._chars = 0

    def get(self, lines: list[str], path: str | None) -> Layout:
        key = (path, "\n".join(lines))
        with self._lock:
            if (found := self._items.get(key)) is not None:
                self._items.move_to_end(key)
                return found[0]
        layout = code_layout(lines, path, key[1])
        with self._lock:
            if key not in self._items and len(lines) <= LAYOUTS_LINES and len(key[1]) <= LAYOUTS_CHARS:
                self._items[key] = (layout, len(lines))
                self._lines += len(lines)
                self._chars += len(key[1])
                while (
                    self._lines > LAYOUTS_LINES or self._chars > LAYOUTS_CHARS or len(self._items) > LAYOUTS_ENTRIES
                ):
                    (_, text), (_, size) = self._items.popitem(last=False)
                    self._lines -= size
                    self._chars -= len(text)
        return layout

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._lines = self._chars = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def lines(self) -> int:
        return self._lines

    @property
    def chars(self) -> int:
        return self._chars


code_layouts = _Layouts()


def text_layout(lines: list[str], source_type: str, path: str | None) -> Layout:
    if source_type == "code":
        return code_layouts.get(lines, path)
    if source_type == "docs":
        return docs_layout(lines)
    if is_git_output(lines):
        return git_layout(lines)
    paths = line_paths(lines)
    if paths is not None:
        return search_layout(lines, paths)
    layout = logs_layout(lines)
    if (listed := listed_paths(lines)) is not None:
        layout.listed, layout.tree = listed
        name_directories(layout, lines)
    elif (headers := file_sections(lines)) is not None:
        name_sections(layout, lines, headers)
    return layout


def scored_text(
    lines: list[str], question: str, source_type: str, path: str | None,
    qterms: list[str], identifiers: list[str], between: Callable[[], None] = lambda: None,
    file_ages: Callable[[str], int | None] | None = None, match: Matcher | None = None,
) -> tuple[Layout, AbstractSet[int], Scores]:
    """The layout, the docstring lines that weigh as prose, and the scores of units and lines;
    `between` runs after the layout, before the scoring (select_lines checks its deadline);
    `file_ages`: how many commits ago a file a listing's line names changed (see _ages);
    `match`: the Matcher texts of one question share (score_units)."""
    layout = text_layout(lines, source_type, path)
    if (listed := layout.listed) is not None and file_ages is not None:
        if layout.tree:
            # Weighed by their ages, tree's entries are ranked one by one (without, as a log's lines).
            layout = tree_layout(lines, listed)
            name_directories(layout, lines)
        listed_file_ages(layout, listed, file_ages)
    between()
    # A question about the documentation wants the docstrings as much as the code.
    prose = layout.prose if not ABOUT_DOCS.search(question) else frozenset()
    code = source_type == "code"
    scored = score_units(lines, layout.units, qterms, identifiers, by_line=source_type != "logs" or layout.by_line,
                         compound=code, references=code, neighbours=source_type == "docs", prose=prose,
                         match=match)
    if code and (named := named_lines(question, len(lines), path)):
        favour_named_lines(scored, layout, named)
    for k, lead in layout.follows.items():
        scored.units[k] = max(scored.units[k], scored.units[lead])
    return layout, prose, scored


def plan_code(
    lines: list[str], layout: Layout, scored: Scores, prose: AbstractSet[int], qterms: list[str],
    line_prior: Sequence[float] | None, line_subjects: Sequence[str | None] | None,
) -> PlannedText:
    """Unit chances, line values and the history priors of a code text: the learned model's input."""
    n = len(lines)
    chances = unit_chances(scored.units, CODE_TEMP)
    values = line_values(n, layout, chances, scored.lines, prose=prose)
    recency = list(line_prior) if line_prior is not None and len(line_prior) == n else [0.0] * n
    topical = (
        on_topic(line_subjects, qterms) if line_subjects is not None and len(line_subjects) == n else [0.0] * n
    )
    values = with_priors(values, [(recency, PRIOR_SHARE), (topical, SUBJECT_SHARE)])
    return PlannedText(lines, layout, chances, scored.lines, values, recency, topical, prose)


def planned_code(
    lines: Sequence[str], question: str, path: str | None = None,
    line_prior: Sequence[float] | None = None, line_subjects: Sequence[str | None] | None = None,
) -> PlannedText:
    """What select_lines' code path makes of a text before the learned model weighs it."""
    lines = list(lines)
    qterms = query_terms(question)
    layout, prose, scored = scored_text(lines, question, "code", path, qterms, query_identifiers(question))
    return plan_code(lines, layout, scored, prose, qterms, line_prior, line_subjects)
