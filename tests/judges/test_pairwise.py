"""The pairwise judge — base's answer against head's, asked in both orders, through `rag-gate compare`
against a local OpenAI-compatible stub. A judge that always prefers the first answer gives ties, never wins; a
judge that prefers the better answer gives the planted wins and losses, the sign test equals scipy's binomtest,
and the regressed cases are exactly head's losses."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from helpers import compare, write_jsonl
from scipy import stats

pytest.importorskip("openai")

from fake_openai import USAGE, Reply  # noqa: E402

from gate.config import load_config  # noqa: E402
from gate.errors import InputError  # noqa: E402
from gate.judges.pairwise import combine_orders, parse_preference  # noqa: E402

N = 40


def answers_of(prompt: str) -> tuple[str, str]:
    """The answers shown as A and B in a pairwise prompt."""
    found = re.findall(r"<answer>\n(.*?)\n</answer>", prompt, re.S)
    assert len(found) == 2, prompt
    return found[0], found[1]


def first_wins(body: dict) -> Reply:
    """A judge with pure position bias: the first answer is always better."""
    return Reply.json({"better": "A", "reason": "the first one"})


def better_wins(body: dict) -> Reply:
    """A consistent judge: the answer without 'maybe' is better; a tie when both (or neither) hedge."""
    a, b = answers_of(body["messages"][1]["content"])
    bad_a, bad_b = "maybe" in a, "maybe" in b
    better = "tie" if bad_a == bad_b else ("B" if bad_a else "A")
    return Reply.json({"better": better, "reason": f"{better} is more direct"})


def write_case(tmp: Path, plan: str, *, prices: bool = False, extra: str = "") -> None:
    """Golden set and both sides' answers; ``plan[i]`` says how case i changes: W head better, L head worse,
    T a different but equally good answer, S the same answer on both sides."""
    cases = [{"id": f"q{i:02d}", "question": f"What colour is item {i}?", "expected_doc_ids": [f"d{i}"]}
             for i in range(len(plan))]  # fmt: skip
    good, hedged = "Item {i} is blue.", "Item {i} is maybe red, maybe blue."
    texts = {"W": (hedged, good), "L": (good, hedged), "T": (good, "Blue is the colour of item {i}."),
             "S": (good, good)}  # fmt: skip

    def rows(side: int) -> list[dict]:
        return [
            {"id": f"q{i:02d}", "answer": texts[p][side].format(i=i), "latency_ms": 1.0,
             "retrieved": [{"id": f"d{i}", "text": f"Item {i} is blue."}]}
            for i, p in enumerate(plan)
        ]  # fmt: skip

    write_jsonl(tmp / "golden.jsonl", cases)
    write_jsonl(tmp / "base.jsonl", rows(0))
    write_jsonl(tmp / "head.jsonl", rows(1))
    price = ", cost_per_1k_input: 0.5, cost_per_1k_output: 2.0" if prices else ""
    (tmp / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {predictions: head.jsonl}\nmetrics: [error_rate]\n"
        f"pairwise: {{model: judge-m, base_url: '{tmp.fake_url}', cache_dir: '{tmp / 'cache'}', max_retries: 0, "
        f"timeout_s: 5, max_consecutive_failures: 1000{price}}}\n{extra}"
    )


@pytest.fixture
def tmp(tmp_path, fake):
    class Tmp(type(tmp_path)):
        fake_url = fake.base_url

    return Tmp(tmp_path)


def run(tmp: Path, out: str = "out"):
    result, report = compare(tmp, "base.jsonl", "head.jsonl", out, "--config", str(tmp / "rag-gate.yml"))
    assert report is not None, result.output
    return result, report


def metric(report: dict, name: str) -> dict:
    return next(m for m in report["metrics"] if m["name"] == name)


@pytest.mark.parametrize(
    ("base_first", "head_first", "outcome"),
    [(b, h, "win" if b == h == "head" else "loss" if b == h == "base" else "tie")
     for b in ("base", "head", "tie") for h in ("base", "head", "tie")],
)  # fmt: skip
def test_a_win_needs_both_orders(base_first, head_first, outcome):
    assert combine_orders(base_first, head_first) == outcome


def test_parse_preference_reads_the_final_json():
    assert parse_preference('<think>{"better": "A"}</think>{"better": "b", "reason": " x\\n y"}') == ("B", "x y")
    assert parse_preference('{"better": "TIE"}') == ("tie", "")
    with pytest.raises(ValueError, match="'better' is a required property"):
        parse_preference('{"winner": "A"}')
    with pytest.raises(ValueError, match="field 'better': 'C' is not one of"):
        parse_preference('{"better": "C"}')


def test_a_judge_that_always_prefers_the_first_answer_gives_ties_not_wins(tmp, fake):
    fake.responder = first_wins
    write_case(tmp, "W" * 20 + "L" * 20)
    result, report = run(tmp)
    pairwise = report["pairwise"]
    assert (pairwise["wins"], pairwise["ties"], pairwise["losses"]) == (0, N, 0)
    assert pairwise["order_disagreements"] == N and pairwise["p_value"] == 1.0
    assert pairwise["win_rate"] is None  # no decided case
    row = metric(report, "head_win_rate")
    assert row["gated"] and (row["base_mean"], row["head_mean"], row["delta"]) == (0.0, 0.0, 0.0)
    assert row["status"] == "pass" and report["regressed_cases"] == [] and result.exit_code == 0
    # two calls per case, the second with the answers swapped
    assert len(fake.requests) == 2 * N
    first, second = (answers_of(r.prompt) for r in fake.requests if "What colour is item 0?" in r.prompt)
    assert first == ("Item 0 is maybe red, maybe blue.", "Item 0 is blue.") and second == first[::-1]


def test_a_consistent_judge_gives_the_planted_wins_and_losses_and_scipys_sign_test(tmp, fake):
    fake.responder = better_wins
    plan = "L" * 20 + "W" * 5 + "T" * 10 + "S" * 5
    write_case(tmp, plan)
    result, report = run(tmp)
    pairwise = report["pairwise"]
    assert (pairwise["wins"], pairwise["ties"], pairwise["losses"]) == (5, 15, 20)
    assert (pairwise["identical"], pairwise["order_disagreements"], pairwise["not_judged"]) == (5, 0, 0)
    oracle = stats.binomtest(5, 25, 0.5, alternative="less").pvalue
    assert pairwise["p_value"] == pytest.approx(oracle, rel=1e-12) and pairwise["win_rate"] == 5 / 25
    row = metric(report, "head_win_rate")
    assert row["p_value"] == pytest.approx(oracle, rel=1e-12)  # exact McNemar on the paired rows = the sign test
    assert (row["base_mean"], row["head_mean"]) == (20 / N, 5 / N) and row["status"] == "fail"
    assert result.exit_code == 1 and report["verdict"] == "fail"
    losses = {f"q{i:02d}" for i, p in enumerate(plan) if p == "L"}
    assert {c["id"] for c in report["regressed_cases"]} == losses
    assert all(c["metrics"][0]["name"] == "head_win_rate" for c in report["regressed_cases"])
    assert len(fake.requests) == 2 * (N - 5)  # identical answers need no call
    by_id = {c["id"]: c for c in pairwise["cases"]}
    reason = "A is more direct | B is more direct"
    assert by_id["q00"] == {"id": "q00", "outcome": "loss", "base_first": "base", "head_first": "base",
                            "reason": reason, "identical": False, "error": None}  # fmt: skip
    comment = (tmp / "out" / "comment.md").read_text()
    assert (
        "(2 calls per case, base's and head's answers in both orders): head won 5, 15 ties (5 identical answers), "
        f"lost 20 · sign test on wins vs losses, one-sided p 0.002 · {2 * (N - 5)} requests · "
        f"{10 * 2 * (N - 5)} in / {5 * 2 * (N - 5)} out tokens · cost not priced." in comment
    )
    assert f"{oracle:.3f}" == "0.002"
    rows = [json.loads(line) for line in (tmp / "out" / "pairwise.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in rows] == [{"L": "loss", "W": "win", "T": "tie", "S": "tie"}[p] for p in plan]


def test_a_better_head_passes_and_judgments_are_cached(tmp, fake):
    fake.responder = better_wins
    write_case(tmp, "W" * 20 + "T" * 20, prices=True)
    result, report = run(tmp)
    assert (report["pairwise"]["wins"], report["pairwise"]["losses"]) == (20, 0)
    assert metric(report, "head_win_rate")["status"] == "pass" and result.exit_code == 0
    usage = report["pairwise"]["usage"]
    assert usage["requests"] == 2 * N == len(fake.requests) and usage["cache_hits"] == 0
    tokens_in, tokens_out = USAGE["prompt_tokens"] * 2 * N, USAGE["completion_tokens"] * 2 * N
    assert (usage["input_tokens"], usage["output_tokens"]) == (tokens_in, tokens_out)
    assert usage["cost_usd"] == pytest.approx(tokens_in / 1000 * 0.5 + tokens_out / 1000 * 2.0)
    _, again = run(tmp, "out2")
    assert len(fake.requests) == 2 * N and again["pairwise"]["usage"]["cache_hits"] == 2 * N
    assert again["pairwise"]["usage"]["requests"] == 0 and again["pairwise"]["wins"] == 20


def test_judge_failures_are_failures_counted_against_the_budget(tmp, fake):
    def flaky(body: dict) -> Reply:
        a, _ = answers_of(body["messages"][1]["content"])
        return Reply.text("no verdict") if "item 3 " in a.lower() or "item 3." in a.lower() else better_wins(body)

    fake.responder = flaky
    write_case(tmp, "T" * N)
    result, report = run(tmp)
    pairwise = report["pairwise"]
    assert (pairwise["ties"], pairwise["not_judged"]) == (N - 1, 1)
    failed = next(c for c in pairwise["cases"] if c["id"] == "q03")
    assert failed["outcome"] is None and "no JSON object" in failed["error"]
    assert {(e["side"], e["id"], e["metric"]) for e in report["errors"]} == {
        ("base", "q03", "head_win_rate"),
        ("head", "q03", "head_win_rate"),
    }
    assert result.exit_code == 0  # 1 of 40 (2.5 %) is within the 5 % budget


def test_config_adds_and_checks_the_paired_metric(tmp_path):
    write_jsonl(tmp_path / "golden.jsonl", [{"id": "a", "question": "q"}])
    head = "golden: golden.jsonl\npipeline: {predictions: golden.jsonl}\n"
    (tmp_path / "rag-gate.yml").write_text(head + "metrics: [mrr]\npairwise: {model: m}\n")
    policy = load_config(tmp_path / "rag-gate.yml").policy
    assert policy.metrics == ("mrr", "head_win_rate") and policy.gated == ("mrr", "head_win_rate")
    assert policy.paired_metrics == ("head_win_rate",) and policy.pairwise == {"model": "m"}
    (tmp_path / "rag-gate.yml").write_text(head + "metrics: [mrr, head_win_rate]\n")
    with pytest.raises(InputError, match="metrics.1: 'head_win_rate' is scored by the pairwise judge"):
        load_config(tmp_path / "rag-gate.yml")
    (tmp_path / "rag-gate.yml").write_text(head + "pairwise: {name: llm, model: m, temprature: 0}\n")
    with pytest.raises(InputError) as info:
        load_config(tmp_path / "rag-gate.yml")
    assert "pairwise.name: the pairwise judge takes no name" in str(info.value)
    assert "pairwise.temprature: unknown option of the pairwise judge; did you mean `temperature`?" in str(info.value)
    (tmp_path / "rag-gate.yml").write_text(head + "gate: [head_win_rate]\npairwise: {model: m}\n")
    assert load_config(tmp_path / "rag-gate.yml").policy.gated == ("head_win_rate",)


def test_a_pairwise_judge_of_its_own_generator_warns(fake):
    from gate.judges.pairwise import PairwiseJudge

    with pytest.warns(UserWarning, match="the pairwise judge model 'Judge-M' is also the generator"):
        PairwiseJudge(model="Judge-M", base_url=fake.base_url, cache_dir=False, generator_model=" judge-m ")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PairwiseJudge(model="Judge-M", base_url=fake.base_url, cache_dir=False, generator_model="gen-x")
