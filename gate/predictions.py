"""Load and validate predictions (DESIGN §2) and pair them with the golden set."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gate.errors import InputError, located
from gate.jsonl import read_jsonl, validate
from gate.models import Chunk, GoldenCase, Prediction

MISSING = "missing prediction: no row for this case and repeat"


def prediction_from_record(record: dict[str, Any], line: int = 0) -> Prediction:
    """Build a Prediction from an already validated JSON object."""
    return Prediction(
        id=record["id"],
        repeat=record.get("repeat", 0),
        answer=record.get("answer") or "",
        retrieved=tuple(Chunk(c["id"], c.get("text", ""), c.get("score")) for c in record.get("retrieved", ())),
        latency_ms=record.get("latency_ms"),
        warmup_ms=record.get("warmup_ms"),
        cost_usd=record.get("cost_usd"),
        tokens=record.get("tokens"),
        refused=record.get("refused"),
        error=record.get("error"),
        line=line,
    )


def load_predictions(path: Path | str) -> list[Prediction]:
    """Read a predictions file, in file order.

    Raises:
        InputError: ``file:line: field: message`` for malformed JSON, a missing or mistyped field, or a duplicate
            (id, repeat) pair.

    """
    path = Path(path)
    predictions: list[Prediction] = []
    first_line: dict[tuple[str, int], int] = {}
    for line, record in read_jsonl(path):
        validate(record, "prediction", path, line)
        prediction = prediction_from_record(record, line)
        key = (prediction.id, prediction.repeat)
        if key in first_line:
            raise InputError(
                located(
                    path,
                    line,
                    "id",
                    f"duplicate prediction for id '{key[0]}' repeat {key[1]} (first on line {first_line[key]})",
                )
            )
        first_line[key] = line
        predictions.append(prediction)
    return predictions


def align(
    golden: Sequence[GoldenCase],
    predictions: Sequence[Prediction],
    path: Path | str,
    repeats: int | None = None,
) -> dict[tuple[str, int], Prediction]:
    """Index predictions by (case id, repeat) and fill every missing (case, repeat) with an error row.

    ``repeats`` defaults to one more than the highest repeat index present (at least 1).

    Raises:
        InputError: for a prediction whose id is not in the golden set, or whose repeat is ≥ ``repeats``.

    """
    ids = {case.id for case in golden}
    if repeats is None:
        repeats = 1 + max((p.repeat for p in predictions), default=0)
    table: dict[tuple[str, int], Prediction] = {}
    for prediction in predictions:
        if prediction.id not in ids:
            raise InputError(
                located(path, prediction.line or None, "id", f"'{prediction.id}' is not in the golden set")
            )
        if prediction.repeat >= repeats:
            raise InputError(
                located(path, prediction.line or None, "repeat", f"{prediction.repeat} ≥ repeats ({repeats})")
            )
        table[(prediction.id, prediction.repeat)] = prediction
    for case in golden:
        for repeat in range(repeats):
            table.setdefault((case.id, repeat), Prediction(id=case.id, repeat=repeat, error=MISSING))
    return table
