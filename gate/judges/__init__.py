"""Claim-level judges behind one interface (DESIGN §3) and the factory that builds one from configuration."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from gate.judges.base import ClaimVerdict, ContradictionLevel, Judge, Judgment, Verdict
from gate.judges.lexical import LexicalJudge


def _lazy(module: str, cls: str, extra: str) -> Callable[..., Judge]:
    """A constructor that imports its backend only when used (ragas and torch are heavy, optional extras)."""

    def construct(**options: Any) -> Judge:
        try:
            backend = importlib.import_module(module)
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            message = f"this judge needs an optional dependency ({exc}): pip install 'rag-gate[{extra}]'"
            raise ValueError(message) from exc
        return getattr(backend, cls)(**options)

    return construct


JUDGES: dict[str, Callable[..., Judge]] = {
    "lexical": LexicalJudge,
    "llm": _lazy("gate.judges.llm", "RubricJudge", "llm"),
    "ragas": _lazy("gate.judges.ragas_judge", "RagasJudge", "ragas"),
    "nli": _lazy("gate.judges.nli", "NLIJudge", "nli"),
}
"""Judge name (the ``name`` key of the ``judge:`` configuration) → constructor taking the other keys."""


def get_judge(spec: Mapping[str, Any]) -> Judge:
    """Build the judge that ``spec`` names, e.g. ``{"name": "lexical", "support": 0.8}``.

    Args:
        spec: ``name`` (one of ``sorted(JUDGES)``) plus that judge's options as keyword arguments.

    Returns:
        A judge instance (safe to share across threads).

    Raises:
        ValueError: the name is missing or unknown (the message lists the known names), or an option is
            unknown or out of range.

    """
    options = dict(spec)
    name = options.pop("name", None)
    if name not in JUDGES:
        raise ValueError(f"unknown judge {name!r}; known judges: {', '.join(sorted(JUDGES))}")
    try:
        return JUDGES[name](**options)
    except TypeError as exc:  # unexpected keyword argument
        raise ValueError(f"judge {name!r}: {exc}") from exc


__all__ = [
    "JUDGES",
    "ClaimVerdict",
    "ContradictionLevel",
    "Judge",
    "Judgment",
    "LexicalJudge",
    "Verdict",
    "get_judge",
]
