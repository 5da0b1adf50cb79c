"""The ``rag-gate pr`` command: the GitHub Action's entry point, and its local equivalent (``--base-ref``).

Every action input reaches this command as one explicit flag, and an empty value (``""``, what an unset
input expands to) means "use the default", so ``docker run IMAGE pr --flag value`` reproduces a CI run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from gate.cli.common import CONTEXT, handle_errors, register_secrets
from gate.sanitize import print_line

ON = ("on", "true", "yes", "1")
OFF = ("off", "false", "no", "0")


def _blank_to_none(value: str | None) -> str | None:
    return value if value not in (None, "") else None


def _repeats(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    text = _blank_to_none(value)
    if text is None:
        return None
    if not text.isdigit() or int(text) < 1:
        raise click.BadParameter(f"expected a whole number ≥ 1, got {value!r}", ctx, param)
    return int(text)


def _switch(ctx: click.Context, param: click.Parameter, value: str | None) -> bool:
    text = (value or str(param.default or "off")).strip().lower()
    if text not in ON + OFF:
        raise click.BadParameter(f"expected on or off, got {value!r}", ctx, param)
    return text in ON


def _switch_or_config(ctx: click.Context, param: click.Parameter, value: str | None) -> bool | None:
    """``on``/``off`` (and their synonyms) as a bool; blank as None (the config decides)."""
    return None if not (value or "").strip() else _switch(ctx, param, value)


@click.command(context_settings=CONTEXT)
@click.option(
    "--config",
    "config",
    default="rag-gate.yml",
    show_default=True,
    help="The config file, relative to --working-directory.",
)
@click.option(
    "--base-ref",
    default="",
    metavar="REF",
    help="Compare with the merge base of REF and HEAD (local mode; no comment is posted).",
)
@click.option(
    "--github-token",
    default="",
    metavar="TOKEN",
    help="Token to comment with, for local use (default: $GITHUB_TOKEN). Ignored in GitHub Actions, where every "
    "process of the job can read a command line: the action passes the token in GITHUB_TOKEN only.",
)
@click.option(
    "--fail-on",
    default="fail",
    type=click.Choice(["fail", "inconclusive", "never", ""]),
    show_default=True,
    help="Which verdict exits 1: fail; inconclusive (and fail); never.",
)
@click.option("--repeats", default="", callback=_repeats, metavar="N", help="Runs per case on each side.")
@click.option(
    "--comment",
    default="on",
    callback=_switch,
    metavar="on|off",
    show_default=True,
    help="Post or update the sticky PR comment.",
)
@click.option("--cache-dir", default="", metavar="DIR", help="Base-results cache (persist it with actions/cache).")
@click.option(
    "--out-dir",
    default="rag-gate-out",
    show_default=True,
    metavar="DIR",
    help="Where base/, head/, report.json and comment.md are written.",
)
@click.option("--working-directory", default="", metavar="DIR", help="Directory to run in (default: current).")
@click.option(
    "--setup-command",
    default="",
    metavar="CMD",
    help="Shell command run first, e.g. 'pip install -r requirements.txt'.",
)
@click.option(
    "--allow-privileged-event",
    default="off",
    callback=_switch,
    metavar="on|off",
    show_default=True,
    help="Run on events that give a write token and secrets to code that can come from a fork "
    "(pull_request_target, workflow_run, issue_comment, ...); refused otherwise.",
)
@click.option(
    "--history",
    default="",
    metavar="FILE|off",
    help="Main-branch history: empty for the history branch (read on PRs, appended on pushes to the default "
    "branch), a JSONL file path relative to --working-directory, or off.",
)
@click.option(
    "--history-branch",
    default="",
    metavar="BRANCH",
    help="Branch that holds history.jsonl (default: rag-gate-history).",
)
@click.option(
    "--junit",
    default="",
    metavar="FILE",
    help="Also write JUnit XML (gated metrics, regressed cases) to FILE, relative to --working-directory.",
)
@click.option("--strict", is_flag=True, help="Treat an inconclusive verdict as fail.")
@click.option(
    "--adaptive",
    default="",
    callback=_switch_or_config,
    metavar="on|off",
    help="Adaptive evaluation: run the cases in a seeded random order, in batches, and stop once the verdict is "
    "settled (default: the base config's adaptive:).",
)
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: when stderr is a terminal).")
@handle_errors
def pr(
    config: str,
    base_ref: str,
    github_token: str,
    fail_on: str,
    repeats: int | None,
    comment: bool,
    cache_dir: str,
    out_dir: str,
    working_directory: str,
    setup_command: str,
    allow_privileged_event: bool,
    history: str,
    history_branch: str,
    junit: str,
    strict: bool,
    adaptive: bool | None,
    progress: bool | None,
) -> None:
    """Evaluate the PR head and its merge base, compare, and comment on the pull request.

    In GitHub Actions (a pull_request event) it posts one sticky comment, edited on every push,
    and writes the job summary, outputs and annotations. With --base-ref it runs locally: the
    comment is printed and written to disk. Exit codes: 0 pass, 1 regression (per --fail-on),
    2 bad input, 3 the evaluation could not run.

    \b
    Examples:
      rag-gate pr --base-ref main
      rag-gate pr --config rag-gate.yml --fail-on inconclusive --cache-dir .rag-gate-cache
    """  # noqa: D301 - click needs the real \b (backspace) character, a raw string would print "\b"
    from gate.pr.credentials import Credentials
    from gate.pr.flow import run_pr
    from gate.pr.run import NotGatedYet, PrOptions
    from gate.sandbox import protect_process

    credentials = Credentials.from_environ(os.environ, _blank_to_none(github_token))  # the one read of the secrets
    register_secrets(credentials.secrets)  # redacted from any error message
    protect_process(os.environ, [github_token])  # before any other process starts
    options = PrOptions(
        config=Path(config or "rag-gate.yml"),
        base_ref=_blank_to_none(base_ref),
        out_dir=Path(out_dir or "rag-gate-out"),
        fail_on=fail_on or "fail",  # type: ignore[arg-type]
        repeats=repeats,
        comment=comment,
        cache_dir=Path(cache_dir) if cache_dir else None,
        working_directory=Path(working_directory) if working_directory else None,
        setup_command=_blank_to_none(setup_command),
        allow_privileged_event=allow_privileged_event,
        history=_blank_to_none(history),
        history_branch=_blank_to_none(history_branch),
        junit=Path(junit) if junit else None,
        strict=strict,
        adaptive=adaptive,
        progress=sys.stderr.isatty() if progress is None else progress,
    )
    try:
        result = run_pr(options, os.environ, emit=print_line, credentials=credentials)
    except NotGatedYet as exc:
        click.echo(f"rag-gate: {exc}", err=True)
        sys.exit(0)
    cached = " (base from cache)" if result.base_cached else ""
    trend = f"; trend vs main: {result.trend.status}" if result.trend else ""
    click.echo(
        f"verdict: {result.verdict}; comment: {result.comment_status}; report: {result.report_path}{cached}{trend}",
        err=True,
    )
    sys.exit(result.exit_code)
