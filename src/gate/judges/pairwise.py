"""The pairwise judge (``pairwise:``): which of two answers to the same question is better, asked in both orders.

For each case the judge sees base's and head's answers (each with the chunks it retrieved, and the case's
reference answers, criteria, required points and form rules) and names the better one, or a tie. LLM judges
favour the answer shown first (or second) regardless of content (position bias: Zheng et al. 2023,
arXiv:2306.05685 §3.3; Wang et al. 2023, arXiv:2305.17926), so every pair is asked twice, base first then head
first: an answer wins only when it is preferred in both orders; a split (or a tie in either order) is a tie
(Zheng et al. 2023, "conservative" swap rule). Two calls per case; identical answers are a tie without a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema

from gate.judges.llm.client import EndpointJudge
from gate.judges.llm.parse import extract_json
from gate.judges.llm.retry import JudgeCallError
from gate.judges.llm.rubric import context_prompt, expectations_prompt
from gate.models import Chunk, FormRules, GoldenCase

PROMPT_VERSION = "pairwise-v1"
"""Bumped whenever the prompt changes (part of the cache key and of the judge's identity)."""

VERSION = "pairwise-v1+final-json+both-orders"
"""The judge's version: the prompt, how its answer is read and how the two orders combine."""

Choice = Literal["base", "head", "tie"]
"""Which answer one call preferred, in base / head terms."""
Outcome = Literal["win", "tie", "loss"]
"""Head's result on a case: preferred in both orders (win), base preferred in both (loss), else a tie."""

SYSTEM_PROMPT = (
    "You are a strict evaluator comparing two answers written by retrieval-augmented assistants. "
    "You judge each answer's faithfulness only against its own context passages, never against your own "
    "knowledge. Reply with one JSON object and nothing else."
)

PROMPT = """Two assistants answered the same QUESTION, each from the context passages it retrieved. Which ANSWER is
better?

The better answer is supported by its own context (no invented or contradicted facts), is correct (agrees with
the reference answers or meets the criteria, when given), answers the question directly and completely, and
follows the form rules, when given. When its context does not contain the answer, an explicit refusal such as
"I don't have that information" is the best answer. Do not prefer an answer for its length, its style or its
position. When neither is better, say "tie".

Reply with exactly this JSON object, the reason on one line:
{{"better": "A" | "B" | "tie", "reason": "<one line>"}}

<question>
{question}
</question>
{expectations}
<assistant_a>
<context>
{context_a}
</context>
<answer>
{answer_a}
</answer>
</assistant_a>

<assistant_b>
<context>
{context_b}
</context>
<answer>
{answer_b}
</answer>
</assistant_b>"""

PREFERENCE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["better"],
    "properties": {"better": {"enum": ["A", "B", "tie", "a", "b", "TIE", "Tie"]}, "reason": {"type": "string"}},
}
"""JSON Schema of one answer of the judge: ``better`` is A, B or tie (any case); ``reason`` optional text."""

_PREFERENCE = jsonschema.Draft202012Validator(PREFERENCE_SCHEMA)


def build_messages(
    question: str,
    first: tuple[str, Sequence[Chunk]],
    second: tuple[str, Sequence[Chunk]],
    case: GoldenCase | None = None,
    form: FormRules | None = None,
) -> list[dict[str, str]]:
    """The chat messages asking which of two answers is better; ``first`` is shown as A, ``second`` as B.

    Args:
        question: the user question.
        first: (answer, its retrieved chunks in rank order), shown first (A).
        second: the other answer and its chunks, shown second (B).
        case: the golden case (reference answers, criteria, required points), if any.
        form: the form rules that apply to the case, if any.

    """
    user = PROMPT.format(
        question=question,
        expectations=expectations_prompt(case, form),
        context_a=context_prompt(first[1]),
        answer_a=first[0],
        context_b=context_prompt(second[1]),
        answer_b=second[0],
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_preference(text: str) -> tuple[Literal["A", "B", "tie"], str]:
    """Read ``(better, reason)`` from the model's final JSON answer (the last object after any reasoning).

    Raises:
        ValueError: no JSON object follows the reasoning, or it does not match :data:`PREFERENCE_SCHEMA`.

    """
    obj = extract_json(text)
    error = jsonschema.exceptions.best_match(_PREFERENCE.iter_errors(obj))
    if error is not None:
        where = f"field {error.path[0]!r}: " if error.path else ""
        raise ValueError(f"final JSON answer does not match the pairwise format: {where}{error.message}")
    better = obj["better"]
    choice: Literal["A", "B", "tie"] = "tie" if better.lower() == "tie" else better.upper()
    return choice, " ".join(obj.get("reason", "").split())


def combine_orders(base_first: Choice, head_first: Choice) -> Outcome:
    """Head's outcome on a case from the judge's choices in the two orders.

    Args:
        base_first: the choice when base's answer was shown first (A), in base / head terms.
        head_first: the choice when head's answer was shown first.

    Returns:
        ``win`` when head is preferred in both orders, ``loss`` when base is, else ``tie`` (the orders disagree,
        or either call said tie): a judge that always picks the first answer produces ties, never wins.

    Source: Zheng et al., "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", NeurIPS 2023,
        arXiv:2306.05685, §3.3 (swap positions; declare a win only when preferred in both orders).

    """
    if base_first == head_first and base_first != "tie":
        return "win" if base_first == "head" else "loss"
    return "tie"


@dataclass(frozen=True)
class PairJudgment:
    """The pairwise judge's verdict on one case (two calls, one per order)."""

    outcome: Outcome | None
    """Head's outcome; None when the judge failed (``error``)."""
    base_first: Choice | None
    """The choice with base's answer shown first; None without a call (identical answers) or on failure."""
    head_first: Choice | None
    """The choice with head's answer shown first."""
    reason_base_first: str = ""
    """The judge's one-line reason in the base-first order."""
    reason_head_first: str = ""
    """The judge's one-line reason in the head-first order."""
    identical: bool = False
    """Both answers are the same text: a tie, no call made."""
    error: str | None = None
    """Why the judge could not decide (a failed call in either order)."""


class PairwiseJudge(EndpointJudge):
    """Pairwise judge over an OpenAI-compatible endpoint (``pairwise: {model: ...}``): two calls per case.

    Args:
        **endpoint: the :class:`~gate.judges.llm.config.EndpointConfig` fields: ``model`` (required, pinned),
            ``base_url``, ``api_key_env``, ``temperature``, ``max_tokens`` (256 here), ``timeout_s``,
            ``max_retries``, ``backoff_s``, ``max_wait_s``, ``concurrency``, ``deadline_s``,
            ``max_consecutive_failures``, ``cost_per_1k_input``, ``cost_per_1k_output``.
        cache_dir: answer cache directory; None uses :func:`gate.judges.llm.cache.default_cache_dir`,
            False turns the cache off.
        generator_model: the model that wrote the answers, if known; the same name as ``model`` warns.
        environ: where the API key is read (``os.environ`` when None).

    Raises:
        ValueError: on an invalid option or a missing API key for OpenAI's endpoint.

    Source: pairwise comparison with position swap, Zheng et al. 2023, arXiv:2306.05685.

    """

    backend = "pairwise"

    version = VERSION
    prompt_version = PROMPT_VERSION
    default_max_tokens = 256
    role = "pairwise judge"

    def prefer(
        self,
        question: str,
        first: tuple[str, Sequence[Chunk]],
        second: tuple[str, Sequence[Chunk]],
        *,
        repeat: int = 0,
        case: GoldenCase | None = None,
        form: FormRules | None = None,
    ) -> tuple[Literal["A", "B", "tie"], str]:
        """One call: is the first (A) or the second (B) answer better, or neither?

        Raises:
            JudgeCallError: the call failed (retries spent, unusable answer, circuit open, deadline).
            JudgeConfigError: the endpoint rejected the configuration (the run must stop).

        """
        messages = build_messages(question, first, second, case, form)
        return self.client.complete(
            messages, judge=self.backend, prompt_version=PROMPT_VERSION, parse=parse_preference, repeat=repeat
        )

    def compare(
        self,
        question: str,
        base: tuple[str, Sequence[Chunk]],
        head: tuple[str, Sequence[Chunk]],
        *,
        case: GoldenCase | None = None,
        form: FormRules | None = None,
        repeat: int = 0,
    ) -> PairJudgment:
        """Judge base's answer against head's in both orders; never raises for a judge failure.

        Args:
            question: the user question.
            base: (base's answer, the chunks it retrieved, rank order).
            head: (head's answer, its chunks).
            case: the golden case (reference answers, criteria, required points).
            form: the form rules that apply to the case.
            repeat: 0-based index (part of the cache key).

        Returns:
            The :class:`PairJudgment`: a tie without a call when the two answers are the same text; ``outcome``
            None with ``error`` when either call failed.

        Raises:
            JudgeConfigError: the endpoint rejected the configuration (HTTP 401 / 403 / 404, unknown model).

        """
        if base[0] == head[0]:
            return PairJudgment("tie", None, None, identical=True)
        kw = {"repeat": repeat, "case": case, "form": form}
        try:
            first, reason_1 = self.prefer(question, base, head, **kw)
            second, reason_2 = self.prefer(question, head, base, **kw)
        except JudgeCallError as exc:
            return PairJudgment(None, None, None, error=f"{self.id}: {exc}")
        base_first: Choice = {"A": "base", "B": "head", "tie": "tie"}[first]
        head_first: Choice = {"A": "head", "B": "base", "tie": "tie"}[second]
        return PairJudgment(combine_orders(base_first, head_first), base_first, head_first, reason_1, reason_2)
