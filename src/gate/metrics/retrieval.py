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

:func:`per_case` adapts each to the registry's per-case function; the ``*_many`` functions compute them for many
queries at once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TypeVar

import numpy as np

from gate.metrics.context import ScoreContext

Doc = TypeVar("Doc")


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


def per_case(fn: Callable[..., float], *, uses_k: bool = True) -> Callable[[ScoreContext], float]:
    """Adapt a pure retrieval metric to a :class:`ScoreContext` (NaN on out-of-domain cases).

    Args:
        fn: One of the functions above, ``fn(retrieved_ids, expected_ids, k)`` (or without ``k``).
        uses_k: Whether ``fn`` takes the cut-off (False for :func:`reciprocal_rank`).

    Returns:
        The per-case function, with ``fn``'s name and docstring.

    """

    @functools.wraps(fn)
    def scored(ctx: ScoreContext) -> float:
        if ctx.case.out_of_domain:
            return math.nan
        args = (ctx.prediction.retrieved_ids, ctx.case.expected_doc_ids)
        return fn(*args, ctx.k) if uses_k else fn(*args)

    return scored


# ------------------------------------------------------------------------------------------- many queries at once


@dataclass(frozen=True)
class ExpectedRanks:
    """Where each query's expected documents first appear in its ranked list, for Q queries at once.

    Every retrieval metric here is a function of these ranks alone (binary relevance, duplicates at their first
    rank), so the metrics of many queries are computed from them with array operations: the ``*_many`` functions.
    """

    query: np.ndarray
    """shape (H,) int: the query of each hit (an expected document that was retrieved), ascending."""
    rank: np.ndarray
    """shape (H,) int: its 1-based first rank, ascending within a query."""
    n_expected: np.ndarray
    """shape (Q,) int: distinct expected documents per query (0 → the metrics are NaN)."""

    @property
    def n_queries(self) -> int:
        """Q, the number of queries."""
        return int(self.n_expected.size)


_BLOCK = 1024
"""Queries whose ids :func:`expected_ranks` gathers in one list (about 100k references at 100 documents each)."""


def expected_ranks(
    retrieved: Sequence[Sequence[Doc]],
    expected: Sequence[Iterable[str]],
    key: Callable[[Doc], str] | None = None,
) -> ExpectedRanks:
    """First ranks of the expected documents of Q queries.

    The ids of a block of queries are gathered into one list by a C-level ``map``, and each distinct expected
    document is found in its query's slice of that list by ``list.index`` (a C-level search that stops at the
    first occurrence, so a duplicate counts at its first rank): no Python-level step per retrieved document.

    Args:
        retrieved: Q ranked lists of documents, rank 1 first, any length: the ids themselves (``key`` None) or
            objects whose id ``key`` gives (e.g. ``operator.attrgetter("id")`` on :class:`gate.models.Chunk`).
        expected: Q collections of relevant ids (repeats count once; empty: the metrics are NaN).
        key: The id of a retrieved document; None when the documents are ids.

    Returns:
        The :class:`ExpectedRanks`.

    Raises:
        ValueError: When ``retrieved`` and ``expected`` differ in length.
    """
    if len(retrieved) != len(expected):
        raise ValueError(f"{len(retrieved)} ranked lists for {len(expected)} sets of expected ids")
    queries: list[int] = []
    ranks: list[int] = []
    n_expected = [0] * len(expected)
    for first in range(0, len(expected), _BLOCK):
        lists = retrieved[first : first + _BLOCK]
        docs = chain.from_iterable(lists)
        find = list(docs if key is None else map(key, docs)).index
        start = 0
        for q, (ranked, wanted) in enumerate(zip(lists, expected[first : first + _BLOCK], strict=True), first):
            stop = start + len(ranked)
            if wanted:
                distinct = set(wanted)
                n_expected[q] = len(distinct)
                found = []
                for doc in distinct:
                    try:
                        found.append(find(doc, start, stop) - start + 1)
                    except ValueError:
                        continue
                found.sort()
                queries += [q] * len(found)
                ranks += found
            start = stop
    return ExpectedRanks(
        np.array(queries, dtype=np.int64), np.array(ranks, dtype=np.int64), np.array(n_expected, dtype=np.int64)
    )


def _hits_at(ranks: ExpectedRanks, k: int | None) -> np.ndarray:
    """Hits within the top k per query, shape (Q,) float (k None: the whole list)."""
    weights = np.ones(ranks.rank.size) if k is None else (ranks.rank <= k).astype(float)
    return np.bincount(ranks.query, weights=weights, minlength=ranks.n_queries)


def _not_applicable(ranks: ExpectedRanks, values: np.ndarray) -> np.ndarray:
    return np.where(ranks.n_expected > 0, values, np.nan)


def hit_rate_at_k_many(ranks: ExpectedRanks, k: int) -> np.ndarray:
    """:func:`hit_rate_at_k` of every query, shape (Q,): 1 when a hit is within the top k (NaN: no expected)."""
    _check_k(k)
    return _not_applicable(ranks, (_hits_at(ranks, k) > 0).astype(float))


def recall_at_k_many(ranks: ExpectedRanks, k: int) -> np.ndarray:
    """:func:`recall_at_k` of every query, shape (Q,): hits within the top k / distinct expected documents."""
    _check_k(k)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _not_applicable(ranks, _hits_at(ranks, k) / ranks.n_expected)


def precision_at_k_many(ranks: ExpectedRanks, k: int) -> np.ndarray:
    """:func:`precision_at_k` of every query, shape (Q,): hits within the top k / k."""
    _check_k(k)
    return _not_applicable(ranks, _hits_at(ranks, k) / k)


def reciprocal_rank_many(ranks: ExpectedRanks) -> np.ndarray:
    """:func:`reciprocal_rank` of every query, shape (Q,): 1 / the first hit's rank, 0 without a hit."""
    first = np.zeros(ranks.n_queries)
    starts = np.flatnonzero(np.r_[True, np.diff(ranks.query) != 0]) if ranks.query.size else np.array([], int)
    first[ranks.query[starts]] = 1.0 / ranks.rank[starts]
    return _not_applicable(ranks, first)


@functools.cache
def _discounts(n: int) -> np.ndarray:
    """1 / log2(r + 1) for r = 0..n (index 0 unused), computed as :func:`ndcg_at_k` computes each term."""
    return np.array([0.0] + [1.0 / math.log2(r + 1) for r in range(1, n + 1)])


def ndcg_at_k_many(ranks: ExpectedRanks, k: int) -> np.ndarray:
    """:func:`ndcg_at_k` of every query, shape (Q,): DCG of the hits within the top k / the ideal DCG.

    The terms are summed in rank order from 0, as the per-query function sums them, so the values are equal.
    """
    _check_k(k)
    deepest = max(int(ranks.rank.max(initial=0)), int(ranks.n_expected.max(initial=0)), 1)
    discounts = _discounts(min(k, deepest))
    within = ranks.rank <= k
    dcg = np.bincount(ranks.query[within], weights=discounts[ranks.rank[within]], minlength=ranks.n_queries)
    ideal = np.cumsum(discounts)[np.minimum(ranks.n_expected, k)]
    with np.errstate(invalid="ignore", divide="ignore"):
        return _not_applicable(ranks, dcg / ideal)


# ---------------------------------------------------------------------------------- ids that never match

ID_ADVICE = (
    "Chunk ids? Keep the document id (LangChain metadata, LlamaIndex node.ref_doc_id, Haystack meta['source_id']; "
    "README: Retrieved ids)"
)
"""The likely cause of retrieved ids that never match (LlamaIndex node UUIDs, Haystack content hashes, LangChain
splitter chunks without ``Document.id``) and how to keep document ids through chunking (kept short: the comment cuts
a line at 300 characters; the README has the details)."""
ID_LIMIT = 60
"""Characters an id keeps in a mismatch example (:func:`mismatch_example`); a longer one loses its middle."""


def shown_id(doc_id: str, limit: int = ID_LIMIT) -> str:
    """An id as a mismatch example shows it: quoted, hidden characters escaped, at most ``limit`` characters inside.

    What tells a chunk id from a document id sits at either end (a ``#chunk-3`` suffix, a path prefix), and
    what makes two ids differ invisibly is a hidden character: so every control and invisible character is
    written as its escape (:func:`gate.sanitize.shown`), and an id longer than ``limit`` (after escaping) keeps its
    beginning and its end around an ellipsis.
    """
    from gate.sanitize import shown

    text = shown(doc_id)
    if len(text) > limit:
        tail = (limit - 1) // 2
        text = text[: limit - 1 - tail] + "…" + text[len(text) - tail :]
    return f'"{text}"'


def mismatch_example(case_id: str, expected: Sequence[str], retrieved: Sequence[str]) -> str:
    """One case's expected and retrieved ids side by side, as the warnings show them.

    Returns:
        ``"CASE" expects "DOC", got "CHUNK"`` (the first of each list; ids as :func:`shown_id` writes them, the
        case id cut to 30 characters): at most 170 characters, so that the warning that carries it keeps it whole
        within the comment's 300 characters per line.
    """
    return f"{shown_id(case_id, 30)} expects {shown_id(expected[0])}, got {shown_id(retrieved[0])}"
