"""Producing a run (``rag-gate run``, ``rag-gate merge``): one side's predictions and scores in a run directory.

The pipeline's predictions (:mod:`gate.pipeline`) are appended as they arrive, scored (:mod:`gate.scoring`) and
recorded with the run's identity in ``manifest.json``; an interrupted run resumes, another run's files are moved
aside (:func:`run_side`). Shards merge into one run in :mod:`gate.shards`; loading and comparing two sides is
:mod:`gate.sides`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import math
import os
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import msgspec

from gate import __version__
from gate.config import Config, GatePolicy, PipelineSpec
from gate.errors import EvaluationError, InputError, located
from gate.files import archive_previous, atomic_writer, locked_directory, make_dirs, refuse_inputs_inside
from gate.fingerprint import code_fingerprint
from gate.golden import file_sha256, load_golden, shard
from gate.jsonl import JsonlAppender, write_json
from gate.judges import get_judge
from gate.judges.base import Judge, judge_usage
from gate.manifest import Counts, ErrorCount, JudgeUsage, Manifest
from gate.models import GoldenCase, Prediction, Score
from gate.pipeline import WorkerPool, run_command, run_python
from gate.predictions import (
    MISSING,
    REPEATS_SOURCE,
    PredictionTable,
    align,
    beyond_repeats,
    load_predictions,
)
from gate.runs import (
    MANIFEST,
    MANIFEST_SCHEMA_VERSION,
    PREDICTIONS,
    RUN_FILES,
    SCORES,
    RunIdentity,
    load_run_predictions,
    read_manifest,
    read_partial_predictions,
    write_predictions,
)
from gate.sandbox import Sandbox
from gate.scoring import EarlyScores, score_all, score_lines

log = logging.getLogger("rag-gate")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def make_judge(policy: GatePolicy) -> Judge:
    """The configured judge.

    Raises:
        InputError: for an unknown judge name or invalid judge options.

    """
    try:
        return get_judge(policy.judge_spec())
    except (ValueError, TypeError) as exc:
        raise InputError(f"judge: {exc}") from None


def run_identity(
    policy: GatePolicy,
    judge: Judge,
    golden_sha256: str,
    config_sha256: str,
    repeats: int,
    shard_spec: tuple[int, int] | None = None,
) -> RunIdentity:
    """The identity of a run made (or scored) with these settings by this rag-gate (see :class:`RunIdentity`)."""
    return RunIdentity(
        golden_sha256=golden_sha256,
        config_sha256=config_sha256,
        repeats=repeats,
        shard=shard_spec,
        judge={"id": judge.id, "version": judge.version, "config": dict(policy.judge)},
        scoring={
            "refusal_phrases": list(policy.refusal_phrases),
            "refusal_use_field": policy.refusal_use_field,
            **({"form": policy.form.to_dict()} if policy.form.to_dict() else {}),
        },
        gate_version=__version__,
    )


def pipeline_section(config: Config) -> dict[str, Any]:
    """The config's ``pipeline:`` settings that differ from the defaults, as written (paths relative to the config).

    Recorded in the manifest, so that a comparison can show what changed between base and head.
    """
    spec, out = config.pipeline, {}
    for f in dataclasses.fields(PipelineSpec):
        value = getattr(spec, f.name)
        if f.name == "origin" or value == getattr(PipelineSpec(), f.name):
            continue
        if isinstance(value, Path):
            value = os.path.relpath(value, config.root)
            if value == ".":
                continue
        out[f.name] = list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, Mapping) else value
    return out


def run_side(
    config: Config,
    out_dir: Path,
    *,
    repeats: int | None = None,
    progress: bool = False,
    git_sha: str | None = None,
    git_ref: str | None = None,
    shard_spec: tuple[int, int] | None = None,
    sandbox: Sandbox | None = None,
    require_answers: bool = True,
    jobs: int | None = None,
    cases: Collection[str] | None = None,
    case_repeats: Mapping[str, int] | None = None,
    upto_batch: int | None = None,
    order: tuple[int, str | None] | None = None,
) -> Path:
    """Run the golden set through one side's pipeline, score it, and write a run directory.

    Resumes an interrupted run in ``out_dir`` made with the same golden set, config, repeats and shard: rows
    already computed are kept, failed rows are retried. With ``cases`` (an adaptive evaluation's batches: each call
    names a longer prefix of its order), only those cases run; the run's identity is the same for every prefix, so
    each call extends the same run, and the rows an earlier call scored are reused, not scored again (judge failures
    are retried). Its manifest says ``partial`` until every case has run.

    Args:
        config: the side's loaded config.
        out_dir: the run directory (created if needed).
        repeats: overrides the config's ``repeats``.
        progress: show a progress bar on stderr.
        git_sha: commit of the side, recorded in the manifest.
        git_ref: ref of the side, recorded in the manifest.
        shard_spec: ``(i, n)`` to run only the i-th of n shards of the golden set.
        sandbox: where the pipeline runs (default: the allow-listed environment of this process).
        require_answers: raise when every prediction failed (``rag-gate run``). The PR flow's head passes False: a
            head that fails on every case the base answered is a regression, which the comparison reports. A
            pipeline that cannot start at all (import error, missing function) is raised either way: nothing ran.
        jobs: worker processes that score (``--jobs``); None: the config's ``scoring.jobs``, else every core.
        cases: the ids of the golden cases to run (None: all of them).
        case_repeats: case id → repeats to run (the first ones, 1 to R) for the cases an adaptive evaluation runs
            fewer times (:mod:`gate.pr.adaptive`); other cases run every repeat. The rest are skipped by plan: not
            run, not scored, not counted as errors; the manifest records them (``case_repeats``) and says
            ``partial``, and a later call with more repeats (or none given) runs them.
        upto_batch: K of ``rag-gate run --upto-batch K`` (``cases`` are then the stage's), recorded in the manifest
            (``upto_batch``) for ``rag-gate merge``.
        order: a stage's order: (its seed, the ``--head-sha`` it was seeded with or None), recorded in the manifest
            (``order_seed``, ``order_head_sha``) for ``rag-gate compare --adaptive``.

    Returns:
        ``out_dir`` (its run is complete or partial, also when every prediction failed).

    Raises:
        InputError: bad golden set, config or precomputed predictions.
        EvaluationError: the pipeline cannot run at all (import error, command failure), or every prediction
            failed and ``require_answers``; the run directory is written first.

    """
    out_dir = Path(out_dir)
    inputs = {"config": config.path, "golden": config.golden, "pipeline.predictions": config.pipeline.predictions}
    refuse_inputs_inside(out_dir, inputs, f"--out {out_dir}")
    make_dirs(out_dir)
    with locked_directory(out_dir, f"--out {out_dir}") as left:
        if left is not None:
            log.warning(
                "%s: the run that held it (pid %s on host %s, started %s) ended without finishing (killed?)",
                out_dir,
                left.get("pid", "?"),
                left.get("host", "?"),
                left.get("started", "?"),
            )
        return _run_side_locked(
            config,
            out_dir,
            repeats,
            progress,
            git_sha,
            git_ref,
            shard_spec,
            sandbox,
            require_answers,
            jobs,
            cases,
            case_repeats,
            upto_batch,
            order,
        )


def _run_side_locked(
    config: Config,
    out_dir: Path,
    repeats: int | None,
    progress: bool,
    git_sha: str | None,
    git_ref: str | None,
    shard_spec: tuple[int, int] | None,
    sandbox: Sandbox | None,
    require_answers: bool,
    scoring_jobs: int | None = None,
    cases: Collection[str] | None = None,
    case_repeats: Mapping[str, int] | None = None,
    upto_batch: int | None = None,
    order: tuple[int, str | None] | None = None,
) -> Path:
    """:func:`run_side` once ``out_dir`` is locked by this process."""
    golden = load_golden(config.golden)
    if shard_spec is not None:
        golden = shard(golden, *shard_spec)
    n_all = len(golden)
    if cases is not None:
        wanted = set(cases)
        golden = [case for case in golden if case.id in wanted]
    n_repeats = repeats or config.repeats
    planned = {c.id: max(1, n) for c in golden if (n := (case_repeats or {}).get(c.id, n_repeats)) < n_repeats}
    pool = _early_workers(config, out_dir, len(golden) * n_repeats, sandbox)
    try:
        policy = config.policy
        judge = make_judge(policy)
        identity = run_identity(policy, judge, file_sha256(config.golden), config.sha256, n_repeats, shard_spec)
        code = code_fingerprint(config.pipeline, exclude=[out_dir])
        manifest = Manifest.from_dict(
            {
                "schema_version": MANIFEST_SCHEMA_VERSION,
                **identity.to_dict(),
                "code": code,
                "git_sha": git_sha,
                "git_ref": git_ref,
                "config": str(config.path),
                "golden": str(config.golden),
                "pipeline": pipeline_section(config),
                "n_cases": len(golden),
                "evaluation": policy.to_dict(),
                "status": "running",
                "started": _now(),
                **({"case_repeats": planned} if planned else {}),
                **({"upto_batch": upto_batch} if upto_batch is not None else {}),
                **({"order_seed": str(order[0]), "order_head_sha": order[1]} if order is not None else {}),
            }
        )
        kept, rewrite = _resume_or_archive(out_dir, identity, code, quiet=cases is not None)
        stored, usage_before = _stored_scores(out_dir, identity, kept) if cases is not None else ({}, None)
        # the manifest says "running" before any file changes, and is rewritten last with the final status
        write_json(out_dir / MANIFEST, manifest.to_dict())
        if rewrite:
            write_predictions(out_dir / PREDICTIONS, kept)

        done = {(p.id, p.repeat) for p in kept}
        jobs = [
            (c, r)
            for r in range(n_repeats)
            for c in golden
            if (c.id, r) not in done and r < planned.get(c.id, n_repeats)
        ]
        # a slow python: pipeline's predictions are scored while it works on the next cases (see EarlyScores)
        early = EarlyScores(golden, policy, judge, min_latency_ms=EARLY_SCORING_MS * config.pipeline.concurrency)
        for prediction, rows in stored.values():
            early.reuse(prediction, rows)
        on_written = early.add if config.pipeline.python else None
        _produce(config, golden, jobs, n_repeats, out_dir / PREDICTIONS, progress, sandbox, on_written, pool)
    finally:  # the workers are gone before the scores are written
        if pool is not None:
            pool.close()

    # the predictions as written are the source of the scores (early ones are reused only for the same rows)
    ids = {case.id for case in golden}
    table = align(golden, [p for p in load_run_predictions(out_dir) if p.id in ids], out_dir / PREDICTIONS, n_repeats)
    for case_id, n in planned.items():  # skipped by plan: neither scored nor counted as errors
        for r in range(n, n_repeats):
            if table[(case_id, r)].error == MISSING:
                del table[(case_id, r)]
    # the manifest names the cases that skipped a repeat: one that holds every repeat (an earlier plan's) skipped none
    planned = {c: n for c, n in planned.items() if any((c, r) not in table for r in range(n, n_repeats))}
    workers = scoring_jobs if scoring_jobs is not None else config.scoring_jobs
    counts = Counter[str]()  # the rows are written, not kept: 1.5 million of them at 100,000 cases

    def count(rows: list[Score]) -> None:
        counts["scores"] += len(rows)
        counts["judge_failures"] += sum(s.error is not None and s.error.startswith("judge") for s in rows)

    score_to(out_dir / SCORES, golden, table, n_repeats, policy, judge, early, workers, progress, count)
    n_errors = sum(p.error is not None for p in table.values())
    manifest = msgspec.structs.replace(
        manifest,
        status="complete"
        if len(golden) == n_all and not planned
        else "partial",  # a run whose every prediction failed is complete
        finished=_now(),
        case_repeats=planned or None,
        counts=Counts(
            predictions=len(table),
            prediction_errors=n_errors,
            scores=counts["scores"],
            judge_failures=counts["judge_failures"],
        ),
        judge_usage=judge_usage(judge) if usage_before is None else usage_before + judge_usage(judge),
        prediction_errors=tuple(
            ErrorCount(message, count)
            for message, count in Counter(p.error for p in table.values() if p.error is not None).most_common()
        ),
    )
    write_json(out_dir / MANIFEST, manifest.to_dict())
    if require_answers:
        require_some_predictions(table, out_dir / PREDICTIONS)
    return out_dir


def _resume_or_archive(
    out_dir: Path, identity: RunIdentity, code: dict[str, Any] | None = None, quiet: bool = False
) -> tuple[list[Prediction], bool]:
    """What to keep from a previous run in ``out_dir``: (kept predictions, whether predictions.jsonl needs rewriting).

    A run whose identity has the same prediction fields (golden set, config, repeats, shard) and, when ``code``
    is given, the same code fingerprint (:func:`gate.fingerprint.code_fingerprint`; a manifest without one never
    matches) is resumed: its predictions without ``error`` are kept. Anything else there (another run, a run of
    edited pipeline code, files without a valid manifest) is moved aside as ``<name>.previous-<n>.<ext>`` with a
    new number n, so that no previous run is ever lost, and the run starts afresh (said on stderr). ``quiet``: a
    resume is logged at DEBUG, not as a warning (an adaptive evaluation's batches resume by design).
    """
    try:
        previous = read_manifest(out_dir) if (out_dir / MANIFEST).exists() else None
    except InputError as exc:
        log.warning("%s: unreadable manifest (%s)", out_dir, exc)
        previous = None
    changed = [] if previous is None else identity.differences(previous.identity, RunIdentity.PREDICTION_FIELDS)
    if previous is not None and code is not None and previous.code_sha256 != code["sha256"]:
        changed.append("pipeline code (code fingerprint)")
    if previous is not None and not changed:
        kept, dirty = read_partial_predictions(out_dir / PREDICTIONS)
        if kept:
            (log.debug if quiet else log.warning)("%s: resuming: %d prediction(s) kept, failed ones retried", out_dir,
                                                 len(kept))  # fmt: skip
        return kept, dirty or not (out_dir / PREDICTIONS).exists()
    outputs = tuple(sorted(p.name for p in out_dir.glob("command-output-*.jsonl") if ".previous-" not in p.name))
    moved = archive_previous(out_dir, RUN_FILES + outputs)
    if moved:
        log.warning(
            "%s: holds %s; starting afresh (the previous files are kept as %s)",
            out_dir,
            f"a run with another {', '.join(changed)}" if changed else "files of another run",
            ", ".join(p.name for p in moved),
        )
    return [], True


def _stored_scores(
    out_dir: Path, identity: RunIdentity, kept: list[Prediction]
) -> tuple[dict[tuple[str, int], tuple[Prediction, list[Score]]], JudgeUsage | None]:
    """The score rows an earlier call of this run wrote for the predictions kept, and the judge usage it recorded.

    Reused only from a run with the same identity (prediction and score fields: the same config, judge, scoring
    settings and rag-gate) whose ``scores.jsonl`` exists; a kept prediction has not changed since it was scored
    (kept rows are never rewritten, failed ones are retried). A (case, repeat) with a judge failure is not reused.

    Returns:
        ((case id, repeat) → (the prediction, its score rows in file order)), the previous judge usage or None.
    """
    if not kept or not (out_dir / SCORES).exists():
        return {}, None
    try:
        previous = read_manifest(out_dir)
    except InputError:
        return {}, None
    if identity.differences(previous.identity, RunIdentity.PREDICTION_FIELDS + RunIdentity.SCORE_FIELDS):
        return {}, None
    from gate.jsonl import scan_rows
    from gate.runs import ScoreRow

    predictions = {(p.id, p.repeat): p for p in kept if p.error is None}
    rows: dict[tuple[str, int], list[Score]] = {}
    judge_failed = set()
    for _, _, row in scan_rows(out_dir / SCORES, ScoreRow, "score"):
        key = (row.id, row.repeat)
        if key in predictions:
            value = math.nan if row.value is None else row.value
            rows.setdefault(key, []).append(Score(row.id, row.repeat, row.metric, value, row.error, row.detail))
            if row.error is not None and row.error.startswith("judge"):
                judge_failed.add(key)
    stored = {key: (predictions[key], scores) for key, scores in rows.items() if key not in judge_failed}
    return stored, previous.judge_usage


EARLY_SCORING_MS = 1.0
"""A prediction is scored as it arrives when its call took at least this × ``pipeline.concurrency`` ms: rag-gate
then waits about that long per prediction, several times what scoring one takes with the judge-free metrics
(benchmarks/perf.py, run overhead); a faster pipeline's predictions are scored together once it is done
(cheaper per prediction)."""


def _early_workers(config: Config, out_dir: Path, n_jobs: int, sandbox: Sandbox | None) -> WorkerPool | None:
    """The ``python:`` pipeline's workers, spawned now when the run is a fresh one (else None: spawned later).

    A fresh run (no manifest in ``out_dir``) calls the pipeline for every one of its ``n_jobs`` (case, repeat)
    pairs, so its workers' interpreters can start (and import the pipeline) while rag-gate builds the judge,
    hashes the inputs and writes the manifest. A run that may resume spawns them once the cases left are known.
    """
    spec = config.pipeline
    if not spec.python or n_jobs == 0 or (out_dir / MANIFEST).exists():
        return None
    return WorkerPool(spec, sandbox, size=n_jobs)


def require_some_predictions(table: Mapping[tuple[str, int], Prediction], where: Path) -> None:
    """A side on which every prediction failed cannot be evaluated.

    Raises:
        EvaluationError: naming the count and the first error (exit code 3).
    """
    n_rows = len(table)
    if isinstance(table, PredictionTable):
        n_failed, first = table.n_errors, table.first_error()
        n_rows -= table.n_skipped  # skipped by plan: not rows that failed
    else:
        failed = [(p.id, p.repeat, p.error) for p in table.values() if p.error is not None]
        n_failed, first = len(failed), failed[0] if failed else None
    if first is not None and n_failed == n_rows:
        raise EvaluationError(
            f"{where}: every prediction failed ({n_failed} of {n_rows}), e.g. case '{first[0]}': {first[2]}"
        )


def score_to(
    path: Path,
    golden: list[GoldenCase],
    table: Mapping[tuple[str, int], Prediction],
    repeats: int,
    policy: GatePolicy,
    judge: Judge,
    known: EarlyScores | None = None,
    jobs: int | None = None,
    progress: bool = False,
    on_rows: Callable[[list[Score]], None] | None = None,
) -> list[Score]:
    """Score every prediction into ``path``: rows go to a temporary file, renamed over ``path`` when complete.

    ``jobs`` worker processes score (see :func:`gate.scoring.score_all`); ``progress`` shows a bar of the answers
    scored (every case × repeat, failed ones included) on stderr. With ``on_rows``, each prediction's rows go to it
    once written and are not kept (an empty list is returned); otherwise every row is returned.
    """
    total = len(table)  # every case × repeat but those an adaptive evaluation skipped
    with atomic_writer(path) as sink, _progress_bar(total, "scored", "answer") if progress else nullcontext() as bar:

        def write(rows: list[Score]) -> None:
            sink.write(known.lines(rows) if known is not None else score_lines(rows))
            if bar is not None:
                bar.update(1)
            if on_rows is not None:
                on_rows(rows)

        keep = on_rows is None
        return score_all(golden, table, repeats, policy, judge, on_scores=write, known=known, jobs=jobs, keep=keep)


def _produce(
    config: Config,
    golden: list[GoldenCase],
    jobs: list[tuple[GoldenCase, int]],
    n_repeats: int,
    predictions_path: Path,
    progress: bool,
    sandbox: Sandbox | None = None,
    on_written: Callable[[Prediction], None] | None = None,
    pool: WorkerPool | None = None,
) -> None:
    """Produce the missing predictions with the configured adapter, appending each one as it arrives.

    ``on_written`` gets each prediction once it is on disk (to score it while the pipeline runs); ``pool`` holds
    the ``python:`` adapter's workers when they were spawned beforehand (:func:`_early_workers`).
    """
    spec = config.pipeline
    with JsonlAppender(predictions_path) as sink, _progress_bar(len(jobs)) if progress else nullcontext() as bar:

        def write(prediction: Prediction) -> None:
            sink.write(prediction.to_dict())
            if bar is not None:
                bar.update(1)
            if on_written is not None:
                on_written(prediction)

        if not jobs:
            return
        if spec.python:
            run_python(spec, jobs, write, sandbox=sandbox, pool=pool)
            return
        wanted = {(c.id, r) for c, r in jobs}
        produced: Iterable[Prediction]
        if spec.command:
            produced = run_command(
                spec, config.golden, sorted({r for _, r in jobs}), len(golden), predictions_path.parent, sandbox=sandbox
            )
        else:
            produced = _precomputed(spec.predictions, n_repeats) if spec.predictions is not None else []
        for prediction in produced:
            if (prediction.id, prediction.repeat) in wanted:
                write(prediction)


def _precomputed(path: Path, repeats: int) -> list[Prediction]:
    """The rows of a ``predictions:`` file, none of them beyond the run's ``repeats`` (checked before any is written).

    Raises:
        InputError: bad rows (:func:`gate.predictions.load_predictions`), or ``file:line: repeat: …`` for a row whose
            repeat is ≥ ``repeats``: it would otherwise be left out without a word.
    """
    rows = load_predictions(path)
    for row in rows:
        if row.repeat >= repeats:
            message = beyond_repeats(row.repeat, repeats, REPEATS_SOURCE)
            raise InputError(located(path, row.line or None, "repeat", message))
    return rows


def _progress_bar(total: int, desc: str = "cases", unit: str = "case") -> Any:
    """A progress bar of ``total`` cases on stderr (tqdm, imported only when a bar is shown).

    Without tqdm's monitor thread: scoring forks its worker processes only from a process that runs no other thread.
    """
    from tqdm import tqdm

    tqdm.monitor_interval = 0
    return tqdm(total=total, file=sys.stderr, desc=desc, unit=unit)


def unmatched_retrieval(config: Config, run_dir: Path, aggregates: Mapping[str, Mapping[str, Any]]) -> str | None:
    """A warning when no retrieved id of any prediction of a run matches any expected document id of its golden set.

    The typical cause is a pipeline that returns chunk ids where the golden set names documents: every retrieval
    metric is then 0, which reads like a bad retriever. Only when the run has a retrieval metric whose mean is 0
    everywhere (a positive mean proves a match, without reading the predictions) and the golden set expects some
    document; then the predictions are read (failed ones left out) and each retrieved list compared with the
    union of the golden set's expected document ids.

    Args:
        config: the side's config (its golden set).
        run_dir: the finished run directory.
        aggregates: metric name → its aggregates (``mean``), as :func:`gate.history.entries.run_aggregates` gives.

    Returns:
        One line with the counts, an example pair (:func:`~gate.metrics.retrieval.mismatch_example`) and the
        likely fix; None when some retrieved id matches, or nothing can tell.
    """
    from gate.metrics import resolve
    from gate.metrics.retrieval import ID_ADVICE, mismatch_example

    means = [aggregates[name].get("mean") for name in aggregates if resolve(name).spec.stage == "retrieval"]
    if all(mean is None for mean in means) or any(mean for mean in means):
        return None  # no retrieval metric, none applicable (every prediction failed), or a match somewhere
    golden = {case.id: case for case in load_golden(config.golden)}
    expected = {doc for case in golden.values() if not case.out_of_domain for doc in case.expected_doc_ids}
    if not expected:
        return None
    answered, retrieved, example = 0, 0, None
    for prediction in load_run_predictions(run_dir):
        case = golden.get(prediction.id)
        if prediction.error is not None or case is None or case.out_of_domain or not case.expected_doc_ids:
            continue
        answered += 1
        if not (ids := prediction.retrieved_ids):
            continue
        retrieved += 1
        if not expected.isdisjoint(ids):
            return None
        example = example or mismatch_example(case.id, case.expected_doc_ids, ids)
    if not answered:
        return None
    if example is None:
        return (
            f"none of the {answered} answered in-domain predictions retrieved a chunk, so every retrieval metric is 0 "
            "(return the chunks the generator read, with their document ids)"
        )
    return (
        f"no retrieved id of the {retrieved} in-domain predictions with chunks matches any of the golden set's "
        f"{len(expected)} expected document ids, so every retrieval metric is 0; e.g. {example}. {ID_ADVICE}"
    )
