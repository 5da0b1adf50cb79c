"""The framework recipes (examples/frameworks/) run through rag-gate with real LangChain, LlamaIndex and Haystack.

- Each recipe's own rag-gate.yml, on a shard of the bundled golden set (30 of 148 cases): every retrieved id is a
  corpus paragraph id (the document id survived chunking) and hit rate@5 is far above 0; the run compared with
  itself passes.
- The gate's framework-id check with a real retriever: the same LlamaIndex / Haystack retrieval returning the
  framework's own chunk ids (node UUIDs, content hashes) on both sides makes ``rag-gate compare`` answer ``error``
  (exit 3) naming chunk ids, never "no change".

The frameworks are not in the core test extra: these tests skip without them. ``.ci/frameworks-test.sh`` installs
the recipes' requirements.txt into a fresh venv with the wheel and runs this module.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

RECIPES = REPO / "examples" / "frameworks"
SQUAD = REPO / "examples" / "squad"
SHARD = "1/5"
"""About 30 of the 148 golden cases: enough to show the ids match, quick enough for every CI run."""

FRAMEWORKS = {
    "langchain-bm25": ("LangChain", ["langchain_core", "langchain_community", "langchain_text_splitters", "rank_bm25"]),
    "llamaindex-bm25": ("LlamaIndex", ["llama_index.core", "llama_index.retrievers.bm25", "Stemmer"]),
    "haystack-bm25": ("Haystack", ["haystack"]),
}


def missing_modules(modules: list[str]) -> list[str]:
    """The modules of ``modules`` that cannot be imported here (found without importing the frameworks)."""
    out = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # the parent package is missing
            found = False
        if not found:
            out.append(name)
    return out


def needs(recipe: str) -> None:
    """Skip the test, saying what to install, when ``recipe``'s framework is not installed."""
    name, modules = FRAMEWORKS[recipe]
    if missing := missing_modules(modules):
        pytest.skip(
            f"{name} is not installed ({', '.join(missing)} missing): "
            f"pip install -r examples/frameworks/{recipe}/requirements.txt, or run .ci/frameworks-test.sh"
        )


def rag_gate(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``rag-gate ARGS`` as a user runs it (this interpreter's installed package), output captured."""
    env = {**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False"}
    return subprocess.run(
        [sys.executable, "-m", "gate", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def mean_score(run: Path, metric: str, ids: set[str]) -> float:
    """The mean of ``metric`` over the cases ``ids`` of a run directory's scores.jsonl."""
    values = [r["value"] for r in read_jsonl(run / "scores.jsonl") if r["metric"] == metric and r["id"] in ids]
    assert values and all(isinstance(v, float) for v in values), values
    return sum(values) / len(values)


@pytest.mark.parametrize("recipe", sorted(FRAMEWORKS))
def test_recipe_keeps_document_ids_through_chunking(recipe, tmp_path):
    """The recipe's rag-gate.yml as shipped: ids are paragraph ids, hit rate@5 well above 0, A/A passes."""
    needs(recipe)
    config = RECIPES / recipe / "rag-gate.yml"
    run = tmp_path / "run"
    result = rag_gate(
        "run", "--config", str(config), "--out", str(run), "--shard", SHARD, "--no-progress", cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr

    predictions = read_jsonl(run / "predictions.jsonl")
    assert 25 <= len(predictions) <= 35
    assert not [p for p in predictions if p.get("error")]
    corpus_ids = {d["id"] for d in read_jsonl(SQUAD / "corpus.jsonl")}
    retrieved = [chunk["id"] for p in predictions for chunk in p["retrieved"]]
    assert len(retrieved) == 5 * len(predictions)  # top_k: 5 chunks per case
    assert set(retrieved) <= corpus_ids, set(retrieved) - corpus_ids  # document ids, not chunk ids
    assert all(chunk["text"] for p in predictions for chunk in p["retrieved"])

    golden = {c["id"]: c for c in read_jsonl(SQUAD / "golden.jsonl")}
    in_domain = {p["id"] for p in predictions if not golden[p["id"]]["out_of_domain"]}
    assert len(in_domain) >= 15
    hit_rate = mean_score(run, "hit_rate@5", in_domain)
    assert hit_rate >= 0.7, hit_rate  # measured on all 100 in-domain cases: 0.89-0.91 for the three recipes
    assert mean_score(run, "mrr", in_domain) >= 0.4

    out = tmp_path / "aa"
    golden_arg = ("--golden", str(SQUAD / "golden.jsonl"))
    result = rag_gate("compare", *golden_arg, str(run), str(run), "--out", str(out), cwd=tmp_path)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert (result.returncode, report["verdict"]) == (0, "pass"), result.stdout + result.stderr


NAIVE = {
    # What a user writes first: the framework's own id of the retrieved chunk.
    "llamaindex-bm25": """
def retrieve(question, top_k):
    hits = rag._retriever(top_k).retrieve(question)
    return [{"id": n.node.node_id, "text": n.node.get_content(), "score": float(n.score)} for n in hits]
""",
    "haystack-bm25": """
def retrieve(question, top_k):
    docs = rag._pipeline(top_k).run({"retriever": {"query": question}})["retriever"]["documents"]
    return [{"id": d.id, "text": d.content, "score": float(d.score)} for d in docs]
""",
}


@pytest.mark.parametrize("recipe", sorted(NAIVE))
def test_chunk_ids_from_a_real_retriever_make_the_comparison_an_error(recipe, tmp_path):
    """The recipe's retrieval returning chunk ids (not mapped back to documents) on both sides: exit 3, not pass."""
    needs(recipe)
    (tmp_path / "naive.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(RECIPES / recipe)!r})\n"
        "import rag\n" + NAIVE[recipe] + "\n"
        "def answer(case, top_k=5):\n"
        "    chunks = retrieve(case['question'], top_k)\n"
        "    sentence, share = rag.extract(case['question'], chunks)\n"
        "    return {'answer': sentence if share >= 0.4 else rag.REFUSAL, 'retrieved': chunks}\n",
        encoding="utf-8",
    )
    cases = read_jsonl(SQUAD / "golden.jsonl")
    subset = [c for c in cases if not c["out_of_domain"]][:12] + [c for c in cases if c["out_of_domain"]][:4]
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in subset), encoding="utf-8")
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\n"
        "pipeline: {python: 'naive:answer', concurrency: 1, env: {HAYSTACK_TELEMETRY_ENABLED: 'False'}}\n"
        "metrics: [hit_rate@5, mrr, answer_f1, refusal]\n",
        encoding="utf-8",
    )
    for side in ("base", "head"):
        result = rag_gate("run", "--config", "rag-gate.yml", "--out", side, "--no-progress", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
    predictions = read_jsonl(tmp_path / "base" / "predictions.jsonl")
    chunk_ids = {chunk["id"] for p in predictions for chunk in p["retrieved"]}
    assert chunk_ids and not chunk_ids & {d["id"] for d in read_jsonl(SQUAD / "corpus.jsonl")}

    result = rag_gate("compare", "--golden", "golden.jsonl", "base", "head", "--out", "report", cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert report["verdict"] == "error"
    (reason,) = [r for r in report["reasons"] if r.startswith("retrieval cannot be scored")]
    assert "(12 in-domain cases)" in reason and "Chunk ids?" in reason
    assert "node.ref_doc_id" in reason and "meta['source_id']" in reason
