"""The ``rag-gate`` command line (click). Thin: parses options, calls ``gate.flow``, maps errors to exit codes.

Exit codes (DESIGN §6): 0 pass · 1 regression (the gate failed) · 2 bad input or usage · 3 the evaluation
itself could not run.
"""

from __future__ import annotations

import functools
import json
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gate import __version__
from gate.errors import GateError, InputError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _shard(value: str | None) -> tuple[int, int] | None:
    if not value:
        return None
    try:
        index, count = (int(part) for part in value.split("/"))
    except ValueError:
        raise InputError(f"--shard {value}: expected i/n, e.g. 2/4") from None
    return index, count


class _EchoHandler(logging.Handler):
    """Log records from the core modules go to stderr as ``rag-gate: message`` lines."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"rag-gate: {record.getMessage()}", err=True)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def handle_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn GateError into a one-line stderr message and its exit code; unexpected errors exit 3."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = click.get_current_context().find_root().params.get("debug", False)
        try:
            return command(*args, **kwargs)
        except GateError as exc:
            if debug:
                traceback.print_exc()
            click.echo(f"rag-gate: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("rag-gate: interrupted; results so far are on disk (re-run to resume)", err=True)
            sys.exit(3)
        except Exception as exc:  # noqa: BLE001 - a bug or an environment failure: exit 3, never 1
            if debug:
                traceback.print_exc()
            click.echo(f"rag-gate: internal error: {type(exc).__name__}: {exc} (re-run with --debug)", err=True)
            sys.exit(3)

    return wrapper


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="rag-gate")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def main(debug: bool) -> None:
    """rag-gate: a regression gate for RAG systems.

    \b
    Evaluate the base and the head of a change on a golden set, compare them with
    paired statistics, and fail when answers got worse.
    Exit codes: 0 pass · 1 regression · 2 bad input · 3 evaluation could not run.
    """
    logger = logging.getLogger("rag-gate")
    if not any(isinstance(h, _EchoHandler) for h in logger.handlers):
        logger.addHandler(_EchoHandler())
        logger.setLevel(logging.INFO)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)  # a cancelled CI job: stop cleanly, keep what is on disk


@main.command()
@click.argument("golden", type=click.Path(dir_okay=False, path_type=Path))
@handle_errors
def validate(golden: Path) -> None:
    """Check a golden set; print every problem as file:line: field: message.

    \b
    Example:
      rag-gate validate eval/golden.jsonl
    """
    from gate.golden import check_golden

    cases, problems = check_golden(golden)
    for problem in problems:
        click.echo(problem, err=True)
    if problems:
        raise InputError(f"{golden}: {len(problems)} problem(s)")
    n_ood = sum(c.out_of_domain for c in cases)
    click.echo(f"{golden}: {len(cases)} cases ({n_ood} out-of-domain) — OK")


@main.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The side's rag-gate.yml.",
)
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Run directory.")
@click.option("--repeats", type=click.IntRange(min=1), help="Runs per case (overrides the config).")
@click.option("--shard", "shard_text", metavar="I/N", help="Run only the I-th of N shards of the golden set.")
@click.option("--git-sha", help="Commit of this side, recorded in the manifest.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
@handle_errors
def run(
    config_path: Path,
    out: Path,
    repeats: int | None,
    shard_text: str | None,
    git_sha: str | None,
    progress: bool | None,
) -> None:
    """Run the golden set through one side's pipeline and score it.

    Writes OUT/predictions.jsonl, OUT/scores.jsonl and OUT/manifest.json, incrementally:
    re-running the same command resumes an interrupted run.

    \b
    Example:
      rag-gate run --config examples/squad/base.yml --out out/base
    """
    from gate.config import load_config
    from gate.flow import run_side

    config = load_config(config_path, repeats=repeats)
    show = sys.stderr.isatty() if progress is None else progress
    run_side(config, out, repeats=repeats, progress=show, git_sha=git_sha, shard_spec=_shard(shard_text))
    counts = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["counts"]
    click.echo(
        f"wrote {out}: {counts['predictions']} predictions ({counts['prediction_errors']} failed), "
        f"{counts['scores']} scores ({counts['judge_failures']} judge failures)",
        err=True,
    )


@main.command()
@click.argument("base", type=click.Path(exists=True, path_type=Path))
@click.argument("head", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--golden",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Golden set (required when BASE/HEAD are predictions files).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Evaluation settings (metrics, margins, judge); default: those of the BASE run.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("rag-gate-report"),
    show_default=True,
    help="Where report.json and comment.md go.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
    help="What to print on stdout.",
)
@click.option("--strict", is_flag=True, help="Treat an inconclusive verdict as fail.")
@handle_errors
def compare(
    base: Path, head: Path, golden: Path | None, config_path: Path | None, out: Path, fmt: str, strict: bool
) -> None:
    """Compare BASE and HEAD (run directories or predictions JSONL files).

    Prints the comment (or the JSON report), writes OUT/report.json and OUT/comment.md,
    and exits 0 on pass or inconclusive, 1 on fail.

    \b
    Example:
      rag-gate compare out/base out/head --out out/report
      rag-gate compare --golden golden.jsonl base.jsonl head.jsonl --out out/report
    """
    from gate.config import load_config
    from gate.flow import compare_runs

    config = load_config(config_path) if config_path else None
    outcome = compare_runs(base, head, out, config=config, golden=golden, strict=strict)
    if fmt == "json":
        click.echo(outcome.report_path.read_text(encoding="utf-8"), nl=False)
    else:
        click.echo(outcome.comment)
    click.echo(f"verdict: {outcome.verdict} (report: {outcome.report_path})", err=True)
    sys.exit(outcome.exit_code)


@main.command()
@click.argument("shards", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Merged run directory.")
@handle_errors
def merge(shards: tuple[Path, ...], out: Path) -> None:
    """Merge the run directories of sharded runs (run --shard i/n) into one.

    \b
    Example:
      rag-gate run --config rag-gate.yml --shard 1/2 --out runs/s1
      rag-gate run --config rag-gate.yml --shard 2/2 --out runs/s2
      rag-gate merge runs/s1 runs/s2 --out runs/head
    """
    from gate.flow import merge_runs

    merge_runs(list(shards), out)
    click.echo(f"wrote {out}", err=True)


# The pr command lives in its own module (it has many options) and builds on the helpers above.
from gate.cli_pr import pr  # noqa: E402

main.add_command(pr)
