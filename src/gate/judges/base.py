"""The judge interface: claim-level verdicts for one answer against its retrieved chunks (DESIGN §3).

Every backend (lexical, nli, ragas, llm) returns a :class:`Judgment`. A judge that cannot judge (endpoint down,
unparseable output) returns a Judgment with ``error`` set: the scoring module records that as a judge failure,
never as a score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from gate.manifest import JudgeUsage
from gate.models import Chunk, Prediction

if TYPE_CHECKING:
    from gate.judges.hallucination import ClaimSignals

DIMENSIONS = ("faithfulness", "answer_relevance", "correctness", "completeness", "form")
"""The five generation dimensions of the evaluation method, in the rubric's order."""

CLAIM_DIMENSIONS = frozenset(
    {"faithfulness", "contradiction_rate", "hallucination_rate", "hallucinated_claim_rate", "grounded_answer_rate"}
)
"""What a claim-level judge (lexical, nli, ragas) grades: the judged metrics it gives values for."""

Verdict = Literal["supported", "contradicted", "unverifiable"]
ContradictionLevel = Literal["NONE", "SOMETIMES", "ALL"]


@dataclass(frozen=True)
class ClaimVerdict:
    """The verdict on one atomic claim of an answer."""

    claim: str
    """The claim text (a sentence or clause of the answer)."""
    verdict: Verdict
    """supported: a chunk entails it; contradicted: the closest chunk covers it but disagrees (number, date,
    entity, negation); unverifiable: no chunk covers it."""
    chunk_id: str | None = None
    """Id of the attributed (closest) chunk, or None when no chunk is close."""
    chunk_text: str | None = None
    """The attributed chunk's text (or its best-matching sentence), for the report."""
    similarity: float = 0.0
    """Similarity of the claim to the attributed chunk in [0, 1] (TF-IDF cosine for the lexical judge)."""
    contradiction_level: ContradictionLevel = "NONE"
    """Across the chunks that cover the claim: contradicted by none, some, or all of them."""
    reason: str = ""
    """One-line explanation (e.g. "number 1,200 not in chunk; chunk says 1,500")."""
    unsupported_facts: tuple[str, ...] = ()
    """Checkable facts of the claim (numbers, dates, names) found in no chunk and not in the question, e.g.
    ("number 1200", "entity glendale"); set by the lexical judge."""
    p_hallucinated: float | None = None
    """The judge's probability in [0, 1] that the claim is hallucinated (the lexical judge's fitted model,
    :mod:`gate.judges.hallucination`); None for a judge that gives only verdicts."""
    signals: ClaimSignals | None = field(default=None, compare=False, repr=False)
    """What the lexical judge measured on the claim (the model's inputs); not stored."""


@dataclass(frozen=True)
class Judgment:
    """A judge's result for one answer: per-claim verdicts and the per-response scores."""

    claims: tuple[ClaimVerdict, ...] = ()
    """Per-claim verdicts, in answer order; empty for a refusal, an empty answer or a response-level judge."""
    error: str | None = None
    """Set when the judge failed; the scores are then NaN and must be counted as failures."""
    score: float | None = None
    """Response-level faithfulness in [0, 1] for judges that give no claims (the rubric judge maps 1–3 to
    0, 0.5, 1); when set it takes precedence over the claim count."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend-specific values (e.g. the rubric judge's raw 1–3 grades and one-line reasons)."""
    hallucinated: bool | None = None
    """The judge's response-level call, when it makes its own (the lexical judge: a contradicted claim or a claim
    with an unsupported fact); None: derived from the verdicts (see :attr:`hallucination_rate`)."""
    not_applicable: str | None = None
    """Set when the judge cannot read the answer or its context (e.g. "answer is in Spanish (es): the lexical
    judge reads English and Italian; not scored"): every score is NaN (not applicable), not a failure, and the
    report shows this warning."""
    grounded: float | None = None
    """The judge's grounded score of the answer in [0, 1] (the lexical judge: 1 − its hallucination score, 0 when no
    claim is supported); None: derived from the verdicts (see :attr:`grounded_answer_rate`)."""
    grades: Mapping[str, float] = field(default_factory=dict)
    """Response-level grades in [0, 1] of the dimensions other than faithfulness (``answer_relevance``,
    ``correctness``, ``completeness``, ``form``), from a judge that grades them (the rubric maps 1–3 to 0, 0.5,
    1); a dimension the judge did not grade is absent (or NaN: not applicable to this case)."""

    @property
    def n_supported(self) -> int:
        """Number of supported claims."""
        return sum(c.verdict == "supported" for c in self.claims)

    @property
    def n_contradicted(self) -> int:
        """Number of contradicted claims."""
        return sum(c.verdict == "contradicted" for c in self.claims)

    @property
    def faithfulness(self) -> float:
        """Supported claims / all claims in [0, 1]; NaN when there are no claims or the judge failed.

        Source: claim-level faithfulness as in RAGAS (Es et al. 2024, arXiv:2309.15217, §3).
        """
        if self.error is not None or self.not_applicable is not None:
            return math.nan
        if self.score is not None:
            return self.score
        if not self.claims:
            return math.nan
        return self.n_supported / len(self.claims)

    @property
    def contradiction_rate(self) -> float:
        """Contradicted claims / all claims in [0, 1]; NaN when there are no claims or the judge failed."""
        if self.error is not None or self.not_applicable is not None or not self.claims:
            return math.nan
        return self.n_contradicted / len(self.claims)

    def grade(self, dimension: str) -> float:
        """The judge's grade of ``dimension`` in [0, 1]; NaN when it failed, could not read the text or gave none."""
        if self.error is not None or self.not_applicable is not None:
            return math.nan
        return float(self.grades.get(dimension, math.nan))

    @property
    def answer_relevance(self) -> float:
        """Whether the answer addresses the question directly and concisely, in [0, 1]; NaN when not graded."""
        return self.grade("answer_relevance")

    @property
    def correctness(self) -> float:
        """Agreement with the reference answers or the case's criteria, in [0, 1]; NaN when not graded."""
        return self.grade("correctness")

    @property
    def completeness(self) -> float:
        """How fully the answer makes the required points (or the reference's), in [0, 1]; NaN when not graded."""
        return self.grade("completeness")

    @property
    def form(self) -> float:
        """How well the answer follows the form rules (language, tone, format), in [0, 1]; NaN when not graded."""
        return self.grade("form")

    @property
    def hallucination_rate(self) -> float:
        """1.0 when the answer has a contradicted or unsupported main claim, else 0.0; NaN without claims.

        Binary per answer, so padding an answer with supported sentences cannot hide a false claim. The judge's
        own call (:attr:`hallucinated`) is used when set: the lexical judge counts a claim as unsupported only when
        a number, date or name of it is in no chunk (it cannot tell a paraphrase from an invention otherwise).
        Judges that read meaning (LLM, NLI, ragas) count every claim not supported; a judge that gives only a
        score (the rubric judge) flags any score below 1.

        Source: response-level hallucination label of RAGTruth (Niu et al. 2024, ACL, arXiv:2401.00396): an
        answer is hallucinated when it has at least one hallucinated span.
        """
        if self.error is not None or self.not_applicable is not None:
            return math.nan
        if self.hallucinated is not None:
            return float(self.hallucinated) if self.claims or self.score is not None else math.nan
        if self.score is not None:
            return float(self.score < 1.0)
        if not self.claims:
            return math.nan
        return float(any(c.verdict != "supported" for c in self.claims))

    @property
    def hallucinated_claim_rate(self) -> float:
        """The share of the answer's claims that are hallucinated, in [0, 1]; NaN without claims.

        A claim is hallucinated by the rule of :attr:`hallucination_rate`: for a judge that makes its own call (the
        lexical judge) a contradicted claim or one stating a number, date or name that no chunk holds; for judges
        that read meaning (LLM, NLI, ragas) a claim not supported. A judge that gives only a score (the rubric
        judge) gives ``1 - score``.

        Unlike the binary :attr:`hallucination_rate`, a share does not grow with the number of claims: a longer
        answer with the same rate of false alarms per claim scores the same (the lexical judge flags more answers
        the longer they are). Duplicate claims count once, so padding with copies does not dilute it.
        """
        if self.error is not None or self.not_applicable is not None:
            return math.nan
        if self.score is not None and not self.claims:
            return 1.0 - self.score
        if not self.claims:
            return math.nan
        if self.hallucinated is not None:
            flagged = sum(c.verdict == "contradicted" or bool(c.unsupported_facts) for c in self.claims)
        else:
            flagged = sum(c.verdict != "supported" for c in self.claims)
        return flagged / len(self.claims)

    @property
    def grounded_answer_rate(self) -> float:
        """Whether the answer is grounded in its chunks, in [0, 1]: it makes a checkable claim and none is hallucinated.

        The judge's own score when it gives one (the lexical judge: 1 − the answer's hallucination score from its
        fitted model, :mod:`gate.judges.hallucination`, and 0 when no claim is supported); a judge that reads meaning
        (LLM, NLI, ragas): 1 when every claim is supported, else 0; a judge that gives only a score (the rubric
        judge): that score. **An answer without a checkable claim scores 0**: a vague non-answer is not grounded (a
        refusal never reaches the judge: the metric scores it 0 on an answerable case). NaN when the judge failed or
        could not read the text.

        Source: attribution to identified sources, AIS (Rashkin et al. 2023, "Measuring attribution in natural
        language generation models", Computational Linguistics 49(4), doi:10.1162/coli_a_00486): an answer is
        attributable when all of it is supported by the sources.
        """
        if self.error is not None or self.not_applicable is not None:
            return math.nan
        if self.grounded is not None:
            return self.grounded
        if self.score is not None and not self.claims:
            return self.score
        if not self.claims:
            return 0.0
        return float(all(c.verdict == "supported" for c in self.claims))

    @property
    def contradiction_level(self) -> ContradictionLevel:
        """The response-level contradiction level: the most severe level among its claims."""
        levels = {c.contradiction_level for c in self.claims}
        return "ALL" if "ALL" in levels else "SOMETIMES" if "SOMETIMES" in levels else "NONE"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (stored as the ``detail`` of the faithfulness score row)."""
        out: dict[str, Any] = {
            "claims": [
                {
                    "claim": c.claim,
                    "verdict": c.verdict,
                    "chunk_id": c.chunk_id,
                    "chunk_text": c.chunk_text,
                    "similarity": round(c.similarity, 6),
                    "contradiction_level": c.contradiction_level,
                    "reason": c.reason,
                    **({"unsupported_facts": list(c.unsupported_facts)} if c.unsupported_facts else {}),
                    **({"p_hallucinated": c.p_hallucinated} if c.p_hallucinated is not None else {}),
                }
                for c in self.claims
            ],
            "contradiction_level": self.contradiction_level,
        }
        if self.grounded is not None:
            out["grounded"] = self.grounded
        if self.error is not None:
            out["error"] = self.error
        if self.not_applicable is not None:
            out["not_applicable"] = self.not_applicable
        if self.grades:
            out["grades"] = {k: None if math.isnan(v) else v for k, v in self.grades.items()}
        if self.extra:
            out["extra"] = self.extra
        return out


class Judge(Protocol):
    """A per-answer judge. Implementations must be safe to call from several threads.

    Two optional attributes widen what a judge does: ``dimensions`` (the judged metrics it gives values for,
    :func:`graded_dimensions`; default :data:`CLAIM_DIMENSIONS`) and ``reads_case = True`` (``judge`` then also
    takes the keywords ``case``, the :class:`~gate.models.GoldenCase` with its reference answers, criteria and
    required points, and ``form``, the :class:`~gate.models.FormRules` that apply to it).
    """

    id: str
    """Short label including the backend and its main settings (e.g. "lexical", "llm:gpt-4o-mini@t0")."""
    version: str
    """Bumped whenever the judge's behaviour changes (part of cache keys and of manifest.json)."""

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that changes a score, JSON-ready.

        At least ``name`` and ``version``, plus every scoring option (model, endpoint, temperature, max_tokens,
        prompt version, thresholds...). Two judges with equal identities give comparable scores; options that
        only decide whether or how fast a call succeeds (timeouts, retries, concurrency, cache) are left out.
        """
        ...

    def judge(self, question: str, answer: str, chunks: Sequence[Chunk], *, repeat: int = 0) -> Judgment:
        """Judge ``answer`` (to ``question``) against ``chunks`` (rank order).

        ``repeat`` is the 0-based repeat index: LLM judges put it in their cache key so that each repeat gets its
        own judge sample. Never raises for a judge failure: returns ``Judgment(error=...)`` instead. Raises
        :class:`gate.errors.EvaluationError` (e.g. ``JudgeConfigError``) only when no call can succeed: the
        endpoint rejected the key, the URL or the model.
        """
        ...


NO_USAGE = JudgeUsage(cost_usd=0.0)
"""The accounting of a judge that calls no API (lexical, nli): no request, no token, no cost."""


def judge_usage(judge: object) -> JudgeUsage:
    """A judge's accounting: requests, retries, failures, cache hits, tokens and cost.

    Returns:
        ``judge.usage()`` when the judge has it (LLM-backed judges, see :class:`gate.judges.llm.usage.CallStats`);
        :data:`NO_USAGE` for a judge that calls no API (lexical, nli).

    """
    usage = getattr(judge, "usage", None)
    return usage() if callable(usage) else NO_USAGE


def graded_dimensions(judge: object) -> frozenset[str]:
    """The judged metrics a judge gives values for: its ``dimensions`` attribute, else :data:`CLAIM_DIMENSIONS`."""
    return frozenset(getattr(judge, "dimensions", CLAIM_DIMENSIONS))


MAX_JUDGED_ANSWER_BYTES = 100_000
"""The longest answer a judge is given, in bytes of UTF-8 (about 15,000 English words; a RAG answer is rarely over
5,000 bytes). A longer one (a pipeline that returns a whole document, a runaway generation) is not judged: its judged
metrics are not applicable, with the reason, so one answer cannot keep scoring (or an LLM judge's bill) busy."""


def answer_bytes(answer: str) -> int:
    """The size of ``answer`` in bytes of UTF-8 (a lone surrogate counts its 3 bytes)."""
    return len(answer.encode("utf-8", "surrogatepass"))


def oversize_judgment(prediction: Prediction) -> Judgment | None:
    """A not-applicable judgment when the answer is longer than :data:`MAX_JUDGED_ANSWER_BYTES`, else None.

    Every metric the judge grades is then NaN (not applicable) with ``answer of N bytes exceeds the limit of M bytes
    a judge is given`` as the note: counted and shown like any other unjudged answer, and where the other side of a
    comparison was judged it counts as an evaluation failure, never as "no change".
    """
    if len(prediction.answer) * 4 <= MAX_JUDGED_ANSWER_BYTES:  # at most 4 bytes per character: under the limit
        return None
    size = answer_bytes(prediction.answer)
    if size <= MAX_JUDGED_ANSWER_BYTES:
        return None
    return Judgment(not_applicable=oversize_note(size))


def oversize_note(size: int) -> str:
    """The note of an answer of ``size`` bytes that is not judged (:func:`oversize_judgment`)."""
    return f"answer of {size:,} bytes exceeds the limit of {MAX_JUDGED_ANSWER_BYTES:,} bytes a judge is given"
