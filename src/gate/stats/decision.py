"""Per-metric paired analysis and the gate decision: pass, fail, inconclusive or error (STATISTICS.md §3, §6)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gate.results import OOD_ANSWERED, Decision, ErrorBudgetUse, MetricResult, MustPassFailure, Status, raw_difference
from gate.results import Verdict as Verdict  # re-exported: the types' home is gate.results
from gate.stats import numbers
from gate.stats.detectable import POWER, first_step_levels, fixed_mde, power_model
from gate.stats.inputs import (
    MetricInput,
    MetricPolicy,
    case_effects,
    has_values,
    oriented_repeats,
    ratio_scale,
    unpaired_status,
)
from gate.stats.intervals import (
    FlipThresholds,
    clustered_se,
    exact_flip_thresholds,
    mcnemar_interval,
    monte_carlo_flip_thresholds,
    n_units,
    paired_se,
    units_of,
)
from gate.stats.power import (
    RECOMMENDATION_TARGET,
    recommendation,
    settling_design,
    variance_decomposition,
)
from gate.stats.selection import MetricTest, select
from gate.stats.significance import EXACT_MAX_UNITS, holm, mcnemar_exact, sign_flip_draws


@dataclass(frozen=True)
class _Paired:
    d: np.ndarray
    base_means: np.ndarray
    head_means: np.ndarray
    base_rep: np.ndarray
    head_rep: np.ndarray
    clusters: np.ndarray | None
    n_failed_base: int
    n_failed_head: int
    ok: np.ndarray


def _pair(inp: MetricInput) -> _Paired:
    """Per-case means over valid repeats, the oriented differences d_i, restricted to cases valid on both sides."""
    base_rep, head_rep = oriented_repeats(inp)
    ok = (~np.isnan(base_rep)).any(axis=1) & (~np.isnan(head_rep)).any(axis=1)
    base_rep, head_rep = base_rep[ok], head_rep[ok]
    base_means, head_means, d = (x[ok] for x in case_effects(inp))
    clusters = None if inp.clusters is None else np.asarray(inp.clusters)[ok]
    return _Paired(
        d=d,
        base_means=base_means,
        head_means=head_means,
        base_rep=base_rep,
        head_rep=head_rep,
        clusters=clusters,
        n_failed_base=int(np.asarray(inp.failed_base, dtype=bool).any(axis=1).sum()),
        n_failed_head=int(np.asarray(inp.failed_head, dtype=bool).any(axis=1).sum()),
        ok=ok,
    )


@dataclass(frozen=True)
class _Group:
    """Metrics paired over the same cases (and clusters): they share their resamples."""

    members: tuple[int, ...]
    """Indices of the metrics in the input order."""
    test_rng: np.random.Generator
    """Sign vectors of the Monte Carlo sign-flip test (which also give the intervals)."""


def _groups(pairs: Sequence[_Paired], seed: int) -> list[_Group]:
    """Group metrics by the cases (and cluster labels) they are paired over; seed each group from its case set.

    One generator per group (the first of two spawned from the seed and a digest of the paired case set only —
    not from which metrics are in the group), so adding a metric changes no other metric's result, and metrics
    over the same cases share one set of sign vectors (one draw serves them all).
    """
    by_key: dict[bytes, list[int]] = {}
    for k, pair in enumerate(pairs):
        digest = hashlib.sha256(np.packbits(pair.ok).tobytes() + pair.ok.size.to_bytes(8, "little"))
        if pair.clusters is not None:
            _, inverse = np.unique(pair.clusters, return_inverse=True)
            digest.update(b"clusters" + inverse.astype(np.int64).tobytes())
        by_key.setdefault(digest.digest(), []).append(k)
    out = []
    for key, members in by_key.items():
        test_ss, _ = np.random.SeedSequence([seed, int.from_bytes(key[:8], "little")]).spawn(2)
        out.append(_Group(tuple(members), np.random.default_rng(test_ss)))
    return out


_MCNEMAR_CI = "exact conditional (Clopper–Pearson on the discordant pairs: the inversion of exact McNemar)"
_FLIP_CI = "sign-flip test inversion"


@dataclass(frozen=True)
class _Procedure:
    """What turns a metric's test into its interval at any level (test–interval duality)."""

    mcnemar: tuple[int, int, int] | None = None
    """(b worse, c better, N) for exact McNemar: the Clopper–Pearson interval mapped to Δ."""
    exact_units: tuple[np.ndarray, np.ndarray, float] | None = None
    """(unit sums, unit sizes, tie tolerance) of an exact sign-flip test: re-enumerated for the interval."""
    thresholds: FlipThresholds | None = None
    """The Monte Carlo sign-flip test's thresholds (its B sign vectors and the identity)."""

    def interval(self, level: float) -> tuple[float, float, str]:
        """(L, U, method): one-sided ``level`` bounds from the inversion of the metric's own test."""
        if self.mcnemar is not None:
            return (*mcnemar_interval(*self.mcnemar, level), _MCNEMAR_CI)
        if self.exact_units is not None:
            sums, sizes, tol = self.exact_units
            return (*exact_flip_thresholds(sums, sizes, tol).bounds(level), f"{_FLIP_CI} (exact, 2^{sums.size})")
        if self.thresholds is not None:
            b = self.thresholds.upper.size - 1
            return (*self.thresholds.bounds(level), f"{_FLIP_CI} (Monte Carlo, the test's B={b} sign vectors)")
        return float("nan"), float("nan"), "none"


def _tests(
    inputs: Sequence[MetricInput], pairs: Sequence[_Paired], groups: Sequence[_Group], n_resamples: int
) -> list[tuple[float, str, _Procedure]]:
    """One-sided "head worse" p-value, method and the procedure that inverts the test, per metric.

    Exact McNemar (its Clopper–Pearson dual) and exact sign-flip tests need no generator; the Monte Carlo
    sign-flip tests of a group share one set of sign vectors (:func:`gate.stats.significance.sign_flip_draws`),
    whose thresholds also give each metric's interval (:class:`gate.stats.intervals.FlipThresholds`).
    """
    none = (float("nan"), "none (fewer than 2 pairs)", _Procedure())
    out: list[tuple[float, str, _Procedure]] = [none] * len(inputs)
    for group in groups:
        monte_carlo = []
        for k in group.members:
            inp, pair = inputs[k], pairs[k]
            if pair.d.size < 2:
                continue
            test = select(inp.kind, pair.base_rep.shape[1], pair.head_rep.shape[1], inp.clusters is not None).metric
            if test is MetricTest.MCNEMAR_EXACT:
                res = mcnemar_exact(pair.base_rep[:, 0], pair.head_rep[:, 0], alternative="less")
                worse = int(np.sum(pair.d < 0))
                better = int(np.sum(pair.d > 0))
                out[k] = (res.p_value, res.method, _Procedure(mcnemar=(worse, better, int(pair.d.size))))
            elif n_units(pair.d, pair.clusters) <= EXACT_MAX_UNITS:
                sums, sizes = units_of(pair.d, pair.clusters)
                tol = 1e-10 * float(np.abs(sums).sum())
                p = exact_flip_thresholds(sums, sizes, tol).p_worse()
                where = "clusters" if pair.clusters is not None else "cases"
                method = f"sign-flip randomization (one-sided, head worse, exact 2^{sums.size} over {where})"
                out[k] = (p, method, _Procedure(exact_units=(np.asarray(sums, dtype=float), sizes, tol)))
            else:
                monte_carlo.append(k)
        if monte_carlo:
            first = pairs[monte_carlo[0]]
            _, sizes = units_of(first.d, first.clusters)
            units = np.column_stack([units_of(pairs[k].d, first.clusters)[0] for k in monte_carlo])
            tol = 1e-10 * np.abs(units).sum(axis=0)
            flipped, flipped_n = sign_flip_draws(units, sizes, group.test_rng, n_resamples)
            where = "clusters" if first.clusters is not None else "cases"
            method = f"sign-flip randomization (one-sided, head worse, Monte Carlo B={n_resamples} over {where})"
            for j, k in enumerate(monte_carlo):
                thresholds = monte_carlo_flip_thresholds(flipped[:, j], flipped_n, float(tol[j]))
                out[k] = (thresholds.p_worse(), method, _Procedure(thresholds=thresholds))
    return out


def _intervals(tested: Sequence[tuple[float, str, _Procedure]], levels: np.ndarray) -> list[tuple[float, float, str]]:
    """(L, U, method) of every metric at its level: the inversion of the test that gave its p.

    U < 0 exactly when the one-sided p is ≤ the level (duality); a floating-point tie at that boundary is settled
    in the test's favour, so the interval and p can never disagree about "no change".
    """
    out = []
    for (p, _, procedure), level in zip(tested, levels, strict=True):
        low, high, method = procedure.interval(float(level))
        if not math.isnan(p) and not math.isnan(high) and (p <= level) != (high < 0):
            high = float(np.nextafter(0.0, -1.0)) if p <= level else max(high, 0.0)
        out.append((low, high, method))
    return out


def _holm_levels(
    p: np.ndarray, alphas: np.ndarray, gated: np.ndarray, testable: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Holm-adjusted p over the gated, testable metrics with a finite p, and each metric's one-sided CI level α′.

    α′ is the level Holm's step-down tests the metric at: α_k/(M − j + 1) for the metric of rank j among M when
    every metric ranked before it was rejected, else the level of the step where the procedure stopped
    (α_k/(M − s + 1), s the first step not rejected). Then the interval at α′ excludes "no change" exactly when
    the Holm-adjusted p is ≤ α_k: the interval and the p beside it are one procedure. Other metrics keep p and
    α_k. A metric whose per-case differences are all 0 cannot reach any p below 1: it is left out of the family
    (Tarone 1990, doi:10.2307/2531718: hypotheses that cannot be rejected need no share of α), so an unchanged
    metric such as ``error_rate`` without errors costs the others no power.
    """
    family = gated & testable & ~np.isnan(p)
    p_adj, levels = p.copy(), alphas.copy()
    p_adj[family] = holm(p[family])
    idx = np.flatnonzero(family)
    order = idx[np.argsort(p[idx], kind="stable")]
    m = order.size
    for j, k in enumerate(order):
        a = alphas[k]
        stop = next((s for s in range(j + 1) if min(1.0, (m - s) * p[order[s]]) > a), j)
        levels[k] = a / (m - stop)
        if (p_adj[k] <= a) != (p[k] <= levels[k]):  # floating-point tie: the level follows the Holm decision
            levels[k] = p[k] if p_adj[k] <= a else float(np.nextafter(p[k], 0.0))
    return p_adj, levels


@dataclass(frozen=True)
class _Shown:
    """How a metric's change reads in a reason.

    In metric units as head − base (ratios for ratio metrics), with the verb of a worsening ("fell" when higher
    is better, "rose" when lower is better).
    """

    effect: str
    interval: str
    margin: str
    worse: str
    """"fell" or "rose": the direction a worsening takes."""
    p_label: str
    """"p (Holm-adjusted)" for gated metrics, "p" for the others."""


def _ratios(inp: MetricInput, delta: float, low: float, high: float) -> tuple[float, float, float]:
    """Ratio metrics: (head/base geometric-mean ratio, interval low, interval high) from the oriented log scale."""
    sign = 1.0 if inp.direction == "higher" else -1.0
    r_low, r_high = sorted((math.exp(sign * low), math.exp(sign * high)))
    return math.exp(sign * delta), r_low, r_high


def _shown(inp: MetricInput, metric_policy: MetricPolicy, delta: float, low: float, high: float) -> _Shown:
    worse = "fell" if inp.direction == "higher" else "rose"
    p_label = "p (Holm-adjusted)" if inp.gated else "p"
    if inp.kind != "ratio":
        d, lo, hi = raw_difference(inp.direction, delta, low, high)
        interval = f"[{numbers.number(lo, signed=True)}, {numbers.number(hi, signed=True)}]"
        return _Shown(f"Δ = {numbers.number(d, signed=True)}", interval, metric_policy.label, worse, p_label)
    ratio, r_low, r_high = _ratios(inp, delta, low, high)
    interval = f"[{numbers.ratio(r_low)}, {numbers.ratio(r_high)}]"
    return _Shown(f"head/base = {numbers.ratio(ratio)}", interval, metric_policy.label, worse, p_label)


def _decide(
    delta: float,
    low: float,
    high: float,
    margin: float,
    p_adj: float,
    alpha: float,
    n_pairs: int,
    n_worse: int,
    shown: _Shown,
    resolution: float = 0.0,
) -> tuple[Status, str]:
    """Apply the outcome rule on the oriented scale (``margin`` already on that scale).

    FAIL: U < 0 (the test's p ≤ α: they are one procedure) and Δ̂ ≤ −m. PASS: L ≥ −m (non-inferior), or Δ̂ > 0
    (head better: an improvement, significant or not, never reads as inconclusive and never blocks), or no paired
    case got worse (``n_worse`` 0: however wide the interval on few cases, no regression), or the margin is smaller
    than one case (``resolution``, 1/N for a binary metric) and the worsening is at most one case: N cases cannot
    show a change smaller than one case, and one case is never significant (exact McNemar 1 vs 0: p = ½), so such a
    margin would turn every single flip into "inconclusive". Else INCONCLUSIVE: worse (or unchanged on average while
    some cases got worse), but not significantly beyond the margin.
    """
    if n_pairs < 2:
        if n_pairs and n_worse == 0:  # the rule below: no paired case got worse, however wide the interval
            return (
                "pass",
                f"no paired case got worse (the only paired case {'got better' if delta > 0 else 'is unchanged'})",
            )
        return "inconclusive", f"only {n_pairs} paired case(s)"
    p_text = numbers.p_clause(shown.p_label, p_adj)
    drop = "drop" if shown.worse == "fell" else "rise"
    if high < 0 and delta <= -margin and p_adj <= alpha:
        return "fail", (
            f"{shown.worse} beyond the margin of {shown.margin}, significantly (worse): {shown.effect}, "
            f"CI {shown.interval}, {p_text} ≤ {alpha:g}"
        )
    if delta > 0:
        if low > 0:
            return "pass", f"better, significantly: {shown.effect}, CI {shown.interval} excludes no change"
        if low >= -margin:
            return "pass", (
                f"better, not significant, non-inferior: {shown.effect}, CI {shown.interval} excludes a {drop} "
                f"of {shown.margin}"
            )
        return "pass", (
            f"better, not significant: {shown.effect}, CI {shown.interval} (an improvement never blocks; "
            f"non-inferiority to a {drop} of {shown.margin} is not shown)"
        )
    if low >= -margin:  # ≥, not >: with margin 0 an unchanged metric (interval [0, 0]) is non-inferior
        minor = " (minor regression within tolerance)" if high < 0 else ""
        return "pass", f"non-inferior{minor}: {shown.effect}, CI {shown.interval} excludes a {drop} of {shown.margin}"
    if n_worse == 0:
        return "pass", f"no paired case got worse ({n_pairs} of {n_pairs} unchanged)"
    if margin < resolution and -delta <= resolution * (1 + 1e-9):
        return "pass", (
            f"within one case: {shown.effect} is at most one case of {n_pairs}, and the margin of {shown.margin} is "
            f"smaller than one case ({numbers.number(resolution)}): {n_pairs} cases cannot show a smaller change"
        )
    if delta <= -margin:  # beyond the margin on average, but the test (and so the interval) is not significant
        return "inconclusive", (
            f"{shown.worse} beyond the margin of {shown.margin}: {shown.effect}, CI {shown.interval}, but "
            f"{p_text} > {alpha:g}: not significant"
        )
    word = "worse" if delta < 0 else "unchanged on average"
    return "inconclusive", (
        f"{word}, but not significantly beyond the margin: {shown.effect}, CI {shown.interval} neither excludes a "
        f"{drop} of {shown.margin} nor shows a significant {drop} beyond it"
    )


def analyze_metrics(
    inputs: Sequence[MetricInput],
    *,
    alpha: float = 0.05,
    seed: int = 0,
    n_resamples: int = 10_000,
    strict: bool = False,
) -> list[MetricResult]:
    """Paired, variance-aware comparison of head against base for every metric, with the per-metric verdict.

    Per metric: per-case means over valid repeats, paired over the cases valid on both sides; oriented
    differences d_i (log-ratios of the per-case means for ratio metrics); Δ̂ = d̄; Miller's paired SE
    (clustered when clusters are given); a one-sided "head worse" p-value (exact McNemar for binary
    metrics with R = 1 and no clusters, else the sign-flip test, exact for ≤ 20 units, Monte Carlo
    (1 + b)/(1 + B) above, flipping whole clusters when given); Holm across gated metrics; the interval at
    two-sided level 1 − 2α′ (α′ the level Holm tests the metric at) is the inversion of that same test
    (test–interval duality): exact McNemar → the exact conditional Clopper–Pearson interval on the discordant
    pairs mapped to Δ; sign-flip → the set of shifts δ the sign-flip test (same sign vectors) does not reject.
    So the interval excludes "no change" exactly when the Holm-adjusted p is ≤ α_k. Then
    FAIL iff U < 0 and Δ̂ ≤ −m; PASS iff L ≥ −m or Δ̂ > 0 (an improvement); else INCONCLUSIVE (worse, not
    significantly beyond the margin; FAIL if ``strict``). α_k = α, or 0.01 for a metric whose margin is 0.
    Metrics paired over the same cases (and clusters) share their random sign vectors, drawn from a generator
    derived from ``seed`` and that case set only, so adding a metric does not change another's result; the same
    inputs and seed give identical results.

    Args:
        inputs: one :class:`MetricInput` per metric; names must be unique.
        alpha: one-sided family-wise level in (0, 0.5).
        seed: non-negative integer seed.
        n_resamples: B for the Monte Carlo sign-flip test (and its interval).
        strict: turn inconclusive metrics into failures (release branches, safety metrics).

    Returns:
        One :class:`MetricResult` per input, in input order.

    Raises:
        ValueError: duplicate metric names, alpha outside (0, 0.5) or a negative seed.

    Source: Miller (2024), arXiv:2411.00640 (Eq. 7, 8, 10); Smucker et al. (2007),
    doi:10.1145/1321440.1321528; Holm (1979); Clopper & Pearson (1934); Hartigan (1969), JASA 64(328):1303-1317
    (permutation/sign-flip confidence sets); STATISTICS.md §3 and §6 (outcome rule, test–interval duality).

    """
    names = [inp.name for inp in inputs]
    if len(set(names)) != len(names):
        raise ValueError(f"metric names must be unique, got {names}")
    if not 0 < alpha < 0.5 or seed < 0:
        raise ValueError(f"need 0 < alpha < 0.5 and seed ≥ 0, got {alpha}, {seed}")
    pairs = [_pair(inp) for inp in inputs]
    groups = _groups(pairs, seed)
    tested = _tests(inputs, pairs, groups, n_resamples)
    p = np.array([t[0] for t in tested], dtype=float)
    policies = [inp.metric_policy(alpha) for inp in inputs]
    alphas = np.array([metric_policy.alpha for metric_policy in policies], dtype=float)
    gated = np.array([inp.gated for inp in inputs], dtype=bool)
    testable = np.array([bool(np.any(pair.d != 0)) for pair in pairs], dtype=bool)
    p_adj, levels = _holm_levels(p, alphas, gated, testable)
    intervals = _intervals(tested, levels)
    # The MDE's level: a worsening of one metric alone is tested at α_k/M by Holm's first step (M: the family)
    first_step = first_step_levels(alphas, gated, testable & ~np.isnan(p))
    return [
        _result(
            inp, policies[k], pairs[k], intervals[k], p[k], p_adj[k], tested[k][1], levels[k], strict, first_step[k]
        )
        for k, inp in enumerate(inputs)
    ]


def _result(
    inp: MetricInput,
    metric_policy: MetricPolicy,
    pair: _Paired,
    interval: tuple[float, float, str],
    p: float,
    p_adj: float,
    test_method: str,
    level: float,
    strict: bool,
    mde_level: float,
) -> MetricResult:
    d, n = pair.d, pair.d.size
    margin, alpha_k = metric_policy.oriented_margin, metric_policy.alpha
    confidence = 1.0 - 2.0 * level
    if n >= 2:
        se = paired_se(d) if pair.clusters is None else clustered_se(d, pair.clusters)
        low, high, ci_method = interval
        omega2, s2_a, s2_b, icc = variance_decomposition(pair.base_rep, pair.head_rep)
    else:
        se = low = high = omega2 = s2_a = s2_b = icc = float("nan")
        ci_method = "none"
    # A difference of two scores in [0, 1] lies in [-1, 1]; an inverted test that cannot reject any difference at
    # this level (few cases) has an unbounded end. Cutting it there changes no decision and the comment says so.
    clipped = inp.kind != "ratio" and bool(low < -1.0 or high > 1.0)
    if clipped:
        low, high = max(low, -1.0), min(high, 1.0)
    # With no variation at all (se 0: a deterministic, unchanged pipeline) the MDE is undefined (NaN, shown "–").
    mde = _mde(inp, pair, se, margin, mde_level) if n >= 2 and se > 0 else float("nan")
    r_base, r_head = inp.base.shape[1], inp.head.shape[1]
    advice, twice = None, RECOMMENDATION_TARGET * inp.margin  # the advice is about a worsening of twice the margin
    if n >= 2 and se > 0 and (inp.kind != "ratio" or inp.direction == "lower" or twice < 1):
        target = ratio_scale(twice, inp.direction) if inp.kind == "ratio" else twice
        label = numbers.percent(twice) if inp.kind == "ratio" else numbers.number(twice)
        worse = "drops" if inp.direction == "higher" else "rises"
        advice = recommendation(
            n, target, level=mde_level, margin=margin, model=_power_model(inp, pair, se), split=(omega2, s2_a, s2_b),
            repeats=max(r_base, r_head), target_label=label, worsening=worse,
        )  # fmt: skip
    delta = float(np.mean(d)) if n else float("nan")
    n_worse = int(np.count_nonzero(d < 0))
    resolution = 1 / n if inp.kind == "binary" and n else 0.0
    shown = _shown(inp, metric_policy, delta, low, high)
    status, reason = _decide(delta, low, high, margin, p_adj, alpha_k, n, n_worse, shown, resolution)
    if status == "inconclusive" and n >= 2 and se > 0:
        reason += _settle(inp, pair, se, margin, mde_level, -delta, (omega2, s2_a, s2_b))
    if n == 0 and not has_values(inp):
        status, reason = "not_applicable", "applies to no case on either side: left out of the decision"
    elif n == 0:
        status, reason = unpaired_status(inp)
    if strict and status == "inconclusive":
        status, reason = "fail", f"strict mode, non-inferiority not shown: {reason}"
    ratio, ratio_low, ratio_high = _ratios(inp, delta, low, high) if inp.kind == "ratio" and n else (None,) * 3
    return MetricResult(
        name=inp.name,
        kind=inp.kind,
        direction=inp.direction,
        margin=inp.margin,
        gated=inp.gated,
        n_cases=int(inp.base.shape[0]),
        n_pairs=int(n),
        n_failed_base=pair.n_failed_base,
        n_failed_head=pair.n_failed_head,
        n_clusters=None if pair.clusters is None else n_units(d, pair.clusters),
        r_base=int(r_base),
        r_head=int(r_head),
        base_mean=float(np.mean(pair.base_means)) if n else float("nan"),
        head_mean=float(np.mean(pair.head_means)) if n else float("nan"),
        delta=delta,
        se=float(se),
        ci_low=float(low),
        ci_high=float(high),
        ci_method=ci_method,
        ci_clipped=clipped,
        confidence=float(confidence),
        alpha=float(alpha_k),
        p_value=float(p),
        p_adjusted=float(p_adj),
        test_method=test_method,
        ratio=ratio,
        ratio_ci_low=ratio_low,
        ratio_ci_high=ratio_high,
        mde=mde,
        omega2=float(omega2),
        sigma2_base=float(s2_a),
        sigma2_head=float(s2_b),
        icc=float(icc),
        recommendation=advice,
        n_worse=n_worse,
        n_tied=int(np.count_nonzero(d == 0)),
        n_better=int(np.count_nonzero(d > 0)),
        status=status,
        non_inferior=bool(low >= -margin),  # NaN (fewer than 2 pairs): not shown
        reason=reason,
    )


def _power_model(inp: MetricInput, pair: _Paired, se: float) -> dict[str, float | bool]:
    """:func:`gate.stats.detectable.power_model` of the paired cases."""
    return power_model(inp, pair.d, pair.base_means, se)


def _mde(inp: MetricInput, pair: _Paired, se: float, margin: float, level: float) -> float:
    """The worsening the gate's own rule catches with 80 % power (:func:`gate.stats.detectable.fixed_mde`)."""
    return fixed_mde(inp, pair.d, pair.base_means, se, margin=margin, level=level)


def _settle(
    inp: MetricInput, pair: _Paired, se: float, margin: float, level: float, worsening: float, split: tuple
) -> str:
    """What would settle an inconclusive metric, from the power model of the MDE: "; to settle it: …" or "".

    A worsening beyond the margin: the cases (and, where repeats vary, the repeats) with which the gate's rule
    catches a true worsening of the observed size with 80 % power. Within the margin: those with which the
    non-inferiority bound rules a worsening of the margin out, with 80 % power, if the true change is the observed
    one. Repeats are advised only when they vary (σ² > 0 on a side): repeats of a deterministic pipeline add nothing.
    """
    n = pair.d.size
    model = _power_model(inp, pair, se)
    rule_out = worsening < margin
    what = (
        f"rule out a {'drop' if inp.direction == 'higher' else 'rise'} beyond the margin"
        if rule_out
        else ("show a worsening of this size significantly")
    )
    need, repeats = settling_design(
        max(worsening, 0.0),
        n,
        level=level,
        margin=margin,
        model=model,
        split=split,
        power=POWER,
        rule_out=rule_out,
        repeats=max(inp.base.shape[1], inp.head.shape[1]),
    )
    if need is None:
        return ""
    if need <= n:  # the data are on the edge: the model says this N suffices
        return f"; to settle it: the same N = {n} again with fresh runs ({what} with 80 % power)"
    text = f"; to settle it: N ≈ {need} paired cases ({need - n} more) would {what} with 80 % power"
    return text + (f", or R = {repeats} repeats per side at this N" if repeats is not None else "")


def gate_decision(
    results: Sequence[MetricResult],
    *,
    new_ood_failures: int = 0,
    refusal: MetricResult | None = None,
    fail_on_new_ood: bool = True,
    alpha: float = 0.05,
    new_system_failures: int = 0,
    refused_on_base: int = 0,
    budget: Sequence[ErrorBudgetUse] = (),
    error_budget: float = 0.05,
    strict: bool = False,
    unscorable: Sequence[str] = (),
    must_pass: Sequence[MustPassFailure] = (),
) -> Decision:
    """The verdict of the whole gate (DESIGN §8: four outcomes).

    FAIL when a shown regression exists: a gated metric fails; or cases the base answered in every repeat fail
    in every repeat on head (``new_system_failures``: a pipeline that breaks is the system failing); or
    (``fail_on_new_ood``) out-of-domain questions that base refused in every repeat are answered on head in every
    repeat **and** the refusal metric's one-sided test shows a drop at ``alpha`` (its Holm p when gated, raw p
    otherwise; no margin) — a lone flip of a sampled generator is noise as often as not, so without that
    evidence the flips are a warning. Otherwise ERROR when a gated metric's evaluation failures on one side exceed
    ``error_budget`` (the evaluation cannot be trusted: the scored cases may be a biased subset), or when a gated
    metric cannot be scored on either side (``unscorable``: e.g. retrieved ids that never match the expected ones,
    which makes retrieval 0 on both sides, never "no change"). Otherwise
    INCONCLUSIVE when a gated metric is inconclusive (worse, but not significantly beyond its margin; an improved
    metric is never inconclusive); otherwise PASS. Metrics that apply
    to no case are left out. ``strict`` turns INCONCLUSIVE into FAIL.

    Before all of these, FAIL when a must-pass case flipped certainly (``must_pass``: passed on base in every repeat,
    failed on head in every repeat, R ≥ 2 on a deterministic pipeline or an exact test that survives Holm at α;
    :mod:`gate.compare.mustpass`, STATISTICS.md §7): a contract,
    like a failing assertion, whatever the statistics say. A flip that is not certain is a warning (and, out of
    domain, still blocks by the refusal test above when that drop is significant). New out-of-domain failures that
    are such flips are neither counted nor warned about twice.

    Args:
        results: from :func:`analyze_metrics`; ungated ones are ignored.
        new_ood_failures: out-of-domain cases refused on base and answered on head, ≥ 0.
        refusal: the refusal metric's result, when the metric is computed.
        fail_on_new_ood: let new out-of-domain failures block (DESIGN §4).
        alpha: the level for the refusal drop, in (0, 0.5).
        new_system_failures: cases that ran without error on base in every repeat and failed on head in every
            repeat, ≥ 0.
        refused_on_base: how many of those ``new_system_failures`` the base refused in every repeat (it ran, but
            did not answer), in [0, new_system_failures]: the reason counts them apart.
        budget: evaluation failures per gated metric and side.
        error_budget: largest tolerated share of evaluation failures of one gated metric on one side, in [0, 1].
        strict: release mode.
        unscorable: one line per gated metric (or family) that cannot be scored on either side, and why.
        must_pass: the must-pass cases that flipped (:func:`gate.compare.mustpass.must_pass_failures`).

    Returns:
        The :class:`Decision`.

    Source: STATISTICS.md §3 and §6 (three-outcome rule, strict mode); DESIGN.md §4 and §8.

    """
    fails, broken, doubts, warnings = [], list(unscorable), [], []
    certain = [f for f in must_pass if f.certain]
    if certain:
        ids = ", ".join(f.id for f in certain[:5]) + (", …" if len(certain) > 5 else "")
        fails.append(
            f"{len(certain)} must-pass case(s) passed on base in every repeat and fail on head in every repeat ({ids})"
        )
    if doubtful := [f for f in must_pass if not f.certain]:
        warnings.append(_must_pass_warning(doubtful, alpha))
    if new_system_failures:
        answered = new_system_failures - refused_on_base
        split = f": {answered} answered there, {refused_on_base} refused" if refused_on_base else ""
        fails.append(
            f"the pipeline fails on {new_system_failures} case(s) that ran without error on base{split} (system errors)"
        )
    new_ood_failures -= sum(f.why == OOD_ANSWERED for f in certain)  # blocking already
    covered = new_ood_failures <= sum(f.why == OOD_ANSWERED for f in doubtful)  # warned about as must-pass flips
    if new_ood_failures > 0 and fail_on_new_ood:
        p_refusal = None if refusal is None else (refusal.p_adjusted if refusal.gated else refusal.p_value)
        if p_refusal is None or p_refusal <= alpha:
            fails.append(f"{new_ood_failures} out-of-domain question(s) refused on base are answered on head")
        elif not covered:
            label = "p (Holm-adjusted)" if refusal is not None and refusal.gated else "p"
            warnings.append(
                f"{new_ood_failures} out-of-domain question(s) refused on base are answered on head, but the fall "
                f"in refusals is not significant ({numbers.p_clause(label, p_refusal)}): listed, not blocking "
                "(more out-of-domain cases tell a real fall from noise; must-pass cases block on a certain flip)"
            )
    for res in results:
        if res.gated and res.status == "fail":
            fails.append(f"{res.name}: {res.reason}")
        elif res.gated and res.status == "inconclusive":
            doubts.append(f"{res.name}: {res.reason}")
    for use in budget:
        if use.rate > error_budget:
            why = "; ".join(use.messages)
            broken.append(
                f"{use.metric} on {use.side}: {use.failed} of {use.expected} evaluations failed ({use.rate:.1%}, "
                f"budget {error_budget:.1%}): {why}"
            )
    if fails:
        return Decision("fail", tuple(fails), tuple(warnings))
    if broken:
        return Decision("error", tuple(broken), tuple(warnings))
    if doubts:
        return Decision("fail" if strict else "inconclusive", tuple(doubts), tuple(warnings))
    return Decision("pass", (_pass_reason(results),), tuple(warnings))


def _pass_reason(results: Sequence[MetricResult]) -> str:
    """The reason of a pass: how many gated metrics passed by which of :func:`_decide`'s pass rules."""
    gated = [res for res in results if res.gated and res.status != "not_applicable"]
    if not gated:
        return "no gated metrics"
    shown = [res for res in gated if res.non_inferior or res.delta > 0]
    unchanged = [res for res in gated if res not in shown and res.n_worse == 0]
    parts = [
        (len(shown), "non-inferior within their margins or better"),
        (len(unchanged), "with no paired case worse"),
        (len(gated) - len(shown) - len(unchanged), "within one case, or ruled out by the sequential test"),
    ]
    if len(shown) == len(gated):
        return f"all {len(gated)} gated metric(s) non-inferior within their margins or better"
    return f"all {len(gated)} gated metric(s) pass: " + ", ".join(f"{k} {what}" for k, what in parts if k)


def _must_pass_warning(doubtful: Sequence[MustPassFailure], alpha: float) -> str:
    """The warning for must-pass flips that are not certain, with the repeats that would make such a flip block."""
    first = doubtful[0]
    r = min(first.repeats_base, first.repeats_head)
    if r == 1:
        why = "one run per side cannot tell a flip from a sampled generator's noise"
    else:
        why = (
            f"with {r} repeats that vary a flip can be noise (exact {numbers.p_clause('p', first.p_value)}, "
            f"{numbers.p_clause('Holm', first.p_adjusted)} over the must-pass cases whose outcomes vary, "
            f"above α = {alpha:g})"
        )
    sampled = (
        f"or `repeats: {first.repeats_to_block}` on a sampled one"
        if first.repeats_to_block
        else "more repeats on a sampled one"
    )
    return (
        f"{len(doubtful)} must-pass case(s) passed on base and failed on head in every repeat, but {why}: listed, "
        f"not blocking (`repeats: 2` on a deterministic pipeline, {sampled}, makes such a flip block)"
    )
