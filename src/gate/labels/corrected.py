"""The judge's verdict corrected with hand labels: the share of unfaithful answers by prediction-powered inference.

Three estimates of the same quantity, the share of a run's answers that a person would call unfaithful:

- **judge only**: the share the judge flags by a rule (:mod:`gate.labels.rules`) over every answer of the run,
  with Wilson's score interval (in [0, 1]): narrow, but it covers the judge's share, not the labelled truth,
  whenever the judge is biased;
- **labels only**: the (Horvitz–Thompson weighted) share of the labelled answers called unfaithful: unbiased, wide
  (its normal interval, like the prediction-powered one, is cut to [0, 1]);
- **prediction-powered** (PPI++, :func:`gate.stats.ppi.ppi_mean`): the judge's share corrected by its bias measured
  on the labels, with λ tuned for the smallest variance: valid however biased the judge is, never much wider than
  the labels' interval and narrower when the judge tracks the labels.

With labels on both sides of a comparison, :func:`difference` gives head − base of the prediction-powered shares
and says whether the rise is beyond the metric's margin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gate.labels.agreement import Label, design_of
from gate.labels.rules import Rule
from gate.labels.sampling import JudgedAnswer, digest
from gate.stats.ppi import MeanEstimate, classical_mean, judge_mean, ppi_mean
from gate.stats.ppi import difference as ppi_difference

ALPHA = 0.05
"""1 − the intervals' coverage."""


def _num(x: float) -> float | None:
    return None if math.isnan(x) else round(float(x), 6)


def estimate_dict(e: MeanEstimate) -> dict[str, Any]:
    """JSON-ready form of an estimate (NaN as None)."""
    return {"value": _num(e.estimate), "low": _num(e.low), "high": _num(e.high), "se": _num(e.se),
            "lambda": _num(e.lam), "n": e.n, "N": e.N}  # fmt: skip


@dataclass(frozen=True)
class Corrected:
    """The share of unfaithful answers of a run: judge only, labels only, prediction-powered (95 % intervals)."""

    rule: Rule
    """The rule that makes the judge's call on an answer."""
    judge_only: MeanEstimate
    """The share the judge flags over the run's answers with a call (N)."""
    labels_only: MeanEstimate
    """The weighted share of the labelled answers called unfaithful (n)."""
    ppi: MeanEstimate
    """The prediction-powered (PPI++) estimate."""
    note: str = ""
    """Why an estimate is missing (no label on an answer of the run), else empty."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "rule": self.rule.text,
            "quantity": "share of unfaithful answers",
            "judge_only": estimate_dict(self.judge_only),
            "labels_only": estimate_dict(self.labels_only),
            "prediction_powered": estimate_dict(self.ppi),
            "method": "PPI++ (Angelopoulos, Duchi, Zrnic 2023), normal 95 % interval, Horvitz–Thompson weights",
            "note": self.note,
        }


def corrected(
    labels: Sequence[Label], answers: Sequence[JudgedAnswer], rule: Rule, *, alpha: float = ALPHA
) -> Corrected:
    """The share of unfaithful answers of a run, from the judge's calls by ``rule`` and the hand labels.

    The unlabelled set is every answer of the run with a call by ``rule`` (N); the labelled set the labels whose
    answer is in the run unchanged and has a call (n), each weighted by 1/π (:func:`design_of`). Y = 1 when the
    label says unfaithful; f = 1 when the judge flags the answer.

    Args:
        labels: single-answer labels (``faithful``).
        answers: the run's answers with their metric values (:func:`gate.labels.sampling.judged_answers`).
        rule: the per-answer rule of a judged metric.
        alpha: 1 − the intervals' coverage.

    Source: Angelopoulos, Bates, Fannjiang, Jordan, Zrnic 2023, Science 382, doi:10.1126/science.adi6000; PPI++:
    Angelopoulos, Duchi, Zrnic 2023, arXiv:2311.01453.
    """
    calls = {a.key: (rule.call(a.values.get(rule.metric, math.nan)), digest(a.prediction.answer)) for a in answers}
    f_all = [float(c) for c, _ in calls.values() if c is not None]
    used, y, f = [], [], []
    for label in labels:
        found = calls.get(label.key)
        if label.faithful is None or found is None or found[0] is None:
            continue
        if label.answer_sha256 and label.answer_sha256 != found[1]:
            continue
        used.append(label)
        y.append(0.0 if label.faithful else 1.0)
        f.append(float(found[0]))
    weights, _, _ = design_of(used)
    note = "" if used else "no labelled answer of the run has a call by this rule"
    return Corrected(
        rule,
        _no_zero_width(judge_mean(f_all, alpha=alpha)),
        _no_zero_width(_in_unit(classical_mean(y, weights=weights, alpha=alpha))),
        _no_zero_width(_in_unit(ppi_mean(y, f, f_all, weights=weights, alpha=alpha))),
        note,
    )


def _no_zero_width(e: MeanEstimate) -> MeanEstimate:
    """The estimate without bounds when its interval has no width (every value alike, a normal interval of SE 0).

    A Wilson interval (the judge's share, :func:`gate.stats.ppi.judge_mean`) has width even when every call is
    alike (0 flagged of 50: [0, 0.071]) and is kept.
    """
    if e.se == 0 and not e.low < e.high:
        return MeanEstimate(e.estimate, e.se, math.nan, math.nan, e.lam, e.n, e.N)
    return e


def _in_unit(e: MeanEstimate) -> MeanEstimate:
    """The normal interval of a share cut to [0, 1], where the share lies (the coverage is unchanged).

    The labels' weighted share and the prediction-powered one have normal intervals (θ̂ ± z·SE) that can leave
    [0, 1] near its ends; cutting them there loses no true value. The point estimate is kept as computed (the
    prediction-powered one corrects the judge's share by the labels' residuals and can fall just outside).
    """
    if math.isnan(e.low):
        return e
    return MeanEstimate(e.estimate, e.se, max(0.0, e.low), min(1.0, e.high), e.lam, e.n, e.N)


Beyond = Literal["beyond", "within", "cannot_tell"]
"""Whether head − base of the share of unfaithful answers is beyond the margin: its whole interval above the margin
(``beyond``), below it (``within``: a rise beyond the margin is ruled out), or neither."""

BEYOND_TEXT = {
    "beyond": "worse by more than the margin",
    "within": "a rise beyond the margin is ruled out",
    "cannot_tell": "cannot tell whether the rise is beyond the margin (label more answers)",
}
"""Plain text of each :data:`Beyond` value."""


@dataclass(frozen=True)
class Difference:
    """head − base of the prediction-powered share of unfaithful answers, against the metric's margin."""

    rule: Rule
    """The rule used on both sides."""
    base: Corrected
    """Base's estimates."""
    head: Corrected
    """Head's estimates."""
    ppi: MeanEstimate
    """head − base of the prediction-powered estimates (95 % interval)."""
    judge_only: MeanEstimate
    """head − base of the judge-only shares."""
    margin: float
    """The metric's margin (share of answers)."""
    beyond: Beyond
    """Whether the rise is beyond the margin."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "rule": self.rule.text,
            "base": self.base.to_dict(),
            "head": self.head.to_dict(),
            "prediction_powered_difference": estimate_dict(self.ppi),
            "judge_only_difference": estimate_dict(self.judge_only),
            "margin": self.margin,
            "beyond_margin": self.beyond,
        }

    def line(self) -> str:
        """One line: the difference, its interval, the judge-only one and the margin's verdict."""
        p, j = self.ppi, self.judge_only
        if math.isnan(p.estimate):
            return f"{self.rule.text}: no prediction-powered difference ({self.base.note or self.head.note})"
        return (
            f"share of unfaithful answers, head − base, by {self.rule.text}: prediction-powered {p.estimate:+.3f} "
            f"(95 % CI {p.low:+.3f} to {p.high:+.3f}; labels n = {self.base.ppi.n} base, {self.head.ppi.n} head) · "
            f"judge only {j.estimate:+.3f} (95 % CI {j.low:+.3f} to {j.high:+.3f}) · margin {self.margin:g}: "
            f"{BEYOND_TEXT[self.beyond]}"
        )


def difference(base: Corrected, head: Corrected, margin: float, *, alpha: float = ALPHA) -> Difference:
    """The head − base share of unfaithful answers (prediction-powered), and whether it rises beyond ``margin``.

    The sides' labels are independent samples: the difference's variance is the sum of the sides'
    (:func:`gate.stats.ppi.difference`). ``beyond`` when the interval's lower bound exceeds ``margin``, ``within``
    when its upper bound is below it.

    Args:
        base: base's :func:`corrected`.
        head: head's, by the same rule.
        margin: the metric's non-inferiority margin, as a share of answers (> 0).
        alpha: 1 − the interval's coverage.
    """
    ppi = ppi_difference(base.ppi, head.ppi, alpha=alpha)
    beyond: Beyond = "cannot_tell"
    if ppi.low > margin:
        beyond = "beyond"
    elif ppi.high < margin:
        beyond = "within"
    judge = ppi_difference(base.judge_only, head.judge_only, alpha=alpha)
    return Difference(head.rule, base, head, ppi, judge, margin, beyond)


def estimate_text(e: MeanEstimate) -> str:
    """``0.312 (95 % CI 0.210 to 0.414)``; without variation ``0.000 (no interval: ...)``; or ``n/a``."""
    if math.isnan(e.estimate):
        return "n/a"
    if math.isnan(e.low):
        return f"{e.estimate:.3f} (no interval: every value it rests on is the same, so their spread is unknown)"
    return f"{e.estimate:.3f} (95 % CI {e.low:.3f} to {e.high:.3f})"


def corrected_line(c: Corrected) -> str:
    """One line: the three estimates of the share of unfaithful answers."""
    if c.note:
        return f"share of unfaithful answers: {c.note}"
    return (
        f"share of unfaithful answers in the run: prediction-powered {estimate_text(c.ppi)} "
        f"(PPI++, λ = {c.ppi.lam:.2f}, {c.ppi.n} labels + {c.ppi.N} judged) · labels only "
        f"{estimate_text(c.labels_only)} · judge only {estimate_text(c.judge_only)}"
    )


def compare_labelled(
    base_dir: Path, head_dir: Path, base_labels: Path, head_labels: Path, gated: Sequence[str], margins: Any
) -> list[Difference]:
    """The head − base of the share of unfaithful answers for each gated rule, from each side's run and labels.

    Args:
        base_dir: base's run directory.
        head_dir: head's run directory.
        base_labels: labels of base's answers.
        head_labels: labels of head's answers.
        gated: the gated metrics (the comparison's policy).
        margins: a callable metric name → margin (:meth:`gate.config.GatePolicy.margin`).

    Raises:
        InputError: a side is not a run directory, or a labels file is malformed or pairwise.
    """
    from gate.errors import InputError
    from gate.labels.agreement import load_labels
    from gate.labels.rules import rules_of
    from gate.labels.sampling import judged_answers

    sides = []
    for name, run, path in (("base", base_dir, base_labels), ("head", head_dir, head_labels)):
        if not Path(run).is_dir():
            raise InputError(f"--labels: {name} must be a run directory (its judge's calls on every answer)")
        labels = load_labels(path)
        if labels[0].pairwise:
            raise InputError(f"{path}: pairwise labels (better): --labels takes labels of single answers")
        sides.append((labels, judged_answers(run)[1]))
    rules = [rule for rule in rules_of(gated) if rule.gated] or rules_of(gated)
    out = []
    for rule in rules:
        base, head = (corrected(labels, answers, rule) for labels, answers in sides)
        out.append(difference(base, head, float(margins(rule.metric))))
    return out
