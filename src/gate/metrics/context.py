"""What a per-case metric function reads: :class:`ScoreContext` (the registry's ``fn`` takes one)."""

from __future__ import annotations

from dataclasses import dataclass

from gate.models import FormRules, GoldenCase, Prediction


@dataclass(frozen=True)
class ScoreContext:
    """Everything a per-case metric function may read."""

    case: GoldenCase
    """The golden case."""
    prediction: Prediction
    """The pipeline's prediction for the case (one repeat)."""
    k: int | None
    """The cut-off of a ``@k`` metric, else None."""
    refused: bool
    """Whether the answer is a refusal (see :func:`gate.metrics.refusal.is_refusal`)."""
    form: FormRules = FormRules()
    """The form rules that apply to the case: the config's ``form:`` overridden by the case's ``form``."""
