"""A LangChain RAG pipeline for rag-gate: BM25 over chunks of the bundled SQuAD corpus, extractive answer. Offline.

Chunking: ``RecursiveCharacterTextSplitter.split_documents`` copies each document's ``metadata`` to its chunks but
not ``Document.id``, so the paragraph id goes into the metadata (``doc_id``) before splitting, and every retrieved
chunk is reported under that id — the id the golden set's ``expected_doc_ids`` name.

Retrieval: ``langchain_community.retrievers.BM25Retriever`` (rank_bm25) over the chunks, top ``top_k`` chunks.
Generation: extractive — the sentence of the retrieved chunks that holds the largest share of the question's
content words; below ``refusal_threshold`` the pipeline refuses. No model, no network.

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
    """Lower-cased word tokens without stop words (BM25's tokenizer and the extractive answer's)."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


@functools.lru_cache(maxsize=4)
def _retriever(top_k: int) -> Any:
    """Load the corpus, split it into chunks that keep their document id, and index them with BM25 (once)."""
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.documents import Document
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    with CORPUS.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    # The document id lives in the metadata: the splitter copies metadata to every chunk (it drops Document.id).
    docs = [Document(page_content=r["text"], metadata={"doc_id": r["id"], "title": r["title"]}) for r in rows]
    splitter = RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=50, add_start_index=True)
    chunks = splitter.split_documents(docs)
    return BM25Retriever.from_documents(chunks, k=top_k, preprocess_func=terms)


def retrieve(question: str, top_k: int = 5) -> list[dict]:
    """The top_k chunks for ``question``, best first, each under its source document's id."""
    return [{"id": d.metadata["doc_id"], "text": d.page_content} for d in _retriever(top_k).invoke(question)]


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
    """Answer one golden case: ``{"answer", "retrieved": [{"id", "text"}], "refused"}``."""
    chunks = retrieve(case["question"], top_k)
    sentence, share = extract(case["question"], chunks)
    refused = share < refusal_threshold
    return {"answer": REFUSAL if refused else sentence, "retrieved": chunks, "refused": refused}
