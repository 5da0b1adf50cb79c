"""A Haystack 2 RAG pipeline for rag-gate: BM25 over splits of the bundled SQuAD corpus, extractive answer. Offline.

Chunking: ``Document.id`` is a hash of the content, so every split gets a new one; ``DocumentSplitter`` copies the
parent's ``meta`` to each split and adds the parent's id as ``meta["source_id"]``. So each parent is built with
``id=<paragraph id>`` and every retrieved split is reported under ``meta["source_id"]`` — the id the golden set's
``expected_doc_ids`` name.

Retrieval: a ``Pipeline`` with ``InMemoryBM25Retriever`` over an ``InMemoryDocumentStore`` of the splits, top
``top_k``. Generation: extractive — the sentence of the retrieved splits that holds the largest share of the
question's content words; below ``refusal_threshold`` the pipeline refuses. No model, no network (telemetry is
switched off in rag-gate.yml's ``pipeline.env``).

rag-gate calls :func:`answer` once per golden case (``pipeline.python: rag:answer`` in rag-gate.yml).
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # before haystack is imported: no network at run time

CORPUS = Path(__file__).resolve().parents[2] / "squad" / "corpus.jsonl"
REFUSAL = "I don't have that information."
_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_STOP = frozenset(
    "a an and are as at be been by did do does for from had has have how in is it its of on or that the their this "
    "to was were what when where which who whom whose why with".split()
)


def terms(text: str) -> list[str]:
    """Lower-cased word tokens without stop words (the extractive answer's)."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def splits() -> list[Any]:
    """The corpus as Haystack documents of ~80 words, each with its parent's id in ``meta["source_id"]``."""
    from haystack import Document
    from haystack.components.preprocessors import DocumentSplitter

    with CORPUS.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    # id = the paragraph id: the splitter records it in each split's meta["source_id"] (split ids are content hashes).
    parents = [Document(id=r["id"], content=r["text"], meta={"title": r["title"]}) for r in rows]
    splitter = DocumentSplitter(split_by="word", split_length=80, split_overlap=10)
    return splitter.run(documents=parents)["documents"]


@functools.lru_cache(maxsize=4)
def _pipeline(top_k: int) -> Any:
    """A retrieval pipeline over an in-memory BM25 store of the splits, built once per process and top_k."""
    from haystack import Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore(bm25_algorithm="BM25Okapi")
    store.write_documents(splits())
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=top_k))
    return pipeline


def retrieve(question: str, top_k: int = 5) -> list[dict]:
    """The top_k splits for ``question``, best first, each under its parent's id (``meta["source_id"]``)."""
    docs = _pipeline(top_k).run({"retriever": {"query": question}})["retriever"]["documents"]
    return [{"id": d.meta["source_id"], "text": d.content, "score": float(d.score)} for d in docs]


def extract(question: str, chunks: list[dict]) -> tuple[str, float]:
    """The sentence of ``chunks`` holding the largest share of the question's content words, and that share."""
    wanted = set(terms(question))
    best, best_share = "", 0.0
    for chunk in chunks:
        for sentence in _SENTENCE_END.split(chunk["text"]):
            share = len(wanted & set(terms(sentence))) / len(wanted) if wanted else 0.0
            if share > best_share:  # first maximum: the higher-ranked chunk wins ties
                best, best_share = sentence.strip(), share
    return best, best_share


def answer(case: dict, *, top_k: int = 5, refusal_threshold: float = 0.4) -> dict:
    """Answer one golden case: ``{"answer", "retrieved": [{"id", "text", "score"}], "refused"}``."""
    chunks = retrieve(case["question"], top_k)
    sentence, share = extract(case["question"], chunks)
    refused = share < refusal_threshold
    return {"answer": REFUSAL if refused else sentence, "retrieved": chunks, "refused": refused}
