"""The trend alarm's types (a contract): its policy, and a run against the main-branch history.

A contract module: it imports the standard library only (import-linter checks it); :mod:`gate.history.trend` computes
these, :mod:`gate.comparison` carries a :class:`TrendReport` in ``report.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

TrendStatus = Literal["ok", "warning", "critical", "insufficient"]
"""``insufficient``: fewer than ``window`` comparable previous entries (no baseline yet) or no value."""
LEVEL = {"insufficient": 0, "ok": 0, "warning": 1, "critical": 2}
"""How bad a status is; ``block`` levels compare against it."""

TrendBlock = Literal["never", "warning", "critical"]


@dataclass(frozen=True)
class TrendPolicy:
    """The trend alarm's thresholds (``trend:`` in the config; DESIGN §9): base-side policy like the margins."""

    window: int = 4
    """How many previous comparable main-branch entries make the baseline (their mean)."""
    warning: float = 0.05
    """Relative drop from the baseline (0.05 = 5 % worse) at which a metric is in WARNING."""
    critical: float = 0.10
    """Relative drop from the baseline at which a metric is CRITICAL (≥ ``warning``)."""
    block: TrendBlock = "never"
    """Which trend level fails the check: ``never`` (default: the alarm warns only), ``critical`` or ``warning``;
    ``true`` in a config means ``critical``, ``false`` means ``never``."""

    def __post_init__(self) -> None:
        """A boolean ``block`` as a level; numbers as floats."""
        if isinstance(self.block, bool):
            object.__setattr__(self, "block", "critical" if self.block else "never")
        object.__setattr__(self, "warning", float(self.warning))
        object.__setattr__(self, "critical", float(self.critical))


@dataclass(frozen=True)
class MetricTrend:
    """One metric of a run against its main-branch baseline."""

    metric: str
    """Metric name, e.g. ``faithfulness``."""
    label: str
    """Display label, e.g. ``Faithfulness``."""
    direction: str
    """``higher`` or ``lower`` is better."""
    gated: bool
    """Whether the metric is gated (only gated metrics decide ``status`` and blocking)."""
    status: TrendStatus
    """ok / warning / critical, or insufficient (no full window, or no value)."""
    value: float | None
    """The run's mean."""
    baseline: float | None
    """Mean of the window (the previous ``window`` comparable entries with a value); None when insufficient."""
    drop: float | None
    """Relative drop from the baseline, positive = worse (see :func:`relative_drop`)."""
    window: tuple[float, ...] = ()
    """The window's values, oldest first."""
    window_sd: float | None = None
    """SD (ddof 1) of the window's values: main's run-to-run spread, drift included."""
    run_se: float | None = None
    """The run's own repeat standard error (None with one repeat)."""
    noise_sd: float | None = None
    """SD of (value − baseline) if nothing changed: from the runs' repeat standard errors when every run has one,
    else from the window's SD (which a drift within the window inflates); None when unknown."""
    beyond_noise: bool | None = None
    """Whether the worsening exceeds NOISE_Z × ``noise_sd``; None when the noise is unknown."""
    recent: tuple[tuple[str, float], ...] = ()
    """Up to ``gate.history.trend.CHART_POINTS`` last comparable entries with a value, ``(label, value)``, oldest
    first (for charts)."""
    note: str = ""
    """Why the status is ``insufficient``."""


@dataclass(frozen=True)
class TrendReport:
    """A run against the main-branch history: one :class:`MetricTrend` per metric of the run."""

    policy: TrendPolicy
    """Window and thresholds used."""
    run: str
    """Label of the evaluated run (short sha, or ``head``)."""
    timestamp: str | None
    """When the evaluated run finished (ISO 8601), if known."""
    n_entries: int
    """Valid entries read from the history."""
    skipped: tuple[tuple[str, int], ...]
    """(reason, count) of entries left out of the windows: not comparable (golden set, config), same commit."""
    problems: tuple[str, ...]
    """History lines that could not be read (file:line: message)."""
    metrics: tuple[MetricTrend, ...]
    """One trend per metric of the run, in the run's order."""

    @property
    def status(self) -> TrendStatus:
        """The worst status over gated metrics (``insufficient`` when none has a baseline)."""
        gated = [m.status for m in self.metrics if m.gated]
        if not gated or all(s == "insufficient" for s in gated):
            return "insufficient"
        return max(gated, key=lambda s: LEVEL[s])

    def blocks(self, level: TrendBlock) -> bool:
        """Whether a gated metric reached ``level`` (``never``: never blocks)."""
        return level != "never" and any(m.gated and LEVEL[m.status] >= LEVEL[level] for m in self.metrics)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (report.json's ``trend``; ``history check --format json``)."""
        data = asdict(self)
        data["status"] = self.status
        data["skipped"] = dict(self.skipped)
        data["metrics"] = [m | {"recent": [list(p) for p in m["recent"]]} for m in data["metrics"]]
        return data
