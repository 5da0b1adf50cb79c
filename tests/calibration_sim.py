"""Calibration of the gate by simulation: A/A false-fail rate, power, per-case FDR and the printed MDE.

Homogeneous model (Miller 2024 §3): case i has a true quality x_i ~ Beta(a, b) (its difficulty), the same on
both sides unless a drop is planted. Binary metric: each repeat passes with probability x_i. Graded metric:
each repeat scores x_i + N(0, judge_sd²) (unclipped, so a planted drop is exactly the true mean difference).

Heterogeneous model (per-case calls): easy, hard and flaky cases whose difficulty and noise
vary case by case — binary pass rates near 1 (easy), near 0 (hard) or anywhere in 0.2–0.8 (flaky); graded
scores clipped to [0, 1] with a per-case noise SD (stable 0.005–0.05, flaky 0.1–0.35), some flaky cases
failing outright in 20 % of runs (bimodal noise), optionally on a rubric grid of 0.25 (tied scores).

Must-pass rows (6): out-of-domain cases whose refusal probability is drawn per case, through ``gate.compare.compare``.

Every simulated PR is analysed with the real ``analyze_metrics`` / ``analyze_cases``; every rate is printed
with its 95 % Wilson interval. Run ``python benchmarks/calibration.py`` (about 15 minutes on a shared 2-core
machine; ``--quick``: about 3), which then prints the adaptive evaluation's rows (7) of ``tests/adaptive_sim.py``
(``--skip-adaptive``: not; ``--adaptive-only``: those alone). ``tests/stats/test_calibration.py`` runs a reduced
version in CI.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from statsmodels.stats.proportion import proportion_confint

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


def simulate_heterogeneous(
    rng: np.random.Generator, *, n: int, r: int, kind: str, rubric: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """A/A scores (base, head), each shape (n, r), from the heterogeneous model (module docstring).

    Cases: 45 % easy, 25 % hard, 30 % flaky. Binary pass rates U(0.97, 1), U(0, 0.03), U(0.2, 0.8). Graded:
    quality U(0.85, 1) / U(0.1, 0.5) / U(0.4, 0.85); noise SD U(0.005, 0.05) for easy and hard cases,
    U(0.1, 0.35) for flaky ones, a third of which instead fail outright (score U(0, 0.2)) in 20 % of runs.
    """
    group = rng.choice(3, size=n, p=[0.45, 0.25, 0.30])
    if kind == "binary":
        p = np.choose(group, [rng.uniform(0.97, 1, n), rng.uniform(0, 0.03, n), rng.uniform(0.2, 0.8, n)])
        return tuple((rng.random((n, r)) < p[:, None]).astype(float) for _ in range(2))  # type: ignore[return-value]
    x = np.choose(group, [rng.uniform(0.85, 1, n), rng.uniform(0.1, 0.5, n), rng.uniform(0.4, 0.85, n)])
    sd = np.where(group == 2, rng.uniform(0.1, 0.35, n), rng.uniform(0.005, 0.05, n))
    bimodal = (group == 2) & (rng.random(n) < 1 / 3)
    sides = []
    for _ in range(2):
        s = x[:, None] + sd[:, None] * rng.standard_normal((n, r))
        fail = bimodal[:, None] & (rng.random((n, r)) < 0.2)
        s = np.clip(np.where(fail, rng.uniform(0, 0.2, (n, r)), np.where(bimodal[:, None], x[:, None], s)), 0, 1)
        sides.append(np.round(s * 4) / 4 if rubric else s)
    return sides[0], sides[1]


def rate_ci(hits: int, trials: int) -> str:
    """``"0.0450 [0.0330, 0.0610]"``: a share with its 95 % Wilson interval (statsmodels)."""
    low, high = proportion_confint(hits, trials, alpha=0.05, method="wilson")
    return f"{hits / trials:.4f} [{low:.4f}, {high:.4f}]"


def case_false_list_count(
    *, kind: str, n: int, r: int, prs: int, seed: int, heterogeneous: bool = True, rubric: bool = False
) -> int:
    """Number of A/A PRs (of ``prs``) whose per-case analysis lists at least one case as regressed."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(prs):
        if heterogeneous:
            base, head = simulate_heterogeneous(rng, n=n, r=r, kind=kind, rubric=rubric)
        else:
            base, head = simulate(rng, n=n, r=r, kind=kind)
        cases = analyze_cases(metric_input(kind, kind, base, head, 0.03), q=0.10)
        hits += any(c.status == "regressed" for c in cases)
    return hits


def smallest_flaggable_change(kind: str, r: int, *, q: float = 0.10, stable: int = 50) -> float | None:
    """Smallest drop one case can be listed as regressed for, alone among ``stable`` unchanged cases.

    Binary: over every table k_base/r → k_head/r; graded: base runs all 1, head runs all 1 − δ on a 0.05 grid
    (the cleanest evidence). Returns None when no change can be flagged (e.g. R ≤ 2).
    """
    if kind == "binary":
        changes = sorted({(kb - kh) / r: (kb, kh) for kb in range(r + 1) for kh in range(kb)}.items())
    else:
        changes = [(d, d) for d in np.round(np.arange(0.05, 1.0001, 0.05), 2)]
    for drop, spec in changes:
        if kind == "binary":
            kb, kh = spec
            first_b, first_h = [1.0] * kb + [0.0] * (r - kb), [1.0] * kh + [0.0] * (r - kh)
        else:
            first_b, first_h = [1.0] * r, [1.0 - spec] * r
        base = np.array([first_b] + [[1.0] * r] * stable)
        head = np.array([first_h] + [[1.0] * r] * stable)
        if analyze_cases(metric_input(kind, kind, base, head, 0.03), q=q)[0].status == "regressed":
            return float(drop)
    return None


def metric_input(name: str, kind: str, base: np.ndarray, head: np.ndarray, margin: float) -> MetricInput:
    """A gated, higher-is-better metric without failures."""
    return MetricInput(
        name, kind, "higher", margin, True, base, head, np.zeros(base.shape, bool), np.zeros(head.shape, bool)
    )


def aa_fail_rate(
    *,
    n: int,
    r: int,
    prs: int,
    margin: float,
    seed: int,
    n_resamples: int,
    kinds: tuple[str, ...] = ("binary", "graded"),
) -> float:
    """Share of A/A PRs (one gated metric per kind, Holm across them) whose verdict is fail."""
    rng = np.random.default_rng(seed)
    fails = 0
    for k in range(prs):
        metrics = [metric_input(kind, kind, *simulate(rng, n=n, r=r, kind=kind), margin) for kind in kinds]
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


def must_pass_aa_rate(*, n_ood: int, r: int, prs: int, seed: int, stable: tuple[float, float], flaky: float) -> float:
    """Share of A/A PRs of a sampled generator that fail with the must-pass defaults (out-of-domain cases must-pass).

    ``n_ood`` out-of-domain cases; each refuses with its own probability, U(``stable``) for most and U(0.5, 0.95) for
    a share ``flaky`` of them; base and head draw their ``r`` repeats independently. Every PR goes through
    :func:`gate.compare.compare` (sides built in memory, the refusal metric gated, its scores given).
    """
    from gate.compare import compare
    from gate.config import GatePolicy
    from gate.models import GoldenCase, Prediction, Score
    from gate.runs import Side

    golden = [GoldenCase(f"o{i}", f"Out of scope {i}?", out_of_domain=True) for i in range(n_ood)]
    policy = GatePolicy(metrics=("refusal",), gated=("refusal",))

    def side(label: str, refused: np.ndarray) -> Side:
        table = {(c.id, k): Prediction(id=c.id, answer="I don't have that information." if refused[i, k] else "Paris.")
                 for i, c in enumerate(golden) for k in range(r)}  # fmt: skip
        scores = [Score(c.id, k, "refusal", float(refused[i, k])) for i, c in enumerate(golden) for k in range(r)]
        return Side(label, golden, table, r, scores, {"golden_sha256": "0" * 64})  # type: ignore[arg-type]

    rng = np.random.default_rng(seed)
    fails = 0
    for _ in range(prs):
        p = rng.uniform(*stable, size=n_ood)
        shaky = rng.random(n_ood) < flaky
        p[shaky] = rng.uniform(0.5, 0.95, size=int(shaky.sum()))
        base, head = (rng.random((n_ood, r)) < p[:, None] for _ in range(2))
        fails += compare(side("base", base), side("head", head), policy).verdict == "fail"
    return fails / prs


MUST_PASS_ROWS = ((12, 2, 0.0), (12, 3, 0.0), (12, 3, 0.3), (50, 3, 0.0), (50, 3, 0.3), (50, 5, 0.3))
"""(out-of-domain cases, R, flaky share) of the must-pass A/A rows. 50 cases with 30 % flaky at R = 3 failed 15 % of
A/A PRs under the former rule (every all-repeat flip certain at R ≥ 3); the exact test with Holm keeps ≤ α."""


def must_pass_rows(must_prs: int) -> None:
    """Print row (6): the must-pass A/A fail rate per setting of :data:`MUST_PASS_ROWS`."""
    print(
        f"(6) must-pass A/A (out-of-domain cases must-pass, sampled generator): fail rate over {must_prs} PRs, ≤ 0.05"
    )
    for n_ood, r, flaky in MUST_PASS_ROWS:
        rate = must_pass_aa_rate(n_ood=n_ood, r=r, prs=must_prs, seed=6000 + n_ood + r, stable=(0.9, 1.0), flaky=flaky)
        what = f"refusal p ~ U(0.9, 1){f', {flaky:.0%} flaky U(0.5, 0.95)' if flaky else ''}"
        print(f"    {n_ood} out-of-domain cases, R={r}, {what}: {rate_ci(round(rate * must_prs), must_prs)}")


def main(argv: Sequence[str] | None = None) -> None:
    """Print the measured rates for the issue's calibration grid, then the adaptive evaluation's (``adaptive_sim``).

    ``argv``: the options (default the command line's).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer PRs (smoke run)")
    parser.add_argument("--must-pass", action="store_true", help="only the must-pass A/A rows (6)")
    parser.add_argument("--skip-adaptive", action="store_true", help="leave out the adaptive evaluation's rows (7)")
    parser.add_argument("--adaptive-only", action="store_true", help="only the adaptive evaluation's rows (7)")
    parser.add_argument("--adaptive-parts", default="123456", help="which of the adaptive rows (7) to run, e.g. 23")
    args = parser.parse_args(argv)
    prs, b = (200, 500) if args.quick else (1000, 2000)
    start = time.perf_counter()
    if args.adaptive_only:
        adaptive_rows(args.quick, args.adaptive_parts)
        return
    if args.must_pass:
        must_pass_rows(prs // 4)
        print(f"done in {time.perf_counter() - start:.0f} s")
        return
    print(f"(1) metric-level A/A false-fail rate over {prs} PRs per setting, target ≤ {ALPHA} (95 % Wilson CI)")
    for margin in (1e-9, 0.03):
        for n in (50, 300):
            for r in (1, 3):
                rate = aa_fail_rate(n=n, r=r, prs=prs, margin=margin, seed=1000 + n + r, n_resamples=b)
                ci = rate_ci(round(rate * prs), prs)
                print(f"    binary + graded (Holm), margin={margin:g} N={n:3d} R={r}: fail rate {ci}")
    # Small golden sets are cheap: five times the PRs, so the interval is narrow enough to tell 5 % from 6 %.
    for n, r in ((30, 1), (30, 3)):
        rate = aa_fail_rate(n=n, r=r, prs=5 * prs, margin=1e-9, seed=2000 + r, n_resamples=b, kinds=("graded",))
        print(f"    graded alone, margin≈0 N={n} R={r}: fail rate {rate_ci(round(rate * 5 * prs), 5 * prs)}")
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
    case_prs = 60 if args.quick else 200
    print(
        f"(4) per-case A/A: share of PRs listing ≥ 1 (false) regressed case over {case_prs} PRs, "
        "target ≤ 0.10 (q = 0.10)"
    )
    settings = [("binary", False, False), ("graded", False, False), ("graded", False, True), ("binary", True, False)]
    for kind, homogeneous, rubric in settings + [("graded", True, False)]:
        model = "homogeneous" if homogeneous else "heterogeneous" + (", rubric grid 0.25" if rubric else "")
        for n, r in ((150, 3), (300, 3), (300, 5)) if not homogeneous else ((300, 3),):
            hits = case_false_list_count(
                kind=kind, n=n, r=r, prs=case_prs, seed=5000 + n + r, heterogeneous=not homogeneous, rubric=rubric
            )
            print(f"    {kind} ({model}) N={n} R={r}: {rate_ci(hits, case_prs)}")
    print("(5) smallest drop one case can be listed as regressed for, alone among 50 unchanged cases (q = 0.10)")
    for kind in ("binary", "graded"):
        cells = []
        for r in (2, 3, 5, 10):
            drop = smallest_flaggable_change(kind, r)
            cells.append(f"R={r}: {'never' if drop is None else f'{drop:.2f}'}")
        print(f"    {kind}: " + ", ".join(cells))
    must_pass_rows(prs // 4)
    print(f"done in {time.perf_counter() - start:.0f} s")
    if not args.skip_adaptive:
        adaptive_rows(args.quick, args.adaptive_parts)


def adaptive_rows(quick: bool, parts: str) -> None:
    """(7) The adaptive evaluation's calibration (``tests/adaptive_sim.py``, issue 33): its ``parts`` (of 1-6)."""
    from adaptive_sim import main as adaptive_main

    print("(7) adaptive evaluation (stopping early; tests/adaptive_sim.py, also benchmarks/adaptive_calibration.py)")
    adaptive_main([*(["--quick"] if quick else []), "--only", parts])


if __name__ == "__main__":
    main()
