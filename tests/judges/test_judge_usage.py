"""Judge accounting (requests, retries, failures, tokens, cost) per judge and side, in the run
manifest, in report.json's side info (also when compare rescored a side), and summed over merged shards; the
offline judge reports 0 requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import write_jsonl

pytest.importorskip("openai")

from fake_openai import USAGE, FakeOpenAI, Reply  # noqa: E402

from gate.cli import main  # noqa: E402
from gate.judges.base import NO_USAGE  # noqa: E402

N = 6
GRADES = {"faithfulness": 3, "answer_relevance": 3, "correctness": 2, "completeness": 3, "form": 3}


def setup(tmp: Path, judge: str) -> None:
    write_jsonl(tmp / "golden.jsonl", [
        {"id": f"q{i}", "question": f"What colour is item {i}?", "expected_doc_ids": [f"d{i}"],
         "reference_answers": ["blue"]}
        for i in range(N)
    ])  # fmt: skip
    write_jsonl(tmp / "preds.jsonl", [
        {"id": f"q{i}", "answer": f"Item {i} is blue.", "latency_ms": 1.0,
         "retrieved": [{"id": f"d{i}", "text": f"Item {i} is blue."}]}
        for i in range(N)
    ])  # fmt: skip
    (tmp / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\n"
        f"metrics: [faithfulness, correctness]\ngate: [faithfulness]\njudge: {judge}\n"
    )


def cli(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code in (0, 1), result.output
    return result


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def test_the_offline_judge_reports_zero_requests(tmp_path):
    setup(tmp_path, "{name: lexical}")
    for side in ("base", "head"):
        cli("run", "--config", str(tmp_path / "rag-gate.yml"), "--out", str(tmp_path / side))
    assert manifest(tmp_path / "base")["judge_usage"] == NO_USAGE.to_dict()
    cli("compare", str(tmp_path / "base"), str(tmp_path / "head"), "--out", str(tmp_path / "out"))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["base"]["judge_usage"] == report["head"]["judge_usage"] == NO_USAGE.to_dict()
    assert "| judge calls | no API calls | no API calls |" in (tmp_path / "out" / "comment.md").read_text()


@pytest.fixture
def fake(fake: FakeOpenAI) -> FakeOpenAI:
    """The local server (tests/judges/conftest.py) answering every request with the rubric's grades."""
    fake.responder = lambda body: Reply.json(GRADES)
    return fake


def llm(fake: FakeOpenAI, tmp: Path) -> str:
    return (f"{{name: llm, model: judge-m, base_url: '{fake.base_url}', cache_dir: '{tmp / 'cache'}', "
            "cost_per_1k_input: 1.0, cost_per_1k_output: 4.0, max_retries: 1, backoff_s: 0.01}")  # fmt: skip


def test_an_llm_judges_usage_reaches_the_manifest_and_the_report(tmp_path, fake):
    setup(tmp_path, llm(fake, tmp_path))
    fake.script(Reply.error(503))  # one retry
    cli("run", "--config", str(tmp_path / "rag-gate.yml"), "--out", str(tmp_path / "base"))
    usage = manifest(tmp_path / "base")["judge_usage"]
    tokens_in, tokens_out = USAGE["prompt_tokens"] * N, USAGE["completion_tokens"] * N
    assert usage == {
        "requests": N + 1,
        "retries": 1,
        "failures": 0,
        "cache_hits": 0,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "responses_without_usage": 0,
        "cost_usd": pytest.approx(tokens_in / 1000 * 1.0 + tokens_out / 1000 * 4.0),
        "stopped": None,
    }
    assert len(fake.requests) == N + 1
    cli("run", "--config", str(tmp_path / "rag-gate.yml"), "--out", str(tmp_path / "head"))
    head_usage = manifest(tmp_path / "head")["judge_usage"]
    assert (head_usage["requests"], head_usage["cache_hits"], head_usage["cost_usd"]) == (0, N, 0.0)
    cli("compare", str(tmp_path / "base"), str(tmp_path / "head"), "--out", str(tmp_path / "out"))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["base"]["judge_usage"] == usage and report["head"]["judge_usage"] == head_usage
    cost = f"${usage['cost_usd']:.4f}"
    row = f"| judge calls | {N + 1} requests (1 retries) · {tokens_in} in / {tokens_out} out tokens · {cost} | 0 "
    row += f"requests, {N} cached · 0 in / 0 out tokens · $0.0000 |"
    assert row in (tmp_path / "out" / "comment.md").read_text()
    # a policy with another judge rescores both sides: the side info shows the rescoring's usage
    (tmp_path / "lexical.yml").write_text(
        (tmp_path / "rag-gate.yml").read_text().replace(llm(fake, tmp_path), "{name: lexical}")
    )
    cli("compare", "--config", str(tmp_path / "lexical.yml"), str(tmp_path / "base"), str(tmp_path / "head"),
        "--out", str(tmp_path / "out2"))  # fmt: skip
    again = json.loads((tmp_path / "out2" / "report.json").read_text())
    assert again["base"]["judge_usage"] == again["head"]["judge_usage"] == NO_USAGE.to_dict()
    assert any("scores recomputed" in w for w in again["warnings"])


def test_merged_shards_sum_their_usage(tmp_path, fake):
    setup(tmp_path, llm(fake, tmp_path))
    shards = []
    for i in (1, 2):
        shards.append(tmp_path / f"shard{i}")
        cli("run", "--config", str(tmp_path / "rag-gate.yml"), "--shard", f"{i}/2", "--out", str(shards[-1]))
    parts = [manifest(s)["judge_usage"] for s in shards]
    assert sorted(p["requests"] for p in parts) == [N // 2, N // 2]
    cli("merge", *map(str, shards), "--out", str(tmp_path / "merged"))
    merged = manifest(tmp_path / "merged")["judge_usage"]
    assert merged["requests"] == N and merged["input_tokens"] == USAGE["prompt_tokens"] * N
    assert merged["cost_usd"] == pytest.approx(parts[0]["cost_usd"] + parts[1]["cost_usd"])
