"""Compare base with head: :func:`compare` turns two loaded sides into a typed :class:`~gate.comparison.Comparison`.

Per-metric deltas and statistics (:mod:`gate.stats`), regressed / suspected / improved / flaky cases, out-of-domain
failures, failed predictions and judge calls, and the gate's verdict (decided in :mod:`gate.stats.decision`).
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import yaml

from gate import __version__
from gate.comparison import (
    MESSAGE_LIMIT,
    SCHEMA_VERSION,
    CaseEntry,
    CaseMetric,
    Cause,
    ChangedFile,
    Changes,
    Claim,
    Comparison,
    DefinitionScore,
    EditedCase,
    ErrorEntry,
    GoldenChanges,
    JudgeInfo,
    OodFailure,
    PairwiseCase,
    PairwiseReport,
    Repeats,
    SideAggregates,
    SideInfo,
    clip,
    metric_row,
)
from gate.config import Evaluation
from gate.golden import GoldenDiff
from gate.language import f1_unreadable
from gate.metrics import resolve, score_case
from gate.models import GoldenCase, Prediction
from gate.runs import Side
from gate.scoring import PairwiseRun, detect_refusal
from gate.stats import MetricInput, analyze_cases, analyze_metrics, sign_test
from gate.stats.cases import CaseResult
from gate.stats.decision import ErrorBudgetUse, gate_decision
from gate.stats.inputs import case_effects
from gate.stats.summary import aggregate

LISTED = ("regressed", "suspected", "improved", "flaky")
"""The per-case lists of the comparison, in the order a case is claimed by them."""


def _rows(side: Side, cases: Sequence[GoldenCase]) -> np.ndarray:
    """Rows of ``cases`` in the side's matrices, shape (N,)."""
    return np.array([side.index[case.id] for case in cases], dtype=np.intp)


def score_matrix(side: Side, cases: Sequence[GoldenCase], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Values and evaluation-failure flags of one metric, each of shape (N cases, R repeats).

    A value is NaN where the metric does not apply, where the evaluation failed, or where the prediction failed
    (but for the metrics that score a failed prediction: error rate, and the latency and cost it consumed).
    ``failed`` marks evaluation failures: a score the judge or scorer could not produce, or a missing score row
    (a missing row is a failure, never "not applicable"). A failed prediction is a system error, counted by the
    ``error_rate`` metric, not an evaluation failure. A paired metric (``head_win_rate``) has one column: one
    judged pair of answers per case.
    """
    columns = 1 if resolve(metric).spec.paired else side.repeats
    values, failed = side.scores.matrix(metric, _rows(side, cases))
    values, failed = values[:, :columns], failed[:, :columns]
    failed &= ~system_errors(side, cases)[:, :columns]
    return values, failed


def system_errors(side: Side, cases: Sequence[GoldenCase]) -> np.ndarray:
    """Where the pipeline under test failed (a prediction row with ``error``), shape (N cases, R repeats)."""
    return side.table.error_mask([case.id for case in cases])


def budget_use(
    side: Side, cases: Sequence[GoldenCase], metric: str, failed: np.ndarray, *, unread: int = 0
) -> ErrorBudgetUse:
    """The evaluation failures of one metric on one side, with their most frequent reasons.

    ``unread`` of the failures are answers the judge could not read where the other side's were scored
    (:func:`_unreadable_by_change`).
    """
    ids = {c.id for c in cases}
    broken = side.table.error_mask(side.table.ids)
    reasons = Counter(
        clip(score.message, 120)
        for score in side.scores.errors
        if score.metric == metric
        and score.id in ids
        and score.repeat < side.repeats
        and not broken[side.table.index[score.id], score.repeat]
    )
    if unread:
        why = ", ".join(note for note, _ in side.scores.not_applicable.most_common(2))
        reasons[f"not judged ({why}) where the other side was"] = unread
    missing = int(failed.sum()) - sum(reasons.values())
    if missing > 0:
        reasons["no score row (scoring did not finish)"] = missing
    return ErrorBudgetUse(
        metric=metric,
        side=side.label,
        failed=int(failed.sum()),
        expected=int(failed.size),
        rate=float(failed.mean()) if failed.size else 0.0,
        messages=tuple(f"{n}× {reason}" for reason, n in reasons.most_common(3)),
    )


def collapse_constant_repeats(
    base: tuple[np.ndarray, np.ndarray], head: tuple[np.ndarray, np.ndarray]
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Keep one repeat when no case's valid values vary across repeats on either side.

    Repeats of a deterministic pipeline or metric (retrieval with a fixed index) repeat one observation; counting
    them as independent would make per-case tests see evidence that is not there (STATISTICS.md §6 item 5).

    Args:
        base: (values, failed) of base, each of shape (N, R_base).
        head: (values, failed) of head, each of shape (N, R_head).

    Returns:
        The inputs unchanged, or each side reduced to shape (N, 1): the per-case value, failed only when every
        repeat failed.
    """

    def constant(values: np.ndarray) -> bool:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            spread = np.nanmax(values, axis=1) - np.nanmin(values, axis=1)
        return bool(np.all(np.isnan(spread) | (spread == 0)))

    if base[0].shape[1] == head[0].shape[1] == 1 or not (constant(base[0]) and constant(head[0])):
        return base, head

    def one(values: np.ndarray, failed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmax(values, axis=1)[:, None], failed.all(axis=1)[:, None]

    return one(*base), one(*head)


def cluster_labels(cases: Sequence[GoldenCase], cluster_by: str | None) -> np.ndarray | None:
    """Cluster label per case: the ``cluster`` field, the first tag, or the first tag with a prefix."""
    if cluster_by is None:
        return None
    labels = []
    for case in cases:
        if cluster_by == "cluster":
            label = case.cluster
        else:
            prefix = cluster_by.partition(":")[2]
            label = next((t for t in case.tags if t.startswith(prefix)), None)
        labels.append(label if label is not None else f"case:{case.id}")
    return np.array(labels, dtype=object)


def _first_answer(valid: Sequence[Prediction], evaluation: Evaluation) -> Prediction | None:
    """The first of a case's valid repeats that is not a refusal (what an out-of-domain failure answered)."""
    return next((p for p in valid if not detect_refusal(p, evaluation)), None)


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
        )
        for c in claims
        if c.get("verdict") != "supported"
    )


def _dropped_docs(case: GoldenCase, base: Prediction | None, head: Prediction | None, k: int) -> tuple[str, ...]:
    """Expected documents in base's top k that are not in head's top k."""
    if base is None or head is None:
        return ()
    in_base, in_head = set(base.retrieved_ids[:k]), set(head.retrieved_ids[:k])
    return tuple(doc for doc in case.expected_doc_ids if doc in in_base and doc not in in_head)


def _refusal_rate(valid: Sequence[Prediction], evaluation: Evaluation) -> float:
    """Share of a case's valid repeats that refused (NaN when every repeat failed)."""
    flags = [detect_refusal(p, evaluation) for p in valid]
    return float(np.mean(flags)) if flags else math.nan


def metric_inputs(
    base: Side, head: Side, cases: Sequence[GoldenCase], evaluation: Evaluation
) -> tuple[list[MetricInput], list[ErrorBudgetUse]]:
    """One :class:`~gate.stats.MetricInput` per configured metric, and each gated metric's evaluation failures.

    Inputs hold the scores of ``cases`` (rows) × repeats; failures are counted per side over every repeat, before
    repeats that never vary are collapsed into one.
    """
    clusters = cluster_labels(cases, evaluation.cluster_by)
    inputs, budget = [], []
    for name in evaluation.metrics:
        metric = resolve(name)
        base_scores, head_scores = score_matrix(base, cases, name), score_matrix(head, cases, name)
        if name in evaluation.gated and metric.spec.judged:
            base_scores, head_scores, unread = _unreadable_by_change(base, head, cases, base_scores, head_scores)
        else:
            unread = (0, 0)
        if name in evaluation.gated:
            budget += [
                budget_use(side, cases, name, scores[1], unread=n)
                for side, scores, n in ((base, base_scores, unread[0]), (head, head_scores, unread[1]))
            ]
        (b, fb), (h, fh) = collapse_constant_repeats(base_scores, head_scores)
        inputs.append(
            MetricInput(
                name=name,
                kind=metric.spec.kind,
                direction=metric.spec.direction,
                margin=evaluation.margin(name),
                gated=name in evaluation.gated,
                base=b,
                head=h,
                failed_base=fb,
                failed_head=fh,
                clusters=clusters,
            )
        )
    return inputs, budget


def _unreadable_by_change(
    base: Side,
    head: Side,
    cases: Sequence[GoldenCase],
    base_scores: tuple[np.ndarray, np.ndarray],
    head_scores: tuple[np.ndarray, np.ndarray],
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], tuple[int, int]]:
    """Count as a judged metric's evaluation failures the answers one side's judge could not read, the other's scored.

    Text the judge cannot read (a language it does not handle) is never scored; when both sides are unreadable
    the metric does not apply there. But a head that answers in another language than the base would otherwise
    leave its gated metric unmeasured, an inconclusive gate: counted as failures, such cells use the error budget
    (past it, the verdict is ``error``). Repeats are compared by case: a cell counts when the other side has a value
    for the case in any repeat. Returns both sides' (values, failed) and how many cells each side had added.
    """
    out, added = [], []
    for side, (values, failed), other in ((base, base_scores, head_scores[0]), (head, head_scores, base_scores[0])):
        unread = side.scores.unreadable(_rows(side, cases))[:, : values.shape[1]]
        counted = unread & ~failed & np.isnan(values) & ~np.isnan(other).all(axis=1, keepdims=True)
        out.append((values, failed | counted))
        added.append(int(counted.sum()))
    return out[0], out[1], (added[0], added[1])


def _case_results(inputs: Sequence[MetricInput], broke: np.ndarray) -> dict[int, list[CaseResult]]:
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
        for result in analyze_cases(inp):
            if result.status == "suspected" and result.single_observation:
                result = replace(result, status="regressed")
            if broke[result.index] and resolve(inp.name).spec.scores_failures:
                result = replace(result, status="regressed")
            if result.status in LISTED:  # only listed cases are kept: 100,000 unchanged ones cost memory
                per_case.setdefault(result.index, []).append(result)
    return per_case


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


def _case_lists(
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

    def entry(i: int, status: str, read: dict[str, dict]) -> CaseEntry:
        case = cases[i]
        b_pred, h_pred = read["base"][case.id], read["head"][case.id]
        results = [r for r in per_case.get(i, []) if r.status == status]
        dropped = _dropped_docs(case, b_pred, h_pred, k_docs)
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


def _ood_failures(
    base: Side, head: Side, cases: Sequence[GoldenCase], evaluation: Evaluation, *, batch: int = 1024
) -> list[OodFailure]:
    """Out-of-domain cases that head answered in most valid repeats, new ones first (read ``batch`` at a time)."""
    out = []
    ood = [case for case in cases if case.out_of_domain]
    for start in range(0, len(ood), batch):
        chunk = ood[start : start + batch]
        ids = [case.id for case in chunk]
        base_valid, head_valid = base.valid_many(ids), head.valid_many(ids)  # a batch at a time
        out += _ood_batch(chunk, base_valid, head_valid, evaluation)
    return sorted(out, key=lambda f: (not f.new, f.id))


def _ood_batch(
    cases: Sequence[GoldenCase],
    base_valid: dict[str, list[Prediction]],
    head_valid: dict[str, list[Prediction]],
    evaluation: Evaluation,
) -> list[OodFailure]:
    """The out-of-domain failures among ``cases`` (all out of domain), given both sides' valid predictions."""
    out = []
    for case in cases:
        head_rate = _refusal_rate(head_valid[case.id], evaluation)
        base_rate = _refusal_rate(base_valid[case.id], evaluation)
        if not math.isnan(head_rate) and head_rate < 0.5:
            prediction = _first_answer(head_valid[case.id], evaluation)
            out.append(
                OodFailure(
                    id=case.id,
                    question=clip(case.question) or "",
                    line=case.line,
                    answer=clip(prediction.answer if prediction else None),
                    new=bool(base_rate == 1.0 and head_rate == 0.0),
                    base_refusal_rate=base_rate,
                    head_refusal_rate=head_rate,
                    latency_ms=_mean_latency(head_valid[case.id]),
                )
            )
    return out


def _errors(sides: Sequence[Side], ids: set[str]) -> tuple[ErrorEntry, ...]:
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


def _unreadable(sides: Sequence[Side], cases: Sequence[GoldenCase], policy: Evaluation) -> list[str]:
    """Warnings for text a scorer could not read (never scored 0 or 1: not applicable), counted per side.

    Also counted: answers the judge read and found no checkable claim in (``unscored``), and answers whose chunks
    include one without text (the judge was not called: a ``not_applicable`` note).

    The judge says so in its judgment (e.g. an answer in a language the lexical judge does not read); answer F1 and
    exact match cannot split text written without spaces (:func:`gate.language.f1_unreadable`), which leaves them
    NaN: only answers with a NaN score and a reference to compare with are read again.
    """
    f1 = next((name for name in policy.metrics if resolve(name).spec.name in ("answer_f1", "exact_match")), None)
    out = []
    for side in sides:
        reasons: Counter[str] = Counter({f"not judged: {n}": k for n, k in side.scores.not_applicable.items()})
        reasons.update(side.scores.unscored)
        if f1 is not None:
            values, failed = side.scores.matrix(f1, _rows(side, cases))
            for i, r in zip(*np.nonzero(np.isnan(values) & ~failed), strict=True):
                case = cases[i]
                prediction = side.table.get((case.id, int(r)))
                if case.out_of_domain or not case.reference_answers or prediction is None or prediction.error:
                    continue
                if note := f1_unreadable(prediction.answer, case.reference_answers):
                    reasons[note] += 1
        out += [f"{side.label}: {n} answer(s) {reason}" for reason, n in reasons.most_common(3)]
    return out


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


ID_ADVICE = (
    "Chunk ids? Keep each chunk's document id: LangChain metadata, LlamaIndex node.ref_doc_id, "
    "Haystack meta['source_id'] (README: Retrieved ids)"
)
"""The likely cause of retrieved ids that never match (LlamaIndex node UUIDs, Haystack content hashes, LangChain
splitter chunks without ``Document.id``) and how to keep document ids through chunking (kept short: the comment cuts
a line at 300 characters; the README has the details)."""


def unmatched_ids(
    base: Side, head: Side, cases: Sequence[GoldenCase], inputs: Sequence[MetricInput], *, batch: int = 2048
) -> str | None:
    """Why the retrieval metrics cannot be scored, when no retrieved id on either side ever matches an expected id.

    Only when something is expected to match: an in-domain case with ``expected_doc_ids`` among ``cases`` and a
    retrieval metric among ``inputs``. A match on one side only is a real difference (a regression or an
    improvement), not this. A positive retrieval value on either side proves a match without reading predictions;
    otherwise every valid prediction's whole retrieved list is read (``batch`` rows at a time).

    Returns:
        One line naming the cases, an example of expected and retrieved ids, the likely cause and the fix (ids are
        clipped; the report escapes them), or None when some retrieved id matches or nothing is expected to.
    """
    retrieval = [inp for inp in inputs if resolve(inp.name).spec.stage == "retrieval"]
    expecting = [c for c in cases if not c.out_of_domain and c.expected_doc_ids]
    if not retrieval or not expecting:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if any(np.any(inp.base > 0) or np.any(inp.head > 0) for inp in retrieval):
            return None
    retrieved, answered, example = 0, 0, None
    for side in (base, head):
        failed = side.table.error_mask([c.id for c in expecting])
        keys = [(c.id, r) for c, row in zip(expecting, failed, strict=True) for r in range(side.repeats) if not row[r]]
        by_id = {c.id: c for c in expecting}
        for start in range(0, len(keys), batch):
            for prediction in side.table.read(keys[start : start + batch]):
                answered += 1
                expected = by_id[prediction.id].expected_doc_ids
                ids = prediction.retrieved_ids
                if not ids:
                    continue
                retrieved += 1
                if not set(ids).isdisjoint(expected):
                    return None
                if example is None:
                    example = (side.label, prediction.id, expected, ids)
    if not answered:
        return None  # every prediction failed: error_rate and the error budget speak for that
    what = f"{len(expecting)} in-domain cases"
    if example is None:
        return (
            f"retrieval cannot be scored: neither side retrieved a chunk for any of the {what}, so every retrieval "
            "metric is 0 on both sides (return the chunks the generator read, with their document ids, or remove "
            "the retrieval metrics from the config)"
        )
    label, case_id, expected, ids = example
    return (
        f"retrieval cannot be scored: no retrieved id on either side matches an expected id ({what}). {ID_ADVICE}. "
        f"E.g. {label} {clip(case_id, 20)} expects {clip(expected[0], 20)}, got {clip(ids[0], 20)}"
    )


def _golden_warnings(base: Side, head: Side, n_paired: int, only_one_side: int) -> list[str]:
    shas = (base.manifest.golden_sha256, head.manifest.golden_sha256)
    if shas[0] is not None and shas[1] is not None and shas[0] != shas[1]:
        return [
            f"base and head were evaluated on different golden sets ({shas[0][:12]} vs {shas[1][:12]}): "
            f"{n_paired} case(s) paired by id, {only_one_side} only on one side; cases whose expected "
            "documents or answers changed are compared against different references"
        ]
    if only_one_side:
        return [f"{only_one_side} case(s) are only on one side and are not compared"]
    return []


def golden_changes(head: Side, diff: GoldenDiff, policy: Evaluation) -> GoldenChanges:
    """The report of a golden-set change: ids, changed fields, and head's scores under both definitions.

    Edited cases are gated with the base definition (the contract); the head's definition is reported: each
    metric that needs no judge is scored on head's answers against both definitions.
    """
    metrics = [m for m in (resolve(name) for name in policy.metrics) if not m.spec.judged and not m.spec.paired]
    edited = []
    for before, after in diff.edited:
        old, new = before.to_dict(), after.to_dict()
        answers = head.valid(after.id)
        scores = []
        for metric in metrics:
            values = [
                (score_case(metric, before, p, refused), score_case(metric, after, p, refused))
                for p in answers
                for refused in [detect_refusal(p, policy)]
            ]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # no applicable value: NaN
                under = np.nanmean(np.array(values, dtype=float), axis=0) if values else (math.nan, math.nan)
            scores.append(DefinitionScore(metric.name, float(under[0]), float(under[1])))
        changed = tuple(sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k)))
        edited.append(EditedCase(after.id, changed, tuple(scores)))
    return GoldenChanges(
        policy=policy.golden_changes,
        removed=tuple(c.id for c in diff.removed),
        edited=tuple(edited),
        added=tuple(c.id for c in diff.added),
    )


def shown_values(inp: MetricInput) -> tuple[float, float]:
    """The values a metric's row shows, over the cases paired on both sides: (base, head).

    The arithmetic mean of the per-case means for binary and graded metrics (Δ is their difference); the geometric
    mean for ratio metrics, whose Δ is the geometric-mean ratio of the per-case means, so head/base of the shown
    values is that ratio exactly. NaN when no case is paired.
    """
    base_means, head_means, effect = case_effects(inp)
    paired = ~np.isnan(effect)
    if not paired.any():
        return math.nan, math.nan
    if inp.kind == "ratio":
        return float(np.exp(np.log(base_means[paired]).mean())), float(np.exp(np.log(head_means[paired]).mean()))
    return float(base_means[paired].mean()), float(head_means[paired].mean())


def pipeline_diff(base: dict | None, head: dict | None) -> tuple[str, ...]:
    """Unified diff (base → head) of two ``pipeline:`` sections written as YAML; empty when equal or unknown."""
    if base is None or head is None:
        return ()

    def lines(section: dict) -> list[str]:
        return yaml.safe_dump({"pipeline": section}, sort_keys=False, allow_unicode=True).splitlines()

    return tuple(difflib.unified_diff(lines(base), lines(head), "base", "head", lineterm="", n=10))


def changes(
    base: Side, head: Side, files: Sequence[ChangedFile] | None = None, commits: str | None = None
) -> Changes | None:
    """What changed between base and head: the ``pipeline:`` sections the manifests recorded, and ``files``.

    Returns:
        None when nothing is known (no section recorded on either side, no file list).
    """
    sections = (base.manifest.pipeline, head.manifest.pipeline)
    known = None not in sections
    if not known and files is None:
        return None
    return Changes(
        pipeline_diff=pipeline_diff(*sections),
        pipeline_known=known,
        files=None if files is None else tuple(files),
        commits=commits,
    )


def compare(
    base: Side,
    head: Side,
    policy: Evaluation,
    *,
    diff: GoldenDiff | None = None,
    files: Sequence[ChangedFile] | None = None,
    commits: str | None = None,
    pairwise: PairwiseRun | None = None,
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
    base_errors, head_errors = system_errors(base, cases), system_errors(head, cases)
    broke = ~base_errors.any(axis=1) & head_errors.all(axis=1)
    k_docs = max((resolve(n).k or 0 for n in policy.metrics), default=0) or 5
    case_inputs = metric_inputs(base, head, cases, policy)[0] if added else inputs
    lists = _case_lists(base, head, cases, _case_results(case_inputs, broke), k_docs)
    ood = _ood_failures(base, head, cases, policy)
    unmatched = unmatched_ids(base, head, contract, inputs)
    gated_retrieval = any(resolve(n).spec.stage == "retrieval" for n in policy.gated)
    decision = gate_decision(
        results,
        new_ood_failures=sum(f.new for f in ood),
        refusal=next((r for r in results if resolve(r.name).spec.out_of_domain), None),
        fail_on_new_ood=policy.fail_on_new_ood,
        alpha=policy.alpha,
        new_system_failures=int(broke.sum()),
        budget=budget,
        error_budget=policy.error_budget,
        strict=policy.strict,
        unscorable=(unmatched,) if unmatched and gated_retrieval else (),
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
        + tuple(_golden_warnings(base, head, len(cases), len(base_ids ^ head_ids)))
        + tuple(_unreadable((base, head), cases, policy)),
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
        errors=_errors((base, head), base_ids | head_ids),
        golden_changes=golden_changes(head, diff, policy) if diff else None,
        changes=changes(base, head, files, commits),
        pairwise=pairwise_report(pairwise, cases) if pairwise is not None else None,
    )
