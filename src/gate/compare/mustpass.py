"""Must-pass cases (STATISTICS.md §7): a contract, not a test — a case the base passed and head certainly fails.

Per repeat, a must-pass case *passed* when: out of domain, the answer refused; in domain, the pipeline answered
without error, did not refuse, and scored 1 on each must-pass metric that applies to the case
(``must_pass.metrics``, default the gated binary in-domain metrics such as ``hit_rate@5``). A *flip* — passed in
every base repeat, failed in every head repeat — is **certain**, and blocks the merge, when either

- R ≥ 2 on both sides and the repeats vary nowhere (a deterministic pipeline: no must-pass case's pass/fail and no
  binary or graded metric varies across repeats on either side), so a flip cannot be chance; or
- its exact test survives Holm's procedure at the gate's α. Each must-pass case's R_A + R_B outcomes get Fisher's
  one-sided exact test conditional on the case's total passes (under H0 the runs of a case are exchangeable
  between base and head, whatever its pass rate: a flaky case is as likely to split this way by chance as the
  permutation says); an all-repeat flip has p = 1/C(R_A + R_B, R_A) (1/20 at R = 3, 1/252 at R = 5). The family is
  the must-pass cases whose outcomes are not all equal: a case that passed (or failed) in every run on both sides
  has p = 1 given its total and can never be rejected, so it costs nothing (Tarone 1990). The family-wise rate of
  false blocks is then ≤ α conditionally on every case's total passes, hence ≤ α in an A/A comparison of any
  sampled generator.

Any other flip is listed with a warning naming the repeats that would make it certain (:func:`flip_repeats`).

Sources: Fisher (1935), J. R. Stat. Soc. 98(1):39-82, doi:10.2307/2342435 (conditional exact test); Holm (1979),
Scand. J. Statist. 6(2):65-70; Tarone (1990), Biometrics 46(2):515-522, doi:10.2307/2531454 (tests that cannot
reach significance leave the family).
"""

from __future__ import annotations

import dataclasses
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
from gate.stats.discrete import fisher_case, flip_repeats
from gate.stats.significance import holm


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
    r_a, r_b = base.repeats, head.repeats
    p, p_adj = flip_p_values(base_pass.sum(axis=1), head_pass.sum(axis=1), r_a, r_b)
    tested = int(np.count_nonzero(~np.isnan(p)))  # ≥ 1: a flipped case's outcomes vary
    by_design = min(r_a, r_b) >= 2 and deterministic
    need = flip_repeats(tested, policy.alpha)
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
                certain=by_design or bool(p_adj[k] <= policy.alpha),
                p_value=float(p[k]),
                p_adjusted=float(p_adj[k]),
            )
        )
    out = [f if f.certain else dataclasses.replace(f, repeats_to_block=need) for f in out]
    return sorted(out, key=lambda f: (not f.certain, f.id))


def flip_p_values(
    base_passes: np.ndarray, head_passes: np.ndarray, r_base: int, r_head: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each case's one-sided exact p-value that it passes less often on head, and the Holm-adjusted ones.

    Args:
        base_passes: shape (N,), passing runs per case on base, each in [0, ``r_base``].
        head_passes: shape (N,), the same on head, in [0, ``r_head``].
        r_base: runs per case on base, ≥ 1.
        r_head: runs per case on head, ≥ 1.

    Returns:
        (p, p_adjusted), each of shape (N,): Fisher's one-sided conditional p-value
        (:func:`gate.stats.discrete.fisher_case`) and its Holm adjustment across the cases whose outcomes are not
        all equal; NaN for a case that passed in every run on both sides or in none (it cannot be a flip).

    Source: Fisher (1935); Holm (1979); Tarone (1990) (see the module docstring).
    """
    a, h = np.asarray(base_passes, dtype=int), np.asarray(head_passes, dtype=int)
    p = np.full(a.shape, np.nan)
    for k in np.flatnonzero((a + h > 0) & (a + h < r_base + r_head)):
        p[k] = fisher_case(int(a[k]), int(h[k]), r_base, r_head, tau=1.0).p_value
    return p, holm(p)
