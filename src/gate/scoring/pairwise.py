"""Pairs of answers, base's against head's, judged by the pairwise judge (the ``head_win_rate`` metric)."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gate.collector import gc_frozen
from gate.config import GatePolicy
from gate.judges.base import oversize_judgment
from gate.manifest import JudgeUsage
from gate.models import GoldenCase, Prediction, Score

if TYPE_CHECKING:  # the pairwise judge needs the llm extra: imported when it is built
    from gate.judges.pairwise import PairJudgment, PairwiseJudge

log = logging.getLogger("rag-gate")


PAIRED_METRIC = "head_win_rate"
"""The metric the pairwise judge scores."""


@dataclass(frozen=True)
class PairwiseRun:
    """What the pairwise judge decided on a comparison's cases, and what it cost."""

    judge_id: str
    """The pairwise judge's id (``pairwise:<model>@t<temperature>``)."""
    judge_version: str
    """Its version."""
    judgments: tuple[tuple[str, PairJudgment | None], ...]
    """(case id, judgment) in case order; None where a side has no valid answer (not applicable)."""
    usage: JudgeUsage = field(default_factory=JudgeUsage)
    """The judge's accounting (:func:`gate.judges.base.judge_usage`)."""


def judge_pairs(
    pairs: Sequence[tuple[GoldenCase, Prediction | None, Prediction | None]],
    judge: PairwiseJudge,
    policy: GatePolicy,
) -> list[PairJudgment | None]:
    """Judge base's answer against head's for every case, ``policy.judge_concurrency`` cases at a time.

    Args:
        pairs: (case, base's prediction, head's prediction); a prediction is None when that side has no valid
            answer for the case (every repeat failed).
        judge: the pairwise judge (two calls per case, one per order).
        policy: the judge concurrency and the config's form rules (a case's ``form`` overrides them).

    Returns:
        One :class:`~gate.judges.pairwise.PairJudgment` per pair, in order; None where a prediction is None.

    Raises:
        JudgeConfigError: the endpoint rejected the judge's configuration (the comparison stops, exit 3).

    """

    def one(pair: tuple[GoldenCase, Prediction | None, Prediction | None]) -> PairJudgment | None:
        case, base, head = pair
        if base is None or head is None or oversize_judgment(base) or oversize_judgment(head):
            return None  # no valid answer, or one too long to judge: not applicable
        return judge.compare(
            case.question,
            (base.answer, base.retrieved),
            (head.answer, head.retrieved),
            case=case,
            form=policy.form.override(case.form),
        )

    with gc_frozen(), ThreadPoolExecutor(policy.judge_concurrency) as pool:
        return list(pool.map(one, pairs))


def pair_scores(case_id: str, judgment: PairJudgment | None) -> tuple[Score, Score]:
    """The ``head_win_rate`` rows of one case, (base's, head's), both at repeat 0.

    A side scores 1 when the judge preferred its answer in both orders, else 0 (a tie is 0 and 0), so that the
    paired binary comparison of the two rows is the sign test on wins against losses (exact McNemar). Both rows
    are NaN when a side has no valid answer (not applicable) and failures (with ``error``) when the judge failed.
    """
    if judgment is None:
        return Score(case_id, 0, PAIRED_METRIC, math.nan), Score(case_id, 0, PAIRED_METRIC, math.nan)
    if judgment.outcome is None:
        reason = f"judge failed: {judgment.error}"
        return Score(case_id, 0, PAIRED_METRIC, math.nan, error=reason), Score(
            case_id, 0, PAIRED_METRIC, math.nan, error=reason
        )
    base, head = {"win": (0.0, 1.0), "loss": (1.0, 0.0), "tie": (0.0, 0.0)}[judgment.outcome]
    return Score(case_id, 0, PAIRED_METRIC, base), Score(case_id, 0, PAIRED_METRIC, head)
