"""gate.pr.report's sticky comment: one per config, never stale (a push that reaches no verdict replaces the
previous verdict), and an older rag-gate's comment is adopted."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from scratch_repo import actions_env, git, make_scratch_repo, pull_request_event

from gate.cli import main
from gate.outputs.markdown import sticky_marker


def _pr_step(repo: Path, env: dict, config: str, out: Path):
    args = ["pr", "--config", config, "--working-directory", str(repo), "--out-dir", str(out), "--cache-dir", ""]
    return CliRunner().invoke(main, args, env=env)


def test_each_config_keeps_its_own_sticky_comment_and_errors_replace_stale_verdicts(tmp_path, fake):
    repo = tmp_path / "repo"
    shas = make_scratch_repo(repo)
    for branch in ("main", "feature"):  # a second config, on both commits: top_k irrelevant, same pipeline
        git(repo, "checkout", "-q", branch)
        (repo / "other.yml").write_text((repo / "rag-gate.yml").read_text())
        git(repo, "add", "other.yml")
        git(repo, "commit", "-q", "-m", "second config")
        shas["base" if branch == "main" else "head"] = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "feature")
    git(repo, "merge", "-q", "--no-edit", "main")
    shas["head"] = git(repo, "rev-parse", "HEAD")
    env = actions_env(tmp_path, fake.api_url, fake.token, repo, pull_request_event(shas))
    first = _pr_step(repo, env, "rag-gate.yml", tmp_path / "out1")
    second = _pr_step(repo, env, "other.yml", tmp_path / "out2")
    assert (first.exit_code, second.exit_code) == (1, 1), first.output + second.output
    bodies = {"\n".join(c["body"].splitlines()[:2]): c["body"] for c in fake.comments}
    assert set(bodies) == {sticky_marker("rag-gate.yml"), sticky_marker("other.yml")}
    assert "rag-gate: **fail** · config other.yml" in bodies[sticky_marker("other.yml")]

    # The next push breaks the golden set: no verdict, exit 2; rag-gate.yml's comment says so.
    (repo / "golden.jsonl").write_text((repo / "golden.jsonl").read_text() + '{"id": "broken", \n')
    git(repo, "commit", "-q", "-am", "a malformed golden line")
    third = _pr_step(repo, env, "rag-gate.yml", tmp_path / "out3")
    assert third.exit_code == 2
    assert len(fake.comments) == 2
    body = next(c["body"] for c in fake.comments if c["body"].startswith(sticky_marker("rag-gate.yml")))
    assert "rag-gate: **error** (exit 2: bad input or usage) · config rag-gate.yml" in body
    assert "No verdict was reached" in body and "golden.jsonl:29" in body and "fail" not in body.split("\n")[2]


def test_sticky_markers_share_the_first_line_and_tell_configs_apart():
    markers = [sticky_marker(c) for c in ("rag-gate.yml", "eval/other.yml", "rag-gate.yml.bak")]
    assert all(m.splitlines()[0] == "<!-- rag-gate -->" for m in markers)
    assert not any(a.startswith(b) for a in markers for b in markers if a != b)  # no config matches another's
    assert sticky_marker("a--> <script>") == "<!-- rag-gate -->\n<!-- rag-gate config: a_-___script_ -->"


def test_a_comment_of_an_older_rag_gate_is_adopted_not_left_stale(fake):
    from gate.pr import github as gh

    old = fake.add_comment("<!-- rag-gate -->\n## ✅ rag-gate: **pass**", login="github-actions[bot]")
    other = fake.add_comment(f"{sticky_marker('other.yml')}\n## report of other.yml", login="github-actions[bot]")
    client = gh.make_client(fake.token, fake.api_url, gh.RetryPolicy(total=0))
    done = gh.upsert_comment(client, "octo/rag", 7, "## ❌ fail", marker=sticky_marker("rag-gate.yml"))
    assert (done.action, done.id) == ("updated", old["id"])
    assert old["body"].startswith(sticky_marker("rag-gate.yml")) and other["body"].endswith("other.yml")
    again = gh.upsert_comment(client, "octo/rag", 7, "## ✅ pass", marker=sticky_marker("third.yml"))
    assert again.action == "created" and len(fake.comments) == 3  # no legacy comment is left to adopt


def test_the_reporter_posts_with_a_client_maker_and_holds_no_token(fake):
    """The comment's client comes from a maker (the token in its closure): the Reporter, an output object, has no
    token field and its repr does not show it; without a token nothing is posted."""
    import dataclasses

    from gate.pr import github as gh
    from gate.pr.report import Reporter
    from gate.redact import Redactor

    context = gh.GithubContext(repository="octo/rag", pr_number=7, api_url=fake.api_url)
    lines: list[str] = []
    client = gh.client_factory(fake.token, fake.api_url, gh.RetryPolicy(total=0))
    report = Reporter(context, lines.append, Redactor([fake.token]), client=client)
    assert "token" not in {f.name for f in dataclasses.fields(Reporter)} and fake.token not in repr(report)
    status, url, warning = report.post_comment(f"## ❌ fail, echoing {fake.token}")
    assert (status, warning) == ("created", "") and url
    assert fake.comments[0]["body"].startswith(sticky_marker("rag-gate.yml"))
    assert fake.token not in fake.comments[0]["body"] and "echoing ***" in fake.comments[0]["body"]
    assert gh.client_factory(None, fake.api_url) is None and gh.client_factory("", fake.api_url) is None
    unset = Reporter(context, lines.append, Redactor(), client=None).post_comment("## ✅ pass")
    assert unset[0] == "failed" and "no GitHub token" in unset[2] and len(fake.comments) == 1
