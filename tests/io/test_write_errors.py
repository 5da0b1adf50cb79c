"""Every write is all or nothing, or names its path.

An output that cannot be written is an environment problem: exit 3 with one line ``PATH: cannot write: REASON``,
never "internal error". Three real causes are produced here, none of them mocked:

- a regular file where a folder should be (works for any user, on any system);
- a read-only file system and a full one: a tmpfs mounted ``ro`` or with a tiny size in a private mount namespace
  (``unshare -m``, as root; ``chmod`` cannot make a directory read-only for root, so permissions are not used). These
  tests are skipped where the namespace or the mount is not allowed;
- a file-size limit (``RLIMIT_FSIZE``), which makes a write fail with ``EFBIG`` half-way like a full disk does, for
  the all-or-nothing appends.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import write_jsonl

from gate.cli import main
from gate.errors import EvaluationError, WriteError
from gate.files import append_text, make_dirs, make_parent, writing
from gate.history.entries import append_entry, read_history
from gate.jsonl import JsonlAppender

RAG_GATE = shutil.which("rag-gate") or str(Path(sys.executable).with_name("rag-gate"))


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_write_error(result, path):
    """The result exited 3 with one stderr line naming ``path`` as unwritable."""
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"rag-gate: error: {path}: cannot write: "), lines[0]
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


@pytest.fixture
def base_run(tmp_path, tiny_golden):
    """A complete run directory of precomputed predictions, and its config."""
    rows = [{"id": f"q{i}", "answer": "x", "retrieved": [{"id": f"d{i}", "text": "x"}]} for i in range(1, 5)]
    write_jsonl(tmp_path / "preds.jsonl", rows)
    config = tmp_path / "rag-gate.yml"
    config.write_text("golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\nmetrics: [hit_rate@5]\n")
    result = invoke("run", "--config", config, "--out", tmp_path / "base", "--no-progress")
    assert result.exit_code == 0, result.output
    return tmp_path / "base", config


# ------------------------------------------------------------------ a file where a folder should be


def test_every_command_names_the_file_in_the_way_of_its_output(tmp_path, base_run, tiny_golden):
    run_dir, config = base_run
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    reason = f"{blocker} is a file, not a directory"
    checks = {
        ("run", "--config", config, "--out", blocker / "run", "--no-progress"): blocker / "run",
        ("merge", run_dir, "--out", blocker / "merged"): blocker / "merged",
        ("compare", run_dir, run_dir, "--out", blocker / "report"): blocker / "report",
        ("history", "add", run_dir, "--history", blocker / "h.jsonl"): blocker / "h.jsonl",
        ("history", "add", run_dir, "--history", blocker / "sub" / "h.jsonl"): blocker / "sub" / "h.jsonl",
    }
    for args, named in checks.items():
        result = invoke(*args)
        one_line_write_error(result, named)
        assert result.stderr.strip().endswith(reason), result.stderr
    assert blocker.read_text() == "not a folder"


def test_history_show_names_its_unwritable_output(tmp_path, base_run):
    run_dir, _ = base_run
    assert invoke("history", "add", run_dir, "--history", tmp_path / "h.jsonl").exit_code == 0
    (tmp_path / "afile").write_text("")
    result = invoke("history", "show", "--history", tmp_path / "h.jsonl", "--out", tmp_path / "afile" / "show")
    one_line_write_error(result, tmp_path / "afile" / "show")


def test_make_dirs_and_writing_raise_write_error_naming_the_path(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(WriteError) as caught:
        make_dirs(tmp_path / "f" / "a" / "b")
    assert str(caught.value) == f"{tmp_path}/f/a/b: cannot write: {tmp_path}/f is a file, not a directory"
    assert isinstance(caught.value, EvaluationError) and caught.value.exit_code == 3
    with pytest.raises(WriteError, match=r"/f: cannot write: it is a file, not a directory$"):
        make_dirs(tmp_path / "f")
    assert make_dirs(tmp_path / "new" / "dir").is_dir()
    with pytest.raises(WriteError, match=r"/f/sub/h.jsonl: cannot write: .*/f is a file, not a directory$"):
        make_parent(tmp_path / "f" / "sub" / "h.jsonl")
    with pytest.raises(WriteError, match=r"/f/x.png: cannot write: .*/f is a file, not a directory$"):
        with writing(tmp_path / "f" / "x.png") as target:
            target.write_bytes(b"png")


# ------------------------------------------------------------------ all-or-nothing appends (file-size limit)

APPEND = """
import sys
from gate.errors import WriteError
from gate.files import append_text
try:
    append_text(sys.argv[1], sys.argv[2])
except WriteError as exc:
    print(exc, file=sys.stderr)
    sys.exit(3)
"""


def limited(max_bytes: int, *args: str) -> subprocess.CompletedProcess:
    """Run ``args`` with writes failing beyond ``max_bytes`` per file (EFBIG, as a full disk fails them)."""

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return subprocess.run(list(args), preexec_fn=limit, capture_output=True, text=True)


def test_an_append_cut_by_a_full_disk_leaves_the_file_as_it_was(tmp_path):
    target = tmp_path / "h.jsonl"
    target.write_text('{"a": 1}\n')
    done = limited(100, sys.executable, "-c", APPEND, str(target), '{"b": "' + "x" * 500 + '"}\n')
    assert done.returncode == 3 and done.stderr.strip() == f"{target}: cannot write: File too large"
    assert target.read_text() == '{"a": 1}\n'  # the 91 bytes that did fit were taken back
    append_text(target, '{"c": 3}\n')  # and the next append is whole
    assert target.read_text().splitlines() == ['{"a": 1}', '{"c": 3}']


def test_jsonl_appender_names_its_file_and_keeps_whole_lines(tmp_path):
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(WriteError, match=r"dir.jsonl: cannot write: Is a directory"):
        JsonlAppender(tmp_path / "dir.jsonl")
    with JsonlAppender(tmp_path / "p.jsonl") as sink:
        sink.write({"id": "q1", "text": "\ud800 lone surrogate"})
        sink.write({"id": "q2"})
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["q1", "q2"]


def test_history_add_under_a_size_limit_leaves_no_partial_entry(tmp_path, base_run):
    run_dir, _ = base_run
    history = tmp_path / "h.jsonl"
    assert invoke("history", "add", run_dir, "--history", history, "--sha", "a" * 40).exit_code == 0
    before = history.read_bytes()
    done = limited(len(before) + 200, RAG_GATE, "history", "add", str(run_dir), "--history", str(history))
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip() == f"rag-gate: error: {history}: cannot write: File too large"
    assert history.read_bytes() == before  # all or nothing: no cut line for the next reader
    assert read_history(history).problems == ()


def test_a_history_add_that_fails_on_a_new_file_leaves_no_file(tmp_path, base_run):
    run_dir, _ = base_run
    history = tmp_path / "new.jsonl"
    done = limited(10, RAG_GATE, "history", "add", str(run_dir), "--history", str(history))
    assert done.returncode == 3 and f"{history}: cannot write: File too large" in done.stderr
    assert not history.exists()


# ------------------------------------------------------------------ read-only and full file systems (tmpfs)


def _can_mount() -> bool:
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs $d && umount $d"],
        capture_output=True,
    )
    return probe.returncode == 0


needs_mount = pytest.mark.skipif(not _can_mount(), reason="needs root and unshare -m to mount a tmpfs")


def in_tmpfs(mount: Path, options: str, *commands: str) -> subprocess.CompletedProcess:
    """Run shell ``commands`` in a private mount namespace where ``mount`` is a tmpfs mounted with ``options``."""
    script = f"mount -t tmpfs -o {options} tmpfs {mount} && " + " && ".join(commands)
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True)


@needs_mount
def test_a_read_only_file_system_is_named_for_run_and_history_add(tmp_path, base_run):
    run_dir, config = base_run
    mount = tmp_path / "ro"
    mount.mkdir()
    done = in_tmpfs(
        mount,
        "ro,size=64k",
        f"{{ {RAG_GATE} run --config {config} --out {mount}/run --no-progress; echo run=$?; }}",
        f"{{ {RAG_GATE} history add {run_dir} --history {mount}/h.jsonl; echo add=$?; }}",
    )
    assert "run=3" in done.stdout and "add=3" in done.stdout, done.stdout + done.stderr
    assert f"rag-gate: error: {mount}/run: cannot write: Read-only file system" in done.stderr
    assert f"rag-gate: error: {mount}/h.jsonl: cannot write: Read-only file system" in done.stderr
    assert "internal error" not in done.stderr


PAD = "import os, sys; open(sys.argv[1], 'a').write(chr(10) * (4095 - os.path.getsize(sys.argv[1])))"


@needs_mount
def test_a_full_file_system_is_named_and_the_history_keeps_its_entries(tmp_path, base_run):
    run_dir, _ = base_run
    mount = tmp_path / "full"
    mount.mkdir()
    history = mount / "h.jsonl"
    done = in_tmpfs(
        mount,
        "size=16k",
        f"{RAG_GATE} history add {run_dir} --history {history} --sha {'a' * 40}",
        f"{sys.executable} -c {shlex.quote(PAD)} {history}",  # the next entry starts one byte before a new 4 KiB page
        f"cp {history} {tmp_path}/before.jsonl",
        f"{{ head -c 1048576 /dev/zero > {mount}/fill 2>/dev/null; true; }}",  # the disk is now full
        f"{{ {RAG_GATE} history add {run_dir} --history {history} --sha {'b' * 40}; echo add=$?; }}",
        f"cp {history} {tmp_path}/after.jsonl",
    )
    assert "add=3" in done.stdout, done.stdout + done.stderr
    assert f"rag-gate: error: {history}: cannot write: No space left on device" in done.stderr
    assert (tmp_path / "after.jsonl").read_bytes() == (tmp_path / "before.jsonl").read_bytes()
    assert [e.sha for e in read_history(tmp_path / "after.jsonl").entries] == ["a" * 40]


def test_append_entry_closes_a_cut_line_before_its_own(tmp_path):
    history = tmp_path / "h.jsonl"
    history.write_text('{"cut": ')
    entry = {
        "schema_version": 1, "timestamp": "t", "golden_sha256": "g", "config_sha256": "c", "n_cases": 1,
        "repeats": 1, "metrics": {"hit_rate@5": {"mean": 1.0, "sd": None, "p10": 1.0, "share_below_0_5": 0.0, "n": 1}},
    }  # fmt: skip
    append_entry(history, entry)
    read = read_history(history)
    assert [e.line for e in read.entries] == [2] and read.problems[0].startswith(f"{history}:1: invalid JSON")
