"""The non-inferiority look at m_eff = max(m, MDE_N) (issue 33: a margin-0 metric may stop early).

Oracles: the fixed design's MDE of the exact-McNemar "broken cases" model from scipy's binomial (solved with
brentq), and the zero-difference capital in closed form: with every d_i = 0 each x_i = 1/2, the plug-in mean stays
1/2 and σ̂²_{i−1} = (1/4)/i, so λ_i = sqrt(8·i·log(1/α)/n*), and each factor of the truncated capital at the null
(1 − m)/2 is 1 + min(λ_i, 2c/(1 − m))·m/2; the look decides when log((1/k)·Σ_c Π_i factor) ≥ log(1/α).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from gate.stats.detectable import design_mde, first_step_levels
from gate.stats.inputs import MetricInput
from gate.stats.sequential import TRUNCATIONS, batch_ends, look, split_alpha, stopping_point


def error_rate(base: np.ndarray, head: np.ndarray) -> MetricInput:
    """A gated error rate (binary, lower is better, margin 0) over one run per side."""
    no = np.zeros((base.size, 1), dtype=bool)
    return MetricInput("error_rate", "binary", "lower", 0.0, True, base[:, None], head[:, None], no, no)


def broken_cases_mde(n: int, level: float) -> float:
    """The smallest δ with P(Bin(n, δ) ≥ b*) = 0.8, b* the fewest broken cases exact McNemar rejects at ``level``."""
    b = next(b for b in range(1, 100) if 0.5**b <= level)
    return optimize.brentq(lambda p: stats.binom.sf(b - 1, n, p) - 0.8, 1e-9, 0.5, xtol=1e-12)


def zero_difference_look(m: float, alpha: float, n_star: int, ends: np.ndarray) -> int | None:
    """The first look end at which the closed-form capital of an all-zero sequence reaches 1/α (None: never)."""
    i = np.arange(1, int(ends[-1]) + 1)
    lam = np.sqrt(8.0 * i * math.log(1 / alpha) / n_star)
    per_c = [np.cumsum(np.log1p(np.minimum(lam, 2 * c / (1 - m)) * m / 2)) for c in TRUNCATIONS]
    log_k = np.log(np.mean(np.exp(per_c), axis=0))
    hit = [int(e) for e in ends if log_k[int(e) - 1] >= math.log(1 / alpha)]
    return hit[0] if hit else None


@pytest.mark.parametrize("n", [200, 1000])
def test_an_unchanged_margin_0_metric_is_non_inferior_at_the_look_the_closed_form_predicts(n):
    level = first_step_levels(np.array([0.01]), np.array([True]), np.array([False]))[0]  # α_k of margin 0, M = 1
    assert level == 0.01
    zeros = np.zeros(n // 10)  # the first batch: nothing discordant, the broken-cases model
    mde = design_mde(error_rate(zeros, zeros), level=level, n=n)
    expected_mde = broken_cases_mde(n, 0.01)
    assert mde == pytest.approx(expected_mde, abs=2e-4)
    split = split_alpha(0.05, 1)
    alpha, beta = split.sequential, split.early_pass  # the fail look's level and the pass look's
    assert beta == 0.05
    ends = batch_ends(n, n // 10, n // 10)
    at = zero_difference_look(expected_mde, beta, n // 2, ends)
    assert at == 4 * n // 10  # log(1/β)/(0.9·MDE_N) ≈ 0.39 N, at the look after it
    assert zero_difference_look(expected_mde, beta, n // 2, ends) == zero_difference_look(mde, beta, n // 2, ends)
    assert zero_difference_look(expected_mde, alpha, n // 2, ends) == 7 * n // 10  # at α_seq = 0.005: later
    rule_out = [np.full(ends.size, mde)]
    stop = stopping_point([np.zeros(n)], [0.0], alpha, ends, target_n=n // 2, rule_out=rule_out, early_pass=beta)
    assert stop.decisions == ("non_inferior",) and stop.n == at and not stop.exhausted
    seen = look(np.zeros(at), 0.0, alpha, early_pass=beta, target_n=n // 2, rule_out=mde)
    assert seen.decision == "non_inferior" and seen.ruled_out == mde
    assert seen.pass_threshold == pytest.approx(math.log(1 / beta)) and seen.threshold == pytest.approx(math.log(200))
    before = look(np.zeros(at - n // 10), 0.0, alpha, early_pass=beta, target_n=n // 2, rule_out=mde)
    assert before.decision == "continue"
    # without the MDE (the margin alone) a margin of 0 is never ruled out
    assert stopping_point([np.zeros(n)], [0.0], alpha, ends, target_n=n // 2, early_pass=beta).exhausted


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_drop_of_the_mde_is_not_decided_non_inferior(seed):
    """Head errs on a share MDE of the cases the base answers (seeded): never ruled out at the look's own m_eff."""
    n = 1000
    mde = broken_cases_mde(n, 0.01)
    rng = np.random.default_rng(seed)
    base = np.zeros(n)
    head = (rng.random(n) < mde).astype(float)
    ends = batch_ends(n, n // 10, n // 10)
    rule_out = np.array([design_mde(error_rate(base[:e], head[:e]), level=0.01, n=n) for e in ends])
    assert np.all(rule_out >= mde - 2e-4)  # discordance seen: the model's MDE is no smaller than the A/A one
    d = base - head  # oriented: an error on head is worse
    split = split_alpha(0.05, 1)
    alpha, beta = split.sequential, split.early_pass
    stop = stopping_point([d], [0.0], alpha, ends, target_n=n // 2, rule_out=[rule_out], early_pass=beta)
    assert stop.decisions[0] != "non_inferior"
    assert all(look(d[:e], 0.0, alpha, early_pass=beta, target_n=n // 2, rule_out=r).decision != "non_inferior"
               for e, r in zip(ends, rule_out, strict=True))  # fmt: skip


def test_the_capital_at_m_eff_is_dominated_by_the_capital_at_any_larger_drop():
    """The validity argument: log K_s((1 − m')/2) ≤ log K_s((1 − δ)/2) for m' ≤ δ at every s, so crossing at m'
    implies crossing at the true drop δ (Ville bounds that by α whatever chose m')."""
    from gate.stats.sequential import log_mixed_capital, predictable_bets, to_unit

    rng = np.random.default_rng(4)
    d = np.where(rng.random(500) < 0.1, rng.choice([-1.0, 1.0], 500), 0.0)
    x = to_unit(d)
    bets = predictable_bets(x, 0.01, 250)
    caps = [log_mixed_capital(x, (1 - m) / 2, bets, "above") for m in (0.0, 0.01, 0.03, 0.05, 0.1)]
    assert all(np.all(a <= b + 1e-12) for a, b in zip(caps[:-1], caps[1:], strict=True))
    assert caps[-1][-1] > caps[0][-1]
