"""The ``ragas`` judge: ragas Faithfulness (statement extraction, then a verdict per statement).

ragas 0.4 ``ragas.metrics.collections.Faithfulness`` runs through ``llm_factory`` and an ``AsyncOpenAI``
client on an OpenAI-compatible endpoint: two chat calls per answer. Each call goes through this module's
wrapper, which adds what the shared client gives the rubric judge: bounded concurrency, retries with backoff
on 429 / 5xx / timeouts (``Retry-After`` honoured up to a cap), pinned model, temperature and
``max_tokens``, and the on-disk cache keyed by (judge, model, prompt version, inputs, repeat index). ragas
statements map to claims: verdict 1 → supported, 0 → unverifiable (ragas does not tell contradiction apart);
the score is ragas' ``MetricResult.value``.

Needs the extra ``[ragas]`` (ragas, openai, instructor); ragas telemetry is off (``RAGAS_DO_NOT_TRACK=true``).
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from gate.judges.base import ClaimVerdict, Judgment
from gate.judges.llmclient import (
    CallStats,
    DiskCache,
    EndpointConfig,
    JudgeCallError,
    describe_error,
    make_cache,
    retry_policy,
)
from gate.models import Chunk

REASKS = 2
"""Times instructor asks again, showing the model its validation error, when an answer is not the JSON asked
for (then the call fails)."""

NO_CONTEXT = ""
"""The single context given to ragas when nothing was retrieved (ragas rejects an empty list): every
statement then gets verdict 0."""


class RagasJudge:
    """ragas Faithfulness over an OpenAI-compatible endpoint (``judge: {name: ragas, model: ...}``).

    All options are keyword-only and validated here; they mean what they mean for
    :class:`gate.judges.llm.RubricJudge` (``max_tokens`` defaults to 1024: ragas' JSON answers are longer).

    Raises:
        ValueError: on an invalid option, a missing API key for OpenAI's endpoint, or when the ``[ragas]``
            extra is not installed.

    Source: Es et al. 2024, "RAGAS: Automated Evaluation of Retrieval Augmented Generation",
    arXiv:2309.15217, §3 (faithfulness).

    """

    backend = "ragas"

    def __init__(
        self,
        *,
        cache_dir: str | os.PathLike[str] | None | bool = None,
        environ: Mapping[str, str] | None = None,
        **endpoint: Any,
    ) -> None:
        self.config = EndpointConfig(**{"max_tokens": 1024, **endpoint})
        self._api_key = self.config.api_key(os.environ if environ is None else environ)
        self.cache = make_cache(cache_dir)
        self.stats = CallStats()
        self._slots = threading.BoundedSemaphore(self.config.concurrency)
        os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # before ragas is imported: no telemetry
        try:
            import ragas
            import ragas.metrics.collections  # noqa: F401 (fails early on a broken install)
        except ImportError as exc:
            raise ValueError(f"the ragas judge needs the extra: pip install 'rag-gate[ragas]' ({exc})") from exc
        self.id = f"ragas:{self.config.model}@t{self.config.temperature:g}"
        self.version = f"ragas-{ragas.__version__}-faithfulness"

    def describe(self) -> str:
        """Return the pinned settings on one line: ``ragas ragas-0.4.3-faithfulness model=... ...``."""
        return f"ragas {self.version} {self.config.describe()}"

    def judge(self, question: str, answer: str, chunks: Sequence[Chunk], *, repeat: int = 0) -> Judgment:
        """Judge ``answer`` with ragas Faithfulness; never raises for a judge failure.

        Runs its own event loop, so call it from a thread without a running loop (the scoring thread pool).

        Args:
            question: the user question.
            answer: the answer to judge; an empty answer is not judged (NaN, no error).
            chunks: retrieved chunks, rank 1 first; their texts are joined by ragas.
            repeat: 0-based repeat index (part of the cache key).

        Returns:
            One claim per ragas statement (supported or unverifiable, with ragas' reason) and
            ``score = MetricResult.value`` in [0, 1] (None when ragas found no statement); or
            ``Judgment(error=reason)`` when the endpoint fails after retries or its answers are unusable.

        """
        if not answer.strip():
            return Judgment(extra={"reason": "empty answer: nothing to judge"})
        contexts = [c.text for c in chunks] or [NO_CONTEXT]
        try:
            value, verdicts = asyncio.run(self._score(question, answer, contexts, repeat))
        except JudgeCallError as exc:
            self.stats.add("failures")
            return Judgment(error=f"{self.id}: {exc}")
        claims = tuple(
            ClaimVerdict(
                claim=v.statement,
                verdict="supported" if v.verdict == 1 else "unverifiable",
                reason=" ".join(v.reason.split()),
            )
            for v in verdicts
        )
        return Judgment(claims=claims, score=None if math.isnan(value) else value)

    async def _score(self, question: str, answer: str, contexts: list[str], repeat: int) -> tuple[float, list]:
        import openai
        from instructor.exceptions import IncompleteOutputException
        from instructor.retry import InstructorRetryException
        from ragas.llms import llm_factory
        from ragas.metrics.collections import Faithfulness
        from ragas.metrics.collections.faithfulness.util import NLIStatementOutput

        client = openai.AsyncOpenAI(
            base_url=self.config.base_url, api_key=self._api_key, timeout=self.config.timeout_s, max_retries=0
        )
        outputs: list[Any] = []
        try:
            llm = llm_factory(
                self.config.model,
                client=client,
                temperature=self.config.temperature,
                max_tokens=self.config.max_tokens,
                # instructor re-asks only on unparseable JSON; HTTP errors go to this module's retries
                max_retries=AsyncRetrying(
                    stop=stop_after_attempt(REASKS + 1),
                    retry=retry_if_exception_type(InstructorRetryException),
                    reraise=True,
                ),
            )
            llm.agenerate = self._wrap(llm.agenerate, outputs, repeat)  # as ragas' own cacher does
            result = await Faithfulness(llm=llm).ascore(
                user_input=question, response=answer, retrieved_contexts=contexts
            )
        except (
            openai.OpenAIError,
            InstructorRetryException,
            IncompleteOutputException,
            ValueError,  # includes pydantic's ValidationError; ragas' checks of empty inputs
        ) as exc:
            raise JudgeCallError(describe_error(exc)) from exc
        finally:
            await client.close()
        verdicts = [v for out in outputs if isinstance(out, NLIStatementOutput) for v in out.statements]
        return float(result.value), verdicts

    def _wrap(
        self, agenerate: Callable[[str, Any], Awaitable[Any]], outputs: list[Any], repeat: int
    ) -> Callable[[str, Any], Awaitable[Any]]:
        """Wrap ragas' ``agenerate(prompt, response_model)`` with the cache, retries and the slot bound."""

        async def call(prompt: str, response_model: Any) -> Any:
            request = {
                "model": self.config.model,
                "temperature": self.config.temperature,
                "max_tokens": self.config.max_tokens,
                "prompt": prompt,
                "response_model": response_model.__name__,
            }
            key = DiskCache.key(judge=self.backend, prompt_version=self.version, repeat=repeat, request=request)
            hit = self.cache.get(key) if self.cache is not None else None
            if hit is not None:
                try:
                    result = response_model.model_validate(hit)
                except ValueError:  # pydantic's ValidationError is a ValueError: a stale entry
                    pass
                else:
                    self.stats.add("cache_hits")
                    outputs.append(result)
                    return result
            async for attempt in AsyncRetrying(**retry_policy(self.config, lambda: self.stats.add("retries"))):
                with attempt:
                    with self._slots:  # one coroutine per thread's loop: blocking here stalls nothing else
                        self.stats.add("requests")
                        result = await agenerate(prompt, response_model)
            if self.cache is not None:
                self.cache.put(key, result.model_dump(mode="json"))
            outputs.append(result)
            return result

        return call
