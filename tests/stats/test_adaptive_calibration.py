"""Adaptive evaluation by simulation (reduced CI version of benchmarks/adaptive_calibration.py, whose simulation is
tests/adaptive_sim.py; ~1 min on one core).

Fixed seeds; the A/A bound leaves 3 Monte Carlo standard errors to the design's α.
"""

from __future__ import annotations

import adaptive_sim as adaptive
import numpy as np
import pytest

pytestmark = pytest.mark.slow
B = 200
PRS = 300


@pytest.mark.parametrize(("kind", "r"), [("binary", 1), ("graded", 3)])
def test_aa_false_fail_rate_is_at_most_alpha(kind, r):
    out = adaptive.run(PRS, 1200 + r, n=200, r=r, kind=kind, drop=0.0, margin=1e-9, b=B, share=0.1, fixed=False)
    assert sum(o.adaptive == "fail" for o in out) / PRS <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / PRS)


def test_clear_regression_and_no_change_stop_by_half_with_the_fixed_verdict():
    """Binary, N = 1,000, R = 1, margin 2 × the printed MDE (0.09): Δ = −3m fails and Δ = 0 passes by half.

    Agreement with the fixed verdict ≥ 95 % (the issue's target), not 100 %: an early look may fail an A/A PR with
    probability ≤ α_seq = 0.005 where the fixed design, at this margin, almost never does.
    """
    m = 0.09
    for drop, verdict in ((3 * m, "fail"), (0.0, "pass")):
        out = adaptive.run(60, 7, n=1000, r=1, kind="binary", drop=drop, margin=m, b=B, share=0.1)
        assert np.median([o.share for o in out]) <= 0.5
        assert np.mean([o.adaptive == verdict == o.fixed for o in out]) >= 0.95


def test_margin_0_no_change_stops_at_the_closed_form_share_and_passes():
    """Binary, N = 200, R = 1, margin 0, identical answers (every d = 0): the look rules out the MDE at N (the
    broken-cases model) after 80 cases at β_seq = 0.05 (tests/stats/test_sequential_mde.py derives it in closed
    form); the fixed design passes too (no paired case got worse)."""
    out = adaptive.run(40, 5, n=200, r=1, kind="binary", drop=0.0, margin=0.0, b=B, share=0.1, deterministic=True)
    assert [o.share for o in out] == [0.4] * 40
    assert all(o.adaptive == o.fixed == "pass" for o in out)


def test_aa_false_fail_with_adaptive_repeats_is_at_most_alpha():
    """R = 3 with repeats skipped where repeat 0 is identical on both sides (the real gate.compare.repeats and Looks):
    a deterministic A/A pipeline (independent answers of equal quality) and a stochastic one."""
    from adaptive_repeats_sim import one_pr

    for stochastic in (False, True):
        rng = np.random.default_rng(31 + stochastic)
        out = [one_pr(rng, k, n=200, stochastic=stochastic) for k in range(60)]
        assert sum(o["status"] == "fail" for o in out) / 60 <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 60)
        assert all((o["varied"] is not None) == stochastic for o in out)  # the audit tells them apart
        if not stochastic:  # deterministic: cases identical at repeat 0 skipped repeats 1 and 2
            assert all(o["pairs"] < o["share"] for o in out)
