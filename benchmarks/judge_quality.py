"""Measure the lexical judge on human-labelled data: RAGTruth, FaithBench and RGB counterfactuals.

Usage: python benchmarks/judge_quality.py [--data ../shared/data] [--calibration-out FILE] [--dev-only]

The threshold of the response-level rule is chosen on the development half of each dataset (split by source
id) and the figures are printed for the test half; the default threshold's figures are printed too. The
datasets are non-commercial: they are read from --data, never copied into the repository. The calibration
sample (20 seeded random RAGTruth test cases with the judge's verdicts) goes to --calibration-out.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from judgeeval import (
    DEFAULT_THRESHOLD,
    JudgeQuality,
    LabeledCase,
    calibration_sample,
    choose_threshold,
    counterfactual_rates,
    group_quality,
    judge_cases,
    load_faithbench,
    load_ragtruth,
    load_rgb_counterfactual,
    quality,
    split_by_source,
)

from gate.judges import LexicalJudge

# RAGTruth paper (Niu et al. 2024, ACL, arXiv:2401.00396), Table 5, response-level detection on the full
# RAGTruth test set: (precision, recall, F1) in %. Overall figures as cited by veritas-gate's README; QA
# figures as reproduced in IBM's Granite RAG intrinsics report (Table 8).
PAPER_BASELINES = {
    "Overall": {
        "Prompt gpt-3.5-turbo": (37.1, 92.3, 52.9),
        "Prompt gpt-4-turbo": (46.9, 97.9, 63.4),
        "SelfCheckGPT gpt-3.5-turbo": (49.7, 71.9, 58.8),
        "Finetuned Llama-2-13B": (76.9, 80.7, 78.7),
    },
    "QA": {
        "Prompt gpt-3.5-turbo": (18.8, 84.4, 30.8),
        "Prompt gpt-4-turbo": (33.2, 90.6, 45.6),
        "SelfCheckGPT gpt-3.5-turbo": (35.0, 58.0, 43.7),
        "LMvLM gpt-4": (18.7, 76.9, 30.1),
        "Finetuned Llama-2-13B": (61.6, 76.3, 68.2),
    },
}


def row(name: str, q: JudgeQuality) -> str:
    return (
        f"  {name:28} n={q.n:4d} pos={q.n_hallucinated:3d}  bal.acc {q.balanced_accuracy:5.3f}  "
        f"P {q.precision:5.3f}  R {q.recall:5.3f}  F1 {q.f1:5.3f}  kappa {q.kappa:+.3f}  (t={q.threshold:.2f})"
    )


def labeled_report(name: str, cases: list[LabeledCase], judge: LexicalJudge, dev_only: bool) -> tuple[list, list]:
    dev, test = split_by_source(cases)
    started = time.perf_counter()
    dev_j, test_j = judge_cases(judge, dev), judge_cases(judge, test)
    seconds = time.perf_counter() - started
    chosen = choose_threshold(dev, dev_j)
    print(
        f"\n{name}: {len(cases)} answers ({len(dev)} dev / {len(test)} test), "
        f"{len(cases) / seconds * 60:,.0f} answers/minute"
    )
    print(row("dev, chosen t", quality(dev, dev_j, chosen)))
    print(row("dev, default t", quality(dev, dev_j, DEFAULT_THRESHOLD)))
    if not dev_only:
        print(row("TEST, t chosen on dev", quality(test, test_j, chosen)))
        print(row("TEST, default t", quality(test, test_j, DEFAULT_THRESHOLD)))
        groups = group_quality(test, test_j, lambda c: c.task_type, chosen)
        if len(groups) > 1:
            for task, q in groups.items():
                print(row(f"TEST {task}", q))
    else:
        for task, q in group_quality(dev, dev_j, lambda c: c.task_type, chosen).items():
            print(row(f"dev {task}", q))
    return test, test_j


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--calibration-out", type=Path, default=None)
    parser.add_argument("--dev-only", action="store_true", help="print development-split figures only")
    args = parser.parse_args()
    judge = LexicalJudge()
    print(f"judge {judge.id} v{judge.version}: {judge}")

    test, test_j = labeled_report("RAGTruth subset", load_ragtruth(args.data / "ragtruth-subset"), judge, args.dev_only)
    print("  RAGTruth paper, full test set, response level (P / R / F1 %):")
    for task, rows in PAPER_BASELINES.items():
        for method, (p, r, f) in rows.items():
            print(f"    {task:8} {method:28} P {p:5.1f}  R {r:5.1f}  F1 {f:5.1f}")
    if args.calibration_out and not args.dev_only:
        sample = calibration_sample(test, test_j, np.random.default_rng(20240601), size=20)
        args.calibration_out.write_text("".join(json.dumps(s) + "\n" for s in sample), encoding="utf-8")
        print(f"  calibration sample: {len(sample)} cases -> {args.calibration_out}")

    labeled_report("FaithBench", load_faithbench(args.data / "faithbench"), judge, args.dev_only)

    items = load_rgb_counterfactual(args.data / "rgb-counterfactual")
    print(f"\nRGB counterfactual: {len(items)} items")
    for form in ("passage", "sentence"):
        rates = counterfactual_rates(judge, items, form)
        print(
            f"  {form:8} pairs={rates.n:3d}  restated mostly supported {rates.supported_rate:.3f} "
            f"(mean faithfulness {rates.mean_faithfulness:.3f})  fake contradicted {rates.contradicted_rate:.3f}  "
            f"fake flagged {rates.flagged_rate:.3f}"
        )


if __name__ == "__main__":
    main()
