"""The data contracts of DESIGN §2 as frozen dataclasses (golden case, retrieved chunk, prediction, score)."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FormRules:
    """Form rules an answer must follow (``form:`` in the config; a golden case's ``form`` overrides it per key).

    ``max_words`` and ``cite`` are checked without a model (:func:`gate.metrics.generation.form_rules_met`);
    ``rules`` is free text (language, tone, format) that only an LLM judge reads. A field left None is not set.
    """

    max_words: int | None = None
    """Largest number of words (whitespace-separated tokens) an answer may have; None: no limit."""
    cite: bool | None = None
    """True: the answer must cite the id of one of its retrieved chunks (e.g. ``[doc-7]``); None: not set
    (no requirement), false: no requirement (a case's ``cite: false`` lifts the config's)."""
    rules: str | None = None
    """Free-text rules for LLM judges, e.g. "Answer in Italian, in a neutral tone, without bullet lists"."""

    def override(self, other: FormRules | None) -> FormRules:
        """These rules with every field that ``other`` sets (not None) taking precedence."""
        if other is None:
            return self
        return FormRules(
            max_words=self.max_words if other.max_words is None else other.max_words,
            cite=self.cite if other.cite is None else other.cite,
            rules=self.rules if other.rules is None else other.rules,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with the fields that are set."""
        return {k: v for k, v in (("max_words", self.max_words), ("cite", self.cite), ("rules", self.rules))
                if v is not None}  # fmt: skip


@dataclass(frozen=True)
class GoldenCase:
    """One question of the golden set (one line of ``golden.jsonl``)."""

    id: str
    """Unique case id."""
    question: str
    """The question as a user would ask it."""
    expected_doc_ids: tuple[str, ...] = ()
    """Ids of the documents that answer the question; empty for out-of-domain cases."""
    reference_answers: tuple[str, ...] = ()
    """Acceptable reference answers (any one of them is correct); may be empty."""
    out_of_domain: bool = False
    """True when the right behaviour is to refuse ("I don't have that information")."""
    tags: tuple[str, ...] = ()
    """Free labels; a config may name a tag prefix or use ``cluster`` to group dependent cases."""
    criteria: str | None = None
    """Optional free text for judges."""
    cluster: str | None = None
    """Optional cluster id: cases that share one are not independent (e.g. one source document)."""
    required_points: tuple[str, ...] = ()
    """Points a complete answer must make (one short statement each), for the ``completeness`` metric."""
    form: FormRules | None = None
    """Form rules of this case, overriding the config's ``form:`` key by key; None: the config's."""
    must_pass: bool | None = None
    """A must-pass case (``must_pass: true``): a certain flip from passed on base to failed on head blocks the merge
    whatever the statistics say. None: the config's default (``must_pass.out_of_domain`` for out-of-domain cases,
    false for in-domain ones)."""
    line: int = 0
    """1-based line number in the golden file (for error messages)."""

    def to_dict(self) -> dict[str, Any]:
        """The case as the JSON object a pipeline receives (without the line number)."""
        out: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "expected_doc_ids": list(self.expected_doc_ids),
            "reference_answers": list(self.reference_answers),
            "out_of_domain": self.out_of_domain,
            "tags": list(self.tags),
        }
        if self.criteria is not None:
            out["criteria"] = self.criteria
        if self.cluster is not None:
            out["cluster"] = self.cluster
        if self.required_points:
            out["required_points"] = list(self.required_points)
        if self.form is not None:
            out["form"] = self.form.to_dict()
        if self.must_pass is not None:
            out["must_pass"] = self.must_pass
        return out


@dataclass(frozen=True)
class Chunk:
    """One retrieved chunk, in rank order within ``Prediction.retrieved``."""

    id: str
    """Document (or chunk) id, compared with ``GoldenCase.expected_doc_ids``."""
    text: str = ""
    """The chunk text given to the generator (the judge's evidence)."""
    score: float | None = None
    """Retriever score, if the pipeline reports one."""


CHUNK_ID = operator.attrgetter("id")
"""The id of a :class:`Chunk` (a C-level getter, for mapping over many chunks)."""


@dataclass(frozen=True)
class Prediction:
    """One answer of the pipeline for one case and one repeat (one line of ``predictions.jsonl``)."""

    id: str
    """Golden case id."""
    repeat: int = 0
    """0-based repeat index; retries of a failed call never count as extra repeats."""
    answer: str = ""
    """The generated answer."""
    retrieved: tuple[Chunk, ...] = ()
    """Retrieved chunks, rank 1 first."""
    latency_ms: float | None = None
    """Wall-clock milliseconds for the case, ≥ 0 (measured by the adapter when the pipeline does not say)."""
    warmup_ms: float | None = None
    """Wall-clock milliseconds of a worker's first call (cold start: lazy imports, index loading), recorded apart:
    ``latency_ms`` is then None, so a cold start never counts as latency."""
    cost_usd: float | None = None
    """Cost of the call in US dollars, ≥ 0, if known."""
    tokens: int | None = None
    """Tokens used, if known."""
    refused: bool | None = None
    """Explicit refusal flag from the pipeline; None means "detect from the answer text"."""
    error: str | None = None
    """Why the case failed (crash, timeout); a failed case is a row with ``error``, never a missing row."""
    line: int = 0
    """1-based line number in the predictions file (for error messages)."""

    @property
    def retrieved_ids(self) -> list[str]:
        """Ids of the retrieved chunks, rank 1 first."""
        return list(map(CHUNK_ID, self.retrieved))

    def to_dict(self) -> dict[str, Any]:
        """The prediction as the JSON object written to ``predictions.jsonl``."""
        out: dict[str, Any] = {
            "id": self.id,
            "repeat": self.repeat,
            "answer": self.answer,
            "retrieved": [
                {"id": c.id, "text": c.text, **({"score": c.score} if c.score is not None else {})}
                for c in self.retrieved
            ],
            "latency_ms": self.latency_ms,
        }
        for key in ("warmup_ms", "cost_usd", "tokens", "refused", "error"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


PREDICTION_FAILED = "prediction failed: "
"""How the ``error`` of a score row begins when its prediction failed (a system error, counted by ``error_rate``),
as opposed to a failure to score an answer (a judge failure)."""


@dataclass(frozen=True)
class Score:
    """One metric value for one case and one repeat (one line of ``scores.jsonl``).

    ``value`` is a float, or NaN when the metric does not apply (e.g. retrieval metrics on an out-of-domain
    case). A failure to score (judge error) has ``error`` set and NaN value: it is counted as a failure,
    never averaged as a score. In JSON, NaN is written as ``null``.
    """

    id: str
    """Golden case id."""
    repeat: int
    """0-based repeat index."""
    metric: str
    """Concrete metric name, e.g. ``"hit_rate@5"``."""
    value: float
    """The metric's value for the case (in the metric's range), or NaN (not applicable, or failed)."""
    error: str | None = None
    """Why the case could not be scored (failed prediction, judge failure); None for a score."""
    detail: dict[str, Any] | None = field(default=None, compare=False)
    """Judge output kept with one judged metric's row (claims, verdicts, chunks; see ``Judgment.to_dict``)."""

    @property
    def valid(self) -> bool:
        """True when the value is a real number (neither NaN nor a failure)."""
        return self.error is None and not math.isnan(self.value)

    def to_dict(self) -> dict[str, Any]:
        """The score as written to ``scores.jsonl`` (NaN → null)."""
        out: dict[str, Any] = {
            "id": self.id,
            "repeat": self.repeat,
            "metric": self.metric,
            "value": None if math.isnan(self.value) else self.value,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.detail is not None:
            out["detail"] = self.detail
        return out
