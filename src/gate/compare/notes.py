"""What a comparison reports beside its verdict: golden-set changes, what changed between the sides, and warnings.

The warnings: retrieved ids that never match an expected id, text a scorer could not read, cases on one side only.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections import Counter
from collections.abc import Sequence

import numpy as np
import yaml

from gate.compare.inputs import side_rows
from gate.comparison import (
    ChangedFile,
    Changes,
    DefinitionScore,
    EditedCase,
    GoldenChanges,
)
from gate.config import GatePolicy
from gate.golden import GoldenDiff
from gate.language import f1_unreadable
from gate.metrics import resolve, score_case
from gate.metrics.retrieval import ID_ADVICE, mismatch_example
from gate.models import GoldenCase
from gate.results import PolicyChange
from gate.runs import Side
from gate.scoring import detect_refusal
from gate.stats import MetricInput


def unreadable_warnings(sides: Sequence[Side], cases: Sequence[GoldenCase], policy: GatePolicy) -> list[str]:
    """Warnings for text a scorer could not read (never scored 0 or 1: not applicable), counted per side.

    Also counted: answers the judge read and found no checkable claim in (``unscored``), and answers whose chunks
    include one without text (the judge was not called: a ``not_applicable`` note).

    The judge says so in its judgment (e.g. an answer in a language the lexical judge does not read); answer F1 and
    exact match cannot split text written without spaces (:func:`gate.language.f1_unreadable`), which leaves them
    NaN: only answers with a NaN score and a reference to compare with are read again.

    Each reason is said once, with each side's count (``base: 4, head: 5 answer(s) with no checkable claim …``);
    a side's three most common reasons are kept.
    """
    f1 = next((name for name in policy.metrics if resolve(name).spec.name in ("answer_f1", "exact_match")), None)
    counts: dict[str, dict[str, int]] = {}  # reason → side label → answers, first seen first
    for side in sides:
        reasons: Counter[str] = Counter({f"not judged: {n}": k for n, k in side.scores.not_applicable.items()})
        reasons.update(side.scores.unscored)
        if f1 is not None:
            values, failed = side.scores.matrix(f1, side_rows(side, cases))
            for i, r in zip(*np.nonzero(np.isnan(values) & ~failed), strict=True):
                case = cases[i]
                prediction = side.table.get((case.id, int(r)))
                if case.out_of_domain or not case.reference_answers or prediction is None or prediction.error:
                    continue
                if note := f1_unreadable(prediction.answer, case.reference_answers):
                    reasons[note] += 1
        for reason, n in reasons.most_common(3):
            counts.setdefault(reason, {})[side.label] = n
    return [", ".join(f"{label}: {n}" for label, n in by_side.items()) + f" answer(s) {reason}"
            for reason, by_side in counts.items()]  # fmt: skip


def unmatched_ids(
    base: Side, head: Side, cases: Sequence[GoldenCase], inputs: Sequence[MetricInput], *, batch: int = 2048
) -> str | None:
    """Why the retrieval metrics cannot be scored, when no retrieved id on either side ever matches an expected id.

    Only when something is expected to match: an in-domain case with ``expected_doc_ids`` among ``cases`` and a
    retrieval metric among ``inputs``. A match on one side only is a real difference (a regression or an
    improvement), not this. A positive retrieval value on either side proves a match without reading predictions;
    otherwise every valid prediction's whole retrieved list is read (``batch`` rows at a time).

    Returns:
        One line naming the cases, an example of expected and retrieved ids (whole, hidden characters escaped: see
        :func:`~gate.metrics.retrieval.mismatch_example`; the example comes before the advice, so the comment's
        300 characters per line never cut it), the likely cause and the fix, or None when some retrieved id matches
        or nothing is expected to.
    """
    retrieval = [inp for inp in inputs if resolve(inp.name).spec.stage == "retrieval"]
    expecting = [c for c in cases if not c.out_of_domain and c.expected_doc_ids]
    if not retrieval or not expecting:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if any(np.any(inp.base > 0) or np.any(inp.head > 0) for inp in retrieval):
            return None
    retrieved, answered, example = 0, 0, None
    for side in (base, head):
        failed = side.table.error_mask([c.id for c in expecting])
        keys = [(c.id, r) for c, row in zip(expecting, failed, strict=True) for r in range(side.repeats) if not row[r]]
        by_id = {c.id: c for c in expecting}
        for start in range(0, len(keys), batch):
            for prediction in side.table.read(keys[start : start + batch]):
                answered += 1
                expected = by_id[prediction.id].expected_doc_ids
                ids = prediction.retrieved_ids
                if not ids:
                    continue
                retrieved += 1
                if not set(ids).isdisjoint(expected):
                    return None
                if example is None:
                    example = (side.label, prediction.id, expected, ids)
    if not answered:
        return None  # every prediction failed: error_rate and the error budget speak for that
    what = f"{len(expecting)} in-domain cases"
    if example is None:
        return (
            f"retrieval cannot be scored: neither side retrieved a chunk for any of the {what}, so every retrieval "
            "metric is 0 on both sides (return the chunks the generator read, with their document ids, or remove "
            "the retrieval metrics from the config)"
        )
    label, case_id, expected, ids = example
    return (
        f"retrieval cannot be scored: no retrieved id on either side matches an expected id ({what}); e.g. {label} "
        f"{mismatch_example(case_id, expected, ids)}. {ID_ADVICE}"
    )


def golden_warnings(base: Side, head: Side, n_paired: int, only_one_side: int) -> list[str]:
    """Warnings about the golden sets: base and head evaluated on different sets, or cases only on one side."""
    shas = (base.manifest.golden_sha256, head.manifest.golden_sha256)
    if shas[0] is not None and shas[1] is not None and shas[0] != shas[1]:
        return [
            f"base and head were evaluated on different golden sets ({shas[0][:12]} vs {shas[1][:12]}): "
            f"{n_paired} case(s) paired by id, {only_one_side} only on one side; cases whose expected "
            "documents or answers changed are compared against different references"
        ]
    if only_one_side:
        return [f"{only_one_side} case(s) are only on one side and are not compared"]
    return []


DEFINITION_STAGES = frozenset({"retrieval", "generation"})
"""The metric stages whose score reads a golden case's definition (expected documents, references, out-of-domain
flag); ``system`` and ``efficiency`` metrics measure the run alone."""


def golden_changes(head: Side, diff: GoldenDiff, policy: GatePolicy) -> GoldenChanges:
    """The report of a golden-set change: ids, changed fields, and head's scores under both definitions.

    Edited cases are gated with the base definition (the contract); the head's definition is reported: each
    metric that needs no judge and reads the definition (retrieval and generation metrics) is scored on head's
    answers against both definitions. Measurements of the run (latency, cost, failures) do not depend on the
    definition and are not listed.
    """
    metrics = [
        m
        for m in (resolve(name) for name in policy.metrics)
        if not m.spec.judged and not m.spec.paired and m.spec.stage in DEFINITION_STAGES
    ]
    edited = []
    for before, after in diff.edited:
        old, new = before.to_dict(), after.to_dict()
        answers = head.valid(after.id)
        scores = []
        for metric in metrics:
            values = [
                (score_case(metric, before, p, refused), score_case(metric, after, p, refused))
                for p in answers
                for refused in [detect_refusal(p, policy)]
            ]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # no applicable value: NaN
                under = np.nanmean(np.array(values, dtype=float), axis=0) if values else (math.nan, math.nan)
            if not (math.isnan(under[0]) and math.isnan(under[1])):  # applicable under one definition at least
                scores.append(DefinitionScore(metric.name, float(under[0]), float(under[1])))
        changed = tuple(sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k)))
        edited.append(EditedCase(after.id, changed, tuple(scores)))
    return GoldenChanges(
        policy=policy.golden_changes,
        removed=tuple(c.id for c in diff.removed),
        edited=tuple(edited),
        added=tuple(c.id for c in diff.added),
    )


def pipeline_diff(base: dict | None, head: dict | None) -> tuple[str, ...]:
    """Unified diff (base → head) of two ``pipeline:`` sections written as YAML; empty when equal or unknown."""
    if base is None or head is None:
        return ()

    def lines(section: dict) -> list[str]:
        return yaml.safe_dump({"pipeline": section}, sort_keys=False, allow_unicode=True).splitlines()

    return tuple(difflib.unified_diff(lines(base), lines(head), "base", "head", lineterm="", n=10))


def changes(
    base: Side, head: Side, files: Sequence[ChangedFile] | None = None, commits: str | None = None
) -> Changes | None:
    """What changed between base and head: the ``pipeline:`` sections the manifests recorded, and ``files``.

    Returns:
        None when nothing is known (no section recorded on either side, no file list).
    """
    sections = (base.manifest.pipeline, head.manifest.pipeline)
    known = None not in sections
    if not known and files is None:
        return None
    return Changes(
        pipeline_diff=pipeline_diff(*sections),
        pipeline_known=known,
        files=None if files is None else tuple(files),
        commits=commits,
    )


POLICY_KEYS = (
    "gated",
    "margins",
    "alpha",
    "strict",
    "fail_on_new_ood",
    "must_pass",
    "error_budget",
    "trend",
    "adaptive",
)
"""The :class:`~gate.config.GatePolicy` fields that decide what blocks a merge (DESIGN §8: a PR's changes to them
apply after merge only, and are shown)."""


def _flow(value: object) -> str:
    """A setting as one line of YAML flow style, e.g. ``[hit_rate@5, mrr]`` or ``{refusal: 0.5}``."""
    plain = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000).strip()
    return plain.removesuffix("\n...").removesuffix("...").strip()


def policy_changes(base: GatePolicy, head: GatePolicy, diff: GoldenDiff | None = None) -> tuple[PolicyChange, ...]:
    """The gate settings ``head`` (the PR's config) changes from ``base``, one per config key, in field order.

    Margins, must-pass and trend settings are compared key by key (``margins.refusal``, ``must_pass.out_of_domain``,
    ``trend.critical``), so one line says exactly what moved; ``gated`` is the config's ``gate``; an unset margin
    shows the metric's default. Then, from ``diff`` (the PR's golden set against the base's), each kept case whose
    own ``must_pass`` flag the PR changes (key ``case <id> must_pass``, ``–`` when unset), in the base's file order.
    """
    out = []
    old, new = base.to_dict(), head.to_dict()
    for policy, plain in ((base, old), (head, new)):  # an unset margin is the metric's default: show its value
        names = base.margins.keys() | head.margins.keys()
        plain["margins"] = {n: policy.margins.get(n, resolve(n).spec.default_margin) for n in names}
    for name in POLICY_KEYS:
        key = "gate" if name == "gated" else name
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for sub in sorted(a.keys() | b.keys()):
                if a.get(sub) != b.get(sub):
                    shown = (_flow(a[sub]) if sub in a else "–", _flow(b[sub]) if sub in b else "–")
                    out.append(PolicyChange(f"{key}.{sub}", *shown))
        else:
            out.append(PolicyChange(key, _flow(a), _flow(b)))
    for was, now in diff.edited if diff is not None else ():
        if was.must_pass != now.must_pass:
            shown = (_flow(was.must_pass) if was.must_pass is not None else "–",
                     _flow(now.must_pass) if now.must_pass is not None else "–")  # fmt: skip
            out.append(PolicyChange(f"case {was.id} must_pass", *shown))
    return tuple(out)
