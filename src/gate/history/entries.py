"""The main-branch history's file format: one entry per run, read, checked and appended (DESIGN §9).

Every push to the default branch appends one **entry** (aggregates per metric of one run) to a JSON Lines
history file; :mod:`gate.history.trend` compares a run with it, :mod:`gate.history.calibrate` estimates a
metric's run-to-run noise from run directories (:func:`run_summary`).

History entry (one JSON object per line; schema ``gate/schemas/history.schema.json``; extra fields allowed)::

    {"schema_version": 1, "timestamp": "2025-01-31T12:00:00+00:00", "sha": "…", "ref": "main",
     "golden_sha256": "…", "config_sha256": "…", "n_cases": 120, "repeats": 1, "gated": ["faithfulness"],
     "metrics": {"faithfulness": {"mean": 0.84, "sd": 0.21, "p10": 0.5, "share_below_0_5": 0.08, "n": 120,
                                  "run_se": null}}}

The repeat standard error (``run_se``) follows Miller (2024), "Adding Error Bars to Evals", arXiv:2411.00640, §3
(resampling answers: Var = Σ σᵢ² / (K n²)).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gate.errors import InputError, WriteError, located
from gate.files import make_parent, open_append, write_all
from gate.jsonl import dumps, read_jsonl, validate
from gate.manifest import Manifest
from gate.metrics import resolve
from gate.models import PREDICTION_FAILED, Score
from gate.runs import SCORES, load_scores, not_complete, read_manifest
from gate.stats.summary import aggregate, run_se

SCHEMA_VERSION = 1
"""Version of the history entry format written by this rag-gate."""


# ------------------------------------------------------------------------------------------ aggregation


def metric_matrices(scores: Iterable[Any], repeats: int) -> dict[str, np.ndarray]:
    """Values per metric from score rows, shape (N cases, R repeats) each, cases in order of first appearance.

    Args:
        scores: rows with ``id``, ``repeat``, ``metric``, ``value`` (NaN for N/A) and ``error`` (a failed
            score counts as missing), e.g. :class:`gate.models.Score`.
        repeats: R; rows with ``repeat ≥ R`` are ignored.

    Returns:
        metric name → matrix; NaN where a case has no valid value for a repeat.
    """
    rows = list(scores)
    cases = list(dict.fromkeys(row.id for row in rows))
    index = {case: i for i, case in enumerate(cases)}
    matrices: dict[str, np.ndarray] = {}
    for row in rows:
        if row.repeat >= repeats:
            continue
        matrix = matrices.setdefault(row.metric, np.full((len(cases), repeats), np.nan))
        if row.error is None:
            matrix[index[row.id], row.repeat] = row.value
    return matrices


def summarize(values: np.ndarray) -> dict[str, float | int | None]:
    """A history entry's per-metric object: the :func:`~gate.stats.summary.aggregate` fields plus ``run_se``."""
    return asdict(aggregate(values)) | {"run_se": run_se(values)}


# --------------------------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class HistoryEntry:
    """One run in the history: the JSON object of one line, as read (extra fields kept)."""

    record: Mapping[str, Any]
    """The entry's JSON object."""
    line: int | None = None
    """1-based line in the history file; None for a run that is not in the file."""

    @property
    def sha(self) -> str | None:
        """The evaluated commit."""
        return self.record.get("sha")

    @property
    def label(self) -> str:
        """Short name for tables and charts: the first 7 characters of the sha, else the timestamp."""
        return (self.sha or "")[:7] or str(self.record.get("timestamp", "?"))

    @property
    def gated(self) -> tuple[str, ...] | None:
        """The gated metrics recorded with the entry, or None."""
        gated = self.record.get("gated")
        return tuple(gated) if isinstance(gated, list) else None

    def _number(self, metric: str, key: str) -> float | None:
        number = (self.record.get("metrics", {}).get(metric) or {}).get(key)
        return float(number) if isinstance(number, int | float) and math.isfinite(number) else None

    def value(self, metric: str) -> float | None:
        """The metric's mean in this run, or None when absent or without value."""
        return self._number(metric, "mean")

    def run_se(self, metric: str) -> float | None:
        """The metric's repeat standard error in this run, or None when unknown."""
        return self._number(metric, "run_se")

    def comparable_to(self, other: HistoryEntry) -> str | None:
        """Why this entry cannot be compared with ``other`` (None when it can): golden set and config must match."""
        golden = self.record.get("golden_sha256") != other.record.get("golden_sha256")
        config = self.record.get("config_sha256") != other.record.get("config_sha256")
        if golden and config:
            return "different golden set and config"
        if golden:
            return "different golden set"
        if config:
            return "different config"
        return None


def make_record(
    *,
    timestamp: str,
    sha: str | None,
    ref: str | None,
    golden_sha256: str,
    config_sha256: str,
    n_cases: int,
    repeats: int,
    metrics: Mapping[str, np.ndarray],
    gated: Sequence[str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build a history entry (the JSON object of one line) from a run's per-metric value matrices.

    Args:
        timestamp: when the run finished, ISO 8601.
        sha: evaluated commit (None when unknown).
        ref: its branch or ref.
        golden_sha256: sha256 of the golden set file.
        config_sha256: sha256 of the config whose policy was applied.
        n_cases: cases in the golden set.
        repeats: R.
        metrics: metric name → values of shape (N, R) (see :func:`metric_matrices`).
        gated: the gated metrics, recorded so that ``history check`` knows them.
        extra: more fields (gate version, judge), kept as is.

    Returns:
        The entry, valid against ``history.schema.json``.
    """
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "timestamp": timestamp,
        "sha": sha,
        "ref": ref,
        "golden_sha256": golden_sha256,
        "config_sha256": config_sha256,
        "n_cases": n_cases,
        "repeats": repeats,
        "metrics": {name: summarize(values) for name, values in metrics.items()},
    }
    if gated is not None:
        record["gated"] = list(gated)
    return record | dict(extra or {})


def parse_entry(record: Any, path: Path | str, line: int | None) -> HistoryEntry:
    """Validate one history object.

    Raises:
        InputError: ``file:line: field: message`` (a newer ``schema_version`` is named as such).
    """
    version = record.get("schema_version") if isinstance(record, dict) else None
    if isinstance(version, int) and version > SCHEMA_VERSION:
        message = f"entry format {version} is newer than this rag-gate reads ({SCHEMA_VERSION}); upgrade rag-gate"
        raise InputError(located(path, line, "schema_version", message))
    validate(record, "history", path, line)
    _check_values(record, path, line)
    return HistoryEntry(record, line)


VALUE_KEYS = ("mean", "sd", "p10", "share_below_0_5", "run_se")
"""The numbers of a history entry's per-metric object that :func:`parse_entry` checks."""


def value_range(metric: str) -> tuple[float, float]:
    """The closed range a metric's per-case values (hence its mean and 10th percentile) lie in.

    [0, 1] for binary and graded metrics, [0, ∞) for ratio ones (latency, cost); any finite number for a metric
    this version does not know.
    """
    try:
        kind = resolve(metric).spec.kind
    except ValueError:
        return -math.inf, math.inf
    return (0.0, math.inf) if kind == "ratio" else (0.0, 1.0)


def _check_values(record: Mapping[str, Any], path: Path | str, line: int | None) -> None:
    """Refuse a number that is not finite or lies outside its metric's range (after the schema check).

    An ``inf`` (JSON ``1e999``) or an impossible mean (a hit rate of 7) would otherwise enter a trend baseline and
    turn a real drop into "ok" (an infinite baseline) or into nonsense.

    Raises:
        InputError: ``file:line: metrics.NAME.KEY: message``.
    """
    for name, numbers in record["metrics"].items():
        low, high = value_range(name)
        for key in VALUE_KEYS:
            number = numbers.get(key)
            if number is None or isinstance(number, bool):
                continue
            where = f"metrics.{name}.{key}"
            if not math.isfinite(number):
                raise InputError(located(path, line, where, f"{number} is not a finite number"))
            if key in ("mean", "p10"):
                bounds = (low, high)
            elif key == "share_below_0_5":
                bounds = (0.0, 1.0)
            else:  # sd, run_se: at most the width of the range
                bounds = (0.0, high - low)
            if not bounds[0] <= number <= bounds[1]:
                shown = f"[{bounds[0]:g}, {bounds[1]:g}]" if math.isfinite(bounds[1]) else f"≥ {bounds[0]:g}"
                raise InputError(located(path, line, where, f"{number:g} is outside the metric's range {shown}"))


@dataclass(frozen=True)
class History:
    """A history file as read: its valid entries in file order, and what was wrong with the other lines."""

    path: str
    """The history file as given."""
    entries: tuple[HistoryEntry, ...]
    """The valid entries, in file (time) order."""
    problems: tuple[str, ...] = ()
    """One ``file:line: message`` per line that was skipped (corrupt, truncated, invalid)."""


def read_history(path: Path | str, *, strict: bool = False) -> History:
    """Read a history file; a bad line is reported and skipped (or, with ``strict``, raised).

    File order is time order (entries are appended). A blank file is an empty history.

    Args:
        path: the JSONL file.
        strict: raise on the first bad line instead of skipping it (``history check``).

    Returns:
        The entries and one message per skipped line.

    Raises:
        InputError: the file is missing or unreadable; with ``strict``, the first bad line (file:line: field).
    """
    problems: list[str] = []
    entries = []
    for number, record in read_jsonl(path, None if strict else problems):
        try:
            entries.append(parse_entry(record, path, number))
        except InputError as exc:
            if strict:
                raise
            problems.append(str(exc))
    return History(str(path), tuple(entries), tuple(problems))


def append_entry(path: Path | str, record: Mapping[str, Any]) -> None:
    """Append one entry as a line, creating the file (and its directory) if needed.

    The line is written all or nothing (one write, fsync; truncated back to the old size when it fails: see
    :func:`gate.files.write_all`), so a full disk never leaves part of an entry. A last line cut short by an older
    writer (no trailing newline) is closed first, so the new entry stays readable and only the damaged line is
    skipped when reading (also by ``history check``).

    Raises:
        InputError: the record is not a valid entry.
        WriteError: the history cannot be written (exit code 3), naming the file; it is left as it was.
    """
    path = Path(path)
    parse_entry(dict(record), path, None)
    make_parent(path)
    existed = path.exists()
    fd = open_append(path, readable=True)
    try:
        prefix = ""
        size = os.fstat(fd).st_size
        if size:
            prefix = "" if os.pread(fd, 1, size - 1) == b"\n" else "\n"
        write_all(fd, (prefix + dumps(dict(record)) + "\n").encode("utf-8", errors="replace"), path)
    except OSError as exc:  # pread on something that is not a regular file
        raise WriteError(path, exc) from None
    except WriteError:
        if not existed and not size:
            path.unlink(missing_ok=True)  # the empty file this call created: nothing at all is left
        raise
    finally:
        os.close(fd)


def _read_run(run_dir: Path, partial: bool = False) -> tuple[Manifest, list[Score]]:
    """A finished run directory's manifest and score rows (``partial``: a ``partial`` run is taken too).

    Raises:
        InputError: not a run directory, the run is not complete (nor ``partial`` when taken), or its scores are
            unreadable.
    """
    manifest = read_manifest(run_dir)
    if manifest.status != "complete" and not (partial and manifest.status == "partial"):
        raise InputError(not_complete(run_dir, manifest.status))
    return manifest, load_scores(run_dir / SCORES)


def _in_order(manifest: Manifest, matrices: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``matrices`` in the order of the run's configured metrics (those without scores left out)."""
    order = manifest.metrics or list(matrices)
    return {name: matrices[name] for name in order if name in matrices}


def load_run(run_dir: Path | str) -> tuple[Manifest, dict[str, np.ndarray]]:
    """A finished run directory's manifest and per-metric values (see :func:`metric_matrices`).

    Metrics are in the order of the run's configured metrics.

    Raises:
        InputError: not a run directory, the run is not complete, or its scores are unreadable.
    """
    manifest, scores = _read_run(Path(run_dir))
    return manifest, _in_order(manifest, metric_matrices(scores, manifest.repeats or 1))


def run_aggregates(run_dir: Path | str, partial: bool = False) -> dict[str, dict[str, float | int | None]]:
    """The aggregates of a finished run, per metric: a history entry's numbers plus the failed scores.

    Args:
        run_dir: a complete run directory (``rag-gate run``).
        partial: take a ``partial`` run too (a stage, ``run --upto-batch K``: the aggregates of the cases it ran).

    Returns:
        metric name → the :func:`summarize` fields (``mean``, ``sd``, ``p10``, ``share_below_0_5``, ``n``: cases
        with a value, ``run_se``) and ``failed``: evaluation failures, i.e. score rows (case × repeat) of an answered
        prediction that could not be scored (a judge failure), in the order of the run's configured metrics. A
        failed prediction is a system error (``error_rate`` counts it), not an evaluation failure, as in the
        comparison's error budget. Neither is averaged: a case without any valid repeat is not among ``n``.

    Raises:
        InputError: not a run directory, the run is not complete, or its scores are unreadable.
    """
    manifest, scores = _read_run(Path(run_dir), partial)
    repeats = manifest.repeats or 1
    failed = Counter(
        s.metric
        for s in scores
        if s.error is not None and not s.error.startswith(PREDICTION_FAILED) and s.repeat < repeats
    )
    matrices = _in_order(manifest, metric_matrices(scores, repeats))
    return {name: summarize(values) | {"failed": failed[name]} for name, values in matrices.items()}


def entry_from_run(
    run_dir: Path | str,
    *,
    sha: str | None = None,
    ref: str | None = None,
    timestamp: str | None = None,
    config_sha256: str | None = None,
) -> dict[str, Any]:
    """The history entry of a finished run directory (aggregates as in report.json).

    Args:
        run_dir: a complete run directory (``rag-gate run``).
        sha: commit (default: the manifest's ``git_sha``).
        ref: branch or ref (default: the manifest's ``git_ref``).
        timestamp: ISO 8601 (default: the manifest's ``finished``).
        config_sha256: the config whose policy applies (default: the manifest's; a PR head uses the base's).

    Returns:
        The entry object.

    Raises:
        InputError: see :func:`load_run`; a manifest without golden or config sha256 or finish time.
    """
    manifest, matrices = load_run(run_dir)
    record = {
        "timestamp": timestamp or manifest.finished,
        "golden_sha256": manifest.golden_sha256,
        "config_sha256": config_sha256 or manifest.config_sha256,
    }
    for key, value in record.items():
        if not value:
            raise InputError(located(Path(run_dir) / "manifest.json", None, key, "missing; re-run `rag-gate run`"))
    return make_record(
        **record,
        sha=sha or manifest.git_sha,
        ref=ref or manifest.git_ref,
        n_cases=manifest.n_cases,
        repeats=manifest.repeats or 1,
        metrics=matrices,
        gated=manifest.gated,
        extra={"gate_version": manifest.gate_version, "judge": manifest.judge.id if manifest.judge else None},
    )


@dataclass(frozen=True)
class RunSummary:
    """What calibration needs from one run directory."""

    name: str
    """Where the run came from (its directory)."""
    golden_sha256: str | None
    """sha256 of the run's golden set (from its manifest), if known."""
    config_sha256: str | None
    """sha256 of the run's config (from its manifest), if known."""
    matrices: Mapping[str, np.ndarray] = field(default_factory=dict)
    """metric name → values, shape (N, R)."""


def run_summary(run_dir: Path | str) -> RunSummary:
    """A run directory's values for :func:`calibrate`."""
    manifest, matrices = load_run(run_dir)
    return RunSummary(str(run_dir), manifest.golden_sha256, manifest.config_sha256, matrices)
