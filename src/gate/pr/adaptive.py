"""The PR flow's adaptive evaluation (``adaptive: true``, ``--adaptive on``): run both sides batch by batch, stop early.

Steps (the design note of :mod:`gate.stats.sequential`): the must-pass and out-of-domain cases, then the others in
a seeded random order (:func:`gate.compare.sequential.adaptive_order`), batch by batch on both sides — each batch
extends the same run directory (:func:`gate.produce.run_side` with ``cases``: resumable, earlier rows are neither
re-run nor re-scored) — and after each batch the sequential looks (:class:`gate.compare.sequential.Looks`). The
run stops when a gated metric fails, when every gated metric is decided, or when the golden set is exhausted; the
comparison is then the fixed-N one on the cases run at ``alpha_final``, with the decided metrics' statuses.

A base restored from the verified cache holds every case (only the cases run on the head are compared); a base
evaluated now runs the same batches and is not stored in the cache (the cache holds full runs, made on pushes).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from gate.adaptive import AdaptiveRun, StopReason
from gate.compare.sequential import Looks, adaptive_order
from gate.comparison import ChangedFile
from gate.config import Config
from gate.files import remove_tree
from gate.golden import GoldenDiff, load_golden
from gate.pr import cache, envs, sides
from gate.pr.run import PrRun
from gate.produce import run_side
from gate.results import Status
from gate.sandbox import Sandbox
from gate.sides import Compared, compare_sides

log = logging.getLogger("rag-gate")

REASONS = {
    "fail": "a gated metric fell beyond its margin at a look (sequential test)",
    "must_pass": "a must-pass case failed certainly (it blocks the merge whatever the metrics say)",
    "decided": "every gated metric was decided (sequential test)",
    "exhausted": "the golden set ran out before every gated metric was decided (fixed-N analysis for the rest)",
}


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
    comparison = dataclasses.replace(compared.comparison, adaptive=adaptive)
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
    settings = policy.adaptive
    seed = settings.seed if settings.seed is not None else policy.seed
    order = adaptive_order(load_golden(golden), policy, seed, settings.batch)
    looks = Looks(policy, order)
    final = dataclasses.replace(both.base, policy=dataclasses.replace(policy, alpha=looks.split.final))
    out = run.out
    remove_tree(out / "head")  # a head run of another commit is never resumed
    if hit is None:
        remove_tree(out / "base")
    snapshot = hit
    stopped: StopReason = "exhausted"
    options = run.options
    commits = f"{both.base_sha[:12]}..{both.head_sha[:12]}"

    def compare(ids: list[str], decided: dict[str, tuple[Status, str]] | None = None) -> Compared:
        """The fixed-N comparison at ``alpha_final`` of the cases ``ids``, with the decided metrics' statuses."""
        return compare_sides(sides.intact(snapshot, run) if snapshot is not None else out / "base", out / "head", out,
                             config=final, golden=golden, strict=options.strict, diff=diff or None, files=files,
                             commits=commits, cases=ids, decided=decided)  # fmt: skip

    ids: list[str] = []
    for k in range(max(1, len(order.ends))):
        ids = order.prefix(k) if order.ends else list(order.first)
        if hit is None:
            run_side(both.base, out / "base", progress=options.progress, git_sha=both.base_sha,
                     git_ref=both.base_label, sandbox=both.base_sandbox, cases=ids)  # fmt: skip
            snapshot = cache.Snapshot.of(out / "base")
        run_side(both.head, out / "head", progress=options.progress, git_sha=both.head_sha, git_ref="HEAD",
                 sandbox=both.head_sandbox, require_answers=False, cases=ids)  # fmt: skip
        compared = compare(ids)
        certain = any(f.certain for f in compared.comparison.must_pass_failures)
        n_run = order.ends[k] if order.ends else 0
        looks.update(compared.base, compared.head, n_run, must_pass_failed=certain)
        reason = looks.stop()
        log.info("adaptive: look %d after %d of %d cases: %s", k + 1, len(ids), len(order.first) + len(order.sequence),
                 reason or "continue")  # fmt: skip
        if reason is not None:
            stopped = reason
            break
    decided = looks.decided()
    if decided:
        compared = compare(ids, decided)
    ran = set(ids)
    not_run = tuple(i for i in order.sequence if i not in ran)
    side_text = f"{len(ids)} of {len(order.first) + len(order.sequence)} cases on each side"
    adaptive = AdaptiveRun(
        seed=order.seed,
        batch=order.batch,
        n_first=len(order.first),
        n_sequence=len(order.sequence),
        cases_run=len(ids),
        looks=looks.looks,
        stopped=stopped,
        reason=f"{side_text}: {REASONS[stopped]}",
        alpha_sequential=looks.split.sequential,
        alpha_final=looks.split.final,
        metrics=looks.metrics(),
        not_run=not_run,
    )
    return compared, adaptive
