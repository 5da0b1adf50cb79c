"""The per-case view of a comparison: every paired case's answers, claims and means, read from the runs once.

The report page (:mod:`gate.outputs.html`) shows every case side by side; what it shows is read here, beside the
comparison, so that the renderer formats :class:`~gate.caseview.CaseView` values and never opens a run directory.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from gate.caseview import CaseView
from gate.compare.cases import dropped_docs, top_k
from gate.config import GatePolicy
from gate.runs import Side


def _means(side: Side, ids: Sequence[str], metric: str) -> np.ndarray:
    """Per-case means over the side's repeats of one metric, shape (len(ids),) (NaN: not applicable, failed)."""
    rows = np.array([side.index[case_id] for case_id in ids], dtype=np.intp)
    values, _ = side.scores.matrix(metric, rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row of NaN (every repeat failed) is NaN
        means = np.nanmean(values, axis=1) if values.size else np.full(len(ids), np.nan)
    return np.asarray(means, dtype=float)


def case_views(
    base: Side,
    head: Side,
    policy: GatePolicy,
    metrics: Sequence[str],
    lines: Mapping[str, int] | None = None,
    *,
    batch: int = 1024,
) -> Iterator[CaseView]:
    """Every case present in both sides' golden sets (head's golden order) as the report page shows it.

    Args:
        base: the base side the comparison was made from.
        head: the head side.
        policy: the policy it was made under (its metrics' k decides "fell out of the top k", as in the
            comparison's case lists).
        metrics: the comparison's metric names, in its order (each view's ``means`` follow it).
        lines: case id → line in the golden file a reviewer edits (the PR's own; default: the line each case
            has in the sides' golden set).
        batch: cases whose answers and claims are read from disk at a time (only these are held in memory).

    Returns:
        The views, one at a time.
    """
    base_ids = {case.id for case in base.golden}
    cases = [case for case in head.golden if case.id in base_ids]
    ids = [case.id for case in cases]
    k = top_k(policy)
    means = [(_means(base, ids, name), _means(head, ids, name)) for name in metrics]
    for start in range(0, len(cases), batch):
        chunk = ids[start : start + batch]
        answers = base.first_valid_many(chunk), head.first_valid_many(chunk)
        claims = base.scores.claims_many(chunk), head.scores.claims_many(chunk)
        for i, case in enumerate(cases[start : start + batch], start=start):
            b, h = answers[0][case.id], answers[1][case.id]
            yield CaseView(
                id=case.id,
                question=case.question,
                line=case.line if lines is None else lines.get(case.id, 0),
                out_of_domain=case.out_of_domain,
                expected_doc_ids=tuple(case.expected_doc_ids),
                answer_base=b.answer if b else None,
                answer_head=h.answer if h else None,
                retrieved_base=tuple(b.retrieved_ids) if b else (),
                retrieved_head=tuple(h.retrieved_ids) if h else (),
                dropped_docs=dropped_docs(case, b, h, k),
                identical_answer=b is not None and h is not None and b.answer == h.answer,
                claims_base=claims[0][case.id],
                claims_head=claims[1][case.id],
                means=tuple((float(bm[i]), float(hm[i])) for bm, hm in means),
            )
