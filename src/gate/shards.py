"""Merging shards (``rag-gate merge``): the run directories of ``run --shard i/n`` joined into one run.

Each shard is a run of one side (:func:`gate.produce.run_side`); the merged run is what an unsharded run would
have written, refused when the shards do not belong together (:func:`merge_runs`). Shards of one stage of the
staged adaptive evaluation (``run --shard i/n --upto-batch K``, ``partial``) merge into a ``partial`` run of that
stage.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from gate.errors import InputError
from gate.files import archive_previous, atomic_writer, locked_directory, make_dirs, refuse_inputs_inside
from gate.golden import file_sha256, load_golden, shard
from gate.jsonl import write_json
from gate.manifest import Manifest
from gate.models import GoldenCase
from gate.predictions import scan_predictions
from gate.runs import MANIFEST, PREDICTIONS, RUN_FILES, SCORES, RunIdentity, not_complete, read_manifest
from gate.sanitize import one_line


def merge_runs(shard_dirs: list[Path], out_dir: Path) -> Path:
    """Merge the run directories of ``rag-gate run --shard i/n`` (i = 1..n) into one run directory.

    Shards that are stages of the staged adaptive evaluation (``--upto-batch K``, manifest ``upto_batch``) merge
    when they are all of the same K, ``partial`` or ``complete`` (a stage that reached every case); the merged run
    is ``partial`` when one of them is, and records K.

    Raises:
        InputError: when the shards disagree on golden set, config, repeats or shard count, or do not cover 1..n
            exactly once, or one of them is incomplete (``running``: interrupted; ``partial`` and not a stage), or
            they are stages of different K or orders (or stages and a full run), or they come from different commits or
            pipeline code, or a shard holds rows of cases that are not its own (relabelled); or another process
            holds ``out_dir``.
    """
    manifests = [read_manifest(Path(d)) for d in shard_dirs]
    first = manifests[0]
    same = tuple(f for f in RunIdentity.PREDICTION_FIELDS + RunIdentity.SCORE_FIELDS if f != "shard")
    for directory, manifest in zip(shard_dirs, manifests, strict=True):
        stage = manifest.status == "partial" and manifest.upto_batch is not None
        if manifest.status != "complete" and not stage:
            raise InputError(not_complete(directory, manifest.status))
        if manifest.upto_batch != first.upto_batch:
            raise InputError(
                f"{directory}: {_stage(manifest)}, {shard_dirs[0]}: {_stage(first)}; merge the shards of one stage "
                "(the same --upto-batch)"
            )
        if manifest.order_seed != first.order_seed:
            raise InputError(
                f"{directory}: order {order_name(manifest.order_seed, manifest.order_head_sha)}, {shard_dirs[0]}: "
                f"order {order_name(first.order_seed, first.order_head_sha)}; merge the shards of one stage "
                "(the same --head-sha)"
            )
        changed = manifest.identity.differences(first.identity, same)
        if changed:
            raise InputError(
                f"{directory}: {', '.join(changed)} differ from {shard_dirs[0]}; shards must come from one config"
            )
    shards = sorted(m.shard or (1, 1) for m in manifests)
    count = shards[0][1]
    if shards != [(i, count) for i in range(1, count + 1)]:
        raise InputError(f"shards {['/'.join(map(str, s)) for s in shards]} do not cover 1..{count} exactly once")
    _check_shard_origin(shard_dirs, manifests)
    _check_shard_rows(shard_dirs, manifests)
    out_dir = Path(out_dir)
    refuse_inputs_inside(
        out_dir, {f"shard {i}": Path(d) / MANIFEST for i, d in enumerate(shard_dirs, 1)}, f"--out {out_dir}"
    )
    make_dirs(out_dir)
    with locked_directory(out_dir, f"--out {out_dir}"):
        return _write_merged(shard_dirs, manifests, out_dir)


def _stage(manifest: Manifest) -> str:
    """How a shard's stage reads in a message: ``--upto-batch 2``, or ``not a stage (no --upto-batch)``."""
    return "not a stage (no --upto-batch)" if manifest.upto_batch is None else f"--upto-batch {manifest.upto_batch}"


def order_name(seed: int | str | None, head_sha: str | None) -> str:
    """A stage's adaptive order as a message names it: ``seed 123 (--head-sha 'abc123')``, ``seed 7 (no --head-sha)``.

    ``head_sha`` is escaped to one line (it is the user's text).
    """
    sha = f"--head-sha '{one_line(head_sha)}'" if head_sha else "no --head-sha"
    return f"seed {seed} ({sha})"


def _check_shard_origin(shard_dirs: list[Path], manifests: list[Manifest]) -> None:
    """Shards of one run come from one commit (``--git-sha``) and one pipeline code (its fingerprint).

    Raises:
        InputError: two shards record different commits (one recording none counts as different), or different
            code fingerprints (shards made before fingerprints were recorded are not compared on it).
    """
    shas = {str(d): m.git_sha for d, m in zip(shard_dirs, manifests, strict=True)}
    if len(set(shas.values())) > 1:
        listed = ", ".join(f"{d}: {sha or 'none recorded'}" for d, sha in shas.items())
        raise InputError(f"the shards come from different commits ({listed}); shards must come from one commit")
    codes = {str(d): m.code_sha256 for d, m in zip(shard_dirs, manifests, strict=True)}
    if None not in codes.values() and len(set(codes.values())) > 1:
        listed = ", ".join(f"{d}: {(sha or '')[:12]}" for d, sha in codes.items())
        raise InputError(
            f"the shards ran different pipeline code (code fingerprints {listed}); re-run them from one checkout"
        )


def _check_shard_rows(shard_dirs: list[Path], manifests: list[Manifest]) -> None:
    """Each shard holds exactly the rows of its own cases; a shard relabelled as another is refused.

    A relabelled shard: its manifest's ``shard`` edited, or a directory copied. With the golden set the shards
    record (same sha256), shard i/n must hold every case of
    :func:`gate.golden.shard` i/n at every repeat and nothing else (a stage: only cases of its shard, each at
    every repeat, ``n_cases`` of them); without it, the shards' cases must not overlap and each must hold
    ``n_cases`` × ``repeats`` rows. Score rows must belong to the shard's cases.

    Raises:
        InputError: naming the shard and a case that should not be there (or is missing).
    """
    from gate.jsonl import scan_rows
    from gate.runs import ScoreRow

    first = manifests[0]
    golden_path = Path(first.golden or "")
    cases: list[GoldenCase] | None = None
    if golden_path.is_file() and file_sha256(golden_path) == first.golden_sha256:
        cases = load_golden(golden_path)
    seen: dict[str, Path] = {}
    for directory, manifest in zip(shard_dirs, manifests, strict=True):
        index, count = manifest.shard or (1, 1)
        repeats = manifest.repeats or 1
        rows = scan_predictions(Path(directory) / PREDICTIONS)
        keys = {(case_id, repeat) for case_id, repeat, _, _ in rows.rows}
        label = f"{directory} (shard {index}/{count})"
        if cases is not None:
            expected = {(c.id, r) for c in shard(cases, index, count) for r in range(repeats)}
            if manifest.upto_batch is not None:  # a stage: the cases of its shard it ran (checked below: n_cases)
                ran = {case_id for case_id, _ in keys}
                expected = {(case_id, r) for case_id, r in expected if case_id in ran}
            wrong = sorted(keys - expected) or sorted(expected - keys)
            if wrong:
                what = "holds case" if wrong[0] in keys else "lacks case"
                raise InputError(
                    f"{label}: {what} {wrong[0][0]!r} repeat {wrong[0][1]}, which shard {index}/{count} of "
                    f"{golden_path} {'does not have' if what == 'holds case' else 'has'}; was the shard relabelled "
                    "or edited? re-run it"
                )
        if cases is None or manifest.upto_batch is not None:
            _check_row_count(label, keys, manifest.n_cases, repeats)
        ids = {case_id for case_id, _ in keys}
        for case_id in sorted(ids):
            if case_id in seen:
                raise InputError(
                    f"{label}: case {case_id!r} is also in {seen[case_id]}; was a shard relabelled as another?"
                )
            seen[case_id] = Path(directory)
        for line, _, row in scan_rows(Path(directory) / SCORES, ScoreRow, "score"):
            if row.id not in ids:
                raise InputError(f"{Path(directory) / SCORES}:{line}: id: case {row.id!r} is not in this shard")


def _check_row_count(label: str, keys: set[tuple[str, int]], n_cases: int, repeats: int) -> None:
    """A shard holds ``n_cases`` × ``repeats`` prediction rows.

    Raises:
        InputError: naming the shard and both counts.
    """
    if len(keys) != n_cases * repeats:
        raise InputError(f"{label}: {len(keys)} prediction rows, not n_cases × repeats = {n_cases} × {repeats}")


def _write_merged(shard_dirs: list[Path], manifests: list[Manifest], out_dir: Path) -> Path:
    """Write the merged run directory (``out_dir`` is locked by this process)."""
    first = manifests[0]
    archive_previous(out_dir, RUN_FILES)
    for name in (PREDICTIONS, SCORES):
        with atomic_writer(out_dir / name) as sink:
            for directory in shard_dirs:
                with (Path(directory) / name).open(encoding="utf-8") as source:
                    shutil.copyfileobj(source, sink)
    usages = [m.judge_usage for m in manifests if m.judge_usage is not None]
    counts = [m.counts for m in manifests if m.counts is not None]
    merged = msgspec.structs.replace(
        first,
        shard=None,
        status="partial" if any(m.status == "partial" for m in manifests) else "complete",
        n_cases=sum(m.n_cases for m in manifests),
        counts=sum(counts[1:], start=counts[0]) if len(counts) == len(manifests) else None,
        # None when a shard recorded no accounting (a run made before rag-gate kept it)
        judge_usage=sum(usages[1:], start=usages[0]) if len(usages) == len(manifests) else None,
        merged_from=tuple(str(d) for d in shard_dirs),
        started=min(m.started or "" for m in manifests),
        finished=max(m.finished or "" for m in manifests),
    )
    write_json(out_dir / MANIFEST, merged.to_dict())
    return out_dir
