"""Smoke test of the LLM judges at gate level: every RAGTruth model pair through ``rag-gate compare`` with the rubric
judge and with the pairwise judge, both pointed at the local OpenAI-compatible stub of ``tests/fake_openai.py``.

Usage: python benchmarks/stub_agreement.py [--data ../shared/data]

The stub is not a language model: its rubric grades faithfulness from the answer's word novelty against the
context (``novelty_rubric``) and its pairwise judge prefers the answer with the lower word novelty
(``novelty_pairwise``). The matrix shows that the judges, the pairwise flow and the statistics run end to end on
real answers; it says nothing about how well an LLM judge agrees with people. Pairs are oriented and "people say
head is worse" is decided exactly as in ``benchmarks/judge_quality.py`` (one-sided exact McNemar on the human
labels of the shared prompts at α = 0.05).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_openai import FakeOpenAI, novelty_pairwise, novelty_rubric  # noqa: E402
from judgeeval import PairResult, agreement_summary, gate_pairs, load_ragtruth  # noqa: E402

CONFIGS = {
    "rubric (llm)": (
        novelty_rubric,
        "metrics: [faithfulness, hallucination_rate, answer_relevance, completeness, form]\n"
        "judge: {{name: llm, {endpoint}}}\n",
        "hallucination_rate",
    ),
    "pairwise": (novelty_pairwise, "metrics: [error_rate]\npairwise: {{{endpoint}}}\n", "head_win_rate"),
}
"""Judge → (stub responder, config body, the gated metric whose Δ is shown)."""


def matrix(name: str, pairs: list[PairResult], metric: str) -> None:
    """Print one judge's agreement matrix as a markdown table, with its summary line."""
    print(f"\n{name}: RAGTruth model pairs through `rag-gate compare`, stub judge, base = lower human rate")
    print(f"| base → head | n | human rate | McNemar p (human) | people: head worse | gate | Δ {metric} |")
    print("|---|---|---|---|---|---|---|")
    for r in pairs:
        delta = r.deltas.get(metric)
        print(
            f"| {r.base} → {r.head} | {r.n} | {r.human_base:.0%} → {r.human_head:.0%} | {r.human_p:.3g} | "
            f"{'yes' if r.human_worse else 'no'} | {r.verdict} | {'—' if delta is None else f'{delta:+.3f}'} |"
        )
    print(agreement_summary(pairs))


def main() -> None:
    """Run both judges over every model pair and print their matrices."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    cases = load_ragtruth(args.data / "ragtruth-subset" / "cases.jsonl")
    for name, (responder, body, metric) in CONFIGS.items():
        started = time.perf_counter()
        with FakeOpenAI(responder=responder) as fake, tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "golden.jsonl").write_text('{"id": "x", "question": "q"}\n')
            endpoint = f"model: stub, base_url: '{fake.base_url}', cache_dir: false, timeout_s: 60"
            (folder / "rag-gate.yml").write_text(
                "golden: golden.jsonl\npipeline: {predictions: golden.jsonl}\n" + body.format(endpoint=endpoint)
            )
            pairs = gate_pairs(cases, folder / "rag-gate.yml")
            requests = len(fake.requests)
        matrix(name, pairs, metric)
        print(f"  {requests} requests to the stub, {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
