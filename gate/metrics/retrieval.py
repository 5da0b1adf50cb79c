"""Per-case retrieval metrics: hit rate@k, recall@k, precision@k, reciprocal rank (MRR), nDCG@k.

Conventions shared by every function here (they match trec_eval and ranx on runs without duplicates):

- ``retrieved_ids`` is the ranked list the pipeline returned, rank 1 first, any length.
- ``expected_ids`` is the set of relevant document ids (binary relevance); order and repeats do not matter.
- **Duplicates.** A document that appears more than once in ``retrieved_ids`` counts once, at its first
  rank; its later occurrences stay in the list as non-relevant entries (they use up a slot of the top k, as
  they do in the context a generator receives). trec_eval and ranx cannot express such a run (a run maps each
  document to one score), so this rule is ours.
- No expected documents (an out-of-domain case) → NaN: the metric does not apply.
- ``k`` must be an integer ≥ 1; when ``k`` exceeds ``len(retrieved_ids)`` the whole list is used.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")


def _relevance(retrieved_ids: Sequence[str], expected: set[str]) -> list[bool]:
    """Per rank: True when the id is relevant and appears here for the first time (duplicates count once)."""
    seen: set[str] = set()
    out = []
    for doc_id in retrieved_ids:
        out.append(doc_id in expected and doc_id not in seen)
        seen.add(doc_id)
    return out


def hit_rate_at_k(retrieved_ids: Sequence[str], expected_ids: Iterable[str], k: int) -> float:
    """Hit rate@k: 1 when at least one expected document is in the top k, else 0.

    Formula: ``HR@k = 1[ |top_k(retrieved) ∩ expected| > 0 ]``; averaged over cases it is the share of
    questions whose evidence was retrieved (trec_eval's ``success_k``, ranx's ``hit_rate@k``).

    Args:
        retrieved_ids: Ranked document ids, rank 1 first, any length.
        expected_ids: Relevant document ids (binary relevance).
        k: Cut-off, integer ≥ 1; larger than the list means the whole list.

    Returns:
        0.0 or 1.0; NaN when ``expected_ids`` is empty.

    Raises:
        ValueError: When ``k`` is not an integer ≥ 1.

    Source: trec_eval ``success`` measure (NIST, trec_eval 9.0); ranx ``hit_rate`` (Bassani, ECIR 2022,
        doi:10.1007/978-3-030-99739-7_30).

    """
    _check_k(k)
    expected = set(expected_ids)
    if not expected:
        return math.nan
    return float(any(_relevance(retrieved_ids[:k], expected)))


def recall_at_k(retrieved_ids: Sequence[str], expected_ids: Iterable[str], k: int) -> float:
    """Recall@k: the share of the expected documents found in the top k.

    Formula: ``R@k = |top_k(retrieved) ∩ expected| / |expected|``.

    Args:
        retrieved_ids: Ranked document ids, rank 1 first, any length.
        expected_ids: Relevant document ids (binary relevance); repeats count once.
        k: Cut-off, integer ≥ 1; larger than the list means the whole list.

    Returns:
        A value in [0, 1]; NaN when ``expected_ids`` is empty.

    Raises:
        ValueError: When ``k`` is not an integer ≥ 1.

    Source: Manning, Raghavan & Schütze, "Introduction to Information Retrieval" (2008), §8.3, recall;
        trec_eval ``recall_k``.

    """
    _check_k(k)
    expected = set(expected_ids)
    if not expected:
        return math.nan
    return sum(_relevance(retrieved_ids[:k], expected)) / len(expected)


def precision_at_k(retrieved_ids: Sequence[str], expected_ids: Iterable[str], k: int) -> float:
    """Precision@k: relevant documents in the top k divided by k (trec_eval's ``P_k`` convention).

    Formula: ``P@k = |top_k(retrieved) ∩ expected| / k``. The divisor is k even when fewer than k documents
    were retrieved, so a short list is not rewarded (trec_eval ``P_k``, ranx ``precision@k``).

    Args:
        retrieved_ids: Ranked document ids, rank 1 first, any length.
        expected_ids: Relevant document ids (binary relevance).
        k: Cut-off, integer ≥ 1.

    Returns:
        A value in [0, 1]; NaN when ``expected_ids`` is empty.

    Raises:
        ValueError: When ``k`` is not an integer ≥ 1.

    Source: Manning, Raghavan & Schütze, "Introduction to Information Retrieval" (2008), §8.4, precision at k;
        trec_eval ``P_k``.

    """
    _check_k(k)
    expected = set(expected_ids)
    if not expected:
        return math.nan
    return sum(_relevance(retrieved_ids[:k], expected)) / k


def reciprocal_rank(retrieved_ids: Sequence[str], expected_ids: Iterable[str]) -> float:
    """Reciprocal rank: 1 / (rank of the first expected document), over the whole list; MRR is its mean.

    Formula: ``RR = 1 / min{ r : retrieved[r] ∈ expected }`` (ranks from 1), 0 when none is retrieved.

    Args:
        retrieved_ids: Ranked document ids, rank 1 first, any length.
        expected_ids: Relevant document ids (binary relevance).

    Returns:
        A value in [0, 1] (1, 1/2, 1/3, ... or 0); NaN when ``expected_ids`` is empty.

    Source: Voorhees, "The TREC-8 Question Answering Track Report" (TREC 1999), mean reciprocal rank;
        trec_eval ``recip_rank``.

    """
    expected = set(expected_ids)
    if not expected:
        return math.nan
    for rank, doc_id in enumerate(retrieved_ids, start=1):
        if doc_id in expected:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(retrieved_ids: Sequence[str], expected_ids: Iterable[str], k: int) -> float:
    """nDCG@k with binary relevance, linear gain and log2 discount (Järvelin & Kekäläinen 2002).

    Formula: ``DCG@k = Σ_{r=1..k} rel_r / log2(r + 1)`` with ``rel_r ∈ {0, 1}`` (linear gain, so binary
    relevance gives gain 1 per relevant document); ``IDCG@k = Σ_{r=1..min(|expected|, k)} 1 / log2(r + 1)``;
    ``nDCG@k = DCG@k / IDCG@k``. Same as trec_eval ``ndcg_cut_k`` and ranx ``ndcg@k`` on binary judgments.

    Args:
        retrieved_ids: Ranked document ids, rank 1 first, any length.
        expected_ids: Relevant document ids (binary relevance).
        k: Cut-off, integer ≥ 1; larger than the list means the whole list.

    Returns:
        A value in [0, 1]; NaN when ``expected_ids`` is empty.

    Raises:
        ValueError: When ``k`` is not an integer ≥ 1.

    Source: Järvelin & Kekäläinen, "Cumulated gain-based evaluation of IR techniques", ACM TOIS 20(4), 2002,
        doi:10.1145/582415.582418.

    """
    _check_k(k)
    expected = set(expected_ids)
    if not expected:
        return math.nan
    dcg = sum(1.0 / math.log2(rank + 1) for rank, rel in enumerate(_relevance(retrieved_ids[:k], expected), 1) if rel)
    idcg = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(expected), k) + 1))
    return dcg / idcg
