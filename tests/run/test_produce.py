"""One run directory, one run (DESIGN §8): the lock, resume only of the same code, compare and merge refusing runs
that no longer match; the row key comes from the job; workers die with rag-gate; any return value is sendable.

Tests that wait on processes poll with generous deadlines and kill what they started in ``finally``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import git, write_jsonl

from gate.cli import main
from gate.config import PipelineSpec, load_config
from gate.errors import InputError
from gate.files import OWNER_FILE, locked_directory
from gate.fingerprint import code_fingerprint
from gate.golden import load_golden
from gate.pipeline import run_python
from gate.produce import run_side
from gate.shards import merge_runs
from gate.sides import _load_side

DEADLINE_S = 90.0

# Each call records its worker's pid and the pid of a child it starts, then waits for the file `hold` (never, unless
# the test creates it): a call in flight for as long as the test wants.
HOLDING = """
import os, subprocess, time
from pathlib import Path

def answer(case, hold="never"):
    child = subprocess.Popen(["sleep", "600"])
    Path(f"child-{os.getpid()}.pid").write_text(str(child.pid))
    Path(f"worker-{os.getpid()}.pid").write_text(str(os.getpid()))
    deadline = time.monotonic() + 600
    while not Path(hold).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child.kill()
    child.wait()
    return {"answer": "held " + case["question"], "retrieved": [{"id": "d1", "text": "t"}]}
"""

VERSIONED = """
from pathlib import Path

def answer(case):
    with open("calls.log", "a") as log:
        log.write(case["id"] + "\\n")
    return {"answer": "VERSION " + case["question"], "retrieved": [{"id": "d1", "text": "t"}]}
"""


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_until(condition, seconds: float = DEADLINE_S) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def pids(folder: Path, prefix: str) -> list[int]:
    return [int(p.read_text()) for p in folder.glob(f"{prefix}-*.pid") if p.read_text().strip()]


def kill_all(proc: subprocess.Popen | None, *pid_lists: list[int]) -> None:
    """Kill what a test started (rag-gate, its workers and their children), whatever happened."""
    if proc is not None and proc.poll() is None:
        proc.kill()
    if proc is not None:
        proc.wait(timeout=60)
    for pid in (p for pids_ in pid_lists for p in pids_):
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def holding_config(tmp_path: Path, concurrency: int = 1) -> Path:
    (tmp_path / "holding.py").write_text(HOLDING)
    path = tmp_path / "holding.yml"
    path.write_text(
        "golden: golden.jsonl\n"
        f"pipeline: {{python: 'holding:answer', concurrency: {concurrency}, timeout_s: 900, retries: 0, "
        f"options: {{hold: {json.dumps(str(tmp_path / 'release'))}}}}}\n"
        "metrics: [hit_rate@5]\n"
    )
    return path


def start_run(config: Path, out: Path, log: Path) -> subprocess.Popen:
    with log.open("w") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "gate", "run", "--config", str(config), "--out", str(out), "--no-progress"],
            stdout=sink,
            stderr=sink,
        )


def precomputed_config(tmp_path: Path, name: str = "pre.yml") -> Path:
    ids = ("q1", "q2", "q3", "q4")
    rows = [{"id": i, "answer": f"a {i}", "retrieved": [{"id": "d1", "text": "t"}]} for i in ids]
    write_jsonl(tmp_path / "pre.jsonl", rows)
    text = "golden: golden.jsonl\npipeline: {predictions: pre.jsonl}\nmetrics: [hit_rate@5, mrr]\n"
    (tmp_path / name).write_text(text)
    return tmp_path / name


# ------------------------------------------------------------------------------------------------ the lock


def test_a_second_run_into_a_directory_in_use_is_refused_naming_the_holder(tmp_path, tiny_golden):
    out = tmp_path / "shared"
    proc = start_run(holding_config(tmp_path), out, tmp_path / "a.log")
    try:
        assert wait_until(lambda: bool(pids(tmp_path, "worker"))), (tmp_path / "a.log").read_text()
        second = CliRunner().invoke(main, ["run", "--config", str(precomputed_config(tmp_path)), "--out", str(out)])
        assert second.exit_code == 2
        assert f"{out} is in use by another rag-gate run (pid {proc.pid} on host" in second.stderr
        assert not (out / "predictions.previous-1.jsonl").exists()  # the second run touched nothing
        (tmp_path / "release").touch()
        assert proc.wait(timeout=DEADLINE_S) == 0, (tmp_path / "a.log").read_text()
    finally:
        (tmp_path / "release").touch()
        kill_all(proc, pids(tmp_path, "worker"), pids(tmp_path, "child"))
    manifest = json.loads((out / "manifest.json").read_text())
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert manifest["config"].endswith("holding.yml") and manifest["counts"]["predictions"] == 4
    assert sorted(r["id"] for r in rows) == ["q1", "q2", "q3", "q4"]
    assert all(r["answer"].startswith("held") for r in rows)
    assert not (out / OWNER_FILE).exists()  # released: the next run may use the directory
    again = CliRunner().invoke(main, ["run", "--config", str(precomputed_config(tmp_path)), "--out", str(out)])
    assert again.exit_code == 0, again.output


def test_a_lock_left_by_a_killed_run_is_reported_and_taken_over(tmp_path, tiny_golden):
    out = tmp_path / "run"
    out.mkdir()
    (out / OWNER_FILE).write_text(json.dumps({"pid": 4242, "host": "ci-7", "started": "2024-01-02T03:04:05+00:00"}))
    result = CliRunner().invoke(main, ["run", "--config", str(precomputed_config(tmp_path)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "(pid 4242 on host ci-7, started 2024-01-02T03:04:05+00:00) ended without finishing" in result.stderr
    assert not (out / OWNER_FILE).exists()


def test_merge_into_a_directory_in_use_is_refused(tmp_path, tiny_golden):
    config = load_config(precomputed_config(tmp_path))
    shards = [run_side(config, tmp_path / f"s{i}", shard_spec=(i, 2)) for i in (1, 2)]
    with locked_directory(tmp_path / "merged", "--out merged"):
        with pytest.raises(InputError, match="is in use by another rag-gate run"):
            merge_runs(shards, tmp_path / "merged")
    assert not (tmp_path / "merged" / "manifest.json").exists()
    assert merge_runs(shards, tmp_path / "merged") == tmp_path / "merged"


# ------------------------------------------------------------------------------------------------ resume


def interrupt(run: Path, keep: int) -> None:
    """Make a complete run look killed after ``keep`` predictions (status running, later rows gone)."""
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(manifest | {"status": "running"}))
    lines = (run / "predictions.jsonl").read_text().splitlines(keepends=True)
    (run / "predictions.jsonl").write_text("".join(lines[:keep]))


def test_resume_only_when_the_pipeline_code_is_unchanged(tmp_path, tiny_golden):
    (tmp_path / "rag.py").write_text(VERSIONED.replace("VERSION", "v1"))
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'rag:answer', concurrency: 1}\n")
    args = ["run", "--config", str(tmp_path / "rag-gate.yml"), "--out", str(tmp_path / "run")]
    assert CliRunner().invoke(main, args).exit_code == 0
    interrupt(tmp_path / "run", keep=2)
    (tmp_path / "calls.log").unlink()
    resumed = CliRunner().invoke(main, args)
    assert resumed.exit_code == 0 and "resuming: 2 prediction(s) kept" in resumed.stderr
    assert len((tmp_path / "calls.log").read_text().split()) == 2  # only the two cases the killed run lacked

    interrupt(tmp_path / "run", keep=2)
    (tmp_path / "rag.py").write_text(VERSIONED.replace("VERSION", "v2"))  # the pipeline is edited meanwhile
    (tmp_path / "calls.log").unlink()
    fresh = CliRunner().invoke(main, args)
    assert fresh.exit_code == 0, fresh.output
    assert "a run with another pipeline code (code fingerprint); starting afresh" in fresh.stderr
    assert len((tmp_path / "calls.log").read_text().split()) == 4
    answers = [json.loads(line)["answer"] for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert len(answers) == 4 and all(a.startswith("v2 ") for a in answers)
    archived = (tmp_path / "run" / "predictions.previous-1.jsonl").read_text().splitlines()
    assert len(archived) == 2 and all(json.loads(line)["answer"].startswith("v1 ") for line in archived)


def test_code_fingerprint_in_git_counts_uncommitted_code_not_outputs(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pipe").mkdir(parents=True)
    (repo / "pipe" / "rag.py").write_text("X = 1\n")
    (repo / "pipe" / "data.txt").write_text("tracked data\n")
    (repo / "other.py").write_text("outside the workdir\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c")
    spec = PipelineSpec(python="rag:answer", workdir=repo / "pipe")
    first = code_fingerprint(spec, exclude=[repo / "pipe" / "out"])
    assert first["source"] == "git" and first["files"] == 2

    def same() -> bool:
        return code_fingerprint(spec, exclude=[repo / "pipe" / "out"])["sha256"] == first["sha256"]

    (repo / "pipe" / "out").mkdir()
    (repo / "pipe" / "out" / "predictions.jsonl").write_text("{}\n")
    (repo / "pipe" / "out" / "helper.py").write_text("in the run directory\n")
    (repo / "pipe" / "cache.bin").write_text("an output the pipeline wrote\n")
    (repo / "other.py").write_text("changed, but outside the workdir\n")
    assert same()
    (repo / "pipe" / "data.txt").write_text("edited, not committed\n")
    assert not same()
    git(repo, "checkout", "--", "pipe/data.txt")
    assert same()
    (repo / "pipe" / "helper.py").write_text("a new module, untracked\n")
    assert not same()


def test_code_fingerprint_outside_git_hashes_the_workdirs_python_files(tmp_path):
    (tmp_path / "rag.py").write_text("X = 1\n")
    (tmp_path / "notes.txt").write_text("not code\n")
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    (tmp_path / ".venv" / "lib" / "dep.py").write_text("installed\n")
    spec = PipelineSpec(python="rag:answer", workdir=tmp_path)
    first = code_fingerprint(spec)
    assert first["source"] == "files" and first["files"] == 1
    (tmp_path / "notes.txt").write_text("edited\n")
    (tmp_path / ".venv" / "lib" / "dep.py").write_text("upgraded\n")
    assert code_fingerprint(spec)["sha256"] == first["sha256"]
    (tmp_path / "rag.py").write_text("X = 2\n")
    assert code_fingerprint(spec)["sha256"] != first["sha256"]
    command = PipelineSpec(command="sh run.sh {predictions}", workdir=tmp_path)
    (tmp_path / "run.sh").write_text("echo 1\n")
    before = code_fingerprint(command)["sha256"]
    (tmp_path / "run.sh").write_text("echo 2\n")  # the script the command names
    assert code_fingerprint(command)["sha256"] != before


# ----------------------------------------------------------------------------------------------- compare


@pytest.fixture
def two_runs(tmp_path, tiny_golden):
    config = load_config(precomputed_config(tmp_path))
    return run_side(config, tmp_path / "base"), run_side(config, tmp_path / "head")


def compare_cli(tmp_path: Path, *args: str):
    return CliRunner().invoke(main, ["compare", *args, "--out", str(tmp_path / "report")])


def test_compare_refuses_runs_whose_golden_set_changed_since(tmp_path, two_runs, tiny_golden):
    base, head = map(str, two_runs)
    assert compare_cli(tmp_path, base, head).exit_code == 0
    rows = [json.loads(line) for line in tiny_golden.read_text().splitlines()]
    rows[1]["question"] = "When was the other bridge built?"
    write_jsonl(tiny_golden, rows)
    result = compare_cli(tmp_path, base, head)
    assert result.exit_code == 2
    assert f"{base}: its golden set {tiny_golden} changed since the run (sha256" in result.stderr


def test_compare_refuses_runs_of_another_golden_set_than_given(tmp_path, two_runs, tiny_golden):
    other = tmp_path / "other-golden.jsonl"
    other.write_text(tiny_golden.read_text().replace("Where is Paris?", "Where is Lyon?"))
    base, head = map(str, two_runs)
    result = compare_cli(tmp_path, base, head, "--golden", str(other))
    assert result.exit_code == 2
    assert f"{base}: the run answered another golden set than --golden {other}" in result.stderr
    same = tmp_path / "copy.jsonl"
    shutil.copy(tiny_golden, same)  # another file with the same content is the same golden set
    assert compare_cli(tmp_path, base, head, "--golden", str(same)).exit_code == 0


def test_compare_refuses_runs_whose_config_changed_since(tmp_path, two_runs):
    config = tmp_path / "pre.yml"
    base, head = map(str, two_runs)
    assert compare_cli(tmp_path, base, head, "--config", str(config)).exit_code == 0
    config.write_text(config.read_text().replace("[hit_rate@5, mrr]", "[hit_rate@5]"))
    result = compare_cli(tmp_path, base, head, "--config", str(config))
    assert result.exit_code == 2 and f"{base}: its config {config} changed since the run" in result.stderr


# ------------------------------------------------------------------------------------------------- merge


@pytest.fixture
def shards(tmp_path, tiny_golden):
    config = load_config(precomputed_config(tmp_path))
    return [run_side(config, tmp_path / f"s{i}", shard_spec=(i, 2), git_sha="abc123") for i in (1, 2)]


def set_manifest(run: Path, **values) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(manifest | values))


def test_merge_refuses_shards_of_different_commits(tmp_path, shards):
    set_manifest(shards[1], git_sha="def456")
    with pytest.raises(InputError, match=r"different commits \(.*s1: abc123, .*s2: def456\)"):
        merge_runs(shards, tmp_path / "merged")
    set_manifest(shards[1], git_sha=None)
    with pytest.raises(InputError, match="s2: none recorded"):
        merge_runs(shards, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_merge_refuses_shards_of_different_code(tmp_path, shards):
    manifest = json.loads((shards[1] / "manifest.json").read_text())
    set_manifest(shards[1], code=manifest["code"] | {"sha256": "0" * 64})
    with pytest.raises(InputError, match="the shards ran different pipeline code"):
        merge_runs(shards, tmp_path / "merged")


def test_merge_refuses_a_shard_relabelled_as_another(tmp_path, shards):
    relabelled = tmp_path / "s2-copy"
    shutil.copytree(shards[0], relabelled)
    set_manifest(relabelled, shard=[2, 2])
    with pytest.raises(InputError, match=r"s2-copy \(shard 2/2\): holds case 'q1' repeat 0.*relabelled"):
        merge_runs([shards[0], relabelled], tmp_path / "merged")
    Path(json.loads((shards[0] / "manifest.json").read_text())["golden"]).unlink()  # without the golden set
    with pytest.raises(InputError, match=r"case 'q1' is also in .*s1; was a shard relabelled"):
        merge_runs([shards[0], relabelled], tmp_path / "merged2")
    assert not (tmp_path / "merged").exists() and not (tmp_path / "merged2").exists()


# ----------------------------------------------------------------------------- the row key and return values

ECHOING = """
def answer(case, field="id"):
    result = {"answer": "a " + case["id"], "retrieved": [{"id": "d1", "text": "t"}]}
    result[field] = "q1" if field == "id" else 3   # a response object echoing another request
    return result
"""


@pytest.mark.parametrize("field", ["id", "repeat"])
def test_the_row_key_comes_from_the_job_not_the_return_value(tmp_path, tiny_golden, field):
    (tmp_path / "echo.py").write_text(ECHOING)
    (tmp_path / "rag-gate.yml").write_text(
        f"golden: golden.jsonl\npipeline: {{python: 'echo:answer', concurrency: 2, options: {{field: {field}}}}}\n"
    )
    config = load_config(tmp_path / "rag-gate.yml")
    jobs = [(case, r) for r in range(2) for case in load_golden(config.golden)]
    got = []
    run_python(config.pipeline, jobs, got.append)
    assert [(p.id, p.repeat) for p in got] == [(c.id, r) for c, r in jobs]
    assert all(p.error is None and p.answer == f"a {p.id}" for p in got)


UNSENDABLE = """
class Loud:
    def __str__(self):
        raise RuntimeError("no text")
    __repr__ = __str__

def nest(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value

def answer(case):
    kind = case["question"]
    extra = {"ok": "fine", "set": {1, 2}, "object": Loud(), "bytes": b"x", "nan-key": {(1, 2): 3}}.get(kind)
    if kind.startswith("deep-"):
        extra = nest(int(kind[5:]))
    return {"answer": "a", "retrieved": [{"id": "d1", "text": "t"}], "metadata": {"extra": extra}}
"""


def test_any_unsendable_or_too_deep_return_value_fails_only_its_case(tmp_path):
    kinds = ["ok", "set", "object", "bytes", "nan-key", "deep-500", "deep-990", "deep-3000", "deep-200000", "ok"]
    write_jsonl(tmp_path / "golden.jsonl", [{"id": f"c{i}", "question": k} for i, k in enumerate(kinds)])
    (tmp_path / "odd.py").write_text(UNSENDABLE)
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {python: 'odd:answer', concurrency: 1, retries: 0}\n"
    )
    config = load_config(tmp_path / "rag-gate.yml")
    got = []
    run_python(config.pipeline, [(case, 0) for case in load_golden(config.golden)], got.append)
    by_kind = dict(zip(kinds, got, strict=False))
    assert [p.id for p in got] == [f"c{i}" for i in range(len(kinds))]
    assert got[0].error is None and got[-1].error is None  # the worker served the last case after all the others
    for kind in ("set", "object", "bytes", "nan-key", "deep-3000", "deep-200000"):
        assert by_kind[kind].error is not None and by_kind[kind].error.startswith("bad return value"), kind
    assert "RecursionError" in by_kind["deep-200000"].error
    for kind in ("deep-500", "deep-990"):  # sendable or not, never a crash: a row, ok or "bad return value"
        assert by_kind[kind].error is None or by_kind[kind].error.startswith("bad return value"), kind


# --------------------------------------------------------------------------------- workers die with rag-gate


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGHUP])
def test_workers_and_their_children_die_with_rag_gate(tmp_path, tiny_golden, signum):
    proc = start_run(holding_config(tmp_path, concurrency=2), tmp_path / "run", tmp_path / "run.log")
    workers: list[int] = []
    children: list[int] = []
    try:
        assert wait_until(lambda: len(pids(tmp_path, "worker")) == 2 and len(pids(tmp_path, "child")) == 2), (
            tmp_path / "run.log"
        ).read_text()
        workers, children = pids(tmp_path, "worker"), pids(tmp_path, "child")
        assert all(alive(pid) for pid in workers + children)
        proc.send_signal(signum)  # rag-gate alone, not its process group
        proc.wait(timeout=DEADLINE_S)
        assert wait_until(lambda: not any(alive(pid) for pid in workers + children)), [
            pid for pid in workers + children if alive(pid)
        ]
        if signum == signal.SIGHUP:
            assert proc.returncode == 3 and "interrupted" in (tmp_path / "run.log").read_text()
    finally:
        kill_all(proc, workers or pids(tmp_path, "worker"), children or pids(tmp_path, "child"))


def test_a_prefix_run_extends_the_same_run_and_never_runs_or_scores_a_case_twice(tmp_path, tiny_golden):
    """Adaptive batches: each call names a longer prefix; earlier predictions and scores are kept, judge failures
    retried; the manifest is partial until every case ran (then `rag-gate run`'s resume completes it)."""
    (tmp_path / "rag.py").write_text(VERSIONED.replace("VERSION", "v1"))
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'rag:answer', concurrency: 1}\n")
    config, out, log = load_config(tmp_path / "rag-gate.yml"), tmp_path / "run", tmp_path / "calls.log"
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the pipeline logs its calls to calls.log in its working directory
    try:
        run_side(config, out, cases=["q1", "q3"])
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "partial" and manifest["n_cases"] == 2
        assert sorted(log.read_text().split()) == ["q1", "q3"]
        rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
        assert {r["id"] for r in rows} == {"q1", "q3"}
        # mark q1's hit rate (a rescore would write 1 back) and make q3's a judge failure (to be retried)
        for r in rows:
            if r["metric"] == "hit_rate@5" and r["id"] == "q1":
                assert r["value"] == 1.0
                r["value"] = 0.5
            if r["metric"] == "hit_rate@5" and r["id"] == "q3":
                r["value"], r["error"] = None, "judge: timed out"
        write_jsonl(out / "scores.jsonl", rows)
        run_side(config, out, cases=["q3", "q1", "q2"])
        assert sorted(log.read_text().split()) == ["q1", "q2", "q3"]  # q2 alone was run
        again = {(r["id"], r["metric"]): r for r in map(json.loads, (out / "scores.jsonl").read_text().splitlines())}
        assert again[("q1", "hit_rate@5")]["value"] == 0.5  # reused, not scored again
        assert again[("q3", "hit_rate@5")].get("error") is None  # the judge failure was scored again
        assert {i for i, _ in again} == {"q1", "q2", "q3"}
        assert json.loads((out / "manifest.json").read_text())["status"] == "partial"
        run_side(config, out)  # every case: the same run, completed
        assert sorted(log.read_text().split()) == ["q1", "q2", "q3", "q4"]
        assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    finally:
        os.chdir(cwd)


def test_skipped_repeats_are_neither_run_nor_errors_and_a_later_call_runs_them(tmp_path, tiny_golden):
    """Adaptive repeats: ``case_repeats`` runs only the first repeats of those cases; the manifest lists them and
    says partial, the comparison's loader reads the others as skipped (no error row); `rag-gate run` completes it."""
    (tmp_path / "rag.py").write_text(VERSIONED.replace("VERSION", "v1"))
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\nrepeats: 3\npipeline: {python: 'rag:answer', concurrency: 1}\n"
    )
    config, out, log = load_config(tmp_path / "rag-gate.yml"), tmp_path / "run", tmp_path / "calls.log"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        run_side(config, out, case_repeats={"q1": 1, "q2": 2, "q9": 1})
        assert Counter(log.read_text().split()) == {"q1": 1, "q2": 2, "q3": 3, "q4": 3}
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "partial" and manifest["case_repeats"] == {"q1": 1, "q2": 2}
        assert manifest["counts"]["predictions"] == 9 and manifest["counts"]["prediction_errors"] == 0
        rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
        assert {(r["id"], r["repeat"]) for r in rows} == {
            ("q1", 0), ("q2", 0), ("q2", 1), *((c, r) for c in ("q3", "q4") for r in range(3))
        }  # fmt: skip
        base, _ = _load_side("base", out, None, None, tmp_path / "cmp", only=["q1", "q2", "q3", "q4"])
        assert base.table.n_errors == 0 and base.table.n_skipped == 3
        assert base.table.skipped_mask(["q1", "q2", "q3"]).tolist() == [
            [False, True, True], [False, False, True], [False, False, False]
        ]  # fmt: skip
        assert [len(base.valid(c)) for c in ("q1", "q2", "q3")] == [1, 2, 3]
        run_side(config, out)  # every repeat: the same run, completed
        assert Counter(log.read_text().split()) == {f"q{i}": 3 for i in range(1, 5)}
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "complete" and "case_repeats" not in manifest
        assert manifest["counts"]["predictions"] == 12
        # a later plan that skips what an earlier one ran: the rows held are kept, so the manifest names no skip
        run_side(config, out, case_repeats={"q1": 1, "q2": 1})
        assert Counter(log.read_text().split()) == {f"q{i}": 3 for i in range(1, 5)}
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "complete" and "case_repeats" not in manifest
    finally:
        os.chdir(cwd)
