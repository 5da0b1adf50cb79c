"""README command 1: the bundled example runs end to end and shows the planted regression.

The figures of report.json are checked against an independent computation from the run directories'
predictions: hit rate@5 and MRR with pytrec_eval, McNemar's exact p with scipy's binomial test on the discordant
pairs, the out-of-domain failures from the pipeline's own ``refused`` flags.

Marked ``slow`` (two pipeline runs in worker processes, then compare: 15-30 s): CI runs it with ``-m slow``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytrec_eval
from conftest import EXAMPLE, read_jsonl
from scipy import stats


def _per_query(golden: list[dict], predictions: list[dict]) -> dict[str, dict[str, float]]:
    """pytrec_eval's success@5 and reciprocal rank per in-domain case (retrieved order = rank order)."""
    qrels = {c["id"]: {d: 1 for d in c["expected_doc_ids"]} for c in golden if not c["out_of_domain"]}
    run = {
        p["id"]: {chunk["id"]: float(len(p["retrieved"]) - r) for r, chunk in enumerate(p["retrieved"])}
        for p in predictions
        if p["id"] in qrels
    }
    assert set(run) == set(qrels)
    return pytrec_eval.RelevanceEvaluator(qrels, {"success_5", "recip_rank"}).evaluate(run)


def _mean(per_query: dict[str, dict[str, float]], measure: str) -> float:
    return sum(v[measure] for v in per_query.values()) / len(per_query)


@pytest.mark.slow
def test_bundled_example_end_to_end(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(EXAMPLE / "run.sh"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    comment = done.stdout
    assert comment.startswith("<!-- rag-gate -->\n## ❌ rag-gate: **fail**")
    report = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    assert (tmp_path / "out" / "report" / "comment.md").read_text() + "\n" == comment
    for side in ("base", "head"):
        manifest = json.loads((tmp_path / "out" / side / "manifest.json").read_text())
        assert manifest["status"] == "complete" and manifest["counts"]["prediction_errors"] == 0

    golden = read_jsonl(EXAMPLE / "golden.jsonl")
    preds = {side: read_jsonl(tmp_path / "out" / side / "predictions.jsonl") for side in ("base", "head")}
    assert report["n_cases"] == len(golden) and report["n_out_of_domain"] == sum(c["out_of_domain"] for c in golden)

    # Retrieval figures against pytrec_eval on the predictions each side really made.
    metrics = {m["name"]: m for m in report["metrics"]}
    trec = {side: _per_query(golden, rows) for side, rows in preds.items()}
    for ours, theirs in (("hit_rate@5", "success_5"), ("mrr", "recip_rank")):
        for side in ("base", "head"):
            assert metrics[ours][f"{side}_mean"] == pytest.approx(_mean(trec[side], theirs), abs=1e-12), (ours, side)
    # The planted regression is real (head loses evidence) and the gate fails on it.
    hit = {side: {q: v["success_5"] for q, v in trec[side].items()} for side in trec}
    lost = {q for q in hit["base"] if hit["base"][q] == 1 and hit["head"][q] == 0}
    gained = {q for q in hit["base"] if hit["base"][q] == 0 and hit["head"][q] == 1}
    assert len(lost) > len(gained)
    # McNemar's exact test is the binomial test on the discordant pairs (one-sided: head worse).
    mcnemar = stats.binomtest(len(gained), len(lost) + len(gained), 0.5, alternative="less").pvalue
    assert metrics["hit_rate@5"]["p_value"] == pytest.approx(mcnemar, rel=1e-12)
    assert metrics["hit_rate@5"]["status"] == "fail"
    # Every case that lost its evidence is listed with its hit-rate flip.
    regressed = {c["id"]: {m["name"] for m in c["metrics"]} for c in report["regressed_cases"]}
    assert lost <= {q for q, names in regressed.items() if "hit_rate@5" in names}
    assert "### Regressed cases" in comment and all(q in comment for q in lost)

    # Out-of-domain failures from the pipeline's own refusal flags: answered on head; new when refused on base.
    ood = {c["id"] for c in golden if c["out_of_domain"]}
    refused = {side: {p["id"] for p in rows if p["refused"]} for side, rows in preds.items()}
    answered_on_head = ood - refused["head"]
    new = answered_on_head & refused["base"]
    assert new, "the example's head must answer out-of-domain questions that base refused"
    assert {f["id"] for f in report["ood_failures"]} == answered_on_head
    assert {f["id"] for f in report["ood_failures"] if f["new"]} == new and report["new_ood_failures"] == len(new)
    assert "### Out-of-domain failures" in comment
    first_ood = next(f for f in report["ood_failures"] if f["new"])
    assert first_ood["id"] in comment
