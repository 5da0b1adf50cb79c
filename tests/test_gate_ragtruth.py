"""Gate-level check on real human labels (issue 5): RAGTruth answers of one model as base, another as head.

A model with ~9 % human-labelled hallucinations (gpt-4-0613) against one with ~61 % (mistral-7B-instruct) must
give a significant faithfulness regression with the lexical judge; models with similar human rates must not.
"""

from __future__ import annotations

import pytest
from conftest import SHARED_DATA, compare, write_jsonl
from judgeeval import load_ragtruth

RAGTRUTH = SHARED_DATA / "ragtruth-subset" / "cases.jsonl"
# Three comparisons judged on ~100 long RAGTruth answers each: slow (CI runs `-m slow`).
pytestmark = [pytest.mark.slow, pytest.mark.shared_data("ragtruth-subset")]


@pytest.fixture(scope="module")
def by_model():
    out: dict[str, dict] = {}
    for case in load_ragtruth(RAGTRUTH):
        out.setdefault(case.model, {})[case.source_id] = case
    return out


def gate(tmp_path, by_model, base_model, head_model):
    base, head = by_model[base_model], by_model[head_model]
    shared = sorted(set(base) & set(head))
    write_jsonl(tmp_path / "golden.jsonl", [{"id": s, "question": base[s].question} for s in shared])
    for name, cases in (("base", base), ("head", head)):
        write_jsonl(
            tmp_path / f"{name}.jsonl",
            [
                {
                    "id": s,
                    "answer": cases[s].response,
                    "latency_ms": 1.0,
                    "retrieved": [{"id": c.id, "text": c.text} for c in cases[s].chunks],
                }
                for s in shared
            ],
        )
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: head.jsonl}\n"
        "metrics: [faithfulness, contradiction_rate]\ngate: [faithfulness]\n"
    )
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "report", "--config", str(tmp_path / "rag-gate.yml"))
    human = {side: sum(c[s].hallucinated for s in shared) / len(shared) for side, c in (("base", base), ("head", head))}
    return result.exit_code, report, human, len(shared)


def test_clearly_worse_model_fails_the_gate(tmp_path, by_model):
    code, report, human, n = gate(tmp_path, by_model, "gpt-4-0613", "mistral-7B-instruct")
    assert n >= 80 and human["base"] < 0.15 and human["head"] > 0.5
    faith = next(m for m in report["metrics"] if m["name"] == "faithfulness")
    assert code == 1 and report["verdict"] == "fail" and faith["status"] == "fail"
    assert faith["ci_high"] < 0 and faith["p_adjusted"] < 0.05


@pytest.mark.parametrize(
    "base_model, head_model", [("gpt-4-0613", "gpt-3.5-turbo-0613"), ("llama-2-7b-chat", "mistral-7B-instruct")]
)
def test_models_with_similar_rates_do_not_fail(tmp_path, by_model, base_model, head_model):
    code, report, human, _ = gate(tmp_path, by_model, base_model, head_model)
    assert abs(human["base"] - human["head"]) < 0.05
    faith = next(m for m in report["metrics"] if m["name"] == "faithfulness")
    assert code == 0 and faith["status"] != "fail", faith
