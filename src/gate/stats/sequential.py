"""Anytime-valid early stopping on the paired per-case differences of each gated metric (issue 33, phase 1).

After each batch of cases, :func:`look` says per gated metric ``fail`` (a significant drop whose point estimate is
beyond the margin: the fixed-N rule of STATISTICS.md §3), ``non_inferior`` (a drop beyond m_eff = max(margin, the
fixed design's MDE at N) is ruled out: point 5 below) or ``continue``. Each decision rests on a nonnegative
(super)martingale that starts at 1 under its null; by Ville's inequality it ever reaches 1/α with probability
≤ α, however often it is looked at, so stopping at a data-dependent batch costs no error rate.

* ``fail`` needs evidence against "no change": the sign-symmetric e-process of :func:`symmetric_log_evidence`,
  valid when head and base are exchangeable on every case — the null of the gate's own McNemar and sign-flip
  tests, and what an A/A comparison is. Its boundary scales with the observed Σ d_i², so a graded metric whose
  cases move little is decided as early as its spread allows (a bound from the range [−1, 1] alone could not).
* ``non_inferior`` needs evidence against "a drop of exactly m_eff" (Δ = −m_eff), where nothing is symmetric:
  the betting capital of Waudby-Smith & Ramdas (2024) on the differences rescaled to [0, 1], with predictable
  plug-in bets truncated as in their hedged capital process (:func:`log_mixed_capital`), valid for any
  distribution on [−1, 1]. Its capital is monotone in the null value, so crossing 1/α at Δ = −m_eff is the same
  as the running lower confidence bound L_t > −m_eff (:func:`confidence_bounds` gives the bounds for the
  report). Without a distributional assumption no procedure can rule out a drop of m before about log(1/α)/m
  cases (a drop can hide in rare cases that fall by 1): e.g. ≈ 150 cases for m = 0.03 at α = 0.01.

Choices (and why):

* **With-replacement (super-population) sequence, not the without-replacement one.** The gate's question is
  whether head is worse on the questions the golden set samples (and over the generator's and judge's noise),
  which the fixed-N tests answer; the finite-population CS of Waudby-Smith & Ramdas (NeurIPS 2020) answers
  "has the mean of *these realised* differences changed", which is known exactly once the set is exhausted — in an
  A/A run with sampled answers that realised mean is non-zero half the time in the bad direction, so stopping
  "with certainty" at exhaustion would fail about half of all A/A pull requests. In a seeded random order the
  cases of a golden set drawn from its population are an i.i.d. sequence, which is what the sequence assumes.
* **Alpha split between the early looks and the end** (:func:`split_alpha`). A confidence sequence is wider than
  a fixed-N interval at the same N, so deciding the undecided metrics with the sequence alone at exhaustion would
  cost far more than 5 points of power at the printed MDE. Instead a share of α (:data:`SEQUENTIAL_SHARE`) is
  spent on the early fail looks, Bonferroni across the M gated metrics (α_seq = share·α/M per metric), and the
  metrics still undecided when the golden set is exhausted get the gate's own fixed-N analysis
  (``analyze_metrics``, Holm inside) at the rest, α_final = (1 − share)·α. The false-fail probability is at most
  α_seq·M + α_final = α by the union bound. Holm is not used for the early looks: a step-down over metrics that
  stop at different times is not a valid sequential procedure without more care, and Bonferroni is.
* **A false-pass budget for the early passes, outside α** (:data:`EARLY_PASS_LEVEL`, β_seq per metric). An early
  ``non_inferior`` cannot fail a PR, so it needs no share of the false-fail budget α; what it can cost is power:
  a PR that worsens the metric by the fixed design's MDE stops early with a pass with probability ≤ β_seq (point
  5). The fixed design itself passes such a PR 20 % of the time; the issue's bound is power within 5 points of
  it. Spending α_seq on it instead made an unchanged margin-0 metric run 0.7 of the cases.
* **Bets tuned for a horizon**: λ_i = sqrt(2·log(1/α)/(n*·σ̂²_{i−1})) with n* half the sequence's length
  (Waudby-Smith & Ramdas 2024, Eq. 26 with the fixed-n tuning of their §B; ``confseq``'s ``fixed_n``) — the
  tightest boundary near n*, still valid at every t because only σ̂² of earlier cases enters.
* **Ratio metrics (latency, cost)**: the per-case log-ratio is clipped to [−B, B] and divided by B
  (:func:`log_ratio_differences`, B = log 4 by default: a case 4 times slower counts as 4 times). The early
  decision is then about the mean clipped log-ratio, which equals the gate's target when no case is clipped and is
  symmetric about 0 in an A/A run (so the false-fail bound holds); report the number of clipped cases.

Design note for phase 2 (the orchestrator):

1. Run the must-pass and out-of-domain cases first and in full on both sides; they never enter the sequence.
2. Put the other cases in a seeded random order (``np.random.default_rng(seed).permutation``) and run them on both
   sides in batches (a first batch of at least ~10 % of N, then equal batches; the order is recorded so a resumed
   run continues at its batch and ``--shard`` splits each batch).
3. After each batch, per gated metric: the per-case means over repeats on each side, d_i = head − base oriented
   so that negative is worse (``gate.stats.inputs.case_effects``), cases valid on both sides only, kept in the
   run order; ``look(d, margin, split.sequential, early_pass=split.early_pass, target_n=ceil(HORIZON_SHARE · N))``
   with ``split = split_alpha(alpha, M)``. A
   metric, once decided, stays decided (its first decision is final, as in :func:`stopping_point`).
   Ratio metrics: ``log_ratio_differences`` and the margin ``ratio_scale(margin)/B``.
4. Stop when every gated metric is decided (any ``fail`` may stop the run at once: the verdict is fail). If the
   golden set is exhausted first, run ``analyze_metrics`` on everything that ran at ``alpha=split.final`` and
   take the fixed-N status of the metrics still undecided; the decided ones keep theirs (``fail`` → fail,
   ``non_inferior`` → pass). Then ``gate_decision`` as today.
5. The non-inferiority look rules out m_eff = max(m, MDE_N) (``rule_out`` of :func:`look`); the fail look keeps
   m. MDE_N is the fixed design's minimum detectable worsening at the sequence's **full** length N
   (:func:`gate.stats.detectable.design_mde`): the power model the report's MDE uses (exact McNemar for a binary
   metric with one run per side — the "broken cases" model while nothing is discordant — else the sign-flip
   test's normal model), fed with the differences seen so far, at α_final and Holm's first-step level over the
   gated metrics that moved so far (α_k/M, α_k = 0.01 for a margin of 0: the level of the printed MDE). Ratio
   metrics: MDE_N (a log-ratio) over B, the look's scale. Without it a margin of 0 (``error_rate``, gated by
   default) or one smaller than the set resolves could never be ruled out, and an unchanged PR would run every
   case.

   Why a data-dependent m_eff keeps the guarantee: the bets (:func:`predictable_bets`) do not depend on the null
   value, and the capital is monotone in it, every factor, truncated or not (:func:`log_capital`), and so their
   average. A look computes max_{s≤t} K_s((1 − m_eff)/2) over the whole path at its own null; for a true drop δ
   and a look with m_eff ≤ δ, K_s((1 − m_eff)/2) ≤ K_s((1 − δ)/2) at every s, the capital at the true null,
   which crosses 1/α at any time with probability ≤ α (Ville). So P(``non_inferior`` at some look whose
   m_eff ≤ δ) ≤ β_seq, however m_eff was chosen: at a true drop of the MDE an early pass costs at most β_seq of
   power, as long as the look's m_eff is not above the true drop — estimated on a regressed prefix, MDE_N is a
   little larger than the A/A one (the drop's own discordance enters the model), where the bound does not apply;
   ``benchmarks/adaptive_calibration.py`` part 5 measures the power. Drops smaller than MDE_N are those the fixed
   design itself misses more than 20 % of the time. With nothing discordant the capital grows by about
   log(1 + c·m_eff/(1 − m_eff)) per case, so an unchanged margin-0 metric is decided after about
   log(1/β_seq)/(0.9·MDE_N) cases; in the broken-cases model MDE_N·N is nearly constant (≈ 9 at α_k = 0.01),
   so that is a fixed share of N, the same for every gated metric: ≈ 0.37 at β_seq = 0.05.

Source: Waudby-Smith & Ramdas (2024), "Estimating means of bounded random variables by betting", JRSS-B 86(1):1-27,
doi:10.1093/jrsssb/qkad009, arXiv:2010.09686 (Eq. 26-27 predictable plug-in bets, §5 hedged capital, Thm 3);
Ville (1939) (the maximal inequality); Howard, Ramdas, McAuliffe & Sekhon (2021), Ann. Statist. 49(2),
doi:10.1214/20-AOS1991 (confidence sequences); Waudby-Smith & Ramdas (2020), NeurIPS, arXiv:2006.04347 (the
without-replacement variant, not used: see above); STATISTICS.md §3 and §7.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

SequentialDecision = Literal["fail", "non_inferior", "continue"]
"""What one look says about one metric."""
Side = Literal["above", "below"]
"""Which way a capital process bets: ``above`` gains when the mean exceeds the null value, ``below`` when it is
smaller."""

SEQUENTIAL_SHARE = 0.1
"""Share of the one-sided family-wise α spent on the early looks (the rest goes to the fixed-N analysis at the
end); chosen by ``benchmarks/adaptive_calibration.py`` (power within 5 points of the fixed design)."""
EARLY_PASS_LEVEL = 0.05
"""Level of each metric's non-inferiority look (β_seq): the most an early pass may cost of the metric's power at a
drop of the fixed design's MDE (a false *pass* budget, not part of α: the fixed design's own false-pass rate there
is 20 %); chosen by ``benchmarks/adaptive_calibration.py`` (power within 5 points of the fixed design, a no-change
PR at under half the cases)."""
HORIZON_SHARE = 0.5
"""The bets are tuned for n* = this share of the cases in the sequence: the boundary is tightest there, where a
no-change PR can first be shown non-inferior (``benchmarks/adaptive_calibration.py``: tuning for N/2 instead of N
stops no-change PRs at about 0.1 N earlier, clear regressions no later)."""
TRUNCATIONS = (0.9,)
"""The c of the truncated bets, λ ≤ c/m (``above``) or c/(1 − m) (``below``), Waudby-Smith & Ramdas (2024) §5;
with several, the capital used is the average of one process per c (a mixture of martingales is a martingale;
their "diversified" betting). One bold 0.9: a metric whose differences vary little bets enough to decide; the
mixture with a cautious 1/2 used before cost log 2 of capital where the truncation binds, 0.1 N on an unchanged
PR, and gained nothing measurable elsewhere (``benchmarks/adaptive_calibration.py`` --quick, parts 2-6: the same
power, no-change PRs 0.4 instead of 0.5 of N; only a deterministic PR that flips a few per cent of the cases both
ways ran longer at N = 1,000)."""
MDE_RESOLUTION = 5e-4
"""A ``rule_out`` (the MDE at N) less than this above the margin is the margin: the MDE is found by bisection to
1e-4 and is never below a positive margin (:func:`gate.stats.power.detectable_drop`), so a metric whose data say
no more than its margin (graded scores that never move) is decided against the margin itself."""
PRIOR_MEAN, PRIOR_VARIANCE, PRIOR_WEIGHT = 0.5, 0.25, 1.0
"""The regularised plug-in estimates start from one pseudo-observation of mean 1/2 and variance 1/4."""


@dataclass(frozen=True)
class AlphaSplit:
    """One-sided levels of the early looks and of the fixed-N analysis at the end."""

    sequential: float
    """Level of each metric's early test in each direction (Bonferroni over the gated metrics)."""
    final: float
    """Family-wise level of the fixed-N analysis of the metrics still undecided at the end (Holm inside)."""
    early_pass: float = EARLY_PASS_LEVEL
    """Level β_seq of each metric's non-inferiority look: a false-pass budget per metric, outside α."""


def split_alpha(
    alpha: float, n_metrics: int, share: float = SEQUENTIAL_SHARE, early_pass: float = EARLY_PASS_LEVEL
) -> AlphaSplit:
    """Split the family-wise one-sided α between the early fail looks and the end; set the early-pass level.

    α_seq = share·α/M for each of the M gated metrics, α_final = (1 − share)·α; a false fail needs an early false
    rejection (probability ≤ M·α_seq by Ville's inequality and Bonferroni) or a false fixed-N rejection at the end
    (≤ α_final by Holm), so the family-wise false-fail rate is ≤ α (union bound). An early pass cannot fail a
    PR, so its level β_seq (``early_pass``, per metric) is not part of α: it bounds what early passes cost of each
    metric's power at a drop of the fixed design's MDE (point 5 of the module's design note).

    Args:
        alpha: one-sided family-wise level in (0, 0.5).
        n_metrics: number of gated metrics M, ≥ 1.
        share: share of α for the early fail looks, in (0, 1).
        early_pass: β_seq, the level of each metric's non-inferiority look, in (0, 0.5).

    Returns:
        The :class:`AlphaSplit`.

    Raises:
        ValueError: an argument outside its range.

    Source: Bonferroni; Holm (1979), Scand. J. Statist. 6(2):65-70; the union bound.
    """
    if not 0 < alpha < 0.5 or n_metrics < 1 or not 0 < share < 1 or not 0 < early_pass < 0.5:
        raise ValueError(
            "need 0 < alpha < 0.5, n_metrics ≥ 1, 0 < share < 1, 0 < early_pass < 0.5; "
            f"got {alpha}, {n_metrics}, {share}, {early_pass}"
        )
    return AlphaSplit(sequential=share * alpha / n_metrics, final=(1.0 - share) * alpha, early_pass=early_pass)


def to_unit(d: np.ndarray) -> np.ndarray:
    """Differences in [−1, 1] rescaled to [0, 1]: x = (d + 1)/2 (a mean Δ becomes (Δ + 1)/2).

    Args:
        d: shape (t,), per-case differences head − base, negative = worse, each in [−1, 1].

    Returns:
        shape (t,), in [0, 1].

    Raises:
        ValueError: a value outside [−1, 1] or NaN.
    """
    d = np.asarray(d, dtype=float)
    if d.ndim != 1 or not np.all((d >= -1.0) & (d <= 1.0)):
        raise ValueError("differences must be a 1-d array of finite values in [-1, 1]")
    return (d + 1.0) / 2.0


def log_ratio_differences(log_ratios: np.ndarray, bound: float = math.log(4.0)) -> tuple[np.ndarray, int]:
    """Oriented per-case log-ratios (ratio metrics) clipped to [−B, B] and divided by B, into [−1, 1].

    Args:
        log_ratios: shape (t,), oriented log(head/base) per case (negative = worse), finite.
        bound: B > 0, the largest |log-ratio| taken at face value (log 4: 4 times slower or faster).

    Returns:
        (differences in [−1, 1] of shape (t,), number of cases clipped).

    Raises:
        ValueError: bound ≤ 0 or a value that is not finite.
    """
    x = np.asarray(log_ratios, dtype=float)
    if not bound > 0 or not np.all(np.isfinite(x)):
        raise ValueError("log-ratios must be finite and the bound > 0")
    return np.clip(x, -bound, bound) / bound, int(np.count_nonzero(np.abs(x) > bound))


def predictable_bets(x: np.ndarray, alpha: float, target_n: int | None = None) -> np.ndarray:
    """Predictable plug-in bets λ_i, each a function of x_1..x_{i−1} only.

    μ̂_i = (1/2 + Σ_{j≤i} x_j)/(i + 1) (capped at 1), σ̂²_i = (1/4 + Σ_{j≤i} (x_j − μ̂_j)²)/(i + 1),
    σ̂²_0 = 1/4; λ_i = sqrt(2·log(1/α)/(n*·σ̂²_{i−1})) with n* = ``target_n``, or
    sqrt(2·log(1/α)/(i·log(1 + i)·σ̂²_{i−1})) without a horizon.

    Args:
        x: shape (t,), observations in [0, 1] in their order.
        alpha: the test's level in (0, 1).
        target_n: horizon n* ≥ 1 the bets are tuned for, or None.

    Returns:
        shape (t,), λ_i ≥ 0 (before truncation).

    Source: Waudby-Smith & Ramdas (2024), doi:10.1093/jrsssb/qkad009, Eq. 26-27 and §B (fixed-n tuning);
    ``confseq.betting_strategies.lambda_predmix_eb``.
    """
    x = np.asarray(x, dtype=float)
    t = np.arange(1, x.size + 1)
    mu = np.minimum((PRIOR_WEIGHT * PRIOR_MEAN + np.cumsum(x)) / (t + PRIOR_WEIGHT), 1.0)
    sigma2 = (PRIOR_WEIGHT * PRIOR_VARIANCE + np.cumsum((x - mu) ** 2)) / (t + PRIOR_WEIGHT)
    previous = np.concatenate(([PRIOR_VARIANCE], sigma2[:-1]))
    horizon = t * np.log1p(t) if target_n is None else float(target_n)
    return np.sqrt(2.0 * math.log(1.0 / alpha) / (horizon * previous))


def log_capital(x: np.ndarray, m: float, bets: np.ndarray, side: Side, truncation: float = 0.5) -> np.ndarray:
    """Log of the betting capital against H0: E[x] = m, after each observation.

    ``above``: K_t = Π_{i≤t} (1 + λ_i⁺ (x_i − m)), λ_i⁺ = min(λ_i, c/m); ``below``: K_t = Π (1 − λ_i⁻ (x_i − m)),
    λ_i⁻ = min(λ_i, c/(1 − m)). Under H0 each is a nonnegative martingale from 1, so P(sup_t K_t ≥ 1/α) ≤ α
    (Ville). Every factor is positive (≥ 1 − c) and monotone in m (decreasing for ``above``, increasing for
    ``below``, also where the truncation binds), so the rejected null values form a half-line.

    Args:
        x: shape (t,), observations in [0, 1].
        m: null mean in [0, 1].
        bets: shape (t,), predictable λ_i ≥ 0 (:func:`predictable_bets`).
        side: ``above`` or ``below``.
        truncation: c in (0, 1).

    Returns:
        shape (t,), log K_1..log K_t (``inf`` when the data rule m out, e.g. m = 0 and some x_i > 0).

    Source: Waudby-Smith & Ramdas (2024), doi:10.1093/jrsssb/qkad009, §4-5 (hedged capital process, its two
    halves); ``confseq.betting.betting_mart`` with ``theta`` 1 (above) or 0 (below), ``m_trunc=True``.
    """
    x, bets = np.asarray(x, dtype=float), np.asarray(bets, dtype=float)
    if side == "above":
        lam = np.minimum(bets, truncation / m) if m > 0 else bets
        factor = 1.0 + lam * (x - m)
    else:
        lam = np.minimum(bets, truncation / (1.0 - m)) if m < 1 else bets
        factor = 1.0 - lam * (x - m)
    with np.errstate(divide="ignore"):
        return np.cumsum(np.log(np.maximum(factor, 0.0)))


def log_mixed_capital(
    x: np.ndarray, m: float, bets: np.ndarray, side: Side, truncations: tuple[float, ...] = TRUNCATIONS
) -> np.ndarray:
    """Log of the average of :func:`log_capital`'s processes over several truncations c (each with weight 1/k).

    Args:
        x: shape (t,), observations in [0, 1].
        m: null mean in [0, 1].
        bets: shape (t,), predictable λ_i ≥ 0.
        side: ``above`` or ``below``.
        truncations: the c values, each in (0, 1).

    Returns:
        shape (t,), log((1/k)·Σ_c K_t(c)); monotone in m like each term.

    Source: Waudby-Smith & Ramdas (2024), doi:10.1093/jrsssb/qkad009, §5.3 (diversified betting: an average of
    test martingales is a test martingale).
    """
    logs = np.array([log_capital(x, m, bets, side, c) for c in truncations])
    return np.logaddexp.reduce(logs, axis=0) - math.log(len(truncations))


def symmetric_log_evidence(d: np.ndarray, alpha: float, target_n: int | None = None) -> np.ndarray:
    """Log of the sign-symmetric e-process that head is worse, after each case.

    log E_t = Σ_{i≤t} (λ_i s_i − λ_i² s_i²/2) with s_i = −d_i (a drop counts positive) and the predictable bet
    λ_i = sqrt(2·log(1/α)/(n*·v̂_{i−1})), v̂_i = (1/4 + Σ_{j≤i} d_j²)/(i + 1) (v̂_0 = 1/4; n* as in
    :func:`predictable_bets`). Under H0 "head and base are exchangeable on every case" (an A/A comparison: the
    null of the gate's McNemar and sign-flip tests) each d_i is symmetric about 0 given |d_i| and the past, so
    E[exp(λ s − λ² s²/2) | past, |s|] = cosh(λ|s|)·exp(−λ² s²/2) ≤ 1: E_t is a nonnegative supermartingale and
    P(sup_t E_t ≥ 1/α) ≤ α (Ville). Unlike a bound from the range [−1, 1] alone, its boundary scales with the
    observed Σ d_i², so graded metrics with small per-case changes are decided as early as their spread allows.

    Args:
        d: shape (t,), per-case differences in the run order, finite.
        alpha: the test's level in (0, 1).
        target_n: horizon n* the bets are tuned for, or None (then i·log(1 + i)).

    Returns:
        shape (t,), log E_1..log E_t.

    Source: de la Peña (1999), Ann. Probab. 27(1):537-564, doi:10.1214/aop/1022677271 (self-normalized bound for
    conditionally symmetric increments); Howard, Ramdas, McAuliffe & Sekhon (2020), Probab. Surveys 17:257-317,
    doi:10.1214/18-PS321 (Lemma 3: symmetric increments are sub-Gaussian with V_t = Σ X_i²); the predictable bets
    of Waudby-Smith & Ramdas (2024), doi:10.1093/jrsssb/qkad009, Eq. 26.
    """
    d = np.asarray(d, dtype=float)
    t = np.arange(1, d.size + 1)
    v = (PRIOR_WEIGHT * PRIOR_VARIANCE + np.cumsum(d**2)) / (t + PRIOR_WEIGHT)
    previous = np.concatenate(([PRIOR_VARIANCE], v[:-1]))
    horizon = t * np.log1p(t) if target_n is None else float(target_n)
    lam = np.sqrt(2.0 * math.log(1.0 / alpha) / (horizon * previous))
    return np.cumsum(-lam * d - lam**2 * d**2 / 2.0)


def _bound(
    x: np.ndarray, bets: np.ndarray, threshold: float, side: Side, tol: float, truncations: tuple[float, ...]
) -> float:
    """Bisection for the running bound on [0, 1]: the edge of {m : max_s log K_s(m) < threshold}."""
    lo, hi = 0.0, 1.0

    def rejected(m: float) -> bool:
        return bool(x.size) and float(np.max(log_mixed_capital(x, m, bets, side, truncations))) >= threshold

    if side == "above":  # rejected m form [0, L]: L is the largest rejected value
        if not rejected(0.0):
            return 0.0
        while hi - lo > tol:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if rejected(mid) else (lo, mid)
        return hi
    if not rejected(1.0):
        return 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if rejected(mid) else (mid, hi)
    return lo


def confidence_bounds(
    d: np.ndarray,
    alpha: float,
    target_n: int | None = None,
    tol: float = 1e-9,
    truncations: tuple[float, ...] = TRUNCATIONS,
) -> tuple[float, float]:
    """Running one-sided (1 − α) lower and upper confidence bounds for the mean difference Δ after t cases.

    L_t = sup{Δ : max_{s≤t} K⁺_s((Δ + 1)/2) ≥ 1/α}, U_t = inf{Δ : max_{s≤t} K⁻_s((Δ + 1)/2) ≥ 1/α} (the running
    intersection of the sequence): P(∃t: Δ < L_t) ≤ α and P(∃t: Δ > U_t) ≤ α.

    Args:
        d: shape (t,), per-case differences in [−1, 1] in the run order.
        alpha: one-sided level of each bound, in (0, 1).
        target_n: horizon the bets are tuned for, or None.
        tol: bisection tolerance on the [0, 1] scale.
        truncations: the c values of :func:`log_mixed_capital`.

    Returns:
        (L_t, U_t) on the difference scale, −1 ≤ L_t ≤ U_t ≤ 1 ((−1, 1) for t = 0).

    Raises:
        ValueError: differences outside [−1, 1].

    Source: Waudby-Smith & Ramdas (2024), doi:10.1093/jrsssb/qkad009, Thm 3 and §5.
    """
    x = to_unit(d)
    bets = predictable_bets(x, alpha, target_n)
    threshold = math.log(1.0 / alpha)
    low = _bound(x, bets, threshold, "above", tol, truncations)
    high = _bound(x, bets, threshold, "below", tol, truncations)
    return 2.0 * low - 1.0, 2.0 * high - 1.0


@dataclass(frozen=True)
class SequentialLook:
    """One metric's state after t cases."""

    decision: SequentialDecision
    """``fail``, ``non_inferior`` or ``continue``."""
    n: int
    """Cases seen (t)."""
    estimate: float
    """Δ̂_t, the mean difference so far (NaN for t = 0)."""
    log_evidence_worse: float
    """max_{s≤t} log E_s of the sign-symmetric e-process (:func:`symmetric_log_evidence`): evidence against "no
    change" (≥ ``threshold``: a significant drop)."""
    log_capital_non_inferior: float
    """max_{s≤t} log K⁺_s at Δ = −m_eff: evidence against a drop of m_eff (≥ ``threshold``: L_t > −m_eff)."""
    threshold: float
    """log(1/α), the fail look's threshold."""
    ruled_out: float = math.nan
    """m_eff, the drop the non-inferiority look tests against: max(margin, ``rule_out``)."""
    pass_threshold: float = math.nan
    """log(1/β), the non-inferiority look's threshold (``early_pass``; α when not given)."""


def look(
    d: np.ndarray,
    margin: float,
    alpha: float,
    *,
    early_pass: float | None = None,
    target_n: int | None = None,
    rule_out: float | None = None,
) -> SequentialLook:
    """The sequential decision for one metric after the cases seen so far.

    ``fail`` iff max_s E_s ≥ 1/α (the sign-symmetric e-process: a significant drop) and Δ̂_t ≤ −m (material), the
    fixed-N rule of STATISTICS.md §3; else ``non_inferior`` iff L_t > −m_eff at level β (max_s K_s((1 − m_eff)/2)
    ≥ 1/β for the mixed betting capital above, its bets tuned for β) with m_eff = max(m, ``rule_out``); else
    ``continue``. Valid at every t and any stopping rule: an A/A metric (head and base exchangeable) ends ``fail``
    with probability ≤ α, and for any true drop δ, the probability of ``non_inferior`` at some look whose
    m_eff ≤ δ is ≤ β — even when ``rule_out`` is chosen from the data (point 5 of the module's design note).

    Args:
        d: shape (t,), per-case differences head − base in [−1, 1] (negative = worse), in the seeded run order,
            cases valid on both sides only.
        margin: m ≥ 0 on the same scale (for ratio metrics: ``ratio_scale(margin)/B``): the fail rule's margin.
        alpha: level of the fail look, in (0, 1) (``split_alpha(...).sequential``).
        early_pass: β, the level of the non-inferiority look, in (0, 1) (``split_alpha(...).early_pass``), or
            None (α).
        target_n: horizon the bets are tuned for (the golden set's size), or None.
        rule_out: the smallest drop the non-inferiority look rules out, on the same scale (the fixed design's MDE
            at the full sequence length), or None/NaN (the margin alone); m_eff is capped at 0.999.

    Returns:
        The :class:`SequentialLook`.

    Raises:
        ValueError: differences outside [−1, 1], a margin outside [0, 1) or a level outside (0, 1).

    Source: Waudby-Smith & Ramdas (2024), doi:10.1093/jrsssb/qkad009; Ville (1939); STATISTICS.md §3, §7.
    """
    beta = alpha if early_pass is None else early_pass
    if not 0 <= margin < 1 or not 0 < alpha < 1 or not 0 < beta < 1:
        raise ValueError(f"need 0 ≤ margin < 1 and levels in (0, 1), got {margin}, {alpha}, {beta}")
    m_eff = effective_margin(margin, rule_out)
    x = to_unit(d)
    threshold, pass_threshold = math.log(1.0 / alpha), math.log(1.0 / beta)
    if x.size == 0:
        return SequentialLook("continue", 0, float("nan"), 0.0, 0.0, threshold, m_eff, pass_threshold)
    bets = predictable_bets(x, beta, target_n)
    worse = float(max(0.0, np.max(symmetric_log_evidence(d, alpha, target_n))))
    non_inferior = float(max(0.0, np.max(log_mixed_capital(x, (1.0 - m_eff) / 2.0, bets, "above"))))
    estimate = float(np.mean(d))
    decision: SequentialDecision = "continue"
    if worse >= threshold and estimate <= -margin:
        decision = "fail"
    elif non_inferior >= pass_threshold:
        decision = "non_inferior"
    return SequentialLook(decision, int(x.size), estimate, worse, non_inferior, threshold, m_eff, pass_threshold)


def effective_margin(margin: float, rule_out: float | None) -> float:
    """m_eff = max(m, ``rule_out``), capped at 0.999.

    The margin alone when ``rule_out`` is None, NaN or less than :data:`MDE_RESOLUTION` above it.
    """
    if rule_out is None or not math.isfinite(rule_out) or rule_out <= margin + MDE_RESOLUTION:
        return min(margin, 0.999)
    return min(rule_out, 0.999)


def batch_ends(n_total: int, first: int, size: int) -> np.ndarray:
    """Case counts after each batch: ``first``, then every ``size`` more, the last one ``n_total``.

    Args:
        n_total: cases in the sequence (the golden set less must-pass and out-of-domain cases), ≥ 0.
        first: size of the first batch, ≥ 1.
        size: size of every later batch, ≥ 1.

    Returns:
        shape (k,), strictly increasing ints ending at ``n_total`` (empty when ``n_total`` is 0).

    Raises:
        ValueError: ``first`` or ``size`` < 1, or ``n_total`` < 0.
    """
    if first < 1 or size < 1 or n_total < 0:
        raise ValueError(f"need first ≥ 1, size ≥ 1 and n_total ≥ 0, got {first}, {size}, {n_total}")
    if n_total == 0:
        return np.zeros(0, dtype=int)
    return np.unique(np.minimum(np.concatenate(([first], np.arange(first + size, n_total + size, size))), n_total))


@dataclass(frozen=True)
class StoppingPoint:
    """Where a batched run of several gated metrics stops, and what each metric says there."""

    n: int
    """Cases run when the run stops (the last look; the whole sequence when exhausted)."""
    decisions: tuple[SequentialDecision, ...]
    """Per metric, in input order: its first decision (``continue`` if none before the stop)."""
    exhausted: bool
    """True when the sequence ran out with a metric still undecided (decide those with the fixed-N analysis)."""


def stopping_point(
    differences: list[np.ndarray],
    margins: list[float],
    alpha: float,
    ends: np.ndarray,
    target_n: int | None = None,
    rule_out: list[np.ndarray] | None = None,
    early_pass: float | None = None,
) -> StoppingPoint:
    """Replay the batched looks over complete per-metric sequences and return where the run stops.

    At each look (``ends``) every undecided metric gets :func:`look`'s decision on its first ``end`` differences;
    a decision is final. The run stops at the first look where any metric says ``fail`` (the verdict is fail
    whatever the others say) or every metric is decided; else it is exhausted at the last look. Computed once per
    metric over the whole sequence (the bets are predictable, so a prefix gives what a look at that prefix gives).
    For simulation and tests; an orchestrator, which does not have the later cases, calls :func:`look` instead.

    Args:
        differences: per metric, shape (n_total,), differences in [−1, 1] in the run order (same length).
        margins: per metric, m ≥ 0 on the difference scale.
        alpha: per-metric level of the fail looks (``split_alpha(...).sequential``).
        ends: from :func:`batch_ends`, the last equal to n_total.
        target_n: horizon of the bets.
        rule_out: per metric, shape (len(ends),), the ``rule_out`` of :func:`look` at each look (NaN: the margin
            alone), or None (the margins alone).
        early_pass: per-metric level β of the non-inferiority looks (``split_alpha(...).early_pass``), or None (α).

    Returns:
        The :class:`StoppingPoint`.

    Raises:
        ValueError: sequences of different lengths, ``ends`` that do not end at their length, or bad values.
    """
    n_total = differences[0].size if differences else 0
    if any(d.size != n_total for d in differences) or len(margins) != len(differences):
        raise ValueError("every metric needs a sequence of the same length and a margin")
    if ends.size == 0 or int(ends[-1]) != n_total:
        raise ValueError(f"the last look must be at {n_total}, got {ends[-1:] if ends.size else 'none'}")
    beta = alpha if early_pass is None else early_pass
    threshold, pass_threshold = math.log(1.0 / alpha), math.log(1.0 / beta)
    states = []
    nans = np.full(ends.size, np.nan)
    for k, (d, margin) in enumerate(zip(differences, margins, strict=True)):
        x = to_unit(d)
        bets = predictable_bets(x, beta, target_n)
        worse = np.maximum.accumulate(symmetric_log_evidence(d, alpha, target_n))[ends - 1] >= threshold
        m_eff = [effective_margin(margin, float(r)) for r in (nans if rule_out is None else rule_out[k])]
        capital = {m: np.maximum.accumulate(log_mixed_capital(x, (1.0 - m) / 2.0, bets, "above")) for m in set(m_eff)}
        safe = np.array([capital[m][end - 1] for m, end in zip(m_eff, ends, strict=True)]) >= pass_threshold
        material = (np.cumsum(d)[ends - 1] / ends) <= -margin
        states.append(np.where(worse & material, 2, np.where(safe, 1, 0)))  # 2 fail, 1 non-inferior, 0 continue
    names: dict[int, SequentialDecision] = {0: "continue", 1: "non_inferior", 2: "fail"}
    first = [int(s[np.argmax(s > 0)]) if (s > 0).any() else 0 for s in states]
    when = [int(np.argmax(s > 0)) if (s > 0).any() else ends.size for s in states]
    decided_by = [np.arange(ends.size) >= w for w in when]
    any_fail = np.zeros(ends.size, dtype=bool)
    for w, f in zip(when, first, strict=True):
        if f == 2:
            any_fail[w:] = True
    all_decided = np.logical_and.reduce(decided_by) if decided_by else np.ones(ends.size, dtype=bool)
    stop = np.flatnonzero(any_fail | all_decided)
    if stop.size == 0:
        return StoppingPoint(n_total, tuple(names[f] for f in first), True)
    k = int(stop[0])
    decisions = tuple(names[f] if w <= k else "continue" for f, w in zip(first, when, strict=True))
    return StoppingPoint(int(ends[k]), decisions, False)
