"""Score one prediction, or a batch of them in this process: every configured metric for every case × repeat.

Each (case, repeat) gets one :class:`~gate.models.Score` per metric (:func:`score_one`); metrics that have a batched
form are computed for many predictions at once (:func:`batch_values`); predictions scored while the pipeline ran are
kept by :class:`EarlyScores`.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

from gate.config import GatePolicy
from gate.jsonl import dumps
from gate.judges.base import Judge, Judgment, graded_dimensions, oversize_judgment
from gate.metrics import Metric, resolve, score_case
from gate.metrics.refusal import is_refusal
from gate.metrics.retrieval import expected_ranks
from gate.models import CHUNK_ID, PREDICTION_FAILED, GoldenCase, Prediction, Score

if TYPE_CHECKING:  # the pairwise judge needs the llm extra: imported when it is built
    pass

log = logging.getLogger("rag-gate")


def detect_refusal(prediction: Prediction, policy: GatePolicy) -> bool:
    """Whether a prediction is a refusal: :func:`gate.metrics.refusal.is_refusal` with the configured policy.

    The pipeline's explicit ``refused`` flag decides when ``policy.refusal_use_field`` trusts it; otherwise
    the answer text is matched against ``policy.refusal_phrases``.
    """
    flag = prediction.refused if policy.refusal_use_field else None
    return is_refusal(prediction.answer, flag, policy.refusal_phrases)


def call_judge(judge: Judge, case: GoldenCase, prediction: Prediction, policy: GatePolicy) -> Judgment:
    """Judge one prediction.

    An answer longer than :data:`MAX_JUDGED_ANSWER_BYTES` is not sent to the judge (:func:`oversize_judgment`).
    Every judge gets the answer as written. A judge that reads the case (``reads_case``: the rubric judge) also gets
    it and its form rules (it grades the citations as form). A claim-level judge leaves the citation markers out of
    what it judges ("[d1]" is no claim, and not the number 1: :func:`gate.metrics.generation.citation_markers`),
    never a word of the sentence, and the lexical and nli judges show each claim as written.
    """
    oversize = oversize_judgment(prediction)
    if oversize is not None:
        return oversize
    if getattr(judge, "reads_case", False):
        rules = policy.form.override(case.form)
        args = (case.question, prediction.answer, prediction.retrieved)
        return judge.judge(*args, repeat=prediction.repeat, case=case, form=rules)  # type: ignore[call-arg]
    return judge.judge(case.question, prediction.answer, prediction.retrieved, repeat=prediction.repeat)


TEXTLESS_CHUNK = (
    "a retrieved chunk has no text (the judge checks claims against the chunks' text): text-based metrics not "
    "applicable"
)
"""The ``not_applicable`` note of an answer whose retrieved chunks include one without text (never scored 0)."""

NO_CHECKABLE_CLAIM = "with no checkable claim (the judge found no claim it could check): not scored"
"""Why a judged answer has no faithfulness value: the judge found no claim in it (counted and shown, not scored)."""


def textless_judgment(prediction: Prediction) -> Judgment | None:
    """A not-applicable judgment when a retrieved chunk has no text (empty or blank ``text``), else None.

    The judge weighs the answer's claims against the chunks' text: a chunk without it is evidence the judge cannot
    read, so a claim it supports would be scored unsupported (faithfulness 0). The judge is not called; every
    metric it grades is NaN (not applicable), counted and shown in the report, and where the other side of a
    comparison was scored it counts as an evaluation failure (never "no change").
    """
    if any(not chunk.text or chunk.text.isspace() for chunk in prediction.retrieved):
        return Judgment(not_applicable=TEXTLESS_CHUNK)
    return None


def has_no_claim(judgment: Judgment) -> bool:
    """True when a judge that succeeded and could read the answer found no claim it could check in it."""
    return (
        judgment.error is None
        and judgment.not_applicable is None
        and not judgment.claims
        and judgment.score is None
        and not judgment.grades
    )


def judgment_of(
    case: GoldenCase, prediction: Prediction, metrics: Sequence[Metric], policy: GatePolicy, judge: Judge | None
) -> Judgment | None:
    """The judgment :func:`score_one` reads for a prediction (see there), or None when the judge is not called."""
    graded = graded_dimensions(judge) if judge is not None else frozenset()
    if judge is None or prediction.error is not None or not any(m.spec.judgment_field in graded for m in metrics):
        return None
    if detect_refusal(prediction, policy):
        return None
    return textless_judgment(prediction) or call_judge(judge, case, prediction, policy)


_CALL = Judgment(error="not judged yet")  # score_one's default judgment: call the judge there


def score_one(
    case: GoldenCase,
    prediction: Prediction,
    metrics: Sequence[Metric],
    policy: GatePolicy,
    judge: Judge | None,
    given: Mapping[str, float] | None = None,
    judgment: Judgment | None = _CALL,
) -> list[Score]:
    """All metric scores of one prediction, in ``metrics`` order (resolved from ``policy.metrics``).

    A failed prediction (a system error) is scored by the metrics that score failures (``error_rate``: 1;
    ``latency_ms`` and ``cost_usd``: what the failed call consumed, NaN when unknown) and has no value, with its
    reason in ``error``, for every other metric. A metric the judge grades (its
    ``judgment_field`` is among the judge's dimensions) is read from the judge's Judgment, combined with the
    metric's deterministic part when it has one (:meth:`~gate.metrics.MetricSpec.combined`); a judge failure
    gives failures for those metrics only. A metric the judge does not grade takes its deterministic value (NaN
    when it has none). The judge is not called on a refusal (a refusal makes no claims): judged metrics are then
    their deterministic value (0 for correctness and completeness of an answerable case) or NaN. Nor is it called
    when a retrieved chunk has no text (:func:`textless_judgment`: the judged metrics are then not applicable, with
    a note). The judgment's detail is kept on one row: the metric that keeps it (faithfulness) or else the first
    metric the judge grades; an answer without a checkable claim is noted there (``unscored``). Paired metrics
    (``head_win_rate``) have no per-side rows. ``given`` holds values already computed for this prediction (by
    :func:`batch_values`), used instead of the metric's per-case function. ``judgment``: the prediction's judgment
    already made by :func:`judgment_of` (None: not called); by default the judge is called here.
    """
    key = (case.id, prediction.repeat)
    metrics = [m for m in metrics if not m.spec.paired]
    if prediction.error is not None:
        reason = f"{PREDICTION_FAILED}{prediction.error}"
        return [
            Score(*key, m.name, score_case(m, case, prediction, False))
            if m.spec.scores_failures
            else Score(*key, m.name, math.nan, error=reason)
            for m in metrics
        ]
    given = given or {}
    graded = graded_dimensions(judge) if judge is not None else frozenset()
    judged = judge is not None and any(m.spec.judgment_field in graded for m in metrics)
    refused = detect_refusal(prediction, policy) if judged or any(m.name not in given for m in metrics) else False
    if judgment is _CALL:
        judgment = judgment_of(case, prediction, metrics, policy, judge)
    # the judgment's detail is kept once: on the metric that keeps it, else on the first metric the judge grades
    keeper = next((m for m in metrics if m.spec.keeps_detail and m.spec.judgment_field in graded), None) or next(
        (m for m in metrics if m.spec.judgment_field in graded), None
    )
    scores = []
    for metric in metrics:
        spec = metric.spec
        if metric.name in given:
            value = given[metric.name]
        else:
            value = score_case(metric, case, prediction, refused, policy.form) if spec.fn else math.nan
        if spec.judgment_field not in graded or judgment is None:
            scores.append(Score(*key, metric.name, value))
        elif judgment.error is not None:
            scores.append(Score(*key, metric.name, math.nan, error=f"judge failed: {judgment.error}"))
        elif spec.judgment_field in judgment.extra.get("ungraded", ()):
            message = f"judge failed: its answer has no grade for {spec.judgment_field}"
            scores.append(Score(*key, metric.name, math.nan, error=message))
        else:
            judged = getattr(judgment, spec.judgment_field)
            value = spec.combined(value, judged) if spec.fn else judged
            detail = None
            if metric is keeper:
                detail = judgment.to_dict()
                if has_no_claim(judgment):
                    detail["unscored"] = NO_CHECKABLE_CLAIM
            scores.append(Score(*key, metric.name, value, detail=detail))
    return scores


def score_pairs(
    pairs: Sequence[tuple[GoldenCase, Prediction]],
    metrics: Sequence[Metric],
    policy: GatePolicy,
    judge: Judge | None,
    calls_judge: bool,
) -> Iterator[list[Score]]:
    """The scores of each (case, prediction), in order: batched metrics at once, the rest per prediction.

    When ``calls_judge``, ``policy.judge_concurrency`` threads only call the judge (:func:`judgment_of`), while
    this thread computes each prediction's metrics as its judgment arrives: no request slot waits on metric CPU.
    """
    names = [m.name for m in metrics if not m.spec.paired]
    given = batch_values(pairs, metrics)
    columns = [given[name] for name in names if name in given]
    every = len(columns) == len(names)  # every metric computed at once: a prediction needs no per-case work

    def one(i: int, judgment: Judgment | None = _CALL) -> list[Score]:
        case, prediction = pairs[i]
        if not given:
            return score_one(case, prediction, metrics, policy, judge, judgment=judgment)
        if every and prediction.error is None:
            return [Score(case.id, prediction.repeat, n, c[i]) for n, c in zip(names, columns, strict=True)]
        return score_one(case, prediction, metrics, policy, judge, {n: c[i] for n, c in given.items()}, judgment)

    if not calls_judge:
        yield from map(one, range(len(pairs)))
        return
    with ThreadPoolExecutor(policy.judge_concurrency, thread_name_prefix="rag-gate-judge-call") as pool:
        judgments = pool.map(lambda pair: judgment_of(pair[0], pair[1], metrics, policy, judge), pairs)
        yield from itertools.starmap(one, enumerate(judgments))


class EarlyScores:
    """The scores of predictions computed as each arrives, while the pipeline runs (its wait is idle time here).

    :func:`score_all` reuses them for a prediction equal to the one scored (its ``line`` in the file aside); any
    other prediction (one kept from an interrupted run, or a row that reads back differently) is scored there as
    usual, so the scores are the same either way. Nothing is kept when a metric is graded by the judge: judge
    calls are made by :func:`score_all`, ``policy.judge_concurrency`` at a time.

    Only a prediction whose call took at least ``min_latency_ms`` is scored here: the wait for such a call leaves
    time to spare, whereas the predictions of a fast pipeline keep rag-gate busy anyway and are scored together
    afterwards (:func:`batch_values`: several times cheaper per prediction than :func:`score_one`).

    Args:
        golden: the cases (predictions of other ids are not scored here).
        policy: metrics and refusal settings, as given to :func:`score_all`.
        judge: the judge, as given to :func:`score_all`.
        min_latency_ms: the shortest call (``latency_ms``, or ``warmup_ms`` of a worker's first call) whose
            prediction is scored here, ≥ 0.
    """

    def __init__(
        self, golden: Sequence[GoldenCase], policy: GatePolicy, judge: Judge | None, min_latency_ms: float = 0.0
    ):
        self._min_latency_ms = min_latency_ms
        self._cases = {case.id: case for case in golden}
        self._metrics = [resolve(name) for name in policy.metrics]
        self._evaluation = policy
        self._judge = judge
        graded = graded_dimensions(judge) if judge is not None else frozenset()
        self.enabled = not any(m.spec.judgment_field in graded for m in self._metrics if not m.spec.paired)
        """False when a metric calls the judge: then nothing is scored early."""
        self._scores: dict[tuple[str, int], tuple[Prediction, list[Score]]] = {}
        self._lines: dict[int, tuple[list[Score], str]] = {}

    def add(self, prediction: Prediction) -> None:
        """Score ``prediction`` now; a no-op when not :attr:`enabled`, for a fast or failed call, or an unknown id."""
        took = prediction.latency_ms if prediction.latency_ms is not None else prediction.warmup_ms
        if not self.enabled or took is None or took < self._min_latency_ms:
            return
        case = self._cases.get(prediction.id)
        if case is not None:
            scores = score_one(case, prediction, self._metrics, self._evaluation, self._judge)
            self._scores[(prediction.id, prediction.repeat)] = (replace(prediction, line=0), scores)
            self._lines[id(scores)] = (scores, score_lines(scores))

    def reuse(self, prediction: Prediction, scores: list[Score]) -> None:
        """Take ``scores`` as ``prediction``'s (rows an earlier call of the same run scored), also when not enabled."""
        self._scores[(prediction.id, prediction.repeat)] = (replace(prediction, line=0), scores)

    def get(self, prediction: Prediction) -> list[Score] | None:
        """The scores of ``prediction`` if it was scored early (the same fields but ``line``), else None."""
        found = self._scores.get((prediction.id, prediction.repeat))
        if found is None or found[0] != replace(prediction, line=0):
            return None
        return found[1]

    def lines(self, scores: list[Score]) -> str:
        """:func:`score_lines` of ``scores``, made while the pipeline ran when it is a list :meth:`get` returned."""
        found = self._lines.get(id(scores))
        return found[1] if found is not None and found[0] is scores else score_lines(scores)

    def __len__(self) -> int:
        return len(self._scores)


def score_lines(scores: Iterable[Score]) -> str:
    """The rows of ``scores.jsonl`` for ``scores``: one compact JSON object per line, each ending in a newline."""
    return "".join(dumps(score.to_dict()) + "\n" for score in scores)


def batch_values(jobs: Sequence[tuple[GoldenCase, Prediction]], metrics: Sequence[Metric]) -> dict[str, list[float]]:
    """The values of the metrics that have a form over many predictions (``many``: retrieval), for every job.

    One pass over the predictions finds the first ranks of the expected documents
    (:func:`gate.metrics.retrieval.expected_ranks`); each metric is then array arithmetic over all of them: the
    values equal the per-case functions' (tested), at a fraction of the cost. Out-of-domain cases are NaN (the
    per-case rule); failed predictions get NaN here and are scored as failures by :func:`score_one`.

    Returns:
        metric name → one value per job, in job order.
    """
    batched = [m for m in metrics if m.spec.many is not None and not m.spec.paired]
    if not batched or not jobs:
        return {}
    valid = [prediction.error is None and not case.out_of_domain for case, prediction in jobs]
    ranks = expected_ranks(
        [prediction.retrieved if ok else () for (_, prediction), ok in zip(jobs, valid, strict=True)],
        [case.expected_doc_ids if ok else () for (case, _), ok in zip(jobs, valid, strict=True)],
        key=CHUNK_ID,
    )
    return {metric.name: metric.spec.many(ranks, metric.k or 0).tolist() for metric in batched if metric.spec.many}
