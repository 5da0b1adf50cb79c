"""Score every prediction (:func:`score_all`): in this process, or on a pool of worker processes when that pays.

The pool's workers each build the judge anew from the config and score chunks of predictions with
:mod:`gate.scoring.score`; a pool that cannot start (no semaphores in a locked-down container) falls back to this
process.
"""

from __future__ import annotations

import gc
import itertools
import logging
import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from gate.collector import gc_frozen, gc_paused
from gate.config import GatePolicy
from gate.errors import EvaluationError
from gate.judges.base import Judge, graded_dimensions
from gate.metrics import resolve
from gate.models import GoldenCase, Prediction, Score
from gate.scoring.score import EarlyScores, score_pairs

if TYPE_CHECKING:  # the pairwise judge needs the llm extra: imported when it is built
    pass

log = logging.getLogger("rag-gate")


def score_all(
    golden: Sequence[GoldenCase],
    table: Mapping[tuple[str, int], Prediction],
    repeats: int,
    policy: GatePolicy,
    judge: Judge | None,
    on_scores: Callable[[list[Score]], None] | None = None,
    known: EarlyScores | None = None,
    jobs: int | None = None,
    keep: bool = True,
) -> list[Score]:
    """Score every (case, repeat), in golden order, on ``jobs`` worker processes when that pays.

    The metrics and an offline, CPU-bound judge (:data:`PROCESS_JUDGES`: the lexical judge) are computed in
    ``jobs`` worker processes when that pays (:func:`use_processes`), chunk by chunk (:func:`score_parallel`); the
    rows, their order and every value are the same as on one process (tested byte for byte). A judge that waits on
    an endpoint (llm, ragas) or already uses every core (nli: torch) is called from ``policy.judge_concurrency``
    threads of this process.

    Without judge calls the scoring is pure arithmetic that builds one :class:`Score` per metric and prediction
    (500,000 at 100,000 cases × 5 metrics) and no reference cycle: the cyclic garbage collector is paused
    meanwhile (:func:`gc_paused`), since each of its full passes would walk every live object for nothing. With
    judge calls, the objects alive before them are kept out of the collector's passes instead (:func:`gc_frozen`),
    and so are those alive after each :data:`CHUNK` of predictions (the judge's caches: :func:`refreeze`).

    Args:
        golden: the cases, in file order.
        table: predictions by (case id, repeat), complete (see ``gate.predictions.align``).
        repeats: number of repeats per case.
        policy: metrics and refusal settings.
        judge: the judge for judged metrics (None: judged metrics are NaN).
        on_scores: called with each prediction's scores as soon as they exist, in order (for incremental writing).
        known: scores computed while the pipeline ran; a prediction's are reused when ``table`` holds that very
            prediction (see :class:`EarlyScores`), the others are computed here.
        jobs: worker processes (1: none, everything in this process); None: every core this process may use
            (:func:`available_cores`), for enough predictions to pay for starting them.
        keep: return every score; False: return an empty list (the rows go to ``on_scores`` only, and memory
            stays bounded however many there are).

    Raises:
        EvaluationError: worker processes kept dying (:func:`score_parallel`).

    """
    metrics = [resolve(name) for name in policy.metrics]
    graded = graded_dimensions(judge) if judge is not None else frozenset()
    calls_judge = any(m.spec.judgment_field in graded for m in metrics if not m.spec.paired)
    out: list[Score] = []

    def emit(scores: list[Score]) -> None:
        if on_scores is not None:
            on_scores(scores)
        if keep:
            out.extend(scores)

    with gc_frozen() if calls_judge else gc_paused() as frozen:
        pairs = [(case, table[(case.id, r)]) for case in golden for r in range(repeats)]
        reused = [known.get(p) for _, p in pairs] if known is not None else [None] * len(pairs)
        n_todo = sum(scores is None for scores in reused)
        workers = use_processes(jobs, n_todo, policy, judge if calls_judge else None)
        if workers > 1:
            try:
                score_parallel(pairs, reused, policy, judge if calls_judge else None, workers, emit)
                return out
            except NoWorkers as exc:  # e.g. no /dev/shm for the queues' semaphores in a locked-down container
                log.warning("scoring: no worker process can start here (%s); scoring in this process", exc)
        todo = [pair for pair, scores in zip(pairs, reused, strict=True) if scores is None]
        # an offline, CPU-bound judge gains nothing from threads (they would take turns on the interpreter)
        threads = calls_judge and policy.judge.get("name") not in PROCESS_JUDGES
        computed = score_pairs(todo, metrics, policy, judge, threads)
        for i, scores in enumerate(reused, 1):
            emit(scores if scores is not None else next(computed))
            if frozen and i % CHUNK == 0:  # as a worker does after each chunk (see _score_chunk)
                refreeze(i // CHUNK)
    return out


PROCESS_JUDGES = frozenset({"lexical"})
"""Judges whose calls are scored in worker processes: offline and CPU-bound, built anew in each worker from the
config's ``judge:`` mapping. The others stay in this process: LLM judges wait on their endpoint (threads overlap
that), and the nli judge's torch already spreads a batch over every core."""

PARALLEL_MIN = {"judged": 400, "judge-free": 20_000}
"""The fewest predictions worth starting worker processes for (``jobs`` not given): the workers' start-up against
the time per answer of the lexical judge, or per prediction of the judge-free metrics (``benchmarks/perf.py``,
section ``scoring``, measures the speed-up and the judge's answers per second)."""

CHUNK = 64
"""Predictions per task sent to a worker process (at most; fewer when there are few predictions per worker)."""

CLEAN_WORKERS_MIN = 10_000
"""From this many predictions on, the workers are forked from a clean server process (``forkserver``), not from
this one: a forked worker's resident memory counts every page of this process's heap (every prediction) on top of
the judge's caches; from the server it is the judge's alone. Below, the server's start is not worth it
(``benchmarks/perf.py``'s e2e row gives each step's peak RSS)."""

RESTARTS = 2
"""How many times the worker processes are started again after one died, before scoring stops (exit 3)."""


def available_cores() -> int:
    """The cores this process may run on: ``os.process_cpu_count()`` (Python 3.13+), else its CPU affinity."""
    count = getattr(os, "process_cpu_count", None)
    if count is not None:
        return count() or 1
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity
        return os.cpu_count() or 1


def use_processes(jobs: int | None, n_todo: int, policy: GatePolicy, judge: Judge | None) -> int:
    """How many worker processes score ``n_todo`` predictions: 1 (none: this process) or more.

    ``jobs`` given (``--jobs``, ``scoring.jobs``) is obeyed whenever the judge can run in a worker
    (:data:`PROCESS_JUDGES`, or no judge call); otherwise every core (:func:`available_cores`) when there are at least
    :data:`PARALLEL_MIN` predictions. ``judge`` is the judge when a metric calls it, else None.
    """
    if judge is not None and policy.judge.get("name") not in PROCESS_JUDGES:
        return 1
    if jobs is not None:
        return max(1, min(jobs, n_todo))
    if n_todo < PARALLEL_MIN["judged" if judge is not None else "judge-free"]:
        return 1
    return max(1, min(available_cores(), n_todo))


_WORKER: dict[str, Any] = {}
"""A worker process's state: the metrics, the evaluation settings and the judge (built once per process)."""


def _start_worker(policy: GatePolicy, with_judge: bool) -> None:
    """Initialise a worker process: resolve the metrics and build the judge from the config's ``judge:`` mapping."""
    from gate._worker import die_with_parent
    from gate.judges import get_judge

    die_with_parent(os.getppid())  # a worker left by a killed rag-gate (SIGKILL, OOM) exits, not orphaned
    _WORKER["metrics"] = [resolve(name) for name in policy.metrics]
    _WORKER["policy"] = policy
    _WORKER["judge"] = get_judge(policy.judge_spec()) if with_judge else None
    _WORKER["chunks"] = 0
    gc.freeze()  # as gc_frozen: the collector's passes skip the libraries and the judge's tables


COLLECT_EVERY = 256
"""A worker's chunks between two full passes of the cyclic garbage collector over everything (see
:func:`_score_chunk`)."""


def _score_chunk(pairs: list[tuple[GoldenCase, Prediction]]) -> list[list[Score]]:
    """Score a chunk of (case, prediction) in a worker process (see :func:`_start_worker`), in order.

    The objects alive after a chunk (the judge's caches of parsed texts, which keep changing) are frozen out of the
    cyclic garbage collector's passes (``gc.freeze``): its full passes, triggered as the caches' entries are
    replaced, walked them all and found nothing (the judge makes no reference cycle), about an eighth of the
    judge's CPU time. Reference counting still frees them; a cycle made within a chunk is collected as usual; one
    left frozen is collected by a full pass every :data:`COLLECT_EVERY` chunks, so memory stays bounded.
    """
    metrics, policy, judge = _WORKER["metrics"], _WORKER["policy"], _WORKER["judge"]
    rows = list(score_pairs(pairs, metrics, policy, judge, calls_judge=False))
    _WORKER["chunks"] = _WORKER.get("chunks", 0) + 1
    refreeze(_WORKER["chunks"])
    return rows


def refreeze(chunks: int) -> None:
    """Freeze every object now alive (``gc.freeze``; see :func:`_score_chunk`).

    Every :data:`COLLECT_EVERY` chunks (``chunks``: those scored so far) everything is unfrozen and collected first.
    """
    if chunks % COLLECT_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def _pool(workers: int, policy: GatePolicy, with_judge: bool, n_pairs: int = 0) -> ProcessPoolExecutor:
    """``workers`` worker processes to score ``n_pairs`` predictions.

    Forked from this process when it runs no other thread (a fork copies only the calling thread, so a lock another
    thread holds would stay locked in the child) and holds fewer than :data:`CLEAN_WORKERS_MIN` predictions: nothing
    to import or pickle but the chunks. Otherwise forked from a clean server process on Linux (``forkserver``; it
    imports this module and the judge once), else spawned; those import the main module anew, which must then be
    guarded by ``if __name__ == "__main__":`` (the ``rag-gate`` command is).
    """
    import multiprocessing
    import multiprocessing.context
    import threading

    methods = multiprocessing.get_all_start_methods()
    context: multiprocessing.context.BaseContext
    small = n_pairs < CLEAN_WORKERS_MIN or "forkserver" not in methods
    if "fork" in methods and threading.active_count() == 1 and small:
        context = multiprocessing.get_context("fork")
    elif "forkserver" in methods:
        forkserver = multiprocessing.get_context("forkserver")
        # the judge's first call imports scikit-learn (its stop words, gate.language): once here, not in each worker
        judge_modules = ["gate.judges.lexical", "sklearn.feature_extraction.text"] if with_judge else []
        forkserver.set_forkserver_preload(["gate.scoring", *judge_modules])
        context = forkserver
    else:  # pragma: no cover - macOS and Windows
        context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(policy, with_judge))


class NoWorkers(Exception):
    """Worker processes cannot be started on this system (before anything was scored)."""


def score_parallel(
    pairs: Sequence[tuple[GoldenCase, Prediction]],
    reused: Sequence[list[Score] | None],
    policy: GatePolicy,
    judge: Judge | None,
    workers: int,
    emit: Callable[[list[Score]], None],
) -> None:
    """Score ``pairs`` on ``workers`` processes; ``emit`` each prediction's scores in order, as :func:`score_all`.

    The pairs go to the workers in chunks (:data:`CHUNK`), at most ``4 × workers`` chunks ahead of the first one
    not yet emitted, so memory stays bounded however many there are; the results are emitted in order as the
    chunks complete. A chunk's predictions with ``reused`` scores are not sent. When a worker process dies (killed,
    out of memory), the chunks not yet emitted are scored again by new workers, up to :data:`RESTARTS` times.

    Raises:
        EvaluationError: the workers died more than :data:`RESTARTS` times (exit 3); what was emitted stays emitted,
            the predictions are untouched, and a re-run scores them again.
        NoWorkers: the system cannot start worker processes (nothing was emitted): :func:`score_all` then scores
            in its own process.

    """
    size = max(1, min(CHUNK, -(-len(pairs) // (workers * 8))))
    ahead = 4 * workers
    starts = iter(range(0, len(pairs), size))
    pending: deque[tuple[int, list[int], Future[list[list[Score]]] | None]] = deque()
    restarts = 0
    try:
        pool = _pool(workers, policy, judge is not None, len(pairs))
    except (OSError, ImportError, NotImplementedError) as exc:
        raise NoWorkers(str(exc)) from exc

    def submit(start: int) -> tuple[int, list[int], Future[list[list[Score]]] | None]:
        todo = [j for j in range(start, min(start + size, len(pairs))) if reused[j] is None]
        if not todo:
            return start, todo, None
        try:
            return start, todo, pool.submit(_score_chunk, [pairs[j] for j in todo])
        except BrokenProcessPool as exc:  # a worker died since the last result: handled where this chunk is awaited
            broken: Future[list[list[Score]]] = Future()
            broken.set_exception(exc)
            return start, todo, broken

    try:
        for start in itertools.islice(starts, ahead):
            pending.append(submit(start))
        while pending:
            start, todo, future = pending[0]
            try:
                computed = future.result() if future is not None else []
            except BrokenProcessPool:
                restarts += 1
                first, last = pairs[start][0].id, pairs[min(start + size, len(pairs)) - 1][0].id
                if restarts > RESTARTS:
                    raise EvaluationError(
                        f"scoring: a worker process died {restarts} times (last while scoring cases {first!r} to "
                        f"{last!r}, killed or out of memory?); the predictions are kept, re-run to score them"
                    ) from None
                log.warning("scoring: a worker process died (cases %r to %r); starting new workers", first, last)
                _stop(pool)
                pool = _pool(workers, policy, judge is not None, len(pairs))
                pending = deque(submit(s) for s, _, _ in pending)
                continue
            pending.popleft()
            by_job = dict(zip(todo, computed, strict=True))
            for j in range(start, min(start + size, len(pairs))):
                known_rows = reused[j]
                emit(known_rows if known_rows is not None else by_job[j])
            for start in itertools.islice(starts, 1):
                pending.append(submit(start))
    finally:
        _stop(pool)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool``: its pending chunks cancelled, and the workers of a broken pool killed, not awaited.

    When a worker dies, the others may be blocked writing a result nobody reads; they are killed (SIGKILL) so that
    the pool's threads end and the next pool is forked from a process without them.
    """
    if getattr(pool, "_broken", False):
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.kill()
    pool.shutdown(wait=True, cancel_futures=True)
