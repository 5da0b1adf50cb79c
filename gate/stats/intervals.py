"""Standard errors and confidence intervals for a mean paired difference (STATISTICS.md §1, §2)."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats

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
    drawn clusters); BCa corrects the percentiles for bias (ẑ0) and skewness (jackknife acceleration â)
    via ``scipy.stats.bootstrap(method="BCa")``. Falls back to :func:`t_interval` when there are fewer than
    ``min_units`` units (bootstrap undercovers there) or BCa is degenerate (e.g. all d equal → [d̄, d̄]).

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
    if clusters is not None and np.asarray(clusters).shape != d.shape:
        raise ValueError(f"clusters must have shape {d.shape}")
    units = n_units(d, clusters)
    if units < 2:
        return float("nan"), float("nan"), "none"
    if units >= min_units and np.ptp(d) > 0:
        low, high = _bca(d, confidence, rng, n_resamples, clusters)
        if np.isfinite(low) and np.isfinite(high):
            return low, high, "bca"
    return (*t_interval(d, confidence=confidence, clusters=clusters), "t")


def _bca(
    d: np.ndarray, confidence: float, rng: np.random.Generator, n_resamples: int, clusters: np.ndarray | None
) -> tuple[float, float]:
    if clusters is None:
        data, statistic = (d,), np.mean
    else:
        _, inverse = np.unique(np.asarray(clusters), return_inverse=True)
        sums, counts = np.bincount(inverse, weights=d), np.bincount(inverse).astype(float)

        def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
            return sums[idx].sum(axis=axis) / counts[idx].sum(axis=axis)

        data = (np.arange(sums.size),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            data,
            statistic,
            method="BCa",
            confidence_level=confidence,
            n_resamples=n_resamples,
            vectorized=True,
            rng=rng,
        )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)
