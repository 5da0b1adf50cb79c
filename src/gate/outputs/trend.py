"""Render trend reports: text, markdown with mermaid charts, the history page and PNG charts.

Pure functions of :class:`gate.trends.TrendReport`: plain text for ``history check``; the "Trend vs main" markdown
section with a mermaid ``xychart-beta`` for the PR comment and the job summary; the history page and PNG charts
for ``history show`` (matplotlib, optional extra ``rag-gate[plot]``). Text from the history file (shas, refs,
metric names) is reduced to safe characters before it reaches markdown or mermaid.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

from gate.files import writing
from gate.history.trend import CHART_POINTS
from gate.outputs.escape import escape_markdown
from gate.trends import LEVEL, MetricTrend, TrendReport

STATUS_TEXT = {"ok": "ok", "warning": "WARNING", "critical": "CRITICAL", "insufficient": "no baseline"}
STATUS_ICON = {"ok": "✅ ok", "warning": "⚠️ WARNING", "critical": "🔴 CRITICAL", "insufficient": "➖ no baseline"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._@-]")


def safe_label(text: object, limit: int = 12) -> str:
    """Letters, digits and ``._@-`` only, at most ``limit`` characters (mermaid labels, file names)."""
    return _UNSAFE.sub("", str(text))[:limit] or "?"


def fmt(value: float | None, digits: int = 3) -> str:
    """A number with ``digits`` decimals, ``–`` for None/NaN."""
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def fmt_drop(drop: float | None) -> str:
    """A relative drop as a signed percentage, ``+10.1 %`` (positive = worse)."""
    if drop is None or math.isnan(drop):
        return "–"
    if math.isinf(drop):
        return "+∞" if drop > 0 else "−∞"
    return f"{100 * drop:+.1f} %"


def _skipped(report: TrendReport) -> str:
    parts = [f"{count} {reason}" for reason, count in report.skipped]
    if report.problems:
        parts.append(f"{len(report.problems)} unreadable line(s)")
    return "; ".join(parts)


def _noise(m: MetricTrend) -> str:
    if m.beyond_noise is None:
        return ""
    return " (beyond noise)" if m.beyond_noise else " (within noise)"


def to_text(report: TrendReport, source: str) -> str:
    """The trend as a plain-text table for a terminal (``history check``)."""
    trend = report.policy
    lines = [
        f"trend of {report.run} against the mean of the previous {trend.window} comparable entries "
        f"({source}: {report.n_entries} entries{'; skipped: ' + _skipped(report) if _skipped(report) else ''})",
        f"thresholds: warning at a {100 * trend.warning:g} % drop, critical at {100 * trend.critical:g} %",
        "",
    ]
    header = ("metric", "value", "baseline", "drop", "window SD", "run SE", "status")
    rows = [header]
    for m in report.metrics:
        status = STATUS_TEXT[m.status] + (f" ({m.note})" if m.note else _noise(m))
        rows.append(
            (
                m.metric + ("" if m.gated else " (not gated)"),
                fmt(m.value),
                fmt(m.baseline),
                fmt_drop(m.drop),
                fmt(m.window_sd),
                fmt(m.run_se),
                status,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
    lines += ["", f"overall (gated metrics): {STATUS_TEXT[report.status]}"]
    lines += [f"skipped line: {problem}" for problem in report.problems]
    return "\n".join(lines)


def mermaid_chart(m: MetricTrend, report: TrendReport, run_label: str | None = None) -> str:
    """A mermaid ``xychart-beta`` of a metric: the last main entries then the run, with the threshold lines.

    Lines, in order: the values; the warning threshold; the critical threshold (both flat at the run's
    baseline, since the chart shows one comparison). Returns "" when the metric has no baseline.
    """
    if m.baseline is None or m.value is None:
        return ""
    points = [*m.recent[-CHART_POINTS:], (run_label or report.run, m.value)]
    sign = -1 if m.direction == "higher" else 1
    warning = m.baseline * (1 + sign * report.policy.warning)
    critical = m.baseline * (1 + sign * report.policy.critical)
    values = [v for _, v in points] + [warning, critical]
    low, high = min(values), max(values)
    pad = max((high - low) * 0.1, 0.005)
    labels = ", ".join(f'"{safe_label(label)}"' for label, _ in points)
    numbers = ", ".join(f"{v:.4f}" for _, v in points)
    flat = ", ".join([f"{warning:.4f}"] * len(points))
    floor = ", ".join([f"{critical:.4f}"] * len(points))
    title = safe_label(m.metric, 40)
    return (
        "```mermaid\nxychart-beta\n"
        f'  title "{title}: main runs, then {safe_label(run_label or report.run)} (lines: value, warning, critical)"\n'
        f"  x-axis [{labels}]\n"
        f'  y-axis "{title}" {max(low - pad, 0):.3f} --> {high + pad:.3f}\n'
        f"  line [{numbers}]\n  line [{flat}]\n  line [{floor}]\n```\n"
    )


def trend_markdown(report: TrendReport, *, heading: str = "### Trend vs main", run_name: str = "head") -> str:
    """The "Trend vs main" section: per metric the run against the mean of the last main entries, and charts.

    Args:
        report: the run's trend against the main-branch history.
        heading: the section heading.
        run_name: how to call the run in the table and charts (``head`` on a PR).

    Returns:
        Markdown; untrusted text (skipped-line messages) is escaped.
    """
    trend = report.policy
    out = [
        heading,
        "",
        f"{run_name.capitalize()} against the mean of the last {trend.window} comparable main-branch runs "
        f"(WARNING at a {100 * trend.warning:g} % drop, CRITICAL at {100 * trend.critical:g} %; "
        f"overall: **{STATUS_ICON[report.status]}**):",
        "",
        f"| metric | main (mean of last {trend.window}) | {run_name} | drop | status |",
        "|---|---:|---:|---:|---|",
    ]
    for m in report.metrics:
        if not m.gated:
            continue
        status = STATUS_ICON[m.status] + (f" ({escape_markdown(m.note)})" if m.note else _noise(m))
        out.append(
            f"| {escape_markdown(m.label)} | {fmt(m.baseline)} | {fmt(m.value)} | {fmt_drop(m.drop)} | {status} |"
        )
    notes = _skipped(report)
    if notes:
        out += ["", f"_Left out of the baseline: {escape_markdown(notes)}._"]
    charts = [(m, mermaid_chart(m, report, run_name)) for m in report.metrics if m.gated]
    charts = [(m, chart) for m, chart in charts if chart]
    charts.sort(key=lambda item: (-LEVEL[item[0].status], -(item[0].drop or 0.0)))  # the worst first
    if charts:
        out += ["", charts[0][1]]
    if len(charts) > 1:
        out += ["<details><summary>More trend charts</summary>", ""]
        out += [chart for _, chart in charts[1:]]
        out += ["</details>"]
    return "\n".join(out) + "\n"


def history_markdown(series: Sequence[TrendReport], metrics: Sequence[str], charts: dict[str, str]) -> str:
    """The history page (``history show``): per metric its chart and a table of every entry with its status."""
    if not series:
        return "# rag-gate history\n\nThe history is empty.\n"
    trend = series[-1].policy
    out = [
        "# rag-gate history",
        "",
        f"{len(series)} entries. Each entry against the mean of the previous {trend.window} comparable entries: "
        f"WARNING at a {100 * trend.warning:g} % drop, CRITICAL at {100 * trend.critical:g} %.",
    ]
    for name in metrics:
        rows = [(report, next((m for m in report.metrics if m.metric == name), None)) for report in series]
        label = next((m.label for _, m in rows if m is not None), name)
        out += ["", f"## {escape_markdown(label)}", ""]
        if name in charts:
            out += [f"![{escape_markdown(label)} over time]({charts[name]})", ""]
        out += ["| # | date | commit | value | baseline | drop | status |", "|---:|---|---|---:|---:|---:|---|"]
        for i, (report, m) in enumerate(rows, start=1):
            if m is None:
                continue
            status = STATUS_ICON[m.status] + (f" ({escape_markdown(m.note)})" if m.note else "")
            out.append(
                f"| {i} | {safe_label(report.timestamp, 10)} | {safe_label(report.run)} | {fmt(m.value)} "
                f"| {fmt(m.baseline)} | {fmt_drop(m.drop)} | {status} |"
            )
    return "\n".join(out) + "\n"


def plot_metric(series: Sequence[TrendReport], metric: str, path: Path) -> Path:
    """Draw one metric over time to a PNG: values, the rolling baseline, and the warning/critical bands.

    Needs matplotlib (``pip install 'rag-gate[plot]'``); uses the non-interactive Agg backend.

    Raises:
        ImportError: matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [
        (i, report.run, m)
        for i, report in enumerate(series)
        for m in report.metrics
        if m.metric == metric and m.value is not None
    ]
    trend = series[-1].policy
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=120)
    xs = [i for i, _, _ in points]
    ax.plot(xs, [m.value for _, _, m in points], marker="o", color="#1f5fa8", label="run")
    based = [(i, m) for i, _, m in points if m.baseline is not None]
    if based:
        bx = [i for i, _ in based]
        base = [m.baseline for _, m in based]
        sign = -1 if based[0][1].direction == "higher" else 1
        warn = [b * (1 + sign * trend.warning) for b in base]
        crit = [b * (1 + sign * trend.critical) for b in base]
        edge = [b * (1 + sign * 0.5) for b in base]  # the critical band is drawn to half the baseline
        ax.plot(bx, base, linestyle="--", color="#555555", label=f"baseline (mean of previous {trend.window})")
        ax.fill_between(bx, warn, crit, color="#f2c744", alpha=0.35, label=f"warning (≥ {100 * trend.warning:g} %)")
        ax.fill_between(bx, crit, edge, color="#d9534f", alpha=0.25, label=f"critical (≥ {100 * trend.critical:g} %)")
    for i, _, m in points:
        if m.status in ("warning", "critical"):
            ax.plot(i, m.value, marker="o", markersize=9, color="#d9534f" if m.status == "critical" else "#f0ad4e")
    values = [m.value for _, _, m in points] + [m.baseline for _, m in based]
    if values:
        low, high = min(values), max(values)
        pad = max((high - low) * 0.25, 0.01)
        ax.set_ylim(low - pad, high + pad)
    step = max(1, len(points) // 12)
    labels = [f"{safe_label(series[i].timestamp, 10)}\n{safe_label(label, 7)}" for i, label, _ in points]
    ax.set_xticks(xs[::step], labels[::step], rotation=45, fontsize=7)
    ax.set_title(f"{points[0][2].label if points else metric} over main-branch runs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    try:
        with writing(path):
            fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def chart_name(metric: str) -> str:
    """File name of a metric's chart, e.g. ``hit_rate_5.png``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", metric) + ".png"
