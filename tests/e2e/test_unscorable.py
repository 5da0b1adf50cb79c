"""What the gate cannot score is never "no change"; every value a failed case consumed is counted.

- Retrieved ids that never match an expected id on either side (chunk ids where the golden set has document ids)
  make the verdict ``error`` (exit 3) with the likely cause and the fix; a match on one side only is a real change.
- A retrieved chunk without text makes the judged (text-based) metrics not applicable, never 0: counted and shown,
  and an evaluation failure where the other side was scored.
- Answers the judge found no checkable claim in are counted and shown.
- A failed case's cost and latency count in the cost and latency metrics and their aggregates.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from helpers import compare, write_jsonl

from gate.compare import compare as compare_sides
from gate.compare.inputs import metric_inputs
from gate.compare.notes import unmatched_ids
from gate.config import GatePolicy
from gate.judges import get_judge
from gate.metrics import resolve
from gate.models import Chunk, GoldenCase, Prediction
from gate.predictions import PredictionTable
from gate.runs import Side
from gate.scoring import NO_CHECKABLE_CLAIM, TEXTLESS_CHUNK, score_all, score_one

N = 8
"""In-domain cases of the golden sets below (plus one out-of-domain case)."""


def golden_rows() -> list[dict]:
    rows = [
        {
            "id": f"q{i}",
            "question": f"What is the capital of country {i}?",
            "expected_doc_ids": [f"doc-{i}"],
            "reference_answers": [f"City {i}"],
        }
        for i in range(N)
    ]
    return [*rows, {"id": "ood", "question": "What is the airspeed of a swallow?", "out_of_domain": True}]


def prediction_row(i: int, doc_id: str, *, text: str | None = None, answer: str | None = None, **extra) -> dict:
    chunk_text = f"The capital of country {i} is City {i}." if text is None else text
    return {
        "id": f"q{i}",
        "answer": f"The capital of country {i} is City {i}." if answer is None else answer,
        "retrieved": [{"id": doc_id, "text": chunk_text}],
        "latency_ms": 10.0,
        **extra,
    }


REFUSED = {"id": "ood", "answer": "I don't have that information.", "retrieved": [], "latency_ms": 10.0}


def write_side(tmp: Path, name: str, rows: list[dict]) -> None:
    write_jsonl(tmp / name, [*rows, REFUSED])


# ------------------------------------------------------------------ retrieved ids that can never match


def test_chunk_ids_on_both_sides_are_an_error_with_the_cause_and_the_fix(tmp_path):
    """LlamaIndex-style node UUIDs on both sides: retrieval is 0 = 0, which must not pass as "no change"."""
    write_jsonl(tmp_path / "golden.jsonl", golden_rows())
    write_side(tmp_path, "base.jsonl", [prediction_row(i, f"5b1c0e7a-{i:04d}-base") for i in range(N)])
    write_side(tmp_path, "head.jsonl", [prediction_row(i, f"9d3e22f1-{i:04d}-head") for i in range(N)])
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 3, result.output
    assert report["verdict"] == "error"
    (reason,) = [r for r in report["reasons"] if r.startswith("retrieval cannot be scored")]
    assert f"({N} in-domain cases)" in reason
    assert "Chunk ids?" in reason and "node.ref_doc_id" in reason and "meta['source_id']" in reason
    assert "LangChain metadata" in reason and "README: Retrieved ids" in reason
    assert 'e.g. base "q0" expects "doc-0", got "5b1c0e7a-0000-base"' in reason
    assert len(reason) <= 300  # the comment cuts a line at 300 characters: the fix must stay visible
    comment = (tmp_path / "out" / "comment.md").read_text(encoding="utf-8")
    assert "retrieval cannot be scored" in comment and "node.ref\\_doc\\_id" in comment
    assert "README: Retrieved ids)" in comment


def test_ids_matching_on_one_side_only_are_a_regression_not_an_error(tmp_path):
    """Base returns document ids, head (a new splitter) chunk ids: a real retrieval regression (exit 1)."""
    write_jsonl(tmp_path / "golden.jsonl", golden_rows())
    write_side(tmp_path, "base.jsonl", [prediction_row(i, f"doc-{i}") for i in range(N)])
    write_side(tmp_path, "head.jsonl", [prediction_row(i, f"chunk-{i}-0") for i in range(N)])
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    assert result.exit_code == 1, result.output
    assert report["verdict"] == "fail"
    assert not any("retrieval cannot be scored" in line for line in report["reasons"] + report["warnings"])


def sides(golden: list[GoldenCase], base: dict, head: dict, policy: GatePolicy, repeats: int = 1):
    judge = get_judge(policy.judge)
    out = []
    for label, rows in (("base", base), ("head", head)):
        table = PredictionTable.from_mapping(golden, repeats, rows)
        out.append(Side(label, golden, table, repeats, score_all(golden, table, repeats, policy, judge), {}))
    return out


def cases(n: int = 4) -> list[GoldenCase]:
    return [GoldenCase(f"c{i}", f"question {i}?", (f"doc-{i}",)) for i in range(n)] + [
        GoldenCase("ood", "out of scope?", (), out_of_domain=True)
    ]


def retrieved(case_id: str, *ids: str, repeat: int = 0, **kw) -> Prediction:
    return Prediction(case_id, repeat, "an answer", tuple(Chunk(i, f"text of {i}") for i in ids), 5.0, **kw)


def unmatched(golden, base, head, metrics=("hit_rate@5",), repeats=1) -> str | None:
    policy = GatePolicy(metrics=metrics, gated=metrics)
    b, h = sides(golden, base, head, policy, repeats)
    inputs, _ = metric_inputs(b, h, golden, policy)
    return unmatched_ids(b, h, golden, inputs)


def test_unmatched_ids_only_when_nothing_matches_on_either_side_anywhere_in_the_lists():
    golden = cases()
    chunky = {(c.id, 0): retrieved(c.id, f"{c.id}-chunk-a", f"{c.id}-chunk-b") for c in golden}
    message = unmatched(golden, chunky, chunky)
    assert message is not None and message.startswith("retrieval cannot be scored") and "(4 in-domain cases)" in message
    # one match on one side, in one case: a real difference, not this error
    one = dict(chunky) | {("c2", 0): retrieved("c2", "x", "doc-2")}
    assert unmatched(golden, chunky, one) is None and unmatched(golden, one, chunky) is None
    # a match at rank 7, beyond the only metric's k = 5: ids do match, so hit_rate@5 = 0 is a real score
    deep = dict(chunky) | {("c1", 0): retrieved("c1", *[f"n{j}" for j in range(6)], "doc-1")}
    assert unmatched(golden, deep, chunky) is None
    # a match in the second repeat only
    twice = {(c.id, r): retrieved(c.id, f"{c.id}-chunk", repeat=r) for c in golden for r in (0, 1)}
    assert unmatched(golden, twice, twice, repeats=2) is not None
    twice[("c3", 1)] = retrieved("c3", "doc-3", repeat=1)
    assert unmatched(golden, twice, twice, repeats=2) is None


def test_unmatched_ids_needs_something_expected_to_match_and_something_answered():
    golden = cases()
    chunky = {(c.id, 0): retrieved(c.id, "chunk") for c in golden}
    only_ood = [GoldenCase("ood", "q?", (), out_of_domain=True), GoldenCase("noexp", "q?", ())]
    assert unmatched(only_ood, {}, {}) is None  # no case expects a document
    assert unmatched(golden, chunky, chunky, metrics=("answer_f1",)) is None  # no retrieval metric
    failed = {(c.id, 0): Prediction(c.id, 0, error="boom") for c in golden}
    assert unmatched(golden, failed, failed) is None  # every prediction failed: error_rate's business
    empty = {(c.id, 0): retrieved(c.id) for c in golden}
    message = unmatched(golden, empty, empty)
    assert message is not None and "neither side retrieved a chunk" in message


def test_unmatched_ids_on_an_ungated_retrieval_metric_is_a_warning_not_the_verdict():
    golden = cases()
    chunky = {(c.id, 0): retrieved(c.id, "chunk") for c in golden}
    policy = GatePolicy(metrics=("hit_rate@5", "error_rate"), gated=("error_rate",))
    b, h = sides(golden, chunky, chunky, policy)
    comparison = compare_sides(b, h, policy)
    assert comparison.verdict == "pass"
    assert any(w.startswith("retrieval cannot be scored") for w in comparison.warnings)
    gated = GatePolicy(metrics=("hit_rate@5", "error_rate"), gated=("hit_rate@5", "error_rate"))
    comparison = compare_sides(*sides(golden, chunky, chunky, gated), gated)
    assert comparison.verdict == "error" and comparison.reasons[0].startswith("retrieval cannot be scored")


# ------------------------------------------------------------------ chunks without text, answers without claims


def test_a_chunk_without_text_makes_judged_metrics_not_applicable_never_zero():
    case = GoldenCase("c", "What is the capital of Italy?", ("doc-1",))
    policy = GatePolicy(metrics=("faithfulness", "contradiction_rate", "hallucination_rate", "hit_rate@5"))
    metrics = [resolve(m) for m in policy.metrics]
    judge = get_judge(policy.judge)
    answer = "The capital of Italy is Rome."
    full = Prediction("c", 0, answer, (Chunk("doc-1", "Rome is the capital of Italy."),))
    scored = {s.metric: s for s in score_one(case, full, metrics, policy, judge)}
    assert scored["faithfulness"].value == 1.0  # the same answer with the text is scored
    for blank in ("", "   \n"):
        textless = Prediction("c", 0, answer, (Chunk("doc-1", "Rome is the capital of Italy."), Chunk("doc-2", blank)))
        scored = {s.metric: s for s in score_one(case, textless, metrics, policy, judge)}
        for name in ("faithfulness", "contradiction_rate", "hallucination_rate"):
            assert math.isnan(scored[name].value) and scored[name].error is None, name
        assert scored["faithfulness"].detail["not_applicable"] == TEXTLESS_CHUNK
        assert scored["hit_rate@5"].value == 1.0  # ids still score retrieval


def test_the_note_is_kept_when_faithfulness_is_not_configured():
    case = GoldenCase("c", "What is the capital of Italy?", ("doc-1",))
    policy = GatePolicy(metrics=("hallucination_rate",))
    prediction = Prediction("c", 0, "The capital of Italy is Rome.", (Chunk("doc-1", ""),))
    (score,) = score_one(case, prediction, [resolve("hallucination_rate")], policy, get_judge(policy.judge))
    assert math.isnan(score.value) and score.detail["not_applicable"] == TEXTLESS_CHUNK


def test_textless_chunks_and_claimless_answers_are_counted_in_the_report(tmp_path):
    """Head drops the text of 3 chunks and answers one question with no checkable claim."""
    write_jsonl(tmp_path / "golden.jsonl", golden_rows())
    write_side(tmp_path, "base.jsonl", [prediction_row(i, f"doc-{i}") for i in range(N)])
    head = [prediction_row(i, f"doc-{i}", text="" if i < 3 else None, answer="Is it?" if i == 5 else None)
            for i in range(N)]  # fmt: skip
    write_side(tmp_path, "head.jsonl", head)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    warnings = report["warnings"]
    assert f"head: 3 answer(s) not judged: {TEXTLESS_CHUNK}" in warnings
    assert f"head: 1 answer(s) {NO_CHECKABLE_CLAIM}" in warnings
    assert not any(w.startswith("base:") for w in warnings)
    faithfulness = next(m for m in report["metrics"] if m["name"] == "faithfulness")
    assert faithfulness["aggregates"]["head"]["n"] == N - 4  # 3 textless + 1 claimless: none scored 0
    assert faithfulness["aggregates"]["head"]["mean"] == 1.0
    # the gated grounded share could not be scored on head where base was (the claimless answer scores 0, not
    # grounded): an evaluation failure, not a pass
    assert result.exit_code == 3 and report["verdict"] == "error"
    assert any(r.startswith("grounded_answer_rate on head: 3 of") for r in report["reasons"]), report["reasons"]
    grounded = next(m for m in report["metrics"] if m["name"] == "grounded_answer_rate")
    assert grounded["aggregates"]["head"]["n"] == N - 3
    comment = (tmp_path / "out" / "comment.md").read_text(encoding="utf-8")
    assert "3 answer(s) not judged: a retrieved chunk has no text" in comment
    assert "1 answer(s) with no checkable claim" in comment


# ------------------------------------------------------------------ what failed cases consumed


def test_a_failed_prediction_keeps_its_cost_and_latency():
    case = GoldenCase("c", "q?", ("doc-1",))
    policy = GatePolicy(metrics=("cost_usd", "latency_ms", "error_rate", "hit_rate@5"))
    failed = Prediction("c", 0, latency_ms=1500.0, cost_usd=0.25, tokens=900, error="TimeoutError: upstream")
    scored = {s.metric: s for s in score_one(case, failed, [resolve(m) for m in policy.metrics], policy, None)}
    assert (scored["cost_usd"].value, scored["cost_usd"].error) == (0.25, None)
    assert (scored["latency_ms"].value, scored["latency_ms"].error) == (1500.0, None)
    assert scored["error_rate"].value == 1.0
    assert math.isnan(scored["hit_rate@5"].value) and scored["hit_rate@5"].error.startswith("prediction failed")
    unknown = Prediction("c", 0, error="boom")
    scored = {s.metric: s for s in score_one(case, unknown, [resolve(m) for m in policy.metrics], policy, None)}
    assert math.isnan(scored["cost_usd"].value) and scored["cost_usd"].error is None  # unknown, not a failure


def test_failed_cases_cost_counts_in_the_cost_metric_and_its_aggregates(tmp_path):
    """Head fails 2 of 8 cases after paying $0.50 each: its cost per case is not the 6 cheap successes' $0.01."""
    write_jsonl(tmp_path / "golden.jsonl", golden_rows())
    write_side(tmp_path, "base.jsonl", [prediction_row(i, f"doc-{i}", cost_usd=0.01) for i in range(N)])
    head = [prediction_row(i, f"doc-{i}", cost_usd=0.01) for i in range(N - 2)] + [
        {"id": f"q{i}", "error": "RateLimitError after 3 retries", "cost_usd": 0.5, "latency_ms": 9000.0}
        for i in range(N - 2, N)
    ]
    write_side(tmp_path, "head.jsonl", head)
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out")
    cost = next(m for m in report["metrics"] if m["name"] == "cost_usd")
    assert cost["aggregates"]["head"]["n"] == N
    assert math.isclose(cost["aggregates"]["head"]["mean"], (6 * 0.01 + 2 * 0.5) / N)
    assert math.isclose(cost["aggregates"]["base"]["mean"], 0.01)
    latency = next(m for m in report["metrics"] if m["name"] == "latency_ms")
    assert latency["aggregates"]["head"]["n"] == N + 1  # the refused out-of-domain case too
    assert latency["aggregates"]["head"]["mean"] > 1000.0
    assert report["verdict"] == "fail" and result.exit_code == 1  # the crashes themselves fail the gate
    assert report["head"]["n_prediction_errors"] == 2
    scores = json.dumps(report)  # the failures are still listed as errors
    assert "RateLimitError after 3 retries" in scores
