"""gate.pr.git on a scratch repository: the merge base, changed files, the base's worktree, shallow clones."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from scratch_repo import make_scratch_repo

from gate.errors import InputError
from gate.pr import git


def test_merge_base_is_the_fork_point_not_the_base_tip(tmp_path):
    repo = tmp_path / "repo"
    shas = make_scratch_repo(repo)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
    (repo / "later.txt").write_text("main moved on\n")
    subprocess.run(["git", "-C", str(repo), "add", "later.txt"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "later"], check=True
    )
    tip = git.resolve_commit(repo, "main")
    assert tip != shas["base"]
    assert git.merge_base(repo, tip, shas["head"]) == shas["base"]


def test_changed_files_counts_lines_binaries_and_uncommitted_edits(tmp_path):
    repo = tmp_path / "repo"
    shas = make_scratch_repo(repo)
    (repo / "model.bin").write_bytes(bytes(range(256)))
    (repo / "notes with space.md").write_text("one\ntwo\nthree\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    commit = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x"]
    subprocess.run(commit, check=True)
    (repo / "notes with space.md").write_text("one\n2\nthree\nfour\n")  # uncommitted: the head runs it
    files = {f.path: (f.added, f.deleted) for f in git.changed_files(repo, shas["base"])}
    assert files["model.bin"] == (None, None) and files["notes with space.md"] == (4, 0)
    assert set(files) == {"model.bin", "notes with space.md", "rag.py"}
    files = {f.path: (f.added, f.deleted) for f in git.changed_files(repo, "HEAD")}
    assert files == {"notes with space.md": (2, 1)}  # "two" → "2", "four" added


def test_worktree_checks_out_the_commit_and_is_removed_even_on_error(tmp_path):
    repo = tmp_path / "repo"
    shas = make_scratch_repo(repo)
    with pytest.raises(RuntimeError), git.worktree(repo, shas["base"]) as tree:
        assert "BROKEN = False" in (tree / "rag.py").read_text()
        assert git.resolve_commit(tree, "HEAD") == shas["base"]
        raise RuntimeError("boom")
    assert not tree.exists()
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout
    assert len(listed.splitlines()) == 1


def test_a_killed_runs_checkout_is_removed_and_a_live_runs_kept(tmp_path):
    repo = tmp_path / "repo"
    shas = make_scratch_repo(repo)
    ended = subprocess.Popen(["true"])
    ended.wait()  # its pid runs no more: what a SIGKILLed rag-gate pr leaves registered
    parents = {pid: Path(tempfile.mkdtemp(prefix=f"{git.WORKTREE_PREFIX}{pid}-")) for pid in (ended.pid, os.getpid())}
    for parent in parents.values():
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(parent / "base"),
                        shas["base"]], check=True)  # fmt: skip
    try:
        with git.worktree(repo, shas["base"]) as tree:
            listed = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"],
                                    capture_output=True, text=True, check=True).stdout  # fmt: skip
            registered = {Path(line[9:]) for line in listed.splitlines() if line.startswith("worktree ")}
            assert registered == {repo, tree, parents[os.getpid()] / "base"}
        assert not parents[ended.pid].exists() and (parents[os.getpid()] / "base" / "rag.py").exists()
    finally:
        for parent in parents.values():
            shutil.rmtree(parent, ignore_errors=True)


def test_unknown_ref_in_a_shallow_clone_asks_for_fetch_depth_0(tmp_path):
    repo = tmp_path / "repo"
    make_scratch_repo(repo)
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", "--branch", "feature", f"file://{repo}", str(shallow)], check=True
    )
    with pytest.raises(InputError, match="fetch-depth: 0"):
        git.merge_base(shallow, "main", "HEAD")
