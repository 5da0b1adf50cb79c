"""The LLM judges' HTTP path (``Endpoint._post``: openai's client over its ``DefaultAioHttpClient``) against a local
OpenAI-compatible server.

openai's own ``chat.completions.create`` on its default client is the oracle: the server must receive the same
request from both, and every failure must surface as the exception openai raises for it.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

openai = pytest.importorskip("openai")

from fake_openai import FakeOpenAI, Reply  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402

from gate.judges.llm.completion import Completion, Usage, read_completion  # noqa: E402
from gate.judges.llm.config import EndpointConfig  # noqa: E402
from gate.judges.llm.endpoint import Endpoint  # noqa: E402
from gate.judges.llm.retry import JudgeCallError, describe_error, is_retryable  # noqa: E402

BODY = {"model": "judge-m", "messages": [{"role": "user", "content": "Grade «this» answer."}], "temperature": 0.0,
        "max_tokens": 64}  # fmt: skip
HOP_HEADERS = {"host", "accept-encoding", "connection"}
"""Headers each HTTP library sets its own way (transport details, not the request)."""


def endpoint(fake: FakeOpenAI, **options) -> Endpoint:
    config = EndpointConfig(**{"model": "judge-m", "base_url": fake.base_url, "timeout_s": 2.0, **options})
    return Endpoint(config, environ={"OPENAI_API_KEY": "sk-test"})


def via_openai(fake: FakeOpenAI, timeout_s: float = 2.0):
    """POST ``BODY`` with openai's own async client (no retries); return the response or the exception."""

    async def post():
        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0, timeout=timeout_s)
        try:
            return await client.chat.completions.create(**BODY)
        except Exception as exc:  # noqa: BLE001 - the exception is the result compared
            return exc
        finally:
            await client.close()

    return asyncio.run(post())


def via_transport(fake: FakeOpenAI, read: str = "_post", **options):
    """POST ``BODY`` through an endpoint's HTTP path (no retries, no breaker); return the response or exception.

    ``read``: ``"_post"`` (openai's ``ChatCompletion``) or ``"_post_completion"`` (the body read by read_completion).
    """
    ep = endpoint(fake, **options)

    async def post():
        try:
            return await getattr(ep, read)(BODY)
        except Exception as exc:  # noqa: BLE001 - the exception is the result compared
            return exc

    try:
        return ep.run(post())
    finally:
        ep.close()


def test_the_server_gets_the_request_openai_sends(fake):
    fake.script(Reply.json({"ok": 1}), Reply.json({"ok": 1}))
    ours, theirs = via_transport(fake), via_openai(fake)
    assert ours.choices[0].message.content == theirs.choices[0].message.content == '{"ok": 1}'
    mine, reference = fake.requests
    assert mine.path == reference.path == "/v1/chat/completions"
    assert mine.body == reference.body == BODY
    assert mine.headers["authorization"] == "Bearer sk-test"
    assert {k: v for k, v in mine.headers.items() if k not in HOP_HEADERS} == {
        k: v for k, v in reference.headers.items() if k not in HOP_HEADERS
    }


def test_the_answer_is_the_completion_openai_returns(fake):
    fake.script(Reply.json({"ok": 1}, usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}))
    fake.script(Reply.json({"ok": 1}, usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}))
    ours, theirs = via_transport(fake), via_openai(fake)
    assert isinstance(ours, ChatCompletion)
    assert ours.model_dump(exclude={"id", "created"}) == theirs.model_dump(exclude={"id", "created"})
    assert ours.usage.prompt_tokens == 7 and ours.usage.completion_tokens == 3


@pytest.mark.parametrize(
    "reply",
    [
        Reply.error(429, retry_after=3),
        Reply.error(401, message="Incorrect API key provided"),
        Reply.error(404, message="The model `judge-m` does not exist", code="model_not_found"),
        Reply.error(400, message="bad request"),
        Reply.error(500),
        Reply.error(503),
    ],
    ids=lambda r: str(r.status),
)
def test_an_http_error_is_the_exception_openai_raises(fake, reply):
    fake.script(reply, reply)
    ours, theirs = via_transport(fake), via_openai(fake)
    assert isinstance(theirs, openai.APIStatusError)
    assert type(ours) is type(theirs)
    assert (ours.status_code, str(ours), ours.body, getattr(ours, "code", None)) == (
        theirs.status_code, str(theirs), theirs.body, getattr(theirs, "code", None)
    )  # fmt: skip
    assert ours.response.headers.get("retry-after") == theirs.response.headers.get("retry-after")


def test_a_cut_body_is_the_json_error_openai_raises(fake):
    fake.script(Reply.cut(), Reply.cut())
    ours, theirs = via_transport(fake), via_openai(fake)
    assert isinstance(theirs, json.JSONDecodeError)
    assert type(ours) is type(theirs) and str(ours) == str(theirs)


def as_read(completion: ChatCompletion) -> Completion:
    """What a judge reads of openai's ``ChatCompletion`` (the oracle of read_completion), as a Completion."""
    choices = getattr(completion, "choices", None)
    choice = choices[0] if isinstance(choices, list) and choices else None
    content = getattr(getattr(choice, "message", None), "content", None)
    usage = getattr(completion, "usage", None)
    return Completion(
        has_choice=choice is not None,
        content=content if isinstance(content, str) else None,
        finish_reason=getattr(choice, "finish_reason", None),
        usage=None if usage is None else Usage(getattr(usage, "prompt_tokens", None),
                                               getattr(usage, "completion_tokens", None)),
    )  # fmt: skip


@pytest.mark.parametrize(
    "reply",
    [
        Reply.json({"ok": 1}),
        Reply.truncated('{"faithfulness": 3, "relev'),
        Reply.text("", usage=None),
        Reply.text("«é» <think>draft</think> {\"a\": 1}", usage={"prompt_tokens": 7}),
        Reply(body=b'{"choices": []}'),
        Reply(body=b'{"choices": [{"message": {"content": null}, "finish_reason": "stop"}], "usage": {}}'),
        Reply(body=b'{"choices": [{"message": {"content": [1]}}], "usage": {"prompt_tokens": "7"}}'),
        Reply(body=b"[1, 2]"),
    ],
    ids=["answer", "length", "empty-no-usage", "unicode-partial-usage", "no-choices", "null-content",
         "odd-types", "not-an-object"],
)  # fmt: skip
def test_the_completion_read_is_what_openai_s_chat_completion_holds(fake, reply):
    fake.script(reply, reply)
    ours, theirs = via_transport(fake, read="_post_completion"), via_transport(fake)
    assert isinstance(ours, Completion) and isinstance(theirs, ChatCompletion | list)
    assert ours == as_read(theirs)
    mine, reference = fake.requests
    assert mine.body == reference.body == BODY and mine.headers == reference.headers


def test_a_cut_body_read_raw_is_the_json_error_openai_raises(fake):
    fake.script(Reply.cut(), Reply.cut())
    ours, theirs = via_transport(fake, read="_post_completion"), via_openai(fake)
    assert isinstance(theirs, json.JSONDecodeError)
    assert type(ours) is type(theirs) and str(ours) == str(theirs)
    assert describe_error(ours).startswith("unreadable response body (not the JSON announced, cut short?): ")


def test_read_completion_reads_what_openai_would_of_other_bodies():
    answer = {"choices": [{"message": {"content": "é"}, "finish_reason": "stop"}]}
    assert read_completion(json.dumps(answer)) == Completion(True, "é", "stop", None)
    # a body that is not JSON (an error page): json.loads' own error, as openai's response.json() raises
    with pytest.raises(json.JSONDecodeError, match="Expecting value: line 1 column 1"):
        read_completion("<html>busy</html>")


@pytest.mark.parametrize("read", ["create", "complete"])
def test_a_first_attempt_rate_limited_is_retried_after_retry_after_and_counted(fake, read):
    fake.script(Reply.error(429, retry_after=0.3), Reply.json({"ok": 1}))
    ep = endpoint(fake, max_retries=2, backoff_s=0.01)

    async def ask():
        return await (ep.create(**BODY) if read == "create" else ep.complete(dict(BODY)))

    try:
        answer = ep.run(ask())
    finally:
        ep.close()
    content = answer.choices[0].message.content if read == "create" else answer.content
    assert content == '{"ok": 1}'
    first, second = fake.requests
    assert 0.3 <= second.at - first.at < 2.0  # the 0.3 s asked (the backoff alone is 0.01 s)
    usage = ep.usage()
    assert (usage.requests, usage.retries, usage.failures, usage.input_tokens, usage.output_tokens) == (2, 1, 0, 10, 5)


@pytest.mark.parametrize("read", ["create", "complete"])
def test_retries_stop_after_max_retries_with_the_last_error(fake, read):
    fake.script(Reply.cut(), Reply.error(503), Reply.json({"ok": 1}))  # the third would succeed: never asked
    ep = endpoint(fake, max_retries=1, backoff_s=0.01)

    async def ask():
        return await (ep.create(**BODY) if read == "create" else ep.complete(dict(BODY)))

    try:
        with pytest.raises(JudgeCallError, match="^HTTP 503: fake error 503$"):
            ep.run(ask())
    finally:
        ep.close()
    assert len(fake.requests) == 2
    usage = ep.usage()
    assert (usage.requests, usage.retries, usage.input_tokens, usage.responses_without_usage) == (2, 1, 0, 0)


def test_a_silent_server_is_openai_s_timeout_error(fake):
    fake.script(Reply.slow(30, Reply.json({})), Reply.slow(30, Reply.json({})))  # far beyond 0.3 s, even loaded
    ours, theirs = via_transport(fake, timeout_s=0.3), via_openai(fake, timeout_s=0.3)
    assert isinstance(theirs, openai.APITimeoutError)
    assert type(ours) is type(theirs) and str(ours) == str(theirs) == "Request timed out."


def test_a_closed_port_is_openai_s_connection_error():
    with FakeOpenAI() as closed:
        pass  # stopped: nothing listens on its port any more
    ours, theirs = via_transport(closed), via_openai(closed)
    assert isinstance(theirs, openai.APIConnectionError) and not isinstance(theirs, openai.APITimeoutError)
    # httpx-aiohttp 0.2 raises a connect timeout for a refused connection; the reason names it as openai's does
    assert isinstance(ours, openai.APIConnectionError) and is_retryable(ours)
    assert describe_error(ours) == describe_error(theirs) == "APIConnectionError: Connection error."


def test_the_endpoint_uses_openai_s_aiohttp_client(fake):
    ep = endpoint(fake)
    try:
        assert isinstance(ep.client._client, openai.DefaultAioHttpClient)
    finally:
        ep.close()


def test_the_connection_pool_holds_concurrency_connections(fake):
    # 120 > aiohttp's default pool of 100 connections: a pool that small would queue 20
    n = 120

    def together(body: dict) -> Reply:  # every answer waits until all n requests have arrived (or 60 s)
        deadline = time.monotonic() + 60
        while len(fake.requests) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return Reply.slow(1.0, Reply.json({"ok": 1}))

    fake.responder = together
    ep = endpoint(fake, concurrency=n, timeout_s=120.0)

    async def all_at_once():
        return await asyncio.gather(*(ep.create(**BODY) for _ in range(n)))

    try:
        responses = ep.run(all_at_once())
    finally:
        ep.close()
    assert len(responses) == n and all(r.choices[0].message.content == '{"ok": 1}' for r in responses)
    assert fake.max_in_flight == n
    assert ep.usage().requests == n and ep.usage().retries == 0


def test_a_retry_the_open_circuit_stops_is_neither_sent_nor_counted(fake):
    """Two calls fail at once with a 500; the circuit opens at the second failure (limit 2) while both wait to
    retry: neither retry is sent, and the accounting counts only what the endpoint was sent."""
    fake.script(Reply.error(500), Reply.error(500), Reply.json({"ok": 1}), Reply.json({"ok": 1}))
    ep = endpoint(fake, max_retries=2, backoff_s=0.2, max_consecutive_failures=2)

    async def ask():
        return await asyncio.gather(*(ep.complete(dict(BODY)) for _ in range(2)), return_exceptions=True)

    try:
        results = ep.run(ask())
    finally:
        ep.close()
    assert [type(r) for r in results] == [JudgeCallError, JudgeCallError]
    usage = ep.usage()
    assert len(fake.requests) == usage.requests == 2 and usage.retries == 0
