"""Paired, variance-aware statistics and the gate decision (DESIGN §4, STATISTICS.md).

Modules: ``significance`` (paired tests, multiplicity), ``discrete`` (exact per-case tests, discrete BH),
``selection`` (the table of which test runs where), ``intervals`` (SEs, CIs), ``power`` (MDE, variance split),
``inputs`` (:class:`MetricInput`), ``cases`` (per-case verdicts), ``decision`` (per-metric analysis and the
verdict), ``sequential`` (anytime-valid early stopping for adaptive evaluation; numpy only). Imports point one way:
decision/cases → selection/power/intervals/discrete → significance/inputs.
"""

import importlib
from typing import Any

_HOME = {  # name → the module that defines it; imported on first use (PEP 562), so a light module such as
    # ``gate.stats.power`` is imported without scipy.stats (``rag-gate validate`` needs only it)
    "CaseResult": "cases", "analyze_cases": "cases",
    "MetricResult": "decision", "analyze_metrics": "decision", "gate_decision": "decision",
    "discrete_bh": "discrete", "fisher_case": "discrete", "permutation_case": "discrete",
    "MetricInput": "inputs",
    "bootstrap_ci": "intervals", "clustered_se": "intervals", "paired_se": "intervals", "t_interval": "intervals",
    "MeanEstimate": "ppi", "classical_mean": "ppi", "judge_mean": "ppi", "ppi_mean": "ppi",
    "mde": "power", "recommendation": "power", "sample_size": "power", "variance_decomposition": "power",
    "TABLE": "selection", "CaseTest": "selection", "MetricTest": "selection", "select": "selection",
    "TestResult": "significance", "benjamini_hochberg": "significance", "holm": "significance",
    "mcnemar_exact": "significance", "sign_flip_test": "significance", "sign_test": "significance",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    """``gate.stats.<name>`` of a public name, imported from its module on first use."""
    if name not in _HOME:
        raise AttributeError(f"module 'gate.stats' has no attribute {name!r}")
    return getattr(importlib.import_module(f"gate.stats.{_HOME[name]}"), name)


__all__ = sorted(_HOME)
