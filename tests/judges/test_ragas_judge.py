"""The ragas judge (ragas 0.4 Faithfulness) against a local OpenAI-compatible server (fake_openai.py)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading

import pytest

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
pytest.importorskip("ragas")

import ragas  # noqa: E402
from fake_openai import HUNG_S, TIMEOUT_S, Reply, fast_judge_options  # noqa: E402

from gate.judges.llm.retry import JudgeConfigError  # noqa: E402
from gate.judges.ragas_judge import REASKS, RagasJudge  # noqa: E402
from gate.models import Chunk  # noqa: E402

CHUNKS = (Chunk("doc-7", "The Eiffel Tower is 330 metres tall."), Chunk("doc-2", "It opened in 1889."))
QUESTION = "How tall is the Eiffel Tower?"
ANSWER = "The Eiffel Tower is 330 metres tall and painted blue."
STATEMENTS = ["The Eiffel Tower is 330 metres tall.", "The Eiffel Tower is painted blue."]


def prompt(body) -> str:
    return "\n".join(m["content"] for m in body["messages"])


def is_extraction(body) -> bool:
    return "Break down each sentence" in prompt(body)


def extraction(statements=STATEMENTS) -> Reply:
    return Reply.json({"statements": statements})


def verdicts(*pairs) -> Reply:
    return Reply.json({"statements": [{"statement": s, "reason": f"because {v}", "verdict": v} for s, v in pairs]})


def honest(body) -> Reply:
    """Statement extraction, then verdict 1 for statements that appear word for word in the context."""
    user = body["messages"][-1]["content"]
    if is_extraction(body):
        answer = json.loads(user.rsplit("input:", 1)[1].rsplit("Output:", 1)[0])["answer"]
        return extraction([s.strip() + "." for s in answer.split(".") if s.strip()])
    given = json.loads(user.rsplit("input:", 1)[1].rsplit("Output:", 1)[0])
    return verdicts(*[(s, int(s in given["context"])) for s in given["statements"]])


@pytest.fixture
def make_judge(fake, tmp_path):
    def make(**options):
        return RagasJudge(**{**fast_judge_options(fake, tmp_path / "cache", "judge-r"), **options})

    return make


def test_statements_map_to_claims_and_score_is_the_metric_value(fake, make_judge):
    fake.script(extraction(), verdicts((STATEMENTS[0], 1), (STATEMENTS[1], 0)))
    judgment = make_judge(temperature=0.2, max_tokens=900).judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error is None
    assert [(c.claim, c.verdict, c.reason) for c in judgment.claims] == [
        (STATEMENTS[0], "supported", "because 1"),
        (STATEMENTS[1], "unverifiable", "because 0"),
    ]
    assert judgment.score == 0.5 and judgment.faithfulness == 0.5 and judgment.contradiction_rate == 0.0
    first, second = fake.requests
    assert is_extraction(first.body) and not is_extraction(second.body)
    for request in (first, second):
        body = request.body
        assert (body["model"], body["temperature"], body["max_tokens"]) == ("judge-r", 0.2, 900)
        assert body["response_format"] == {"type": "json_object"}
    assert '"answer": "The Eiffel Tower is 330 metres tall and painted blue."' in first.prompt
    assert json.dumps("The Eiffel Tower is 330 metres tall.\nIt opened in 1889.") in second.prompt


def test_scores_follow_the_verdicts(fake, make_judge):
    fake.responder = honest
    judge = make_judge(cache_dir=False)
    answer = "The Eiffel Tower is 330 metres tall. It opened in 1889. It is blue. It is in Rome."
    judgment = judge.judge(QUESTION, answer, CHUNKS)
    assert [c.verdict for c in judgment.claims] == ["supported", "supported", "unverifiable", "unverifiable"]
    assert judgment.score == 2 / 4


def test_no_statement_gives_nan_not_error(fake, make_judge):
    fake.script(extraction([]))
    judgment = make_judge().judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error is None and judgment.claims == () and judgment.score is None
    assert math.isnan(judgment.faithfulness)
    assert len(fake.requests) == 1


def test_no_chunks_is_judged_against_an_empty_context(fake, make_judge):
    fake.responder = honest
    judgment = make_judge().judge(QUESTION, "Paris is in France.", ())
    assert judgment.score == 0.0 and [c.verdict for c in judgment.claims] == ["unverifiable"]
    assert '"context": ""' in fake.requests[1].prompt


def test_broken_json_is_a_failure_not_a_score(fake, make_judge):
    fake.responder = lambda body: Reply.text('{"statements": ["unterminated')
    judge = make_judge()
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error is not None and judgment.error.startswith("ragas:judge-r@t0: InstructorRetryException")
    assert math.isnan(judgment.faithfulness) and judgment.claims == ()
    assert judge.usage().failures == 1
    assert len(fake.requests) == REASKS + 1  # instructor re-asked with the error; HTTP retries not used


def test_429_retry_after_then_success(fake, make_judge):
    fake.script(Reply.error(429, retry_after=0.3), extraction(), verdicts((STATEMENTS[0], 1), (STATEMENTS[1], 1)))
    judge = make_judge()
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.score == 1.0
    first, second, _ = fake.requests
    assert 0.3 <= second.at - first.at < 2.0
    assert (judge.usage().requests, judge.usage().retries) == (3, 1)


def test_persistent_500_is_a_failure(fake, make_judge):
    judge = make_judge(max_retries=1)
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)  # the default responder answers 500
    assert judgment.error == "ragas:judge-r@t0: HTTP 500: fake error 500"
    assert len(fake.requests) == 2 and judge.usage().retries == 1


def test_slow_answer_beyond_timeout_is_a_failure(fake, make_judge):
    fake.responder = lambda body: Reply.slow(HUNG_S, extraction())
    judgment = make_judge(timeout_s=TIMEOUT_S, max_retries=0).judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error == "ragas:judge-r@t0: request timed out"
    assert fake.wait_for_requests(1) == 1


def test_truncated_answer_is_a_failure(fake, make_judge):
    fake.script(Reply.truncated('{"statements": ["The Eiffel'))
    judgment = make_judge().judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error is not None and "IncompleteOutputException" in judgment.error
    assert math.isnan(judgment.faithfulness) and len(fake.requests) == 1


def test_cache_hit_makes_no_request(fake, make_judge):
    fake.script(extraction(), verdicts((STATEMENTS[0], 1), (STATEMENTS[1], 0)))
    first = make_judge().judge(QUESTION, ANSWER, CHUNKS)
    judge = make_judge()
    assert judge.judge(QUESTION, ANSWER, CHUNKS) == first
    assert len(fake.requests) == 2 and judge.usage().cache_hits == 2 and judge.usage().requests == 0
    fake.responder = honest
    judge.judge(QUESTION, ANSWER, CHUNKS, repeat=1)  # another repeat is sampled again
    assert len(fake.requests) == 4


def test_threads_share_the_concurrency_bound(fake, make_judge):
    fake.responder = lambda body: Reply.slow(0.2, honest(body))
    judge = make_judge(concurrency=2, cache_dir=False)
    results = {}

    def work(i):
        answer = "The Eiffel Tower is 330 metres tall." if i % 2 else f"It has {i} lifts."
        results[i] = judge.judge(QUESTION, answer, CHUNKS).score

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {0: 0.0, 1: 1.0, 2: 0.0, 3: 1.0}
    assert fake.max_in_flight == 2 and len(fake.requests) == 8


def test_id_version_and_options(make_judge, fake):
    judge = make_judge(temperature=0.5)
    assert judge.id == "ragas:judge-r@t0.5" and judge.version.startswith("ragas-0.4")
    assert (judge.identity["model"], judge.identity["temperature"]) == ("judge-r", 0.5)
    assert os.environ["RAGAS_DO_NOT_TRACK"] == "true"
    with pytest.raises(ValueError, match="option 'max_tokens' must be an integer"):
        make_judge(max_tokens=-5)
    with pytest.raises(ValueError, match="environment variable OPENAI_API_KEY is not set"):
        RagasJudge(model="m", environ={})


def test_empty_answer_is_not_judged(fake, make_judge):
    judgment = make_judge().judge(QUESTION, "", CHUNKS)
    assert judgment.error is None and math.isnan(judgment.faithfulness) and fake.requests == []


def test_reasoning_and_drafts_never_reach_instructor(fake, make_judge):
    def thinking(body):
        good = honest(body)
        draft = json.dumps({"statements": ["draft statement"]} if is_extraction(body) else {"statements": []})
        return Reply.text(
            f"<think>A first try: {draft}. Let me check again.</think>\nThe format is {draft}. {good.content}"
        )

    fake.responder = thinking
    judge = make_judge(cache_dir=False)
    answer = "The Eiffel Tower is 330 metres tall. It is in Rome."
    judgment = judge.judge(QUESTION, answer, CHUNKS)
    assert judgment.error is None
    assert [(c.claim, c.verdict) for c in judgment.claims] == [
        ("The Eiffel Tower is 330 metres tall.", "supported"),
        ("It is in Rome.", "unverifiable"),
    ]
    assert judgment.score == 0.5 and len(fake.requests) == 2  # no re-ask was needed


def test_a_cut_json_body_is_a_failure_for_that_case_only(fake, make_judge):
    fake.script(Reply.cut(), Reply.cut())
    judge = make_judge(max_retries=1, cache_dir=False)
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error.startswith("ragas:judge-r@t0: unreadable response body (not the JSON announced")
    assert len(fake.requests) == 2
    fake.responder = honest
    assert judge.judge(QUESTION, "The Eiffel Tower is 330 metres tall.", CHUNKS).score == 1.0


def test_401_stops_the_judge(fake, make_judge):
    fake.responder = lambda body: Reply.error(401, message="Incorrect API key provided")
    judge = make_judge()
    for _ in range(2):
        with pytest.raises(JudgeConfigError, match=r"^judge endpoint .* rejected the request: HTTP 401: Incorrect"):
            judge.judge(QUESTION, ANSWER, CHUNKS)
    assert len(fake.requests) == 1


def test_a_hung_endpoint_opens_the_circuit(fake, make_judge):
    fake.responder = lambda body: Reply.slow(HUNG_S, extraction())
    judge = make_judge(timeout_s=TIMEOUT_S, max_retries=0, max_consecutive_failures=2, concurrency=1, cache_dir=False)
    errors = [judge.judge(f"Question {i}?", ANSWER, CHUNKS).error for i in range(4)]
    assert errors[:2] == ["ragas:judge-r@t0: request timed out"] * 2
    assert errors[2:] == ["ragas:judge-r@t0: circuit open after 2 consecutive failures (last: request timed out)"] * 2
    assert fake.wait_for_requests(2) == 2 and judge.usage().failures == 4


def test_usage_counts_reasks_and_tokens(fake, make_judge):
    fake.responder = lambda body: Reply.text('{"statements": ["unterminated')
    judge = make_judge(cache_dir=False, cost_per_1k_input=1.0, cost_per_1k_output=3.0)
    judge.judge(QUESTION, ANSWER, CHUNKS)
    fake.responder = honest
    judge.judge(QUESTION, "The Eiffel Tower is 330 metres tall.", CHUNKS)
    usage = judge.usage()
    n = REASKS + 1 + 2
    assert (usage.requests, usage.failures, usage.input_tokens, usage.output_tokens) == (
        n,
        1,
        10 * n,
        5 * n,
    )
    assert usage.cost_usd == pytest.approx(10 * n / 1000 * 1.0 + 5 * n / 1000 * 3.0)


def test_concurrent_reasks_keep_their_own_count(fake, make_judge):
    """One answer's re-asks must not use up another's: instructor's retry state is per call."""

    def responder(body):
        if "painted blue" in prompt(body):
            return Reply.slow(0.05, Reply.text('{"statements": ["unterminated'))
        return Reply.slow(0.05, honest(body))

    fake.responder = responder
    judge = make_judge(concurrency=4, cache_dir=False)
    results = {}

    def work(i):
        answer = ANSWER if i % 2 else "The Eiffel Tower is 330 metres tall."
        results[i] = judge.judge(QUESTION, answer, CHUNKS)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[i].error and "InstructorRetryException" in results[i].error for i in (1, 3, 5))
    assert all(results[i].score == 1.0 for i in (0, 2, 4))
    broken = [r for r in fake.requests if "painted blue" in r.prompt]
    assert len(broken) == 3 * (REASKS + 1) and len(fake.requests) == 3 * (REASKS + 1) + 3 * 2


def test_judge_works_from_a_thread_with_a_running_event_loop(fake, make_judge):
    fake.responder = honest
    judge = make_judge(cache_dir=False)

    async def inside_a_loop():
        return judge.judge(QUESTION, "The Eiffel Tower is 330 metres tall.", CHUNKS)

    assert asyncio.run(inside_a_loop()).score == 1.0


def test_identity_holds_every_scoring_option_and_nothing_else(make_judge, fake):
    identity = make_judge().identity
    assert identity == {
        "name": "ragas",
        "version": f"ragas-{ragas.__version__}-faithfulness+final-json",
        "reasks": REASKS,
        "model": "judge-r",
        "base_url": fake.base_url,
        "temperature": 0.0,
        "max_tokens": 1024,
    }
    for option, value in {"model": "m2", "temperature": 0.5, "max_tokens": 99, "base_url": "http://x/v1"}.items():
        assert make_judge(**{option: value}).identity[option] == value
    for option, value in {"timeout_s": 3, "concurrency": 8, "deadline_s": 9, "cache_dir": False}.items():
        assert make_judge(**{option: value}).identity == identity


def test_requests_are_those_of_plain_ragas(fake, make_judge):
    """The judge's shortcuts (schemas built once, the body posted as it is) change nothing that is sent."""
    import openai
    from ragas.llms import llm_factory
    from ragas.metrics.collections import Faithfulness

    fake.responder = honest
    answer = "The Eiffel Tower is 330 metres tall. It is in Rome."
    make_judge(cache_dir=False, temperature=0.1, max_tokens=700).judge(QUESTION, answer, CHUNKS)
    ours = [r.body for r in fake.requests]

    async def plain():
        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="x", max_retries=0)
        llm = llm_factory("judge-r", client=client, temperature=0.1, max_tokens=700)
        await Faithfulness(llm=llm).ascore(
            user_input=QUESTION, response=answer, retrieved_contexts=[c.text for c in CHUNKS]
        )
        await client.close()

    asyncio.run(plain())
    theirs = [r.body for r in fake.requests[len(ours) :]]
    assert len(ours) == len(theirs) == 2
    keys = ("model", "messages", "response_format", "temperature", "max_tokens", "top_p")
    for mine, reference in zip(ours, theirs, strict=True):
        assert {k: mine.get(k) for k in keys} == {k: reference.get(k) for k in keys}
    assert set(ours[0]) <= set(theirs[0])
