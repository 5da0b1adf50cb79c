"""The rubric and pairwise judges' client: one chat completion per call, parsed and cached, through an endpoint."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gate.judges.llm.cache import DiskCache, make_cache
from gate.judges.llm.config import EndpointConfig
from gate.judges.llm.endpoint import Endpoint
from gate.judges.llm.parse import final_answer
from gate.judges.llm.retry import JudgeCallError
from gate.manifest import JudgeUsage

T = TypeVar("T")


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
                self.stats.add(cache_hits=1)
                return value
        try:
            text = final_answer(self.endpoint.run(self._ask(body)))  # here, not on the endpoint's busy loop
            try:
                value = parse(text)
            except ValueError as exc:
                reason = f"unusable answer: {exc}"
                self.endpoint.breaker.failure(reason)
                raise JudgeCallError(reason) from exc
        except JudgeCallError:
            self.stats.add(failures=1)
            raise
        self.endpoint.breaker.success()
        if cache is not None:
            cache.put(key, text)
        return value

    async def _ask(self, body: dict[str, Any]) -> str:
        """The message content of one completion (:meth:`Endpoint.complete`); a missing or cut answer fails."""
        completion = await self.endpoint.complete(body)
        if not completion.has_choice:
            reason = "the endpoint returned no choices"
        elif completion.finish_reason == "length":
            reason = f"truncated answer (finish_reason=length at max_tokens={self.config.max_tokens})"
        elif completion.content is not None and completion.content.strip():
            return completion.content
        else:
            reason = "empty answer from the judge model"
        self.endpoint.breaker.failure(reason)
        raise JudgeCallError(reason)


def warn_if_self_judging(config: EndpointConfig, generator_model: str | None, judge: str) -> str | None:
    """Warn (``UserWarning``) when the judge's model is also the generator's, and return the message; else None.

    LLM judges favour their own answers (self-preference bias: Panickssery et al. 2024, arXiv:2404.13076), so a
    judge should not grade the model it is. Model names are compared without case or surrounding spaces.
    """
    if generator_model is None or generator_model.strip().lower() != config.model.strip().lower():
        return None
    message = (
        f"the {judge} model {config.model!r} is also the generator: LLM judges favour their own answers; "
        "use a different judge model"
    )
    warnings.warn(message, UserWarning, stacklevel=3)
    return message


class EndpointJudge:
    """What every judge calling an OpenAI-compatible endpoint shares: settings, client, id, identity, usage, close.

    Subclasses set :attr:`backend`, :attr:`version`, :attr:`prompt_version`, :attr:`default_max_tokens` and
    :attr:`role` (how the self-judging warning names it).

    Args:
        cache_dir: the answer cache's folder (None: the default, False: no cache).
        generator_model: the model that wrote the answers, if known; the same name as ``model`` warns.
        environ: where the API key is read (``os.environ`` when None).
        **endpoint: :class:`EndpointConfig`'s settings (model, base_url, temperature, max_tokens, ...).

    Raises:
        ValueError: on an invalid setting or a missing API key for OpenAI's endpoint.
    """

    backend: str
    version: str
    prompt_version: str
    default_max_tokens: int
    role: str

    def __init__(
        self,
        *,
        cache_dir: str | os.PathLike[str] | None | bool = None,
        generator_model: str | None = None,
        environ: Mapping[str, str] | None = None,
        **endpoint: Any,
    ) -> None:
        self.config = EndpointConfig(**{"max_tokens": self.default_max_tokens, **endpoint})
        self.client = ChatClient(self.config, make_cache(cache_dir), environ)
        self.id = f"{self.backend}:{self.config.model}@t{self.config.temperature:g}"
        message = warn_if_self_judging(self.config, generator_model, self.role)
        self.warnings: list[str] = [message] if message else []

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that changes a grade, JSON-ready.

        Name, version, prompt version, model, base_url, temperature and max_tokens.
        """
        return {
            "name": self.backend, "version": self.version, "prompt_version": self.prompt_version,
            **self.config.identity(),
        }  # fmt: skip

    def usage(self) -> JudgeUsage:
        """This judge's accounting so far (see :class:`gate.judges.llm.usage.CallStats`).

        Requests, retries, failures, cache hits, input / output tokens, estimated cost (USD or None) and
        ``stopped`` (why calls are refused: circuit open, deadline; or None).
        """
        return self.client.endpoint.usage()

    def close(self) -> None:
        """Release the judge's HTTP connections and event loop (optional: also done when it is collected)."""
        self.client.endpoint.close()
