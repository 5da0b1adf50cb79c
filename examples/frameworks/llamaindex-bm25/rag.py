"""A LlamaIndex RAG pipeline for rag-gate: BM25 over nodes of the bundled SQuAD corpus, extractive answer. Offline.

Chunking: ``SentenceSplitter`` gives every node a random UUID (``node.node_id``) and records the source document's
id as ``node.ref_doc_id``. That is the ``id_`` given to the ``Document`` (random too unless set), so each document
is built with ``id_=<paragraph id>`` and every retrieved node is reported under ``node.ref_doc_id`` — the id the
golden set's ``expected_doc_ids`` name.

Retrieval: ``llama_index.retrievers.bm25.BM25Retriever`` (bm25s, English stemming) over the nodes, top ``top_k``.
Generation: extractive — the sentence of the retrieved nodes that holds the largest share of the question's content
words; below ``refusal_threshold`` the pipeline refuses. No LLM, no embedding model, no network.

rag-gate calls :func:`answer` once per golden case (``pipeline.python: rag:answer`` in rag-gate.yml).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

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


def nodes() -> list[Any]:
    """The corpus as LlamaIndex nodes: ~100-word chunks whose ``ref_doc_id`` is the paragraph id."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    with CORPUS.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    # id_ = the paragraph id: nodes point back to it as node.ref_doc_id (a random UUID when id_ is not set).
    docs = [Document(text=r["text"], id_=r["id"], metadata={"title": r["title"]}) for r in rows]
    # A whitespace tokenizer counts chunk sizes in words (the default, tiktoken, is not needed for that).
    splitter = SentenceSplitter(chunk_size=100, chunk_overlap=10, tokenizer=str.split)
    return splitter.get_nodes_from_documents(docs)


@functools.lru_cache(maxsize=4)
def _retriever(top_k: int) -> Any:
    """Index the nodes with BM25 once per process and top_k."""
    import Stemmer
    from llama_index.retrievers.bm25 import BM25Retriever

    return BM25Retriever.from_defaults(
        nodes=nodes(), similarity_top_k=top_k, stemmer=Stemmer.Stemmer("english"), language="english"
    )


def retrieve(question: str, top_k: int = 5) -> list[dict]:
    """The top_k nodes for ``question``, best first, each under its source document's id (``ref_doc_id``)."""
    hits = _retriever(top_k).retrieve(question)
    return [{"id": n.node.ref_doc_id, "text": n.node.get_content(), "score": float(n.score)} for n in hits]


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
