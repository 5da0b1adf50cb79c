"""Judge evaluation: run a judge over human-labelled answers and measure how well it finds hallucinations.

Loaders read the local copies of RAGTruth (Niu et al. 2024), FaithBench (Bao et al. 2025) and RGB's
counterfactual subset (Chen et al. 2024). Their licenses are non-commercial: the data are read from a path
given at run time and never shipped with rag-gate.

Response-level rule (:func:`flags_hallucination`): an answer is *hallucinated* when at least one claim is
contradicted or when its faithfulness (supported / all claims) is below a threshold. An answer without claims
(a refusal) is not flagged. The threshold is chosen on a development split (:func:`split_by_source`,
:func:`choose_threshold`) and the figures are reported on the other split.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binomtest
from sklearn.metrics import (
    balanced_accuracy_score,
    cohen_kappa_score,
    confusion_matrix,
    precision_recall_fscore_support,
    roc_auc_score,
)

from gate.errors import InputError, located
from gate.judges.base import Judge, Judgment
from gate.models import Chunk

DEFAULT_THRESHOLD = 0.5
"""Default faithfulness threshold of the response-level rule (chosen on the RAGTruth development split)."""


@dataclass(frozen=True)
class LabeledCase:
    """One answer with a human hallucination label (RAGTruth or FaithBench)."""

    id: str
    """Dataset row id, e.g. "ragtruth-1477"."""
    question: str
    """The user question ("" for summaries and data-to-text)."""
    chunks: tuple[Chunk, ...]
    """The context the generator was given, as chunks (passages, the article, or the business record)."""
    response: str
    """The generated answer, verbatim."""
    hallucinated: bool
    """Human label: True when annotators marked at least one hallucinated span."""
    model: str
    """The LLM that wrote the response."""
    source_id: str
    """Prompt / source id: responses sharing it answer the same prompt."""
    task_type: str
    """"QA", "Summary" or "Data2txt"."""
    spans: tuple[str, ...] = ()
    """The texts of the human-marked spans (for the calibration sample)."""
    span_offsets: tuple[tuple[int, int], ...] = ()
    """(start, end) character offsets in ``response`` of the spans that make the answer hallucinated (FaithBench:
    those labelled Unwanted or Questionable, as its binarised label; RAGTruth: every span)."""


@dataclass(frozen=True)
class CounterfactualItem:
    """One RGB counterfactual item: the same passages supporting the answer and rewritten for a fake one."""

    id: str
    question: str
    answer: str
    """The correct answer (list-form answers: first variant of each part, joined with " and ")."""
    fake_answer: str
    """The counterfactual answer written into ``contradicting``."""
    supporting: tuple[str, ...]
    contradicting: tuple[str, ...]
    """``supporting`` with the answer replaced by ``fake_answer`` (same order and count)."""
    noise: tuple[str, ...]


@dataclass(frozen=True)
class JudgeQuality:
    """Response-level agreement of a judge with human hallucination labels ("hallucinated" = positive)."""

    n: int
    """Answers judged (judge failures excluded)."""
    n_hallucinated: int
    """Answers labelled hallucinated by humans."""
    threshold: float
    """Faithfulness threshold of the response-level rule."""
    balanced_accuracy: float
    """Mean of recall on hallucinated and on faithful answers, in [0, 1]; 0.5 = chance."""
    precision: float
    recall: float
    f1: float
    kappa: float
    """Cohen's kappa between the judge's flags and the human labels, in [-1, 1]."""
    confusion: tuple[int, int, int, int]
    """(tn, fp, fn, tp) with hallucinated as the positive class."""
    n_errors: int = 0
    """Judge failures (``Judgment.error`` set), left out of every figure."""
    n_no_claims: int = 0
    """Answers without claims (refusals), counted as not hallucinated."""
    kappa_judges: float | None = None
    """Cohen's kappa between this judge and a second judge, when one was given."""


def flags_hallucination(judgment: Judgment, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """The response-level rule: any contradicted claim, or faithfulness below ``threshold``.

    Args:
        judgment: a judge's result for one answer.
        threshold: faithfulness threshold in [0, 1]; 1.0 flags any claim that is not supported.

    Returns:
        True when the answer is flagged as hallucinated; False for answers without claims (NaN
        faithfulness).

    """
    faithfulness = judgment.faithfulness
    if math.isnan(faithfulness):
        return False
    return judgment.n_contradicted > 0 or faithfulness < threshold


def judge_cases(judge: Judge, cases: Sequence[LabeledCase]) -> list[Judgment]:
    """Run ``judge`` on every case, in order (question, response, chunks)."""
    return [judge.judge(case.question, case.response, case.chunks) for case in cases]


def quality(
    cases: Sequence[LabeledCase],
    judgments: Sequence[Judgment],
    threshold: float = DEFAULT_THRESHOLD,
    second: Sequence[Judgment] | None = None,
) -> JudgeQuality:
    """Response-level figures of ``judgments`` against the human labels of ``cases``.

    Args:
        cases: n labelled cases.
        judgments: n judgments, same order.
        threshold: faithfulness threshold of :func:`flags_hallucination`.
        second: optional n judgments of a second judge (for the inter-judge kappa).

    Returns:
        :class:`JudgeQuality`. Precision, recall and F1 treat "hallucinated" as the positive class and are 0
        when undefined.

    Raises:
        ValueError: the sequences differ in length or no case is left after removing judge failures.

    Source: scikit-learn ``balanced_accuracy_score`` (Brodersen et al. 2010, doi:10.1109/ICPR.2010.764),
    ``precision_recall_fscore_support``, ``cohen_kappa_score`` (Cohen 1960, doi:10.1177/001316446002000104).

    """
    if len(cases) != len(judgments) or (second is not None and len(second) != len(cases)):
        raise ValueError("cases and judgments must have the same length")
    keep = [i for i, j in enumerate(judgments) if j.error is None]
    if not keep:
        raise ValueError("no judgment without error")
    truth = np.array([cases[i].hallucinated for i in keep], dtype=int)
    flags = np.array([flags_hallucination(judgments[i], threshold) for i in keep], dtype=int)
    precision, recall, f1, _ = precision_recall_fscore_support(
        truth, flags, average="binary", pos_label=1, zero_division=0
    )
    tn, fp, fn, tp = confusion_matrix(truth, flags, labels=[0, 1]).ravel()
    kappa_judges = None
    if second is not None:
        other = np.array([flags_hallucination(second[i], threshold) for i in keep], dtype=int)
        kappa_judges = _kappa(flags, other)
    return JudgeQuality(
        n=len(keep),
        n_hallucinated=int(truth.sum()),
        threshold=threshold,
        balanced_accuracy=float(balanced_accuracy_score(truth, flags)) if len(set(truth)) > 1 else math.nan,
        precision=float(precision),
        recall=float(recall),
        f1=float(f1),
        kappa=_kappa(truth, flags),
        confusion=(int(tn), int(fp), int(fn), int(tp)),
        n_errors=len(judgments) - len(keep),
        n_no_claims=sum(math.isnan(judgments[i].faithfulness) for i in keep),
        kappa_judges=kappa_judges,
    )


def _kappa(a: np.ndarray, b: np.ndarray) -> float:
    if len(set(a.tolist()) | set(b.tolist())) < 2:
        return math.nan  # one class only: kappa undefined
    return float(cohen_kappa_score(a, b))


def evaluate_judge(
    judge: Judge,
    cases: Sequence[LabeledCase],
    threshold: float = DEFAULT_THRESHOLD,
    second_judge: Judge | None = None,
) -> JudgeQuality:
    """Run ``judge`` (and ``second_judge``, if given) over ``cases`` and compute :func:`quality`."""
    second = judge_cases(second_judge, cases) if second_judge is not None else None
    return quality(cases, judge_cases(judge, cases), threshold, second)


def choose_threshold(
    cases: Sequence[LabeledCase], judgments: Sequence[Judgment], grid: Iterable[float] | None = None
) -> float:
    """The faithfulness threshold that maximises balanced accuracy on (development) ``cases``.

    Args:
        cases: labelled development cases (never the split the figures are reported on).
        judgments: their judgments, same order.
        grid: candidate thresholds; default 0.00, 0.05, …, 1.00. Ties go to the smallest threshold.

    Returns:
        The chosen threshold.

    """
    candidates = [round(float(t), 4) for t in (grid if grid is not None else np.linspace(0.0, 1.0, 21))]
    scores = [quality(cases, judgments, t).balanced_accuracy for t in candidates]
    return candidates[int(np.nanargmax(scores))]


def split_by_source(
    cases: Sequence[LabeledCase], salt: str = "rag-gate"
) -> tuple[list[LabeledCase], list[LabeledCase]]:
    """Split ``cases`` into (development, test) halves by a hash of ``source_id``.

    All answers to one prompt land in the same half, so no source text is seen on both sides. The split is
    deterministic (sha256 of ``salt`` + source id, even → development).
    """
    dev: list[LabeledCase] = []
    test: list[LabeledCase] = []
    for case in cases:
        digest = hashlib.sha256(f"{salt}:{case.source_id}".encode()).digest()
        (dev if digest[0] % 2 == 0 else test).append(case)
    return dev, test


def calibration_sample(
    cases: Sequence[LabeledCase],
    judgments: Sequence[Judgment],
    rng: np.random.Generator,
    size: int = 20,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[dict[str, Any]]:
    """A random sample of cases with the judge's verdicts, for a human to check the judge by hand.

    Args:
        cases: labelled cases.
        judgments: their judgments, same order.
        rng: the random generator (seed it for a reproducible sample).
        size: sample size (all cases when fewer).
        threshold: threshold of the response-level rule.

    Returns:
        ``size`` JSON-ready dicts: id, model, task type, human label and spans, the judge's flag and
        faithfulness, and every claim with its verdict, attributed sentence and reason.

    """
    picked = sorted(rng.choice(len(cases), size=min(size, len(cases)), replace=False).tolist())
    return [
        {
            "id": cases[i].id,
            "model": cases[i].model,
            "task_type": cases[i].task_type,
            "human_hallucinated": cases[i].hallucinated,
            "human_spans": list(cases[i].spans),
            "judge_hallucinated": flags_hallucination(judgments[i], threshold),
            "faithfulness": None if math.isnan(judgments[i].faithfulness) else judgments[i].faithfulness,
            "response": cases[i].response,
            "claims": judgments[i].to_dict()["claims"],
        }
        for i in picked
    ]


def group_quality(
    cases: Sequence[LabeledCase],
    judgments: Sequence[Judgment],
    key: Callable[[LabeledCase], str],
    threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, JudgeQuality]:
    """:func:`quality` per group of cases (e.g. ``key=lambda c: c.task_type``), groups sorted by name."""
    groups: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        groups.setdefault(key(case), []).append(i)
    return {
        name: quality([cases[i] for i in idx], [judgments[i] for i in idx], threshold)
        for name, idx in sorted(groups.items())
    }


# ---------------------------------------------------------------- counterfactual (RGB) rates


@dataclass(frozen=True)
class CounterfactualRates:
    """How the judge treats minimal pairs: a passage restated as is, and the same passage with a fake answer."""

    n: int
    """Pairs (supporting passage, contradicting passage) that differ."""
    supported_rate: float
    """Share of restated supporting passages that are mostly supported (faithfulness ≥ 0.5)."""
    mean_faithfulness: float
    """Mean faithfulness of the restated supporting passages."""
    contradicted_rate: float
    """Share of fake passages with at least one claim judged contradicted (not merely unverifiable)."""
    flagged_rate: float
    """Share of fake passages flagged by the response-level rule (contradicted or low faithfulness)."""


def counterfactual_rates(
    judge: Judge, items: Sequence[CounterfactualItem], form: str = "passage", threshold: float = DEFAULT_THRESHOLD
) -> CounterfactualRates:
    """Judge restated and counterfactual answers against the supporting passages plus noise.

    Args:
        judge: the judge.
        items: RGB counterfactual items.
        form: "passage": the answers are the supporting passage and its counterfactual rewrite, pair by pair;
            "sentence": the answers are "<question>: <answer>." and "<question>: <fake answer>.", one pair per
            item.
        threshold: threshold of the response-level rule for ``flagged_rate``.

    Returns:
        :class:`CounterfactualRates`.

    Raises:
        ValueError: unknown ``form`` or no pair.

    Source: RGB counterfactual robustness (Chen et al. 2024, AAAI, arXiv:2309.01431).

    """
    if form not in ("passage", "sentence"):
        raise ValueError(f"form must be 'passage' or 'sentence', got {form!r}")
    restated: list[Judgment] = []
    fake: list[Judgment] = []
    for item in items:
        chunks = tuple(
            Chunk(id=f"{item.id}/{kind}{i}", text=text)
            for kind, texts in (("s", item.supporting), ("n", item.noise))
            for i, text in enumerate(texts)
        )
        if form == "passage":
            pairs = [(s, c) for s, c in zip(item.supporting, item.contradicting, strict=True) if s != c]
        else:
            head = item.question.rstrip(" ?")
            pairs = [(f"{head}: {item.answer}.", f"{head}: {item.fake_answer}.")]
        for good, bad in pairs:
            restated.append(judge.judge(item.question, good, chunks))
            fake.append(judge.judge(item.question, bad, chunks))
    if not restated:
        raise ValueError("no counterfactual pair")
    faith = np.array([j.faithfulness for j in restated], dtype=float)
    return CounterfactualRates(
        n=len(restated),
        supported_rate=float(np.mean(np.nan_to_num(faith, nan=0.0) >= 0.5)),
        mean_faithfulness=float(np.nanmean(faith)) if not np.all(np.isnan(faith)) else math.nan,
        contradicted_rate=float(np.mean([j.n_contradicted > 0 for j in fake])),
        flagged_rate=float(np.mean([flags_hallucination(j, threshold) for j in fake])),
    )


# ---------------------------------------------------------------- loaders


def _rows(path: str | Path) -> Iterable[tuple[Path, int, dict[str, Any]]]:
    """(file, line number, object) for each line of ``path`` (a JSONL file, or a directory with cases.jsonl)."""
    file = Path(path)
    if file.is_dir():
        file = file / "cases.jsonl"
    if not file.is_file():
        raise InputError(located(file, None, None, "no such file"))
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(located(file, number, None, f"invalid JSON: {exc.msg}")) from exc
            if not isinstance(row, dict):
                raise InputError(located(file, number, None, "expected a JSON object"))
            yield file, number, row


def _field(row: Mapping[str, Any], name: str, path: str | Path, line: int) -> Any:
    if name not in row:
        raise InputError(located(path, line, name, "missing field"))
    return row[name]


RAGTRUTH_INSTRUCTIONS = {
    "Summary": "Summarize the following news.",
    "Data2txt": (
        "Write an objective overview about the following local business based only on the provided structured "
        "data in the JSON format. You should include details and cover the information mentioned in the "
        "customers' review. Don't make up information."
    ),
}
"""RAGTruth's task instructions (from its prompts), used as the question of Summary and Data2txt cases."""


def load_ragtruth(path: str | Path) -> list[LabeledCase]:
    """Load the RAGTruth subset (``cases.jsonl``: id, context, question, response, label, source_model, ...).

    QA contexts (a list of passages) become one chunk per passage; a summary's article is one chunk; a
    Data2txt business record (JSON) is linearised by :func:`yelp_chunks`. Summary and Data2txt cases, which
    have no question, get RAGTruth's task instruction as question (:data:`RAGTRUTH_INSTRUCTIONS`).

    Args:
        path: the JSONL file or the directory that holds ``cases.jsonl``.

    Returns:
        One :class:`LabeledCase` per line, with model name, source id, chunks, response and human label.

    Raises:
        InputError: missing file, invalid JSON or a missing field (``file:line: field: message``).

    """
    cases = []
    for file, line, row in _rows(path):
        context = _field(row, "context", file, line)
        task = _field(row, "task_type", file, line)
        case_id = str(_field(row, "id", file, line))
        if task == "Data2txt":
            chunks = yelp_chunks(json.loads(context), case_id)
        elif isinstance(context, list):
            chunks = tuple(Chunk(id=f"{case_id}/p{i + 1}", text=text) for i, text in enumerate(context))
        else:
            chunks = (Chunk(id=f"{case_id}/source", text=str(context)),)
        cases.append(_labeled(row, file, line, chunks, RAGTRUTH_INSTRUCTIONS.get(task, "")))
    return cases


def load_faithbench(path: str | Path) -> list[LabeledCase]:
    """Load FaithBench (``cases.jsonl``); the source passage is one chunk, ``label`` the binarised label.

    Raises:
        InputError: missing file, invalid JSON or a missing field.

    """
    cases = []
    for file, line, row in _rows(path):
        case_id = str(_field(row, "id", file, line))
        chunks = (Chunk(id=f"{case_id}/source", text=str(_field(row, "context", file, line))),)
        cases.append(_labeled(row, file, line, chunks))
    return cases


def _labeled(
    row: Mapping[str, Any], file: Path, line: int, chunks: tuple[Chunk, ...], instruction: str = ""
) -> LabeledCase:
    label = _field(row, "label", file, line)
    if label not in ("hallucinated", "faithful"):
        raise InputError(located(file, line, "label", f"must be 'hallucinated' or 'faithful', got {label!r}"))
    return LabeledCase(
        id=str(row["id"]),
        question=row.get("question") or instruction,
        chunks=chunks,
        response=str(_field(row, "response", file, line)),
        hallucinated=label == "hallucinated",
        model=str(row.get("source_model", "")),
        source_id=str(_field(row, "source_id", file, line)),
        task_type=str(row.get("task_type", "")),
        spans=tuple(str(s.get("text", "")) for s in (row.get("span_labels") or [])),
        span_offsets=tuple(
            (int(s["start"]), int(s["end"]))
            for s in (row.get("span_labels") or [])
            if "labels" not in s or any(lab.startswith("Unwanted") or lab == "Questionable" for lab in s["labels"])
        ),
    )


def load_rgb_counterfactual(path: str | Path) -> list[CounterfactualItem]:
    """Load RGB's English counterfactual subset (``cases.jsonl``).

    Raises:
        InputError: missing file, invalid JSON, a missing field, or supporting and contradicting passages
            of different counts.

    """
    items = []
    for file, line, row in _rows(path):
        answer = _field(row, "answer", file, line)
        if isinstance(answer, list):  # [[variant, ...], ...]: one part per list
            answer = " and ".join(str(part[0] if isinstance(part, list) else part) for part in answer)
        supporting = tuple(_field(row, "supporting_contexts", file, line))
        contradicting = tuple(_field(row, "contradicting_contexts", file, line))
        if len(supporting) != len(contradicting):
            raise InputError(located(file, line, "contradicting_contexts", "count differs from supporting"))
        items.append(
            CounterfactualItem(
                id=str(_field(row, "id", file, line)),
                question=str(_field(row, "question", file, line)),
                answer=str(answer),
                fake_answer=str(_field(row, "fake_answer", file, line)),
                supporting=supporting,
                contradicting=contradicting,
                noise=tuple(row.get("noise_contexts") or ()),
            )
        )
    return items


# ---------------------------------------------------------------- Yelp record linearisation

_STATES = dict(
    pair.split(":")
    for pair in (
        "AL:Alabama AK:Alaska AZ:Arizona AR:Arkansas CA:California CO:Colorado CT:Connecticut DE:Delaware "
        "FL:Florida GA:Georgia HI:Hawaii ID:Idaho IL:Illinois IN:Indiana IA:Iowa KS:Kansas KY:Kentucky "
        "LA:Louisiana ME:Maine MD:Maryland MA:Massachusetts MI:Michigan MN:Minnesota MS:Mississippi "
        "MO:Missouri MT:Montana NE:Nebraska NV:Nevada NH:New_Hampshire NJ:New_Jersey NM:New_Mexico "
        "NY:New_York NC:North_Carolina ND:North_Dakota OH:Ohio OK:Oklahoma OR:Oregon PA:Pennsylvania "
        "RI:Rhode_Island SC:South_Carolina SD:South_Dakota TN:Tennessee TX:Texas UT:Utah VT:Vermont "
        "VA:Virginia WA:Washington WV:West_Virginia WI:Wisconsin WY:Wyoming"
    ).split()
)
_MONTH_NAMES = "January February March April May June July August September October November December".split()


def _words(key: str) -> str:
    """Split a record key into words: "RestaurantsTakeOut" → "restaurants takeout"."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z][a-z]{2,})", " ", key).replace("_", " ")
    return re.sub(r"\btake out\b", "takeout", spaced.lower())


def _value(value: Any) -> str:
    return re.sub(r"^u?'(.*)'$", r"\1", str(value)).replace("_", " ")


def _date(stamp: str) -> str:
    match = re.match(r"(\d{4})-(\d{2})-(\d{2})", stamp)
    if not match:
        return stamp
    year, month, day = (int(g) for g in match.groups())
    return f"{_MONTH_NAMES[month - 1]} {day}, {year}"


def _hours(spec: str) -> str:
    return re.sub(r"(\d{1,2}):(\d{1,2})", lambda m: f"{int(m.group(1))}:{int(m.group(2)):02d}", spec).replace(
        "-", " to "
    )


def yelp_chunks(record: Mapping[str, Any], case_id: str = "yelp") -> tuple[Chunk, ...]:
    """Linearise a RAGTruth Data2txt (Yelp) business record into text chunks, one fact per sentence.

    The business facts form one chunk: "Name: Finch & Fork.", "State: CA (California).", "Monday 17:30 to
    23:00.", "Outdoor seating." for true attributes and "No outdoor seating." for false ones (so negation can
    be checked), "Wifi: free.", "Rating: 4.0 stars."; unknown (null) attributes are left out. Each review is
    its own chunk: "Review of January 9, 2022, 5.0 stars. <text>".
    """
    facts: list[str] = []
    for key in ("name", "address", "city"):
        if record.get(key):
            facts.append(f"{key.capitalize()}: {record[key]}.")
    if record.get("state"):
        state = str(record["state"])
        facts.append(f"State: {state} ({_STATES.get(state, state).replace('_', ' ')}).")
    if record.get("categories"):
        facts.append(f"Categories: {record['categories']}.")
    for day, spec in (record.get("hours") or {}).items():
        facts.append(f"{day} {_hours(str(spec))}.")
    for key, value in (record.get("attributes") or {}).items():
        facts.extend(_attribute(_words(key), value))
    if record.get("business_stars") is not None:
        facts.append(f"Rating: {record['business_stars']} stars.")
    chunks = [Chunk(id=f"{case_id}/business", text=" ".join(facts))]
    for i, review in enumerate(record.get("review_info") or [], start=1):
        head = f"Review of {_date(str(review.get('review_date', '')))}, {review.get('review_stars')} stars."
        chunks.append(Chunk(id=f"{case_id}/review{i}", text=f"{head} {review.get('review_text', '')}"))
    return tuple(chunks)


def _attribute(name: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [s for key, sub in value.items() for s in _attribute(f"{_words(key)} {name}", sub)]
    if isinstance(value, bool) or _value(value) in ("True", "False"):
        positive = value is True or _value(value) == "True"
        return [f"{name.capitalize()}." if positive else f"No {name}."]
    text = _value(value)
    if text.lower() in ("no", "none"):
        return [f"No {name}."]
    return [f"{name.capitalize()}: {text}."]


# ---------------------------------------------------------------- detection with confidence intervals

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def word_novelty(response: str, chunks: Sequence[Chunk]) -> float:
    """The trivial baseline: share of the answer's words that never occur in the context.

    Words are maximal runs of letters and digits, lower-cased; the share is over the answer's word tokens (a
    repeated novel word counts each time).

    Args:
        response: the answer.
        chunks: the context it was given.

    Returns:
        A share in [0, 1]; 0 for an answer without words.

    """
    words = _WORD.findall(response.lower())
    if not words:
        return 0.0
    context = set(_WORD.findall(" ".join(c.text for c in chunks).lower()))
    return sum(w not in context for w in words) / len(words)


def hallucination_score(judgment: Judgment) -> float:
    """A continuous response-level score for ranking (AUROC): higher = more likely hallucinated.

    ``1 + contradicted share`` when a claim is contradicted (always above any answer without contradiction),
    else ``1 - faithfulness``; 0 for an answer without claims and for a judge failure.
    """
    faithfulness = judgment.faithfulness
    if judgment.error is not None or math.isnan(faithfulness):
        return 0.0
    if judgment.n_contradicted:
        return 1.0 + judgment.contradiction_rate
    return 1.0 - faithfulness


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile bootstrap 95 % confidence interval."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass(frozen=True)
class Detection:
    """Response-level detection figures of one scorer against human labels, with 95 % CIs."""

    name: str
    n: int
    n_hallucinated: int
    threshold: float
    """Flag when score > threshold (chosen on the development split)."""
    balanced_accuracy: Interval
    auroc: Interval
    flag_rate: float
    """Share of answers flagged."""


def choose_cut(truth: Sequence[bool], scores: Sequence[float]) -> float:
    """The cut ``c`` (flag when score > c) that maximises balanced accuracy; ties go to the smallest cut."""
    truth_a, scores_a = np.asarray(truth, dtype=int), np.asarray(scores, dtype=float)
    candidates = np.unique(np.concatenate([[-np.inf], scores_a]))
    best, best_cut = -1.0, 0.0
    for cut in candidates:
        value = balanced_accuracy_score(truth_a, (scores_a > cut).astype(int))
        if value > best + 1e-12:
            best, best_cut = value, float(cut)
    return best_cut


def detection(
    name: str,
    truth: Sequence[bool],
    scores: Sequence[float],
    cut: float,
    clusters: Sequence[str],
    rng: np.random.Generator,
    n_boot: int = 2000,
) -> Detection:
    """Balanced accuracy (flag when score > ``cut``) and AUROC with cluster-bootstrap 95 % CIs.

    The bootstrap resamples ``clusters`` (source prompts) with replacement, so answers to one prompt stay
    together; replicates with a single class are skipped. Percentile intervals (Efron & Tibshirani 1993, §13).

    Args:
        name: label for printing.
        truth: n human labels (True = hallucinated).
        scores: n scores, higher = more likely hallucinated.
        cut: threshold chosen elsewhere (development split).
        clusters: n cluster ids.
        rng: random generator (seed it).
        n_boot: bootstrap replicates.

    Returns:
        :class:`Detection`.

    Source: scikit-learn ``balanced_accuracy_score`` and ``roc_auc_score`` (Hanley & McNeil 1982,
    doi:10.1148/radiology.143.1.7063747).

    """
    y = np.asarray(truth, dtype=int)
    s = np.asarray(scores, dtype=float)
    flags = (s > cut).astype(int)
    ids = np.asarray(clusters)
    groups = [np.flatnonzero(ids == c) for c in np.unique(ids)]
    bal, auc = [], []
    for _ in range(n_boot):
        idx = np.concatenate([groups[g] for g in rng.integers(0, len(groups), len(groups))])
        if len(set(y[idx].tolist())) < 2:
            continue
        bal.append(balanced_accuracy_score(y[idx], flags[idx]))
        auc.append(roc_auc_score(y[idx], s[idx]))

    def interval(point: float, values: list[float]) -> Interval:
        low, high = np.percentile(values, [2.5, 97.5])
        return Interval(float(point), float(low), float(high))

    return Detection(
        name=name,
        n=len(y),
        n_hallucinated=int(y.sum()),
        threshold=cut,
        balanced_accuracy=interval(balanced_accuracy_score(y, flags), bal),
        auroc=interval(roc_auc_score(y, s), auc),
        flag_rate=float(flags.mean()),
    )


def auroc_difference(
    truth: Sequence[bool],
    scores: Sequence[float],
    baseline: Sequence[float],
    clusters: Sequence[str],
    rng: np.random.Generator,
    n_boot: int = 2000,
) -> Interval:
    """AUROC(scores) − AUROC(baseline) on the same answers, with a paired cluster-bootstrap 95 % CI.

    Both scorers are evaluated on each replicate (clusters resampled with replacement, as :func:`detection`), so
    the interval accounts for their correlation; replicates with a single class are skipped.
    """
    y = np.asarray(truth, dtype=int)
    a, b = np.asarray(scores, dtype=float), np.asarray(baseline, dtype=float)
    ids = np.asarray(clusters)
    groups = [np.flatnonzero(ids == c) for c in np.unique(ids)]
    diffs = []
    for _ in range(n_boot):
        idx = np.concatenate([groups[g] for g in rng.integers(0, len(groups), len(groups))])
        if len(set(y[idx].tolist())) < 2:
            continue
        diffs.append(roc_auc_score(y[idx], a[idx]) - roc_auc_score(y[idx], b[idx]))
    low, high = np.percentile(diffs, [2.5, 97.5])
    return Interval(float(roc_auc_score(y, a) - roc_auc_score(y, b)), float(low), float(high))


# ---------------------------------------------------------------- gate-level agreement on model pairs


@dataclass(frozen=True)
class PairResult:
    """One model pair through ``rag-gate compare``, oriented so that ``base`` has the lower human rate."""

    base: str
    head: str
    n: int
    """Prompts both models answered."""
    human_base: float
    human_head: float
    """Human hallucination rates on the shared prompts."""
    human_p: float
    """One-sided exact McNemar p (head hallucinates more than base) on the human labels."""
    verdict: str
    """The gate's verdict: pass, fail or inconclusive."""
    failed: tuple[str, ...]
    """The gated metrics that failed."""
    deltas: dict[str, float]
    """Mean delta per gated metric (negative = worse)."""

    @property
    def human_worse(self) -> bool:
        """People see a significant drop (one-sided McNemar at α = 0.05)."""
        return self.human_p < 0.05


def agreement_summary(pairs: Sequence[PairResult]) -> str:
    """One line: in how many pairs people see a significant drop, how many of those the gate fails (and misses),
    and its false fails among the other pairs."""
    worse = [r for r in pairs if r.human_worse]
    caught = sum(r.verdict == "fail" for r in worse)
    false_fails = sum(r.verdict == "fail" for r in pairs if not r.human_worse)
    return (
        f"  people see a significant drop in {len(worse)} of {len(pairs)} pairs: the gate fails on {caught} "
        f"(misses {len(worse) - caught}); false fails {false_fails} of {len(pairs) - len(worse)}"
    )


def mcnemar_worse(base: Sequence[bool], head: Sequence[bool]) -> float:
    """One-sided exact McNemar p-value for "head is hallucinated more often than base" (paired labels).

    H0: the discordant pairs split evenly; alternative: more (base faithful, head hallucinated) pairs.
    p = P(X ≥ b) with X ~ Binomial(b + c, 1/2), b = base faithful & head hallucinated, c = the reverse;
    1 when there is no discordant pair.

    Source: McNemar 1947, doi:10.1007/BF02295996; exact form via scipy ``binomtest``.

    """
    b = sum((not x) and y for x, y in zip(base, head, strict=True))
    c = sum(x and not y for x, y in zip(base, head, strict=True))
    return 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5, alternative="greater").pvalue)


def _pair_files(folder: Path, shared: Sequence[str], base: Mapping[str, LabeledCase], head: Mapping[str, LabeledCase]):
    def dump(name: str, rows: Iterable[dict[str, Any]]) -> None:
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    dump("golden.jsonl", ({"id": s, "question": base[s].question, "expected_doc_ids": []} for s in shared))
    for name, cases in (("base.jsonl", base), ("head.jsonl", head)):
        dump(
            name,
            (
                {
                    "id": s,
                    "answer": cases[s].response,
                    "latency_ms": 1.0,
                    "retrieved": [{"id": c.id, "text": c.text} for c in cases[s].chunks],
                }
                for s in shared
            ),
        )


def _compare_pair(
    shared: Sequence[str], base: Mapping[str, LabeledCase], head: Mapping[str, LabeledCase], config: Path | None
) -> dict[str, Any]:
    """``python -m gate compare`` on the ``shared`` prompts' answers of two sides: its report.json."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _pair_files(folder, shared, base, head)
        command = [sys.executable, "-m", "gate", "compare", "--golden", str(folder / "golden.jsonl")]
        if config is not None:
            command += ["--config", str(config)]
        command += [str(folder / "base.jsonl"), str(folder / "head.jsonl"), "--out", str(folder / "out")]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"rag-gate compare exited {done.returncode}: {done.stderr.strip()[-500:]}")
        return json.loads((folder / "out" / "report.json").read_text(encoding="utf-8"))


JUDGED_ROWS = ("grounded_answer_rate", "hallucinated_claim_rate", "hallucination_rate", "faithfulness")
"""The judged metrics whose rows the probes report (the first is gated by default)."""

FABRICATIONS = (
    "In 1987 the operation was bought by Harrington Holdings for 42 million dollars.",
    "According to Margaret Ellison, about 3,600 people attended the opening in March.",
    "The project was funded by the Kessler Foundation with a grant of 15 million euros in 2004.",
    "Critics such as Daniel Whitford rated it 9 out of 10 in a 2019 review.",
)
"""Invented sentences, each with a number and a name, appended by the padding probe."""

NON_ANSWERS = (
    "I'm afraid I can't help with this request.",
    "Sorry, I'm not able to help with that one.",
    "It depends on several factors, so it is hard to say in general.",
    "There are many aspects to consider here, and it varies from case to case.",
)
"""Non-answers: two refusals worded unlike the default refusal phrases, two vague sentences."""


@dataclass(frozen=True)
class ProbeResult:
    """One probe PR through ``rag-gate compare`` (default config): faithful answers on base, a change on head."""

    name: str
    n: int
    changed: int
    """Answers the probe changed on head."""
    verdict: str
    rows: dict[str, tuple[float, float, float, float, str]]
    """Metric → (base mean, head mean, delta (negative = worse), one-sided p, status)."""


def probe_pairs(cases: Sequence[LabeledCase], n: int = 120) -> list[ProbeResult]:
    """The padding and non-answer probes of issue 29 on the first ``n`` answers people judge faithful.

    - padding: one answer in eight gets one invented sentence (:data:`FABRICATIONS`) appended — must fail;
    - non-answers: every other answer replaced by a non-answer (:data:`NON_ANSWERS`, in turn) — must fail.
    """
    faithful = sorted((c for c in cases if not c.hallucinated), key=lambda c: c.id)[:n]
    base = {c.id: c for c in faithful}
    padded = {
        c.id: replace(c, response=f"{c.response.rstrip()} {FABRICATIONS[k // 8 % len(FABRICATIONS)]}")
        if k % 8 == 0
        else c
        for k, c in enumerate(faithful)
    }
    vague = {
        c.id: replace(c, response=NON_ANSWERS[k // 2 % len(NON_ANSWERS)]) if k % 2 == 0 else c
        for k, c in enumerate(faithful)
    }
    out = []
    for name, head in (("padding (1 answer in 8 + one invented sentence)", padded), ("non-answers (1 in 2)", vague)):
        report = _compare_pair(sorted(base), base, head, None)
        out.append(
            ProbeResult(
                name=name,
                n=len(base),
                changed=sum(head[i].response != base[i].response for i in base),
                verdict=report["verdict"],
                rows={
                    m["name"]: (m["base_mean"], m["head_mean"], m["delta"], m["p_value"], m["status"])
                    for m in report["metrics"]
                    if m["name"] in (*JUDGED_ROWS, "false_refusal")
                },
            )
        )
    return out


@dataclass(frozen=True)
class LengthResult:
    """A length-only change through ``rag-gate compare``: answers people judge faithful, shorter on base."""

    n: int
    """Prompts with two faithful answers of different length."""
    words_base: float
    words_head: float
    """Mean words per answer on each side."""
    verdict: str
    """The gate's verdict with the default config."""
    rows: dict[str, tuple[float, float, float, float, str]]
    """Judged metric → (base mean, head mean, delta (negative = worse), one-sided p, status)."""


def length_only_pair(cases: Sequence[LabeledCase], config: Path | None = None) -> LengthResult:
    """A PR whose answers are all faithful, only longer: per prompt, the shortest and the longest answer that people
    judge faithful (prompts with at least two of different length), base = shortest, through ``rag-gate compare``.
    """
    faithful: dict[str, list[LabeledCase]] = {}
    for case in cases:
        if not case.hallucinated:
            faithful.setdefault(case.source_id, []).append(case)
    base: dict[str, LabeledCase] = {}
    head: dict[str, LabeledCase] = {}
    for source, answers in faithful.items():
        ordered = sorted(answers, key=lambda c: (len(c.response.split()), c.model))
        if len(ordered) >= 2 and len(ordered[-1].response.split()) > len(ordered[0].response.split()):
            base[source], head[source] = ordered[0], ordered[-1]
    shared = sorted(base)
    report = _compare_pair(shared, base, head, config)
    judged = JUDGED_ROWS
    rows = {
        m["name"]: (m["base_mean"], m["head_mean"], m["delta"], m["p_value"], m["status"])
        for m in report["metrics"]
        if m["name"] in judged
    }
    return LengthResult(
        n=len(shared),
        words_base=float(np.mean([len(base[s].response.split()) for s in shared])),
        words_head=float(np.mean([len(head[s].response.split()) for s in shared])),
        verdict=report["verdict"],
        rows=rows,
    )


def gate_pairs(cases: Sequence[LabeledCase], config: Path | None = None) -> list[PairResult]:
    """Run ``rag-gate compare`` on every pair of models that answered the same prompts.

    Each pair is oriented by the human rate on the shared prompts (base = fewer human-flagged answers; ties keep
    name order). The golden set holds the shared prompts (no expected documents: the retrieval metrics do not
    apply); each side's predictions are that model's answers with the prompt's context as retrieved chunks.
    The gate runs as a subprocess (``python -m gate compare``) with ``config`` or, when None, the defaults.

    Returns:
        One :class:`PairResult` per pair, in model-name order.

    Raises:
        RuntimeError: ``rag-gate compare`` exited with a code other than 0 or 1.

    """
    by_model: dict[str, dict[str, LabeledCase]] = {}
    for case in cases:
        by_model.setdefault(case.model, {})[case.source_id] = case
    results = []
    for first, second in itertools.combinations(sorted(by_model), 2):
        shared = sorted(set(by_model[first]) & set(by_model[second]))
        rate = {m: sum(by_model[m][s].hallucinated for s in shared) / len(shared) for m in (first, second)}
        base, head = (first, second) if rate[first] <= rate[second] else (second, first)
        report = _compare_pair(shared, by_model[base], by_model[head], config)
        gated = [m for m in report["metrics"] if m.get("gated")]
        results.append(
            PairResult(
                base=base,
                head=head,
                n=len(shared),
                human_base=rate[base],
                human_head=rate[head],
                human_p=mcnemar_worse(
                    [by_model[base][s].hallucinated for s in shared], [by_model[head][s].hallucinated for s in shared]
                ),
                verdict=report["verdict"],
                failed=tuple(m["name"] for m in gated if m.get("status") == "fail"),
                deltas={m["name"]: m.get("delta") for m in gated},
            )
        )
    return results
