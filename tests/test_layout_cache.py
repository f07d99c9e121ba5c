"""Code layouts kept between calls: the same views as laid out anew, a changed file laid out
again, and a bound on what is kept."""

from __future__ import annotations

import pytest

from jeeves_mcp.pruning.engine import Around, _planner, select_lines
from jeeves_mcp.pruning.engine._planner import code_layouts


def _module(functions: int, extra: str = "") -> list[str]:
    lines = ["import os", ""]
    for i in range(functions):
        lines += [
            f"class Store{i}:",
            f"    capacity = {i}",
            "",
            f"    def load_{i}(self, path):",
            f"        with open(os.path.join(path, 'part{i}')) as f:",
            "            return f.read()",
            "",
            f"    def save_{i}(self, path, data):",
            "        os.makedirs(path, exist_ok=True)",
            f"        return len(data) + {i}",
            "",
        ]
    return lines + ([extra] if extra else [])


QUESTIONS = ["where does Store7 load its part", "how is data saved by Store31", "where does Store7 load its part"]


@pytest.fixture(autouse=True)
def fresh_layouts():
    code_layouts.clear()
    yield
    code_layouts.clear()


def test_kept_layouts_give_the_views_a_fresh_layout_gives():
    """Reads of one text under other questions, whole and as windows, one after another: each
    view is the one the text laid out anew gives (a kept layout is never changed by a call)."""
    lines = _module(60)
    calls = [dict(path="store.py"), dict(path="store.py", around=Around(lines, 200))]
    for call in calls:
        text = lines[200:400] if "around" in call else lines
        kept = [select_lines(text, q, "code", max_bytes=4096, **call) for q in QUESTIONS]
        assert len(code_layouts) == 1
        anew = []
        for q in QUESTIONS:
            code_layouts.clear()
            anew.append(select_lines(text, q, "code", max_bytes=4096, **call))
        assert [(s.keep, s.reasons, s.order) for s in kept] == [(s.keep, s.reasons, s.order) for s in anew]
    # The first and the third call asked the same question: the same view.
    assert kept[0].keep == kept[2].keep


def test_a_changed_file_is_laid_out_anew():
    before = _module(40)
    select_lines(before, "where are rows exported to csv", "code", path="store.py", max_bytes=2048)
    after = _module(40, "def export_rows_to_csv(rows, out):\n    out.write(','.join(rows))")
    after = "\n".join(after).split("\n")
    sel = select_lines(after, "where are rows exported to csv", "code", path="store.py", max_bytes=2048)
    new = after.index("def export_rows_to_csv(rows, out):")
    assert sel.keep[new] and sel.keep[new + 1]
    assert len(code_layouts) == 2


def test_what_is_kept_is_bounded(monkeypatch):
    monkeypatch.setattr(_planner, "LAYOUTS_ENTRIES", 3)
    monkeypatch.setattr(_planner, "LAYOUTS_LINES", 2_000)
    for n in range(5):
        select_lines(_module(10 + n), "where does Store3 load its part", "code", path="store.py")
    assert len(code_layouts) == 3 and code_layouts.lines <= 2_000
    code_layouts.clear()
    big = _module(200)  # 2,202 lines: over the bound, laid out and not kept
    select_lines(big, "where does Store3 load its part", "code", path="store.py")
    assert len(code_layouts) == 0 and code_layouts.lines == 0
    for n in range(3):
        select_lines(_module(60 + n), "where does Store3 load its part", "code", path="store.py")
    assert code_layouts.lines <= 2_000 and len(code_layouts) < 3  # three of ~670 lines do not fit


def test_long_lines_are_bounded_by_their_characters(monkeypatch):
    """A run may print texts of megabytes in a few lines: what is kept is bounded in characters too."""
    monkeypatch.setattr(_planner, "LAYOUTS_CHARS", 100_000)
    wide = ["x = '" + "a" * 30_000 + f"{n}'" for n in range(2)]
    for n in range(3):
        select_lines([f"# text {n}", *wide, *_module(3)], "where does Store1 load its part", "code", path="w.py")
    assert code_layouts.chars <= 100_000 and len(code_layouts) == 1
    select_lines(["x = '" + "a" * 200_000 + "'", *_module(3)], "where does Store1 load its part", "code", path="w.py")
    assert len(code_layouts) == 1  # over the bound alone: laid out, not kept
