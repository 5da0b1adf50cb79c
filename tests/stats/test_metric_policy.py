"""A metric's gating policy, resolved once (:class:`gate.stats.inputs.MetricPolicy`), against hand-computed values."""

import math

import numpy as np
import pytest

from gate.stats import analyze_metrics
from gate.stats.inputs import ZERO_MARGIN_ALPHA, MetricInput, MetricPolicy


@pytest.mark.parametrize(
    ("kind", "direction", "margin", "oriented", "label"),
    [
        ("binary", "higher", 0.03, 0.03, "0.030"),
        ("graded", "lower", 0.05, 0.05, "0.050"),
        ("ratio", "lower", 0.10, math.log(1.10), "10 %"),  # head/base = 1.10: 10 % slower
        ("ratio", "higher", 0.10, -math.log(0.90), "10 %"),  # head/base = 0.90: 10 % lower
    ],
)
def test_the_margin_is_oriented_and_labelled_once(kind, direction, margin, oriented, label):
    metric_policy = MetricPolicy(kind, direction, margin, 0.05)
    assert metric_policy.oriented_margin == pytest.approx(oriented, rel=1e-12)
    assert metric_policy.label == label and metric_policy.alpha == 0.05


def test_a_zero_margin_is_tested_at_the_zero_margin_level():
    assert ZERO_MARGIN_ALPHA == 0.01
    assert MetricPolicy("binary", "higher", 0.0, 0.05).alpha == 0.01
    assert MetricPolicy("binary", "higher", 1e-9, 0.05).alpha == 0.05


def test_the_decision_reads_the_resolved_policy():
    """The result's α is the policy's α_k, and its reason prints the policy's label."""
    base = np.ones((40, 1))
    head = base.copy()
    head[:10] = 0.0
    no = np.zeros((40, 1), dtype=bool)
    inputs = [
        MetricInput("hit_rate@5", "binary", "higher", 0.0, True, base, head, no, no),
        MetricInput("mrr", "graded", "higher", 0.05, True, base, head, no, no),
    ]
    zero, five = analyze_metrics(inputs, alpha=0.05)
    assert (zero.alpha, five.alpha) == (0.01, 0.05)
    assert zero.status == five.status == "fail"
    assert "margin of 0.000" in zero.reason and "margin of 0.050" in five.reason


@pytest.mark.parametrize(
    ("margin", "cell"), [(0.03, "✅ better, not significant (non-inferior)"), (0.005, "✅ better, not significant")]
)
def test_the_status_cell_shows_the_decisions_non_inferiority(margin, cell):
    """6 cases better and 4 worse of 200 (Δ = +0.01): the exact interval's lower end, about −0.020, excludes a drop of
    0.03 and not one of 0.005; the decision records it and the comment's cell reads it, deciding nothing."""
    from gate.comparison import SideAggregates, metric_row
    from gate.outputs.cells import gate_status
    from gate.stats.summary import aggregate

    base, head = np.zeros((200, 1)), np.zeros((200, 1))
    base[:4], head[4:10] = 1.0, 1.0
    base[10:100], head[10:100] = 1.0, 1.0
    no = np.zeros((200, 1), dtype=bool)
    (result,) = analyze_metrics([MetricInput("hit_rate@5", "binary", "higher", margin, True, base, head, no, no)])
    assert result.status == "pass" and result.delta == pytest.approx(0.01) and -0.03 < result.ci_low < -0.005
    assert result.non_inferior is (result.ci_low >= -margin)
    row = metric_row(
        result, label="Hit rate@5", aggregates=SideAggregates(aggregate(base), aggregate(head)),
        base_value=0.47, head_value=0.48, statistic="mean",
    )  # fmt: skip
    assert gate_status(row) == cell
