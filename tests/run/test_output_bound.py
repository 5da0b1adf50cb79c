"""A pipeline's output reaches rag-gate's stderr only up to a bound per call, then one line counts what was left out.

The forwarding reads what is over the bound and drops it (memory stays bounded), cuts a line longer than
MAX_FORWARDED_LINE, never prints a secret in part across a cut, and a ``python:`` worker's budget is per call.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys

from helpers import write_jsonl

from gate.config import load_config
from gate.golden import load_golden
from gate.pipeline import run_python
from gate.redact import MASK
from gate.sandbox import MAX_FORWARDED_BYTES, MAX_FORWARDED_LINE, OutputBudget, Sandbox

SECRET = "sk-dummyjudgekey456"


def forwarded(program: str, budget: OutputBudget | None = None, secrets: tuple[str, ...] = ()) -> str:
    """What Sandbox.forward writes for the stdout of ``python -c program``."""
    sandbox = Sandbox.from_environ({"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": SECRET} if secrets else {})
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE)
    sink = io.StringIO()
    pump = sandbox.forward(proc.stdout, sink=sink, budget=budget)
    proc.wait()
    pump.join(timeout=60)
    return sink.getvalue()


def left_out(text: str) -> list[int]:
    return [int(n.replace(",", "")) for n in re.findall(r"… ([\d,]+) bytes of pipeline output left out", text)]


def test_lines_over_the_budget_are_dropped_and_counted_exactly():
    # 10 lines of 10 bytes and 5 bytes of the 11th fit a budget of 105 bytes; the rest (45 bytes) is left out
    program = "import sys\nfor i in range(15): sys.stdout.write(f'line {i:04d}\\n')"
    text = forwarded(program, OutputBudget(limit=105))
    lines = text.splitlines()
    assert lines[:11] == [*(f"line {i:04d}" for i in range(10)), "line  …"]  # its first 5 bytes, cut
    assert lines[11:] == [
        "rag-gate: … 45 bytes of pipeline output left out (at most 105 bytes forwarded per call, 16,384 per line)"
    ]


def test_gigantic_output_is_bounded_by_the_default_budget():
    # 64 MiB without a newline, then 2 MiB of short lines: about 1 MiB is forwarded, the rest counted
    program = (
        "import os, sys\nos.write(1, b'y' * (64 << 20))\nos.write(1, b'\\n')\n"
        "for i in range(1 << 16): sys.stdout.write(f'{i:031d}\\n')"
    )
    text = forwarded(program)
    total = (64 << 20) + 1 + (1 << 16) * 32
    assert len(text.encode()) < MAX_FORWARDED_BYTES + 1000
    assert text.startswith("y" * MAX_FORWARDED_LINE + " …\n")  # the long line: its first 16 KiB, then cut
    (dropped,) = left_out(text)
    lines = text.splitlines()[1:-1]  # whole lines of 32 bytes until the budget ran out exactly at one's end
    assert lines == [f"{i:031d}" for i in range((MAX_FORWARDED_BYTES - MAX_FORWARDED_LINE) // 32)]
    assert dropped == total - MAX_FORWARDED_LINE - 32 * len(lines)


def test_a_secret_across_the_cut_of_a_long_line_is_masked_never_printed_in_part():
    before = MAX_FORWARDED_LINE - 5  # the secret starts 5 bytes before the cut
    program = f"import sys\nsys.stdout.write('x' * {before} + '{SECRET}' + 'z' * 100000 + '\\n')"
    text = forwarded(program, secrets=(SECRET,))
    assert SECRET[:5] not in text and text.startswith("x" * before + MASK[:5])


PIPE = """
import os, sys
def answer(case):
    os.write(2, b"e" * (3 << 20))  # 3 MiB of stderr in each call, no newline
    print("done", case["id"])
    return {"answer": "a", "retrieved": []}
"""


def test_a_python_pipeline_gets_the_budget_per_call_and_each_call_s_rest_is_counted(tmp_path, capfd):
    (tmp_path / "pipe.py").write_text(PIPE)
    write_jsonl(tmp_path / "golden.jsonl", [{"id": f"q{i}", "question": "q"} for i in range(3)])
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'pipe:answer', concurrency: 1}\n")
    config = load_config(tmp_path / "rag-gate.yml")
    got = []
    run_python(config.pipeline, [(case, 0) for case in load_golden(config.golden)], got.append)
    assert [p.error for p in got] == [None, None, None]
    err = capfd.readouterr().err
    assert len(err.encode()) < 3 * (MAX_FORWARDED_LINE + 100) + 1000  # each call: 16 KiB of its one long line
    counts = left_out(err)  # one line per call; a call's last bytes may be read after the next call started
    assert len(counts) == 3 and sum(counts) == 3 * ((3 << 20) + len("done q0\n") - MAX_FORWARDED_LINE)
    assert err.count("e" * MAX_FORWARDED_LINE + " …\n") == 3
