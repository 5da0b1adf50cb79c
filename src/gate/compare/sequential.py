"""The adaptive evaluation's order and its looks (issue 33, phase 2; the design note of :mod:`gate.stats.sequential`).

:func:`adaptive_order` puts the must-pass and out-of-domain cases first (run in full, outside the sequence) and the
others in a seeded random order, cut into batches; :class:`Looks` takes the two sides after each batch and keeps,
per gated metric, the first decision of :func:`gate.stats.sequential.look` on the per-case differences in the run
order; :meth:`Looks.stop` says whether the run may stop and :meth:`Looks.decided` gives the statuses that replace
the fixed-N ones in the comparison (:func:`gate.compare.compare`, ``decided``).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gate.adaptive import NOT_DECIDED, SEQUENTIAL_LOOK, AdaptiveRun, SequentialMetric, StopReason
from gate.compare.inputs import metric_inputs
from gate.compare.mustpass import must_pass_cases, must_pass_failures
from gate.config import GatePolicy
from gate.metrics import resolve
from gate.models import GoldenCase
from gate.results import Status
from gate.runs import PREDICTIONS, Side, read_partial_predictions
from gate.stats import numbers
from gate.stats.detectable import design_mde, first_step_levels
from gate.stats.inputs import MetricInput, case_effects, ratio_scale
from gate.stats.sequential import (
    HORIZON_SHARE,
    AlphaSplit,
    SequentialDecision,
    batch_ends,
    log_ratio_differences,
    look,
    split_alpha,
)

if TYPE_CHECKING:
    from gate.compare.core import Decided

RATIO_BOUND = math.log(4.0)
"""B of :func:`gate.stats.sequential.log_ratio_differences`: a ratio metric's per-case log-ratio is clipped to
[−B, B] (a case 4 times slower counts as 4 times) and divided by B."""


@dataclass(frozen=True)
class Order:
    """Which cases an adaptive evaluation runs, in what order, and where it looks."""

    first: tuple[str, ...]
    """Must-pass and out-of-domain case ids, in golden order: run first and in full."""
    sequence: tuple[str, ...]
    """Every other case id, in the seeded random order."""
    ends: tuple[int, ...]
    """Sequence cases run after each batch (:func:`gate.stats.sequential.batch_ends`), the last ``len(sequence)``."""
    seed: int
    """Seed of the order."""
    batch: int
    """Cases per batch."""

    def prefix(self, look: int) -> list[str]:
        """The case ids run after batch ``look`` (0-based): :attr:`first`, then the sequence up to its end."""
        end = self.ends[look] if self.ends else 0
        return [*self.first, *self.sequence[:end]]


def adaptive_order(cases: Sequence[GoldenCase], policy: GatePolicy, seed: int, batch: int | None = None) -> Order:
    """The order of an adaptive evaluation over ``cases`` (the golden set both sides run).

    The sequence is ``numpy.random.default_rng(seed).permutation`` of the other cases in golden order: the same
    seed and golden set give the same order. Every batch, the first included, has ``batch`` cases (default: a
    tenth of the sequence, at least 1).

    Args:
        cases: the golden cases, in file order.
        policy: the gate's policy (which cases are must-pass).
        seed: seed of the order, ≥ 0.
        batch: cases per batch, ≥ 1, or None.

    Returns:
        The :class:`Order`.
    """
    first = {c.id for c in must_pass_cases(cases, policy)} | {c.id for c in cases if c.out_of_domain}
    rest = [c.id for c in cases if c.id not in first]
    size = batch or max(1, math.ceil(len(rest) / 10))
    permuted = tuple(rest[i] for i in np.random.default_rng(seed).permutation(len(rest)))
    ends = tuple(int(e) for e in batch_ends(len(rest), size, size))
    return Order(tuple(c.id for c in cases if c.id in first), permuted, ends, seed, size)


def commit_seed(seed: int, commit: str) -> int:
    """The seed of a PR's order: ``seed`` and the head commit together (the first 63 bits of their SHA-256).

    A fixed seed would tell a PR's author, before committing, which cases an adaptive run leaves out, and a PR
    that breaks exactly those would pass; a commit's id is known only once its content is final.
    """
    digest = hashlib.sha256(f"{seed}:{commit}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def policy_order(cases: Sequence[GoldenCase], policy: GatePolicy, commit: str | None = None) -> Order:
    """The adaptive order the policy's ``adaptive:`` setting gives over ``cases`` (the PR flow's and the stages').

    Its seed is ``adaptive: {seed}``, else the gate's ``seed``, combined with the head ``commit`` when given
    (:func:`commit_seed`: the PR flow); its batch ``adaptive: {batch}``, else a tenth of the sequence
    (:func:`adaptive_order`).
    """
    settings = policy.adaptive
    seed = settings.seed if settings.seed is not None else policy.seed
    return adaptive_order(cases, policy, commit_seed(seed, commit) if commit else seed, settings.batch)


def held_cases(run_dir: Path, repeats: int) -> set[str]:
    """The ids of the cases whose every one of ``repeats`` repeats ``run_dir`` holds answered (failed rows are not).

    Reads ``predictions.jsonl`` as an interrupted run's (:func:`gate.runs.read_partial_predictions`).
    """
    kept, _ = read_partial_predictions(run_dir / PREDICTIONS)
    answered = Counter(p.id for p in {(p.id, p.repeat): p for p in kept}.values())
    return {case for case, n in answered.items() if n >= repeats}


def last_look_held(order: Order, held: set[str]) -> int:
    """The last look (0-based) whose cases (:meth:`Order.prefix`) are all in ``held``; −1: none."""
    looks = range(len(order.ends)) if order.ends else range(1)
    return max((k for k in looks if set(order.prefix(k)) <= held), default=-1)


def take_look(looks: Looks, base: Side, head: Side, n_run: int, policy: GatePolicy) -> StopReason | None:
    """One look after a batch: the certain must-pass failures under ``policy`` (α_final), the looks, the stop rule.

    Returns:
        :meth:`Looks.stop` after :meth:`Looks.update` on the two sides (``n_run`` sequence cases run).
    """
    certain = certain_must_pass(base, head, policy)
    looks.update(base, head, n_run, must_pass_failed=certain)
    return looks.stop()


def final_statuses(looks: Looks, stopped: StopReason, n_run: int) -> Decided:
    """The ``decided`` of the final comparison (:func:`gate.compare.compare`) after the run stopped for ``stopped``.

    A fail or must-pass stop: :meth:`Looks.at_stop` of the fixed-N results (the metrics still undecided are not
    decided by a prefix's fixed-N analysis); otherwise :meth:`Looks.decided`.
    """
    if stopped in ("fail", "must_pass"):
        return lambda fixed: looks.at_stop({r.name: (r.status, r.reason) for r in fixed}, n_run)
    return looks.decided()


REASONS = {
    "fail": "a gated metric fell beyond its margin at a look (sequential test)",
    "must_pass": "a must-pass case failed certainly (it blocks the merge whatever the metrics say)",
    "decided": "every gated metric was decided (sequential test)",
    "exhausted": "the golden set ran out before every gated metric was decided (fixed-N analysis for the rest)",
}
"""Why an adaptive run stopped, the ``reason`` of :class:`gate.adaptive.AdaptiveRun` after its cases."""


@dataclass(frozen=True)
class RepeatsRun:
    """What the repeats of an adaptive run were (:class:`gate.adaptive.AdaptiveRun`'s ``repeats_*``)."""

    repeats: int = 1
    """R."""
    audited: int = 0
    """Cases audited (:func:`gate.compare.repeats.audit_sample`)."""
    varied: str | None = None
    """The first case found varying, or None."""


def adaptive_run(
    looks: Looks, ids: Sequence[str], stopped: StopReason, sides: tuple[Side, Side], repeats: RepeatsRun
) -> AdaptiveRun:
    """``report.json``'s ``adaptive`` block of a run that stopped for ``stopped`` after the cases ``ids``.

    Args:
        looks: the looks taken (their order, count and decisions).
        ids: the case ids both sides ran (the order's prefix at the last look).
        stopped: why it stopped.
        sides: the compared base and head sides (their (case, repeat) pairs are counted; skipped ones are not).
        repeats: R and the repeat plan's audit.
    """
    order = looks.order
    ran = set(ids)
    side_text = f"{len(ids)} of {len(order.first) + len(order.sequence)} cases on each side"
    beyond = looks.beyond_mdes()  # metrics decided against the MDE at N, not their margin
    pairs = [len(ids) * side.repeats - int(side.table.skipped_mask(list(ids)).sum()) for side in sides]
    return AdaptiveRun(
        seed=order.seed,
        batch=order.batch,
        n_first=len(order.first),
        n_sequence=len(order.sequence),
        cases_run=len(ids),
        looks=looks.looks,
        stopped=stopped,
        reason=f"{side_text}: {REASONS[stopped]}" + (f"; ruled out {beyond}" if beyond else ""),
        alpha_sequential=looks.split.sequential,
        alpha_final=looks.split.final,
        beta_sequential=looks.split.early_pass,
        metrics=looks.metrics(),
        not_run=tuple(i for i in order.sequence if i not in ran),
        repeats=repeats.repeats,
        repeats_run_base=pairs[0],
        repeats_run_head=pairs[1],
        repeats_fixed=(len(order.first) + len(order.sequence)) * repeats.repeats,
        repeats_audited=repeats.audited,
        repeats_varied=repeats.varied,
    )


def sequential_metrics(policy: GatePolicy) -> tuple[str, ...]:
    """The gated metrics the looks decide: every gated metric but those of out-of-domain cases (refusal).

    Those apply to the first cases only (run in full) and are decided by the fixed-N analysis.
    """
    return tuple(name for name in policy.gated if not resolve(name).spec.out_of_domain)


def certain_must_pass(base: Side, head: Side, policy: GatePolicy) -> bool:
    """Whether a must-pass case among the paired cases failed certainly on head (it blocks; the run may stop).

    As the comparison decides it (:func:`gate.compare.mustpass.must_pass_failures` on the cases of both sides),
    without the rest of the comparison: what a look needs.
    """
    base_ids = {c.id for c in base.golden}
    cases = [c for c in head.golden if c.id in base_ids]
    inputs, _ = metric_inputs(base, head, cases, policy)
    return any(f.certain for f in must_pass_failures(base, head, cases, policy, inputs))


@dataclass
class Looks:
    """Each sequential metric's first decision over the looks of one adaptive evaluation."""

    policy: GatePolicy
    """The gate's policy (metrics, margins, α)."""
    order: Order
    """The evaluation's order."""
    decisions: dict[str, tuple[SequentialDecision, int | None, float]] = field(default_factory=dict)
    """Metric → (decision, sequence cases at the look that decided it, estimate at that look or the last)."""
    rule_outs: dict[str, list[float]] = field(default_factory=dict)
    """Metric → the fixed design's MDE at N on the look's scale, per look it was looked at (NaN: none; the
    ``rule_out`` of :func:`gate.stats.sequential.look`)."""
    ruled_out: dict[str, float] = field(default_factory=dict)
    """Metric → the MDE at N (oriented metric units; log-ratio for ratio metrics) that decided it non-inferior,
    for the metrics whose non-inferiority look ruled out that drop instead of the (smaller) margin."""
    looks: int = 0
    """Batches looked at."""
    must_pass_failed: bool = False
    """A must-pass case flipped certainly (the verdict is fail whatever the metrics say)."""

    @property
    def names(self) -> tuple[str, ...]:
        """The metrics the looks decide."""
        return sequential_metrics(self.policy)

    @property
    def split(self) -> AlphaSplit:
        """α of the early looks (each metric, each direction) and of the fixed-N analysis at the end."""
        return split_alpha(self.policy.alpha, max(1, len(self.names)))

    def update(self, base: Side, head: Side, n_run: int, must_pass_failed: bool = False) -> None:
        """Look at the sides after a batch: ``n_run`` sequence cases of :attr:`order` have run on both.

        Per sequential metric still undecided: the per-case differences head − base (oriented, negative = worse;
        per-case means over repeats; cases valid on both sides; ratio metrics as clipped log-ratios over B) in the
        run order, and :func:`gate.stats.sequential.look` at ``split.sequential`` with the bets tuned for
        ``ceil(HORIZON_SHARE · len(sequence))`` cases. The non-inferiority look rules out m_eff = max(m, MDE_N):
        MDE_N is the fixed design's minimum detectable worsening at the sequence's full length N
        (:func:`gate.stats.detectable.design_mde` on the cases run so far, at α_final and the Holm first-step level
        the printed MDE uses: :func:`gate.stats.detectable.first_step_levels` over the gated metrics with a
        difference other than 0 so far); the fail look keeps m. A decision is final.
        """
        self.looks += 1
        self.must_pass_failed = self.must_pass_failed or must_pass_failed
        by_id = {c.id: c for c in base.golden}
        cases = [by_id[i] for i in self.order.sequence[:n_run] if i in by_id]
        names = set(self.names)
        inputs, _ = metric_inputs(base, head, cases, self.policy)
        target = max(1, math.ceil(HORIZON_SHARE * len(self.order.sequence)))
        levels = self._mde_levels(inputs)
        for inp, level in zip(inputs, levels, strict=True):
            if inp.name not in names or self.decisions.get(inp.name, ("continue",))[0] != "continue":
                continue
            effect = case_effects(inp)[2]
            d = effect[np.isfinite(effect)]
            mde = design_mde(inp, level=float(level), n=len(self.order.sequence))
            if inp.kind == "ratio":
                d, _ = log_ratio_differences(d, RATIO_BOUND)
                margin, scale = ratio_scale(inp.margin, inp.direction) / RATIO_BOUND, RATIO_BOUND
            else:
                d, margin, scale = np.clip(d, -1.0, 1.0), inp.margin, 1.0  # binary and graded scores lie in [0, 1]
            self.rule_outs.setdefault(inp.name, []).append(mde / scale)
            seen = look(
                d,
                min(margin, 0.999),
                self.split.sequential,
                early_pass=self.split.early_pass,
                target_n=target,
                rule_out=mde / scale,
            )
            decided_at = n_run if seen.decision != "continue" else None
            self.decisions[inp.name] = (seen.decision, decided_at, seen.estimate)
            if seen.decision == "non_inferior" and seen.ruled_out > min(margin, 0.999):
                self.ruled_out[inp.name] = seen.ruled_out * scale

    def _mde_levels(self, inputs: Sequence[MetricInput]) -> np.ndarray:
        """Each metric's MDE level: Holm's first step at α_final over the gated metrics that moved so far."""
        alphas = np.array([inp.metric_policy(self.split.final).alpha for inp in inputs], dtype=float)
        gated = np.array([inp.gated for inp in inputs], dtype=bool)
        moved = np.array([bool(np.any(np.nan_to_num(case_effects(inp)[2]) != 0)) for inp in inputs], dtype=bool)
        return first_step_levels(alphas, gated, moved)

    def stop(self) -> StopReason | None:
        """Whether the run may stop: ``fail``, ``must_pass``, ``decided`` or None (run the next batch).

        ``fail``: a metric failed; ``must_pass``: a must-pass case flipped certainly; ``decided``: every metric is
        decided.
        """
        states = [self.decisions.get(name, ("continue", None, math.nan))[0] for name in self.names]
        if "fail" in states:
            return "fail"
        if self.must_pass_failed:
            return "must_pass"
        if states and "continue" not in states:
            return "decided"
        return None

    def decided(self) -> dict[str, tuple[Status, str]]:
        """Metric → (status, reason) for the decided metrics, to replace their fixed-N status in the comparison."""
        out: dict[str, tuple[Status, str]] = {}
        for name, (decision, at, estimate) in self.decisions.items():
            when = f"{SEQUENTIAL_LOOK}{self._look_of(at)} (after {at} cases of the order)"
            worse = "drop" if resolve(name).spec.direction == "higher" else "rise"
            if decision == "fail":
                shown = numbers.number(estimate, signed=True)
                mean = f"oriented mean difference {shown}: negative is worse"
                out[name] = ("fail", f"{when}: a {worse} beyond the margin ({mean})")
            elif decision == "non_inferior" and name in self.ruled_out:
                out[name] = ("pass", f"{when}: {self.beyond_mde(name)} is ruled out")
            elif decision == "non_inferior":
                out[name] = ("pass", f"{when}: a {worse} beyond the margin is ruled out")
        return out

    def at_stop(self, fixed: Mapping[str, tuple[Status, str]], n_run: int) -> dict[str, tuple[Status, str]]:
        """Metric → (status, reason) of every sequential metric after a run that stopped early (a fail, a must-pass).

        The decided metrics keep their decision (:meth:`decided`). An undecided one keeps a ``fail`` of the
        fixed-N analysis of the cases run (``fixed``: metric → its status and reason there, at α_final): under the
        global null an early fail stop is itself a false rejection (probability ≤ M·α_seq), so the family-wise
        false-fail rate stays ≤ α (the union bound of :func:`gate.stats.sequential.split_alpha`; a must-pass stop
        fails by the contract whatever the metrics say); the metric's own level is α_final when the look that
        stopped the run (another metric's) does not depend on its per-case differences, and may exceed it when the
        two metrics' differences are correlated (weak, not strong, family-wise control). Any other status becomes
        ``inconclusive``, "not decided (stopped early)": the design decides an undecided metric by the fixed-N
        analysis only when the golden set is exhausted, and non-inferiority on a prefix that another metric's
        failure cut short is not established (the verdict is fail either way).

        Args:
            fixed: the fixed-N status and reason of each metric on the cases run.
            n_run: sequence cases run when the run stopped.

        Returns:
            The statuses that replace the fixed-N ones in the comparison (``decided`` of :func:`gate.compare.compare`).
        """
        out = self.decided()
        stop = f"the run stopped at look {self.looks} (after {n_run} cases of the order)"
        for name in self.names:
            if name in out or name not in fixed:
                continue
            status, reason = fixed[name]
            if status == "fail":
                out[name] = ("fail", f"fixed-N analysis of the cases run ({stop}, undecided by the looks): {reason}")
            elif status != "not_applicable":
                out[name] = ("inconclusive", f"{NOT_DECIDED}: {stop} before the sequential test decided it")
        return out

    def beyond_mdes(self) -> str:
        """The drops ruled out at the MDE at N instead of the margin, for the run's reason (empty when none).

        E.g. "at the fixed design's MDE at N = 500 (not the margin): a rise of error_rate beyond 0.018".
        """
        drops = [self._worsening(name) for name in self.names if name in self.ruled_out]
        if not drops:
            return ""
        return f"at the fixed design's MDE at N = {len(self.order.sequence)} (not the margin): {', '.join(drops)}"

    def beyond_mde(self, name: str) -> str:
        """The drop the look ruled out, e.g. "a rise of error_rate beyond 0.041 (the fixed design's MDE at N = 200)"."""
        return f"{self._worsening(name)} (the fixed design's MDE at N = {len(self.order.sequence)})"

    def _worsening(self, name: str) -> str:
        """The MDE that decided ``name`` as a worsening, e.g. "a rise of error_rate beyond 0.041" (ratio: in %)."""
        spec = resolve(name).spec
        worse = "drop" if spec.direction == "higher" else "rise"
        mde = self.ruled_out[name]
        if spec.kind == "ratio":  # the oriented log-ratio back to a relative worsening (inverse of ratio_scale)
            shown = numbers.percent(math.expm1(mde) if spec.direction == "lower" else -math.expm1(-mde))
        else:
            shown = numbers.number(mde)
        return f"a {worse} of {name} beyond {shown}"

    def _look_of(self, n_run: int | None) -> int:
        """The 1-based look after which ``n_run`` sequence cases had run (the last look when not a batch end)."""
        ends = self.order.ends
        return ends.index(n_run) + 1 if n_run in ends else self.looks

    def metrics(self) -> tuple[SequentialMetric, ...]:
        """Each sequential metric's decision, for the report."""
        out = []
        for name in self.names:
            decision, at, estimate = self.decisions.get(name, ("continue", None, math.nan))
            out.append(SequentialMetric(name, decision, at, estimate))
        return tuple(out)
