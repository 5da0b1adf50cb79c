"""The OpenAI-compatible endpoint shared by the LLM-backed judges (rubric ``llm``, ``pairwise`` and ``ragas``).

:class:`Endpoint` owns one ``openai.AsyncOpenAI`` client and one connection pool
(openai's ``DefaultAioHttpClient``: openai's requests and errors over aiohttp) on a private event loop (one daemon
thread), shared by every thread of a judge: no client, connection or event loop is built per call. Each request
goes through :meth:`Endpoint.create`, which

- pins the model, temperature and ``max_tokens`` (the judge builds the body);
- bounds the requests in flight (``concurrency``) and each request's total time (``timeout_s``: the client's
  connect / read / write / pool timeouts, and a wall-clock bound on the whole request);
- retries, stops on a configuration failure and gives up on a judge that is down or too slow by the rules of
  :mod:`gate.judges.llm.retry` (backoff, :class:`~gate.judges.llm.retry.JudgeConfigError`, circuit breaker and
  deadline);
- counts requests, retries, failures, cache hits and the tokens of the API's ``usage``
  (:class:`~gate.judges.llm.usage.CallStats`), priced per 1,000 tokens when prices are configured;
- returns openai's ``ChatCompletion`` with its answer reduced to its final JSON object
  (:func:`~gate.judges.llm.parse.keep_final_answer`; instructor and ragas read it), or, for the rubric and pairwise
  judges (:meth:`Endpoint.complete`), only what they read of it (:class:`~gate.judges.llm.completion.Completion`).
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from tenacity import AsyncRetrying

from gate.errors import InputError
from gate.judges.llm.completion import Completion, read_completion
from gate.judges.llm.config import EndpointConfig
from gate.judges.llm.parse import keep_final_answer
from gate.judges.llm.retry import (
    Breaker,
    JudgeCallError,
    JudgeConfigError,
    config_error,
    describe_error,
    is_retryable,
    retry_policy,
)
from gate.judges.llm.usage import CallStats
from gate.manifest import JudgeUsage

T = TypeVar("T")


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The body of an endpoint's loop thread: run until stopped, then release the loop's resources."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


def _shutdown(loop: asyncio.AbstractEventLoop, thread: threading.Thread, client: Any) -> None:
    """Close an endpoint's openai client on its loop, then stop the loop (a finalizer: holds no endpoint)."""
    if loop.is_closed() or not thread.is_alive():
        return

    async def close() -> None:
        try:
            await client.close()
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
        InputError: the ``llm`` extra (openai with its ``aiohttp`` extra) is not installed.

    """

    def __init__(self, config: EndpointConfig, environ: Mapping[str, str] | None = None) -> None:
        try:
            import openai
            from openai.types.chat import ChatCompletion

            http_client = openai.DefaultAioHttpClient()  # openai without its aiohttp extra raises RuntimeError
        except (ImportError, AttributeError, RuntimeError) as exc:
            raise InputError(f"an LLM judge needs the llm extra: pip install 'rag-gate[llm]' ({exc})") from None

        self.config = config
        self.stats = CallStats()
        self.breaker = Breaker(config.max_consecutive_failures, config.deadline_s)
        self.client = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=config.api_key(os.environ if environ is None else environ),
            timeout=config.timeout_s,  # connect, read, write and pool
            max_retries=0,  # retried here, so that Retry-After is honoured but bounded
            http_client=http_client,  # its pool (1,000 connections) never queues below the concurrency bound (≤ 256)
        )
        self._completion = ChatCompletion
        self.client.chat.completions.create = self.create  # instructor wraps this
        self._retry_policy = retry_policy(config, left=self._seconds_left)
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
                self._close = weakref.finalize(self, _shutdown, loop, thread, self.client)
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

    def usage(self) -> JudgeUsage:
        """The accounting so far (:meth:`CallStats.usage <gate.judges.llm.usage.CallStats.usage>`).

        ``stopped`` says why calls are refused (circuit open, deadline passed), or is None.
        """
        return self.stats.usage(self.config, self.breaker.open_reason)

    async def create(self, **body: Any) -> Any:
        """Send one chat completion with the retry, timeout, breaker and deadline rules; return the response.

        The message content is reduced to the final answer and, when it holds a JSON object, to the last one
        (:func:`~gate.judges.llm.parse.keep_final_answer`), so that a parser downstream (instructor) reads the
        final JSON and never a draft. Token usage is counted.

        Raises:
            JudgeConfigError: on HTTP 401 / 403 / 404 or an unknown model (also for every later call).
            JudgeCallError: when retries are spent, on a non-retryable HTTP error, or when the circuit is open
                or the deadline has passed.

        """
        response = await self._send(body, self._post)
        self.stats.add_usage(getattr(response, "usage", None))
        keep_final_answer(response)
        return response

    async def complete(self, body: dict[str, Any]) -> Completion:
        """Send one chat completion like :meth:`create`; return what a judge reads of it (:class:`Completion`).

        The same request, rules and accounting as :meth:`create`, but the body is read by
        :func:`~gate.judges.llm.completion.read_completion` instead of openai's ``ChatCompletion`` (whose construction
        was about 15 % of this loop's CPU per request, which at 32 requests in flight delays the others:
        ``benchmarks/perf.py``, section ``judges-cli``), and the content is returned as the model wrote it (the caller
        takes its final answer, off this loop).

        Raises:
            JudgeConfigError: as :meth:`create`.
            JudgeCallError: as :meth:`create`; also for a JSON body cut short, once the retries are spent.

        """
        completion = await self._send(body, self._post_completion)
        self.stats.add_usage(completion.usage)
        return completion

    async def _send(self, body: dict[str, Any], post: Callable[[dict[str, Any]], Awaitable[T]]) -> T:
        """``post(body)`` under the retry rules; the first attempt is made without tenacity (see :meth:`_retry`)."""
        try:
            try:
                return await self._attempt(body, post)
            except (JudgeCallError, JudgeConfigError):
                raise
            except Exception as exc:  # noqa: BLE001 - classified in _attempt; tenacity would retry exactly these
                if self.config.max_retries == 0 or not is_retryable(exc):
                    raise
                first = exc
            return await self._retry(body, post, first)
        except (JudgeCallError, JudgeConfigError):
            raise
        except Exception as exc:  # noqa: BLE001 - the reasons were classified per attempt in _attempt
            raise JudgeCallError(describe_error(exc)) from exc

    async def _retry(
        self, body: dict[str, Any], post: Callable[[dict[str, Any]], Awaitable[T]], first: BaseException
    ) -> T:
        """The attempts after a retryable failure ``first`` of the first one, by tenacity's rules.

        tenacity's first attempt re-raises ``first`` (no request): its wait (``Retry-After``, backoff), its retry
        count and its stop after ``1 + max_retries`` attempts are those of a loop that had made the first request
        itself. Building tenacity's state for every call cost this loop about 5 % of its CPU per request.
        """
        pending = [first]
        async for attempt in AsyncRetrying(**self._retry_policy):
            with attempt:
                if pending:
                    raise pending.pop()
                result = await self._attempt(body, post, retry=True)
        return result

    def _seconds_left(self) -> float:
        try:
            return self.breaker.check()
        except JudgeCallError:
            return 0.0

    async def _post(self, body: dict[str, Any]) -> Any:
        """POST one chat completion body with openai's client; return its ``ChatCompletion``.

        ``client.post`` sends the body as it is (the judge built it): ``chat.completions.create`` would first walk it
        against openai's parameter types, about a millisecond of this loop's CPU per request, which at 32 requests
        in flight delays the others (``benchmarks/perf.py``, section ``judges-cli``). The response, the headers and
        every error (:class:`openai.APIStatusError` subclasses, :class:`openai.APITimeoutError`,
        :class:`openai.APIConnectionError`, :class:`json.JSONDecodeError` for a body cut short) are openai's own.
        """
        return await self.client.post("/chat/completions", cast_to=self._completion, body=body)

    async def _post_completion(self, body: dict[str, Any]) -> Completion:
        """POST one chat completion like :meth:`_post`; read its body with :func:`read_completion`.

        With ``cast_to=str`` openai returns the body's text without building a model (``str`` is a ``cast_to`` of
        every openai release from 1.89 on, whatever HTTP library it ships on: 3.x moved to httpx2); its errors are
        raised as for :meth:`_post`, and a JSON body cut short raises the same :class:`json.JSONDecodeError`.
        """
        return read_completion(await self.client.post("/chat/completions", cast_to=str, body=body))

    async def _attempt(
        self, body: dict[str, Any], post: Callable[[dict[str, Any]], Awaitable[T]], retry: bool = False
    ) -> T:
        left = self.breaker.check()
        async with self._slots:
            left = self.breaker.check()  # the wait for a slot may have outlived the deadline (or the circuit opened)
            self.stats.add(requests=1, retries=int(retry))  # a retry is counted when it is sent, not when awaited
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for wraps the request in a task of its own, two
                # more passes of this loop per request, during which the other requests' answers are handled first
                async with asyncio.timeout(min(self.config.timeout_s, left)):
                    return await post(body)
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


def _is_rate_limit(exc: BaseException) -> bool:
    return getattr(exc, "status_code", None) == 429
