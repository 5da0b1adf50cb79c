"""Labelled answers judged again with another judge (``rag-gate judge-check --config``).

The calls are returned as :func:`gate.labels.agreement.check` reads them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from gate.errors import InputError
from gate.labels.sampling import JudgedAnswer, digest, reasons_of

if TYPE_CHECKING:
    from gate.config import GatePolicy
    from gate.labels.rules import Rule


def rejudge(
    answers: Sequence[JudgedAnswer], keys: Iterable[tuple[str, int]], policy: GatePolicy, rules: Sequence[Rule] = ()
) -> tuple[str, dict[str, dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]]]:
    """Judge the answers of ``keys`` again with ``policy``'s judge (``judge-check --config``).

    Args:
        answers: the run's answers.
        keys: (case id, repeat) of the labelled answers.
        policy: the config's gate policy (its judge).
        rules: the per-answer rules to call by (:mod:`gate.labels.rules`); none: faithfulness < 1.

    Returns:
        The judge's id and, by rule text, its calls as :func:`check` reads them.

    Raises:
        InputError: the judge's options are invalid or its extra is not installed.
    """
    from gate.judges import get_judge
    from gate.scoring import call_judge

    try:
        judge = get_judge(policy.judge_spec())
    except (ValueError, TypeError) as exc:
        raise InputError(f"judge: {exc}") from None
    from gate.labels.rules import SECONDARY

    wanted = set(keys)
    rules = list(rules) or [SECONDARY]
    calls: dict[str, dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]] = {r.text: {} for r in rules}
    try:
        for answer in answers:
            if answer.key not in wanted:
                continue
            judgment = call_judge(judge, answer.case, answer.prediction, policy)
            reasons, sha = reasons_of(judgment.to_dict()), digest(answer.prediction.answer)
            for rule in rules:
                flagged = rule.call(float(getattr(judgment, rule.metric, math.nan)))
                call = None if flagged is None else ("unfaithful" if flagged else "faithful")
                calls[rule.text][answer.key] = (call, reasons, sha)
    finally:
        close = getattr(judge, "close", None)
        if callable(close):
            close()
    return judge.id, calls


def rejudge_pairs(
    base: Sequence[JudgedAnswer], head: Sequence[JudgedAnswer], keys: Iterable[tuple[str, int]], policy: GatePolicy
) -> tuple[str, dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]]:
    """Judge the labelled pairs again with ``policy``'s pairwise judge (``judge-check --config``, pairwise).

    Raises:
        InputError: the config has no ``pairwise:`` judge, or its options are invalid.
    """
    from gate.judges import get_pairwise_judge
    from gate.scoring import judge_pairs

    if policy.pairwise is None:
        raise InputError("--config: has no pairwise: judge to check pairwise labels with")
    try:
        judge = get_pairwise_judge(policy.pairwise_spec())
    except (ValueError, TypeError) as exc:
        raise InputError(f"pairwise: {exc}") from None
    firsts: dict[tuple[str, str], JudgedAnswer] = {}
    for side, answers in (("base", base), ("head", head)):
        for answer in sorted(answers, key=lambda a: a.prediction.repeat):
            firsts.setdefault((side, answer.case.id), answer)
    pairs = [
        (firsts[("base", case_id)], firsts[("head", case_id)])
        for case_id, _ in keys
        if ("base", case_id) in firsts and ("head", case_id) in firsts
    ]
    try:
        judgments = judge_pairs([(b.case, b.prediction, h.prediction) for b, h in pairs], judge, policy)
    finally:
        judge.close()
    calls: dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]] = {}
    for (b, h), judgment in zip(pairs, judgments, strict=True):
        outcome = None if judgment is None else judgment.outcome
        better = {"win": "head", "loss": "base", "tie": "tie", None: None}[outcome]
        reasons = [] if judgment is None else [r for r in (judgment.reason_base_first, judgment.reason_head_first) if r]
        calls[(b.case.id, 0)] = (better, reasons, digest([b.prediction.answer, h.prediction.answer]))
    return judge.id, calls
