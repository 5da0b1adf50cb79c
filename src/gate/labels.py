"""Answers labelled by hand, to check a judge against (``rag-gate label`` and ``rag-gate judge-check``).

Three parts, each usable on its own:

- **Sampling** (:func:`sample`): answers of a run to label, seeded and stratified by the judge's call (flagged or
  not) and by the case's domain (in-domain, out-of-domain), never the same answer twice.
- **The labels format** (:func:`load_labels`, ``gate/schemas/labels.schema.json``): one row per labelled answer.
- **Agreement** (:func:`agreement`): the confusion matrix, balanced accuracy and Cohen's κ of the judge against the
  labels, each with a 95 % percentile bootstrap interval (seeded), and a plain verdict.

An answer counts as **flagged** (the judge calls it unfaithful: the positive class) when its ``faithfulness``
score is below 1: a claim the judge did not find supported (lexical, nli, ragas), or a rubric faithfulness grade of
2 or 1 on the 1–3 scale (llm). An answer without a faithfulness value (a refusal or an answer with no checkable
claim, a judge failure) has no call and is never sampled. For the pairwise judge the label says which of two
answers is better (base, head or tie) and the judge's call is its outcome.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gate.errors import InputError
from gate.golden import load_golden
from gate.jsonl import read_jsonl, validate
from gate.models import GoldenCase, Prediction
from gate.runs import MANIFEST, PREDICTIONS, SCORES, load_scores, read_manifest

SCHEMA = "labels"
"""The shipped schema of a labels row (``gate/schemas/labels.schema.json``)."""

FAITHFULNESS = "faithfulness"
"""The metric whose value decides the judge's call on an answer (flagged when below 1)."""

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


def digest(value: Any) -> str:
    """The first 16 hex digits of sha256 of ``value``'s canonical JSON (a judge identity, an answer)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# --------------------------------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class JudgedAnswer:
    """One answer of a run with the judge's call on it (a row to label)."""

    case: GoldenCase
    """The golden case (question, domain, references)."""
    prediction: Prediction
    """The answer and its retrieved chunks."""
    flagged: bool | None
    """The judge's call: True unfaithful (faithfulness below 1), False faithful, None no call (not sampled)."""
    faithfulness: float
    """The faithfulness score (NaN without a call)."""
    detail: Mapping[str, Any] = field(default_factory=dict)
    """The judge's detail of the answer (claims, verdicts, reasons)."""

    @property
    def key(self) -> tuple[str, int]:
        """(case id, repeat)."""
        return self.case.id, self.prediction.repeat


def judge_key(manifest: Mapping[str, Any]) -> str:
    """The identity of the judge that scored a run (its id, version and options), as :func:`digest`."""
    return digest(manifest.get("judge") or {})


def run_cases(run_dir: Path, manifest: Mapping[str, Any]) -> dict[str, GoldenCase]:
    """The golden cases of a run (from the golden file its manifest names), by id.

    Raises:
        InputError: the golden set is missing or no longer the one the run answered.
    """
    golden = manifest.get("golden")
    if not golden:
        raise InputError(f"{run_dir / MANIFEST}: golden: not recorded (a run made by an older rag-gate?)")
    path = Path(golden)
    if not path.is_absolute():
        path = run_dir / path
    if not path.is_file():
        raise InputError(f"{run_dir / MANIFEST}: golden: file not found: {path}")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    if manifest.get("golden_sha256") and sha != manifest["golden_sha256"]:
        raise InputError(f"{path}: changed since the run {run_dir} answered it (sha256 differs); re-run it")
    return {case.id: case for case in load_golden(path)}


def judged_answers(run_dir: Path) -> tuple[dict[str, Any], list[JudgedAnswer]]:
    """The run's manifest and every answer with the judge's call on it, in predictions order.

    Raises:
        InputError: not a run directory, or malformed files (``file:line: field: message``).
    """
    from gate.predictions import load_predictions

    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir).to_dict()  # the labels record the manifest as manifest.json has it
    cases = run_cases(run_dir, manifest)
    faith = {(s.id, s.repeat): s for s in load_scores(run_dir / SCORES) if s.metric == FAITHFULNESS}
    answers = []
    for prediction in load_predictions(run_dir / PREDICTIONS):
        case = cases.get(prediction.id)
        if case is None or prediction.error is not None:
            continue
        score = faith.get((prediction.id, prediction.repeat))
        value = score.value if score is not None and score.error is None else math.nan
        flagged = None if math.isnan(value) else bool(value < 1.0)
        detail = (score.detail or {}) if score is not None else {}
        answers.append(JudgedAnswer(case, prediction, flagged, value, detail))
    return manifest, answers


def reasons_of(detail: Mapping[str, Any]) -> list[str]:
    """The judge's reasons for its call, one line each: each claim not supported, or the rubric's reason."""
    lines = []
    for claim in detail.get("claims") or []:
        if claim.get("verdict") != "supported":
            lines.append(f"{claim.get('verdict')}: {claim.get('claim')} ({claim.get('reason') or 'no reason'})")
    extra = detail.get("extra") or {}
    grades, reasons = extra.get("grades") or {}, extra.get("reasons") or {}
    if isinstance(grades, Mapping) and grades.get(FAITHFULNESS) is not None:
        lines.append(f"faithfulness {grades[FAITHFULNESS]}/3: {(reasons or {}).get(FAITHFULNESS, '')}".rstrip(": "))
    return lines


# --------------------------------------------------------------------------------------------------- sampling


def _strata(items: Sequence[Any], key: Any, n: int, seed: int) -> list[Any]:
    """Up to ``n`` of ``items``: shuffled within each stratum (seeded), then taken round robin across strata.

    Equal allocation (round robin) makes a rare stratum (say, the few answers the judge flagged) appear in a small
    sample; strata are visited in sorted order.
    """
    rng = np.random.default_rng(seed)
    groups: dict[Any, list[Any]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    queues = [[group[i] for i in rng.permutation(len(group))] for _, group in sorted(groups.items())]
    picked: list[Any] = []
    while len(picked) < n and any(queues):
        for queue in queues:
            if queue and len(picked) < n:
                picked.append(queue.pop(0))
    return picked


def stratum(answer: JudgedAnswer) -> str:
    """The stratum of an answer: the judge's call and the case's domain, e.g. ``flagged, out-of-domain``."""
    call = "flagged" if answer.flagged else "not flagged"
    return f"{call}, {'out-of-domain' if answer.case.out_of_domain else 'in-domain'}"


def sample(
    answers: Sequence[JudgedAnswer], n: int, seed: int, exclude: Iterable[tuple[str, int]] = ()
) -> list[JudgedAnswer]:
    """Up to ``n`` answers to label, stratified by :func:`stratum`, seeded, none of ``exclude``.

    Only answers the judge made a call on are candidates; of answers with the same text to the same question
    (repeats that said the same thing) only the first is.
    """
    skip = set(exclude)
    seen: set[tuple[str, str]] = set()
    candidates = []
    for answer in answers:
        text_key = (answer.case.id, answer.prediction.answer)
        if answer.flagged is None or answer.key in skip or text_key in seen:
            continue
        seen.add(text_key)
        candidates.append(answer)
    return _strata(candidates, stratum, n, seed)


def to_label_row(answer: JudgedAnswer, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The JSONL row of an answer to label: the answer, its chunks, the judge's call and reasons, empty labels."""
    prediction, case = answer.prediction, answer.case
    claims = [
        {k: c.get(k) for k in ("claim", "verdict", "chunk_id", "reason")} for c in answer.detail.get("claims") or []
    ]
    return {
        "kind": "answer",
        "id": case.id,
        "repeat": prediction.repeat,
        "question": case.question,
        "answer": prediction.answer,
        "out_of_domain": case.out_of_domain,
        "reference_answers": list(case.reference_answers),
        "chunks": [{"id": c.id, "text": c.text} for c in prediction.retrieved],
        "judge": {
            "id": (manifest.get("judge") or {}).get("id", ""),
            "key": judge_key(manifest),
            "flagged": answer.flagged,
            "faithfulness": answer.faithfulness,
            "claims": claims,
            "reasons": reasons_of(answer.detail),
        },
        "stratum": stratum(answer),
        "golden_sha256": manifest.get("golden_sha256", ""),
        "answer_sha256": digest(prediction.answer),
        "faithful": None,
        "correct": None,
        "note": "",
    }


def read_to_label(path: Path) -> list[dict[str, Any]]:
    """The rows of an existing to-label file (none when it does not exist).

    Raises:
        InputError: a line is not a JSON object with ``id`` and ``repeat`` (``file:line: message``).
    """
    if not Path(path).exists():
        return []
    rows = []
    for line, row in read_jsonl(path):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("repeat"), int):
            raise InputError(f"{path}:{line}: not a row of `rag-gate label` (needs id and repeat)")
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------------- pairwise


def pair_rows(base_dir: Path, head_dir: Path, pairwise_file: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The pairs a comparison's pairwise judge decided, as rows to label (base's answer and head's, the outcome).

    Args:
        base_dir: the base run directory.
        head_dir: the head run directory.
        pairwise_file: ``pairwise.jsonl`` of ``rag-gate compare --out`` (one verdict per case).

    Raises:
        InputError: malformed files.
    """
    base_manifest, base_answers = judged_answers(base_dir)
    _, head_answers = judged_answers(head_dir)
    first: dict[tuple[str, str], JudgedAnswer] = {}
    for side, answers in (("base", base_answers), ("head", head_answers)):
        for answer in sorted(answers, key=lambda a: a.prediction.repeat):
            first.setdefault((side, answer.case.id), answer)
    rows = []
    for line, record in read_jsonl(pairwise_file):
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise InputError(f"{pairwise_file}:{line}: id: not a row of pairwise.jsonl")
        outcome = record.get("outcome")
        base, head = first.get(("base", record["id"])), first.get(("head", record["id"]))
        if outcome not in ("win", "tie", "loss") or base is None or head is None:
            continue
        better = {"win": "head", "loss": "base", "tie": "tie"}[outcome]
        reasons = [r for r in (record.get("reason_base_first"), record.get("reason_head_first")) if r]
        rows.append(
            {
                "kind": "pair",
                "id": record["id"],
                "repeat": 0,
                "question": base.case.question,
                "out_of_domain": base.case.out_of_domain,
                "reference_answers": list(base.case.reference_answers),
                "base": {
                    "answer": base.prediction.answer,
                    "chunks": [{"id": c.id, "text": c.text} for c in base.prediction.retrieved],
                },
                "head": {
                    "answer": head.prediction.answer,
                    "chunks": [{"id": c.id, "text": c.text} for c in head.prediction.retrieved],
                },
                "judge": {
                    "id": _pair_judge_id(pairwise_file),
                    "key": _pair_judge_id(pairwise_file),
                    "better": better,
                    "reasons": reasons,
                },
                "stratum": f"{better}, {'out-of-domain' if base.case.out_of_domain else 'in-domain'}",
                "golden_sha256": base_manifest.get("golden_sha256", ""),
                "answer_sha256": digest([base.prediction.answer, head.prediction.answer]),
                "better": None,
                "note": "",
            }
        )
    return base_manifest, rows


def _pair_judge_id(pairwise_file: Path) -> str:
    """The pairwise judge's id, from report.json beside ``pairwise.jsonl`` when there is one, else ``pairwise``."""
    report = Path(pairwise_file).parent / "report.json"
    try:
        judge = json.loads(report.read_text(encoding="utf-8"))["pairwise"]["judge"]
        return f"{judge['id']}@{judge.get('version', '')}"
    except (OSError, ValueError, KeyError, TypeError):
        return "pairwise"


def sample_rows(
    rows: Sequence[dict[str, Any]], n: int, seed: int, exclude: Iterable[tuple[str, int]] = ()
) -> list[dict[str, Any]]:
    """Up to ``n`` pair rows, stratified by their ``stratum`` (the judge's outcome and the domain), seeded."""
    skip = set(exclude)
    return _strata([r for r in rows if (r["id"], r["repeat"]) not in skip], lambda r: r["stratum"], n, seed)


# --------------------------------------------------------------------------------------------------- labels


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


# --------------------------------------------------------------------------------------------------- agreement


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


# --------------------------------------------------------------------------------------------------- the check


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


# --------------------------------------------------------------------------------------------------- re-judging


def rejudge(
    answers: Sequence[JudgedAnswer], keys: Iterable[tuple[str, int]], evaluation: Any
) -> tuple[str, dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]]:
    """Judge the answers of ``keys`` again with ``evaluation``'s judge (``judge-check --config``).

    Returns:
        The judge's id and its calls, as :func:`check` reads them.

    Raises:
        InputError: the judge's options are invalid or its extra is not installed.
    """
    from gate.judges import get_judge
    from gate.scoring import call_judge

    try:
        judge = get_judge(evaluation.judge)
    except (ValueError, TypeError) as exc:
        raise InputError(f"judge: {exc}") from None
    wanted = set(keys)
    calls: dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]] = {}
    try:
        for answer in answers:
            if answer.key not in wanted:
                continue
            judgment = call_judge(judge, answer.case, answer.prediction, evaluation)
            value = judgment.faithfulness
            call = None if math.isnan(value) else ("unfaithful" if value < 1 else "faithful")
            calls[answer.key] = (call, reasons_of(judgment.to_dict()), digest(answer.prediction.answer))
    finally:
        close = getattr(judge, "close", None)
        if callable(close):
            close()
    return judge.id, calls


def rejudge_pairs(
    base: Sequence[JudgedAnswer], head: Sequence[JudgedAnswer], keys: Iterable[tuple[str, int]], evaluation: Any
) -> tuple[str, dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]]:
    """Judge the labelled pairs again with ``evaluation``'s pairwise judge (``judge-check --config``, pairwise).

    Raises:
        InputError: the config has no ``pairwise:`` judge, or its options are invalid.
    """
    from gate.judges import get_pairwise_judge
    from gate.scoring import judge_pairs

    if evaluation.pairwise is None:
        raise InputError("--config: has no pairwise: judge to check pairwise labels with")
    try:
        judge = get_pairwise_judge(evaluation.pairwise)
    except (ValueError, TypeError) as exc:
        raise InputError(f"pairwise: {exc}") from None
    firsts: dict[tuple[str, str], JudgedAnswer] = {}
    for side, answers in (("base", base), ("head", head)):
        for answer in sorted(answers, key=lambda a: a.prediction.repeat):
            firsts.setdefault((side, answer.case.id), answer)
    pairs = [
        (firsts[("base", case_id)], firsts[("head", case_id)])
        for case_id, _ in keys
        if ("base", case_id) in firsts and ("head", case_id) in firsts
    ]
    try:
        judgments = judge_pairs([(b.case, b.prediction, h.prediction) for b, h in pairs], judge, evaluation)
    finally:
        judge.close()
    calls: dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]] = {}
    for (b, h), judgment in zip(pairs, judgments, strict=True):
        outcome = None if judgment is None else judgment.outcome
        better = {"win": "head", "loss": "base", "tie": "tie", None: None}[outcome]
        reasons = [] if judgment is None else [r for r in (judgment.reason_base_first, judgment.reason_head_first) if r]
        calls[(b.case.id, 0)] = (better, reasons, digest([b.prediction.answer, h.prediction.answer]))
    return judge.id, calls


def pair_calls(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]:
    """The pairwise judge's calls of :func:`pair_rows`' rows, as :func:`check` reads them."""
    return {(r["id"], r["repeat"]): (r["judge"]["better"], r["judge"]["reasons"], r["answer_sha256"]) for r in rows}
