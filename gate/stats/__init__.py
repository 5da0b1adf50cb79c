"""Paired, variance-aware statistics and the gate decision (DESIGN §4, STATISTICS.md, issue 4).

Modules: ``significance`` (paired tests, multiplicity), ``discrete`` (exact per-case tests, discrete BH),
``selection`` (the table of which test runs where), ``intervals`` (SEs, CIs), ``power`` (MDE, variance split),
``inputs`` (:class:`MetricInput`), ``cases`` (per-case verdicts), ``decision`` (per-metric analysis and the
verdict). Imports point one way: decision/cases → selection/power/intervals/discrete → significance/inputs.
"""

from gate.stats.cases import CaseResult, analyze_cases
from gate.stats.decision import MetricResult, analyze_metrics, gate_decision
from gate.stats.discrete import discrete_bh, fisher_case, permutation_case
from gate.stats.inputs import MetricInput
from gate.stats.intervals import bootstrap_ci, clustered_se, paired_se, t_interval
from gate.stats.power import mde, recommendation, sample_size, variance_decomposition
from gate.stats.selection import TABLE, CaseTest, MetricTest, select
from gate.stats.significance import (
    TestResult,
    benjamini_hochberg,
    holm,
    mcnemar_exact,
    sign_flip_test,
    sign_test,
)

__all__ = [
    "TABLE",
    "CaseResult",
    "CaseTest",
    "MetricInput",
    "MetricResult",
    "MetricTest",
    "TestResult",
    "analyze_cases",
    "analyze_metrics",
    "benjamini_hochberg",
    "bootstrap_ci",
    "clustered_se",
    "discrete_bh",
    "fisher_case",
    "gate_decision",
    "holm",
    "mcnemar_exact",
    "mde",
    "paired_se",
    "permutation_case",
    "recommendation",
    "sample_size",
    "select",
    "sign_flip_test",
    "sign_test",
    "t_interval",
    "variance_decomposition",
]
