"""gate.compare.cases.ood_failures: out-of-domain failures read from the sides' scored ``refusal`` rows, on sides
written by hand (tests/compare/conftest.py) whose answer texts are never refusals by the phrases."""

from __future__ import annotations

import math

import pytest

from gate.compare import compare
from gate.compare.cases import ood_failures
from gate.config import GatePolicy
from gate.golden import ood_unchecked_warning
from gate.models import GoldenCase
from gate.outputs.markdown import render_comment
from gate.outputs.text import render_text
from gate.scoring import detect_refusal

NAN = math.nan
GOLDEN = [
    GoldenCase("q0", "Question 0?", ("d0",), line=1),
    *(GoldenCase(f"o{i}", f"Off-topic {i}?", (), out_of_domain=True, line=i + 2) for i in range(4)),
]
POLICY = GatePolicy(metrics=("refusal", "error_rate"), gated=("refusal",))


def _sides(make_side):
    # refusal per case × repeat (1 refused, 0 answered, None: no row, the prediction failed); q0 is in domain (NaN)
    base = make_side("base", GOLDEN, {"refusal": [[NAN] * 3, [1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 1, 1]]})
    head = make_side(
        "head",
        GOLDEN,
        {"refusal": [[NAN] * 3, [0, 0, 0], [1, 1, 0], [None, 0, 0], [None, None, None]]},
        errors={("o2", 0): "timeout", **{("o3", r): "crash" for r in range(3)}},
    )
    return base, head


def test_out_of_domain_failures_come_from_the_scored_refusals_not_the_answer_text(make_side):
    base, head = _sides(make_side)
    # the texts ("answer o0", …) are no refusal by the configured phrases: re-detecting would see no refusal at all
    ids = [case.id for case in GOLDEN]
    answers = [p for side in (base, head) for rows in side.valid_many(ids).values() for p in rows]
    assert answers and not any(detect_refusal(p, POLICY) for p in answers)
    found = ood_failures(base, head, GOLDEN, POLICY)
    # o0: refused on base in 3/3, answered on head in 3/3: new. o1: head refused 2/3 (≥ 0.5), not listed.
    # o2: head answered both repeats that ran (the failed r0 has no value), base refused 2/3: listed, not new.
    # o3: every head repeat failed: no refusal rate, not listed.
    assert [(f.id, f.new, f.line) for f in found] == [("o0", True, 2), ("o2", False, 4)]
    assert [(f.base_refusal_rate, f.head_refusal_rate) for f in found] == [(1.0, 0.0), (pytest.approx(2 / 3), 0.0)]
    assert [f.answer for f in found] == ["answer o0", "answer o2"]  # the first repeat scored as answered
    assert [f.latency_ms for f in found] == [10.0, 10.0]
    assert ood_failures(base, head, GOLDEN, POLICY, batch=1) == found


def test_the_scored_refusal_wins_over_a_text_that_reads_as_a_refusal(make_side):
    base, head = _sides(make_side)
    phrases = GatePolicy(metrics=POLICY.metrics, refusal_phrases=("answer",))  # every answer text now "refuses"
    assert all(detect_refusal(p, phrases) for p in head.valid_many(["o0"])["o0"])
    assert [f.id for f in ood_failures(base, head, GOLDEN, phrases)] == ["o0", "o2"]


def test_no_out_of_domain_failures_are_listed_when_refusal_is_not_scored_and_a_warning_says_so(make_side):
    base, head = _sides(make_side)
    unscored = GatePolicy(metrics=("error_rate",), gated=("error_rate",))
    assert ood_failures(base, head, GOLDEN, unscored) == []
    (warning,) = ood_unchecked_warning(GOLDEN, unscored.metrics)
    assert warning.startswith("4 out-of-domain case(s) are not scored for refusals: `refusal` is not in metrics")
    assert ood_unchecked_warning(GOLDEN, POLICY.metrics) == []
    assert ood_unchecked_warning(GOLDEN[:1], unscored.metrics) == []


def test_the_summary_lines_say_not_checked_instead_of_zero_new(make_side):
    base, head = _sides(make_side)
    for policy, said in ((GatePolicy(metrics=("error_rate",), gated=("error_rate",)),
                          "out-of-domain failures: not scored (refusal is not in metrics)"),
                         (POLICY, "out-of-domain failures: 1 new, 1 not new")):  # fmt: skip
        comparison = compare(base, head, policy)
        assert said in render_comment(comparison) and said in render_text(comparison)
