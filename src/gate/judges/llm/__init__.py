"""The LLM-backed judges and the OpenAI-compatible client they share.

- :mod:`~gate.judges.llm.rubric`: the rubric judge (backend ``llm``);
- :mod:`~gate.judges.llm.client`: :class:`~gate.judges.llm.client.ChatClient`, one parsed and cached chat completion
  per call (the rubric and pairwise judges);
- :mod:`~gate.judges.llm.endpoint`: :class:`~gate.judges.llm.endpoint.Endpoint`, one ``openai.AsyncOpenAI`` client on
  a private event loop, every request (openai's ``DefaultAioHttpClient``) under the retry, timeout, breaker and deadline
  rules (also ragas');
- :mod:`~gate.judges.llm.config`: :class:`~gate.judges.llm.config.EndpointConfig`, the endpoint settings;
- :mod:`~gate.judges.llm.retry`: the error classes, the retry rules and the circuit breaker;
- :mod:`~gate.judges.llm.usage`: the live counters of a judge's calls, read as a :class:`gate.manifest.JudgeUsage`;
- :mod:`~gate.judges.llm.parse`: a model's final answer (reasoning dropped, last JSON object);
- :mod:`~gate.judges.llm.cache`: the on-disk answer cache.

``openai`` (extra ``[llm]``) is imported when an endpoint is built, never at module import.
"""
