"""The settings of an OpenAI-compatible judge endpoint: where it is, what to send, when to give up, what it costs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where requests go when no ``base_url`` is given."""


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


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # not NaN
