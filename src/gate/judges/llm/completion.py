"""A chat completion's response body, read for what a judge needs: content, finish reason and token usage.

:func:`read_completion` decodes the body with msgspec (builtins, no model), so that the endpoint's event loop spends
no time building openai's ``ChatCompletion`` for an answer the judge only reads as text; it is as lenient as
openai's ``ChatCompletion`` construction (no field is validated), and a body that is not JSON fails the way openai's
``response.json()`` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec

_DECODER = msgspec.json.Decoder()


@dataclass(frozen=True, slots=True)
class Usage:
    """The API's token counts of one response (``usage``), as the server gave them.

    Counted when they are integers (:meth:`CallStats.add_usage <gate.judges.llm.usage.CallStats.add_usage>`).
    """

    prompt_tokens: Any = None
    """Tokens of the prompt, as the server wrote them (an integer, or anything: then not counted)."""
    completion_tokens: Any = None
    """Tokens of the answer, as the server wrote them."""


@dataclass(frozen=True, slots=True)
class Completion:
    """What a judge reads of one chat completion."""

    has_choice: bool
    """False when the response holds no choice."""
    content: str | None
    """The first choice's message content when it is text, else None."""
    finish_reason: str | None
    """The first choice's finish reason (``"length"``: cut at ``max_tokens``)."""
    usage: Usage | None
    """The token counts, or None when the response has no ``usage``."""


def read_completion(text: str) -> Completion:
    """Read a ``/chat/completions`` response body (JSON text, decoded by openai's client) into a :class:`Completion`.

    A body that is not JSON (cut short, an HTML error page) raises the :class:`json.JSONDecodeError` of
    ``json.loads``, as openai's ``response.json()`` does for a JSON response.

    Raises:
        json.JSONDecodeError: the body does not decode.

    """
    try:
        data = _DECODER.decode(text)
    except msgspec.DecodeError:
        data = json.loads(text)  # json's own error (msgspec's wording differs); also what msgspec refuses
    body = data if isinstance(data, dict) else {}
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    reason = choice.get("finish_reason") if isinstance(choice, dict) else None
    usage = body.get("usage")
    return Completion(
        has_choice=choice is not None,
        content=text if isinstance(text, str) else None,
        finish_reason=reason if isinstance(reason, str) else None,
        usage=Usage(usage.get("prompt_tokens"), usage.get("completion_tokens")) if isinstance(usage, dict) else None,
    )
