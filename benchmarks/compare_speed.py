"""How long `compare` takes on the bundled example, in cases per second (scoring already done vs. rescoring).

Usage: python benchmarks/compare_speed.py [--repeats 3]
Prints the measured figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from gate.config import load_config
from gate.produce import run_side
from gate.sides import compare_runs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "squad"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="timed compare runs (best is reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        base = run_side(load_config(EXAMPLE / "base.yml"), tmp / "base")
        head = run_side(load_config(EXAMPLE / "head.yml"), tmp / "head")
        run_s = time.perf_counter() - start
        config = load_config(EXAMPLE / "base.yml")
        timings = []
        for i in range(args.repeats):
            start = time.perf_counter()
            outcome = compare_runs(base, head, tmp / f"report{i}")
            timings.append(time.perf_counter() - start)
        start = time.perf_counter()
        compare_runs(
            base / "predictions.jsonl",
            head / "predictions.jsonl",
            tmp / "rescored",
            config=config,
            golden=config.golden,
        )
        rescore_s = time.perf_counter() - start
    n = outcome.n_cases
    best = min(timings)
    print(f"cases: {n}, metrics: {len(outcome.metrics)}, verdict: {outcome.verdict}")
    print(f"run both sides (pipeline + scoring): {run_s:.2f} s")
    print(f"compare, scores reused: best {best:.2f} s of {args.repeats} = {n / best:.1f} cases/s")
    print(f"compare, predictions files (rescoring both sides): {rescore_s:.2f} s = {n / rescore_s:.1f} cases/s")


if __name__ == "__main__":
    main()
