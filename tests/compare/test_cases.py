"""gate.compare.cases: how the statistical per-case verdicts are listed in the report."""

import numpy as np
import pytest
from scipy import stats

from gate.compare.cases import listed_as
from gate.stats import MetricInput, analyze_cases


def _binary(base, head):
    base, head = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    no = np.zeros(base.shape, bool)
    return MetricInput("hit_rate@5", "binary", "higher", 0.03, True, base, head, no, np.zeros(head.shape, bool), None)


def test_a_single_observation_drop_is_suspected_by_the_statistics_and_listed_as_regressed():
    flip, same = analyze_cases(_binary([[1.0], [1.0]], [[0.0], [1.0]]))
    assert flip.status == "suspected" and flip.single_observation and np.isnan(flip.p_value)
    assert listed_as(flip, broke=False).status == "regressed"
    assert listed_as(same, broke=False).status == same.status == "unchanged"


def test_a_not_significant_drop_with_repeats_stays_suspected():
    # 3/3 → 1/3 on one case among nine unchanged ones: Fisher's one-sided p = 0.2 (scipy), not a discovery at q = 0.10
    base = [[1.0, 1.0, 1.0]] + [[1.0, 1.0, 1.0]] * 9
    head = [[1.0, 0.0, 0.0]] + [[1.0, 1.0, 1.0]] * 9
    first = analyze_cases(_binary(base, head))[0]
    assert first.p_value == pytest.approx(stats.fisher_exact([[3, 0], [1, 2]], alternative="greater").pvalue)
    assert first.status == "suspected" and not first.single_observation
    assert listed_as(first, broke=False).status == "suspected"


def test_a_case_the_pipeline_broke_is_listed_as_regressed_whatever_its_statistics():
    unchanged = analyze_cases(_binary([[1.0, 1.0]], [[1.0, 1.0]]))[0]
    assert unchanged.status == "unchanged"
    assert listed_as(unchanged, broke=True).status == "regressed"
