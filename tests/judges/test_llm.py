"""The rubric judge and the shared LLM client against a local OpenAI-compatible server (fake_openai.py)."""

from __future__ import annotations

import json
import math
import re
import threading
import time
import warnings
from dataclasses import replace

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("openai")

from fake_openai import HUNG_S, TIMEOUT_S, FakeOpenAI, Reply, fast_judge_options  # noqa: E402

from gate.cli import main  # noqa: E402
from gate.config import GatePolicy  # noqa: E402
from gate.errors import EvaluationError  # noqa: E402
from gate.judges.base import NO_USAGE, judge_usage  # noqa: E402
from gate.judges.lexical import LexicalJudge  # noqa: E402
from gate.judges.llm.cache import DiskCache  # noqa: E402
from gate.judges.llm.parse import extract_json  # noqa: E402
from gate.judges.llm.retry import JudgeConfigError, retry_after_s  # noqa: E402
from gate.judges.llm.rubric import PROMPT_VERSION, VERSION, RubricJudge, parse_grades  # noqa: E402
from gate.manifest import JudgeUsage  # noqa: E402
from gate.models import Chunk, GoldenCase, Prediction  # noqa: E402
from gate.scoring import score_all  # noqa: E402

CHUNKS = (Chunk("doc-7", "The Eiffel Tower is 330 metres tall."), Chunk("doc-2", "It opened in 1889."))
QUESTION = "How tall is the Eiffel Tower?"
ANSWER = "The Eiffel Tower is 330 metres tall."


def rubric(f=3, r=3, c=3, p=3, form=3, reason="ok", **changes) -> dict:
    """The rubric's JSON answer: the five 1–3 grades and the faithfulness reason."""
    out = {"faithfulness": f, "answer_relevance": r, "correctness": c, "completeness": p, "form": form,
           "reasons": {"faithfulness": reason}}  # fmt: skip
    return {k: v for k, v in (out | changes).items() if v is not DROP}


DROP = object()
"""A ``rubric(key=DROP)`` value: leave the key out."""


def grades(f: int, r: int, reason: str = "ok") -> Reply:
    return Reply.json(rubric(f, r, reason=reason))


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
    assert judgment.answer_relevance == relevance and (judgment.completeness, judgment.form) == (1.0, 1.0)
    assert math.isnan(judgment.correctness)  # no reference answers and no criteria: nothing to be correct against
    assert judgment.extra == {
        "grades": {"faithfulness": f, "answer_relevance": r, "correctness": None, "completeness": 3, "form": 3},
        "reasons": {"faithfulness": "supported by doc-7"},
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
    assert request.headers["authorization"] == "Bearer not-needed"


def test_fenced_json_after_prose_is_accepted(fake, make_judge):
    fake.script(Reply.text(f"Sure! Here is my grade:\n```json\n{json.dumps(rubric(2, 3))}\n```"))
    judgment = make_judge().judge(QUESTION, ANSWER, CHUNKS)
    assert (judgment.error, judgment.score) == (None, 0.5)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"faithfulness": 3, "answer_relevance": ', "no JSON object"),
        (json.dumps(rubric(f=4)), "field 'faithfulness': 4 is not one of [1, 2, 3"),
        (json.dumps(rubric(faithfulness=DROP)), "'faithfulness' is a required property"),
        (json.dumps(rubric(c=0)), "field 'correctness': 0 is not one of [1, 2, 3"),
        (json.dumps(rubric(reasons=["x"])), "field 'reasons': ['x'] is not of type 'object'"),
        (json.dumps(rubric(f=True)), "field 'faithfulness': True is not one of"),
        (json.dumps(rubric(f=2.5)), "field 'faithfulness': 2.5 is not one of"),
    ],
)
def test_broken_json_is_a_failure_not_a_score_and_is_not_cached(fake, make_judge, content, why):
    fake.script(Reply.text(content), grades(3, 3))
    judge = make_judge()
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error is not None and why in judgment.error and "unusable answer" in judgment.error
    assert judgment.error.startswith("llm:judge-m@t0: ")
    assert math.isnan(judgment.faithfulness) and judgment.score is None
    assert judge.usage().failures == 1
    assert judge.judge(QUESTION, ANSWER, CHUNKS).score == 1.0  # asked again, not served from the cache
    assert len(fake.requests) == 2


def test_an_answer_without_some_dimensions_fails_those_metrics_only(fake, make_judge):
    """The first rubric's shape ({faithfulness, relevance}) still grades faithfulness and relevance; the other
    dimensions, absent from the answer, are judge failures of their own metrics (never scores, never N/A)."""
    from gate.config import GatePolicy
    from gate.metrics import resolve
    from gate.models import GoldenCase, Prediction
    from gate.scoring import score_one

    fake.script(Reply.json({"faithfulness": 2, "relevance": 3, "reason": "old shape"}))
    judge = make_judge()
    assert parse_grades(json.dumps({"faithfulness": 2, "relevance": 3})) == (
        {"faithfulness": 2, "answer_relevance": 3},
        {},
    )
    names = ("faithfulness", "answer_relevance", "completeness", "form")
    case = GoldenCase("q1", QUESTION, ("d1",), ("Paris",), required_points=("the capital",))
    prediction = Prediction("q1", answer=ANSWER, retrieved=CHUNKS)
    scores = {s.metric: s for s in score_one(case, prediction, [resolve(n) for n in names], GatePolicy(), judge)}
    assert (scores["faithfulness"].value, scores["answer_relevance"].value) == (0.5, 1.0)
    assert scores["faithfulness"].error is None and scores["answer_relevance"].error is None
    for name in ("completeness", "form"):
        assert math.isnan(scores[name].value)
        assert scores[name].error == f"judge failed: its answer has no grade for {name}"


def test_429_retry_after_is_honoured_then_success(fake, make_judge):
    fake.script(Reply.error(429, retry_after=0.3), grades(3, 2))
    judge = make_judge()
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.score == 1.0
    first, second = fake.requests
    assert 0.3 <= second.at - first.at < 2.0  # waited the 0.3 s asked (backoff alone is 0.01 s)
    assert (judge.usage().requests, judge.usage().retries) == (2, 1)


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
    assert len(fake.requests) == 3 and judge.usage().retries == 2


def test_slow_answer_beyond_timeout_is_a_failure(fake, make_judge):
    fake.script(Reply.slow(HUNG_S, grades(3, 3)), Reply.slow(HUNG_S, grades(3, 3)))
    judge = make_judge(timeout_s=TIMEOUT_S, max_retries=1)
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error == "llm:judge-m@t0: request timed out"
    assert fake.wait_for_requests(2) == 2  # the timeout was retried once


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
    assert len(fake.requests) == 1 and again.usage().cache_hits == 1
    assert again.judge(QUESTION, ANSWER, CHUNKS, repeat=1).extra["reasons"]["faithfulness"] == "repeat 1"
    assert make_judge(model="judge-n").judge(QUESTION, ANSWER, CHUNKS).extra["reasons"]["faithfulness"] == "other model"
    assert len(fake.requests) == 3
    files = sorted((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 3 and all(len(f.stem) == 64 for f in files)


def test_cache_key_holds_the_endpoint_two_servers_never_share_answers(fake, tmp_path):
    """Two servers serving a model of the same name, one cache directory: each answer comes from its own server."""
    cache = tmp_path / "shared-cache"
    fake.script(grades(3, 3, "server A"))
    with FakeOpenAI() as other:
        other.script(grades(1, 1, "server B"))
        on_a = RubricJudge(**fast_judge_options(fake, cache, "same-model"))
        on_b = RubricJudge(**fast_judge_options(other, cache, "same-model"))
        assert on_a.judge(QUESTION, ANSWER, CHUNKS).extra["reasons"]["faithfulness"] == "server A"
        got = on_b.judge(QUESTION, ANSWER, CHUNKS)
        assert got.extra["reasons"]["faithfulness"] == "server B" and got.score == 0.0
        assert len(other.requests) == 1 and on_b.usage().cache_hits == 0
    # the same endpoint written with a trailing slash is the same server: served from the cache
    again = RubricJudge(**{**fast_judge_options(fake, cache, "same-model"), "base_url": fake.base_url + "/"})
    assert again.judge(QUESTION, ANSWER, CHUNKS).extra["reasons"]["faithfulness"] == "server A"
    assert len(fake.requests) == 1 and again.usage().cache_hits == 1
    assert len(list(cache.rglob("*.json"))) == 2


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


def test_id_version_and_identity_pin_the_settings(make_judge, fake):
    judge = make_judge(temperature=0.7, max_tokens=64)
    assert judge.id == "llm:judge-m@t0.7" and judge.version == VERSION
    assert make_judge().id == "llm:judge-m@t0"
    assert judge.identity == {
        "name": "llm",
        "version": VERSION,
        "prompt_version": "rubric-v2",
        "model": "judge-m",
        "base_url": fake.base_url.rstrip("/"),
        "temperature": 0.7,
        "max_tokens": 64,
    }


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
    assert fake.requests[0].headers["authorization"] == "Bearer sk-1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Here you go: {"a": {"b": "}"}} trailing words', {"a": {"b": "}"}}),
        ('```\n{"a": 2}\n```', {"a": 2}),
        ('[1, 2] then {"a": 3}', {"a": 3}),
        ('{broken {"a": 4}', {"a": 4}),
        ('{"a": 1} and then {"b": {"c": 2}} last', {"b": {"c": 2}}),
    ],
)
def test_extract_json_is_lenient(text, expected):
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["no json here", "[1, 2]", '{"a": 1'])
def test_extract_json_without_object_raises(text):
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json(text)


def test_parse_grades_accepts_numeric_strings_and_collapses_reasons():
    text = json.dumps(rubric("2", 3.0, c=None, reason=" a\n b ") | {"extra": [1]})
    assert parse_grades(text) == (
        {"faithfulness": 2, "answer_relevance": 3, "correctness": None, "completeness": 3, "form": 3},
        {"faithfulness": "a b"},
    )
    assert parse_grades(json.dumps(rubric(1, 2, reasons=DROP)))[1] == {}


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


# ---------------------------------------------------------------------- the final answer

DRAFT = json.dumps(rubric(1, 1, reason="draft"))
FINAL = json.dumps(rubric(3, 2, reason="final"))


@pytest.mark.parametrize(
    "content",
    [
        f"<think>First draft: {DRAFT} ... re-reading the context, I revise.</think>\n{FINAL}",
        f"<thinking>\n{DRAFT}\n</thinking>{FINAL}",
        f"<THINK>{DRAFT}</THINK> {FINAL}",
        f"The required format is {DRAFT}. My grading: {FINAL}",
        f"Draft:\n```json\n{DRAFT}\n```\nRevised:\n```json\n{FINAL}\n```\nThat is all.",
        f"{DRAFT} hmm, no.\n</think>\n\n{FINAL}",  # the chat template opened <think> in the prompt
        f"<|channel|>analysis<|message|>{DRAFT}<|end|><|start|>assistant<|channel|>final<|message|>{FINAL}",
    ],
)
def test_grade_comes_from_the_final_json_answer(fake, make_judge, content):
    fake.script(Reply.text(content))
    judgment = make_judge().judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error is None
    assert judgment.extra["grades"]["answer_relevance"] == 2 and judgment.extra["reasons"] == {"faithfulness": "final"}
    assert judgment.score == 1.0


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (f"<think>{FINAL} still thinking about it", "reasoning block <think> is never closed"),
        (f"<think>{DRAFT}</think> I cannot grade this.", "no JSON object in the model's answer"),
        (f"{FINAL}\nCorrection: {json.dumps(rubric(f=5))}", "field 'faithfulness': 5 is not one of"),
        (f"{FINAL}\nCorrection: {json.dumps(rubric(faithfulness=DROP))}", "'faithfulness' is a required property"),
    ],
)
def test_an_unusable_final_answer_is_a_failure_never_an_earlier_object(fake, make_judge, content, why):
    fake.script(Reply.text(content))
    judgment = make_judge().judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error is not None and why in judgment.error, judgment.error
    assert judgment.score is None and math.isnan(judgment.faithfulness)


@given(
    draft=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    final=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    prose=st.text(alphabet=st.characters(blacklist_characters="{}<>`", blacklist_categories=("Cs",)), max_size=40),
    shape=st.sampled_from(["think", "example", "fence"]),
)
def test_property_any_draft_before_the_final_json_is_ignored(draft, final, prose, shape):
    first = json.dumps(rubric(draft[0], draft[1], reason="d"))
    last = json.dumps(rubric(final[0], final[1], reason="f"))
    text = {
        "think": f"<think>{prose}{first}{prose}</think>{prose}{last}",
        "example": f"{prose}{first}{prose}{last}{prose}",
        "fence": f"{prose}```json\n{first}\n```{prose}```json\n{last}\n```{prose}",
    }[shape]
    parsed = parse_grades(text)
    assert (parsed[0]["faithfulness"], parsed[0]["answer_relevance"], parsed[1]) == (*final, {"faithfulness": "f"})


# -------------------------------------------------------- configuration failures stop the run


@pytest.mark.parametrize(
    ("reply", "status_and_reason", "hint"),
    [
        (Reply.error(401, message="Incorrect API key provided", code="invalid_api_key"),
         "HTTP 401: Incorrect API key provided", "check the API key in $OPENAI_API_KEY"),
        (Reply.error(403, message="Project does not have access"), "HTTP 403: Project does not have access",
         "the key lacks access to this model"),
        (Reply.error(404, message="The model `judge-m` does not exist."),
         "HTTP 404: The model `judge-m` does not exist.", "check base_url and model 'judge-m'"),
        (Reply.error(400, message="Invalid model name passed in model=judge-m"),
         "HTTP 400: Invalid model name passed in model=judge-m", "check base_url and model 'judge-m'"),
        (Reply.error(400, message="no such thing", code="model_not_found"), "HTTP 400: no such thing",
         "check base_url and model 'judge-m'"),
    ],
)  # fmt: skip
def test_authentication_or_configuration_failure_stops_the_judge(fake, make_judge, reply, status_and_reason, hint):
    fake.responder = lambda body: reply
    judge = make_judge()
    with pytest.raises(JudgeConfigError) as info:
        judge.judge(QUESTION, ANSWER, CHUNKS)
    assert str(info.value) == f"judge endpoint {fake.base_url} rejected the request: {status_and_reason} ({hint})"
    assert isinstance(info.value, EvaluationError) and info.value.exit_code == 3
    with pytest.raises(JudgeConfigError):  # every later call too, without a request
        judge.judge("Another question?", ANSWER, CHUNKS)
    assert len(fake.requests) == 1


def test_a_bad_request_for_one_case_is_a_failure_not_a_stop(fake, make_judge):
    fake.script(Reply.error(400, message="This model's maximum context length is 8192 tokens"), grades(3, 3))
    judge = make_judge()
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error == "llm:judge-m@t0: HTTP 400: This model's maximum context length is 8192 tokens"
    assert len(fake.requests) == 1  # not retried
    assert judge.judge("Another question?", ANSWER, CHUNKS).score == 1.0


def test_a_cut_json_body_is_a_failure_for_that_case_only(fake, make_judge):
    fake.script(Reply.cut(), Reply.cut(), Reply.cut(), grades(2, 3))
    judge = make_judge(max_retries=2)
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error.startswith("llm:judge-m@t0: unreadable response body (not the JSON announced")
    assert len(fake.requests) == 3  # retried: a dropped connection may not happen again
    assert judge.judge("Another question?", ANSWER, CHUNKS).score == 0.5
    usage = judge.usage()
    assert (usage.requests, usage.retries, usage.failures) == (4, 2, 1)


# --------------------------------------------------------------- circuit breaker and deadline


def test_circuit_opens_after_k_consecutive_failures_and_stops_calling(fake, make_judge):
    fake.responder = lambda body: Reply.slow(HUNG_S, grades(3, 3))  # accepts the connection, never answers in time
    judge = make_judge(timeout_s=TIMEOUT_S, max_retries=0, max_consecutive_failures=3, concurrency=1)
    errors = [judge.judge(f"Question {i}?", ANSWER, CHUNKS).error for i in range(6)]
    opened = "circuit open after 3 consecutive failures (last: request timed out)"
    assert errors == ["llm:judge-m@t0: request timed out"] * 3 + [f"llm:judge-m@t0: {opened}"] * 3
    assert fake.wait_for_requests(3) == 3
    usage = judge.usage()
    assert (usage.requests, usage.failures, usage.stopped) == (3, 6, opened)


def test_failed_retries_count_towards_the_breaker(fake, make_judge):
    judge = make_judge(max_retries=9, max_consecutive_failures=3)  # the default responder answers 500
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert (
        judgment.error == "llm:judge-m@t0: circuit open after 3 consecutive failures (last: HTTP 500: fake error 500)"
    )
    assert len(fake.requests) == 3  # not 10


def test_a_success_resets_the_count_and_rate_limits_do_not_count(fake, make_judge):
    fake.script(
        Reply.error(500), Reply.error(500), grades(3, 3),
        Reply.error(500), Reply.error(429, retry_after=0), Reply.error(429, retry_after=0), Reply.error(500),
        grades(3, 3),
    )  # fmt: skip
    judge = make_judge(max_retries=0, max_consecutive_failures=3)
    scores = [judge.judge(f"Question {i}?", ANSWER, CHUNKS).score for i in range(8)]
    assert scores == [None, None, 1.0, None, None, None, None, 1.0]
    assert len(fake.requests) == 8 and judge.usage().stopped is None


def test_unparseable_answers_count_towards_the_breaker(fake, make_judge):
    fake.responder = lambda body: Reply.text("I think it is fine.")
    judge = make_judge(max_consecutive_failures=2)
    errors = [judge.judge(f"Question {i}?", ANSWER, CHUNKS).error for i in range(3)]
    assert errors[2].startswith("llm:judge-m@t0: circuit open after 2 consecutive failures (last: unusable answer")
    assert len(fake.requests) == 2


def test_deadline_cuts_the_request_in_flight_and_fails_the_rest_at_once(fake, make_judge):
    fake.responder = lambda body: Reply.slow(120, grades(3, 3))
    judge = make_judge(timeout_s=300, max_retries=3, deadline_s=0.5)
    start = time.monotonic()
    errors = [judge.judge(f"Question {i}?", ANSWER, CHUNKS).error for i in range(3)]
    elapsed = time.monotonic() - start
    assert errors == ["llm:judge-m@t0: judge deadline of 0.5 s exceeded (option deadline_s)"] * 3
    assert fake.wait_for_requests(1, timeout_s=60) == 1
    assert elapsed < 60  # the answer would take 120 s: the request in flight was cut at the deadline (generous bound)


def test_a_server_that_trickles_its_answer_is_cut_at_timeout_s(fake, make_judge):
    fake.script(replace(grades(3, 3), trickle_s=0.05))  # each read is quick; the whole body takes ~15 s
    judge = make_judge(timeout_s=0.5, max_retries=0)
    start = time.monotonic()
    judgment = judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judgment.error == "llm:judge-m@t0: request timed out"
    assert time.monotonic() - start < 10  # cut at 0.5 s, not after the ~15 s body (generous for a loaded machine)


# ------------------------------------------------------------------- accounting


def test_usage_counts_requests_retries_failures_tokens_and_cost(fake, make_judge):
    fake.script(
        grades(3, 3),  # q0: 10 + 5 tokens
        Reply.error(500), grades(2, 2),  # q1: a retry, then 10 + 5
        Reply.text("no json here"),  # q2: answered (10 + 5) but unusable: a failure
        replace(grades(3, 3), usage={"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}),  # q3
        replace(grades(1, 1), usage=None),  # q4: the server reports no usage
    )  # fmt: skip
    judge = make_judge(max_retries=1, cost_per_1k_input=0.5, cost_per_1k_output=2.0)
    for i in range(5):
        judge.judge(f"Question {i}?", ANSWER, CHUNKS)
    judge.judge("Question 0?", ANSWER, CHUNKS)  # served from the cache
    assert judge.usage() == JudgeUsage(
        requests=6,
        retries=1,
        failures=1,
        cache_hits=1,
        input_tokens=37,
        output_tokens=16,
        responses_without_usage=1,
        cost_usd=pytest.approx(37 / 1000 * 0.5 + 16 / 1000 * 2.0),
        stopped=None,
    )
    assert judge_usage(judge) == judge.usage()


def test_cost_is_none_without_prices_and_lexical_makes_no_request(fake, make_judge):
    fake.script(grades(3, 3))
    judge = make_judge()
    judge.judge(QUESTION, ANSWER, CHUNKS)
    assert judge.usage().cost_usd is None and judge.usage().input_tokens == 10
    assert judge_usage(LexicalJudge()) is NO_USAGE
    assert NO_USAGE.requests == 0 and NO_USAGE.cost_usd == 0.0


# ------------------------------------------------------------------------- identity

SCORING = {"model": "judge-n", "base_url": "http://127.0.0.1:9/v1", "temperature": 0.3, "max_tokens": 300}
NOT_SCORING = {
    "timeout_s": 9, "max_retries": 0, "backoff_s": 2, "max_wait_s": 3, "concurrency": 9, "deadline_s": 5,
    "max_consecutive_failures": 2, "cost_per_1k_input": 1.0, "cost_per_1k_output": 1.0, "api_key_env": "OTHER",
    "cache_dir": False, "generator_model": "gen-x",
}  # fmt: skip


def test_identity_holds_every_scoring_option_and_nothing_else(make_judge, fake):
    identity = make_judge().identity
    assert identity == {
        "name": "llm",
        "version": VERSION,
        "prompt_version": PROMPT_VERSION,
        "model": "judge-m",
        "base_url": fake.base_url,
        "temperature": 0.0,
        "max_tokens": 512,
    }
    assert json.loads(json.dumps(identity)) == identity
    for option, value in SCORING.items():
        changed = make_judge(**{option: value}).identity
        assert changed != identity and changed[option] == value, option
    for option, value in NOT_SCORING.items():
        assert make_judge(**{option: value}).identity == identity, option
    assert make_judge(base_url=fake.base_url + "/").identity == identity  # the same endpoint


def test_lexical_identity_has_its_thresholds():
    model = LexicalJudge().model.version
    assert LexicalJudge().identity == {
        "name": "lexical",
        "version": "7",
        "cover": 0.75,
        "support": 0.75,
        "model": model,
    }
    assert LexicalJudge(support=0.8).identity["support"] == 0.8


# ------------------------------------------------- the scoring loop and the CLI (real runs, fake endpoint)


def write_side(tmp_path, fake, n, **judge_options):
    """A golden set of n cases, precomputed predictions and a config whose llm judge points at ``fake``."""
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"id": f"c{i}", "question": f"What is item {i}?"}) + "\n" for i in range(n)))
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({
        "id": f"c{i}", "answer": f"Item {i} is a widget.",
        "retrieved": [{"id": f"d{i}", "text": f"Item {i} is a widget."}], "latency_ms": 5.0}) + "\n"
        for i in range(n)))  # fmt: skip
    concurrency = judge_options.pop("concurrency", 4)  # judge_concurrency: the requests in flight
    options = {"name": "llm", "model": "judge-m", "base_url": fake.base_url, "cache_dir": False, **judge_options}
    config = tmp_path / "rag-gate.yml"
    config.write_text(
        f"golden: golden.jsonl\npipeline: {{predictions: preds.jsonl}}\nmetrics: [hit_rate@5, faithfulness]\n"
        f"judge_concurrency: {concurrency}\njudge: {json.dumps(options)}\n"
    )
    return config


def together(fake, k: int, wait_s: float = 20.0):
    """A responder whose every answer waits until k requests have arrived (or ``wait_s``): in flight ≤ k shows."""

    def reply(body: dict) -> Reply:
        deadline = time.monotonic() + wait_s
        while len(fake.requests) < k and time.monotonic() < deadline:
            time.sleep(0.01)
        return Reply.slow(1.0, grades(3, 3))  # the server counts a request in flight while it waits here

    return reply


@pytest.mark.parametrize("c", [12, 32])
def test_judge_concurrency_alone_is_the_requests_in_flight(tmp_path, fake, c):
    # above the judge's own default (4) and the scoring threads' default (4): neither caps it
    config = write_side(tmp_path, fake, 2 * c, concurrency=c)
    assert "concurrency" not in json.loads(config.read_text().split("judge: ", 1)[1])  # the judge's option unset
    fake.responder = together(fake, c)
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert fake.max_in_flight == c and len(fake.requests) == 2 * c


class SlowCache(DiskCache):
    """An answer cache whose writes wait until ``fake`` has received ``k`` requests (``wait_s`` at most)."""

    def __init__(self, directory, fake, k: int, wait_s: float = 10.0):
        super().__init__(directory)
        self.fake, self.k, self.wait_s = fake, k, wait_s
        self.late: list[str] = []  # keys written after waiting in vain

    def put(self, key, value):
        deadline = time.monotonic() + self.wait_s
        while len(self.fake.requests) < self.k and time.monotonic() < deadline:
            time.sleep(0.01)
        if len(self.fake.requests) < self.k:
            self.late.append(key)
        super().put(key, value)


def test_requests_keep_their_slots_while_answers_are_cached(tmp_path, fake, make_judge):
    # judge_concurrency 2: the third request goes out while the first two answers are still being written (a thread
    # per slot would be caching, and no request could go out until a write ends)
    fake.responder = lambda body: Reply.slow(0.2, grades(3, 1))
    judge = make_judge(concurrency=2)  # as rag-gate builds it (GatePolicy.judge_spec)
    judge.client.cache = cache = SlowCache(tmp_path / "cache", fake, 3)
    golden = [GoldenCase(f"c{i}", f"What is item {i}?") for i in range(4)]
    table = {(c.id, 0): Prediction(c.id, 0, f"Item {i} is a widget.", CHUNKS) for i, c in enumerate(golden)}
    policy = GatePolicy(metrics=("faithfulness", "answer_relevance"), judge={"name": "llm"}, judge_concurrency=2)
    scores = score_all(golden, table, 1, policy, judge)
    assert cache.late == []
    assert fake.max_in_flight == 2 and len(fake.requests) == 4
    assert [(s.metric, s.value) for s in scores] == [("faithfulness", 1.0), ("answer_relevance", 0.0)] * 4


@pytest.mark.parametrize("alone", [True, False], ids=["alone", "beside-judge_concurrency"])
def test_the_judge_s_concurrency_option_is_a_deprecated_alias(tmp_path, fake, alone):
    config = write_side(tmp_path, fake, 12, concurrency=3)
    text = config.read_text().replace('"cache_dir": false', '"cache_dir": false, "concurrency": 6')
    config.write_text(text.replace("judge_concurrency: 3\n", "") if alone else text)
    fake.responder = together(fake, 6 if alone else 3)
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    where = f"rag-gate: {config}:{4 if alone else 5}: judge.concurrency is deprecated"
    if alone:
        assert f"{where}: read as judge_concurrency: 6 (the requests in flight); set that instead" in result.stderr
    else:
        assert f"{where} and ignored: judge_concurrency: 3 sets the requests in flight" in result.stderr
    assert fake.max_in_flight == (6 if alone else 3)


def test_run_stops_with_exit_3_on_401_and_loses_no_paid_answer(tmp_path, fake):
    config = write_side(tmp_path, fake, 6, concurrency=1, cache_dir=str(tmp_path / "cache"))
    fake.script(grades(3, 3), grades(3, 3), grades(3, 3))
    fake.responder = lambda body: Reply.error(401, message="Incorrect API key provided")
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(tmp_path / "run")])
    assert result.exit_code == 3
    assert result.stderr.strip().splitlines()[-1] == (
        f"rag-gate: error: judge endpoint {fake.base_url} rejected the request: HTTP 401: Incorrect API key "
        "provided (check the API key in $OPENAI_API_KEY)"
    )
    assert len(fake.requests) == 4  # nothing is asked after the 401
    assert len((tmp_path / "run" / "predictions.jsonl").read_text().splitlines()) == 6
    fake.responder = lambda body: grades(3, 3)  # the key is fixed: the 3 answers already paid for come from the cache
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert len(fake.requests) == 4 + 3
    rows = [json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    assert sorted(r["value"] for r in rows if r["metric"] == "faithfulness") == [1.0] * 6


def test_scoring_stops_calling_after_a_401_whatever_the_concurrency(tmp_path, fake):
    config = write_side(tmp_path, fake, 40, concurrency=4)
    fake.responder = lambda body: Reply.slow(0.05, Reply.error(401, message="bad key"))
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(tmp_path / "run")])
    assert result.exit_code == 3 and "HTTP 401: bad key" in result.stderr
    assert len(fake.requests) <= 4  # only the calls already in flight


def test_a_hung_judge_gives_up_quickly_and_every_row_is_recorded(tmp_path, fake):
    config = write_side(tmp_path, fake, 12, concurrency=2, timeout_s=0.3, max_retries=1, backoff_s=0.01,
                        max_consecutive_failures=3)  # fmt: skip
    fake.responder = lambda body: Reply.slow(300, grades(3, 3))
    start = time.monotonic()
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(tmp_path / "run")])
    elapsed = time.monotonic() - start
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    faith = [r for r in rows if r["metric"] == "faithfulness"]
    assert len(faith) == 12 and all(r["error"] and r["value"] is None for r in faith)
    opened = [r for r in faith if "circuit open after 3 consecutive failures (last: request timed out)" in r["error"]]
    assert len(opened) >= 10 and len(fake.requests) <= 4
    # 300 s per answer: the timeouts and the breaker end it (the breaker's effect is the request count above)
    assert elapsed < 120


def test_an_llm_judge_without_the_llm_extra_names_the_extra(monkeypatch):
    import sys

    from gate.errors import InputError
    from gate.judges.llm.config import EndpointConfig
    from gate.judges.llm.endpoint import Endpoint

    monkeypatch.setitem(sys.modules, "openai", None)  # as in an install without the extra: import fails
    with pytest.raises(InputError, match=r"^an LLM judge needs the llm extra: pip install 'rag-gate\[llm\]' \("):
        Endpoint(EndpointConfig(model="m", base_url="http://127.0.0.1:9/v1"), environ={"OPENAI_API_KEY": "k"})
