"""The OpenAI-compatible endpoint shared by the LLM-backed judges (rubric ``llm`` and ``ragas``).

:class:`Endpoint` owns one ``openai.AsyncOpenAI`` client and one connection pool (:class:`Transport`, aiohttp, sized
from ``concurrency``) on a private event loop (one daemon thread), shared by every thread of a judge: no client,
connection or event loop is built per call. Each request goes through
:meth:`Endpoint.create`, which

- pins the model, temperature and ``max_tokens`` (the judge builds the body);
- bounds the requests in flight (``concurrency``) and each request's total time (``timeout_s``: the client's
  connect / read / write / pool timeouts, and a wall-clock bound on the whole request);
- retries timeouts, connection errors, unreadable bodies (an HTTP 200 whose JSON is cut short), 408 / 409 /
  429 / 5xx with exponential backoff (tenacity; a server's ``Retry-After`` is honoured up to ``max_wait_s``);
- stops the run at once on an authentication or configuration failure (HTTP 401 / 403 / 404, unknown model):
  :class:`JudgeConfigError`, an :class:`~gate.errors.EvaluationError` (exit code 3);
- gives up on a judge that is down or too slow: after ``max_consecutive_failures`` failed requests or calls in
  a row the circuit opens, and past ``deadline_s`` seconds from the judge's first request every remaining call
  fails at once (no request) — each such call is a judge failure with that reason, so the run finishes, every
  row is recorded and the error budget decides (see the README, "Judges");
- counts requests, retries, failures, cache hits and the tokens of the API's ``usage`` (:class:`CallStats`),
  priced per 1,000 tokens when prices are configured.

:func:`extract_json` reads a model's **final** answer: reasoning blocks (``<think>…</think>`` and similar) are
dropped and the last JSON object is taken, never an earlier draft or format example. Successful answers are
cached on disk (:class:`DiskCache`), keyed by the hash of (judge, endpoint, model, prompt version, inputs, repeat
index).

``openai`` (extra ``[llm]``) is imported when an endpoint is built, never at module import.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from gate.errors import EvaluationError, InputError

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where requests go when no ``base_url`` is given."""

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
"""HTTP statuses retried with backoff (as the OpenAI SDK does), besides timeouts and connection errors."""

CONFIG_STATUS = frozenset({401, 403, 404})
"""HTTP statuses that mean the judge is misconfigured (key, permission, URL or model): the run stops."""

_UNKNOWN_MODEL = re.compile(
    r"model[^.]{0,80}\b(not found|does not exist|doesn't exist|not exist|unknown|not available|not supported)"
    r"|(unknown|invalid|unsupported) model",
    re.IGNORECASE,
)


class JudgeCallError(Exception):
    """A judge call failed for this case (retries spent, truncated, unparseable, circuit open, deadline).

    The message is the one-line reason; judges turn it into ``Judgment(error=...)``.
    """


class JudgeConfigError(EvaluationError):
    """The judge endpoint rejected its configuration (HTTP 401 / 403 / 404, unknown model): stop the run.

    Exit code 3. The message is one line naming the endpoint, the HTTP status and the server's reason.
    """


def default_cache_dir() -> Path:
    """Return the default judge cache directory, ``$XDG_CACHE_HOME/rag-gate/judges``.

    ``XDG_CACHE_HOME`` defaults to ``~/.cache``.
    """
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rag-gate" / "judges"


@dataclass(frozen=True)
class EndpointConfig:
    """How to reach an OpenAI-compatible endpoint, what to send and when to give up; validated on construction.

    Raises:
        ValueError: on an empty model, a temperature outside [0, 2], a non-positive limit or a negative price.

    """

    model: str
    """Model name sent in every request (pinned: no default)."""
    base_url: str = OPENAI_BASE_URL
    """Endpoint base URL, ending in ``/v1`` for most servers (vLLM, Ollama, llama.cpp, LiteLLM)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable holding the API key (the key itself never appears in options)."""
    temperature: float = 0.0
    """Sampling temperature in [0, 2], sent in every request."""
    max_tokens: int = 512
    """Completion token limit, sent in every request; an answer that hits it is a failure (truncated)."""
    timeout_s: float = 60.0
    """Per-request limit in seconds: the client's connect / read / write timeouts and a bound on the whole
    request (a server that trickles bytes is cut too); a timeout is retried, then a failure."""
    max_retries: int = 4
    """Retries after the first attempt on 429 / 5xx / timeouts / connection errors (0 = no retry)."""
    backoff_s: float = 1.0
    """Initial exponential backoff in seconds (doubles per retry, with jitter)."""
    max_wait_s: float = 30.0
    """Cap in seconds on any single wait, including a server's ``Retry-After``."""
    concurrency: int = 4
    """Requests in flight at once across all threads using one judge."""
    deadline_s: float = 600.0
    """Wall-clock seconds from the judge's first request (one judge scores one side); past it every remaining
    call fails at once with "judge deadline ... exceeded", and requests in flight are cut."""
    max_consecutive_failures: int = 5
    """Failed requests or calls in a row (429 excepted) after which the circuit opens: every remaining call
    fails at once with "circuit open after K consecutive failures", without calling the endpoint."""
    cost_per_1k_input: float | None = None
    """Price in USD per 1,000 input (prompt) tokens, for the cost estimate; None: cost not estimated."""
    cost_per_1k_output: float | None = None
    """Price in USD per 1,000 output (completion) tokens, for the cost estimate; None: cost not estimated."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("option 'model' must be a non-empty string (the judge model is pinned)")
        if not isinstance(self.base_url, str) or not re.match(r"https?://", self.base_url):
            raise ValueError(f"option 'base_url' must be an http(s) URL, got {self.base_url!r}")
        if not isinstance(self.api_key_env, str) or not self.api_key_env:
            raise ValueError("option 'api_key_env' must name an environment variable")
        if not _is_number(self.temperature) or not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"option 'temperature' must be in [0, 2], got {self.temperature!r}")
        for name in ("max_tokens", "concurrency", "max_consecutive_failures"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"option {name!r} must be an integer ≥ 1, got {value!r}")
        if not isinstance(self.max_retries, int) or isinstance(self.max_retries, bool) or self.max_retries < 0:
            raise ValueError(f"option 'max_retries' must be an integer ≥ 0, got {self.max_retries!r}")
        for name in ("timeout_s", "backoff_s", "max_wait_s", "deadline_s"):
            if not _is_number(getattr(self, name)) or not 0 < getattr(self, name) < float("inf"):
                raise ValueError(f"option {name!r} must be > 0 seconds, got {getattr(self, name)!r}")
        for name in ("cost_per_1k_input", "cost_per_1k_output"):
            value = getattr(self, name)
            if value is not None and (not _is_number(value) or not 0 <= value < float("inf")):
                raise ValueError(f"option {name!r} must be a price ≥ 0 (USD per 1,000 tokens), got {value!r}")

    def api_key(self, environ: Mapping[str, str]) -> str:
        """Return the API key, read from ``environ[api_key_env]``.

        A local endpoint (any ``base_url`` other than OpenAI's) may need no key: a placeholder is used then.

        Raises:
            ValueError: when the variable is unset and ``base_url`` is OpenAI's.

        """
        key = environ.get(self.api_key_env)
        if key:
            return key
        if self.base_url.rstrip("/") == OPENAI_BASE_URL:
            raise ValueError(f"environment variable {self.api_key_env} is not set")
        return "not-needed"

    def identity(self) -> dict[str, Any]:
        """The settings that change a score: model, endpoint, temperature and ``max_tokens``.

        Timeouts, retries, concurrency, deadline, circuit breaker, prices and the key decide whether a call
        succeeds or what it costs, never the grade it gets, so they are left out.
        """
        return {
            "model": self.model,
            "base_url": self.base_url.rstrip("/"),
            "temperature": float(self.temperature),
            "max_tokens": self.max_tokens,
        }

    def describe(self) -> str:
        """One line naming the pinned settings (printed in run details; never the key)."""
        return (
            f"model={self.model} temperature={self.temperature:g} max_tokens={self.max_tokens} "
            f"base_url={self.base_url} timeout={self.timeout_s:g}s retries={self.max_retries} "
            f"concurrency={self.concurrency} deadline={self.deadline_s:g}s "
            f"breaker={self.max_consecutive_failures}"
        )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # not NaN


@dataclass
class CallStats:
    """Counters of one judge (one side), safe to update from several threads."""

    requests: int = 0
    """HTTP requests sent (first attempts, retries and instructor re-asks)."""
    retries: int = 0
    """Waits before a retry."""
    failures: int = 0
    """Calls that ended as a judge failure (including calls refused by an open circuit or the deadline)."""
    cache_hits: int = 0
    """Answers served from the disk cache (no request)."""
    input_tokens: int = 0
    """Prompt tokens, summed from the API's ``usage`` of every answered request."""
    output_tokens: int = 0
    """Completion tokens, summed from the API's ``usage`` of every answered request."""
    responses_without_usage: int = 0
    """Answered requests whose response had no ``usage`` (their tokens are unknown, so not counted)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, n: int = 1) -> None:
        """Increment counter ``name`` by ``n``."""
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def add_usage(self, usage: Any) -> None:
        """Add the token counts of one response's ``usage`` (an object or None)."""
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        with self._lock:
            if not isinstance(prompt, int) and not isinstance(completion, int):
                self.responses_without_usage += 1
                return
            self.input_tokens += prompt if isinstance(prompt, int) else 0
            self.output_tokens += completion if isinstance(completion, int) else 0

    def to_dict(self, config: EndpointConfig | None = None) -> dict[str, Any]:
        """JSON-ready counters plus ``cost_usd``.

        ``cost_usd`` = input_tokens / 1000 × ``cost_per_1k_input`` + output_tokens / 1000 ×
        ``cost_per_1k_output`` (USD, ≥ 0), or None when no price is configured.
        """
        with self._lock:
            out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}
        prices = (config.cost_per_1k_input, config.cost_per_1k_output) if config is not None else (None, None)
        if prices == (None, None):
            out["cost_usd"] = None
        else:
            cost_in, cost_out = (p or 0.0 for p in prices)
            out["cost_usd"] = round(out["input_tokens"] / 1000 * cost_in + out["output_tokens"] / 1000 * cost_out, 6)
        return out


class Breaker:
    """Circuit breaker and overall deadline of one judge; thread-safe.

    The deadline clock starts at the first :meth:`check`. ``failure`` counts a failed request or call,
    ``success`` resets the count; at ``limit`` failures in a row the circuit opens for good (one judge scores
    one side: there is no half-open state to probe a recovered endpoint).

    Args:
        limit: consecutive failures that open the circuit, ≥ 1.
        deadline_s: seconds from the first check after which every check fails.
        clock: monotonic clock in seconds (injected by tests).

    """

    def __init__(self, limit: int, deadline_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.deadline_s, self._clock = limit, deadline_s, clock
        self._lock = threading.Lock()
        self._started: float | None = None
        self._streak = 0
        self._last = ""
        self.open_reason: str | None = None
        """Why calls are refused (circuit open or deadline passed), or None while calls go through."""
        self.fatal: JudgeConfigError | None = None
        """The configuration error that stopped the judge, re-raised by every later check."""

    def check(self) -> float:
        """Return the seconds left before the deadline.

        Raises:
            JudgeConfigError: once the endpoint has rejected the configuration.
            JudgeCallError: when the circuit is open or the deadline has passed.

        """
        with self._lock:
            if self.fatal is not None:
                raise self.fatal
            now = self._clock()
            if self._started is None:
                self._started = now
            left = self._started + self.deadline_s - now
            if self.open_reason is None and left <= 0:
                self.open_reason = f"judge deadline of {self.deadline_s:g} s exceeded (option deadline_s)"
            if self.open_reason is not None:
                raise JudgeCallError(self.open_reason)
            return left

    def failure(self, reason: str) -> None:
        """Count one failed request or call; open the circuit at ``limit`` in a row."""
        with self._lock:
            self._streak += 1
            self._last = reason
            if self._streak >= self.limit and self.open_reason is None:
                self.open_reason = f"circuit open after {self._streak} consecutive failures (last: {reason})"

    def success(self) -> None:
        """Reset the count of consecutive failures."""
        with self._lock:
            self._streak = 0

    def stop(self, error: JudgeConfigError) -> None:
        """Remember a configuration error: every later :meth:`check` raises it (no further request)."""
        with self._lock:
            self.fatal = self.fatal or error


def is_retryable(exc: BaseException) -> bool:
    """Tell whether ``exc`` is worth retrying.

    Retried: timeouts (the client's and the total bound), connection errors, a body that is not the JSON
    announced (:class:`ValueError`, e.g. cut short by a dropped connection) and :data:`RETRYABLE_STATUS`.
    """
    import openai

    if isinstance(exc, openai.APIConnectionError | TimeoutError | ValueError):  # APITimeoutError included
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code in RETRYABLE_STATUS


def retry_after_s(exc: BaseException | None) -> float | None:
    """Return the seconds a server asked to wait (``Retry-After`` / ``retry-after-ms`` headers), or None.

    Source: RFC 9110 §10.2.3 (delay-seconds form; the HTTP-date form is ignored).
    """
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) * scale)
        except ValueError:
            continue
    return None


def retry_policy(
    config: EndpointConfig, on_retry: Callable[[], None] | None = None, left: Callable[[], float] | None = None
) -> dict[str, Any]:
    """Build the keyword arguments of ``tenacity.AsyncRetrying`` for the retry rules.

    Stops after ``1 + max_retries`` attempts and re-raises the last error. Waits ``Retry-After`` when the
    server sends one, else exponential backoff with jitter from ``backoff_s``; every wait is capped at
    ``max_wait_s`` and at ``left()`` (the seconds before the judge's deadline), so no wait outlives it.
    """
    # backoff_s · 2^(attempt − 1) plus up to backoff_s of jitter (tenacity's wait_exponential_jitter, whose first
    # argument newer tenacity deprecates: built from the two waits every tenacity since 8.2 has)
    backoff = wait_exponential(multiplier=config.backoff_s, max=config.max_wait_s) + wait_random(0, config.backoff_s)

    def wait(state: RetryCallState) -> float:
        asked = retry_after_s(state.outcome.exception() if state.outcome else None)
        seconds = min(config.max_wait_s, asked if asked is not None else backoff(state))
        return max(0.0, min(seconds, left())) if left is not None else seconds

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None:
            on_retry()

    return {
        "stop": stop_after_attempt(1 + config.max_retries),
        "wait": wait,
        "retry": retry_if_exception(is_retryable),
        "before_sleep": before_sleep,
        "reraise": True,
    }


def describe_error(exc: BaseException) -> str:
    """Return a one-line reason for a failed request (``"HTTP 500: ..."``, ``"request timed out"``)."""
    import openai

    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIStatusError):
        body = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
        detail = body.get("message") if isinstance(body, dict) else None
        return f"HTTP {exc.status_code}: {_one_line(detail if isinstance(detail, str) else exc.message)}"
    if isinstance(exc, json.JSONDecodeError):
        return f"unreadable response body (not the JSON announced, cut short?): {_one_line(str(exc))}"
    return f"{type(exc).__name__}: {_one_line(str(exc))}"


def config_error(exc: BaseException, config: EndpointConfig) -> JudgeConfigError | None:
    """Return the :class:`JudgeConfigError` that ``exc`` means, or None when it is not a configuration failure.

    A configuration failure is HTTP 401 / 403 / 404 (key, permission, URL), or an HTTP 400 / 422 whose error
    code or message says the model is unknown (OpenAI ``model_not_found``, vLLM "The model ... does not
    exist", Ollama "model ... not found", LiteLLM "Invalid model name").
    """
    import openai

    if not isinstance(exc, openai.APIStatusError):
        return None
    reason = describe_error(exc)
    unknown_model = getattr(exc, "code", None) == "model_not_found" or bool(_UNKNOWN_MODEL.search(reason))
    if exc.status_code not in CONFIG_STATUS and not (exc.status_code in (400, 422) and unknown_model):
        return None
    hint = {401: f"check the API key in ${config.api_key_env}", 403: "the key lacks access to this model"}.get(
        exc.status_code, f"check base_url and model {config.model!r}"
    )
    return JudgeConfigError(f"judge endpoint {config.base_url} rejected the request: {reason} ({hint})")


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


REASONING_BLOCK = re.compile(
    r"<(think|thinking|reasoning|reflection|analysis|scratchpad)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE
)
"""A closed reasoning block (``<think>…</think>``, ``<thinking>``, ``<reasoning>``, ``<reflection>`` ...)."""

_OPEN_REASONING = re.compile(r"<(think|thinking|reasoning|reflection|analysis|scratchpad)\b[^>]*>", re.IGNORECASE)
_CLOSE_REASONING = re.compile(r"</(think|thinking|reasoning|reflection|analysis|scratchpad)\s*>", re.IGNORECASE)
_FINAL_CHANNEL = re.compile(r"<\|channel\|>\s*final\s*<\|message\|>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Return the final answer of a model's message, without its reasoning.

    Drops closed reasoning blocks (:data:`REASONING_BLOCK`); everything up to a closing tag left without its
    opening one (chat templates that put ``<think>`` in the prompt); and keeps only what follows a harmony
    ``<|channel|>final<|message|>`` marker when there is one.

    Raises:
        ValueError: when a reasoning block is opened and never closed (the answer was cut inside it).

    """
    finals = list(_FINAL_CHANNEL.finditer(text))
    if finals:
        text = text[finals[-1].end() :]
    text = REASONING_BLOCK.sub(" ", text)
    closers = list(_CLOSE_REASONING.finditer(text))
    if closers:
        text = text[closers[-1].end() :]
    opened = _OPEN_REASONING.search(text)
    if opened:
        raise ValueError(f"reasoning block <{opened.group(1)}> is never closed: no final answer after it")
    return text


def json_objects(text: str) -> list[tuple[int, dict[str, Any]]]:
    """Return the top-level JSON objects in ``text`` with their start offsets, in order.

    Objects nested inside another decoded object are not listed separately; text that does not decode
    (prose braces, a cut object) is skipped.
    """
    decoder = json.JSONDecoder()
    found, position = [], 0
    while (start := text.find("{", position)) != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        if isinstance(obj, dict):
            found.append((start, obj))
        position = end
    return found


def extract_json(text: str) -> dict[str, Any]:
    """Return the model's final JSON object: the last one after its reasoning, fenced or not.

    Reasoning blocks are removed first (:func:`strip_reasoning`); of the JSON objects left, the last one is
    the answer, so a draft, a restated format example or an earlier attempt is never taken. A code fence needs
    no special rule: its object is found like any other. Validating the object against the judge's schema is
    the caller's job.

    Args:
        text: the model's message content.

    Returns:
        The decoded object.

    Raises:
        ValueError: when a reasoning block is never closed, or no JSON object follows the reasoning.

    """
    found = json_objects(strip_reasoning(text))
    if not found:
        raise ValueError(f"no JSON object in the model's answer: {_one_line(text, 120)!r}")
    return found[-1][1]


class DiskCache:
    """A directory of JSON files, one per key (``ab/abcdef….json``); atomic writes, safe across threads.

    An unreadable entry is a miss. Only successful answers are stored.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    @staticmethod
    def key(**parts: Any) -> str:
        """SHA-256 hex digest of ``parts`` as canonical JSON (sorted keys, UTF-8)."""
        canonical = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        """Return the value stored under ``key``, or None on a miss."""
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))["value"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) under ``key`` atomically; best effort (an OS error stores nothing)."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"value": value}, out, ensure_ascii=False)
            os.replace(tmp, path)
        except OSError:
            pass


def make_cache(cache_dir: str | os.PathLike[str] | None | bool) -> DiskCache | None:
    """Open the judge cache of a ``cache_dir`` option: a path, None/True (default dir) or False (off).

    Raises:
        ValueError: when ``cache_dir`` is neither a path, a bool nor None.

    """
    if cache_dir is False:
        return None
    if cache_dir is None or cache_dir is True:
        return DiskCache(default_cache_dir())
    if isinstance(cache_dir, str | os.PathLike):
        return DiskCache(cache_dir)
    raise ValueError(f"option 'cache_dir' must be a path or false, got {cache_dir!r}")


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The body of an endpoint's loop thread: run until stopped, then release the loop's resources."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


def _shutdown(loop: asyncio.AbstractEventLoop, thread: threading.Thread, transport: Transport) -> None:
    """Close an endpoint's HTTP transport on its loop, then stop the loop (a finalizer: holds no endpoint)."""
    if loop.is_closed() or not thread.is_alive():
        return

    async def close() -> None:
        try:
            await transport.close()
        finally:
            loop.stop()

    if threading.current_thread() is thread:  # collected on the loop's own thread: cannot wait for it
        loop.create_task(close())
        return
    asyncio.run_coroutine_threadsafe(close(), loop)
    thread.join(timeout=5)


class Endpoint:
    """One OpenAI-compatible endpoint for one judge: a shared async client on a private event loop.

    Thread-safe: any number of threads may call :meth:`run` at once; the requests they start share one
    connection pool, the concurrency bound, the retry rules, the circuit breaker and the deadline.

    Args:
        config: the endpoint and request settings.
        environ: where the API key is read (``os.environ`` when None).

    Raises:
        ValueError: when the API key is required and missing.
        InputError: the ``llm`` extra (openai with aiohttp) is not installed.

    """

    def __init__(self, config: EndpointConfig, environ: Mapping[str, str] | None = None) -> None:
        try:
            import aiohttp  # noqa: F401 (the transport's; checked here so that a missing extra is said up front)
            import openai

            openai_http()
        except ImportError as exc:
            raise InputError(f"an LLM judge needs the llm extra: pip install 'rag-gate[llm]' ({exc})") from None

        self.config = config
        self.stats = CallStats()
        self.breaker = Breaker(config.max_consecutive_failures, config.deadline_s)
        self.client = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=config.api_key(os.environ if environ is None else environ),
            timeout=config.timeout_s,  # connect, read, write and pool
            max_retries=0,  # retried here, so that Retry-After is honoured but bounded
        )
        self.client.chat.completions.create = self.create  # type: ignore[method-assign] (instructor wraps this)
        self._transport = Transport(self.client, config)
        self._retry_policy = retry_policy(config, lambda: self.stats.add("retries"), self._seconds_left)
        self._slots = asyncio.Semaphore(config.concurrency)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._close: weakref.finalize | None = None
        self._start_lock = threading.Lock()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The private event loop, started in a daemon thread on first use.

        Not at construction: no thread exists before the pipeline's worker processes are started.
        """
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=_run_loop, args=(loop,), name="rag-gate-judge", daemon=True)
                thread.start()
                self._close = weakref.finalize(self, _shutdown, loop, thread, self._transport)
                self._loop = loop
            return self._loop

    def close(self) -> None:
        """Close the HTTP client and stop the event loop (also done when the endpoint is collected or at exit)."""
        with self._start_lock:
            if self._close is not None:
                self._close()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the endpoint's event loop and wait for its result (from any other thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._event_loop()).result()

    def usage(self) -> dict[str, Any]:
        """The accounting so far: :meth:`CallStats.to_dict` plus ``stopped``.

        ``stopped`` says why calls are refused (circuit open, deadline passed), or is None.
        """
        return self.stats.to_dict(self.config) | {"stopped": self.breaker.open_reason}

    async def create(self, **body: Any) -> Any:
        """Send one chat completion with the retry, timeout, breaker and deadline rules; return the response.

        The message content is reduced to the final answer (:func:`strip_reasoning`) and, when it holds a
        JSON object, to the last one (:func:`extract_json`), so that a parser downstream (instructor) reads the
        final JSON and never a draft. Token usage is counted.

        Raises:
            JudgeConfigError: on HTTP 401 / 403 / 404 or an unknown model (also for every later call).
            JudgeCallError: when retries are spent, on a non-retryable HTTP error, or when the circuit is open
                or the deadline has passed.

        """
        try:
            async for attempt in AsyncRetrying(**self._retry_policy):
                with attempt:
                    response = await self._attempt(body)
        except (JudgeCallError, JudgeConfigError):
            raise
        except Exception as exc:  # noqa: BLE001 - the reasons were classified per attempt in _attempt
            raise JudgeCallError(describe_error(exc)) from exc
        self.stats.add_usage(getattr(response, "usage", None))
        _keep_final_answer(response)
        return response

    def _seconds_left(self) -> float:
        try:
            return self.breaker.check()
        except JudgeCallError:
            return 0.0

    async def _attempt(self, body: dict[str, Any]) -> Any:
        left = self.breaker.check()
        async with self._slots:
            left = self.breaker.check()  # the wait for a slot may have outlived the deadline
            self.stats.add("requests")
            try:
                return await asyncio.wait_for(self._transport.post(body), min(self.config.timeout_s, left))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                fatal = config_error(exc, self.config)
                if fatal is not None:
                    self.breaker.stop(fatal)
                    raise fatal from None
                if not _is_rate_limit(exc):
                    self.breaker.failure(describe_error(exc))
                if not is_retryable(exc):
                    raise JudgeCallError(describe_error(exc)) from exc
                raise


def openai_http() -> Any:
    """The HTTP library the installed openai is built on, whose ``Request`` and ``Response`` its errors carry.

    openai up to 2.x depends on ``httpx``; later releases depend on ``httpx2`` (the same API under a new name) and
    no longer install ``httpx``. Which one is read from openai's own declared requirements, so the ``llm`` extra
    declares only openai and this follows whatever the installed openai needs.

    Returns:
        the ``httpx2`` module when the installed openai requires it, else ``httpx``.

    Raises:
        ImportError: openai, or the HTTP library it depends on, is not installed.

    """
    import importlib
    from importlib import metadata

    try:
        requires = metadata.requires("openai") or []
    except metadata.PackageNotFoundError as exc:
        raise ImportError("No module named 'openai'") from exc
    names = {re.split(r"[^A-Za-z0-9_.-]", r, maxsplit=1)[0].lower() for r in requires}
    return importlib.import_module("httpx2" if "httpx2" in names else "httpx")


class Transport:
    """How an endpoint POSTs a chat completion: one aiohttp session, the openai client's headers and errors.

    openai's own ``client.post`` (httpx request and header models, its transport adapter, the recursive
    ``construct`` of the response) costs about twice the CPU of the request itself, and at 32 requests in
    flight that CPU, spent on one event loop, is what keeps the endpoint waiting (``python
    benchmarks/judge_speed.py`` measures it). So the request goes out here, as openai would send it: the same
    URL, JSON bytes (httpx's encoding) and headers (the client's default headers: key, user agent, platform);
    the answer comes back as openai's ``ChatCompletion`` and every failure as the exception openai raises for
    it (:class:`openai.APIStatusError` subclasses built by the client itself, :class:`openai.APITimeoutError`,
    :class:`openai.APIConnectionError`, :class:`json.JSONDecodeError` for a body that is not the JSON
    announced), so the retry and error rules read them unchanged.

    The session is opened on the endpoint's event loop at the first request; its connection pool holds
    ``concurrency`` connections (aiohttp's default of 100 would queue requests beyond it), each request is
    bounded by ``timeout_s`` for the connection and for every read.

    Args:
        client: the endpoint's ``openai.AsyncOpenAI`` client (base URL, headers, error classes).
        config: the endpoint settings (``concurrency``, ``timeout_s``).

    """

    def __init__(self, client: Any, config: EndpointConfig) -> None:
        self.url = str(client.base_url).rstrip("/") + "/chat/completions"
        self.limit = config.concurrency
        self.timeout_s = config.timeout_s
        self.headers: dict[str, str] = {}
        self._client = client
        self._session: Any = None

    def session(self) -> Any:
        """The aiohttp session, opened at the first call on the running event loop with the request headers.

        The headers are read then, as openai reads them per request (``X-Stainless-Async`` names the running loop).
        """
        if self._session is None:
            import aiohttp

            # the key: openai up to 2.x puts it in default_headers, later releases only in auth_headers
            auth = self._client.auth_headers
            headers = {**auth, **self._client.default_headers, "X-Stainless-Retry-Count": "0"}
            headers["X-Stainless-Read-Timeout"] = str(float(self.timeout_s))
            self.headers = {k: v for k, v in headers.items() if isinstance(v, str)}  # openai's Omit: left out
            timeout = aiohttp.ClientTimeout(total=None, connect=self.timeout_s, sock_read=self.timeout_s)
            connector = aiohttp.TCPConnector(limit=self.limit, limit_per_host=self.limit)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self._session

    async def close(self) -> None:
        """Close the session and its connections (nothing to do before the first request)."""
        if self._session is not None:
            await self._session.close()

    async def post(self, body: dict[str, Any]) -> Any:
        """POST one chat completion body; return openai's ``ChatCompletion``.

        A body that is not a JSON object is returned as openai returns it (see :func:`_completion`).

        Raises:
            openai.APIStatusError: HTTP 4xx / 5xx (the subclass openai raises: ``RateLimitError``, ...).
            openai.APITimeoutError: the connection or a read timed out.
            openai.APIConnectionError: any other failure to send or receive.
            json.JSONDecodeError: an HTTP 200 whose JSON body does not decode (cut short).

        """
        import openai

        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        try:
            session = self.session()
            async with session.post(self.url, data=data, headers=self.headers) as response:
                status, headers, content = response.status, response.headers, await response.read()
        except TimeoutError as exc:  # aiohttp's connection and read timeouts
            raise openai.APITimeoutError(request=self._request(data)) from exc
        except Exception as exc:  # as openai does: every other failure to send or receive
            raise openai.APIConnectionError(request=self._request(data)) from exc
        if status >= 400:
            raise self._client._make_status_error_from_response(self._response(status, headers, content, data))
        return _completion(content, headers.get("Content-Type", "*"))

    def _request(self, data: bytes) -> Any:
        return openai_http().Request("POST", self.url, headers=self.headers, content=data)

    def _response(self, status: int, headers: Any, content: bytes, data: bytes) -> Any:
        """The failed response as openai's HTTP library's ``Response``, the form openai builds its errors from."""
        kept = [(k, v) for k, v in headers.items() if k.lower() not in ("content-encoding", "content-length")]
        return openai_http().Response(status, headers=kept, content=content, request=self._request(data))


def _completion(content: bytes, content_type: str) -> Any:
    """A response body as openai's client reads it.

    A JSON object becomes a ``ChatCompletion`` (validated, or built field by field as openai does when it does not
    validate); other JSON is returned as it is; a body that is not JSON is an error when announced as JSON
    (:class:`json.JSONDecodeError`), else its text.
    """
    from openai.types.chat import ChatCompletion
    from pydantic import ValidationError

    try:
        data = json.loads(content)
    except ValueError:
        if content_type.split(";")[0].strip().endswith("json"):
            raise
        return content.decode("utf-8", "replace")
    if not isinstance(data, dict):
        return data
    try:
        return ChatCompletion.model_validate(data)
    except ValidationError:
        return ChatCompletion.construct(**data)


def _is_rate_limit(exc: BaseException) -> bool:
    return getattr(exc, "status_code", None) == 429


def _keep_final_answer(response: Any) -> None:
    """Reduce the first choice's message content to its final JSON object, when it has one (in place)."""
    choices = getattr(response, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    content = getattr(message, "content", None)
    if not isinstance(content, str):
        return
    try:
        found = json_objects(strip_reasoning(content))
    except ValueError:
        return  # left as is: the caller's parser reports it
    if found:
        message.content = json.dumps(found[-1][1], ensure_ascii=False)


class ChatClient:
    """The rubric judge's client: one chat completion per call, parsed, cached, with the endpoint's rules.

    Args:
        config: the endpoint and request settings.
        cache: where answers are cached, or None for no cache.
        environ: where the API key is read (``os.environ`` when None).

    Raises:
        ValueError: when the API key is required and missing.

    """

    def __init__(
        self, config: EndpointConfig, cache: DiskCache | None = None, environ: Mapping[str, str] | None = None
    ) -> None:
        self.config = config
        self.cache = cache
        self.endpoint = Endpoint(config, environ)
        self.stats = self.endpoint.stats

    def request_body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """Return the pinned request body for ``messages`` (model, temperature, max_tokens)."""
        return {
            "model": self.config.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        judge: str,
        prompt_version: str,
        parse: Callable[[str], T],
        repeat: int = 0,
    ) -> T:
        """Send one chat completion (or serve it from the cache) and parse its message content.

        Only answers that ``parse`` accepts are cached, so a broken answer is asked again on the next run. The cache
        key holds everything that can change the answer: the judge, its prompt version, the repeat, the whole request
        body and the endpoint's identity (:meth:`EndpointConfig.identity`: ``base_url`` with model, temperature and
        ``max_tokens``), so two servers serving a model of the same name never share answers.

        Args:
            messages: chat messages, ``[{"role": ..., "content": ...}]``.
            judge: the judge's name, part of the cache key.
            prompt_version: the judge's prompt version, part of the cache key.
            parse: turns the message content into the judge's value; raises ValueError when unusable.
            repeat: 0-based repeat index, part of the cache key (so repeats are sampled independently).

        Raises:
            JudgeCallError: after the retries are spent, on a truncated or empty answer, when ``parse`` raises
                ValueError, or when the circuit is open or the deadline has passed.
            JudgeConfigError: when the endpoint rejects the configuration (HTTP 401 / 403 / 404, unknown model).

        """
        body = self.request_body(messages)
        cache, key, hit = self.cache, "", None
        if cache is not None:  # the key hashes the whole prompt: not computed without a cache
            key = DiskCache.key(
                judge=judge, prompt_version=prompt_version, repeat=repeat, request=body, endpoint=self.config.identity()
            )
            hit = cache.get(key)
        if isinstance(hit, str):
            try:
                value = parse(hit)
            except ValueError:
                pass
            else:
                self.stats.add("cache_hits")
                return value
        try:
            text = self.endpoint.run(self._ask(body))
            try:
                value = parse(text)
            except ValueError as exc:
                reason = f"unusable answer: {exc}"
                self.endpoint.breaker.failure(reason)
                raise JudgeCallError(reason) from exc
        except JudgeCallError:
            self.stats.add("failures")
            raise
        self.endpoint.breaker.success()
        if cache is not None:
            cache.put(key, text)
        return value

    async def _ask(self, body: dict[str, Any]) -> str:
        """The message content of one completion, reduced to its final answer by :meth:`Endpoint.create`."""
        response = await self.endpoint.create(**body)
        choices = getattr(response, "choices", None)
        choice = choices[0] if isinstance(choices, list) and choices else None
        content = getattr(getattr(choice, "message", None), "content", None)
        reason = None
        if choice is None:
            reason = "the endpoint returned no choices"
        elif getattr(choice, "finish_reason", None) == "length":
            reason = f"truncated answer (finish_reason=length at max_tokens={self.config.max_tokens})"
        elif not isinstance(content, str) or not content.strip():
            reason = "empty answer from the judge model"
        if reason is not None:
            self.endpoint.breaker.failure(reason)
            raise JudgeCallError(reason)
        return content
