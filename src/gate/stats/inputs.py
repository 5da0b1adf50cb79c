"""The per-metric input of the statistics (scores of base and head, case × repeat) and its orientation."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from gate.results import Direction as Direction  # re-exported: the types' home is gate.results
from gate.results import Kind as Kind
from gate.results import Status
from gate.stats import numbers

ZERO_MARGIN_ALPHA = 0.01
"""One-sided level used for a metric whose margin is 0 (STATISTICS.md §6 item 3)."""


@dataclass(frozen=True)
class MetricPolicy:
    """How one metric is gated, resolved once: the margin on the statistics' scale, the metric's α and the label.

    The statistics, the decision, the report and the CLI's checks read these values instead of each deriving them.
    """

    kind: Kind
    """binary, graded or ratio."""
    direction: Direction
    """Whether higher or lower values are better."""
    margin: float
    """Tolerated worsening ≥ 0 as configured: absolute for binary/graded, relative for ratio (0.10 = 10 % worse)."""
    family_alpha: float = 0.05
    """The gate's one-sided family-wise level α."""
    alpha: float = field(init=False)
    """The metric's level α_k: ``family_alpha``, or :data:`ZERO_MARGIN_ALPHA` for a margin of 0 (a zero tolerance
    is only as safe as the evidence that something changed)."""
    oriented_margin: float = field(init=False)
    """The margin on the oriented scale the test uses: metric units, or :func:`ratio_scale` of it for ratio metrics."""
    label: str = field(init=False)
    """The margin as reasons and advice print it: ``0.030``, or ``10 %`` for ratio metrics."""

    def __post_init__(self) -> None:
        """Resolve ``alpha``, ``oriented_margin`` and ``label`` from the configured values."""
        ratio = self.kind == "ratio"
        object.__setattr__(self, "alpha", ZERO_MARGIN_ALPHA if self.margin == 0 else self.family_alpha)
        object.__setattr__(self, "oriented_margin", ratio_scale(self.margin, self.direction) if ratio else self.margin)
        object.__setattr__(self, "label", numbers.percent(self.margin) if ratio else numbers.number(self.margin))


@dataclass(frozen=True)
class MetricInput:
    """Scores of one metric on base and head, paired by row (case), with one column per repeat."""

    name: str
    """Metric name, e.g. ``"hit_rate@5"``."""
    kind: Kind
    """binary (0/1), graded (any bounded score) or ratio (positive, e.g. latency/cost: paired log-ratios)."""
    direction: Direction
    """Whether higher or lower values are better."""
    margin: float
    """Tolerated drop ≥ 0: absolute for binary/graded, relative for ratio (0.10 = 10 % worse); 0 → α = 0.01."""
    gated: bool
    """Whether the metric decides the verdict (ungated metrics are reported only)."""
    base: np.ndarray
    """shape (N, R_base) float; NaN = not applicable or failed; row i = case i."""
    head: np.ndarray
    """shape (N, R_head) float, same row order as ``base``."""
    failed_base: np.ndarray
    """shape (N, R_base) bool: True where the score is a failure (error), not merely not applicable."""
    failed_head: np.ndarray
    """shape (N, R_head) bool."""
    clusters: np.ndarray | None = None
    """shape (N,) cluster labels (cases in a cluster are dependent), or None."""

    def __post_init__(self) -> None:
        """Validate shapes, kind, direction and margin (ValueError)."""
        if self.kind not in ("binary", "graded", "ratio") or self.direction not in ("higher", "lower"):
            raise ValueError(f"{self.name}: bad kind {self.kind!r} or direction {self.direction!r}")
        if not self.margin >= 0 or (self.kind == "ratio" and self.direction == "higher" and self.margin >= 1):
            raise ValueError(f"{self.name}: margin must be ≥ 0 (and < 1 for a higher-is-better ratio)")
        base, head = np.asarray(self.base), np.asarray(self.head)
        if base.ndim != 2 or head.ndim != 2 or base.shape[0] != head.shape[0]:
            raise ValueError(f"{self.name}: base and head must be (N, R) with equal N")
        if np.shape(self.failed_base) != base.shape or np.shape(self.failed_head) != head.shape:
            raise ValueError(f"{self.name}: failed masks must have the shapes of base and head")
        if self.kind == "binary":
            for x in (base, head):
                values = np.asarray(x, dtype=float)
                if not np.isin(values[~np.isnan(values)], (0.0, 1.0)).all():
                    raise ValueError(f"{self.name}: a binary metric takes 0/1 values (or NaN)")
        if self.clusters is not None and np.shape(self.clusters) != (base.shape[0],):
            raise ValueError(f"{self.name}: clusters must have shape ({base.shape[0]},)")

    def metric_policy(self, alpha: float) -> MetricPolicy:
        """The metric's :class:`MetricPolicy` in a gate of family-wise level ``alpha``."""
        return MetricPolicy(self.kind, self.direction, self.margin, alpha)


def ratio_scale(relative: float, direction: Direction) -> float:
    """A relative worsening (0.10 = 10 % worse) as a distance on the oriented log scale, > 0.

    Lower-is-better (latency): head/base = 1 + r → log(1 + r); higher-is-better: head/base = 1 − r → −log(1 − r).
    """
    return math.log1p(relative) if direction == "lower" else -math.log1p(-relative)


def oriented_repeats(inp: MetricInput) -> tuple[np.ndarray, np.ndarray]:
    """Per-repeat scores with failures set to NaN, oriented so higher = better.

    binary/graded lower-is-better: 1 − x (0/1 stays 0/1, differences change sign); ratio: ±log(x), with
    x ≤ 0 set to NaN (not applicable).

    Returns:
        (base, head), shapes (N, R_base) and (N, R_head), float.

    """
    out = []
    for values, failed in ((inp.base, inp.failed_base), (inp.head, inp.failed_head)):
        x = np.where(np.asarray(failed, dtype=bool), np.nan, np.asarray(values, dtype=float))
        if inp.kind == "ratio":
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan)
            x = x if inp.direction == "higher" else -x
        elif inp.direction == "lower":
            x = 1.0 - x
        out.append(x)
    return out[0], out[1]


def case_effects(inp: MetricInput) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-case means over valid repeats of each side, in metric units, and the oriented per-case effect.

    Effect = sign·(head − base mean), negative = worse; for ratio metrics sign·log(head/base) of the
    arithmetic means over the positive repeats. Failed scores are excluded.

    Returns:
        (base_means, head_means, effect), each shape (N,); NaN where a side has no valid repeat.

    """
    sign = 1.0 if inp.direction == "higher" else -1.0
    means = []
    for values, failed in ((inp.base, inp.failed_base), (inp.head, inp.failed_head)):
        x = np.where(np.asarray(failed, dtype=bool), np.nan, np.asarray(values, dtype=float))
        if inp.kind == "ratio":
            x = np.where(x > 0, x, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # rows without a valid repeat → NaN
            means.append(np.nanmean(x, axis=1))
    base_means, head_means = means
    if inp.kind == "ratio":
        return base_means, head_means, sign * (np.log(head_means) - np.log(base_means))
    return base_means, head_means, sign * (head_means - base_means)


def has_values(inp: MetricInput) -> bool:
    """Whether any case has a value or a failure on either side (else the metric applies to no case)."""
    return bool(
        (~np.isnan(np.asarray(inp.base, dtype=float))).any()
        or (~np.isnan(np.asarray(inp.head, dtype=float))).any()
        or np.asarray(inp.failed_base).any()
        or np.asarray(inp.failed_head).any()
    )


def unpaired_status(inp: MetricInput) -> tuple[Status, str]:
    """The status of a metric with values or failures but no paired case.

    Not applicable when it applies to no case on one side (no value there, and no failed evaluation on either side:
    e.g. a golden set that marks no case out-of-domain on base, where head's does): nothing can be compared, and
    nothing was measured to be worse. Inconclusive otherwise: values on both sides but on different cases, or failed
    evaluations (a failure is not "not applicable"; the evaluation-error budget judges it).
    """
    valued = [int((~np.isnan(np.asarray(v, dtype=float))).any(axis=1).sum()) for v in (inp.base, inp.head)]
    failed = bool(np.asarray(inp.failed_base).any() or np.asarray(inp.failed_head).any())
    counts = f"{valued[0]} case(s) with a value on base, {valued[1]} on head"
    if not failed:
        for side, name, other in ((0, "base", "head"), (1, "head", "base")):
            if valued[side] == 0:
                return "not_applicable", (
                    f"applies to no case on {name} ({valued[1 - side]} on {other}): nothing to compare, left out "
                    "of the decision"
                )
    if not any(valued):
        return "inconclusive", f"no case was measured on either side: every evaluation failed ({counts})"
    return "inconclusive", f"no paired case: {counts}"
