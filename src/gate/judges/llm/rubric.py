"""The rubric judge (backend ``llm``): one prompt grades the five generation dimensions on a 1–3 scale, JSON answer.

An OpenAI-compatible model grades the whole answer (no claims) on faithfulness, answer relevance, correctness,
completeness and form, each 1–3 with a one-line reason, in one call. ``Judgment.score = (faithfulness − 1) / 2``
maps 1, 2, 3 to 0, 0.5, 1; ``Judgment.grades`` holds the other four on the same mapping (correctness NaN when the
case has neither reference answers nor criteria); ``extra`` the raw grades and the reasons. The golden case
(reference answers, ``criteria``, ``required_points``) and its form rules are part of the prompt. The rubric
penalises needless length and gives the best out-of-domain grades only to an explicit "I don't have that
information". Model and temperature are pinned (part of ``identity``); the judge model should differ from
the generator (self-preference bias: Panickssery et al. 2024, arXiv:2404.13076), so naming the same model for both
warns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jsonschema

from gate.judges.base import CLAIM_DIMENSIONS, DIMENSIONS, Judgment
from gate.judges.llm.client import EndpointJudge
from gate.judges.llm.parse import extract_json
from gate.judges.llm.retry import JudgeCallError
from gate.models import Chunk, FormRules, GoldenCase

PROMPT_VERSION = "rubric-v2"
"""Bumped whenever the prompt changes (part of the cache key and of the judge's identity)."""

VERSION = "rubric-v2+final-json"
"""The judge's version: the prompt and how its answer is read (bumped when either changes)."""

SYSTEM_PROMPT = (
    "You are a strict evaluator of answers written by a retrieval-augmented assistant. "
    "You grade faithfulness only against the context passages given, never against your own knowledge. "
    "Reply with one JSON object and nothing else."
)

RUBRIC = """Grade the ANSWER to the QUESTION on five dimensions, each 1-3.

faithfulness: is every statement of the answer supported by the CONTEXT?
  3 = every statement is supported by the context
  2 = mostly supported, but at least one detail is not in the context
  1 = a main statement is not in the context or contradicts it
answer_relevance: does the answer address the question directly and concisely?
  3 = answers the question directly, without needless length, repetition or padding
  2 = answers the question, but with needless length, repetition or off-topic material
  1 = does not answer the question
correctness: does the answer agree with the REFERENCE ANSWERS (any one is correct; a paraphrase counts) or
meet the CRITERIA?
  3 = correct   2 = partly correct or imprecise   1 = wrong, or contradicts them
  null = neither reference answers nor criteria are given
completeness: does the answer make every REQUIRED POINT (without them: what the reference answers or criteria
ask for; without those: every part of the question)?
  3 = all of them   2 = some are missing   1 = the main one is missing
form: does the answer follow the FORM RULES (language, tone, format, length, citations)? Without rules: is it
clear and well-formed (no leftover markup, no broken sentences)?
  3 = follows them   2 = a minor breach   1 = breaks a rule

When the context does not contain the answer, the only correct answer is an explicit refusal such as
"I don't have that information": grade such a refusal 3 on every dimension. An answer that guesses, hedges or
answers from general knowledge instead of refusing gets faithfulness 1. A refusal when the context does contain
the answer gets answer_relevance 1.

Reply with exactly this JSON object, each reason on one line:
{{"faithfulness": <1|2|3>, "answer_relevance": <1|2|3>, "correctness": <1|2|3|null>, "completeness": <1|2|3>,
"form": <1|2|3>, "reasons": {{"faithfulness": "<one line>", "answer_relevance": "<one line>",
"correctness": "<one line>", "completeness": "<one line>", "form": "<one line>"}}}}

<question>
{question}
</question>

<context>
{context}
</context>
{expectations}
<answer>
{answer}
</answer>"""


def expectations_prompt(case: GoldenCase | None, form: FormRules | None) -> str:
    """The optional prompt sections of an LLM judge: reference answers, criteria, required points and form rules.

    Each section is present only when the case (or the rules) has it, as ``<reference_answers>``, ``<criteria>``,
    ``<required_points>`` and ``<form_rules>`` blocks; "" when there is none.
    """
    parts = []
    if case is not None and case.reference_answers:
        refs = "\n".join(f"- {r}" for r in case.reference_answers)
        parts.append(f"<reference_answers>\n{refs}\n</reference_answers>")
    if case is not None and case.criteria:
        parts.append(f"<criteria>\n{case.criteria}\n</criteria>")
    if case is not None and case.required_points:
        points = "\n".join(f"- {p}" for p in case.required_points)
        parts.append(f"<required_points>\n{points}\n</required_points>")
    rules = []
    if form is not None and form.max_words is not None:
        rules.append(f"- at most {form.max_words} words")
    if form is not None and form.cite:
        rules.append("- cite the id of a context passage it relies on, e.g. [doc-1]")
    if form is not None and form.rules:
        rules.append(f"- {form.rules}")
    if rules:
        parts.append("<form_rules>\n" + "\n".join(rules) + "\n</form_rules>")
    return "".join(f"\n{part}\n" for part in parts)


def context_prompt(chunks: Sequence[Chunk]) -> str:
    """Retrieved chunks for an LLM judge's prompt, rank 1 first; "(no context retrieved)" without chunks.

    Each chunk is ``[rank] (id: …)`` then its text, with blank lines between chunks.
    """
    return "\n\n".join(f"[{i}] (id: {c.id})\n{c.text}" for i, c in enumerate(chunks, 1)) or "(no context retrieved)"


def build_messages(
    question: str,
    answer: str,
    chunks: Sequence[Chunk],
    case: GoldenCase | None = None,
    form: FormRules | None = None,
) -> list[dict[str, str]]:
    """Build the chat messages of the rubric prompt, chunks numbered in rank order with their ids.

    Args:
        question: the user question.
        answer: the answer to grade.
        chunks: retrieved chunks, rank 1 first (may be empty: "(no context retrieved)").
        case: the golden case: its reference answers, criteria and required points are given to the judge.
        form: the form rules that apply to the case (word limit, citation, free-text rules).

    """
    user = RUBRIC.format(
        question=question,
        context=context_prompt(chunks),
        expectations=expectations_prompt(case, form),
        answer=answer,
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


_GRADE = {"enum": [1, 2, 3, "1", "2", "3"]}

GRADES_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["faithfulness"],
    "properties": {
        **{name: _GRADE for name in DIMENSIONS},
        "relevance": _GRADE,
        "correctness": {"enum": [*_GRADE["enum"], None]},
        "reasons": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
"""JSON Schema of the rubric's answer: each grade 1, 2 or 3 (3.0 and "3" accepted, true not; correctness may be
null); ``reasons`` optional, one text per dimension; other keys ignored. Faithfulness is required; a dimension the
answer leaves out is a judge failure of that dimension's metric only (see :func:`parse_grades`), and ``relevance``
(the first rubric's key) is read as ``answer_relevance``."""
LEGACY_KEYS = {"relevance": "answer_relevance"}
"""Keys of the first (two-dimension) rubric, read as today's dimension names."""

_GRADES = jsonschema.Draft202012Validator(GRADES_SCHEMA)


def parse_grades(text: str) -> tuple[dict[str, int | None], dict[str, str]]:
    """Parse the five grades and their reasons from the model's final JSON answer.

    The final answer is the last JSON object after any reasoning block
    (:func:`gate.judges.llm.parse.extract_json`): a ``<think>`` draft or a restated format example before it is
    never read. That object must match :data:`GRADES_SCHEMA`; nothing else is tried.

    Returns:
        ``({dimension: grade in {1, 2, 3} or None}, {dimension: one-line reason})``, dimensions in
        :data:`gate.judges.base.DIMENSIONS` order; a dimension or a reason the model did not give is absent.

    Raises:
        ValueError: when no JSON object follows the reasoning, or the final one does not match the schema (the
            message names the field).

    """
    obj = extract_json(text)
    error = jsonschema.exceptions.best_match(_GRADES.iter_errors(obj))
    if error is not None:
        where = f"field {error.path[0]!r}: " if error.path else ""
        raise ValueError(f"final JSON answer does not match the rubric: {where}{error.message}")
    for legacy, name in LEGACY_KEYS.items():
        if legacy in obj and name not in obj:
            obj[name] = obj[legacy]
    grades = {name: None if obj[name] is None else int(float(obj[name])) for name in DIMENSIONS if name in obj}
    reasons = {name: " ".join(r.split()) for name, r in obj.get("reasons", {}).items() if name in DIMENSIONS}
    return grades, reasons


def to_unit(grade: int | None) -> float:
    """Map a 1–3 grade to [0, 1]: (grade − 1) / 2, so 1 → 0, 2 → 0.5, 3 → 1; None → NaN."""
    return math.nan if grade is None else (grade - 1) / 2


class RubricJudge(EndpointJudge):
    """Rubric judge over an OpenAI-compatible endpoint (``judge: {name: llm, model: ...}``): all five dimensions.

    All options are keyword-only and validated here.

    Args:
        **endpoint: the :class:`~gate.judges.llm.config.EndpointConfig` fields: ``model`` (required, pinned),
            ``base_url``, ``api_key_env``, ``temperature``, ``max_tokens`` (512 here: five grades and reasons),
            ``timeout_s``, ``max_retries``, ``backoff_s``, ``max_wait_s``, ``concurrency``, ``deadline_s``,
            ``max_consecutive_failures``, ``cost_per_1k_input``, ``cost_per_1k_output``.
        cache_dir: answer cache directory; None uses :func:`gate.judges.llm.cache.default_cache_dir`,
            False turns the cache off.
        generator_model: the model that wrote the answers, if known; the same name as ``model`` warns.
        environ: where the API key is read (``os.environ`` when None).

    Raises:
        ValueError: on an invalid option or a missing API key for OpenAI's endpoint.

    Source: single-answer grading with an LLM judge, Zheng et al. 2023, "Judging LLM-as-a-Judge with MT-Bench
    and Chatbot Arena", arXiv:2306.05685.

    """

    backend = "llm"
    dimensions = CLAIM_DIMENSIONS | frozenset(DIMENSIONS)
    """It grades every generation dimension (and gives the hallucination rate: a faithfulness grade below 3)."""
    reads_case = True
    """``judge`` takes the golden case and its form rules (reference answers, criteria, required points)."""

    version = VERSION
    prompt_version = PROMPT_VERSION
    default_max_tokens = 512
    role = "judge"

    def judge(
        self,
        question: str,
        answer: str,
        chunks: Sequence[Chunk],
        *,
        repeat: int = 0,
        case: GoldenCase | None = None,
        form: FormRules | None = None,
    ) -> Judgment:
        """Grade ``answer`` against ``chunks`` (and the case's expectations); never raises for a judge failure.

        Args:
            question: the user question.
            answer: the answer to grade; an empty answer is not graded (NaN scores, no error).
            chunks: retrieved chunks, rank 1 first.
            repeat: 0-based repeat index (part of the cache key).
            case: the golden case (reference answers, criteria, required points); None: none given.
            form: the form rules that apply to the case; None: none.

        Returns:
            ``Judgment(score=(faithfulness − 1) / 2, grades={"answer_relevance", "correctness", "completeness",
            "form"}, extra={"grades": raw 1–3, "reasons": one line each})``, every value in {0, 0.5, 1}, correctness
            NaN without reference answers and criteria; or ``Judgment(error=reason)`` when the endpoint fails after
            retries, the answer is truncated, its final JSON does not match :data:`GRADES_SCHEMA`, the circuit is
            open or the judge's deadline has passed.

        Raises:
            JudgeConfigError: the endpoint rejected the configuration (HTTP 401 / 403 / 404, unknown model):
                the run must stop (exit code 3).

        """
        if not answer.strip():
            return Judgment(extra={"reason": "empty answer: nothing to grade"})
        messages = build_messages(question, answer, chunks, case, form)
        try:
            grades, reasons = self.client.complete(
                messages, judge=self.backend, prompt_version=PROMPT_VERSION, parse=parse_grades, repeat=repeat
            )
        except JudgeCallError as exc:
            return Judgment(error=f"{self.id}: {exc}")
        if case is None or not (case.reference_answers or case.criteria):
            grades["correctness"] = None  # nothing to be correct against
        ungraded = tuple(name for name in DIMENSIONS if name not in grades)
        units = {name: to_unit(grade) for name, grade in grades.items() if name != "faithfulness"}
        extra = {"grades": grades, "reasons": reasons, **({"ungraded": list(ungraded)} if ungraded else {})}
        return Judgment(score=to_unit(grades["faithfulness"]), grades=units, extra=extra)
