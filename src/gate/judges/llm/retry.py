"""How a judge request fails: the error classes, which failures are retried and how long to wait, the breaker.

- retried with exponential backoff (tenacity; a server's ``Retry-After`` honoured up to ``max_wait_s``): timeouts,
  connection errors, unreadable bodies (an HTTP 200 whose JSON is cut short), HTTP 408 / 409 / 429 / 5xx;
- an authentication or configuration failure (HTTP 401 / 403 / 404, unknown model) stops the run at once:
  :class:`JudgeConfigError`, an :class:`~gate.errors.EvaluationError` (exit code 3);
- a judge that is down or too slow is given up on (:class:`Breaker`): after ``max_consecutive_failures`` failed
  requests or calls in a row the circuit opens, and past ``deadline_s`` seconds from the judge's first request
  every remaining call fails at once (no request) — each such call is a judge failure with that reason
  (:class:`JudgeCallError`), so the run finishes, every row is recorded and the error budget decides (see the
  README, "Judges").
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from tenacity import RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential, wait_random

from gate.errors import EvaluationError
from gate.judges.llm.config import EndpointConfig
from gate.judges.llm.parse import one_line

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


def retry_policy(config: EndpointConfig, left: Callable[[], float] | None = None) -> dict[str, Any]:
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

    return {
        "stop": stop_after_attempt(1 + config.max_retries),
        "wait": wait,
        "retry": retry_if_exception(is_retryable),
        "reraise": True,
    }


def describe_error(exc: BaseException) -> str:
    """Return a one-line reason for a failed request (``"HTTP 500: ..."``, ``"request timed out"``)."""
    import openai

    if isinstance(exc, openai.APITimeoutError | TimeoutError) and not refused(exc):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return "APIConnectionError: Connection error."  # openai's message (a refused connection: see refused())
    if isinstance(exc, openai.APIStatusError):
        body = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
        detail = body.get("message") if isinstance(body, dict) else None
        return f"HTTP {exc.status_code}: {one_line(detail if isinstance(detail, str) else exc.message)}"
    if isinstance(exc, json.JSONDecodeError):
        return f"unreadable response body (not the JSON announced, cut short?): {one_line(str(exc))}"
    return f"{type(exc).__name__}: {one_line(str(exc))}"


def refused(exc: BaseException) -> bool:
    """Whether a failure was caused by a refused or reset connection (:class:`ConnectionError` among its causes).

    openai's aiohttp client (httpx-aiohttp 0.2) reports a refused connection as a connect timeout
    (:class:`openai.APITimeoutError`): the reason given must not say "timed out" for a closed port.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ConnectionError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


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
