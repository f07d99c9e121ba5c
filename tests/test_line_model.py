"""The engine's learned line model: where it applies, what it keeps of the planner, what it learned."""

from __future__ import annotations

import math

import pytest

from jeeves_mcp.pruning.engine import _line_model, select_lines
from jeeves_mcp.pruning.engine._code import code_layout
from jeeves_mcp.pruning.engine._plan import line_values, unit_chances
from jeeves_mcp.pruning.engine._rank import score_units
from jeeves_mcp.pruning.engine._text import query_identifiers, query_terms

QUESTION = "retry the upload when the server closes the connection"


def module(count: int) -> list[str]:
    """A module of `count` small functions, one of them about the question."""
    parts = ['"""Uploads."""\n\nimport os\n\n\n']
    for n in range(count):
        parts.append(f"def helper_{n}(value):\n    total = value * {n}\n    return total + {n}\n\n\n")
        if n == count // 2:
            parts.append(
                "def upload(client, data):\n"
                '    """Send the data."""\n'
                "    for attempt in range(3):\n"
                "        try:\n"
                "            return client.send(data)\n"
                "        except ConnectionError:\n"
                "            client.reconnect()\n"
                "    raise RuntimeError('server closed the connection')\n\n\n"
            )
    return "".join(parts).split("\n")


def planned(lines: list[str], recency: list[float] | None = None) -> _line_model.PlannedText:
    """The planner's state for QUESTION, as select_lines builds it (no history unless given)."""
    n = len(lines)
    layout = code_layout(lines, "mod.py")
    scored = score_units(lines, layout.units, query_terms(QUESTION), query_identifiers(QUESTION),
                         compound=True, references=True, prose=layout.prose)
    chances = unit_chances(scored.units, 0.12)
    values = line_values(n, layout, chances, scored.lines, prose=layout.prose)
    return _line_model.PlannedText(lines, layout, chances, scored.lines, values,
                                   recency or [0.0] * n, [0.0] * n, layout.prose)


def test_every_feature_has_a_weight_and_a_value_per_line():
    lines = module(80)
    assert set(_line_model.WEIGHTS) == set(_line_model.FEATURES)
    columns = _line_model.line_features(planned(lines))
    assert list(columns) == list(_line_model.FEATURES)
    assert all(len(column) == len(lines) for column in columns.values())
    assert all(math.isfinite(x) for column in columns.values() for x in column)


def test_the_scores_are_the_weights_dotted_with_the_features():
    # Scoring folds shared columns and per-unit features into few passes; the fit reads the
    # columns: both must say the same, with history in play.
    lines = module(80)
    recency = [0.0] * len(lines)
    recency[40:44] = [1.0, 1.0, 0.5, 0.25]
    state = planned(lines, recency)
    columns = _line_model.line_features(state)
    folded = _line_model._features(state).scores(_line_model.WEIGHTS)
    for i in range(len(lines)):
        dot = sum(_line_model.WEIGHTS[name] * columns[name][i] for name in _line_model.FEATURES)
        assert math.isclose(folded[i], dot, rel_tol=1e-9, abs_tol=1e-9)


def test_the_model_keeps_the_planners_total_and_order_of_magnitude():
    lines = module(80)
    assert len(lines) >= _line_model.MIN_LINES
    state = planned(lines)
    values = state.values
    learned = _line_model.learned_values(state)
    assert learned != values
    assert math.isclose(sum(learned), sum(values))
    asked = next(i for i, x in enumerate(lines) if "client.reconnect()" in x)
    # The asked function's lines stay far above an unrelated helper's.
    helper = next(i for i, x in enumerate(lines) if x.startswith("def helper_3("))
    assert learned[asked] > 5 * learned[helper + 1]


@pytest.mark.parametrize("count", [10, 40, 1300])
def test_a_text_outside_the_fitted_sizes_keeps_the_planners_values(count):
    # The tasks the model was fitted on hold 300 to about 5,000 lines.
    lines = module(count)
    assert not _line_model.MIN_LINES <= len(lines) <= _line_model.MAX_LINES
    state = planned(lines)
    assert _line_model.learned_values(state) == list(state.values)


def test_a_text_without_structure_keeps_the_planners_values():
    lines = [f"entry {n} of the list, nothing to see" for n in range(400)]
    lines[200] = "the upload retry when the server closes the connection"
    state = planned(lines)
    assert _line_model.learned_values(state) == list(state.values)
    sel = select_lines(lines, QUESTION, "code")
    assert sel.keep[200] and sum(sel.keep) < 0.6 * len(lines)


def test_lines_of_the_newest_commit_gain_over_the_planner():
    # What the fit learned from real fixes: a line the last commit changed is worth more than
    # the planner's fixed share says, even in a function the question does not name.
    lines = module(80)
    changed = next(i for i, x in enumerate(lines) if x.startswith("def helper_70(")) + 1
    recency = [0.0] * len(lines)
    recency[changed] = 1.0
    plain = _line_model.learned_values(planned(lines))
    recent = _line_model.learned_values(planned(lines, recency))
    assert recent[changed] / sum(recent) > 2 * plain[changed] / sum(plain)


def test_a_docstring_line_is_worth_less_than_the_code_beside_it():
    lines = module(80)
    learned = _line_model.learned_values(planned(lines))
    doc = next(i for i, x in enumerate(lines) if '"""Send the data."""' in x)
    assert learned[doc] < learned[doc + 1]
