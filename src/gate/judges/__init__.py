"""Claim-level judges behind one interface (DESIGN §3) and the registry that builds one from configuration.

Each backend's registry entry (:class:`JudgeBackend`) declares the options it accepts as JSON Schema, so that
the config loader checks a ``judge:`` mapping (names, types, ranges, with ``file:line``) without importing the
backend: the ``llm``, ``ragas`` and ``nli`` backends need optional extras (openai, ragas, torch) and the lexical
one scikit-learn. The backend class is imported when a judge is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gate.judges.base import ClaimVerdict, ContradictionLevel, Judge, Judgment, Verdict, judge_usage

if TYPE_CHECKING:
    from gate.judges.lexical import LexicalJudge

MAX_COUNT = 256
"""Cap on the judge's concurrency (requests in flight); larger values are configuration mistakes."""

_SECONDS = {"type": "number", "exclusiveMinimum": 0, "maximum": 3600}

ENDPOINT_OPTIONS: dict[str, dict[str, Any]] = {
    "model": {"type": "string", "minLength": 1},
    "base_url": {"type": "string", "pattern": "^https?://"},
    "api_key_env": {"type": "string", "minLength": 1},
    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
    "max_tokens": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
    "timeout_s": _SECONDS,
    "max_retries": {"type": "integer", "minimum": 0, "maximum": 20},
    "backoff_s": _SECONDS,
    "max_wait_s": _SECONDS,
    "concurrency": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT},
    "deadline_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
    "max_consecutive_failures": {"type": "integer", "minimum": 1, "maximum": 10_000},
    "cost_per_1k_input": {"type": ["number", "null"], "minimum": 0},
    "cost_per_1k_output": {"type": ["number", "null"], "minimum": 0},
    "cache_dir": {"type": ["string", "boolean", "null"]},
}
"""Options of the judges that call an OpenAI-compatible endpoint: the fields of
:class:`gate.judges.llm.config.EndpointConfig` plus ``cache_dir`` (a path, or false for no cache)."""


@dataclass(frozen=True)
class JudgeBackend:
    """A judge registry entry: where the backend lives and which options it accepts."""

    target: str
    """``module:Class`` of the backend; imported only when a judge is built."""
    options: Mapping[str, Mapping[str, Any]]
    """Option name → JSON Schema of its value (type and range); ``name`` is not an option."""
    required: tuple[str, ...] = ()
    """Options that have no default (e.g. the pinned ``model``)."""
    extra: str | None = None
    """The package extra the backend needs (``pip install 'rag-gate[EXTRA]'``), None for the core."""
    summary: str = ""
    """One line for error messages and docs."""
    schema: dict[str, Any] = field(init=False, repr=False, compare=False)
    """JSON Schema of a whole ``judge:`` mapping of this backend (``name`` plus the options)."""

    def __post_init__(self) -> None:
        """Derive :attr:`schema` from the options."""
        schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}, **self.options},
            "required": ["name", *self.required],
            "additionalProperties": False,
        }
        object.__setattr__(self, "schema", schema)

    def load(self) -> Callable[..., Judge]:
        """Import and return the backend class.

        Raises:
            ValueError: when the backend's optional dependencies are not installed.

        """
        module, _, cls = self.target.partition(":")
        try:
            return getattr(importlib.import_module(module), cls)
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            message = f"this judge needs an optional dependency ({exc}): pip install 'rag-gate[{self.extra}]'"
            raise ValueError(message) from exc


JUDGES: dict[str, JudgeBackend] = {
    "lexical": JudgeBackend(
        "gate.judges.lexical:LexicalJudge",
        {
            "cover": {"type": "number", "minimum": 0, "maximum": 1},
            "support": {"type": "number", "minimum": 0, "maximum": 1},
        },
        summary="offline, deterministic word-overlap judge (default)",
    ),
    "llm": JudgeBackend(
        "gate.judges.llm.rubric:RubricJudge",
        {**ENDPOINT_OPTIONS, "generator_model": {"type": "string"}},
        required=("model",),
        extra="llm",
        summary="rubric judge over an OpenAI-compatible endpoint",
    ),
    "ragas": JudgeBackend(
        "gate.judges.ragas_judge:RagasJudge",
        ENDPOINT_OPTIONS,
        required=("model",),
        extra="ragas",
        summary="ragas Faithfulness over an OpenAI-compatible endpoint",
    ),
    "nli": JudgeBackend(
        "gate.judges.nli:NLIJudge",
        {
            "model_path": {"type": "string", "minLength": 1},
            "labels": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "device": {"type": "string", "minLength": 1},
            "batch_size": {"type": "integer", "minimum": 1, "maximum": 4096},
            "max_length": {"type": "integer", "minimum": 16, "maximum": 65536},
            "window": {"type": "integer", "minimum": 1, "maximum": 100},
        },
        required=("model_path",),
        extra="nli",
        summary="local NLI cross-encoder (model on disk)",
    ),
}
"""Judge name (the ``name`` key of the ``judge:`` configuration) → its backend."""

PAIRWISE = JudgeBackend(
    "gate.judges.pairwise:PairwiseJudge",
    {**ENDPOINT_OPTIONS, "generator_model": {"type": "string"}},
    required=("model",),
    extra="llm",
    summary="pairwise judge (base answer against head answer, both orders) over an OpenAI-compatible endpoint",
)
"""The backend of the ``pairwise:`` configuration (no ``name``: there is one pairwise judge)."""


def _validated(backend: JudgeBackend, spec: Mapping[str, Any], label: str) -> None:
    """Check ``spec`` (with ``name``) against the backend's options.

    Raises:
        ValueError: naming the first bad option.

    """
    from gate.jsonl import accepts

    if accepts(dict(spec), backend.schema):
        return
    import jsonschema  # slow to import: only to explain options the compiled check does not accept

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(backend.schema).iter_errors(spec))
    if error is not None:
        where = ".".join(map(str, error.absolute_path))
        raise ValueError(f"{label}: {where + ': ' if where else ''}{error.message}")


def get_judge(spec: Mapping[str, Any]) -> Judge:
    """Build the judge that ``spec`` names, e.g. ``{"name": "lexical", "support": 0.8}``.

    The options are checked against the backend's declared :attr:`JudgeBackend.options` first, then by the
    backend's constructor (e.g. that an NLI model directory holds a model).

    Args:
        spec: ``name`` (one of ``sorted(JUDGES)``) plus that judge's options as keyword arguments.

    Returns:
        A judge instance (safe to share across threads).

    Raises:
        ValueError: the name is missing or unknown (the message lists the known names), an option is unknown,
            of the wrong type or out of range, or the backend's extra is not installed.

    """
    name = spec.get("name")
    backend = JUDGES.get(name) if isinstance(name, str) else None
    if backend is None:
        raise ValueError(f"unknown judge {name!r}; known judges: {', '.join(sorted(JUDGES))}")
    _validated(backend, spec, f"judge {name!r}")
    options = {k: v for k, v in spec.items() if k != "name"}
    return backend.load()(**options)


def get_pairwise_judge(options: Mapping[str, Any]) -> Any:
    """Build the pairwise judge of a ``pairwise:`` configuration, e.g. ``{"model": "gpt-4o-mini"}``.

    Returns:
        A :class:`gate.judges.pairwise.PairwiseJudge` (safe to share across threads).

    Raises:
        ValueError: an option is unknown, of the wrong type or out of range, or the ``llm`` extra is missing.

    """
    if "name" in options:
        raise ValueError("pairwise: the pairwise judge takes no name")
    _validated(PAIRWISE, {"name": "pairwise", **options}, "pairwise")
    return PAIRWISE.load()(**options)


def __getattr__(name: str) -> Any:
    if name == "LexicalJudge":  # imported lazily: scikit-learn is slow to import
        from gate.judges.lexical import LexicalJudge

        return LexicalJudge
    raise AttributeError(f"module 'gate.judges' has no attribute {name!r}")


__all__ = [
    "JUDGES",
    "PAIRWISE",
    "ClaimVerdict",
    "ContradictionLevel",
    "Judge",
    "JudgeBackend",
    "Judgment",
    "LexicalJudge",
    "Verdict",
    "get_judge",
    "get_pairwise_judge",
    "judge_usage",
]
