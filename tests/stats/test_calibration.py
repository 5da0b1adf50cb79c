"""Calibration by simulation (reduced CI version of benchmarks/calibration.py, whose simulation is
tests/calibration_sim.py; < 60 s on one core).

Fixed seeds; every bound leaves ≥ 3 Monte Carlo standard errors to a correct implementation's expected rate.
"""

from __future__ import annotations

import calibration_sim as calibration
import numpy as np
import pytest

pytestmark = pytest.mark.slow
B = 200  # resamples inside simulations: enough for p-values near α/2 and for BCa at these N
AA_PRS = 500


@pytest.mark.parametrize(("n", "r"), [(50, 1), (50, 3), (300, 1), (300, 3)])
def test_aa_false_fail_rate_is_at_most_alpha(n, r):
    # margin ≈ 0 is the hardest case: the verdict rests on the tests alone (with a margin it can only fail less)
    rate = calibration.aa_fail_rate(n=n, r=r, prs=AA_PRS, margin=1e-9, seed=1000 + n + r, n_resamples=B)
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / AA_PRS)


@pytest.mark.parametrize("kind", ["binary", "graded"])
def test_drop_of_twice_the_margin_is_caught(kind):
    rate, _ = calibration.fail_rate(kind=kind, n=300, r=3, drop=0.06, margin=0.03, prs=150, seed=7, n_resamples=B)
    assert rate >= 0.80


def test_planted_case_regressions_are_listed_with_low_fdp():
    outcome = calibration.planted_cases(n=300, r=5, planted=5, runs=40, seed=11)
    assert outcome.all_found >= 0.80
    assert outcome.mean_fdp <= 0.10


def test_printed_mde_is_the_80_percent_power_effect_within_20_percent():
    _, printed = calibration.fail_rate(kind="graded", n=300, r=3, drop=0.0, margin=1e-9, prs=30, seed=3, n_resamples=B)
    below, _ = calibration.fail_rate(
        kind="graded", n=300, r=3, drop=0.8 * printed, margin=1e-9, prs=150, seed=4, n_resamples=B
    )
    above, _ = calibration.fail_rate(
        kind="graded", n=300, r=3, drop=1.2 * printed, margin=1e-9, prs=150, seed=5, n_resamples=B
    )
    assert below < 0.80 < above  # power is monotone in the drop, so δ80 ∈ (0.8·MDE, 1.2·MDE)


@pytest.mark.parametrize(("kind", "rubric"), [("binary", False), ("graded", False), ("graded", True)])
def test_per_case_aa_false_list_rate_holds_q_on_heterogeneous_cases(kind, rubric):
    # easy, hard and flaky cases (bimodal and tied scores for graded): ≤ q = 0.10 of A/A PRs list a case
    prs = 40
    hits = calibration.case_false_list_count(kind=kind, n=150, r=3, prs=prs, seed=77, rubric=rubric)
    assert hits / prs <= 0.10 + 3 * np.sqrt(0.10 * 0.90 / prs)


def test_smallest_flaggable_change_table():
    assert [calibration.smallest_flaggable_change("binary", r) for r in (2, 3, 5)] == [None, 1.0, 0.6]
    assert [calibration.smallest_flaggable_change("graded", r) for r in (2, 3)] == [None, 0.2]


@pytest.mark.parametrize(("n_ood", "r", "flaky"), [(12, 3, 0.0), (50, 3, 0.3), (50, 5, 0.3)])
def test_must_pass_aa_on_a_sampled_generator_stays_within_alpha(n_ood, r, flaky):
    """Out-of-domain must-pass cases refusing with probability U(0.9, 1), a share ``flaky`` of them U(0.5, 0.95), A/A:
    the exact test with Holm keeps the gate's fail rate ≤ α (50 cases, 30 % flaky, R = 3 failed 0.15 under the
    former rule, every all-repeat flip certain at R ≥ 3)."""
    prs = 100
    rate = calibration.must_pass_aa_rate(
        n_ood=n_ood, r=r, prs=prs, seed=6000 + n_ood + r, stable=(0.9, 1.0), flaky=flaky
    )
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / prs)
