"""Reading and writing run files: the msgspec paths against the plain json / jsonschema paths they replaced.

Usage: python benchmarks/io_speed.py [--n 5000] [--repeats 3] [--runs 3]
Prints the measured figures (best of ``--runs``, CPU seconds of this process); asserts nothing. The data are
``tests/perfdata.py``'s synthetic run directories (N cases × R repeats, 15 metrics):

1. ``gate.jsonl.parse_json`` over every line of predictions.jsonl against ``json.loads``.
2. ``gate.jsonl.scan_rows`` of scores.jsonl into ``gate.runs.ScoreRow`` against parsing each line with
   ``parse_json`` and then checking it with ``gate.jsonl.validate`` (the schema).
3. ``Comparison.to_json`` (report.json's text, msgspec's encoder) against ``json.dumps`` of ``to_dict`` (which
   is ``dataclasses.asdict`` with NaN cleaned), indented.
4. ``gate.jsonl.validate`` of every golden.jsonl row (the schema compiled by fastjsonschema; jsonschema only
   explains a row it refuses) against jsonschema's validator alone, and the import time of each library: what
   CONTRIBUTING's dependency notes cite for keeping both.

The docstrings of ``parse_json``, ``scan_rows`` and ``to_json_text`` cite this benchmark.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' helpers: judgeeval, perfdata, …

from perfdata import make  # noqa: E402

from gate.config import load_config  # noqa: E402
from gate.jsonl import parse_json, scan_rows, schema_validator, validate  # noqa: E402
from gate.runs import ScoreRow  # noqa: E402
from gate.sides import compare_runs  # noqa: E402


def best(work: Callable[[], object], runs: int) -> float:
    """The smallest CPU time of ``runs`` calls of ``work``, in seconds."""
    times = []
    for _ in range(runs):
        start = time.process_time()
        work()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=5000, help="cases")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per case")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per measurement (the best is reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config, base, head = make(Path(tmp), args.n, args.repeats)
        predictions = base / "predictions.jsonl"
        lines = predictions.read_text(encoding="utf-8").splitlines()
        fast = best(lambda: [parse_json(line, predictions, k) for k, line in enumerate(lines, 1)], args.runs)
        slow = best(lambda: [json.loads(line) for line in lines], args.runs)
        print(f"parse_json, {len(lines):,} lines of predictions.jsonl: {fast:.2f} s; json.loads: {slow:.2f} s")

        scores = base / "scores.jsonl"
        score_lines = scores.read_text(encoding="utf-8").splitlines()

        def parse_then_validate() -> None:
            for k, line in enumerate(score_lines, 1):
                validate(parse_json(line, scores, k), "score", scores, k)

        fast = best(lambda: list(scan_rows(scores, ScoreRow, "score")), args.runs)
        slow = best(parse_then_validate, args.runs)
        print(
            f"scan_rows, {len(score_lines):,} rows of scores.jsonl: {fast:.2f} s; parse_json + validate: {slow:.2f} s"
        )  # noqa: E501

        comparison = compare_runs(base, head, Path(tmp) / "out", config=load_config(config))
        text = comparison.to_json()
        fast = best(comparison.to_json, args.runs)
        slow = best(lambda: json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False), args.runs)
        size = len(text.encode("utf-8")) / 1e6
        print(f"report.json ({size:.1f} MB): Comparison.to_json {fast:.2f} s; json.dumps(to_dict()): {slow:.2f} s")

        golden = Path(tmp) / "golden.jsonl"
        cases = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines()]
        fast = best(lambda: [validate(case, "golden", golden, k) for k, case in enumerate(cases, 1)], args.runs)
        slow = best(lambda: [schema_validator("golden").validate(case) for case in cases], args.runs)
        print(f"golden.jsonl, {len(cases):,} rows: validate (fastjsonschema) {fast:.3f} s; jsonschema {slow:.3f} s")
        for module in ("fastjsonschema", "jsonschema"):
            print(f"import {module}: {import_seconds(module) * 1000:.0f} ms (a fresh interpreter, best of 10)")


def import_seconds(module: str) -> float:
    """Wall time of ``import module`` in a fresh interpreter, best of 10 (``python -X importtime``'s cumulative)."""
    times = []
    for _ in range(10):
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        last = [line for line in done.stderr.splitlines() if line.rstrip().endswith(f"| {module}")][-1]
        times.append(int(last.split("|")[1]) / 1e6)
    return min(times)


if __name__ == "__main__":
    main()
