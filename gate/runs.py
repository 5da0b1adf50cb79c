"""Run directories (DESIGN §2): ``predictions.jsonl``, ``scores.jsonl`` and ``manifest.json``.

They are written incrementally, so that a killed run keeps what it computed and resumes where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.errors import InputError
from gate.jsonl import parse_json, read_jsonl, validate, write_jsonl
from gate.models import GoldenCase, Prediction, Score
from gate.predictions import load_predictions, prediction_from_record

PREDICTIONS = "predictions.jsonl"
SCORES = "scores.jsonl"
MANIFEST = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest, validated against ``gate/schemas/manifest.schema.json``.

    Raises:
        InputError: when the directory has no manifest.json, or it is not valid JSON, or a required key is
            missing or mistyped (``manifest.json: key: message``).

    """
    path = run_dir / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{run_dir}: not a run directory (no {MANIFEST}); run `rag-gate run` first") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    manifest = parse_json(text, path)
    validate(manifest, "manifest", path, None)
    return manifest


def read_partial_predictions(path: Path) -> tuple[list[Prediction], bool]:
    """Predictions kept from an interrupted run: valid rows without ``error`` (failed cases are retried).

    A last line cut short by a kill is dropped; any other malformed line is an error.

    Returns:
        The kept predictions, and whether the file holds anything else (failed rows, a cut last line): only then
        does it need rewriting.

    Raises:
        InputError: a malformed line other than the last (``file:line: field: message``).
    """
    if not path.exists():
        return [], False
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = []
    dropped = False
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            record = parse_json(text, path, number)
            validate(record, "prediction", path, number)
        except InputError as exc:
            if number == len(lines):
                dropped = True
                break
            raise InputError(f"{exc}; the interrupted run in {path.parent} cannot be resumed: delete it") from None
        if record.get("error"):
            dropped = True
        else:
            kept.append(prediction_from_record(record, number))
    return kept, dropped


def load_run_predictions(run_dir: Path) -> list[Prediction]:
    """All predictions of a finished run (validated)."""
    return load_predictions(run_dir / PREDICTIONS)


def load_scores(path: Path) -> list[Score]:
    """Read ``scores.jsonl``, each row validated against ``gate/schemas/score.schema.json`` (null → NaN).

    Raises:
        InputError: ``file:line: field: message`` for a malformed row (missing ``metric``, wrong types, ...).
    """
    scores = []
    for line, record in read_jsonl(path):
        validate(record, "score", path, line)
        value = record["value"]
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
    """Replace a predictions file atomically (used when resuming, to drop failed rows before retrying them).

    Raises:
        EvaluationError: the file cannot be written; the old one is left intact.
    """
    write_jsonl(path, (p.to_dict() for p in predictions))


@dataclass(frozen=True)
class Side:
    """One side of a comparison, loaded: its cases, predictions and scores."""

    label: str
    """``base`` or ``head``."""
    golden: list[GoldenCase]
    """The golden cases, in file order."""
    table: dict[tuple[str, int], Prediction]
    """Predictions by (case id, repeat), complete (missing ones are error rows)."""
    repeats: int
    """Repeats per case."""
    scores: list[Score]
    """One score per case × repeat × metric."""
    manifest: dict[str, Any]
    """The run's ``manifest.json`` (empty for a predictions file)."""
