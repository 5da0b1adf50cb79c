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
    policy = MetricPolicy(kind, direction, margin, 0.05)
    assert policy.oriented_margin == pytest.approx(oriented, rel=1e-12)
    assert policy.label == label and policy.alpha == 0.05


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
