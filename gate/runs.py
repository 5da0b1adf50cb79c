"""Run directories (DESIGN §2): ``predictions.jsonl``, ``scores.jsonl`` and ``manifest.json``.

They are written incrementally, so that a killed run keeps what it computed and resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gate.errors import InputError
from gate.jsonl import parse_json, read_jsonl, validate, write_jsonl
from gate.models import GoldenCase, Prediction, Score
from gate.predictions import load_predictions, prediction_from_record

PREDICTIONS = "predictions.jsonl"
SCORES = "scores.jsonl"
MANIFEST = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RunIdentity:
    """Everything that changes what a run produced (DESIGN §8 "one identity key").

    Two runs with equal identities are interchangeable. The predictions depend on the first four fields (a run
    resumes, merges or is cached only when they match); the scores also depend on the judge, the scoring
    settings and the rag-gate version (scores are reused only when those match the policy's, else recomputed).
    """

    golden_sha256: str
    """sha256 of the golden set file the run answered."""
    config_sha256: str
    """sha256 of the side's config file (pipeline, options, metrics, judge options)."""
    repeats: int
    """Repeats per case (≥ 1)."""
    shard: tuple[int, int] | None
    """``(i, n)`` for ``run --shard i/n``, else None."""
    judge: dict[str, Any]
    """The judge that scored the run: its configuration (every option), id and version."""
    scoring: dict[str, Any]
    """Scoring settings besides the judge that change scores (refusal detection)."""
    gate_version: str
    """rag-gate version that scored the run."""

    PREDICTION_FIELDS = ("golden_sha256", "config_sha256", "repeats", "shard")
    SCORE_FIELDS = ("judge", "scoring", "gate_version")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: these keys are top-level keys of manifest.json."""
        return {
            "golden_sha256": self.golden_sha256,
            "config_sha256": self.config_sha256,
            "repeats": self.repeats,
            "shard": list(self.shard) if self.shard else None,
            "judge": self.judge,
            "scoring": self.scoring,
            "gate_version": self.gate_version,
        }

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> RunIdentity:
        """The identity a manifest records (missing keys of older manifests read as empty, so they differ)."""
        shard = manifest.get("shard")
        return cls(
            golden_sha256=str(manifest.get("golden_sha256", "")),
            config_sha256=str(manifest.get("config_sha256", "")),
            repeats=int(manifest.get("repeats") or 0),
            shard=(int(shard[0]), int(shard[1])) if isinstance(shard, list | tuple) and len(shard) == 2 else None,
            judge=dict(manifest.get("judge") or {}),
            scoring=dict(manifest.get("scoring") or {}),
            gate_version=str(manifest.get("gate_version", "")),
        )

    def differences(self, other: RunIdentity, fields: tuple[str, ...]) -> list[str]:
        """The names of ``fields`` whose values differ."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [name for name in fields if mine[name] != theirs[name]]

    def digest(self) -> str:
        """sha256 of the canonical JSON of the whole identity (a cache key), 64 hex characters."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


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

    label: Literal["base", "head"]
    """Which side."""
    golden: list[GoldenCase]
    """The cases the side is compared on, in order."""
    table: dict[tuple[str, int], Prediction]
    """Predictions by (case id, repeat), complete: a missing row is an error row."""
    repeats: int
    """Repeats per case (≥ 1)."""
    scores: list[Score]
    """One score per case × repeat × metric."""
    manifest: dict[str, Any]
    """The run's manifest (empty for a predictions file)."""
    warnings: tuple[str, ...] = ()
    """What a reader of the comparison should know about how this side was loaded (e.g. rescored)."""

    def first_valid(self, case_id: str) -> Prediction | None:
        """The case's first prediction without ``error`` (lowest repeat), or None when every repeat failed."""
        for r in range(self.repeats):
            prediction = self.table.get((case_id, r))
            if prediction is not None and prediction.error is None:
                return prediction
        return None
