"""`rag-gate pr --adaptive on` end to end: a real scratch repository and pipeline whose calls are counted.

(a) a clear regression stops early with exit 1 and fewer pipeline calls than cases; (b) a PR the looks cannot
settle runs every case and falls back to the fixed-N verdict, the one `pr` gives without the adaptive mode; (c) a
run killed in a batch, or run again, resumes at its batch: no case that was answered is run again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import COUNTING_TEMPLATE as TEMPLATE
from helpers import pr_order
from scratch_repo import CONFIG, GITHUB_VARS, calls, code_word_repo, run_pr

from gate.cli import main


def make_repo(repo: Path, n: int, broken_every: int, calls: Path, config: str = "") -> None:
    """``main``: the right document for each of ``n`` facts; ``feature``: every ``broken_every``-th one wrong."""
    code = {side: TEMPLATE.format(broken=broken, n=n, calls=str(calls.with_suffix(f".{side}")))
            for side, broken in (("base", 0), ("head", broken_every))}  # fmt: skip
    code_word_repo(repo, n, CONFIG + config, code["base"], code["head"])


@pytest.fixture(scope="module")
def regression(tmp_path_factory):
    """A PR that breaks retrieval on every other case (a clear regression), on 200 facts."""
    root = tmp_path_factory.mktemp("adaptive")
    make_repo(root / "repo", 200, 2, root / "calls")
    return root


def test_a_clear_regression_stops_early_with_fewer_calls(regression):
    repo, counter = regression / "repo", regression / "calls"
    result = run_pr(repo, regression / "out", "--adaptive", "on")
    assert result.exit_code == 1, result.output
    report = json.loads((regression / "out" / "report.json").read_text())
    adaptive = report["adaptive"]
    total = 202
    assert report["verdict"] == "fail" and adaptive["stopped"] == "fail"
    assert adaptive["n_first"] == 2 and adaptive["n_sequence"] == 200 and adaptive["batch"] == 20
    # every pipeline call is one case once, on each side: fewer than the golden set's cases
    base_calls, head_calls = calls(counter.with_suffix(".base")), calls(counter.with_suffix(".head"))
    assert len(base_calls) == len(set(base_calls)) == adaptive["cases_run"]
    assert len(head_calls) == len(set(head_calls)) == adaptive["cases_run"]
    assert adaptive["cases_run"] < total and adaptive["cases_run"] == total - len(adaptive["not_run"])
    assert adaptive["cases_run"] == 2 + 20 * adaptive["looks"]
    assert {"ood0", "ood1"} <= set(head_calls)  # out-of-domain (must-pass) cases first and in full
    assert not set(adaptive["not_run"]) & set(head_calls)
    # the run order is the permutation of the in-domain cases seeded by the config's seed and the head commit
    order = pr_order(regression / "repo", 200)
    assert set(head_calls) - {"ood0", "ood1"} == set(order[: adaptive["cases_run"] - 2])
    assert adaptive["not_run"] == order[adaptive["cases_run"] - 2 :]
    # the failing metric was decided by the sequential test, and the case lists cover the cases run only
    failed = [m for m in adaptive["metrics"] if m["decision"] == "fail"]
    assert failed and all(m["decided_at"] == adaptive["cases_run"] - 2 for m in failed)
    look = f"sequential test at look {adaptive['looks']} (after {adaptive['cases_run'] - 2} cases of the order): "
    assert any(r.startswith(f"hit_rate@5: {look}") for r in report["reasons"])
    # the rows say what decided them: the looks, or nothing yet (the run stopped early); the verdict is fail
    decided = {m["name"] for m in failed}
    rows = {m["name"]: m for m in report["metrics"] if m["gated"]}
    assert all(rows[name]["status"] == "fail" and rows[name]["reason"].startswith(look) for name in decided)
    undecided = {m["name"] for m in adaptive["metrics"]} - decided
    assert undecided >= {"grounded_answer_rate", "error_rate"}  # unchanged by the PR, not decided by 40 cases
    stop = f"the run stopped at look {adaptive['looks']} (after {adaptive['cases_run'] - 2} cases of the order)"
    kinds = {("inconclusive", f"not decided (stopped early): {stop} before the sequential test decided it"),
             ("fail", f"fixed-N analysis of the cases run ({stop}, undecided by the looks)")}  # fmt: skip
    for name in undecided:
        status, reason = rows[name]["status"], rows[name]["reason"]
        assert any(status == k and reason.startswith(r) for k, r in kinds), (name, status, reason)
    assert rows["grounded_answer_rate"]["status"] == "inconclusive"  # Δ = 0: no fixed-N fail to keep
    assert rows["refusal"]["reason"].startswith("fell beyond the margin")  # out of domain: run in full, fixed-N
    assert len(set(report["reasons"])) == len(report["reasons"]) == sum(m["status"] == "fail" for m in rows.values())
    regressed = {c["id"] for c in report["regressed_cases"]}
    assert regressed and regressed <= set(head_calls)
    assert report["n_cases"] == adaptive["cases_run"]
    manifest = json.loads((regression / "out" / "head" / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["n_cases"] == adaptive["cases_run"]
    comment = (regression / "out" / "comment.md").read_text()
    hit = sum(int(c[1:]) % 2 for c in order[: adaptive["cases_run"] - 2]) / (adaptive["cases_run"] - 2)
    assert f"| Hit rate@5 | 1.000 | {hit:.3f} | {hit - 1:.3f} |" in comment  # even items are broken
    hit_row = next(line for line in comment.splitlines() if line.startswith("| Hit rate@5 |"))
    grounded_row = next(line for line in comment.splitlines() if line.startswith("| Grounded answers |"))
    assert hit_row.endswith(f"| ❌ fail at look {adaptive['looks']} (sequential test) |")
    assert grounded_row.endswith("| ⚠️ not decided (stopped early) |")
    assert f"{adaptive['cases_run']} of {total} cases on each side" in comment
    assert f"the other {len(adaptive['not_run'])} case(s) were not run" in comment
    page = (regression / "out" / "report.html").read_text()
    looks = f"order seed {adaptive['seed']}, batches of 20, {adaptive['looks']} look(s)"
    assert f"Adaptive evaluation ({looks}): {adaptive['reason']}" in page


def test_compare_names_a_partial_adaptive_run_as_planned_not_interrupted(regression):
    out = regression / "out"
    result = CliRunner().invoke(main, ["compare", str(out / "base"), str(out / "head"), "--out", str(regression / "c")])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        f"rag-gate: error: {out / 'base'}: the run is partial, by plan, not interrupted: an adaptive evaluation "
        "ran only some of its cases or repeats (`rag-gate pr --adaptive on` compared them itself: its report.json is "
        "in the folder above; a stage of `rag-gate run --upto-batch K` is compared with `rag-gate compare --adaptive`)"
    )


def test_a_rerun_of_the_same_commits_calls_the_pipeline_for_no_case_again(regression):
    repo, counter, out = regression / "repo", regression / "calls", regression / "out"
    first = json.loads((out / "report.json").read_text())
    before = [calls(counter.with_suffix(side)) for side in (".base", ".head")]
    result = run_pr(repo, out, "--adaptive", "on")
    assert result.exit_code == 1, result.output
    assert [calls(counter.with_suffix(side)) for side in (".base", ".head")] == before  # no call on either side
    again = json.loads((out / "report.json").read_text())
    assert again["adaptive"] == first["adaptive"] and again["reasons"] == first["reasons"]
    assert again["metrics"] == first["metrics"]  # the same rows, latencies included: the predictions were kept


def test_the_trend_is_not_computed_on_a_run_that_stopped_early_and_the_comment_says_why(regression, tmp_path):
    """Main's history holds full runs; a partial head (a prefix of the order) is not compared with them."""
    history = tmp_path / "history.jsonl"
    history.write_text("")  # a history exists (no entries yet): the trend would be computed on a full run
    out = regression / "out"  # the run of the first test: resumed, nothing runs again
    result = run_pr(regression / "repo", out, "--adaptive", "on", "--history", str(history))
    assert result.exit_code == 1, result.output
    n = json.loads((out / "report.json").read_text())["adaptive"]["cases_run"]
    assert n < 202
    assert (
        f"trend vs main skipped: the adaptive evaluation stopped early and ran only {n} case(s), a prefix of the "
        "golden set in its seeded order, so no trend is computed (main's history and its trend hold full runs, "
        "made on pushes to the default branch)"
    ) in result.stderr
    assert "finish it first" not in result.stderr and not (out / "trend.json").exists()


def test_a_killed_run_resumes_at_its_batch(tmp_path):
    """rag-gate is killed (SIGKILL) while the head runs batch 2; run again, it calls only the cases not answered."""
    repo, out, counter = tmp_path / "repo", tmp_path / "out", tmp_path / "calls"
    make_repo(repo, 200, 2, counter)
    head, base = counter.with_suffix(".head"), counter.with_suffix(".base")
    hang = Path(f"{head}.hang")
    hang.write_text("30")  # head calls after the 30th hang: batch 2 (cases 23 to 42 of the order)
    command = [sys.executable, "-m", "gate", "pr", "--base-ref", "main", "--working-directory", str(repo),
               "--out-dir", str(out), "--comment", "off", "--adaptive", "on"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in GITHUB_VARS}
    killed = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 180
    while len(calls(head)) <= 30:
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    hang.unlink()
    answered = set()
    for line in (out / "head" / "predictions.jsonl").read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by the kill
            continue
        if not row.get("error"):
            answered.add(row["id"])
    n_base, n_head = len(calls(base)), len(calls(head))
    assert n_base == 42 and 22 <= len(answered) < 42  # batch 2 ran on the base, part of it on the head

    result = run_pr(repo, out, "--adaptive", "on")
    assert result.exit_code == 1, result.output
    report = json.loads((out / "report.json").read_text())
    adaptive = report["adaptive"]
    # the look that fails depends on the order (seeded by the head commit, whose pipeline names this tmp path):
    # look 2 or later, every case of the batches before it run once on each side, nothing of batches 1-2 again
    n_run = adaptive["cases_run"]
    assert adaptive["stopped"] == "fail" and adaptive["looks"] >= 2 and n_run == 2 + 20 * adaptive["looks"]
    assert len(calls(base)) == n_base + n_run - 42  # the base's first two batches were all there
    rerun = calls(head)[n_head:]
    assert len(rerun) == len(set(rerun)) == n_run - len(answered) and not set(rerun) & answered
    order = pr_order(repo, 200)
    assert set(rerun) | answered == {"ood0", "ood1", *order[: n_run - 2]}
    manifest = json.loads((out / "head" / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["n_cases"] == n_run


def test_a_cached_base_is_not_run_again_and_is_compared_on_the_cases_the_head_ran(regression):
    """The base cache holds full runs (here written by a local run, which is trusted): an adaptive PR reads it."""
    repo, counter, cache = regression / "repo", regression / "calls", regression / "cache"
    full = run_pr(repo, regression / "full", "--cache-dir", str(cache))
    assert full.exit_code == 1 and "(base from cache)" not in full.stderr
    before = {side: len(calls(counter.with_suffix(side))) for side in (".base", ".head")}
    result = run_pr(repo, regression / "cached", "--cache-dir", str(cache), "--adaptive", "on")
    assert result.exit_code == 1 and "(base from cache)" in result.stderr, result.output
    report = json.loads((regression / "cached" / "report.json").read_text())
    head_calls = calls(counter.with_suffix(".head"))[before[".head"] :]
    assert len(calls(counter.with_suffix(".base"))) == before[".base"]  # the base did not run
    assert len(head_calls) == report["adaptive"]["cases_run"] == report["n_cases"] < 202
    assert json.loads((regression / "cached" / "base" / "manifest.json").read_text())["status"] == "complete"
    assert report["base"]["n_cases"] == report["head"]["n_cases"] == report["adaptive"]["cases_run"]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A PR that breaks one case in three, on 30 facts: too few cases for the looks to settle it early."""
    root = tmp_path_factory.mktemp("adaptive-small")
    make_repo(root / "repo", 30, 3, root / "calls")
    return root


def test_an_unsettled_pr_runs_every_case_and_keeps_the_fixed_n_verdict(small):
    repo, counter = small / "repo", small / "calls"
    fixed = run_pr(repo, small / "fixed")
    n_fixed = len(calls(counter.with_suffix(".head")))
    adaptive = run_pr(repo, small / "adaptive", "--adaptive", "on")
    head_calls = calls(counter.with_suffix(".head"))[n_fixed:]
    report, plain = (json.loads((small / d / "report.json").read_text()) for d in ("adaptive", "fixed"))
    assert report["adaptive"]["stopped"] == "exhausted" and report["adaptive"]["not_run"] == []
    assert report["adaptive"]["cases_run"] == 32 == len(head_calls) == len(set(head_calls)) == n_fixed
    assert adaptive.exit_code == fixed.exit_code == 1 and report["verdict"] == plain["verdict"] == "fail"
    # every metric but the wall-clock latency, which two runs of the same pipeline do not repeat exactly
    statuses = [{m["name"]: m["status"] for m in r["metrics"] if m["name"] != "latency_ms"} for r in (report, plain)]
    assert statuses[0] == statuses[1] and len(statuses[0]) >= 10
    # `alpha` is the configured α on both; the fixed-N analysis ran at α_final (α = 0.005 spent on the early looks)
    assert report["alpha"] == plain["alpha"] == 0.05 and report["adaptive"]["alpha_final"] == pytest.approx(0.045)
    assert report["policy_changes"] == plain["policy_changes"] == []
    assert json.loads((small / "adaptive" / "head" / "manifest.json").read_text())["status"] == "complete"
    assert plain["adaptive"] is None


def test_a_pr_that_changes_nothing_stops_early_with_pass_on_a_large_enough_set(tmp_path):
    """``adaptive: true`` in the base's config; one gated metric with a margin, so no change can be ruled in."""
    make_repo(
        tmp_path / "repo",
        400,
        0,
        tmp_path / "calls",
        "gate: [hit_rate@5]\nmargins: {hit_rate@5: 0.05}\nadaptive: true\n",
    )
    result = run_pr(tmp_path / "repo", tmp_path / "out")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    adaptive = report["adaptive"]
    assert report["verdict"] == "pass" and adaptive["stopped"] == "decided"
    assert adaptive["metrics"] == [
        {"name": "hit_rate@5", "decision": "non_inferior", "decided_at": adaptive["cases_run"] - 2, "estimate": 0.0}
    ]
    runs = len(calls((tmp_path / "calls").with_suffix(".base"))), len(calls((tmp_path / "calls").with_suffix(".head")))
    assert runs == (adaptive["cases_run"],) * 2 and adaptive["cases_run"] < 402 / 2
    gated = [m for m in report["metrics"] if m["gated"]]
    assert [(m["name"], m["status"]) for m in gated] == [("hit_rate@5", "pass")]
    assert gated[0]["reason"].startswith(f"sequential test at look {adaptive['looks']} (after ")


def test_an_unchanged_pr_with_the_default_gate_stops_before_the_set_is_exhausted(tmp_path):
    """The default gate (``error_rate`` gated with margin 0 among the others): an unchanged deterministic PR is
    decided non-inferior to the fixed design's MDE at N for every metric, before the last case; the report and
    the comment say which drop was ruled out and that it is the MDE at N."""
    make_repo(tmp_path / "repo", 500, 0, tmp_path / "calls", "adaptive: true\n")
    result = run_pr(tmp_path / "repo", tmp_path / "out")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    adaptive = report["adaptive"]
    assert report["verdict"] == "pass" and adaptive["stopped"] == "decided"
    assert adaptive["cases_run"] <= 2 + 200 and adaptive["not_run"]  # 0.4 of the set (β_seq = 0.05)
    assert {m["decision"] for m in adaptive["metrics"]} == {"non_inferior"}
    rows = {m["name"]: m for m in report["metrics"]}
    assert rows["error_rate"]["gated"] and rows["error_rate"]["margin"] == 0
    look = f"sequential test at look {adaptive['looks']} (after {adaptive['cases_run'] - 2} cases of the order): "
    reason = rows["error_rate"]["reason"]
    assert rows["error_rate"]["status"] == "pass" and reason.startswith(look)
    assert reason.endswith(" (the fixed design's MDE at N = 500) is ruled out")
    ruled = float(reason.split("a rise of error_rate beyond ")[1].split(" ")[0])
    # the exact-McNemar "broken cases" MDE at N = 500 and α_k = 0.01: P(Bin(500, δ) ≥ 7) = 0.8 (scipy)
    from scipy import optimize, stats

    expected = optimize.brentq(lambda p: stats.binom.sf(6, 500, p) - 0.8, 1e-6, 0.5)
    assert ruled == pytest.approx(expected, abs=1e-3)
    # graded scores that never move: the model's MDE is the margin itself, and the reason says "the margin"
    assert rows["grounded_answer_rate"]["reason"].endswith(": a drop beyond the margin is ruled out")
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert f"{adaptive['cases_run']} of 502 cases on each side" in comment
    ruled_out = (
        "every gated metric was decided (sequential test); ruled out at the fixed design's MDE at N = 500 (not the "
        f"margin): a drop of hit_rate@5 beyond {rows['hit_rate@5']['reason'].split(' beyond ')[1].split(' ')[0]}, "
    )
    rise = f"a rise of error_rate beyond {ruled:.3f}"
    assert ruled_out in adaptive["reason"] and rise in adaptive["reason"]
    assert ruled_out.replace("_", "\\_") in comment and rise.replace("_", "\\_") in comment  # escaped markdown
