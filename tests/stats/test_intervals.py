"""The interval beside a metric's p is the inversion of the same test (test–interval duality), checked
against scipy / statsmodels oracles for every kind; improvements never read as inconclusive; worse/tie/better counts.
"""

from __future__ import annotations

import json
import math
from functools import partial

import numpy as np
import pytest
from helpers import metric_input, scipy_rng, write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from gate.stats import analyze_metrics, gate_decision
from gate.stats.intervals import exact_flip_thresholds, mcnemar_interval, rank_above

EX1_BASE = np.array([1] * 16 + [0] * 5 + [1] * 8 + [0] * 1, dtype=float)  # STATISTICS.md §5 Ex1
EX1_HEAD = np.array([1] * 16 + [0] * 5 + [0] * 8 + [1] * 1, dtype=float)
EX2_BASE = np.array([0.92, 0.85, 1.00, 0.70, 0.95, 0.80, 0.60, 1.00, 0.75, 0.88])  # §5 Ex2
EX2_HEAD = np.array([0.80, 0.88, 0.91, 0.55, 0.94, 0.66, 0.65, 0.83, 0.57, 0.81])


metric = partial(metric_input, margin=0.03)


def flip_p(d: np.ndarray, delta: float, alternative: str) -> float:
    """scipy's exact paired sign-flip p of H0: Δ = delta (the differences d − delta flipped case by case)."""
    res = stats.permutation_test(
        (d - delta, np.zeros_like(d)),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        n_resamples=np.inf,
        alternative=alternative,
        vectorized=True,
    )
    return float(res.pvalue)


def assert_inverts_scipy(d: np.ndarray, low: float, high: float, level: float, eps: float = 1e-6) -> None:
    """U is where scipy's one-sided "less" p crosses the level, L where its "greater" p does."""
    assert flip_p(d, high - eps, "less") > level >= flip_p(d, high + eps, "less")
    assert flip_p(d, low + eps, "greater") > level >= flip_p(d, low - eps, "greater")


# ---------------------------------------------------------------- binary, R = 1: exact McNemar and its dual


def test_binary_single_run_interval_is_clopper_pearson_on_the_discordant_pairs():
    (res,) = analyze_metrics([metric("hit", "binary", EX1_BASE, EX1_HEAD, margin=0.05)])
    assert res.p_value == pytest.approx(stats.binomtest(1, 9, 0.5, alternative="less").pvalue)
    theta = proportion_confint(1, 9, alpha=0.10, method="beta")  # two-sided 90 % = two one-sided 5 % bounds
    assert (res.ci_low, res.ci_high) == pytest.approx(tuple(9 / 30 * (2 * t - 1) for t in theta), abs=1e-12)
    assert "Clopper–Pearson" in res.ci_method and "McNemar" in res.test_method
    assert res.ci_high < 0 and res.p_adjusted <= 0.05 and res.status == "fail"
    assert -9 / 30 <= res.ci_low  # never beyond what the 9 discordant pairs allow


@pytest.mark.parametrize(("b", "c", "n"), [(6, 0, 48), (0, 2, 12), (3, 3, 100), (0, 0, 20), (9, 1, 10)])
@pytest.mark.parametrize("level", [0.05, 0.0125, 0.001])
def test_mcnemar_interval_is_dual_to_the_exact_test(b, c, n, level):
    low, high = mcnemar_interval(b, c, n, level)
    p_worse = 1.0 if b + c == 0 else stats.binomtest(c, b + c, 0.5, alternative="less").pvalue
    p_better = 1.0 if b + c == 0 else stats.binomtest(c, b + c, 0.5, alternative="greater").pvalue
    assert (high < 0) == (p_worse <= level) and (low > 0) == (p_better <= level)
    assert -(b + c) / n <= low <= (c - b) / n <= high <= (b + c) / n
    if b + c:
        theta = proportion_confint(c, b + c, alpha=2 * level, method="beta")
        assert (low, high) == pytest.approx(tuple((b + c) / n * (2 * t - 1) for t in theta), abs=1e-12)


def test_readme_refusal_row_no_longer_shows_an_interval_that_contradicts_its_p():
    """The bundled example's refusal: 48 out-of-domain cases, base refuses 8, head 2 (6 discordant, all worse),
    Holm over 6 testable gated metrics, two of them far below α: the BCa interval excluded 0 beside p = 0.062."""
    n = 48
    refusal_base = np.r_[np.ones(8), np.zeros(40)]
    refusal_head = np.r_[np.ones(2), np.zeros(46)]
    strong = np.r_[np.ones(30), np.zeros(18)]
    inputs = [
        metric("hit", "binary", strong, np.zeros(n)),
        metric("mrr", "binary", strong, np.r_[np.ones(2), np.zeros(46)]),
        metric("refusal", "binary", refusal_base, refusal_head),
    ]
    mixed = np.r_[np.zeros(3), np.ones(3), np.zeros(42)]
    inputs += [metric(f"other{k}", "binary", np.roll(mixed, 3 + k), mixed) for k in range(3)]  # b = c = 3: p ≈ 0.66
    results = analyze_metrics(inputs)
    refusal = results[2]
    assert refusal.p_value == pytest.approx(1 / 64) and refusal.p_adjusted == pytest.approx(4 / 64)
    # Holm stopped at this metric (step 3 of 6): its interval is at that step's level 0.05/4, and it includes 0
    # as its Holm-adjusted p says
    assert refusal.confidence == pytest.approx(1 - 2 * 0.05 / 4)
    assert refusal.ci_high >= 0 and refusal.status == "inconclusive"
    for res in results:
        assert (res.ci_high < 0) == (res.p_adjusted <= res.alpha), res.name


# ---------------------------------------------------------------- sign-flip inversion: graded, repeats, ratio


def test_graded_interval_inverts_scipys_exact_sign_flip_test():
    (res,) = analyze_metrics([metric("faithfulness", "graded", EX2_BASE, EX2_HEAD, margin=0.05)])
    d = EX2_HEAD - EX2_BASE
    assert res.p_value == pytest.approx(flip_p(d, 0.0, "less"))  # 0.0087890625 (§5 Ex2)
    assert "sign-flip test inversion (exact, 2^10)" == res.ci_method
    assert_inverts_scipy(d, res.ci_low, res.ci_high, 0.05)
    assert res.ci_low <= d.mean() <= res.ci_high and d.min() <= res.ci_low


def test_binary_with_repeats_interval_inverts_scipys_sign_flip_test():
    rng = np.random.default_rng(3)
    base = (rng.random((14, 3)) < 0.8).astype(float)
    head = (rng.random((14, 3)) < 0.6).astype(float)
    (res,) = analyze_metrics([metric("hit", "binary", base, head)])
    d = head.mean(axis=1) - base.mean(axis=1)
    assert "exact" in res.ci_method and "Clopper" not in res.ci_method
    assert res.p_value == pytest.approx(flip_p(d, 0.0, "less"))
    assert_inverts_scipy(d, res.ci_low, res.ci_high, 0.05)


def test_ratio_interval_inverts_scipys_sign_flip_test_on_log_ratios():
    rng = np.random.default_rng(5)
    base = rng.lognormal(5, 0.3, (12, 2))
    head = base * rng.lognormal(0.1, 0.1, (12, 2))
    (res,) = analyze_metrics([metric("latency_ms", "ratio", base, head, margin=0.10, direction="lower")])
    d = -(np.log(head.mean(axis=1)) - np.log(base.mean(axis=1)))  # oriented: slower is worse
    assert res.p_value == pytest.approx(flip_p(d, 0.0, "less"))
    assert_inverts_scipy(d, res.ci_low, res.ci_high, 0.05)
    assert (res.ratio_ci_low, res.ratio_ci_high) == pytest.approx((math.exp(-res.ci_high), math.exp(-res.ci_low)))


def test_monte_carlo_interval_inverts_the_same_sign_vectors_and_agrees_with_scipy():
    rng = np.random.default_rng(8)
    base = rng.random((60, 3))
    head = np.clip(base + rng.normal(-0.03, 0.1, base.shape), 0, 1)
    (res,) = analyze_metrics([metric("faith", "graded", base, head)], n_resamples=4000)
    assert "Monte Carlo" in res.ci_method and (res.ci_high < 0) == (res.p_value <= 0.05)
    d = head.mean(axis=1) - base.mean(axis=1)
    width = res.ci_high - res.ci_low
    for delta, side in ((res.ci_high, "less"), (res.ci_low, "greater")):  # scipy, its own 9999 sign vectors
        shift = 0.15 * width if side == "less" else -0.15 * width
        inside = stats.permutation_test(
            (d - (delta - shift), np.zeros_like(d)), lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples", n_resamples=9999, alternative=side, vectorized=True, **scipy_rng(1),
        ).pvalue  # fmt: skip
        outside = stats.permutation_test(
            (d - (delta + shift), np.zeros_like(d)), lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples", n_resamples=9999, alternative=side, vectorized=True, **scipy_rng(1),
        ).pvalue  # fmt: skip
        assert inside > 0.05 > outside


def test_exact_thresholds_and_rank():
    sums, sizes = np.array([0.3, -0.1, 0.2]), np.ones(3)
    thresholds = exact_flip_thresholds(sums, sizes, 0.0)
    assert thresholds.upper.size == 8 and thresholds.p_worse() == pytest.approx(flip_p(sums, 0.0, "less"))
    assert rank_above(0.05, 8) == 1 and rank_above(0.125, 8) == 2 and rank_above(0.05, 10001) == 501
    assert thresholds.bounds(0.05) == (-math.inf, math.inf)  # 3 cases cannot reject anything at 5 %


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(["binary", "graded", "ratio"]),
    n=st.integers(2, 30),
    r=st.sampled_from([1, 2]),
    seed=st.integers(0, 10_000),
    shift=st.floats(-0.3, 0.3),
)
def test_interval_never_contradicts_p_for_any_kind(kind, n, r, seed, shift):
    """U < 0 exactly when the Holm-adjusted p is ≤ α; bounds stay in [−1, 1]; head better never inconclusive."""
    rng = np.random.default_rng(seed)
    if kind == "binary":
        base = (rng.random((n, r)) < 0.6).astype(float)
        head = (rng.random((n, r)) < np.clip(0.6 + shift, 0, 1)).astype(float)
    elif kind == "graded":
        base = rng.random((n, r))
        head = np.clip(base + shift + rng.normal(0, 0.2, (n, r)), 0, 1)
    else:
        base = rng.lognormal(3, 0.5, (n, r))
        head = base * np.exp(-shift + rng.normal(0, 0.2, (n, r)))
    other = metric("other", "graded", rng.random((n, 1)), rng.random((n, 1)))
    results = analyze_metrics([metric("m", kind, base, head), other], n_resamples=500, seed=seed)
    for res in results:
        assert (res.ci_high < 0) == (res.p_adjusted <= res.alpha)
        assert res.ci_low <= res.delta <= res.ci_high
        if res.kind != "ratio":
            assert -1 <= res.ci_low and res.ci_high <= 1
        if res.delta > 0:
            assert res.status == "pass"
    if results[0].delta > 0:
        assert analyze_metrics([metric("m", kind, base, head)], strict=True, n_resamples=500)[0].status == "pass"
    for res in results:
        assert res.n_worse + res.n_tied + res.n_better == res.n_pairs


def test_holm_stopping_level_keeps_interval_and_adjusted_p_together():
    """p = (0.03, 0.04)-like pair: Holm rejects neither, and neither interval may exclude 0 at its level."""
    first = metric("a", "binary", np.r_[np.ones(5), np.zeros(5)], np.zeros(10))  # b=5, c=0: p = 1/32
    second = metric("b", "binary", np.r_[np.ones(5), np.zeros(5)], np.zeros(10), margin=0.04)
    a, b = analyze_metrics([first, second])
    assert a.p_value == b.p_value == pytest.approx(1 / 32) and a.p_adjusted == pytest.approx(1 / 16)
    assert a.confidence == b.confidence == pytest.approx(1 - 2 * 0.025)  # both at the stopping step's level
    assert a.ci_high >= 0 and b.ci_high >= 0


# ---------------------------------------------------------------- an improvement reads as an improvement


OOD_BASE = np.r_[np.ones(10), np.zeros(2)]  # 12 out-of-domain cases: base refuses 10, head all 12
OOD_HEAD = np.ones(12)


def test_out_of_domain_improvement_is_better_and_passes_strict():
    (res,) = analyze_metrics([metric("refusal", "binary", OOD_BASE, OOD_HEAD)], strict=True)
    assert res.delta == pytest.approx(2 / 12) and res.status == "pass"
    assert res.reason.startswith("better, not significant")
    assert res.ci_high == pytest.approx(2 / 12) and res.ci_low < 0  # Clopper–Pearson on 2 of 2 improved
    assert (res.n_worse, res.n_tied, res.n_better) == (0, 10, 2)
    assert gate_decision([res], strict=True).verdict == "pass"


def test_worse_within_noise_is_still_inconclusive_and_strict_fails_it():
    (res,) = analyze_metrics([metric("refusal", "binary", OOD_HEAD, OOD_BASE)])
    assert res.status == "inconclusive" and res.reason.startswith("fell beyond the margin")
    (strict,) = analyze_metrics([metric("refusal", "binary", OOD_HEAD, OOD_BASE)], strict=True)
    assert strict.status == "fail"


def test_an_unchanged_metric_on_few_cases_passes_even_strict_though_its_interval_is_wide():
    """Three graded cases, identical on both sides: the sign-flip interval cannot exclude anything (its smallest p is
    2/8), yet no case got worse, so it is no regression: pass, also under strict (inconclusive = worse only)."""
    scores = [0.2, 0.5, 0.9]
    (res,) = analyze_metrics([metric("mrr", "graded", scores, scores)], strict=True)
    assert res.ci_low <= -0.03  # the interval alone would not show non-inferiority
    assert res.status == "pass" and res.reason == "no paired case got worse (3 of 3 unchanged)"
    one_worse = [0.2, 0.5, 0.8]
    (worse,) = analyze_metrics([metric("mrr", "graded", scores, one_worse)], strict=True)
    assert worse.status == "fail" and worse.reason.startswith("strict mode")  # one case worse: strict blocks
    mixed = analyze_metrics(
        [metric("mrr", "graded", scores, scores), metric("hit", "binary", np.zeros(40), np.ones(40))], strict=True
    )
    assert gate_decision(mixed).reasons == (
        "all 2 gated metric(s) pass: 1 non-inferior within their margins or better, 1 with no paired case worse",
    )
    assert gate_decision(mixed[1:]).reasons == ("all 1 gated metric(s) non-inferior within their margins or better",)


def test_one_paired_case_passes_when_it_did_not_get_worse_and_is_inconclusive_when_it_did():
    """The rule above holds down to one paired case; a single worse case stays inconclusive (no test on one pair)."""
    (same,) = analyze_metrics([metric("hit", "binary", [1.0], [1.0])], strict=True)
    assert same.status == "pass" and same.reason == "no paired case got worse (the only paired case is unchanged)"
    (better,) = analyze_metrics([metric("hit", "binary", [0.0], [1.0])])
    assert better.status == "pass" and better.reason.endswith("(the only paired case got better)")
    (worse,) = analyze_metrics([metric("hit", "binary", [1.0], [0.0])])
    assert worse.status == "inconclusive" and worse.reason == "only 1 paired case(s)"


def test_win_tie_loss_counts_match_a_hand_count():
    base = np.array([[1, 1, 1], [0, 0, 0], [1, 0, 1], [1, 1, 1], [0, 1, 0], [1, 1, 0]], dtype=float)
    head = np.array([[1, 1, 1], [1, 0, 0], [1, 0, 0], [0, 0, 0], [1, 0, 0], [1, 0, 1]], dtype=float)
    # case means base 1, 0, 2/3, 1, 1/3, 2/3 → head 1, 1/3, 1/3, 0, 1/3, 2/3: ties 0, 4, 5; better 1; worse 2, 3
    (res,) = analyze_metrics([metric("hit", "binary", base, head)])
    assert (res.n_worse, res.n_tied, res.n_better) == (2, 3, 1)
    (lower,) = analyze_metrics([metric("err", "binary", base, head, direction="lower")])
    assert (lower.n_worse, lower.n_tied, lower.n_better) == (1, 3, 2)  # oriented: more errors is worse


def test_compare_strict_passes_an_out_of_domain_improvement_end_to_end(tmp_path):
    from click.testing import CliRunner

    from gate.cli import main

    golden = [
        {"id": f"in{i}", "question": f"Where is city {i}?", "expected_doc_ids": [f"d{i}"], "reference_answers": ["x"]}
        for i in range(8)
    ]
    golden += [
        {"id": f"ood{i}", "question": f"o {i}?", "expected_doc_ids": [], "out_of_domain": True} for i in range(12)
    ]
    write_jsonl(tmp_path / "golden.jsonl", golden)

    def preds(refused: int) -> list[dict]:
        fact = "City {} is in the valley of the river Rhine near Basel."
        rows = [
            {"id": f"in{i}", "answer": fact.format(i), "retrieved": [{"id": f"d{i}", "text": fact.format(i)}]}
            for i in range(8)
        ]
        rows += [
            {"id": f"ood{i}", "answer": "I don't have that information.", "refused": True}
            if i < refused
            else {"id": f"ood{i}", "answer": "Surely it is 42."}
            for i in range(12)
        ]
        return rows

    write_jsonl(tmp_path / "base.jsonl", preds(10))
    write_jsonl(tmp_path / "head.jsonl", preds(12))
    args = ["compare", "--golden", str(tmp_path / "golden.jsonl"), "--strict"]
    result = CliRunner().invoke(main, [*args, str(tmp_path / "base.jsonl"), str(tmp_path / "head.jsonl"), "--out",
                                       str(tmp_path / "out")])  # fmt: skip
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    refusal = next(m for m in report["metrics"] if m["name"] == "refusal")
    assert result.exit_code == 0, result.output
    assert report["verdict"] == "pass" and refusal["status"] == "pass" and refusal["gated"]
    assert (refusal["n_worse"], refusal["n_tied"], refusal["n_better"]) == (0, 10, 2)
    assert "Clopper" in refusal["ci_method"] and "McNemar" in refusal["test_method"]
    assert {c["id"] for c in report["improved_cases"]} == {"ood10", "ood11"}
    comment = (tmp_path / "out" / "comment.md").read_text()
    row = next(line for line in comment.splitlines() if line.startswith("| Refusal"))
    assert row.endswith("| 0 / 10 / 2 | ✅ better, not significant |") and "⚠️" not in row
