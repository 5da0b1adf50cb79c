"""`rag-gate pr` end to end: a scratch git repo (base + regressing PR), the real flow, a fake GitHub on 127.0.0.1."""

from __future__ import annotations

import difflib
import json
import re
import subprocess

import pytest
import yaml
from click.testing import CliRunner
from fake_github import FakeGithub
from helpers import REPO
from junit_check import assert_valid_junit
from scratch_repo import GITHUB_VARS, N_FACTS, RAG_TEMPLATE, make_scratch_repo, pull_request_event
from scratch_repo import actions_env as shared_actions_env

from gate.cli import main
from gate.files import locked_directory
from gate.outputs.markdown import sticky_marker
from gate.pr import git
from gate.pr import github as gh

CACHE_KEY = "test-cache-signing-key-0123456789"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    repo = tmp_path_factory.mktemp("scratch") / "repo"
    shas = make_scratch_repo(repo)
    return repo, shas, tmp_path_factory.mktemp("cache")


def actions_env(tmp_path, fake, scratch, event_name="pull_request", event=None):
    repo, shas, _ = scratch
    return shared_actions_env(tmp_path, fake.api_url, fake.token, repo, event or pull_request_event(shas), event_name)


def run_pr(tmp_path, scratch, env, *extra, out_dir=None):
    repo, _, cache = scratch
    args = [
        "pr",
        "--config",
        "rag-gate.yml",
        "--working-directory",
        str(repo),
        "--cache-dir",
        str(cache),
        "--out-dir",
        out_dir or str(tmp_path / "out"),
        "--repeats",
        "",
        "--setup-command",
        "",
        *extra,
    ]
    return CliRunner().invoke(main, args, env=env, catch_exceptions=False)


def outputs(tmp_path):
    return dict(line.split("=", 1) for line in (tmp_path / "output.txt").read_text().splitlines() if "=" in line)


def push_env(tmp_path, fake, scratch):
    """A push to main that stores the base results for PRs (the cache is written by trusted runs only)."""
    event = {"ref": "refs/heads/main", "repository": {"full_name": "octo/rag", "default_branch": "main"}}
    env = actions_env(tmp_path, fake, scratch, event_name="push", event=event)
    return env | {"GITHUB_REF": "refs/heads/main", "GITHUB_SHA": scratch[1]["base"], "RAG_GATE_CACHE_KEY": CACHE_KEY}


def test_first_run_posts_one_comment_second_run_edits_it(tmp_path, fake, scratch):
    stored = run_pr(tmp_path, scratch, push_env(tmp_path, fake, scratch), out_dir="rag-gate-out/push")
    assert stored.exit_code == 0 and "verdict: cached" in stored.stderr, stored.output
    assert fake.requests == [] and outputs(tmp_path)["verdict"] == "cached"
    env = actions_env(tmp_path, fake, scratch) | {"RAG_GATE_CACHE_KEY": CACHE_KEY}
    first = run_pr(tmp_path, scratch, env, out_dir="rag-gate-out/first")
    assert first.exit_code == 1, first.output
    assert "(base from cache)" in first.stderr and "changed after they were computed" not in first.stderr
    assert len(fake.comments) == 1 and fake.comments[0]["body"].startswith(sticky_marker("rag-gate.yml"))
    assert "fail" in fake.comments[0]["body"] and len(fake.comments[0]["body"]) < gh.COMMENT_LIMIT
    out = outputs(tmp_path)
    assert set(out) <= set(yaml.safe_load((REPO / "action.yml").read_text())["outputs"])
    assert out["verdict"] == "fail" and out["comment-status"] == "created"
    assert int(out["regressed-count"]) >= 6 and out["ood-failure-count"] == "4"
    assert out["report-path"] == "rag-gate-out/first/report.json"  # relative to the workspace
    report = json.loads((scratch[0] / out["report-path"]).read_text())
    assert fake.comments[0]["body"] == gh.comment_body(
        (scratch[0] / out["comment-path"]).read_text(), marker=sticky_marker("rag-gate.yml")
    )
    assert report["verdict"] == "fail" and len(report["regressed_cases"]) == int(out["regressed-count"])
    # report.html beside report.json, every regressed case in it; the comment links the run whose artifact holds it
    page = (scratch[0] / "rag-gate-out/first/report.html").read_text()
    data = json.loads(re.search(r'id="rag-gate-data">(.*?)</script>', page, re.S).group(1))
    assert {c["id"] for c in data["cases"] if "regressed" in c["st"]} == {c["id"] for c in report["regressed_cases"]}
    run = "https://github.com/octo/rag/actions/runs/42"
    assert f"`report.html` in the artifacts of [this workflow run]({run})" in fake.comments[0]["body"]
    assert f'href="{run}"' in page
    summary = (tmp_path / "summary.md").read_text()
    assert "rag-gate" in summary and "fail" in summary
    # the token is masked first and never printed otherwise; regressions are annotated on the golden file
    lines = first.stdout.splitlines()
    assert lines[0] == f"::add-mask::{fake.token}" and sum(fake.token in line for line in lines) == 1
    assert any(line.startswith("::error file=golden.jsonl,line=") and "regressed" in line for line in lines)
    assert any("out-of-domain case ood0 is now answered" in line for line in lines)

    second = run_pr(tmp_path, scratch, env, out_dir="rag-gate-out/first")
    assert second.exit_code == 1 and "(base from cache)" in second.stderr
    assert len(fake.comments) == 1 and len(fake.calls("POST")) == 1 and len(fake.calls("PATCH")) == 1
    assert outputs(tmp_path)["comment-status"] == "updated"


def test_pull_request_target_is_refused_before_anything_runs(tmp_path, fake, scratch):
    env = actions_env(tmp_path, fake, scratch, event_name="pull_request_target")
    result = run_pr(tmp_path, scratch, env)
    assert result.exit_code == 2
    assert "refuses to run on `pull_request_target`" in result.stderr and "workflow_run" in result.stderr
    assert fake.requests == [] and not (tmp_path / "out").exists()
    assert "exit 2: bad input or usage" in (tmp_path / "summary.md").read_text()
    assert outputs(tmp_path)["verdict"] == "error"
    assert any(line.startswith("::error title=rag-gate%3A bad input") for line in result.stdout.splitlines())


def test_403_on_comment_still_writes_summary_and_follows_verdict(tmp_path, fake, scratch):
    fake.fail("POST", "/comments$", 403, body={"message": "Resource not accessible by integration"}, times=9)
    env = actions_env(tmp_path, fake, scratch, event=pull_request_event(scratch[1], fork=True))
    result = run_pr(tmp_path, scratch, env)
    assert result.exit_code == 1 and fake.comments == []
    summary = (tmp_path / "summary.md").read_text()
    assert "fork" in summary and "| metric |" in summary
    warning = "::warning title=rag-gate%3A comment not posted::"
    assert any(line.startswith(warning) for line in result.stdout.splitlines())
    assert outputs(tmp_path)["comment-status"] == "failed"


def test_persistent_5xx_still_follows_verdict(tmp_path, fake, scratch):
    fake.fail("GET", "/issues/7$", 502, times=99)
    env = actions_env(tmp_path, fake, scratch)
    result = run_pr(tmp_path, scratch, env, "--fail-on", "never")
    assert result.exit_code == 0 and outputs(tmp_path)["verdict"] == "fail"
    assert "kept failing after retries" in (tmp_path / "summary.md").read_text()


def test_missing_base_commit_asks_for_fetch_depth_0(tmp_path, fake, scratch):
    shas = {"base": "f" * 40, "head": scratch[1]["head"]}
    env = actions_env(tmp_path, fake, scratch, event=pull_request_event(shas))
    result = run_pr(tmp_path, scratch, env)
    assert result.exit_code == 2 and "fetch-depth: 0" in result.stderr and f"{'f' * 40}" in result.stderr
    (comment,) = fake.comments  # no verdict: the sticky comment says why, so no earlier verdict stays up
    assert comment["body"].splitlines()[2].startswith("## 🛑 rag-gate: **error** (exit 2: bad input or usage)")
    assert "fetch-depth: 0" in comment["body"]


def test_setup_command_failure_is_exit_3(tmp_path, fake, scratch):
    env = actions_env(tmp_path, fake, scratch)
    result = run_pr(tmp_path, scratch, env, "--setup-command", "exit 7")
    assert result.exit_code == 3 and "--setup-command exited with 7" in result.stderr
    assert "exit 3: the evaluation itself could not run" in (tmp_path / "summary.md").read_text()


def test_local_mode_prints_the_comment_and_posts_nothing(tmp_path, scratch):
    env = dict.fromkeys(GITHUB_VARS)
    junit_path = tmp_path / "reports" / "ci" / "junit.xml"  # a folder that does not exist yet is made
    result = run_pr(tmp_path, scratch, env, "--base-ref", "main", "--junit", str(junit_path))
    assert result.exit_code == 1
    assert result.stdout.startswith(sticky_marker("rag-gate.yml"))
    junit = assert_valid_junit(junit_path.read_text(encoding="utf-8"))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert sum(int(s.get("failures")) for s in junit.findall("testsuite")) == len(junit.findall(".//failure")) > 0
    cases = junit.findall(".//testcase[@classname='rag-gate.cases']")
    assert {c.get("name") for c in cases} == {c["id"] for c in report["regressed_cases"]}
    lines = {c["id"]: c["line"] for c in report["regressed_cases"]}  # the head's golden file, as annotations
    assert all(c.find("failure").text.startswith(f"golden case: golden.jsonl:{lines[c.get('name')]}\n") for c in cases)
    assert all(lines.values())
    assert not any(line.startswith("::") for line in result.stdout.splitlines())
    assert (tmp_path / "out" / "comment.md").read_text() in result.stdout
    assert "comment: local" in result.stderr
    assert not any((scratch[0] / ".git" / "worktrees").glob("*"))  # the base worktree was removed
    # What changed: the PR's files (against difflib's line counts of the two versions) and an unchanged pipeline
    changes = json.loads((tmp_path / "out" / "report.json").read_text())["changes"]
    before, after = (RAG_TEMPLATE.format(broken=b, n=N_FACTS).splitlines() for b in (False, True))
    diff = [line for line in difflib.unified_diff(before, after, lineterm="", n=0) if line[:3] not in ("---", "+++")]
    added, deleted = sum(line.startswith("+") for line in diff), sum(line.startswith("-") for line in diff)
    assert changes["files"] == [{"path": "rag.py", "added": added, "deleted": deleted}] and added > 0
    shas = scratch[1]
    assert changes["commits"] == f"{shas['base'][:12]}..{shas['head'][:12]}"
    assert changes["pipeline_known"] and changes["pipeline_diff"] == []
    assert "Files changed (" in result.stdout and f"- rag.py (+{added} -{deleted})" in result.stdout


def test_a_junit_folder_that_cannot_be_made_is_refused_before_anything_runs(tmp_path, scratch):
    (tmp_path / "blocker").write_text("a file where the folder should be")
    junit = tmp_path / "blocker" / "junit.xml"
    result = run_pr(tmp_path, scratch, dict.fromkeys(GITHUB_VARS), "--base-ref", "main", "--junit", str(junit))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"rag-gate: error: --junit {junit}: cannot create the folder {junit.parent}: ")
    assert not (tmp_path / "out" / "report.json").exists() and not (tmp_path / "out" / "base").exists()


def test_bad_flag_values_are_usage_errors(tmp_path, scratch):
    result = CliRunner().invoke(main, ["pr", "--repeats", "zero"])
    assert result.exit_code == 2 and "expected a whole number" in result.output
    result = CliRunner().invoke(main, ["pr", "--comment", "maybe"])
    assert result.exit_code == 2 and "expected on or off" in result.output


def test_token_echoed_by_github_is_printed_and_written_nowhere(tmp_path, scratch):
    token = "ghs_echoedtoken0123456789"
    fake = FakeGithub(token=token).start()
    try:
        for method in ("GET", "POST", "PATCH"):  # a proxy that quotes the Authorization header in every error
            fake.fail(method, ".", 400, body={"message": "Bad request (proxy)"}, echo_authorization=True, times=99)
        env = actions_env(tmp_path, fake, scratch) | {"GITHUB_TOKEN": token}
        result = run_pr(tmp_path, scratch, env, "--fail-on", "never")
    finally:
        fake.stop()
    assert result.exit_code == 0 and outputs(tmp_path)["comment-status"] == "failed"
    assert any(r.status == 400 for r in fake.requests)
    lines = result.stdout.splitlines()
    assert lines[0] == f"::add-mask::{token}" and not any(token in line for line in lines[1:])
    assert any("GitHub answered HTTP 400" in line and "token ***" in line for line in lines)
    assert token not in result.stderr
    written = [tmp_path / "summary.md", tmp_path / "output.txt", *(tmp_path / "out").rglob("*")]
    assert not [p for p in written if p.is_file() and token in p.read_text(errors="replace")]


def test_committed_out_dir_symlink_out_of_the_checkout_is_refused(tmp_path, fake, scratch):
    repo = scratch[0]
    victim = tmp_path / "victim"
    (victim / "head").mkdir(parents=True)
    (victim / "head" / "precious.txt").write_text("keep")
    link = repo / "escape-link"
    link.symlink_to(victim)
    try:
        result = run_pr(tmp_path, scratch, actions_env(tmp_path, fake, scratch), out_dir="escape-link")
    finally:
        link.unlink()
    assert result.exit_code == 2 and "--out-dir escape-link: resolves through a symbolic link" in result.stderr
    assert sorted(p.relative_to(victim).as_posix() for p in victim.rglob("*")) == ["head", "head/precious.txt"]
    assert [c["body"].splitlines()[2][:30] for c in fake.comments] == ["## 🛑 rag-gate: **error** (exit"]


def test_the_pull_request_that_adds_rag_gate_passes_with_a_notice(tmp_path, fake, scratch):
    """No config in the base commit: nothing to compare, a documented pass (exit 0, verdict skipped), no comment."""
    source, _, _ = scratch
    repo = tmp_path / "adding"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    identity = ["-c", "user.email=ci@example.com", "-c", "user.name=ci"]
    (repo / "README.md").write_text("a repository without rag-gate\n")
    subprocess.run(["git", *identity, "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", *identity, "commit", "-q", "-m", "base"], cwd=repo, check=True)
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "checkout", "-q", "-b", "add-rag-gate"], cwd=repo, check=True)
    for name in ("rag-gate.yml", "golden.jsonl", "rag.py", "docs.jsonl", ".gitignore"):
        (repo / name).write_bytes((source / name).read_bytes())
    subprocess.run(["git", *identity, "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", *identity, "commit", "-q", "-m", "add rag-gate"], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    env = shared_actions_env(
        tmp_path, fake.api_url, fake.token, repo, pull_request_event({"base": base, "head": head}), "pull_request"
    )
    result = run_pr(tmp_path, (repo, None, tmp_path / "cache"), env)
    assert result.exit_code == 0, result.output
    assert f"rag-gate.yml is not in the base commit {base[:12]}: this pull request adds rag-gate" in result.stderr
    assert "::notice title=rag-gate%3A not gated yet::" in result.stdout
    assert outputs(tmp_path)["verdict"] == "skipped"
    assert "not gated yet" in (tmp_path / "summary.md").read_text()
    assert fake.comments == [] and not (tmp_path / "out" / "report.json").exists()


def test_uncommitted_changes_are_evaluated_and_said(tmp_path):
    """Locally the head side is the working tree: an uncommitted fix passes, and rag-gate says it is not HEAD."""
    repo = tmp_path / "repo"
    shas = make_scratch_repo(repo)
    assert git.uncommitted(repo) == []
    (repo / "rag.py").write_text(RAG_TEMPLATE.format(broken=False, n=N_FACTS))  # undo the PR's break, uncommitted
    assert git.uncommitted(repo) == ["rag.py"]
    result = run_pr(tmp_path, (repo, shas, tmp_path / "cache"), dict.fromkeys(GITHUB_VARS), "--base-ref", "main")
    assert result.exit_code == 0, result.output
    assert "1 uncommitted change(s) (rag.py): the head side is evaluated as it is on disk, not as commit " in (
        result.stderr
    )
    assert shas["head"][:12] in result.stderr


@pytest.mark.parametrize("name", ["report.json", "comment.md", "head/scores.jsonl"])
def test_junit_onto_the_run_s_own_outputs_is_refused_before_anything_runs(tmp_path, scratch, name):
    out = tmp_path / "out"
    junit = out / name
    result = run_pr(tmp_path, scratch, dict.fromkeys(GITHUB_VARS), "--base-ref", "main", "--junit", str(junit))
    assert result.exit_code == 2, result.output
    first = result.stderr.splitlines()[0]
    assert first.startswith("rag-gate: error: ") and f"--junit {junit}" in first and f"--out-dir {out}" in first
    assert not out.exists()  # nothing evaluated, nothing written


def test_a_pr_that_relaxes_the_gate_is_judged_under_the_base_and_says_so(tmp_path):
    """The issue's relaxation, in the PR's own rag-gate.yml: still judged (and failed) under the base's policy; the
    comment, report.json and the JUnit property say what changes after merge."""
    repo = tmp_path / "repo"
    shas = make_scratch_repo(repo)
    config = (repo / "rag-gate.yml").read_text()
    relaxed = "gate: [hit_rate@5]\nmargins: {refusal: 0.5}\nfail_on_new_ood: false\nmust_pass: {out_of_domain: false}\n"
    (repo / "rag-gate.yml").write_text(config + relaxed)
    junit = tmp_path / "junit.xml"
    result = run_pr(
        tmp_path,
        (repo, shas, tmp_path / "cache"),
        dict.fromkeys(GITHUB_VARS),
        "--base-ref",
        "main",
        "--junit",
        str(junit),
    )
    assert result.exit_code == 1, result.output  # the PR's break still fails under the base's gate
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    changes = {c["key"]: (c["base"], c["head"]) for c in report["policy_changes"]}
    assert changes["margins.refusal"] == ("0.03", "0.5") and changes["fail_on_new_ood"] == ("true", "false")
    assert changes["gate"][1] == "[hit_rate@5]"
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "**This PR changes the gate's policy** (applies after merge; this PR is judged under the base's)" in comment
    for change in ("margins.refusal 0.03 → 0.5", "fail\\_on\\_new\\_ood true → false",
                   "must\\_pass.out\\_of\\_domain true → false"):  # fmt: skip
        assert f"\n> - {change}\n" in comment  # four changes: one full line each, none cut
    properties = {p.get("name"): p.get("value") for p in assert_valid_junit(junit.read_text()).iter("property")}
    assert properties["policy_changes"].endswith("fail_on_new_ood true → false; must_pass.out_of_domain true → false")


def test_an_out_dir_another_pr_run_holds_is_refused_and_its_verdict_kept(tmp_path, scratch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "comment.md").write_text("the other run's verdict")
    with locked_directory(out, "another run"):
        result = run_pr(tmp_path, scratch, dict.fromkeys(GITHUB_VARS), "--base-ref", "main")
    assert result.exit_code == 2, result.output
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"rag-gate: error: --out-dir {out}: {out} is in use by another rag-gate run (pid ")
    assert (out / "comment.md").read_text() == "the other run's verdict"  # nothing of it cleared
    assert not (out / "head").exists()


@pytest.mark.parametrize("out_dir", ["eval", "."])
def test_an_out_dir_holding_the_config_or_golden_set_is_refused_before_anything_runs(tmp_path, out_dir):
    repo = tmp_path / "repo"
    make_scratch_repo(repo)
    (repo / "eval").mkdir()
    git.git(repo, "mv", "golden.jsonl", "eval/golden.jsonl")
    config = (repo / "rag-gate.yml").read_text().replace("golden: golden.jsonl", "golden: eval/golden.jsonl")
    (repo / "rag-gate.yml").write_text(config)
    before = (repo / "eval" / "golden.jsonl").read_bytes()
    result = run_pr(tmp_path, (repo, None, tmp_path / "cache"), dict.fromkeys(GITHUB_VARS), "--base-ref", "main",
                    out_dir=str(repo / out_dir))  # fmt: skip
    assert result.exit_code == 2, result.output
    label = "golden: " if out_dir == "eval" else "config: "
    assert result.stderr.splitlines()[0].startswith(
        f"rag-gate: error: --out-dir {repo / out_dir}: the directory holds the run's own input ({label}"
    )
    assert (repo / "eval" / "golden.jsonl").read_bytes() == before and not (repo / "eval" / "base").exists()
