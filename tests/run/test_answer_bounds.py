"""Bounded work per answer: an answer too long to judge, a pipeline result too large to send, linear text parsing.

- An answer over MAX_JUDGED_ANSWER_BYTES is not judged: its judged metrics are not applicable with the reason (an
  evaluation failure where the other side was judged), its other metrics are scored; normal answers are unchanged.
- A ``python:`` pipeline result over MAX_REPLY_BYTES fails its case with its size, without a retry.
- Duplicate claims found by prefix filtering are those of comparing every pair (the former quadratic loop).
- SQuAD normalisation by ``str.translate`` equals the official script's character loop.
"""

from __future__ import annotations

import math
import random
import re
import string

import pytest
from helpers import compare, write_jsonl

from gate._worker import MAX_REPLY_BYTES
from gate.config import GatePolicy, load_config
from gate.golden import load_golden
from gate.judges import get_judge
from gate.judges.base import MAX_JUDGED_ANSWER_BYTES, oversize_judgment, oversize_note
from gate.judges.claims import MAX_LIST_WORDS, _same_facts, distinct_claims, split_clauses
from gate.judges.text import facts
from gate.metrics import resolve
from gate.metrics.generation import normalize_answer
from gate.models import Chunk, GoldenCase, Prediction
from gate.pipeline import run_python
from gate.scoring import score_one

CASE = GoldenCase("c", "When was the bridge built?", ("d1",), ("1803",))
CHUNK = Chunk("d1", "The bridge of Arlen was built in 1803.")
POLICY = GatePolicy(metrics=("faithfulness", "hallucination_rate", "answer_f1", "hit_rate@5"))


def scored(answer: str) -> dict:
    metrics = [resolve(m) for m in POLICY.metrics]
    prediction = Prediction("c", 0, answer, (CHUNK,))
    return {s.metric: s for s in score_one(CASE, prediction, metrics, POLICY, get_judge(POLICY.judge))}


def test_an_answer_over_the_limit_is_not_judged_and_says_why():
    sentence = "lorem ipsum 1234 "
    at_limit = (sentence * (MAX_JUDGED_ANSWER_BYTES // len(sentence) + 1))[:MAX_JUDGED_ANSWER_BYTES]
    assert oversize_judgment(Prediction("c", 0, at_limit)) is None  # the limit itself is judged
    over = at_limit + "é"  # 2 bytes in UTF-8: 100,002 bytes
    judgment = oversize_judgment(Prediction("c", 0, over))
    assert judgment is not None and judgment.not_applicable == oversize_note(MAX_JUDGED_ANSWER_BYTES + 2)
    assert judgment.not_applicable == "answer of 100,002 bytes exceeds the limit of 100,000 bytes a judge is given"
    huge = scored("The bridge of Arlen was built in 1803. " + sentence * 300_000)  # 5 MB, one long sentence
    for name in ("faithfulness", "hallucination_rate"):
        assert math.isnan(huge[name].value) and huge[name].error is None, name
    assert huge["faithfulness"].detail["not_applicable"].startswith("answer of 5,100,039 bytes exceeds")
    assert huge["hit_rate@5"].value == 1.0  # what does not read the answer is scored as ever
    assert 0 < huge["answer_f1"].value < 0.01  # token F1 of 1 right token among 900,008
    normal = scored("The bridge of Arlen was built in 1803.")
    assert normal["faithfulness"].value == 1.0 and normal["answer_f1"].value == 2 * (1 / 7) / (1 / 7 + 1)


def test_an_unjudged_long_answer_is_counted_and_fails_a_gated_judged_metric(tmp_path):
    doc = {"id": "d0", "text": "The bridge of Arlen was built in 1803."}
    golden = [{"id": f"q{i}", "question": "When was the bridge built?", "expected_doc_ids": ["d0"]} for i in range(6)]
    base = [{"id": f"q{i}", "answer": "It was built in 1803.", "retrieved": [doc]} for i in range(6)]
    head = [dict(row) for row in base]
    head[0]["answer"] = "It was built in 1803 " + "and then it stood there " * 20_000  # 480 KB, one sentence
    write_jsonl(tmp_path / "golden.jsonl", golden)
    write_jsonl(tmp_path / "base.jsonl", base)
    write_jsonl(tmp_path / "head.jsonl", head)
    size = len(head[0]["answer"].encode())
    result, report = compare(tmp_path, "base.jsonl", "head.jsonl", "out", "--jobs", "1")
    assert f"head: 1 answer(s) not judged: {oversize_note(size)}" in report["warnings"]
    claims = next(m for m in report["metrics"] if m["name"] == "grounded_answer_rate")
    assert claims["n_failed_head"] == 1 and claims["n_failed_base"] == 0  # never "no change"


LONG_REPLY = """
def answer(case):
    with open("calls.txt", "a") as calls:
        calls.write("x")
    size = {size} if case["id"] == "big" else 10
    return {{"answer": "a" * size, "retrieved": []}}
"""


def test_a_pipeline_result_over_the_limit_fails_its_case_without_a_retry(tmp_path):
    (tmp_path / "pipe.py").write_text(LONG_REPLY.format(size=MAX_REPLY_BYTES + 1))
    write_jsonl(tmp_path / "golden.jsonl", [{"id": "big", "question": "q"}, {"id": "small", "question": "q"}])
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline: {python: 'pipe:answer', retries: 2, concurrency: 1}\n"
    )
    config = load_config(tmp_path / "rag-gate.yml")
    got = []
    run_python(config.pipeline, [(case, 0) for case in load_golden(config.golden)], got.append)
    big, small = got
    told = re.fullmatch(
        rf"the result of ([\d,]+) bytes \(as JSON\) exceeds the limit of {MAX_REPLY_BYTES:,} bytes a pipeline call "
        "may return",
        big.error or "",
    )
    assert told, big.error
    # the answer, its JSON quotes and keys, the latency (a float) and the warm-up flag
    assert MAX_REPLY_BYTES + 1 + 40 < int(told.group(1).replace(",", "")) < MAX_REPLY_BYTES + 1 + 120
    assert small.error is None and small.answer == "a" * 10
    assert (tmp_path / "calls.txt").read_text() == "xx"  # one call each: the oversized one was not retried


def _distinct_every_pair(claims, lang="en", overlap=0.8):
    """The former implementation: every claim compared with every kept one (the oracle)."""
    kept, found_kept = [], []
    for claim in claims:
        found = facts(claim, lang)
        key = found.content | {f"#{q.value:g}" for q in found.numbers} | {f"@{m}" for m in found.months}
        if key and any(
            len(key & k) / len(key | k) >= overlap and _same_facts(found, key, other, k, lang)
            for k, other in found_kept
        ):
            continue
        kept.append(claim)
        found_kept.append((key, found))
    return kept, len(claims) - len(kept)


@pytest.mark.parametrize("overlap", [0.5, 0.8, 1.0])
def test_prefix_filtered_duplicates_equal_comparing_every_pair(overlap):
    rng = random.Random(3)
    words = "bridge river castle town mayor built opened closed large small old new north south city".split()
    claims = []
    for _ in range(400):  # many near-duplicates: 4-7 words from a small vocabulary, a number, sometimes a negation
        chosen = rng.sample(words, rng.randint(4, 7))
        number = f" in {rng.choice([1800, 1803, 1900])}" if rng.random() < 0.5 else ""
        claims.append(("The " + " ".join(chosen) + (" was not" if rng.random() < 0.2 else "") + number).strip())
    got = distinct_claims(claims, overlap=overlap)
    assert got == _distinct_every_pair(claims, overlap=overlap)
    assert 0 < got[1] < len(claims)  # some dropped, some kept: the comparison is not trivial


def test_squad_normalisation_equals_the_official_character_loop():
    rng = random.Random(0)
    alphabet = string.printable + "éÀßİﬁ‘’“”—"
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        official = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
        official = " ".join(re.sub(r"\b(a|an|the)\b", " ", official).split())
        assert normalize_answer(text) == official, text


def test_a_runaway_list_makes_its_items_claims_alone_a_normal_list_keeps_its_head():
    # a normal list: each item keeps the clause's head (here its subject), as before the bound
    assert split_clauses("It serves pizza, pasta and salad") == ["It serves pizza", "It pasta", "It salad"]
    head = " ".join(["bridge river castle town"] * 1000)  # a clause of 4,000 words, then 10 list items
    claims = split_clauses(head + ", x1, x2, x3, x4, x5, x6, x7, x8, x9, x10")
    assert 4000 * 10 > MAX_LIST_WORDS and claims[1:] == [f"x{i}" for i in range(1, 11)]
    assert sum(len(c) for c in claims) < len(head) + 100  # the claims are about as long as the answer
