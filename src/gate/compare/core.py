""":func:`compare`: two loaded sides → a typed :class:`~gate.comparison.Comparison`.

Per-metric deltas and statistics (:mod:`gate.stats`) over the score matrices of :mod:`gate.compare.inputs`, the
per-case lists, triage and out-of-domain failures of :mod:`gate.compare.cases`, the must-pass failures of
:mod:`gate.compare.mustpass`, the golden-set changes and warnings of :mod:`gate.compare.notes`, and the gate's
verdict (decided in :mod:`gate.stats.decision`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from gate import __version__
from gate.compare.cases import case_lists, case_results, error_entries, ood_failures, top_k
from gate.compare.inputs import metric_inputs, refused_everywhere, shown_values, system_errors
from gate.compare.mustpass import must_pass_failures
from gate.compare.notes import (
    changes,
    golden_changes,
    golden_warnings,
    unmatched_ids,
    unreadable_warnings,
)
from gate.comparison import (
    MESSAGE_LIMIT,
    SCHEMA_VERSION,
    ChangedFile,
    Comparison,
    JudgeInfo,
    PairwiseCase,
    PairwiseReport,
    Repeats,
    SideAggregates,
    SideInfo,
    clip,
    metric_row,
)
from gate.config import GatePolicy
from gate.golden import GoldenDiff, ood_unchecked_warning
from gate.metrics import resolve
from gate.models import GoldenCase
from gate.results import MetricResult, Status
from gate.runs import Side
from gate.scoring import PairwiseRun
from gate.stats import analyze_metrics, sign_test
from gate.stats.decision import gate_decision
from gate.stats.summary import aggregate


def _mean_answer_words(side: Side, cases: Sequence[GoldenCase], *, batch: int = 2048) -> float | None:
    """Mean words per answer over the in-domain ``cases``' valid predictions (every repeat); None without any.

    Predictions are read ``batch`` at a time.
    """
    ids = [c.id for c in cases if not c.out_of_domain]
    failed = side.table.error_mask(ids) if ids else np.zeros((0, side.repeats), dtype=bool)
    keys = [(case_id, r) for k, case_id in enumerate(ids) for r in range(side.repeats) if not failed[k, r]]
    if not keys:
        return None
    words = [
        len(p.answer.split())
        for start in range(0, len(keys), batch)
        for p in side.table.read(keys[start : start + batch])
    ]
    return float(np.mean(words))


def _side_info(side: Side, cases: Sequence[GoldenCase] = ()) -> SideInfo:
    m = side.manifest
    judge = m.judge
    return SideInfo(
        label=side.label,
        git_sha=m.git_sha,
        git_ref=m.git_ref,
        golden_sha256=m.golden_sha256,
        config_sha256=m.config_sha256,
        judge=JudgeInfo(str(judge.id), str(judge.version)) if judge else None,
        repeats=side.repeats,
        n_cases=len(side.golden),
        n_prediction_errors=side.table.n_errors,
        warmup_ms=side.table.warmup_ms(),
        judge_usage=m.judge_usage,
        mean_answer_words=_mean_answer_words(side, cases),
    )


def pairwise_report(run: PairwiseRun, cases: Sequence[GoldenCase]) -> PairwiseReport:
    """The pairwise judge's wins, ties and losses over ``cases``, with the sign test and the judge's cost.

    The p-value is the one-sided exact sign test of wins against losses (ties left out,
    :func:`gate.stats.sign_test`); with one pair per case and no clusters it equals the ``head_win_rate`` metric's
    exact McNemar p.
    """
    ids = {c.id for c in cases}
    judged = {case_id: j for case_id, j in run.judgments if case_id in ids}
    entries = []
    for case in cases:
        j = judged.get(case.id)
        entries.append(
            PairwiseCase(
                id=case.id,
                outcome=None if j is None else j.outcome,
                base_first=None if j is None else j.base_first,
                head_first=None if j is None else j.head_first,
                reason=clip(" | ".join(r for r in (j.reason_base_first, j.reason_head_first) if r) if j else "") or "",
                identical=bool(j is not None and j.identical),
                error=None if j is None else clip(j.error, MESSAGE_LIMIT),
            )
        )
    count = Counter(e.outcome for e in entries)
    wins, losses = count["win"], count["loss"]
    split = sum(e.base_first in ("base", "head") and e.head_first in ("base", "head") and e.base_first != e.head_first
                for e in entries)  # fmt: skip
    return PairwiseReport(
        judge=JudgeInfo(run.judge_id, run.judge_version),
        wins=wins,
        ties=count["tie"],
        losses=losses,
        order_disagreements=split,
        identical=sum(e.identical for e in entries),
        not_judged=count[None],
        win_rate=wins / (wins + losses) if wins + losses else math.nan,
        p_value=sign_test(wins, losses, alternative="less").p_value,
        usage=run.usage,
        cases=tuple(entries),
    )


Decided = Mapping[str, tuple[Status, str]] | Callable[[Sequence[MetricResult]], Mapping[str, tuple[Status, str]]]
"""Statuses an adaptive evaluation decided (metric → (status, reason)), or a function of the fixed-N results that
gives them."""


def compare(
    base: Side,
    head: Side,
    policy: GatePolicy,
    *,
    diff: GoldenDiff | None = None,
    files: Sequence[ChangedFile] | None = None,
    commits: str | None = None,
    pairwise: PairwiseRun | None = None,
    decided: Decided | None = None,
) -> Comparison:
    """Compare two loaded sides under ``policy`` (the base's evaluation settings).

    Cases are paired by id over the cases present in both golden sets (head's order); cases only on one side are
    listed under ``unpaired_cases`` and, with a golden-set change, in ``warnings``. Per-metric statistics come
    from :func:`gate.stats.analyze_metrics`, per-case lists from :func:`gate.stats.analyze_cases` over the gated
    binary and graded metrics, and the verdict from :func:`gate.stats.decision.gate_decision`. Cases the PR added
    (``diff``, under ``golden_changes: base``) are left out of the metrics, which are gated on the base's cases,
    and checked case by case: per-case lists, system errors and out-of-domain failures cover every paired case.

    Args:
        base: the base side (its run, loaded and scored).
        head: the head side.
        policy: metrics, margins, α, seed, strict mode, error budget and out-of-domain rule.
        diff: how the head's golden set differs from the base's, when the sides were evaluated on the contract
            (reported as ``golden_changes``).
        files: the files changed between base and head (the PR flow's ``git diff``), when known.
        commits: the range ``files`` is of.
        pairwise: the pairwise judge's verdicts (their ``head_win_rate`` rows are in the sides' scores), reported
            as ``pairwise``.
        decided: metric → (status, reason) an adaptive evaluation's sequential test decided
            (:mod:`gate.compare.sequential`); they replace those metrics' fixed-N status and reason. A function
            gets the fixed-N results and returns them (an adaptive run that stopped early keeps some fixed-N fails).

    Returns:
        The :class:`~gate.comparison.Comparison`; the same inputs give an equal comparison.
    """
    base_ids, head_ids = {c.id for c in base.golden}, {c.id for c in head.golden}
    cases = [c for c in head.golden if c.id in base_ids]
    # The metrics are gated on the base's cases: cases a PR adds must not dilute a regression on them. Added cases
    # are checked case by case (regressions listed; a crash or a new out-of-domain failure still fails the gate).
    added = {c.id for c in diff.added} if diff is not None and policy.golden_changes == "base" else set()
    contract = [c for c in cases if c.id not in added]
    inputs, budget = metric_inputs(base, head, contract, policy)
    results = analyze_metrics(inputs, alpha=policy.alpha, seed=policy.seed, strict=policy.strict)
    if callable(decided):
        decided = decided(results)
    if decided:
        results = [replace(r, status=decided[r.name][0], reason=decided[r.name][1]) if r.name in decided else r
                   for r in results]  # fmt: skip
    base_errors, head_errors = system_errors(base, cases), system_errors(head, cases)
    broke = ~base_errors.any(axis=1) & head_errors.all(axis=1)
    case_inputs = metric_inputs(base, head, cases, policy)[0] if added else inputs
    lists = case_lists(base, head, cases, case_results(case_inputs, broke), top_k(policy))
    ood = ood_failures(base, head, cases, policy)
    must_pass = must_pass_failures(base, head, cases, policy, inputs)
    unmatched = unmatched_ids(base, head, contract, inputs)
    gated_retrieval = any(resolve(n).spec.stage == "retrieval" for n in policy.gated)
    decision = gate_decision(
        results,
        new_ood_failures=sum(f.new for f in ood),
        refusal=next((r for r in results if resolve(r.name).spec.out_of_domain), None),
        fail_on_new_ood=policy.fail_on_new_ood,
        alpha=policy.alpha,
        new_system_failures=int(broke.sum()),
        refused_on_base=refused_everywhere(base, [cases[i].id for i in np.flatnonzero(broke)], policy),
        budget=budget,
        error_budget=policy.error_budget,
        strict=policy.strict,
        unscorable=(unmatched,) if unmatched and gated_retrieval else (),
        must_pass=must_pass,
    )
    if unmatched and not gated_retrieval:
        decision = replace(decision, warnings=(*decision.warnings, unmatched))
    system_share = {
        "base": base_errors.mean() if base_errors.size else 0.0,
        "head": head_errors.mean() if head_errors.size else 0.0,
    }
    rate = max((use.rate + system_share[use.side] for use in budget), default=max(system_share.values()))
    rows = tuple(
        metric_row(
            result,
            label=resolve(inp.name).label,
            aggregates=SideAggregates(aggregate(inp.base), aggregate(inp.head)),
            base_value=(shown := shown_values(inp))[0],
            head_value=shown[1],
            statistic="geometric mean" if inp.kind == "ratio" else "mean",
            margin_relative=policy.relative_margin(inp.name),
        )
        for result, inp in zip(results, inputs, strict=True)
    )
    return Comparison(
        schema_version=SCHEMA_VERSION,
        verdict=decision.verdict,
        reasons=decision.reasons,
        warnings=decision.warnings
        + base.warnings
        + head.warnings
        + tuple(golden_warnings(base, head, len(cases), len(base_ids ^ head_ids)))
        + tuple(unreadable_warnings((base, head), cases, policy))
        + tuple(ood_unchecked_warning(cases, policy.metrics)),
        gate_version=__version__,
        n_cases=len(contract),
        n_out_of_domain=sum(c.out_of_domain for c in contract),
        repeats=Repeats(base.repeats, head.repeats),
        seed=policy.seed,
        alpha=policy.alpha,
        strict=policy.strict,
        error_rate=float(min(rate, 1.0)),
        error_budget=policy.error_budget,
        error_budget_use=tuple(use for use in budget if use.failed),
        base=_side_info(base, contract),
        head=_side_info(head, contract),
        metrics=rows,
        regressed_cases=lists["regressed"],
        suspected_cases=lists["suspected"],
        improved_cases=lists["improved"],
        flaky_cases=lists["flaky"],
        ood_failures=tuple(ood),
        new_ood_failures=sum(f.new for f in ood),
        unpaired_cases=tuple(sorted(base_ids ^ head_ids)),
        errors=error_entries((base, head), base_ids | head_ids),
        golden_changes=golden_changes(head, diff, policy) if diff else None,
        changes=changes(base, head, files, commits),
        pairwise=pairwise_report(pairwise, cases) if pairwise is not None else None,
        must_pass_failures=tuple(must_pass),
    )
