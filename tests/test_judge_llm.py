"""The rubric judge and the shared LLM client against a local OpenAI-compatible server (fake_openai.py)."""

from __future__ import annotations

import json
import math
import re
import threading
import warnings

import pytest

pytest.importorskip("openai")

from fake_openai import FakeOpenAI, Reply, fast_judge_options  # noqa: E402

from gate.judges.llm import PROMPT_VERSION, RubricJudge, parse_grades  # noqa: E402
from gate.judges.llmclient import DiskCache, extract_json, retry_after_s  # noqa: E402
from gate.models import Chunk  # noqa: E402

CHUNKS = (Chunk("doc-7", "The Eiffel Tower is 330 metres tall."), Chunk("doc-2", "It opened in 1889."))
QUESTION = "How tall is the Eiffel Tower?"
ANSWER = "The Eiffel Tower is 330 metres tall."


def grades(f: int, r: int, reason: str = "ok") -> Reply:
    return Reply.json({"faithfulness": f, "relevance": r, "reason": reason})


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def make_judge(fake, tmp_path):
    def make(**options):
        return RubricJudge(**{**fast_judge_options(fake, tmp_path / "cache", "judge-m"), **options})

    return make


@pytest.mark.parametrize(("f", "r", "score", "relevance"), [(3, 3, 1.0, 1.0), (2, 1, 0.5, 0.0), (1, 2, 0.0, 0.5)])
def test_valid_json_maps_grades_to_unit_interval(fake, make_judge, f, r, score, relevance):
    fake.script(grades(f, r, "supported by\n doc-7"))
    judgment = make_judge().judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error is None
    assert judgment.score == score and judgment.faithfulness == score
    assert judgment.extra == {
        "relevance": relevance,
        "reason": "supported by doc-7",
        "grades": {"faithfulness": f, "relevance": r},
    }


def test_request_pins_model_temperature_max_tokens_and_carries_inputs(fake, make_judge):
    fake.script(grades(3, 3))
    make_judge(temperature=0.3, max_tokens=77).judge(QUESTION, ANSWER, CHUNKS)
    (request,) = fake.requests
    assert request.path == "/v1/chat/completions"
    body = request.body
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("judge-m", 0.3, 77)
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    user = body["messages"][1]["content"]
    assert QUESTION in user and ANSWER in user
    assert "[1] (id: doc-7)\nThe Eiffel Tower is 330 metres tall." in user
    assert "[2] (id: doc-2)" in user and "I don't have that information" in user
    assert request.headers["Authorization"] == "Bearer not-needed"


def test_fenced_json_after_prose_is_accepted(fake, make_judge):
    fake.script(Reply.text('Sure! Here is my grade:\n```json\n{"faithfulness": 2, "relevance": 3, "reason": "x"}\n```'))
    judgment = make_judge().judge(QUESTION, ANSWER, CHUNKS)
    assert (judgment.error, judgment.score) == (None, 0.5)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"faithfulness": 3, "relevance": ', "no JSON object"),
        ('{"faithfulness": 4, "relevance": 3, "reason": "x"}', "'faithfulness' must be 1, 2 or 3"),
        ('{"relevance": 3, "reason": "x"}', "'faithfulness' must be 1, 2 or 3"),
        ('{"faithfulness": 3, "relevance": 3, "reason": ["x"]}', "'reason' must be a string"),
    ],
)
def test_broken_json_is_a_failure_not_a_score_and_is_not_cached(fake, make_judge, content, why):
    fake.script(Reply.text(content), grades(3, 3))
    judge = make_judge()
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error is not None and why in judgment.error and "unusable answer" in judgment.error
    assert judgment.error.startswith("llm:judge-m@t0: ")
    assert math.isnan(judgment.faithfulness) and judgment.score is None
    assert judge.client.stats.failures == 1
    assert judge.judge(QUESTION, ANSWER, CHUNKS).score == 1.0  # asked again, not served from the cache
    assert len(fake.requests) == 2


def test_429_retry_after_is_honoured_then_success(fake, make_judge):
    fake.script(Reply.error(429, retry_after=0.3), grades(3, 2))
    judge = make_judge()
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.score == 1.0
    first, second = fake.requests
    assert 0.3 <= second.at - first.at < 2.0  # waited the 0.3 s asked (backoff alone is 0.01 s)
    assert (judge.client.stats.requests, judge.client.stats.retries) == (2, 1)


def test_retry_after_beyond_the_cap_is_bounded(fake, make_judge):
    fake.script(Reply.error(429, retry_after=60), grades(3, 3))
    judgment = make_judge(max_wait_s=0.2).judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.score == 1.0
    first, second = fake.requests
    assert 0.2 <= second.at - first.at < 2.0  # capped at 0.2 s, not the 60 s asked


def test_persistent_500_is_a_failure_after_the_retries(fake, make_judge):
    judge = make_judge(max_retries=2)
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)  # the default responder answers 500
    assert judgment.error == "llm:judge-m@t0: HTTP 500: fake error 500"
    assert math.isnan(judgment.faithfulness)
    assert len(fake.requests) == 3 and judge.client.stats.retries == 2


def test_slow_answer_beyond_timeout_is_a_failure(fake, make_judge):
    fake.script(Reply.slow(1.0, grades(3, 3)), Reply.slow(1.0, grades(3, 3)))
    judge = make_judge(timeout_s=0.2, max_retries=1)
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error == "llm:judge-m@t0: request timed out"
    assert len(fake.requests) == 2  # the timeout was retried once


def test_truncated_answer_is_a_failure_and_not_retried(fake, make_judge):
    fake.script(Reply.truncated('{"faithfulness": 3, "relev'))
    judgment = make_judge(max_tokens=8).judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error == "llm:judge-m@t0: truncated answer (finish_reason=length at max_tokens=8)"
    assert len(fake.requests) == 1


def test_cache_hit_makes_no_request_and_survives_a_new_judge(fake, make_judge, tmp_path):
    fake.script(grades(2, 3, "first"), grades(1, 1, "repeat 1"), grades(3, 3, "other model"))
    first = make_judge().judge(QUESTION, ANSWER, CHUNKS)
    again = make_judge()  # a new process would build a new judge on the same directory
    assert again.judge(QUESTION, ANSWER, CHUNKS) == first
    assert len(fake.requests) == 1 and again.client.stats.cache_hits == 1
    assert again.judge(QUESTION, ANSWER, CHUNKS, repeat=1).extra["reason"] == "repeat 1"
    assert make_judge(model="judge-n").judge(QUESTION, ANSWER, CHUNKS).extra["reason"] == "other model"
    assert len(fake.requests) == 3
    files = sorted((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 3 and all(len(f.stem) == 64 for f in files)


def test_cache_off_always_asks(fake, make_judge):
    fake.script(grades(3, 3), grades(3, 3))
    judge = make_judge(cache_dir=False)
    judge.judge(QUESTION, ANSWER, CHUNKS)
    judge.judge(QUESTION, ANSWER, CHUNKS)
    assert len(fake.requests) == 2


def test_concurrency_is_bounded_and_answers_match_their_inputs(fake, make_judge):
    fake.responder = lambda body: Reply.slow(0.3, grades(3 if "question 0" in body["messages"][1]["content"] else 1, 3))
    judge = make_judge(concurrency=2, cache_dir=False)
    results: dict[int, float] = {}

    def work(i: int) -> None:
        results[i] = judge.judge(f"question {i}?", f"answer {i}", CHUNKS).score

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake.max_in_flight == 2
    assert results == {0: 1.0, 1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0, 5: 0.0}


def test_empty_answer_is_not_graded(fake, make_judge):
    judgment = make_judge().judge(QUESTION, "  ", CHUNKS)
    assert judgment.error is None and math.isnan(judgment.faithfulness)
    assert fake.requests == []


def test_same_judge_and_generator_model_warns(make_judge):
    with pytest.warns(UserWarning, match="also the generator"):
        judge = make_judge(generator_model="Judge-M")
    assert len(judge.warnings) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert make_judge(generator_model="gen-x").warnings == []


def test_id_version_and_describe_pin_the_settings(make_judge, fake):
    judge = make_judge(temperature=0.7, max_tokens=64)
    assert judge.id == "llm:judge-m@t0.7" and judge.version == PROMPT_VERSION
    assert make_judge().id == "llm:judge-m@t0"
    text = judge.describe()
    for part in (
        "model=judge-m",
        "temperature=0.7",
        "max_tokens=64",
        f"base_url={fake.base_url}",
        "rubric-v1",
    ):
        assert part in text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"temperature": 2.5}, "'temperature' must be in [0, 2]"),
        ({"temperature": "hot"}, "'temperature' must be in [0, 2]"),
        ({"timeout_s": "10"}, "'timeout_s' must be > 0"),
        ({"max_tokens": 0}, "'max_tokens' must be an integer ≥ 1"),
        ({"concurrency": 1.5}, "'concurrency' must be an integer ≥ 1"),
        ({"max_retries": -1}, "'max_retries' must be an integer ≥ 0"),
        ({"timeout_s": 0}, "'timeout_s' must be > 0"),
        ({"model": " "}, "'model' must be a non-empty string"),
        ({"base_url": "127.0.0.1:8000"}, "'base_url' must be an http(s) URL"),
        ({"cache_dir": 3}, "'cache_dir' must be a path or false"),
    ],
)
def test_invalid_options_raise_value_error(make_judge, options, message):
    with pytest.raises(ValueError, match="^" + re.escape("option " + message)):
        make_judge(**options)


def test_missing_key_for_openai_endpoint_raises_and_key_is_sent(fake, tmp_path):
    with pytest.raises(ValueError, match="environment variable MY_KEY is not set"):
        RubricJudge(model="m", api_key_env="MY_KEY", environ={})
    fake.script(grades(3, 3))
    judge = RubricJudge(model="m", base_url=fake.base_url, api_key_env="MY_KEY", environ={"MY_KEY": "sk-1"},
                        cache_dir=False)  # fmt: skip
    judge.judge(QUESTION, ANSWER, CHUNKS)
    assert fake.requests[0].headers["Authorization"] == "Bearer sk-1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Here you go: {"a": {"b": "}"}} trailing words', {"a": {"b": "}"}}),
        ('```\n{"a": 2}\n```', {"a": 2}),
        ('[1, 2] then {"a": 3}', {"a": 3}),
        ('{broken {"a": 4}', {"a": 4}),
    ],
)
def test_extract_json_is_lenient(text, expected):
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["no json here", "[1, 2]", '{"a": 1'])
def test_extract_json_without_object_raises(text):
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json(text)


def test_parse_grades_accepts_numeric_strings_and_collapses_reason():
    assert parse_grades('{"faithfulness": "2", "relevance": 3.0, "reason": " a\\n b "}') == (2, 3, "a b")
    with pytest.raises(ValueError):
        parse_grades('{"faithfulness": true, "relevance": 3}')


def test_retry_after_parsing():
    class Resp:
        def __init__(self, headers):
            self.headers = headers

    class Exc(Exception):
        def __init__(self, headers):
            self.response = Resp(headers)

    assert retry_after_s(Exc({"retry-after": "2"})) == 2.0
    assert retry_after_s(Exc({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert retry_after_s(Exc({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) is None
    assert retry_after_s(ValueError()) is None


def test_disk_cache_key_is_canonical_and_corrupt_entries_miss(tmp_path):
    assert DiskCache.key(a=1, b=[1, "é"]) == DiskCache.key(b=[1, "é"], a=1)
    assert DiskCache.key(a=1) != DiskCache.key(a=2)
    cache = DiskCache(tmp_path)
    key = DiskCache.key(x=1)
    cache.put(key, "value")
    assert cache.get(key) == "value"
    path = tmp_path / key[:2] / f"{key}.json"
    assert json.loads(path.read_text()) == {"value": "value"}
    path.write_text("{not json")
    assert cache.get(key) is None


def test_unwritable_cache_does_not_fail_the_judgment(fake, make_judge, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    fake.script(grades(3, 3))
    assert make_judge(cache_dir=blocker).judge(QUESTION, ANSWER, CHUNKS).score == 1.0
