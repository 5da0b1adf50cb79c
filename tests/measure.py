"""The measuring tools of ``benchmarks/perf.py``: its table, child processes timed with their peak memory, interleaved
medians, and the per-case means its scipy reference reads. Here, beside the tests, so that tests/test_perf_benchmark.py
tests them without importing benchmark code."""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


# ------------------------------------------------------------------------------------------------ the table
@dataclass(frozen=True)
class Row:
    """One line of the table: a measurement, both figures, their ratio, the goal and whether it is met."""

    measurement: str
    ours: str
    reference: str
    ratio: float | None = None
    """rag-gate's figure / the reference's (None: no ratio)."""
    goal: str = ""
    met: bool | None = None
    """None: no goal on this row (or not measurable here)."""


def ratio_text(ratio: float | None, approx: bool = False) -> str:
    """``0.12×`` (``~0.12×`` when approximate); ``—`` for None."""
    if ratio is None or not np.isfinite(ratio):
        return "—"
    return f"{'~' if approx else ''}{ratio:.3g}×"


def markdown_table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table (columns: measurement, rag-gate, reference, ratio, goal, met?)."""
    lines = ["| measurement | rag-gate | reference | ratio | goal | met? |", "|---|---|---|---|---|---|"]
    for row in rows:
        approx = "extrapolated" in row.reference
        met = "—" if row.met is None else ("yes" if row.met else "**no**")
        cells = (row.measurement, row.ours, row.reference, ratio_text(row.ratio, approx), row.goal or "—", met)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def seconds(value: float) -> str:
    """A duration for the table: ``0.123 s``, ``12.3 s``."""
    return f"{value:.3g} s" if value < 100 else f"{value:.0f} s"


def megabytes(value: int) -> str:
    """Bytes as ``123 MB``."""
    return f"{value / 2**20:.0f} MB"


# ------------------------------------------------------------------------------------------------ measuring
LAUNCHER = """
import ctypes, os, resource, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphaned descendants are reparented here
start = time.perf_counter()
code = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL)
wall = time.perf_counter() - start
while True:  # reap what the child left (a forkserver and its workers exit once the child has)
    try:
        os.wait()
    except ChildProcessError:
        break
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as out:
    out.write(f"{wall} {usage.ru_maxrss} {code} {usage.ru_utime + usage.ru_stime}")
"""
"""Runs the measured command as its only child; writes (wall seconds, peak RSS in KiB, exit code, CPU seconds).

The peak RSS is ``RUSAGE_CHILDREN``'s ``ru_maxrss`` of this small launcher: Linux keeps the high-water mark of the
memory a process had before ``exec``, so a child forked straight from this benchmark (which holds the scipy
reference's arrays) would report at least the benchmark's own RSS. It is the largest of the child's and of every
descendant's (each process's own peak, not their sum), and the CPU time (user + system) is the whole tree's: the
launcher is a child subreaper, so descendants orphaned by their parent's exit (``rag-gate run``'s forkserver, which
reaps the scoring workers) are reaped here too.
"""


def child(cmd: Sequence[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """Run one child process; return (wall seconds, its peak RSS in bytes, its exit code), through :data:`LAUNCHER`."""
    return child_tree(cmd, cwd, env)[:3]


def child_tree(
    cmd: Sequence[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[float, int, int, float]:
    """:func:`child`, and the CPU seconds (user + system) of the child and all its descendants."""
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile() as err:
        result = Path(tmp) / "result"
        launcher = subprocess.run([sys.executable, "-c", LAUNCHER, str(result), *cmd], cwd=cwd, env=env, stderr=err)
        if launcher.returncode or not result.exists():
            raise SystemExit(f"the launcher of {' '.join(cmd)} exited {launcher.returncode}")
        wall, rss, code, cpu = result.read_text().split()
        if int(code) not in (0, 1):
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd)} exited {code}:\n{err.read().decode(errors='replace')[-3000:]}")
    return float(wall), int(rss) * 1024, int(code), float(cpu)


def runs_at(n: int, runs: int) -> int:
    """Runs at size n: one above 50,000 cases (a single run takes minutes there), else ``runs``."""
    return 1 if n > 50_000 else runs


def median_of(runs: int) -> str:
    """``median of 3`` or ``1 run``, for row labels."""
    return f"median of {runs}" if runs > 1 else "1 run"


def interleaved(runs: int, **measures: Callable[[], float]) -> dict[str, float]:
    """Run each measure ``runs`` times, alternating between them; the median of each.

    Each run starts from a collected heap (``gc.collect()``, not timed): no measure pays for a pass of the cyclic
    garbage collector owed to the objects the measure before it made.
    """
    out: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        for name, measure in measures.items():
            gc.collect()
            out[name].append(measure())
    return {name: statistics.median(values) for name, values in out.items()}


# ------------------------------------------------------------------------------------------------ case means
def read_case_means(run: Path) -> dict[str, dict[str, float]]:
    """metric → case id → mean of the case's finite values over the repeats (the reference's input)."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with (run / "scores.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if row.get("value") is not None and not row.get("error"):
                sums[row["metric"]][row["id"]].append(row["value"])
    return {m: {i: float(np.mean(v)) for i, v in cases.items()} for m, cases in sums.items()}


def reference_inputs(root: Path) -> list[tuple[str, np.ndarray, np.ndarray, bool]]:
    """(metric, base case means, head case means, binary) over the cases both sides scored."""
    from gate.metrics import resolve

    base, head = read_case_means(root / "base"), read_case_means(root / "head")
    out = []
    for metric in sorted(base):
        ids = sorted(base[metric].keys() & head.get(metric, {}).keys())
        b = np.array([base[metric][i] for i in ids])
        h = np.array([head[metric][i] for i in ids])
        out.append((metric, b, h, resolve(metric).spec.kind == "binary"))
    return out
