"""Synthetic run directories for the performance benchmarks: a golden set and a base and a head run, scores included.

``make(root, n, repeats)`` writes ``root/golden.jsonl``, ``root/rag-gate.yml`` and the run directories
``root/base`` and ``root/head`` exactly as ``rag-gate run`` would leave them (manifest with the run identity of the
default lexical judge, so ``compare`` reuses the scores): 15 metrics (the defaults), 10 % out-of-domain cases, five
retrieved chunks of about 150 characters per prediction, a claims ``detail`` on every faithfulness row, 0.5 % failed
predictions, and a head that is a little worse than the base on some cases. Values come from a seeded generator, so
the same ``(n, repeats, seed)`` gives the same files.

usage: python tests/perfdata.py OUT_DIR N [REPEATS]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

METRICS = (
    "hit_rate@5", "recall@5", "precision@5", "mrr", "ndcg@5", "faithfulness", "contradiction_rate",
    "hallucination_rate", "answer_f1", "exact_match", "refusal", "false_refusal", "error_rate", "latency_ms",
    "cost_usd",
)  # fmt: skip
WORDS = "alpha beta gamma delta river mountain city paper model answer question record system value".split()


def _text(rng: np.random.Generator, words: int) -> str:
    return " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), words))


def _config(root: Path, repeats: int) -> Path:
    path = root / "rag-gate.yml"
    path.write_text(
        "golden: golden.jsonl\npipeline:\n  python: pipe:answer\n"
        f"metrics: [{', '.join(METRICS)}]\nrepeats: {repeats}\nseed: 0\njudge: {{name: lexical}}\n",
        encoding="utf-8",
    )
    (root / "pipe.py").write_text(
        "def answer(case):\n    return {'answer': 'ok', 'retrieved': [{'id': 'd0', 'text': 't'}]}\n", encoding="utf-8"
    )
    return path


def _manifest(config_path: Path, golden: Path, n: int, repeats: int, counts: dict[str, int]) -> dict:
    from gate.config import load_config
    from gate.golden import file_sha256
    from gate.produce import make_judge, run_identity
    from gate.runs import MANIFEST_SCHEMA_VERSION

    config = load_config(config_path)
    policy = config.policy
    identity = run_identity(policy, make_judge(policy), file_sha256(golden), config.sha256, repeats)
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        **identity.to_dict(),
        "git_sha": None,
        "git_ref": None,
        "config": str(config_path),
        "golden": str(golden),
        "n_cases": n,
        "evaluation": policy.to_dict(),
        "status": "complete",
        "started": "2025-01-01T00:00:00+00:00",
        "finished": "2025-01-01T00:00:01+00:00",
        "counts": counts,
        "prediction_errors": [],
    }


def make(root: Path, n: int, repeats: int, seed: int = 0) -> tuple[Path, Path, Path]:
    """Write the golden set, the config and the base and head run directories; return (config, base, head)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    ood = rng.random(n) < 0.1
    n_expected = rng.integers(1, 4, n)
    golden = root / "golden.jsonl"
    with golden.open("w", encoding="utf-8") as out:
        for i in range(n):
            expected = [] if ood[i] else [f"d{i}-{j}" for j in range(n_expected[i])]
            record = {
                "id": f"q{i}",
                "question": f"Question {i}: {_text(rng, 8)}?",
                "expected_doc_ids": expected,
                "reference_answers": [] if ood[i] else [_text(rng, 3)],
                "out_of_domain": bool(ood[i]),
            }
            out.write(json.dumps(record) + "\n")
    config = _config(root, repeats)
    skill = rng.random(n)  # per-case difficulty, shared by both sides (paired data)
    for label, shift in (("base", 0.0), ("head", 0.04)):
        run = root / label
        run.mkdir(exist_ok=True)
        side_rng = np.random.default_rng([seed, shift > 0])
        n_errors = n_scores = 0
        with (
            (run / "predictions.jsonl").open("w", encoding="utf-8") as preds,
            (run / "scores.jsonl").open("w", encoding="utf-8") as scores,
        ):
            for r in range(repeats):
                for i in range(n):
                    p = float(np.clip(skill[i] - shift + side_rng.normal(0, 0.1), 0, 1))
                    failed = side_rng.random() < 0.005
                    refused = bool(ood[i] and side_rng.random() < 0.8 - shift) or bool(
                        not ood[i] and side_rng.random() < 0.03
                    )
                    hit = side_rng.random() < p
                    retrieved = [
                        {
                            "id": f"d{i}-0" if hit and k == 0 else f"x{i}-{k}",
                            "text": _text(side_rng, 25),
                            "score": 1 - k / 10,
                        }
                        for k in range(5)
                    ]
                    latency = float(100 * (1 + shift) * np.exp(side_rng.normal(0, 0.2)))
                    row = {"id": f"q{i}", "repeat": r, "latency_ms": round(latency, 3)}
                    if failed:
                        row["error"] = "TimeoutError: case took longer than 30 s"
                        n_errors += 1
                    else:
                        answer = "I don't have that information." if refused else _text(side_rng, 20)
                        row |= {"answer": answer, "retrieved": retrieved, "cost_usd": 0.0001, "refused": refused}
                    preds.write(json.dumps(row) + "\n")
                    values = _values(side_rng, i, p, hit, refused, failed, bool(ood[i]), n_expected[i], latency)
                    for metric, value in values.items():
                        score = {"id": f"q{i}", "repeat": r, "metric": metric, "value": value}
                        if failed and metric != "error_rate":
                            score["error"] = f"prediction failed: {row['error']}"
                        if metric == "faithfulness" and value is not None:
                            score["detail"] = {
                                "claims": [
                                    {
                                        "claim": _text(side_rng, 8),
                                        "verdict": "supported" if side_rng.random() < value else "unverifiable",
                                        "chunk_id": f"d{i}-0",
                                        "chunk_text": _text(side_rng, 12),
                                        "similarity": 0.5,
                                        "contradiction_level": "NONE",
                                        "reason": "",
                                    }
                                    for _ in range(2)
                                ],
                                "contradiction_level": "NONE",
                            }
                        scores.write(json.dumps(score) + "\n")
                        n_scores += 1
        counts = {"predictions": n * repeats, "prediction_errors": n_errors, "scores": n_scores, "judge_failures": 0}
        manifest = _manifest(config, golden, n, repeats, counts)
        (run / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return config, root / "base", root / "head"


def _values(rng, i, p, hit, refused, failed, ood, n_expected, latency) -> dict[str, float | None]:
    """One prediction's score per metric (None = not applicable or failed)."""
    if failed:
        return {m: (1.0 if m == "error_rate" else None) for m in METRICS}
    nan = None
    found = int(hit) + int(rng.random() < p / 2)
    faith = None if refused else round(float(np.clip(p + rng.normal(0, 0.15), 0, 1)), 4)
    return {
        "hit_rate@5": nan if ood else float(hit),
        "recall@5": nan if ood else min(1.0, found / n_expected),
        "precision@5": nan if ood else found / 5,
        "mrr": nan if ood else (1.0 if hit else round(float(rng.choice([0, 0.5, 0.25])), 4)),
        "ndcg@5": nan if ood else round(min(1.0, found * 0.7), 4),
        "faithfulness": faith,
        "contradiction_rate": None if faith is None else round(float(rng.random() < 0.05), 4),
        "hallucination_rate": None if faith is None else float(rng.random() < 1 - p),
        "answer_f1": nan if ood else (0.0 if refused else round(float(np.clip(p + rng.normal(0, 0.2), 0, 1)), 4)),
        "exact_match": nan if ood else (0.0 if refused else float(rng.random() < p * 0.6)),
        "refusal": float(refused) if ood else nan,
        "false_refusal": nan if ood else float(refused),
        "error_rate": 0.0,
        "latency_ms": round(latency, 3),
        "cost_usd": 0.0001,
    }


PLACES = "Glendale Normandy Verona Oslo Lisbon Kyoto Denver Quebec Tallinn Cairo Lima Perth".split()
THINGS = "bridge library railway harbour museum cathedral university factory canal observatory".split()
PEOPLE = "Rollo Ada Turing Curie Darwin Hopper Lovelace Tesla Noether Franklin".split()
VERBS = "built designed funded opened restored expanded".split()


def _fact(rng: np.random.Generator) -> tuple[str, str]:
    """A sentence of a chunk and the question it answers (a place, a thing, a person, a year, a number)."""
    place, thing, who = PLACES[rng.integers(12)], THINGS[rng.integers(10)], PEOPLE[rng.integers(10)]
    verb, year, count = VERBS[rng.integers(6)], int(rng.integers(1100, 2020)), int(rng.integers(2, 5000))
    sentence = f"The {thing} of {place} was {verb} by {who} in {year} and holds {count:,} visitors a day."
    return sentence, f"Who {verb.removesuffix('ed') + 'ed'} the {thing} of {place}?"


def make_project(root: Path, n: int, repeats: int = 1, seed: int = 0) -> tuple[Path, Path]:
    """A golden set of ``n`` cases and two precomputed sides for ``rag-gate run`` (``pipeline: predictions:``).

    Writes ``root/golden.jsonl``, ``root/{base,head}-predictions.jsonl`` and ``root/{base,head}.yml`` (the default
    metrics and the lexical judge). Each answer (about 40 words, two or three sentences) restates facts of its five
    retrieved chunks (about 60 words each, with names, years and numbers), sometimes with a wrong number or an
    invented sentence; 10 % of the cases are out of domain (mostly refused), 0.5 % of the predictions failed, and
    the head is a little worse than the base. Seeded: the same arguments give the same files.

    Returns:
        (base config, head config).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    facts = [[_fact(rng) for _ in range(5)] for _ in range(n)]
    ood = rng.random(n) < 0.1
    with (root / "golden.jsonl").open("w", encoding="utf-8") as out:
        for i in range(n):
            record = {
                "id": f"q{i}",
                "question": facts[i][0][1],
                "expected_doc_ids": [] if ood[i] else [f"d{i}-0"],
                "reference_answers": [] if ood[i] else [facts[i][0][0].split(" by ")[1].split(" in ")[0]],
                "out_of_domain": bool(ood[i]),
            }
            out.write(json.dumps(record) + "\n")
    configs = []
    for label, shift in (("base", 0.0), ("head", 0.05)):
        side = np.random.default_rng([seed, int(shift > 0)])
        with (root / f"{label}-predictions.jsonl").open("w", encoding="utf-8") as out:
            for r in range(repeats):
                for i in range(n):
                    row: dict = {"id": f"q{i}", "repeat": r, "latency_ms": round(float(side.uniform(50, 150)), 3)}
                    if side.random() < 0.005:
                        out.write(json.dumps(row | {"error": "TimeoutError: case took longer than 30 s"}) + "\n")
                        continue
                    order = side.permutation(5) if side.random() < 0.3 + shift else np.arange(5)
                    chunks = [
                        {"id": f"d{i}-{k}", "text": " ".join(facts[i][(k + j) % 5][0] for j in range(3)),
                         "score": round(1 - j / 10, 2)}
                        for j, k in enumerate(order.tolist())
                    ]  # fmt: skip
                    if ood[i] and side.random() < 0.8 - shift:
                        answer = "I don't have that information."
                    else:
                        sentences = [facts[i][int(k)][0] for k in side.choice(5, int(side.integers(2, 4)), False)]
                        if side.random() < 0.1 + shift:  # a wrong number
                            sentences[0] = sentences[0].replace(" in 1", " in 2", 1)
                        if side.random() < 0.1 + shift:  # an invented sentence
                            sentences.append(_fact(side)[0])
                        answer = " ".join(sentences)
                    row |= {"answer": answer, "retrieved": chunks, "cost_usd": 0.0001}
                    out.write(json.dumps(row) + "\n")
        config = root / f"{label}.yml"
        config.write_text(
            f"golden: golden.jsonl\npipeline:\n  predictions: {label}-predictions.jsonl\nrepeats: {repeats}\n"
            "seed: 0\njudge: {name: lexical}\n",
            encoding="utf-8",
        )
        configs.append(config)
    return configs[0], configs[1]


if __name__ == "__main__":
    out, size = Path(sys.argv[1]), int(sys.argv[2])
    print(make(out, size, int(sys.argv[3]) if len(sys.argv) > 3 else 3))
