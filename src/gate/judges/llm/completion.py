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


def read_completion(content: bytes, content_type: str = "application/json") -> Completion:
    """Read a ``/chat/completions`` response body (JSON bytes) into a :class:`Completion`.

    As openai's client does: a body that is not JSON raises the :class:`json.JSONDecodeError` of ``json.loads``
    when the ``Content-Type`` says JSON (a body cut short), and is a response without choices otherwise.

    Raises:
        json.JSONDecodeError: a JSON ``Content-Type`` over a body that does not decode.

    """
    try:
        data = _DECODER.decode(content)
    except msgspec.DecodeError:
        try:
            data = json.loads(content)  # UTF-16/32 bodies, which msgspec does not read; else json's own error
        except ValueError:
            if content_type.split(";")[0].strip().endswith("json"):
                raise
            data = None
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
