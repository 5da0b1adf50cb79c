"""The measuring tools of benchmarks/perf.py (tests/measure.py: its table), at tiny sizes: the figures they measure, and
the table."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from measure import Row, child, child_tree, interleaved, markdown_table, read_case_means, reference_inputs


def test_child_reports_wall_time_peak_memory_and_exit_code():
    code = "import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(0.2); exit(1)"
    wall, rss, exit_code = child([sys.executable, "-c", code])
    assert exit_code == 1 and 0.2 <= wall < 10
    assert 200 * 2**20 <= rss < 600 * 2**20  # the child's own peak, not this process's
    held = bytearray(400 * 2**20)  # a big parent: Linux carries its high-water mark into a child forked from it
    held[::4096] = b"x" * len(held[::4096])
    assert child([sys.executable, "-c", "pass"])[1] < 200 * 2**20
    del held
    with pytest.raises(SystemExit, match="exited 2"):
        child([sys.executable, "-c", "exit(2)"])


def test_child_tree_counts_a_descendant_left_behind():
    """A grandchild that outlives the child (as rag-gate's forkserver and its scoring workers do) is reaped by the
    launcher: its CPU time and its peak memory are in the figures."""
    grandchild = (
        "import time; b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); t = time.process_time()\n"
        "while time.process_time() - t < 0.5: pass"
    )
    code = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {grandchild!r}])"
    wall, rss, exit_code, cpu = child_tree([sys.executable, "-c", code])
    assert exit_code == 0 and wall < 5  # the child's own time: it does not wait for the grandchild
    assert rss >= 300 * 2**20 and cpu >= 0.5


def test_interleaved_alternates_and_takes_the_median():
    calls, values = [], {"a": iter([5.0, 1.0, 3.0]), "b": iter([2.0, 9.0, 4.0])}
    medians = interleaved(3, a=lambda: calls.append("a") or next(values["a"]),
                          b=lambda: calls.append("b") or next(values["b"]))  # fmt: skip
    assert calls == ["a", "b"] * 3 and medians == {"a": 3.0, "b": 4.0}


def test_markdown_table_marks_goals_and_extrapolations():
    rows = [
        Row("compare N=5,000", "10 s", "100 s (scipy, measured)", 0.1, "≤ 0.2×", True),
        Row("compare N=100,000", "90 s", "2000 s (scipy, extrapolated linearly)", 0.045, "", None),
        Row("startup | help", "0.3 s", "0.1 s", 3.0, "≤ 2×", False),
    ]
    lines = markdown_table(rows).splitlines()
    assert lines[0] == "| measurement | rag-gate | reference | ratio | goal | met? |" and len(lines) == 5
    assert lines[2] == "| compare N=5,000 | 10 s | 100 s (scipy, measured) | 0.1× | ≤ 0.2× | yes |"
    assert lines[3].endswith("| ~0.045× | — | — |")
    assert lines[4] == "| startup \\| help | 0.3 s | 0.1 s | 3× | ≤ 2× | **no** |"


def test_reference_reads_case_means_over_repeats_without_failed_rows(tmp_path):
    rows = [
        ("q0", 0, "hit_rate@5", 1.0, None), ("q0", 1, "hit_rate@5", 0.0, None), ("q1", 0, "hit_rate@5", 1.0, None),
        ("q1", 1, "hit_rate@5", None, "prediction failed: x"), ("q0", 0, "latency_ms", 10.0, None),
        ("q0", 1, "latency_ms", 30.0, None),
    ]  # fmt: skip
    for side, shift in (("base", 0.0), ("head", 0.5)):
        (tmp_path / side).mkdir()
        with (tmp_path / side / "scores.jsonl").open("w") as out:
            for case, repeat, metric, value, error in rows:
                value = None if value is None else value + (shift if metric == "latency_ms" else 0)
                out.write(json.dumps({"id": case, "repeat": repeat, "metric": metric, "value": value, "error": error}))
                out.write("\n")
    assert read_case_means(tmp_path / "base") == {"hit_rate@5": {"q0": 0.5, "q1": 1.0}, "latency_ms": {"q0": 20.0}}
    inputs = {name: (base, head, binary) for name, base, head, binary in reference_inputs(tmp_path)}
    assert inputs["hit_rate@5"][2] and not inputs["latency_ms"][2]
    np.testing.assert_array_equal(inputs["latency_ms"][1] - inputs["latency_ms"][0], [0.5])
