"""Power analysis and the variance split between and within cases (Miller 2024 §3, §5; STATISTICS.md §1)."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from gate.stats.inputs import ZERO_MARGIN_ALPHA as ZERO_MARGIN_ALPHA  # re-exported: defined with the policy


def _z_sum(alpha: float, power: float, two_sided: bool) -> float:
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha}, {power}")
    from scipy import special  # here: `rag-gate validate` needs smallest_holm_p, not scipy's start-up

    return float(special.ndtri(1 - (alpha / 2 if two_sided else alpha)) + special.ndtri(power))


def _noise_variance(omega2: float, sigma2_base: float, sigma2_head: float, r_base: float, r_head: float) -> float:
    if r_base < 1 or r_head < 1:
        raise ValueError(f"repeats must be ≥ 1, got {r_base}, {r_head}")
    return omega2 + sigma2_base / r_base + sigma2_head / r_head


def mde(
    n: int,
    omega2: float,
    sigma2_base: float = 0.0,
    sigma2_head: float = 0.0,
    r_base: float = 1,
    r_head: float = 1,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    two_sided: bool = False,
) -> float:
    """Minimum detectable effect of a paired comparison, δ = (z_α + z_β)·sqrt((ω² + σ_A²/K_A + σ_B²/K_B)/n).

    The gate is one-sided, so z_α = Φ⁻¹(1 − α) by default; ``two_sided`` uses Φ⁻¹(1 − α/2) as in the paper.

    Args:
        n: number of paired cases, ≥ 1.
        omega2: ω², variance of the per-case true differences (≥ 0), in squared metric units.
        sigma2_base: σ_A², mean within-case variance of one base run (≥ 0).
        sigma2_head: σ_B², the same on head.
        r_base: K_A, repeats per case on base, ≥ 1.
        r_head: K_B, repeats per case on head, ≥ 1.
        alpha: significance level in (0, 1).
        power: 1 − β in (0, 1).
        two_sided: use z_{α/2}.

    Returns:
        δ ≥ 0 in metric units.

    Raises:
        ValueError: n < 1, repeats < 1, or alpha/power outside (0, 1).

    Source: Miller (2024), "Adding Error Bars to Evals", arXiv:2411.00640, Eq. 10.

    """
    if n < 1:
        raise ValueError(f"n must be ≥ 1, got {n}")
    var = _noise_variance(omega2, sigma2_base, sigma2_head, r_base, r_head)
    return _z_sum(alpha, power, two_sided) * math.sqrt(var / n)


def sample_size(
    delta: float,
    omega2: float,
    sigma2_base: float = 0.0,
    sigma2_head: float = 0.0,
    r_base: float = 1,
    r_head: float = 1,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    two_sided: bool = False,
) -> float:
    """Cases needed to detect a difference δ, n = (z_α + z_β)²·(ω² + σ_A²/K_A + σ_B²/K_B)/δ².

    Args:
        delta: effect to detect, > 0, in metric units.
        omega2: ω² as in :func:`mde`.
        sigma2_base: σ_A² as in :func:`mde`.
        sigma2_head: σ_B² as in :func:`mde`.
        r_base: K_A ≥ 1.
        r_head: K_B ≥ 1.
        alpha: significance level in (0, 1).
        power: 1 − β in (0, 1).
        two_sided: use z_{α/2}.

    Returns:
        n as a float (round up to use it).

    Raises:
        ValueError: delta ≤ 0, repeats < 1, or alpha/power outside (0, 1).

    Source: Miller (2024), arXiv:2411.00640, Eq. 9.

    """
    if delta <= 0:
        raise ValueError(f"delta must be > 0, got {delta}")
    var = _noise_variance(omega2, sigma2_base, sigma2_head, r_base, r_head)
    return _z_sum(alpha, power, two_sided) ** 2 * var / delta**2


def _side_split(x: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Per-case means, mean within-case variance σ̂² (ddof=1; NaN if no case has 2 repeats), E[1/n_i]."""
    n = np.sum(~np.isnan(x), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(x, axis=1)
        within = np.nanvar(x[n >= 2], axis=1, ddof=1)
    sigma2 = float(within.mean()) if within.size else float("nan")
    return means, sigma2, float(np.mean(1.0 / n))


def variance_decomposition(base: np.ndarray, head: np.ndarray) -> tuple[float, float, float, float]:
    """Split the variance of paired per-case scores into between-case and within-case parts.

    Per side, σ̂² = mean_i s_i² (within-case sample variance over repeats, ddof=1) and
    Var̂(x) = max(0, Var̂_i(x̄_i) − σ̂²·mean(1/n_i)) (law of total variance). Paired:
    ω̂² = max(0, Var̂_i(d_i) − σ̂_A²·mean(1/n_A,i) − σ̂_B²·mean(1/n_B,i)) with d_i = x̄_B,i − x̄_A,i.
    ICC = (Var̂(x_A) + Var̂(x_B))/(Var̂(x_A) + Var̂(x_B) + σ̂_A² + σ̂_B²), the share of score variance that is
    between cases (a stability index of the golden set and judge). With one repeat per case σ² is not
    identifiable: σ̂² and ICC are NaN and ω̂² = Var̂(d_i) (noise included).

    Args:
        base: shape (N, R_A), per-repeat scores of the cases valid on both sides; NaN = missing repeat.
        head: shape (N, R_B), same cases and order. Every row needs at least one valid value per side.

    Returns:
        (ω², σ_A², σ_B², ICC): variances in squared metric units, ICC in [0, 1]; NaN when N < 2.

    Raises:
        ValueError: shapes that are not (N, ·) with equal N, or a row without a valid value.

    Source: Miller (2024), arXiv:2411.00640, §3 and App. B (variance decomposition, Eq. 9/10 terms);
    Shrout & Fleiss (1979), Psychol. Bull. 86(2):420-428, doi:10.1037/0033-2909.86.2.420 (ICC).

    """
    base, head = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if base.ndim != 2 or head.ndim != 2 or base.shape[0] != head.shape[0]:
        raise ValueError(f"base and head must be (N, R) with equal N, got {base.shape} and {head.shape}")
    if (np.isnan(base).all(axis=1) | np.isnan(head).all(axis=1)).any():
        raise ValueError("every case needs at least one valid repeat on each side")
    nan = float("nan")
    if base.shape[0] < 2:
        return nan, nan, nan, nan
    means_a, s2_a, inv_a = _side_split(base)
    means_b, s2_b, inv_b = _side_split(head)
    var_d = float(np.var(means_b - means_a, ddof=1))
    if np.isnan(s2_a) or np.isnan(s2_b):
        return var_d, s2_a, s2_b, nan
    omega2 = max(0.0, var_d - s2_a * inv_a - s2_b * inv_b)
    between = max(0.0, float(np.var(means_a, ddof=1)) - s2_a * inv_a)
    between += max(0.0, float(np.var(means_b, ddof=1)) - s2_b * inv_b)
    total = between + s2_a + s2_b
    return omega2, s2_a, s2_b, (between / total if total > 0 else nan)


def smallest_holm_p(n_units: int, n_tests: int) -> float:
    """The smallest Holm-adjusted p-value any of ``n_tests`` paired tests over ``n_units`` units can reach.

    Every metric-level test here is a paired sign test in the wide sense (exact McNemar on the discordant cases,
    the sign-flip randomization test on the per-case differences): its one-sided p-value is at least 2^−n, reached
    when every one of the n units moves the same way. When all tests reach it together, Holm multiplies it by the
    number of tests at every step; when one does alone, by ``n_tests`` at the first step. Either way a family can
    only reject when ``n_tests · 2^−n ≤ α``: a golden set smaller than that can never fail the gate.

    Args:
        n_units: cases (or clusters) a metric is computed on, ≥ 0.
        n_tests: gated metrics (Holm's family size), ≥ 1.

    Returns:
        min(1, n_tests · 2^−n_units), in (0, 1].

    Raises:
        ValueError: a negative ``n_units`` or ``n_tests`` < 1.

    Source: the sign test's null distribution (Binomial(n, 1/2)) and Holm (1979), Scand. J. Statist. 6(2).
    """
    if n_units < 0 or n_tests < 1:
        raise ValueError(f"need n_units ≥ 0 and n_tests ≥ 1, got {n_units}, {n_tests}")
    return min(1.0, n_tests * 0.5**n_units)


def detection_power(
    delta: float,
    n: int,
    *,
    level: float,
    margin: float,
    var0: float,
    kappa: float = 0.0,
    mcnemar: bool = False,
    base_rate: float = 1.0,
) -> float:
    """Power of the gate's own FAIL rule against a true worsening ``delta``: P(U < 0 at ``level`` and Δ̂ ≤ −m).

    Two models of the paired differences d_i (oriented, negative = worse):

    - ``mcnemar`` (binary, one run per side, no clusters): a diffuse drop breaks each case with probability
      q = δ/p (p = ``base_rate``, the base's pass rate), and a broken case can no longer improve: each case is
      better with probability π_b = π₀(1 − q) and worse with π_w = π_b + δ, where 2π₀ = ``var0`` is the share of
      discordant cases without a change (A/A noise). Exact: n_d ~ Bin(n, π_w + π_b), b | n_d ~ Bin(n_d,
      π_w/(π_w + π_b)); FAIL iff exact McNemar rejects (P(Bin(n_d, ½) ≥ b) ≤ ``level``) and (b − c)/n ≥ m, i.e.
      b ≥ (n_d + m·n)/2.
    - otherwise (the sign-flip test): d̄ ~ N(δ, σ_δ²/n) with σ_δ² = ``var0`` + κ·δ(1 − δ) (κ = 1 for binary
      metrics, whose drop flips cases; 0 for a shift of graded scores or log-ratios). The sign-flip test's null
      spread is the raw second moment of the d_i, so it rejects iff d̄ ≥ z·σ_δ/√(n − z²) (z = Φ⁻¹(1 − ``level``));
      the margin rule adds d̄ ≥ m.

    Args:
        delta: the true worsening, ≥ 0, in metric units (log-ratio units for ratio metrics).
        n: paired cases (units), ≥ 1.
        level: the one-sided level the test runs at (α′ of Holm), in (0, 0.5).
        margin: m ≥ 0 on the same scale.
        var0: the per-case variance of d without a change (binary R = 1: the discordant share), ≥ 0.
        kappa: growth of the variance with the drop (see above).
        mcnemar: use the exact McNemar model.
        base_rate: the base's pass rate p in (0, 1] (McNemar model).

    Returns:
        The power in [0, 1].

    Source: Miller (2024), arXiv:2411.00640, Eq. 10 (normal model); exact McNemar power by conditioning on the
    discordant pairs (Lachin 1992, Stat. Med. 11(9), doi:10.1002/sim.4780110907); the outcome rule of STATISTICS.md §3.
    """
    if mcnemar and var0 == 0:  # nothing is discordant without a change: scipy-free (`rag-gate validate` plans with it)
        return _broken_cases_power(delta, n, level=level, margin=margin)
    from scipy import special, stats

    if mcnemar:
        better = var0 / 2 * max(0.0, 1 - delta / max(base_rate, 1e-12))
        q = min(1.0, 2 * better + delta)
        if q <= 0:
            return 0.0
        spread = 12 * math.sqrt(n * q * (1 - q)) + 12  # discordant counts beyond ±12 SD carry no probability
        k = np.arange(max(0, math.floor(n * q - spread)), min(n, math.ceil(n * q + spread)) + 1)
        critical = stats.binom.isf(level, k, 0.5) + 1  # smallest b with P(Bin(k, ½) ≥ b) ≤ level
        needed = np.maximum(critical, np.ceil((k + margin * n) / 2 - 1e-9))
        share = min(1.0, (better + delta) / q)
        return float(np.sum(stats.binom.pmf(k, n, q) * stats.binom.sf(needed - 1, k, share)))
    z = float(special.ndtri(1 - level))
    sd = math.sqrt(max(var0 + kappa * delta * (1 - delta), 0.0))
    if 0.5**n > level or n <= z * z:  # the sign-flip test's smallest p is 2^−n
        return 0.0
    if sd == 0:  # every case moved by exactly δ
        return float(delta >= margin)
    threshold = max(z * sd / math.sqrt(n - z * z), margin)
    return float(special.ndtr((delta - threshold) / (sd / math.sqrt(n))))


def _broken_cases_power(delta: float, n: int, *, level: float, margin: float) -> float:
    """:func:`detection_power`'s exact McNemar model without discordance under no change (``var0`` = 0).

    Every discordant case is one the drop broke: b ~ Bin(n, δ) against c = 0, where exact McNemar rejects iff
    2^−b ≤ ``level`` and the margin rule needs b ≥ m·n; the power is the binomial upper tail from the larger bound
    (log-space terms within ±12 SD of nδ, so any n is safe).
    """
    if delta <= 0:
        return 0.0
    first = max(next(b for b in range(1, 1100) if 0.5**b <= level), math.ceil(margin * n - 2e-9))
    if first > n:
        return 0.0
    if delta >= 1:
        return 1.0
    spread = 12 * math.sqrt(n * delta * (1 - delta)) + 12
    high = min(n, math.ceil(n * delta + spread))
    log_p, log_q, log_n = math.log(delta), math.log1p(-delta), math.lgamma(n + 1)
    terms = (
        math.exp(log_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q)
        for k in range(max(first, math.floor(n * delta - spread)), high + 1)
    )
    return min(1.0, math.fsum(terms))


def detectable_drop(
    n: int,
    *,
    level: float,
    margin: float,
    var0: float,
    kappa: float = 0.0,
    mcnemar: bool = False,
    base_rate: float = 1.0,
    power: float = 0.8,
    largest: float = 1.0,
) -> float:
    """The minimum detectable worsening: the smallest δ that :func:`detection_power` catches with ``power``.

    The drop the gate's own rule (the test at the Holm level it runs at, and Δ̂ ≤ −m) fails with probability
    ``power`` at this N, R and margin; always above the margin (a drop of exactly m is caught at most half the time).

    Args:
        n: paired cases (units), ≥ 1.
        level: one-sided test level α′.
        margin: m ≥ 0.
        var0: per-case variance of d without a change (see :func:`detection_power`).
        kappa: growth of the variance with the drop.
        mcnemar: the exact McNemar model.
        base_rate: the base's pass rate (McNemar model).
        power: target power in (0, 1).
        largest: the largest worsening possible (1 for metrics in [0, 1]).

    Returns:
        δ in (0, ``largest``], found by bisection to 1e-4; NaN when no worsening up to ``largest`` is caught with
        that power (too few cases).

    Source: :func:`detection_power`.
    """
    if mcnemar:
        largest = min(largest, base_rate)
    power_at = functools.partial(detection_power, n=n, level=level, margin=margin, var0=var0, kappa=kappa,
                                 mcnemar=mcnemar, base_rate=base_rate)  # fmt: skip
    if power_at(largest) < power:
        return math.nan
    low, high = 0.0, largest
    while high - low > 1e-4:
        mid = (low + high) / 2
        low, high = (low, mid) if power_at(mid) >= power else (mid, high)
    return high


def cases_needed(
    delta: float,
    *,
    level: float,
    margin: float,
    var0: float,
    kappa: float = 0.0,
    mcnemar: bool = False,
    base_rate: float = 1.0,
    power: float = 0.8,
    rule_out: bool = False,
    limit: int = 1_000_000,
) -> int | None:
    """Paired cases that settle a worsening ``delta`` with ``power``, by the model of :func:`detection_power`.

    ``rule_out`` False: cases for which the gate's rule fails a true worsening ``delta`` (> m) with ``power``.
    ``rule_out`` True (``delta`` < m): cases for which the non-inferiority bound L = Δ̂ − z·σ/√n clears −m with
    ``power``: n = ((z_{1−α′} + z_power)·σ_δ/(m − δ))².

    Returns:
        The smallest such n, or None when none ≤ ``limit`` does (e.g. δ = m).

    Source: :func:`detection_power`; Miller (2024), arXiv:2411.00640, Eq. 9 (rule-out case).
    """
    from scipy import special

    if rule_out:
        sd2 = var0 + kappa * delta * (1 - delta) if not mcnemar else var0 + delta - delta * delta
        if margin <= delta:
            return None
        z = float(special.ndtri(1 - level) + special.ndtri(power))
        need = math.ceil(z * z * sd2 / (margin - delta) ** 2)
        return need if need <= limit else None
    if delta <= margin:
        return None

    def caught(n: int) -> bool:
        chance = detection_power(
            delta, n, level=level, margin=margin, var0=var0, kappa=kappa, mcnemar=mcnemar, base_rate=base_rate
        )
        return chance >= power

    high = 2
    while not caught(high):
        high *= 2
        if high > limit:
            return None
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if caught(mid) else (mid, high)
    return high


def settling_design(
    delta: float,
    n: int,
    *,
    level: float,
    margin: float,
    model: dict[str, float | bool],
    split: tuple[float, float, float],
    repeats: int,
    power: float = 0.8,
    rule_out: bool = False,
    max_repeats: int = 20,
) -> tuple[int | None, int | None]:
    """The cases, and the repeats, with which the gate's rule settles a worsening ``delta`` with ``power``.

    Cases from :func:`cases_needed` at the current repeats. Repeats only where they vary (σ² > 0 on a side, not the
    exact McNemar model of one run per side): the smallest R per side ≤ ``max_repeats`` with which N = ``n`` cases
    suffice, the per-case variance becoming ω² + (σ_A² + σ_B²)/R (Miller §3: repeats shrink only the within-case
    part). Repeats of a deterministic pipeline add nothing and are never returned.

    Args:
        delta: the worsening, ≥ 0 (metric units; log-ratio units for ratio metrics).
        n: paired cases now, ≥ 1.
        level: one-sided test level α′.
        margin: m ≥ 0.
        model: the arguments of :func:`detection_power` that describe the data (``var0``, ``kappa``, ``mcnemar``,
            ``base_rate``).
        split: (ω², σ_A², σ_B²) from :func:`variance_decomposition` (σ² NaN when unknown).
        repeats: runs per case now, the larger side's, ≥ 1.
        power: target power.
        rule_out: settle it by ruling a worsening of the margin out (``delta`` < m), see :func:`cases_needed`.
        max_repeats: the largest R considered.

    Returns:
        (cases, repeats): cases None when no N ≤ 1,000,000 does it; repeats None when repeats do not vary, or when
        the current N suffices already, or no R ≤ ``max_repeats`` does it at this N.

    Source: :func:`detection_power` and :func:`cases_needed`; Miller (2024), arXiv:2411.00640, §3 and Eq. 10.
    """
    need = cases_needed(delta, level=level, margin=margin, power=power, rule_out=rule_out, **model)  # type: ignore[arg-type]
    omega2, s2_a, s2_b = split
    if need is None or need <= n or model.get("mcnemar") or not (np.isfinite(s2_a) and np.isfinite(s2_b)):
        return need, None
    if s2_a + s2_b <= 0:
        return need, None
    for r in range(repeats + 1, max_repeats + 1):
        var0 = omega2 + (s2_a + s2_b) / r
        enough = cases_needed(delta, level=level, margin=margin, power=power, rule_out=rule_out, var0=var0,
                              kappa=float(model.get("kappa", 0.0)))  # fmt: skip
        if enough is not None and enough <= n:
            return need, r
    return need, None


RECOMMENDATION_TARGET = 2.0
"""The worsening the run details' recommendation is about, in margins: the gate's rule catches a worsening of exactly
the margin at most half the time, so the advice is for one of twice the margin (the size benchmarks/calibration.py
plants)."""


def recommendation(
    n: int,
    target: float,
    *,
    level: float,
    margin: float,
    model: dict[str, float | bool],
    split: tuple[float, float, float],
    repeats: int,
    target_label: str,
    power: float = 0.8,
    worsening: str = "drops",
) -> str | None:
    """Advice on the repeats R (or cases N) with which the gate's rule catches a worsening ``target`` with ``power``.

    The same power model as the printed MDE (:func:`detectable_drop`) and as what settles an inconclusive metric
    (:func:`settling_design`): None when the rule already catches ``target`` (the MDE is at most ``target``). The
    comparison asks about twice the margin (:data:`RECOMMENDATION_TARGET`).

    Args:
        n: paired cases, ≥ 1.
        target: the worsening to catch, > ``margin``, on the test's scale (log-ratio units for ratio metrics).
        level: the one-sided level the metric's test runs at alone (Holm's first step, α/M).
        margin: m on the test's scale, > 0 for any advice.
        model: :func:`detection_power`'s arguments for this metric's data.
        split: (ω², σ_A², σ_B²).
        repeats: runs per case now (the larger side's).
        target_label: how to print ``target``, e.g. ``"0.060"`` or ``"20 %"``.
        power: target power.
        worsening: ``"drops"``, or ``"rises"`` for a lower-is-better metric.

    Returns:
        ``"use R = 5 to detect drops of 0.06"``, ``"grow the golden set to N = 412 (at R = 1) to detect drops of
        0.06"``, or None (already caught, or no N up to a million would do).

    Source: :func:`detection_power`; Miller (2024), arXiv:2411.00640, Eq. 9-10 and §3.
    """
    if not target > margin > 0 or n < 2 or detection_power(target, n, level=level, margin=margin, **model) >= power:  # type: ignore[arg-type]
        return None
    need, r = settling_design(target, n, level=level, margin=margin, model=model, split=split, repeats=repeats,
                              power=power)  # fmt: skip
    if r is not None:
        return f"use R = {r} to detect {worsening} of {target_label}"
    if need is None:
        return None
    return f"grow the golden set to N = {need} (at R = {repeats}) to detect {worsening} of {target_label}"
