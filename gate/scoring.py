"""Score predictions: every configured metric for every case × repeat (one :class:`Score` each)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from gate.config import Evaluation
from gate.judges.base import Judge
from gate.metrics import Metric, resolve, score_case
from gate.metrics.refusal import is_refusal
from gate.models import GoldenCase, Prediction, Score


def detect_refusal(prediction: Prediction, evaluation: Evaluation) -> bool:
    """Whether a prediction is a refusal: :func:`gate.metrics.refusal.is_refusal` with the configured policy.

    The pipeline's explicit ``refused`` flag decides when ``evaluation.refusal_use_field`` trusts it; otherwise
    the answer text is matched against ``evaluation.refusal_phrases``.
    """
    flag = prediction.refused if evaluation.refusal_use_field else None
    return is_refusal(prediction.answer, flag, evaluation.refusal_phrases)


def score_one(
    case: GoldenCase, prediction: Prediction, metrics: Sequence[Metric], evaluation: Evaluation, judge: Judge | None
) -> list[Score]:
    """All metric scores of one prediction, in ``metrics`` order (resolved from ``evaluation.metrics``).

    A failed prediction (a system error) is scored by the metrics that score failures (``error_rate``: 1) and has
    no value, with its reason in ``error``, for every other metric; a judge failure gives failures for the judged
    metrics only. Judged metrics of a refusal are NaN (not applicable: a refusal makes no claims).
    """
    key = (case.id, prediction.repeat)
    if prediction.error is not None:
        reason = f"prediction failed: {prediction.error}"
        return [
            Score(*key, m.name, score_case(m, case, prediction, False))
            if m.spec.scores_failures
            else Score(*key, m.name, math.nan, error=reason)
            for m in metrics
        ]
    refused = detect_refusal(prediction, evaluation)
    judgment = None
    if any(m.spec.judged for m in metrics) and not refused and judge is not None:
        judgment = judge.judge(case.question, prediction.answer, prediction.retrieved, repeat=prediction.repeat)
    scores = []
    for metric in metrics:
        if not metric.spec.judged:
            scores.append(Score(*key, metric.name, score_case(metric, case, prediction, refused)))
        elif judgment is None:
            scores.append(Score(*key, metric.name, math.nan))
        elif judgment.error is not None:
            scores.append(Score(*key, metric.name, math.nan, error=f"judge failed: {judgment.error}"))
        else:
            value = getattr(judgment, metric.spec.judgment_field)
            detail = judgment.to_dict() if metric.spec.keeps_detail else None
            scores.append(Score(*key, metric.name, value, detail=detail))
    return scores


def score_all(
    golden: Sequence[GoldenCase],
    table: Mapping[tuple[str, int], Prediction],
    repeats: int,
    evaluation: Evaluation,
    judge: Judge | None,
    on_scores: Callable[[list[Score]], None] | None = None,
) -> list[Score]:
    """Score every (case, repeat), ``evaluation.judge_concurrency`` judge calls at a time, in golden order.

    Args:
        golden: the cases, in file order.
        table: predictions by (case id, repeat), complete (see ``gate.predictions.align``).
        repeats: number of repeats per case.
        evaluation: metrics and refusal settings.
        judge: the judge for judged metrics (None: judged metrics are NaN).
        on_scores: called with each prediction's scores as soon as they exist (for incremental writing).

    """
    jobs = [(case, table[(case.id, r)]) for case in golden for r in range(repeats)]
    out: list[Score] = []
    with ThreadPoolExecutor(evaluation.judge_concurrency) as pool:
        metrics = [resolve(name) for name in evaluation.metrics]
        for scores in pool.map(lambda job: score_one(*job, metrics, evaluation, judge), jobs):
            if on_scores is not None:
                on_scores(scores)
            out.extend(scores)
    return out
