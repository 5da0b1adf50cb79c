"""gate.pr.trend, the history in the PR flow: push mode appends to the history branch of a real remote (a bare
repository), a pull request — from a fork too — reads it read-only and gets a "Trend vs main" section.

The pipeline is the tiny deterministic RAG of ``scratch_repo``; ``feature`` breaks retrieval for half of the
cases, so against four main entries its hit rate drops by half: CRITICAL.
"""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from helpers import REPO, git
from scratch_repo import make_scratch_repo, pull_request_event

from gate.cli import main
from gate.pr.history_store import DEFAULT_BRANCH, HistoryStore, append


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A remote (bare) with main and feature; the trend policy blocks on CRITICAL."""
    root = tmp_path_factory.mktemp("world")
    shas = make_scratch_repo(root / "origin-src")
    src = root / "origin-src"
    git(src, "checkout", "-q", "main")
    config = (src / "rag-gate.yml").read_text() + "trend: {window: 4, warning: 0.05, critical: 0.10, block: critical}\n"
    (src / "rag-gate.yml").write_text(config)
    git(src, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qam", "trend policy")
    main_sha = git(src, "rev-parse", "HEAD")
    git(src, "checkout", "-q", "-b", "feature2")
    (src / "rag.py").write_text((src / "rag.py").read_text().replace("BROKEN = False", "BROKEN = True"))
    git(src, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qam", "a PR that breaks retrieval")
    head_sha = git(src, "rev-parse", "HEAD")
    bare = root / "remote.git"
    git(root, "clone", "-q", "--bare", str(src), str(bare))
    return {"root": root, "remote": bare, "main": main_sha, "head": head_sha, "old": shas}


def checkout(world, name, ref):
    path = world["root"] / name
    if not path.exists():
        git(world["root"], "clone", "-q", str(world["remote"]), str(path))
        git(path, "config", "user.email", "ci@example.com")
        git(path, "config", "user.name", "ci")
    git(path, "checkout", "-q", ref)
    return path


def env_for(tmp_path, workspace, event_name, event, **extra):
    event_path = tmp_path / f"{event_name}.json"
    event_path.write_text(json.dumps(event))
    return {
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_REPOSITORY": "octo/rag",
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_TOKEN": "test-token",
        "GITHUB_RUN_ID": "7",
        "GITHUB_API_URL": "http://127.0.0.1:9",  # nothing is posted: --comment off
        "RAG_GATE_CACHE_KEY": None,
    } | extra


def rag_gate(workspace, env, *extra):
    args = ["pr", "--working-directory", str(workspace), "--comment", "off", *extra]
    return CliRunner().invoke(main, args, env=env, catch_exceptions=False)


def outputs(tmp_path):
    text = (tmp_path / "output.txt").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def branch_lines(world):
    return git(world["remote"], "show", f"{DEFAULT_BRANCH}:history.jsonl").splitlines()


def push_event(sha):
    return {"ref": "refs/heads/main", "after": sha, "repository": {"full_name": "octo/rag", "default_branch": "main"}}


def test_push_appends_then_a_pull_request_reads_the_history_and_reports_the_trend(world, tmp_path):
    runner = checkout(world, "push-runner", "main")
    env = env_for(tmp_path, runner, "push", push_event(world["main"]), GITHUB_REF="refs/heads/main")
    env["GITHUB_SHA"] = world["main"]
    pushed = rag_gate(runner, env)
    assert pushed.exit_code == 0, pushed.output
    assert "verdict: recorded" in pushed.stderr and "trend vs main: insufficient" in pushed.stderr
    lines = branch_lines(world)
    entry = json.loads(lines[0])
    assert len(lines) == 1 and entry["sha"] == world["main"] and entry["ref"] == "main"
    assert entry["metrics"]["hit_rate@5"]["mean"] == 1.0 and entry["gated"][0] == "hit_rate@5"
    summary = (tmp_path / "summary.md").read_text()
    assert "Recorded " + world["main"][:12] in summary and "0 comparable main entries, 4 needed" in summary
    assert outputs(tmp_path)["trend-status"] == "insufficient"
    assert git(runner, "status", "--porcelain") == "" and git(runner, "rev-parse", "HEAD") == world["main"]

    # A re-run of the same push records nothing twice.
    again = rag_gate(runner, env)
    assert again.exit_code == 0 and len(branch_lines(world)) == 1

    # Three earlier main runs of the same golden set and config (as older pushes would have left them).
    seeder = checkout(world, "seeder", "main")
    for i in range(3):
        append(HistoryStore(seeder), entry | {"sha": f"{i:040x}", "timestamp": f"2025-01-0{i + 1}T00:00:00+00:00"})
    tip = git(world["remote"], "rev-parse", DEFAULT_BRANCH)

    # The pull request, from a fork: reads the history, never writes it.
    pr_dir = tmp_path / "pr"
    pr_dir.mkdir()
    pr_runner = checkout(world, "pr-runner", world["head"])
    shas = {"base": world["main"], "head": world["head"]}
    pr_env = env_for(pr_dir, pr_runner, "pull_request", pull_request_event(shas, fork=True))
    result = rag_gate(pr_runner, pr_env, "--fail-on", "never")
    assert result.exit_code == 1, result.output  # verdict fail does not block (--fail-on never); the trend does
    assert "trend vs main: critical" in result.stderr
    assert git(world["remote"], "rev-parse", DEFAULT_BRANCH) == tip  # read-only

    comment = (pr_runner / "rag-gate-out" / "comment.md").read_text()
    section = comment[comment.index("### Trend vs main") :]
    assert "mean of the last 4 comparable main-branch runs" in section and "🔴 CRITICAL" in section
    row = next(line for line in section.replace("\u2060", "").splitlines() if line.startswith("| Hit rate@5"))
    assert row.split(" | ")[1:4] == ["1.000", "0.500", "+50.0 %"]  # hand: 12 of the 24 in-domain cases lost
    assert "```mermaid\nxychart-beta" in section and '"head"]' in section
    trend = json.loads((pr_runner / "rag-gate-out" / "trend.json").read_text())
    hit = next(m for m in trend["metrics"] if m["metric"] == "hit_rate@5")
    assert hit["status"] == "critical" and hit["window"] == [1.0, 1.0, 1.0, 1.0] and trend["skipped"] == {}
    report = json.loads((pr_runner / "rag-gate-out" / "report.json").read_text())  # the comparison carries it
    in_report = next(m for m in report["trend"]["metrics"] if m["metric"] == "hit_rate@5")
    assert (in_report["status"], in_report["baseline"], in_report["value"]) == ("critical", 1.0, 0.5)
    assert "### Trend vs main" in (pr_dir / "summary.md").read_text()
    out = outputs(pr_dir)
    assert out["trend-status"] == "critical" and out["verdict"] == "fail"
    assert set(out) <= set(yaml.safe_load((REPO / "action.yml").read_text())["outputs"])


def test_an_unreadable_history_is_a_warning_never_a_failure_of_the_check(world, tmp_path):
    pr_runner = checkout(world, "pr-offline", world["head"])
    git(pr_runner, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    shas = {"base": world["main"], "head": world["head"]}
    env = env_for(tmp_path, pr_runner, "pull_request", pull_request_event(shas))
    result = rag_gate(pr_runner, env, "--fail-on", "never")
    assert result.exit_code == 0, result.output
    (warning,) = [line for line in result.stdout.splitlines() if "trend vs main skipped" in line]
    assert warning.startswith("::warning ")
    assert "::trend vs main skipped: cannot read history.jsonl on branch rag-gate-history of origin: " in warning
    assert "### Trend vs main" not in (pr_runner / "rag-gate-out" / "comment.md").read_text()


def test_history_off_and_history_file(world, tmp_path):
    runner = checkout(world, "file-runner", "main")
    env = env_for(tmp_path, runner, "push", push_event(world["main"]), GITHUB_REF="refs/heads/main")
    env["GITHUB_SHA"] = world["main"]
    off = rag_gate(runner, env, "--history", "off")
    assert off.exit_code == 2 and "nothing to store" in off.stderr  # no cache and no history: nothing to do
    recorded = rag_gate(runner, env, "--history", "ci/history.jsonl")
    assert recorded.exit_code == 0, recorded.output
    (line,) = (runner / "ci" / "history.jsonl").read_text().splitlines()
    assert json.loads(line)["sha"] == world["main"]


def test_without_any_history_yet_a_pull_request_shows_no_trend_section_and_no_warning(world, tmp_path):
    fresh = world["root"] / "fresh.git"
    if not fresh.exists():
        git(world["root"], "clone", "-q", "--bare", str(world["root"] / "origin-src"), str(fresh))
    pr_runner = checkout(world, "pr-fresh", world["head"])
    git(pr_runner, "remote", "set-url", "origin", str(fresh))
    shas = {"base": world["main"], "head": world["head"]}
    result = rag_gate(pr_runner, env_for(tmp_path, pr_runner, "pull_request", pull_request_event(shas)))
    assert result.exit_code == 1, result.output  # the PR's own verdict: fail
    assert "trend vs main" not in result.output + result.stderr
    assert "### Trend vs main" not in (pr_runner / "rag-gate-out" / "comment.md").read_text()
    assert "trend-status" not in outputs(tmp_path)
