"""Tests of gate.stats.sequential: the betting sequences against confseq's values, and the stopping behaviour.

The oracle values in tests/oracles/sequential_confseq.json were made with confseq 0.0.11 (Waudby-Smith & Ramdas'
own implementation) by tests/oracles/make_sequential_confseq.py; confseq ships only a source distribution that
needs Boost and numpy < 2, so it is not a test dependency.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from gate.stats.sequential import (
    AlphaSplit,
    batch_ends,
    confidence_bounds,
    log_capital,
    log_mixed_capital,
    log_ratio_differences,
    look,
    predictable_bets,
    split_alpha,
    stopping_point,
    symmetric_log_evidence,
    to_unit,
)

ORACLE = json.loads((Path(__file__).parents[1] / "oracles" / "sequential_confseq.json").read_text(encoding="utf-8"))
CASES = sorted(ORACLE["cases"])
HORIZONS = (("horizon", None), ("n100", 100))


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize(("key", "target"), HORIZONS)
def test_bets_match_confseq(name: str, key: str, target: int | None) -> None:
    case = ORACLE["cases"][name]
    bets = predictable_bets(to_unit(np.array(case["d"])), ORACLE["alpha"], target)
    np.testing.assert_allclose(bets, case[f"bets_{key}"], rtol=1e-12)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize(("key", "target"), HORIZONS)
@pytest.mark.parametrize("m", [0.5, 0.485, 0.3])
@pytest.mark.parametrize("side", ["above", "below"])
def test_capital_matches_confseq(name: str, key: str, target: int | None, m: float, side: str) -> None:
    case = ORACLE["cases"][name]
    x = to_unit(np.array(case["d"]))
    capital = np.exp(log_capital(x, m, predictable_bets(x, ORACLE["alpha"], target), side, 0.5))  # type: ignore[arg-type]
    np.testing.assert_allclose(capital, case[f"capital_{side}_{key}_{m}"], rtol=1e-10)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize(("key", "target"), HORIZONS)
def test_bounds_match_confseq_grid(name: str, key: str, target: int | None) -> None:
    """confseq's grid bounds are conservative by at most 2 grid steps on [0, 1] (4/breaks on the Δ scale)."""
    case = ORACLE["cases"][name]
    d = np.array(case["d"])
    step = 2.0 / ORACLE["breaks"]
    for t in (1, 5, 10, 20, len(d) // 2, len(d)):
        low, high = confidence_bounds(d[:t], ORACLE["alpha"], target, truncations=(0.5,))
        oracle_low, oracle_high = case[f"lower_{key}"][t - 1], case[f"upper_{key}"][t - 1]
        assert oracle_low - 1e-9 <= low <= oracle_low + 2 * step, (t, low, oracle_low)
        assert oracle_high - 2 * step <= high <= oracle_high + 1e-9, (t, high, oracle_high)


def test_first_steps_by_hand() -> None:
    """Two observations d = (−1, −1), α = 0.05, no horizon: the paper's formulas written out."""
    x = np.array([0.0, 0.0])
    log20 = math.log(20)
    lam1 = math.sqrt(2 * log20 / (1 * math.log(2) * 0.25))
    mu1 = (0.5 + 0) / 2
    sigma2_1 = (0.25 + (0 - mu1) ** 2) / 2
    lam2 = math.sqrt(2 * log20 / (2 * math.log(3) * sigma2_1))
    np.testing.assert_allclose(predictable_bets(x, 0.05), [lam1, lam2], rtol=1e-14)
    # below, m = 1/2: λ ≤ c/(1 − m) = 1 binds for both (λ1 ≈ 4.18, λ2 ≈ 3.1): K = (1 + 1/2)² = 2.25
    np.testing.assert_allclose(np.exp(log_capital(x, 0.5, predictable_bets(x, 0.05), "below", 0.5)), [1.5, 2.25])


def test_symmetric_evidence_by_hand() -> None:
    """d = (−0.5, 0.25), α = 0.05, no horizon: log E_t = Σ λ_i s_i − λ_i² s_i²/2, s = −d, from the formulas."""
    log20 = math.log(20)
    lam1 = math.sqrt(2 * log20 / (1 * math.log(2) * 0.25))
    v1 = (0.25 + 0.25) / 2
    lam2 = math.sqrt(2 * log20 / (2 * math.log(3) * v1))
    first = lam1 * 0.5 - lam1**2 * 0.25 / 2
    second = first + lam2 * -0.25 - lam2**2 * 0.0625 / 2
    np.testing.assert_allclose(symmetric_log_evidence(np.array([-0.5, 0.25]), 0.05), [first, second], rtol=1e-14)
    # with a horizon n* = 50 the bets are sqrt(2·log(1/α)/(50·v̂))
    lam = [math.sqrt(2 * log20 / (50 * 0.25)), math.sqrt(2 * log20 / (50 * v1))]
    expected = np.cumsum([lam[0] * 0.5 - lam[0] ** 2 * 0.125, -lam[1] * 0.25 - lam[1] ** 2 * 0.03125])
    np.testing.assert_allclose(symmetric_log_evidence(np.array([-0.5, 0.25]), 0.05, 50), expected, rtol=1e-14)


@pytest.mark.parametrize("spread", [0.02, 0.3])
def test_symmetric_evidence_keeps_ville_bound(spread: float) -> None:
    """Symmetric graded-like differences, small and large spread: crossing 1/α in at most α of 2,000 runs."""
    rng = np.random.default_rng(17)
    d = np.clip(rng.normal(0, spread, (2000, 300)), -1, 1)
    crossed = sum(np.max(symmetric_log_evidence(row, 0.05, 300)) >= math.log(20) for row in d)
    assert crossed / 2000 <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 2000)


def test_mixed_capital_is_the_average_of_the_truncated_processes() -> None:
    """(K(c=1/2) + K(c=0.9))/2 from the products written out: λ = min(bet, c/m) above, min(bet, c/(1 − m)) below."""
    x = to_unit(np.array([0.2, -0.1, 0.0, 0.4, -0.3, 0.1]))
    bets = predictable_bets(x, 0.05, 10)
    for m, side in ((0.45, "above"), (0.55, "below")):
        caps = []
        for c in (0.5, 0.9):
            if side == "above":
                caps.append(np.cumprod(1 + np.minimum(bets, c / m) * (x - m)))
            else:
                caps.append(np.cumprod(1 - np.minimum(bets, c / (1 - m)) * (x - m)))
        mixed = log_mixed_capital(x, m, bets, side, (0.5, 0.9))  # type: ignore[arg-type]
        np.testing.assert_allclose(np.exp(mixed), (caps[0] + caps[1]) / 2, rtol=1e-12)


def test_capital_is_monotone_in_the_null() -> None:
    rng = np.random.default_rng(3)
    x = to_unit(np.clip(rng.normal(-0.1, 0.3, 80), -1, 1))
    bets = predictable_bets(x, 0.01, 80)
    grid = np.linspace(0.01, 0.99, 99)
    above = np.array([log_capital(x, m, bets, "above")[-1] for m in grid])
    below = np.array([log_capital(x, m, bets, "below")[-1] for m in grid])
    assert np.all(np.diff(above) <= 1e-12) and np.all(np.diff(below) >= -1e-12)


def test_ville_bound_holds_under_the_null() -> None:
    """A/A (symmetric differences): the 'worse' capital crosses 1/α in at most α of 2,000 sequences of 200."""
    rng = np.random.default_rng(11)
    crossed = 0
    for _ in range(2000):
        d = (rng.random(200) < 0.6).astype(float) - (rng.random(200) < 0.6).astype(float)
        crossed += look(d, 0.0, 0.05, target_n=200).log_evidence_worse >= math.log(20)
    assert crossed / 2000 <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 2000)


def test_split_alpha() -> None:
    assert split_alpha(0.05, 2, 0.2) == AlphaSplit(sequential=pytest.approx(0.005), final=pytest.approx(0.04))
    assert split_alpha(0.05, 7) == AlphaSplit(sequential=pytest.approx(0.1 * 0.05 / 7), final=pytest.approx(0.045))
    assert split_alpha(0.05, 7).early_pass == 0.05 == split_alpha(0.01, 1, 0.5, early_pass=0.05).early_pass
    with pytest.raises(ValueError, match="early_pass"):
        split_alpha(0.05, 1, early_pass=0.5)
    with pytest.raises(ValueError, match="n_metrics"):
        split_alpha(0.05, 0)


def test_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        to_unit(np.array([0.5, 1.5]))
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        look(np.array([np.nan]), 0.03, 0.05)
    with pytest.raises(ValueError, match="margin"):
        look(np.array([0.0]), 1.0, 0.05)
    with pytest.raises(ValueError, match="first"):
        batch_ends(10, 0, 5)


def test_log_ratios_are_clipped_and_scaled() -> None:
    d, clipped = log_ratio_differences(np.array([0.0, math.log(2), -math.log(8), math.log(4)]), bound=math.log(4))
    np.testing.assert_allclose(d, [0.0, 0.5, -1.0, 1.0])
    assert clipped == 1


def test_batch_ends() -> None:
    np.testing.assert_array_equal(batch_ends(95, 20, 25), [20, 45, 70, 95])
    np.testing.assert_array_equal(batch_ends(10, 20, 5), [10])
    assert batch_ends(0, 1, 1).size == 0


def _binary_pr(rng: np.random.Generator, n: int, drop: float) -> np.ndarray:
    x = rng.beta(2, 1, n)
    return (rng.random(n) < np.clip(x - drop, 0, 1)).astype(float) - (rng.random(n) < x).astype(float)


def test_clear_regression_stops_early_with_fail() -> None:
    d = _binary_pr(np.random.default_rng(5), 1000, 0.2)
    stop = stopping_point([d], [0.03], 0.01, batch_ends(1000, 100, 100), target_n=1000)
    assert stop.decisions == ("fail",) and stop.n <= 300 and not stop.exhausted
    first = look(d[: stop.n], 0.03, 0.01, target_n=1000)
    assert first.decision == "fail" and first.estimate <= -0.03
    assert confidence_bounds(d[: stop.n], 0.01, 1000)[1] < 0


def test_no_change_stops_early_non_inferior() -> None:
    """A deterministic pipeline changed on 4 % of cases, symmetrically: non-inferior to a 0.05 drop well before N."""
    rng = np.random.default_rng(8)
    d = np.where(rng.random(1000) < 0.04, rng.choice([-1.0, 1.0], 1000), 0.0)
    stop = stopping_point([d], [0.05], 0.01, batch_ends(1000, 100, 100), target_n=1000)
    assert stop.decisions == ("non_inferior",) and stop.n <= 400
    assert confidence_bounds(d[: stop.n], 0.01, 1000)[0] > -0.05


def test_near_margin_drop_runs_to_the_end() -> None:
    """A drop of about the margin is neither shown beyond it nor ruled out: the sequence is exhausted."""
    d = _binary_pr(np.random.default_rng(13), 400, 0.05)
    stop = stopping_point([d], [0.05], 0.01, batch_ends(400, 40, 40), target_n=400)
    assert stop.exhausted and stop.decisions == ("continue",) and stop.n == 400
    assert look(d, 0.05, 0.01, target_n=400).decision == "continue"


def test_run_stops_when_every_metric_is_decided_or_at_a_fail() -> None:
    rng = np.random.default_rng(21)
    unchanged = np.where(rng.random(600) < 0.04, rng.choice([-1.0, 1.0], 600), 0.0)
    regressed = _binary_pr(rng, 600, 0.25)
    ends = batch_ends(600, 60, 60)
    alone = stopping_point([unchanged], [0.05], 0.01, ends, 600)
    both = stopping_point([unchanged, regressed], [0.05, 0.03], 0.01, ends, 600)
    assert both.decisions[1] == "fail" and both.n <= alone.n
    near = _binary_pr(rng, 600, 0.03)
    mixed = stopping_point([unchanged, near], [0.05, 0.05], 0.01, ends, 600)
    assert mixed.exhausted and mixed.decisions[0] == "non_inferior" and mixed.decisions[1] == "continue"


def test_same_seed_same_stop() -> None:
    runs = []
    for _ in range(2):
        rng = np.random.default_rng(42)
        d = _binary_pr(rng, 500, 0.1)[rng.permutation(500)]
        runs.append(stopping_point([d], [0.03], 0.01, batch_ends(500, 50, 50), 500))
    assert runs[0] == runs[1]
    assert look(np.array([]), 0.03, 0.05).decision == "continue"
