"""Answers of a run to label by hand: the judge's call on each, a seeded stratified sample, the rows to label.

The rows of ``rag-gate label`` (single answers, :func:`to_label_row`; pairs a pairwise judge decided,
:func:`pair_rows`), and the judge's calls a run or a pairwise file holds, as :func:`gate.labels.agreement.check`
reads them (:func:`pair_calls`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from gate.errors import InputError
from gate.golden import load_golden
from gate.jsonl import read_jsonl
from gate.manifest import Manifest
from gate.models import GoldenCase, Prediction
from gate.runs import MANIFEST, PREDICTIONS, SCORES, load_scores, read_manifest

if TYPE_CHECKING:
    from gate.labels.rules import Rule

FAITHFULNESS = "faithfulness"
"""The metric whose value decides the judge's call on an answer (flagged when below 1)."""


def digest(value: Any) -> str:
    """The first 16 hex digits of sha256 of ``value``'s canonical JSON (a judge identity, an answer)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


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
    values: Mapping[str, float] = field(default_factory=dict)
    """The answer's value of each judged metric a label can check (:data:`gate.labels.rules.RULES`), by name."""

    @property
    def key(self) -> tuple[str, int]:
        """(case id, repeat)."""
        return self.case.id, self.prediction.repeat


def judge_key(manifest: Manifest) -> str:
    """The identity of the judge that scored a run (its id, version and options), as :func:`digest`.

    The digest is of ``judge`` as manifest.json has it (labels made before the manifest was typed keep their key).
    """
    return digest(manifest.judge.to_dict() if manifest.judge else {})


def run_cases(run_dir: Path, manifest: Manifest) -> dict[str, GoldenCase]:
    """The golden cases of a run (from the golden file its manifest names), by id.

    Raises:
        InputError: the golden set is missing or no longer the one the run answered.
    """
    golden = manifest.golden
    if not golden:
        raise InputError(f"{run_dir / MANIFEST}: golden: not recorded (a run made by an older rag-gate?)")
    path = Path(golden)
    if not path.is_absolute():
        path = run_dir / path
    if not path.is_file():
        raise InputError(f"{run_dir / MANIFEST}: golden: file not found: {path}")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    if manifest.golden_sha256 and sha != manifest.golden_sha256:
        raise InputError(f"{path}: changed since the run {run_dir} answered it (sha256 differs); re-run it")
    return {case.id: case for case in load_golden(path)}


def judged_answers(run_dir: Path) -> tuple[Manifest, list[JudgedAnswer]]:
    """The run's manifest and every answer with the judge's call on it, in predictions order.

    Raises:
        InputError: not a run directory, or malformed files (``file:line: field: message``).
    """
    from gate.predictions import load_predictions

    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    cases = run_cases(run_dir, manifest)
    from gate.labels.rules import RULES

    faith: dict[tuple[str, int], Any] = {}
    values: dict[tuple[str, int], dict[str, float]] = {}
    for s in load_scores(run_dir / SCORES):
        if s.metric == FAITHFULNESS:
            faith[(s.id, s.repeat)] = s
        if s.metric in RULES:
            values.setdefault((s.id, s.repeat), {})[s.metric] = s.value if s.error is None else math.nan
    answers = []
    for prediction in load_predictions(run_dir / PREDICTIONS):
        case = cases.get(prediction.id)
        if case is None or prediction.error is not None:
            continue
        score = faith.get((prediction.id, prediction.repeat))
        value = score.value if score is not None and score.error is None else math.nan
        flagged = None if math.isnan(value) else bool(value < 1.0)
        detail = (score.detail or {}) if score is not None else {}
        own = values.get((prediction.id, prediction.repeat), {})
        answers.append(JudgedAnswer(case, prediction, flagged, value, detail, own))
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


Design = Literal["simple", "stratified"]
"""How ``rag-gate label`` draws answers: a simple random sample, or stratified (equal allocation)."""


def stratum(answer: JudgedAnswer, rule: Rule | None = None) -> str:
    """The stratum of an answer: the judge's call (by ``rule``, default faithfulness < 1) and the case's domain.

    E.g. ``flagged, out-of-domain``; an answer without a value for ``rule``'s metric is ``no call``.
    """
    use_flag = rule is None or rule.metric == FAITHFULNESS  # the call the answer carries
    flagged = answer.flagged if use_flag else rule.call(answer.values.get(rule.metric, math.nan))  # type: ignore[union-attr]
    call = "no call" if flagged is None else "flagged" if flagged else "not flagged"
    return f"{call}, {'out-of-domain' if answer.case.out_of_domain else 'in-domain'}"


def candidates(answers: Sequence[JudgedAnswer], exclude: Iterable[tuple[str, int]] = ()) -> list[JudgedAnswer]:
    """The answers that can be sampled: those the judge made a call on, the first of repeats with the same text.

    The population of :func:`sample` (its size is the denominator of the inclusion probabilities).
    """
    skip = set(exclude)
    seen: set[tuple[str, str]] = set()
    out = []
    for answer in answers:
        text_key = (answer.case.id, answer.prediction.answer)
        if answer.flagged is None or text_key in seen:
            continue
        seen.add(text_key)
        if answer.key not in skip:
            out.append(answer)
    return out


def sample(
    answers: Sequence[JudgedAnswer],
    n: int,
    seed: int,
    exclude: Iterable[tuple[str, int]] = (),
    *,
    design: Design = "simple",
    rule: Rule | None = None,
) -> list[JudgedAnswer]:
    """Up to ``n`` answers to label, seeded, none of ``exclude``, from :func:`candidates`.

    ``simple``: a simple random sample (every candidate equally likely; a simple random sample drawn from what an
    earlier one left is, with it, a simple random sample of the total size). ``stratified``: by :func:`stratum`
    (``rule``'s call and the domain) with equal allocation, so a rare stratum appears in a small sample; its
    answers then stand for fewer of the run's, which :func:`inclusion_probabilities` records.
    """
    pool = candidates(answers, exclude)
    if design == "simple":
        rng = np.random.default_rng(seed)
        return [pool[i] for i in rng.permutation(len(pool))[:n]]
    return _strata(pool, lambda a: stratum(a, rule), n, seed)


def inclusion_probabilities(
    rows: Sequence[Mapping[str, Any]], answers: Sequence[JudgedAnswer], design: Design
) -> list[float]:
    """Each row's probability of having been drawn (π), for Horvitz–Thompson weights 1/π.

    ``simple``: π = n / N (rows over candidates). ``stratified``: π = n_h / N_h in the row's ``stratum`` h (the
    rows of the stratum over its candidates). Answers of the rows that left the run count in N (as drawn then).

    Source: Horvitz & Thompson 1952, "A generalization of sampling without replacement from a finite universe",
    JASA 47(260), doi:10.1080/01621459.1952.10483446.
    """
    pool = {a.key: a for a in candidates(answers)}
    keys = {(r["id"], r["repeat"]) for r in rows}
    if design == "simple":
        total = len(pool) + len(keys - set(pool))
        return [len(rows) / total for _ in rows]
    sizes: dict[str, int] = {}
    rule = _stratifying_rule(rows)
    for answer in pool.values():
        name = stratum(answer, rule)
        sizes[name] = sizes.get(name, 0) + 1
    drawn: dict[str, int] = {}
    for row in rows:
        drawn[row["stratum"]] = drawn.get(row["stratum"], 0) + 1
        if (row["id"], row["repeat"]) not in pool:
            sizes[row["stratum"]] = sizes.get(row["stratum"], 0) + 1
    return [drawn[r["stratum"]] / max(sizes.get(r["stratum"], 0), drawn[r["stratum"]]) for r in rows]


def _stratifying_rule(rows: Sequence[Mapping[str, Any]]) -> Rule | None:
    """The rule whose call made the rows' strata (their ``stratified_by``; None: faithfulness < 1)."""
    from gate.labels.rules import RULES

    names = {str(r.get("stratified_by")) for r in rows if r.get("stratified_by")}
    return RULES.get(next(iter(names))) if len(names) == 1 else None


def to_label_row(
    answer: JudgedAnswer, manifest: Manifest, *, design: Design = "simple", rule: Rule | None = None
) -> dict[str, Any]:
    """The JSONL row of an answer to label: the answer, its chunks, the judge's call and reasons, empty labels.

    ``design`` and ``rule`` are the sample's (``stratified_by`` names the metric whose rule made the strata);
    ``inclusion_probability`` is filled in by the caller (:func:`inclusion_probabilities`, over every row of the
    file).
    """
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
            "id": manifest.judge.id if manifest.judge else "",
            "key": judge_key(manifest),
            "flagged": answer.flagged,
            "faithfulness": answer.faithfulness,
            "values": {name: None if math.isnan(v) else v for name, v in sorted(answer.values.items())},
            "claims": claims,
            "reasons": reasons_of(answer.detail),
        },
        "stratum": stratum(answer, rule),
        "design": design,
        "stratified_by": (rule.metric if rule else FAITHFULNESS) if design == "stratified" else None,
        "inclusion_probability": None,
        "golden_sha256": manifest.golden_sha256,
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


def pair_rows(base_dir: Path, head_dir: Path, pairwise_file: Path) -> tuple[Manifest, list[dict[str, Any]]]:
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
                "golden_sha256": base_manifest.golden_sha256,
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


def pair_calls(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, int], tuple[str | None, Sequence[str], str | None]]:
    """The pairwise judge's calls of :func:`pair_rows`' rows, as :func:`check` reads them."""
    return {(r["id"], r["repeat"]): (r["judge"]["better"], r["judge"]["reasons"], r["answer_sha256"]) for r in rows}
