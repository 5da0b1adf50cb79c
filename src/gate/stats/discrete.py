"""Exact per-case tests with known discrete null distributions, and the discrete Benjamini–Hochberg procedure.

A case has only R runs per side, so its exact p-value takes few values: with R = 3, Fisher's test cannot go
below 1/20 and Boschloo's below 1/64. The classic BH procedure treats every p-value as uniform and with
hundreds of cases never reaches those values. Conditioning each case on its own pooled data makes the null
distribution of its p-value known exactly (hypergeometric / permutation), and the discrete BH procedure of
Döhler, Durand & Roquain (2018) uses those distributions: a case whose data cannot show a drop (all runs
equal, or a spread smaller than the effect threshold τ) cannot be a false discovery and costs nothing.
Valid for independent cases with exchangeable runs under H0 (no normality, no variance model), so flaky,
bounded and tied scores keep the false discovery rate.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

ENUMERATION_LIMIT = 20_000
"""Largest number of splits C(n_base + n_head, n_head) enumerated exactly (both sides ≤ 8 runs)."""
_REL_TOL = 1e-9


@dataclass(frozen=True)
class ExactCaseTest:
    """One case's one-sided "head worse" test and the null distribution of its p-value."""

    p_value: float
    """P(head's sum ≤ observed | the case's pooled runs) under H0 (exchangeable runs), in (0, 1]."""
    effect: float
    """Mean head − mean base over the runs tested (negative = worse)."""
    drop_p_value: float
    """``p_value`` when ``effect ≤ −τ``, else 1: the p-value of the claim "dropped by at least τ"."""
    drop_support: np.ndarray | None
    """Sorted values ``drop_p_value`` can take under H0, ending with 1.0; ``[1.0]`` when no split of the
    case's runs is a drop of τ (the case cannot be a discovery); None for a continuous null (F(t) = t)."""
    method: str
    """``"fisher"``, ``"permutation"`` or ``"student"`` (normal-theory fallback above the enumeration limit)."""


def _finish(
    p_obs: float, effect: float, cdf: np.ndarray, effects: np.ndarray, tau: float, method: str
) -> ExactCaseTest:
    """Build the result from the null CDF at each attainable statistic (sorted) and the split effects there."""
    tol = _REL_TOL * (1.0 + float(np.max(np.abs(effects))))
    drop = cdf[effects <= -tau + tol]
    support = np.unique(np.append(drop, 1.0))
    is_drop = effect <= -tau + tol
    return ExactCaseTest(min(1.0, p_obs), effect, min(1.0, p_obs) if is_drop else 1.0, support, method)


@functools.lru_cache(maxsize=1024)
def _hypergeom_table(r_base: int, r_head: int, total: int) -> tuple[np.ndarray, np.ndarray]:
    """(head passes k, P(K ≤ k)) over the attainable k given the case's total passes (conditional null).

    Computed as exact integer ratios (correctly rounded), so equal probabilities of different cases are equal
    floats and the discrete BH compares them exactly.
    """
    n = r_base + r_head
    k = np.arange(max(0, total - r_base), min(total, r_head) + 1)
    counts = np.cumsum([math.comb(total, int(j)) * math.comb(n - total, r_head - int(j)) for j in k], dtype=object)
    return k, np.array([int(c) / math.comb(n, r_head) for c in counts])


def fisher_case(k_base: int, k_head: int, r_base: int, r_head: int, *, tau: float) -> ExactCaseTest:
    """Fisher's exact one-sided test that one case passes less often on head, conditional on its total passes.

    Under H0 (same pass rate on both sides, runs independent) and given T = k_base + k_head, the head's passes
    K are hypergeometric(r_base + r_head, T, r_head), whatever the pass rate: p = P(K ≤ k_head | T), the
    one-sided Fisher p-value (= ``scipy.stats.fisher_exact([[k_base, r_base − k_base], [k_head, r_head −
    k_head]], alternative="greater")``). The effect of a table is k/r_head − (T − k)/r_base.

    Args:
        k_base: passes on base, 0 ≤ k_base ≤ r_base.
        k_head: passes on head, 0 ≤ k_head ≤ r_head.
        r_base: runs on base, ≥ 1.
        r_head: runs on head, ≥ 1.
        tau: effect threshold τ > 0 (pass-rate units) a drop must reach to be a discovery.

    Returns:
        The :class:`ExactCaseTest` (method ``"fisher"``).

    Raises:
        ValueError: counts outside [0, r], repeats < 1 or tau ≤ 0.

    Source: Fisher (1935), J. R. Stat. Soc. 98(1):39-82, doi:10.2307/2342435; conditional supports as in
    Döhler, Durand & Roquain (2018), doi:10.1214/18-EJS1441, §5.

    """
    if r_base < 1 or r_head < 1 or not (0 <= k_base <= r_base and 0 <= k_head <= r_head) or not tau > 0:
        raise ValueError(f"need 0 ≤ k ≤ r, r ≥ 1 and tau > 0, got {k_base}/{r_base}, {k_head}/{r_head}, {tau}")
    total = k_base + k_head
    k, cdf = _hypergeom_table(r_base, r_head, total)
    effects = k / r_head - (total - k) / r_base
    p_obs = float(cdf[k == k_head][0])
    return _finish(p_obs, k_head / r_head - k_base / r_base, cdf, effects, tau, "fisher")


def flip_repeats(m: int, alpha: float, *, limit: int = 30) -> int | None:
    """The smallest repeats per side R at which an all-repeat flip survives Holm among m cases: 1/C(2R, R) ≤ α/m.

    A flip: a case that passed in all R base runs and failed in all R head runs. Holm's first step (Bonferroni)
    tests the smallest of ``m`` p-values at α/m.
    1/C(2R, R) is the smallest one-sided Fisher p-value a case with R runs per side can reach (all its passes on
    base: :func:`fisher_case` of (R, 0, R, R)), so with fewer repeats no flip can be shown at level α among m.

    Args:
        m: cases in the family, ≥ 1.
        alpha: family-wise level in (0, 1).
        limit: largest R considered.

    Returns:
        R in [1, ``limit``], or None when none suffices.

    Raises:
        ValueError: m < 1 or alpha outside (0, 1).

    Source: Fisher (1935), the hypergeometric null of a 2×2 table with margins (R, R); Holm (1979), first step.
    """
    if m < 1 or not 0 < alpha < 1:
        raise ValueError(f"need m ≥ 1 and alpha in (0, 1), got {m}, {alpha}")
    return next((r for r in range(1, limit + 1) if m <= alpha * math.comb(2 * r, r)), None)


@functools.lru_cache(maxsize=64)
def _splits(n: int, n_head: int) -> np.ndarray:
    """Every choice of the head's n_head positions among n pooled runs, shape (C(n, n_head), n_head)."""
    return np.array(list(itertools.combinations(range(n), n_head)), dtype=np.intp).reshape(-1, n_head)


def permutation_case(base: np.ndarray, head: np.ndarray, *, tau: float) -> ExactCaseTest:
    """Exact permutation test that one case scores lower on head, conditional on its pooled runs.

    Under H0 the n_base + n_head runs are exchangeable, so every split of the pooled values into a head of
    n_head runs is equally likely; the statistic is the head's sum (equivalently the mean difference) and
    p = #{splits with sum ≤ observed}/C(n, n_head) (ties within 1e-9). Two distinct values reduce to
    :func:`fisher_case` (any size); above :data:`ENUMERATION_LIMIT` splits the pooled-variance Student t test
    is used (normal theory, continuous null), flagged by ``method = "student"``.

    Args:
        base: shape (n_base,), the case's valid runs on base (oriented, higher = better), finite, n_base ≥ 1.
        head: shape (n_head,), the case's valid runs on head, n_head ≥ 1.
        tau: effect threshold τ > 0 in score units a drop must reach to be a discovery.

    Returns:
        The :class:`ExactCaseTest`.

    Raises:
        ValueError: empty or non-finite runs, or tau ≤ 0.

    Source: Fisher (1935) The Design of Experiments §21 (randomization test); Good (2005) Permutation,
    Parametric and Bootstrap Tests of Hypotheses §3; as ``scipy.stats.permutation_test(...,
    permutation_type="independent", alternative="less")`` on the mean difference.

    """
    a, b = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if a.ndim != 1 or b.ndim != 1 or not a.size or not b.size or not np.isfinite(np.r_[a, b]).all() or not tau > 0:
        raise ValueError("base and head must be non-empty 1-D finite arrays and tau > 0")
    pooled = np.concatenate([a, b])
    values = np.unique(pooled)
    effect = float(b.mean() - a.mean())
    if values.size <= 2:  # two values: the exact test is Fisher's on the indicator of the higher value
        lo, hi = values[0], values[-1]
        if hi == lo:
            return ExactCaseTest(1.0, 0.0, 1.0, np.array([1.0]), "permutation")
        res = fisher_case(int((a == hi).sum()), int((b == hi).sum()), a.size, b.size, tau=tau / (hi - lo))
        return ExactCaseTest(res.p_value, effect, res.drop_p_value, res.drop_support, "permutation")
    n, n_b = pooled.size, b.size
    total = float(pooled.sum())
    if math.comb(n, n_b) > ENUMERATION_LIMIT:
        res = stats.ttest_ind(b, a, equal_var=True, alternative="less")
        p = float(res.pvalue)
        return ExactCaseTest(p, effect, p if effect <= -tau + _REL_TOL else 1.0, None, "student")
    sums = pooled[_splits(n, n_b)].sum(axis=1)
    tol = _REL_TOL * (1.0 + float(np.abs(pooled).sum()))
    sums.sort()
    distinct = sums[np.r_[np.diff(sums) > tol, True]]  # largest representative of each tie group
    cdf = np.searchsorted(sums, distinct + tol, side="right") / sums.size
    p_obs = float(np.searchsorted(sums, float(b.sum()) + tol, side="right") / sums.size)
    effects = distinct / n_b - (total - distinct) / a.size
    return _finish(p_obs, effect, cdf, effects, tau, "permutation")


def fisher_cases(
    k_base: np.ndarray, k_head: np.ndarray, r_base: np.ndarray, r_head: np.ndarray, *, tau: float
) -> list[ExactCaseTest]:
    """:func:`fisher_case` for many cases at once: each distinct (k_base, k_head, r_base, r_head) is tested once.

    Args:
        k_base: shape (C,), passes on base per case.
        k_head: shape (C,), passes on head.
        r_base: shape (C,), runs on base (≥ 1).
        r_head: shape (C,), runs on head (≥ 1).
        tau: effect threshold τ > 0.

    Returns:
        One :class:`ExactCaseTest` per case, equal to ``fisher_case`` of its counts (cases with the same counts share
        one object).

    Raises:
        ValueError: as :func:`fisher_case`.

    """
    keys = np.column_stack([k_base, k_head, r_base, r_head]).astype(np.int64)
    if not keys.size:
        return []
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    tests = [fisher_case(*map(int, key), tau=tau) for key in unique]
    return [tests[j] for j in inverse.ravel()]


def permutation_cases(base: np.ndarray, head: np.ndarray, *, tau: float) -> list[ExactCaseTest]:
    """:func:`permutation_case` for C cases with the same numbers of runs, vectorised over the cases.

    The same computation, row by row, as :func:`permutation_case` (and the same results:
    ``tests/stats/test_discrete.py`` compares them): the head sums of every split are enumerated for all cases at
    once; cases with at most two distinct values go to :func:`fisher_cases`, cases beyond
    :data:`ENUMERATION_LIMIT` splits to the per-case test.

    Args:
        base: shape (C, n_base), each case's valid runs on base (oriented), finite.
        head: shape (C, n_head), each case's valid runs on head.
        tau: effect threshold τ > 0.

    Returns:
        One :class:`ExactCaseTest` per row.

    Raises:
        ValueError: non-finite runs, empty sides or tau ≤ 0.

    """
    a, b = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0] or not a.shape[1] or not b.shape[1] or not tau > 0:
        raise ValueError("base and head must be (C, n) arrays with the same C, n ≥ 1, and tau > 0")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("runs must be finite")
    n_cases, n_a, n_b = a.shape[0], a.shape[1], b.shape[1]
    pooled = np.concatenate([a, b], axis=1)
    n = n_a + n_b
    out: list[ExactCaseTest | None] = [None] * n_cases
    ordered = np.sort(pooled, axis=1)
    n_values = 1 + np.count_nonzero(np.diff(ordered, axis=1) != 0, axis=1)
    effect = b.mean(axis=1) - a.mean(axis=1)
    two = np.flatnonzero(n_values <= 2)
    if two.size:
        lo, hi = ordered[two, 0], ordered[two, -1]
        constant = hi == lo
        spread = np.where(constant, 1.0, hi - lo)
        for j, i in enumerate(two):
            if constant[j]:
                out[i] = ExactCaseTest(1.0, 0.0, 1.0, np.array([1.0]), "permutation")
        varied = two[~constant]
        if varied.size:
            taus = tau / spread[~constant]
            for i, t in zip(varied, taus, strict=True):
                hi_i = ordered[i, -1]
                res = fisher_case(int((a[i] == hi_i).sum()), int((b[i] == hi_i).sum()), n_a, n_b, tau=float(t))
                out[i] = ExactCaseTest(res.p_value, float(effect[i]), res.drop_p_value, res.drop_support, "permutation")
    rest = np.flatnonzero(n_values > 2)
    if rest.size and math.comb(n, n_b) > ENUMERATION_LIMIT:
        for i in rest:
            out[i] = permutation_case(a[i], b[i], tau=tau)
    elif rest.size:
        p, bb = pooled[rest], b[rest]
        splits = _splits(n, n_b)
        k = splits.shape[0]
        sums = np.sort(p[:, splits].sum(axis=2), axis=1)
        tol = _REL_TOL * (1.0 + np.abs(p).sum(axis=1))
        total = p.sum(axis=1)
        distinct = np.concatenate([np.diff(sums, axis=1) > tol[:, None], np.ones((rest.size, 1), bool)], axis=1)
        observed = bb.sum(axis=1) + tol
        effects = sums / n_b - (total[:, None] - sums) / n_a
        tol2 = _REL_TOL * (1.0 + np.where(distinct, np.abs(effects), 0.0).max(axis=1))
        drop = distinct & (effects <= -tau + tol2[:, None])
        is_drop = effect[rest] <= -tau + tol2
        for j, i in enumerate(rest):
            cdf = np.searchsorted(sums[j], sums[j][drop[j]] + tol[j], side="right") / k
            support = np.unique(np.append(cdf, 1.0))
            p_j = float(min(1.0, np.searchsorted(sums[j], observed[j], side="right") / k))
            out[i] = ExactCaseTest(p_j, float(effect[i]), p_j if is_drop[j] else 1.0, support, "permutation")
    return out  # type: ignore[return-value]


class _StepCDFs:
    """Σ_i w_i·F_i(t) and Σ_i F_i(t)/(1 − F_i(t)) for many discrete CDFs as cumulative jump tables."""

    def __init__(self, supports: list[np.ndarray | None], weights: np.ndarray) -> None:
        """Tables over ``supports`` (each sorted ascending; None: a continuous null) weighted by ``weights``."""
        weights = np.asarray(weights, dtype=float)
        discrete = [i for i, s in enumerate(supports) if s is not None]
        continuous = np.ones(len(supports), dtype=bool)
        continuous[discrete] = False
        self.continuous_w = float(weights[continuous].sum())
        self.n_continuous = int(continuous.sum())
        arrays = [s for s in supports if s is not None]  # those of ``discrete``, in order
        raw = np.concatenate(arrays) if arrays else np.empty(0)
        owner = np.repeat(np.asarray(discrete, dtype=int), [a.size for a in arrays])
        keep = raw < 1.0
        pts, owner = raw[keep], owner[keep]
        prev = np.zeros_like(pts)  # each support's previous point, 0 before its first
        same = owner[1:] == owner[:-1]
        prev[1:][same] = pts[:-1][same]
        order = np.argsort(pts, kind="stable")
        self.points = pts[order]
        self.cum_w = np.cumsum((weights[owner] * (pts - prev))[order])
        self.cum_odds = np.cumsum((pts / (1 - pts) - prev / (1 - prev))[order])

    def _at(self, cum: np.ndarray, t: np.ndarray) -> np.ndarray:
        if not cum.size:
            return np.zeros_like(t)
        idx = np.searchsorted(self.points, t, side="right") - 1
        return np.where(idx >= 0, cum[np.maximum(idx, 0)], 0.0)

    def weighted(self, t: np.ndarray) -> np.ndarray:
        """Σ_i w_i·F_i(t), F_i(t) = t for continuous nulls."""
        return self._at(self.cum_w, t) + self.continuous_w * t

    def odds(self, t: np.ndarray) -> np.ndarray:
        """Σ_i F_i(t)/(1 − F_i(t)) (DDR's ξ_SD), for t < 1."""
        return self._at(self.cum_odds, t) + self.n_continuous * t / (1 - t)


def _evaluate(support: np.ndarray | None, t: float) -> float:
    """F(t) of one discrete null (largest support value ≤ t, 0 if none) or of a continuous one (t)."""
    if support is None:
        return t
    idx = int(np.searchsorted(support, t, side="right")) - 1
    return float(support[idx]) if idx >= 0 else 0.0


def discrete_bh(
    p_values: np.ndarray,
    supports: list[np.ndarray | None],
    *,
    q: float,
    step: Literal["up", "down"] = "up",
) -> tuple[np.ndarray, np.ndarray]:
    """Discrete Benjamini–Hochberg procedure of Döhler, Durand & Roquain (2018): [DBH-SU] or [DBH-SD].

    Each p-value p_i has a known null CDF F_i, a step function on its support A_i (F_i(t) = t on A_i), or
    F_i(t) = t for a continuous p-value (support None). With sorted p_(1) ≤ … ≤ p_(m):

    - step-down: ξ(t) = Σ_i F_i(t)/(1 − F_i(t)); adjusted p̃_(j) = max_{k ≤ j} min(1, ξ(p_(k))/k), as
      ``DiscreteFDR::DBH(direction = "sd")``.
    - step-up: τ_m = max{t < 1 : ξ(t) ≤ m·q}; S_k = Σ_i F_i(p_(k))/(1 − F_i(τ_m)) for p_(k) ≤ τ_m (∞ above);
      adjusted p̃_(j) = min(1, min_{k ≥ j} S_k/k). H_(j) is rejected iff p̃_(j) ≤ q, i.e. p_(j) ≤ p_(k*) with
      k* the largest k having p_(k) ≤ τ_k (the paper's critical values). τ_m depends on q, so p̃ is the
      adjusted p-value of the procedure run at this q (with only continuous p-values it is the BH adjusted
      p-value times (1 + q): DBH-SU then equals BH at level q/(1 + q)).

    Both control the FDR at q for independent p-values (DDR 2018, Theorems 3.1 and 3.2).

    Args:
        p_values: shape (m,), observed p-values in (0, 1], each a value of its support (compared exactly:
            compute equal probabilities as equal floats, e.g. as integer ratios).
        supports: m entries: a sorted array of attainable p-values ending with 1.0, or None (continuous).
        q: target false discovery rate in (0, 1).
        step: ``"up"`` ([DBH-SU]) or ``"down"`` ([DBH-SD]).

    Returns:
        (rejected, adjusted): bool and float arrays of shape (m,) in input order.

    Raises:
        ValueError: lengths that differ, q outside (0, 1), or an unknown ``step``.

    Source: Döhler, Durand & Roquain (2018), "New FDR bounds for discrete and heterogeneous tests",
    Electron. J. Statist. 12(1):1867-1900, doi:10.1214/18-EJS1441, eqs. (10)-(11); checked against the
    DiscreteFDR R package (toy example of its vignette).

    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1 or p.size != len(supports) or not 0 < q < 1 or step not in ("up", "down"):
        raise ValueError("p_values and supports must have the same length, 0 < q < 1, step 'up' or 'down'")
    m = p.size
    if m == 0:
        return np.zeros(0, dtype=bool), np.zeros(0)
    order = np.argsort(p, kind="stable")
    sorted_p = p[order]
    ranks = np.arange(1, m + 1)
    if step == "down":
        xi = _StepCDFs(supports, np.ones(m)).odds(np.minimum(sorted_p, 1 - 1e-15))
        xi[sorted_p >= 1.0] = np.inf
        adjusted_sorted = np.maximum.accumulate(np.minimum(1.0, xi / ranks))
    else:
        tau_m = _tau_m(_StepCDFs(supports, np.ones(m)), m * q)
        weights = np.array([1.0 / (1.0 - _evaluate(s, tau_m)) for s in supports])
        s_k = _StepCDFs(supports, weights).weighted(sorted_p)
        ratio = np.where(sorted_p <= tau_m, s_k / ranks, np.inf)
        adjusted_sorted = np.minimum(1.0, np.minimum.accumulate(ratio[::-1])[::-1])
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return adjusted <= q, adjusted


def _tau_m(cdfs: _StepCDFs, bound: float) -> float:
    """sup{t < 1 : ξ(t) ≤ bound} by bisection (ξ is non-decreasing and right-continuous).

    For step CDFs the result lies just below the first support point where ξ exceeds the bound, so every
    F_i there equals its value at the paper's τ_m (the largest support point satisfying the bound).
    """
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if cdfs.odds(np.array([mid]))[0] <= bound:
            lo = mid
        else:
            hi = mid
    return lo
