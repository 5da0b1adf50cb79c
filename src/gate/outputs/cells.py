"""What each cell of the metric table and each per-case line says, as plain text (no markup, no untrusted text).

Shared by the markdown comment and the terminal text, so both read the same: one number format
(:mod:`gate.stats.numbers`), gate statuses only on gated metrics, the direction of change on the others.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gate.adaptive import NOT_DECIDED, decided_look
from gate.comparison import CaseMetric, ChangedFile, Comparison, JudgeUsage, MetricRow, PairwiseReport, SideInfo
from gate.metrics import resolve
from gate.stats import numbers

GATE_STATUS = {
    "pass": "✅ pass",
    "fail": "❌ fail",
    "inconclusive": "⚠️ inconclusive",
    "not_applicable": "➖ not applicable",
}
"""How a gated metric's status reads."""
ARROW = {"rose": "↑", "fell": "↓", "unchanged": "="}
"""How a movement reads."""
REFUSAL_METRICS = frozenset({"refusal", "false_refusal"})
"""Per-case values of these metrics are "refused" (1) or "answered" (0)."""
CLIPPED_MARK = "†"
"""Follows an interval that was cut to the range of a difference of scores."""
LENGTH_CHANGE_NOTE = 0.25
"""Relative change in mean answer length (25 %) from which the notes name the metrics that move with length alone. At
the lexical judge's measured false-alarm rate (about 4 % of the claims of answers people judge faithful, on
RAGTruth's development half) a quarter more words adds enough claims to move the per-answer hallucination rate by
more than its 0.03 margin (README, "How good is the lexical judge?"); token F1 and exact match count extra words
against the answer."""
LENGTH_SENSITIVE = {
    "answer_f1": "reference",
    "exact_match": "reference",
    "hallucination_rate": "lexical",
    "faithfulness": "lexical",
}
"""Metrics that move with answer length alone: ``reference`` (token F1 and exact match: extra words are counted
against the answer, with any judge), ``lexical`` (under the lexical judge: each claim is one more chance of a false
alarm). The gated ``grounded_answer_rate`` averages over an answer's claims, so length alone does not move it."""
LEXICAL_SCOPE_NOTE = (
    "The lexical judge scores each claim by the words, numbers, dates and names it adds to the retrieved chunks and "
    "checks negation, listed antonyms and roles (who did what to whom); a false statement written with the chunks' "
    'own words passes it, so a ✅ on these rows is not "no hallucination": an LLM judge (`judge: {name: llm}`, '
    'README "Judges") reads meaning.'
)
"""The one line under a comparison judged by the lexical judge: what its generation rows can and cannot see."""


@dataclass(frozen=True)
class MetricCells:
    """One row of the metric table, cell by cell."""

    metric: str
    """The label, with the statistic when it is not the mean."""
    base: str
    """Base's value (the statistic the test is about)."""
    head: str
    """Head's value."""
    delta: str
    """head − base (``×`` ratio for ratio metrics)."""
    interval: str
    """The interval of ``delta``, marked when clipped."""
    p: str
    """The Holm-adjusted p of a gated metric; ``–`` for the others (their raw p is in the run details)."""
    status: str
    """Gate status (gated metrics) or direction of change (the others)."""
    counts: str
    """Paired cases worse / tied / better on head, e.g. ``6 / 42 / 0`` (``–`` when not recorded)."""


def movement(row: MetricRow) -> str:
    """The direction of change of a metric: ``↓ worse``, ``↑ better, within noise``, ``= unchanged``."""
    if row.moved is None or row.change is None:
        return GATE_STATUS["not_applicable"]
    if row.change == "unchanged":
        return f"{ARROW['unchanged']} unchanged"
    noise = "" if row.beyond_noise else ", within noise"
    return f"{ARROW[row.moved]} {row.change}{noise}"


def gate_status(row: MetricRow) -> str:
    """A gated metric's status; a passing metric whose point estimate favours head reads ``better``.

    In an adaptive run, a metric the looks decided reads ``❌ fail at look 2 (sequential test)`` (or ``✅ pass …``),
    one the run did not decide before it stopped early ``⚠️ not decided (stopped early)``.
    ``✅ better`` when the interval excludes no change, ``✅ better, not significant (non-inferior)`` when it
    excludes a worsening of the margin only, ``✅ better, not significant`` otherwise: an improvement is never
    shown as inconclusive.
    """
    if row.status == "inconclusive" and row.reason.startswith(NOT_DECIDED):
        return f"⚠️ {NOT_DECIDED}"
    if (look := decided_look(row.reason)) is not None:
        return f"{GATE_STATUS[row.status]} at look {look} (sequential test)"
    if row.status != "pass" or row.change != "better":
        return GATE_STATUS[row.status]
    if row.ci_low > 0:
        return "✅ better"
    return "✅ better, not significant" + (" (non-inferior)" if row.non_inferior else "")


def counts_cell(row: MetricRow) -> str:
    """``worse / tie / better``: paired cases whose per-case value got worse, stayed, got better on head.

    ``–`` when no case is paired: nothing was compared (``0 / 0 / 0`` would read as a measurement).
    """
    if row.n_worse is None or row.n_tied is None or row.n_better is None or row.n_pairs == 0:
        return numbers.MISSING
    return f"{row.n_worse} / {row.n_tied} / {row.n_better}"


def metric_cells(row: MetricRow) -> MetricCells:
    """The cells of a metric's row: what the test compares, the same way on every output."""
    if row.kind == "ratio":
        delta = numbers.ratio(row.ratio)
        interval = f"[{numbers.ratio(row.ratio_ci_low)}, {numbers.ratio(row.ratio_ci_high)}]"
    else:
        delta = numbers.number(row.difference, signed=True)
        low, high = (numbers.number(x, signed=True) for x in (row.difference_ci_low, row.difference_ci_high))
        interval = f"[{low}, {high}]" + (f" {CLIPPED_MARK}" if row.ci_clipped else "")
    if row.n_pairs == 0:
        interval = numbers.MISSING
    gated = row.gated and row.status != "not_applicable"
    return MetricCells(
        metric=row.label if row.statistic == "mean" else f"{row.label}, {row.statistic}",
        base=numbers.number(row.base_value),
        head=numbers.number(row.head_value),
        delta=delta,
        interval=interval,
        p=numbers.p_value(row.p_adjusted) if gated else numbers.MISSING,
        status=gate_status(row) if row.gated else f"{movement(row)} · not gated",
        counts=counts_cell(row),
    )


@dataclass(frozen=True)
class MethodNote:
    """One line of the methods legend under the run details' table: a test, its interval and the rows that use it."""

    name: str
    """The short name the table's ``test`` column shows (the test's name without its variant)."""
    variant: str
    """The rest of the test's description (:attr:`~gate.stats.decision.MetricResult.test_method`): its sidedness,
    exact or Monte Carlo, over cases or clusters, e.g. ``(one-sided, head worse, Monte Carlo B=10000 over cases)``."""
    interval: str
    """How the interval was made (its inversion, :attr:`~gate.stats.decision.MetricResult.ci_method`)."""
    metrics: tuple[str, ...]
    """The labels of the metrics tested this way, in table order."""


def method_name_of(test_method: str) -> str:
    """A test's short name: its description up to the variant in parentheses (``McNemar exact``)."""
    return test_method.split(" (", 1)[0]


def method_name(row: MetricRow) -> str:
    """The test's short name for a table cell: ``McNemar exact``, ``sign-flip randomization`` (legend: the rest)."""
    return method_name_of(row.test_method)


def method_legend(rows: Sequence[MetricRow]) -> list[MethodNote]:
    """Each distinct (test, interval) of the table once, with the metrics tested that way (first use first).

    The run details' table names each row's test by its short name (:func:`method_name`); this says each method in
    full once instead of on every row.
    """
    groups: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        groups.setdefault((row.test_method, row.ci_method), []).append(row.label)
    return [
        MethodNote(method_name_of(test), test[len(method_name_of(test)) :].strip(), interval, tuple(labels))
        for (test, interval), labels in groups.items()
    ]


def _case_value(name: str, value: float) -> str:
    if name not in REFUSAL_METRICS:
        return numbers.number(value)
    if value in (0.0, 1.0):
        return "refused" if value == 1.0 else "answered"
    return f"refused in {numbers.percent(value)}"


def case_change(m: CaseMetric, label: str) -> str:
    """One metric of one case: ``Hit rate@5: 1.000 → 0.000, worse (single observation)``.

    Refusal metrics read ``refused → answered``; the word says whether that is better or worse for the metric.
    """
    word = "worse" if m.effect < 0 else "better" if m.effect > 0 else "unchanged"
    evidence = "single observation" if m.evidence == "single observation" else numbers.p_clause("p adj.", m.p_adjusted)
    return f"{label}: {_case_value(m.name, m.base)} → {_case_value(m.name, m.head)}, {word} ({evidence})"


def margin_cell(row: MetricRow) -> str:
    """The margin: absolute for binary and graded metrics, relative (``10 %``) for ratio metrics.

    A margin given relative to the base's value shows the effective margin and its rule: ``0.020 (50 % of base)``.
    """
    if row.kind == "ratio":
        return numbers.percent(row.margin)
    rule = f" ({numbers.percent(row.margin_relative)} of base)" if row.margin_relative is not None else ""
    return numbers.number(row.margin) + rule


def policy_changes_text(comparison: Comparison) -> str:
    """The PR's changes to the gate's policy in one line: ``key old → new; …`` (empty when none)."""
    return "; ".join(f"{c.key} {c.base} → {c.head}" for c in comparison.policy_changes)


def mde_cell(row: MetricRow) -> str:
    """The minimum detectable worsening, in the margin's units (a relative change for ratio metrics)."""
    if row.kind == "ratio":
        return numbers.MISSING if math.isnan(row.mde) else numbers.percent(math.expm1(row.mde))
    return numbers.number(row.mde)


def no_mde_text(comparison: Comparison) -> str:
    """Why no gated metric has a minimum detectable worsening, in words (the MDE needs a noise estimate).

    The MDE is undefined where fewer than 2 cases are paired, and where the per-case differences (head − base) do
    not vary (standard error 0: e.g. identical sides), however much the metric itself varies from case to case.
    """
    gated = [m for m in comparison.metrics if m.gated and m.status != "not_applicable"]
    if not gated:
        return "no gated metric applies to these cases"
    few = [m.label for m in gated if m.n_pairs < 2]
    flat = [m.label for m in gated if m.n_pairs >= 2 and not math.isfinite(m.mde)]
    parts = [f"{', '.join(few)} had fewer than 2 paired cases"] if few else []
    if flat:
        whose = "every gated metric" if len(flat) == len(gated) else ", ".join(flat)
        parts.append(f"the per-case differences (head − base) of {whose} did not vary from case to case")
    return "; ".join(parts) + ", so the noise (and the smallest change the test can detect) is unknown"


def _one_column(name: str) -> bool:
    """A metric with one value per case by design (a paired judge's verdict), whatever the repeats."""
    try:
        return resolve(name).spec.paired
    except ValueError:
        return False


def collapsed_repeats(comparison: Comparison) -> str:
    """Which metrics' repeats gave identical results and so count once (a deterministic pipeline); "" when none.

    With ``repeats: 3`` a deterministic retrieval metric repeats one observation: counting its repeats as
    independent would claim evidence that is not there, so each case counts once (one observation per side).
    """
    if comparison.repeats.base == 1 and comparison.repeats.head == 1:
        return ""
    once = [
        m.label for m in comparison.metrics if m.n_pairs and m.r_base == 1 and m.r_head == 1 and not _one_column(m.name)
    ]
    if not once:
        return ""
    return (
        "repeats that gave identical results on every case count once (a deterministic pipeline repeats one "
        f"observation): {', '.join(once)}"
    )


def ood_counts(comparison: Comparison) -> str:
    """The out-of-domain failures in a few words: "N new, M not new", or "not scored" without ``refusal`` scores.

    Out-of-domain failures are read from the ``refusal`` scores; a config whose ``metrics:`` leave it out checks
    none (must-pass out-of-domain cases are checked by their own rule), and "0 new" would claim a check that never
    ran.
    """
    if comparison.n_out_of_domain and not any(m.name == "refusal" for m in comparison.metrics):
        return "not scored (refusal is not in metrics)"
    return f"{comparison.new_ood_failures} new, {len(comparison.ood_failures) - comparison.new_ood_failures} not new"


def table_notes(comparison: Comparison) -> list[str]:
    """The notes under the metric table: what ``×`` rows compare, clipped intervals, gated timings."""
    notes = []
    if any(m.kind == "ratio" for m in comparison.metrics):
        notes.append(
            "Rows with × compare geometric means of the per-case values (Δ is their ratio head/base, "
            "which the test is about)."
        )
    if any(m.ci_clipped for m in comparison.metrics):
        notes.append(
            f"{CLIPPED_MARK} interval cut to [-1, +1], the range of a difference of two scores in [0, 1] "
            "(on few cases the test cannot rule out any difference at this level)."
        )
    notes.extend(_generation_notes(comparison))
    timed = [m.label for m in comparison.gated if m.timed]
    if timed:
        notes.append(
            f"{', '.join(timed)} is gated: wall-clock time on a shared CI runner also measures the runner's other "
            "load, so it is noisy; a dedicated runner or more repeats make it dependable. Each pipeline worker's "
            "first call (cold start) is left out."
        )
    return notes


def _generation_notes(comparison: Comparison) -> list[str]:
    """Under judged generation rows: the change in mean answer length, and what the lexical judge checks."""
    if not any(resolve(m.name).spec.judged for m in comparison.metrics):
        return []
    notes = []
    lexical = any(s.judge is not None and s.judge.id == "lexical" for s in (comparison.base, comparison.head))
    before, after = comparison.base.mean_answer_words, comparison.head.mean_answer_words
    if before is not None and after is not None:
        change = (after - before) / before if before > 0 else (math.inf if after > 0 else 0.0)
        shown = f"{change:+.0%}" if math.isfinite(change) else "from none"
        line = f"Mean answer length: base {before:,.0f} → head {after:,.0f} words ({shown})."
        names = {m.name for m in comparison.metrics}
        moved = [
            f"`{name}`" for name, why in LENGTH_SENSITIVE.items() if name in names and (why == "reference" or lexical)
        ]
        if moved and abs(change) >= LENGTH_CHANGE_NOTE:
            line += (
                f" A change of {LENGTH_CHANGE_NOTE:.0%} or more moves {', '.join(moved)} by length alone (token F1 and "
                "exact match count extra words against the answer; the lexical judge has one more chance of a false "
                "alarm per claim); `grounded_answer_rate` averages over an answer's claims and does not."
            )
        notes.append(line)
    if lexical:
        notes.append(LEXICAL_SCOPE_NOTE)
    return notes


def warmup_text(side: SideInfo) -> str:
    """Each worker's first call on one side, e.g. ``2 worker start(s): 11,681 and 12,522 ms``; "" when none."""
    if not side.warmup_ms:
        return ""
    shown = ", ".join(f"{ms:,.0f}" for ms in side.warmup_ms[:8]) + (" …" if len(side.warmup_ms) > 8 else "")
    return f"{len(side.warmup_ms)} worker start(s): {shown} ms"


def usage_text(usage: JudgeUsage | None) -> str:
    """A judge's calls on one line; ``no API calls`` for an offline judge; "" when not recorded.

    E.g. ``80 requests (2 retries, 1 failed), 12 cached · 52,310 in / 4,120 out tokens · $0.0312``.
    """
    if usage is None:
        return ""
    if usage.requests == 0 and usage.cache_hits == 0 and usage.failures == 0:
        return "no API calls"
    extra = [f"{usage.retries} retries"] if usage.retries else []
    extra += [f"{usage.failures} failed"] if usage.failures else []
    text = f"{usage.requests:,} requests" + (f" ({', '.join(extra)})" if extra else "")
    text += f", {usage.cache_hits:,} cached" if usage.cache_hits else ""
    text += f" · {usage.input_tokens:,} in / {usage.output_tokens:,} out tokens"
    text += " · cost not priced" if usage.cost_usd is None else f" · ${usage.cost_usd:.4f}"
    return text + (f" · stopped: {usage.stopped}" if usage.stopped else "")


def pairwise_text(pairwise: PairwiseReport) -> str:
    """The pairwise judge's outcome on one line: wins, ties (why), losses and the sign test."""
    why = [f"{pairwise.order_disagreements} split by the order shown"] if pairwise.order_disagreements else []
    why += [f"{pairwise.identical} identical answers"] if pairwise.identical else []
    ties = f"{pairwise.ties} ties" + (f" ({', '.join(why)})" if why else "")
    left = f" · {pairwise.not_judged} not judged" if pairwise.not_judged else ""
    return (
        f"head won {pairwise.wins}, {ties}, lost {pairwise.losses}{left} · sign test on wins vs losses, "
        f"one-sided p {numbers.p_value(pairwise.p_value)}"
    )


def files_total(files: Sequence[ChangedFile]) -> str:
    """``3 file(s), +12 -4``: how much a change touched (binary files count as files only)."""
    added = sum(f.added or 0 for f in files)
    deleted = sum(f.deleted or 0 for f in files)
    return f"{len(files)} file(s), +{added} -{deleted}"


def file_change(f: ChangedFile) -> str:
    """``+10 -2`` for a text file, ``binary`` otherwise."""
    return "binary" if f.added is None or f.deleted is None else f"+{f.added} -{f.deleted}"
