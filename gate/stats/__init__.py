"""Paired, variance-aware statistics and the gate decision (DESIGN §4, STATISTICS.md, issue 4).

Modules: ``tests`` (hypothesis tests, multiplicity), ``intervals`` (SEs, CIs), ``power`` (MDE, variance
split), ``inputs`` (:class:`MetricInput`), ``cases`` (per-case verdicts), ``decision`` (per-metric analysis and
the verdict). Imports point one way: decision/cases → power/intervals → tests.
"""

from gate.stats.cases import CaseResult, analyze_cases
from gate.stats.decision import MetricResult, analyze_metrics, gate_decision
from gate.stats.inputs import MetricInput
from gate.stats.intervals import bootstrap_ci, clustered_se, paired_se, t_interval
from gate.stats.power import mde, recommendation, sample_size, variance_decomposition
from gate.stats.significance import (
    TestResult,
    benjamini_hochberg,
    boschloo_per_case,
    fit_variance_prior,
    holm,
    mcnemar_exact,
    moderated_welch,
    sign_flip_test,
)

__all__ = [
    "CaseResult",
    "MetricInput",
    "MetricResult",
    "TestResult",
    "analyze_cases",
    "analyze_metrics",
    "benjamini_hochberg",
    "bootstrap_ci",
    "boschloo_per_case",
    "clustered_se",
    "fit_variance_prior",
    "gate_decision",
    "holm",
    "mcnemar_exact",
    "mde",
    "moderated_welch",
    "paired_se",
    "recommendation",
    "sample_size",
    "sign_flip_test",
    "t_interval",
    "variance_decomposition",
]
