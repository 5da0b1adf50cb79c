"""The main-branch history and the trend alarm (DESIGN §9, issue 13).

Every push to the default branch appends one **entry** (aggregates per metric of one run) to a JSON Lines
history file. The **trend alarm** compares a run (the latest entry, or a PR head) with the mean of the previous
``window`` *comparable* entries (same golden set and config sha256): WARNING at a relative drop of
``warning`` (5 %), CRITICAL at ``critical`` (10 %). Per-PR margins let a slow drift through (five PRs that each
lose 2 points all pass); the alarm sees it, as long as it is faster than about 2·warning·baseline/(window + 1)
per run (a steady drift of d per run shows as d·(window + 1)/2 against the window's mean). **Calibration**
estimates a metric's run-to-run variability and suggests thresholds above it.

Pure: no git, no GitHub, no click. Storing the file on a branch is ``gate.pr.history_store``; rendering is in
``gate.outputs.trend``.

History entry (one JSON object per line; schema ``gate/schemas/history.schema.json``; extra fields allowed)::

    {"schema_version": 1, "timestamp": "2025-01-31T12:00:00+00:00", "sha": "…", "ref": "main",
     "golden_sha256": "…", "config_sha256": "…", "n_cases": 120, "repeats": 1, "gated": ["faithfulness"],
     "metrics": {"faithfulness": {"mean": 0.84, "sd": 0.21, "p10": 0.5, "share_below_0_5": 0.08, "n": 120,
                                  "run_se": null}}}

Source: the trend alarm follows the faithfulness-monitoring method this project implements (compare the latest
evaluation with the mean of the previous 4; warn at a 5 % relative drop, critical at 10 %; calibrate on the
metric's natural variability); the repeat standard error follows Miller (2024), "Adding Error Bars to Evals",
arXiv:2411.00640, §3 (resampling answers: Var = Σ σᵢ² / (K n²)).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gate.config import TrendPolicy
from gate.errors import InputError, WriteError, located
from gate.files import make_parent, open_append, write_all
from gate.jsonl import dumps, read_jsonl, validate
from gate.manifest import Manifest
from gate.metrics import resolve
from gate.runs import SCORES, load_scores, read_manifest
from gate.stats.summary import aggregate, run_se
from gate.trends import LEVEL as LEVEL  # re-exported
from gate.trends import MetricTrend, TrendReport, TrendStatus

SCHEMA_VERSION = 1
"""Version of the history entry format written by this rag-gate."""
TOLERANCE = 1e-9
"""A relative drop within this of a threshold counts as reaching it (0.05 exactly is a 5 % WARNING, whatever
the floating-point rounding of ``(b - v) / b``)."""
NOISE_Z = 2.0
"""A drop is called beyond the natural variability when it exceeds this many standard deviations of noise."""
CHART_POINTS = 8
"""Main-branch entries kept per metric for charts (``MetricTrend.recent``)."""
MIN_WARNING, MIN_CRITICAL = 0.01, 0.02
"""Smallest thresholds :func:`calibrate` suggests (for metrics without run-to-run noise, e.g. fixed retrieval)."""
WARNING_Z, CRITICAL_Z = 2.0, 3.0
"""Calibration: thresholds at 2 and 3 noise SDs (one-sided false-alarm rates 2.3 % and 0.13 % per run)."""


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


def load_run(run_dir: Path | str) -> tuple[Manifest, dict[str, np.ndarray]]:
    """A finished run directory's manifest and per-metric values (see :func:`metric_matrices`).

    Metrics are in the order of the run's configured metrics.

    Raises:
        InputError: not a run directory, the run is not complete, or its scores are unreadable.
    """
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    if manifest.status != "complete":
        raise InputError(f"{run_dir}: the run is not complete (status {manifest.status!r}); finish it first")
    repeats = manifest.repeats or 1
    matrices = metric_matrices(load_scores(run_dir / SCORES), repeats)
    order = manifest.metrics or list(matrices)
    return manifest, {name: matrices[name] for name in order if name in matrices}


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


def run_summary(run_dir: Path | str) -> RunSummary:
    """A run directory's values for :func:`calibrate`."""
    manifest, matrices = load_run(run_dir)
    return RunSummary(str(run_dir), manifest.golden_sha256, manifest.config_sha256, matrices)


# ----------------------------------------------------------------------------------------------- trend


def relative_drop(value: float, baseline: float, direction: str) -> float:
    """Relative drop of ``value`` from ``baseline``; positive = worse, whatever the metric's direction.

    drop = (baseline − value) / |baseline| for higher-is-better metrics, (value − baseline) / |baseline| for
    lower-is-better ones (a rise in latency or contradiction rate is the drop). With a zero baseline the drop
    is 0 when the value is equal and ±inf otherwise.

    Args:
        value: the run's mean.
        baseline: the mean of the window.
        direction: ``higher`` or ``lower`` (is better).

    Returns:
        The drop as a fraction (0.10 = 10 % worse).
    """
    worse = baseline - value if direction == "higher" else value - baseline
    if baseline == 0:
        return 0.0 if worse == 0 else math.copysign(math.inf, worse)
    return worse / abs(baseline)


def classify(drop: float, policy: TrendPolicy) -> TrendStatus:
    """``critical`` when ``drop ≥ critical``, ``warning`` when ``drop ≥ warning``, else ``ok`` (see TOLERANCE)."""
    if drop >= policy.critical - TOLERANCE:
        return "critical"
    if drop >= policy.warning - TOLERANCE:
        return "warning"
    return "ok"


def _direction_and_label(metric: str) -> tuple[str, str]:
    try:
        resolved = resolve(metric)
    except ValueError:
        return "higher", metric  # a metric this version does not know: reported, assumed higher-is-better
    return resolved.spec.direction, resolved.label


def _noise(window: Sequence[float], window_ses: Sequence[float | None], run: float | None) -> float | None:
    """SD of (value − baseline) under no change (see :attr:`MetricTrend.noise_sd`).

    The runs' own repeat standard errors measure run-to-run noise without the drift when every run has one:
    √(se_run² + mean(se_i²)/W). Otherwise σ is the window's SD (which a drift inside the window inflates):
    √(σ² + σ²/W), with se_run for the run's own part when known.
    """
    size = len(window)
    if run is not None and size and all(se is not None for se in window_ses):
        return math.hypot(run, _rms(window_ses) / math.sqrt(size))  # type: ignore[arg-type]
    if size < 2:
        return None
    sigma = _sd(window)
    return math.hypot(run if run is not None else sigma, sigma / math.sqrt(size))


def _mean_of(values: Sequence[float]) -> float:
    """Mean of finite numbers that never overflows: huge values (1e308 each) give a finite mean, not inf or NaN.

    Ordinary values get numpy's mean (the same digits as before); only when that overflows is the mean summed from
    scaled terms.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        mean = float(np.mean(values))
    return mean if math.isfinite(mean) else math.fsum(v / len(values) for v in values)


def _scaled(values: Sequence[float]) -> tuple[float, list[float]]:
    """``(scale, values / scale)`` with the largest magnitude scaled to 1 (scale 1 when all are 0)."""
    scale = max(abs(v) for v in values) or 1.0
    return scale, [v / scale for v in values]


def _sd(values: Sequence[float]) -> float:
    """Sample SD (ddof 1) of finite numbers; huge ones are scaled first, so the SD is finite whenever it fits."""
    with np.errstate(over="ignore", invalid="ignore"):
        sd = float(np.std(values, ddof=1))
    if math.isfinite(sd):
        return sd
    scale, scaled = _scaled(values)
    return scale * float(np.std(scaled, ddof=1))


def _rms(values: Sequence[float]) -> float:
    """Root mean square of finite numbers, scaled so that squaring huge ones does not overflow."""
    scale, scaled = _scaled(values)
    return scale * math.sqrt(_mean_of([v * v for v in scaled]))


def metric_trend(
    metric: str, run: HistoryEntry, previous: Sequence[HistoryEntry], policy: TrendPolicy, *, gated: bool
) -> MetricTrend:
    """One metric of ``run`` against the mean of the last ``policy.window`` entries of ``previous`` with a value.

    Args:
        metric: metric name.
        run: the evaluated run.
        previous: comparable earlier entries, oldest first (filter with :func:`trend_report`).
        policy: window and thresholds.
        gated: whether the metric is gated.

    Returns:
        The metric's trend; ``insufficient`` with a note when the run has no value or fewer than ``window``
        previous entries have one.
    """
    direction, label = _direction_and_label(metric)
    with_value = [e for e in previous if e.value(metric) is not None]
    recent = tuple((e.label, e.value(metric)) for e in with_value[-CHART_POINTS:])
    value = run.value(metric)
    se = run.run_se(metric)
    common = {"metric": metric, "label": label, "direction": direction, "gated": gated, "recent": recent}
    if value is None:
        return MetricTrend(**common, status="insufficient", value=None, baseline=None, drop=None, note="no value")
    if len(with_value) < policy.window:
        note = f"{len(with_value)} comparable main entr{'y' if len(with_value) == 1 else 'ies'}, {policy.window} needed"
        return MetricTrend(**common, status="insufficient", value=value, baseline=None, drop=None, run_se=se, note=note)
    chosen = with_value[-policy.window :]
    window = tuple(e.value(metric) for e in chosen)  # type: ignore[misc]
    baseline = _mean_of(window)
    drop = relative_drop(value, baseline, direction)
    noise = _noise(window, [e.run_se(metric) for e in chosen], se)
    worse = baseline - value if direction == "higher" else value - baseline
    beyond = None if noise is None else bool(worse > NOISE_Z * noise)
    return MetricTrend(
        **common,
        status=classify(drop, policy),
        value=value,
        baseline=baseline,
        drop=drop,
        window=window,
        window_sd=_sd(window) if len(window) > 1 else None,
        run_se=se,
        noise_sd=noise,
        beyond_noise=beyond,
    )


def trend_report(
    entries: Sequence[HistoryEntry],
    run: HistoryEntry | None = None,
    *,
    policy: TrendPolicy,
    gated: Iterable[str] | None = None,
    problems: Sequence[str] = (),
    run_label: str | None = None,
) -> TrendReport:
    """Check a run against the history: each metric against the mean of the previous comparable entries.

    Without ``run``, the last entry is checked against the ones before it. With ``run`` (a PR head, or a run
    directory), every entry is "previous", except entries of the same commit. Entries with another golden set or
    config sha256 are never mixed in; ``skipped`` counts those between the run and the oldest entry used (all of
    them when a window is short), by reason.

    Args:
        entries: the history, oldest first.
        run: the run to check (None: the last entry).
        policy: window and thresholds.
        gated: gated metric names (default: the run's recorded ``gated``, else every metric of the run).
        problems: unreadable history lines, passed through to the report.
        run_label: how to name the run (default: its short sha).

    Returns:
        The report; metrics in the run's order.

    Raises:
        InputError: the history is empty and no run is given.
    """
    if run is None:
        if not entries:
            raise InputError("the history has no entry to check")
        run, previous = entries[-1], list(entries[:-1])
    else:
        previous = list(entries)
    names = list(run.record.get("metrics", {}))
    gated_set = set(gated) if gated is not None else set(run.gated or names)

    # Walk back from the newest entry until every metric has enough comparable values (for its window and chart).
    need = max(policy.window, CHART_POINTS)
    found: dict[str, list[int]] = {n: [] for n in names if run.value(n) is not None}  # indices, newest first
    skipped: list[tuple[int, str]] = []
    for index in range(len(previous) - 1, -1, -1):
        entry = previous[index]
        reason = entry.comparable_to(run)
        if reason is None and run.line is None and run.sha and entry.sha == run.sha:
            reason = "same commit as the run"
        if reason is not None:
            skipped.append((index, reason))
            continue
        for name, indices in found.items():
            if len(indices) < need and entry.value(name) is not None:
                indices.append(index)
        if all(len(indices) >= need for indices in found.values()):
            break
    trends = tuple(
        metric_trend(n, run, [previous[i] for i in reversed(found.get(n, []))], policy, gated=n in gated_set)
        for n in names
    )
    full = [indices[policy.window - 1] for indices in found.values() if len(indices) >= policy.window]
    oldest = min(full) if found and len(full) == len(found) else 0  # a short window: every skip counts
    counts: dict[str, int] = {}
    for index, reason in skipped:
        if index >= oldest:
            counts[reason] = counts.get(reason, 0) + 1
    return TrendReport(
        policy=policy,
        run=run_label or run.label,
        timestamp=run.record.get("timestamp"),
        n_entries=len(entries),
        skipped=tuple(sorted(counts.items())),
        problems=tuple(problems),
        metrics=trends,
    )


def trend_series(
    entries: Sequence[HistoryEntry], *, policy: TrendPolicy, gated: Iterable[str] | None = None
) -> list[TrendReport]:
    """The trend of every entry against the entries before it (``history show``), oldest first."""
    gated = None if gated is None else tuple(gated)
    return [trend_report(entries[: i + 1], policy=policy, gated=gated) for i in range(len(entries))]


# ----------------------------------------------------------------------------------------- calibration


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


@dataclass(frozen=True)
class Calibration:
    """A metric's run-to-run variability and the trend thresholds it suggests."""

    metric: str
    """Metric name, e.g. ``hit_rate@5``."""
    label: str
    """Display label, e.g. ``Hit rate@5``."""
    method: Literal["across runs", "within-run repeats"]
    """How the noise was estimated: SD of the means of several runs, or from one run's repeats."""
    n_runs: int
    """Runs the noise was estimated from (1 for within-run repeats)."""
    mean: float
    """Mean of the metric over the runs."""
    run_sd: float
    """SD of one run's mean (run-to-run noise at a fixed golden set and config)."""
    relative_noise: float
    """SD of the relative drop of a stable system against a ``window`` baseline: run_sd·√(1 + 1/window)/mean; 0
    for a metric that is always 0, inf for one whose mean is 0 but that varies (no relative threshold fits it)."""
    suggested_warning: float | None
    """WARNING_Z × relative_noise rounded up to 0.005 (at least MIN_WARNING); None when relative_noise is inf."""
    suggested_critical: float | None
    """CRITICAL_Z × relative_noise rounded up to 0.005 (at least MIN_CRITICAL and above the warning); None when
    relative_noise is inf."""
    false_alarm_warning: float | None
    """Probability that a stable run reaches the configured warning threshold (normal approximation); None when
    relative_noise is inf."""
    false_alarm_critical: float | None
    """Probability that a stable run reaches the configured critical threshold; None when relative_noise is inf."""


def _mean(values: np.ndarray) -> float | None:
    """The run's mean of per-case means (as :func:`aggregate`), None without values."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        per_case = np.nanmean(values, axis=1)
    per_case = per_case[~np.isnan(per_case)]
    return float(per_case.mean()) if per_case.size else None


def _round_up(value: float, step: float = 0.005) -> float:
    return round(math.ceil(value / step - 1e-9) * step, 6)


def calibrate(runs: Sequence[RunSummary], policy: TrendPolicy) -> list[Calibration]:
    """Estimate each metric's run-to-run noise and suggest trend thresholds above it.

    With two or more runs (the same commit evaluated several times, or stable main-branch runs), the noise is the
    SD (ddof 1) of their means. With one run, it is the run's repeat standard error (:func:`run_se`, needs
    R ≥ 2). The trend compares a run with the mean of ``window`` runs, so a stable system's relative drop has
    SD ``relative_noise = run_sd·√(1 + 1/window) / mean``; suggested thresholds are 2 and 3 times that (one-sided
    false alarms 2.3 % and 0.13 % per run and metric), and the configured thresholds' false-alarm rates are
    P(Z ≥ threshold / relative_noise).

    Args:
        runs: the runs; all must share the golden set and config.
        policy: the configured window and thresholds.

    Returns:
        One calibration per metric with a mean in every run (in the first run's order).

    Raises:
        InputError: no run; runs of different golden sets or configs; a single run with one repeat.
    """
    from scipy.stats import norm

    if not runs:
        raise InputError("calibration needs at least one run directory")
    first = runs[0]
    for other in runs[1:]:
        for key in ("golden_sha256", "config_sha256"):
            if getattr(other, key) != getattr(first, key):
                raise InputError(
                    f"{other.name}: {key} differs from {first.name}; calibrate on runs of one golden set and config"
                )
    out = []
    for metric, values in first.matrices.items():
        means = [m for run in runs if metric in run.matrices and (m := _mean(run.matrices[metric])) is not None]
        if len(means) != len(runs) or not means:
            continue
        if len(runs) >= 2:
            method, sd = "across runs", float(np.std(means, ddof=1))
        else:
            se = run_se(values)
            if se is None:
                raise InputError(
                    f"{first.name}: one run with one repeat shows no run-to-run variability; pass several run "
                    "directories of the same commit, or a run with repeats ≥ 2"
                )
            method, sd = "within-run repeats", se
        mean = float(np.mean(means))
        if mean:
            relative = sd * math.sqrt(1 + 1 / policy.window) / abs(mean)
        else:  # a drop from a zero baseline is 0 or infinite (relative_drop): fine if the metric never moves
            relative = 0.0 if sd == 0 else math.inf
        warning = critical = None
        if math.isfinite(relative):
            warning = max(MIN_WARNING, _round_up(WARNING_Z * relative))
            critical = max(MIN_CRITICAL, _round_up(CRITICAL_Z * relative), warning)

        def false_alarm(threshold: float, relative: float = relative) -> float | None:
            if not math.isfinite(relative):
                return None
            return float(norm.sf(threshold / relative)) if relative > 0 else 0.0

        direction, label = _direction_and_label(metric)
        out.append(
            Calibration(
                metric=metric,
                label=label,
                method=method,  # type: ignore[arg-type]
                n_runs=len(runs),
                mean=mean,
                run_sd=sd,
                relative_noise=relative,
                suggested_warning=warning,
                suggested_critical=critical,
                false_alarm_warning=false_alarm(policy.warning),
                false_alarm_critical=false_alarm(policy.critical),
            )
        )
    return out
