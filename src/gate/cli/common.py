"""What every ``rag-gate`` command shares: click settings and the one place where errors become exit codes.

Exit codes (DESIGN §6): 0 pass · 1 regression (the gate failed) · 2 bad input or usage · 3 the evaluation
itself could not run · 4 not settled: ``compare --adaptive`` reached no verdict yet, run the next batch
(:data:`NOT_SETTLED`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import click

from gate.errors import NUL_INPUT, GateError, InputError, is_nul_error
from gate.redact import Redactor
from gate.sanitize import one_line, print_line

NOT_SETTLED = 4
"""Exit code of ``rag-gate compare --adaptive`` when the looks over the stages run so far settle nothing: no verdict,
run the next batch (``--upto-batch k+1``) on both sides and compare again. Never 0: a workflow that stops there
fails closed."""

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class UsageLine(click.UsageError):
    """A usage error printed on one line, ``rag-gate: error: MESSAGE (see rag-gate CMD --help)``; exit code 2."""

    def __init__(self, message: str, ctx: click.Context | None = None, where: str | None = None) -> None:
        super().__init__(message, ctx)
        self.where = where or (ctx.command_path if ctx is not None else "rag-gate")
        """The command whose help the line points to."""

    def show(self, file: Any = None) -> None:
        """Print the one line (click's own ``show`` prints the usage, a hint, a blank line and the error)."""
        where = self.where
        line = f"rag-gate: error: {one_line(self.format_message())} (see {where} --help)"
        click.echo(line, file=file, err=file is None)


class OneLineUsage(click.Group):
    """The command group whose usage errors (unknown option or command, missing argument, bad value) are one line.

    Every usage error raised while the group or any command under it parses its arguments is raised again as
    :class:`UsageLine`, whose ``show`` click's standalone mode calls before exiting with 2; a command called
    without arguments still prints its help (click's ``NoArgsIsHelpError``).
    """

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        """click's, with a usage error made one line."""
        with _one_line_usage():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        """click's, with a usage error of a command under the group made one line."""
        with _one_line_usage(ctx):
            return super().invoke(ctx)


@contextlib.contextmanager
def _one_line_usage(group: click.Context | None = None) -> Iterator[None]:
    """Raise a usage error again as :class:`UsageLine`.

    One that click raises without a context (a missing option value) points to the help of the command being
    invoked under ``group``.
    """
    try:
        yield
    except (UsageLine, click.exceptions.NoArgsIsHelpError):
        raise
    except click.UsageError as exc:
        where = None
        if exc.ctx is None and group is not None and group.invoked_subcommand:
            where = f"{group.command_path} {group.invoked_subcommand}"
        raise UsageLine(exc.format_message(), exc.ctx, where) from None


def aggregate_lines(metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A run's aggregates as a small aligned table: per metric its mean, the cases with a value and the failed scores.

    Args:
        metrics: metric name → a history entry's per-metric object (``mean``, ``n``; ``failed`` when known, as
            :func:`gate.history.entries.run_aggregates` gives it).

    Returns:
        The table's lines (a header, then one line per metric); a mean is ``–`` when no case has a value. Means of
        metrics in [0, 1] have three decimals, others (latency, cost) four significant digits.
    """
    from gate.history.entries import value_range

    failed = any("failed" in numbers for numbers in metrics.values())
    rows = [["metric", "mean", "n", *(["failed"] if failed else [])]]
    for name, numbers in metrics.items():
        mean = numbers.get("mean")
        mean_text = "–" if mean is None else f"{mean:.3f}" if value_range(name) == (0.0, 1.0) else f"{mean:.4g}"
        rows.append([one_line(name), mean_text, str(numbers.get("n", 0)), *([str(numbers.get("failed", 0))] * failed)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))])
        for row in rows
    ]


def shard_option(value: str | None) -> tuple[int, int] | None:
    """Parse ``--shard I/N`` into ``(i, n)``; None when not given.

    Raises:
        InputError: the value is not ``i/n``.
    """
    if not value:
        return None
    try:
        index, count = (int(part) for part in value.split("/"))
    except ValueError:
        raise InputError(f"--shard {value}: expected i/n, e.g. 2/4") from None
    return index, count


class EchoHandler(logging.Handler):
    """Log records from the core modules go to stderr as ``rag-gate: message`` lines, secrets redacted."""

    def __init__(self) -> None:
        super().__init__()
        self.redact = Redactor.from_environ(os.environ)

    def emit(self, record: logging.LogRecord) -> None:
        """Echo one record, on one line (:func:`gate.sanitize.one_line`)."""
        print_line(self.redact(f"rag-gate: {one_line(record.getMessage())}"), err=True)


def terminate(signum: int, frame: Any) -> None:
    """SIGTERM and SIGHUP handler: stop as on Ctrl-C, so what is on disk stays consistent and workers are killed."""
    raise KeyboardInterrupt


SECRETS = "rag-gate.secrets"
"""Key of the secrets a command registered (:func:`register_secrets`) in its click context's ``meta``."""


def register_secrets(secrets: Iterable[str]) -> None:
    """Have :func:`handle_errors` redact ``secrets`` (a command's own, e.g. a token given as an option) too."""
    click.get_current_context().meta.setdefault(SECRETS, []).extend(secrets)


def handle_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn GateError into a one-line stderr message and its exit code; unexpected errors exit 3.

    A message is printed one line per problem, untrusted text in it on that line (:meth:`GateError.lines`), without
    the environment's secrets and those the command registered (:func:`register_secrets`).
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        context = click.get_current_context()
        debug = context.find_root().params.get("debug", False)

        def redact(text: str) -> str:
            return Redactor.from_environ(os.environ, extra=context.meta.get(SECRETS, ()))(text)

        try:
            return command(*args, **kwargs)
        except GateError as exc:
            if debug:
                traceback.print_exc()
            first, *more = exc.lines()
            for line in [f"rag-gate: error: {first}", *more]:
                print_line(redact(line), err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("rag-gate: interrupted; results so far are on disk (re-run to resume)", err=True)
            sys.exit(3)
        except Exception as exc:  # noqa: BLE001 - a bug or an environment failure: exit 3, never 1
            if debug:
                traceback.print_exc()
            if is_nul_error(exc):  # input the checks did not name: still bad input, not a crash
                print_line(f"rag-gate: error: {NUL_INPUT} (re-run with --debug to see where)", err=True)
                sys.exit(InputError.exit_code)
            message = f"rag-gate: internal error: {type(exc).__name__}: {one_line(exc)} (re-run with --debug)"
            print_line(redact(message), err=True)
            sys.exit(3)

    return wrapper
