"""The batched scoring path (``gate.scoring.score_all``): equal to the per-case reference and to ranx, GC paused
(frozen for judge calls).

``score_all`` computes the retrieval metrics of every prediction at once (``batch_values``); ``score_one`` without
``given`` computes each value with the per-case metric functions of ``gate.metrics.retrieval`` (the readable
reference). Both must give the same rows on the edge cases: duplicate retrieved ids, no expected ids, k beyond the
list, failed predictions, out-of-domain cases, more than one repeat, more queries than one block of
``expected_ranks``.
"""

from __future__ import annotations

import gc
import json
import math
import threading
import weakref

import numpy as np
import pytest
from oracles import make_ranx_fixture as ranx_oracle

from gate.config import GatePolicy
from gate.judges import get_judge
from gate.metrics import resolve
from gate.metrics import retrieval as retrieval_metrics
from gate.models import CHUNK_ID, Chunk, GoldenCase, Prediction, Score
from gate.scoring import CHUNK, gc_frozen, gc_paused, score_all, score_one

RETRIEVAL = (
    "hit_rate@1", "hit_rate@10", "recall@3", "recall@10", "precision@1", "precision@10", "mrr", "ndcg@3", "ndcg@10",
)  # fmt: skip


def _row(score: Score) -> tuple:
    """A score as a comparable tuple (NaN → None: NaN never equals NaN)."""
    return score.id, score.repeat, score.metric, None if math.isnan(score.value) else score.value, score.error


def _edge_cases(n_cases: int, repeats: int, seed: int = 7):
    """Golden cases and predictions over 15 documents: every edge case of the retrieval metrics occurs."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(15)]
    golden, table = [], {}
    for i in range(n_cases):
        ood = i % 9 == 4
        no_expected = i % 11 == 6  # in domain, but no expected document: the metrics do not apply
        n_expected = 0 if ood or no_expected else int(rng.integers(1, 5))
        expected = tuple(rng.choice(docs, n_expected))  # with replacement: repeated expected ids
        golden.append(GoldenCase(f"c{i}", "q?", expected, out_of_domain=ood, reference_answers=("Paris",)))
        for r in range(repeats):
            ranked = rng.choice(docs, int(rng.integers(0, 15)))  # duplicates; 0..14 long, so k = 10 may exceed it
            error = "pipeline crashed" if rng.random() < 0.1 else None
            chunks = tuple(Chunk(str(d), "text") for d in ranked)
            table[(f"c{i}", r)] = Prediction(f"c{i}", r, answer="Paris.", retrieved=chunks, error=error)
    return golden, table


@pytest.mark.parametrize(
    "names",
    [RETRIEVAL, (*RETRIEVAL, "error_rate", "answer_f1")],
    ids=["retrieval only", "with per-case metrics"],
)
def test_batched_rows_equal_the_per_case_functions(names):
    """Every row of score_all equals score_one's with the per-case functions: values, errors, order."""
    golden, table = _edge_cases(700, repeats=2)  # 1,400 predictions: more than one block of expected_ranks
    policy = GatePolicy(metrics=names, gated=names)
    metrics = [resolve(n) for n in names]
    ours = score_all(golden, table, 2, policy, judge=None)
    reference = [
        row for case in golden for r in range(2) for row in score_one(case, table[(case.id, r)], metrics, policy, None)
    ]
    assert [_row(s) for s in ours] == [_row(s) for s in reference]
    assert all(type(s) is Score for s in ours)
    # The edge cases occurred: failures, not-applicable rows, hits and misses at k = 1.
    values = {(s.id, s.repeat, s.metric): s for s in ours}
    assert sum(s.error == "prediction failed: pipeline crashed" for s in ours) >= 100 * len(RETRIEVAL)
    assert any(math.isnan(s.value) and s.error is None for s in ours)
    hits = [s.value for s in ours if s.metric == "hit_rate@1" and s.valid]
    assert 0 < sum(hits) < len(hits)
    assert any(len(p.retrieved) < 10 and values[(p.id, p.repeat, "recall@10")].valid for p in table.values())
    assert any(len(set(p.retrieved_ids)) < len(p.retrieved) for p in table.values())


def test_batched_rows_equal_ranx_on_the_stored_example_run():
    """score_all on the stored TF-IDF run gives ranx's stored values (tests/oracles/make_ranx_fixture.py)."""
    fixture = json.loads(ranx_oracle.FIXTURE.read_text(encoding="utf-8"))
    run = fixture["run"]
    for qrels_name, theirs in fixture["scores"].items():
        qrels = fixture["qrels"][qrels_name]
        golden = [GoldenCase(q, "q?", tuple(qrels[q])) for q in run]
        table = {(q, 0): Prediction(q, retrieved=tuple(Chunk(d) for d in ranked)) for q, ranked in run.items()}
        names = tuple(sorted(theirs))
        scores = score_all(golden, table, 1, GatePolicy(metrics=names, gated=names), judge=None)
        assert len(scores) == len(run) * len(names) and len(names) == 17
        for score in scores:
            assert score.value == pytest.approx(theirs[score.metric][score.id], abs=1e-12), (qrels_name, score)


def test_expected_ranks_reads_ids_through_key_and_checks_lengths():
    ranked = [["a", "b", "a", "c"], [], ["c"]]
    expected = [("c", "a", "x"), ("a",), ()]
    by_id = retrieval_metrics.expected_ranks(ranked, expected)
    chunks = [tuple(Chunk(d) for d in ids) for ids in ranked]
    by_chunk = retrieval_metrics.expected_ranks(chunks, expected, key=CHUNK_ID)
    for ranks in (by_id, by_chunk):
        assert ranks.query.tolist() == [0, 0] and ranks.rank.tolist() == [1, 4]  # a at 1 (not 3), c at 4
        assert ranks.n_expected.tolist() == [3, 1, 0]
    with pytest.raises(ValueError, match="2 ranked lists for 3 sets of expected ids"):
        retrieval_metrics.expected_ranks(ranked[:2], expected)


@pytest.fixture
def collector_enabled():
    """Leave the garbage collector enabled whatever a test does."""
    yield
    gc.enable()


def test_scoring_without_judge_calls_pauses_the_collector_and_restores_it(collector_enabled):
    golden, table = _edge_cases(50, repeats=1)
    seen = []
    score_all(golden, table, 1, GatePolicy(metrics=RETRIEVAL), None, on_scores=lambda _: seen.append(gc.isenabled()))
    assert len(seen) == 50 and not any(seen)
    assert gc.isenabled()
    gc.disable()  # a caller that paused it itself keeps it paused
    score_all(golden, table, 1, GatePolicy(metrics=RETRIEVAL), None)
    assert not gc.isenabled()


def test_scoring_with_judge_calls_keeps_the_collector_running_on_new_objects(collector_enabled):
    """Judge calls wait on the network for minutes: the collector keeps running meanwhile, over the objects the
    calls create; those alive before (the libraries, the golden set) are frozen until the calls end."""
    golden, table = _edge_cases(20, repeats=1)
    policy = GatePolicy(metrics=("hit_rate@1", "faithfulness"))
    seen = []
    score_all(
        golden, table, 1, policy, get_judge(policy.judge),
        on_scores=lambda _: seen.append((gc.isenabled(), gc.get_freeze_count() > 0)),
    )  # fmt: skip
    assert len(seen) == 20 and all(enabled and frozen for enabled, frozen in seen)
    assert gc.get_freeze_count() == 0


def test_serial_scoring_with_the_lexical_judge_refreezes_each_chunk_on_one_thread(collector_enabled):
    """In one process, the lexical judge (CPU-bound) is called from this thread, not from judge_concurrency threads
    that would take turns; after every CHUNK predictions what is alive (the judge's caches) is frozen anew."""
    golden, table = _edge_cases(3 * CHUNK, repeats=1)
    policy = GatePolicy(metrics=("hit_rate@1", "faithfulness"), judge_concurrency=8)
    seen = []
    judge = get_judge(policy.judge)
    judged_on = set()  # the threads the judge is called from (an observer around the real judge)
    judge_answer = judge.judge

    def observed(*args, **kwargs):
        judged_on.add(threading.get_ident())
        return judge_answer(*args, **kwargs)

    object.__setattr__(judge, "judge", observed)  # the judge is a frozen dataclass
    score_all(golden, table, 1, policy, judge, jobs=1, on_scores=lambda _: seen.append(gc.get_freeze_count()))
    assert len(seen) == 3 * CHUNK and judged_on == {threading.get_ident()}
    # the count of frozen objects steps up right after each chunk (the previous chunk's survivors frozen too)
    assert seen[CHUNK] > seen[CHUNK - 1] and seen[2 * CHUNK] > seen[2 * CHUNK - 1]
    assert gc.get_freeze_count() == 0  # all unfrozen on leaving


class _Node:
    """An object that can be put in a reference cycle and watched with a weak reference."""

    def __init__(self) -> None:
        self.me = self


def test_gc_frozen_collects_new_cycles_and_puts_off_the_old_ones(collector_enabled):
    old = _Node()
    old_gone = weakref.ref(old)
    with gc_frozen():
        assert gc.get_freeze_count() > 0
        new = _Node()
        new_gone = weakref.ref(new)
        del new, old  # both are unreachable cycles now
        gc.collect()
        assert new_gone() is None  # created in the block: collected as usual
        assert old_gone() is not None  # frozen: left alone within the block
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert old_gone() is None  # back in the oldest generation: collected, not leaked


def test_gc_frozen_leaves_a_caller_s_freeze_and_survives_an_exception(collector_enabled):
    with pytest.raises(RuntimeError), gc_frozen():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_frozen():
            pass
        # the embedding process's freeze is not undone (unfreeze would leave 0); frozen objects may still be freed
        # by reference counting meanwhile (other threads), so the count is not compared exactly
        assert gc.get_freeze_count() > frozen // 2
    finally:
        gc.unfreeze()


def test_gc_paused_restores_the_collector_on_an_exception(collector_enabled):
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()
