"""Per-case verdicts: regressed, suspected, improved, flaky (STATISTICS.md §4, §6 item 6)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gate.results import CaseStatus
from gate.stats.discrete import ExactCaseTest, discrete_bh, fisher_cases, permutation_cases
from gate.stats.inputs import MetricInput, case_effects, oriented_repeats, ratio_scale
from gate.stats.selection import CaseTest, select

DEFAULT_TAU = {"binary": 0.5, "graded": 0.2, "ratio": 0.5}
"""Default per-case effect threshold τ: pass-rate for binary, score for graded, relative (50 %) for ratio."""
_EFFECT_TOL = 1e-9
"""An effect within this of ±τ counts as reaching it (0.8 − 1.0 is −0.19999999999999996 in floating point)."""


@dataclass(frozen=True)
class CaseResult:
    """The verdict on one case for one metric."""

    index: int
    """Row of the case in the metric's input arrays (0-based)."""
    metric: str
    """Metric name."""
    base_mean: float
    """Mean over the case's valid base repeats (metric units); NaN if none."""
    head_mean: float
    """Mean over the case's valid head repeats; NaN if none."""
    effect: float
    """Oriented head − base (negative = worse); for ratio metrics the oriented log-ratio of the means."""
    p_value: float
    """One-sided p for "head worse", exact and conditional on the case's runs (Fisher's test for binary
    repeats, the permutation test for graded/ratio ones); NaN with a single observation per side."""
    p_adjusted: float
    """Discrete Benjamini–Hochberg (step-up) adjusted p across the metric's cases whose runs can show a drop
    of τ; 1 for a tested case whose runs cannot; NaN when ``p_value`` is."""
    status: CaseStatus
    """regressed > suspected > improved > flaky > unchanged (first that applies); not_applicable if unpaired."""
    flaky_base: bool
    """The case varies across base repeats (mixed pass/fail, or within-case SD > τ/2)."""
    flaky_head: bool
    """The same on head."""
    n_base: int
    """Valid base repeats."""
    n_head: int
    """Valid head repeats."""
    single_observation: bool
    """True when a side has fewer than 2 valid repeats: no per-case test, "regressed" is impossible."""


def _flaky(x: np.ndarray, binary: bool, tau: float) -> np.ndarray:
    """Per row: mixed outcomes (binary) or within-case SD > τ/2 (graded/ratio), over ≥ 2 valid repeats."""
    rows = np.sum(~np.isnan(x), axis=1) >= 2
    out = np.zeros(x.shape[0], dtype=bool)
    if binary:
        out[rows] = np.nanmax(x[rows], axis=1) > np.nanmin(x[rows], axis=1)
    else:
        out[rows] = np.nanstd(x[rows], axis=1, ddof=1) > tau / 2
    return out


def _case_tests(
    base: np.ndarray, head: np.ndarray, test: CaseTest, testable: np.ndarray, tau: float
) -> list[ExactCaseTest | None]:
    """The selected exact test of every testable case over its valid runs (None elsewhere)."""
    out: list[ExactCaseTest | None] = [None] * base.shape[0]
    if test is CaseTest.NONE:
        return out
    rows = np.flatnonzero(testable)
    n_base, n_head = np.sum(~np.isnan(base[rows]), axis=1), np.sum(~np.isnan(head[rows]), axis=1)
    if test is CaseTest.FISHER_EXACT:
        k_base, k_head = np.nansum(base[rows], axis=1), np.nansum(head[rows], axis=1)
        for i, result in zip(rows, fisher_cases(k_base, k_head, n_base, n_head, tau=tau), strict=True):
            out[i] = result
        return out
    for shape in set(zip(n_base.tolist(), n_head.tolist(), strict=True)):  # cases with the same numbers of runs
        same = rows[(n_base == shape[0]) & (n_head == shape[1])]
        a = base[same][~np.isnan(base[same])].reshape(same.size, shape[0])  # valid runs, in repeat order
        b = head[same][~np.isnan(head[same])].reshape(same.size, shape[1])
        for i, result in zip(same, permutation_cases(a, b, tau=tau), strict=True):
            out[i] = result
    return out


def _discoveries(tests: list[ExactCaseTest | None], q: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(raw p, adjusted p, rejected) per case: discrete BH step-up over the cases that can show a drop of τ.

    A tested case whose runs admit no split with a drop of τ has a p-value that is 1 with probability 1 given
    its runs: it can never be a discovery, so it leaves the family (adjusted p = 1) instead of diluting it.
    """
    n = len(tests)
    p, adjusted, rejected = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, dtype=bool)
    family, members = [], []
    for i, t in enumerate(tests):
        if t is None:
            continue
        p[i], adjusted[i] = t.p_value, 1.0
        if t.drop_support is None or t.drop_support[0] < 1.0:
            family.append(i)
            members.append(t)
    if family:
        rej, adj = discrete_bh(np.array([t.drop_p_value for t in members]), [t.drop_support for t in members], q=q)
        adjusted[family], rejected[family] = adj, rej
    return p, adjusted, rejected


def analyze_cases(inp: MetricInput, *, tau: float | None = None, q: float = 0.10) -> list[CaseResult]:
    """Classify every case of one metric as regressed, suspected, improved, flaky, unchanged or not applicable.

    Per case, over its valid repeats (NaN and failed scores excluded): effect = oriented head − base mean
    (log-ratio for ratio metrics). With ≥ 2 valid repeats on both sides a one-sided "head worse" p-value
    comes from the test :func:`gate.stats.selection.select` picks: Fisher's exact test (binary) or the exact
    permutation test (graded; ratio metrics on log values), conditional on the case's runs, so its null
    distribution is known. The claims "dropped by ≥ τ" of the cases whose runs can show such a drop are
    corrected with the discrete Benjamini–Hochberg step-up procedure (:func:`gate.stats.discrete.discrete_bh`),
    which holds the false discovery rate at q for independent cases without any variance model.
    Status, first that applies: ``regressed`` (effect ≤ −τ and discrete-BH adjusted p ≤ q), ``suspected``
    (effect ≤ −τ, not significant or a single observation: with R = 1 a flip is reported, never proven),
    ``improved`` (effect ≥ τ), ``flaky`` (a side varies across repeats: mixed pass/fail or SD > τ/2),
    ``unchanged``. Cases without a valid score on a side are ``not_applicable``. Results are in case order;
    sort by ``effect`` for display. These are the statistical verdicts; the report lists a single-observation
    drop and a crash as regressed (:func:`gate.compare.cases.listed_as`).

    Args:
        inp: the metric's scores (see :class:`MetricInput`).
        tau: effect threshold τ > 0 in the margin's units (absolute; relative for ratio metrics); default
            :data:`DEFAULT_TAU` of the kind.
        q: BH false discovery rate in (0, 1).

    Returns:
        One :class:`CaseResult` per row of ``inp.base``.

    Raises:
        ValueError: tau ≤ 0 (or ≥ 1 for ratio metrics that are higher-is-better), q outside (0, 1).

    Source: Fisher (1935); Döhler, Durand & Roquain (2018), doi:10.1214/18-EJS1441; Benjamini & Hochberg
    (1995), doi:10.1111/j.2517-6161.1995.tb02031.x; STATISTICS.md §4.

    """
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    tau = DEFAULT_TAU[inp.kind] if tau is None else tau
    if tau <= 0 or (inp.kind == "ratio" and inp.direction == "higher" and tau >= 1):
        raise ValueError(f"tau must be > 0 (and < 1 for a higher-is-better ratio), got {tau}")
    binary = inp.kind == "binary"
    base, head = oriented_repeats(inp)
    n_base, n_head = np.sum(~np.isnan(base), axis=1), np.sum(~np.isnan(head), axis=1)
    paired = (n_base > 0) & (n_head > 0)
    tau_eff = ratio_scale(tau, inp.direction) if inp.kind == "ratio" else tau
    test = select(inp.kind, base.shape[1], head.shape[1], inp.clusters is not None).case
    tests = _case_tests(base, head, test, paired & (n_base >= 2) & (n_head >= 2), tau_eff)
    p, p_adj, rejected = _discoveries(tests, q)
    flaky_base, flaky_head = _flaky(base, binary, tau_eff), _flaky(head, binary, tau_eff)
    raw_base, raw_head, effects = case_effects(inp)
    out = []
    for i in range(base.shape[0]):
        effect = float(effects[i]) if paired[i] else float("nan")
        if not paired[i]:
            status: CaseStatus = "not_applicable"
        elif effect <= -tau_eff + _EFFECT_TOL and rejected[i]:
            status = "regressed"
        elif effect <= -tau_eff + _EFFECT_TOL:
            status = "suspected"
        elif effect >= tau_eff - _EFFECT_TOL:
            status = "improved"
        elif flaky_base[i] or flaky_head[i]:
            status = "flaky"
        else:
            status = "unchanged"
        out.append(
            CaseResult(
                index=i,
                metric=inp.name,
                base_mean=float(raw_base[i]),
                head_mean=float(raw_head[i]),
                effect=effect,
                p_value=float(p[i]),
                p_adjusted=float(p_adj[i]),
                status=status,
                flaky_base=bool(flaky_base[i]),
                flaky_head=bool(flaky_head[i]),
                n_base=int(n_base[i]),
                n_head=int(n_head[i]),
                single_observation=bool(paired[i] and min(n_base[i], n_head[i]) < 2),
            )
        )
    return out
