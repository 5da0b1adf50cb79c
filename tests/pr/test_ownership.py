"""In the action rag-gate runs as root; the job's later steps run as the runner's user (uid 1001 on hosted runners).
What rag-gate makes in the workspace goes to the workspace's owner, so that a later step can write into it and remove
it; links are never followed and nothing rag-gate did not make changes owner. Checked with a real uid change."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from scratch_repo import GITHUB_VARS, make_scratch_repo

from gate.cli import main
from gate.files import hand_over
from gate.pr.ownership import hand_outputs_over, workspace_owner

RUNNER = 1001
"""The runner user's uid and gid on GitHub's hosted runners."""

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="changes owners and switches uid: needs root"
)


@pytest.fixture
def scratch():
    """A folder every user can reach (pytest's own tmp folders are private to root)."""
    path = Path(tempfile.mkdtemp(prefix="rag-gate-owner-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def as_runner(*command: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``command`` as uid/gid 1001 without root's supplementary groups, as a later step of the job would."""
    return subprocess.run(
        command, user=RUNNER, group=RUNNER, extra_groups=[], cwd=cwd, capture_output=True, text=True, check=False
    )


def owner(path: Path) -> int:
    return os.lstat(path).st_uid


def test_hand_over_gives_what_root_made_to_the_owner_and_follows_no_link(scratch):
    victim = scratch / "victim"  # outside the outputs: must keep its owner and survive
    victim.mkdir()
    (victim / "precious.txt").write_text("data")
    out = scratch / "rag-gate-out"
    (out / "base").mkdir(parents=True)
    (out / "base" / "scores.jsonl").write_text("{}\n")
    (out / "head").mkdir()
    (out / "report.json").write_text("{}")
    (out / "to-victim").symlink_to(victim)  # a link to a folder: never followed
    os.link(victim / "precious.txt", out / "hardlink.txt")  # also elsewhere: not given away
    (out / "someone-else.txt").write_text("x")
    os.chown(out / "someone-else.txt", 2000, 2000)  # not made by this process: left as it is
    before = as_runner("touch", str(out / "new.txt"))
    assert before.returncode != 0 and "Permission denied" in before.stderr  # the problem, as a later step meets it

    assert hand_over(out, RUNNER, RUNNER) == 5  # out, base, base/scores.jsonl, head, report.json
    for path in (out, out / "base", out / "base" / "scores.jsonl", out / "head", out / "report.json"):
        assert (owner(path), os.lstat(path).st_gid) == (RUNNER, RUNNER), path
    assert owner(out / "to-victim") == 0 and owner(victim) == 0 and owner(victim / "precious.txt") == 0
    assert owner(out / "someone-else.txt") == 2000
    assert oct(out.stat().st_mode & 0o777) == "0o755"  # no mode widened: only the owner changed

    os.chown(scratch, RUNNER, RUNNER)  # the workspace around it is the runner's (removing a folder needs its parent)
    done = as_runner("sh", "-c", f"touch {out}/new.txt {out}/base/more && rm -rf {out}")
    assert done.returncode == 0, done.stderr
    assert not out.exists() and (victim / "precious.txt").read_text() == "data"


def test_hand_over_of_a_link_or_a_missing_path_changes_nothing(scratch):
    target = scratch / "target"
    target.mkdir()
    (scratch / "link").symlink_to(target)
    assert hand_over(scratch / "link", RUNNER, RUNNER) == 0 and owner(target) == 0
    assert hand_over(scratch / "missing", RUNNER, RUNNER) == 0


def test_outputs_go_to_the_workspace_owner_only_inside_the_workspace(scratch):
    workspace = scratch / "ws"
    (workspace / "reports" / "deep").mkdir(parents=True)
    (workspace / "reports" / "deep" / "junit.xml").write_text("<testsuites/>")
    outside = scratch / "elsewhere"
    outside.mkdir()
    environ = {"GITHUB_WORKSPACE": str(workspace)}
    assert workspace_owner(environ) is None  # a root-owned workspace: nobody to hand over to
    os.chown(workspace, RUNNER, RUNNER)
    assert workspace_owner(environ) == (workspace.resolve(), RUNNER, RUNNER)
    assert workspace_owner({}) is None
    junit = workspace / "reports" / "deep" / "junit.xml"
    assert hand_outputs_over([junit, outside, None], environ) == 3  # the file and the two folders made above it
    assert owner(junit) == owner(workspace / "reports") == owner(workspace / "reports" / "deep") == RUNNER
    assert owner(outside) == 0


def test_rag_gate_pr_leaves_outputs_a_later_step_can_write_into_and_remove(scratch):
    workspace = scratch / "ws"
    make_scratch_repo(workspace)
    os.chown(workspace, RUNNER, RUNNER)  # as actions/checkout leaves it: the runner's user owns the workspace
    env = dict.fromkeys(GITHUB_VARS) | {"GITHUB_WORKSPACE": str(workspace), "RAG_GATE_CACHE_KEY": None}
    env["XDG_CACHE_HOME"] = str(scratch / "xdg")  # the local signing key: not in the home of the user running tests
    args = ["pr", "--base-ref", "main", "--working-directory", str(workspace), "--out-dir", "rag-gate-out",
            "--cache-dir", ".rag-gate-cache", "--junit", "reports/rag-gate.xml", "--no-progress"]  # fmt: skip
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code in (0, 1), result.output
    out = workspace / "rag-gate-out"
    assert (out / "report.json").exists() and (out / "base").is_dir() and (out / "head").is_dir()
    made = [
        out,
        out / "base",
        out / "head",
        out / "report.json",
        workspace / "reports",
        workspace / "reports" / "rag-gate.xml",
    ]
    assert {owner(path) for path in made} == {RUNNER}
    assert {owner(path) for path in out.rglob("*")} == {RUNNER}
    cache = workspace / ".rag-gate-cache"  # a local run is trusted: it stored the base's results
    assert cache.is_dir() and {owner(path) for path in [cache, *cache.rglob("*")]} == {RUNNER}
    done = as_runner(
        "sh", "-c", "touch rag-gate-out/base/x reports/y && rm -rf rag-gate-out reports .rag-gate-cache", cwd=workspace
    )
    assert done.returncode == 0, done.stderr
    assert not out.exists() and not (workspace / "reports").exists()
