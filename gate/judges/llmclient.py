"""The OpenAI-compatible chat client shared by the LLM-backed judges (rubric ``llm`` and ``ragas``).

It pins the model, temperature and ``max_tokens`` of every request, bounds concurrency across threads, retries
429 / 5xx / timeouts with backoff (tenacity; a server's ``Retry-After`` is honoured up to a cap), rejects
truncated answers (``finish_reason == "length"``), extracts JSON leniently (code fences, leading prose) and
caches successful answers on disk, keyed by the hash of (judge, model, prompt version, inputs, repeat index).
Failures surface as :class:`JudgeCallError` with a one-line reason; judges return ``Judgment(error=...)``.

``openai`` (extra ``[llm]``) is imported when a client is built, never at module import.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where requests go when no ``base_url`` is given."""

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
"""HTTP statuses retried with backoff (as the OpenAI SDK does), besides timeouts and connection errors."""


class JudgeCallError(Exception):
    """A judge request failed for good (retries spent, truncated, unparseable); the message is the reason."""


def default_cache_dir() -> Path:
    """Return the default judge cache directory, ``$XDG_CACHE_HOME/rag-gate/judges``.

    ``XDG_CACHE_HOME`` defaults to ``~/.cache``.
    """
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rag-gate" / "judges"


@dataclass(frozen=True)
class EndpointConfig:
    """How to reach an OpenAI-compatible endpoint and what to send; validated on construction.

    Raises:
        ValueError: on an empty model, a temperature outside [0, 2], or a non-positive limit.

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
    """Per-request timeout in seconds; a timeout is retried, then a failure."""
    max_retries: int = 4
    """Retries after the first attempt on 429 / 5xx / timeouts / connection errors (0 = no retry)."""
    backoff_s: float = 1.0
    """Initial exponential backoff in seconds (doubles per retry, with jitter)."""
    max_wait_s: float = 30.0
    """Cap in seconds on any single wait, including a server's ``Retry-After``."""
    concurrency: int = 4
    """Requests in flight at once across all threads using one client."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("option 'model' must be a non-empty string (the judge model is pinned)")
        if not isinstance(self.base_url, str) or not re.match(r"https?://", self.base_url):
            raise ValueError(f"option 'base_url' must be an http(s) URL, got {self.base_url!r}")
        if not isinstance(self.api_key_env, str) or not self.api_key_env:
            raise ValueError("option 'api_key_env' must name an environment variable")
        if not _is_number(self.temperature) or not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"option 'temperature' must be in [0, 2], got {self.temperature!r}")
        for name in ("max_tokens", "concurrency"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"option {name!r} must be an integer ≥ 1, got {value!r}")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"option 'max_retries' must be an integer ≥ 0, got {self.max_retries!r}")
        for name in ("timeout_s", "backoff_s", "max_wait_s"):
            if not _is_number(getattr(self, name)) or not getattr(self, name) > 0:
                raise ValueError(f"option {name!r} must be > 0 seconds, got {getattr(self, name)!r}")

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

    def describe(self) -> str:
        """One line naming the pinned settings (printed in run details; never the key)."""
        return (
            f"model={self.model} temperature={self.temperature:g} max_tokens={self.max_tokens} "
            f"base_url={self.base_url} timeout={self.timeout_s:g}s retries={self.max_retries} "
            f"concurrency={self.concurrency}"
        )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # not NaN


@dataclass
class CallStats:
    """Counters of one client, safe to update from several threads."""

    requests: int = 0
    """HTTP requests sent (first attempts and retries)."""
    retries: int = 0
    """Waits before a retry."""
    cache_hits: int = 0
    """Answers served from the disk cache (no request)."""
    failures: int = 0
    """Calls that ended in :class:`JudgeCallError`."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, n: int = 1) -> None:
        """Increment counter ``name`` by ``n``."""
        with self._lock:
            setattr(self, name, getattr(self, name) + n)


def is_retryable(exc: BaseException) -> bool:
    """Tell whether ``exc`` is worth retrying: a timeout, a connection error or a :data:`RETRYABLE_STATUS`."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
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


def retry_policy(config: EndpointConfig, on_retry: Callable[[], None] | None = None) -> dict[str, Any]:
    """Build the keyword arguments of ``tenacity.Retrying`` / ``AsyncRetrying`` for the retry rules.

    Stops after ``1 + max_retries`` attempts and re-raises the last error. Waits ``Retry-After`` when the
    server sends one, else exponential backoff with jitter from ``backoff_s``; every wait is capped at
    ``max_wait_s``.
    """
    backoff = wait_exponential_jitter(config.backoff_s, config.max_wait_s, jitter=config.backoff_s)

    def wait(state: RetryCallState) -> float:
        asked = retry_after_s(state.outcome.exception() if state.outcome else None)
        return min(config.max_wait_s, asked if asked is not None else backoff(state))

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
    """Return a one-line reason for a failed call (``"HTTP 500: ..."``, ``"request timed out"``)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIStatusError):
        body = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
        detail = body.get("message") if isinstance(body, dict) else None
        return f"HTTP {exc.status_code}: {_one_line(detail if isinstance(detail, str) else exc.message)}"
    return f"{type(exc).__name__}: {_one_line(str(exc))}"


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def extract_json(text: str) -> dict[str, Any]:
    """Return the first JSON object in a model's answer, tolerating code fences and leading or trailing prose.

    Args:
        text: the model's message content.

    Returns:
        The decoded object.

    Raises:
        ValueError: when no JSON object can be decoded.

    """
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for start in (i for i, ch in enumerate(candidate) if ch == "{"):
            try:
                obj, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    raise ValueError(f"no JSON object in the model's answer: {_one_line(text, 120)!r}")


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


class ChatClient:
    """A thread-safe OpenAI-compatible chat client: pinned settings, retries, bounded concurrency, cache.

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
        import openai

        self.config = config
        self.cache = cache
        self.stats = CallStats()
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key(os.environ if environ is None else environ),
            timeout=config.timeout_s,
            max_retries=0,  # tenacity retries, so that Retry-After is honoured but bounded
        )

    def request_body(self, messages: Sequence[Mapping[str, str]]) -> dict[str, Any]:
        """Return the pinned request body for ``messages`` (model, temperature, max_tokens)."""
        return {
            "model": self.config.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        judge: str,
        prompt_version: str,
        parse: Callable[[str], T],
        repeat: int = 0,
    ) -> T:
        """Send one chat completion (or serve it from the cache) and parse its message content.

        Only answers that ``parse`` accepts are cached, so a broken answer is asked again on the next run.

        Args:
            messages: chat messages, ``[{"role": ..., "content": ...}]``.
            judge: the judge's name, part of the cache key.
            prompt_version: the judge's prompt version, part of the cache key.
            parse: turns the message content into the judge's value; raises ValueError when unusable.
            repeat: 0-based repeat index, part of the cache key (so repeats are sampled independently).

        Raises:
            JudgeCallError: after the retries are spent, on a truncated or empty answer, or when ``parse``
                raises ValueError.

        """
        body = self.request_body(messages)
        key = DiskCache.key(judge=judge, prompt_version=prompt_version, repeat=repeat, request=body)
        hit = self.cache.get(key) if self.cache is not None else None
        if isinstance(hit, str):
            try:
                value = parse(hit)
            except ValueError:
                pass
            else:
                self.stats.add("cache_hits")
                return value
        try:
            text = self._send(body)
            try:
                value = parse(text)
            except ValueError as exc:
                raise JudgeCallError(f"unusable answer: {exc}") from exc
        except JudgeCallError:
            self.stats.add("failures")
            raise
        if self.cache is not None:
            self.cache.put(key, text)
        return value

    def _send(self, body: dict[str, Any]) -> str:
        import openai

        try:
            for attempt in Retrying(**retry_policy(self.config, lambda: self.stats.add("retries"))):
                with attempt, self._slots:
                    self.stats.add("requests")
                    response = self._client.chat.completions.create(**body)
        except openai.OpenAIError as exc:  # status, timeout and connection errors (httpx errors are wrapped)
            raise JudgeCallError(describe_error(exc)) from exc
        choice = response.choices[0] if response.choices else None
        if choice is None:
            raise JudgeCallError("the endpoint returned no choices")
        if choice.finish_reason == "length":
            raise JudgeCallError(f"truncated answer (finish_reason=length at max_tokens={self.config.max_tokens})")
        text = choice.message.content or ""
        if not text.strip():
            raise JudgeCallError("empty answer from the judge model")
        return text
