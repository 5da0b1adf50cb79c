"""Standard errors and confidence intervals for a mean paired difference (STATISTICS.md §1, §2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from gate.stats.significance import _finite_1d


def paired_se(d: np.ndarray) -> float:
    """Miller's paired standard error of the mean difference, SE = sqrt(Σ(d_i − d̄)² / ((N − 1)·N)).

    Args:
        d: shape (N,), per-case paired differences (per-case means over repeats), finite.

    Returns:
        SE ≥ 0, in the unit of ``d``; NaN when N < 2.

    Source: Miller (2024), "Adding Error Bars to Evals", arXiv:2411.00640, Eq. 7.

    """
    d = _finite_1d(d)
    return float(np.std(d, ddof=1) / np.sqrt(d.size)) if d.size >= 2 else float("nan")


def clustered_se(d: np.ndarray, clusters: np.ndarray, *, small_sample: bool = False) -> float:
    """Cluster-robust standard error of the mean difference (cases in a cluster are not independent).

    Miller Eq. 4/8: SE² = SE_CLT² + (1/N²)·Σ_c Σ_{i≠j∈c} e_i·e_j with e = d − d̄, i.e.
    SE_CLT² + (Σ_c S_c² − Σ_i e_i²)/N² where S_c is the sum of e over cluster c. With ``small_sample`` the
    CR1-style variant of UK AISI Inspect: SE² = C/(C − 1)·Σ_c S_c²/N² (equals the SE of the cluster means
    when clusters are of equal size).

    Args:
        d: shape (N,), per-case paired differences, finite.
        clusters: shape (N,), cluster label of each case (any hashable dtype numpy can sort).
        small_sample: use the C/(C − 1) variant instead of Miller's Eq. 4.

    Returns:
        SE ≥ 0 in the unit of ``d``; NaN when N < 2 (or C < 2 with ``small_sample``).

    Raises:
        ValueError: ``clusters`` not of shape (N,) or non-finite ``d``.

    Source: Miller (2024), arXiv:2411.00640, Eq. 4 and 8 (sandwich estimator, App. A); inspect_ai
    ``scorer/_metrics/std.py`` (``stderr(cluster=...)``).

    """
    d = _finite_1d(d)
    labels = np.asarray(clusters)
    if labels.shape != d.shape:
        raise ValueError(f"clusters must have shape {d.shape}, got {labels.shape}")
    if d.size < 2:
        return float("nan")
    e = d - d.mean()
    _, inverse = np.unique(labels, return_inverse=True)
    sums = np.bincount(inverse, weights=e)
    n, c = d.size, sums.size
    if small_sample:
        return float(np.sqrt(c / (c - 1) * np.sum(sums**2)) / n) if c >= 2 else float("nan")
    var = np.sum(e**2) / ((n - 1) * n) + (np.sum(sums**2) - np.sum(e**2)) / n**2
    return float(np.sqrt(max(var, 0.0)))


def n_units(d: np.ndarray, clusters: np.ndarray | None) -> int:
    """Number of independent units: N cases, or the number of distinct clusters."""
    return int(np.asarray(d).size if clusters is None else np.unique(np.asarray(clusters)).size)


def t_interval(d: np.ndarray, *, confidence: float, clusters: np.ndarray | None = None) -> tuple[float, float]:
    """Two-sided t confidence interval for the mean difference, d̄ ± t_{(1+conf)/2, df}·SE.

    SE is :func:`paired_se` (df = N − 1) or, with clusters, :func:`clustered_se` (df = C − 1, the few-cluster
    correction). All d equal gives [d̄, d̄].

    Args:
        d: shape (N,), per-case paired differences, finite.
        confidence: two-sided coverage in (0, 1), e.g. 0.90 for one-sided 5 % bounds.
        clusters: shape (N,) cluster labels, or None.

    Returns:
        (low, high); (NaN, NaN) when there are fewer than 2 units.

    Source: Student (1908); Miller (2024), arXiv:2411.00640, Eq. 3/7/8 with t quantiles.

    """
    d = _finite_1d(d)
    units = n_units(d, clusters)
    if units < 2:
        return float("nan"), float("nan")
    se = paired_se(d) if clusters is None else clustered_se(d, clusters)
    half = float(stats.t.ppf(0.5 + confidence / 2, units - 1) * se)
    return float(d.mean() - half), float(d.mean() + half)


_CHUNK_CELLS = 1 << 22
"""Bootstrap resamples are drawn in chunks of at most this many unit draws (32 MiB of counts as float64)."""


def units_of(d: np.ndarray, clusters: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The resampling units of paired differences: (sums of d per unit, cases per unit), each shape (U,).

    Without clusters each case is a unit (sums = d, sizes 1); with clusters, each cluster (sorted label order).
    """
    if clusters is None:
        return d, np.ones(d.size)
    _, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    return np.bincount(inverse, weights=d), np.bincount(inverse).astype(float)


def bootstrap_distribution(
    sums: np.ndarray, sizes: np.ndarray, *, rng: np.random.Generator, n_resamples: int
) -> np.ndarray:
    """Paired bootstrap distribution of M mean differences over the same U units, drawn once for all M.

    Each resample draws U units with replacement (the same draw for every column: the cases are paired, so the
    statistics of one resample are those of one resampled golden set); with counts w_u of each unit the
    statistic is θ*_m = Σ_u w_u·sums[u, m] / Σ_u w_u·sizes[u] (the mean difference over the drawn cases; with
    clusters, Σ d / Σ n over the drawn clusters). Computed as a matrix product per chunk of resamples.

    Args:
        sums: shape (U, M), per-unit sums of each column's differences (see :func:`units_of`).
        sizes: shape (U,), cases per unit (> 0).
        rng: the generator (U·B unit indices are drawn).
        n_resamples: B ≥ 1.

    Returns:
        shape (B, M), the bootstrap replicates θ*.

    Source: Efron & Tibshirani (1993) An Introduction to the Bootstrap, ch. 6 (paired bootstrap); Field & Welsh
    (2007), doi:10.1111/j.1467-9868.2007.00593.x (cluster resampling).

    """
    s = np.asarray(sums, dtype=float)
    n_units = s.shape[0]
    columns = np.column_stack([s, np.asarray(sizes, dtype=float)])
    out = np.empty((n_resamples, s.shape[1]))
    chunk = max(1, _CHUNK_CELLS // n_units)
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        draws = rng.integers(0, n_units, size=(size, n_units))
        draws += np.arange(size)[:, None] * n_units
        counts = np.bincount(draws.ravel(), minlength=size * n_units).reshape(size, n_units).astype(float)
        totals = counts @ columns
        out[start : start + size] = totals[:, :-1] / totals[:, -1:]
    return out


def bca_interval(theta_b: np.ndarray, sums: np.ndarray, sizes: np.ndarray, confidence: float) -> tuple[float, float]:
    """BCa confidence interval of a mean difference from its bootstrap distribution.

    ẑ0 = Φ⁻¹(share of θ*_b below θ̂, ties counted half); â from the jackknife over units, θ̂_(−u) =
    (Σ sums − sums_u)/(Σ sizes − sizes_u) (closed form for a mean: O(U), no resampling), U_u = (U − 1)(θ̄_(·) −
    θ̂_(−u)), â = Σ U_u³ / (6·(Σ U_u²)^{3/2}); endpoints are the quantiles (linear interpolation) of θ* at
    α_j = Φ(ẑ0 + (ẑ0 + z_j)/(1 − â(ẑ0 + z_j))), z_j = Φ⁻¹((1 ∓ confidence)/2). The same computation as
    ``scipy.stats.bootstrap(method="BCa")`` given the same distribution (tested against it).

    Args:
        theta_b: shape (B,), the bootstrap replicates (:func:`bootstrap_distribution`).
        sums: shape (U,), per-unit sums of the differences.
        sizes: shape (U,), cases per unit.
        confidence: two-sided coverage in (0, 1).

    Returns:
        (low, high); NaN when BCa is undefined (e.g. every jackknife value equal).

    Source: Efron (1987), JASA 82(397):171-185, doi:10.1080/01621459.1987.10478410; Efron & Tibshirani (1993),
    §14.3 and eq. 15.36.

    """
    sums, sizes = np.asarray(sums, dtype=float), np.asarray(sizes, dtype=float)
    theta_hat = sums.sum() / sizes.sum()
    below = np.count_nonzero(theta_b < theta_hat) + np.count_nonzero(theta_b <= theta_hat)
    z0 = special.ndtri(below / (2 * theta_b.size))
    with np.errstate(divide="ignore", invalid="ignore"):
        jack = (sums.sum() - sums) / (sizes.sum() - sizes)
        n = float(jack.size)
        u = (n - 1) * (jack.mean() - jack)
        a_hat = (np.sum(u**3) / n**3) / (6 * (np.sum(u**2) / n**2) ** 1.5)
        z_alpha = special.ndtri((1 - confidence) / 2)
        levels = []
        for z in (z_alpha, -z_alpha):
            num = z0 + z
            levels.append(special.ndtr(z0 + num / (1 - a_hat * num)))
    if not np.all(np.isfinite(levels)):
        return float("nan"), float("nan")
    low, high = np.quantile(theta_b, levels)
    return float(low), float(high)


def bootstrap_cis(
    d: np.ndarray,
    confidences: np.ndarray,
    *,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    clusters: np.ndarray | None = None,
    min_units: int = 20,
) -> list[tuple[float, float, str]]:
    """:func:`bootstrap_ci` for M columns of paired differences over the same cases, with one bootstrap draw.

    Args:
        d: shape (N, M), per-case differences of M statistics (oriented), finite.
        confidences: shape (M,), two-sided coverage of each column's interval, in (0, 1).
        rng: generator for the resampling (one draw serves every column).
        n_resamples: B ≥ 1.
        clusters: shape (N,) cluster labels, or None.
        min_units: fewest cases (or clusters) for which BCa is used.

    Returns:
        One (low, high, method) per column: method ``"bca"``, ``"t"`` or ``"none"`` as :func:`bootstrap_ci`.

    Raises:
        ValueError: non-finite ``d``, mismatched ``clusters`` or a confidence outside (0, 1).

    Source: as :func:`bootstrap_ci`.

    """
    d = np.asarray(d, dtype=float)
    confidences = np.asarray(confidences, dtype=float)
    if d.ndim != 2 or not np.isfinite(d).all() or confidences.shape != (d.shape[1],):
        raise ValueError("d must be a finite (N, M) array and confidences of shape (M,)")
    if not np.all((confidences > 0) & (confidences < 1)):
        raise ValueError(f"confidence must be in (0, 1), got {confidences}")
    if clusters is not None and np.asarray(clusters).shape != (d.shape[0],):
        raise ValueError(f"clusters must have shape ({d.shape[0]},)")
    units = n_units(d[:, 0] if d.shape[1] else np.zeros(d.shape[0]), clusters)
    out: list[tuple[float, float, str] | None] = [None] * d.shape[1]
    if units < 2:
        return [(float("nan"), float("nan"), "none")] * d.shape[1]
    varies = np.ptp(d, axis=0) > 0 if d.shape[0] else np.zeros(d.shape[1], dtype=bool)
    boot = np.flatnonzero(varies) if units >= min_units else np.array([], dtype=int)
    if boot.size:
        _, sizes = units_of(d[:, 0], clusters)
        sums = np.column_stack([units_of(d[:, m], clusters)[0] for m in boot])
        theta_b = bootstrap_distribution(sums, sizes, rng=rng, n_resamples=n_resamples)
        for j, m in enumerate(boot):
            low, high = bca_interval(theta_b[:, j], sums[:, j], sizes, float(confidences[m]))
            if np.isfinite(low) and np.isfinite(high):
                out[m] = (low, high, "bca")
    for m in range(d.shape[1]):
        if out[m] is None:
            out[m] = (*t_interval(d[:, m], confidence=float(confidences[m]), clusters=clusters), "t")
    return out  # type: ignore[return-value]


def bootstrap_ci(
    d: np.ndarray,
    *,
    confidence: float,
    rng: np.random.Generator,
    n_resamples: int = 10_000,
    clusters: np.ndarray | None = None,
    min_units: int = 20,
) -> tuple[float, float, str]:
    """Paired BCa bootstrap confidence interval for the mean difference, with a t-interval fallback.

    Resamples cases (pairs stay intact) or, with ``clusters``, whole clusters (statistic Σ d / Σ n over the
    drawn clusters) with :func:`bootstrap_distribution`; BCa corrects the percentiles for bias (ẑ0) and skewness
    (jackknife acceleration â) with :func:`bca_interval`, the computation of ``scipy.stats.bootstrap(method=
    "BCa")``. Falls back to :func:`t_interval` when there are fewer than ``min_units`` units (bootstrap
    undercovers there) or BCa is degenerate (e.g. all d equal → [d̄, d̄]).

    Args:
        d: shape (N,), per-case paired differences (oriented), finite.
        confidence: two-sided coverage in (0, 1); the endpoints are one-sided (1 − confidence)/2 bounds.
        rng: generator for the resampling.
        n_resamples: B ≥ 1 bootstrap resamples (10,000 gives endpoints stable to about ±0.002).
        clusters: shape (N,) cluster labels, or None.
        min_units: fewest cases (or clusters) for which BCa is used.

    Returns:
        (low, high, method) with method ``"bca"``, ``"t"`` or ``"none"`` (fewer than 2 units; NaN bounds).

    Raises:
        ValueError: non-finite ``d``, mismatched ``clusters`` or confidence outside (0, 1).

    Source: Efron (1987), JASA 82(397):171-185, doi:10.1080/01621459.1987.10478410 (BCa); Efron &
    Tibshirani (1993) An Introduction to the Bootstrap, ch. 14; Field & Welsh (2007) for cluster resampling.

    """
    d = _finite_1d(d)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    (result,) = bootstrap_cis(
        d[:, None], np.array([confidence]), rng=rng, n_resamples=n_resamples, clusters=clusters, min_units=min_units
    )
    return result


def mcnemar_interval(worse: int, better: int, n: int, level: float) -> tuple[float, float]:
    """Exact conditional interval of Δ = P(0→1) − P(1→0) for paired binary outcomes: the dual of exact McNemar.

    Given the b + c discordant pairs (b = ``worse``, c = ``better``), c ~ Binomial(b + c, θ) with θ =
    P(better | discordant); McNemar's exact test is the binomial test of θ = ½. The one-sided Clopper–Pearson
    bounds of θ at ``level`` (θ_L = Beta⁻¹(level; c, b + 1), θ_U = Beta⁻¹(1 − level; c + 1, b)) are the inversion
    of the one-sided binomial tests, and map to the difference given the discordant count:
    Δ = (b + c)/N·(2θ − 1). So U < 0 exactly when the one-sided McNemar p ("head worse") is ≤ ``level``, and the
    bounds lie in [−(b + c)/N, (b + c)/N]: a change the data cannot show is never claimed (no discordant pair:
    [0, 0]).

    Args:
        worse: b, cases that passed on base and failed on head, ≥ 0.
        better: c, cases that failed on base and passed on head, ≥ 0.
        n: N paired cases, ≥ b + c, > 0.
        level: one-sided level of each bound in (0, 0.5); the interval has coverage 1 − 2·level.

    Returns:
        (L, U) on the difference scale.

    Source: McNemar (1947); Clopper & Pearson (1934), Biometrika 26(4):404-413, doi:10.1093/biomet/26.4.404;
    the conditional interval of Breslow & Day (1980) §7.3; equals statsmodels ``proportion_confint(c, b + c,
    alpha=2·level, method="beta")`` mapped to Δ.

    """
    if worse < 0 or better < 0 or n < worse + better or n < 1 or not 0 < level < 0.5:
        raise ValueError(f"need 0 ≤ b, c with b + c ≤ N, N ≥ 1, level in (0, 0.5); got {worse}, {better}, {n}, {level}")
    discordant = worse + better
    if discordant == 0:
        return 0.0, 0.0
    theta_low = 0.0 if better == 0 else float(stats.beta.ppf(level, better, worse + 1))
    theta_high = 1.0 if worse == 0 else float(stats.beta.ppf(1 - level, better + 1, worse))
    scale = discordant / n
    return scale * (2 * theta_low - 1), scale * (2 * theta_high - 1)


@dataclass(frozen=True)
class FlipThresholds:
    """The sign-flip test of a mean difference as a function of the hypothesised difference δ.

    For a sign vector that flips the set F of units, the shifted statistic Σ_F (u − δ·n) (u: a unit's sum of d,
    n: its cases) is ≥ 0 exactly when δ ≤ Σ_F u / Σ_F n. So each sign vector has one threshold, and the one-sided
    p-values of H0: Δ = δ are counts of thresholds: p_worse(δ) = #{upper ≥ δ}/T ("head worse than δ"),
    p_better(δ) = #{lower ≤ δ}/T. ``upper``/``lower`` carry the tie tolerance ±tol/2 (so δ = 0 counts ties as
    the test does) and ±∞ for the empty flip set (the identity, which always counts).
    """

    upper: np.ndarray
    """shape (T,), the thresholds of p_worse (T = 2^U exact, or B + 1 with the identity)."""
    lower: np.ndarray
    """shape (T,), the thresholds of p_better."""
    exact: bool
    """Every sign vector enumerated (True) or B random ones plus the identity (Monte Carlo)."""

    def p_worse(self) -> float:
        """One-sided p for "head worse" (H0: Δ = 0): #{upper ≥ 0}/T."""
        return int(np.count_nonzero(self.upper >= 0)) / self.upper.size

    def bounds(self, level: float) -> tuple[float, float]:
        """(L, U): the one-sided ``level`` bounds that invert the test, so U < 0 ⟺ p_worse ≤ ``level``.

        U = sup{δ : p_worse(δ) > level}, the j-th largest ``upper`` with j the smallest count with j/T > level;
        L likewise the j-th smallest ``lower``. ±∞ when the test cannot reject at ``level`` whatever δ.
        """
        total = self.upper.size
        j = rank_above(level, total)
        high = float(np.partition(self.upper, total - j)[total - j])
        low = float(np.partition(self.lower, j - 1)[j - 1])
        return low, high


def rank_above(level: float, total: int) -> int:
    """The smallest count j ≥ 1 with j/total > level (a p-value count/total is ≤ level exactly when count < j)."""
    j = max(1, int(math.floor(level * total)) + 1)
    while j > 1 and (j - 1) / total > level:
        j -= 1
    while j / total <= level:
        j += 1
    return min(j, total)


def _thresholds(flipped: np.ndarray, flipped_n: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        upper = np.where(flipped_n > 0, (flipped + tol / 2) / flipped_n, np.inf)
        lower = np.where(flipped_n > 0, (flipped - tol / 2) / flipped_n, -np.inf)
    return upper, lower


def exact_flip_thresholds(sums: np.ndarray, sizes: np.ndarray, tol: float) -> FlipThresholds:
    """:class:`FlipThresholds` of all 2^U sign vectors over U units (sums of d, cases per unit); U ≤ 22."""
    sums, sizes = np.asarray(sums, dtype=float), np.asarray(sizes, dtype=float)
    if sums.size > 22:
        raise ValueError(f"exact enumeration is limited to 22 units, got {sums.size}")
    flipped, flipped_n = np.zeros(1), np.zeros(1)
    for u, n in zip(sums, sizes, strict=True):  # subset sums by doubling: O(2^U) time and memory
        flipped = np.concatenate([flipped, flipped + u])
        flipped_n = np.concatenate([flipped_n, flipped_n + n])
    return FlipThresholds(*_thresholds(flipped, flipped_n, tol), exact=True)


def monte_carlo_flip_thresholds(flipped: np.ndarray, flipped_n: np.ndarray, tol: float) -> FlipThresholds:
    """:class:`FlipThresholds` of B random sign vectors (their flipped sums and case counts) plus the identity."""
    upper, lower = _thresholds(np.asarray(flipped, dtype=float), np.asarray(flipped_n, dtype=float), tol)
    return FlipThresholds(np.append(upper, np.inf), np.append(lower, -np.inf), exact=False)
