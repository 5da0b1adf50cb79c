"""README command 1: the bundled example runs end to end and shows the planted regression; README's sample comment.

Command 1 runs as written, without an activated virtual environment: ``python`` on PATH is the interpreter rag-gate
was installed into, and its ``rag-gate`` script is *not* on PATH (``pip install --user``, a venv that is not
activated): the example must not need it. The figures of report.json are checked against an independent
computation from the run directories' predictions: hit rate@5 and MRR with pytrec_eval, McNemar's exact p with
scipy's binomial test on the discordant pairs, the out-of-domain failures from the pipeline's own ``refused`` flags.
README's "What the comment looks like" is rendered from this run's report.json (``RAG_GATE_UPDATE_README=1``
rewrites it), so it cannot drift from what the example prints.

Marked ``slow`` (two pipeline runs in worker processes, then compare: 15-90 s): CI runs it with ``-m slow``.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import pytrec_eval
from helpers import EXAMPLE, REPO, read_jsonl
from scipy import stats

from gate.comparison import load_report
from gate.outputs.markdown import render_comment

README = REPO / "README.md"
START, END = "<!-- example-comment:start -->", "<!-- example-comment:end -->"


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


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """Run ``examples/squad/run.sh OUT`` as README command 1 leaves it: ``python`` installed into, no ``rag-gate``."""
    tmp = tmp_path_factory.mktemp("example")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):  # exec keeps the interpreter's own environment (a venv stays a venv)
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        (bin_dir / name).chmod(0o755)
    path = os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])
    assert shutil.which("rag-gate", path=path) is None  # the script is not on PATH: exit 127 before the fix
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "RAG_GATE_PYTHON")} | {"PATH": path}
    done = subprocess.run(
        ["bash", str(EXAMPLE / "run.sh"), str(tmp / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=900,
        check=False,
    )
    return done, tmp


@pytest.mark.slow
def test_bundled_example_end_to_end(example):
    done, tmp_path = example
    assert done.returncode == 1, done.stderr[-2000:]
    tables, marker, rest = done.stdout.partition("<!-- rag-gate -->\n")
    assert tables.count("\nhit_rate@5 ") == 2  # each `run` prints its side's aggregates first
    comment = marker + rest
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


def readme_excerpt(comment: str) -> str:
    """The part of the example's comment README shows: the top, two cases per list, the What changed block.

    Timings differ from run to run: the cells of timed rows show ``…`` (their p is ``–``: not gated), their
    counts too. The run details after What changed (commits, cold starts, minimum detectable effects) are left out.
    """
    top, details = comment.split("#### The runs", 1)
    lines = []
    for line in top.rstrip("\n").splitlines():
        if line.startswith("| Latency (ms)"):
            cells = line.split("|")
            line = "|".join(cells[:2] + [" … "] * 4 + cells[6:7] + [" … "] * 2 + cells[9:])
        lines.append(line)
    return "\n".join(lines) + "\n\n…\n</details>\n"


@pytest.mark.slow
def test_readme_shows_the_comment_the_example_prints(example):
    done, tmp_path = example
    assert done.returncode == 1, done.stderr[-2000:]
    report = load_report(tmp_path / "out" / "report" / "report.json")
    full = render_comment(report)
    excerpt = readme_excerpt(render_comment(report, max_items=2))
    # what a reviewer needs from the example's comment
    top = full[: full.index("<details><summary>Run details")]
    table = [line for line in top.splitlines() if line.startswith("| ") and "| metric |" not in line]
    assert table and all("❌" not in row and "✅" not in row for row in table if "not gated" in row)
    assert all(("not gated" in row) != (m.gated) for row, m in zip(table, report.metrics, strict=True))
    assert "| p (Holm-adjusted) |" in excerpt and "#### What changed" in excerpt and "+    top_k: 1" in excerpt
    for m in report.metrics:
        if m.kind != "ratio":
            assert -1 <= m.difference_ci_low <= m.difference <= m.difference_ci_high <= 1
            assert m.difference == pytest.approx(m.head_value - m.base_value, abs=1e-12)
        else:
            assert m.ratio == pytest.approx(m.head_value / m.base_value, rel=1e-12)
    block = f"{START}\n````markdown\n{excerpt}````\n{END}"
    text = README.read_text(encoding="utf-8")
    if os.environ.get("RAG_GATE_UPDATE_README") == "1":
        text = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
        README.write_text(text, encoding="utf-8")
    assert block in text, "README's sample comment is stale: run with RAG_GATE_UPDATE_README=1 to rewrite it"
