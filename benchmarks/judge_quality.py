"""Measure the lexical judge on human-labelled data: RAGTruth, FaithBench, RGB counterfactuals, model pairs.

Usage: python benchmarks/judge_quality.py [--data ../shared/data] [--calibration-out FILE] [--dev-only]
       [--no-gate] [--boot 2000]

1. Response level: balanced accuracy and AUROC with cluster-bootstrap 95 % CIs on the test half (split by source
   prompt; cuts chosen on the development half) for the word-novelty and answer-length baselines and the judge's
   scores.
2. The threshold rule of the judge evaluation (dev / test), and RGB counterfactual pairs.
3. A length-only change: per prompt the shortest and the longest answer people judge faithful, through
   ``rag-gate compare`` with the default config, on each half.
4. Gate level: every pair of RAGTruth's six models through ``rag-gate compare`` with the default config, each
   pair oriented by the human rate; "people say head is worse" = one-sided exact McNemar on the human labels of
   the shared prompts at α = 0.05.

The datasets are non-commercial: they are read from --data, never copied into the repository. The calibration
sample (20 seeded random RAGTruth test cases with the judge's verdicts) goes to --calibration-out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' helpers: judgeeval, perfdata, …

from judgeeval import (  # noqa: E402
    DEFAULT_THRESHOLD,
    JudgeQuality,
    LabeledCase,
    agreement_summary,
    auroc_difference,
    calibration_sample,
    choose_cut,
    choose_threshold,
    counterfactual_rates,
    detection,
    gate_pairs,
    group_quality,
    judge_cases,
    length_only_pair,
    load_faithbench,
    load_ragtruth,
    load_rgb_counterfactual,
    probe_pairs,
    quality,
    split_by_source,
    word_novelty,
)

from gate.judges import LexicalJudge  # noqa: E402
from gate.judges.base import Judgment  # noqa: E402


def unsupported_claims(judgment: Judgment) -> float:
    """The judge's graded response score: claims not supported (a contradicted one counts twice)."""
    return float(len(judgment.claims) - judgment.n_supported + judgment.n_contradicted)


def hallucinated(judgment: Judgment) -> float:
    """The gated binary metric (0 for an answer without claims)."""
    value = judgment.hallucination_rate
    return 0.0 if value != value else value


def ungrounded(judgment: Judgment) -> float:
    """The gated metric, as a hallucination score: 1 − grounded_answer_rate (1 for an answer without claims)."""
    value = judgment.grounded_answer_rate
    return 1.0 if value != value else 1.0 - value


def hallucinated_share(judgment: Judgment) -> float:
    """The gated graded metric: the share of hallucinated claims (0 for an answer without claims)."""
    value = judgment.hallucinated_claim_rate
    return 0.0 if value != value else value


def length_report(cases: list[LabeledCase]) -> None:
    """Faithful answers, only longer, through ``rag-gate compare`` (default config), on each half."""
    print("\nRAGTruth length-only change: per prompt the shortest → the longest answer people judge faithful")
    for half, subset in zip(("dev", "test"), split_by_source(cases), strict=True):
        r = length_only_pair(subset)
        print(f"  {half}: {r.n} prompts, {r.words_base:.0f} → {r.words_head:.0f} words, gate {r.verdict}")
        for name, (base, head, delta, p, status) in r.rows.items():
            print(f"    {name:24} {base:.3f} → {head:.3f}  Δ {delta:+.3f}  p {p:.3g}  {status}")
    print("\nProbes on the first 120 answers people judge faithful (default config):")
    for probe in probe_pairs(cases):
        print(f"  {probe.name}: {probe.changed} of {probe.n} changed, gate {probe.verdict}")
        for name, (base, head, delta, p, status) in probe.rows.items():
            print(f"    {name:24} {base:.3f} → {head:.3f}  Δ {delta:+.3f}  p {p:.3g}  {status}")


def detection_report(name: str, cases: list[LabeledCase], judge: LexicalJudge, boot: int) -> dict[str, Judgment]:
    """Balanced accuracy and AUROC with 95 % CIs on the test half, next to the word-novelty baseline."""
    dev, test = split_by_source(cases)
    judged = {c.id: judge.judge(c.question, c.response, c.chunks) for c in cases}
    scorers = {
        "word novelty (baseline)": lambda c: word_novelty(c.response, c.chunks),
        "answer length (baseline)": lambda c: float(len(c.response.split())),
        "judge: unsupported claims": lambda c: unsupported_claims(judged[c.id]),
        "judge: 1 - faithfulness": lambda c: 1.0 - judged[c.id].faithfulness if judged[c.id].claims else 0.0,
        "judge: hallucination_rate": lambda c: hallucinated(judged[c.id]),
        "judge: hallucinated_claim_rate": lambda c: hallucinated_share(judged[c.id]),
        "GATED: 1 - grounded_answer_rate": lambda c: ungrounded(judged[c.id]),
    }
    skipped = sum(j.not_applicable is not None for j in judged.values())
    print(
        f"\n{name}: response-level detection, test half ({len(test)} answers, cuts chosen on {len(dev)} dev; "
        f"{skipped} not applicable by language)"
    )
    for label, score in scorers.items():
        cut = choose_cut([c.hallucinated for c in dev], [score(c) for c in dev])
        found = detection(
            label,
            [c.hallucinated for c in test],
            [score(c) for c in test],
            cut,
            [c.source_id for c in test],
            np.random.default_rng(20240601),
            boot,
        )
        print(
            f"  {label:28} bal.acc {found.balanced_accuracy}  AUROC {found.auroc}  "
            f"flags {found.flag_rate:.0%} (cut > {cut:g})"
        )
    for label, want in (("faithful", False), ("hallucinated", True)):
        mine = [judged[c.id] for c in cases if c.hallucinated == want]
        share = np.mean([any(v.verdict == "supported" for v in j.claims) for j in mine])
        print(f"  answers people judge {label} with a supported claim: {share:.1%} of {len(mine)}")
    gated = [ungrounded(judged[c.id]) for c in test]
    for label, baseline in (("word novelty", word_novelty), ("answer length", lambda r, _: float(len(r.split())))):
        diff = auroc_difference(
            [c.hallucinated for c in test],
            gated,
            [baseline(c.response, c.chunks) for c in test],
            [c.source_id for c in test],
            np.random.default_rng(20240601),
            boot,
        )
        print(f"  AUROC gated − {label}: {diff}")
    return judged


def model_rates(cases: list[LabeledCase], judged: dict[str, Judgment]) -> None:
    """Per model: the share of answers people flag next to the judge's hallucination rate (all answers)."""
    print("  per model, all answers: people flag / judge's hallucination_rate / mean faithfulness")
    for model in sorted({c.model for c in cases}):
        mine = [c for c in cases if c.model == model]
        rate = np.mean([hallucinated(judged[c.id]) for c in mine])
        faith = np.nanmean([judged[c.id].faithfulness for c in mine if judged[c.id].claims])
        print(f"    {model:24} {np.mean([c.hallucinated for c in mine]):5.0%}  {rate:5.0%}  {faith:.3f}")


def gate_report(cases: list[LabeledCase]) -> None:
    """The gate-level agreement matrix over every model pair (default config)."""
    pairs = gate_pairs(cases)
    print("\nRAGTruth model pairs through `rag-gate compare` (default config), base = lower human rate")
    print(
        "| base → head | n | human rate | McNemar p (human) | people: head worse | gate | failed metrics "
        "| Δ grounded_answer_rate |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in pairs:
        delta = r.deltas.get("grounded_answer_rate")
        print(
            f"| {r.base} → {r.head} | {r.n} | {r.human_base:.0%} → {r.human_head:.0%} | {r.human_p:.3g} | "
            f"{'yes' if r.human_worse else 'no'} | {r.verdict} | {', '.join(r.failed) or '—'} | "
            f"{'—' if delta is None else f'{delta:+.3f}'} |"
        )
    print(agreement_summary(pairs))


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
    parser.add_argument("--no-gate", action="store_true", help="skip the model-pair gate matrix (15 compares)")
    parser.add_argument("--boot", type=int, default=2000, help="bootstrap replicates for the CIs")
    args = parser.parse_args()
    judge = LexicalJudge()
    print(f"judge {judge.id} v{judge.version}: {judge}")
    ragtruth = load_ragtruth(args.data / "ragtruth-subset")
    faithbench = load_faithbench(args.data / "faithbench")
    if not args.dev_only:
        model_rates(ragtruth, detection_report("RAGTruth subset", ragtruth, judge, args.boot))
        detection_report("FaithBench", faithbench, judge, args.boot)

    test, test_j = labeled_report("RAGTruth subset", ragtruth, judge, args.dev_only)
    print("  RAGTruth paper, full test set, response level (P / R / F1 %):")
    for task, rows in PAPER_BASELINES.items():
        for method, (p, r, f) in rows.items():
            print(f"    {task:8} {method:28} P {p:5.1f}  R {r:5.1f}  F1 {f:5.1f}")
    if args.calibration_out and not args.dev_only:
        sample = calibration_sample(test, test_j, np.random.default_rng(20240601), size=20)
        args.calibration_out.write_text("".join(json.dumps(s) + "\n" for s in sample), encoding="utf-8")
        print(f"  calibration sample: {len(sample)} cases -> {args.calibration_out}")

    labeled_report("FaithBench", faithbench, judge, args.dev_only)

    items = load_rgb_counterfactual(args.data / "rgb-counterfactual")
    print(f"\nRGB counterfactual: {len(items)} items")
    for form in ("passage", "sentence"):
        rates = counterfactual_rates(judge, items, form)
        print(
            f"  {form:8} pairs={rates.n:3d}  restated mostly supported {rates.supported_rate:.3f} "
            f"(mean faithfulness {rates.mean_faithfulness:.3f})  fake contradicted {rates.contradicted_rate:.3f}  "
            f"fake flagged {rates.flagged_rate:.3f}"
        )
    if not (args.no_gate or args.dev_only):
        length_report(ragtruth)
        gate_report(ragtruth)


if __name__ == "__main__":
    main()
