"""Run directories (DESIGN §2): ``predictions.jsonl``, ``scores.jsonl`` and ``manifest.json``.

They are written incrementally, so that a killed run keeps what it computed and resumes where it stopped.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import numpy as np

from gate.errors import InputError
from gate.jsonl import MAX_INTEGER, parse_json, read_jsonl, read_jsonl_rows, scan_rows, validate, write_jsonl
from gate.manifest import MANIFEST_SCHEMA_VERSION as MANIFEST_SCHEMA_VERSION  # re-exported: the run files' home
from gate.manifest import Manifest
from gate.manifest import RunIdentity as RunIdentity
from gate.models import GoldenCase, Prediction, Score
from gate.predictions import Finite, PredictionTable, load_predictions, prediction_from_record

PREDICTIONS = "predictions.jsonl"
SCORES = "scores.jsonl"
MANIFEST = "manifest.json"
RUN_FILES = (PREDICTIONS, SCORES, MANIFEST)
"""The files of a run directory; a previous run's are moved aside, numbered, never overwritten."""


def not_complete(run_dir: Path | str, status: str) -> str:
    """Why a run directory whose manifest status is ``status`` (not ``complete``) cannot be taken, and what to do.

    ``partial``: an adaptive evaluation ran part of its cases or repeats by plan (nothing to resume); any other
    status: the run was interrupted or is still running (the same ``rag-gate run`` resumes it).
    """
    if status == "partial":
        return (
            f"{run_dir}: the run is partial, by plan, not interrupted: an adaptive evaluation ran only some of its "
            "cases or repeats (`rag-gate pr --adaptive on` compared them itself: its report.json is in the folder "
            "above; a stage of `rag-gate run --upto-batch K` is compared with `rag-gate compare --adaptive`)"
        )
    return (
        f"{run_dir}: the run is not complete (manifest status {status!r}): it was interrupted or is still running; "
        "re-run the same `rag-gate run` command to resume it"
    )


def read_manifest(run_dir: Path) -> Manifest:
    """The run's manifest, validated against ``gate/schemas/manifest.schema.json``, as a :class:`Manifest`.

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
    try:
        return Manifest.from_dict(manifest)
    except msgspec.ValidationError as exc:
        raise InputError(f"{path}: {exc}") from None


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
class ScoreError:
    """A score row that records a failure (its ``error``)."""

    id: str
    """Golden case id."""
    repeat: int
    """0-based repeat index."""
    metric: str
    """Metric name."""
    message: str
    """Why the case could not be scored."""


class ScoreTable:
    """One side's scores as matrices: per metric, values and failure flags of shape (N cases, R repeats).

    Built by :func:`read_scores` from ``scores.jsonl`` in one streaming pass (no object per row: 100,000 cases ×
    R × 14 metrics fit in a few tens of MB) or by :meth:`from_scores` from :class:`~gate.models.Score` objects.
    Row i is case ``ids[i]``; rows of other cases or repeats ≥ R are left out of the matrices (as before, when the
    comparison scanned the rows). Where a row appears twice, the later one counts. Rows with an ``error`` are kept
    in :attr:`errors`, in file order, and the claims of each case's first judged row are read back on demand.
    """

    def __init__(self, ids: Sequence[str], repeats: int) -> None:
        """An empty table over ``ids`` (golden order) and ``repeats``; fill it with :meth:`add`."""
        self.ids = tuple(ids)
        self.repeats = int(repeats)
        self.index = {case_id: i for i, case_id in enumerate(self.ids)}
        self.errors: list[ScoreError] = []
        """Every row with an ``error``, in file order (any case, any repeat)."""
        self.n_rows = 0
        """Rows read."""
        self.not_applicable: Counter[str] = Counter()
        """Why a scorer found rows not applicable (e.g. text in a language the judge does not read), with counts."""
        self.unscored: Counter[str] = Counter()
        """Why a scorer read an answer but found nothing to score (e.g. no checkable claim), with counts."""
        self._values: dict[str, np.ndarray] = {}
        self._failed: dict[str, np.ndarray] = {}
        self._unread = np.zeros((len(self.ids), self.repeats), dtype=bool)
        self._claims: dict[str, Any] = {}
        self._path: Path | None = None

    def add(self, case_id: str, repeat: int, metric: str, value: float, error: str | None, note: Any = None) -> None:
        """Record one row (a later row of the same case, repeat and metric replaces an earlier one).

        ``note`` is the row's ``detail["not_applicable"]``, when the scorer said why it could not score, or
        :func:`_note`'s pair of it and ``detail["unscored"]`` (the scorer read the answer and found nothing to score).
        """
        self.n_rows += 1
        if isinstance(note, tuple):  # (not_applicable, unscored) of a row with detail
            note, unscored = note
            if isinstance(unscored, str) and case_id in self.index and repeat < self.repeats:
                self.unscored[unscored] += 1
        if isinstance(note, str):
            self.not_applicable[note] += 1
        if error is not None:
            self.errors.append(ScoreError(case_id, repeat, metric, error))
        i = self.index.get(case_id)
        if i is None or repeat >= self.repeats:
            return
        values = self._values.get(metric)
        if values is None:
            values = self._values[metric] = np.full((len(self.ids), self.repeats), np.nan)
            self._failed[metric] = np.ones((len(self.ids), self.repeats), dtype=bool)
        values[i, repeat] = value
        self._failed[metric][i, repeat] = error is not None
        if isinstance(note, str):  # rare: no numpy element write for every row of a large scores file
            self._unread[i, repeat] = True

    @classmethod
    def from_scores(cls, ids: Sequence[str], repeats: int, scores: Iterable[Score]) -> ScoreTable:
        """A table over scores in memory (their ``detail`` is kept for :meth:`claims`)."""
        table = cls(ids, repeats)
        for score in scores:
            table.add(score.id, score.repeat, score.metric, score.value, score.error, _note(score.detail))
            if score.detail and score.detail.get("claims") is not None:
                table._claims.setdefault(score.id, score.detail)
        return table

    def extended(self, scores: Iterable[Score]) -> ScoreTable:
        """A copy of the table with ``scores`` added after its rows (e.g. the pairwise judge's rows)."""
        table = ScoreTable(self.ids, self.repeats)
        table.errors, table.n_rows, table.not_applicable = list(self.errors), self.n_rows, Counter(self.not_applicable)
        table.unscored = Counter(self.unscored)
        table._values = {metric: values.copy() for metric, values in self._values.items()}
        table._failed = {metric: failed.copy() for metric, failed in self._failed.items()}
        table._unread = self._unread.copy()
        table._claims, table._path = dict(self._claims), self._path
        for score in scores:
            table.add(score.id, score.repeat, score.metric, score.value, score.error, _note(score.detail))
            if score.detail and score.detail.get("claims") is not None:
                table._claims.setdefault(score.id, score.detail)
        return table

    @property
    def metrics(self) -> tuple[str, ...]:
        """Metrics with at least one row of a listed case."""
        return tuple(self._values)

    def matrix(self, metric: str, rows: np.ndarray | Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(values, failed) of one metric, each of shape (len(rows), R), new arrays.

        ``values`` is NaN where there is no value (not applicable, a failure, or no row); ``failed`` is True where
        the row records an error or is missing (a missing row is a failure, never "not applicable").

        Args:
            metric: the metric name.
            rows: case indices (into :attr:`ids`); default every case.
        """
        take = slice(None) if rows is None else np.asarray(rows, dtype=np.intp)
        if metric not in self._values:
            n = len(self.ids) if rows is None else len(rows)
            return np.full((n, self.repeats), np.nan), np.ones((n, self.repeats), dtype=bool)
        return self._values[metric][take].copy(), self._failed[metric][take].copy()

    def unreadable(self, rows: np.ndarray | Sequence[int]) -> np.ndarray:
        """Where a scorer said it could not read the answer (a row's ``not_applicable`` note), shape (len(rows), R).

        The judge notes it once, on the row of the judged metric that keeps the judgment's detail; it holds for
        every metric read from that judgment.
        """
        return self._unread[np.asarray(rows, dtype=np.intp)].copy()

    def claims_many(self, case_ids: Sequence[str]) -> dict[str, list[dict[str, Any]] | None]:
        """:meth:`claims` of many cases, reading the scores file once, in file order; nothing read is kept.

        A report that shows the claims of 100,000 cases reads them a batch at a time: kept, every judged row's
        ``detail`` would stay in memory for the rest of the comparison.

        Raises:
            InputError: the scores file changed since it was read.
        """
        out: dict[str, list[dict[str, Any]] | None] = {}
        pending = []
        for case_id in dict.fromkeys(case_ids):
            found = self._claims.get(case_id)
            if isinstance(found, tuple):
                pending.append(case_id)
            else:
                out[case_id] = None if found is None else found.get("claims")
        if pending:
            assert self._path is not None, "claims by offset come from a scores file"
            pending.sort(key=lambda case_id: self._claims[case_id][1])
            records = read_jsonl_rows(self._path, [self._claims[c] for c in pending])
            for case_id, record in zip(pending, records, strict=True):
                detail = record.get("detail")
                out[case_id] = None if detail is None else detail.get("claims")
        return {case_id: out[case_id] for case_id in case_ids}

    def claims(self, case_id: str) -> list[dict[str, Any]] | None:
        """The ``claims`` of the case's first row (file order) whose ``detail`` has claims, else None.

        Raises:
            InputError: the scores file changed since it was read.
        """
        found = self._claims.get(case_id)
        if isinstance(found, tuple):  # (line, offset) in the file: read the row again
            assert self._path is not None, "claims by offset come from a scores file"
            (record,) = read_jsonl_rows(self._path, [found])
            found = self._claims[case_id] = record.get("detail")
        return None if found is None else found.get("claims")


def _note(detail: Any) -> Any:
    """A score row's ``detail["not_applicable"]``, or (it, ``detail["unscored"]``) when the row has the latter."""
    if not isinstance(detail, dict):
        return None
    if "unscored" in detail:
        return detail.get("not_applicable"), detail["unscored"]
    return detail.get("not_applicable")


class ScoreRow(msgspec.Struct):
    """One line of ``scores.jsonl`` as msgspec decodes it: ``gate/schemas/score.schema.json`` as a type.

    It takes no row the schema refuses (tests/io/test_jsonl.py checks both on generated rows); a row the schema
    takes and it does not is converted after validation (:func:`gate.jsonl.scan_rows`).
    """

    id: Annotated[str, msgspec.Meta(min_length=1)]
    repeat: Annotated[int, msgspec.Meta(ge=0, le=MAX_INTEGER)]
    metric: Annotated[str, msgspec.Meta(min_length=1)]
    value: Finite | None
    error: str | None = None
    detail: dict[str, Any] | None = None


def read_scores(path: Path, ids: Sequence[str], repeats: int) -> ScoreTable:
    """Read ``scores.jsonl`` into a :class:`ScoreTable`, each row validated against the score schema (null → NaN).

    Raises:
        InputError: ``file:line: field: message`` for a malformed row (missing ``metric``, wrong types, ...).
    """
    table = ScoreTable(ids, repeats)
    table._path = Path(path)
    for line, offset, row in scan_rows(path, ScoreRow, "score"):
        detail = row.detail
        table.add(row.id, row.repeat, row.metric, math.nan if row.value is None else row.value, row.error,
                  _note(detail))  # fmt: skip
        if detail and detail.get("claims") is not None and row.id not in table._claims:
            table._claims[row.id] = (line, offset)
    return table


@dataclass(frozen=True)
class Side:
    """One side of a comparison, loaded: its cases, predictions and scores."""

    label: Literal["base", "head"]
    """Which side."""
    golden: list[GoldenCase]
    """The cases the side is compared on, in order."""
    table: PredictionTable
    """Predictions by (case id, repeat), complete: a missing row is an error row. A mapping of predictions is
    turned into a :class:`~gate.predictions.PredictionTable`."""
    repeats: int
    """Repeats per case (≥ 1)."""
    scores: ScoreTable
    """One score per case × repeat × metric; a sequence of :class:`~gate.models.Score` is turned into a
    :class:`ScoreTable`."""
    manifest: Manifest
    """The run's manifest; for a predictions file, what its scoring at compare time recorded (judge, golden set).
    A mapping (e.g. a partial manifest built in memory) is turned into a :class:`~gate.manifest.Manifest`."""
    warnings: tuple[str, ...] = ()
    """What a reader of the comparison should know about how this side was loaded (e.g. rescored)."""
    index: dict[str, int] = field(init=False, repr=False, compare=False)
    """Case id → row of the side's matrices (golden order)."""

    def __post_init__(self) -> None:
        """Index the cases; wrap predictions, scores and a manifest given in memory."""
        if not isinstance(self.manifest, Manifest):
            object.__setattr__(self, "manifest", Manifest.from_dict(self.manifest))
        ids = [case.id for case in self.golden]
        object.__setattr__(self, "index", {case_id: i for i, case_id in enumerate(ids)})
        if not isinstance(self.table, PredictionTable):
            object.__setattr__(self, "table", PredictionTable.from_mapping(self.golden, self.repeats, self.table))
        if not isinstance(self.scores, ScoreTable):
            object.__setattr__(self, "scores", ScoreTable.from_scores(ids, self.repeats, self.scores))

    def valid(self, case_id: str) -> list[Prediction]:
        """The case's predictions without ``error``, in repeat order (only these rows are read from disk)."""
        failed = self.table.error_mask([case_id])[0]
        return self.table.read([(case_id, r) for r in range(self.repeats) if not failed[r]])

    def valid_many(self, case_ids: Sequence[str]) -> dict[str, list[Prediction]]:
        """:meth:`valid` of many cases, reading the predictions file once."""
        failed = self.table.error_mask(case_ids)
        keys = [(c, r) for c, row in zip(case_ids, failed, strict=True) for r in range(self.repeats) if not row[r]]
        out: dict[str, list[Prediction]] = {case_id: [] for case_id in case_ids}
        for (case_id, _), prediction in zip(keys, self.table.read(keys), strict=True):
            out[case_id].append(prediction)
        return out

    def first_valid(self, case_id: str) -> Prediction | None:
        """The case's first prediction without ``error`` (lowest repeat), or None when every repeat failed."""
        return self.first_valid_many([case_id])[case_id]

    def first_valid_many(self, case_ids: Sequence[str]) -> dict[str, Prediction | None]:
        """:meth:`first_valid` of many cases, reading the predictions file once."""
        failed = self.table.error_mask(case_ids)
        keys = [(case_id, int(np.argmin(row))) for case_id, row in zip(case_ids, failed, strict=True) if not row.all()]
        found = dict(zip((case_id for case_id, _ in keys), self.table.read(keys), strict=True))
        return {case_id: found.get(case_id) for case_id in case_ids}
