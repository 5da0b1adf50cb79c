"""Your RAG pipeline, as rag-gate calls it: replace the body of :func:`answer` with a call to your system.

The contract (README "Configuration"): rag-gate imports this module once per worker process (this directory is
the working directory and the first entry of ``sys.path``) and calls ``answer(case, **options)`` once per golden
case and repeat, where ``options`` is ``pipeline.options`` of rag-gate.yml. It may be ``async def`` (awaited
on one event loop per worker process, so an async client made once is reused).

``case`` is the golden case as a dict: ``id``, ``question``, ``expected_doc_ids``, ``reference_answers``,
``out_of_domain``, ``tags`` (and ``criteria`` / ``cluster`` when the golden set has them). Do not use the expected
documents or reference answers to answer: they are what you are graded against.

Return a dict::

    {
        "answer": "…",                                         # the generated answer
        "retrieved": [{"id": "doc-1", "text": "…", "score": 0.8}, …],  # rank 1 first; ids as in expected_doc_ids
        "refused": False,                                      # optional: True when the system declines to answer
        "cost_usd": 0.0004,                                    # optional: what the call cost
        "tokens": 512,                                         # optional
    }

Raise an exception when the pipeline fails on a case: rag-gate records the error for that case (it counts against
the head) and goes on. What the function prints goes to stderr. rag-gate measures the latency of each call; the
first call of each worker (imports, loading an index) is recorded apart as a cold start.

This stub answers from a two-document corpus by word overlap, so that ``rag-gate run`` works right away.
"""

from __future__ import annotations

import re
from typing import Any

DOCS = {
    "france": "Paris is the capital of France. The Seine flows through Paris.",
    "italy": "Rome is the capital of Italy. According to legend, Rome was founded in 753 BC.",
}
REFUSAL = "I don't have that information."


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 3}


def answer(case: dict[str, Any], *, top_k: int = 3) -> dict[str, Any]:
    """Answer one golden case: retrieve by word overlap, answer with the best sentence, refuse without evidence."""
    question = _words(case["question"])
    ranked = sorted(DOCS, key=lambda d: (-len(question & _words(DOCS[d])), d))[:top_k]
    retrieved = [{"id": d, "text": DOCS[d], "score": float(len(question & _words(DOCS[d])))} for d in ranked]
    sentences = [s for d in ranked for s in re.split(r"(?<=\.)\s+", DOCS[d])]
    best = max(sentences, key=lambda s: len(question & _words(s)), default="")
    if len(question & _words(best)) < 2:
        return {"answer": REFUSAL, "retrieved": retrieved, "refused": True}
    return {"answer": best, "retrieved": retrieved, "refused": False}
