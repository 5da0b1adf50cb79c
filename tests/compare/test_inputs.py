"""gate.compare.inputs: score matrices, the error budget's use, collapsed repeats, clusters and the shown values,
on sides written by hand (tests/compare/conftest.py) and checked against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import metric_input

from gate.compare import inputs
from gate.config import GatePolicy
from gate.models import GoldenCase

NAN = math.nan
GOLDEN = [GoldenCase(f"q{i}", f"Question {i}?", (f"d{i}",), line=i + 1) for i in range(4)]


# ------------------------------------------------------------------------------------ score matrices


def test_score_matrix_keeps_evaluation_failures_and_leaves_out_the_pipelines(make_side):
    # q1 r0: the judge failed; q1 r1: no score row; q2 r1: the pipeline failed (its row says so, and no score)
    side = make_side(
        "base",
        GOLDEN,
        {"hit_rate@1": [[1, 0], ["error: judge timed out", None], [1, None], [NAN, NAN]]},
        errors={("q2", 1): "pipeline crashed"},
    )
    values, failed = inputs.score_matrix(side, GOLDEN, "hit_rate@1")
    np.testing.assert_array_equal(values, [[1, 0], [NAN, NAN], [1, NAN], [NAN, NAN]])
    # a missing row is a failure (q1 r1); a failed prediction is a system error, not an evaluation failure (q2 r1);
    # NaN scored as not applicable (q3) is neither
    assert failed.tolist() == [[False, False], [True, True], [False, False], [False, False]]
    errors = inputs.system_errors(side, GOLDEN)
    assert errors.tolist() == [[False, False], [False, False], [False, True], [False, False]]


def test_score_matrix_follows_the_cases_order_not_the_sides(make_side):
    side = make_side("base", GOLDEN, {"hit_rate@1": [[1], [0], [0], [1]]})
    reordered = [GOLDEN[3], GOLDEN[0]]
    assert inputs.side_rows(side, reordered).tolist() == [3, 0]
    assert inputs.score_matrix(side, reordered, "hit_rate@1")[0].tolist() == [[1.0], [1.0]]


def test_a_paired_metric_has_one_column_whatever_the_repeats(make_side):
    side = make_side("head", GOLDEN, {"head_win_rate": [[1, NAN], [0, NAN], [0.5, NAN], [1, NAN]]})
    values, failed = inputs.score_matrix(side, GOLDEN, "head_win_rate")
    assert values.shape == failed.shape == (4, 1) and values[:, 0].tolist() == [1, 0, 0.5, 1]


def test_budget_use_counts_failures_over_every_cell_with_their_reasons(make_side):
    side = make_side(
        "head",
        GOLDEN,
        {"faithfulness": [["error: judge timed out", 1], ["error: judge timed out", None], [1, 1], [0, 1]]},
    )
    _, failed = inputs.score_matrix(side, GOLDEN, "faithfulness")
    use = inputs.budget_use(side, GOLDEN, "faithfulness", failed)
    # 3 of 8 cells failed: 2 judge time-outs and 1 missing row
    assert (use.metric, use.side, use.failed, use.expected, use.rate) == ("faithfulness", "head", 3, 8, 3 / 8)
    assert use.messages == ("2× judge timed out", "1× no score row (scoring did not finish)")


def test_budget_use_of_a_metric_without_failures_is_zero(make_side):
    side = make_side("base", GOLDEN, {"hit_rate@1": [[1], [0], [1], [1]]})
    use = inputs.budget_use(side, GOLDEN, "hit_rate@1", inputs.score_matrix(side, GOLDEN, "hit_rate@1")[1])
    assert (use.failed, use.expected, use.rate, use.messages) == (0, 4, 0.0, ())


# ------------------------------------------------------------------------------------ collapsed repeats


def test_repeats_that_never_vary_collapse_to_one_column():
    base = (np.array([[1.0, 1.0], [0.0, NAN], [NAN, NAN]]), np.array([[False, False], [False, True], [True, True]]))
    head = (np.array([[0.5, 0.5, 0.5], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]), np.zeros((3, 3), dtype=bool))
    (b, fb), (h, fh) = inputs.collapse_constant_repeats(base, head)
    np.testing.assert_array_equal(b, [[1.0], [0.0], [NAN]])
    assert fb.tolist() == [[False], [False], [True]]  # failed only where every repeat failed
    np.testing.assert_array_equal(h, [[0.5], [1.0], [0.0]])
    assert fh.tolist() == [[False], [False], [False]]


def test_one_varying_case_keeps_every_repeat():
    base = (np.array([[1.0, 1.0], [0.0, 0.0]]), np.zeros((2, 2), dtype=bool))
    head = (np.array([[1.0, 0.0], [0.0, 0.0]]), np.zeros((2, 2), dtype=bool))  # q0 varies on head
    assert inputs.collapse_constant_repeats(base, head) == (base, head)
    single = (np.array([[1.0], [0.0]]), np.zeros((2, 1), dtype=bool))
    assert inputs.collapse_constant_repeats(single, single) == (single, single)


# ------------------------------------------------------------------------------------ clusters


def test_cluster_labels_by_field_tag_prefix_or_none():
    cases = [
        GoldenCase("a", "?", cluster="doc-1", tags=("topic:maps", "easy")),
        GoldenCase("b", "?", cluster="doc-1", tags=("easy", "topic:dates")),
        GoldenCase("c", "?", tags=()),
    ]
    assert inputs.cluster_labels(cases, None) is None
    assert inputs.cluster_labels(cases, "cluster").tolist() == ["doc-1", "doc-1", "case:c"]
    assert inputs.cluster_labels(cases, "tag").tolist() == ["topic:maps", "easy", "case:c"]  # the first tag
    assert inputs.cluster_labels(cases, "tag:topic:").tolist() == ["topic:maps", "topic:dates", "case:c"]


# ------------------------------------------------------------------------------------ shown values


def test_base_value_is_the_mean_of_the_per_case_means():
    # per-case means 0.5, (none), 0.25, 1 → (0.5 + 0.25 + 1) / 3
    assert inputs.base_value(np.array([[1, 0], [NAN, NAN], [0.5, 0], [1, 1]])) == pytest.approx(1.75 / 3)
    assert math.isnan(inputs.base_value(np.empty((0, 1))))


def test_shown_values_are_the_means_over_the_paired_cases():
    # q3 has no base value: left out of both sides' means; q1's failed head repeat is left out of its mean
    inp = metric_input(
        "m",
        "binary",
        [[1, 1], [0, 0], [1, 0], [NAN, NAN]],
        [[0, 0], [1, 0], [1, 1], [1, 1]],
        failed_head=[[False, False], [False, True], [False, False], [False, False]],
    )
    base, head = inputs.shown_values(inp)
    assert base == pytest.approx((1 + 0 + 0.5) / 3) and head == pytest.approx((0 + 1 + 1) / 3)


def test_shown_values_of_a_ratio_metric_are_geometric_means():
    inp = metric_input("m", "ratio", [[100.0], [400.0], [50.0]], [[200.0], [100.0], [0.0]])  # q2: head ≤ 0, unpaired
    base, head = inputs.shown_values(inp)
    assert base == pytest.approx(200.0) and head == pytest.approx(math.sqrt(200.0 * 100.0))
    assert head / base == pytest.approx(math.exp((math.log(2) + math.log(0.25)) / 2))  # the geometric-mean ratio


def test_shown_values_without_a_paired_case_are_nan():
    base, head = inputs.shown_values(metric_input("m", "binary", [[NAN], [1.0]], [[1.0], [NAN]]))
    assert math.isnan(base) and math.isnan(head)


# ------------------------------------------------------------------------------------ the whole step


def test_metric_inputs_hold_each_metrics_matrices_margin_and_budget(make_side):
    policy = GatePolicy(
        metrics=("hit_rate@1", "mrr"),
        gated=("hit_rate@1",),
        margins={"hit_rate@1": {"relative": 0.5, "min": 0.01}},
    )
    base = make_side("base", GOLDEN, {"hit_rate@1": [[1, 1], [1, 1], [0, 0], [1, 1]], "mrr": [[1, 1]] * 4})
    head = make_side("head", GOLDEN, {"hit_rate@1": [[1, 1], [0, 0], [0, 0], ["error: x", 1]], "mrr": [[1, 0.5]] * 4})
    found, budget = inputs.metric_inputs(base, head, GOLDEN, policy)
    assert [(i.name, i.kind, i.direction, i.gated) for i in found] == [
        ("hit_rate@1", "binary", "higher", True),
        ("mrr", "graded", "higher", False),
    ]
    hit, mrr = found
    # hit_rate@1 never varies across repeats on either side: one column; head's q3 keeps its one valid value
    assert hit.base.tolist() == [[1], [1], [0], [1]] and hit.head.tolist() == [[1], [0], [0], [1]]
    assert hit.failed_head.tolist() == [[False], [False], [False], [False]]
    assert hit.margin == pytest.approx(0.5 * 0.75)  # relative to the base's value, 3 of 4 cases
    assert mrr.base.shape == (4, 2) and mrr.margin == 0.03  # mrr varies on head; the registry's default margin
    # only gated metrics use the error budget: one row per side
    assert [(u.metric, u.side, u.failed, u.expected) for u in budget] == [
        ("hit_rate@1", "base", 0, 8),
        ("hit_rate@1", "head", 1, 8),
    ]
