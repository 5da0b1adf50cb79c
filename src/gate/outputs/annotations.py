"""GitHub Actions annotations (``::error`` / ``::warning`` workflow commands) for a comparison's failing cases.

Source: GitHub Actions "Workflow commands for GitHub Actions" (annotations, escaping of data and properties).
"""

from __future__ import annotations

from typing import Literal

from gate.comparison import Comparison
from gate.sanitize import WorkflowCommand, visible

MAX_ANNOTATIONS = 10
"""GitHub shows at most 10 error annotations per step; the rest are counted in one more line."""


def escape_data(text: str) -> str:
    """Escape the message of a workflow command: ``%`` → ``%25``, CR → ``%0D``, LF → ``%0A``.

    Lone CRs are kept as ``%0D`` (the runner splits lines on CR too); control and invisible characters are dropped
    and lone surrogates replaced (:func:`gate.sanitize.visible`).
    """
    text = visible(text)
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command property value: as :func:`escape_data`, plus ``:`` → ``%3A``, ``,`` → ``%2C``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: Literal["error", "warning", "notice"],
    message: str,
    *,
    title: str | None = None,
    file: str | None = None,
    line: int | None = None,
) -> WorkflowCommand:
    """Format an ``::error`` / ``::warning`` / ``::notice`` workflow command (one line, escaped).

    Args:
        level: annotation level.
        message: free text; newlines become ``%0A``.
        title: annotation title.
        file: path relative to the repository root.
        line: 1-based line in ``file``.

    Returns:
        e.g. ``::error file=eval/golden.jsonl,line=7,title=rag-gate::case q7 regressed``.
    """
    props = {"file": file, "line": line, "title": title}
    rendered = ",".join(f"{key}={escape_property(str(value))}" for key, value in props.items() if value is not None)
    return WorkflowCommand(f"::{level}{' ' + rendered if rendered else ''}::{escape_data(message)}")


def render_annotations(comparison: Comparison, golden_file: str | None = None) -> WorkflowCommand:
    """Annotation lines for new out-of-domain failures and regressed cases (errors), old OOD failures (warnings).

    Errors come first; at most :data:`MAX_ANNOTATIONS` cases get a line of their own and one more line counts the
    rest. Each line points at the case's line in the golden file when ``golden_file`` is given.

    Args:
        comparison: what to annotate.
        golden_file: the golden set's path relative to the repository root.

    Returns:
        The workflow commands, one per line (empty when nothing failed).
    """
    found: list[tuple[Literal["error", "warning"], int, str, str]] = []
    for case in comparison.ood_failures:
        title = f"out-of-domain case {case.id} {'is now answered' if case.new else 'is not refused'}"
        found.append(("error" if case.new else "warning", case.line, title, f"{case.question}\nanswer: {case.answer}"))
    for case in comparison.regressed_cases:
        moves = ", ".join(f"{m.name} {m.base:.3g} → {m.head:.3g}" for m in case.metrics)
        found.append(("error", case.line, f"case {case.id} regressed", f"{case.question}\n{moves}"))
    found.sort(key=lambda item: item[0] != "error")
    lines = [
        annotation(level, message, title=f"rag-gate: {title}", file=golden_file, line=line or None)
        for level, line, title, message in found[:MAX_ANNOTATIONS]
    ]
    if len(found) > MAX_ANNOTATIONS:
        lines.append(annotation("error", f"{len(found) - MAX_ANNOTATIONS} more cases: see the PR comment"))
    return WorkflowCommand("\n".join(lines))
