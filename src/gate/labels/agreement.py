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
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from gate.errors import InputError
from gate.jsonl import read_jsonl, validate
from gate.labels.sampling import JudgedAnswer, digest, reasons_of

if TYPE_CHECKING:
    from gate.labels.rules import Rule

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
    design: str | None = None
    """How ``rag-gate label`` drew the answer (``simple``, ``stratified``), if recorded."""
    stratum: str | None = None
    """The answer's stratum in a stratified sample, if recorded."""
    stratified_by: str | None = None
    """The metric whose rule made the strata, if recorded."""
    inclusion_probability: float | None = None
    """The answer's probability of having been drawn (π), if recorded; its weight is 1/π."""

    @property
    def weight(self) -> float:
        """The Horvitz–Thompson weight 1/π (1 without a recorded π: a simple random sample)."""
        return 1.0 / self.inclusion_probability if self.inclusion_probability else 1.0

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

    ``id``, ``repeat`` and ``faithful`` (or ``better``) are enough. A row of ``rag-gate label``'s JSONL is a labels
    row too: its ``judge`` object gives the judge's key and call, its copies of the question, answer and chunks are
    ignored, and a row whose ``faithful`` (``better``) is still null is not labelled yet and is skipped.

    Raises:
        InputError: ``file:line: field: message`` for a malformed row; a second row for the same answer (id and
            repeat) names both lines; a file that mixes single-answer and pairwise rows; a file without a labelled
            row.
    """
    path = Path(path)
    labels: list[Label] = []
    first: dict[tuple[str, int], int] = {}
    unlabelled = 0
    for line, record in read_jsonl(path):
        if isinstance(record, dict) and "faithful" not in record and "better" not in record:
            raise InputError(f"{path}:{line}: faithful: required field is missing (or better, for a pair)")
        if isinstance(record, dict) and "faithful" in record and "better" in record:
            raise InputError(f"{path}:{line}: better: a row has faithful (one answer) or better (a pair), not both")
        validate(record, SCHEMA, path, line)
        if record.get("faithful") is None and record.get("better") is None:
            unlabelled += 1
            continue
        fields = {k: record.get(k) for k in _LABEL_KEYS if k in record}
        judge = record.get("judge")
        if isinstance(judge, dict):  # a row of `rag-gate label`: the judge's call as shown
            fields["judge"] = judge.get("key") if isinstance(judge.get("key"), str) else None
            flagged, better = judge.get("flagged"), judge.get("better")
            fields.setdefault("judge_flagged", flagged if isinstance(flagged, bool) else None)
            fields.setdefault("judge_better", better if better in PAIR_CLASSES else None)
        label = Label(line=line, **fields)
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
        detail = f" ({unlabelled} row(s) with faithful or better still null: label them first)" if unlabelled else ""
        raise InputError(f"{path}: no labels{detail}")
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


CI_METHOD = (
    f"95 % percentile bootstrap over the labelled answers, resampled within strata ({BOOTSTRAP_RESAMPLES} "
    "resamples, seeded)"
)
"""How :func:`agreement`'s intervals are computed."""


@dataclass(frozen=True)
class Agreement:
    """The judge against the labels, each estimate weighted by the answers' Horvitz–Thompson weights (1/π)."""

    classes: tuple[str, ...]
    """Class names, in matrix order (binary: faithful, unfaithful; pairwise: base, head, tie)."""
    matrix: tuple[tuple[int, ...], ...]
    """Confusion matrix of the labelled answers (counts): rows are the labels, columns the judge's calls."""
    n: int
    """Labelled answers compared."""
    accuracy: float
    """Estimated share of the run's answers where the judge and the label agree."""
    balanced_accuracy: Interval
    """Mean per-class recall of the labels' classes (sensitivity and specificity for binary), weighted."""
    kappa: Interval
    """Cohen's κ (chance-corrected agreement) of the weighted matrix."""
    verdict: str
    """One of :data:`VERDICTS`' keys."""
    method: str = CI_METHOD
    """How the intervals were computed."""
    weighted: tuple[tuple[float, ...], ...] = ()
    """The estimated share of the run's answers in each cell of :attr:`matrix` (sums to 1)."""
    sensitivity: Interval = Interval(math.nan, math.nan, math.nan)
    """Binary: the share of unfaithful answers the judge flags (weighted); NaN for pairs."""
    specificity: Interval = Interval(math.nan, math.nan, math.nan)
    """Binary: the share of faithful answers the judge passes (weighted); NaN for pairs."""
    undefined: tuple[str, ...] = ()
    """Why an estimate or interval is not given (a sample with one class of labels or of calls), one sentence each."""
    weights: str = "none: every labelled answer counts once (a simple random sample)"
    """How the answers were weighted."""

    def counts(self) -> dict[str, int]:
        """Binary: tp (judge flags, label unfaithful), fp, fn, tn; positive = unfaithful."""
        (tn, fp), (fn, tp) = self.matrix
        return {"tp": tp, "fp": fp, "fn": fn, "tn": tn}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN as None)."""

        def num(x: float) -> float | None:
            return None if math.isnan(x) else round(float(x), 6)

        def interval(x: Interval) -> dict[str, float | None]:
            return {k: num(getattr(x, k)) for k in ("value", "low", "high")}

        out: dict[str, Any] = {
            "n": self.n,
            "classes": list(self.classes),
            "confusion_matrix": [list(row) for row in self.matrix],
            "weighted_confusion_matrix": [[num(v) for v in row] for row in self.weighted],
            "accuracy": num(self.accuracy),
            "balanced_accuracy": interval(self.balanced_accuracy),
            "kappa": interval(self.kappa),
            "verdict": self.verdict,
            "verdict_text": VERDICTS[self.verdict],
            "interval_method": self.method,
            "weights": self.weights,
            "undefined": list(self.undefined),
        }
        if len(self.classes) == 2:
            out["counts"] = self.counts()
            out["sensitivity"], out["specificity"] = interval(self.sensitivity), interval(self.specificity)
        return out


def _stats(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Accuracy, balanced accuracy, κ and per-class recall of confusion matrices of shape (..., k, k).

    ``counts`` may be weighted (floats); NaN where undefined.
    """
    counts = counts.astype(float)
    n = counts.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(counts, axis1=-2, axis2=-1) / n
        truth, called = counts.sum(axis=-1), counts.sum(axis=-2)
        expected = (truth * called).sum(axis=-1) / n**2
        kappa = np.where(expected < 1 - 1e-12, (observed - expected) / (1 - expected), np.nan)
        recall = np.diagonal(counts, axis1=-2, axis2=-1) / truth
        present = truth > 0
        balanced = np.where(present, recall, 0).sum(axis=-1) / present.sum(axis=-1)
    return observed, balanced, kappa, recall


def design_resamples(strata: Sequence[Any], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap indices that respect a stratified design: each stratum resampled within itself.

    Args:
        strata: the stratum of each of the n sampled items (one value for all: a simple random sample).
        resamples: B.
        rng: the random generator.

    Returns:
        Integer array of shape (B, n): row b holds, for each stratum h, n_h indices drawn with replacement from
        the items of h (the stratified bootstrap).

    Source: Efron & Tibshirani 1993, "An Introduction to the Bootstrap", §3.5 (stratified samples); Rao & Wu
    1988, JASA 83(401), doi:10.1080/01621459.1988.10478591.
    """
    codes = {name: i for i, name in enumerate(dict.fromkeys(strata))}
    index = np.asarray([codes[name] for name in strata], dtype=np.intp)
    parts = []
    for code in range(len(codes)):
        members = np.flatnonzero(index == code)
        parts.append(members[rng.integers(0, len(members), size=(resamples, len(members)))])
    return np.concatenate(parts, axis=1) if parts else np.zeros((resamples, 0), dtype=np.intp)


def degenerate(matrix: np.ndarray, classes: Sequence[str]) -> list[str]:
    """Sentences for a binary sample that cannot measure the judge: labels of one class, or calls of one class.

    With all labels of one class the judge's rate on the other is unknown and κ and balanced accuracy are
    undefined; with all calls of one class (the judge flagged every sampled answer) its specificity cannot be told
    from chance (κ is 0 whatever the labels): neither gets a number or an interval, each gets a sentence.
    """
    if len(classes) != 2 or not matrix.sum():
        return []
    out = []
    truth, called = matrix.sum(axis=1), matrix.sum(axis=0)
    if truth[1] == 0:
        out.append(
            "all labels are of one class (faithful): the judge's sensitivity is unknown (label answers it flagged: "
            "rag-gate label --stratify)"
        )
    elif truth[0] == 0:
        out.append(
            "all labels are of one class (unfaithful): the judge's specificity is unknown (label answers it passed: "
            "rag-gate label --stratify)"
        )
    if called[0] == 0:
        out.append(
            "the judge flagged every sampled answer: its specificity is unknown (sample answers it passed: "
            "rag-gate label --stratify)"
        )
    elif called[1] == 0:
        out.append(
            "the judge passed every sampled answer: its sensitivity is unknown (sample answers it flagged: "
            "rag-gate label --stratify)"
        )
    return out


def agreement(
    labels: Sequence[int],
    calls: Sequence[int],
    classes: Sequence[str],
    *,
    weights: Sequence[float] | None = None,
    strata: Sequence[Any] | None = None,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Agreement:
    """The judge's calls against the labels: confusion matrix, balanced accuracy, κ and rates with 95 % intervals.

    Every estimate is of the run, not of the sample: each labelled answer counts with its Horvitz–Thompson weight
    1/π (π its probability of having been drawn), so a stratum the sampler over-represents counts for what it is in
    the run. Balanced accuracy is the mean recall over the classes present in the labels (as scikit-learn's
    ``balanced_accuracy_score`` with ``sample_weight``); κ is Cohen's (1960) κ = (p_o − p_e) / (1 − p_e) of the
    weighted matrix, NaN when p_e = 1. Intervals: the percentile bootstrap resampled within strata
    (:func:`design_resamples`), resamples where the statistic is undefined left out; an interval of zero width (a
    sample that cannot vary) is not given. A binary sample with labels or calls of one class gives no κ, balanced
    accuracy or the unknown rate, but a sentence (:func:`degenerate`).

    Args:
        labels: the class index of each label (0 = faithful, 1 = unfaithful for binary), shape (n,).
        calls: the judge's class index for the same answers, shape (n,).
        classes: class names.
        weights: each answer's weight 1/π, shape (n,); None: all 1 (a simple random sample).
        strata: each answer's stratum, shape (n,); None: one stratum.
        seed: the bootstrap's seed.
        resamples: bootstrap resamples.

    Source: Horvitz & Thompson 1952, JASA 47(260), doi:10.1080/01621459.1952.10483446; Cohen 1960, Educ. Psychol.
    Meas. 20(1), doi:10.1177/001316446002000104.
    """
    k = len(classes)
    y, p = np.asarray(labels, dtype=np.intp), np.asarray(calls, dtype=np.intp)
    n = len(y)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    codes = y * k + p
    matrix = np.bincount(codes, minlength=k * k).reshape(k, k)
    weighted = np.bincount(codes, weights=w, minlength=k * k).reshape(k, k)
    accuracy, balanced, kappa, recall = (np.asarray(v, dtype=float) for v in _stats(weighted))
    nan = (math.nan, math.nan)
    ba_ci = kappa_ci = sens_ci = spec_ci = nan
    if n:
        rng = np.random.default_rng(seed)
        rows = design_resamples(list(strata) if strata is not None else [0] * n, resamples, rng)
        flat = (codes[rows] + (np.arange(resamples) * k * k)[:, None]).ravel()
        boot = np.bincount(flat, weights=w[rows].ravel(), minlength=resamples * k * k).reshape(resamples, k, k)
        _, b_balanced, b_kappa, b_recall = _stats(boot)
        ba_ci, kappa_ci = _percentiles(b_balanced), _percentiles(b_kappa)
        if k == 2:
            sens_ci, spec_ci = _percentiles(b_recall[:, 1]), _percentiles(b_recall[:, 0])
    undefined = degenerate(matrix, classes)

    def interval(value: float, bounds: tuple[float, float], gone: bool) -> Interval:
        if gone or math.isnan(value):
            return Interval(math.nan, math.nan, math.nan)
        if bounds[0] == bounds[1]:  # the resamples cannot vary: no interval, never a zero-width one
            return Interval(float(value), math.nan, math.nan)
        return Interval(float(value), *bounds)

    one_class = bool(undefined)
    flagged_all = k == 2 and n > 0 and matrix[:, 0].sum() == 0
    passed_all = k == 2 and n > 0 and matrix[:, 1].sum() == 0
    no_unfaithful = k == 2 and n > 0 and matrix[1].sum() == 0
    no_faithful = k == 2 and n > 0 and matrix[0].sum() == 0
    w_total = weighted.sum()
    undefined_ci = Interval(math.nan, math.nan, math.nan)
    result = Agreement(
        classes=tuple(classes),
        matrix=tuple(tuple(int(v) for v in row) for row in matrix),
        n=n,
        accuracy=float(accuracy),
        balanced_accuracy=interval(float(balanced), ba_ci, one_class),
        kappa=interval(float(kappa), kappa_ci, one_class),
        verdict="too_few",
        weighted=tuple(tuple(float(v / w_total) if w_total else math.nan for v in row) for row in weighted),
        sensitivity=interval(float(recall[1]), sens_ci, passed_all or no_unfaithful) if k == 2 else undefined_ci,
        specificity=interval(float(recall[0]), spec_ci, flagged_all or no_faithful) if k == 2 else undefined_ci,
        undefined=tuple(undefined),
        weights=(
            "none: every labelled answer counts once (a simple random sample)"
            if weights is None or np.allclose(w, w[0] if n else 1)
            else "Horvitz–Thompson, 1/π of each answer's inclusion probability (the labels file's)"
        ),
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
    kappa = result.kappa
    low, high = (kappa.value if math.isnan(b) else b for b in (kappa.low, kappa.high))  # no interval: no spread
    if high < AGREE_KAPPA:
        return "disagrees"
    if kappa.value >= AGREE_KAPPA and low >= FLOOR_KAPPA:
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
    rule: str = "faithfulness < 1"
    """The per-answer rule the judge's calls follow (:class:`gate.labels.rules.Rule`'s text)."""

    @property
    def disagreements(self) -> tuple[Compared, ...]:
        """The answers where the judge's call differs from the label."""
        return tuple(c for c in self.compared if c.call != c.truth)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``judge-check --format json``)."""
        return {
            "judge": self.judge,
            **self.agreement.to_dict(),
            "rule": self.rule,
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
    rule: str = "faithfulness < 1",
) -> Check:
    """Compare labels with the judge's calls, each label weighted by 1/π of its recorded inclusion probability.

    Labels of a stratified sample (``design: stratified``) are bootstrapped within their ``stratum``. Labels
    without π count once each (a simple random sample); a file where only some rows have π counts every row once,
    with a warning.

    Args:
        labels: the labels (all single-answer or all pairwise).
        calls: (case id, repeat) → (the judge's class or None without a call, its reasons, the answer's
            :func:`digest` or None when unknown); a label whose answer is absent is skipped.
        judge: the judge's id, for the report.
        seed: the bootstrap's seed.
        warnings: stale-label warnings to carry.
        rule: the per-answer rule the calls follow, for the report (e.g. ``hallucinated_claim_rate > 0``).
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
    weights, strata, extra = design_of([c.label for c in compared])
    stats = agreement(
        [index[c.truth] for c in compared],
        [index[c.call] for c in compared],
        classes,
        weights=weights,
        strata=strata,
        seed=seed,
    )
    return Check(judge, stats, tuple(compared), tuple(skipped), (*warnings, *extra), rule)


def design_of(labels: Sequence[Label]) -> tuple[list[float] | None, list[str] | None, list[str]]:
    """The labels' Horvitz–Thompson weights (None: equal), bootstrap strata (None: one) and warnings.

    Weights are 1/π when every label records its inclusion probability π; strata are the labels' ``stratum``
    when every label comes from a stratified sample.
    """
    with_pi = [label.inclusion_probability is not None for label in labels]
    warnings = []
    weights = None
    if all(with_pi) and labels:
        weights = [label.weight for label in labels]
    elif any(with_pi):
        warnings.append(
            f"{with_pi.count(False)} of {len(labels)} labels have no inclusion_probability: every label counts "
            "once (as a simple random sample), which is biased if the sample was stratified"
        )
    stratified = labels and all(label.design == "stratified" and label.stratum for label in labels)
    strata = [str(label.stratum) for label in labels] if stratified and weights is not None else None
    return weights, strata, warnings


def recorded_calls(labels: Sequence[Label]) -> dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]:
    """The judge's calls recorded in the labels themselves (those shown when labelling), as :func:`check` reads."""
    calls: dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]] = {}
    for label in labels:
        if label.pairwise and label.judge_better is not None:
            calls[label.key] = (label.judge_better, (), None)
        elif not label.pairwise and label.judge_flagged is not None:
            calls[label.key] = ("unfaithful" if label.judge_flagged else "faithful", (), None)
    return calls


def run_calls(
    answers: Sequence[JudgedAnswer], rule: Rule | None = None
) -> dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]:
    """The judge's calls of a run by ``rule`` (None: faithfulness < 1), as :func:`check` reads them."""
    out: dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]] = {}
    for a in answers:
        flagged = a.flagged if rule is None else rule.call(a.values.get(rule.metric, math.nan))
        call = None if flagged is None else ("unfaithful" if flagged else "faithful")
        out[a.key] = (call, reasons_of(a.detail), digest(a.prediction.answer))
    return out


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
