"""Compare base and head into the ``report.json`` object that the comment is rendered from.

Per-metric deltas and verdicts, regressed / improved / flaky cases, out-of-domain failures, and the gate decision.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from gate.config import Evaluation
from gate.metrics import resolve
from gate.models import GoldenCase, Prediction
from gate.runs import Side
from gate.scoring import detect_refusal
from gate.stats import MetricInput, analyze_cases, analyze_metrics, gate_decision

REPORT_SCHEMA_VERSION = 1
TEXT_LIMIT = 600
"""Characters of an answer or chunk kept in report.json case lists."""


def score_matrix(side: Side, cases: Sequence[GoldenCase], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Values and failure flags of one metric, shape (N cases, R repeats); NaN where N/A or failed."""
    index = {case.id: i for i, case in enumerate(cases)}
    values = np.full((len(cases), side.repeats), np.nan)
    failed = np.zeros((len(cases), side.repeats), dtype=bool)
    for score in side.scores:
        i = index.get(score.id)
        if score.metric == metric and i is not None and score.repeat < side.repeats:
            values[i, score.repeat] = score.value
            failed[i, score.repeat] = score.error is not None
    return values, failed


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


def _aggregate(values: np.ndarray) -> dict[str, float | int | None]:
    """Seed-method views of one side: mean, SD, 10th percentile and share below 0.5 of per-case means."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows (N/A cases) give NaN, dropped below
        per_case = np.nanmean(values, axis=1) if values.size else values
    per_case = per_case[~np.isnan(per_case)]
    if per_case.size == 0:
        return {"n": 0, "mean": None, "sd": None, "p10": None, "share_below_0_5": None}
    return {
        "n": int(per_case.size),
        "mean": float(per_case.mean()),
        "sd": float(per_case.std(ddof=1)) if per_case.size > 1 else 0.0,
        "p10": float(np.percentile(per_case, 10)),
        "share_below_0_5": float((per_case < 0.5).mean()),
    }


def _clip(text: str | None, limit: int = TEXT_LIMIT) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_ok(side: Side, case_id: str) -> Prediction | None:
    for r in range(side.repeats):
        prediction = side.table.get((case_id, r))
        if prediction is not None and prediction.error is None:
            return prediction
    return None


def _first_answer(side: Side, case_id: str, evaluation: Evaluation) -> Prediction | None:
    """The first valid repeat of a case that is not a refusal (what an out-of-domain failure answered)."""
    for r in range(side.repeats):
        prediction = side.table.get((case_id, r))
        if prediction is not None and prediction.error is None and not detect_refusal(prediction, evaluation):
            return prediction
    return None


def _bad_claims(side: Side, case_id: str) -> list[dict[str, Any]]:
    """Unsupported and contradicted claims of the head's first judged answer, with their closest chunk."""
    for score in side.scores:
        if score.id == case_id and score.metric == "faithfulness" and score.detail:
            return [
                {k: _clip(v) if isinstance(v, str) else v for k, v in claim.items()}
                for claim in score.detail.get("claims", [])
                if claim.get("verdict") != "supported"
            ]
    return []


def _dropped_docs(case: GoldenCase, base: Prediction | None, head: Prediction | None, k: int) -> list[str]:
    """Expected documents in base's top k that are not in head's top k."""
    if base is None or head is None:
        return []
    in_base, in_head = set(base.retrieved_ids[:k]), set(head.retrieved_ids[:k])
    return [doc for doc in case.expected_doc_ids if doc in in_base and doc not in in_head]


def _refusal_rate(side: Side, case_id: str, evaluation: Evaluation) -> float:
    """Share of the case's valid repeats that refused (NaN when every repeat failed)."""
    flags = [
        detect_refusal(p, evaluation)
        for r in range(side.repeats)
        if (p := side.table.get((case_id, r))) is not None and p.error is None
    ]
    return float(np.mean(flags)) if flags else math.nan


def _num(value: Any) -> Any:
    """Plain Python floats/ints for JSON (NaN kept; written as null)."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def build_report(base: Side, head: Side, evaluation: Evaluation, *, gate_version: str) -> dict[str, Any]:
    """Compare two loaded sides into the report object (``report.json``; the comment is rendered from it).

    Cases are paired by id over the cases present in both golden sets (head's order); cases only on one side are
    listed under ``unpaired_cases`` and, with a golden-set change, in ``warnings``. The error rate is the larger of
    the two sides' shares of failed gated scores.
    """
    base_ids = {c.id for c in base.golden}
    cases = [c for c in head.golden if c.id in base_ids]
    head_ids = {c.id for c in head.golden}
    clusters = cluster_labels(cases, evaluation.cluster_by)

    inputs: list[MetricInput] = []
    aggregates: dict[str, dict[str, Any]] = {}
    for name in evaluation.metrics:
        metric = resolve(name)
        (b, fb), (h, fh) = collapse_constant_repeats(score_matrix(base, cases, name), score_matrix(head, cases, name))
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
        aggregates[name] = {"base": _aggregate(b), "head": _aggregate(h)}
    results = analyze_metrics(inputs, alpha=evaluation.alpha, seed=evaluation.seed, strict=evaluation.strict)

    # Per-case classification over the gated binary/graded metrics (refusal is listed as out-of-domain failures).
    # With a single observation per side (R = 1) no per-case test exists: a flip beyond τ is listed as regressed,
    # and the comment says it is one observation.
    per_case: dict[int, list[Any]] = {}
    for inp in inputs:
        if inp.gated and inp.kind != "ratio" and inp.name != "refusal":
            for result in analyze_cases(inp):
                if result.status == "suspected" and result.single_observation:
                    result = replace(result, status="regressed")
                per_case.setdefault(result.index, []).append(result)

    k_docs = max((resolve(n).k or 0 for n in evaluation.metrics), default=0) or 5

    def case_entry(i: int, statuses: Sequence[str]) -> dict[str, Any]:
        case = cases[i]
        b_pred, h_pred = _first_ok(base, case.id), _first_ok(head, case.id)
        return {
            "id": case.id,
            "question": _clip(case.question),
            "metrics": [
                {
                    "name": r.metric,
                    "base": _num(r.base_mean),
                    "head": _num(r.head_mean),
                    "effect": _num(r.effect),
                    "p_value": _num(r.p_value),
                    "p_adjusted": _num(r.p_adjusted),
                    "status": r.status,
                    "evidence": "single observation" if r.single_observation else "tested",
                }
                for r in per_case.get(i, [])
                if r.status in statuses
            ],
            "answer_base": _clip(b_pred.answer if b_pred else None),
            "answer_head": _clip(h_pred.answer if h_pred else None),
            "claims": _bad_claims(head, case.id),
            "dropped_docs": _dropped_docs(case, b_pred, h_pred, k_docs),
            "expected_doc_ids": list(case.expected_doc_ids),
        }

    def listing(status: str) -> list[dict[str, Any]]:
        chosen = [i for i, rs in per_case.items() if any(r.status == status for r in rs)]
        if status != "regressed":  # a regressed case is listed once, under regressed
            chosen = [i for i in chosen if not any(r.status == "regressed" for r in per_case[i])]
        worst = {i: min((r.effect for r in per_case[i] if r.status == status), default=0.0) for i in chosen}
        order = sorted(chosen, key=lambda i: (worst[i], cases[i].id))
        if status == "improved":
            order = sorted(
                chosen, key=lambda i: (-max(r.effect for r in per_case[i] if r.status == status), cases[i].id)
            )
        return [case_entry(i, (status,)) for i in order]

    regressed = listing("regressed")
    ood_failures = []
    for case in cases:
        if not case.out_of_domain:
            continue
        head_rate, base_rate = (
            _refusal_rate(head, case.id, evaluation),
            _refusal_rate(base, case.id, evaluation),
        )
        if not math.isnan(head_rate) and head_rate < 0.5:
            prediction = _first_answer(head, case.id, evaluation)
            ood_failures.append(
                {
                    "id": case.id,
                    "question": _clip(case.question),
                    "answer": _clip(prediction.answer if prediction else None),
                    "new": bool(base_rate == 1.0 and head_rate == 0.0),
                    "base_refusal_rate": _num(base_rate),
                    "head_refusal_rate": head_rate,
                }
            )
    ood_failures.sort(key=lambda f: (not f["new"], f["id"]))
    new_ood = sum(f["new"] for f in ood_failures)

    errors = []
    for side in (base, head):
        for (case_id, repeat), prediction in sorted(side.table.items()):
            if prediction.error is not None and case_id in head_ids | base_ids:
                errors.append(
                    {
                        "side": side.label,
                        "id": case_id,
                        "repeat": repeat,
                        "metric": None,
                        "message": _clip(prediction.error, 300),
                    }
                )
        for score in side.scores:
            if score.error is not None and score.error.startswith("judge"):
                errors.append(
                    {
                        "side": side.label,
                        "id": score.id,
                        "repeat": score.repeat,
                        "metric": score.metric,
                        "message": _clip(score.error, 300),
                    }
                )
    gated = [inp for inp in inputs if inp.gated]
    error_rate = max(
        (
            sum(int(getattr(inp, f"failed_{side}").sum()) for inp in gated) / rows
            for side in ("base", "head")
            if (rows := sum(getattr(inp, side).size for inp in gated))
        ),
        default=0.0,
    )

    # A new out-of-domain failure blocks only with evidence that refusals dropped (the refusal metric's one-sided
    # test at α, no margin): with a sampled generator, single flips in both directions are noise (A/A).
    notes: list[str] = []
    refusal = next((r for r in results if r.name == "refusal"), None)
    p_refusal = None if refusal is None else (refusal.p_adjusted if refusal.gated else refusal.p_value)
    blocking_ood = new_ood if evaluation.fail_on_new_ood and (p_refusal is None or p_refusal <= evaluation.alpha) else 0
    if new_ood and not blocking_ood and evaluation.fail_on_new_ood:
        notes.append(
            f"{new_ood} out-of-domain question(s) refused on base are answered on head, but the drop in refusals is "
            f"not significant ({'p (Holm)' if refusal and refusal.gated else 'p'} = {p_refusal:.3g}): "
            "listed, not blocking (more cases or repeats tell a real drop from noise)"
        )
    verdict, reasons = gate_decision(
        results,
        new_ood_failures=blocking_ood,
        error_rate=error_rate,
        error_budget=evaluation.error_budget,
        strict=evaluation.strict,
    )
    metrics_out = []
    for result, inp in zip(results, inputs, strict=True):
        metric = resolve(inp.name)
        row = {k: _num(v) for k, v in asdict(result).items()}
        row |= {
            "label": metric.label,
            "direction": metric.spec.direction,
            "kind": metric.spec.kind,
            "margin": inp.margin,
            "aggregates": aggregates[inp.name],
        }
        metrics_out.append(row)

    def side_info(side: Side) -> dict[str, Any]:
        m = side.manifest
        return {
            "label": side.label,
            "git_sha": m.get("git_sha"),
            "git_ref": m.get("git_ref"),
            "golden_sha256": m.get("golden_sha256"),
            "config_sha256": m.get("config_sha256"),
            "judge": m.get("judge"),
            "repeats": side.repeats,
            "n_cases": len(side.golden),
            "n_prediction_errors": sum(p.error is not None for p in side.table.values()),
        }

    shas = (base.manifest.get("golden_sha256"), head.manifest.get("golden_sha256"))
    if None not in shas and shas[0] != shas[1]:
        notes.append(
            f"base and head were evaluated on different golden sets ({shas[0][:12]} vs {shas[1][:12]}): "
            f"{len(cases)} case(s) paired by id, {len(base_ids ^ head_ids)} only on one side; cases whose expected "
            "documents or answers changed are compared against different references"
        )
    elif base_ids != head_ids:
        notes.append(f"{len(base_ids ^ head_ids)} case(s) are only on one side and are not compared")

    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "verdict": verdict,
        "reasons": reasons,
        "warnings": notes,
        "gate_version": gate_version,
        "n_cases": len(cases),
        "n_out_of_domain": sum(c.out_of_domain for c in cases),
        "repeats": {"base": base.repeats, "head": head.repeats},
        "seed": evaluation.seed,
        "alpha": evaluation.alpha,
        "strict": evaluation.strict,
        "error_rate": error_rate,
        "error_budget": evaluation.error_budget,
        "base": side_info(base),
        "head": side_info(head),
        "metrics": metrics_out,
        "regressed_cases": regressed,
        "suspected_cases": listing("suspected"),
        "improved_cases": listing("improved"),
        "flaky_cases": listing("flaky"),
        "ood_failures": ood_failures,
        "new_ood_failures": new_ood,
        "unpaired_cases": sorted(base_ids ^ head_ids),
        "errors": errors,
    }
