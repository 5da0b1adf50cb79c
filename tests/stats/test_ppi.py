"""Prediction-powered inference (gate.stats.ppi) against the authors' package ppi-python (``ppi_py``)."""

import math

import numpy as np
import ppi_py
import pytest
from statsmodels.stats.proportion import proportion_confint

from gate.stats.ppi import classical_mean, difference, judge_mean, ppi_mean


def _inputs(seed: int, n: int, big_n: int, bias: float = 0.2):
    """Binary labels, a judge that errs on ``bias`` of them, and the judge's calls on ``big_n`` more items."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(float)
    f = np.where(rng.random(n) < bias, 1 - y, y)
    f_unlabelled = (rng.random(big_n) < 0.4).astype(float)
    return y, f, f_unlabelled, rng.uniform(0.5, 4.0, n)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.4])
@pytest.mark.parametrize("weighted", [False, True])
def test_ppi_mean_equals_ppi_python(seed, lam, weighted):
    y, f, f_u, w = _inputs(seed, n=20 + 5 * seed, big_n=200 + 50 * seed)
    w = w if weighted else None
    ours = ppi_mean(y, f, f_u, lam=lam, weights=w, alpha=0.05)
    low, high = ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05, lam=lam, w=w)
    point = ppi_py.ppi_mean_pointestimate(y, f, f_u, lam=lam, w=w)
    assert ours.estimate == pytest.approx(float(np.ravel(point)[0]), abs=1e-12)
    assert (ours.low, ours.high) == pytest.approx((low[0], high[0]), abs=1e-12)
    assert 0 <= ours.lam <= 1 and (lam is None or ours.lam == lam)


def test_fixed_inputs_give_the_hand_computed_ppi():
    """n = 4 labels, N = 4 judge calls, λ = 1: θ̂ = 0.5 + mean(Y − f) = 0.5 + (0 + 0 + 1 + 0)/4 = 0.75."""
    y, f, f_u = [1, 0, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0]
    ours = ppi_mean(y, f, f_u, lam=1.0)
    se = math.sqrt(0.25 / 4 + np.var([0, 0, 1, 0]) / 4)  # Var_N(f) = 0.25, Var_n(Y − f) = 0.1875
    assert (ours.estimate, ours.se) == pytest.approx((0.75, se))
    assert ours.high - ours.estimate == pytest.approx(1.959963984540054 * se)


def test_labels_alone_and_the_judge_alone():
    y, f, f_u, w = _inputs(3, 30, 300)
    for weights in (None, w):
        ours = classical_mean(y, weights=weights)
        low, high = ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05, lam=0, w=weights)
        assert (ours.low, ours.high) == pytest.approx((low[0], high[0]), abs=1e-12)
    judge = judge_mean(f_u)
    assert judge.estimate == pytest.approx(f_u.mean()) and judge.se == pytest.approx(f_u.std() / math.sqrt(300))


@pytest.mark.parametrize(("flagged", "n"), [(0, 50), (2, 100), (1, 7), (7, 7), (150, 300)])
def test_the_judges_share_has_wilsons_interval_inside_0_1(flagged, n):
    """The judge's calls are 0/1: its share's interval is Wilson's (statsmodels as the oracle), never below 0 or
    above 1 — the normal interval of 2 flagged in 100 went to −0.007."""
    calls = np.r_[np.ones(flagged), np.zeros(n - flagged)]
    ours = judge_mean(calls, alpha=0.05)
    low, high = proportion_confint(flagged, n, alpha=0.05, method="wilson")
    assert (ours.low, ours.high) == pytest.approx((low, high), abs=1e-12)
    assert 0.0 <= ours.low <= ours.estimate <= ours.high <= 1.0 and ours.low < ours.high
    normal_low = flagged / n - 1.959963984540054 * math.sqrt(flagged / n * (1 - flagged / n) / n)
    if (flagged, n) == (2, 100):
        assert normal_low < 0 < ours.low


def test_a_share_of_graded_scores_keeps_the_normal_interval():
    scores = np.array([0.2, 0.5, 0.9, 0.4])
    ours = judge_mean(scores, alpha=0.05)
    assert ours.high - ours.estimate == pytest.approx(1.959963984540054 * scores.std() / 2)


def test_power_tuning_never_loses_much_to_the_labels_alone():
    """A judge unrelated to the labels: λ → 0 and the interval is about the labels' own."""
    rng = np.random.default_rng(7)
    y = (rng.random(40) < 0.3).astype(float)
    noise = (rng.random(40) < 0.5).astype(float)
    ours = ppi_mean(y, noise, (rng.random(400) < 0.5).astype(float))
    labels = classical_mean(y)
    assert ours.lam < 0.3 and ours.se < 1.1 * labels.se


def test_the_difference_of_two_independent_sides():
    base = ppi_mean(*_inputs(1, 25, 250)[:3])
    head = ppi_mean(*_inputs(2, 25, 250)[:3])
    d = difference(base, head)
    assert d.estimate == pytest.approx(head.estimate - base.estimate)
    assert d.se == pytest.approx(math.hypot(base.se, head.se))
    assert (d.high - d.low) / 2 == pytest.approx(1.959963984540054 * d.se)


def test_a_judge_whose_calls_do_not_vary_leaves_the_labels_alone():
    """ppi_py's λ is 0/0 (NaN) there; ours is 0, so the estimate is the labels' mean."""
    ours = ppi_mean([1, 0, 0, 0], [0, 0, 0, 0], [0] * 50)
    assert ours.lam == 0 and ours.estimate == 0.25


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="same length"):
        ppi_mean([1, 0], [1], [0, 1])
    with pytest.raises(ValueError, match="weights must be 2 positive"):
        ppi_mean([1, 0], [1, 0], [0, 1], weights=[1, 0])
    with pytest.raises(ValueError, match="alpha"):
        ppi_mean([1, 0], [1, 0], [0, 1], alpha=1.5)
    empty = ppi_mean([], [], [0, 1])
    assert math.isnan(empty.estimate) and empty.n == 0
