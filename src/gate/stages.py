"""The staged adaptive evaluation's comparison (``rag-gate compare BASE HEAD --adaptive``): the looks over the stages.

A CI matrix cannot loop over a number of batches that the looks decide, so the staged form runs a fixed list of
stages: each stage runs ``rag-gate run --upto-batch K`` (the must-pass and out-of-domain cases and the first K
batches of the adaptive order, sharded or not) on both sides, then ``compare --adaptive`` takes the looks over
the batches both sides hold in full, as the PR flow takes them (:mod:`gate.pr.adaptive`, with the same order,
looks, α split and ``adaptive`` block: :mod:`gate.compare.sequential`). When the looks stop (a fail, a must-pass
case, every metric decided) or the order is exhausted, the comparison is the PR flow's; otherwise no verdict is
reached and the caller says which batch to run next (:class:`Staged`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from gate.adaptive import StopReason
from gate.compare.notes import policy_changes
from gate.compare.sequential import (
    Looks,
    RepeatsRun,
    adaptive_run,
    final_statuses,
    held_cases,
    last_look_held,
    policy_order,
    take_look,
)
from gate.config import Config, GatePolicy
from gate.errors import InputError
from gate.golden import file_sha256, load_golden
from gate.manifest import Manifest
from gate.runs import Side, read_manifest
from gate.shards import order_name
from gate.sides import Compared, compare_sides, load_sides, refuse_stale_run


@dataclass(frozen=True)
class Staged:
    """What ``compare --adaptive`` found: the comparison when the looks settled it, else where they stand."""

    compared: Compared | None
    """The comparison with its ``adaptive`` block (the PR flow's), or None: not settled, no verdict."""
    looks: int
    """Looks taken (1-based: the last batch both sides hold, or the look that stopped)."""
    looks_max: int
    """Looks of the whole order (its batches; 1 when every case is a first case)."""
    cases_run: int
    """Cases of the order's prefix at the last look."""
    n_cases: int
    """Cases of the order (first cases and sequence)."""

    @property
    def next_batch(self) -> int:
        """K of the next stage to run (``--upto-batch``) when not settled."""
        return self.looks + 1


def compare_stages(
    base: Path,
    head: Path,
    out_dir: Path,
    *,
    config: Config,
    strict: bool = False,
    jobs: int | None = None,
    head_sha: str | None = None,
) -> Staged:
    """Take the looks over the batches both run directories hold in full and compare when they settle.

    The order is :func:`gate.compare.sequential.policy_order` of ``config``'s golden set and policy (the base's:
    the gate's); a batch is held when both sides hold every one of its cases at every repeat (their manifests'
    ``repeats``) answered. The looks (:func:`gate.compare.sequential.take_look`) run over the held batches in
    order and stop at the first stop; the comparison is :func:`gate.sides.compare_sides` of the cases run at
    α_final with the looks' statuses (:func:`gate.compare.sequential.final_statuses`) and the ``adaptive``
    block (:func:`gate.compare.sequential.adaptive_run`; every repeat ran: no repeat skipping in this form).

    Args:
        base: the base run directory (a stage, merged or not).
        head: the head run directory.
        out_dir: where the scores of sides that had to be scored go.
        config: the base's config, ``adaptive`` on.
        strict: turn an inconclusive verdict into fail.
        jobs: scoring worker processes (``--jobs``).
        head_sha: the head commit the stages' order was seeded with (``--head-sha``), or None (the seed alone).

    Returns:
        The :class:`Staged` outcome: a comparison when stopped or exhausted, else the looks taken.

    Raises:
        InputError: ``adaptive`` is off in ``config``, a side is not a run directory or is stale (the base's
            config or golden set edited since its run, a head that answered another golden set: the order would
            differ), a side's stages ran another order (:func:`refuse_other_order`), or the sides do not both hold
            the first batch.
    """
    policy = config.policy
    if not policy.adaptive.enabled:
        raise InputError(f"{config.path}: --adaptive needs `adaptive: true` in the base's config")
    for side in (base, head):
        if not Path(side).is_dir():
            raise InputError(f"{side}: --adaptive compares run directories (rag-gate run --upto-batch K), not a file")
    manifests = [read_manifest(Path(side)) for side in (base, head)]
    refuse_stale_run(Path(base), manifests[0], config.golden, config)
    golden = Path(config.golden)
    if manifests[1].golden_sha256 != file_sha256(golden):
        raise InputError(
            f"{head}: the head answered another golden set than the base's {golden}: the stages of both sides "
            "follow one order of one golden set (a PR that edits the golden set: rag-gate pr --adaptive on)"
        )
    # the head ran its own config, which in CI sits at the base's config path (each side checked out in one place)
    refuse_stale_run(Path(head), manifests[1], config.golden, None)
    order = policy_order(load_golden(golden), policy, head_sha)
    for side, manifest in zip((base, head), manifests, strict=True):
        refuse_other_order(Path(side), manifest, order.seed, head_sha)
    looks = Looks(policy, order)
    final = dataclasses.replace(config, policy=dataclasses.replace(policy, alpha=looks.split.final))
    held = held_cases(Path(base), max(1, manifests[0].repeats)) & held_cases(Path(head), max(1, manifests[1].repeats))
    done = last_look_held(order, held)
    n_cases, looks_max = len(order.first) + len(order.sequence), max(1, len(order.ends))
    if done < 0:
        raise InputError(
            f"{base} and {head} do not both hold the first batch of the adaptive order ({len(order.prefix(0))} "
            "cases, every repeat answered); run `rag-gate run --upto-batch 1` on both sides"
        )
    paired = policy.pairwise is not None and bool(policy.paired_metrics)

    def sides_of(ids: list[str]) -> tuple[Side, Side]:
        """The two sides on ``ids`` (a comparison only for the pairwise judge's rows, which exist in one only)."""
        if paired:
            compared = compare_sides(base, head, out_dir, config=final, golden=golden, jobs=jobs, cases=ids,
                                     check_head_config=False)  # fmt: skip
            return compared.base, compared.head
        base_side, head_side, _ = load_sides(base, head, out_dir, config=final, golden=golden, jobs=jobs, cases=ids)
        return base_side, head_side

    stopped: StopReason | None = None
    ids: list[str] = []
    n_run = 0
    for k in range(done + 1):
        ids = order.prefix(k)
        n_run = order.ends[k] if order.ends else 0
        stopped = take_look(looks, *sides_of(ids), n_run, final.policy)
        if stopped is not None:
            break
    if stopped is None and done == looks_max - 1:
        stopped = "exhausted"
    if stopped is None:
        return Staged(None, looks.looks, looks_max, len(ids), n_cases)
    compared = compare_sides(base, head, out_dir, config=final, golden=golden, strict=strict, jobs=jobs, cases=ids,
                             decided=final_statuses(looks, stopped, n_run), check_head_config=False)  # fmt: skip
    repeats = RepeatsRun(max(1, config.repeats))
    adaptive = adaptive_run(looks, ids, stopped, (compared.base, compared.head), repeats)
    # the configured policies, compared both the same way (α_final is a level of the analysis, not a policy change)
    evaluation = compared.head.manifest.evaluation
    moved = policy_changes(policy, GatePolicy.from_dict(evaluation)) if evaluation is not None else ()
    comparison = dataclasses.replace(compared.comparison, adaptive=adaptive, alpha=policy.alpha, policy_changes=moved)
    return Staged(dataclasses.replace(compared, comparison=comparison), looks.looks, looks_max, len(ids), n_cases)


def refuse_other_order(run_dir: Path, manifest: Manifest, seed: int, head_sha: str | None) -> None:
    """Refuse a stage whose manifest records another order seed than ``seed``, the one this comparison takes.

    The seed combines the config's seed with ``--head-sha`` (:func:`gate.compare.sequential.policy_order`), so a
    stage run with another ``--head-sha`` (or with one where the comparison has none) ran other cases: no rerun of
    ``--upto-batch`` fixes that, only the same ``--head-sha`` on both. A stage that recorded no seed (made before
    it was kept) is not checked.

    Raises:
        InputError: one line naming the run, both seeds and both ``--head-sha`` values (escaped).
    """
    if manifest.order_seed is None or manifest.order_seed == str(seed):
        return
    raise InputError(
        f"{run_dir}: its stages ran the adaptive order of {order_name(manifest.order_seed, manifest.order_head_sha)}, "
        f"this comparison takes {order_name(seed, head_sha)}; give `rag-gate compare --adaptive` the --head-sha the "
        "stages ran with"
    )
