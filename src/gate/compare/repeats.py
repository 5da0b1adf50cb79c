"""Repeats spent only where answers vary (issue 33, item 2): which cases of an adaptive evaluation skip repeats.

With ``repeats: R > 1``, an adaptive evaluation (:mod:`gate.pr.adaptive`) runs repeat 0 of a batch's cases on both
sides. A case whose repeat 0 is the same observation on both sides (:func:`observation`: answer, retrieved ids and
their scores, refusal, error, and every scored non-ratio metric) is a *candidate* to skip repeats 1..R−1; every
other case runs all R. A seeded random *audit* sample of the candidates (:func:`audit_sample`, drawn from a
permutation of the batch made before any outcome is seen) runs all R anyway. Once any case run more than once
varies across its repeats on either side (:func:`varying`), the pipelines are not deterministic: every case runs
every repeat from then on, those skipped before included.

Why not skip by outcome alone: with a stochastic side, choosing the repeats by repeat 0's head-vs-base outcome
and averaging the repeats run biases each case's difference toward 0 (a head that answers wrongly 30 % of the time
where the base is right matches it at repeat 0 w.p. 0.7, and those cases would then count 0: the expected estimate
is about 0.53 × the true drop). Skipping is unbiased only when every repeat of a case is the same observation,
which is what the audit checks; a skipped case's mean over its R repeats is then its repeat 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gate.config import GatePolicy
from gate.metrics import resolve
from gate.runs import Side

AUDIT_SHARE = 0.1
"""Share of a batch's candidates the audit runs in full (rounded up)."""
AUDIT_LEAST = 3
"""Candidates the audit runs in full per batch at least (all of them when fewer)."""


def compared_metrics(policy: GatePolicy) -> tuple[str, ...]:
    """The metrics whose scores make an observation.

    Every scored metric but ratio ones (latency and cost vary between any two calls) and paired ones (scored at
    compare time, one per case).
    """
    specs = {name: resolve(name).spec for name in policy.metrics}
    return tuple(name for name, spec in specs.items() if spec.kind != "ratio" and not spec.paired)


def observation(side: Side, case_ids: Sequence[str], metrics: Sequence[str]) -> dict[tuple[str, int], Any]:
    """Each (case, repeat) that ran on ``side`` as a comparable value; skipped repeats are left out.

    The value is (error, answer, ((chunk id, chunk score), ...), refused, scores of ``metrics`` with NaN as None).
    """
    ids = list(case_ids)
    if not ids:
        return {}
    skipped = side.table.skipped_mask(ids)
    keys = [(c, r) for k, c in enumerate(ids) for r in range(side.repeats) if not skipped[k, r]]
    rows = np.array([side.index[c] for c in ids], dtype=np.intp)
    values = {m: side.scores.matrix(m, rows)[0] for m in metrics}
    at = {c: k for k, c in enumerate(ids)}
    out: dict[tuple[str, int], Any] = {}
    for (case_id, r), p in zip(keys, side.table.read(keys), strict=True):
        k = at[case_id]
        scores = tuple(None if math.isnan(v := float(values[m][k, r])) else v for m in metrics)
        chunks = tuple((c.id, c.score) for c in p.retrieved)
        out[(case_id, r)] = (p.error, p.answer, chunks, p.refused, scores)
    return out


def candidates(base: Side, head: Side, case_ids: Sequence[str], metrics: Sequence[str]) -> list[str]:
    """The cases of ``case_ids`` (in order) whose repeat 0 is the same observation on both sides."""
    b, h = observation(base, case_ids, metrics), observation(head, case_ids, metrics)
    return [c for c in case_ids if (c, 0) in b and (c, 0) in h and b[(c, 0)] == h[(c, 0)]]


def varying(side: Side, case_ids: Sequence[str], metrics: Sequence[str]) -> list[str]:
    """The cases of ``case_ids`` (in order) that ran more than once on ``side`` and whose observations differ."""
    seen: dict[str, set[Any]] = {}
    for (case_id, _), value in observation(side, case_ids, metrics).items():
        seen.setdefault(case_id, set()).add(repr(value))
    return [c for c in case_ids if len(seen.get(c, ())) > 1]


def audit_sample(batch: Sequence[str], chosen: Sequence[str], seed: int, look: int) -> list[str]:
    """The candidates of one batch that run every repeat anyway, in the batch's order.

    ``numpy.random.default_rng([seed, look]).permutation`` of the batch's cases is drawn without looking at any
    outcome; the audit takes the first ``max(AUDIT_LEAST, ceil(AUDIT_SHARE · len(chosen)))`` of ``chosen`` (the
    candidates) in that order — a uniform random sample of the candidates, reproducible from the seed.

    Args:
        batch: the batch's new cases, in the order's sequence.
        chosen: the candidates among them.
        seed: the order's seed, ≥ 0.
        look: the batch's index, ≥ 0.
    """
    wanted = set(chosen)
    permuted = [batch[i] for i in np.random.default_rng([seed, look]).permutation(len(batch))]
    size = max(AUDIT_LEAST, math.ceil(AUDIT_SHARE * len(wanted)))
    picked = set([c for c in permuted if c in wanted][:size])
    return [c for c in batch if c in picked]


@dataclass
class RepeatPlan:
    """Which cases of an adaptive evaluation run fewer than R repeats, and what the audit found."""

    repeats: int
    """R, the config's ``repeats``."""
    skipped: dict[str, int]
    """Case id → repeats planned (1) for the candidates not audited; every other case runs R."""
    audited: int = 0
    """Candidates the audit ran in full."""
    varied: str | None = None
    """The first variation found (``head: case 'q7'``): from then on every case runs every repeat."""

    @property
    def active(self) -> bool:
        """Whether cases may still skip repeats (R > 1 and no variation found)."""
        return self.repeats > 1 and self.varied is None

    def pairs(self, case_ids: Sequence[str]) -> int:
        """(case, repeat) pairs planned over ``case_ids``."""
        return sum(self.skipped.get(c, self.repeats) for c in case_ids)
