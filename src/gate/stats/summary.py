"""Descriptive summaries of one side's (or one run's) metric values: the aggregates of report.json and history.

Shared by ``gate.compare`` (per-side aggregates) and ``gate.history`` (one entry per main-branch run), so both
compute them the same way.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from gate.results import Aggregate


def aggregate(values: np.ndarray) -> Aggregate:
    """Mean, SD (ddof 1), 10th percentile and share below 0.5 of the per-case means of one metric.

    Each case is first averaged over its repeats (NaN repeats ignored); cases without any value (not
    applicable, or every repeat failed) are left out.

    Args:
        values: shape (N cases, R repeats); NaN where not applicable or failed.

    Returns:
        The :class:`Aggregate`: ``p10`` is numpy's linear-interpolation percentile (method 7 of Hyndman & Fan
        1996); ``n`` 0 and None statistics when no case has a value.

    Source: the faithfulness-monitoring method's aggregate views (mean, SD, p10, share of answers below 0.5).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows (N/A cases) give NaN, dropped below
        per_case = np.nanmean(values, axis=1) if values.size else values.reshape(-1)
    per_case = per_case[~np.isnan(per_case)]
    if per_case.size == 0:
        return Aggregate(0, None, None, None, None)
    return Aggregate(
        n=int(per_case.size),
        mean=float(per_case.mean()),
        sd=float(per_case.std(ddof=1)) if per_case.size > 1 else 0.0,
        p10=float(np.percentile(per_case, 10)),
        share_below_0_5=float((per_case < 0.5).mean()),
    )


def run_se(values: np.ndarray) -> float | None:
    """Standard error of a run's mean due to repeat-to-repeat variation, the golden set held fixed.

    SE² = (1/n²) Σᵢ sᵢ² / Rᵢ over the n cases with a value, where sᵢ² is case i's sample variance (ddof 1)
    across its Rᵢ valid repeats. Cases with fewer than two valid repeats are given the mean sᵢ²/Rᵢ of the
    others. This is the run-to-run noise of the metric's mean: what a re-run of the same commit would move.

    Args:
        values: shape (N cases, R repeats); NaN where not applicable or failed.

    Returns:
        The standard error (≥ 0), or None when no case has two valid repeats (R = 1: unknown).

    Source: Miller (2024), "Adding Error Bars to Evals", arXiv:2411.00640, §3 (within-question variance of
    resampled answers).
    """
    valid = ~np.isnan(values)
    counts = valid.sum(axis=1)
    n = int((counts > 0).sum())
    several = counts >= 2
    if n == 0 or not several.any():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        variances = np.nanvar(values[several], axis=1, ddof=1)
    per_case = variances / counts[several]
    return float(math.sqrt(per_case.mean() * n) / n)
