"""Retrieval metrics against pytrec_eval and ranx on a real TF-IDF run over SQuAD 2.0, plus hand cases.

The run is built over the bundled example (examples/squad); when the team's full SQuAD 2.0 set is present
(../shared/data/squad2-rag, 4,597 questions) the same checks also run on 300 of its questions. ranx's values on
the example run are stored in tests/oracles/ranx_squad_example.json (made by tests/oracles/make_ranx_fixture.py:
ranx compiles with numba for about a minute); the live ranx computation runs with ``-m slow``.
"""

from __future__ import annotations

import inspect
import json
import math

import numpy as np
import pytest
from helpers import EXAMPLE, SHARED_DATA
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import make_ranx_fixture as ranx_oracle
from oracles.make_ranx_fixture import CUTOFFS, rank_scores, tfidf_run

from gate.metrics import DEFAULT_METRICS, METRICS, Metric, resolve, score_case
from gate.metrics.retrieval import hit_rate_at_k, ndcg_at_k, precision_at_k, recall_at_k, reciprocal_rank
from gate.models import Chunk, GoldenCase, Prediction

DATASETS = {"example": EXAMPLE, "squad2-rag": SHARED_DATA / "squad2-rag"}


@pytest.fixture(
    scope="module",
    params=["example", pytest.param("squad2-rag", marks=pytest.mark.shared_data("squad2-rag"))],
)
def tfidf(request) -> tuple[str, dict[str, list[str]], dict[str, dict[str, set[str]]]]:
    """(data set name, run, {"paragraph": qrels, "article": qrels}) for a real TF-IDF top-10 run."""
    run, paragraph, article = tfidf_run(DATASETS[request.param])
    return request.param, run, {"paragraph": paragraph, "article": article}


@pytest.fixture(scope="module")
def ranx_fixture() -> dict:
    return json.loads(ranx_oracle.FIXTURE.read_text(encoding="utf-8"))


def _ours(run: dict[str, list[str]], qrels: dict[str, set[str]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for qid, ranked in run.items():
        rel = qrels[qid]
        row = {"mrr": reciprocal_rank(ranked, rel)}
        for k in CUTOFFS:
            row[f"hit_rate@{k}"] = hit_rate_at_k(ranked, rel, k)
            row[f"recall@{k}"] = recall_at_k(ranked, rel, k)
            row[f"precision@{k}"] = precision_at_k(ranked, rel, k)
            row[f"ndcg@{k}"] = ndcg_at_k(ranked, rel, k)
        out[qid] = row
    return out


def _assert_matches(ours: dict[str, dict[str, float]], theirs: dict[str, dict[str, float]]) -> None:
    """``theirs``: metric → query id → value (ranx layout)."""
    for metric in ranx_oracle.METRICS:
        assert set(theirs[metric]) == set(ours), metric
        for qid, value in theirs[metric].items():
            assert ours[qid][metric] == pytest.approx(value, abs=1e-9), (qid, metric)


@pytest.mark.parametrize("qrels_name", ["paragraph", "article"])
def test_matches_pytrec_eval_per_query(tfidf, qrels_name):
    import pytrec_eval

    _, run, judged = tfidf
    qrels = judged[qrels_name]
    cut = ",".join(map(str, CUTOFFS))
    names = {f"P_{k}": f"precision@{k}" for k in CUTOFFS}
    names |= {f"recall_{k}": f"recall@{k}" for k in CUTOFFS}
    names |= {f"ndcg_cut_{k}": f"ndcg@{k}" for k in CUTOFFS}
    names |= {f"success_{k}": f"hit_rate@{k}" for k in CUTOFFS}
    names["recip_rank"] = "mrr"
    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: {d: 1 for d in rel} for q, rel in qrels.items()},
        {f"P.{cut}", f"recall.{cut}", f"ndcg_cut.{cut}", f"success.{cut}", "recip_rank"},
    )
    theirs = evaluator.evaluate(rank_scores(run))
    ours = _ours(run, qrels)
    assert set(theirs) == set(ours) and len(ours) >= 90
    for qid, row in theirs.items():
        for trec_name, our_name in names.items():
            assert ours[qid][our_name] == pytest.approx(row[trec_name], abs=1e-9), (qid, our_name)
    # The run is not trivial: both hits and misses occur at every cut-off.
    hits5 = [r["hit_rate@5"] for r in ours.values()]
    assert 0 < sum(hits5) < len(hits5)


@pytest.mark.parametrize("qrels_name", ["paragraph", "article"])
def test_matches_ranx_per_query_stored(ranx_fixture, qrels_name):
    """Our metrics on the stored run against ranx's stored values (tests/oracles/make_ranx_fixture.py)."""
    run = ranx_fixture["run"]
    qrels = {q: set(rel) for q, rel in ranx_fixture["qrels"][qrels_name].items()}
    assert len(run) >= 90 and set(qrels) == set(run)
    _assert_matches(_ours(run, qrels), ranx_fixture["scores"][qrels_name])


@pytest.mark.slow
@pytest.mark.parametrize("qrels_name", ["paragraph", "article"])
def test_matches_ranx_per_query_live(tfidf, ranx_fixture, qrels_name):
    """ranx computed now (numba compilation on a fresh environment); on the example run it gives the stored values."""
    name, run, judged = tfidf
    theirs = ranx_oracle.ranx_scores(run, judged[qrels_name])
    _assert_matches(_ours(run, judged[qrels_name]), theirs)
    if name == "example":
        assert run == ranx_fixture["run"], "the example run changed: rerun tests/oracles/make_ranx_fixture.py"
        stored = ranx_fixture["scores"][qrels_name]
        assert set(theirs) == set(stored)
        for metric, values in theirs.items():
            assert values == pytest.approx(stored[metric], abs=1e-12), metric


# Hand-computed values. retrieved = [d1, d2, d3, d4, d5], expected = {d1, d3, d6}.
RANKED = ["d1", "d2", "d3", "d4", "d5"]
EXPECTED = {"d1", "d3", "d6"}


def test_hand_computed_values():
    assert hit_rate_at_k(RANKED, EXPECTED, 1) == 1.0
    assert hit_rate_at_k(["x", "d3"], EXPECTED, 1) == 0.0
    assert recall_at_k(RANKED, EXPECTED, 5) == pytest.approx(2 / 3)
    assert precision_at_k(RANKED, EXPECTED, 5) == pytest.approx(2 / 5)
    assert precision_at_k(RANKED, EXPECTED, 10) == pytest.approx(2 / 10)  # trec_eval P_k divides by k
    assert reciprocal_rank(["d2", "d4", "d3"], EXPECTED) == pytest.approx(1 / 3)
    assert reciprocal_rank(["d2"], EXPECTED) == 0.0
    # DCG@5 = 1/log2(2) + 1/log2(4) = 1.5; IDCG@5 over min(3, 5) = 3 ranks = 1 + 1/log2(3) + 1/2.
    assert ndcg_at_k(RANKED, EXPECTED, 5) == pytest.approx(1.5 / (1.5 + 1 / math.log2(3)), abs=1e-12)
    assert ndcg_at_k(RANKED, EXPECTED, 5) == pytest.approx(0.703918, abs=1e-6)
    # k = 2: IDCG over min(3, 2) = 2 ranks; DCG@2 = 1.
    assert ndcg_at_k(RANKED, EXPECTED, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)), abs=1e-12)
    # Järvelin & Kekäläinen's discount: a single relevant document at rank 3 of 3 has nDCG = 1/log2(4) = 0.5.
    assert ndcg_at_k(["a", "b", "c"], {"c"}, 3) == pytest.approx(0.5)


def test_k_beyond_the_list_uses_the_whole_list():
    assert recall_at_k(["d3"], EXPECTED, 100) == pytest.approx(1 / 3)
    assert hit_rate_at_k([], EXPECTED, 5) == 0.0
    assert ndcg_at_k([], EXPECTED, 5) == 0.0


def test_duplicates_count_once_at_their_first_rank():
    ranked = ["a", "a", "b"]
    assert hit_rate_at_k(ranked, {"a", "b"}, 2) == 1.0
    assert recall_at_k(ranked, {"a", "b"}, 2) == pytest.approx(0.5)
    assert precision_at_k(ranked, {"a", "b"}, 2) == pytest.approx(0.5)  # the repeat uses up a slot
    assert precision_at_k(["a", "a", "a"], {"a"}, 3) == pytest.approx(1 / 3)
    assert recall_at_k(["a", "a"], {"a"}, 2) == 1.0  # never above 1
    assert ndcg_at_k(["a", "a"], {"a"}, 2) == pytest.approx(1.0)
    assert ndcg_at_k(ranked, {"a", "b"}, 3) == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))
    assert recall_at_k(["a"], ["a", "a"], 1) == 1.0  # repeated expected ids count once too


@pytest.mark.parametrize("fn", [hit_rate_at_k, recall_at_k, precision_at_k, ndcg_at_k])
def test_no_expected_documents_is_nan_and_bad_k_raises(fn):
    assert math.isnan(fn(["a"], [], 5))
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="k must be an integer >= 1"):
            fn(["a"], ["a"], bad)


def test_reciprocal_rank_no_expected_is_nan():
    assert math.isnan(reciprocal_rank(["a"], []))


# --- registry ----------------------------------------------------------------------------------------------


def test_resolve_names_and_labels():
    m = resolve("hit_rate@5")
    assert (m.name, m.label, m.k, m.spec.name) == ("hit_rate@5", "Hit rate@5", 5, "hit_rate@k")
    assert resolve("ndcg@10").label == "nDCG@10"
    assert resolve("mrr") == Metric(METRICS["mrr"], None)
    assert resolve("mrr").label == "MRR"
    assert [resolve(n).name for n in DEFAULT_METRICS] == list(DEFAULT_METRICS)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("hit_rate", "needs a cut-off"),
        ("ndcg@0", "k must be an integer >= 1"),
        ("recall@k", "k must be an integer >= 1"),
        ("recall@-2", "k must be an integer >= 1"),
        ("mrr@10", "takes no cut-off"),
        ("bleu", "unknown metric 'bleu'; known metrics: " + ", ".join(sorted(METRICS))),
    ],
)
def test_resolve_errors(name, message):
    with pytest.raises(ValueError) as info:
        resolve(name)
    assert message in str(info.value)


def test_registry_drift():
    assert len(METRICS) == 22
    for key, spec in METRICS.items():
        assert key == spec.name
        assert spec.label and spec.description
        assert spec.direction in ("higher", "lower") and spec.kind in ("binary", "graded", "ratio")
        assert spec.needs_k == key.endswith("@k")
        assert spec.default_margin > 0 or spec.name == "error_rate"  # any significant rise in failures blocks
        if spec.fn is not None:
            assert "Source:" in (inspect.getdoc(spec.fn) or ""), key
        else:
            assert spec.judged or spec.paired, key
    assert {k for k, s in METRICS.items() if s.kind == "ratio"} == {"latency_ms", "cost_usd"}
    assert (METRICS["latency_ms"].default_margin, METRICS["cost_usd"].default_margin) == (0.10, 0.05)
    assert {k for k, s in METRICS.items() if s.direction == "lower"} == {
        "contradiction_rate",
        "hallucination_rate",
        "hallucinated_claim_rate",
        "false_refusal",
        "error_rate",
        "latency_ms",
        "cost_usd",
    }


def _case(ood: bool = False, **kw) -> GoldenCase:
    return GoldenCase(id="c1", question="q?", expected_doc_ids=() if ood else ("d1",), out_of_domain=ood, **kw)


def test_score_case_retrieval_in_and_out_of_domain():
    pred = Prediction(id="c1", retrieved=(Chunk("d2"), Chunk("d1")))
    assert score_case(resolve("hit_rate@1"), _case(), pred, refused=False) == 0.0
    assert score_case(resolve("hit_rate@2"), _case(), pred, refused=False) == 1.0
    assert score_case(resolve("mrr"), _case(), pred, refused=False) == 0.5
    assert score_case(resolve("ndcg@2"), _case(), pred, refused=False) == pytest.approx(1 / math.log2(3))
    for name in ("hit_rate@5", "recall@5", "precision@5", "mrr", "ndcg@5"):
        assert math.isnan(score_case(resolve(name), _case(ood=True), pred, refused=True))


# ------------------------------------------------------------------ many queries at once (the scoring path)

MANY = {
    "hit_rate": (hit_rate_at_k, "hit_rate_at_k_many"),
    "recall": (recall_at_k, "recall_at_k_many"),
    "precision": (precision_at_k, "precision_at_k_many"),
    "ndcg": (ndcg_at_k, "ndcg_at_k_many"),
}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    runs=st.lists(
        st.tuples(
            st.lists(st.sampled_from([f"d{i}" for i in range(12)]), max_size=25),  # duplicates are common
            st.lists(st.sampled_from([f"d{i}" for i in range(12)]), max_size=5),  # empty: not applicable
        ),
        max_size=30,
    ),
    k=st.integers(1, 30),
)
def test_many_equal_the_per_query_functions_exactly(runs, k):
    """Same values (==, NaN where not applicable) on lists with duplicates, k beyond the list, no expected docs."""
    from gate.metrics import retrieval

    retrieved, expected = [r for r, _ in runs], [e for _, e in runs]
    ranks = retrieval.expected_ranks(retrieved, expected)
    for fn, many in MANY.values():
        ours = getattr(retrieval, many)(ranks, k)
        reference = [fn(r, e, k) for r, e in runs]
        np.testing.assert_array_equal(ours, np.array(reference, dtype=float))
    rr = [reciprocal_rank(r, e) for r, e in runs]
    np.testing.assert_array_equal(retrieval.reciprocal_rank_many(ranks), np.array(rr, dtype=float))


def test_scoring_path_equals_pytrec_eval_on_the_tfidf_run(tfidf):
    """score_all (the batched path ``rag-gate run`` takes) on the real run gives pytrec_eval's values per query."""
    import pytrec_eval

    from gate.config import GatePolicy
    from gate.scoring import score_all

    _, run, judged = tfidf
    qrels = judged["paragraph"]
    golden = [GoldenCase(qid, "q?", tuple(sorted(rel))) for qid, rel in qrels.items() if qid in run]
    table = {(c.id, 0): Prediction(c.id, retrieved=tuple(Chunk(d) for d in run[c.id])) for c in golden}
    names = ("hit_rate@5", "recall@5", "precision@5", "mrr", "ndcg@5")
    scores = score_all(golden, table, 1, GatePolicy(metrics=names, gated=names), judge=None)
    ours = {(s.id, s.metric): s.value for s in scores}
    theirs = pytrec_eval.RelevanceEvaluator(
        {q: {d: 1 for d in rel} for q, rel in qrels.items()},
        {"success.5", "recall.5", "P.5", "recip_rank", "ndcg_cut.5"},
    ).evaluate(rank_scores({c.id: run[c.id] for c in golden}))
    trec = dict(zip(names, ("success_5", "recall_5", "P_5", "recip_rank", "ndcg_cut_5"), strict=True))
    assert len(golden) >= 90
    for case in golden:
        for name, trec_name in trec.items():
            assert ours[(case.id, name)] == pytest.approx(theirs[case.id][trec_name], abs=1e-12), (case.id, name)
