"""The PR flow's adaptive evaluation (``adaptive: true``, ``--adaptive on``): run both sides batch by batch, stop early.

Steps (the design note of :mod:`gate.stats.sequential`): the must-pass and out-of-domain cases, then the others in
a seeded random order (:func:`gate.compare.sequential.adaptive_order`), batch by batch on both sides — each batch
extends the same run directory (:func:`gate.produce.run_side` with ``cases``: resumable, earlier rows are neither
re-run nor re-scored) — and after each batch the sequential looks (:class:`gate.compare.sequential.Looks`). The
run stops when a gated metric fails, when every gated metric is decided, or when the golden set is exhausted; the
comparison is then the fixed-N one on the cases run at ``alpha_final``, with the decided metrics' statuses.

With ``repeats`` R > 1, each batch runs repeat 0 on both sides first; the cases whose repeat 0 is the same on
both sides, but for a seeded audit sample, run no other repeat; once any case run more than once varies on either
side, every case runs every repeat, those skipped before included (:mod:`gate.compare.repeats`). The audit looks at
every case run more than once (must-pass, out-of-domain and differing cases too), not only the audited ones: any
variation is evidence of a stochastic side.

A base restored from the verified cache holds every case (only the cases run on the head are compared); a base
evaluated now runs the same batches and is not stored in the cache (the cache holds full runs, made on pushes).

An interrupted (or finished) adaptive run of the same commits, golden set and configs resumes at its batch: the
run directories it left in ``out/base`` and ``out/head`` are kept, both sides are first extended to the last batch
they both hold (no pipeline call, no scoring: :func:`gate.produce.run_side` reuses their rows), and the looks up to
there are taken again on those rows; a run directory of another commit or config is removed first.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from gate.adaptive import AdaptiveRun, StopReason
from gate.compare.repeats import RepeatPlan, audit_sample, candidates, compared_metrics, varying
from gate.compare.sequential import (
    Looks,
    Order,
    RepeatsRun,
    adaptive_run,
    final_statuses,
    held_cases,
    last_look_held,
    policy_order,
    take_look,
)
from gate.comparison import ChangedFile
from gate.config import Config
from gate.errors import InputError
from gate.files import remove_tree
from gate.golden import GoldenDiff, file_sha256, load_golden
from gate.pr import cache, envs, sides
from gate.pr.run import PrRun
from gate.produce import run_side
from gate.runs import Side, read_manifest
from gate.sandbox import Sandbox
from gate.sides import Compared, compare_sides, load_sides

if TYPE_CHECKING:  # the comparison (and scipy) is imported when a comparison is made
    from gate.compare.core import Decided

log = logging.getLogger("rag-gate")


@dataclasses.dataclass(frozen=True)
class Sides:
    """The two sides of an adaptive PR evaluation and where they run."""

    base: Config
    """The base's config (its policy is the gate's)."""
    head: Config
    """The head's config, with the base's policy, repeats and variables."""
    base_sandbox: Sandbox
    """Where the base's pipeline runs."""
    head_sandbox: Sandbox
    """Where the head's pipeline runs."""
    base_sha: str
    """The merge base."""
    base_label: str
    """Its label (the base branch)."""
    head_sha: str
    """The head commit."""


def evaluate(
    run: PrRun,
    base: Config,
    head: Config,
    sandbox: Sandbox,
    setups: tuple[envs.Setup | None, envs.Setup | None],
    shas: tuple[str, str, str],
    *,
    golden: Path,
    diff: GoldenDiff | None,
    files: list[ChangedFile] | None,
) -> tuple[Compared, Path, bool]:
    """Evaluate the base and the head adaptively and compare them (see the module docstring).

    Args:
        run: the PR run.
        base: the base's config (with the contract golden set).
        head: the head's config as checked out (with the contract golden set).
        sandbox: the pipeline's sandbox.
        setups: the base's and the head's setup (None: no setup command).
        shas: (merge base, its label, head commit).
        golden: the contract golden set both sides run.
        diff: how the PR changed the golden set (None or empty: not at all).
        files: the files the PR changed.

    Returns:
        (the comparison with its sides, the head's run directory, whether the base came from the cache).

    Raises:
        InputError, EvaluationError: as :func:`gate.produce.run_side` and :func:`gate.sides.compare_sides`.
    """
    base_sha, base_label, head_sha = shas
    hit, base_sandbox, _ = sides.cached_base(run, base, base_sha, sandbox, setups[0])
    pipeline = dataclasses.replace(head.pipeline, env_passthrough=base.pipeline.env_passthrough)
    head = dataclasses.replace(head, policy=base.policy, repeats=base.repeats, pipeline=pipeline)
    head_sandbox = sandbox
    if setups[1] is not None:
        head_sandbox = envs.side_sandbox(setups[1], sandbox, pipeline.env_passthrough, None)
    both = Sides(base, head, base_sandbox, head_sandbox, base_sha, base_label, head_sha)
    compared, adaptive = _batches(run, both, hit, golden, diff, files)
    # ``alpha``: the configured level (the fixed-N analysis ran at adaptive.alpha_final)
    comparison = dataclasses.replace(compared.comparison, adaptive=adaptive, alpha=base.policy.alpha)
    return dataclasses.replace(compared, comparison=comparison), run.out / "head", hit is not None


def _batches(
    run: PrRun,
    both: Sides,
    hit: cache.Snapshot | None,
    golden: Path,
    diff: GoldenDiff | None,
    files: list[ChangedFile] | None,
) -> tuple[Compared, AdaptiveRun]:
    """Run the batches until the looks stop, and compare on the cases run."""
    policy = both.base.policy
    order = policy_order(load_golden(golden), policy, both.head_sha)
    looks = Looks(policy, order)
    final = dataclasses.replace(both.base, policy=dataclasses.replace(policy, alpha=looks.split.final))
    out = run.out
    if not _same_run(out / "head", both.head, both.head_sha, golden):
        remove_tree(out / "head")  # a head run of another commit or config is never resumed
    if hit is None and not _same_run(out / "base", both.base, both.base_sha, golden):
        remove_tree(out / "base")
    plan = RepeatPlan(policy_repeats(both), {})
    # with repeats planned per batch each batch is walked again (run_side reuses the rows it holds)
    done = -1 if plan.active else _looks_held(order, out, hit is not None, both.base.repeats)
    snapshot = hit
    stopped: StopReason = "exhausted"
    options = run.options
    commits = f"{both.base_sha[:12]}..{both.head_sha[:12]}"

    def compare(ids: list[str], decided: Decided | None = None) -> Compared:
        """The fixed-N comparison at ``alpha_final`` of the cases ``ids``, with the decided metrics' statuses."""
        return compare_sides(sides.intact(snapshot, run) if snapshot is not None else out / "base", out / "head", out,
                             config=final, golden=golden, strict=options.strict, diff=diff or None, files=files,
                             commits=commits, cases=ids, decided=decided)  # fmt: skip

    paired = policy.pairwise is not None and bool(policy.paired_metrics)
    metrics = compared_metrics(policy)

    def run_both(cases: list[str]) -> None:
        """Run (or extend) both sides on ``cases`` as planned."""
        nonlocal snapshot
        if hit is None:
            run_side(both.base, out / "base", progress=options.progress, git_sha=both.base_sha,
                     git_ref=both.base_label, sandbox=both.base_sandbox, cases=cases,
                     case_repeats=plan.skipped)  # fmt: skip
            snapshot = cache.Snapshot.of(out / "base")
        run_side(both.head, out / "head", progress=options.progress, git_sha=both.head_sha, git_ref="HEAD",
                 sandbox=both.head_sandbox, require_answers=False, cases=cases,
                 case_repeats=plan.skipped)  # fmt: skip

    def sides_of(ids: list[str]) -> tuple[Side, Side]:
        """The two sides on ``ids`` (a comparison only for the pairwise judge's rows, which exist in one only)."""
        if paired:
            compared = compare(ids)
            return compared.base, compared.head
        base_dir = sides.intact(snapshot, run) if snapshot is not None else out / "base"
        base_side, head_side, _ = load_sides(base_dir, out / "head", out, config=final, golden=golden, cases=ids)
        return base_side, head_side

    ids: list[str] = []
    n_run = 0
    for k in range(max(1, len(order.ends))):
        before = set(ids)
        ids = order.prefix(k) if order.ends else list(order.first)
        if k == 0 or k > done:  # a resumed run: both sides hold the batches up to ``done`` already
            held = order.prefix(max(k, done)) if order.ends else ids
            new = [i for i in held if i not in before and i not in order.first]
            if plan.active and new:  # repeat 0 of the batch first: the candidates to skip the others
                plan.skipped.update(dict.fromkeys(new, 1))
                run_both(held)
                chosen = candidates(*sides_of(held), new, metrics)
                audited = audit_sample(new, chosen, order.seed, k)
                plan.audited += len(audited)
                for case_id in [c for c in new if c not in set(chosen) - set(audited)]:
                    del plan.skipped[case_id]
            run_both(held)
        base_side, head_side = sides_of(ids)
        if plan.active:
            _audit(plan, (head_side, base_side), ids, metrics)
            if not plan.active:  # not deterministic: the repeats skipped so far run now, before the look
                log.info("adaptive: %s varies across repeats: every case runs every repeat", plan.varied)
                plan.skipped.clear()
                run_both(ids)
                base_side, head_side = sides_of(ids)
        n_run = order.ends[k] if order.ends else 0
        reason = take_look(looks, base_side, head_side, n_run, final.policy)
        log.info("adaptive: look %d after %d of %d cases: %s", k + 1, len(ids), len(order.first) + len(order.sequence),
                 reason or "continue")  # fmt: skip
        if reason is not None:
            stopped = reason
            break
    compared = compare(ids, final_statuses(looks, stopped, n_run))
    adaptive = adaptive_run(looks, ids, stopped, (compared.base, compared.head),
                            RepeatsRun(plan.repeats, plan.audited, plan.varied))  # fmt: skip
    return compared, adaptive


def _same_run(run_dir: Path, config: Config, sha: str, golden: Path) -> bool:
    """Whether ``run_dir`` holds a run of commit ``sha`` with this config, golden set and repeats (it may resume).

    A link, a folder without a readable manifest, or a run of another commit, config, golden set or repeats is
    not resumed. The rest of the run's identity (judge, code fingerprint) is checked by :func:`run_side`.
    """
    if run_dir.is_symlink() or not run_dir.is_dir():
        return False
    try:
        manifest = read_manifest(run_dir)
    except InputError:
        return False
    return (manifest.git_sha, manifest.config_sha256, manifest.golden_sha256, manifest.repeats) == (
        sha, config.sha256, file_sha256(golden), config.repeats
    )  # fmt: skip


def _looks_held(order: Order, out: Path, base_cached: bool, repeats: int) -> int:
    """The last look (0-based) whose cases both run directories in ``out`` hold, every repeat answered; −1: none.

    Those predictions were written by an earlier, interrupted or finished, run of the same evaluation; failed
    ones are not counted (they are retried). A base restored from the cache holds every case.
    """
    held = held_cases(out / "head", repeats)
    return last_look_held(order, held if base_cached else held & held_cases(out / "base", repeats))


def policy_repeats(both: Sides) -> int:
    """R, the repeats of both sides (the base's ``repeats``)."""
    return max(1, both.base.repeats)


def _audit(plan: RepeatPlan, sides_: tuple[Side, Side], ids: list[str], metrics: tuple[str, ...]) -> None:
    """Record in ``plan`` the first case run more than once that varies across its repeats on either side."""
    for side in sides_:
        found = varying(side, ids, metrics)
        if found:
            plan.varied = f"{side.label}: case '{found[0]}'"
            return
