"""The accounting of one judge's calls: live counters that hand out a :class:`gate.manifest.JudgeUsage`."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from gate.judges.llm.config import EndpointConfig
from gate.manifest import JudgeUsage


class CallStats:
    """The running accounting of one judge (one side), safe to update from several threads.

    It counts in the shape it hands out: a :class:`~gate.manifest.JudgeUsage` (requests, retries, failures, cache
    hits, tokens), to which every event adds; :meth:`usage` prices it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counted = JudgeUsage()

    def add(self, *, requests: int = 0, retries: int = 0, failures: int = 0, cache_hits: int = 0) -> None:
        """Add to the counters of requests sent, retries sent, failed calls and cache hits."""
        step = JudgeUsage(requests=requests, retries=retries, failures=failures, cache_hits=cache_hits)
        with self._lock:
            self._counted += step

    def add_usage(self, usage: Any) -> None:
        """Add the token counts of one response's ``usage`` (an object or None).

        A response without token counts is counted in ``responses_without_usage`` (its tokens are unknown).
        """
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        if not isinstance(prompt, int) and not isinstance(completion, int):
            step = JudgeUsage(responses_without_usage=1)
        else:
            step = JudgeUsage(
                input_tokens=prompt if isinstance(prompt, int) else 0,
                output_tokens=completion if isinstance(completion, int) else 0,
            )
        with self._lock:
            self._counted += step

    def usage(self, config: EndpointConfig, stopped: str | None = None) -> JudgeUsage:
        """The accounting so far, priced, with why calls are refused (``stopped``, or None).

        ``cost_usd`` = input_tokens / 1000 × ``cost_per_1k_input`` + output_tokens / 1000 ×
        ``cost_per_1k_output`` (USD, ≥ 0), or None when no price is configured.
        """
        with self._lock:
            counted = self._counted
        prices = (config.cost_per_1k_input, config.cost_per_1k_output)
        cost = None
        if prices != (None, None):
            cost_in, cost_out = (p or 0.0 for p in prices)
            cost = round(counted.input_tokens / 1000 * cost_in + counted.output_tokens / 1000 * cost_out, 6)
        return replace(counted, cost_usd=cost, stopped=stopped)
