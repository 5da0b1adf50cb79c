"""Adaptive evaluation (issue 33): its setting in the config and what a comparison records about it.

A contract module (standard library only): :class:`AdaptivePolicy` is the config's ``adaptive:`` key (base-side
policy, like the margins), :class:`AdaptiveRun` the ``adaptive`` block of ``report.json``. The procedure is
:mod:`gate.stats.sequential` (the looks) and :mod:`gate.compare.sequential` (the order and the per-batch looks);
the PR flow runs it (:mod:`gate.pr.adaptive`), and so do the stages of a CI matrix (:mod:`gate.stages`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

StopReason = Literal["fail", "must_pass", "decided", "exhausted"]
"""Why an adaptive run stopped: a gated metric failed (the verdict is fail), a must-pass case failed certainly (it
blocks), every gated metric was decided, or the golden set ran out with a metric undecided (the fixed-N analysis
decided it)."""

SEQUENTIAL_LOOK = "sequential test at look "
"""How the reason of a gated metric the looks decided starts, followed by the look's number (1-based)."""
NOT_DECIDED = "not decided (stopped early)"
"""How the reason of a gated metric starts when the run stopped early (a fail or a must-pass case) before the
sequential test decided it: its status is ``inconclusive`` (:meth:`gate.compare.sequential.Looks.at_stop`)."""


@dataclass(frozen=True)
class AdaptivePolicy:
    """The config's ``adaptive:``: ``true``, or a mapping ``{batch: 50, seed: 3}`` (on), ``false``/absent (off)."""

    enabled: bool = False
    """Run the cases in a seeded random order, in batches, and stop once every gated metric is decided."""
    batch: int | None = None
    """Cases per batch of the sequence (the first one too), ≥ 1; None: a tenth of the sequence (at least 1)."""
    seed: int | None = None
    """Seed of the order; None: the gate's ``seed``."""

    @classmethod
    def of(cls, value: AdaptivePolicy | bool | Mapping[str, Any] | None) -> AdaptivePolicy:
        """The policy from the config's value (a bool, a mapping, this type or None)."""
        if isinstance(value, AdaptivePolicy):
            return value
        if isinstance(value, Mapping):
            return cls(enabled=bool(value.get("enabled", True)), batch=value.get("batch"), seed=value.get("seed"))
        return cls(enabled=bool(value))


@dataclass(frozen=True)
class SequentialMetric:
    """One gated metric at the last look of an adaptive run."""

    name: str
    """Metric name."""
    decision: str
    """``fail``, ``non_inferior`` (a drop of the margin, or of the fixed design's MDE at N when larger, ruled out)
    or ``continue`` (undecided: the fixed-N analysis at ``alpha_final`` decided it)."""
    decided_at: int | None
    """Sequence cases seen at the look that decided it (None: undecided)."""
    estimate: float
    """Mean per-case difference so far, on the sequence's scale ([−1, 1]; ratio metrics: clipped log-ratio / B)."""


@dataclass(frozen=True)
class AdaptiveRun:
    """How an adaptive comparison ran and why it stopped (``report.json``'s ``adaptive``)."""

    seed: int
    """Seed of the order: ``numpy.random.default_rng(seed).permutation`` of the sequence's cases in golden order."""
    batch: int
    """Cases per batch."""
    n_first: int
    """Must-pass and out-of-domain cases, run first and in full (outside the sequence)."""
    n_sequence: int
    """Cases in the sequence (every other case)."""
    cases_run: int
    """Cases each side ran (``n_first`` plus the sequence's prefix); a side restored from the base cache holds
    every case, of which only these are compared."""
    looks: int
    """Batches looked at."""
    stopped: StopReason
    """Why it stopped."""
    reason: str
    """One line: why it stopped."""
    alpha_sequential: float
    """Level of each metric's early fail look (:func:`gate.stats.sequential.split_alpha`)."""
    alpha_final: float
    """Family-wise level of the fixed-N analysis of the comparison (undecided metrics keep its status)."""
    beta_sequential: float
    """Level of each metric's early non-inferiority (pass) look: the most early passes cost of its power at a drop
    of the fixed design's MDE (a false-pass budget, outside α)."""
    metrics: tuple[SequentialMetric, ...]
    """Each gated metric's sequential decision."""
    not_run: tuple[str, ...]
    """Ids of the cases not run (the rest of the order, in order)."""
    repeats: int = 1
    """R, the config's ``repeats``."""
    repeats_run_base: int | None = None
    """(case, repeat) pairs the base holds for the cases run (a base restored from the cache holds every repeat)."""
    repeats_run_head: int | None = None
    """(case, repeat) pairs the head ran for the cases run."""
    repeats_fixed: int | None = None
    """(case, repeat) pairs each side of the fixed design runs: every case of the order (``n_first + n_sequence``)
    × ``repeats``; the cases run alone would be ``cases_run × repeats``."""
    repeats_audited: int = 0
    """Cases whose repeat 0 was the same on both sides that the audit ran every repeat anyway
    (:func:`gate.compare.repeats.audit_sample`)."""
    repeats_varied: str | None = None
    """Where the repeat plan of ``rag-gate pr --adaptive on`` first found answers varying across repeats, as
    ``SIDE: case 'ID'`` (``head: case 'q7'``): every case then ran every repeat. None: no variation found (with
    ``repeats`` > 1, the candidates not audited ran repeat 0 only), or no plan (``repeats: 1``, the staged form).
    A string in one run and None in another is the pipelines' answers, not the format: it is always one or the
    other."""


def decided_look(reason: str) -> int | None:
    """The look that decided a metric, from its reason (:data:`SEQUENTIAL_LOOK`), or None (not decided by a look)."""
    if not reason.startswith(SEQUENTIAL_LOOK):
        return None
    number = reason[len(SEQUENTIAL_LOOK) :].split(" ", 1)[0]
    return int(number) if number.isdigit() else None
