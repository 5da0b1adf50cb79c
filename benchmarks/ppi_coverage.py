"""Coverage of the prediction-powered interval vs the judge-only one, with RAGTruth's human labels as hand labels.

Usage: python benchmarks/ppi_coverage.py [--data ../shared/data] [--draws 1000] [--run-size 300] [--seed 0]
       [--rule hallucinated_claim_rate]

The lexical judge (``gate.judges.LexicalJudge``) judges every RAGTruth answer of the shared subset; its call on an
answer is a gated metric's rule (``--rule``: ``hallucinated_claim_rate > 0`` by default, the rule ``judge-check``
uses for that metric, :mod:`gate.labels.rules`), and a person's label is RAGTruth's (an answer with a hallucinated
span is unfaithful). Each draw makes a "run" of ``--run-size`` answers (a seeded random subset), labels n = 20 or
50 of them (a simple random sample, or a stratified one by the judge's call with equal allocation and
Horvitz–Thompson weights, as ``rag-gate label --stratify``), and asks whether each 95 % interval covers the run's
true share of unfaithful answers:

- judge only: the judge's share over the run with Wilson's interval (what the judge alone says);
- labels only: the (weighted) share of the labelled answers;
- PPI++ (:func:`gate.stats.ppi.ppi_mean`): the judge's share corrected with the labels, power-tuned λ.

It also prints each rule's agreement with people on every answer, and the mean κ of a stratified sample of 20
weighted by 1/π and not, against the run's own. Each figure is printed with its Monte Carlo standard error
(sqrt(p(1 − p)/draws) for a coverage, SD/sqrt(draws) for a width). The datasets are non-commercial: they are read
from --data, never copied into the repository.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' helpers: judgeeval, perfdata, …
from judgeeval import load_ragtruth  # noqa: E402

from gate.judges import LexicalJudge  # noqa: E402
from gate.labels.agreement import BINARY_CLASSES, agreement  # noqa: E402
from gate.labels.rules import RULES, Rule  # noqa: E402
from gate.stats.ppi import classical_mean, judge_mean, ppi_mean  # noqa: E402


def judged(data: Path, rule: Rule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(human label, judge call by ``rule``, call by faithfulness < 1) of every RAGTruth answer with a call.

    1 = unfaithful; the faithfulness call is NaN where the judge found no claim.
    """
    judge = LexicalJudge()
    y, f, faith = [], [], []
    for case in load_ragtruth(data / "ragtruth-subset"):
        judgment = judge.judge(case.question, case.response, case.chunks)
        call = rule.call(float(getattr(judgment, rule.metric)))
        if call is not None:
            y.append(float(case.hallucinated))
            f.append(float(call))
            other = RULES["faithfulness"].call(judgment.faithfulness)
            faith.append(math.nan if other is None else float(other))
    return np.array(y), np.array(f), np.array(faith)


def rule_report(y: np.ndarray, calls: dict[str, np.ndarray]) -> None:
    """Each rule's agreement with people on every answer (the population figures)."""
    for name, f in calls.items():
        keep = ~np.isnan(f)
        a = agreement(y[keep].astype(int), f[keep].astype(int), BINARY_CLASSES, resamples=200)
        print(
            f"  {name:28} flags {int(f[keep].sum())} of {int(keep.sum())}: balanced accuracy "
            f"{a.balanced_accuracy.value:.3f}, κ {a.kappa.value:.3f}, sensitivity {a.sensitivity.value:.3f}, "
            f"specificity {a.specificity.value:.3f}"
        )


def weighting_report(y: np.ndarray, f: np.ndarray, draws: int, run_size: int, seed: int) -> None:
    """κ of a stratified sample of 20 over draws, weighted by 1/π and not, against the run's own κ."""
    rng = np.random.default_rng(seed)
    population, weighted, unweighted = [], [], []
    for _ in range(draws):
        run = rng.choice(len(y), size=run_size, replace=False)
        y_run, f_run = y[run].astype(int), f[run].astype(int)
        idx, pis = stratified(f_run.astype(float), 20, rng)
        population.append(agreement(y_run, f_run, BINARY_CLASSES, resamples=1).kappa.value)
        weighted.append(agreement(y_run[idx], f_run[idx], BINARY_CLASSES, weights=1 / pis, resamples=1).kappa.value)
        unweighted.append(agreement(y_run[idx], f_run[idx], BINARY_CLASSES, resamples=1).kappa.value)
    for name, values in (("the run's κ", population), ("weighted by 1/π", weighted), ("unweighted", unweighted)):
        v = np.array(values)[~np.isnan(values)]
        print(f"  {name:18} mean {v.mean():.3f} ± {v.std() / math.sqrt(len(v)):.3f} (MC SE), {len(v)} defined")


def stratified(f_run: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Equal allocation across the judge's two calls: indices and inclusion probabilities (π = n_h / N_h)."""
    picked, pis = [], []
    strata = [np.flatnonzero(f_run == v) for v in (0.0, 1.0)]
    sizes = [min(len(s), n // 2) for s in strata]
    sizes[0] += min(len(strata[0]) - sizes[0], n - sum(sizes))
    sizes[1] += n - sum(sizes)
    for members, size in zip(strata, sizes, strict=True):
        chosen = rng.choice(members, size=size, replace=False)
        picked.append(chosen)
        pis.append(np.full(size, size / len(members)))
    return np.concatenate(picked), np.concatenate(pis)


def simulate(y: np.ndarray, f: np.ndarray, n: int, design: str, draws: int, run_size: int, seed: int) -> dict:
    """Coverage and width of each interval over seeded draws of a run and its n labels."""
    rng = np.random.default_rng(seed)
    hits = {"judge only": [], "labels only": [], "PPI++": []}
    widths = {name: [] for name in hits}
    lambdas = []
    for _ in range(draws):
        run = rng.choice(len(y), size=run_size, replace=False)
        y_run, f_run = y[run], f[run]
        truth = y_run.mean()
        if design == "simple":
            idx, weights = rng.choice(run_size, size=n, replace=False), None
        else:
            idx, pis = stratified(f_run, n, rng)
            weights = 1 / pis
        estimates = {
            "judge only": judge_mean(f_run),
            "labels only": classical_mean(y_run[idx], weights=weights),
            "PPI++": ppi_mean(y_run[idx], f_run[idx], f_run, weights=weights),
        }
        lambdas.append(estimates["PPI++"].lam)
        for name, e in estimates.items():
            hits[name].append(e.low <= truth <= e.high)
            widths[name].append(e.high - e.low)
    return {
        name: (float(np.mean(hits[name])), float(np.mean(widths[name])), float(np.std(widths[name]) / math.sqrt(draws)))
        for name in hits
    } | {"lambda": float(np.mean(lambdas))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--run-size", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rule", choices=sorted(RULES), default="hallucinated_claim_rate", help="The judge's rule.")
    args = parser.parse_args()
    rule = RULES[args.rule]
    start = time.perf_counter()
    y, f, faith = judged(args.data, rule)
    print(
        f"RAGTruth subset: {len(y)} answers with a call by {rule.text}; human share unfaithful {y.mean():.3f}, "
        f"judge's share {f.mean():.3f} (judged in {time.perf_counter() - start:.0f} s)"
    )
    print("the judge against people on all answers, by rule:")
    rule_report(y, {rule.text: f, "faithfulness < 1": faith})
    print(
        f"\nκ of faithfulness < 1 from a stratified sample of 20 (equal allocation by that call, as `label` drew "
        f"before), runs of {args.run_size}, 500 draws:"
    )
    keep = ~np.isnan(faith)
    weighting_report(y[keep], faith[keep], 500, args.run_size, args.seed)
    print(
        f"\nruns of {args.run_size} answers, {args.draws} seeded draws each; coverage of the run's true share of "
        "unfaithful answers by each 95 % interval (± Monte Carlo SE), mean width (± MC SE)"
    )
    for design in ("simple", "stratified"):
        for n in (20, 50):
            found = simulate(y, f, n, design, args.draws, args.run_size, args.seed + n)
            print(f"  {design:10} n = {n:2}  (mean λ {found['lambda']:.2f})")
            for name in ("judge only", "labels only", "PPI++"):
                cover, width, width_se = found[name]
                se = math.sqrt(cover * (1 - cover) / args.draws)
                print(f"    {name:12} coverage {cover:.3f} ± {se:.3f}   width {width:.3f} ± {width_se:.3f}")


if __name__ == "__main__":
    main()
