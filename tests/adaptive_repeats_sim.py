"""A/A false-fail of the adaptive evaluation with adaptive repeats (R = 3), by simulation (issue 33, item 2).

Each simulated pull request is an A/A comparison of one gated binary metric (``exact_match``, margin 0) over N
cases with R = 3 repeats per side, evaluated as ``gate.pr.adaptive`` does it: the order of
:func:`gate.compare.sequential.adaptive_order`; per batch, repeat 0 of the new cases first, then
:func:`gate.compare.repeats.candidates` (repeat 0 the same observation on both sides) minus
:func:`gate.compare.repeats.audit_sample` skip repeats 1–2 (:meth:`gate.predictions.PredictionTable.skip`), the
audit :func:`gate.compare.repeats.varying` on every case run more than once, and once a case varies every repeat
runs, those skipped before included; then :meth:`gate.compare.sequential.Looks.update` and ``stop``; at the end
(or at the stop) the fixed-N analysis of the cases run at α_final (``metric_inputs`` and ``analyze_metrics``) with
the decided metrics' statuses (``Looks.decided`` / ``Looks.at_stop``). The sides are in-memory
:class:`gate.runs.Side` objects of the rows that ran; the loop over batches mirrors ``gate.pr.adaptive._batches``
(which needs pipelines and run directories), every decision in it is the real functions'.

Pipelines: case quality x_i ~ Beta(2, 1) (as ``tests/adaptive_sim.py``). *Stochastic*: every (side, repeat)
answers correctly with probability x_i, independently. *Deterministic*: each side answers every repeat of a case
the same way, drawn once per side with probability x_i (two programs of equal quality that answer differently:
exchangeable sides, so an A/A comparison).
"""

from __future__ import annotations

import numpy as np
from adaptive_sim import rate_ci

from gate.compare.inputs import metric_inputs
from gate.compare.repeats import RepeatPlan, audit_sample, candidates, compared_metrics, varying
from gate.compare.sequential import Looks, adaptive_order
from gate.config import GatePolicy
from gate.models import GoldenCase, Prediction, Score
from gate.predictions import PredictionTable
from gate.runs import Side
from gate.stats import analyze_metrics

METRIC = "exact_match"
REPEATS = 3


def policy(seed: int, margin: float = 0.0) -> GatePolicy:
    """One gated binary metric."""
    return GatePolicy(metrics=(METRIC,), gated=(METRIC,), margins={METRIC: margin}, seed=seed)


def outcomes(rng: np.random.Generator, n: int, stochastic: bool) -> tuple[np.ndarray, np.ndarray]:
    """(base, head) correct answers, each shape (n, R) bool, of an A/A pull request."""
    x = rng.beta(2.0, 1.0, size=n)[:, None]
    if stochastic:
        return rng.random((n, REPEATS)) < x, rng.random((n, REPEATS)) < x
    return np.repeat(rng.random((n, 1)) < x, REPEATS, axis=1), np.repeat(rng.random((n, 1)) < x, REPEATS, axis=1)


def side(label: str, golden: list[GoldenCase], correct: np.ndarray, plan: RepeatPlan) -> Side:
    """The side's rows that ran: every repeat of a case, or the first ``plan.skipped[case]`` ones."""
    index = {c.id: int(c.id[1:]) for c in golden}
    rows = [(c.id, r) for c in golden for r in range(plan.skipped.get(c.id, REPEATS))]
    answers = {key: Prediction(key[0], key[1], answer="right" if correct[index[key[0]], key[1]] else "wrong")
               for key in rows}  # fmt: skip
    table = PredictionTable.from_mapping(golden, REPEATS, answers)
    table.skip(plan.skipped)
    scores = [Score(c, r, METRIC, float(correct[index[c], r])) for c, r in rows]
    return Side(label, golden, table, REPEATS, scores, {})  # type: ignore[arg-type]


def one_pr(rng: np.random.Generator, k: int, *, n: int, stochastic: bool, share_alpha: float = 0.05) -> dict:
    """Evaluate one A/A pull request adaptively with adaptive repeats; its status, share of cases and pairs run."""
    golden = [GoldenCase(f"c{i}", f"question {i}?", (f"d{i}",)) for i in range(n)]
    by_id = {c.id: c for c in golden}
    base_correct, head_correct = outcomes(rng, n, stochastic)
    gate = policy(seed=k)
    order = adaptive_order(golden, gate, seed=k)
    looks = Looks(gate, order)
    plan = RepeatPlan(REPEATS, {})
    metrics = compared_metrics(gate)

    def both(ids: list[str]) -> tuple[Side, Side]:
        cases = [by_id[i] for i in ids]
        return side("base", cases, base_correct, plan), side("head", cases, head_correct, plan)

    ids: list[str] = []
    for look, end in enumerate(order.ends):
        new = list(order.sequence[len(ids) : end])
        ids = list(order.sequence[:end])
        if plan.active and new:  # repeat 0 of the batch first: the candidates to skip the others
            plan.skipped.update(dict.fromkeys(new, 1))
            chosen = candidates(*both(ids), new, metrics)
            audited = audit_sample(new, chosen, order.seed, look)
            plan.audited += len(audited)
            for case_id in [c for c in new if c not in set(chosen) - set(audited)]:
                del plan.skipped[case_id]
        base, head = both(ids)
        if plan.active:
            for s in (head, base):
                if found := varying(s, ids, metrics):
                    plan.varied = f"{s.label}: case '{found[0]}'"
                    break
            if not plan.active:  # not deterministic: the repeats skipped so far run now, before the look
                plan.skipped.clear()
                base, head = both(ids)
        looks.update(base, head, end)
        if (stopped := looks.stop()) is not None:
            break
    else:
        stopped = "exhausted"
    cases = [by_id[i] for i in ids]
    final = GatePolicy(metrics=gate.metrics, gated=gate.gated, margins=dict(gate.margins), alpha=looks.split.final)
    inputs, _ = metric_inputs(base, head, cases, final)
    fixed = analyze_metrics(inputs, alpha=looks.split.final, seed=k, n_resamples=500)[0]
    decided = (
        looks.at_stop({fixed.name: (fixed.status, fixed.reason)}, len(ids))
        if stopped in ("fail", "must_pass")
        else looks.decided()
    )
    status = decided.get(METRIC, (fixed.status, fixed.reason))[0]
    pairs = plan.pairs(ids)
    return {"status": status, "share": len(ids) / n, "pairs": pairs / (n * REPEATS), "varied": plan.varied}


def repeats_rows(prs: int, share: float) -> None:
    """Part 6: print the A/A false-fail rate with adaptive repeats, stochastic and deterministic pipelines."""
    del share  # the looks use the gate's own split (SEQUENTIAL_SHARE)
    print("(6) A/A with adaptive repeats (R = 3, repeat 0 first, skip where identical, a 10 % audit), one gated")
    print("    binary metric, margin 0, through gate.compare.repeats and Looks (target: false-fail ≤ 0.05)")
    for n in (200,):
        for label, stochastic in (("stochastic", True), ("deterministic", False)):
            rng = np.random.default_rng(9000 + n + stochastic)
            out = [one_pr(rng, k, n=n, stochastic=stochastic) for k in range(prs)]
            fails = sum(o["status"] == "fail" for o in out)
            passes = sum(o["status"] == "pass" for o in out) / prs
            print(f"    N={n} {label:13s}: false-fail {rate_ci(fails, prs)}, pass {passes:.3f}, median share of cases "
                  f"{np.median([o['share'] for o in out]):.2f}, median share of (case, repeat) pairs run "
                  f"{np.median([o['pairs'] for o in out]):.2f}, variation found in "
                  f"{sum(o['varied'] is not None for o in out) / prs:.2f} of PRs")  # fmt: skip
