"""End-to-end flow on real SQuAD 2.0 data (the bundled example's questions and corpus): compare predictions
files, check against pytrec_eval and scipy; run + resume. The two sides are built and scored once per session
(``squad_pair``, ``squad_compared``, ``squad_runs`` in conftest.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import pytrec_eval
from click.testing import CliRunner
from helpers import REFUSAL, compare, scipy_rng, write_jsonl
from helpers import read_jsonl as _read

from gate.cli import main
from gate.config import GatePolicy, load_config
from gate.metrics import resolve
from gate.produce import run_side


def _trec_means(golden, ranks, ids):
    qrels = {c["id"]: {d: 1 for d in c["expected_doc_ids"]} for c in golden if not c["out_of_domain"]}
    run = {
        c["id"]: {ids[j]: 10.0 - r for r, j in enumerate(order)}
        for c, order in zip(golden, ranks, strict=True)
        if not c["out_of_domain"]
    }
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "P_5", "ndcg_cut_5", "success_5", "recall_5"})
    per_query = evaluator.evaluate(run)
    return {
        m: np.mean([v[m] for v in per_query.values()])
        for m in ("recip_rank", "P_5", "ndcg_cut_5", "success_5", "recall_5")
    }


def test_compare_predictions_files_matches_pytrec_eval(squad_pair, squad_compared):
    tmp, golden, base_rank, head_rank, ids, answered_ood = squad_pair
    result, _ = squad_compared
    assert result.exit_code == 1, result.output
    report = json.loads((tmp / "report" / "report.json").read_text())
    assert report["verdict"] == "fail" and report["schema_version"] == 7
    assert json.loads(result.stdout) == report
    metrics = {m["name"]: m for m in report["metrics"]}
    pairs = {
        "mrr": "recip_rank",
        "precision@5": "P_5",
        "ndcg@5": "ndcg_cut_5",
        "hit_rate@5": "success_5",
        "recall@5": "recall_5",
    }
    for side, ranks in (("base_mean", base_rank), ("head_mean", head_rank)):
        oracle = _trec_means(golden, ranks, ids)
        for ours, theirs in pairs.items():
            assert metrics[ours][side] == pytest.approx(oracle[theirs], abs=1e-9), (ours, side)
    assert {f["id"] for f in report["ood_failures"]} == answered_ood
    assert all(f["new"] for f in report["ood_failures"]) and report["new_ood_failures"] == 12
    assert report["regressed_cases"], "flipped hit-rate cases must be listed"
    assert (tmp / "report" / "comment.md").read_text().startswith("<!-- rag-gate -->")


def test_identical_sides_pass(squad_pair, squad_runs):
    tmp = squad_pair[0]
    result, _ = compare(tmp, squad_runs[0], squad_runs[0], "same")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp / "same" / "report.json").read_text())
    assert report["verdict"] == "pass" and report["regressed_cases"] == [] and report["ood_failures"] == []


def test_same_inputs_same_report_bytes(squad_pair, squad_compared):
    tmp = squad_pair[0]
    compare(tmp, "base.jsonl", "head.jsonl", "again")  # rescored from the predictions files
    assert (tmp / "again" / "report.json").read_bytes() == (tmp / "report" / "report.json").read_bytes()


def test_missing_predictions_are_error_rows(squad_pair, squad_runs):
    tmp, golden = squad_pair[0], squad_pair[1]
    rows = _read(tmp / "head.jsonl")
    write_jsonl(tmp / "partial.jsonl", rows[3:])
    _, report = compare(tmp, squad_runs[0], "partial.jsonl", "partial")
    missing = {e["id"] for e in report["errors"] if e["side"] == "head"}
    assert missing == {c["id"] for c in golden[:3]}
    assert report["head"]["n_prediction_errors"] == 3


PIPELINE = """
from pathlib import Path

def answer(case):
    with Path("calls.log").open("a") as f:
        f.write(case["id"] + "\\n")
    return {"answer": "Paris is in France.", "retrieved": [{"id": "d1", "text": "Paris is the capital of France."}]}
"""


def test_run_writes_run_dir_and_resumes(tmp_path, tiny_golden):
    (tmp_path / "rag.py").write_text(PIPELINE)
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {python: 'rag:answer', concurrency: 1}\nrepeats: 2\n"
    )
    config = load_config(tmp_path / "rag-gate.yml")
    out = run_side(config, tmp_path / "run")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["repeats"] == 2 and manifest["n_cases"] == 4
    assert manifest["counts"] == {
        "predictions": 8,
        "prediction_errors": 0,
        "scores": 8 * 17,  # one row per default metric
        "judge_failures": 0,
    }
    assert len(_read(out / "predictions.jsonl")) == 8
    scores = _read(out / "scores.jsonl")
    faith = [s for s in scores if s["metric"] == "faithfulness" and s["id"] == "q1"]
    assert len(faith) == 2 and faith[0]["value"] == 1.0 and faith[0]["detail"]["claims"][0]["verdict"] == "supported"
    # Simulate a kill: keep 3 rows and half a line; the resumed run only calls the 5 missing (case, repeat) pairs.
    lines = (out / "predictions.jsonl").read_text().splitlines()
    (out / "predictions.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])
    (tmp_path / "calls.log").unlink()
    run_side(config, out)
    assert len((tmp_path / "calls.log").read_text().split()) == 5
    assert len(_read(out / "predictions.jsonl")) == 8


def test_shards_merge_into_the_full_run(tmp_path, tiny_golden):
    (tmp_path / "rag.py").write_text(PIPELINE)
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'rag:answer', concurrency: 1}\n")
    config = load_config(tmp_path / "rag-gate.yml")
    shards = [run_side(config, tmp_path / f"s{i}", shard_spec=(i, 2)) for i in (1, 2)]
    full = run_side(config, tmp_path / "full")
    result = CliRunner().invoke(main, ["merge", *map(str, shards), "--out", str(tmp_path / "merged")])
    assert result.exit_code == 0, result.output

    def key(rows):
        return sorted((r["id"], r["answer"]) for r in rows)

    assert key(_read(tmp_path / "merged" / "predictions.jsonl")) == key(_read(full / "predictions.jsonl"))
    assert len(_read(tmp_path / "merged" / "scores.jsonl")) == len(_read(full / "scores.jsonl"))
    manifest = json.loads((tmp_path / "merged" / "manifest.json").read_text())
    assert manifest["n_cases"] == 4 and manifest["shard"] is None
    result = CliRunner().invoke(main, ["merge", str(shards[0]), "--out", str(tmp_path / "bad")])
    assert result.exit_code == 2 and "do not cover 1..2 exactly once" in result.stderr


def test_report_statistics_agree_with_scipy(squad_pair, squad_compared):
    """p-value and CI of report.json against scipy on the same per-case data (hit rate@5 and MRR)."""
    from scipy import stats
    from statsmodels.stats.proportion import proportion_confint

    tmp, golden, base_rank, head_rank, ids, _ = squad_pair
    _, report = squad_compared
    metrics = {m["name"]: m for m in report["metrics"]}
    in_domain = [(c, b, h) for c, b, h in zip(golden, base_rank, head_rank, strict=True) if not c["out_of_domain"]]

    def hit(case, order):
        return float(any(ids[j] in case["expected_doc_ids"] for j in order[:5]))

    def rr(case, order):
        return next((1.0 / (r + 1) for r, j in enumerate(order) if ids[j] in case["expected_doc_ids"]), 0.0)

    hits = np.array([(hit(c, b), hit(c, h)) for c, b, h in in_domain])
    worse, better = (
        int(((hits[:, 0] == 1) & (hits[:, 1] == 0)).sum()),
        int(((hits[:, 0] == 0) & (hits[:, 1] == 1)).sum()),
    )
    expected_p = stats.binomtest(better, worse + better, 0.5, alternative="less").pvalue
    assert metrics["hit_rate@5"]["p_value"] == pytest.approx(expected_p, rel=1e-12)

    d = np.array([rr(c, h) - rr(c, b) for c, b, h in in_domain])
    mrr = metrics["mrr"]
    assert mrr["delta"] == pytest.approx(d.mean(), abs=1e-12)
    assert mrr["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(len(d)), rel=1e-9)
    # the interval is the inversion of the test: Clopper–Pearson on the discordant pairs for exact McNemar,
    # the sign-flip test's own inversion for MRR (scipy's sign-flip test, its own sign vectors, brackets its ends)
    level = (1 - metrics["hit_rate@5"]["confidence"]) / 2
    theta = proportion_confint(better, worse + better, alpha=2 * level, method="beta")
    scale = (worse + better) / len(in_domain)
    hit_ci = (metrics["hit_rate@5"]["ci_low"], metrics["hit_rate@5"]["ci_high"])
    assert hit_ci == pytest.approx(tuple(scale * (2 * t - 1) for t in theta), abs=1e-12)
    level = (1 - mrr["confidence"]) / 2

    def flip_p(delta, alternative):
        return stats.permutation_test(
            (d - delta, np.zeros_like(d)), lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples", n_resamples=9999, alternative=alternative, vectorized=True, **scipy_rng(1),
        ).pvalue  # fmt: skip

    step = 0.3 * mrr["se"]
    assert flip_p(mrr["ci_high"] - step, "less") > level > flip_p(mrr["ci_high"] + step, "less")
    assert flip_p(mrr["ci_low"] + step, "greater") > level > flip_p(mrr["ci_low"] - step, "greater")


@pytest.mark.parametrize(
    "n_answered, hard_rule, fails",
    [(5, True, True), (5, False, False), (1, True, False)],
)
def test_new_out_of_domain_failures(tmp_path, n_answered, hard_rule, fails):
    """200 OOD questions, n answered on head. 5 consistent flips are a significant drop in refusals (McNemar
    p = 2^-5) but smaller than the 0.03 margin: only the out-of-domain rule blocks them. A single flip is not
    evidence (it could be sampling noise): listed with a warning, not blocking (a must-pass flip at R = 1)."""
    golden = [{"id": f"o{i:03d}", "question": f"Unknowable {i}?", "out_of_domain": True} for i in range(200)]
    write_jsonl(tmp_path / "golden.jsonl", golden)
    base = [{"id": c["id"], "answer": REFUSAL, "retrieved": []} for c in golden]
    head = [dict(row, answer="It is 42.") if i < n_answered else row for i, row in enumerate(base)]
    write_jsonl(tmp_path / "base.jsonl", base)
    write_jsonl(tmp_path / "head.jsonl", head)
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: head.jsonl}\nmetrics: [refusal]\n"
        f"fail_on_new_ood: {str(hard_rule).lower()}\n"
    )
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "r", "--config", str(tmp_path / "rag-gate.yml"))
    assert [f["id"] for f in report["ood_failures"] if f["new"]] == [f"o{i:03d}" for i in range(n_answered)]
    assert report["metrics"][0]["status"] != "fail"
    assert (report["verdict"] == "fail") == fails and result.exit_code == int(fails)
    # out-of-domain cases are must-pass by default: a flip of one run per side is listed with the must-pass warning
    assert any("one run per side cannot tell a flip" in w for w in report["warnings"])
    assert not any("not significant" in w for w in report["warnings"])  # not warned twice


def test_cluster_by_tag_gives_clustered_standard_errors(squad_pair, squad_runs):
    """cluster_by: tag groups SQuAD questions by article: the MRR SE is Miller's Eq. 8 computed by hand."""
    tmp, golden, base_rank, head_rank, ids, _ = squad_pair
    (tmp / "clustered.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: head.jsonl}\nmetrics: [mrr]\ncluster_by: tag\n"
    )
    _, report = compare(tmp, *squad_runs, "clustered", "--config", str(tmp / "clustered.yml"))
    mrr = report["metrics"][0]

    def rr(case, order):
        return next((1.0 / (r + 1) for r, j in enumerate(order) if ids[j] in case["expected_doc_ids"]), 0.0)

    rows = [
        (c["tags"][0], rr(c, h) - rr(c, b))
        for c, b, h in zip(golden, base_rank, head_rank, strict=True)
        if not c["out_of_domain"]
    ]
    d = np.array([x for _, x in rows])
    e = d - d.mean()
    cross = sum(e[i] * e[j] for i in range(len(rows)) for j in range(len(rows)) if i != j and rows[i][0] == rows[j][0])
    miller_eq8 = np.sqrt((e**2).sum() / ((len(d) - 1) * len(d)) + cross / len(d) ** 2)
    assert mrr["n_clusters"] == len({t for t, _ in rows})
    assert mrr["se"] == pytest.approx(miller_eq8, rel=1e-9)


def test_repeats_that_never_vary_count_as_one_observation(squad_pair, squad_compared):
    """A deterministic pipeline run with R = 3: per-case calls stay single observations, the MRR test is unchanged.

    The judged metrics are left out of both sides of this check (judging every answer three times would only triple
    the judge's work); the check is on the retrieval metrics' tests and the per-case evidence."""
    tmp = squad_pair[0]
    full = squad_compared[1]
    judged = {name for name in GatePolicy().metrics if resolve(name).spec.judged}
    assert judged
    metrics = [name for name in GatePolicy().metrics if name not in judged]
    (tmp / "unjudged.yml").write_text(
        f"golden: golden.jsonl\npipeline: {{predictions: head.jsonl}}\nmetrics: [{', '.join(metrics)}]\n"
    )
    for side in ("base", "head"):
        rows = _read(tmp / f"{side}.jsonl")
        write_jsonl(tmp / f"{side}3.jsonl", [dict(r, repeat=k) for k in range(3) for r in rows])
    reports = {}
    for name, suffix in (("r1", ""), ("r3", "3")):
        _, reports[name] = compare(
            tmp, f"base{suffix}.jsonl", f"head{suffix}.jsonl", name, "--config", str(tmp / "unjudged.yml")
        )
    assert reports["r3"]["repeats"] == {"base": 3, "head": 3}
    one, three = ({m["name"]: m for m in reports[k]["metrics"]} for k in ("r1", "r3"))
    for name in ("hit_rate@5", "mrr"):
        assert one[name]["p_value"] == {m["name"]: m for m in full["metrics"]}[name]["p_value"]
        assert (three[name]["r_base"], three[name]["p_value"]) == (1, one[name]["p_value"])
    evidence = {m["evidence"] for c in reports["r3"]["regressed_cases"] for m in c["metrics"]}
    assert evidence == {"single observation"}


SHARD_PIPELINE = """
import zlib

WORSE = {worse}

def answer(case):
    h = zlib.crc32(case["id"].encode())
    wrong = h % 3 == 0 or (WORSE and h % 2 == 0)
    doc = "d0" if wrong else case["expected_doc_ids"][0]
    return {{"answer": "no idea" if wrong else case["reference_answers"][0], "retrieved": [{{"id": doc, "text": "t"}}]}}
"""


def test_sharded_and_merged_runs_give_the_unsharded_report(tmp_path):
    """``run --shard i/3`` + ``merge`` on both sides: ``compare`` writes the same report.json as unsharded runs."""
    write_jsonl(
        tmp_path / "golden.jsonl",
        [
            {"id": f"c{i}", "question": f"Question {i}?", "expected_doc_ids": [f"d{i}"], "reference_answers": [f"a{i}"]}
            for i in range(1, 41)
        ],
    )
    configs = {}
    for side, worse in (("base", False), ("head", True)):
        (tmp_path / f"{side}.py").write_text(SHARD_PIPELINE.format(worse=worse))
        (tmp_path / f"{side}.yml").write_text(
            f"golden: golden.jsonl\npipeline: {{python: '{side}:answer'}}\nrepeats: 2\n"
            "metrics: [hit_rate@5, mrr, answer_f1, exact_match, refusal, error_rate]\n"
        )
        configs[side] = load_config(tmp_path / f"{side}.yml")

    def report(layout: str) -> dict:
        runs = {}
        for side, config in configs.items():
            if layout == "full":
                runs[side] = run_side(config, tmp_path / layout / side)
                continue
            shards = [run_side(config, tmp_path / layout / f"{side}{i}", shard_spec=(i, 3)) for i in (1, 2, 3)]
            runs[side] = tmp_path / layout / side
            merged = CliRunner().invoke(main, ["merge", *map(str, shards), "--out", str(runs[side])])
            assert merged.exit_code == 0, merged.output
        out = tmp_path / layout / "report"
        result = CliRunner().invoke(main, ["compare", str(runs["base"]), str(runs["head"]), "--out", str(out)])
        assert result.exit_code == 1, result.output
        return json.loads((out / "report.json").read_text())

    full, sharded = report("full"), report("sharded")
    assert full["verdict"] == "fail" and full["regressed_cases"]
    for side in ("base", "head"):  # measured warm-up times are the one thing that differs: each shard warms up
        assert len(sharded[side].pop("warmup_ms")) == 3 * len(full[side].pop("warmup_ms"))
    for report_ in (full, sharded):  # and the measured latency of each listed case (JUnit's time)
        for listed in ("regressed_cases", "improved_cases", "flaky_cases", "suspected_cases", "ood_failures"):
            for case in report_.get(listed) or []:
                case.pop("latency_ms", None)
    assert sharded == full
