"""Paired hypothesis tests and multiplicity corrections (STATISTICS.md §2, §4).

Every test is a small pure function returning a :class:`TestResult`; randomized ones take an explicit
``np.random.Generator`` and report a +1-corrected Monte Carlo p-value. Orientation: ``alternative="less"``
always means "head is worse than base" once the caller has oriented the scores (higher = better).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

Alternative = Literal["two-sided", "less", "greater"]
_ALTERNATIVES = ("two-sided", "less", "greater")
EXACT_MAX_UNITS = 20
"""Default largest number of units whose 2^U sign vectors the sign-flip test enumerates (exact p)."""
_MC_CHUNK_CELLS = 1 << 22
"""Sign matrices are drawn in chunks of at most this many cells (32 MiB as float64)."""


@dataclass(frozen=True)
class TestResult:
    """The outcome of one hypothesis test (STYLE §4)."""

    __test__ = False  # not a pytest test class

    statistic: float
    """The test statistic (documented per test)."""
    p_value: float
    """p-value in [0, 1]; NaN when the test is undefined for the data."""
    method: str
    """Human-readable name of the test and its variant, e.g. ``"sign-flip randomization (exact, 2^9)"``."""
    n: int
    """Number of paired observations (cases) the test used."""


def _check_alternative(alternative: str) -> None:
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}")


def _alt_label(alternative: str) -> str:
    return {"two-sided": "two-sided", "less": "one-sided, head worse", "greater": "one-sided, head better"}[alternative]


def _as_binary(x: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1 or not np.isin(arr, (0.0, 1.0)).all():
        raise ValueError(f"{name} must be a 1-D array of 0/1 values")
    return arr.astype(bool)


def mcnemar_exact(base: np.ndarray, head: np.ndarray, alternative: Alternative = "two-sided") -> TestResult:
    """Exact McNemar test for paired binary outcomes (the binomial test on the discordant pairs).

    With b = #(base 1, head 0) and c = #(base 0, head 1), under H0 P(1→0) = P(0→1) so
    c ~ Binomial(b + c, 1/2). Two-sided p = min(1, 2·BinomCDF(min(b, c); b + c, ½)); ``"less"`` (head worse,
    H1: P(0→1) < P(1→0)) p = BinomCDF(c; b + c, ½); ``"greater"`` p = 1 − BinomCDF(c − 1; b + c, ½).
    No discordant pair gives p = 1.

    Args:
        base: shape (N,), 0/1 outcome of each case on base (1 = pass, already oriented so 1 is good).
        head: shape (N,), 0/1 outcome of the same cases on head, same order.
        alternative: ``"two-sided"``, ``"less"`` (head worse) or ``"greater"`` (head better).

    Returns:
        statistic = min(b, c) for two-sided (as statsmodels), c for one-sided; n = N pairs.

    Raises:
        ValueError: arrays of different length, values other than 0/1, or an unknown alternative.

    Source: McNemar (1947), Psychometrika 12(2):153-157, doi:10.1007/BF02295996; exact form as
    ``statsmodels.stats.contingency_tables.mcnemar(exact=True)`` via ``scipy.stats.binomtest``.

    """
    _check_alternative(alternative)
    a, h = _as_binary(base, "base"), _as_binary(head, "head")
    if a.shape != h.shape:
        raise ValueError(f"base and head differ in length: {a.size} != {h.size}")
    b = int(np.sum(a & ~h))
    c = int(np.sum(~a & h))
    p = 1.0 if b + c == 0 else float(stats.binomtest(c, b + c, 0.5, alternative=alternative).pvalue)
    statistic = float(min(b, c) if alternative == "two-sided" else c)
    return TestResult(statistic, min(1.0, p), f"McNemar exact ({_alt_label(alternative)})", int(a.size))


def sign_test(wins: int, losses: int, alternative: Alternative = "less") -> TestResult:
    """Exact sign test of paired preferences: wins against losses, ties left out.

    Under H0 a non-tied case is a win or a loss with probability ½, so wins ~ Binomial(wins + losses, ½).
    ``"less"`` (head worse, H1: P(win) < ½) p = BinomCDF(wins; wins + losses, ½); ``"greater"``
    p = 1 − BinomCDF(wins − 1); two-sided as ``scipy.stats.binomtest``. No non-tied case gives p = 1.
    With base's and head's per-case 0/1 "preferred" outcomes this is exact McNemar (:func:`mcnemar_exact`).

    Args:
        wins: cases where head is preferred, ≥ 0.
        losses: cases where base is preferred, ≥ 0.
        alternative: ``"less"`` (head worse, the default), ``"greater"`` or ``"two-sided"``.

    Returns:
        statistic = wins; n = wins + losses.

    Raises:
        ValueError: negative counts or an unknown alternative.

    Source: Dixon & Mood (1946), "The statistical sign test", JASA 41(236):557-566,
    doi:10.1080/01621459.1946.10501892; computed with ``scipy.stats.binomtest``.

    """
    _check_alternative(alternative)
    if wins < 0 or losses < 0:
        raise ValueError(f"counts must be ≥ 0, got wins={wins}, losses={losses}")
    n = wins + losses
    p = 1.0 if n == 0 else float(stats.binomtest(wins, n, 0.5, alternative=alternative).pvalue)
    return TestResult(float(wins), min(1.0, p), f"sign test, exact binomial ({_alt_label(alternative)})", int(n))


def _signed_sums(units: np.ndarray) -> np.ndarray:
    """All 2^k sums Σ s_j·u_j over s ∈ {−1, +1}^k, shape (2^k,)."""
    k = units.size
    bits = (np.arange(1 << k)[:, None] >> np.arange(k)) & 1
    return (2.0 * bits - 1.0) @ units


def _exact_counts(units: np.ndarray, observed: float, tol: float) -> tuple[int, int]:
    """Counts of sign vectors with Σ s·u ≤ observed + tol and ≥ observed − tol (meet in the middle)."""
    half = units.size // 2
    left = _signed_sums(units[:half])
    right = np.sort(_signed_sums(units[half:]))
    n_right = right.size
    le = np.searchsorted(right, observed + tol - left, side="right").sum()
    ge = n_right * left.size - np.searchsorted(right, observed - tol - left, side="left").sum()
    return int(le), int(ge)


def _cluster_sums(d: np.ndarray, clusters: np.ndarray | None) -> np.ndarray:
    if clusters is None:
        return d
    labels = np.asarray(clusters)
    if labels.shape != d.shape:
        raise ValueError(f"clusters must have shape {d.shape}, got {labels.shape}")
    _, inverse = np.unique(labels, return_inverse=True)
    return np.bincount(inverse, weights=d)


def _finite_1d(d: np.ndarray, name: str = "d") -> np.ndarray:
    arr = np.asarray(d, dtype=float)
    if arr.ndim != 1 or not np.isfinite(arr).all():
        raise ValueError(f"{name} must be a 1-D array of finite values")
    return arr


def sign_flip_test(
    d: np.ndarray,
    *,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    exact_max_n: int = EXACT_MAX_UNITS,
    clusters: np.ndarray | None = None,
    alternative: Alternative = "two-sided",
) -> TestResult:
    """Paired sign-flip (Fisher randomization) test of the mean paired difference.

    H0: each case's difference is symmetric about 0 (the base/head labels are exchangeable within a case);
    statistic T = d̄. The null distribution flips the sign of each unit: each case, or each cluster's sum of
    d when ``clusters`` is given (so dependent cases move together). With U ≤ ``exact_max_n`` units all 2^U
    sign vectors are enumerated (exact p, identity included; computed meet-in-the-middle in O(2^(U/2))).
    Otherwise p = (1 + b) / (1 + B) over B = ``n_resamples`` random sign vectors (Phipson & Smyth 2010),
    where b counts |T*| ≥ |T| (two-sided), T* ≤ T (``"less"``, head worse) or T* ≥ T (``"greater"``).
    Ties are counted with a relative tolerance of 1e-10·Σ|u|. The exact two-sided p equals scipy's
    ``permutation_test(..., permutation_type="samples")`` since the null distribution is symmetric.

    Args:
        d: shape (N,), paired differences head − base, oriented so positive = better; finite.
        rng: the generator for the Monte Carlo path (untouched on the exact path).
        n_resamples: B, number of random sign vectors when not exact, ≥ 1.
        exact_max_n: enumerate exactly when the number of units is at most this (≤ 30).
        clusters: shape (N,) cluster labels, or None for independent cases.
        alternative: ``"two-sided"``, ``"less"`` (head worse) or ``"greater"`` (head better).

    Returns:
        statistic = d̄ (mean over cases), p in (0, 1], n = N.

    Raises:
        ValueError: non-finite or non-1-D ``d``, mismatched ``clusters``, bad ``alternative`` or sizes.

    Source: Fisher (1935) The Design of Experiments §21; Smucker, Allan & Carterette (2007), CIKM,
    doi:10.1145/1321440.1321528; Phipson & Smyth (2010), SAGMB 9(1), doi:10.2202/1544-6115.1585.

    """
    _check_alternative(alternative)
    d = _finite_1d(d)
    if n_resamples < 1 or not 0 <= exact_max_n <= 30:
        raise ValueError("n_resamples must be ≥ 1 and exact_max_n in [0, 30]")
    if d.size == 0:
        return TestResult(float("nan"), float("nan"), "sign-flip randomization (no data)", 0)
    units = _cluster_sums(d, clusters)
    observed = float(units.sum())
    tol = 1e-10 * float(np.abs(units).sum())
    unit_name = "clusters" if clusters is not None else "cases"
    if units.size <= exact_max_n:
        total = 1 << units.size
        le, ge = _exact_counts(units, observed, tol)
        if alternative == "less":
            p = le / total
        elif alternative == "greater":
            p = ge / total
        elif abs(observed) <= tol:
            p = 1.0
        else:
            le_neg, _ = _exact_counts(units, -abs(observed), tol)
            _, ge_pos = _exact_counts(units, abs(observed), tol)
            p = (le_neg + ge_pos) / total
        method = f"sign-flip randomization ({_alt_label(alternative)}, exact 2^{units.size} over {unit_name})"
    else:
        hits = sign_flip_hits(units[:, None], np.array([observed]), np.array([tol]), rng, n_resamples, alternative)
        p = (1 + int(hits[0])) / (1 + n_resamples)
        method = f"sign-flip randomization ({_alt_label(alternative)}, Monte Carlo B={n_resamples} over {unit_name})"
    return TestResult(observed / d.size, min(1.0, float(p)), method, int(d.size))


def sign_flip_hits(
    units: np.ndarray,
    observed: np.ndarray,
    tol: np.ndarray,
    rng: np.random.Generator,
    n_resamples: int,
    alternative: Alternative,
) -> np.ndarray:
    """Monte Carlo counts of the sign-flip test for M statistics over the same U units at once.

    Every random sign vector s ∈ {−1, +1}^U (drawn as random bits, in chunks of at most :data:`_MC_CHUNK_CELLS`
    cells) flips all M columns of ``units`` together: T*_m = Σ_u s_u·units[u, m] = Σ units − 2·Σ_{s_u = −1}
    units[u, m], one matrix product per chunk. Sharing the sign vectors between metrics paired over the same units
    is what a paired design allows (each metric's null distribution is the one it would have alone); it makes
    their Monte Carlo errors correlated, which Holm's procedure does not mind (valid under any dependence).

    Args:
        units: shape (U, M), per-unit sums of each statistic (cases, or clusters' sums).
        observed: shape (M,), Σ units of each column.
        tol: shape (M,), tie tolerance of each column.
        rng: the generator (U·B random bits are drawn).
        n_resamples: B ≥ 1.
        alternative: ``"less"`` counts T* ≤ T, ``"greater"`` T* ≥ T, two-sided |T*| ≥ |T| (each within ``tol``).

    Returns:
        shape (M,), the number b of resampled statistics at least as extreme as the observed one.

    Source: Fisher (1935) The Design of Experiments §21; Phipson & Smyth (2010), doi:10.2202/1544-6115.1585.

    """
    u = np.asarray(units, dtype=float)
    n_units = u.shape[0]
    total = u.sum(axis=0)
    hits = np.zeros(u.shape[1], dtype=np.int64)
    chunk = max(8, (_MC_CHUNK_CELLS // max(n_units, 1)) // 8 * 8)
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        bits = np.unpackbits(rng.integers(0, 256, size=(size, (n_units + 7) // 8), dtype=np.uint8), axis=1)
        null = total - 2.0 * (bits[:, :n_units].astype(float) @ u)
        if alternative == "less":
            hits += np.sum(null <= observed + tol, axis=0)
        elif alternative == "greater":
            hits += np.sum(null >= observed - tol, axis=0)
        else:
            hits += np.sum(np.abs(null) >= np.abs(observed) - tol, axis=0)
    return hits


def sign_flip_draws(
    units: np.ndarray, sizes: np.ndarray, rng: np.random.Generator, n_resamples: int
) -> tuple[np.ndarray, np.ndarray]:
    """The B random sign vectors of :func:`sign_flip_hits` (the same draws), as flipped sums and flipped cases.

    Args:
        units: shape (U, M), per-unit sums of each statistic.
        sizes: shape (U,), cases per unit.
        rng: the generator (drawn exactly as :func:`sign_flip_hits` draws it).
        n_resamples: B ≥ 1.

    Returns:
        (Σ_{flipped units} units, shape (B, M); Σ_{flipped units} sizes, shape (B,)): what the test statistic
        and its inversion (:class:`gate.stats.intervals.FlipThresholds`) need of each sign vector.

    """
    u = np.asarray(units, dtype=float)
    n_units = u.shape[0]
    columns = np.column_stack([u, np.asarray(sizes, dtype=float)])
    out = np.empty((n_resamples, columns.shape[1]))
    chunk = max(8, (_MC_CHUNK_CELLS // max(n_units, 1)) // 8 * 8)
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        bits = np.unpackbits(rng.integers(0, 256, size=(size, (n_units + 7) // 8), dtype=np.uint8), axis=1)
        out[start : start + size] = bits[:, :n_units].astype(float) @ columns
    return out[:, :-1], out[:, -1]


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm–Bonferroni step-down adjusted p-values (family-wise error rate under any dependence).

    Sorted p_(1) ≤ … ≤ p_(M): p̃_(j) = max_{k≤j} min(1, (M − k + 1)·p_(k)); reject H_(j) iff p̃_(j) ≤ α.
    NaN entries are left out of the family and stay NaN.

    Args:
        p_values: shape (M,), raw p-values in [0, 1] or NaN.

    Returns:
        shape (M,), adjusted p-values in the input order.

    Source: Holm (1979), Scand. J. Statist. 6(2):65-70, https://www.jstor.org/stable/4615733.

    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    order = idx[np.argsort(p[idx], kind="stable")]
    m = order.size
    out[order] = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    return out


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (false discovery rate, independence or PRDS).

    p̃_(j) = min_{k≥j} min(1, M·p_(k)/k); rejecting p̃ ≤ q controls the FDR at q. Delegates to
    ``scipy.stats.false_discovery_control(method="bh")``. NaN entries are left out and stay NaN.

    Args:
        p_values: shape (M,), raw p-values in [0, 1] or NaN.

    Returns:
        shape (M,), adjusted p-values in the input order.

    Source: Benjamini & Hochberg (1995), JRSS-B 57(1):289-300, doi:10.1111/j.2517-6161.1995.tb02031.x.

    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = stats.false_discovery_control(p[ok], method="bh")
    return out
