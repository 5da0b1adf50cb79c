"""A local OpenAI-compatible chat-completions server on 127.0.0.1 for the LLM-backed judge tests.

It answers ``POST /v1/chat/completions`` with scripted replies: valid JSON, broken JSON, HTTP errors (401,
429 with ``Retry-After``, 500, ...) with a message and code, slow or trickled answers, truncated answers
(``finish_reason: "length"``), a JSON body cut short, completions with or without ``usage``. Replies are taken
from a queue in order; when the queue is empty, ``responder(body) -> Reply`` answers. Every request is
recorded (path, headers, parsed body) so tests can assert what a judge sent.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
"""The ``usage`` every completion reports unless its reply says otherwise."""


class _Server(ThreadingHTTPServer):
    request_queue_size = 256
    """Connections waiting to be accepted (the default, 5, drops a burst of connections: 1 s SYN retries)."""


HUNG_S = 5.0
"""How long a hung endpoint keeps a request: far beyond :data:`TIMEOUT_S`."""
TIMEOUT_S = 1.0
"""A client timeout for tests that count the requests the server saw: long enough that a request is sent before it
times out even on a loaded CI machine (at 0.2 s, a timed-out attempt sometimes never reached the server)."""


@dataclass(frozen=True)
class Reply:
    """One scripted answer of the fake server."""

    content: str = ""
    finish_reason: str = "stop"
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    message: str | None = None
    """The error message of an HTTP error reply (default "fake error <status>")."""
    code: str | None = None
    """The error code of an HTTP error reply (e.g. "model_not_found")."""
    body: bytes | None = None
    """Sent verbatim (with ``status``) instead of a completion: e.g. a JSON body cut short."""
    usage: dict[str, int] | None = field(default_factory=lambda: dict(USAGE))
    """The completion's ``usage``; None leaves the field out."""
    trickle_s: float = 0.0
    """Seconds between the bytes of the body (a server that trickles its answer)."""

    @classmethod
    def json(cls, obj: Any, **kw: Any) -> Reply:
        """A completion whose message content is ``obj`` as JSON."""
        return cls(content=json.dumps(obj), **kw)

    @classmethod
    def text(cls, text: str, **kw: Any) -> Reply:
        """A completion whose message content is ``text`` verbatim (broken JSON, fenced JSON, prose)."""
        return cls(content=text, **kw)

    @classmethod
    def truncated(cls, text: str) -> Reply:
        """A completion cut by the token limit (``finish_reason: "length"``)."""
        return cls(content=text, finish_reason="length")

    @classmethod
    def error(cls, status: int, retry_after: float | None = None, message: str | None = None,
              code: str | None = None) -> Reply:  # fmt: skip
        """An HTTP error (401, 429, 500, ...), optionally with ``Retry-After`` (seconds), a message and a code."""
        headers = (("Retry-After", f"{retry_after:g}"),) if retry_after is not None else ()
        return cls(status=status, headers=headers, message=message, code=code)

    @classmethod
    def cut(cls, text: str = '{"faithfulness": 3, "answer_relevance": 3, "reasons": {}}', keep: int = 60) -> Reply:
        """HTTP 200 whose JSON body (a completion of ``text``) is cut after ``keep`` bytes."""
        whole = json.dumps({"id": "chatcmpl-cut", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})  # fmt: skip
        return cls(body=whole.encode()[:keep])

    @classmethod
    def slow(cls, delay_s: float, then: Reply) -> Reply:
        """``then``, sent after sleeping ``delay_s`` seconds."""
        return replace(then, delay_s=delay_s)


@dataclass(frozen=True)
class Request:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    """Header names in lower case (HTTP header names are case-insensitive)."""
    body: dict[str, Any]
    at: float
    """``time.monotonic()`` when it arrived."""

    @property
    def prompt(self) -> str:
        """All message contents joined (to tell prompts apart)."""
        return "\n".join(str(m.get("content", "")) for m in self.body.get("messages", []))


class FakeOpenAI:
    """An OpenAI-compatible server in a background thread; use as a context manager.

    Example:
        with FakeOpenAI() as fake:
            fake.script(Reply.error(429, retry_after=0.2), Reply.json({"ok": 1}))
            client = OpenAI(base_url=fake.base_url, api_key="x")
    """

    def __init__(self, responder: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.responder = responder or (lambda body: Reply.error(500))
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        """Most chat requests being answered at once (to check a client's concurrency bound)."""
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give an OpenAI client (ends in ``/v1``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def wait_for_requests(self, n: int, timeout_s: float = 5.0) -> int:
        """Wait until ``n`` requests are recorded (or ``timeout_s`` passes); return how many are.

        A client that timed out may return before the server thread has read its request: count after this.
        """
        deadline = time.monotonic() + timeout_s
        while len(self.requests) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return len(self.requests)

    def script(self, *replies: Reply) -> None:
        """Queue ``replies``, answered in order before falling back to the responder."""
        with self._lock:
            self._queue.extend(replies)

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.responder(body)

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def _enter(self, step: int) -> None:
        with self._lock:
            self.in_flight += step
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                headers = {k.lower(): v for k, v in self.headers.items()}  # names are case-insensitive
                fake._record(Request(self.path, headers, body, time.monotonic()))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                reply = fake._next(body)
                fake._enter(+1)
                try:
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                finally:
                    fake._enter(-1)
                if reply.body is not None:
                    return self._send_raw(reply.status, reply.body, reply.headers, reply.trickle_s)
                if reply.status != 200:
                    error = {"message": reply.message or f"fake error {reply.status}", "type": "server_error"}
                    if reply.code is not None:
                        error["code"] = reply.code
                    return self._send(reply.status, {"error": error}, reply.headers)
                completion = {
                    "id": f"chatcmpl-{len(fake.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.content},
                            "finish_reason": reply.finish_reason,
                        }
                    ],
                }
                if reply.usage is not None:
                    completion["usage"] = reply.usage
                self._send(200, completion, reply.headers, reply.trickle_s)

            def _send(self, status: int, payload: dict[str, Any], headers: tuple = (), trickle_s: float = 0) -> None:
                self._send_raw(status, json.dumps(payload).encode(), headers, trickle_s)

            def _send_raw(self, status: int, data: bytes, headers: tuple = (), trickle_s: float = 0) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers:
                        self.send_header(name, value)
                    self.end_headers()
                    if not trickle_s:
                        self.wfile.write(data)
                        return
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(trickle_s)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

        return Handler

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def fast_judge_options(fake: FakeOpenAI, cache_dir: Any, model: str) -> dict[str, Any]:
    """Options that point a judge at ``fake`` with short timeouts and backoffs (tests stay under a second)."""
    return dict(
        model=model, base_url=fake.base_url, cache_dir=cache_dir, timeout_s=2.0, max_retries=2,
        backoff_s=0.01, max_wait_s=0.5, environ={},
    )  # fmt: skip


# ------------------------------------------------------------------ stub judges (smoke tests, not LLMs)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def word_novelty(answer: str, context: str) -> float:
    """Share of the answer's words (lower-cased ``\\w+`` tokens) absent from the context; 0 for an empty answer."""
    words, known = _words(answer), set(_words(context))
    return sum(w not in known for w in words) / len(words) if words else 0.0


def _sections(prompt: str, tag: str) -> list[str]:
    return re.findall(rf"<{tag}>\n(.*?)\n</{tag}>", prompt, re.S)


def novelty_rubric(body: dict[str, Any]) -> Reply:
    """A stub rubric judge: faithfulness from the answer's word novelty against the context (≤ 10 % → 3, ≤ 25 % →
    2, else 1); answer relevance, completeness and form 3, correctness null. Not an LLM: a smoke-test stand-in."""
    prompt = body["messages"][-1]["content"]
    novelty = word_novelty(_sections(prompt, "answer")[-1], _sections(prompt, "context")[0])
    faithfulness = 3 if novelty <= 0.10 else 2 if novelty <= 0.25 else 1
    grades = {"faithfulness": faithfulness, "answer_relevance": 3, "correctness": None, "completeness": 3, "form": 3}
    return Reply.json(grades | {"reasons": {"faithfulness": f"word novelty {novelty:.2f}"}})


def novelty_pairwise(body: dict[str, Any]) -> Reply:
    """A stub pairwise judge: the answer with the lower word novelty against its own context is better (a tie within
    0.02), whatever the order shown. Not an LLM: a smoke-test stand-in."""
    prompt = body["messages"][-1]["content"]
    contexts, answers = _sections(prompt, "context"), _sections(prompt, "answer")
    a, b = (word_novelty(answer, context) for answer, context in zip(answers[-2:], contexts[-2:], strict=True))
    better = "tie" if abs(a - b) <= 0.02 else "A" if a < b else "B"
    return Reply.json({"better": better, "reason": f"word novelty A {a:.2f}, B {b:.2f}"})
