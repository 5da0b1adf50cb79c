"""Calibration of adaptive (sequential) evaluation against the fixed-N gate, by simulation (issue 33, phase 1).

Every simulated pull request is decided twice on the same scores: by the fixed-N gate (``analyze_metrics`` on all
N cases at α = 0.05) and by the adaptive rule of ``gate.stats.sequential`` — cases in a seeded random order, looks
after a first batch of 10 % of N and then every 10 % (:func:`batch_ends`), bets tuned for N/2, early ``fail`` at
α_seq = share·α/M and ``non_inferior`` at β_seq (the early passes' own level, ``split_alpha``'s ``early_pass``)
on the sequential evidence, and the metrics still undecided when the set is exhausted decided by
``analyze_metrics`` at α_final = (1 − share)·α. Adaptive verdicts: early fail → fail, early non-inferior → pass,
else the fixed-N status at α_final.

Model (as ``benchmarks/calibration.py``, Miller 2024 §3): case quality x_i ~ Beta(2, 1); binary repeats pass
with probability x_i; graded repeats score x_i + N(0, 0.15²), **clipped to [0, 1]** (the sequential test needs
bounded scores; ``calibration.py`` leaves them unclipped). A planted drop lowers x_i on head. One gated,
higher-is-better metric per simulated PR (M = 1). Rates are printed with 95 % Wilson intervals.

Targets (issue 33): (1) A/A false-fail ≤ 5 % at N = 50, 200, 1,000, binary and graded, R = 1 and 3; (2) power at
the fixed design's printed MDE not lower than the fixed design's by more than 5 points; (3) median share of cases
run ≤ 50 % of the fixed design on a clear regression and on a no-change PR at N ≥ 200; (4) adaptive verdict =
fixed-N verdict in ≥ 95 % of PRs away from the margin. Part 5: a metric with margin 0 (the look rules out the
fixed design's MDE at N, from :func:`gate.stats.detectable.design_mde` on the cases run, as
:class:`gate.compare.sequential.Looks` does); part 6 (``tests/adaptive_repeats_sim.py``): the A/A false-fail with
adaptive repeats. Run ``python benchmarks/adaptive_calibration.py``
(``--quick`` for fewer PRs), or ``python benchmarks/calibration.py``, which prints these rows after its own
(``--adaptive-only``: these alone).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from gate.stats import MetricInput, analyze_metrics
from gate.stats.detectable import design_mde
from gate.stats.sequential import HORIZON_SHARE, SEQUENTIAL_SHARE, batch_ends, split_alpha, stopping_point

ALPHA = 0.05
JUDGE_SD = 0.15
BATCH_SHARE = 0.10


def simulate(
    rng: np.random.Generator, *, n: int, r: int, kind: str, drop: float, deterministic: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Scores (base, head), each shape (n, r), in [0, 1]; head's case quality lowered by ``drop``.

    ``deterministic`` (no change only): head's scores are the base's (identical answers, every difference 0).
    """
    x = rng.beta(2.0, 1.0, size=n)
    if deterministic:
        base = (rng.random((n, 1)) < x[:, None]).astype(float) if kind == "binary" else x[:, None]
        return np.repeat(base, r, axis=1), np.repeat(base, r, axis=1)
    x_head = np.clip(x - drop, 0.0, 1.0)
    if kind == "binary":
        return (rng.random((n, r)) < x[:, None]).astype(float), (rng.random((n, r)) < x_head[:, None]).astype(float)
    base = np.clip(x[:, None] + rng.normal(0, JUDGE_SD, (n, r)), 0, 1)
    return base, np.clip(x_head[:, None] + rng.normal(0, JUDGE_SD, (n, r)), 0, 1)


def metric_input(kind: str, base: np.ndarray, head: np.ndarray, margin: float) -> MetricInput:
    """A gated, higher-is-better metric without failures."""
    zeros = np.zeros(base.shape, bool)
    return MetricInput(kind, kind, "higher", margin, True, base, head, zeros, zeros)


@dataclass(frozen=True)
class Outcome:
    """One simulated PR decided both ways."""

    fixed: str
    """Fixed-N status: pass, fail or inconclusive."""
    adaptive: str
    """Adaptive status."""
    share: float
    """Cases the adaptive run evaluated, as a share of N."""
    mde: float
    """The fixed design's printed MDE."""
    early: bool
    """Whether the adaptive run stopped before the set was exhausted."""


def rule_outs(
    kind: str, base: np.ndarray, head: np.ndarray, margin: float, ends: np.ndarray, alpha: float
) -> np.ndarray:
    """The ``rule_out`` of each look: the fixed design's MDE at N from the cases run so far (shape (looks,)).

    As :class:`gate.compare.sequential.Looks` computes it: :func:`gate.stats.detectable.design_mde` at the
    metric's level of the fixed analysis at ``alpha`` (α_final; one gated metric, so Holm's first step is α_k).
    """
    n = base.shape[0]
    level = metric_input(kind, base, head, margin).metric_policy(alpha).alpha
    return np.array([design_mde(metric_input(kind, base[:e], head[:e], margin), level=level, n=n) for e in ends])


def decide(
    rng: np.random.Generator, k: int, *, n: int, r: int, kind: str, drop: float, margin: float, b: int, share: float,
    fixed: bool = True, deterministic: bool = False,
) -> Outcome:  # fmt: skip
    """Simulate one PR and decide it with the fixed-N gate (unless ``fixed`` is False) and adaptively."""
    base, head = simulate(rng, n=n, r=r, kind=kind, drop=drop, deterministic=deterministic)
    order = rng.permutation(n)
    fixed_res = (
        analyze_metrics([metric_input(kind, base, head, margin)], alpha=ALPHA, seed=k, n_resamples=b)[0]
        if fixed
        else None
    )
    split = split_alpha(ALPHA, 1, share)
    d = (head.mean(axis=1) - base.mean(axis=1))[order]
    ends = batch_ends(n, max(1, round(BATCH_SHARE * n)), max(1, round(BATCH_SHARE * n)))
    mdes = rule_outs(kind, base[order], head[order], margin, ends, split.final)
    stop = stopping_point([d], [margin], split.sequential, ends, target_n=max(1, round(HORIZON_SHARE * n)),
                          rule_out=[mdes], early_pass=split.early_pass)  # fmt: skip
    if stop.decisions[0] != "continue":
        adaptive = "fail" if stop.decisions[0] == "fail" else "pass"
    else:
        final = analyze_metrics([metric_input(kind, base, head, margin)], alpha=split.final, seed=k, n_resamples=b)
        adaptive = final[0].status
    if fixed_res is None:
        return Outcome("", adaptive, stop.n / n, float("nan"), not stop.exhausted)
    return Outcome(fixed_res.status, adaptive, stop.n / n, fixed_res.mde, not stop.exhausted)


def run(prs: int, seed: int, **kw: object) -> list[Outcome]:
    """``prs`` simulated PRs of one setting, reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    return [decide(rng, k, **kw) for k in range(prs)]  # type: ignore[arg-type]


def rate_ci(hits: int, trials: int) -> str:
    """``"0.0450 [0.0330, 0.0610]"``: a share with its 95 % Wilson interval (statsmodels)."""
    low, high = proportion_confint(hits, trials, alpha=0.05, method="wilson")
    return f"{hits / trials:.4f} [{low:.4f}, {high:.4f}]"


def printed_mde(*, n: int, r: int, kind: str, b: int, margin: float = 1e-9) -> float:
    """Mean printed MDE of the fixed design over 40 A/A PRs (one metric: α′ = α_k; margin ≈ 0 by default: α_k = α;
    margin 0: α_k = 0.01)."""
    rng = np.random.default_rng(99)
    mdes = [
        analyze_metrics([metric_input(kind, *simulate(rng, n=n, r=r, kind=kind, drop=0.0), margin)], seed=k,
                        n_resamples=b)[0].mde
        for k in range(40)
    ]  # fmt: skip
    return float(np.mean(mdes))


def margin_zero(prs: int, b: int, share: float) -> None:
    """Part 5: a gated metric with margin 0 (``error_rate`` by default), whose look rules out the MDE at N."""
    split = split_alpha(ALPHA, 1, share)
    print("(5) margin 0 (α_k = 0.01; the non-inferiority look rules out max(m, the fixed design's MDE at N))")
    print("  (a) A/A false-fail rate, adaptive (target ≤ 0.05)")
    for n in (200, 1000):
        for kind, r in (("binary", 1), ("binary", 3), ("graded", 3)):
            out = run(prs, 5000 + n + r, n=n, r=r, kind=kind, drop=0.0, margin=0.0, b=b, share=share, fixed=False)
            fails = sum(o.adaptive == "fail" for o in out)
            early = sum(o.adaptive == "fail" and o.early for o in out)
            print(f"    N={n:4d} {kind:6s} R={r}: false-fail {rate_ci(fails, prs)} (early {early / prs:.4f}, "
                  f"bound {split.sequential:.4f})")  # fmt: skip
    print("  (b) power at the printed MDE: fixed vs adaptive on the same PRs (target: within 5 points)")
    for n in (200, 1000):
        for kind, r in (("binary", 1), ("graded", 3)):
            mde = printed_mde(n=n, r=r, kind=kind, b=b, margin=0.0)
            out = run(prs, 6000 + n + r, n=n, r=r, kind=kind, drop=mde, margin=0.0, b=b, share=share)
            fixed, adaptive = sum(o.fixed == "fail" for o in out), sum(o.adaptive == "fail" for o in out)
            print(f"    N={n:4d} {kind:6s} R={r} MDE={mde:.4f}: fixed {rate_ci(fixed, prs)}, adaptive "
                  f"{rate_ci(adaptive, prs)}, difference {(adaptive - fixed) / prs:+.3f}")  # fmt: skip
    print("  (c) no-change PR, binary, R = 1: median share of cases run, share stopped early, verdicts")
    for n in (200, 1000):
        for label, deterministic in (("deterministic (all d = 0)", True), ("stochastic (A/A, sampled)", False)):
            out = run(prs, 7000 + n, n=n, r=1, kind="binary", drop=0.0, margin=0.0, b=b, share=share,
                      deterministic=deterministic)  # fmt: skip
            verdicts = {v: sum(o.adaptive == v for o in out) / prs for v in ("pass", "inconclusive", "fail")}
            fixed = {v: sum(o.fixed == v for o in out) / prs for v in ("pass", "inconclusive", "fail")}
            print(f"    N={n:4d} {label}: median share {np.median([o.share for o in out]):.2f}, stopped early "
                  f"{rate_ci(sum(o.early for o in out), prs)}; adaptive pass/inconclusive/fail "
                  + "/".join(f"{v:.3f}" for v in verdicts.values()) + ", fixed "
                  + "/".join(f"{v:.3f}" for v in fixed.values()))  # fmt: skip
    print("  (d) clear regression Δ = −3 × printed MDE, binary, R = 1: median share of cases run, fail rate")
    for n in (200, 1000):
        mde = printed_mde(n=n, r=1, kind="binary", b=b, margin=0.0)
        out = run(prs, 8000 + n, n=n, r=1, kind="binary", drop=3 * mde, margin=0.0, b=b, share=share)
        fixed, adaptive = sum(o.fixed == "fail" for o in out), sum(o.adaptive == "fail" for o in out)
        print(f"    N={n:4d} Δ={-3 * mde:.4f}: median share {np.median([o.share for o in out]):.2f}, fail: fixed "
              f"{rate_ci(fixed, prs)}, adaptive {rate_ci(adaptive, prs)}")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    """Print the four targets' figures (``argv``: the options, default the command line's)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer PRs (smoke run)")
    parser.add_argument("--share", type=float, default=SEQUENTIAL_SHARE, help="share of α for the early looks")
    parser.add_argument("--only", default="123456", help="which parts to run, e.g. 23")
    args = parser.parse_args(argv)
    prs, b = (150, 500) if args.quick else (500, 1000)
    share = args.share
    split = split_alpha(ALPHA, 1, share)
    start = time.perf_counter()
    print(f"α = {ALPHA}, early fail looks at α_seq = {split.sequential:.4f}, early pass looks at β_seq = "
          f"{split.early_pass:.4f}, end at α_final = {split.final:.4f}, looks every {BATCH_SHARE:.0%} of N; "
          f"{prs} PRs per row, B = {b}")  # fmt: skip
    if "1" in args.only:
        print("(1) A/A false-fail rate, adaptive (target ≤ 0.05); margin ≈ 0 (the worst case) and 0.03")
        for margin in (1e-9, 0.03):
            for n in (50, 200, 1000):
                for kind in ("binary", "graded"):
                    for r in (1, 3):
                        out = run(prs, 1000 + n + r, n=n, r=r, kind=kind, drop=0.0, margin=margin, b=b, share=share,
                                  fixed=False)  # fmt: skip
                        fails = sum(o.adaptive == "fail" for o in out)
                        early = sum(o.adaptive == "fail" and o.early for o in out)
                        med = np.median([o.share for o in out])
                        print(f"    margin={margin:g} N={n:4d} {kind:6s} R={r}: false-fail {rate_ci(fails, prs)} "
                              f"(early {early / prs:.4f}, bound {split.sequential:.4f}), "
                              f"median share of cases {med:.2f}")  # fmt: skip
    if "2" in args.only:
        print("(2) power at the fixed design's printed MDE (margin ≈ 0): fixed vs adaptive on the same PRs")
        for n in (200, 1000):
            for kind in ("binary", "graded"):
                for r in (1, 3):
                    mde = printed_mde(n=n, r=r, kind=kind, b=b)
                    out = run(prs, 2000 + n + r, n=n, r=r, kind=kind, drop=mde, margin=1e-9, b=b, share=share)
                    fixed = sum(o.fixed == "fail" for o in out)
                    adaptive = sum(o.adaptive == "fail" for o in out)
                    print(f"    N={n:4d} {kind:6s} R={r} MDE={mde:.4f}: fixed {rate_ci(fixed, prs)}, "
                          f"adaptive {rate_ci(adaptive, prs)}, difference {(adaptive - fixed) / prs:+.3f}")  # fmt: skip
    if "3" in args.only or "4" in args.only:
        print("(3) median share of cases run and (4) verdict agreement, margin m = f × printed MDE, PRs with")
        print("    Δ = −3m (clear regression), 0 (no change), +m (improvement); away from the margin: all three")
        for n in (200, 1000):
            for kind in ("binary", "graded"):
                r = 1 if kind == "binary" else 3
                mde = printed_mde(n=n, r=r, kind=kind, b=b)
                for factor in (1.0, 1.5, 2.0):
                    m = factor * mde
                    cells, agree, total = [], 0, 0
                    for label, drop in (("regression", 3 * m), ("no change", 0.0), ("improvement", -m)):
                        out = run(prs // 2, 3000 + n, n=n, r=r, kind=kind, drop=drop, margin=m, b=b, share=share)
                        agree += sum(o.fixed == o.adaptive for o in out)
                        total += len(out)
                        cells.append(f"{label} {np.median([o.share for o in out]):.2f}")
                    print(f"    N={n:4d} {kind} R={r} m={factor:g}×MDE={m:.4f}: median share " + ", ".join(cells)
                          + f"; agreement {rate_ci(agree, total)}")  # fmt: skip
    if "5" in args.only:
        margin_zero(prs, b, share)
    if "6" in args.only:
        from adaptive_repeats_sim import repeats_rows

        repeats_rows(prs // 2, share)
    print(f"done in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
