"""The fixed design's minimum detectable worsening of one metric: the printed MDE, its power model and its level.

:func:`power_model` describes a metric's paired differences as :func:`gate.stats.power.detection_power` needs them
(the exact-McNemar model for a binary metric with one run per side and no clusters — the "broken cases" model when
nothing was discordant — else the sign-flip test's normal model); :func:`fixed_mde` is the worsening the gate's own
FAIL rule catches with 80 % power at a given N; :func:`first_step_levels` the level it is computed at (Holm's first
step over the gated metrics the family counts). :mod:`gate.stats.decision` prints it per metric; the adaptive
evaluation (:class:`gate.compare.sequential.Looks`) uses it at the full sequence length N as the drop its
non-inferiority look rules out at least (the design note of :mod:`gate.stats.sequential`, point 5).
"""

from __future__ import annotations

import math

import numpy as np

from gate.stats.inputs import MetricInput, case_effects
from gate.stats.intervals import clustered_se, paired_se
from gate.stats.power import detectable_drop
from gate.stats.selection import MetricTest, select

POWER = 0.8
"""Power at which the minimum detectable effect is reported."""


def power_model(
    inp: MetricInput, d: np.ndarray, base_means: np.ndarray, se: float
) -> dict[str, float | bool]:  # fmt: skip
    """The arguments of :func:`gate.stats.power.detection_power` that describe this metric's data and test.

    Args:
        inp: the metric (its kind, direction, repeats per side and whether it has clusters).
        d: shape (n,), oriented per-case differences of the cases valid on both sides.
        base_means: shape (n,), the base's per-case means over repeats of the same cases (metric units).
        se: the paired (or clustered) standard error of mean(d) (used by the sign-flip model only).

    Returns:
        ``{"var0", "mcnemar", "base_rate"}`` (exact McNemar: binary, one run per side, no clusters; var0 the
        discordant share mean(d²), base_rate the base's pass rate on the oriented scale) or ``{"var0", "kappa",
        "mcnemar"}`` (the sign-flip test's normal model: var0 = n·SE², κ = 1 for binary metrics, else 0).
    """
    n = d.size
    test = select(inp.kind, inp.base.shape[1], inp.head.shape[1], inp.clusters is not None).metric
    if test is MetricTest.MCNEMAR_EXACT:
        passed = float(np.mean(base_means)) if inp.direction == "higher" else 1 - float(np.mean(base_means))
        return {"var0": float(np.mean(d**2)), "mcnemar": True, "base_rate": passed}
    return {"var0": n * se * se, "kappa": 1.0 if inp.kind == "binary" else 0.0, "mcnemar": False}


def fixed_mde(inp: MetricInput, d: np.ndarray, base_means: np.ndarray, se: float, *, margin: float, level: float,
              n: int | None = None) -> float:  # fmt: skip
    """The worsening the gate's own rule catches with 80 % power (:func:`gate.stats.power.detectable_drop`).

    Args:
        inp: the metric.
        d: shape (k,), oriented per-case differences observed (the power model's data).
        base_means: shape (k,), the base's per-case means of the same cases.
        se: SE of mean(d) over these cases.
        margin: m ≥ 0 on the oriented scale (log-ratio for ratio metrics).
        level: the one-sided level the test runs at (:func:`first_step_levels`).
        n: the number of paired cases the design has (default k, the cases observed).

    Returns:
        δ on the oriented scale (log-ratio units for ratio metrics, at most log 10); NaN when no worsening is
        caught with 80 % power at this n.
    """
    largest = 1.0 if inp.kind != "ratio" else math.log(10.0)  # a tenfold slow-down at most
    model = power_model(inp, d, base_means, se)
    size = d.size if n is None else n
    return detectable_drop(size, level=level, margin=margin, power=POWER, largest=largest, **model)  # type: ignore[arg-type]


def first_step_levels(alphas: np.ndarray, gated: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """The level each metric's MDE is computed at: a worsening of one gated metric alone is tested at α_k/M.

    Holm's first step (M: the gated metrics the family counts, at least 1); a metric that is not gated at α_k.

    Args:
        alphas: shape (k,), each metric's level α_k (:class:`gate.stats.inputs.MetricPolicy`).
        gated: shape (k,), whether each metric is gated.
        counted: shape (k,), whether each metric is in Holm's family (testable: some difference is not 0).

    Returns:
        shape (k,), the levels.

    Source: Holm (1979), Scand. J. Statist. 6(2):65-70 (the first step's level α/M).
    """
    family = int(np.sum(np.asarray(gated, dtype=bool) & np.asarray(counted, dtype=bool)))
    return np.where(gated, np.asarray(alphas, dtype=float) / max(family, 1), alphas)


def design_mde(inp: MetricInput, *, level: float, n: int) -> float:
    """The fixed design's MDE at ``n`` paired cases, from the differences of ``inp``'s cases so far.

    :func:`fixed_mde` on the cases valid on both sides of ``inp`` (the power model's data: their discordant
    share, or n·SE², and the base's pass rate), for a design of ``n`` cases at the metric's oriented margin. Unlike
    the printed MDE it is also given when nothing varies (SE 0): the exact-McNemar "broken cases" model, or the
    sign-flip model with no variance but the drop's own. It needs at least 2 valid cases.

    Args:
        inp: the metric over the cases observed so far.
        level: the one-sided level (:func:`first_step_levels` at the fixed analysis' α).
        n: the design's number of paired cases, ≥ 1 (the full sequence, not the cases observed).

    Returns:
        δ on the oriented scale (log-ratio units for ratio metrics); NaN when fewer than 2 cases are valid on both
        sides or no worsening is caught with 80 % power at ``n``.
    """
    base_means, _, effect = case_effects(inp)
    ok = np.isfinite(effect) & np.isfinite(base_means)
    d, base = effect[ok], base_means[ok]
    if d.size < 2 or n < 1:
        return math.nan
    se = paired_se(d) if inp.clusters is None else clustered_se(d, np.asarray(inp.clusters)[ok])
    margin = inp.metric_policy(0.05).oriented_margin  # the margin does not depend on α
    return fixed_mde(inp, d, base, se, margin=margin, level=level, n=n)
