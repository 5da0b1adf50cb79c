"""The staged adaptive evaluation a CI matrix shards: `run --shard i/n --upto-batch K`, `merge`, `compare --adaptive`.

Real pipelines (a code-word RAG function in a scratch repository whose calls are counted), each side checked out
in its own worktree: (a) a clear regression, two shards per side, stops at stage 1 with the `adaptive` block
`rag-gate pr --adaptive on` writes on the same repository; (b) a PR the first look cannot settle exits 4 with
`next_batch=2` and no report, and stage 2 runs only the new cases and settles; (c) `merge` refuses stages of
different K or orders and an interrupted shard; (d) `--upto-batch` and `compare --adaptive` need `adaptive: true`;
(e) a settled stage reports the configured α and no policy change, and a comparison seeded with another head
commit than the stages names both.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import COUNTING_TEMPLATE as TEMPLATE
from helpers import SCRATCH_CONFIG, code_word_repo, git, pr_order

from gate.cli import main
from gate.compare.sequential import commit_seed
from gate.golden import file_sha256

CONFIG = SCRATCH_CONFIG + "scoring: {jobs: 1}\n"
ENV_VARS = "GITHUB_OUTPUT GITHUB_EVENT_NAME GITHUB_EVENT_PATH GITHUB_ACTIONS GITHUB_STEP_SUMMARY GITHUB_TOKEN".split()


def invoke(*args: object, env: dict[str, str | None] | None = None):
    """``rag-gate ARGS`` in process, outside Actions (click's ``Result``)."""
    env = dict.fromkeys(ENV_VARS) | (env or {})
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def calls(path: Path) -> list[str]:
    """The case ids a pipeline logged, one per call."""
    return path.read_text().split() if path.exists() else []


def make_sides(root: Path, n: int, broken_every: int, config: str) -> dict[str, Path]:
    """A scratch repository (``main``: the base, ``feature``: the head) and a worktree of each side.

    Returns:
        ``{"repo": …, "base": base worktree, "head": head worktree}``; the calls go to ``root/calls.{side}``.
    """
    code = {side: TEMPLATE.format(broken=broken, n=n, calls=str(root / f"calls.{side}"))
            for side, broken in (("base", 0), ("head", broken_every))}  # fmt: skip
    code_word_repo(root / "repo", n, config, code["base"], code["head"])
    git(root / "repo", "worktree", "add", "-q", str(root / "base"), "main")
    git(root / "repo", "worktree", "add", "-q", "--detach", str(root / "head"), "feature")
    return {"repo": root / "repo", "base": root / "base", "head": root / "head"}


def stage(root: Path, k: int, shards: int = 2) -> None:
    """Stage ``k`` on both sides: ``run --shard i/n --upto-batch k`` per shard (the order seeded with the head
    commit), then ``merge`` into runs/{side}."""
    head = git(root / "head", "rev-parse", "HEAD")
    for side in ("base", "head"):
        sha = git(root / side, "rev-parse", "HEAD")
        dirs = []
        for i in range(1, shards + 1):
            out = root / "runs" / f"{side}-s{i}"
            result = invoke("run", "--config", root / side / "rag-gate.yml", "--out", out, "--shard", f"{i}/{shards}",
                            "--upto-batch", k, "--head-sha", head, "--git-sha", sha, "--jobs", 1)  # fmt: skip
            assert result.exit_code == 0, result.output
            dirs.append(out)
        result = invoke("merge", *dirs, "--out", root / "runs" / side)
        assert result.exit_code == 0, result.output


def compare_adaptive(root: Path, name: str):
    """``compare runs/base runs/head --adaptive`` with ``$GITHUB_OUTPUT`` at root/{name}.output: (result, outputs)."""
    output = root / f"{name}.output"
    seeded = ["--head-sha", git(root / "head", "rev-parse", "HEAD")] if (root / "head").exists() else []
    result = invoke("compare", root / "runs" / "base", root / "runs" / "head", "--adaptive", "--out", root / name,
                    *seeded, "--format", "json", env={"GITHUB_OUTPUT": str(output)})  # fmt: skip
    lines = output.read_text().splitlines() if output.exists() else []
    return result, dict(line.split("=", 1) for line in lines)


@pytest.fixture(scope="module")
def regression(tmp_path_factory):
    """A PR that breaks retrieval on every case of 200 (a clear regression), in batches of 40."""
    root = tmp_path_factory.mktemp("stages")
    make_sides(root, 200, 1, CONFIG + "adaptive: {batch: 40}\n")
    return root


def test_a_clear_regression_stops_at_stage_one_as_the_pr_flow_does(regression):
    root = regression
    stage(root, 1)
    # each side ran the two out-of-domain cases and the first batch (40 of the order), each case once, in 2 shards
    order = pr_order(root / "head", 200)  # seeded with the config's seed and the head commit, as in the PR flow
    first = {"ood0", "ood1"} | set(order[:40])
    for side in ("base", "head"):
        ran = calls(root / f"calls.{side}")
        assert sorted(ran) == sorted(first)
        merged = json.loads((root / "runs" / side / "manifest.json").read_text())
        assert (merged["status"], merged["upto_batch"], merged["n_cases"]) == ("partial", 1, 42)
        shard_cases = [json.loads((root / "runs" / f"{side}-s{i}" / "manifest.json").read_text())["n_cases"]
                       for i in (1, 2)]  # fmt: skip
        # the shard rule (case j of the golden set in shard j mod 2 + 1) applied to the golden set, then the stage
        golden = [json.loads(line)["id"] for line in (root / side / "golden.jsonl").read_text().splitlines()]
        assert shard_cases == [sum(c in first for c in golden[i - 1 :: 2]) for i in (1, 2)]
    result, outputs = compare_adaptive(root, "report")
    assert result.exit_code == 1, result.output
    assert outputs == {"settled": "true"}
    staged = json.loads((root / "report" / "report.json").read_text())
    adaptive = staged["adaptive"]
    assert staged["verdict"] == "fail"
    assert (adaptive["stopped"], adaptive["looks"], adaptive["cases_run"], adaptive["batch"]) == ("fail", 1, 42, 40)
    assert adaptive["not_run"] == order[40:]
    assert adaptive["repeats_run_base"] == adaptive["repeats_run_head"] == 42
    assert adaptive["repeats_fixed"] == 202  # the fixed design: every case (200 and 2 out-of-domain), R = 1
    decisions = {m["name"]: (m["decision"], m["decided_at"]) for m in adaptive["metrics"]}
    assert decisions["hit_rate@5"] == decisions["mrr"] == ("fail", 40)  # every retrieval broken: Δ = −1
    assert decisions["grounded_answer_rate"] == decisions["error_rate"] == ("continue", None)  # unchanged

    # the PR flow on the same repository: the same block, the same rows (its calls are its own)
    out = root / "pr"
    pr = CliRunner().invoke(
        main,
        ["pr", "--base-ref", "main", "--working-directory", str(root / "repo"), "--out-dir", str(out),
         "--comment", "off", "--adaptive", "on"],
        env=dict.fromkeys(ENV_VARS + ["GITHUB_WORKSPACE", "GITHUB_REPOSITORY", "GITHUB_REF", "GITHUB_SHA"]),
        catch_exceptions=False,
    )  # fmt: skip
    assert pr.exit_code == 1, pr.output
    flow = json.loads((out / "report.json").read_text())
    assert flow["adaptive"] == adaptive

    def rows(report: dict) -> dict[str, tuple[str, str]]:
        """Each gated metric's status and reason; latency (measured anew in each run) left out."""
        return {m["name"]: (m["status"], m["reason"]) for m in report["metrics"]
                if m["gated"] and not m["name"].startswith("latency")}  # fmt: skip

    assert rows(flow) == rows(staged) and len(rows(staged)) == 8  # the 7 sequential metrics and refusal
    assert flow["verdict"] == "fail" and flow["n_cases"] == staged["n_cases"] == 42
    hit = rows(staged)["hit_rate@5"]
    assert hit[0] == "fail" and hit[1].startswith("sequential test at look 1 (after 40 cases of the order): ")


@pytest.fixture(scope="module")
def unsettled(tmp_path_factory):
    """A PR that changes nothing on 20 facts in batches of 5: the first look (5 cases) cannot rule out a drop of the
    MDE at N = 20, the second (10 cases) can."""
    root = tmp_path_factory.mktemp("unsettled")
    settings = "gate: [hit_rate@5]\nmargins: {hit_rate@5: 0.05}\nadaptive: {batch: 5}\n"
    make_sides(root, 20, 0, CONFIG + settings)
    return root


def test_an_unsettled_stage_exits_4_without_a_verdict_and_the_next_runs_only_new_cases(unsettled):
    root = unsettled
    stage(root, 1)
    assert [len(calls(root / f"calls.{side}")) for side in ("base", "head")] == [7, 7]
    result, outputs = compare_adaptive(root, "look1")
    assert result.exit_code == 4, result.output
    assert result.stdout.strip() == (
        "adaptive: not settled after look 1 of 4 (7 of 22 cases): run `--upto-batch 2` on both sides, then compare "
        "again"
    )
    assert outputs == {"settled": "false", "next_batch": "2"}
    assert not (root / "look1" / "report.json").exists() and not (root / "look1" / "comment.md").exists()

    stage(root, 2)
    order = pr_order(root / "head", 20)
    for side in ("base", "head"):
        ran = calls(root / f"calls.{side}")
        assert len(ran) == 12 and ran[7:] and sorted(ran[7:]) == sorted(order[5:10])  # only the new batch ran
        merged = json.loads((root / "runs" / side / "manifest.json").read_text())
        assert (merged["status"], merged["upto_batch"], merged["n_cases"]) == ("partial", 2, 12)
    result, outputs = compare_adaptive(root, "look2")
    assert result.exit_code == 0, result.output
    assert outputs == {"settled": "true"}
    report = json.loads((root / "look2" / "report.json").read_text())
    adaptive = report["adaptive"]
    assert (adaptive["stopped"], adaptive["looks"], adaptive["cases_run"], adaptive["not_run"]) == (
        "decided", 2, 12, order[10:]
    )  # fmt: skip  # every gated metric decided at the second look (against the MDE at N = 20)
    assert report["verdict"] == "pass" and report["n_cases"] == 12


def test_merge_refuses_stages_of_different_k_and_an_interrupted_shard(unsettled, tmp_path):
    root = unsettled
    head = root / "head" / "rag-gate.yml"
    one = tmp_path / "s1"
    assert invoke("run", "--config", head, "--out", one, "--shard", "1/2", "--upto-batch", 1).exit_code == 0
    two = tmp_path / "s2"
    assert invoke("run", "--config", head, "--out", two, "--shard", "2/2", "--upto-batch", 2).exit_code == 0
    result = invoke("merge", one, two, "--out", tmp_path / "merged")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"rag-gate: error: {two}: --upto-batch 2, {one}: --upto-batch 1; merge the shards of one stage (the same "
        "--upto-batch)"
    ]
    assert not (tmp_path / "merged" / "manifest.json").exists()
    # an interrupted stage shard (its manifest still says running) is refused too
    running = tmp_path / "s2-running"
    shutil.copytree(root / "runs" / "head-s2", running)
    manifest = json.loads((running / "manifest.json").read_text())
    (running / "manifest.json").write_text(json.dumps(manifest | {"status": "running"}))
    result = invoke("merge", root / "runs" / "head-s1", running, "--out", tmp_path / "merged")
    assert result.exit_code == 2
    assert f"{running}: the run is not complete (manifest status 'running'): it was interrupted" in result.stderr


def test_upto_batch_and_compare_adaptive_need_adaptive_in_the_config(unsettled, tmp_path):
    root = unsettled
    off = root / "head" / "off.yml"
    off.write_text(CONFIG)
    result = invoke("run", "--config", off, "--out", tmp_path / "run", "--upto-batch", 1)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"rag-gate: error: --upto-batch 1: {off} does not turn on `adaptive: true`"
    ]
    assert not (tmp_path / "run").exists()
    result = invoke("compare", root / "runs" / "base", root / "runs" / "head", "--adaptive", "--config", off,
                    "--out", tmp_path / "report")  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"rag-gate: error: {off}: --adaptive needs `adaptive: true` in the base's config"
    ]


def test_the_ci_layout_each_side_checked_out_in_one_place_with_its_own_config(tmp_path):
    """As in CI, both sides run from one checkout path and the PR edits rag-gate.yml: the head is not stale."""
    settings = "gate: [hit_rate@5]\nmargins: {hit_rate@5: 0.05}\nadaptive: {batch: 5}\n"
    code = [TEMPLATE.format(broken=0, n=20, calls=str(tmp_path / f"calls.{side}")) for side in ("base", "head")]
    repo = tmp_path / "repo"
    code_word_repo(repo, 20, CONFIG + settings, *code)
    config = repo / "rag-gate.yml"
    config.write_text(config.read_text().replace("concurrency: 2", "concurrency: 1"))  # the PR's own config
    git(repo, "commit", "-q", "-am", "the PR's config")

    def stage(k: int) -> None:
        for side, ref in (("base", "main"), ("head", "feature")):
            git(repo, "checkout", "-q", ref)
            result = invoke("run", "--config", config, "--out", tmp_path / "runs" / side, "--upto-batch", k)
            assert result.exit_code == 0, result.output
        git(repo, "checkout", "-q", "main")  # the look job checks out the base: its config is the policy

    stage(1)
    heads = json.loads((tmp_path / "runs" / "head" / "manifest.json").read_text())
    assert Path(heads["config"]).resolve() == config.resolve() and heads["config_sha256"] != file_sha256(config)
    result, outputs = compare_adaptive(tmp_path, "look1")
    assert result.exit_code == 4, result.output
    assert outputs == {"settled": "false", "next_batch": "2"}
    stage(2)
    result, outputs = compare_adaptive(tmp_path, "look2")
    assert result.exit_code == 0, result.output
    assert outputs == {"settled": "true"}
    assert json.loads((tmp_path / "look2" / "report.json").read_text())["adaptive"]["stopped"] == "decided"
    # the base's own config edited since its run is still refused
    config.write_text(config.read_text() + "# edited\n")
    result, _ = compare_adaptive(tmp_path, "look1-again")
    assert result.exit_code == 2 and "its config" in result.stderr and "changed since the run" in result.stderr


def test_compare_adaptive_refuses_a_head_of_another_golden_set(unsettled, tmp_path):
    root = unsettled
    head = tmp_path / "head"
    shutil.copytree(root / "runs" / "head", head)
    manifest = json.loads((head / "manifest.json").read_text())
    (head / "manifest.json").write_text(json.dumps(manifest | {"golden_sha256": "0" * 64}))
    result = invoke("compare", root / "runs" / "base", head, "--adaptive", "--out", tmp_path / "report")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"rag-gate: error: {head}: the head answered another golden set than the base's "
        f"{root / 'base' / 'golden.jsonl'}: the stages of both sides follow one order of one golden set (a PR that "
        "edits the golden set: rag-gate pr --adaptive on)"
    ]


@pytest.fixture(scope="module")
def settled(tmp_path_factory):
    """A PR that changes nothing on 20 facts in batches of 5, staged up to batch 2 (seeded with the head commit):
    the second look settles it, a pass."""
    root = tmp_path_factory.mktemp("settled")
    settings = "gate: [hit_rate@5]\nmargins: {hit_rate@5: 0.05}\nadaptive: {batch: 5}\n"
    make_sides(root, 20, 0, CONFIG + settings)
    stage(root, 2)
    return root


def test_a_settled_stage_reports_the_configured_alpha_and_no_policy_change(settled):
    """α_final (0.9 α) is a level of the analysis, not a policy change: both sides ran the same config."""
    result, outputs = compare_adaptive(settled, "report")
    assert result.exit_code == 0, result.output
    assert outputs == {"settled": "true"}
    report = json.loads((settled / "report" / "report.json").read_text())
    assert report["verdict"] == "pass" and report["policy_changes"] == []
    assert report["alpha"] == 0.05 and report["adaptive"]["alpha_final"] == pytest.approx(0.9 * 0.05)
    assert report["adaptive"]["alpha_sequential"] == pytest.approx(0.1 * 0.05)  # one sequential metric
    comment = (settled / "report" / "comment.md").read_text()
    assert "changes the gate's policy" not in comment
    assert (
        "· α 0.05 (one-sided, Holm across gated metrics; adaptive: fail looks at α_seq 0.005 per metric, the fixed-N "
        "analysis at α_final 0.045) ·"
    ) in comment
    assert "0.0450000" not in comment and "0.00500000" not in comment


def test_compare_adaptive_names_the_head_sha_the_stages_ran_with(settled, tmp_path):
    """A comparison seeded otherwise than the stages would take another order: rerunning a stage cannot fix it,
    so the one-line error names both seeds and both --head-sha values (escaped)."""
    head = git(settled / "head", "rev-parse", "HEAD")
    staged = commit_seed(7, head)  # the scratch config's seed 7
    for side in ("base", "head"):
        manifest = json.loads((settled / "runs" / side / "manifest.json").read_text())
        assert (manifest["order_seed"], manifest["order_head_sha"]) == (str(staged), head)
    runs, other = settled / "runs", "other\x1bsha"  # an escape character: printed as \x1b
    for given, theirs in (
        (["--head-sha", other], f"seed {commit_seed(7, other)} (--head-sha 'other\\x1bsha')"),
        ([], "seed 7 (no --head-sha)"),
    ):
        result = invoke("compare", runs / "base", runs / "head", "--adaptive", "--out", tmp_path / "report", *given)
        assert result.exit_code == 2, result.output
        assert result.stderr.strip().splitlines() == [
            f"rag-gate: error: {runs / 'base'}: its stages ran the adaptive order of seed {staged} (--head-sha "
            f"'{head}'), this comparison takes {theirs}; give `rag-gate compare --adaptive` the --head-sha the stages "
            "ran with"
        ]
        assert not (tmp_path / "report" / "report.json").exists()


def test_merge_refuses_shards_of_one_stage_run_with_different_head_shas(settled, tmp_path):
    config = settled / "head" / "rag-gate.yml"
    one, two = tmp_path / "s1", tmp_path / "s2"
    for out, shard, sha in ((one, "1/2", "aaa"), (two, "2/2", "bbb")):
        result = invoke("run", "--config", config, "--out", out, "--shard", shard, "--upto-batch", 1, "--head-sha", sha)
        assert result.exit_code == 0, result.output
    result = invoke("merge", one, two, "--out", tmp_path / "merged")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"rag-gate: error: {two}: order seed {commit_seed(7, 'bbb')} (--head-sha 'bbb'), {one}: order seed "
        f"{commit_seed(7, 'aaa')} (--head-sha 'aaa'); merge the shards of one stage (the same --head-sha)"
    ]
    assert not (tmp_path / "merged" / "manifest.json").exists()
