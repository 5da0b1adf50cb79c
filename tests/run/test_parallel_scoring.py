"""Scoring on several processes: the same bytes as on one, and a worker that dies is retried or reported.

The bundled example (the SQuAD pair of predictions files) and a generated set are scored by ``rag-gate compare``
with ``--jobs 1`` and ``--jobs 2``: every scores.jsonl and report.json must be byte-identical. A worker process is
killed (SIGKILL) while ``rag-gate run --jobs 2`` scores: its chunks are scored again and the file equals the serial
one; workers killed over and over stop the run with exit 3, the predictions kept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import perfdata
import pytest
from helpers import compare

from gate.config import GatePolicy
from gate.scoring import PARALLEL_MIN, available_cores, pool, score_lines, use_processes

N_DEFAULT = len(GatePolicy().metrics)  # the metrics computed without `metrics:` (16 with hallucinated_claim_rate)

RAG_GATE = [sys.executable, "-m", "gate"]


def _outputs(root: Path, out: str) -> dict[str, bytes]:
    return {
        name: (root / out / name).read_bytes() for name in ("base/scores.jsonl", "head/scores.jsonl", "report.json")
    }


def test_bundled_example_scores_and_report_are_byte_identical_on_one_and_two_processes(squad_pair):
    serial, _ = compare(squad_pair.dir, "base.jsonl", "head.jsonl", "jobs-1", "--format", "json", "--jobs", "1")
    parallel, _ = compare(squad_pair.dir, "base.jsonl", "head.jsonl", "jobs-2", "--format", "json", "--jobs", "2")
    assert serial.exit_code == parallel.exit_code == 1, serial.output  # the example's head regresses
    one, two = _outputs(squad_pair.dir, "jobs-1"), _outputs(squad_pair.dir, "jobs-2")
    assert one["base/scores.jsonl"].count(b"\n") == 140 * N_DEFAULT  # every default metric, once per answer
    assert b'"claims"' in one["base/scores.jsonl"]  # the lexical judge ran
    assert one == two


@pytest.mark.slow
def test_generated_5000_cases_give_byte_identical_scores_and_report(tmp_path):
    perfdata.make_project(tmp_path, 5000)
    runs = {}
    for jobs in ("1", "2"):
        result, report = compare(
            tmp_path, "base-predictions.jsonl", "head-predictions.jsonl", f"jobs-{jobs}", "--format", "json",
            "--jobs", jobs,
        )  # fmt: skip
        assert result.exit_code in (0, 1), result.output
        runs[jobs] = _outputs(tmp_path, f"jobs-{jobs}")
    assert runs["1"]["base/scores.jsonl"].count(b"\n") == 5000 * N_DEFAULT
    assert runs["1"] == runs["2"]


def test_how_many_processes_score():
    lexical, llm = GatePolicy(), GatePolicy(judge={"name": "llm", "model": "m"})
    judge = object()  # a metric calls the judge
    assert use_processes(1, 10_000, lexical, judge) == 1
    assert use_processes(3, 10_000, lexical, judge) == 3  # asked for: obeyed, even on few answers
    assert use_processes(3, 2, lexical, judge) == 2  # never more workers than answers
    assert use_processes(4, 10_000, llm, judge) == 1  # an LLM judge stays on its threads
    assert use_processes(None, PARALLEL_MIN["judged"] - 1, lexical, judge) == 1  # too few to pay for the start
    assert use_processes(None, 10_000, lexical, judge) == min(available_cores(), 10_000)
    assert use_processes(None, 10_000, lexical, None) == 1  # judge-free metrics: 0.1 ms each, not worth it
    assert available_cores() == len(os.sched_getaffinity(0))


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _scoring_started(run: Path) -> bool:
    return any(p.stat().st_size > 0 for p in run.glob(".scores.jsonl.*.tmp"))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, bytes]:
    """A generated set of 1,000 cases and its base side's scores.jsonl scored on one process."""
    root = tmp_path_factory.mktemp("killed")
    perfdata.make_project(root, 1000)
    done = subprocess.run([*RAG_GATE, "run", "--config", "base.yml", "--out", "serial", "--jobs", "1"], cwd=root)
    assert done.returncode == 0
    return root, (root / "serial" / "scores.jsonl").read_bytes()


def _start(root: Path, out: str) -> subprocess.Popen:
    command = [*RAG_GATE, "run", "--config", "base.yml", "--out", out, "--jobs", "2", "--no-progress"]
    return subprocess.Popen(command, cwd=root, stderr=subprocess.PIPE, text=True)


def test_a_worker_killed_mid_scoring_is_replaced_and_nothing_is_lost(project):
    root, serial = project
    run = _start(root, "killed-once")
    deadline = time.monotonic() + 120
    while not (_scoring_started(root / "killed-once") and _children(run.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    victims = _children(run.pid)
    assert victims and run.poll() is None, "scoring ended before a worker could be killed"
    os.kill(victims[0], signal.SIGKILL)
    _, err = run.communicate(timeout=300)
    assert run.returncode == 0, err
    assert "a worker process died" in err
    assert (root / "killed-once" / "scores.jsonl").read_bytes() == serial


def test_workers_that_keep_dying_stop_the_run_with_exit_3_and_keep_the_predictions(project):
    root, _ = project
    run = _start(root, "killed-always")
    killed = set()
    while run.poll() is None:  # every worker, as soon as it exists
        for pid in _children(run.pid):
            if pid not in killed:
                killed.add(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.01)
    err = run.stderr.read()
    assert run.returncode == 3, err
    assert "a worker process died 3 times" in err and "the predictions are kept" in err
    out = root / "killed-always"
    assert (out / "predictions.jsonl").read_text().count("\n") == 1000
    assert not (out / "scores.jsonl").exists() and not list(out.glob(".scores.jsonl.*.tmp"))


def test_a_system_that_cannot_start_workers_scores_in_this_process(tmp_path, monkeypatch, caplog):
    import gate.scoring.pool
    from gate.config import load_config
    from gate.golden import load_golden
    from gate.predictions import load_predictions
    from gate.produce import make_judge
    from gate.scoring import score_all, score_lines

    config = load_config(perfdata.make_project(tmp_path, 40)[0])
    golden = load_golden(config.golden)
    table = {(p.id, p.repeat): p for p in load_predictions(config.pipeline.predictions)}
    judge = make_judge(config.policy)
    serial = score_all(golden, table, 1, config.policy, judge, jobs=1)

    def no_semaphores(*args):
        raise OSError("this platform lacks a functioning sem_open implementation")

    monkeypatch.setattr(gate.scoring.pool, "_pool", no_semaphores)
    assert score_lines(score_all(golden, table, 1, config.policy, judge, jobs=2)) == score_lines(serial)
    assert "no worker process can start here" in caplog.text and len(serial) == 40 * N_DEFAULT


def _running(pid: int) -> bool:
    """True while ``pid`` runs: not gone and not a zombie waiting for its new parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def test_scoring_workers_die_with_a_killed_rag_gate(project):
    root, _ = project
    run = _start(root, "gate-killed")
    deadline = time.monotonic() + 120
    while not (_scoring_started(root / "gate-killed") and len(_children(run.pid)) == 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = _children(run.pid)
    assert len(workers) == 2 and run.poll() is None, "scoring ended before rag-gate could be killed"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + 60  # a loaded machine; a dead worker left as a zombie (init reaps late) is dead
    while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [pid for pid in workers if _running(pid)]
    for pid in alive:  # clean up before failing
        os.kill(pid, signal.SIGKILL)
    assert not alive


def test_a_worker_freezes_what_it_keeps_and_collects_frozen_cycles_every_so_many_chunks(tmp_path, monkeypatch):
    """A worker's chunks give the serial rows; the judge's caches are frozen after each chunk (the collector's full
    passes no longer walk them) and a reference cycle left frozen is freed by the full pass every COLLECT_EVERY."""
    import gc
    import weakref

    from gate.config import load_config
    from gate.golden import load_golden
    from gate.judges import get_judge
    from gate.metrics import resolve
    from gate.predictions import load_predictions

    perfdata.make_project(tmp_path, 40)
    settings = load_config(tmp_path / "base.yml")
    policy = settings.policy
    table = {(p.id, p.repeat): p for p in load_predictions(settings.pipeline.predictions)}
    pairs = [(case, table[(case.id, 0)]) for case in load_golden(settings.golden)]
    metrics = [resolve(name) for name in policy.metrics]
    serial = list(pool.score_pairs(pairs, metrics, policy, get_judge(policy.judge), calls_judge=False))
    worker = {"metrics": metrics, "policy": policy, "judge": get_judge(policy.judge), "chunks": 0}
    monkeypatch.setattr(pool, "_WORKER", worker)
    monkeypatch.setattr(pool, "COLLECT_EVERY", 3)

    class Node:
        pass

    assert gc.get_freeze_count() == 0
    try:
        cycle = Node()
        cycle.self = cycle  # a cycle, garbage once dropped, frozen with the first chunk
        alive = weakref.ref(cycle)
        rows = pool._score_chunk(pairs[:10])
        del cycle
        assert gc.get_freeze_count() > 0  # what the chunk left (the judge's caches) is out of the collector's passes
        gc.collect()
        assert alive() is not None  # frozen: a full pass does not see it
        rows += pool._score_chunk(pairs[10:20])
        assert alive() is not None
        rows += pool._score_chunk(pairs[20:30])  # the third chunk: everything unfrozen and collected
        assert alive() is None
        rows += pool._score_chunk(pairs[30:])
        assert worker["chunks"] == 4
    finally:
        gc.unfreeze()
    same = [score_lines(r) for r in rows] == [score_lines(r) for r in serial]
    assert same  # the same rows as in one process, in order (as written: NaN equals NaN)


def test_workers_from_a_clean_server_for_many_predictions_give_the_same_bytes(squad_pair, monkeypatch):
    """From CLEAN_WORKERS_MIN predictions on, the workers are forked from a forkserver (their memory holds the
    judge's caches, not this process's predictions), not from this process; the files are the same bytes."""
    policy = GatePolicy()
    big = pool._pool(2, policy, True, pool.CLEAN_WORKERS_MIN)
    try:
        assert big.submit(os.getppid).result() != os.getpid()  # the server's child, not this process's
    finally:
        big.shutdown()
    if threading.active_count() == 1:  # else both come from the server (a fork copies one thread only)
        small = pool._pool(2, policy, True, pool.CLEAN_WORKERS_MIN - 1)
        try:
            assert small.submit(os.getppid).result() == os.getpid()
        finally:
            small.shutdown()
    serial, _ = compare(squad_pair.dir, "base.jsonl", "head.jsonl", "clean-1", "--format", "json", "--jobs", "1")
    monkeypatch.setattr(pool, "CLEAN_WORKERS_MIN", 1)
    served, _ = compare(squad_pair.dir, "base.jsonl", "head.jsonl", "clean-2", "--format", "json", "--jobs", "2")
    assert serial.exit_code == served.exit_code == 1, served.output
    assert _outputs(squad_pair.dir, "clean-1") == _outputs(squad_pair.dir, "clean-2")
