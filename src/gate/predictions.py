"""Load and validate predictions (DESIGN §2) and pair them with the golden set."""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import msgspec
import numpy as np

from gate.errors import InputError, located
from gate.jsonl import MAX_INTEGER, integer_out_of_range, read_jsonl, read_jsonl_rows, scan_rows, validate
from gate.models import Chunk, GoldenCase, Prediction
from gate.sanitize import hidden_in_id

MISSING = "missing prediction: no row for this case and repeat"


Finite = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
"""A JSON number the schemas accept (finite: within ±``sys.float_info.max``), as a type for msgspec rows."""
MAX_LATENCY_MS = 86_400_000
"""The largest ``latency_ms`` (and ``warmup_ms``) a prediction may report: one day. Latency is a measured value; a
larger one (``1e308``) is a unit or serialization bug, and would overflow the geometric mean the comparison shows."""
MAX_COST_USD = 10_000
"""The largest ``cost_usd`` a prediction may report for one case (a measured value, like :data:`MAX_LATENCY_MS`)."""
_Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_INTEGER)]
_Milliseconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_LATENCY_MS)]
_Dollars = Annotated[float, msgspec.Meta(ge=0, le=MAX_COST_USD)]


class ChunkRow(msgspec.Struct, forbid_unknown_fields=True):
    """One item of a prediction's ``retrieved`` list, as :class:`PredictionRow` decodes it."""

    id: str
    text: str = ""
    score: Finite | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        """Free data, but no integer beyond :data:`gate.jsonl.MAX_INTEGER` (the slow path then names it)."""
        if self.metadata and integer_out_of_range(self.metadata):
            raise ValueError("an integer out of range in metadata")


class PredictionRow(msgspec.Struct, forbid_unknown_fields=True):
    """One line of ``predictions.jsonl`` as msgspec decodes it: ``gate/schemas/prediction.schema.json`` as a type.

    It takes no row the schema refuses (tests/io/test_jsonl.py checks both on generated rows), including the
    schema's rule that a row without an ``error`` string has an ``answer``; a row the schema takes and it does not
    is converted after validation (:func:`gate.jsonl.scan_rows`).
    """

    id: Annotated[str, msgspec.Meta(min_length=1)]
    repeat: _Count = 0
    answer: str | msgspec.UnsetType = msgspec.UNSET
    retrieved: list[ChunkRow] = msgspec.field(default_factory=list)
    latency_ms: _Milliseconds | None = None
    warmup_ms: _Milliseconds | None = None
    cost_usd: _Dollars | None = None
    tokens: _Count | None = None
    refused: bool | None = None
    error: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        """The schema's ``if``/``then`` (an answer is required unless ``error`` is a string); no huge integer."""
        if self.error is None and self.answer is msgspec.UNSET:
            raise ValueError("answer is required when there is no error")
        if self.metadata and integer_out_of_range(self.metadata):
            raise ValueError("an integer out of range in metadata")


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


def _refuse_duplicate(
    path: Path | str, line: int, key: tuple[str, int], first_line: dict[tuple[str, int], int]
) -> None:
    """Record where (case id, repeat) ``key`` first appears; a second row of it is an InputError naming both lines.

    An id with characters that do not show (:func:`gate.sanitize.hidden_in_id`) is an InputError too.
    """
    if key in first_line:
        message = f"duplicate prediction for id '{key[0]}' repeat {key[1]} (first on line {first_line[key]})"
        raise InputError(located(path, line, "id", message))
    if why := hidden_in_id(key[0]):
        raise InputError(located(path, line, "id", why))
    first_line[key] = line


def load_predictions(path: Path | str) -> list[Prediction]:
    """Read a predictions file, in file order.

    Raises:
        InputError: ``file:line: field: message`` for malformed JSON, a missing or mistyped field, an id with
            characters that do not show, or a duplicate (id, repeat) pair.

    """
    path = Path(path)
    predictions: list[Prediction] = []
    first_line: dict[tuple[str, int], int] = {}
    for line, record in read_jsonl(path):
        validate(record, "prediction", path, line)
        prediction = prediction_from_record(record, line)
        key = (prediction.id, prediction.repeat)
        _refuse_duplicate(path, line, key, first_line)
        predictions.append(prediction)
    return predictions


def _repeats_held(repeats: Sequence[int]) -> str:
    return f"only repeat {repeats[0]}" if len(repeats) == 1 else "repeats " + ", ".join(map(str, repeats))


def inferred_repeats(rows: Iterable[tuple[str, int, int]], path: Path | str) -> int:
    """The repeats per case of a predictions file that does not say it: one more than its highest repeat (at least 1).

    Only when every case of the file agrees: each case with a row has a row for every repeat 0 … R−1. Otherwise a
    stray row (one ``repeat: 3`` among cases run once) cannot be told from rows that are missing, and guessing
    would turn the missing rows into failures; the file is refused instead.

    Args:
        rows: ``(case id, repeat, line)`` of every row, in file order.
        path: the file, for the message.

    Raises:
        InputError: ``file:line: repeat: …`` on the first row of the highest repeat, naming up to three cases that
            lack some repeat.
    """
    held: dict[str, set[int]] = {}
    first_line: dict[int, int] = {}
    for case_id, repeat, line in rows:
        held.setdefault(case_id, set()).add(repeat)
        first_line.setdefault(repeat, line)
    top = max(first_line, default=0)
    short = [(case_id, sorted(repeats)) for case_id, repeats in held.items() if len(repeats) <= top]
    if short:
        named = ", ".join(f"'{case_id}' has {_repeats_held(repeats)}" for case_id, repeats in short[:3])
        more = ", …" if len(short) > 3 else ""
        message = (
            f"{top} on this line makes {top + 1} repeats per case, but {len(short)} of the file's {len(held)} cases "
            f"{'lacks' if len(short) == 1 else 'lack'} some of repeats 0–{top} ({named}{more}): give every case a row "
            "for each repeat (a failed call is a row with `error`), or remove the stray rows"
        )
        raise InputError(located(path, first_line[top] or None, "repeat", message))
    return top + 1


REPEATS_SOURCE = "the config's `repeats:` (default 1) or --repeats: set it to the file's repeats, or remove the row"
"""Where a run's repeats come from, for the message of a precomputed prediction beyond them (:func:`beyond_repeats`)."""


def beyond_repeats(repeat: int, repeats: int, source: str | None = None) -> str:
    """The message of a row whose ``repeat`` is not below the side's ``repeats`` (``source``: where R was set)."""
    return f"{repeat} ≥ repeats ({repeats}{f', {source}' if source else ''})"


def align(
    golden: Sequence[GoldenCase],
    predictions: Sequence[Prediction],
    path: Path | str,
    repeats: int | None = None,
    *,
    source: str | None = None,
) -> dict[tuple[str, int], Prediction]:
    """Index predictions by (case id, repeat) and fill every missing (case, repeat) with an error row.

    Args:
        golden: the cases.
        predictions: the rows of ``path``.
        path: the predictions file, for messages.
        repeats: repeats per case; None: inferred from the file (:func:`inferred_repeats`).
        source: where ``repeats`` was set, for the message of a row beyond it (``the config's `repeats:```).

    Raises:
        InputError: for a prediction whose id is not in the golden set, or whose repeat is ≥ ``repeats``; with
            ``repeats`` None, a file whose cases have different repeats.

    """
    ids = {case.id for case in golden}
    if repeats is None:
        repeats = inferred_repeats(((p.id, p.repeat, p.line) for p in predictions), path)
    table: dict[tuple[str, int], Prediction] = {}
    for prediction in predictions:
        if prediction.id not in ids:
            raise InputError(
                located(path, prediction.line or None, "id", f"'{prediction.id}' is not in the golden set")
            )
        if prediction.repeat >= repeats:
            message = beyond_repeats(prediction.repeat, repeats, source)
            raise InputError(located(path, prediction.line or None, "repeat", message))
        table[(prediction.id, prediction.repeat)] = prediction
    for case in golden:
        for repeat in range(repeats):
            table.setdefault((case.id, repeat), Prediction(id=case.id, repeat=repeat, error=MISSING))
    return table


class PredictionTable(Mapping[tuple[str, int], Prediction]):
    """Predictions of one side by (case id, repeat), complete: a missing row reads as an error row (:data:`MISSING`).

    Built by :func:`index_predictions` from a file, whose rows stay on disk: each row's line and byte offset are
    kept and the row is parsed again when it is read (100,000 cases × R repeats need not hold every answer and
    chunk in memory), or by :meth:`from_mapping` from predictions in memory. Which rows failed, and why, is kept
    for every row, so :meth:`error_mask` and :meth:`error_rows` read nothing from disk.
    """

    CACHE = 4096
    """Rows read from disk that are kept parsed (the most recently used)."""

    def __init__(
        self,
        ids: Sequence[str],
        repeats: int,
        errors: Mapping[tuple[int, int], str],
        *,
        warmups: Mapping[tuple[int, int], float] | None = None,
        rows: Mapping[tuple[int, int], Prediction] | None = None,
        path: Path | None = None,
        where: np.ndarray | None = None,
    ) -> None:
        """Use :func:`index_predictions` or :meth:`from_mapping`.

        Args:
            ids: case ids in golden order (row i of every matrix).
            repeats: repeats per case (R ≥ 1).
            errors: ``(case index, repeat)`` → error message of every failed row (missing rows are added).
            warmups: ``(case index, repeat)`` → ``warmup_ms`` of the rows that have one.
            rows: predictions in memory by ``(case index, repeat)``; or
            path: the predictions file, with
            where: shape (N, R, 2) int64, the 1-based line and byte offset of each row; line 0 = missing row.
        """
        self.ids = tuple(ids)
        self.repeats = int(repeats)
        self.index = {case_id: i for i, case_id in enumerate(self.ids)}
        self._rows = rows
        self._warmups = dict(warmups or {})
        self._path = path
        self._where = where
        present = np.zeros((len(self.ids), self.repeats), dtype=bool)
        if rows is not None:
            for i, r in rows:
                present[i, r] = True
        elif where is not None:
            present = where[:, :, 0] > 0
        self._errors = dict(errors)
        for i, r in zip(*np.nonzero(~present), strict=True):
            self._errors[(int(i), int(r))] = MISSING
        self._failed = np.zeros_like(present)
        for i, r in self._errors:
            self._failed[i, r] = True
        self._skipped = np.zeros_like(present)
        self._cache: OrderedDict[tuple[int, int], Prediction] = OrderedDict()

    @classmethod
    def from_mapping(
        cls, golden: Sequence[GoldenCase], repeats: int, table: Mapping[tuple[str, int], Prediction]
    ) -> PredictionTable:
        """A table over predictions in memory (rows of unknown cases or repeats ≥ ``repeats`` are left out)."""
        ids = [case.id for case in golden]
        index = {case_id: i for i, case_id in enumerate(ids)}
        rows = {
            (index[case_id], r): p
            for (case_id, r), p in table.items()
            if case_id in index and 0 <= r < repeats and p.error != MISSING
        }
        errors = {key: p.error for key, p in rows.items() if p.error is not None}
        warmups = {key: p.warmup_ms for key, p in rows.items() if p.warmup_ms is not None}
        return cls(ids, repeats, errors, warmups=warmups, rows=rows)

    def __len__(self) -> int:
        return len(self.ids) * self.repeats

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return ((case_id, r) for case_id in self.ids for r in range(self.repeats))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and len(key) == 2 and key[0] in self.index and 0 <= key[1] < self.repeats

    def __getitem__(self, key: tuple[str, int]) -> Prediction:
        if key not in self:
            raise KeyError(key)
        return self.read([key])[0]

    def read(self, keys: Iterable[tuple[str, int]]) -> list[Prediction]:
        """The predictions of ``keys`` (case id, repeat), reading the file once for all rows not in the cache.

        Raises:
            KeyError: an unknown case id or a repeat out of range.
            InputError: the predictions file changed since it was indexed.
        """
        keys = list(keys)
        for key in keys:
            if key not in self:
                raise KeyError(key)
        cells = [(self.index[case_id], r) for case_id, r in keys]
        # the rows of this call are kept here: more than CACHE of them would push each other out of the cache
        found = {c: self._cache[c] for c in cells if c in self._cache}
        wanted = sorted({c for c in cells if c not in found and self._stored(c)}, key=self._offset)
        if wanted and self._path is not None and self._where is not None:
            records = read_jsonl_rows(self._path, [tuple(self._where[c]) for c in wanted])
            for cell, record in zip(wanted, records, strict=True):
                line = int(self._where[cell][0])
                found[cell] = prediction_from_record(record, line)
                self._remember(cell, found[cell])
        out = []
        for i, r in cells:
            if (i, r) in found:
                if (i, r) in self._cache:
                    self._cache.move_to_end((i, r))
                out.append(found[(i, r)])
            elif self._rows is not None and (i, r) in self._rows:
                out.append(self._rows[(i, r)])
            else:
                out.append(Prediction(id=self.ids[i], repeat=r, error=MISSING))
        return out

    def _stored(self, cell: tuple[int, int]) -> bool:
        return self._rows is None and self._where is not None and self._where[cell][0] > 0

    def _offset(self, cell: tuple[int, int]) -> int:
        return int(self._where[cell][1]) if self._where is not None else 0

    def _remember(self, cell: tuple[int, int], prediction: Prediction) -> None:
        self._cache[cell] = prediction
        while len(self._cache) > self.CACHE:
            self._cache.popitem(last=False)

    def skip(self, planned: Mapping[str, int]) -> None:
        """Mark as skipped the missing rows an adaptive evaluation did not plan: repeats ≥ ``planned[case id]``.

        A skipped row is no pipeline failure (it leaves :attr:`n_errors`, :meth:`error_rows` and
        :meth:`first_error`) and no observation either: :meth:`error_mask` still marks it (nothing to read) and
        :meth:`skipped_mask` says which rows they are. Rows present in the file are never skipped; unknown ids are
        ignored.

        Args:
            planned: case id → repeats planned (the first ones, 1 ≤ n ≤ R); cases not in it planned every repeat.
        """
        for case_id, n in planned.items():
            if (i := self.index.get(case_id)) is None:
                continue
            for r in range(max(0, n), self.repeats):
                if self._errors.get((i, r)) == MISSING:
                    del self._errors[(i, r)]
                    self._skipped[i, r] = True

    def skipped_mask(self, case_ids: Sequence[str]) -> np.ndarray:
        """Where a row was skipped by plan (:meth:`skip`), shape (len(case_ids), R) bool.

        Raises:
            KeyError: an id that is not in the table.
        """
        return self._skipped[[self.index[case_id] for case_id in case_ids]]

    def error_mask(self, case_ids: Sequence[str]) -> np.ndarray:
        """Where the pipeline failed or left no row (a skipped row too: nothing to read), shape (len(case_ids), R).

        Raises:
            KeyError: an id that is not in the table.
        """
        return self._failed[[self.index[case_id] for case_id in case_ids]]

    def error(self, case_id: str, repeat: int) -> str | None:
        """Why the row failed (:data:`MISSING` for a missing row), None when it did not; nothing is read from disk.

        Raises:
            KeyError: an unknown case id.
        """
        return self._errors.get((self.index[case_id], repeat))

    def first_error(self) -> tuple[str, int, str] | None:
        """``(case id, repeat, message)`` of the first failed row: in file order, then the first missing row."""
        for (i, r), message in self._errors.items():
            return self.ids[i], r, message
        return None

    @property
    def n_skipped(self) -> int:
        """Rows skipped by plan (:meth:`skip`)."""
        return int(self._skipped.sum())

    @property
    def n_errors(self) -> int:
        """Failed or missing rows (skipped ones not counted)."""
        return len(self._errors)

    def warmup_ms(self) -> tuple[float, ...]:
        """The ``warmup_ms`` of the rows that have one (a worker's first call), sorted by case id then repeat."""
        return tuple(v for _, _, v in sorted((self.ids[i], r, v) for (i, r), v in self._warmups.items()))

    def error_rows(self) -> list[tuple[str, int, str]]:
        """``(case id, repeat, message)`` of every failed or missing row, sorted by case id then repeat."""
        return sorted((self.ids[i], r, message) for (i, r), message in self._errors.items())


@dataclass(frozen=True)
class PredictionRows:
    """Where each row of a predictions file is, validated and free of duplicates, before the golden set is known."""

    path: Path
    """The predictions file."""
    rows: list[tuple[str, int, int, int]]
    """``(case id, repeat, line, byte offset)`` of every row, in file order."""
    errors: dict[tuple[str, int], str]
    """``(case id, repeat)`` → error message of every failed row, in file order."""
    warmups: dict[tuple[str, int], float]
    """``(case id, repeat)`` → ``warmup_ms`` of the rows that have one."""

    @property
    def ids(self) -> set[str]:
        """The case ids of the rows."""
        return {case_id for case_id, _, _, _ in self.rows}

    def restricted(self, ids: set[str]) -> PredictionRows:
        """The rows of the cases in ``ids`` only."""
        keep = [row for row in self.rows if row[0] in ids]
        errors = {key: message for key, message in self.errors.items() if key[0] in ids}
        warmups = {key: value for key, value in self.warmups.items() if key[0] in ids}
        return PredictionRows(self.path, keep, errors, warmups)

    def index(self, golden: Sequence[GoldenCase], repeats: int | None = None) -> PredictionTable:
        """Match the rows with the golden set (the checks and messages of :func:`align`, first row in file order).

        Args:
            golden: the cases (the table's row order).
            repeats: repeats per case; None: inferred from the file (:func:`inferred_repeats`).

        Raises:
            InputError: a row whose id is not in the golden set, or whose repeat is ≥ ``repeats``; with ``repeats``
                None, a file whose cases have different repeats.
        """
        if repeats is None:
            repeats = inferred_repeats(((case_id, r, line) for case_id, r, line, _ in self.rows), self.path)
        index = {case.id: i for i, case in enumerate(golden)}
        where = np.zeros((len(golden), repeats, 2), dtype=np.int64)
        for case_id, repeat, line, offset in self.rows:
            if case_id not in index:
                raise InputError(located(self.path, line, "id", f"'{case_id}' is not in the golden set"))
            if repeat >= repeats:
                raise InputError(located(self.path, line, "repeat", beyond_repeats(repeat, repeats)))
            where[index[case_id], repeat] = (line, offset)
        errors = {(index[case_id], r): message for (case_id, r), message in self.errors.items()}
        warmups = {(index[case_id], r): value for (case_id, r), value in self.warmups.items()}
        ids = [case.id for case in golden]
        return PredictionTable(ids, repeats, errors, warmups=warmups, path=self.path, where=where)


def scan_predictions(path: Path | str) -> PredictionRows:
    """Read and validate a predictions file in one streaming pass, keeping where each row is, not the row.

    The checks and messages of :func:`load_predictions`; :meth:`PredictionRows.index` then does those of
    :func:`align`, so the two together refuse what ``align(golden, load_predictions(path), path)`` refuses, in
    the same order, and give the same table.

    Raises:
        InputError: ``file:line: field: message`` for malformed JSON, a missing or mistyped field, or a duplicate
            (id, repeat) pair.
    """
    path = Path(path)
    first_line: dict[tuple[str, int], int] = {}
    rows: list[tuple[str, int, int, int]] = []
    errors: dict[tuple[str, int], str] = {}
    warmups: dict[tuple[str, int], float] = {}
    for line, offset, row in scan_rows(path, PredictionRow, "prediction"):
        key = (row.id, row.repeat)
        _refuse_duplicate(path, line, key, first_line)
        rows.append((key[0], key[1], line, offset))
        if row.error is not None:
            errors[key] = row.error
        if row.warmup_ms is not None:
            warmups[key] = row.warmup_ms
    return PredictionRows(path, rows, errors, warmups)
