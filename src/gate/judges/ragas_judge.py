"""The ``ragas`` judge: ragas Faithfulness (statement extraction, then a verdict per statement).

ragas 0.4 ``ragas.metrics.collections.Faithfulness`` runs through ``llm_factory`` and the judge's
:class:`~gate.judges.llm.endpoint.Endpoint`: one ``AsyncOpenAI`` client, one instructor-patched LLM and one metric
object for the judge's whole life, on the endpoint's private event loop (two chat calls per answer). Every
HTTP request goes through the endpoint's rules (bounded concurrency, per-request timeout, retries with backoff,
circuit breaker, deadline, configuration errors stop the run, token accounting), and instructor reads only the
final JSON object of each answer (reasoning blocks and drafts removed by the endpoint), validated against ragas'
pydantic models; an answer that does not validate is asked again ``REASKS`` times, then fails. Validated answers
are cached on disk, keyed by (judge, model, prompt version, inputs, repeat index). ragas statements map to
claims: verdict 1 → supported, 0 → unverifiable (ragas does not tell contradiction apart); the score is ragas'
``MetricResult.value``.

Needs the extra ``[ragas]`` (ragas, openai, instructor); ragas telemetry is off (``RAGAS_DO_NOT_TRACK=true``).
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from gate.errors import GateError
from gate.judges.base import ClaimVerdict, Judgment
from gate.judges.llm.cache import DiskCache, make_cache
from gate.judges.llm.config import EndpointConfig
from gate.judges.llm.endpoint import Endpoint
from gate.judges.llm.retry import JudgeCallError, describe_error
from gate.manifest import JudgeUsage
from gate.metrics.generation import strip_citations
from gate.models import Chunk

REASKS = 2
"""Times instructor asks again, showing the model its validation error, when an answer is not the JSON asked
for (then the call fails)."""

NO_CONTEXT = ""
"""The single context given to ragas when nothing was retrieved (ragas rejects an empty list): every
statement then gets verdict 0."""


@dataclass
class _Call:
    """What one ``judge()`` call needs inside ragas' ``agenerate``: its repeat index and where outputs go."""

    repeat: int
    outputs: list[Any] = field(default_factory=list)


_CALL: ContextVar[_Call] = ContextVar("rag_gate_ragas_call")
"""The current call, per asyncio task (each ``judge()`` runs as its own task on the endpoint's loop)."""


class _Reasks(AsyncRetrying):
    """instructor's re-ask policy with a fresh state per call.

    tenacity keeps an iteration's state on the ``AsyncRetrying`` object (and per thread), so one object shared
    by concurrent calls on one event loop would mix their attempts; each iteration runs on a copy.
    """

    def __aiter__(self) -> AsyncRetrying:
        return AsyncRetrying.__aiter__(self.copy())


@functools.cache
def _prepared(response_model: type) -> type:
    """Instructor's ``OpenAISchema`` subclass of a ragas output model, built once with its JSON schema.

    Given a plain pydantic model, instructor builds that subclass (a pydantic ``create_model``) and its JSON
    schema on every call, about a third of the CPU of a ragas call; given the subclass, it skips the first,
    and the schema (asked without arguments) is served from here. The prompt and the parsing are unchanged.
    """
    from instructor.function_calls import openai_schema

    prepared = openai_schema(response_model)
    schema = json.dumps(prepared.model_json_schema())
    generate = prepared.model_json_schema

    def model_json_schema(cls: type, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return generate(*args, **kwargs) if args or kwargs else json.loads(schema)  # a fresh copy, at C speed

    prepared.model_json_schema = classmethod(model_json_schema)
    return prepared


class _SchemaOnce:
    """A ragas prompt's output model whose JSON schema (asked without arguments) is computed once.

    A ragas prompt puts its output model's JSON schema in every prompt it writes and pydantic builds it anew
    each time (a fifth of the CPU of a ragas call); the prompt text is byte for byte the same.
    """

    def __init__(self, model: Any) -> None:
        self._model = model
        self._schema = json.dumps(model.model_json_schema())

    def model_json_schema(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The model's JSON schema: the one computed at construction when asked without arguments (a fresh copy)."""
        return self._model.model_json_schema(*args, **kwargs) if args or kwargs else json.loads(self._schema)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class RagasJudge:
    """ragas Faithfulness over an OpenAI-compatible endpoint (``judge: {name: ragas, model: ...}``).

    All options are keyword-only and validated here; they mean what they mean for
    :class:`gate.judges.llm.rubric.RubricJudge` (``max_tokens`` defaults to 1024: ragas' JSON answers are longer).

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
        self.cache = make_cache(cache_dir)
        os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # before ragas is imported: no telemetry
        try:
            import ragas
            from instructor.retry import InstructorRetryException
            from ragas.llms import llm_factory
            from ragas.metrics.collections import Faithfulness
        except ImportError as exc:
            raise ValueError(f"the ragas judge needs the extra: pip install 'rag-gate[ragas]' ({exc})") from exc
        self.endpoint = Endpoint(self.config, environ)
        self.stats = self.endpoint.stats
        self.id = f"ragas:{self.config.model}@t{self.config.temperature:g}"
        self.version = f"ragas-{ragas.__version__}-faithfulness+final-json"
        llm = llm_factory(
            self.config.model,
            client=self.endpoint.client,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            # instructor re-asks only on an answer that does not validate; HTTP errors are the endpoint's
            max_retries=_Reasks(
                stop=stop_after_attempt(REASKS + 1),
                retry=retry_if_exception_type(InstructorRetryException),
                reraise=True,
            ),
        )
        llm.agenerate = self._cached(llm.agenerate)  # as ragas' own cacher does
        self._metric = Faithfulness(llm=llm)
        for prompt in (self._metric.statement_generator_prompt, self._metric.nli_statement_prompt):
            prompt.output_model = _SchemaOnce(prompt.output_model)  # this metric's prompts only

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that changes a score, JSON-ready.

        Name, version (ragas' and this judge's), model, base_url, temperature, max_tokens and the re-asks.
        """
        return {"name": self.backend, "version": self.version, "reasks": REASKS, **self.config.identity()}

    def close(self) -> None:
        """Release the judge's HTTP connections and event loop (optional: also done when it is collected)."""
        self.endpoint.close()

    def usage(self) -> JudgeUsage:
        """This judge's accounting so far (see :class:`gate.judges.llm.usage.CallStats`).

        Requests (re-asks included), retries, failures, cache hits, input / output tokens, estimated cost (USD
        or None) and ``stopped`` (why calls are refused: circuit open, deadline; or None).
        """
        return self.endpoint.usage()

    def judge(self, question: str, answer: str, chunks: Sequence[Chunk], *, repeat: int = 0) -> Judgment:
        """Judge ``answer`` with ragas Faithfulness; never raises for a judge failure.

        Thread-safe: runs on the endpoint's event loop, whatever thread calls it (even one with a running loop).

        Args:
            question: the user question.
            answer: the answer to judge, as written; its citation markers are removed first
                (:func:`gate.metrics.generation.strip_citations`); an empty answer is not judged (NaN, no error).
            chunks: retrieved chunks, rank 1 first; their texts are joined by ragas.
            repeat: 0-based repeat index (part of the cache key).

        Returns:
            One claim per ragas statement (supported or unverifiable, with ragas' reason) and
            ``score = MetricResult.value`` in [0, 1] (None when ragas found no statement); or
            ``Judgment(error=reason)`` when the endpoint fails after retries, its answers are unusable, the
            circuit is open or the judge's deadline has passed.

        Raises:
            JudgeConfigError: the endpoint rejected the configuration (HTTP 401 / 403 / 404, unknown model):
                the run must stop (exit code 3).

        """
        answer = strip_citations(answer, [c.id for c in chunks])  # "[d1]" is no statement
        if not answer.strip():
            return Judgment(extra={"reason": "empty answer: nothing to judge"})
        contexts = [c.text for c in chunks] or [NO_CONTEXT]
        try:
            value, verdicts = self.endpoint.run(self._score(question, answer, contexts, repeat))
        except JudgeCallError as exc:  # the endpoint's reasons (already counted by its breaker)
            self.stats.add(failures=1)
            return Judgment(error=f"{self.id}: {exc}")
        except GateError:
            raise
        except Exception as exc:  # noqa: BLE001 - an answer instructor or ragas cannot use fails this case only
            reason = describe_error(exc)
            self.endpoint.breaker.failure(reason)
            self.stats.add(failures=1)
            return Judgment(error=f"{self.id}: {reason}")
        self.endpoint.breaker.success()
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
        from ragas.metrics.collections.faithfulness.util import NLIStatementOutput

        call = _Call(repeat)
        _CALL.set(call)  # this task's own context
        result = await self._metric.ascore(user_input=question, response=answer, retrieved_contexts=contexts)
        verdicts = [v for out in call.outputs if isinstance(out, NLIStatementOutput) for v in out.statements]
        return float(result.value), verdicts

    def _cached(self, agenerate: Callable[[str, Any], Awaitable[Any]]) -> Callable[[str, Any], Awaitable[Any]]:
        """Wrap ragas' ``agenerate(prompt, response_model)`` with the disk cache and collect its outputs."""

        async def call(prompt: str, response_model: Any) -> Any:
            current = _CALL.get()
            cache, key, result = self.cache, "", None
            if cache is not None:
                request = {
                    "model": self.config.model,
                    "temperature": self.config.temperature,
                    "max_tokens": self.config.max_tokens,
                    "prompt": prompt,
                    "response_model": response_model.__name__,
                }
                key = DiskCache.key(judge=self.backend, prompt_version=self.version, repeat=current.repeat,
                                    request=request)  # fmt: skip
                hit = cache.get(key)
                if hit is not None:
                    try:
                        result = response_model.model_validate(hit)
                    except ValueError:  # pydantic's ValidationError is a ValueError: a stale entry
                        result = None
                    else:
                        self.stats.add(cache_hits=1)
            if result is None:
                result = await agenerate(prompt, _prepared(response_model))
                if cache is not None:
                    cache.put(key, result.model_dump(mode="json"))
            current.outputs.append(result)
            return result

        return call
