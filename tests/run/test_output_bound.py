"""A pipeline's output reaches rag-gate's stderr only up to a bound per call, then one line counts what was left out.

The forwarding reads what is over the bound and drops it (memory stays bounded), cuts a line longer than
MAX_FORWARDED_LINE, never prints a secret in part across a cut, and a ``python:`` worker's budget is per call:
each call's count is written once, right after that call's output and before the call returns, however slowly
rag-gate's stderr is read; a command's too, though a process that left its group keeps the output open.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import write_jsonl

from gate.config import load_config
from gate.golden import load_golden
from gate.pipeline import run_python, run_shell
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
    assert left_out(err) == [(3 << 20) + len("done q0\n") - MAX_FORWARDED_LINE] * 3  # each call's own, once
    assert err.count("e" * MAX_FORWARDED_LINE + " …\n") == 3


def note(n: int) -> str:
    """The line that counts ``n`` bytes left out under the default budget."""
    limits = "at most 1,048,576 bytes forwarded per call, 16,384 per line"
    return f"rag-gate: … {n:,} bytes of pipeline output left out ({limits})"


TWO_LONG_LINES = f"""
import sys
def answer(case):
    n = int(case["id"][1:]) + 1
    for long in ("a", "b"):  # two lines too long: 100 n + 1 bytes of each left out (the newline with them)
        sys.stderr.write(long * ({MAX_FORWARDED_LINE} + 100 * n) + "\\n")
    return {{"answer": "a", "retrieved": []}}
"""


@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="shrinks a pipe with F_SETPIPE_SZ (Linux)")
def test_each_call_s_count_follows_its_output_before_the_call_returns_even_through_a_slow_stderr(tmp_path, monkeypatch):
    """The race a loaded machine showed: a call's last bytes counted with the next call, the last count written late.

    rag-gate's stderr here is a real pipe of 4 KiB read 1 KiB at a time, slowly (a CI log under load): forwarding
    a call's 16 KiB lines takes far longer than the worker takes to answer and get the next case.
    """
    (tmp_path / "pipe.py").write_text(TWO_LONG_LINES)
    write_jsonl(tmp_path / "golden.jsonl", [{"id": f"q{i}", "question": "q"} for i in range(3)])
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'pipe:answer', concurrency: 1}\n")
    config = load_config(tmp_path / "rag-gate.yml")
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    slow = os.fdopen(write_end, "w", encoding="utf-8")
    chunks: list[bytes] = []

    def read_slowly() -> None:
        while chunk := os.read(read_end, 1024):
            chunks.append(chunk)
            time.sleep(0.005)  # a slow reader, not a synchronisation: nothing waits for it

    reader = threading.Thread(target=read_slowly)
    reader.start()
    try:
        monkeypatch.setattr(sys, "stderr", slow)
        got = []
        run_python(config.pipeline, [(case, 0) for case in load_golden(config.golden)], got.append)
    finally:
        monkeypatch.setattr(sys, "stderr", sys.__stderr__)  # what is written from now on goes elsewhere
        slow.close()
        reader.join(timeout=60)
        os.close(read_end)
    assert [p.error for p in got] == [None, None, None]
    expected = []
    for n in (1, 2, 3):
        expected += ["a" * MAX_FORWARDED_LINE + " …", "b" * MAX_FORWARDED_LINE + " …", note(2 * (100 * n + 1))]
    assert b"".join(chunks).decode().splitlines() == expected  # each count once, after its call, before the return


PARTIAL_LAST_LINE = """
def answer(case):
    print("working on", case["id"])
    print("done with", case["id"], end="")  # no newline: stays in the worker's buffer unless flushed
    return {"answer": "a", "retrieved": []}
"""


def test_a_call_s_last_line_without_a_newline_is_shown_with_its_call(tmp_path, capfd):
    (tmp_path / "pipe.py").write_text(PARTIAL_LAST_LINE)
    write_jsonl(tmp_path / "golden.jsonl", [{"id": f"q{i}", "question": "q"} for i in range(3)])
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'pipe:answer', concurrency: 1}\n")
    config = load_config(tmp_path / "rag-gate.yml")
    run_python(config.pipeline, [(case, 0) for case in load_golden(config.golden)], lambda p: None)
    assert capfd.readouterr().err.splitlines() == [
        line for i in range(3) for line in (f"working on q{i}", f"done with q{i}")
    ]


ESCAPING_WRITER = """
import os, sys, time
sys.stdout.write("z" * 2_000_000 + "\\n")
sys.stdout.flush()
ready, told = os.pipe()
child = os.fork()
if child == 0:  # leaves the shell's process group, keeps the command's output open
    os.setsid()
    os.write(told, b"x")
    time.sleep(120)
    os._exit(0)
os.read(ready, 1)
open(sys.argv[1], "w").write(str(child))
"""


def test_a_command_s_count_is_written_before_it_returns_though_a_process_that_left_its_group_holds_its_output(
    tmp_path, capfd
):
    (tmp_path / "writer.py").write_text(ESCAPING_WRITER)
    pid_file = tmp_path / "escaped.pid"
    try:
        code = run_shell(
            f"{sys.executable} writer.py {pid_file}",
            cwd=tmp_path,
            env=dict(os.environ),
            sandbox=Sandbox.from_environ({}),
        )
        err = capfd.readouterr().err
    finally:
        if pid_file.exists():
            pid = int(pid_file.read_text())
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # re-parented to rag-gate, its subreaper
                os.waitpid(pid, 0)
    assert code == 0
    assert err.splitlines() == ["z" * MAX_FORWARDED_LINE + " …", note(2_000_001 - MAX_FORWARDED_LINE)]
