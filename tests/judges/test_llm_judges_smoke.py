"""Smoke tests: the rubric and the pairwise judge through `rag-gate compare` on a RAGTruth model pair,
against the local OpenAI-compatible stub (tests/fake_openai.py; its judges are a word-novelty rule, not an LLM).

They prove the plumbing on real answers — prompts built, both orders asked, grades and verdicts read, scores and
accounting in report.json — not the judges' quality: the verdicts mean nothing with a stub.
"""

from __future__ import annotations

import pytest
from helpers import SHARED_DATA, compare, write_jsonl
from judgeeval import load_ragtruth

pytest.importorskip("openai")

from fake_openai import FakeOpenAI, novelty_pairwise, novelty_rubric  # noqa: E402

pytestmark = pytest.mark.shared_data("ragtruth-subset")

BASE, HEAD = "gpt-4-0613", "mistral-7B-instruct"


@pytest.fixture(scope="module")
def pair():
    by_model: dict[str, dict] = {}
    for case in load_ragtruth(SHARED_DATA / "ragtruth-subset" / "cases.jsonl"):
        by_model.setdefault(case.model, {})[case.source_id] = case
    base, head = by_model[BASE], by_model[HEAD]
    return base, head, sorted(set(base) & set(head))


def write_pair(tmp, pair, config: str) -> int:
    base, head, shared = pair
    write_jsonl(tmp / "golden.jsonl", [{"id": s, "question": base[s].question} for s in shared])
    for name, cases in (("base", base), ("head", head)):
        write_jsonl(tmp / f"{name}.jsonl", [
            {"id": s, "answer": cases[s].response, "latency_ms": 1.0,
             "retrieved": [{"id": c.id, "text": c.text} for c in cases[s].chunks]}
            for s in shared
        ])  # fmt: skip
    (tmp / "rag-gate.yml").write_text(f"golden: golden.jsonl\npipeline: {{predictions: head.jsonl}}\n{config}")
    return len(shared)


def endpoint(fake: FakeOpenAI, tmp) -> str:
    return f"model: stub, base_url: '{fake.base_url}', cache_dir: '{tmp / 'cache'}', timeout_s: 30"


def test_rubric_judge_smoke(tmp_path, pair, fake):
    fake.responder = novelty_rubric
    n = write_pair(tmp_path, pair, f"metrics: [faithfulness, hallucination_rate, answer_relevance, completeness, "
                                   f"form]\njudge: {{name: llm, {endpoint(fake, tmp_path)}}}\n")  # fmt: skip
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out", "--config", str(tmp_path / "rag-gate.yml"))
    requests = len(fake.requests)
    assert result.exit_code in (0, 1) and report["verdict"] in ("pass", "fail", "inconclusive"), result.output
    rows = {m["name"]: m for m in report["metrics"]}
    assert [m["name"] for m in report["metrics"] if m["gated"]] == ["hallucination_rate"]
    assert rows["faithfulness"]["n_pairs"] > 0.8 * n and rows["answer_relevance"]["head_mean"] == 1.0
    # one call per answer that is not a refusal, on each side; every call counted on its side
    used = report["base"]["judge_usage"]["requests"] + report["head"]["judge_usage"]["requests"]
    assert used == requests and n < requests <= 2 * n
    assert report["base"]["judge"]["id"] == "llm:stub@t0" and report["errors"] == []


def test_pairwise_judge_smoke(tmp_path, pair, fake):
    fake.responder = novelty_pairwise
    n = write_pair(tmp_path, pair, f"metrics: [error_rate]\npairwise: {{{endpoint(fake, tmp_path)}}}\n")
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out", "--config", str(tmp_path / "rag-gate.yml"))
    requests = len(fake.requests)
    assert result.exit_code in (0, 1), result.output
    pairwise = report["pairwise"]
    assert pairwise["wins"] + pairwise["ties"] + pairwise["losses"] + pairwise["not_judged"] == n
    assert requests == pairwise["usage"]["requests"] == 2 * (n - pairwise["identical"] - pairwise["not_judged"])
    assert pairwise["order_disagreements"] == 0  # the stub ignores the order, so both orders agree
    row = next(m for m in report["metrics"] if m["name"] == "head_win_rate")
    assert row["gated"] and row["n_pairs"] == n - pairwise["not_judged"]
    assert {c["id"] for c in report["regressed_cases"]} == {
        c["id"] for c in pairwise["cases"] if c["outcome"] == "loss"
    }
