"""The comparison as plain text for a terminal: the comment's content without markdown or its escapes.

A terminal shows markdown source literally (``hit\\_rate@5``, ``\\[-0.3, …\\]``), so ``rag-gate compare`` on a
terminal prints this instead. It holds the same figures as the comment (:mod:`gate.outputs.cells`), shorter lists,
and no untrusted text beyond single lines (control characters removed).
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.comparison import CaseEntry, Comparison
from gate.outputs import cells
from gate.sanitize import clean

MAX_ITEMS = 10
"""Cases listed per list; the rest are counted (every one is in ``report.json`` and ``comment.md``)."""
LINE_LIMIT = 160
"""Characters of untrusted text per line."""


def plain(text: object, limit: int = LINE_LIMIT) -> str:
    """Untrusted text on one line: control and invisible characters removed (:func:`gate.sanitize.clean`), cut."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    numeric = {1, 2, 3, 5, 6}  # base, head, Δ, p and the counts are right-aligned
    lines = []
    for row in rows:
        pairs = enumerate(zip(row, widths, strict=True))
        padded = (cell.rjust(w) if i in numeric else cell.ljust(w) for i, (cell, w) in pairs)
        lines.append("  ".join(padded).rstrip())
    return lines


def _more(items: Sequence[object], limit: int) -> list[str]:
    return [f"  … and {len(items) - limit} more (report.json, comment.md)"] if len(items) > limit else []


def _cases(title: str, cases: Sequence[CaseEntry], labels: dict[str, str], limit: int) -> list[str]:
    if not cases:
        return []
    out = ["", f"{title} ({len(cases)})"]
    for case in cases[:limit]:
        same = " · identical answer on both sides" if case.identical_answer else ""
        cause = f" · {case.cause}" if case.cause else ""
        out.append(f"- {plain(case.id, 200)}: {plain(case.question, 100)}{cause}{same}")
        out += [f"    {cells.case_change(m, labels.get(m.name, m.name))}" for m in case.metrics]
        if case.error:
            out.append(f"    head failed: {plain(case.error)}")
        if case.dropped_docs:
            out.append(f"    expected documents that fell out of the top k: {plain(', '.join(case.dropped_docs))}")
    return out + _more(cases, limit)


def render_text(comparison: Comparison, *, max_items: int = MAX_ITEMS) -> str:
    """Render ``comparison`` as plain text (verdict, reasons, the metric table, the lists, what changed).

    Args:
        comparison: what to render.
        max_items: cases listed per list.

    Returns:
        Text ending with a newline; no markdown, no escapes.
    """
    c = comparison
    labels = {m.name: m.label for m in c.metrics}
    out = [f"rag-gate: {c.verdict.upper()}", ""]
    out += [f"- {plain(reason, 400)}" for reason in c.reasons]
    out += [f"! {plain(warning, 400)}" for warning in c.warnings]
    if c.policy_changes:
        moved = plain(cells.policy_changes_text(c), 4000)
        out.append(f"! This PR changes the gate's policy (applies after merge; judged under the base's): {moved}")
    blocking = sum(f.certain for f in c.must_pass_failures)
    must = f"{len(c.must_pass_failures)} must-pass failed ({blocking} blocking) · " if c.must_pass_failures else ""
    regressed = f"{must}{len(c.regressed_cases)} regressed"
    out += [
        "",
        f"{c.n_cases} paired cases ({c.n_out_of_domain} out-of-domain) · repeats base {c.repeats.base} / head "
        f"{c.repeats.head}{f' ({once})' if (once := cells.collapsed_repeats(c)) else ''} · {regressed} · "
        f"out-of-domain failures: {cells.ood_counts(c)}",
        "",
    ]
    header = (
        "metric", "base", "head", "Δ (head − base)", "CI (Holm-adjusted level)", "p (Holm-adj.)",
        "worse / tie / better", "status",
    )  # fmt: skip
    rows = [header]
    for row in c.metrics:
        m = cells.metric_cells(row)
        rows.append((m.metric, m.base, m.head, m.delta, m.interval, m.p, m.counts, m.status))
    out += _table(rows)
    out += [f"  {note}" for note in cells.table_notes(c)]
    if c.must_pass_failures:
        out += ["", f"Must-pass cases that failed: {len(c.must_pass_failures)}"]
        out += [f"- {'blocking' if f.certain else 'not certain'} {plain(f.id, 200)}: {plain(f.question, 100)} · {f.why}"
                for f in c.must_pass_failures[:max_items]]  # fmt: skip
        out += _more(list(c.must_pass_failures), max_items)
    out += _cases("Regressed cases", c.regressed_cases, labels, max_items)
    new = [f for f in c.ood_failures if f.new]
    if c.ood_failures:
        out += ["", f"Out-of-domain failures: {len(new)} new, {len(c.ood_failures) - len(new)} not new"]
        out += [f"- new {plain(f.id, 200)}: {plain(f.question, 100)} → {plain(f.answer, 100)}" for f in new[:max_items]]
        out += _more(new, max_items)
    out += _cases("Suspected regressions, not significant", c.suspected_cases, labels, max_items)
    if c.errors:
        out += ["", f"Errors: {len(c.errors)} (see report.json)"]
    if c.changes is not None and c.changes.pipeline_diff:
        out += ["", "What changed: the config's pipeline: section, base → head"]
        out += [clean(line).replace("\n", " ")[:LINE_LIMIT] for line in c.changes.pipeline_diff]  # indentation kept
    if c.changes is not None and c.changes.files is not None:
        out += ["", f"Files changed ({c.changes.commits}): {cells.files_total(c.changes.files)}"]
        out += [f"  {plain(f.path)} ({cells.file_change(f)})" for f in c.changes.files[:max_items]]
        out += _more(c.changes.files, max_items)
    mde = [f"{m.label} {cells.mde_cell(m)}" for m in c.gated if m.mde == m.mde]
    if mde:
        out += ["", f"Minimum detectable worsening (80 % power): {' · '.join(mde)}"]
    return "\n".join(out) + "\n"
