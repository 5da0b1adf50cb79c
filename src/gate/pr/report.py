"""How a PR run reports on GitHub and on stdout: the sticky comment, the job summary, step outputs and annotations.

Everything goes through a :class:`Reporter`, made before anything else can fail, so that an error, a pull request
that adds rag-gate ("not gated yet") and a finished comparison are all reported the same way, redacted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gate import outputs
from gate.comparison import Comparison
from gate.errors import GateError
from gate.outputs import Output
from gate.outputs.annotations import annotation
from gate.outputs.escape import escape_markdown
from gate.outputs.markdown import render_error_comment, sticky_marker
from gate.pr import github as gh
from gate.redact import Redactor
from gate.sanitize import WorkflowCommand
from gate.trends import TrendReport

if TYPE_CHECKING:
    from github import Github

log = logging.getLogger("rag-gate")


@dataclass(frozen=True)
class Reporter:
    """Where one ``rag-gate pr`` run reports: the pull request's sticky comment, the job's files and stdout."""

    context: gh.GithubContext
    """The run's GitHub context (the pull request, the summary and output files)."""
    emit: Callable[[str], None]
    """Writes one line to stdout, redacted (workflow commands, and the comment in local mode)."""
    redact: Redactor
    """Removes the secrets from every text that leaves rag-gate."""
    client: Callable[[], Github] | None = None
    """Makes the GitHub client the comment is posted with (:func:`gate.pr.github.client_factory`: the token stays
    in its closure, never in this output object); None: no token."""
    comment: bool = True
    """Post the sticky comment (``--comment``)."""
    config: str = "rag-gate.yml"
    """The config's path as the user gave it: one sticky comment per config."""

    @property
    def marker(self) -> str:
        """The hidden marker of this config's sticky comment."""
        return sticky_marker(self.config)

    def post_comment(self, markdown: str) -> tuple[str, str | None, str]:
        """Post or edit the config's sticky comment; returns (status, url, warning), never raises for GitHub failures.

        The body and the warning are redacted: a server that echoes the request's ``Authorization`` header puts the
        token in the exception.
        """
        from github import GithubException
        from requests import RequestException

        context = self.context
        if context.pr_number is None:
            return "local", None, ""
        if not self.comment:
            return "disabled", None, ""
        if self.client is None or not context.repository:
            return "failed", None, f"no GitHub token (from {gh.TOKEN_SOURCES}): comment not posted."
        try:
            client = self.client()
            body = self.redact(markdown)
            done = gh.upsert_comment(client, context.repository, context.pr_number, body, marker=self.marker)
        except (GithubException, RequestException) as exc:
            warning = "the PR comment could not be posted: " + gh.explain_failure(exc, context)
            return "failed", None, self.redact(warning)
        return done.action, done.url, ""

    def comparison(
        self,
        comparison: Comparison,
        render_options: outputs.RenderOptions,
        out: Path,
        repo: Path,
        *,
        status: str,
        url: str | None,
        warning: str,
    ) -> None:
        """Job summary, step outputs and annotations for a finished comparison (redacted, like everything printed)."""
        context, emit = self.context, self.emit
        if warning:
            emit(annotation("warning", warning, title="rag-gate: comment not posted"))
        if context.step_summary is not None:
            note = f"> [!WARNING]\n> {warning}\n\n" if warning else ""
            summary = note + outputs.render(comparison, Output.SUMMARY, render_options)
            gh.append_summary(context.step_summary, self.redact(summary))
        if context.output is not None:
            root = context.workspace or repo
            gh.write_outputs(
                context.output,
                {
                    "verdict": comparison.verdict,
                    "regressed-count": len(comparison.regressed_cases),
                    "ood-failure-count": len(comparison.ood_failures),
                    "report-path": relative(outputs.path(out, Output.JSON), root),
                    "comment-path": relative(outputs.path(out, Output.COMMENT), root),
                    "comment-url": url or "",
                    "comment-status": status,
                },
                self.redact,
            )
        if context.in_actions and (lines := outputs.render(comparison, Output.ANNOTATIONS, render_options)):
            emit(lines)

    def trend(self, trend: TrendReport | None, note: str) -> None:
        """The trend's step output and annotation, or a warning when the history could not be read.

        The "Trend vs main" section itself is part of the comparison, so the comment and the summary show it.
        """
        context = self.context
        if note:
            log.warning(note)
            if context.in_actions:
                self.emit(annotation("warning", note, title="rag-gate: trend vs main skipped"))
        if trend is None:
            return
        if context.output is not None:
            gh.write_outputs(context.output, {"trend-status": trend.status})
        if context.in_actions and trend.status in ("warning", "critical"):
            worst = [m.label for m in trend.metrics if m.gated and m.status == trend.status]
            self.emit(
                annotation("warning", f"trend vs main: {trend.status.upper()} ({', '.join(worst)})", title="rag-gate")
            )

    def error(self, exc: GateError) -> None:
        """The job summary, annotation and outputs of an error (:func:`report_error`)."""
        report_error(exc, self.context, self.emit, self.redact)

    def error_comment(self, exc: GateError) -> None:
        """Replace the config's sticky comment by "no verdict was reached" (exit 2 or 3).

        A stale verdict of an earlier push never stays on the pull request.
        """
        kind = error_kind(exc)
        markdown = render_error_comment(exc.exit_code, kind, str(exc), marker=self.marker, config=self.config)
        status, _, warning = self.post_comment(markdown)
        if warning and self.context.in_actions:
            self.emit(annotation("warning", warning, title="rag-gate: comment not posted"))
        if status in ("created", "updated"):
            log.info("sticky comment %s: no verdict", status)

    def not_gated(self, exc: GateError) -> None:
        """The pull request that adds rag-gate: a notice, a job summary line and ``verdict=skipped`` (no comment)."""
        context = self.context
        if context.in_actions:
            self.emit(annotation("notice", str(exc), title="rag-gate: not gated yet"))
        if context.step_summary is not None:
            gh.append_summary(context.step_summary, f"## rag-gate: not gated yet\n\n{escape_markdown(str(exc))}\n")
        if context.output is not None:
            gh.write_outputs(
                context.output, {"verdict": "skipped", "regressed-count": 0, "ood-failure-count": 0, "report-path": ""}
            )


def error_kind(exc: GateError) -> str:
    """What an error's exit code means, for the summary and the comment."""
    return "bad input or usage" if exc.exit_code == 2 else "the evaluation itself could not run"


def report_error(exc: GateError, context: gh.GithubContext, emit: Callable[[str], None], redact: Redactor) -> None:
    """Put a user-facing error in the job summary, an ``::error`` annotation and the ``verdict`` output (redacted)."""
    kind = error_kind(exc)
    message = "\n\n".join(escape_markdown(redact(line), limit=2000) for line in exc.lines())  # untrusted: escaped
    if context.in_actions:
        emit(annotation("error", str(exc), title=f"rag-gate: {kind} (exit {exc.exit_code})"))
    if context.step_summary is not None:
        gh.append_summary(
            context.step_summary,
            f"## rag-gate: error (exit {exc.exit_code}: {kind})\n\n{message}\n\n"
            "No verdict was reached; exit code 1 is reserved for a regression. "
            f"Fix the cause above and re-run; documentation: {gh.DOCS_URL}\n",
        )
    if context.output is not None:
        gh.write_outputs(
            context.output, {"verdict": "error", "regressed-count": 0, "ood-failure-count": 0, "report-path": ""}
        )


def relative(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` when inside it (paths inside the container mean nothing outside)."""
    if root is not None:
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            pass
    return str(path)


def redacting(emit: Callable[[str], None], redact: Redactor) -> Callable[[str], None]:
    """``emit`` with every line redacted first (rag-gate's own workflow commands stay commands)."""

    def emit_redacted(line: str) -> None:
        emit(WorkflowCommand(redact(line)) if isinstance(line, WorkflowCommand) else redact(line))

    return emit_redacted


def redact_exception(exc: BaseException, redact: Redactor) -> None:
    """Redact an exception's message in place, before the CLI prints it."""
    if exc.args and isinstance(exc.args[0], str):
        exc.args = (redact(exc.args[0]), *exc.args[1:])
    if isinstance(exc, GateError) and exc.problems:
        exc.problems = tuple(redact(problem) for problem in exc.problems)
