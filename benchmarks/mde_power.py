"""Power at the printed minimum detectable effect, through the real compare path (issue 30).

For each kind of metric (binary with one run per side, binary with repeats, graded with repeats) and golden-set
size: A/A comparisons give the printed MDE (the median of their ``MetricRow.mde``); then comparisons whose head has
a diffuse drop of exactly that MDE are run through :func:`gate.compare.compare` (the sides built in memory, the
scores given), and the share of them that fail the gate is the power. It should be 80 % (± 5 points).

Data (homogeneous model of benchmarks/calibration.py): case i has a true quality x_i ~ Beta(2, 1), the same on both
sides. Binary: each repeat passes with probability x_i (a sampled generator); the drop breaks cases — each case
fails on head in every repeat with probability q = δ / E[x], so the expected fall is δ. Graded: each repeat scores
x_i + N(0, 0.15²); the drop shifts head's scores by −δ. One gated metric, margin 0.03, α = 0.05.

Run ``python benchmarks/mde_power.py`` (about 10 minutes on a shared 2-core machine; ``--quick``: about 2).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from gate.compare import compare
from gate.config import GatePolicy
from gate.models import Chunk, GoldenCase, Prediction, Score
from gate.runs import Side

MARGIN = 0.03
JUDGE_SD = 0.15
MEAN_QUALITY = 2 / 3  # E[x] of Beta(2, 1)
METRIC = {"binary": "hit_rate@5", "graded": "answer_f1"}


def simulate(rng: np.random.Generator, *, kind: str, n: int, r: int, drop: float) -> tuple[np.ndarray, np.ndarray]:
    """(base, head) scores, each shape (n, r), with a diffuse drop of ``drop`` (see the module docstring)."""
    x = rng.beta(2.0, 1.0, size=n)
    if kind == "binary":
        base = (rng.random((n, r)) < x[:, None]).astype(float)
        head = (rng.random((n, r)) < x[:, None]).astype(float)
        broken = rng.random(n) < drop / MEAN_QUALITY
        head[broken] = 0.0
        return base, head
    base = x[:, None] + rng.normal(0, JUDGE_SD, (n, r))
    head = x[:, None] - drop + rng.normal(0, JUDGE_SD, (n, r))
    return base, head


def _side(label: str, golden: list[GoldenCase], values: np.ndarray, metric: str) -> Side:
    n, r = values.shape
    table = {(c.id, k): Prediction(id=c.id, answer="An answer.", retrieved=(Chunk(f"d{i}"),))
             for i, c in enumerate(golden) for k in range(r)}  # fmt: skip
    scores = [Score(c.id, k, metric, float(values[i, k])) for i, c in enumerate(golden) for k in range(r)]
    return Side(label, golden, table, r, scores, {"golden_sha256": "0" * 64})  # type: ignore[arg-type]


def verdicts(kind: str, n: int, r: int, drop: float, prs: int, seed: int) -> tuple[float, float]:
    """(share of ``prs`` comparisons that fail, median printed MDE) at a diffuse drop of ``drop``."""
    metric = METRIC[kind]
    policy = GatePolicy(metrics=(metric,), gated=(metric,), margins={metric: MARGIN})
    golden = [GoldenCase(f"q{i}", f"Question {i}?", (f"d{i}",), ("An answer.",)) for i in range(n)]
    rng = np.random.default_rng(seed)
    fails, printed = 0, []
    for _ in range(prs):
        base, head = simulate(rng, kind=kind, n=n, r=r, drop=drop)
        row = compare(_side("base", golden, base, metric), _side("head", golden, head, metric), policy).metrics[0]
        fails += row.status == "fail"
        printed.append(row.mde)
    return fails / prs, float(np.nanmedian(printed))


def main() -> None:
    """Print the power at the printed MDE for each kind."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer simulated PRs (wider intervals)")
    args = parser.parse_args()
    aa, prs = (10, 100) if args.quick else (30, 600)
    print(f"| kind | N | R | printed MDE (median of {aa} A/A) | power at it ({prs} PRs, 95 % Wilson) |")
    print("|---|---:|---:|---:|---|")
    rows = [("binary", 30, 1), ("binary", 100, 1), ("binary", 500, 1), ("binary", 100, 3), ("graded", 100, 3)]
    for k, (kind, n, r) in enumerate(rows):
        start = time.perf_counter()
        _, mde = verdicts(kind, n, r, 0.0, aa, seed=100 + k)
        power, _ = verdicts(kind, n, r, mde, prs, seed=200 + k)
        low, high = proportion_confint(round(power * prs), prs, method="wilson")
        took = time.perf_counter() - start
        print(f"| {kind} | {n} | {r} | {mde:.3f} | {power:.3f} [{low:.3f}, {high:.3f}] ({took:.0f} s) |", flush=True)


if __name__ == "__main__":
    main()
