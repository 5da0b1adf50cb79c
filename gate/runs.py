"""Run directories (DESIGN §2): ``predictions.jsonl``, ``scores.jsonl`` and ``manifest.json``.

They are written incrementally, so that a killed run keeps what it computed and resumes where it stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.errors import InputError
from gate.jsonl import read_jsonl, write_jsonl
from gate.models import GoldenCase, Prediction, Score
from gate.predictions import load_predictions, prediction_from_record

PREDICTIONS = "predictions.jsonl"
SCORES = "scores.jsonl"
MANIFEST = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest.

    Raises:
        InputError: when the directory has no readable manifest.json.

    """
    path = run_dir / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{run_dir}: not a run directory (no {MANIFEST}); run `rag-gate run` first") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None


def read_partial_predictions(path: Path) -> list[Prediction]:
    """Predictions kept from an interrupted run: valid rows without ``error`` (failed cases are retried).

    A last line cut short by a kill is dropped; any other malformed line is an error.
    """
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise InputError(f"{path}:{number}: invalid JSON in an interrupted run; delete the directory") from None
        if not record.get("error"):
            kept.append(prediction_from_record(record, number))
    return kept


def load_run_predictions(run_dir: Path) -> list[Prediction]:
    """All predictions of a finished run (validated)."""
    return load_predictions(run_dir / PREDICTIONS)


def load_scores(path: Path) -> list[Score]:
    """Read ``scores.jsonl`` (null values read back as NaN)."""
    scores = []
    for _, record in read_jsonl(path):
        value = record.get("value")
        scores.append(
            Score(
                id=record["id"],
                repeat=record["repeat"],
                metric=record["metric"],
                value=float("nan") if value is None else float(value),
                error=record.get("error"),
                detail=record.get("detail"),
            )
        )
    return scores


def write_predictions(path: Path, predictions: list[Prediction]) -> None:
    """Rewrite a predictions file (used when resuming, to drop failed rows before retrying them)."""
    write_jsonl(path, (p.to_dict() for p in predictions))


@dataclass(frozen=True)
class Side:
    """One side of a comparison, loaded: its cases, predictions and scores."""

    label: str
    golden: list[GoldenCase]
    table: dict[tuple[str, int], Prediction]
    repeats: int
    scores: list[Score]
    manifest: dict[str, Any]
