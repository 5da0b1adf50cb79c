"""The labels file and the judge's agreement with it (``rag-gate judge-check``, ``judge_labels:``).

:func:`load_labels` reads ``labels.jsonl`` (``gate/schemas/labels.schema.json``); :func:`agreement` computes the
confusion matrix, balanced accuracy and Cohen's κ of the judge against the labels, each with a 95 % percentile
bootstrap interval (seeded), and a plain verdict; :func:`check` compares labels with a judge's calls.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gate.errors import InputError
from gate.jsonl import read_jsonl, validate
from gate.labels.sampling import JudgedAnswer, digest, reasons_of

SCHEMA = "labels"
"""The shipped schema of a labels row (``gate/schemas/labels.schema.json``)."""

BOOTSTRAP_RESAMPLES = 2000
"""Resamples of the percentile bootstrap of κ and balanced accuracy."""

MIN_LABELS = 15
"""Fewer labelled answers than this: "too few labels to tell"."""
MIN_PER_CLASS = 3
"""Fewer labels than this in any class (faithful / unfaithful; base / head / tie among those seen): too few."""
AGREE_KAPPA = 0.6
"""κ at or above this ("substantial", Landis & Koch 1977) with a lower bound ≥ :data:`FLOOR_KAPPA`: agrees."""
FLOOR_KAPPA = 0.4
"""The lower 95 % bound of κ must reach this ("moderate") for "agrees"."""

VERDICTS = {
    "agrees": "agrees with your labels",
    "too_few": "too few labels to tell",
    "disagrees": "disagrees: do not gate on it",
}
"""The plain verdicts of :func:`verdict`."""

PAIR_CLASSES = ("base", "head", "tie")
"""The pairwise classes: which answer is better."""
BINARY_CLASSES = ("faithful", "unfaithful")
"""The single-answer classes, negative first (positive = unfaithful: the judge flags a hallucination)."""


@dataclass(frozen=True)
class Label:
    """One labelled answer (one row of ``labels.jsonl``)."""

    id: str
    """Golden case id."""
    repeat: int
    """The answer's repeat index."""
    line: int
    """1-based line in the labels file."""
    faithful: bool | None = None
    """The person's call on one answer: faithful to its chunks (None in a pairwise row)."""
    correct: bool | None = None
    """Whether the answer is correct (against the references); None: not said."""
    better: Literal["base", "head", "tie"] | None = None
    """A pairwise row: which answer the person found better."""
    note: str = ""
    """Free text."""
    labeller: str = ""
    """Who labelled it."""
    labelled_at: str = ""
    """When (ISO 8601)."""
    judge: str | None = None
    """The key of the judge whose call was shown when labelling (:func:`judge_key`), if recorded."""
    judge_flagged: bool | None = None
    """That judge's call on the answer (single answers), if recorded."""
    judge_better: str | None = None
    """That judge's outcome (pairs), if recorded."""
    golden_sha256: str | None = None
    """sha256 of the golden set of the labelled run, if recorded."""
    answer_sha256: str | None = None
    """:func:`digest` of the labelled answer's text, if recorded: a run whose answer differs is another answer."""

    @property
    def key(self) -> tuple[str, int]:
        """(case id, repeat)."""
        return self.id, self.repeat

    @property
    def pairwise(self) -> bool:
        """Whether the row labels a pair (``better``) rather than one answer (``faithful``)."""
        return self.better is not None


def load_labels(path: Path | str) -> list[Label]:
    """Read ``labels.jsonl``, each row validated against ``gate/schemas/labels.schema.json``.

    Raises:
        InputError: ``file:line: field: message`` for a malformed row; a second row for the same answer (id and
            repeat) names both lines; a file that mixes single-answer and pairwise rows; an empty file.
    """
    path = Path(path)
    labels: list[Label] = []
    first: dict[tuple[str, int], int] = {}
    for line, record in read_jsonl(path):
        if isinstance(record, dict) and "faithful" not in record and "better" not in record:
            raise InputError(f"{path}:{line}: faithful: required field is missing (or better, for a pair)")
        if isinstance(record, dict) and "faithful" in record and "better" in record:
            raise InputError(f"{path}:{line}: better: a row has faithful (one answer) or better (a pair), not both")
        validate(record, SCHEMA, path, line)
        label = Label(line=line, **{k: record.get(k) for k in _LABEL_KEYS if k in record})
        if label.key in first:
            raise InputError(
                f"{path}:{line}: id: duplicate label of answer {label.id!r} repeat {label.repeat} "
                f"(first at line {first[label.key]}); keep one row per answer"
            )
        first[label.key] = line
        if labels and labels[0].pairwise != label.pairwise:
            raise InputError(f"{path}:{line}: better: mixes pairwise rows (better) and single answers (faithful)")
        labels.append(label)
    if not labels:
        raise InputError(f"{path}: no labels")
    return labels


_LABEL_KEYS = tuple(name for name in Label.__dataclass_fields__ if name != "line")


@dataclass(frozen=True)
class Interval:
    """A statistic with its 95 % interval (NaN where undefined)."""

    value: float
    """The point estimate."""
    low: float
    """Lower 95 % bound."""
    high: float
    """Upper 95 % bound."""


CI_METHOD = f"95 % percentile bootstrap over the labelled answers ({BOOTSTRAP_RESAMPLES} resamples, seeded)"
"""How :func:`agreement`'s intervals are computed."""


@dataclass(frozen=True)
class Agreement:
    """The judge against the labels."""

    classes: tuple[str, ...]
    """Class names, in matrix order (binary: faithful, unfaithful; pairwise: base, head, tie)."""
    matrix: tuple[tuple[int, ...], ...]
    """Confusion matrix: rows are the labels, columns the judge's calls."""
    n: int
    """Labelled answers compared."""
    accuracy: float
    """Share of answers where the judge and the label agree."""
    balanced_accuracy: Interval
    """Mean per-class recall of the labels' classes (sensitivity and specificity for binary)."""
    kappa: Interval
    """Cohen's κ (chance-corrected agreement)."""
    verdict: str
    """One of :data:`VERDICTS`' keys."""
    method: str = CI_METHOD
    """How the intervals were computed."""

    def counts(self) -> dict[str, int]:
        """Binary: tp (judge flags, label unfaithful), fp, fn, tn; positive = unfaithful."""
        (tn, fp), (fn, tp) = self.matrix
        return {"tp": tp, "fp": fp, "fn": fn, "tn": tn}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN as None)."""

        def num(x: float) -> float | None:
            return None if math.isnan(x) else round(float(x), 6)

        out: dict[str, Any] = {
            "n": self.n,
            "classes": list(self.classes),
            "confusion_matrix": [list(row) for row in self.matrix],
            "accuracy": num(self.accuracy),
            "balanced_accuracy": {k: num(getattr(self.balanced_accuracy, k)) for k in ("value", "low", "high")},
            "kappa": {k: num(getattr(self.kappa, k)) for k in ("value", "low", "high")},
            "verdict": self.verdict,
            "verdict_text": VERDICTS[self.verdict],
            "interval_method": self.method,
        }
        if len(self.classes) == 2:
            out["counts"] = self.counts()
        return out


def _stats(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Accuracy, balanced accuracy and κ of confusion matrices of shape (..., k, k) (NaN where undefined)."""
    counts = counts.astype(float)
    n = counts.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(counts, axis1=-2, axis2=-1) / n
        truth, called = counts.sum(axis=-1), counts.sum(axis=-2)
        expected = (truth * called).sum(axis=-1) / n**2
        kappa = np.where(expected < 1, (observed - expected) / (1 - expected), np.nan)
        recall = np.diagonal(counts, axis1=-2, axis2=-1) / truth
        present = truth > 0
        balanced = np.where(present, recall, 0).sum(axis=-1) / present.sum(axis=-1)
    return observed, balanced, kappa


def agreement(
    labels: Sequence[int],
    calls: Sequence[int],
    classes: Sequence[str],
    *,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Agreement:
    """The judge's calls against the labels: confusion matrix, balanced accuracy and κ with 95 % intervals.

    Balanced accuracy is the mean recall over the classes present in the labels (as scikit-learn's
    ``balanced_accuracy_score``); κ is Cohen's (1960) κ = (p_o − p_e) / (1 − p_e), NaN when p_e = 1. Intervals:
    the percentile bootstrap over the labelled answers (:data:`CI_METHOD`), resamples where the statistic is
    undefined left out.

    Args:
        labels: the class index of each label (0 = faithful, 1 = unfaithful for binary).
        calls: the judge's class index for the same answers.
        classes: class names.
        seed: the bootstrap's seed.
        resamples: bootstrap resamples.
    """
    k = len(classes)
    y, p = np.asarray(labels, dtype=np.intp), np.asarray(calls, dtype=np.intp)
    codes = y * k + p
    matrix = np.bincount(codes, minlength=k * k).reshape(k, k)
    accuracy, balanced, kappa = (float(v) for v in _stats(matrix))
    n = len(y)
    if n:
        rng = np.random.default_rng(seed)
        rows = rng.integers(0, n, size=(resamples, n))
        flat = (codes[rows] + (np.arange(resamples) * k * k)[:, None]).ravel()
        boot = np.bincount(flat, minlength=resamples * k * k).reshape(resamples, k, k)
        _, b_balanced, b_kappa = _stats(boot)
        ba_ci, kappa_ci = _percentiles(b_balanced), _percentiles(b_kappa)
    else:
        ba_ci = kappa_ci = (math.nan, math.nan)
    result = Agreement(
        classes=tuple(classes),
        matrix=tuple(tuple(int(v) for v in row) for row in matrix),
        n=n,
        accuracy=accuracy,
        balanced_accuracy=Interval(balanced, *ba_ci),
        kappa=Interval(kappa, *kappa_ci),
        verdict="too_few",
    )
    return Agreement(**{**result.__dict__, "verdict": verdict(result)})


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the defined values (NaN, NaN when none is)."""
    defined = values[~np.isnan(values)]
    if not defined.size:
        return math.nan, math.nan
    low, high = np.percentile(defined, [2.5, 97.5])
    return float(low), float(high)


def verdict(result: Agreement) -> str:
    """The plain verdict: ``too_few``, ``agrees`` or ``disagrees`` (thresholds: module constants).

    - too few labels to tell: fewer than :data:`MIN_LABELS` answers, fewer than :data:`MIN_PER_CLASS` labels in a
      class (binary: each of faithful and unfaithful; pairwise: each class the labels use), κ undefined, or an
      interval that spans both thresholds (neither rule below holds: label more answers);
    - disagrees (do not gate on it): the upper 95 % bound of κ is below :data:`AGREE_KAPPA`;
    - agrees: κ ≥ :data:`AGREE_KAPPA` and its lower 95 % bound ≥ :data:`FLOOR_KAPPA`.
    """
    per_class = [sum(row) for row in result.matrix]
    used = per_class if len(result.classes) == 2 else [c for c in per_class if c]
    if result.n < MIN_LABELS or min(used) < MIN_PER_CLASS or math.isnan(result.kappa.value):
        return "too_few"
    if result.kappa.high < AGREE_KAPPA:
        return "disagrees"
    if result.kappa.value >= AGREE_KAPPA and result.kappa.low >= FLOOR_KAPPA:
        return "agrees"
    return "too_few"


@dataclass(frozen=True)
class Compared:
    """One labelled answer next to the judge's call."""

    label: Label
    """The label."""
    call: str
    """The judge's class (``faithful`` / ``unfaithful``, or ``base`` / ``head`` / ``tie``)."""
    truth: str
    """The label's class."""
    reasons: tuple[str, ...] = ()
    """The judge's reasons."""


@dataclass(frozen=True)
class Check:
    """``judge-check``'s result: the agreement, the disagreements and what was skipped."""

    judge: str
    """The judge checked (its id)."""
    agreement: Agreement
    """The statistics."""
    compared: tuple[Compared, ...]
    """Every labelled answer compared, in labels order."""
    skipped: tuple[str, ...] = ()
    """One line per label not compared (answer not in the run, answer changed, no call from the judge)."""
    warnings: tuple[str, ...] = ()
    """Stale labels and the like."""

    @property
    def disagreements(self) -> tuple[Compared, ...]:
        """The answers where the judge's call differs from the label."""
        return tuple(c for c in self.compared if c.call != c.truth)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``judge-check --format json``)."""
        return {
            "judge": self.judge,
            **self.agreement.to_dict(),
            "flagged_means": "faithfulness below 1 (llm rubric: faithfulness grade 1 or 2 of 3)",
            "disagreements": [
                {
                    "id": c.label.id,
                    "repeat": c.label.repeat,
                    "label": c.truth,
                    "judge": c.call,
                    "reasons": list(c.reasons),
                    "note": c.label.note,
                }
                for c in self.disagreements
            ],  # fmt: skip
            "skipped": list(self.skipped),
            "warnings": list(self.warnings),
        }


def label_class(label: Label) -> str:
    """The label's class name."""
    if label.pairwise:
        return str(label.better)
    return "faithful" if label.faithful else "unfaithful"


def check(
    labels: Sequence[Label],
    calls: Mapping[tuple[str, int], tuple[str | None, Sequence[str], str | None]],
    *,
    judge: str,
    seed: int = 0,
    warnings: Sequence[str] = (),
) -> Check:
    """Compare labels with the judge's calls.

    Args:
        labels: the labels (all single-answer or all pairwise).
        calls: (case id, repeat) → (the judge's class or None without a call, its reasons, the answer's
            :func:`digest` or None when unknown); a label whose answer is absent is skipped.
        judge: the judge's id, for the report.
        seed: the bootstrap's seed.
        warnings: stale-label warnings to carry.
    """
    classes = PAIR_CLASSES if labels and labels[0].pairwise else BINARY_CLASSES
    compared, skipped = [], []
    for label in labels:
        found = calls.get(label.key)
        where = f"line {label.line}: {label.id!r} repeat {label.repeat}"
        if found is None:
            skipped.append(f"{where}: not in the run")
            continue
        call, reasons, answer_sha = found
        if label.answer_sha256 and answer_sha and label.answer_sha256 != answer_sha:
            skipped.append(f"{where}: the run's answer is not the one labelled")
            continue
        if call is None:
            skipped.append(f"{where}: the judge made no call on it (no claim to check, or a judge failure)")
            continue
        compared.append(Compared(label, call, label_class(label), tuple(reasons)))
    index = {name: i for i, name in enumerate(classes)}
    stats = agreement([index[c.truth] for c in compared], [index[c.call] for c in compared], classes, seed=seed)
    return Check(judge, stats, tuple(compared), tuple(skipped), tuple(warnings))


def recorded_calls(labels: Sequence[Label]) -> dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]:
    """The judge's calls recorded in the labels themselves (those shown when labelling), as :func:`check` reads."""
    calls: dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]] = {}
    for label in labels:
        if label.pairwise and label.judge_better is not None:
            calls[label.key] = (label.judge_better, (), None)
        elif not label.pairwise and label.judge_flagged is not None:
            calls[label.key] = ("unfaithful" if label.judge_flagged else "faithful", (), None)
    return calls


def run_calls(answers: Sequence[JudgedAnswer]) -> dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]:
    """The judge's calls of a run, as :func:`check` reads them."""
    return {
        a.key: (
            None if a.flagged is None else ("unfaithful" if a.flagged else "faithful"),
            reasons_of(a.detail),
            digest(a.prediction.answer),
        )
        for a in answers
    }


def stale(labels: Sequence[Label], judge: str | None, golden_sha256: str | None) -> list[str]:
    """Warnings when the labels were made with another judge identity or on another golden set.

    Args:
        labels: the labels.
        judge: the current judge's key (:func:`judge_key`), or None to skip that check.
        golden_sha256: the current golden set's sha256, or None to skip that check.
    """
    out = []
    judges = {label.judge for label in labels if label.judge}
    if judge and judges - {judge}:
        n = sum(1 for label in labels if label.judge and label.judge != judge)
        out.append(
            f"{n} of {len(labels)} labels were made with another judge identity than this run's "
            "(its model, prompt or options changed): the agreement shown is that judge's; "
            "check the current one with `rag-gate judge-check --config`"
        )
    goldens = {label.golden_sha256 for label in labels if label.golden_sha256}
    if golden_sha256 and goldens - {golden_sha256}:
        n = sum(1 for label in labels if label.golden_sha256 and label.golden_sha256 != golden_sha256)
        out.append(f"{n} of {len(labels)} labels were made on another golden set: label again with `rag-gate label`")
    return out
