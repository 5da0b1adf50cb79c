"""Fixtures shared by the compare/ tests: sides built in memory from hand-written predictions and scores."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pytest

from gate.models import Chunk, GoldenCase, Prediction, Score
from gate.runs import Side

Cell = float | str | None
"""One (case, repeat) of a hand-written score matrix: a value (NaN: not applicable), ``"error: why"`` (an
evaluation failure with that message), or None (no score row)."""


def build_side(
    label: str,
    golden: Sequence[GoldenCase],
    scores: Mapping[str, Sequence[Sequence[Cell]]],
    *,
    retrieved: Mapping[str, Sequence[str]] | None = None,
    errors: Mapping[tuple[str, int], str] | None = None,
    manifest: Mapping | None = None,
) -> Side:
    """A side with these score matrices: ``scores[metric][case][repeat]`` (golden order; R = the rows' length).

    Args:
        retrieved: case id → the ids it retrieved (every repeat); default none.
        errors: (case id, repeat) → the prediction's ``error`` (the pipeline failed there).
        manifest: the side's manifest (default: a golden set sha256 of 64 ``f``).
    """
    repeats = len(next(iter(scores.values()))[0])
    retrieved, errors = retrieved or {}, errors or {}
    table = {
        (case.id, r): Prediction(
            id=case.id,
            repeat=r,
            answer=f"answer {case.id}",
            retrieved=tuple(Chunk(doc, f"text of {doc}") for doc in retrieved.get(case.id, ())),
            latency_ms=10.0,
            error=errors.get((case.id, r)),
        )
        for case in golden
        for r in range(repeats)
    }
    rows = []
    for metric, matrix in scores.items():
        for case, row in zip(golden, matrix, strict=True):
            for r, cell in enumerate(row):
                if isinstance(cell, str):
                    rows.append(Score(case.id, r, metric, float("nan"), error=cell.removeprefix("error: ")))
                elif cell is not None:
                    rows.append(Score(case.id, r, metric, float(cell)))
    return Side(label, list(golden), table, repeats, rows, dict(manifest or {"golden_sha256": "f" * 64}))


@pytest.fixture
def make_side() -> Callable[..., Side]:
    """:func:`build_side`: a side from hand-written score matrices."""
    return build_side
