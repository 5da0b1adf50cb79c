"""Refit the lexical judge's hallucination model on the development halves of RAGTruth and FaithBench.

Usage: python scripts/fit_hallucination_model.py [--data ../shared/data] [--out FILE]
(FILE: src/gate/judges/data/hallucination_model.json by default)

1. Every development answer (``tests/judgeeval.split_by_source``: a hash of the prompt's source id, the same
   halves every benchmark uses; the test halves are never read here) is judged by the lexical judge, which measures
   each claim's signals (:class:`gate.judges.hallucination.ClaimSignals`).
2. A claim is labelled hallucinated when a human-marked span overlaps it (the claim located in the answer as
   written); claims that cannot be located are left out. A logistic regression (scikit-learn, L2, C = 1) on the
   claims' features gives the claim model.
The coefficients are rounded to 6 decimals and written with the data's fingerprints; ``version`` is a hash of the
coefficients. The datasets are non-commercial: they are read from --data, never copied.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # judgeeval

from judgeeval import LabeledCase, load_faithbench, load_ragtruth, split_by_source  # noqa: E402

from gate.judges import LexicalJudge  # noqa: E402
from gate.judges.hallucination import FEATURES, ClaimSignals  # noqa: E402

DATASETS = {"ragtruth-subset": load_ragtruth, "faithbench": load_faithbench}


def located(response: str, claim: str, start: int) -> tuple[int, int] | None:
    """(start, end) of ``claim`` in ``response`` from ``start`` on (else from 0), or None."""
    for origin in (start, 0):
        k = response.find(claim, origin)
        if k >= 0:
            return k, k + len(claim)
    return None


def claim_rows(case: LabeledCase, judge: LexicalJudge) -> tuple[list[ClaimSignals], list[int | None]]:
    """The signals of each claim of ``case`` and its label (1 hallucinated, 0 not, None not located)."""
    judgment = judge.judge(case.question, case.response, case.chunks)
    signals, labels, cursor = [], [], 0
    for verdict in judgment.claims:
        assert verdict.signals is not None
        signals.append(verdict.signals)
        span = located(case.response, verdict.claim, cursor)
        if span is None:
            labels.append(None)
            continue
        cursor = span[1]
        labels.append(int(any(s < span[1] and span[0] < e for s, e in case.span_offsets)))
    return signals, labels


def fit(data: Path) -> dict[str, object]:
    """The model's coefficients and provenance, fitted on the development halves under ``data``."""
    judge = LexicalJudge()
    X, y, answers = [], [], 0
    provenance = {}
    for folder, load in DATASETS.items():
        path = data / folder / "cases.jsonl"
        provenance[folder] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        dev, _ = split_by_source(load(path))
        for case in dev:
            signals, labels = claim_rows(case, judge)
            X.extend(s.features() for s, lab in zip(signals, labels, strict=True) if lab is not None)
            y.extend(lab for lab in labels if lab is not None)
            answers += bool(signals)
    claims = LogisticRegression(C=1.0, max_iter=1000).fit(np.array(X), np.array(y))
    intercept, weights = float(claims.intercept_[0]), [float(w) for w in claims.coef_[0]]

    model = {
        "features": list(FEATURES),
        "intercept": round(intercept, 6),
        "weights": [round(w, 6) for w in weights],
    }
    version = hashlib.sha256(json.dumps(model, sort_keys=True).encode()).hexdigest()[:12]
    return {
        "version": version,
        **model,
        "fitted_on": {
            "halves": "development (benchmarks/judgeeval.split_by_source, salt 'rag-gate')",
            "data_sha256": provenance,
            "claims": len(y),
            "claims_hallucinated": int(sum(y)),
            "answers": answers,
        },
    }


def main() -> None:
    """Fit on --data and write --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    shipped = ROOT / "src" / "gate" / "judges" / "data" / "hallucination_model.json"
    parser.add_argument("--out", type=Path, default=shipped)
    args = parser.parse_args()
    model = fit(args.data)
    args.out.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: version {model['version']}, {model['fitted_on']}")


if __name__ == "__main__":
    main()
