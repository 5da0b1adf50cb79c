"""The rubric judge (backend ``llm``): one prompt, faithfulness and relevance on a 1–3 scale, JSON answer.

An OpenAI-compatible model grades the whole answer (no claims): ``Judgment.score = (faithfulness − 1) / 2``
maps 1, 2, 3 to 0, 0.5, 1, and ``extra`` carries the relevance on the same mapping, the raw 1–3 grades and the
model's one-line reason. The rubric penalises needless length and gives the best out-of-domain grades only to
an explicit "I don't have that information". Model and temperature are pinned and printed (``describe()``);
the judge model should differ from the generator (self-preference bias: Panickssery et al. 2024,
arXiv:2404.13076), so naming the same model for both warns.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema

from gate.judges.base import Judgment
from gate.judges.llmclient import (
    ChatClient,
    EndpointConfig,
    JudgeCallError,
    extract_json,
    make_cache,
)
from gate.models import Chunk

PROMPT_VERSION = "rubric-v1"
"""Bumped whenever the prompt changes (part of the cache key and of the judge's identity)."""

VERSION = "rubric-v1+final-json"
"""The judge's version: the prompt and how its answer is read (bumped when either changes)."""

SYSTEM_PROMPT = (
    "You are a strict evaluator of answers written by a retrieval-augmented assistant. "
    "You grade only against the context passages given, never against your own knowledge. "
    "Reply with one JSON object and nothing else."
)

RUBRIC = """Grade the ANSWER to the QUESTION using only the CONTEXT passages.

faithfulness (1-3): is every statement of the answer supported by the context?
  3 = every statement is supported by the context
  2 = mostly supported, but at least one detail is not in the context
  1 = a main statement is not in the context or contradicts it
relevance (1-3): does the answer address the question directly and concisely?
  3 = answers the question directly, without needless length, repetition or padding
  2 = answers the question, but with needless length, repetition or off-topic material
  1 = does not answer the question

When the context does not contain the answer, the only correct answer is an explicit refusal such as
"I don't have that information": grade such a refusal 3 and 3. An answer that guesses, hedges or answers from
general knowledge instead of refusing gets faithfulness 1. A refusal when the context does contain the answer
gets relevance 1.

Reply with exactly this JSON object, the reason on one line:
{{"faithfulness": <1|2|3>, "relevance": <1|2|3>, "reason": "<one line>"}}

<question>
{question}
</question>

<context>
{context}
</context>

<answer>
{answer}
</answer>"""


def build_messages(question: str, answer: str, chunks: Sequence[Chunk]) -> list[dict[str, str]]:
    """Build the chat messages of the rubric prompt, chunks numbered in rank order with their ids.

    Args:
        question: the user question.
        answer: the answer to grade.
        chunks: retrieved chunks, rank 1 first (may be empty: "(no context retrieved)").

    """
    context = "\n\n".join(f"[{i}] (id: {c.id})\n{c.text}" for i, c in enumerate(chunks, 1))
    user = RUBRIC.format(question=question, context=context or "(no context retrieved)", answer=answer)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


GRADES_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["faithfulness", "relevance"],
    "properties": {
        "faithfulness": {"enum": [1, 2, 3, "1", "2", "3"]},
        "relevance": {"enum": [1, 2, 3, "1", "2", "3"]},
        "reason": {"type": "string"},
    },
}
"""JSON Schema of the rubric's answer: both grades required, each 1, 2 or 3 (3.0 and "3" accepted, true not);
``reason`` optional text; other keys ignored."""

_GRADES = jsonschema.Draft202012Validator(GRADES_SCHEMA)


def parse_grades(text: str) -> tuple[int, int, str]:
    """Parse ``(faithfulness, relevance, reason)`` from the model's final JSON answer, each grade in {1, 2, 3}.

    The final answer is the last JSON object after any reasoning block
    (:func:`gate.judges.llmclient.extract_json`): a ``<think>`` draft or a restated format example before it is
    never read. That object must match :data:`GRADES_SCHEMA`; nothing else is tried.

    Raises:
        ValueError: when no JSON object follows the reasoning, or the final one does not match the schema (the
            message names the field).

    """
    obj = extract_json(text)
    error = jsonschema.exceptions.best_match(_GRADES.iter_errors(obj))
    if error is not None:
        where = f"field {error.path[0]!r}: " if error.path else ""
        raise ValueError(f"final JSON answer does not match the rubric: {where}{error.message}")
    reason = obj.get("reason", "")
    return int(float(obj["faithfulness"])), int(float(obj["relevance"])), " ".join(reason.split())


def to_unit(grade: int) -> float:
    """Map a 1–3 grade to [0, 1]: (grade − 1) / 2, so 1 → 0, 2 → 0.5, 3 → 1."""
    return (grade - 1) / 2


class RubricJudge:
    """Rubric judge over an OpenAI-compatible endpoint (``judge: {name: llm, model: ...}``).

    All options are keyword-only and validated here.

    Args:
        **endpoint: the :class:`~gate.judges.llmclient.EndpointConfig` fields: ``model`` (required, pinned),
            ``base_url``, ``api_key_env``, ``temperature``, ``max_tokens`` (256 here), ``timeout_s``,
            ``max_retries``, ``backoff_s``, ``max_wait_s``, ``concurrency``, ``deadline_s``,
            ``max_consecutive_failures``, ``cost_per_1k_input``, ``cost_per_1k_output``.
        cache_dir: answer cache directory; None uses :func:`gate.judges.llmclient.default_cache_dir`,
            False turns the cache off.
        generator_model: the model that wrote the answers, if known; the same name as ``model`` warns.
        environ: where the API key is read (``os.environ`` when None).

    Raises:
        ValueError: on an invalid option or a missing API key for OpenAI's endpoint.

    Source: single-answer grading with an LLM judge, Zheng et al. 2023, "Judging LLM-as-a-Judge with MT-Bench
    and Chatbot Arena", arXiv:2306.05685.

    """

    backend = "llm"

    def __init__(
        self,
        *,
        cache_dir: str | os.PathLike[str] | None | bool = None,
        generator_model: str | None = None,
        environ: Mapping[str, str] | None = None,
        **endpoint: Any,
    ) -> None:
        self.config = EndpointConfig(**{"max_tokens": 256, **endpoint})
        self.client = ChatClient(self.config, make_cache(cache_dir), environ)
        self.id = f"llm:{self.config.model}@t{self.config.temperature:g}"
        self.version = VERSION
        self.warnings: list[str] = []
        if generator_model is not None and generator_model.strip().lower() == self.config.model.strip().lower():
            message = (
                f"the judge model {self.config.model!r} is also the generator: LLM judges favour their own answers; "
                "use a different judge model"
            )
            self.warnings.append(message)
            warnings.warn(message, UserWarning, stacklevel=2)

    def describe(self) -> str:
        """Return the pinned settings on one line: ``llm rubric-v1+final-json model=... temperature=... ...``."""
        return f"llm {VERSION} {self.config.describe()}"

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that changes a grade, JSON-ready.

        Name, version, prompt version, model, base_url, temperature and max_tokens.
        """
        return {"name": self.backend, "version": VERSION, "prompt_version": PROMPT_VERSION, **self.config.identity()}

    def close(self) -> None:
        """Release the judge's HTTP connections and event loop (optional: also done when it is collected)."""
        self.client.endpoint.close()

    def usage(self) -> dict[str, Any]:
        """This judge's accounting so far (see :class:`gate.judges.llmclient.CallStats`).

        Requests, retries, failures, cache hits, input / output tokens, estimated cost (USD or None) and
        ``stopped`` (why calls are refused: circuit open, deadline; or None).
        """
        return self.client.endpoint.usage()

    def judge(self, question: str, answer: str, chunks: Sequence[Chunk], *, repeat: int = 0) -> Judgment:
        """Grade ``answer`` against ``chunks``; never raises for a judge failure.

        Args:
            question: the user question.
            answer: the answer to grade; an empty answer is not graded (NaN score, no error).
            chunks: retrieved chunks, rank 1 first.
            repeat: 0-based repeat index (part of the cache key).

        Returns:
            ``Judgment(score=(faithfulness − 1) / 2, extra={"relevance", "reason", "grades"})`` with the score
            in {0, 0.5, 1}; or ``Judgment(error=reason)`` when the endpoint fails after retries, the answer is
            truncated, its final JSON does not match :data:`GRADES_SCHEMA`, the circuit is open or the judge's
            deadline has passed.

        Raises:
            JudgeConfigError: the endpoint rejected the configuration (HTTP 401 / 403 / 404, unknown model):
                the run must stop (exit code 3).

        """
        if not answer.strip():
            return Judgment(extra={"reason": "empty answer: nothing to grade"})
        messages = build_messages(question, answer, chunks)
        try:
            faithfulness, relevance, reason = self.client.complete(
                messages, judge=self.backend, prompt_version=PROMPT_VERSION, parse=parse_grades, repeat=repeat
            )
        except JudgeCallError as exc:
            return Judgment(error=f"{self.id}: {exc}")
        extra: dict[str, Any] = {
            "relevance": to_unit(relevance),
            "reason": reason,
            "grades": {"faithfulness": faithfulness, "relevance": relevance},
        }
        return Judgment(score=to_unit(faithfulness), extra=extra)
