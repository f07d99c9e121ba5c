"""Worth known before the question is weighed: the caller's per-line priors (git history)."""

from __future__ import annotations

from collections.abc import Sequence

from ._text import query_terms

# Share given to the lines last changed by a commit whose subject shares SUBJECT_TERMS terms
# of the question (a fix often lands where an earlier change on the same topic did; such
# lines hold 5.6 times their share of the fixes on 2,908 commit tasks). Judged on 368 commit
# tasks from 8 repositories never tuned on: +1.9 points of recall (9 cases up, none down),
# reduction level; +1.7 on 484 more, +0.5 and +0.6 on the held-out sets, tuning set level.
SUBJECT_SHARE = 0.05
SUBJECT_TERMS = 2


def with_priors(
    values: list[float], priors: Sequence[tuple[Sequence[float], float]]
) -> list[float]:
    """`values` with, for each (prior, share), `share` of their total given out in proportion
    to the prior; a prior that is zero everywhere gives nothing and takes nothing."""
    given = []
    for prior, share in priors:
        weight = sum(p for p in prior if p > 0)
        if weight > 0:
            given.append((prior, share, weight))
    if not given:
        return values
    total = sum(values)
    kept = 1 - sum(share for _, share, _ in given)
    out = [v * kept for v in values]
    for prior, share, weight in given:
        give = share * total / weight
        for i, p in enumerate(prior):
            if p > 0:
                out[i] += give * p
    return out


def on_topic(subjects: Sequence[str | None], question_terms: Sequence[str]) -> list[float]:
    """1.0 for a line whose commit subject shares SUBJECT_TERMS terms with the question."""
    asked = set(question_terms)
    if len(asked) < SUBJECT_TERMS:
        return [0.0] * len(subjects)
    shared: dict[str | None, float] = {None: 0.0}
    out = []
    for subject in subjects:
        hit = shared.get(subject)
        if hit is None:
            hit = float(len(asked.intersection(query_terms(subject or ""))) >= SUBJECT_TERMS)
            shared[subject] = hit
        out.append(hit)
    return out
