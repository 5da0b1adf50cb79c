"""Calibration of the trend alarm: a metric's run-to-run variability and the thresholds it suggests (DESIGN §9).

The noise is estimated from several run directories of one golden set and config (the SD of their means), or
from one run's repeats (its repeat standard error, Miller 2024, arXiv:2411.00640, §3).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gate.errors import InputError
from gate.history.entries import RunSummary
from gate.history.trend import direction_and_label
from gate.stats.summary import run_se
from gate.trends import TrendPolicy

MIN_WARNING, MIN_CRITICAL = 0.01, 0.02
"""Smallest thresholds :func:`calibrate` suggests (for metrics without run-to-run noise, e.g. fixed retrieval)."""
WARNING_Z, CRITICAL_Z = 2.0, 3.0
"""Calibration: thresholds at 2 and 3 noise SDs (one-sided false-alarm rates 2.3 % and 0.13 % per run)."""


@dataclass(frozen=True)
class Calibration:
    """A metric's run-to-run variability and the trend thresholds it suggests."""

    metric: str
    """Metric name, e.g. ``hit_rate@5``."""
    label: str
    """Display label, e.g. ``Hit rate@5``."""
    method: Literal["across runs", "within-run repeats"]
    """How the noise was estimated: SD of the means of several runs, or from one run's repeats."""
    n_runs: int
    """Runs the noise was estimated from (1 for within-run repeats)."""
    mean: float
    """Mean of the metric over the runs."""
    run_sd: float
    """SD of one run's mean (run-to-run noise at a fixed golden set and config)."""
    relative_noise: float
    """SD of the relative drop of a stable system against a ``window`` baseline: run_sd·√(1 + 1/window)/mean; 0
    for a metric that is always 0, inf for one whose mean is 0 but that varies (no relative threshold fits it)."""
    suggested_warning: float | None
    """WARNING_Z × relative_noise rounded up to 0.005 (at least MIN_WARNING); None when relative_noise is inf."""
    suggested_critical: float | None
    """CRITICAL_Z × relative_noise rounded up to 0.005 (at least MIN_CRITICAL and above the warning); None when
    relative_noise is inf."""
    false_alarm_warning: float | None
    """Probability that a stable run reaches the configured warning threshold (normal approximation); None when
    relative_noise is inf."""
    false_alarm_critical: float | None
    """Probability that a stable run reaches the configured critical threshold; None when relative_noise is inf."""


def _mean(values: np.ndarray) -> float | None:
    """The run's mean of per-case means (as :func:`aggregate`), None without values."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        per_case = np.nanmean(values, axis=1)
    per_case = per_case[~np.isnan(per_case)]
    return float(per_case.mean()) if per_case.size else None


def _round_up(value: float, step: float = 0.005) -> float:
    return round(math.ceil(value / step - 1e-9) * step, 6)


def calibrate(runs: Sequence[RunSummary], trend: TrendPolicy) -> list[Calibration]:
    """Estimate each metric's run-to-run noise and suggest trend thresholds above it.

    With two or more runs (the same commit evaluated several times, or stable main-branch runs), the noise is the
    SD (ddof 1) of their means. With one run, it is the run's repeat standard error (:func:`run_se`, needs
    R ≥ 2). The trend compares a run with the mean of ``window`` runs, so a stable system's relative drop has
    SD ``relative_noise = run_sd·√(1 + 1/window) / mean``; suggested thresholds are 2 and 3 times that (one-sided
    false alarms 2.3 % and 0.13 % per run and metric), and the configured thresholds' false-alarm rates are
    P(Z ≥ threshold / relative_noise).

    Args:
        runs: the runs; all must share the golden set and config.
        trend: the configured window and thresholds.

    Returns:
        One calibration per metric with a mean in every run (in the first run's order).

    Raises:
        InputError: no run; runs of different golden sets or configs; a single run with one repeat.
    """
    from scipy.stats import norm

    if not runs:
        raise InputError("calibration needs at least one run directory")
    first = runs[0]
    for other in runs[1:]:
        for key in ("golden_sha256", "config_sha256"):
            if getattr(other, key) != getattr(first, key):
                raise InputError(
                    f"{other.name}: {key} differs from {first.name}; calibrate on runs of one golden set and config"
                )
    out = []
    for metric, values in first.matrices.items():
        means = [m for run in runs if metric in run.matrices and (m := _mean(run.matrices[metric])) is not None]
        if len(means) != len(runs) or not means:
            continue
        if len(runs) >= 2:
            method, sd = "across runs", float(np.std(means, ddof=1))
        else:
            se = run_se(values)
            if se is None:
                raise InputError(
                    f"{first.name}: one run with one repeat shows no run-to-run variability; pass several run "
                    "directories of the same commit, or a run with repeats ≥ 2"
                )
            method, sd = "within-run repeats", se
        mean = float(np.mean(means))
        if mean:
            relative = sd * math.sqrt(1 + 1 / trend.window) / abs(mean)
        else:  # a drop from a zero baseline is 0 or infinite (relative_drop): fine if the metric never moves
            relative = 0.0 if sd == 0 else math.inf
        warning = critical = None
        if math.isfinite(relative):
            warning = max(MIN_WARNING, _round_up(WARNING_Z * relative))
            critical = max(MIN_CRITICAL, _round_up(CRITICAL_Z * relative), warning)

        def false_alarm(threshold: float, relative: float = relative) -> float | None:
            if not math.isfinite(relative):
                return None
            return float(norm.sf(threshold / relative)) if relative > 0 else 0.0

        direction, label = direction_and_label(metric)
        out.append(
            Calibration(
                metric=metric,
                label=label,
                method=method,  # type: ignore[arg-type]
                n_runs=len(runs),
                mean=mean,
                run_sd=sd,
                relative_noise=relative,
                suggested_warning=warning,
                suggested_critical=critical,
                false_alarm_warning=false_alarm(trend.warning),
                false_alarm_critical=false_alarm(trend.critical),
            )
        )
    return out
