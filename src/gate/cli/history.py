"""The ``rag-gate history`` commands: add a run to the main-branch history, check the trend, chart it, calibrate.

Exit codes: 0 fine (or an alarm below ``--fail-on``) · 1 a gated metric reached the ``--fail-on`` level · 2 bad
input (a missing history or run, bad options; a damaged history line is skipped with a warning naming file:line) ·
3 the history or an output cannot be written, or an internal error.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gate.cli.common import CONTEXT, aggregate_lines, handle_errors
from gate.errors import InputError
from gate.sanitize import inert_json, one_line, shown

HISTORY_FILE = click.Path(dir_okay=False, path_type=Path)
RUN_DIR = click.Path(exists=True, file_okay=False, path_type=Path)
NO_MATPLOTLIB = "charts need matplotlib, which is not installed (pip install 'rag-gate[plot]')"
"""Why ``history show`` draws no chart: the one line it prints (a note, or with ``--charts`` the error)."""


def _matplotlib() -> bool:
    """Whether matplotlib imports (it draws the charts; the ``plot`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def policy_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--config``, ``--window``, ``--warning``, ``--critical``: the trend policy (flags override the config)."""
    options = [
        click.option(
            "--config",
            "config_path",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="rag-gate.yml whose trend: settings and gated metrics apply (default: built-in defaults).",
        ),
        click.option("--window", type=click.IntRange(min=1), help="Previous comparable entries averaged [4]."),
        click.option(
            "--warning",
            type=click.FloatRange(min=0, max=1, min_open=True),
            help="Relative drop for WARNING, e.g. 0.05 = 5 % [0.05].",
        ),
        click.option(
            "--critical",
            type=click.FloatRange(min=0, max=1, min_open=True),
            help="Relative drop for CRITICAL [0.10].",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def resolve_policy(
    config_path: Path | None, window: int | None, warning: float | None, critical: float | None
) -> tuple[Any, tuple[str, ...] | None]:
    """(TrendPolicy, gated metrics or None) from the config and the flags.

    Raises:
        InputError: a bad config, or critical below warning.
    """
    from gate.config import TrendPolicy, load_config

    trend, gated = TrendPolicy(), None
    if config_path is not None:
        policy = load_config(config_path).policy
        trend, gated = policy.trend, policy.gated
    changes = {k: v for k, v in {"window": window, "warning": warning, "critical": critical}.items() if v is not None}
    trend = dataclasses.replace(trend, **changes)
    if trend.critical < trend.warning:
        raise InputError(f"--critical {trend.critical:g} is below --warning {trend.warning:g}")
    return trend, gated


def _git_default(*args: str) -> str | None:
    """Output of a git command in the current directory, or None outside a repository."""
    from gate.pr.git import git

    try:
        done = git(Path.cwd(), *args, check=False)
    except Exception:  # noqa: BLE001 - git missing: no default
        return None
    text = done.stdout.strip()
    return text if done.returncode == 0 and text and text != "HEAD" else None


def _appended(sha: str | None) -> str:
    """What ``history add`` appended: the commit's short sha, or an entry without one and why it has none."""
    if sha:
        return one_line(sha[:12])
    inside = _git_default("rev-parse", "--is-inside-work-tree") == "true"
    why = "the repository has no commit yet" if inside else "not in a git repository"
    return f"an entry without a git commit (the run's manifest names none and {why}; --sha sets one)"


@click.group(context_settings=CONTEXT)
def history() -> None:
    """The main-branch history and the trend alarm.

    \b
    Every run of main appends one entry (aggregates per metric) to a JSONL history;
    `check` compares the latest entry (or a run) with the mean of the previous
    comparable entries and raises WARNING / CRITICAL on a relative drop.

    \b
    Example:
      rag-gate history add runs/main --history history.jsonl
      rag-gate history check --history history.jsonl
    """  # noqa: D301


@history.command()
@click.argument("run_dir", type=RUN_DIR)
@click.option("--history", "history_path", required=True, type=HISTORY_FILE, help="The history file (created if new).")
@click.option("--sha", help="Commit of the run [the run's manifest, else git rev-parse HEAD].")
@click.option("--ref", help="Branch of the run [the run's manifest, else the current git branch].")
@click.option("--timestamp", help="ISO 8601 time of the run [when the run finished].")
@handle_errors
def add(run_dir: Path, history_path: Path, sha: str | None, ref: str | None, timestamp: str | None) -> None:
    """Append the entry of a finished run directory to the history.

    \b
    Example:
      rag-gate run --config rag-gate.yml --out runs/main
      rag-gate history add runs/main --history history.jsonl
    """  # noqa: D301
    from gate.history.entries import append_entry, entry_from_run
    from gate.runs import read_manifest

    manifest = read_manifest(run_dir)
    sha = sha or manifest.git_sha or _git_default("rev-parse", "HEAD")
    ref = ref or manifest.git_ref or _git_default("rev-parse", "--abbrev-ref", "HEAD")
    record = entry_from_run(run_dir, sha=sha, ref=ref, timestamp=timestamp)
    append_entry(history_path, record)
    click.echo(f"appended {_appended(sha)} to {shown(history_path)}:", err=True)
    for line in aggregate_lines(record["metrics"]):
        click.echo(f"  {line}", err=True)


@history.command()
@click.option("--history", "history_path", required=True, type=HISTORY_FILE, help="The history file.")
@click.option("--run", "run_dir", type=RUN_DIR, help="Check this run directory instead of the latest entry.")
@policy_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--fail-on",
    type=click.Choice(["critical", "warning", "never"]),
    default="critical",
    show_default=True,
    help="Exit 1 when a gated metric reaches this level.",
)
@handle_errors
def check(
    history_path: Path,
    run_dir: Path | None,
    config_path: Path | None,
    window: int | None,
    warning: float | None,
    critical: float | None,
    fmt: str,
    fail_on: str,
) -> None:
    """Check the latest entry (or --run) against the mean of the previous comparable entries.

    Prints per metric: value, baseline, relative drop (positive = worse), the window's SD,
    the run's own standard error, and ok / WARNING / CRITICAL. Exits 1 when a gated
    metric reaches --fail-on. A damaged line (cut, invalid, a value out of range) is
    skipped with a warning naming file:line; a missing history exits 2.

    \b
    Example:
      rag-gate history check --history history.jsonl --window 4 --warning 0.05 --critical 0.10
      rag-gate history check --history history.jsonl --run runs/head --format json
    """  # noqa: D301
    from gate.comparison import exit_code_for
    from gate.history.entries import HistoryEntry, entry_from_run, read_history
    from gate.history.trend import trend_report
    from gate.jsonl import clean_nan
    from gate.outputs.trend import to_text

    trend, gated = resolve_policy(config_path, window, warning, critical)
    read = read_history(history_path)
    for problem in read.problems:
        click.echo(f"rag-gate: warning: skipped {problem}", err=True)
    run = HistoryEntry(entry_from_run(run_dir)) if run_dir is not None else None
    report = trend_report(read.entries, run, trend=trend, gated=gated, problems=read.problems)
    if fmt == "json":
        click.echo(inert_json(json.dumps(clean_nan(report.to_dict()), indent=2, allow_nan=False)))
    else:
        click.echo(to_text(report, str(history_path)))
    sys.exit(exit_code_for(None, trend=report, trend_block=fail_on))  # type: ignore[arg-type]


@history.command()
@click.option("--history", "history_path", required=True, type=HISTORY_FILE, help="The history file.")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Output directory.")
@policy_options
@click.option("--metric", "metrics", multiple=True, help="Metric to chart (repeatable) [the gated metrics].")
@click.option(
    "--charts/--no-charts",
    default=None,
    help="Require the PNG charts (exit 2 without matplotlib), or write none [charts when matplotlib is installed].",
)
@handle_errors
def show(
    history_path: Path,
    out: Path,
    config_path: Path | None,
    window: int | None,
    warning: float | None,
    critical: float | None,
    metrics: tuple[str, ...],
    charts: bool | None,
) -> None:
    """Chart each gated metric over time (PNG, with warning/critical bands) and write a markdown table.

    Writes OUT/history.md and OUT/<metric>.png. Unreadable history lines are reported and skipped.
    Charts need matplotlib (pip install 'rag-gate[plot]'): without it, history.md is written with the tables only,
    a one-line note says how to get the charts, and the exit code is 0; with --charts it is exit 2 instead.

    \b
    Example:
      rag-gate history show --history history.jsonl --out history-report
    """  # noqa: D301
    from gate.files import make_dirs, write_text_atomic
    from gate.history.entries import read_history
    from gate.history.trend import trend_series
    from gate.outputs.trend import chart_name, history_markdown, plot_metric

    trend, gated = resolve_policy(config_path, window, warning, critical)
    read = read_history(history_path)
    for problem in read.problems:
        click.echo(f"rag-gate: skipped {problem}", err=True)
    series = trend_series(read.entries, trend=trend, gated=gated)
    last = read.entries[-1] if read.entries else None
    chosen = list(metrics) or list(gated or (last.gated if last else None) or (last.record["metrics"] if last else []))
    plot = charts is not False and bool(series) and bool(chosen)
    if plot and not _matplotlib():
        if charts:
            raise InputError(f"--charts: {NO_MATPLOTLIB}")
        plot = False
        click.echo(f"rag-gate: no charts: {NO_MATPLOTLIB}; history.md has the tables only", err=True)
    make_dirs(out)
    drawn: dict[str, str] = {}
    for name in chosen if plot else ():
        drawn[name] = plot_metric(series, name, out / chart_name(name)).name
    write_text_atomic(out / "history.md", history_markdown(series, chosen, drawn))
    click.echo(f"wrote {shown(out / 'history.md')} and {len(drawn)} chart(s)", err=True)


@history.command()
@click.argument("run_dirs", nargs=-1, required=True, type=RUN_DIR)
@policy_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handle_errors
def calibrate(
    run_dirs: tuple[Path, ...],
    config_path: Path | None,
    window: int | None,
    warning: float | None,
    critical: float | None,
    fmt: str,
) -> None:
    """Estimate each metric's run-to-run noise and suggest trend thresholds above it.

    Give several run directories of the same commit (or of a stable main), or one run made
    with repeats >= 2. Prints the noise, the suggested warning/critical thresholds (2 and 3
    noise SDs) and how often the current thresholds would alarm on a stable system.

    \b
    Example:
      for i in 1 2 3 4 5; do rag-gate run --config rag-gate.yml --out runs/aa$i; done
      rag-gate history calibrate runs/aa1 runs/aa2 runs/aa3 runs/aa4 runs/aa5
    """  # noqa: D301
    from gate.history.calibrate import calibrate as estimate
    from gate.history.entries import run_summary
    from gate.outputs.trend import fmt as num

    trend, _ = resolve_policy(config_path, window, warning, critical)
    results = estimate([run_summary(d) for d in run_dirs], trend)
    if fmt == "json":
        click.echo(inert_json(json.dumps([dataclasses.asdict(r) for r in results], indent=2)))
        return
    click.echo(
        f"{len(run_dirs)} run(s); window {trend.window}; current thresholds warning {trend.warning:g}, "
        f"critical {trend.critical:g}"
    )
    for r in results:
        if r.suggested_warning is None or r.suggested_critical is None:
            click.echo(
                f"{r.metric}: mean {num(r.mean)}, run-to-run SD {num(r.run_sd, 4)} ({r.method}): no relative "
                "threshold fits a metric whose mean is 0 but that varies (any change from 0 is an infinite drop)"
            )
            continue
        click.echo(
            f"{r.metric}: mean {num(r.mean)}, run-to-run SD {num(r.run_sd, 4)} ({r.method}), relative noise of the "
            f"drop {100 * r.relative_noise:.2f} % → suggested warning {r.suggested_warning:g}, critical "
            f"{r.suggested_critical:g}; false alarms per run at the current thresholds: warning "
            f"{100 * r.false_alarm_warning:.2g} %, critical {100 * r.false_alarm_critical:.2g} %"
        )
