"""A small, real, extractive RAG pipeline over the SQuAD 2.0 paragraphs in corpus.jsonl (rag-gate's example).

Retrieval: TF-IDF (scikit-learn, sublinear tf, English stop words) over the paragraphs, cosine similarity,
top k.
Generation: extractive; the answer is the sentence of the top-k paragraphs that best matches the question
(TF-IDF cosine in the same space). Refusal: when that best sentence score is below ``refusal_threshold``, the
answer is "I don't have that information." (the retrieved chunks are still returned). Deterministic, offline.

rag-gate calls :func:`answer` once per golden case (``pipeline.python: rag:answer`` in base.yml / head.yml).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

CORPUS = Path(__file__).resolve().parent / "corpus.jsonl"
REFUSAL = "I don't have that information."
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


@functools.lru_cache(maxsize=1)
def _index(path: Path = CORPUS) -> tuple[Any, Any, list[dict]]:
    """Build the TF-IDF index once per process: (vectorizer, paragraph matrix, paragraphs)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    with path.open(encoding="utf-8") as f:
        docs = [json.loads(line) for line in f if line.strip()]
    vectorizer = TfidfVectorizer(sublinear_tf=True, stop_words="english")
    matrix = vectorizer.fit_transform([d["text"] for d in docs])
    return vectorizer, matrix, docs


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences at ., ! or ? followed by whitespace and a capital letter or digit."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def retrieve(question: str, top_k: int) -> list[dict]:
    """Retrieve the top_k paragraphs by TF-IDF cosine, best first (ties by corpus order)."""
    vectorizer, matrix, docs = _index()
    scores = (matrix @ vectorizer.transform([question]).T).toarray().ravel()
    order = np.argsort(-scores, kind="stable")[:top_k]
    return [{"id": docs[i]["id"], "text": docs[i]["text"], "score": round(float(scores[i]), 6)} for i in order]


def best_sentence(question: str, chunks: list[dict]) -> tuple[str, float]:
    """Find the sentence of ``chunks`` most similar to the question (TF-IDF cosine); ("", 0.0) if none."""
    vectorizer, _, _ = _index()
    sentences = [s for chunk in chunks for s in split_sentences(chunk["text"])]
    if not sentences:
        return "", 0.0
    scores = (vectorizer.transform(sentences) @ vectorizer.transform([question]).T).toarray().ravel()
    best = int(np.argmax(scores))  # first maximum: the higher-ranked chunk wins ties
    return sentences[best], float(scores[best])


def answer(case: dict, *, top_k: int = 5, refusal_threshold: float = 0.2) -> dict:
    """Answer one golden case.

    Args:
        case: A golden case as a dict; only ``question`` is read.
        top_k: Number of paragraphs to retrieve (≥ 1).
        refusal_threshold: Refuse when the best sentence's TF-IDF cosine to the question is below this;
            in [0, 1].

    Returns:
        ``{"answer": str, "retrieved": [{"id", "text", "score"}], "refused": bool}``.

    """
    chunks = retrieve(case["question"], top_k)
    sentence, score = best_sentence(case["question"], chunks)
    refused = score < refusal_threshold
    return {"answer": REFUSAL if refused else sentence, "retrieved": chunks, "refused": refused}
