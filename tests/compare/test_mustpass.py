"""The must-pass rule's exact test (gate.compare.mustpass) against scipy's Fisher test and hypergeometric law."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from gate.compare.mustpass import flip_p_values
from gate.stats.discrete import flip_repeats


@pytest.mark.parametrize(("r_base", "r_head"), [(1, 1), (2, 2), (3, 3), (5, 5), (2, 4), (4, 3)])
def test_flip_p_values_are_fishers_one_sided_test_and_holm(r_base, r_head):
    """Every table of (base passes, head passes): p = fisher_exact(..., "greater"); Holm over the non-constant cases
    as statsmodels computes it; constant cases (all passed or all failed on both sides) NaN."""
    a, h = np.meshgrid(np.arange(r_base + 1), np.arange(r_head + 1), indexing="ij")
    a, h = a.ravel(), h.ravel()
    p, p_adj = flip_p_values(a, h, r_base, r_head)
    constant = (a + h == 0) | (a + h == r_base + r_head)
    assert np.isnan(p[constant]).all() and np.isnan(p_adj[constant]).all()
    for k in np.flatnonzero(~constant):
        table = [[a[k], r_base - a[k]], [h[k], r_head - h[k]]]
        assert p[k] == pytest.approx(stats.fisher_exact(table, alternative="greater").pvalue, rel=1e-12)
    expected = multipletests(p[~constant], method="holm")[1]
    np.testing.assert_allclose(p_adj[~constant], expected, rtol=1e-12)
    flip = (a == r_base) & (h == 0)
    # an all-repeat flip: all R_A passes on base given R_A passes in all, hypergeometric
    assert p[flip][0] == pytest.approx(stats.hypergeom.pmf(r_base, r_base + r_head, r_base, r_base), rel=1e-12)
    assert p[flip][0] == pytest.approx(1 / math.comb(r_base + r_head, r_base), rel=1e-12)


@pytest.mark.parametrize(("m", "alpha"), [(1, 0.05), (2, 0.05), (4, 0.05), (12, 0.05), (13, 0.05), (15, 0.05),
                                          (50, 0.05), (4, 0.01), (1, 0.4)])  # fmt: skip
def test_flip_repeats_is_the_smallest_r_whose_flip_survives_bonferroni(m, alpha):
    """Oracle: the smallest R with hypergeom.pmf(R; 2R, R, R) ≤ α/m (a flip's exact p against Holm's first step)."""
    oracle = next(r for r in range(1, 31) if stats.hypergeom.pmf(r, 2 * r, r, r) <= alpha / m * (1 + 1e-12))
    assert flip_repeats(m, alpha) == oracle
    assert {(1, 0.05): 3, (4, 0.05): 5, (12, 0.05): 5, (13, 0.05): 6, (15, 0.05): 6}.get((m, alpha), oracle) == oracle


def test_flip_repeats_limits():
    assert flip_repeats(10**9, 0.05, limit=10) is None
    with pytest.raises(ValueError, match="m ≥ 1"):
        flip_repeats(0, 0.05)
