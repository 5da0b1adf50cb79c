"""The metric inputs of a comparison: each metric's score matrices on both sides, and what is shown of them.

Values and evaluation-failure flags of shape (N cases, R repeats) per side (:func:`score_matrix`), the
error budget's use, repeats that never vary collapsed into one, cluster labels, and the values a metric's
row shows (:func:`shown_values`).
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Sequence

import numpy as np

from gate.comparison import (
    clip,
)
from gate.config import GatePolicy
from gate.metrics import resolve
from gate.models import GoldenCase
from gate.runs import Side
from gate.scoring import detect_refusal
from gate.stats import MetricInput
from gate.stats.decision import ErrorBudgetUse
from gate.stats.inputs import case_effects


def side_rows(side: Side, cases: Sequence[GoldenCase]) -> np.ndarray:
    """Rows of ``cases`` in the side's matrices, shape (N,)."""
    return np.array([side.index[case.id] for case in cases], dtype=np.intp)


def score_matrix(side: Side, cases: Sequence[GoldenCase], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Values and evaluation-failure flags of one metric, each of shape (N cases, R repeats).

    A value is NaN where the metric does not apply, where the evaluation failed, or where the prediction failed
    (but for the metrics that score a failed prediction: error rate, and the latency and cost it consumed).
    ``failed`` marks evaluation failures: a score the judge or scorer could not produce, or a missing score row
    (a missing row is a failure, never "not applicable"). A failed prediction is a system error, counted by the
    ``error_rate`` metric, not an evaluation failure. A paired metric (``head_win_rate``) has one column: one
    judged pair of answers per case.
    """
    columns = 1 if resolve(metric).spec.paired else side.repeats
    values, failed = side.scores.matrix(metric, side_rows(side, cases))
    values, failed = values[:, :columns], failed[:, :columns]
    failed &= ~system_errors(side, cases)[:, :columns]
    return values, failed


def system_errors(side: Side, cases: Sequence[GoldenCase]) -> np.ndarray:
    """Where the pipeline under test failed (a prediction row with ``error``), shape (N cases, R repeats)."""
    return side.table.error_mask([case.id for case in cases])


def refused_everywhere(side: Side, case_ids: Sequence[str], policy: GatePolicy) -> int:
    """How many of ``case_ids`` the side refused in every repeat that ran (a refusal ran, but did not answer)."""
    valid = side.valid_many(case_ids)
    return sum(bool(rows) and all(detect_refusal(p, policy) for p in rows) for rows in valid.values())


def budget_use(
    side: Side, cases: Sequence[GoldenCase], metric: str, failed: np.ndarray, *, unread: int = 0
) -> ErrorBudgetUse:
    """The evaluation failures of one metric on one side, with their most frequent reasons.

    ``unread`` of the failures are answers the judge could not read where the other side's were scored
    (:func:`_unreadable_by_change`).
    """
    ids = {c.id for c in cases}
    broken = side.table.error_mask(side.table.ids)
    reasons = Counter(
        clip(score.message, 120)
        for score in side.scores.errors
        if score.metric == metric
        and score.id in ids
        and score.repeat < side.repeats
        and not broken[side.table.index[score.id], score.repeat]
    )
    if unread:
        why = ", ".join(note for note, _ in side.scores.not_applicable.most_common(2))
        reasons[f"not judged ({why}) where the other side was"] = unread
    missing = int(failed.sum()) - sum(reasons.values())
    if missing > 0:
        reasons["no score row (scoring did not finish)"] = missing
    return ErrorBudgetUse(
        metric=metric,
        side=side.label,
        failed=int(failed.sum()),
        expected=int(failed.size),
        rate=float(failed.mean()) if failed.size else 0.0,
        messages=tuple(f"{n}× {reason}" for reason, n in reasons.most_common(3)),
    )


def collapse_constant_repeats(
    base: tuple[np.ndarray, np.ndarray], head: tuple[np.ndarray, np.ndarray]
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Keep one repeat when no case's valid values vary across repeats on either side.

    Repeats of a deterministic pipeline or metric (retrieval with a fixed index) repeat one observation; counting
    them as independent would make per-case tests see evidence that is not there (STATISTICS.md §6 item 5).

    Args:
        base: (values, failed) of base, each of shape (N, R_base).
        head: (values, failed) of head, each of shape (N, R_head).

    Returns:
        The inputs unchanged, or each side reduced to shape (N, 1): the per-case value, failed only when every
        repeat failed.
    """

    def constant(values: np.ndarray) -> bool:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            spread = np.nanmax(values, axis=1) - np.nanmin(values, axis=1)
        return bool(np.all(np.isnan(spread) | (spread == 0)))

    if base[0].shape[1] == head[0].shape[1] == 1 or not (constant(base[0]) and constant(head[0])):
        return base, head

    def one(values: np.ndarray, failed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmax(values, axis=1)[:, None], failed.all(axis=1)[:, None]

    return one(*base), one(*head)


def cluster_labels(cases: Sequence[GoldenCase], cluster_by: str | None) -> np.ndarray | None:
    """Cluster label per case: the ``cluster`` field, the first tag, or the first tag with a prefix."""
    if cluster_by is None:
        return None
    labels = []
    for case in cases:
        if cluster_by == "cluster":
            label = case.cluster
        else:
            prefix = cluster_by.partition(":")[2]
            label = next((t for t in case.tags if t.startswith(prefix)), None)
        labels.append(label if label is not None else f"case:{case.id}")
    return np.array(labels, dtype=object)


def metric_inputs(
    base: Side, head: Side, cases: Sequence[GoldenCase], policy: GatePolicy
) -> tuple[list[MetricInput], list[ErrorBudgetUse]]:
    """One :class:`~gate.stats.MetricInput` per configured metric, and each gated metric's evaluation failures.

    Inputs hold the scores of ``cases`` (rows) × repeats; failures are counted per side over every repeat, before
    repeats that never vary are collapsed into one. A relative margin is taken relative to :func:`base_value`.
    """
    clusters = cluster_labels(cases, policy.cluster_by)
    inputs, budget = [], []
    for name in policy.metrics:
        metric = resolve(name)
        base_scores, head_scores = score_matrix(base, cases, name), score_matrix(head, cases, name)
        if name in policy.gated and metric.spec.judged:
            base_scores, head_scores, unread = _unreadable_by_change(base, head, cases, base_scores, head_scores)
        else:
            unread = (0, 0)
        if name in policy.gated:
            budget += [
                budget_use(side, cases, name, scores[1], unread=n)
                for side, scores, n in ((base, base_scores, unread[0]), (head, head_scores, unread[1]))
            ]
        (b, fb), (h, fh) = collapse_constant_repeats(base_scores, head_scores)
        inputs.append(
            MetricInput(
                name=name,
                kind=metric.spec.kind,
                direction=metric.spec.direction,
                margin=policy.margin(name, base_value(b)),
                gated=name in policy.gated,
                base=b,
                head=h,
                failed_base=fb,
                failed_head=fh,
                clusters=clusters,
            )
        )
    return inputs, budget


def _unreadable_by_change(
    base: Side,
    head: Side,
    cases: Sequence[GoldenCase],
    base_scores: tuple[np.ndarray, np.ndarray],
    head_scores: tuple[np.ndarray, np.ndarray],
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], tuple[int, int]]:
    """Count as a judged metric's evaluation failures the answers one side's judge could not read, the other's scored.

    Text the judge cannot read (a language it does not handle) is never scored; when both sides are unreadable
    the metric does not apply there. But a head that answers in another language than the base would otherwise
    leave its gated metric unmeasured, an inconclusive gate: counted as failures, such cells use the error budget
    (past it, the verdict is ``error``). Repeats are compared by case: a cell counts when the other side has a value
    for the case in any repeat. Returns both sides' (values, failed) and how many cells each side had added.
    """
    out, added = [], []
    for side, (values, failed), other in ((base, base_scores, head_scores[0]), (head, head_scores, base_scores[0])):
        unread = side.scores.unreadable(side_rows(side, cases))[:, : values.shape[1]]
        counted = unread & ~failed & np.isnan(values) & ~np.isnan(other).all(axis=1, keepdims=True)
        out.append((values, failed | counted))
        added.append(int(counted.sum()))
    return out[0], out[1], (added[0], added[1])


def base_value(values: np.ndarray) -> float:
    """The base's value of a metric, the mean of its per-case means (what a relative margin is relative to)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmean(np.nanmean(values, axis=1))) if values.size else math.nan


def shown_values(inp: MetricInput) -> tuple[float, float]:
    """The values a metric's row shows, over the cases paired on both sides: (base, head).

    The arithmetic mean of the per-case means for binary and graded metrics (Δ is their difference); the geometric
    mean for ratio metrics, whose Δ is the geometric-mean ratio of the per-case means, so head/base of the shown
    values is that ratio exactly. NaN when no case is paired.
    """
    base_means, head_means, effect = case_effects(inp)
    paired = ~np.isnan(effect)
    if not paired.any():
        return math.nan, math.nan
    if inp.kind == "ratio":
        return float(np.exp(np.log(base_means[paired]).mean())), float(np.exp(np.log(head_means[paired]).mean()))
    return float(base_means[paired].mean()), float(head_means[paired].mean())
