"""How an endpoint POSTs a chat completion: one aiohttp session, the openai client's headers and errors."""

from __future__ import annotations

import json
import re
from typing import Any

from gate.judges.llm.config import EndpointConfig


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
