"""A model's **final** answer: reasoning blocks dropped, the last JSON object taken.

:func:`extract_json` reads the answer: reasoning blocks (``<think>…</think>`` and similar) are dropped and the
last JSON object is taken, never an earlier draft or format example.
"""

from __future__ import annotations

import json
import re
from typing import Any


def one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line (whitespace runs as one space), cut to ``limit`` characters with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


REASONING_BLOCK = re.compile(
    r"<(think|thinking|reasoning|reflection|analysis|scratchpad)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE
)
"""A closed reasoning block (``<think>…</think>``, ``<thinking>``, ``<reasoning>``, ``<reflection>`` ...)."""

_OPEN_REASONING = re.compile(r"<(think|thinking|reasoning|reflection|analysis|scratchpad)\b[^>]*>", re.IGNORECASE)
_CLOSE_REASONING = re.compile(r"</(think|thinking|reasoning|reflection|analysis|scratchpad)\s*>", re.IGNORECASE)
_FINAL_CHANNEL = re.compile(r"<\|channel\|>\s*final\s*<\|message\|>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Return the final answer of a model's message, without its reasoning.

    Drops closed reasoning blocks (:data:`REASONING_BLOCK`); everything up to a closing tag left without its
    opening one (chat templates that put ``<think>`` in the prompt); and keeps only what follows a harmony
    ``<|channel|>final<|message|>`` marker when there is one.

    Raises:
        ValueError: when a reasoning block is opened and never closed (the answer was cut inside it).

    """
    finals = list(_FINAL_CHANNEL.finditer(text))
    if finals:
        text = text[finals[-1].end() :]
    text = REASONING_BLOCK.sub(" ", text)
    closers = list(_CLOSE_REASONING.finditer(text))
    if closers:
        text = text[closers[-1].end() :]
    opened = _OPEN_REASONING.search(text)
    if opened:
        raise ValueError(f"reasoning block <{opened.group(1)}> is never closed: no final answer after it")
    return text


def json_objects(text: str) -> list[tuple[int, dict[str, Any]]]:
    """Return the top-level JSON objects in ``text`` with their start offsets, in order.

    Objects nested inside another decoded object are not listed separately; text that does not decode
    (prose braces, a cut object) is skipped.
    """
    decoder = json.JSONDecoder()
    found, position = [], 0
    while (start := text.find("{", position)) != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        if isinstance(obj, dict):
            found.append((start, obj))
        position = end
    return found


def extract_json(text: str) -> dict[str, Any]:
    """Return the model's final JSON object: the last one after its reasoning, fenced or not.

    Reasoning blocks are removed first (:func:`strip_reasoning`); of the JSON objects left, the last one is
    the answer, so a draft, a restated format example or an earlier attempt is never taken. A code fence needs
    no special rule: its object is found like any other. Validating the object against the judge's schema is
    the caller's job.

    Args:
        text: the model's message content.

    Returns:
        The decoded object.

    Raises:
        ValueError: when a reasoning block is never closed, or no JSON object follows the reasoning.

    """
    found = json_objects(strip_reasoning(text))
    if not found:
        raise ValueError(f"no JSON object in the model's answer: {one_line(text, 120)!r}")
    return found[-1][1]


def final_answer(content: str) -> str:
    """``content`` reduced to its final JSON object (compact JSON text), when it has one; else ``content`` as is.

    The object is :func:`extract_json`'s (after any reasoning). Content whose reasoning is never closed, or without
    a JSON object, is returned unchanged: the caller's parser reports it.
    """
    try:
        found = json_objects(strip_reasoning(content))
    except ValueError:
        return content
    return json.dumps(found[-1][1], ensure_ascii=False) if found else content


def keep_final_answer(response: Any) -> None:
    """Reduce the first choice's message content to its final JSON object (:func:`final_answer`), in place."""
    choices = getattr(response, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    content = getattr(message, "content", None)
    if message is None or not isinstance(content, str):
        return
    reduced = final_answer(content)
    if reduced is not content:
        message.content = reduced
