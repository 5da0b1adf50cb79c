"""The trend alarm: a run against the mean of the previous comparable main-branch entries (DESIGN §9).

The **trend alarm** compares a run (the latest entry, or a PR head) with the mean of the previous ``window``
*comparable* entries (same golden set and config sha256): WARNING at a relative drop of ``warning`` (5 %),
CRITICAL at ``critical`` (10 %). Per-PR margins let a slow drift through (five PRs that each lose 2 points all
pass); the alarm sees it, as long as it is faster than about 2·warning·baseline/(window + 1) per run (a steady
drift of d per run shows as d·(window + 1)/2 against the window's mean). The result types are
:mod:`gate.trends` (a contract); rendering is in ``gate.outputs.trend``.

Source: the trend alarm follows the faithfulness-monitoring method this project implements (compare the latest
evaluation with the mean of the previous 4; warn at a 5 % relative drop, critical at 10 %; calibrate on the
metric's natural variability).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from gate.errors import InputError
from gate.history.entries import HistoryEntry
from gate.metrics import resolve
from gate.trends import MetricTrend, TrendPolicy, TrendReport, TrendStatus

TOLERANCE = 1e-9
"""A relative drop within this of a threshold counts as reaching it (0.05 exactly is a 5 % WARNING, whatever
the floating-point rounding of ``(b - v) / b``)."""
NOISE_Z = 2.0
"""A drop is called beyond the natural variability when it exceeds this many standard deviations of noise."""
CHART_POINTS = 8
"""Main-branch entries kept per metric for charts (``MetricTrend.recent``)."""


def relative_drop(value: float, baseline: float, direction: str) -> float:
    """Relative drop of ``value`` from ``baseline``; positive = worse, whatever the metric's direction.

    drop = (baseline − value) / |baseline| for higher-is-better metrics, (value − baseline) / |baseline| for
    lower-is-better ones (a rise in latency or contradiction rate is the drop). With a zero baseline the drop
    is 0 when the value is equal and ±inf otherwise.

    Args:
        value: the run's mean.
        baseline: the mean of the window.
        direction: ``higher`` or ``lower`` (is better).

    Returns:
        The drop as a fraction (0.10 = 10 % worse).
    """
    worse = baseline - value if direction == "higher" else value - baseline
    if baseline == 0:
        return 0.0 if worse == 0 else math.copysign(math.inf, worse)
    return worse / abs(baseline)


def classify(drop: float, trend: TrendPolicy) -> TrendStatus:
    """``critical`` when ``drop ≥ critical``, ``warning`` when ``drop ≥ warning``, else ``ok`` (see TOLERANCE)."""
    if drop >= trend.critical - TOLERANCE:
        return "critical"
    if drop >= trend.warning - TOLERANCE:
        return "warning"
    return "ok"


def direction_and_label(metric: str) -> tuple[str, str]:
    """A metric's direction (``higher`` or ``lower`` is better) and display label; an unknown one: higher, its name."""
    try:
        resolved = resolve(metric)
    except ValueError:
        return "higher", metric  # a metric this version does not know: reported, assumed higher-is-better
    return resolved.spec.direction, resolved.label


def _noise(window: Sequence[float], window_ses: Sequence[float | None], run: float | None) -> float | None:
    """SD of (value − baseline) under no change (see :attr:`MetricTrend.noise_sd`).

    The runs' own repeat standard errors measure run-to-run noise without the drift when every run has one:
    √(se_run² + mean(se_i²)/W). Otherwise σ is the window's SD (which a drift inside the window inflates):
    √(σ² + σ²/W), with se_run for the run's own part when known.
    """
    size = len(window)
    if run is not None and size and all(se is not None for se in window_ses):
        return math.hypot(run, _rms(window_ses) / math.sqrt(size))  # type: ignore[arg-type]
    if size < 2:
        return None
    sigma = _sd(window)
    return math.hypot(run if run is not None else sigma, sigma / math.sqrt(size))


def _mean_of(values: Sequence[float]) -> float:
    """Mean of finite numbers that never overflows: huge values (1e308 each) give a finite mean, not inf or NaN.

    Ordinary values get numpy's mean (the same digits as before); only when that overflows is the mean summed from
    scaled terms.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        mean = float(np.mean(values))
    return mean if math.isfinite(mean) else math.fsum(v / len(values) for v in values)


def _scaled(values: Sequence[float]) -> tuple[float, list[float]]:
    """``(scale, values / scale)`` with the largest magnitude scaled to 1 (scale 1 when all are 0)."""
    scale = max(abs(v) for v in values) or 1.0
    return scale, [v / scale for v in values]


def _sd(values: Sequence[float]) -> float:
    """Sample SD (ddof 1) of finite numbers; huge ones are scaled first, so the SD is finite whenever it fits."""
    with np.errstate(over="ignore", invalid="ignore"):
        sd = float(np.std(values, ddof=1))
    if math.isfinite(sd):
        return sd
    scale, scaled = _scaled(values)
    return scale * float(np.std(scaled, ddof=1))


def _rms(values: Sequence[float]) -> float:
    """Root mean square of finite numbers, scaled so that squaring huge ones does not overflow."""
    scale, scaled = _scaled(values)
    return scale * math.sqrt(_mean_of([v * v for v in scaled]))


def metric_trend(
    metric: str, run: HistoryEntry, previous: Sequence[HistoryEntry], trend: TrendPolicy, *, gated: bool
) -> MetricTrend:
    """One metric of ``run`` against the mean of the last ``trend.window`` entries of ``previous`` with a value.

    Args:
        metric: metric name.
        run: the evaluated run.
        previous: comparable earlier entries, oldest first (filter with :func:`trend_report`).
        trend: window and thresholds.
        gated: whether the metric is gated.

    Returns:
        The metric's trend; ``insufficient`` with a note when the run has no value or fewer than ``window``
        previous entries have one.
    """
    direction, label = direction_and_label(metric)
    with_value = [e for e in previous if e.value(metric) is not None]
    recent = tuple((e.label, e.value(metric)) for e in with_value[-CHART_POINTS:])
    value = run.value(metric)
    se = run.run_se(metric)
    common: dict[str, Any] = {
        "metric": metric,
        "label": label,
        "direction": direction,
        "gated": gated,
        "recent": recent,
    }
    if value is None:
        return MetricTrend(**common, status="insufficient", value=None, baseline=None, drop=None, note="no value")
    if len(with_value) < trend.window:
        note = f"{len(with_value)} comparable main entr{'y' if len(with_value) == 1 else 'ies'}, {trend.window} needed"
        return MetricTrend(**common, status="insufficient", value=value, baseline=None, drop=None, run_se=se, note=note)
    chosen = with_value[-trend.window :]
    window = tuple(v for e in chosen if (v := e.value(metric)) is not None)  # every one of them has a value
    baseline = _mean_of(window)
    drop = relative_drop(value, baseline, direction)
    noise = _noise(window, [e.run_se(metric) for e in chosen], se)
    worse = baseline - value if direction == "higher" else value - baseline
    beyond = None if noise is None else bool(worse > NOISE_Z * noise)
    return MetricTrend(
        **common,
        status=classify(drop, trend),
        value=value,
        baseline=baseline,
        drop=drop,
        window=window,
        window_sd=_sd(window) if len(window) > 1 else None,
        run_se=se,
        noise_sd=noise,
        beyond_noise=beyond,
    )


def trend_report(
    entries: Sequence[HistoryEntry],
    run: HistoryEntry | None = None,
    *,
    trend: TrendPolicy,
    gated: Iterable[str] | None = None,
    problems: Sequence[str] = (),
    run_label: str | None = None,
) -> TrendReport:
    """Check a run against the history: each metric against the mean of the previous comparable entries.

    Without ``run``, the last entry is checked against the ones before it. With ``run`` (a PR head, or a run
    directory), every entry is "previous", except entries of the same commit. Entries with another golden set or
    config sha256 are never mixed in; ``skipped`` counts those between the run and the oldest entry used (all of
    them when a window is short), by reason.

    Args:
        entries: the history, oldest first.
        run: the run to check (None: the last entry).
        trend: window and thresholds.
        gated: gated metric names (default: the run's recorded ``gated``, else every metric of the run).
        problems: unreadable history lines, passed through to the report.
        run_label: how to name the run (default: its short sha).

    Returns:
        The report; metrics in the run's order.

    Raises:
        InputError: the history is empty and no run is given.
    """
    if run is None:
        if not entries:
            raise InputError("the history has no entry to check")
        run, previous = entries[-1], list(entries[:-1])
    else:
        previous = list(entries)
    names = list(run.record.get("metrics", {}))
    gated_set = set(gated) if gated is not None else set(run.gated or names)

    # Walk back from the newest entry until every metric has enough comparable values (for its window and chart).
    need = max(trend.window, CHART_POINTS)
    found: dict[str, list[int]] = {n: [] for n in names if run.value(n) is not None}  # indices, newest first
    skipped: list[tuple[int, str]] = []
    for index in range(len(previous) - 1, -1, -1):
        entry = previous[index]
        reason = entry.comparable_to(run)
        if reason is None and run.line is None and run.sha and entry.sha == run.sha:
            reason = "same commit as the run"
        if reason is not None:
            skipped.append((index, reason))
            continue
        for name, indices in found.items():
            if len(indices) < need and entry.value(name) is not None:
                indices.append(index)
        if all(len(indices) >= need for indices in found.values()):
            break
    trends = tuple(
        metric_trend(n, run, [previous[i] for i in reversed(found.get(n, []))], trend, gated=n in gated_set)
        for n in names
    )
    full = [indices[trend.window - 1] for indices in found.values() if len(indices) >= trend.window]
    oldest = min(full) if found and len(full) == len(found) else 0  # a short window: every skip counts
    counts: dict[str, int] = {}
    for index, reason in skipped:
        if index >= oldest:
            counts[reason] = counts.get(reason, 0) + 1
    return TrendReport(
        policy=trend,
        run=run_label or run.label,
        timestamp=run.record.get("timestamp"),
        n_entries=len(entries),
        skipped=tuple(sorted(counts.items())),
        problems=tuple(problems),
        metrics=trends,
    )


def trend_series(
    entries: Sequence[HistoryEntry], *, trend: TrendPolicy, gated: Iterable[str] | None = None
) -> list[TrendReport]:
    """The trend of every entry against the entries before it (``history show``), oldest first."""
    gated = None if gated is None else tuple(gated)
    return [trend_report(entries[: i + 1], trend=trend, gated=gated) for i in range(len(entries))]
