"""Calibration of the gate by simulation: A/A false-fail rate, power, per-case FDR and the printed MDE.

Model (Miller 2024 §3): case i has a true quality x_i ~ Beta(a, b) (its difficulty), the same on both sides
unless a drop is planted. Binary metric: each repeat passes with probability x_i (judge noise = Bernoulli).
Graded metric: each repeat scores x_i + N(0, judge_sd²) (unclipped, so a planted drop is exactly the true
mean difference). Every simulated PR is analysed with the real ``analyze_metrics`` / ``analyze_cases``.

Run ``python benchmarks/calibration.py`` (about 8 minutes on a shared 2-core machine; ``--quick``: under 1).
``tests/test_stats_calibration.py`` runs a reduced version of the same checks in CI.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from gate.stats import MetricInput, analyze_cases, analyze_metrics, gate_decision

ALPHA = 0.05
BETA_A, BETA_B = 2.0, 1.0
JUDGE_SD = 0.15


def simulate(
    rng: np.random.Generator, *, n: int, r: int, kind: str, drop: float = 0.0, planted: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Scores (base, head), each shape (n, r): A/A noise, plus ``drop`` on all cases and ``planted`` flips.

    ``planted`` cases (the first ones) pass every base repeat and fail every head repeat (binary only).
    """
    x = rng.beta(BETA_A, BETA_B, size=n)
    x_head = x - drop
    if kind == "binary":
        base = (rng.random((n, r)) < x[:, None]).astype(float)
        head = (rng.random((n, r)) < np.clip(x_head, 0, 1)[:, None]).astype(float)
        base[:planted], head[:planted] = 1.0, 0.0
    else:
        base = x[:, None] + rng.normal(0, JUDGE_SD, (n, r))
        head = x_head[:, None] + rng.normal(0, JUDGE_SD, (n, r))
    return base, head


def metric_input(name: str, kind: str, base: np.ndarray, head: np.ndarray, margin: float) -> MetricInput:
    """A gated, higher-is-better metric without failures."""
    return MetricInput(
        name, kind, "higher", margin, True, base, head, np.zeros(base.shape, bool), np.zeros(head.shape, bool)
    )


def aa_fail_rate(*, n: int, r: int, prs: int, margin: float, seed: int, n_resamples: int) -> float:
    """Share of A/A PRs (a binary and a graded gated metric, Holm across both) whose verdict is fail."""
    rng = np.random.default_rng(seed)
    fails = 0
    for k in range(prs):
        metrics = [
            metric_input(kind, kind, *simulate(rng, n=n, r=r, kind=kind), margin) for kind in ("binary", "graded")
        ]
        results = analyze_metrics(metrics, alpha=ALPHA, seed=k, n_resamples=n_resamples)
        fails += gate_decision(results).verdict == "fail"
    return fails / prs


def fail_rate(
    *, kind: str, n: int, r: int, drop: float, margin: float, prs: int, seed: int, n_resamples: int
) -> tuple[float, float]:
    """(share of PRs whose single gated metric fails, mean printed MDE) with a planted drop on all cases."""
    rng = np.random.default_rng(seed)
    fails, mdes = 0, []
    for k in range(prs):
        res = analyze_metrics(
            [metric_input(kind, kind, *simulate(rng, n=n, r=r, kind=kind, drop=drop), margin)],
            alpha=ALPHA,
            seed=k,
            n_resamples=n_resamples,
        )[0]
        fails += res.status == "fail"
        mdes.append(res.mde)
    return fails / prs, float(np.mean(mdes))


@dataclass(frozen=True)
class PlantedOutcome:
    """Per-case detection over simulated runs."""

    all_found: float
    """Share of runs listing every planted case as regressed."""
    mean_fdp: float
    """Mean false-discovery proportion of the regressed list (0 for an empty list)."""


def planted_cases(*, n: int, r: int, planted: int, runs: int, seed: int) -> PlantedOutcome:
    """Plant ``planted`` pass→fail cases among n binary cases with r repeats; score ``analyze_cases``."""
    rng = np.random.default_rng(seed)
    found, fdps = 0, []
    for _ in range(runs):
        base, head = simulate(rng, n=n, r=r, kind="binary", planted=planted)
        cases = analyze_cases(metric_input("hit", "binary", base, head, 0.03), q=0.10)
        flagged = {c.index for c in cases if c.status == "regressed"}
        found += set(range(planted)) <= flagged
        fdps.append(len(flagged - set(range(planted))) / max(1, len(flagged)))
    return PlantedOutcome(found / runs, float(np.mean(fdps)))


def power_curve_80(
    *, n: int, r: int, mde: float, prs: int, seed: int, n_resamples: int, factors: tuple[float, ...]
) -> float:
    """Effect δ80 at which the graded metric fails in 80 % of PRs, interpolated on drops factor·MDE."""
    common = dict(kind="graded", n=n, r=r, margin=1e-9, prs=prs, n_resamples=n_resamples)
    rates = [fail_rate(drop=f * mde, seed=seed + j, **common)[0] for j, f in enumerate(factors)]
    drops = np.array(factors) * mde
    print("    power curve: " + ", ".join(f"δ={d:.4f}: {p:.2f}" for d, p in zip(drops, rates, strict=True)))
    rates = np.maximum.accumulate(rates)  # power is monotone in the drop: smooth out MC wiggles
    j = int(np.argmax(rates >= 0.8)) if (rates >= 0.8).any() else len(rates) - 1
    if j == 0 or rates[j] == rates[j - 1]:
        return float(drops[j])
    return float(drops[j - 1] + (0.8 - rates[j - 1]) / (rates[j] - rates[j - 1]) * (drops[j] - drops[j - 1]))


def main() -> None:
    """Print the measured rates for the issue's calibration grid."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer PRs (smoke run)")
    args = parser.parse_args()
    prs, b = (200, 500) if args.quick else (1000, 2000)
    mc = 2 * np.sqrt(ALPHA * (1 - ALPHA) / prs)
    start = time.perf_counter()
    print(f"(1) A/A false-fail rate over {prs} PRs (binary + graded gated metrics, Holm), target ≤ {ALPHA} + {mc:.3f}")
    for margin in (1e-9, 0.03):
        for n in (50, 300):
            for r in (1, 3):
                rate = aa_fail_rate(n=n, r=r, prs=prs, margin=margin, seed=1000 + n + r, n_resamples=b)
                print(f"    margin={margin:g} N={n:3d} R={r}: fail rate {rate:.4f}")
    print("(2a) planted drop of 2×margin (0.03) on all cases, N=300, R=3: share of fail (target ≥ 0.80)")
    for kind in ("binary", "graded"):
        rate, _ = fail_rate(kind=kind, n=300, r=3, drop=0.06, margin=0.03, prs=prs // 2, seed=7, n_resamples=b)
        print(f"    {kind}: {rate:.3f}")
    outcome = planted_cases(n=300, r=5, planted=5, runs=prs // 2, seed=11)
    print(
        f"(2b) 5 planted pass→fail cases of 300, R=5: all listed in {outcome.all_found:.3f} of runs (≥ 0.80), "
        f"mean FDP {outcome.mean_fdp:.4f} (≤ 0.10)"
    )
    print("(3) printed MDE vs the empirical 80 %-power effect (graded, margin ≈ 0)")
    for n, r in ((50, 1), (300, 3)):
        _, printed = fail_rate(kind="graded", n=n, r=r, drop=0.0, margin=1e-9, prs=100, seed=3, n_resamples=b)
        empirical = power_curve_80(
            n=n, r=r, mde=printed, prs=prs // 4, seed=100, n_resamples=b, factors=(0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4)
        )
        print(
            f"    N={n} R={r}: printed MDE {printed:.4f}, empirical δ80 {empirical:.4f}, "
            f"ratio {empirical / printed:.3f} (target within 0.8-1.2)"
        )
    print(f"done in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
