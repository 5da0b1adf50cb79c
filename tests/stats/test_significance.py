"""Property tests: gate.stats p-values and corrections against scipy/statsmodels on random inputs (bounded)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import scipy_rng
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from gate.stats import (
    benjamini_hochberg,
    clustered_se,
    holm,
    mcnemar_exact,
    paired_se,
    sign_flip_test,
)

FAST = settings(max_examples=25, deadline=None, derandomize=True)
ALTERNATIVES = st.sampled_from(["two-sided", "less", "greater"])
# small integers produce ties (the hard case for exact counting) while keeping every sum exact in floating
# point: on non-integer grids scipy's tie tolerance (relative to |observed|) misses ties at T ≈ 0, ours does not
GRID = st.integers(-20, 20).map(float)


@FAST
@given(d=st.lists(GRID, min_size=2, max_size=12), alternative=ALTERNATIVES)
def test_exact_sign_flip_equals_scipy_permutation_test(d, alternative):
    d = np.array(d)
    ours = sign_flip_test(d, rng=np.random.default_rng(0), alternative=alternative)
    oracle = stats.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative=alternative
    )
    assert ours.p_value == pytest.approx(min(1.0, oracle.pvalue), abs=1e-12)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), shift=st.floats(-0.3, 0.3), alternative=ALTERNATIVES)
def test_monte_carlo_sign_flip_agrees_with_scipy_within_mc_error(seed, shift, alternative):
    d = np.random.default_rng(seed).normal(shift, 1.0, 30)
    b = 4000
    ours = sign_flip_test(d, rng=np.random.default_rng(seed), n_resamples=b, alternative=alternative).p_value
    oracle = stats.permutation_test(
        (d,),
        np.mean,
        permutation_type="samples",
        n_resamples=b,
        alternative=alternative,
        **scipy_rng(np.random.default_rng(seed + 1)),
    ).pvalue
    # two independent MC estimates of the same p: 5 standard errors of their difference (scipy doubles 2-sided)
    se = np.sqrt(2 * max(oracle, 1 / b) * (1 - min(oracle, 1 - 1 / b)) / b) * (2 if alternative == "two-sided" else 1)
    assert abs(ours - min(1.0, oracle)) <= 5 * se + 2 / b


@FAST
@given(
    pairs=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=60), alternative=ALTERNATIVES
)
def test_mcnemar_equals_binomtest_and_statsmodels(pairs, alternative):
    base, head = np.array(pairs, dtype=float).T
    ours = mcnemar_exact(base, head, alternative)
    b = int(np.sum((base == 1) & (head == 0)))
    c = int(np.sum((base == 0) & (head == 1)))
    expected = 1.0 if b + c == 0 else stats.binomtest(c, b + c, 0.5, alternative=alternative).pvalue
    assert ours.p_value == pytest.approx(expected, abs=1e-12)
    if alternative == "two-sided":
        table = [[np.sum((base == 1) & (head == 1)), b], [c, np.sum((base == 0) & (head == 0))]]
        assert ours.p_value == pytest.approx(mcnemar(table, exact=True).pvalue, abs=1e-12)
        d = head - base  # McNemar exact is the exact sign-flip test on binary differences
        assert ours.p_value == pytest.approx(
            sign_flip_test(d[d != 0], rng=np.random.default_rng(0)).p_value if b + c else 1.0, abs=1e-12
        )


@settings(max_examples=10, deadline=None, derandomize=True)  # statsmodels' Holm takes ~0.1 s per call
@given(p=st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_and_bh_equal_statsmodels(p):
    p = np.array(p)
    np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1], atol=1e-12)
    np.testing.assert_allclose(benjamini_hochberg(p), multipletests(p, method="fdr_bh")[1], atol=1e-12)


@FAST
@given(seed=st.integers(0, 10_000), n=st.integers(2, 50))
def test_paired_se_is_scipy_sem_and_singleton_clusters_change_nothing(seed, n):
    d = np.random.default_rng(seed).normal(0, 1, n)
    assert paired_se(d) == pytest.approx(stats.sem(d), rel=1e-12)
    assert clustered_se(d, np.arange(n)) == pytest.approx(stats.sem(d), rel=1e-9)
