"""Write tests/oracles/ranx_squad_example.json: ranx's per-query retrieval metrics on a real TF-IDF run.

ranx (Bassani, ECIR 2022) is the second oracle of tests/metrics/test_retrieval.py (pytrec_eval is the first).
Its metrics are numba-compiled: the first call on a fresh environment compiles for about a minute. So its values
are computed once here and stored with their inputs (run and qrels); the default test suite checks our metrics
against the stored values, and the ``slow`` test recomputes ranx live on the same run and checks that it still
gives the stored values.

The run: TF-IDF (scikit-learn, sublinear tf, English stop words) top 10 over the bundled example's 646 SQuAD 2.0
paragraphs (examples/squad, CC BY-SA 4.0) for its 100 in-domain questions, with two relevance judgements:
paragraph-level (the question's source paragraph) and article-level (every paragraph of the question's article).

Usage (from the repository root, with the test extras installed): ``python tests/oracles/make_ranx_fixture.py``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sys
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXAMPLE = REPO / "examples" / "squad"
FIXTURE = HERE / "ranx_squad_example.json"
N_QUERIES = 300
DEPTH = 10
CUTOFFS = (1, 3, 5, 10)
METRICS = ["mrr"] + [f"{m}@{k}" for m in ("hit_rate", "recall", "precision", "ndcg") for k in CUTOFFS]
"""Our metric names; ranx uses the same names."""

Ranking = dict[str, list[str]]
Judgements = dict[str, set[str]]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def tfidf_run(data_dir: Path, n_queries: int = N_QUERIES) -> tuple[Ranking, Judgements, Judgements]:
    """A real run: TF-IDF top 10 for up to ``n_queries`` in-domain golden questions (evenly spaced).

    Returns the run (query id → ranked doc ids), paragraph-level qrels (the one source paragraph) and
    article-level qrels (every paragraph of the question's article: many relevant documents per query).
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    corpus = read_jsonl(data_dir / "corpus.jsonl")
    in_domain = [c for c in read_jsonl(data_dir / "golden.jsonl") if not c["out_of_domain"]]
    golden = in_domain[:: max(1, len(in_domain) // n_queries)][:n_queries]
    vectorizer = TfidfVectorizer(sublinear_tf=True, stop_words="english")
    matrix = vectorizer.fit_transform([d["text"] for d in corpus])
    sims = (vectorizer.transform([c["question"] for c in golden]) @ matrix.T).toarray()
    ids = [d["id"] for d in corpus]
    by_title: dict[str, set[str]] = {}
    for d in corpus:
        by_title.setdefault(d["title"], set()).add(d["id"])
    run, qrels_paragraph, qrels_article = {}, {}, {}
    for row, case in zip(sims, golden, strict=True):
        order = sorted(range(len(ids)), key=lambda j: (-row[j], ids[j]))[:DEPTH]
        run[case["id"]] = [ids[j] for j in order]
        qrels_paragraph[case["id"]] = set(case["expected_doc_ids"])
        qrels_article[case["id"]] = by_title[case["tags"][0]]
    return run, qrels_paragraph, qrels_article


def rank_scores(run: Ranking) -> dict[str, dict[str, float]]:
    """Scores DEPTH, DEPTH-1, ... so that an oracle sees exactly our order (no ties to break)."""
    return {q: {d: float(DEPTH - i) for i, d in enumerate(ranked)} for q, ranked in run.items()}


def ranx_scores(run: Ranking, qrels: Judgements) -> dict[str, dict[str, float]]:
    """ranx's per-query value of every metric in :data:`METRICS`: metric → query id → value."""
    from ranx import Qrels, Run, evaluate

    ranx_run = Run(rank_scores(run))
    evaluate(Qrels({q: {d: 1 for d in rel} for q, rel in qrels.items()}), ranx_run, METRICS, save_results_in_run=True)
    return {m: {q: float(v) for q, v in ranx_run.scores[m].items()} for m in METRICS}


def build() -> dict:
    run, paragraph, article = tfidf_run(EXAMPLE)
    qrels = {"paragraph": paragraph, "article": article}
    return {
        "about": "ranx per-query metrics on a TF-IDF run over examples/squad; made by " + Path(__file__).name,
        "made": dt.date.today().isoformat(),
        "versions": {p: version(p) for p in ("ranx", "numba", "scikit-learn")},
        "data_sha256": {
            name: hashlib.sha256((EXAMPLE / name).read_bytes()).hexdigest() for name in ("corpus.jsonl", "golden.jsonl")
        },
        "run": run,
        "qrels": {name: {q: sorted(rel) for q, rel in judged.items()} for name, judged in qrels.items()},
        "scores": {name: ranx_scores(run, judged) for name, judged in qrels.items()},
    }


def main() -> int:
    FIXTURE.write_text(json.dumps(build(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
