"""Charts of a comparison: base against head per metric, with head's interval.

A mermaid ``xychart-beta`` for the comment (GitHub renders it) and a PNG for the artifact (matplotlib, the
``plot`` extra). Both show the binary and graded metrics on their common [0, 1] scale; ratio metrics (latency,
cost) have other units and stay in the table. Head's interval is base + the interval of Δ = head − base: where head
could be, given base, at the metric's confidence level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from gate.comparison import Comparison, MetricRow
from gate.files import writing
from gate.outputs.trend import safe_label

CHART_FILE = "metrics.png"
"""The PNG's name in the output directory."""


@dataclass(frozen=True)
class Bar:
    """One metric as the charts draw it (metric units, in [0, 1])."""

    label: str
    """Display label."""
    base: float
    """Base's mean."""
    head: float
    """Head's mean."""
    low: float
    """Lower end of head's interval: base + the interval's lower end, cut to [0, 1] (head's value when there is no
    interval)."""
    high: float
    """Upper end of head's interval."""
    gated: bool
    """Whether the metric decides."""
    worse: bool
    """Head is worse than base (by the metric's direction)."""


def bars(comparison: Comparison, *, gated_only: bool = False) -> list[Bar]:
    """The metrics the charts draw: binary and graded ones with paired cases (gated only when asked)."""

    def drawn(m: MetricRow) -> bool:
        return m.kind != "ratio" and m.n_pairs > 0 and not math.isnan(m.difference) and (m.gated or not gated_only)

    def end(m: MetricRow, ci_end: float) -> float:  # no interval (too few cases): the line stays at head's value
        return m.head_value if math.isnan(ci_end) else min(max(m.base_value + ci_end, 0.0), 1.0)

    return [
        Bar(
            m.label,
            m.base_value,
            m.head_value,
            end(m, m.difference_ci_low),
            end(m, m.difference_ci_high),
            m.gated,
            m.change == "worse",
        )
        for m in comparison.metrics
        if drawn(m)
    ]


def mermaid_metrics(comparison: Comparison) -> str:
    """A mermaid ``xychart-beta``: a bar for base and one for head per gated metric, and head's interval as lines.

    Bars alternate base, head (one series: mermaid draws several bar series on top of each other); the two lines
    start at base's value and open to the ends of head's interval. Returns "" when no gated metric is drawn.
    """
    drawn = bars(comparison, gated_only=True)
    if not drawn:
        return ""
    labels, values, lows, highs = [], [], [], []
    for bar in drawn:
        name = safe_label(bar.label.replace(" ", "_"), 24)
        labels += [f'"{name} base"', f'"{name} head"']
        values += [bar.base, bar.head]
        lows += [bar.base, bar.low]
        highs += [bar.base, bar.high]

    def series(xs: list[float]) -> str:
        return "[" + ", ".join(f"{x:.3f}" for x in xs) + "]"

    return (
        "```mermaid\nxychart-beta\n"
        '  title "Gated metrics: base, head (lines: the interval of head)"\n'
        f"  x-axis [{', '.join(labels)}]\n"
        '  y-axis "mean" 0 --> 1\n'
        f"  bar {series(values)}\n  line {series(lows)}\n  line {series(highs)}\n```\n"
    )


def plot_metrics(comparison: Comparison, path: Path) -> list[Bar]:
    """Draw base against head per metric to a PNG: base and head as points, head's interval as an error bar.

    Needs matplotlib (``pip install 'rag-gate[plot]'``); uses the non-interactive Agg backend.

    Args:
        comparison: what to draw.
        path: the PNG to write.

    Returns:
        The metrics drawn, top to bottom (nothing is written when there are none).

    Raises:
        ImportError: matplotlib is not installed.
    """
    drawn = bars(comparison)
    if not drawn:
        return drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 0.5 * len(drawn) + 1.4), dpi=120)
    ys = list(range(len(drawn)))[::-1]
    for y, bar in zip(ys, drawn, strict=True):
        color = "#d9534f" if bar.worse else "#1f5fa8"
        ax.plot([bar.low, bar.high], [y, y], color=color, linewidth=2, alpha=0.6)
        ax.plot(bar.base, y, marker="o", color="#777777", markersize=7, linestyle="none")
        ax.plot(bar.head, y, marker="D", color=color, markersize=7, linestyle="none")
    ax.set_yticks(ys, [bar.label + ("" if bar.gated else " (not gated)") for bar in drawn], fontsize=8)
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("mean over the paired cases")
    ax.plot([], [], marker="o", color="#777777", linestyle="none", label="base")
    ax.plot([], [], marker="D", color="#1f5fa8", linestyle="none", label="head (red: worse than base)")
    ax.plot([], [], color="#1f5fa8", linewidth=2, alpha=0.6, label="head's interval (base + interval of Δ)")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"rag-gate: {comparison.verdict} — base vs head per metric", fontsize=10)
    fig.tight_layout()
    try:
        with writing(path):
            fig.savefig(path)
    finally:
        plt.close(fig)
    return drawn
