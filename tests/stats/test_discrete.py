"""Exact per-case tests, the discrete Benjamini–Hochberg procedure and the test-selection table.

Oracles: scipy (``fisher_exact``, ``hypergeom``, ``permutation_test``, ``ttest_ind``), statsmodels (BH), the
DiscreteFDR R package's toy example (vignette "A Toy Example": DBH step-down on nine two-sided Fisher tests),
Döhler, Durand & Roquain (2018)'s definition of the step-up critical values re-implemented by brute force,
and hand computations.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from gate.stats import MetricInput, analyze_cases, analyze_metrics, discrete_bh, fisher_case, permutation_case
from gate.stats import selection as selection_module
from gate.stats.discrete import ENUMERATION_LIMIT, fisher_cases, permutation_cases
from gate.stats.selection import KINDS, REPEATS, TABLE, CaseTest, MetricTest, select


def _metric(kind, base, head, *, clusters=None):
    base, head = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    return MetricInput(
        "m", kind, "higher", 0.03, True, base, head, np.zeros(base.shape, bool), np.zeros(head.shape, bool), clusters
    )


# ---------------------------------------------------------------- Fisher, per case


@pytest.mark.parametrize(("r_base", "r_head"), [(3, 3), (5, 5), (2, 4), (10, 10)])
def test_fisher_case_equals_scipy_fisher_exact_on_every_table(r_base, r_head):
    for k_base, k_head in itertools.product(range(r_base + 1), range(r_head + 1)):
        res = fisher_case(k_base, k_head, r_base, r_head, tau=0.5)
        table = [[k_base, r_base - k_base], [k_head, r_head - k_head]]
        assert res.p_value == pytest.approx(stats.fisher_exact(table, alternative="greater").pvalue, abs=1e-12)
        assert res.effect == pytest.approx(k_head / r_head - k_base / r_base)


def test_fisher_case_ex3_values_and_drop_support():
    # STATISTICS.md §5 Ex3, column Fisher 'greater'
    assert fisher_case(5, 1, 5, 5, tau=0.5).p_value == pytest.approx(6 / 252)
    assert fisher_case(3, 0, 3, 3, tau=0.5).p_value == pytest.approx(0.05)
    assert fisher_case(10, 6, 10, 10, tau=0.5).p_value == pytest.approx(0.0433437, abs=1e-7)
    assert fisher_case(5, 0, 5, 5, tau=0.5).p_value == pytest.approx(1 / 252)
    # 3/3 vs 0/3: given 3 passes the head's count is hypergeometric(6, 3, 3); only k = 0 is a drop of 0.5
    res = fisher_case(3, 0, 3, 3, tau=0.5)
    np.testing.assert_allclose(res.drop_support, [0.05, 1.0])
    assert res.drop_p_value == res.p_value
    # 2/3 vs 1/3 (effect −1/3) can never be a drop of 0.5 with one pass moved: not a discovery
    res = fisher_case(2, 1, 3, 3, tau=0.5)
    assert res.drop_p_value == 1.0 and res.p_value == pytest.approx(0.5)
    # all passes on both sides: the only table given the total, support {1}
    np.testing.assert_allclose(fisher_case(3, 3, 3, 3, tau=0.5).drop_support, [1.0])
    with pytest.raises(ValueError):
        fisher_case(4, 0, 3, 3, tau=0.5)


# ---------------------------------------------------------------- permutation, per case


@pytest.mark.parametrize("seed", range(6))
def test_permutation_case_equals_scipy_exact_permutation_test(seed):
    rng = np.random.default_rng(seed)
    r_base, r_head = [(3, 3), (4, 3), (5, 5), (2, 5), (3, 3), (4, 4)][seed]
    a = np.round(rng.uniform(0, 1, r_base), 2 if seed < 4 else 1)  # seeds 4, 5 produce ties
    b = np.round(rng.uniform(0, 1, r_head), 2 if seed < 4 else 1)
    ref = stats.permutation_test(
        (b, a),
        lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        permutation_type="independent",
        alternative="less",
        n_resamples=np.inf,
        vectorized=True,
    )
    res = permutation_case(a, b, tau=0.2)
    assert res.p_value == pytest.approx(ref.pvalue, abs=1e-12)
    assert res.method == "permutation" and res.drop_support[-1] == 1.0


def test_permutation_case_two_values_is_fisher_and_drop_support():
    res = permutation_case(np.array([1.0, 1.0, 1.0]), np.array([0.5, 0.5, 0.5]), tau=0.2)
    assert res.p_value == pytest.approx(0.05) and res.drop_p_value == pytest.approx(0.05)
    np.testing.assert_allclose(res.drop_support, [0.05, 1.0])
    # τ = 0.6 exceeds the largest possible drop (0.5): no split is a discovery
    assert permutation_case(np.array([1.0, 1.0, 1.0]), np.array([0.5, 0.5, 0.5]), tau=0.6).drop_support[0] == 1.0
    # a stable case (spread below τ) cannot show a drop of τ whatever the split
    stable = permutation_case(np.array([0.90, 0.91, 0.92]), np.array([0.89, 0.90, 0.93]), tau=0.2)
    np.testing.assert_allclose(stable.drop_support, [1.0])
    assert permutation_case(np.array([0.7, 0.7]), np.array([0.7, 0.7]), tau=0.2).p_value == 1.0


def test_permutation_case_above_enumeration_limit_is_student_t():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.8, 0.1, 10), rng.normal(0.6, 0.1, 10)
    assert math.comb(20, 10) > ENUMERATION_LIMIT
    res = permutation_case(a, b, tau=0.1)
    assert res.method == "student" and res.drop_support is None
    assert res.p_value == pytest.approx(stats.ttest_ind(b, a, alternative="less").pvalue)


# ---------------------------------------------------------------- discrete BH


def _two_sided_fisher(x1, n1, x2, n2):
    """p-value and support of R's two-sided Fisher test (relative tolerance 1e-7), from scipy's hypergeom."""
    total = x1 + x2
    xs = np.arange(max(0, total - n2), min(total, n1) + 1)
    pmf = stats.hypergeom.pmf(xs, n1 + n2, total, n1)
    p = np.minimum(1.0, np.array([pmf[pmf <= v * (1 + 1e-7)].sum() for v in pmf]))
    return float(p[xs == x1][0]), np.unique(p)


def test_dbh_step_down_matches_discretefdr_toy_example():
    # DiscreteFDR vignette "A Toy Example": DBH(raw.pvalues, pCDFlist, 0.05, "sd") on nine 2x2 tables
    x1, x2 = [4, 2, 2, 14, 6, 9, 4, 0, 1], [0, 0, 1, 3, 2, 1, 2, 2, 2]
    tests = [_two_sided_fisher(a, 148, b, 132) for a, b in zip(x1, x2, strict=True)]
    p = np.array([t[0] for t in tests])
    order = np.argsort(p, kind="stable")
    np.testing.assert_allclose(
        p[order], [0.01243145, 0.02126871, 0.12476691, 0.22135177, 0.28849298, 0.49984639, 0.60329543,
                   0.68723229, 1.0], atol=5e-9,
    )  # fmt: skip
    rejected, adjusted = discrete_bh(p, [t[1] for t in tests], q=0.05, step="down")
    np.testing.assert_allclose(
        adjusted[order], [0.03819796, 0.03819796, 0.25630985, 0.47895996, 0.51482782, 1, 1, 1, 1], atol=5e-9
    )
    assert rejected.sum() == 2 and set(np.flatnonzero(rejected)) == {3, 5}  # BH rejects none of them
    assert not (multipletests(p, alpha=0.05, method="fdr_bh")[0]).any()


def _dbh_su_by_definition(p, supports, q):
    """[DBH-SU] from the paper's critical values (DDR 2018 eq. 10), by brute force over the joint support."""
    m = len(p)
    grid = np.unique(np.concatenate(supports))
    grid = grid[grid < 1.0]

    def cdf(s, t):
        below = s[s <= t]
        return below[-1] if below.size else 0.0

    def xi(t):
        return sum(cdf(s, t) / (1 - cdf(s, t)) for s in supports)

    feasible = [t for t in grid if xi(t) <= m * q]
    if not feasible:
        return np.zeros(m, dtype=bool)
    tau_m = max(feasible)
    denominators = [1 - cdf(s, tau_m) for s in supports]
    crit = []
    for k in range(1, m + 1):
        pairs = list(zip(supports, denominators, strict=True))
        ok = [t for t in grid if t <= tau_m and sum(cdf(s, t) / d for s, d in pairs) <= q * k]
        crit.append(max(ok) if ok else -1.0)
    crit[-1] = tau_m
    sorted_p = np.sort(p)
    hits = [k for k in range(m) if sorted_p[k] <= crit[k]]
    if not hits:
        return np.zeros(m, dtype=bool)
    return p <= sorted_p[max(hits)]


@pytest.mark.parametrize("seed", range(8))
def test_dbh_step_up_equals_the_papers_critical_values(seed):
    rng = np.random.default_rng(seed)
    tests = []
    for _ in range(int(rng.integers(3, 12))):
        r = int(rng.choice([3, 5]))
        pass_rate = rng.choice([0.5, 0.9, 1.0])
        k_base = int(rng.binomial(r, pass_rate))
        k_head = int(rng.binomial(r, pass_rate * rng.choice([1.0, 0.3])))
        res = fisher_case(k_base, k_head, r, r, tau=0.3)
        tests.append(res)
    p = np.array([t.drop_p_value for t in tests])
    supports = [t.drop_support for t in tests]
    for q in (0.1, 0.3):
        rejected, adjusted = discrete_bh(p, supports, q=q, step="up")
        np.testing.assert_array_equal(rejected, _dbh_su_by_definition(p, supports, q))
        np.testing.assert_array_equal(rejected, adjusted <= q)


def test_dbh_step_up_hand_computed_and_continuous_limit():
    support = np.array([0.05, 0.5, 0.95, 1.0])  # Fisher, 3 vs 3 runs, 3 passes in total
    # one informative case: τ_m = 0.05 (0.05/0.95 ≤ 0.1), adjusted = 0.05/0.95
    rejected, adjusted = discrete_bh(np.array([0.05]), [support], q=0.1)
    assert rejected[0] and adjusted[0] == pytest.approx(0.05 / 0.95)
    # two: both at 0.05 are rejected (2·0.05/0.95/2 ≤ 0.1); one alone at 0.05 is not (2·0.05/0.95 > 0.1)
    rejected, adjusted = discrete_bh(np.array([0.05, 0.05]), [support, support], q=0.1)
    assert rejected.all() and adjusted == pytest.approx([0.05 / 0.95] * 2)
    rejected, adjusted = discrete_bh(np.array([0.05, 0.5]), [support, support], q=0.1)
    assert not rejected.any() and adjusted[0] == pytest.approx(0.1 / 0.95)
    # continuous p-values: DBH-SU is BH at level q/(1 + q), adjusted p = BH adjusted p × (1 + q)
    p = np.random.default_rng(1).uniform(0, 0.05, 30)
    _, adjusted = discrete_bh(p, [None] * p.size, q=0.1)
    np.testing.assert_allclose(adjusted, np.minimum(1, multipletests(p, method="fdr_bh")[1] * 1.1), rtol=1e-9)
    with pytest.raises(ValueError):
        discrete_bh(np.array([0.1]), [], q=0.1)


# ---------------------------------------------------------------- the selection table


def test_every_kind_repeats_and_clustering_maps_to_tests():
    assert set(TABLE) == set(itertools.product(KINDS, REPEATS, (False, True)))
    assert select("binary", 1, 1, False).metric is MetricTest.MCNEMAR_EXACT
    assert select("binary", 1, 1, True).metric is MetricTest.SIGN_FLIP_CLUSTERS
    assert select("binary", 1, 3, False).metric is MetricTest.SIGN_FLIP
    assert select("graded", 1, 1, False).case is CaseTest.NONE
    assert select("binary", 3, 3, True).case is CaseTest.FISHER_EXACT
    assert select("ratio", 5, 5, False).case is CaseTest.PERMUTATION_EXACT
    with pytest.raises(ValueError):
        select("ordinal", 1, 1, False)


def test_both_callers_follow_the_table(monkeypatch):
    base = np.array([[1.0, 1, 1]] + [[1.0, 1, 1]] * 5)
    head = np.array([[0.0, 0, 0]] + [[1.0, 1, 1]] * 5)
    inp = _metric("binary", base, head)
    assert analyze_cases(inp)[0].status == "regressed"  # lone 3/3 → 0/3 among unchanged cases
    ex1 = _metric("binary", [[1]] * 24 + [[0]] * 6, [[1]] * 16 + [[0]] * 8 + [[1]] + [[0]] * 5)
    assert analyze_metrics([ex1])[0].test_method.startswith("McNemar")
    # swap the table's choices: both callers change with it
    swapped = {
        key: selection_module.Selection(MetricTest.SIGN_FLIP, CaseTest.NONE, sel.case_multiplicity)
        for key, sel in TABLE.items()
    }
    monkeypatch.setattr(selection_module, "TABLE", swapped)
    assert analyze_metrics([ex1])[0].test_method.startswith("sign-flip")
    assert analyze_cases(inp)[0].status == "suspected" and math.isnan(analyze_cases(inp)[0].p_value)


# ---------------------------------------------------------------- per-case calls


def test_binary_r3_deterministic_flip_is_regressed_unless_other_cases_could_be():
    stable = [[1.0, 1, 1]] * 40 + [[0.0, 0, 0]] * 10
    base = np.array([[1.0, 1, 1]] + stable)
    head = np.array([[0.0, 0, 0]] + stable)
    case = analyze_cases(_metric("binary", base, head))[0]
    assert case.status == "regressed" and case.p_value == pytest.approx(0.05)
    assert case.p_adjusted == pytest.approx(0.05 / 0.95)
    # one other case with 3 passes in 6 runs could equally have split 3/3 vs 0/3 by chance: not enough evidence
    base2, head2 = np.vstack([base, [[1.0, 0, 1]]]), np.vstack([head, [[0.0, 1, 0]]])
    assert analyze_cases(_metric("binary", base2, head2))[0].status == "suspected"
    # a case with 2 passes in 6 can reach a drop of 0.5 only at p = 0.2: it counts, the lone flip survives
    base3, head3 = np.vstack([base, [[1.0, 0, 1]]]), np.vstack([head, [[0.0, 0, 0]]])
    assert analyze_cases(_metric("binary", base3, head3))[0].status == "regressed"


def test_graded_flaky_cases_do_not_make_a_clean_split_regressed():
    rng = np.random.default_rng(5)
    stable = 0.9 + rng.normal(0, 0.01, (60, 3))
    base, head = stable.copy(), stable + rng.normal(0, 0.01, (60, 3))
    base[0], head[0] = [0.90, 0.91, 0.92], [0.50, 0.52, 0.55]  # a deterministic drop in a stable case
    case = analyze_cases(_metric("graded", base, head))[0]
    assert case.status == "regressed" and case.p_value == pytest.approx(0.05)
    # add ten flaky cases whose runs could split as cleanly by chance: the same drop is only suspected
    flaky_b, flaky_h = rng.uniform(0.2, 1.0, (10, 3)), rng.uniform(0.2, 1.0, (10, 3))
    cases = analyze_cases(_metric("graded", np.vstack([base, flaky_b]), np.vstack([head, flaky_h])))
    assert cases[0].status == "suspected" and cases[0].p_value == pytest.approx(0.05)


def test_smallest_flaggable_binary_change_at_r5_is_hand_computed():
    # Alone among unchanged cases the family has m = 1, so DBH-SU rejects iff p/(1 − p) ≤ q, i.e. p ≤ q/(1 + q)
    # = 0.0909. R = 5: 5/5 → 2/5 has p = C(7,2)/C(10,5) = 21/252 = 0.083 (flagged); 4/5 → 1/5 has p = 26/252
    # = 0.103 (not); with R = 3 only 3/3 → 0/3 (p = 1/20) gets there, 3/3 → 1/3 has p = 3/15 = 0.2.
    unchanged = [[1.0] * 5] * 50

    def status(first_base, first_head, r=5):
        rows = [[1.0] * r] * 50 if r != 5 else unchanged
        return analyze_cases(_metric("binary", [first_base, *rows], [first_head, *rows]))[0].status

    assert status([1, 1, 1, 1, 1], [1, 1, 0, 0, 0]) == "regressed"
    assert status([1, 1, 1, 1, 0], [1, 0, 0, 0, 0]) == "suspected"
    assert status([1, 1, 1], [0, 0, 0], r=3) == "regressed"
    assert status([1, 1, 1], [1, 0, 0], r=3) == "suspected"
    assert status([1, 1], [0, 0], r=2) == "suspected"  # min p = 1/6 > 0.0909: R = 2 can never flag a case


# ---------------------------------------------------------------- the vectorised per-case tests equal the per-case ones


def _same(ours, reference):
    assert (ours.p_value, ours.effect, ours.drop_p_value, ours.method) == (
        reference.p_value,
        reference.effect,
        reference.drop_p_value,
        reference.method,
    )
    assert (ours.drop_support is None) == (reference.drop_support is None)
    if reference.drop_support is not None:
        np.testing.assert_array_equal(ours.drop_support, reference.drop_support)


@pytest.mark.parametrize(("n_base", "n_head"), [(3, 3), (2, 4), (5, 5), (1, 3), (8, 8)])
@pytest.mark.parametrize("grid", [None, 0.25, 1.0])
def test_permutation_cases_equal_permutation_case_row_by_row(n_base, n_head, grid):
    """Continuous scores, rubric grids (ties, two-valued and constant cases) and the Student fallback (8 + 8)."""
    rng = np.random.default_rng(n_base * 10 + n_head)
    base, head = rng.random((300, n_base)), rng.random((300, n_head)) - 0.2
    if grid is not None:
        base, head = np.round(base / grid) * grid, np.round(np.clip(head, 0, 1) / grid) * grid
    base[:5] = head[:5, :1]  # constant cases
    for tau in (0.2, 0.5):
        for i, result in enumerate(permutation_cases(base, head, tau=tau)):
            _same(result, permutation_case(base[i], head[i], tau=tau))


def test_fisher_cases_equal_fisher_case():
    rng = np.random.default_rng(4)
    r_base, r_head = rng.integers(1, 6, 500), rng.integers(1, 6, 500)
    k_base, k_head = rng.integers(0, r_base + 1), rng.integers(0, r_head + 1)
    for i, result in enumerate(fisher_cases(k_base, k_head, r_base, r_head, tau=0.5)):
        _same(result, fisher_case(int(k_base[i]), int(k_head[i]), int(r_base[i]), int(r_head[i]), tau=0.5))
