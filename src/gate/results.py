"""The result types of a comparison (a contract): per-metric results, the verdict, case statuses, aggregates.

A contract module: it imports the standard library only (import-linter checks it), so
that :mod:`gate.comparison` and every reader of ``report.json`` load without the statistics engine (scipy). The
engine (:mod:`gate.stats`) builds these types; their home is here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Status = Literal["pass", "fail", "inconclusive", "not_applicable"]
"""A metric's outcome; ``not_applicable`` when the metric applies to no case (e.g. refusal without out-of-domain
cases): it is left out of the decision."""
Verdict = Literal["pass", "fail", "inconclusive", "error"]
"""The gate's outcome (DESIGN §8): ``error`` when the evaluation could not be trusted (exit 3)."""
Kind = Literal["binary", "graded", "ratio"]
"""binary: 0/1 per case (McNemar); graded: in [0, 1] (sign-flip / bootstrap); ratio: positive and heavy-tailed
(latency, cost), compared as log-ratios."""
Direction = Literal["higher", "lower"]
"""Whether a higher or a lower value of the metric is better."""
CaseStatus = Literal["regressed", "suspected", "improved", "unchanged", "flaky", "not_applicable"]
"""A case's outcome on one metric (:func:`gate.stats.cases.analyze_cases`)."""


@dataclass(frozen=True)
class MetricResult:
    """Everything the comment and ``report.json`` show for one metric.

    ``delta``, ``se``, ``ci_*`` and ``mde`` are on the oriented scale (negative = worse): metric units for
    binary/graded metrics, natural-log ratio units for ratio metrics (see ``ratio*`` for the readable form).
    """

    name: str
    """Metric name."""
    kind: Kind
    """binary, graded or ratio."""
    direction: Direction
    """higher or lower (is better)."""
    margin: float
    """Configured margin (absolute; relative for ratio metrics)."""
    gated: bool
    """Whether the metric takes part in the verdict."""
    n_cases: int
    """Rows in the input (golden cases)."""
    n_pairs: int
    """Cases with a valid score on both sides (the analysed pairs)."""
    n_failed_base: int
    """Cases with at least one failed (errored) score on base."""
    n_failed_head: int
    """Cases with at least one failed score on head."""
    n_clusters: int | None
    """Distinct clusters among the pairs, or None without clusters."""
    r_base: int
    """Repeats per case on base (columns)."""
    r_head: int
    """Repeats per case on head."""
    base_mean: float
    """Mean over the pairs of per-case base means (metric units)."""
    head_mean: float
    """Mean over the pairs of per-case head means (metric units)."""
    delta: float
    """Δ̂, mean oriented per-case difference (log-ratio for ratio metrics); negative = head worse."""
    se: float
    """Miller's paired SE of Δ̂ (Eq. 7), clustered (Eq. 8) when clusters are given."""
    ci_low: float
    """L, lower end of the two-sided ``confidence`` interval of Δ (one-sided α′ bound)."""
    ci_high: float
    """U, upper end of that interval."""
    ci_method: str
    """How the interval was made: always the inversion of ``test_method`` (exact conditional Clopper–Pearson for
    exact McNemar, sign-flip test inversion for the sign-flip test), or none."""
    ci_clipped: bool
    """The interval was cut to [−1, 1], the range of a difference of two scores in [0, 1] (binary and graded
    metrics): an unbounded end, where the test cannot reject any difference at the interval's level (few cases)."""
    confidence: float
    """Two-sided coverage of the interval, 1 − 2α′ with α′ the Holm level of this metric."""
    alpha: float
    """The metric's family level α (0.01 when margin is 0)."""
    p_value: float
    """One-sided p-value for "head worse" (NaN with fewer than 2 pairs)."""
    p_adjusted: float
    """Holm-adjusted p across gated metrics (raw p for ungated metrics)."""
    test_method: str
    """The test that produced ``p_value``."""
    ratio: float | None
    """Ratio metrics: geometric-mean ratio head/base of the per-case means (1.10 = head 10 % higher)."""
    ratio_ci_low: float | None
    """Ratio metrics: lower end of the ratio's interval."""
    ratio_ci_high: float | None
    """Ratio metrics: upper end of the ratio's interval."""
    mde: float
    """Minimum detectable worsening: the drop the gate's own rule (the test at Holm's first-step level, and Δ̂ ≤ −m)
    fails with 80 % power (:func:`gate.stats.power.detectable_drop`); NaN when the metric did not vary."""
    omega2: float
    """ω̂², variance of the per-case true differences (Var̂(d) when R = 1)."""
    sigma2_base: float
    """σ̂_A², mean within-case variance on base (NaN with R = 1)."""
    sigma2_head: float
    """σ̂_B², the same on head."""
    icc: float
    """Share of score variance that is between cases (NaN with R = 1)."""
    recommendation: str | None
    """Advice when the MDE exceeds the margin, e.g. "use R = 5 to detect drops of 0.03"."""
    n_worse: int | None
    """Paired cases whose oriented per-case difference is < 0 (head worse; a loss). None in reports written before
    schema 4."""
    n_tied: int | None
    """Paired cases whose per-case difference is 0 (a tie: the per-case means over repeats are equal)."""
    n_better: int | None
    """Paired cases whose per-case difference is > 0 (head better; a win)."""
    status: Status
    """fail (U < 0 ⟺ Holm p ≤ α, and Δ̂ ≤ −m), pass (L ≥ −m, or Δ̂ > 0: better), else inconclusive (worse, not
    significantly beyond the margin; fail in strict mode)."""
    non_inferior: bool | None
    """The interval excludes a worsening of the margin: L ≥ −m on the oriented scale (non-inferiority shown). None in
    reports written before schema 6."""
    reason: str
    """One sentence explaining ``status``."""


@dataclass(frozen=True)
class Aggregate:
    """Summary of one side's per-case means of a metric (cases where it applies)."""

    n: int
    """Cases with a valid value."""
    mean: float | None
    """Mean of the per-case means; None when ``n`` is 0."""
    sd: float | None
    """Sample standard deviation (ddof 1) of the per-case means; 0 for one case, None for none."""
    p10: float | None
    """10th percentile of the per-case means (numpy's linear interpolation)."""
    share_below_0_5: float | None
    """Share of cases whose mean is below 0.5, in [0, 1]."""


@dataclass(frozen=True)
class ErrorBudgetUse:
    """Evaluation failures of one gated metric on one side, against the error budget (DESIGN §8).

    An evaluation failure is a score the judge or scorer could not produce (a judge error, a missing score row);
    a failed prediction is a system error instead (the ``error_rate`` metric counts it), not an evaluation failure.
    """

    metric: str
    """Metric name."""
    side: Literal["base", "head"]
    """Which side."""
    failed: int
    """Evaluation failures (case × repeat rows)."""
    expected: int
    """Rows expected: cases × repeats of the side."""
    rate: float
    """``failed / expected`` in [0, 1]."""
    messages: tuple[str, ...]
    """The most frequent reasons, most frequent first, each as ``"N× reason"``."""


OOD_ANSWERED = "answered instead of refusing"
"""Why an out-of-domain must-pass case failed in a repeat that did not error (:attr:`MustPassFailure.why`)."""


@dataclass(frozen=True)
class MustPassFailure:
    """A must-pass case the base passed in every repeat and head failed in every repeat (STATISTICS.md §7).

    Passed means, per repeat: an out-of-domain case refused; an in-domain case answered without error, did not
    refuse, and scored 1 on each of the policy's must-pass metrics that apply to it (``must_pass.metrics``).
    """

    id: str
    """Golden case id."""
    question: str
    """The question (clipped)."""
    line: int
    """1-based line of the case in the golden file (0 when unknown)."""
    out_of_domain: bool
    """An out-of-domain case (passed = refused)."""
    why: str
    """What head did instead, e.g. ``answered instead of refusing`` or ``hit_rate@5 = 0``."""
    answer: str | None
    """Head's first valid answer (clipped); None when every repeat failed."""
    repeats_base: int
    """Base repeats, all passed."""
    repeats_head: int
    """Head repeats, all failed."""
    certain: bool
    """The flip is certain and blocks: R ≥ 2 on both sides with repeats that vary nowhere on either side (a
    deterministic pipeline), or the case's exact test survives Holm's procedure at the gate's α across the must-pass
    cases whose outcomes vary (:func:`gate.compare.mustpass.must_pass_failures`). Otherwise listed with a warning."""
    p_value: float = math.nan
    """One-sided exact conditional p-value of the case's R_A + R_B outcomes (Fisher's exact test; an all-repeat
    flip: 1/C(R_A + R_B, R_A)); NaN in reports written before it was recorded."""
    p_adjusted: float = math.nan
    """``p_value`` Holm-adjusted across the must-pass cases whose outcomes are not all equal."""
    repeats_to_block: int | None = None
    """Smallest repeats per side at which an all-repeat flip would survive Holm with this many varying cases
    (1/C(2R, R) ≤ α/m); None when certain already, or when no R ≤ 30 would do."""


@dataclass(frozen=True)
class PolicyChange:
    """A gate setting the PR's config changes: it applies after merge (the PR is judged under the base's)."""

    key: str
    """Config key, e.g. ``margins.refusal`` or ``fail_on_new_ood``."""
    base: str
    """The base's value, as written in YAML flow style (``–`` when unset)."""
    head: str
    """The PR's value."""


@dataclass(frozen=True)
class Decision:
    """The gate's verdict with the lines that explain it."""

    verdict: Verdict
    """pass, fail, inconclusive (fail in strict mode) or error (an error budget exceeded, or a gated metric that
    cannot be scored on either side), as :func:`gate.stats.decision.gate_decision` decides it."""
    reasons: tuple[str, ...]
    """One line per failing, inconclusive or budget-breaking item, or one line for a pass."""
    warnings: tuple[str, ...]
    """Findings that did not decide the verdict (e.g. new out-of-domain failures without evidence)."""


def raw_difference(direction: str, delta: float, low: float, high: float) -> tuple[float, float, float]:
    """An oriented difference (negative = worse) and its interval as head − base in metric units.

    Args:
        direction: ``higher`` or ``lower`` (is better).
        delta: oriented Δ̂.
        low: oriented interval's lower end.
        high: oriented interval's upper end.

    Returns:
        (head − base, its interval's lower end, its upper end): unchanged when higher is better, negated and
        swapped when lower is better.
    """
    return (delta, low, high) if direction == "higher" else (-delta, -high, -low)
