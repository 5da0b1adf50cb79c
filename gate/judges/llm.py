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
"""Bumped whenever the prompt or the parsing changes (part of the cache key and of the judge version)."""

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


def parse_grades(text: str) -> tuple[int, int, str]:
    """Parse ``(faithfulness, relevance, reason)`` from the model's answer, each grade in {1, 2, 3}.

    Raises:
        ValueError: when no JSON object is found, a grade is missing or outside 1–3, or reason is not text.

    """
    obj = extract_json(text)
    grades = []
    for name in ("faithfulness", "relevance"):
        value = obj.get(name)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value not in (1, 2, 3):
            raise ValueError(f"field {name!r} must be 1, 2 or 3, got {value!r}")
        grades.append(value)
    reason = obj.get("reason", "")
    if not isinstance(reason, str):
        raise ValueError(f"field 'reason' must be a string, got {type(reason).__name__}")
    return grades[0], grades[1], " ".join(reason.split())


def to_unit(grade: int) -> float:
    """Map a 1–3 grade to [0, 1]: (grade − 1) / 2, so 1 → 0, 2 → 0.5, 3 → 1."""
    return (grade - 1) / 2


class RubricJudge:
    """Rubric judge over an OpenAI-compatible endpoint (``judge: {name: llm, model: ...}``).

    All options are keyword-only and validated here.

    Args:
        **endpoint: the :class:`~gate.judges.llmclient.EndpointConfig` fields: ``model`` (required, pinned),
            ``base_url``, ``api_key_env``, ``temperature``, ``max_tokens`` (256 here), ``timeout_s``,
            ``max_retries``, ``backoff_s``, ``max_wait_s``, ``concurrency``.
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
        self.version = PROMPT_VERSION
        self.warnings: list[str] = []
        if generator_model is not None and generator_model.strip().lower() == self.config.model.strip().lower():
            message = (
                f"the judge model {self.config.model!r} is also the generator: LLM judges favour their own answers; "
                "use a different judge model"
            )
            self.warnings.append(message)
            warnings.warn(message, UserWarning, stacklevel=2)

    def describe(self) -> str:
        """Return the pinned settings on one line: ``llm rubric-v1 model=... temperature=... ...``."""
        return f"llm {PROMPT_VERSION} {self.config.describe()}"

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
            truncated or the JSON is unusable.

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
