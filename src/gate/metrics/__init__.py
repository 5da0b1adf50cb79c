"""The metric registry (DESIGN §3): canonical names, direction, kind, default margin, and per-case scoring.

Every metric is a pure per-case function returning a float in its range or NaN ("not applicable"). The
registry maps its canonical name (``"hit_rate@k"``, ``"mrr"``) to a :class:`MetricSpec`; :func:`resolve` turns
a name from a config (``"hit_rate@5"``) into a :class:`Metric`; :func:`score_case` scores one case with it.
The metric functions live in their family modules: :mod:`~gate.metrics.retrieval`, :mod:`~gate.metrics.generation`,
:mod:`~gate.metrics.refusal` and :mod:`~gate.metrics.operational` (errors, latency, cost).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gate.metrics.context import ScoreContext
from gate.metrics.generation import (
    answer_f1,
    answer_per_case,
    completeness,
    correctness,
    exact_match,
    form_score,
    grounded_answer,
)
from gate.metrics.operational import cost_usd, error_rate, latency_ms
from gate.metrics.refusal import false_refusal, refusal
from gate.metrics.retrieval import (
    ExpectedRanks,
    hit_rate_at_k,
    hit_rate_at_k_many,
    ndcg_at_k,
    ndcg_at_k_many,
    per_case,
    precision_at_k,
    precision_at_k_many,
    recall_at_k,
    recall_at_k_many,
    reciprocal_rank,
    reciprocal_rank_many,
)
from gate.models import FormRules, GoldenCase, Prediction

if TYPE_CHECKING:  # defined once, with the statistics; not imported at run time (scipy is slow to import)
    import numpy as np

    from gate.results import Direction, Kind

Stage = Literal["retrieval", "generation", "system", "efficiency"]
"""What a metric measures: the retriever, the generator (answers, refusals), the system (failures), or efficiency
(latency, cost)."""
Combine = Literal["judge", "min"]
"""How a metric with both a deterministic part and a judge's grade is scored when the judge grades it: the judge's
grade replaces the deterministic value (``judge``), or the lower of the two counts (``min``: a hard rule the judge
may miss, such as a word limit, still fails the answer)."""


@dataclass(frozen=True)
class MetricSpec:
    """A registry entry: one metric family, e.g. ``ndcg@k`` for every k."""

    name: str
    """Canonical registry key, e.g. ``"hit_rate@k"``, ``"mrr"``."""
    label: str
    """Display template, formatted with ``k``, e.g. ``"nDCG@{k}"``."""
    direction: Direction
    """Whether a higher or a lower value is better."""
    kind: Kind
    """binary, graded or ratio: chooses the statistical test (STATISTICS.md §6)."""
    default_margin: float
    """Non-inferiority margin: absolute for binary/graded metrics, relative for ratio ones (0.10 = +10 %)."""
    description: str
    """The metric's definition (markdown): the README's metric table is generated from the registry (its row order,
    columns and this text; tests/metrics/test_registry.py checks that they agree)."""
    stage: Stage = "generation"
    """The part of the system the metric measures (triage of regressed cases: retrieval or generation)."""
    needs_k: bool = False
    """True when the name takes a cut-off (``@k``)."""
    fn: Callable[[ScoreContext], float] | None = None
    """Per-case function computed without a model; its docstring is that of the pure metric function (with its
    ``Source:``). None for a metric only a judge can score."""
    many: Callable[[ExpectedRanks, int], np.ndarray] | None = None
    """For a retrieval metric: ``fn`` over many predictions at once, from their expected documents' first ranks
    (:func:`gate.metrics.retrieval.expected_ranks`) and k (0 for a metric without one); the scoring module uses it
    instead of ``fn`` (equal values)."""
    judgment_field: str | None = None
    """For a judged metric: the attribute of :class:`gate.judges.base.Judgment` that holds its per-case value
    (e.g. ``"faithfulness"``); None for the others. With ``fn`` as well, the judge's grade is used when the judge
    grades that dimension, combined by ``combine``; otherwise ``fn``'s value."""
    combine: Combine = "judge"
    """For a metric with ``fn`` and ``judgment_field``: how the two combine when the judge grades it."""
    paired: bool = False
    """Scored at compare time from both sides' answers (``head_win_rate``, by the pairwise judge): no ``fn``, no
    ``judgment_field``, and no row in a side's scores.jsonl."""
    keeps_detail: bool = False
    """For a judged metric: its score row carries the judgment's claims as ``detail`` (one judged metric does,
    so the claims are stored once)."""
    scores_failures: bool = False
    """True for a metric that scores a failed prediction itself: ``error_rate``, and what a failed case consumed
    (``latency_ms``, ``cost_usd``: a call that failed was still paid for and waited for, so its cost and latency,
    when the prediction reports them, count in the metric and its aggregates). Every other metric has no value for
    a failed prediction (the failure is a system error, counted by ``error_rate``)."""
    out_of_domain: bool = False
    """True for the metric of out-of-domain refusals (``refusal``): the comparison lists its failing cases as
    out-of-domain failures, not as regressed cases, and its test decides whether new ones block."""

    def __post_init__(self) -> None:
        """A paired metric has neither ``fn`` nor ``judgment_field``; any other at least one (ValueError)."""
        if self.paired and (self.fn is not None or self.judgment_field is not None):
            raise ValueError(f"metric {self.name!r}: a paired metric has neither fn nor judgment_field")
        if not self.paired and self.fn is None and self.judgment_field is None:
            raise ValueError(f"metric {self.name!r}: give fn, judgment_field or both")

    @property
    def judged(self) -> bool:
        """True for metrics read (at least when the judge grades them) from a judge's Judgment."""
        return self.judgment_field is not None

    def combined(self, deterministic: float, judged: float) -> float:
        """The value of a metric the judge graded: its grade, or the lower of grade and deterministic value.

        The lower one counts with ``combine="min"`` when the deterministic value applies (not NaN).
        """
        if self.combine == "min" and not math.isnan(deterministic):
            return deterministic if math.isnan(judged) else min(deterministic, judged)
        return judged

    @property
    def margin_limit(self) -> float:
        """Exclusive upper bound of a margin: the width of the metric's range.

        1 for binary and graded metrics (values in [0, 1]: a drop of 1 or more cannot happen) and for a
        higher-is-better ratio metric (a relative drop of 100 %); infinite for a lower-is-better ratio metric
        (latency, cost: any relative increase can happen).
        """
        return math.inf if self.kind == "ratio" and self.direction == "lower" else 1.0


@dataclass(frozen=True)
class Metric:
    """A resolved metric instance, e.g. ``resolve("hit_rate@5")``."""

    spec: MetricSpec
    """The registry entry."""
    k: int | None
    """The cut-off for ``@k`` metrics, else None."""

    @functools.cached_property
    def name(self) -> str:
        """Concrete name, e.g. ``"hit_rate@5"`` (computed once: scoring reads it for every row)."""
        return self.spec.name.replace("@k", f"@{self.k}") if self.spec.needs_k else self.spec.name

    @property
    def label(self) -> str:
        """Display label, e.g. ``"Hit rate@5"``."""
        return self.spec.label.format(k=self.k)


METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec("hit_rate@k", "Hit rate@{k}", "higher", "binary", 0.03,
                   "an expected document is in the top k",
                   needs_k=True, stage="retrieval", fn=per_case(hit_rate_at_k), many=hit_rate_at_k_many),
        MetricSpec("recall@k", "Recall@{k}", "higher", "graded", 0.03,
                   "share of expected documents in the top k",
                   needs_k=True, stage="retrieval", fn=per_case(recall_at_k), many=recall_at_k_many),
        MetricSpec("precision@k", "Precision@{k}", "higher", "graded", 0.03,
                   "expected documents in the top k / k (trec_eval `P_k`)",
                   needs_k=True, stage="retrieval", fn=per_case(precision_at_k), many=precision_at_k_many),
        MetricSpec("mrr", "MRR", "higher", "graded", 0.03,
                   "reciprocal rank of the first expected document (whole list)",
                   stage="retrieval", fn=per_case(reciprocal_rank, uses_k=False),
                   many=lambda ranks, k: reciprocal_rank_many(ranks)),
        MetricSpec("ndcg@k", "nDCG@{k}", "higher", "graded", 0.03,
                   "nDCG, binary relevance, linear gain, log2 discount (Järvelin & Kekäläinen 2002)",
                   needs_k=True, stage="retrieval", fn=per_case(ndcg_at_k), many=ndcg_at_k_many),
        # 0.05, not 0.03: judged faithfulness also moves with answer style. On RAGTruth prompts, two models with
        # similar human hallucination rates (gpt-4-0613 9 %, gpt-3.5-turbo 7 %) differ by 0.047 in lexical
        # faithfulness, while a 9 % vs 55 % pair differs by 0.087 (tests/e2e/test_ragtruth.py).
        MetricSpec("faithfulness", "Faithfulness", "higher", "graded", 0.05,
                   "supported claims / claims (judge); NaN for refusals (wider margin: judged scores also move with "
                   "answer style)",
                   judgment_field="faithfulness", keeps_detail=True),
        MetricSpec("contradiction_rate", "Contradiction rate", "lower", "graded", 0.03,
                   "contradicted claims / claims (judge; the lexical judge: the closest chunk states the same thing "
                   "with another number, date or name, the other polarity, an antonym or swapped roles). **Gated by "
                   "default** beside `grounded_answer_rate`: a statement turned around in many answers fails",
                   judgment_field="contradiction_rate"),
        MetricSpec("hallucination_rate", "Hallucination rate", "lower", "binary", 0.03,
                   "1 when the answer has a contradicted or unsupported main claim (judge; the lexical judge: a claim "
                   "contradicted, or stating a number, date or name its chunk does not hold); duplicates count once, "
                   "so padding cannot dilute it; reported, not gated by default: it grows with the number of claims, "
                   "so with answer length",
                   judgment_field="hallucination_rate"),
        MetricSpec("hallucinated_claim_rate", "Hallucinated claims", "lower", "graded", 0.02,
                   "hallucinated claims / claims, a claim counted as `hallucination_rate` counts it (the lexical "
                   "judge: contradicted, or stating a number, date or name its chunk does not hold; a score-only "
                   "judge: 1 − its faithfulness grade); duplicates count once; reported, not gated by default: one "
                   "invented sentence in a long answer moves the share little (padding dilutes it)",
                   judgment_field="hallucinated_claim_rate"),
        # Gated by default (see gate.config.PRIMARY_FAMILIES): per answer, so padding cannot dilute an invented
        # sentence; a mean over claims inside the answer, so length does not raise it; 0 for non-answers and refusals
        # of an answerable case, so answering nothing cannot lower it. benchmarks/judge_quality.py measures it.
        # Margin 0.02, chosen on RAGTruth's development half only: it fails 5 of the 9 model pairs people see as worse
        # there and none of the other 6 (gate_pairs on the development prompts, with the model before its last refit);
        # faithful answers only longer move it by +0.002 (judge_quality.py's length-only row).
        MetricSpec("grounded_answer_rate", "Grounded answers", "higher", "graded", 0.02,
                   "the answer makes a checkable claim and none is hallucinated: the lexical judge's probability "
                   "(its fitted hallucination model over each claim's new words and facts), 1/0 for a judge that "
                   "gives verdicts; 0 for a non-answer and for a refused answerable case, NaN on out-of-domain cases. "
                   "**Gated by default**: padding, answer length and non-answers cannot move it the wrong way (see "
                   "\"How good is the lexical judge?\")",
                   fn=grounded_answer, judgment_field="grounded_answer_rate"),
        MetricSpec("answer_relevance", "Answer relevance", "higher", "graded", 0.05,
                   "the answer addresses the question directly, without padding: the judge's 1–3 grade as 0 / 0.5 / 1 "
                   "(rubric judge only; NaN with a claim-level judge and for refusals)",
                   judgment_field="answer_relevance"),
        MetricSpec("correctness", "Correctness", "higher", "graded", 0.05,
                   "agreement with the reference answers or the case's `criteria`: the rubric judge's grade; without "
                   "it, reference-answer token recall (Adlakha et al. 2024); 0 for a refused answerable case, NaN "
                   "without references or criteria",
                   fn=correctness, judgment_field="correctness"),
        MetricSpec("completeness", "Completeness", "higher", "graded", 0.05,
                   "the case's `required_points` made: the rubric judge's grade (against the points, else the "
                   "references or criteria); without it, the mean token recall of each point (POURPRE-style nugget "
                   "recall)",
                   fn=completeness, judgment_field="completeness"),
        MetricSpec("form", "Form", "higher", "graded", 0.05,
                   "form rules met: the share of the word limit and the citation of a retrieved id (no model); with "
                   "the rubric judge, the lower of that share and its grade on the free-text rules (language, tone)",
                   fn=form_score, judgment_field="form", combine="min"),
        MetricSpec("answer_f1", "Answer F1", "higher", "graded", 0.03,
                   "SQuAD token F1 against the best reference answer",
                   fn=answer_per_case(answer_f1)),
        MetricSpec("exact_match", "Exact match", "higher", "binary", 0.03,
                   "SQuAD exact match against any reference answer",
                   fn=answer_per_case(exact_match)),
        MetricSpec("refusal", "Refusal (out-of-domain)", "higher", "binary", 0.03,
                   "out-of-domain case refused (NaN on in-domain cases)",
                   fn=refusal, out_of_domain=True),
        MetricSpec("false_refusal", "False refusal", "lower", "binary", 0.03,
                   "in-domain case refused (NaN on out-of-domain cases)",
                   fn=false_refusal),
        MetricSpec("error_rate", "Error rate", "lower", "binary", 0.0,
                   "the pipeline failed on the case (raised, timed out, malformed result, no row)",
                   stage="system", fn=error_rate, scores_failures=True),
        MetricSpec("head_win_rate", "Head win rate", "higher", "binary", 0.05,
                   "paired: the pairwise judge prefers head's answer in both orders (base's column: base's answer "
                   "preferred in both); scored at compare time with `pairwise:`",
                   paired=True),
        MetricSpec("latency_ms", "Latency (ms)", "lower", "ratio", 0.10,
                   "milliseconds per case (measured by the adapter if the pipeline does not say), failed cases "
                   "included when their row reports it",
                   stage="efficiency", fn=latency_ms, scores_failures=True),
        MetricSpec("cost_usd", "Cost (USD)", "lower", "ratio", 0.05,
                   "US dollars per case, failed cases included (a failed call was paid for)",
                   stage="efficiency", fn=cost_usd, scores_failures=True),
    )
}  # fmt: skip

DEFAULT_METRICS: tuple[str, ...] = (
    "hit_rate@5", "recall@5", "precision@5", "mrr", "ndcg@5", "grounded_answer_rate", "faithfulness",
    "contradiction_rate", "hallucination_rate", "hallucinated_claim_rate", "answer_f1", "exact_match", "refusal",
    "false_refusal", "error_rate", "latency_ms", "cost_usd",
)  # fmt: skip

_NAME = re.compile(r"^(?P<base>[a-z_0-9]+)(?:@(?P<k>[^@]*))?$")


def resolve(name: str) -> Metric:
    """Resolve a metric name from a config, e.g. ``"ndcg@10"`` → spec ``ndcg@k`` with k = 10.

    Args:
        name: A registry key, with ``@k`` replaced by an integer ≥ 1 for cut-off metrics.

    Returns:
        The resolved :class:`Metric`.

    Raises:
        ValueError: For an unknown name (the message lists ``sorted(METRICS)``), a cut-off metric without
            ``@k`` or with k that is not an integer ≥ 1, or ``@k`` on a metric that takes none.

    """
    match = _NAME.match(name.strip())
    base = match.group("base") if match else None
    spec = METRICS.get(f"{base}@k") or METRICS.get(base or "")
    if spec is None:
        raise ValueError(f"unknown metric {name!r}; known metrics: {', '.join(sorted(METRICS))}")
    raw_k = match.group("k") if match else None
    if not spec.needs_k:
        if raw_k is not None:
            raise ValueError(f"metric {spec.name!r} takes no cut-off, got {name!r}")
        return Metric(spec, None)
    if raw_k is None:
        raise ValueError(f"metric {spec.name!r} needs a cut-off, e.g. {base}@5; got {name!r}")
    if not raw_k.isdigit() or int(raw_k) < 1:
        raise ValueError(f"metric {name!r}: k must be an integer >= 1, got {raw_k!r}")
    return Metric(spec, int(raw_k))


def score_case(
    metric: Metric, case: GoldenCase, prediction: Prediction, refused: bool, form: FormRules | None = None
) -> float:
    """Score one case with one metric's deterministic function (no model).

    Not-applicable rules: retrieval metrics, ``answer_f1`` and ``exact_match`` are NaN on out-of-domain
    cases; ``answer_f1``/``exact_match`` are NaN without reference answers and 0 for an in-domain refusal;
    ``refusal`` applies to out-of-domain cases only (1 = refused = correct) and ``false_refusal`` to in-domain
    ones only (1 = refused = bad); ``latency_ms`` and ``cost_usd`` are NaN when unknown. A prediction with
    ``error`` is scored like any other: the scoring module decides how failures count.

    Args:
        metric: A resolved metric (see :func:`resolve`).
        case: The golden case.
        prediction: The pipeline's prediction for the case.
        refused: Whether the answer is a refusal (see :func:`gate.metrics.refusal.is_refusal`).
        form: The config's form rules (the case's ``form`` overrides them); None: no config rules.

    Returns:
        The value in the metric's range, or NaN when the metric does not apply.

    Raises:
        ValueError: For a metric without a deterministic function (faithfulness, contradiction_rate,
            answer_relevance: the scoring module reads them from the judge's Judgment; head_win_rate: scored at
            compare time).

    """
    if metric.spec.fn is None:
        raise ValueError(f"metric {metric.name!r} has no deterministic function: it is judged or paired")
    rules = (form or FormRules()).override(case.form)
    return metric.spec.fn(ScoreContext(case=case, prediction=prediction, k=metric.k, refused=refused, form=rules))


__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "Combine",
    "Stage",
    "Metric",
    "MetricSpec",
    "resolve",
    "score_case",
]
