import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import write_jsonl

from gate.config import load_config
from gate.errors import EvaluationError
from gate.golden import load_golden
from gate.pipeline import run_command, run_python, run_shell, substitute
from gate.sandbox import Sandbox

PIPELINE = """
import os, time
from pathlib import Path

CALLS = Path("calls.log")

def answer(case, *, suffix="!"):
    with CALLS.open("a") as f:
        f.write(case["id"] + "\\n")
    print("noise on stdout must not break the protocol")
    if case["id"] == "boom":
        raise ValueError("kaput")
    if case["id"] == "slow":
        time.sleep(60)
    if case["id"] == "crash":
        os._exit(7)
    if case["id"] == "flaky" and CALLS.read_text().count("flaky") == 1:
        raise RuntimeError("first call fails")
    return {"answer": case["question"] + suffix, "retrieved": [{"id": "d1", "text": "x", "score": 1.5}],
            "cost_usd": 0.001}
"""


@pytest.fixture
def side(tmp_path):
    (tmp_path / "rag.py").write_text(PIPELINE)
    ids = ["ok1", "boom", "slow", "crash", "flaky", "ok2"]
    write_jsonl(tmp_path / "golden.jsonl", [{"id": i, "question": f"q-{i}"} for i in ids])
    (tmp_path / "rag-gate.yml").write_text(
        textwrap.dedent("""
        golden: golden.jsonl
        pipeline:
          python: rag:answer
          options: {suffix: "?"}
          concurrency: 2
          timeout_s: 5
          retries: 1
    """)
    )
    return tmp_path


def test_python_adapter_isolates_failures(side):
    config = load_config(side / "rag-gate.yml")
    cases = load_golden(config.golden)
    got = {}
    run_python(config.pipeline, [(c, 0) for c in cases], lambda p: got.setdefault(p.id, p))
    assert got["ok1"].answer == "q-ok1?" and got["ok1"].error is None
    assert got["ok1"].retrieved[0].score == 1.5 and got["ok1"].cost_usd == 0.001
    for prediction in (got["ok1"], got["ok2"], got["flaky"]):  # timed: either latency or a worker's cold start
        assert (prediction.latency_ms is None) != (prediction.warmup_ms is None)
        assert (prediction.latency_ms or prediction.warmup_ms) >= 0
    assert got["boom"].error.startswith("ValueError: kaput (rag.py:")
    assert got["slow"].error == "timeout after 5 s"
    assert got["crash"].error == "pipeline process exited with code 7"
    assert got["flaky"].error is None and got["flaky"].answer == "q-flaky?"  # retried once
    calls = (side / "calls.log").read_text().split()
    assert calls.count("boom") == 2 and calls.count("flaky") == 2 and calls.count("ok2") == 1


ASYNC_PIPELINE = """
import asyncio
import sys

LOOPS = set()

async def answer(case):
    await asyncio.sleep(0)
    LOOPS.add(id(asyncio.get_running_loop()))
    if case["id"] == "exits":
        sys.exit(3)
    return {"answer": f"{case['question']} (loops so far: {len(LOOPS)})", "retrieved": [{"id": "d1", "text": "x"}]}
"""


def test_async_pipelines_are_awaited_on_one_loop_and_sys_exit_fails_only_its_case(tmp_path):
    (tmp_path / "rag.py").write_text(ASYNC_PIPELINE)
    write_jsonl(tmp_path / "golden.jsonl", [{"id": i, "question": f"q-{i}"} for i in ("a", "b", "exits", "c")])
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {python: 'rag:answer', concurrency: 1, retries: 0}\n"
    )
    config = load_config(tmp_path / "rag-gate.yml")
    got = {}
    run_python(config.pipeline, [(c, 0) for c in load_golden(config.golden)], lambda p: got.setdefault(p.id, p))
    assert [got[i].answer for i in ("a", "b", "c")] == [
        "q-a (loops so far: 1)",
        "q-b (loops so far: 1)",
        "q-c (loops so far: 1)",
    ]
    assert got["exits"].error.startswith("SystemExit: the pipeline called sys.exit(3) (rag.py:")


def test_each_workers_first_call_is_a_cold_start_recorded_apart_from_latency(tmp_path):
    """A pipeline that builds its index lazily on the first call (2 s): that call is no latency sample."""
    (tmp_path / "rag.py").write_text(
        textwrap.dedent("""
        import time
        INDEX = []

        def answer(case):
            if not INDEX:
                time.sleep(2)
                INDEX.append(1)
            return {"answer": "a", "retrieved": []}
        """)
    )
    write_jsonl(tmp_path / "golden.jsonl", [{"id": f"c{i}", "question": "q"} for i in range(6)])
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: rag:answer, concurrency: 1}\n")
    config = load_config(tmp_path / "rag-gate.yml")
    got = []
    run_python(config.pipeline, [(c, 0) for c in load_golden(config.golden)], got.append)
    first, *rest = got
    assert first.latency_ms is None and first.warmup_ms >= 2000
    assert all(p.warmup_ms is None and p.latency_ms is not None and p.latency_ms < 2000 for p in rest)
    row = first.to_dict()
    assert row["latency_ms"] is None and row["warmup_ms"] >= 2000  # predictions.jsonl keeps it apart


def test_python_adapter_reports_import_errors(side):
    (side / "rag.py").write_text("import no_such_module_here\n")
    config = load_config(side / "rag-gate.yml")
    with pytest.raises(EvaluationError, match="cannot import rag:answer"):
        run_python(config.pipeline, [(load_golden(config.golden)[0], 0)], lambda p: None)


def test_command_adapter(tmp_path):
    write_jsonl(tmp_path / "golden.jsonl", [{"id": "a", "question": "q"}])
    (tmp_path / "make.py").write_text(
        textwrap.dedent("""
        import json, sys
        golden, out, repeat = sys.argv[1:]
        with open(out, "w") as f:
            for line in open(golden):
                case = json.loads(line)
                f.write(json.dumps({"id": case["id"], "answer": "r" + repeat, "retrieved": []}) + "\\n")
    """)
    )
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline:\n  command: python make.py {golden} {predictions} {repeat} && echo '{x}'\n"
    )
    config = load_config(tmp_path / "rag-gate.yml")
    preds = list(run_command(config.pipeline, config.golden, [0, 1], 1, tmp_path))
    assert [(p.repeat, p.answer) for p in preds] == [(0, "r0"), (1, "r1")]
    assert all(p.latency_ms is not None for p in preds)
    assert (tmp_path / "command-output-1.jsonl").read_text().count('"answer": "r1"') == 1  # kept for inspection
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline:\n  command: echo '{oops' > {predictions}\n")
    config = load_config(tmp_path / "rag-gate.yml")
    with pytest.raises(
        EvaluationError, match="command wrote malformed predictions: .*command-output-0.jsonl:1: invalid JSON"
    ):
        list(run_command(config.pipeline, config.golden, [0], 1, tmp_path))
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline:\n  command: exit 4\n")
    config = load_config(tmp_path / "rag-gate.yml")
    with pytest.raises(EvaluationError, match="exited with 4"):
        list(run_command(config.pipeline, config.golden, [0], 1, tmp_path))


def test_command_placeholders_are_substituted_once_even_inside_a_substituted_path(tmp_path):
    """A checkout under a folder named ``{golden}x{predictions}y{repeat}``: the golden path is given as it is."""
    root = tmp_path / "ci{golden}x{predictions}y{repeat}"
    root.mkdir()
    write_jsonl(root / "golden.jsonl", [{"id": "a", "question": "q"}])
    (root / "make.py").write_text(
        textwrap.dedent("""
        import json, sys
        golden, out, repeat = sys.argv[1:]
        with open(out, "w") as f:
            for line in open(golden):
                case = json.loads(line)
                f.write(json.dumps({"id": case["id"], "answer": golden + "|" + repeat, "retrieved": []}) + "\\n")
    """)
    )
    (root / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline:\n  command: python make.py {golden} {predictions} {repeat}\n"
    )
    config = load_config(root / "rag-gate.yml")
    (pred,) = run_command(config.pipeline, config.golden, [3], 1, tmp_path)
    assert pred.error is None and pred.answer == f"{config.golden}|3"
    assert "ci{golden}x{predictions}y{repeat}" in pred.answer


def test_substitute_is_one_pass_and_leaves_other_braces():
    values = {"golden": "/g/{predictions}", "predictions": "/p/{golden}", "repeat": "{repeat}"}
    got = substitute("awk '{print}' {golden} > {predictions} # {repeat} {other}", values)
    assert got == "awk '{print}' /g/{predictions} > /p/{golden} # {repeat} {other}"


# ------------------------------------------------------------------ process groups: nothing outlives a timeout


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_dead(pid: int, seconds: float = 60.0) -> bool:
    """Poll until ``pid`` is dead; a loaded machine gets a generous deadline (only a failure waits that long)."""
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def read_pid(path: Path, seconds: float = 60.0) -> int:
    """The pid a shell wrote with ``echo $! > path``: poll until the line is complete (the file exists before the
    write lands, and a loaded machine can take long to get there)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n") and text.strip().isdigit():
            return int(text)
        time.sleep(0.05)
    raise AssertionError(f"{path}: no pid written within {seconds:.0f} s (got {text!r})")


def kill_quietly(*pids: int) -> None:
    """Clean-up in ``finally``: SIGKILL the processes a test started (by pid), whatever happened."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def pids_in(tmp_path: Path, *names: str) -> list[int]:
    """The pids recorded in ``names`` that exist (for clean-up: a file may never have been written)."""
    out = []
    for name in names:
        text = (tmp_path / name).read_text().strip() if (tmp_path / name).exists() else ""
        if text.isdigit():
            out.append(int(text))
    return out


def command_config(tmp_path, command: str, timeout_s: float, ids=("a", "b", "c")):
    write_jsonl(tmp_path / "golden.jsonl", [{"id": i, "question": f"q-{i}"} for i in ids])
    (tmp_path / "rag-gate.yml").write_text(
        f"golden: golden.jsonl\npipeline:\n  command: {json.dumps(command)}\n  timeout_s: {timeout_s}\n"
    )
    return load_config(tmp_path / "rag-gate.yml")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_command_timeout_kills_children_and_grandchildren(tmp_path):
    # the shell starts a background grandchild and a child shell, then hangs; both record their pids
    command = "sleep 1000 & echo $! > bg.pid; sh -c 'echo $$ > child.pid; exec sleep 1000'"
    config = command_config(tmp_path, command, timeout_s=1)  # 3 s for 3 cases: time to start both on a loaded box
    started = time.monotonic()
    try:
        rows = list(run_command(config.pipeline, config.golden, [0], 3, tmp_path))
        assert time.monotonic() - started < 120  # the hung command is killed, not waited for (1000 s)
        pids = [read_pid(tmp_path / name) for name in ("bg.pid", "child.pid")]
        assert all(wait_dead(pid) for pid in pids), [pid for pid in pids if alive(pid)]
        assert [(r.id, r.error) for r in rows] == [
            (i, "pipeline command timed out after 3 s (timeout_s 1 per case) before answering it")
            for i in ("a", "b", "c")
        ]
    finally:
        kill_quietly(*pids_in(tmp_path, "bg.pid", "child.pid"))


def gone(pid: int, seconds: float = 5.0) -> bool:
    """``kill(pid, 0)`` fails: the process is neither running nor a zombie nobody reaped (as ``kill -0`` sees it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reaping orphans needs Linux's child subreaper")
def test_killed_command_leaves_no_zombie_even_when_init_does_not_reap(tmp_path):
    """The killed group's processes are re-parented to rag-gate and reaped: none lingers as a zombie that
    ``kill -0`` reports alive (an init that never reaps, as in some containers and micro-VMs, would keep them)."""
    command = "sleep 1000 & echo $! > bg.pid; sh -c 'echo $$ > child.pid; exec sleep 1000'; true"
    config = command_config(tmp_path, command, timeout_s=2, ids=("a",))
    try:
        assert [r.error is not None for r in run_command(config.pipeline, config.golden, [0], 1, tmp_path)] == [True]
        pids = [read_pid(tmp_path / name) for name in ("bg.pid", "child.pid")]
        # reaped by rag-gate (this process is their subreaper): a zombie nobody reaps would stay "alive" for kill -0
        # however long we wait, so the generous deadline only absorbs a loaded machine
        assert all(gone(pid, 30) for pid in pids), [pid for pid in pids if not gone(pid, 0.1)]
    finally:
        kill_quietly(*pids_in(tmp_path, "bg.pid", "child.pid"))


def test_command_timeout_keeps_the_rows_written_before(tmp_path):
    rows_written = "".join(json.dumps({"id": i, "answer": f"ans {i}", "retrieved": []}) + "\\n" for i in ("c", "a"))
    command = (
        f'printf \'{rows_written}\' > {{predictions}}; printf \'{{"id": "b", "ans\' >> {{predictions}}; sleep 1000'
    )
    config = command_config(tmp_path, command, timeout_s=1)  # 3 s: the rows are written long before the kill
    got = {r.id: r for r in run_command(config.pipeline, config.golden, [2], 3, tmp_path)}
    assert got["a"].answer == "ans a" and got["c"].answer == "ans c" and got["a"].error is None
    assert got["a"].repeat == got["b"].repeat == 2
    assert got["b"].error.startswith("pipeline command timed out after 3 s")  # its row was cut by the kill


def test_command_leftover_background_process_is_killed_after_a_normal_exit(tmp_path):
    row = json.dumps({"id": "a", "answer": "x", "retrieved": []})
    command = f"(sleep 1000 & echo $! > bg.pid); echo '{row}' > {{predictions}}"
    config = command_config(tmp_path, command, timeout_s=120, ids=("a",))
    try:
        assert [r.answer for r in run_command(config.pipeline, config.golden, [0], 1, tmp_path)] == ["x"]
        assert wait_dead(read_pid(tmp_path / "bg.pid"))
    finally:
        kill_quietly(*pids_in(tmp_path, "bg.pid"))


SPAWNER = """
import subprocess, time
from pathlib import Path

def answer(case):
    child = subprocess.Popen(["sleep", "1000"])
    Path(case["id"] + ".pid").write_text(str(child.pid) + "\\n")
    time.sleep(100)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_python_adapter_timeout_kills_what_the_function_started(tmp_path):
    (tmp_path / "spawn.py").write_text(SPAWNER)
    write_jsonl(tmp_path / "golden.jsonl", [{"id": "a", "question": "q"}])
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline:\n  python: spawn:answer\n  timeout_s: 5\n  retries: 0\n  concurrency: 1\n"
    )  # 5 s: time for a loaded machine to start the worker and its child before the timeout
    config = load_config(tmp_path / "rag-gate.yml")
    got = []
    try:
        run_python(config.pipeline, [(load_golden(config.golden)[0], 0)], got.append)
        assert got[0].error == "timeout after 5 s"
        assert wait_dead(read_pid(tmp_path / "a.pid"))
    finally:
        kill_quietly(*pids_in(tmp_path, "a.pid"))


CLI_RUN = "import sys; from gate.cli import main; main(['run', '--config', sys.argv[1], '--out', sys.argv[2]])"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_sigterm_to_rag_gate_kills_the_command_group(tmp_path):
    config = command_config(tmp_path, "sleep 1000 & echo $! > bg.pid; wait", timeout_s=100)
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI_RUN, str(config.path), str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pid = read_pid(tmp_path / "bg.pid", seconds=120)  # the command runs: rag-gate has its handlers by now
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 3 and "interrupted" in err
        assert wait_dead(pid)
    finally:  # whatever failed above, neither rag-gate nor the sleep it started outlives the test
        proc.kill()
        proc.communicate()
        kill_quietly(*pids_in(tmp_path, "bg.pid"))


class _InterruptedAtForward(Sandbox):
    """A signal (SIGTERM → KeyboardInterrupt) delivered right after the shell started, before its output pump ran."""

    def forward(self, stream, sink=None):
        deadline = time.monotonic() + 60
        while not (
            Path(self.environ["PID_FILE"]).exists() and Path(self.environ["PID_FILE"]).read_text().endswith("\n")
        ):
            assert time.monotonic() < deadline, "the shell never wrote its background pid"
            time.sleep(0.02)
        raise KeyboardInterrupt


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_an_interrupt_between_start_and_pump_still_kills_the_shells_group(tmp_path):
    """The race the loaded-machine run found: the signal lands after Popen returned, before the wait began."""
    pid_file = tmp_path / "bg.pid"
    sandbox = _InterruptedAtForward(environ={"PID_FILE": str(pid_file)})
    try:
        with pytest.raises(KeyboardInterrupt):
            run_shell(f"sleep 1000 & echo $! > {pid_file}; wait", cwd=tmp_path, env=dict(os.environ), sandbox=sandbox)
        assert wait_dead(read_pid(pid_file))
    finally:
        kill_quietly(*pids_in(tmp_path, "bg.pid"))
