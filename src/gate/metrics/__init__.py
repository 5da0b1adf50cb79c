"""The metric registry (DESIGN §3): canonical names, direction, kind, default margin, and per-case scoring.

Every metric is a pure per-case function returning a float in its range or NaN ("not applicable"). The
registry maps its canonical name (``"hit_rate@k"``, ``"mrr"``) to a :class:`MetricSpec`; :func:`resolve` turns
a name from a config (``"hit_rate@5"``) into a :class:`Metric`; :func:`score_case` scores one case with it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gate.metrics.generation import (
    answer_f1,
    exact_match,
    form_rules_met,
    normalize_answer,
    points_covered,
    token_recall,
)
from gate.metrics.refusal import DEFAULT_REFUSAL_PHRASES, is_refusal
from gate.metrics.retrieval import (
    ExpectedRanks,
    hit_rate_at_k,
    hit_rate_at_k_many,
    ndcg_at_k,
    ndcg_at_k_many,
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

    from gate.stats.inputs import Direction, Kind

Stage = Literal["retrieval", "generation", "system", "efficiency"]
Combine = Literal["judge", "min"]
"""How a metric with both a deterministic part and a judge's grade is scored when the judge grades it: the judge's
grade replaces the deterministic value (``judge``), or the lower of the two counts (``min``: a hard rule the judge
may miss, such as a word limit, still fails the answer)."""
"""What a metric measures: the retriever, the generator (answers, refusals), the system (failures), or efficiency
(latency, cost)."""


@dataclass(frozen=True)
class ScoreContext:
    """Everything a per-case metric function may read."""

    case: GoldenCase
    """The golden case."""
    prediction: Prediction
    """The pipeline's prediction for the case (one repeat)."""
    k: int | None
    """The cut-off of a ``@k`` metric, else None."""
    refused: bool
    """Whether the answer is a refusal (see :func:`gate.metrics.refusal.is_refusal`)."""
    form: FormRules = FormRules()
    """The form rules that apply to the case: the config's ``form:`` overridden by the case's ``form``."""


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
    """One-line description for reports and the README."""
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


def _retrieval(fn: Callable[..., float], *, uses_k: bool = True) -> Callable[[ScoreContext], float]:
    """Adapt a pure retrieval metric to a :class:`ScoreContext` (NaN on out-of-domain cases)."""

    @functools.wraps(fn)
    def per_case(ctx: ScoreContext) -> float:
        if ctx.case.out_of_domain:
            return math.nan
        args = (ctx.prediction.retrieved_ids, ctx.case.expected_doc_ids)
        return fn(*args, ctx.k) if uses_k else fn(*args)

    return per_case


def _answer(fn: Callable[[str, tuple[str, ...]], float]) -> Callable[[ScoreContext], float]:
    """Adapt a pure answer metric: NaN on out-of-domain cases, 0 for an in-domain refusal."""

    @functools.wraps(fn)
    def per_case(ctx: ScoreContext) -> float:
        if ctx.case.out_of_domain:
            return math.nan
        value = fn(ctx.prediction.answer, ctx.case.reference_answers)
        return 0.0 if ctx.refused and not math.isnan(value) else value

    return per_case


def correctness(ctx: ScoreContext) -> float:
    """Score correctness without a model: reference-answer token recall (:func:`token_recall`).

    The case score is the best reference's recall. An LLM judge that grades correctness replaces it with its
    1–3 grade against the references or the case's ``criteria`` (mapped to 0, 0.5, 1).

    Returns:
        A value in [0, 1]; 0 for a refusal of an answerable case that has reference answers or criteria; NaN
        on out-of-domain cases and when the case has no reference answer (with ``criteria`` only, a judge is
        needed).

    Source: Adlakha et al., TACL 12 (2024), doi:10.1162/tacl_a_00667, §4 (token-level recall of the reference
        answer tracks human correctness judgments of verbose answers better than F1 or exact match).

    """
    case = ctx.case
    if case.out_of_domain or not (case.reference_answers or case.criteria):
        return math.nan
    if ctx.refused:
        return 0.0
    return token_recall(ctx.prediction.answer, case.reference_answers)


def completeness(ctx: ScoreContext) -> float:
    """Score completeness without a model: the share of the case's ``required_points`` made (:func:`points_covered`).

    An LLM judge that grades completeness replaces it with its 1–3 grade against the required points, else the
    reference answers or the ``criteria``.

    Returns:
        A value in [0, 1]; 0 for a refusal of an answerable case that has required points, reference answers or
        criteria; NaN on out-of-domain cases and without required points (a judge can still grade against the
        references or criteria).

    Source: nugget recall with term-overlap matching, POURPRE (Lin & Demner-Fushman, Information Retrieval 9
        (2006), doi:10.1007/s10791-006-9003-7).

    """
    case = ctx.case
    if case.out_of_domain or not (case.required_points or case.reference_answers or case.criteria):
        return math.nan
    if ctx.refused:
        return 0.0
    return points_covered(ctx.prediction.answer, case.required_points)


def form_score(ctx: ScoreContext) -> float:
    """Score the deterministic form rules: the share met of the word limit and the citation requirement.

    See :func:`gate.metrics.generation.form_rules_met`; the rules are the config's ``form:`` overridden by the
    case's ``form``. An LLM judge that grades form also reads the free-text ``rules`` (language, tone); the
    metric is then the lower of its grade and this share.

    Returns:
        0, 0.5 or 1; NaN on out-of-domain cases, for refusals, and when no deterministic rule is set.

    Source: verifiable format instructions (Zhou et al. 2023, arXiv:2311.07911); citation presence as in ALCE
        (Gao et al., EMNLP 2023, doi:10.18653/v1/2023.emnlp-main.398).

    """
    if ctx.case.out_of_domain or ctx.refused:
        return math.nan
    rules = ctx.form
    return form_rules_met(ctx.prediction.answer, ctx.prediction.retrieved_ids, rules.max_words, bool(rules.cite))


def refusal(ctx: ScoreContext) -> float:
    """Score refusal on an out-of-domain case: 1 when the system refused (the correct behaviour), else 0.

    Returns:
        0.0 or 1.0; NaN on in-domain cases.

    Source: negative rejection rate in RGB (Chen et al., AAAI 2024, doi:10.1609/aaai.v38i16.29728); SQuAD 2.0
        abstention on unanswerable questions (Rajpurkar, Jia & Liang, ACL 2018, doi:10.18653/v1/P18-2124).

    """
    return float(ctx.refused) if ctx.case.out_of_domain else math.nan


def false_refusal(ctx: ScoreContext) -> float:
    """Score a false refusal on an in-domain case: 1 when the system refused an answerable question (bad).

    Returns:
        0.0 or 1.0; NaN on out-of-domain cases.

    Source: over-refusal / false refusal rate (Röttger et al., "XSTest", NAACL 2024,
        doi:10.18653/v1/2024.naacl-long.301); SQuAD 2.0 answerable questions (Rajpurkar, Jia & Liang,
        ACL 2018).

    """
    return math.nan if ctx.case.out_of_domain else float(ctx.refused)


def latency_ms(ctx: ScoreContext) -> float:
    """Wall-clock latency of the case in milliseconds (≥ 0), as recorded in the prediction (a failed one's too).

    Returns:
        Milliseconds; NaN when unknown.

    Source: the prediction contract (DESIGN §2, ``latency_ms``), measured by the pipeline adapter.

    """
    value = ctx.prediction.latency_ms
    return math.nan if value is None else float(value)


def cost_usd(ctx: ScoreContext) -> float:
    """Cost of the case in US dollars (≥ 0), as reported by the pipeline (a failed call's too: it was paid for).

    Returns:
        US dollars; NaN when unknown.

    Source: the prediction contract (DESIGN §2, ``cost_usd``), reported by the pipeline.

    """
    value = ctx.prediction.cost_usd
    return math.nan if value is None else float(value)


def error_rate(ctx: ScoreContext) -> float:
    """Score a system error: 1 when the pipeline under test failed on the case, else 0.

    Failed means it raised, timed out, returned a malformed result or no row.

    Returns:
        0.0 or 1.0 (never NaN: every case × repeat has a prediction row, a failed one carries ``error``).

    Source: the prediction contract (DESIGN §2: a failed case is a row with ``error``); DESIGN §8 (a pipeline that
        breaks on a case is the system failing).

    """
    return 1.0 if ctx.prediction.error is not None else 0.0


METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec("hit_rate@k", "Hit rate@{k}", "higher", "binary", 0.03,
                   "Share of questions with an expected document in the top k.",
                   needs_k=True, stage="retrieval", fn=_retrieval(hit_rate_at_k), many=hit_rate_at_k_many),
        MetricSpec("recall@k", "Recall@{k}", "higher", "graded", 0.03,
                   "Share of the expected documents found in the top k.",
                   needs_k=True, stage="retrieval", fn=_retrieval(recall_at_k), many=recall_at_k_many),
        MetricSpec("precision@k", "Precision@{k}", "higher", "graded", 0.03,
                   "Expected documents in the top k, divided by k.",
                   needs_k=True, stage="retrieval", fn=_retrieval(precision_at_k), many=precision_at_k_many),
        MetricSpec("mrr", "MRR", "higher", "graded", 0.03,
                   "Reciprocal rank of the first expected document (whole list).",
                   stage="retrieval", fn=_retrieval(reciprocal_rank, uses_k=False),
                   many=lambda ranks, k: reciprocal_rank_many(ranks)),
        MetricSpec("ndcg@k", "nDCG@{k}", "higher", "graded", 0.03,
                   "Normalised discounted cumulative gain at k (binary relevance, linear gain).",
                   needs_k=True, stage="retrieval", fn=_retrieval(ndcg_at_k), many=ndcg_at_k_many),
        # 0.05, not 0.03: judged faithfulness also moves with answer style. On RAGTruth prompts, two models with
        # similar human hallucination rates (gpt-4-0613 9 %, gpt-3.5-turbo 7 %) differ by 0.047 in lexical
        # faithfulness, while a 9 % vs 55 % pair differs by 0.087 (tests/test_gate_ragtruth.py).
        MetricSpec("faithfulness", "Faithfulness", "higher", "graded", 0.05,
                   "Share of the answer's claims supported by the retrieved chunks.",
                   judgment_field="faithfulness", keeps_detail=True),
        MetricSpec("contradiction_rate", "Contradiction rate", "lower", "graded", 0.03,
                   "Share of the answer's claims contradicted by the retrieved chunks.",
                   judgment_field="contradiction_rate"),
        MetricSpec("hallucination_rate", "Hallucination rate", "lower", "binary", 0.03,
                   "Share of answers with a contradicted or unsupported main claim (padding cannot dilute it).",
                   judgment_field="hallucination_rate"),
        # Gated by default instead of the binary rate: a share does not grow with the answer's length. Margin 0.02,
        # chosen on RAGTruth's development half only (benchmarks/judge_quality.py): margins 0.01 and 0.02 fail 7 of
        # the 9 model pairs people see as worse there (0 false fails of 6), 0.03 fewer; the larger keeps more room
        # for noise. Faithful answers 67 % longer (96 → 160 words) moved it by +0.021, not significantly (the
        # binary rate by +0.17).
        MetricSpec("hallucinated_claim_rate", "Hallucinated claims", "lower", "graded", 0.02,
                   "Share of the answer's claims that are contradicted or unsupported (the lexical judge: "
                   "contradicted, or stating a number, date or name its chunk does not hold); length-neutral.",
                   judgment_field="hallucinated_claim_rate"),
        MetricSpec("answer_relevance", "Answer relevance", "higher", "graded", 0.05,
                   "Whether the answer addresses the question directly, without padding (judge's 1–3 grade).",
                   judgment_field="answer_relevance"),
        MetricSpec("correctness", "Correctness", "higher", "graded", 0.05,
                   "Agreement with the reference answers or the case's criteria (judge's 1–3 grade; "
                   "without a grading judge, reference token recall).",
                   fn=correctness, judgment_field="correctness"),
        MetricSpec("completeness", "Completeness", "higher", "graded", 0.05,
                   "Share of the required points the answer makes (judge's 1–3 grade; without a grading judge, "
                   "token recall of each required point).",
                   fn=completeness, judgment_field="completeness"),
        MetricSpec("form", "Form", "higher", "graded", 0.05,
                   "Form rules met: word limit and citation of a retrieved id, and free-text rules for the judge "
                   "(the lower of the two).",
                   fn=form_score, judgment_field="form", combine="min"),
        MetricSpec("answer_f1", "Answer F1", "higher", "graded", 0.03,
                   "SQuAD token F1 against the best reference answer.", fn=_answer(answer_f1)),
        MetricSpec("exact_match", "Exact match", "higher", "binary", 0.03,
                   "SQuAD exact match against any reference answer.", fn=_answer(exact_match)),
        MetricSpec("refusal", "Refusal (out-of-domain)", "higher", "binary", 0.03,
                   "Share of out-of-domain questions the system refused.", fn=refusal, out_of_domain=True),
        MetricSpec("false_refusal", "False refusal", "lower", "binary", 0.03,
                   "Share of answerable questions the system refused.", fn=false_refusal),
        MetricSpec("error_rate", "Error rate", "lower", "binary", 0.0,
                   "Share of cases on which the pipeline failed (raised, timed out, malformed result).",
                   stage="system", fn=error_rate, scores_failures=True),
        MetricSpec("head_win_rate", "Head win rate", "higher", "binary", 0.05,
                   "Cases whose head answer the pairwise judge prefers in both orders (base column: base "
                   "preferred; a split or tie is neither).", paired=True),
        MetricSpec("latency_ms", "Latency (ms)", "lower", "ratio", 0.10,
                   "Wall-clock milliseconds per case.", stage="efficiency", fn=latency_ms, scores_failures=True),
        MetricSpec("cost_usd", "Cost (USD)", "lower", "ratio", 0.05,
                   "US dollars per case.", stage="efficiency", fn=cost_usd, scores_failures=True),
    )
}  # fmt: skip

DEFAULT_METRICS: tuple[str, ...] = (
    "hit_rate@5", "recall@5", "precision@5", "mrr", "ndcg@5", "faithfulness", "contradiction_rate",
    "hallucination_rate", "hallucinated_claim_rate", "answer_f1", "exact_match", "refusal", "false_refusal",
    "error_rate", "latency_ms", "cost_usd",
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
        refused: Whether the answer is a refusal (see :func:`is_refusal`).
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
    "DEFAULT_REFUSAL_PHRASES",
    "METRICS",
    "Combine",
    "Stage",
    "Metric",
    "MetricSpec",
    "ScoreContext",
    "answer_f1",
    "exact_match",
    "form_rules_met",
    "hit_rate_at_k",
    "is_refusal",
    "ndcg_at_k",
    "normalize_answer",
    "points_covered",
    "precision_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "resolve",
    "score_case",
    "token_recall",
]
