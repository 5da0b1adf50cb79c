"""Oracle tests for gate.stats: every STATISTICS.md §5 value the code computes, plus hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import metric_input as metric
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from gate.stats import (
    analyze_cases,
    analyze_metrics,
    benjamini_hochberg,
    bootstrap_ci,
    clustered_se,
    gate_decision,
    holm,
    mcnemar_exact,
    mde,
    paired_se,
    sample_size,
    sign_flip_test,
    t_interval,
    variance_decomposition,
)
from gate.stats.decision import ErrorBudgetUse

# §5 Ex1: binary, R=1, N=30, table [[16, 8], [1, 5]]
EX1_BASE = np.array([1] * 16 + [0] * 5 + [1] * 8 + [0] * 1, dtype=float)
EX1_HEAD = np.array([1] * 16 + [0] * 5 + [0] * 8 + [1] * 1, dtype=float)
# §5 Ex2: continuous, R=1, N=10
EX2_BASE = np.array([0.92, 0.85, 1.00, 0.70, 0.95, 0.80, 0.60, 1.00, 0.75, 0.88])
EX2_HEAD = np.array([0.80, 0.88, 0.91, 0.55, 0.94, 0.66, 0.65, 0.83, 0.57, 0.81])
# §5 Ex7: clustered paired differences, 4 clusters of 3
EX7_D = np.array([-1, -1, -1, 0, 0, 0, 0, 0, 1, -1, -1, 0], dtype=float)
EX7_CLUSTERS = np.repeat(np.arange(4), 3)
# §5 Ex8: 4 cases x 3 binary repeats
EX8 = np.array([[1, 1, 1], [1, 0, 1], [0, 0, 0], [1, 0, 0]], dtype=float)


# ---------------------------------------------------------------- tests (McNemar, sign-flip)


def test_mcnemar_exact_matches_ex1_and_statsmodels():
    two = mcnemar_exact(EX1_BASE, EX1_HEAD)
    assert two.p_value == pytest.approx(0.0390625, abs=1e-12)
    assert two.statistic == 1.0 and two.n == 30
    sm = mcnemar([[16, 8], [1, 5]], exact=True)
    assert two.p_value == pytest.approx(sm.pvalue, abs=1e-12)
    assert mcnemar_exact(EX1_BASE, EX1_HEAD, "less").p_value == pytest.approx(0.01953125, abs=1e-12)
    assert mcnemar_exact(EX1_BASE, EX1_HEAD, "greater").p_value == pytest.approx(
        stats.binomtest(1, 9, 0.5, alternative="greater").pvalue, abs=1e-12
    )


def test_mcnemar_without_discordant_pairs_is_one_and_rejects_bad_input():
    assert mcnemar_exact(EX1_BASE, EX1_BASE, "less").p_value == 1.0
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_exact(np.array([0.5, 1.0]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="alternative"):
        mcnemar_exact(EX1_BASE, EX1_HEAD, "lower")


def test_sign_flip_exact_matches_ex2_and_ex1():
    d = EX2_HEAD - EX2_BASE
    rng = np.random.default_rng(0)
    res = sign_flip_test(d, rng=rng)
    assert res.p_value == pytest.approx(0.017578125, abs=1e-12)  # 18/1024
    assert res.statistic == pytest.approx(-0.085) and res.n == 10 and "exact" in res.method
    assert sign_flip_test(d, rng=rng, alternative="less").p_value == pytest.approx(0.0087890625, abs=1e-12)
    d1 = EX1_HEAD - EX1_BASE  # zeros do not move under a flip: same p as on the 9 discordant pairs
    assert sign_flip_test(d1[d1 != 0], rng=rng).p_value == pytest.approx(0.0390625, abs=1e-12)
    assert sign_flip_test(d1, rng=rng, exact_max_n=30).p_value == pytest.approx(0.0390625, abs=1e-12)


def test_sign_flip_monte_carlo_is_plus_one_corrected():
    d = EX2_HEAD - EX2_BASE
    res = sign_flip_test(d, rng=np.random.default_rng(0), n_resamples=999, exact_max_n=0)
    assert "Monte Carlo" in res.method
    assert res.p_value * 1000 == pytest.approx(round(res.p_value * 1000))  # (1 + b) / (1 + B)
    assert abs(res.p_value - 0.017578125) < 0.015  # MC SE ≈ 0.004
    all_worse = -np.linspace(0.1, 1, 30)
    assert sign_flip_test(all_worse, rng=np.random.default_rng(1), n_resamples=500, alternative="less").p_value == (
        pytest.approx(1 / 501)
    )


def test_sign_flip_clusters_flip_cluster_sums():
    rng = np.random.default_rng(0)
    res = sign_flip_test(EX7_D, rng=rng, clusters=EX7_CLUSTERS)
    sums = np.bincount(EX7_CLUSTERS, weights=EX7_D)  # [-3, 0, 1, -2]
    oracle = stats.permutation_test(
        (sums,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    )
    assert res.p_value == pytest.approx(oracle.pvalue, abs=1e-12)
    assert res.p_value == pytest.approx(0.5)  # ±3 ±1 ±2 (+ the zero sum): |Σ| ≥ 4 for 4 of 8 sign patterns
    assert "clusters" in res.method and res.statistic == pytest.approx(-1 / 3)


# ---------------------------------------------------------------- multiplicity (Ex5)


def test_holm_and_bh_match_ex5_and_statsmodels():
    p = np.array([0.001, 0.008, 0.039, 0.041, 0.042])
    np.testing.assert_allclose(holm(p), [0.005, 0.032, 0.117, 0.117, 0.117], atol=1e-12)
    np.testing.assert_allclose(benjamini_hochberg(p), [0.005, 0.02, 0.042, 0.042, 0.042], atol=1e-12)
    shuffled = np.array([0.041, 0.001, np.nan, 0.042, 0.008, 0.039])
    ok = ~np.isnan(shuffled)
    np.testing.assert_allclose(holm(shuffled)[ok], multipletests(shuffled[ok], method="holm")[1], atol=1e-12)
    np.testing.assert_allclose(
        benjamini_hochberg(shuffled)[ok], multipletests(shuffled[ok], method="fdr_bh")[1], atol=1e-12
    )
    assert np.isnan(holm(shuffled)[2]) and np.isnan(benjamini_hochberg(shuffled)[2])


# ---------------------------------------------------------------- SEs and intervals (Ex1, Ex2, Ex7)


def test_paired_se_matches_miller_eq7():
    assert paired_se(EX1_HEAD - EX1_BASE) == pytest.approx(0.0920187, abs=1e-7)
    assert paired_se(EX2_HEAD - EX2_BASE) == pytest.approx(0.0262573, abs=1e-7)
    assert math.isnan(paired_se(np.array([0.3])))


def test_clustered_se_matches_ex7():
    assert clustered_se(EX7_D, EX7_CLUSTERS) == pytest.approx(0.2690550, abs=1e-7)
    assert clustered_se(EX7_D, EX7_CLUSTERS, small_sample=True) == pytest.approx(0.3042903, abs=1e-7)
    cluster_means = EX7_D.reshape(4, 3).mean(axis=1)
    assert clustered_se(EX7_D, EX7_CLUSTERS, small_sample=True) == pytest.approx(stats.sem(cluster_means))
    offset = np.array([-1, -1, 0, 0, 1, -1, 0, 0, -1, -1, 0, 1], dtype=float)
    assert paired_se(offset) == pytest.approx(0.2175971, abs=1e-7)
    assert clustered_se(offset, EX7_CLUSTERS) == pytest.approx(0.1517990, abs=1e-7)


def test_t_interval_matches_ex1_and_ex2():
    d1 = EX1_HEAD - EX1_BASE
    ci = stats.ttest_rel(EX1_HEAD, EX1_BASE).confidence_interval(0.95)
    assert t_interval(d1, confidence=0.95) == pytest.approx((ci.low, ci.high), abs=1e-9)
    assert t_interval(d1, confidence=0.90) == pytest.approx((-0.38968, -0.07698), abs=1e-5)
    assert t_interval(EX2_HEAD - EX2_BASE, confidence=0.90) == pytest.approx((-0.13313, -0.03687), abs=1e-5)


def test_bootstrap_bca_matches_ex1_and_ex2_within_tolerance():
    rng = np.random.default_rng(12345)
    low, high, method = bootstrap_ci(EX2_HEAD - EX2_BASE, confidence=0.95, rng=rng, n_resamples=9999, min_units=5)
    assert method == "bca"
    assert (low, high) == pytest.approx((-0.1290431, -0.030), abs=0.005)
    low, high, method = bootstrap_ci(EX1_HEAD - EX1_BASE, confidence=0.95, rng=rng, n_resamples=9999)
    assert method == "bca"
    assert (low, high) == pytest.approx((-0.4, -0.0666667), abs=0.005)


def test_bootstrap_falls_back_to_t_for_small_n_and_degenerate_data():
    d = EX2_HEAD - EX2_BASE
    low, high, method = bootstrap_ci(d, confidence=0.9, rng=np.random.default_rng(0))
    assert method == "t" and (low, high) == pytest.approx(t_interval(d, confidence=0.9))
    assert bootstrap_ci(np.zeros(40), confidence=0.9, rng=np.random.default_rng(0)) == (0.0, 0.0, "t")
    low, high, method = bootstrap_ci(np.array([0.2]), confidence=0.9, rng=np.random.default_rng(0))
    assert method == "none" and math.isnan(low) and math.isnan(high)


def test_cluster_bootstrap_with_singleton_clusters_equals_case_bootstrap():
    d = np.random.default_rng(3).normal(-0.05, 0.2, 60)
    plain = bootstrap_ci(d, confidence=0.9, rng=np.random.default_rng(7), n_resamples=2000)
    single = bootstrap_ci(d, confidence=0.9, rng=np.random.default_rng(7), n_resamples=2000, clusters=np.arange(60))
    assert single == pytest.approx(plain)
    grouped = bootstrap_ci(
        d, confidence=0.9, rng=np.random.default_rng(7), n_resamples=2000, clusters=np.repeat(np.arange(30), 2)
    )
    assert grouped[2] == "bca" and grouped[0] < d.mean() < grouped[1]


# ---------------------------------------------------------------- power and variance split (Ex6, Ex8)


def test_miller_power_and_mde_ex6():
    assert sample_size(0.03, 1 / 9, two_sided=True) == pytest.approx(968.997, abs=1e-3)
    assert mde(198, 1 / 9, 1 / 6, 1 / 6, 1, 1, two_sided=True) == pytest.approx(0.132733, abs=1e-6)
    assert mde(198, 1 / 9, 1 / 6, 1 / 6, 10, 10, two_sided=True) == pytest.approx(0.075670, abs=1e-6)
    one_sided = (1.644854 + 0.841621) * math.sqrt((1 / 9 + 1 / 6 + 1 / 6) / 198)
    assert mde(198, 1 / 9, 1 / 6, 1 / 6) == pytest.approx(one_sided, abs=1e-6)
    assert sample_size(mde(198, 0.1, 0.2, 0.2, 3, 3), 0.1, 0.2, 0.2, 3, 3) == pytest.approx(198)


def test_variance_decomposition_ex8():
    omega2, s2_a, s2_b, icc = variance_decomposition(EX8, EX8)
    assert (omega2, s2_a, s2_b) == pytest.approx((0.0, 0.1666667, 0.1666667), abs=1e-7)
    assert icc == pytest.approx(0.4375, abs=1e-12)  # Var(x) = 0.1851852 − 0.1666667/3 = 0.1296296


def test_variance_decomposition_paired_and_single_repeat():
    head = EX8[[2, 1, 0, 3]]  # case 1 and 3 swap: d = [−1, 0, 1, 0]
    omega2, *_ = variance_decomposition(EX8, head)
    assert omega2 == pytest.approx(2 / 3 - 2 * (1 / 6) / 3)
    omega2, s2_a, s2_b, icc = variance_decomposition(EX8[:, :1], head[:, :1])
    assert omega2 == pytest.approx(np.var(head[:, 0] - EX8[:, 0], ddof=1))
    assert math.isnan(s2_a) and math.isnan(s2_b) and math.isnan(icc)


# ---------------------------------------------------------------- analyze_metrics


def test_analyze_metrics_ex1_binary_fails():
    (res,) = analyze_metrics([metric("hit_rate@5", "binary", EX1_BASE, EX1_HEAD, margin=0.05)])
    assert res.status == "fail"
    assert res.p_value == pytest.approx(0.01953125) and res.p_adjusted == res.p_value
    assert "McNemar" in res.test_method
    assert res.delta == pytest.approx(-0.2333333, abs=1e-7) and res.se == pytest.approx(0.0920187, abs=1e-7)
    assert (res.base_mean, res.head_mean) == pytest.approx((0.8, 0.5666667), abs=1e-7)
    assert res.confidence == pytest.approx(0.90) and res.ci_high < 0
    assert _mcnemar_rule_power(res.mde, 30, 9 / 30, 0.8, margin=0.05) == pytest.approx(0.80, abs=0.01)
    assert _mcnemar_rule_power(res.mde - 0.01, 30, 9 / 30, 0.8, margin=0.05) < 0.80
    assert res.n_pairs == 30 and res.ratio is None


def _mcnemar_rule_power(
    delta: float, n: int, discordant: float, base_rate: float, *, margin: float, alpha: float = 0.05
) -> float:
    """Oracle: P(exact McNemar rejects at α and Δ̂ ≤ −m) when a drop breaks each case with probability δ/p (p the
    base's pass rate; a broken case cannot improve): better with π_b = π₀(1 − δ/p), worse with π_b + δ
    (2π₀ = ``discordant``), summed over every (worse, better) count with scipy's multinomial and binomtest."""
    from scipy.stats import binomtest, multinomial

    better = discordant / 2 * (1 - delta / base_rate)
    law = multinomial(n, [better + delta, better, 1 - 2 * better - delta])
    total = 0.0
    for worse in range(n + 1):
        for better in range(n + 1 - worse):
            if worse - better >= margin * n and binomtest(better, worse + better, 0.5, "less").pvalue <= alpha:
                total += law.pmf([worse, better, n - worse - better])
    return total


def test_analyze_metrics_ex2_margin_decides():
    (fail,) = analyze_metrics([metric("faithfulness", "graded", EX2_BASE, EX2_HEAD, margin=0.05)])
    assert fail.status == "fail" and fail.ci_method == "sign-flip test inversion (exact, 2^10)"
    # the inversion of the exact sign-flip test (tests/stats/test_intervals.py checks it against scipy); near the
    # t-interval's (-0.13313, -0.03687) of §5 Ex2, which is no longer used (it is not the test's dual)
    assert (fail.ci_low, fail.ci_high) == pytest.approx((-0.135, -0.0366667), abs=1e-6)
    assert fail.p_value == pytest.approx(0.0087890625)  # exact one-sided sign-flip
    (unsure,) = analyze_metrics([metric("faithfulness", "graded", EX2_BASE, EX2_HEAD, margin=0.10)])
    assert unsure.status == "inconclusive"
    (strict,) = analyze_metrics([metric("faithfulness", "graded", EX2_BASE, EX2_HEAD, margin=0.10)], strict=True)
    assert strict.status == "fail" and strict.reason.startswith("strict mode")
    (better,) = analyze_metrics([metric("faithfulness", "graded", EX2_HEAD, EX2_BASE, margin=0.05)])
    assert better.status == "pass" and better.delta == pytest.approx(0.085)


def test_lower_is_better_is_oriented():
    (higher,) = analyze_metrics([metric("m", "graded", EX2_BASE, EX2_HEAD)])
    (lower,) = analyze_metrics([metric("m", "graded", 1 - EX2_BASE, 1 - EX2_HEAD, direction="lower")])
    assert lower.delta == pytest.approx(higher.delta) and lower.p_value == pytest.approx(higher.p_value)
    assert lower.base_mean == pytest.approx(1 - EX2_BASE.mean())
    (binary,) = analyze_metrics([metric("b", "binary", 1 - EX1_BASE, 1 - EX1_HEAD, direction="lower")])
    assert binary.p_value == pytest.approx(0.01953125) and binary.status == "fail"


def test_holm_across_gated_metrics_sets_levels():
    inputs = [
        metric("a", "graded", EX2_BASE, EX2_HEAD, margin=0.05),
        metric("b", "binary", EX1_BASE, EX1_HEAD, margin=0.05),
        metric("c", "graded", EX2_BASE, EX2_BASE + 0.01, margin=0.05, gated=False),
    ]
    a, b, c = analyze_metrics(inputs)
    np.testing.assert_allclose([a.p_adjusted, b.p_adjusted], holm(np.array([a.p_value, b.p_value])))
    assert a.p_value < b.p_value
    assert a.confidence == pytest.approx(1 - 2 * 0.05 / 2) and b.confidence == pytest.approx(0.90)
    assert c.p_adjusted == c.p_value and c.confidence == pytest.approx(0.90)
    (zero,) = analyze_metrics([metric("z", "graded", EX2_BASE, EX2_HEAD, margin=0.0)])
    assert zero.alpha == 0.01 and zero.confidence == pytest.approx(0.98)


def test_ratio_metric_reports_geometric_mean_ratio():
    base = np.random.default_rng(0).lognormal(5, 0.4, (40, 2))
    head = base * 1.2
    (slow,) = analyze_metrics([metric("latency_ms", "ratio", base, head, margin=0.10, direction="lower")])
    assert slow.ratio == pytest.approx(1.2) and slow.delta == pytest.approx(-math.log(1.2))
    assert (slow.ratio_ci_low, slow.ratio_ci_high) == pytest.approx((1.2, 1.2))  # all d equal: degenerate
    assert slow.status == "fail" and slow.reason.startswith("rose beyond the margin of 10 %, significantly (worse)")
    assert "head/base = ×1.200, CI [×1.200, ×1.200], p (Holm-adjusted) < 0.001 ≤ 0.05" in slow.reason
    (tolerated,) = analyze_metrics([metric("latency_ms", "ratio", base, head, margin=0.25, direction="lower")])
    assert tolerated.status == "pass"
    noisy = head * np.random.default_rng(1).lognormal(0, 0.05, head.shape)
    (res,) = analyze_metrics([metric("latency_ms", "ratio", base, noisy, margin=0.1, direction="lower")])
    means_b, means_h = base.mean(axis=1), noisy.mean(axis=1)
    assert res.ratio == pytest.approx(stats.gmean(means_h / means_b))
    assert res.ratio_ci_low < res.ratio < res.ratio_ci_high


def test_failed_and_nan_scores_are_unpaired_and_counted():
    base, head = EX1_BASE.copy(), EX1_HEAD.copy()
    base[0] = np.nan  # not applicable on base
    failed_head = np.zeros((30, 1), bool)
    failed_head[[1, 2]] = True  # errors on head (their values are ignored)
    (res,) = analyze_metrics([metric("hit", "binary", base, head, failed_head=failed_head)])
    assert res.n_pairs == 27 and res.n_failed_head == 2 and res.n_failed_base == 0
    assert res.base_mean == pytest.approx(EX1_BASE[3:].mean())


def test_clusters_give_clustered_se_and_cluster_test():
    base = np.zeros(12)
    (res,) = analyze_metrics([metric("m", "graded", base, EX7_D, clusters=EX7_CLUSTERS)])
    assert res.se == pytest.approx(0.2690550, abs=1e-7) and res.n_clusters == 4
    assert "clusters" in res.test_method
    assert res.p_value == pytest.approx(
        sign_flip_test(EX7_D, rng=np.random.default_rng(0), clusters=EX7_CLUSTERS, alternative="less").p_value
    )


def test_seeded_results_are_reproducible_and_per_metric():
    rng = np.random.default_rng(2)
    base = rng.random((60, 3))
    head = base + rng.normal(-0.02, 0.1, base.shape)
    a = metric("faith", "graded", base, head)
    other = metric("other", "graded", head, base, gated=False)
    first, second = analyze_metrics([a], seed=4), analyze_metrics([a], seed=4)
    assert repr(first) == repr(second)
    assert repr(analyze_metrics([a, other], seed=4)[0]) == repr(first[0])  # adding a metric changes nothing
    assert analyze_metrics([a], seed=5)[0].p_value != first[0].p_value  # Monte Carlo path depends on the seed


def test_gate_decision_outcomes():
    (fail,) = analyze_metrics([metric("f", "graded", EX2_BASE, EX2_HEAD, margin=0.05)])
    (unsure,) = analyze_metrics([metric("u", "graded", EX2_BASE, EX2_HEAD, margin=0.10)])
    (ok,) = analyze_metrics([metric("p", "graded", EX2_HEAD, EX2_BASE, margin=0.05)])
    (ungated_fail,) = analyze_metrics([metric("x", "graded", EX2_BASE, EX2_HEAD, margin=0.05, gated=False)])
    over = ErrorBudgetUse("p", "head", 6, 100, 0.06, ("6× judge failed: HTTP 429",))
    under = ErrorBudgetUse("p", "base", 5, 100, 0.05, ("5× judge failed: HTTP 500",))
    assert gate_decision([ok, ungated_fail]).verdict == "pass"
    decision = gate_decision([ok, fail], budget=[over])
    assert decision.verdict == "fail" and decision.reasons[0].startswith("f: fell beyond the margin")  # not excused
    assert gate_decision([ok], new_ood_failures=2).reasons == (
        "2 out-of-domain question(s) refused on base are answered on head",
    )
    assert gate_decision([ok], new_ood_failures=2, fail_on_new_ood=False).verdict == "pass"
    assert gate_decision([ok], budget=[under]).verdict == "pass"  # at the budget is within it
    decision = gate_decision([ok, unsure], budget=[under, over])
    assert decision.verdict == "error" and decision.reasons == (
        "p on head: 6 of 100 evaluations failed (6.0%, budget 5.0%): 6× judge failed: HTTP 429",
    )
    assert gate_decision([ok, unsure], budget=[over], strict=True).verdict == "error"  # strict never hides it
    assert gate_decision([ok, unsure]).verdict == "inconclusive"
    assert gate_decision([ok, unsure], strict=True).verdict == "fail"
    decision = gate_decision([ok], new_system_failures=3, budget=[over])
    assert decision.verdict == "fail" and decision.reasons[0] == (
        "the pipeline fails on 3 case(s) that ran without error on base (system errors)"
    )
    # 3 cases broke on head; base had run them, and refused 1 of them: it answered 2, not 3
    decision = gate_decision([ok], new_system_failures=3, refused_on_base=1)
    assert decision.reasons[0] == (
        "the pipeline fails on 3 case(s) that ran without error on base: 2 answered there, 1 refused (system errors)"
    )


def test_metric_that_applies_to_no_case_is_left_out():
    empty = np.full((6, 1), np.nan)
    (na, ok) = analyze_metrics(
        [metric("refusal", "binary", empty, empty), metric("p", "graded", EX2_HEAD, EX2_BASE, margin=0.05)]
    )
    assert na.status == "not_applicable" and na.n_pairs == 0
    assert gate_decision([na, ok]).verdict == "pass" and gate_decision([na, ok], strict=True).verdict == "pass"
    failed = metric("refusal", "binary", empty, empty, failed_head=np.ones((6, 1), dtype=bool))
    (only_failed,) = analyze_metrics([failed])
    assert only_failed.status == "inconclusive"  # failures are not "not applicable": the error budget judges them
    assert only_failed.reason == (
        "no case was measured on either side: every evaluation failed (0 case(s) with a value on base, 0 on head)"
    )


def test_unchanged_metric_takes_no_share_of_alpha_and_has_no_mde():
    """Tarone: a metric whose differences are all 0 cannot be rejected, so Holm spreads α over the others only."""
    zeros = np.zeros(10)
    tested = metric("f", "graded", EX2_BASE, EX2_HEAD, margin=0.05)
    (alone,) = analyze_metrics([tested])
    with_constant = analyze_metrics([tested, metric("error_rate", "binary", zeros, zeros, direction="lower", margin=0)])
    assert with_constant[0].p_adjusted == alone.p_adjusted and with_constant[0].confidence == alone.confidence
    constant = with_constant[1]
    assert constant.status == "pass" and constant.p_adjusted == 1.0  # interval [0, 0] ≥ −0: non-inferior
    assert np.isnan(constant.mde)  # no variation: the minimum detectable drop is undefined, not 0
    with_third = analyze_metrics([tested, metric("g", "graded", EX2_BASE, EX2_BASE + 0.01)])
    assert with_third[0].p_adjusted > alone.p_adjusted  # a testable metric does share α


def test_new_ood_failures_block_only_with_a_significant_refusal_drop():
    refusal_base, refusal_head = np.ones(12), np.r_[np.zeros(6), np.ones(6)]
    (significant,) = analyze_metrics([metric("refusal", "binary", refusal_base, refusal_head)])
    assert significant.p_adjusted == pytest.approx(stats.binomtest(0, 6, alternative="less").pvalue)  # 1/64
    assert gate_decision([significant], new_ood_failures=6, refusal=significant).verdict == "fail"
    (weak,) = analyze_metrics([metric("refusal", "binary", np.ones(12), np.r_[np.zeros(2), np.ones(10)])])
    assert weak.p_adjusted == pytest.approx(0.25)  # binomtest(0, 2, alternative="less")
    decision = gate_decision([weak], new_ood_failures=2, refusal=weak)
    assert decision.verdict == "inconclusive" and not any("out-of-domain" in r for r in decision.reasons)
    assert decision.warnings and "not significant (p (Holm-adjusted) = 0.250)" in decision.warnings[0]


def test_metric_that_applies_to_one_side_only_is_not_applicable():
    """A refusal metric on base's golden set without out-of-domain cases, head's with 5: nothing to compare, and
    nothing measured worse ("0 / 0 / 0 inconclusive" read as a measurement). Values on both sides, on different
    cases, stay inconclusive."""
    base = np.full((5, 1), np.nan)
    (res,) = analyze_metrics([metric("refusal", "binary", base, np.ones(5))])
    assert res.n_pairs == 0 and res.status == "not_applicable"
    assert res.reason == "applies to no case on base (5 on head): nothing to compare, left out of the decision"
    assert gate_decision([res]).verdict == "pass" and gate_decision([res], strict=True).verdict == "pass"
    (res,) = analyze_metrics([metric("m", "graded", np.ones(5), base)])
    assert res.status == "not_applicable" and res.reason.startswith("applies to no case on head (5 on base)")
    crossed = metric("m", "graded", [1.0, 1.0, np.nan, np.nan], [np.nan, np.nan, 0.5, np.nan])
    (res,) = analyze_metrics([crossed])
    assert res.n_pairs == 0 and res.status == "inconclusive"
    assert res.reason == "no paired case: 2 case(s) with a value on base, 1 on head"
    assert gate_decision([res]).verdict == "inconclusive"
    assert gate_decision([]).reasons == ("no gated metrics",)


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="unique"):
        analyze_metrics([metric("a", "graded", EX2_BASE, EX2_HEAD)] * 2)
    with pytest.raises(ValueError, match="binary"):
        metric("a", "binary", EX2_BASE, EX2_HEAD)
    with pytest.raises(ValueError, match="margin"):
        metric("a", "graded", EX2_BASE, EX2_HEAD, margin=-0.1)


# ---------------------------------------------------------------- analyze_cases


def test_cases_binary_repeats_fisher_and_discrete_bh():
    base = np.array([[1] * 5, [1] * 5, [1] * 5, [0, 1, 0, 1, 1], [1] * 5, [np.nan] * 5], dtype=float)
    head = np.array([[0] * 5, [1, 0, 0, 0, 0], [1, 1, 0, 1, 1], [0, 1, 0, 1, 1], [1] * 5, [1] * 5], dtype=float)
    cases = analyze_cases(metric("hit", "binary", base, head), tau=0.5, q=0.10)
    p = [
        stats.fisher_exact([[5, 0], [0, 5]], alternative="greater").pvalue,
        stats.fisher_exact([[5, 0], [1, 4]], alternative="greater").pvalue,
        stats.fisher_exact([[5, 0], [4, 1]], alternative="greater").pvalue,
        stats.fisher_exact([[3, 2], [3, 2]], alternative="greater").pvalue,
        1.0,
    ]
    np.testing.assert_allclose([c.p_value for c in cases[:5]], p, atol=1e-12)
    # By hand (DDR 2018 step-up): cases 0, 1 and 3 can show a drop of 0.5 (supports {1, 26}/252, {6}/252,
    # {6}/252); τ_m = 26/252, so S_1 = (1/252)/(1 − 26/252) and S_2 = S_1 + 2·(6/252)/(1 − 6/252).
    s1 = (1 / 252) / (1 - 26 / 252)
    s2 = s1 + 2 * (6 / 252) / (1 - 6 / 252)
    np.testing.assert_allclose([c.p_adjusted for c in cases[:5]], [s1, s2 / 2, 1.0, 1.0, 1.0], rtol=1e-12)
    assert [c.status for c in cases] == ["regressed", "regressed", "flaky", "flaky", "unchanged", "not_applicable"]
    assert cases[1].effect == pytest.approx(-0.8) and cases[2].flaky_head and not cases[2].flaky_base
    assert cases[3].flaky_base and cases[3].flaky_head
    assert math.isnan(cases[5].p_value) and math.isnan(cases[5].p_adjusted)


def test_cases_single_observation_only_suspected():
    cases = analyze_cases(metric("hit", "binary", EX1_BASE, EX1_HEAD))
    statuses = {c.status for c in cases}
    assert statuses == {"unchanged", "suspected", "improved"}
    assert all(c.single_observation and math.isnan(c.p_value) for c in cases)
    assert [c.index for c in cases if c.status == "suspected"] == list(range(21, 29))


def test_cases_graded_use_the_exact_permutation_test():
    rng = np.random.default_rng(8)
    base = rng.normal(0.8, 0.05, (40, 3))
    head = base + rng.normal(0, 0.05, (40, 3))
    head[0] = [0.2, 0.25, 0.3]
    cases = analyze_cases(metric("faith", "graded", base, head), tau=0.2)
    for i in (0, 1, 2):
        ref = stats.permutation_test(
            (head[i], base[i]), lambda x, y: np.mean(x) - np.mean(y), permutation_type="independent",
            alternative="less", n_resamples=np.inf,
        )  # fmt: skip
        assert cases[i].p_value == pytest.approx(ref.pvalue, abs=1e-12)
    assert cases[0].status == "regressed" and cases[0].effect == pytest.approx(0.25 - base[0].mean())
    assert sum(c.status == "regressed" for c in cases) == 1


def test_cases_ratio_effect_is_oriented_log_ratio():
    base = np.full((3, 2), 100.0)
    head = np.array([[200.0, 200.0], [105.0, 95.0], [50.0, 50.0]])
    cases = analyze_cases(metric("latency_ms", "ratio", base, head, direction="lower"), tau=0.5)
    assert [c.effect for c in cases] == pytest.approx([-math.log(2), 0.0, math.log(2)])
    assert [c.status for c in cases] == ["suspected", "unchanged", "improved"]  # no noise to test against
    assert cases[0].head_mean == 200.0
    with pytest.raises(ValueError, match="tau"):
        analyze_cases(metric("tput", "ratio", base, head), tau=1.0)


def test_interval_of_a_score_difference_is_clipped_to_its_range():
    """Few cases, opposite flips: the t-interval (scipy, at the metric's 90 % level) reaches past ±1; the interval
    reported is that one cut to [-1, 1], flagged, and the verdict is the one the uncut interval gives."""
    base, head = np.array([1.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0])
    (res,) = analyze_metrics([metric("m", "graded", base, head, margin=0.05)])
    d = head - base
    low, high = stats.t.interval(0.90, df=2, loc=d.mean(), scale=d.std(ddof=1) / math.sqrt(3))
    assert low < -1 and high > 1  # what a t-interval says on three cases
    assert res.ci_clipped and (res.ci_low, res.ci_high) == (-1.0, 1.0)
    assert res.status == "inconclusive"
    (inside,) = analyze_metrics([metric("m", "graded", EX2_BASE, EX2_HEAD, margin=0.05)])
    assert not inside.ci_clipped and -1 < inside.ci_low < inside.ci_high < 1
    (ratio,) = analyze_metrics([metric("latency_ms", "ratio", [10.0, 100.0, 10.0], [100.0, 10.0, 100.0])])
    assert not ratio.ci_clipped  # log-ratios have no such range


def test_reasons_say_rose_for_a_lower_is_better_metric_and_give_head_minus_base():
    base, head = np.zeros(40), np.r_[np.full(20, 0.4), np.zeros(20)]  # contradictions rose by 0.2 on average
    (res,) = analyze_metrics([metric("contradiction_rate", "graded", base, head, margin=0.03, direction="lower")])
    assert res.status == "fail" and res.delta == pytest.approx(-0.2)  # oriented: negative = worse
    assert res.reason.startswith("rose beyond the margin of 0.030, significantly (worse): Δ = +0.200, CI [+0.")
    assert "drop" not in res.reason
    (higher,) = analyze_metrics([metric("f1", "graded", head, base, margin=0.03)])
    assert higher.reason.startswith("fell beyond the margin of 0.030, significantly (worse): Δ = -0.200, CI [-0.")
    lower_pass = analyze_metrics([metric("c", "graded", base, base, margin=0.03, direction="lower")])[0]
    assert lower_pass.reason == "non-inferior: Δ = +0.000, CI [+0.000, +0.000] excludes a rise of 0.030"


def test_one_number_format():
    from gate.stats import numbers

    assert [numbers.number(x) for x in (0.87, -0.0001, 1 / 3, float("nan"), None)] == [
        "0.870", "0.000", "0.333", "–", "–",
    ]  # fmt: skip
    assert numbers.number(-0.19, signed=True) == "-0.190" and numbers.number(0.024, signed=True) == "+0.024"
    assert [numbers.p_value(p) for p in (1.144e-05, 0.0005, 0.001, 0.0625, 1.0)] == [
        "<0.001", "<0.001", "0.001", "0.062", "1.000",
    ]  # fmt: skip
    assert numbers.p_clause("p (Holm-adjusted)", 1e-5) == "p (Holm-adjusted) < 0.001"
    assert numbers.p_clause("p", 0.0163) == "p = 0.016"
    assert (numbers.ratio(1.0466), numbers.percent(0.1), numbers.percent(0.025)) == ("×1.047", "10 %", "2.5 %")


def test_every_exported_name_resolves_lazily_and_unknown_names_raise():
    import gate.stats

    for name in gate.stats.__all__:  # a name mapped to the wrong module raises AttributeError here
        obj = getattr(gate.stats, name)
        assert getattr(obj, "__name__", name) == name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        gate.stats.nope  # noqa: B018
