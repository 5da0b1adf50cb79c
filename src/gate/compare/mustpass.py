"""Must-pass cases (STATISTICS.md §7): a contract, not a test — a case the base passed and head certainly fails.

Per repeat, a must-pass case *passed* when: out of domain, the answer refused; in domain, the pipeline answered
without error, did not refuse, and scored 1 on each must-pass metric that applies to the case
(``must_pass.metrics``, default the gated binary in-domain metrics such as ``hit_rate@5``). A flip — passed in
every base repeat, failed in every head repeat — is *certain* when R ≥ 3 on both sides, or R ≥ 2 on both sides
and the repeats vary nowhere (a deterministic pipeline: no case's pass/fail and no binary or graded metric varies
across repeats on either side). A certain flip blocks the merge; another one is listed with a warning.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gate.compare.inputs import score_matrix, system_errors
from gate.comparison import clip
from gate.config import GatePolicy
from gate.models import GoldenCase
from gate.results import OOD_ANSWERED, MustPassFailure
from gate.runs import Side
from gate.scoring import detect_refusal
from gate.stats import MetricInput

CERTAIN_REPEATS = 3
"""Repeats per side from which an all-repeat flip is certain whether or not the repeats vary (STATISTICS.md §7)."""


def must_pass_cases(cases: Sequence[GoldenCase], policy: GatePolicy) -> list[GoldenCase]:
    """The must-pass cases among ``cases``: ``must_pass: true``, or out of domain by the policy's default."""
    return [
        c
        for c in cases
        if (c.must_pass if c.must_pass is not None else (c.out_of_domain and policy.must_pass.out_of_domain))
    ]


def _passes(side: Side, cases: Sequence[GoldenCase], policy: GatePolicy) -> tuple[np.ndarray, list[list[str]]]:
    """Pass flags of shape (N, R) and, per case, why each repeat failed ("" where it passed)."""
    errors = system_errors(side, cases)
    keys = [(c.id, r) for k, c in enumerate(cases) for r in range(side.repeats) if not errors[k, r]]
    refused = {key: detect_refusal(p, policy) for key, p in zip(keys, side.table.read(keys), strict=True)}
    metrics = {name: score_matrix(side, cases, name)[0] for name in policy.must_pass_metrics}
    passed = np.zeros(errors.shape, dtype=bool)
    why: list[list[str]] = []
    for k, case in enumerate(cases):
        reasons = []
        for r in range(side.repeats):
            if errors[k, r]:
                reasons.append("pipeline error")
            elif case.out_of_domain:
                reasons.append("" if refused[(case.id, r)] else OOD_ANSWERED)
            elif refused[(case.id, r)]:
                reasons.append("refused an in-domain question")
            else:
                missed = [f"{n} = 0" for n, values in metrics.items() if values[k, r] == 0]
                reasons.append(", ".join(missed))
            passed[k, r] = not reasons[-1]
        why.append(reasons)
    return passed, why


def _constant(flags: np.ndarray) -> bool:
    return bool(np.all(flags.all(axis=1) | ~flags.any(axis=1)))


def must_pass_failures(
    base: Side, head: Side, cases: Sequence[GoldenCase], policy: GatePolicy, inputs: Sequence[MetricInput]
) -> list[MustPassFailure]:
    """The must-pass cases among ``cases`` that base passed in every repeat and head failed in every repeat.

    Args:
        base: the base side.
        head: the head side.
        cases: the paired cases.
        policy: the base's policy (which cases are must-pass, what passing means, how a refusal is detected).
        inputs: the comparison's metric inputs; a binary or graded metric whose repeats were kept (not collapsed
            into one) shows that the repeats vary, so an R = 2 flip is not certain.

    Returns:
        One :class:`~gate.comparison.MustPassFailure` per flipped case, certain ones first, then by id.
    """
    chosen = must_pass_cases(cases, policy)
    if not chosen:
        return []
    base_pass, _ = _passes(base, chosen, policy)
    head_pass, head_why = _passes(head, chosen, policy)
    flipped = np.flatnonzero(base_pass.all(axis=1) & ~head_pass.any(axis=1))
    if not flipped.size:
        return []
    varies = any(inp.base.shape[1] > 1 or inp.head.shape[1] > 1 for inp in inputs if inp.kind != "ratio")
    deterministic = not varies and _constant(base_pass) and _constant(head_pass)
    repeats = min(base.repeats, head.repeats)
    certain = repeats >= CERTAIN_REPEATS or (repeats >= 2 and deterministic)
    answers = head.first_valid_many([chosen[k].id for k in flipped])
    out = []
    for k in flipped:
        case = chosen[k]
        answer = answers[case.id]
        out.append(
            MustPassFailure(
                id=case.id,
                question=clip(case.question) or "",
                line=case.line,
                out_of_domain=case.out_of_domain,
                why=head_why[k][0],
                answer=clip(answer.answer if answer else None),
                repeats_base=base.repeats,
                repeats_head=head.repeats,
                certain=certain,
            )
        )
    return sorted(out, key=lambda f: (not f.certain, f.id))
