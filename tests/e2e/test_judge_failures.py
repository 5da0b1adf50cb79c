"""A judge endpoint that fails on some calls: failures are counted in the report, never averaged as scores."""

from __future__ import annotations

from fake_openai import FakeOpenAI, Reply
from helpers import compare, write_jsonl

N = 30
FAILING = {f"c{i}" for i in range(0, N, 5)}  # 6 of 30 answers: the endpoint answers 500


def responder(body):
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    if "BROKEN" in prompt:
        return Reply.error(500)
    return Reply.json({"faithfulness": 3, "answer_relevance": 3, "correctness": 3, "completeness": 3, "form": 3})


def test_judge_failures_are_counted_not_scored(tmp_path):
    write_jsonl(tmp_path / "golden.jsonl", [{"id": f"c{i}", "question": f"What is item {i}?"} for i in range(N)])
    rows = [
        {
            "id": f"c{i}",
            "answer": f"Item {i} is a widget{' BROKEN' if f'c{i}' in FAILING else ''}.",
            "retrieved": [{"id": f"d{i}", "text": f"Item {i} is a widget."}],
            "latency_ms": 5.0,
        }
        for i in range(N)
    ]
    write_jsonl(tmp_path / "preds.jsonl", rows)
    with FakeOpenAI(responder) as fake:
        (tmp_path / "rag-gate.yml").write_text(
            "golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\nmetrics: [faithfulness]\n"
            f"judge: {{name: llm, model: judge-m, base_url: '{fake.base_url}', max_retries: 1, backoff_s: 0.01,"
            " cache_dir: false}\n"
        )
        result, report = compare(
            tmp_path, "preds.jsonl", "preds.jsonl", "report", "--config", str(tmp_path / "rag-gate.yml")
        )
        n_broken_requests = sum("BROKEN" in r.prompt for r in fake.requests)
    assert n_broken_requests == 2 * len(FAILING) * 2  # 1 retry each, on both sides
    faith = report["metrics"][0]
    assert (faith["n_failed_base"], faith["n_failed_head"]) == (len(FAILING), len(FAILING))
    assert faith["n_pairs"] == N - len(FAILING)
    assert faith["base_mean"] == 1.0 and faith["head_mean"] == 1.0  # the failures are not averaged in as 0
    judge_errors = [e for e in report["errors"] if e["metric"] == "faithfulness"]
    assert {e["id"] for e in judge_errors} == FAILING and all("judge failed" in e["message"] for e in judge_errors)
    assert report["error_rate"] == len(FAILING) / N
    # 6 of 30 = 20 % of each side's judgments failed, past the 5 % budget: the evaluation is not trusted (exit 3)
    assert report["verdict"] == "error" and result.exit_code == 3
    uses = {(u["metric"], u["side"]): u for u in report["error_budget_use"]}
    assert set(uses) == {("faithfulness", "base"), ("faithfulness", "head")}
    assert all((u["failed"], u["expected"]) == (len(FAILING), N) for u in uses.values())
    assert any(r.startswith("faithfulness on base: 6 of 30 evaluations failed (20.0%") for r in report["reasons"])
