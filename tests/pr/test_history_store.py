"""The history branch against a real git remote (a bare repository on disk): append, read, concurrent appends."""

from __future__ import annotations

import base64
import http.server
import json
import threading

import pytest
from helpers import git

from gate.errors import EvaluationError
from gate.history.entries import make_record
from gate.pr import history_store as store_mod
from gate.pr.history_store import DEFAULT_BRANCH, HistoryStore, append, auth_env, read


def record(sha, mean=0.9):
    import numpy as np

    return make_record(
        timestamp="2025-01-01T00:00:00+00:00",
        sha=sha,
        ref="main",
        golden_sha256="g" * 64,
        config_sha256="c" * 64,
        n_cases=1,
        repeats=1,
        metrics={"faithfulness": np.array([[mean]])},
    )


@pytest.fixture
def remote(tmp_path):
    """A bare remote with one commit on main, and a clone of it (the workflow's checkout)."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(bare), str(seed))
    (seed / "README").write_text("hello\n")
    git(seed, "add", "README")
    git(seed, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "init")
    git(seed, "push", "-q", "origin", "main")
    return bare


def clone(remote, path):
    git(remote.parent, "clone", "-q", str(remote), str(path))
    return path


def branch_file(remote):
    return git(remote, "show", f"{DEFAULT_BRANCH}:history.jsonl")


def test_append_commits_to_the_history_branch_without_touching_the_checkout(remote, tmp_path):
    work = clone(remote, tmp_path / "work")
    head, status = git(work, "rev-parse", "HEAD"), git(work, "status", "--porcelain")
    store = HistoryStore(work)
    results = [append(store, record(f"{i:040x}", 0.9 - i / 100)) for i in range(3)]
    assert [r.appended for r in results] == [True] * 3 and [r.attempts for r in results] == [1, 1, 1]
    lines = branch_file(remote).splitlines()
    assert [json.loads(line)["sha"] for line in lines] == [f"{i:040x}" for i in range(3)]
    assert git(remote, "rev-list", "--count", DEFAULT_BRANCH) == "3"  # one commit per entry, an orphan branch
    author_and_subject = git(remote, "log", "-1", "--format=%an %s", DEFAULT_BRANCH)
    assert author_and_subject.startswith("github-actions[bot] rag-gate history")
    assert (git(work, "rev-parse", "HEAD"), git(work, "status", "--porcelain")) == (head, status)
    assert git(work, "branch", "--list", DEFAULT_BRANCH) == ""  # no local branch was created


def test_a_fresh_clone_reads_what_was_appended_and_a_missing_branch_is_no_history(remote, tmp_path):
    reader = clone(remote, tmp_path / "reader")
    assert read(HistoryStore(reader), tmp_path / "none.jsonl") is None
    writer = clone(remote, tmp_path / "writer")
    append(HistoryStore(writer), record("a" * 40, 0.8))
    history = read(HistoryStore(reader), tmp_path / "out" / "history.jsonl")
    assert [e.value("faithfulness") for e in history.entries] == [0.8] and history.problems == ()
    assert (tmp_path / "out" / "history.jsonl").read_text() == branch_file(remote) + "\n"


def test_concurrent_appends_from_several_runners_lose_no_entry(remote, tmp_path):
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\ncat >/dev/null\nsleep 0.4\n")  # a slow server: the pushes overlap
    hook.chmod(0o755)
    runners = [clone(remote, tmp_path / f"runner{i}") for i in range(4)]
    barrier = threading.Barrier(len(runners))
    results, errors = {}, []

    def run(i):
        barrier.wait()
        try:
            results[i] = append(HistoryStore(runners[i]), record(f"{i:040x}"), backoff_s=0.05)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(runners))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    shas = sorted(json.loads(line)["sha"] for line in branch_file(remote).splitlines())
    assert shas == [f"{i:040x}" for i in range(4)]
    assert sum(r.attempts for r in results.values()) > len(runners)  # some pushes were rejected and redone


def test_the_same_commit_is_not_recorded_twice_and_a_cut_last_line_is_closed(remote, tmp_path):
    work = clone(remote, tmp_path / "work")
    store = HistoryStore(work)
    append(store, record("a" * 40))
    assert append(store, record("a" * 40)).appended is False
    # damage the branch: a truncated last line, as a killed writer would leave it
    damaged = tmp_path / "damaged"
    clone(remote, damaged)
    git(damaged, "checkout", "-q", DEFAULT_BRANCH)
    text = (damaged / "history.jsonl").read_text()
    (damaged / "history.jsonl").write_text(text + text[:30])
    git(damaged, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qam", "cut")
    git(damaged, "push", "-q", "origin", DEFAULT_BRANCH)
    append(store, record("b" * 40))
    history = read(store, tmp_path / "h.jsonl")
    assert [e.sha for e in history.entries] == ["a" * 40, "b" * 40]
    assert len(history.problems) == 1 and ":2: invalid JSON" in history.problems[0]


def test_a_push_the_remote_refuses_fails_at_once_with_the_permission_hint(remote, tmp_path):
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'denied: protected branch' >&2\nexit 1\n")
    hook.chmod(0o755)
    work = clone(remote, tmp_path / "work")
    with pytest.raises(EvaluationError, match=r"contents: write") as info:
        append(HistoryStore(work), record("a" * 40))
    assert "pre-receive hook declined" in str(info.value)


def test_file_mode_appends_to_disk_and_a_pr_reads_a_tracked_file_as_of_the_base(remote, tmp_path):
    work = clone(remote, tmp_path / "work")
    store = HistoryStore(work, path="ci/history.jsonl", branch=None)
    assert append(store, record("a" * 40, 0.9)).appended
    git(work, "add", "ci/history.jsonl")
    git(work, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "history")
    base = git(work, "rev-parse", "HEAD")
    append(store, record("b" * 40, 0.1))  # a PR edits the file in its checkout…
    history = read(store, tmp_path / "pr.jsonl", base_commit=base)
    assert [e.sha for e in history.entries] == ["a" * 40]  # …but the base's copy is what counts
    assert len(read(store, tmp_path / "push.jsonl").entries) == 2  # without a base (push): the file on disk


class Recorder(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def do_GET(self):  # noqa: N802 - http.server's naming
        Recorder.seen.append(self.headers.get("Authorization"))
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_token_reaches_git_as_a_header_from_the_environment_never_in_a_message(remote, tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    work = clone(remote, tmp_path / "work")
    git(work, "remote", "set-url", "origin", f"{url}/octo/rag.git")
    store = HistoryStore(work, env=auth_env("s3cr3t-token", url))
    try:
        with pytest.raises(EvaluationError) as info:
            store_mod.fetch(store)
    finally:
        server.shutdown()
    expected = "basic " + base64.b64encode(b"x-access-token:s3cr3t-token").decode()
    assert expected in Recorder.seen
    assert "s3cr3t" not in str(info.value) and "s3cr3t" not in (work / ".git" / "config").read_text()
    assert auth_env(None) == {} and auth_env("") == {}
