"""Which test runs where: the table ``(kind, repeats, clustered) → tests`` (STATISTICS.md §2, §4, §6 items 2 and 6).

One table serves both levels of the analysis: :mod:`gate.stats.decision` takes the metric-level test (one
p-value per metric, on the per-case means), :mod:`gate.stats.cases` the per-case test (one p-value per case,
on its repeats) and the multiplicity procedure across cases. Change a choice here and both callers follow.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from gate.results import Kind

Repeats = Literal["single", "repeated"]
"""``"single"``: one run per case on both sides (R = 1); ``"repeated"``: more on at least one side."""


class MetricTest(StrEnum):
    """The one-sided "head worse" test of a metric's mean paired difference."""

    MCNEMAR_EXACT = "mcnemar_exact"
    """Exact McNemar (binomial test on the discordant pairs): binary outcomes, one run per case."""
    SIGN_FLIP = "sign_flip"
    """Paired sign-flip randomization on the per-case differences (exact ≤ 20 units, else Monte Carlo)."""
    SIGN_FLIP_CLUSTERS = "sign_flip_clusters"
    """The sign-flip test flipping whole clusters (dependent cases move together)."""


class CaseTest(StrEnum):
    """The one-sided "head worse" test of one case's repeats."""

    NONE = "none"
    """One run per side: no test, a flip is reported as a single observation."""
    FISHER_EXACT = "fisher_exact"
    """Fisher's exact test, conditional on the case's total passes (hypergeometric; binary repeats)."""
    PERMUTATION_EXACT = "permutation_exact"
    """Exact permutation test of the mean difference, conditional on the case's pooled scores (graded, ratio)."""


class CaseMultiplicity(StrEnum):
    """How the per-case p-values of one metric are corrected for testing every case."""

    DISCRETE_BH_STEP_UP = "discrete_bh_step_up"
    """Döhler, Durand & Roquain (2018) discrete Benjamini–Hochberg step-up on the exact null distributions."""


@dataclass(frozen=True)
class Selection:
    """The tests chosen for one metric."""

    metric: MetricTest
    """Test of the metric's mean difference (:func:`gate.stats.decision.analyze_metrics`)."""
    case: CaseTest
    """Test of each case's repeats (:func:`gate.stats.cases.analyze_cases`)."""
    case_multiplicity: CaseMultiplicity
    """Correction across the metric's cases."""


KINDS: tuple[Kind, ...] = ("binary", "graded", "ratio")
REPEATS: tuple[Repeats, ...] = ("single", "repeated")

_CASE = {"binary": CaseTest.FISHER_EXACT, "graded": CaseTest.PERMUTATION_EXACT, "ratio": CaseTest.PERMUTATION_EXACT}

TABLE: dict[tuple[Kind, Repeats, bool], Selection] = {
    (kind, repeats, clustered): Selection(
        metric=(
            MetricTest.SIGN_FLIP_CLUSTERS
            if clustered
            else MetricTest.MCNEMAR_EXACT
            if kind == "binary" and repeats == "single"
            else MetricTest.SIGN_FLIP
        ),
        case=CaseTest.NONE if repeats == "single" else _CASE[kind],
        case_multiplicity=CaseMultiplicity.DISCRETE_BH_STEP_UP,
    )
    for kind in KINDS
    for repeats in REPEATS
    for clustered in (False, True)
}
"""Every (kind, repeats, clustered) combination → its tests.

- Metric level: exact McNemar for binary metrics with one run per case and independent cases (STATISTICS.md
  §6 item 2); the sign-flip test on per-case differences otherwise (pass fractions with repeats, graded
  scores, log-ratios), flipping clusters when cases are clustered.
- Case level: no test with one run per side; with repeats, an exact test conditional on the case's own data —
  Fisher's exact test for binary repeats, the exact permutation test of the mean difference for graded and
  ratio repeats (log values) — so each p-value has a known, discrete null distribution, which the discrete
  Benjamini–Hochberg step-up procedure uses across the metric's cases. Clusters do not change per-case tests:
  a case's repeats are compared with each other, not with other cases.
"""


def repeats_of(r_base: int, r_head: int) -> Repeats:
    """``"single"`` when both sides have one run per case, else ``"repeated"``."""
    return "single" if r_base == 1 and r_head == 1 else "repeated"


def select(kind: Kind, r_base: int, r_head: int, clustered: bool) -> Selection:
    """The tests for a metric of this kind, repeats per side and clustering.

    Args:
        kind: ``"binary"``, ``"graded"`` or ``"ratio"``.
        r_base: runs per case on base (columns of the input), ≥ 1.
        r_head: runs per case on head, ≥ 1.
        clustered: whether cases carry cluster labels.

    Returns:
        The :class:`Selection` from :data:`TABLE`.

    Raises:
        ValueError: an unknown kind or repeats < 1.

    """
    if kind not in KINDS or r_base < 1 or r_head < 1:
        raise ValueError(f"need a kind in {KINDS} and repeats ≥ 1, got {kind!r}, {r_base}, {r_head}")
    return TABLE[(kind, repeats_of(r_base, r_head), bool(clustered))]
