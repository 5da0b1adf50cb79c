"""The power model behind the printed MDE and the "to settle it" advice, against independent oracles; the one-case
rule for margins smaller than one case; must-pass flips in the verdict."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import metric_input as metric
from scipy import stats

from gate.results import MustPassFailure
from gate.stats import analyze_metrics, gate_decision
from gate.stats.power import cases_needed, detectable_drop, detection_power, recommendation


def _sign_flip_rule_power(delta: float, n: int, sd: float, *, level: float, margin: float, draws: int = 4000) -> float:
    """Monte Carlo oracle: d_i ~ N(−δ, sd²); FAIL when the one-sided t-test (scipy) rejects at ``level`` and
    d̄ ≤ −m (the sign-flip test agrees with the t-test to a few 0.1 % at n = 100)."""
    rng = np.random.default_rng(0)
    d = rng.normal(-delta, sd, size=(draws, n))
    p = stats.ttest_1samp(d, 0.0, axis=1, alternative="less").pvalue
    return float(np.mean((p <= level) & (d.mean(axis=1) <= -margin)))


@pytest.mark.parametrize(("margin", "level"), [(0.0, 0.05), (0.03, 0.05), (0.03, 0.05 / 3), (0.08, 0.05)])
def test_graded_power_matches_a_simulation_of_the_rule(margin, level):
    n, sd = 100, 0.2
    for delta in (0.03, 0.06, 0.09):
        model = detection_power(delta, n, level=level, margin=margin, var0=sd * sd)
        assert model == pytest.approx(_sign_flip_rule_power(delta, n, sd, level=level, margin=margin), abs=0.025)


def _normal_rule_power(delta: float, n: int, sd: float, *, level: float, margin: float) -> float:
    """Hand oracle of the sign-flip rule's power (normal model, scipy.stats.norm): FAIL iff d̄ ≥ z·sd/√(n − z²) and
    d̄ ≥ m, with d̄ ~ N(δ, sd²/n)."""
    z = stats.norm.ppf(1 - level)
    threshold = max(z * sd / np.sqrt(n - z * z), margin)
    return float(stats.norm.cdf((delta - threshold) / (sd / np.sqrt(n))))


@pytest.mark.parametrize("omega2", [0.02, 0.05, 0.2])
def test_the_recommendation_uses_the_mde_power_rule(omega2):
    """Graded, N = 100, R = 1, σ_A² = σ_B² = 0.05, margin 0.03: the advice is for a drop of 2m = 0.06 — the smallest R
    per side (per-case variance ω² + 0.1/R) or, when no R ≤ 20 does, the smallest N at which the rule catches it
    with 80 % power, both from the oracle. ω² = 0.02: R = 3 (power 0.73 at R = 2, 0.82 at R = 3)."""
    split = (omega2, 0.05, 0.05)
    model = {"var0": omega2 + 0.1, "kappa": 0.0, "mcnemar": False}
    text = recommendation(100, 0.06, level=0.05, margin=0.03, model=model, split=split, repeats=1, target_label="0.060")

    def power(n: int, r: int) -> float:
        return _normal_rule_power(0.06, n, np.sqrt(omega2 + 0.1 / r), level=0.05, margin=0.03)

    r = next((r for r in range(2, 21) if power(100, r) >= 0.8), None)
    if r is not None:
        assert text == f"use R = {r} to detect drops of 0.060"
    else:
        n = next(n for n in range(3, 10_000) if power(n, 1) >= 0.8)
        assert text == f"grow the golden set to N = {n} (at R = 1) to detect drops of 0.060"
    assert {0.02: "use R = 3", 0.05: "use R = 14", 0.2: "grow the golden set to N = 518"}[omega2] in text
    big = recommendation(600, 0.06, level=0.05, margin=0.03, model=model, split=split, repeats=1, target_label="0.060")
    assert (big is None) == (power(600, 1) >= 0.8)


def test_a_metric_row_recommends_iff_its_printed_mde_exceeds_twice_the_margin():
    """One rule: the run details' recommendation is empty exactly when the printed MDE is at most 2m."""
    rng = np.random.default_rng(3)
    rows = []
    for n, noise, r in ((20, 0.5, 3), (400, 0.05, 3), (15, 0.5, 1)):
        base = np.clip(rng.normal(0.7, 0.1, size=(n, r)), 0, 1)
        head = np.clip(base + rng.normal(0, noise, size=(n, r)), 0, 1)
        (row,) = analyze_metrics([metric("faithfulness", "graded", base, head, margin=0.05)])
        rows.append(row)
        assert (row.recommendation is None) == (row.mde <= 0.10), (row.mde, row.recommendation)
    assert rows[0].recommendation.startswith("use R = ") and rows[1].recommendation is None
    assert rows[2].recommendation.startswith("grow the golden set to N = ")  # one run per side: σ² unknown, only N


def test_mde_is_where_the_power_reaches_80_percent_and_exceeds_the_margin():
    mde = detectable_drop(100, level=0.05, margin=0.08, var0=0.04)
    assert detection_power(mde, 100, level=0.05, margin=0.08, var0=0.04) == pytest.approx(0.80, abs=1e-3)
    assert mde > 0.08  # a drop of exactly the margin is caught at most half the time
    # the old formula (z_{1-α} + z_{0.8})·SE ignored the margin: 0.050 here, caught with power < 0.10
    assert detection_power(2.486 * 0.02, 100, level=0.05, margin=0.08, var0=0.04) < 0.10


def test_mcnemar_power_against_a_direct_simulation():
    """A diffuse drop breaks cases (head fails where the base may have passed); exact power vs simulated McNemar."""
    n, delta, p_base, pi0 = 80, 0.15, 0.7, 0.1
    model = detection_power(delta, n, level=0.05, margin=0.03, var0=2 * pi0, mcnemar=True, base_rate=p_base)
    rng = np.random.default_rng(1)
    better = pi0 * (1 - delta / p_base)
    cells = rng.multinomial(n, [better + delta, better, 1 - 2 * better - delta], size=4000)
    worse, improved = cells[:, 0], cells[:, 1]
    p = stats.binom.sf(worse - 1, worse + improved, 0.5)
    simulated = np.mean((p <= 0.05) & (worse - improved >= 0.03 * n))
    assert model == pytest.approx(simulated, abs=0.025)


def test_cases_needed_reaches_the_power_and_one_fewer_does_not():
    need = cases_needed(0.1, level=0.05, margin=0.03, var0=0.04)
    assert detection_power(0.1, need, level=0.05, margin=0.03, var0=0.04) >= 0.8
    assert detection_power(0.1, need - 1, level=0.05, margin=0.03, var0=0.04) < 0.8
    # ruling out: n = ((z_.95 + z_.8)·σ/(m − δ))² with σ² = 0.04, m − δ = 0.02 (618.3 → 619)
    oracle = int(np.ceil((stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) ** 2 * 0.04 / 0.02**2))
    assert cases_needed(0.01, level=0.05, margin=0.03, var0=0.04, rule_out=True) == oracle == 619
    assert cases_needed(0.03, level=0.05, margin=0.03, var0=0.04) is None  # a drop of the margin: never at 80 %


@pytest.mark.parametrize(("seed", "rule_out"), [(2, False), (8, True)])
def test_inconclusive_says_how_many_cases_would_settle_it(seed, rule_out):
    """Beyond the margin (seed 2, Δ̂ = −0.034): cases to show it; within (seed 8, Δ̂ = −0.024): to rule it out."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.4, 1.0, 40)
    head = base - 0.05 + rng.normal(0, 0.2, 40)
    (res,) = analyze_metrics([metric("faithfulness", "graded", base, head, margin=0.03)])
    assert res.status == "inconclusive"
    need = cases_needed(-res.delta, level=0.05, margin=0.03, var0=40 * res.se**2, rule_out=rule_out)
    what = "rule out a drop beyond the margin" if rule_out else "show a worsening of this size significantly"
    assert f"; to settle it: N ≈ {need} paired cases ({need - 40} more) would {what} with 80 % power" in res.reason
    assert "repeats" not in res.reason  # one run per side: repeats are not advised


def test_varying_repeats_are_advised_and_identical_ones_never():
    rng = np.random.default_rng(0)
    quality = rng.uniform(0.4, 1.0, 40)
    base = quality[:, None] + rng.normal(0, 0.3, (40, 3))
    head = quality[:, None] - 0.04 + rng.normal(0, 0.3, (40, 3))
    (res,) = analyze_metrics([metric("faithfulness", "graded", base, head, margin=0.03)])
    assert res.status == "inconclusive" and res.reason.endswith(", or R = 8 repeats per side at this N")

    def enough(r: int) -> bool:  # the same model, with the within-case variance divided by r instead of 3
        var = res.omega2 + (res.sigma2_base + res.sigma2_head) / r
        need = cases_needed(-res.delta, level=0.05, margin=0.03, var0=var)
        return need is not None and need <= 40

    assert enough(8) and not enough(7)
    same = np.repeat(base[:, :1], 3, axis=1)
    (fixed,) = analyze_metrics([metric("faithfulness", "graded", same, same - 0.02 * (rng.random((40, 1)) < 0.5))])
    assert "repeats" not in fixed.reason


def test_one_refused_answer_of_28_against_a_margin_below_one_case_passes():
    """The issue's PR: false_refusal 1/28 (0.036 > margin 0.03), the gated generation metric better: pass, not
    inconclusive. Two refused answers (0.071) stay inconclusive."""
    zeros = np.zeros(28)
    one, two = zeros.copy(), zeros.copy()
    one[0], two[:2] = 1, 1
    better = metric("faithfulness", "graded", np.full(28, 0.7), np.full(28, 0.7) + np.linspace(0, 0.2, 28))
    results = analyze_metrics([better, metric("false_refusal", "binary", zeros, one, direction="lower", margin=0.03)])
    assert [r.status for r in results] == ["pass", "pass"]
    assert results[1].reason.startswith("within one case: Δ = +0.036 is at most one case of 28")
    assert gate_decision(results).verdict == "pass"
    (two_cases,) = analyze_metrics([metric("false_refusal", "binary", zeros, two, direction="lower", margin=0.03)])
    assert two_cases.status == "inconclusive"


def _flip(certain: bool, case_id: str = "o1") -> MustPassFailure:
    return MustPassFailure(case_id, "Q?", 3, True, "answered instead of refusing", "A.", 3, 3, certain)


def test_a_certain_must_pass_flip_fails_first_and_a_doubtful_one_warns():
    (res,) = analyze_metrics([metric("hit_rate@5", "binary", np.ones(30), np.ones(30))])
    decision = gate_decision([res], must_pass=[_flip(True)], new_ood_failures=1)
    assert decision.verdict == "fail" and decision.reasons[0].startswith("1 must-pass case(s)")
    assert len(decision.reasons) == 1  # the new out-of-domain failure is that flip: not counted twice
    head = np.ones(12)
    head[0] = 0
    (refusal,) = analyze_metrics([metric("refusal", "binary", np.ones(12), head, margin=0.03)])  # p = ½
    doubtful = gate_decision([res, refusal], must_pass=[_flip(False)], new_ood_failures=1, refusal=refusal)
    assert doubtful.verdict != "fail" and len(doubtful.warnings) == 1 and "not blocking" in doubtful.warnings[0]


@pytest.mark.parametrize(("n", "level", "margin"), [(12, 0.05 / 3, 0.03), (46, 0.025, 0.03), (30, 0.05, 0.2),
                                                    (5000, 0.01, 0.03), (3, 0.05, 0.0)])  # fmt: skip
def test_mcnemar_power_without_discordance_is_the_binomial_tail(n, level, margin):
    """var0 = 0 (scipy-free path): every discordant case is broken, b ~ Bin(n, δ); FAIL iff 2^-b ≤ level and b ≥ m·n:
    scipy.stats.binom's upper tail from the larger bound; the general McNemar path with a vanishing var0 agrees."""
    b_star = next(b for b in range(1, 100) if 0.5**b <= level)
    first = max(b_star, int(np.ceil(margin * n - 1e-9)))
    for delta in (0.01, 0.1, 0.3, 0.6, 0.95):
        model = detection_power(delta, n, level=level, margin=margin, var0=0.0, mcnemar=True)
        assert model == pytest.approx(stats.binom.sf(first - 1, n, delta), abs=1e-9)
        general = detection_power(delta, n, level=level, margin=margin, var0=1e-12, mcnemar=True)
        assert model == pytest.approx(general, abs=1e-6)
