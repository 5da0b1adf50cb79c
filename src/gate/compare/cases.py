"""The per-case findings of a comparison: regressed, suspected, improved and flaky cases, and out-of-domain failures.

Also the triage of a regressed case (why it regressed) and the failed predictions and judge calls of both sides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gate.comparison import (
    MESSAGE_LIMIT,
    CaseEntry,
    CaseMetric,
    Cause,
    Claim,
    ErrorEntry,
    OodFailure,
    clip,
)
from gate.config import GatePolicy
from gate.metrics import resolve
from gate.models import GoldenCase, Prediction
from gate.runs import Side
from gate.stats import MetricInput, analyze_cases
from gate.stats.cases import CaseResult

LISTED = ("regressed", "suspected", "improved", "flaky")
"""The per-case lists of the comparison, in the order a case is claimed by them."""
REFUSAL = "refusal"
"""The metric whose scores say whether an out-of-domain repeat refused (:func:`gate.metrics.refusal.refusal`)."""


def _bad_claims(claims: Sequence[dict] | None) -> tuple[Claim, ...]:
    """Unsupported and contradicted claims of a side's first judged answer, with their closest chunk."""
    if claims is None:
        return ()
    return tuple(
        Claim(
            claim=clip(c.get("claim", "")) or "",
            verdict=c.get("verdict", ""),
            chunk_id=c.get("chunk_id"),
            chunk_text=clip(c.get("chunk_text")),
            similarity=float(c.get("similarity") or 0.0),
            contradiction_level=c.get("contradiction_level", "NONE"),
            reason=clip(c.get("reason", "")) or "",
            unsupported_facts=tuple(str(f) for f in c.get("unsupported_facts") or ()),
            p_hallucinated=c.get("p_hallucinated"),
        )
        for c in claims
        if c.get("verdict") != "supported"
    )


def top_k(policy: GatePolicy) -> int:
    """The k of "an expected document fell out of head's top k": the largest k of the policy's metrics, else 5."""
    return max((resolve(name).k or 0 for name in policy.metrics), default=0) or 5


def dropped_docs(case: GoldenCase, base: Prediction | None, head: Prediction | None, k: int) -> tuple[str, ...]:
    """Expected documents in base's top k that are not in head's top k (none unless both sides answered)."""
    if base is None or head is None:
        return ()
    in_base, in_head = set(base.retrieved_ids[:k]), set(head.retrieved_ids[:k])
    return tuple(doc for doc in case.expected_doc_ids if doc in in_base and doc not in in_head)


def _refused(side: Side, cases: Sequence[GoldenCase]) -> np.ndarray:
    """The side's scored ``refusal`` of ``cases``, shape (len(cases), R): 1 refused, 0 answered, NaN no value."""
    values, _ = side.scores.matrix(REFUSAL, [side.scores.index[case.id] for case in cases])
    return values


def _rates(refused: np.ndarray) -> np.ndarray:
    """Share of each case's repeats with a value that refused, shape (N,) (NaN where no repeat has one)."""
    counted = (~np.isnan(refused)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counted > 0, np.nansum(refused, axis=1) / counted, np.nan)


def case_results(inputs: Sequence[MetricInput], broke: np.ndarray) -> dict[int, list[CaseResult]]:
    """Per-case results that list a case, by case row.

    Regressed, suspected and flaky over the gated binary/graded metrics; improved over every binary/graded metric.
    A refusal that got worse is listed as an out-of-domain failure instead; one that got better is an improvement.

    With a single observation per side (R = 1) no per-case test exists: a flip beyond τ is listed as regressed,
    and its evidence says it is one observation. A case the pipeline broke (``broke``: answered on base in every
    repeat, failed on head in every repeat) is regressed on ``error_rate`` whatever its per-case p-value: a crash
    is the system failing, not noise.
    """
    per_case: dict[int, list[CaseResult]] = {}
    for inp in inputs:
        if inp.kind == "ratio":  # timings: a per-case speed-up on a shared runner is mostly noise
            continue
        if not inp.gated or resolve(inp.name).spec.out_of_domain:
            # improvements are listed on every metric (an out-of-domain question now refused included)
            for result in analyze_cases(inp):
                if result.status == "improved":
                    per_case.setdefault(result.index, []).append(result)
            continue
        scores_failures = resolve(inp.name).spec.scores_failures
        for result in analyze_cases(inp):
            result = listed_as(result, broke=bool(broke[result.index]) and scores_failures)
            if result.status in LISTED:  # only listed cases are kept: 100,000 unchanged ones cost memory
                per_case.setdefault(result.index, []).append(result)
    return per_case


def listed_as(result: CaseResult, *, broke: bool) -> CaseResult:
    """The statistical verdict of :func:`gate.stats.analyze_cases` as the report lists it.

    Two ``suspected`` (or weaker) results are listed as ``regressed``: a drop beyond τ seen once per side (R = 1:
    no per-case test exists, the evidence column says it is one observation), and a case the pipeline broke on a
    metric that scores failures (``broke``: a crash is the system failing, not noise). Every other status is kept.
    """
    if (result.status == "suspected" and result.single_observation) or broke:
        return replace(result, status="regressed")
    return result


def _best_rank(prediction: Prediction | None, expected: Sequence[str]) -> int | None:
    """1-based rank of the first expected document in the prediction's retrieved list, None when absent."""
    if prediction is None:
        return None
    ids = prediction.retrieved_ids
    return next((rank for rank, doc in enumerate(ids, start=1) if doc in expected), None)


def triage(
    case: GoldenCase, base: Prediction | None, head: Prediction | None, dropped: Sequence[str], metrics: Sequence[str]
) -> Cause:
    """Why a case regressed: the pipeline failed, retrieval got worse, generation got worse, or both.

    Retrieval got worse when an expected document in base's top k fell out of head's (``dropped``) or the rank of
    the first expected document dropped (or it vanished). Generation got worse when the case regressed on a
    generation metric (answers, faithfulness, refusals).

    Args:
        case: the golden case.
        base: base's first valid prediction (None when every repeat failed).
        head: head's first valid prediction (None when every repeat failed: the cause is ``error``).
        dropped: expected documents in base's top k and not in head's.
        metrics: names of the metrics the case regressed on.

    Returns:
        ``error``, ``retrieval``, ``generation`` or ``retrieval+generation``.
    """
    stages = {resolve(name).spec.stage for name in metrics}
    if head is None or "system" in stages:
        return "error"
    before, after = _best_rank(base, case.expected_doc_ids), _best_rank(head, case.expected_doc_ids)
    retrieval = bool(dropped) or "retrieval" in stages or (before is not None and (after is None or after > before))
    if retrieval and "generation" in stages:
        return "retrieval+generation"
    return "retrieval" if retrieval else "generation"


def _mean_latency(valid: Sequence[Prediction]) -> float | None:
    """The mean ``latency_ms`` of a case's valid predictions that measured it (None: none did)."""
    values = [p.latency_ms for p in valid if p.latency_ms is not None and math.isfinite(p.latency_ms)]
    return sum(values) / len(values) if values else None


def _first_error(side: Side, case_id: str) -> str | None:
    return next((side.table.error(case_id, r) for r in range(side.repeats) if side.table.error(case_id, r)), None)


def case_lists(
    base: Side,
    head: Side,
    cases: Sequence[GoldenCase],
    per_case: dict[int, list[CaseResult]],
    k_docs: int,
    *,
    batch: int = 1024,
) -> dict[str, tuple[CaseEntry, ...]]:
    """The regressed, suspected, improved and flaky lists (a regressed case is listed once, under regressed).

    The answers and claims of ``batch`` listed cases are read at a time: at R = 1 most cases of a large golden set
    flip one way or the other, and holding every listed case's predictions and claims at once would cost hundreds
    of MB at 100,000 cases.
    """

    def entry(i: int, status: str, read: dict[str, Any]) -> CaseEntry:
        case = cases[i]
        b_pred, h_pred = read["base"][case.id], read["head"][case.id]
        results = [r for r in per_case.get(i, []) if r.status == status]
        dropped = dropped_docs(case, b_pred, h_pred, k_docs)
        worse = status in ("regressed", "suspected")
        return CaseEntry(
            id=case.id,
            question=clip(case.question) or "",
            line=case.line,
            metrics=tuple(
                CaseMetric(
                    name=r.metric,
                    base=r.base_mean,
                    head=r.head_mean,
                    effect=r.effect,
                    p_value=r.p_value,
                    p_adjusted=r.p_adjusted,
                    status=r.status,
                    evidence="single observation" if r.single_observation else "tested",
                )
                for r in results
            ),
            cause=triage(case, b_pred, h_pred, dropped, [r.metric for r in results]) if worse else None,
            answer_base=clip(b_pred.answer if b_pred else None),
            answer_head=clip(h_pred.answer if h_pred else None),
            identical_answer=b_pred is not None and h_pred is not None and b_pred.answer == h_pred.answer,
            error=clip(_first_error(head, case.id), MESSAGE_LIMIT),
            claims=_bad_claims(read["claims"][case.id]),
            dropped_docs=dropped,
            expected_doc_ids=case.expected_doc_ids,
            latency_ms=_mean_latency(read["valid"][case.id]),
        )

    lists = {}
    for status in LISTED:
        chosen = [i for i, rs in per_case.items() if any(r.status == status for r in rs)]
        if status != "regressed":
            chosen = [i for i in chosen if not any(r.status == "regressed" for r in per_case[i])]
        effects = {i: [r.effect for r in per_case[i] if r.status == status] for i in chosen}
        if status == "improved":
            order = sorted(chosen, key=lambda i: (-max(effects[i]), cases[i].id))
        else:
            order = sorted(chosen, key=lambda i: (min(effects[i]), cases[i].id))
        entries: list[CaseEntry] = []
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            ids = [cases[i].id for i in chunk]
            read = {
                "base": base.first_valid_many(ids),
                "head": head.first_valid_many(ids),
                "valid": head.valid_many(ids),  # for the latency
                "claims": head.scores.claims_many(ids),
            }
            entries += (entry(i, status, read) for i in chunk)
        lists[status] = tuple(entries)
    return lists


def ood_failures(
    base: Side, head: Side, cases: Sequence[GoldenCase], policy: GatePolicy, *, batch: int = 1024
) -> list[OodFailure]:
    """Out-of-domain cases that head answered in most valid repeats, new ones first (read ``batch`` at a time).

    Whether a repeat refused is read from each side's ``refusal`` scores (1 refused, 0 answered; no value where the
    prediction failed), as scoring decided it: none are listed when ``refusal`` is not among the policy's metrics.
    """
    if REFUSAL not in policy.metrics:
        return []
    out = []
    ood = [case for case in cases if case.out_of_domain]
    for start in range(0, len(ood), batch):
        chunk = ood[start : start + batch]
        base_rates, head_refused = _rates(_refused(base, chunk)), _refused(head, chunk)
        head_rates = _rates(head_refused)
        failing = [i for i, rate in enumerate(head_rates) if not math.isnan(rate) and rate < 0.5]
        valid = head.valid_many([chunk[i].id for i in failing])  # only the listed cases' predictions are read
        for i in failing:
            case = chunk[i]
            prediction = next((p for p in valid[case.id] if head_refused[i, p.repeat] == 0.0), None)
            out.append(
                OodFailure(
                    id=case.id,
                    question=clip(case.question) or "",
                    line=case.line,
                    answer=clip(prediction.answer if prediction else None),
                    new=bool(base_rates[i] == 1.0 and head_rates[i] == 0.0),
                    base_refusal_rate=float(base_rates[i]),
                    head_refusal_rate=float(head_rates[i]),
                    latency_ms=_mean_latency(valid[case.id]),
                )
            )
    return sorted(out, key=lambda f: (not f.new, f.id))


def error_entries(sides: Sequence[Side], ids: set[str]) -> tuple[ErrorEntry, ...]:
    """Failed predictions and judge calls of both sides, for the cases in ``ids``."""
    out = []
    for side in sides:
        for case_id, repeat, error in side.table.error_rows():
            if case_id in ids:
                out.append(ErrorEntry(side.label, case_id, repeat, None, clip(error, MESSAGE_LIMIT) or ""))
        for score in side.scores.errors:
            if score.message.startswith("judge"):
                message = clip(score.message, MESSAGE_LIMIT) or ""
                out.append(ErrorEntry(side.label, score.id, score.repeat, score.metric, message))
    return tuple(out)
