"""Prediction-powered inference: a mean estimated from many judge scores and a few hand labels (STATISTICS.md §7).

n answers carry a hand label Y and the judge's score f; N answers (the whole run) carry f. The judge's mean
alone is biased by however much the judge errs; the labels alone are few. The prediction-powered estimate
combines them and stays valid however biased the judge is:

- PPI (Angelopoulos, Bates, Fannjiang, Jordan, Zrnic 2023): θ̂ = mean_N(f) + mean_n(Y − f), the judge's mean
  corrected by its bias measured on the labelled answers;
- PPI++ (Angelopoulos, Duchi, Zrnic 2023): θ̂_λ = mean_N(λ·f) + mean_n(Y − λ·f), with λ ∈ [0, 1] chosen from the
  data to minimise the variance (λ = 1 is PPI, λ = 0 the labels alone), so it is never much worse than the labels.

Weights (Horvitz–Thompson, 1/π for an answer sampled with inclusion probability π) enter every mean as in
``ppi_py`` (normalised to mean 1 within the labelled and the unlabelled set); the values equal the authors' package
``ppi-python`` (``ppi_py.ppi_mean_pointestimate``, ``ppi_py.ppi_mean_ci``), which tests/stats/test_ppi.py checks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class MeanEstimate:
    """A mean with its standard error and two-sided (1 − α) normal interval."""

    estimate: float
    """The point estimate (NaN when undefined)."""
    se: float
    """Its standard error."""
    low: float
    """Lower bound."""
    high: float
    """Upper bound."""
    lam: float
    """The power-tuning λ used (1: PPI, 0: the labels alone; NaN for an estimate without labels)."""
    n: int
    """Labelled items."""
    N: int
    """Unlabelled items (judge scores), 0 for an estimate from labels alone."""


def _z(alpha: float) -> float:
    """The standard normal quantile 1 − α/2."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return NormalDist().inv_cdf(1 - alpha / 2)


def _weights(count: int, weights: Sequence[float] | np.ndarray | None) -> np.ndarray:
    """Weights normalised to mean 1 (all ones when None), as ``ppi_py``'s ``construct_weight_vector``."""
    if weights is None:
        return np.ones(count)
    w = np.asarray(weights, dtype=float)
    if w.shape != (count,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"weights must be {count} positive finite numbers")
    return w / w.sum() * count


def power_tuning(
    y: np.ndarray, f: np.ndarray, f_unlabelled: np.ndarray, w: np.ndarray, w_unlabelled: np.ndarray
) -> float:
    """PPI++'s variance-minimising λ for a mean, clipped to [0, 1].

    λ = Cov_n(w·Y, w·f) / ((1 + n/N) · Var_{n+N}(w·f)), the gradients taken at the PPI (λ = 1) estimate; covariance
    with divisor n, variance with divisor n + N − 1 (as ``ppi_py._calc_lam_glm``). NaN-free: a judge whose scores do
    not vary gives λ = 0.

    Source: Angelopoulos, Duchi, Zrnic 2023, "PPI++: Efficient Prediction-Powered Inference", arXiv:2311.01453, §2.
    """
    n, big_n = len(y), len(f_unlabelled)
    theta = float((w_unlabelled * f_unlabelled).mean() + (w * (y - f)).mean())
    grads, grads_hat = w * (y - theta), w * (f - theta)
    cov = 2 * float(((grads - grads.mean()) * (grads_hat - grads_hat.mean())).sum()) / n
    pooled = np.concatenate([grads_hat, w_unlabelled * (f_unlabelled - theta)])
    var = float(np.var(pooled, ddof=1)) if len(pooled) > 1 else 0.0
    if var <= 0:
        return 0.0
    return float(np.clip(cov / (2 * (1 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(
    y: Sequence[float] | np.ndarray,
    f: Sequence[float] | np.ndarray,
    f_unlabelled: Sequence[float] | np.ndarray,
    *,
    lam: float | None = None,
    weights: Sequence[float] | np.ndarray | None = None,
    weights_unlabelled: Sequence[float] | np.ndarray | None = None,
    alpha: float = 0.05,
) -> MeanEstimate:
    """The prediction-powered estimate of a mean with its (1 − α) normal interval.

    θ̂_λ = mean_N(w'·λ·f') + mean_n(w·(Y − λ·f)); SE² = Var_N(w'·λ·f')/N + Var_n(w·(Y − λ·f))/n (population
    variances, divisor N and n), interval θ̂ ± z_{1−α/2}·SE.

    Args:
        y: the hand labels of the n labelled items, shape (n,), e.g. 1 = unfaithful, 0 = faithful.
        f: the judge's scores of the same items, shape (n,), same scale as ``y``.
        f_unlabelled: the judge's scores of the N items to estimate over, shape (N,) (the whole run).
        lam: the power-tuning λ: None chooses it (PPI++, :func:`power_tuning`), 1 is PPI, 0 the labels alone.
        weights: Horvitz–Thompson weights of the labelled items (1/π), shape (n,); None: equal.
        weights_unlabelled: weights of the unlabelled items, shape (N,); None: equal.
        alpha: 1 − the interval's coverage, in (0, 1).

    Returns:
        The estimate; NaN everywhere when n = 0 or N = 0.

    Raises:
        ValueError: shapes that differ, weights that are not positive, ``alpha`` outside (0, 1).

    Source: Angelopoulos, Bates, Fannjiang, Jordan, Zrnic 2023, "Prediction-powered inference", Science 382(6671),
    doi:10.1126/science.adi6000; PPI++: Angelopoulos, Duchi, Zrnic 2023, arXiv:2311.01453 (``ppi_py.ppi_mean_ci``).
    """
    z = _z(alpha)
    y_, f_, fu = (np.asarray(v, dtype=float).ravel() for v in (y, f, f_unlabelled))
    if y_.shape != f_.shape:
        raise ValueError(f"y and f must have the same length, got {len(y_)} and {len(f_)}")
    n, big_n = len(y_), len(fu)
    if n == 0 or big_n == 0:
        return MeanEstimate(math.nan, math.nan, math.nan, math.nan, math.nan, n, big_n)
    w, wu = _weights(n, weights), _weights(big_n, weights_unlabelled)
    if lam is None:
        lam = power_tuning(y_, f_, fu, w, wu)
    estimate = float((wu * lam * fu).mean() + (w * (y_ - lam * f_)).mean())
    se = math.sqrt(float(np.var(wu * lam * fu)) / big_n + float(np.var(w * (y_ - lam * f_))) / n)
    return MeanEstimate(estimate, se, estimate - z * se, estimate + z * se, float(lam), n, big_n)


def classical_mean(
    y: Sequence[float] | np.ndarray, *, weights: Sequence[float] | np.ndarray | None = None, alpha: float = 0.05
) -> MeanEstimate:
    """The (weighted) mean of the labels alone with its normal interval: PPI with λ = 0.

    θ̂ = mean_n(w·Y) (weights normalised to mean 1: the Hájek estimator), SE² = Var_n(w·Y)/n.

    Args:
        y: the labels, shape (n,).
        weights: Horvitz–Thompson weights (1/π), shape (n,); None: equal.
        alpha: 1 − the interval's coverage.

    Source: the classical CLT interval; equals ``ppi_py.ppi_mean_ci(..., lam=0)``.
    """
    z = _z(alpha)
    y_ = np.asarray(y, dtype=float).ravel()
    n = len(y_)
    if n == 0:
        return MeanEstimate(math.nan, math.nan, math.nan, math.nan, 0.0, 0, 0)
    w = _weights(n, weights)
    estimate, se = float((w * y_).mean()), math.sqrt(float(np.var(w * y_)) / n)
    return MeanEstimate(estimate, se, estimate - z * se, estimate + z * se, 0.0, n, 0)


def judge_mean(f: Sequence[float] | np.ndarray, *, alpha: float = 0.05) -> MeanEstimate:
    """The judge's mean over all N items with its interval: what the judge alone says (bias ignored).

    θ̂ = mean_N(f), SE² = Var_N(f)/N. When every score is 0 or 1 (the judge's calls: θ̂ is a share) the interval
    is Wilson's score interval for a binomial proportion, which stays in [0, 1] and keeps its coverage near 0 and 1
    (the normal interval θ̂ ± z·SE went below 0 for a share of 2 flagged in 100); otherwise the normal interval
    θ̂ ± z_{1−α/2}·SE. Either covers the judge's own expected score, not the labelled truth, unless the judge is
    unbiased.

    Args:
        f: the judge's scores, shape (N,).
        alpha: 1 − the interval's coverage, in (0, 1).

    Source: Wilson 1927, "Probable inference, the law of succession, and statistical inference", JASA 22(158),
    doi:10.1080/01621459.1927.10502953 (``scipy.stats.binomtest(...).proportion_ci(method="wilson")``); Brown,
    Cai & DasGupta 2001, Statistical Science 16(2) (why not the normal interval for a proportion).
    """
    z = _z(alpha)
    f_ = np.asarray(f, dtype=float).ravel()
    if not len(f_):
        return MeanEstimate(math.nan, math.nan, math.nan, math.nan, math.nan, 0, 0)
    estimate, se = float(f_.mean()), math.sqrt(float(np.var(f_)) / len(f_))
    if np.isin(f_, (0.0, 1.0)).all():
        ci = stats.binomtest(int(f_.sum()), len(f_)).proportion_ci(confidence_level=1 - alpha, method="wilson")
        return MeanEstimate(estimate, se, float(ci.low), float(ci.high), math.nan, 0, len(f_))
    return MeanEstimate(estimate, se, estimate - z * se, estimate + z * se, math.nan, 0, len(f_))


def difference(base: MeanEstimate, head: MeanEstimate, *, alpha: float = 0.05) -> MeanEstimate:
    """The head − base difference of two estimates from independent samples, with its normal interval.

    θ̂ = θ̂_head − θ̂_base, SE² = SE²_head + SE²_base (the labels of the two sides are drawn independently; the
    judge-score terms are treated as independent too, which is conservative when the sides share cases).

    Args:
        base: the base side's estimate.
        head: the head side's estimate.
        alpha: 1 − the interval's coverage.

    Source: STATISTICS.md §7 ("apply it per side and combine"); Angelopoulos et al. 2023, Science, §"Methods".
    """
    z = _z(alpha)
    estimate = head.estimate - base.estimate
    se = math.sqrt(head.se**2 + base.se**2)
    return MeanEstimate(estimate, se, estimate - z * se, estimate + z * se, math.nan, base.n + head.n, base.N + head.N)
