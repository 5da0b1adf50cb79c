"""Score predictions: every configured metric for every case × repeat (one :class:`Score` each).

Also pairs of answers, base's against head's, with the pairwise judge (the ``head_win_rate`` metric).
"""

from __future__ import annotations

import gc
import itertools
import logging
import math
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gate.collector import gc_frozen, gc_paused
from gate.config import GatePolicy
from gate.errors import EvaluationError
from gate.jsonl import dumps
from gate.judges.base import Judge, Judgment, graded_dimensions, oversize_judgment
from gate.manifest import JudgeUsage
from gate.metrics import Metric, resolve, score_case
from gate.metrics.refusal import is_refusal
from gate.metrics.retrieval import expected_ranks
from gate.models import CHUNK_ID, PREDICTION_FAILED, GoldenCase, Prediction, Score

if TYPE_CHECKING:  # the pairwise judge needs the llm extra: imported when it is built
    from gate.judges.pairwise import PairJudgment, PairwiseJudge

log = logging.getLogger("rag-gate")


def detect_refusal(prediction: Prediction, evaluation: GatePolicy) -> bool:
    """Whether a prediction is a refusal: :func:`gate.metrics.refusal.is_refusal` with the configured policy.

    The pipeline's explicit ``refused`` flag decides when ``evaluation.refusal_use_field`` trusts it; otherwise
    the answer text is matched against ``evaluation.refusal_phrases``.
    """
    flag = prediction.refused if evaluation.refusal_use_field else None
    return is_refusal(prediction.answer, flag, evaluation.refusal_phrases)


def call_judge(judge: Judge, case: GoldenCase, prediction: Prediction, evaluation: GatePolicy) -> Judgment:
    """Judge one prediction.

    An answer longer than :data:`MAX_JUDGED_ANSWER_BYTES` is not sent to the judge (:func:`oversize_judgment`).
    Every judge gets the answer as written. A judge that reads the case (``reads_case``: the rubric judge) also gets
    it and its form rules (it grades the citations as form). A claim-level judge leaves the citation markers out of
    what it judges ("[d1]" is no claim, and not the number 1: :func:`gate.metrics.generation.citation_markers`),
    never a word of the sentence, and the lexical and nli judges show each claim as written.
    """
    oversize = oversize_judgment(prediction)
    if oversize is not None:
        return oversize
    if getattr(judge, "reads_case", False):
        rules = evaluation.form.override(case.form)
        args = (case.question, prediction.answer, prediction.retrieved)
        return judge.judge(*args, repeat=prediction.repeat, case=case, form=rules)  # type: ignore[call-arg]
    return judge.judge(case.question, prediction.answer, prediction.retrieved, repeat=prediction.repeat)


TEXTLESS_CHUNK = (
    "a retrieved chunk has no text (the judge checks claims against the chunks' text): text-based metrics not "
    "applicable"
)
"""The ``not_applicable`` note of an answer whose retrieved chunks include one without text (never scored 0)."""

NO_CHECKABLE_CLAIM = "with no checkable claim (the judge found no claim it could check): not scored"
"""Why a judged answer has no faithfulness value: the judge found no claim in it (counted and shown, not scored)."""


def textless_judgment(prediction: Prediction) -> Judgment | None:
    """A not-applicable judgment when a retrieved chunk has no text (empty or blank ``text``), else None.

    The judge weighs the answer's claims against the chunks' text: a chunk without it is evidence the judge cannot
    read, so a claim it supports would be scored unsupported (faithfulness 0). The judge is not called; every
    metric it grades is NaN (not applicable), counted and shown in the report, and where the other side of a
    comparison was scored it counts as an evaluation failure (never "no change").
    """
    if any(not chunk.text or chunk.text.isspace() for chunk in prediction.retrieved):
        return Judgment(not_applicable=TEXTLESS_CHUNK)
    return None


def has_no_claim(judgment: Judgment) -> bool:
    """True when a judge that succeeded and could read the answer found no claim it could check in it."""
    return (
        judgment.error is None
        and judgment.not_applicable is None
        and not judgment.claims
        and judgment.score is None
        and not judgment.grades
    )


def judgment_of(
    case: GoldenCase, prediction: Prediction, metrics: Sequence[Metric], evaluation: GatePolicy, judge: Judge | None
) -> Judgment | None:
    """The judgment :func:`score_one` reads for a prediction (see there), or None when the judge is not called."""
    graded = graded_dimensions(judge) if judge is not None else frozenset()
    if judge is None or prediction.error is not None or not any(m.spec.judgment_field in graded for m in metrics):
        return None
    if detect_refusal(prediction, evaluation):
        return None
    return textless_judgment(prediction) or call_judge(judge, case, prediction, evaluation)


_CALL = Judgment(error="not judged yet")  # score_one's default judgment: call the judge there


def score_one(
    case: GoldenCase,
    prediction: Prediction,
    metrics: Sequence[Metric],
    evaluation: GatePolicy,
    judge: Judge | None,
    given: Mapping[str, float] | None = None,
    judgment: Judgment | None = _CALL,
) -> list[Score]:
    """All metric scores of one prediction, in ``metrics`` order (resolved from ``evaluation.metrics``).

    A failed prediction (a system error) is scored by the metrics that score failures (``error_rate``: 1;
    ``latency_ms`` and ``cost_usd``: what the failed call consumed, NaN when unknown) and has no value, with its
    reason in ``error``, for every other metric. A metric the judge grades (its
    ``judgment_field`` is among the judge's dimensions) is read from the judge's Judgment, combined with the
    metric's deterministic part when it has one (:meth:`~gate.metrics.MetricSpec.combined`); a judge failure
    gives failures for those metrics only. A metric the judge does not grade takes its deterministic value (NaN
    when it has none). The judge is not called on a refusal (a refusal makes no claims): judged metrics are then
    their deterministic value (0 for correctness and completeness of an answerable case) or NaN. Nor is it called
    when a retrieved chunk has no text (:func:`textless_judgment`: the judged metrics are then not applicable, with
    a note). The judgment's detail is kept on one row: the metric that keeps it (faithfulness) or else the first
    metric the judge grades; an answer without a checkable claim is noted there (``unscored``). Paired metrics
    (``head_win_rate``) have no per-side rows. ``given`` holds values already computed for this prediction (by
    :func:`batch_values`), used instead of the metric's per-case function. ``judgment``: the prediction's judgment
    already made by :func:`judgment_of` (None: not called); by default the judge is called here.
    """
    key = (case.id, prediction.repeat)
    metrics = [m for m in metrics if not m.spec.paired]
    if prediction.error is not None:
        reason = f"{PREDICTION_FAILED}{prediction.error}"
        return [
            Score(*key, m.name, score_case(m, case, prediction, False))
            if m.spec.scores_failures
            else Score(*key, m.name, math.nan, error=reason)
            for m in metrics
        ]
    given = given or {}
    graded = graded_dimensions(judge) if judge is not None else frozenset()
    judged = judge is not None and any(m.spec.judgment_field in graded for m in metrics)
    refused = detect_refusal(prediction, evaluation) if judged or any(m.name not in given for m in metrics) else False
    if judgment is _CALL:
        judgment = judgment_of(case, prediction, metrics, evaluation, judge)
    # the judgment's detail is kept once: on the metric that keeps it, else on the first metric the judge grades
    keeper = next((m for m in metrics if m.spec.keeps_detail and m.spec.judgment_field in graded), None) or next(
        (m for m in metrics if m.spec.judgment_field in graded), None
    )
    scores = []
    for metric in metrics:
        spec = metric.spec
        if metric.name in given:
            value = given[metric.name]
        else:
            value = score_case(metric, case, prediction, refused, evaluation.form) if spec.fn else math.nan
        if spec.judgment_field not in graded or judgment is None:
            scores.append(Score(*key, metric.name, value))
        elif judgment.error is not None:
            scores.append(Score(*key, metric.name, math.nan, error=f"judge failed: {judgment.error}"))
        elif spec.judgment_field in judgment.extra.get("ungraded", ()):
            message = f"judge failed: its answer has no grade for {spec.judgment_field}"
            scores.append(Score(*key, metric.name, math.nan, error=message))
        else:
            judged = getattr(judgment, spec.judgment_field)
            value = spec.combined(value, judged) if spec.fn else judged
            detail = None
            if metric is keeper:
                detail = judgment.to_dict()
                if has_no_claim(judgment):
                    detail["unscored"] = NO_CHECKABLE_CLAIM
            scores.append(Score(*key, metric.name, value, detail=detail))
    return scores


def score_all(
    golden: Sequence[GoldenCase],
    table: Mapping[tuple[str, int], Prediction],
    repeats: int,
    evaluation: GatePolicy,
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
    an endpoint (llm, ragas) or already uses every core (nli: torch) is called from ``evaluation.judge_concurrency``
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
        evaluation: metrics and refusal settings.
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
    metrics = [resolve(name) for name in evaluation.metrics]
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
        workers = use_processes(jobs, n_todo, evaluation, judge if calls_judge else None)
        if workers > 1:
            try:
                score_parallel(pairs, reused, evaluation, judge if calls_judge else None, workers, emit)
                return out
            except NoWorkers as exc:  # e.g. no /dev/shm for the queues' semaphores in a locked-down container
                log.warning("scoring: no worker process can start here (%s); scoring in this process", exc)
        todo = [pair for pair, scores in zip(pairs, reused, strict=True) if scores is None]
        # an offline, CPU-bound judge gains nothing from threads (they would take turns on the interpreter)
        threads = calls_judge and evaluation.judge.get("name") not in PROCESS_JUDGES
        computed = _score_pairs(todo, metrics, evaluation, judge, threads)
        for i, scores in enumerate(reused, 1):
            emit(scores if scores is not None else next(computed))
            if frozen and i % CHUNK == 0:  # as a worker does after each chunk (see _score_chunk)
                refreeze(i // CHUNK)
    return out


def _score_pairs(
    pairs: Sequence[tuple[GoldenCase, Prediction]],
    metrics: Sequence[Metric],
    evaluation: GatePolicy,
    judge: Judge | None,
    calls_judge: bool,
) -> Iterator[list[Score]]:
    """The scores of each (case, prediction), in order: batched metrics at once, the rest per prediction.

    When ``calls_judge``, ``evaluation.judge_concurrency`` threads only call the judge (:func:`judgment_of`), while
    this thread computes each prediction's metrics as its judgment arrives: no request slot waits on metric CPU.
    """
    names = [m.name for m in metrics if not m.spec.paired]
    given = batch_values(pairs, metrics)
    columns = [given[name] for name in names if name in given]
    every = len(columns) == len(names)  # every metric computed at once: a prediction needs no per-case work

    def one(i: int, judgment: Judgment | None = _CALL) -> list[Score]:
        case, prediction = pairs[i]
        if not given:
            return score_one(case, prediction, metrics, evaluation, judge, judgment=judgment)
        if every and prediction.error is None:
            return [Score(case.id, prediction.repeat, n, c[i]) for n, c in zip(names, columns, strict=True)]
        return score_one(case, prediction, metrics, evaluation, judge, {n: c[i] for n, c in given.items()}, judgment)

    if not calls_judge:
        yield from map(one, range(len(pairs)))
        return
    with ThreadPoolExecutor(evaluation.judge_concurrency, thread_name_prefix="rag-gate-judge-call") as pool:
        judgments = pool.map(lambda pair: judgment_of(pair[0], pair[1], metrics, evaluation, judge), pairs)
        yield from itertools.starmap(one, enumerate(judgments))


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


def use_processes(jobs: int | None, n_todo: int, evaluation: GatePolicy, judge: Judge | None) -> int:
    """How many worker processes score ``n_todo`` predictions: 1 (none: this process) or more.

    ``jobs`` given (``--jobs``, ``scoring.jobs``) is obeyed whenever the judge can run in a worker
    (:data:`PROCESS_JUDGES`, or no judge call); otherwise every core (:func:`available_cores`) when there are at least
    :data:`PARALLEL_MIN` predictions. ``judge`` is the judge when a metric calls it, else None.
    """
    if judge is not None and evaluation.judge.get("name") not in PROCESS_JUDGES:
        return 1
    if jobs is not None:
        return max(1, min(jobs, n_todo))
    if n_todo < PARALLEL_MIN["judged" if judge is not None else "judge-free"]:
        return 1
    return max(1, min(available_cores(), n_todo))


_WORKER: dict[str, Any] = {}
"""A worker process's state: the metrics, the evaluation settings and the judge (built once per process)."""


def _start_worker(evaluation: GatePolicy, with_judge: bool) -> None:
    """Initialise a worker process: resolve the metrics and build the judge from the config's ``judge:`` mapping."""
    from gate._worker import die_with_parent
    from gate.judges import get_judge

    die_with_parent(os.getppid())  # a worker left by a killed rag-gate (SIGKILL, OOM) exits, not orphaned
    _WORKER["metrics"] = [resolve(name) for name in evaluation.metrics]
    _WORKER["evaluation"] = evaluation
    _WORKER["judge"] = get_judge(evaluation.judge_spec()) if with_judge else None
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
    metrics, evaluation, judge = _WORKER["metrics"], _WORKER["evaluation"], _WORKER["judge"]
    rows = list(_score_pairs(pairs, metrics, evaluation, judge, calls_judge=False))
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


def _pool(workers: int, evaluation: GatePolicy, with_judge: bool, n_pairs: int = 0) -> ProcessPoolExecutor:
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
    return ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker, initargs=(evaluation, with_judge)
    )


class NoWorkers(Exception):
    """Worker processes cannot be started on this system (before anything was scored)."""


def score_parallel(
    pairs: Sequence[tuple[GoldenCase, Prediction]],
    reused: Sequence[list[Score] | None],
    evaluation: GatePolicy,
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
        pool = _pool(workers, evaluation, judge is not None, len(pairs))
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
                pool = _pool(workers, evaluation, judge is not None, len(pairs))
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


class EarlyScores:
    """The scores of predictions computed as each arrives, while the pipeline runs (its wait is idle time here).

    :func:`score_all` reuses them for a prediction equal to the one scored (its ``line`` in the file aside); any
    other prediction (one kept from an interrupted run, or a row that reads back differently) is scored there as
    usual, so the scores are the same either way. Nothing is kept when a metric is graded by the judge: judge
    calls are made by :func:`score_all`, ``evaluation.judge_concurrency`` at a time.

    Only a prediction whose call took at least ``min_latency_ms`` is scored here: the wait for such a call leaves
    time to spare, whereas the predictions of a fast pipeline keep rag-gate busy anyway and are scored together
    afterwards (:func:`batch_values`: several times cheaper per prediction than :func:`score_one`).

    Args:
        golden: the cases (predictions of other ids are not scored here).
        evaluation: metrics and refusal settings, as given to :func:`score_all`.
        judge: the judge, as given to :func:`score_all`.
        min_latency_ms: the shortest call (``latency_ms``, or ``warmup_ms`` of a worker's first call) whose
            prediction is scored here, ≥ 0.
    """

    def __init__(
        self, golden: Sequence[GoldenCase], evaluation: GatePolicy, judge: Judge | None, min_latency_ms: float = 0.0
    ):
        self._min_latency_ms = min_latency_ms
        self._cases = {case.id: case for case in golden}
        self._metrics = [resolve(name) for name in evaluation.metrics]
        self._evaluation = evaluation
        self._judge = judge
        graded = graded_dimensions(judge) if judge is not None else frozenset()
        self.enabled = not any(m.spec.judgment_field in graded for m in self._metrics if not m.spec.paired)
        """False when a metric calls the judge: then nothing is scored early."""
        self._scores: dict[tuple[str, int], tuple[Prediction, list[Score]]] = {}
        self._lines: dict[int, tuple[list[Score], str]] = {}

    def add(self, prediction: Prediction) -> None:
        """Score ``prediction`` now; a no-op when not :attr:`enabled`, for a fast or failed call, or an unknown id."""
        took = prediction.latency_ms if prediction.latency_ms is not None else prediction.warmup_ms
        if not self.enabled or took is None or took < self._min_latency_ms:
            return
        case = self._cases.get(prediction.id)
        if case is not None:
            scores = score_one(case, prediction, self._metrics, self._evaluation, self._judge)
            self._scores[(prediction.id, prediction.repeat)] = (replace(prediction, line=0), scores)
            self._lines[id(scores)] = (scores, score_lines(scores))

    def reuse(self, prediction: Prediction, scores: list[Score]) -> None:
        """Take ``scores`` as ``prediction``'s (rows an earlier call of the same run scored), also when not enabled."""
        self._scores[(prediction.id, prediction.repeat)] = (replace(prediction, line=0), scores)

    def get(self, prediction: Prediction) -> list[Score] | None:
        """The scores of ``prediction`` if it was scored early (the same fields but ``line``), else None."""
        found = self._scores.get((prediction.id, prediction.repeat))
        if found is None or found[0] != replace(prediction, line=0):
            return None
        return found[1]

    def lines(self, scores: list[Score]) -> str:
        """:func:`score_lines` of ``scores``, made while the pipeline ran when it is a list :meth:`get` returned."""
        found = self._lines.get(id(scores))
        return found[1] if found is not None and found[0] is scores else score_lines(scores)

    def __len__(self) -> int:
        return len(self._scores)


def score_lines(scores: Iterable[Score]) -> str:
    """The rows of ``scores.jsonl`` for ``scores``: one compact JSON object per line, each ending in a newline."""
    return "".join(dumps(score.to_dict()) + "\n" for score in scores)


def batch_values(jobs: Sequence[tuple[GoldenCase, Prediction]], metrics: Sequence[Metric]) -> dict[str, list[float]]:
    """The values of the metrics that have a form over many predictions (``many``: retrieval), for every job.

    One pass over the predictions finds the first ranks of the expected documents
    (:func:`gate.metrics.retrieval.expected_ranks`); each metric is then array arithmetic over all of them: the
    values equal the per-case functions' (tested), at a fraction of the cost. Out-of-domain cases are NaN (the
    per-case rule); failed predictions get NaN here and are scored as failures by :func:`score_one`.

    Returns:
        metric name → one value per job, in job order.
    """
    batched = [m for m in metrics if m.spec.many is not None and not m.spec.paired]
    if not batched or not jobs:
        return {}
    valid = [prediction.error is None and not case.out_of_domain for case, prediction in jobs]
    ranks = expected_ranks(
        [prediction.retrieved if ok else () for (_, prediction), ok in zip(jobs, valid, strict=True)],
        [case.expected_doc_ids if ok else () for (case, _), ok in zip(jobs, valid, strict=True)],
        key=CHUNK_ID,
    )
    return {metric.name: metric.spec.many(ranks, metric.k or 0).tolist() for metric in batched if metric.spec.many}


PAIRED_METRIC = "head_win_rate"
"""The metric the pairwise judge scores."""


@dataclass(frozen=True)
class PairwiseRun:
    """What the pairwise judge decided on a comparison's cases, and what it cost."""

    judge_id: str
    """The pairwise judge's id (``pairwise:<model>@t<temperature>``)."""
    judge_version: str
    """Its version."""
    judgments: tuple[tuple[str, PairJudgment | None], ...]
    """(case id, judgment) in case order; None where a side has no valid answer (not applicable)."""
    usage: JudgeUsage = field(default_factory=JudgeUsage)
    """The judge's accounting (:func:`gate.judges.base.judge_usage`)."""


def judge_pairs(
    pairs: Sequence[tuple[GoldenCase, Prediction | None, Prediction | None]],
    judge: PairwiseJudge,
    evaluation: GatePolicy,
) -> list[PairJudgment | None]:
    """Judge base's answer against head's for every case, ``evaluation.judge_concurrency`` cases at a time.

    Args:
        pairs: (case, base's prediction, head's prediction); a prediction is None when that side has no valid
            answer for the case (every repeat failed).
        judge: the pairwise judge (two calls per case, one per order).
        evaluation: the judge concurrency and the config's form rules (a case's ``form`` overrides them).

    Returns:
        One :class:`~gate.judges.pairwise.PairJudgment` per pair, in order; None where a prediction is None.

    Raises:
        JudgeConfigError: the endpoint rejected the judge's configuration (the comparison stops, exit 3).

    """

    def one(pair: tuple[GoldenCase, Prediction | None, Prediction | None]) -> PairJudgment | None:
        case, base, head = pair
        if base is None or head is None or oversize_judgment(base) or oversize_judgment(head):
            return None  # no valid answer, or one too long to judge: not applicable
        return judge.compare(
            case.question,
            (base.answer, base.retrieved),
            (head.answer, head.retrieved),
            case=case,
            form=evaluation.form.override(case.form),
        )

    with gc_frozen(), ThreadPoolExecutor(evaluation.judge_concurrency) as pool:
        return list(pool.map(one, pairs))


def pair_scores(case_id: str, judgment: PairJudgment | None) -> tuple[Score, Score]:
    """The ``head_win_rate`` rows of one case, (base's, head's), both at repeat 0.

    A side scores 1 when the judge preferred its answer in both orders, else 0 (a tie is 0 and 0), so that the
    paired binary comparison of the two rows is the sign test on wins against losses (exact McNemar). Both rows
    are NaN when a side has no valid answer (not applicable) and failures (with ``error``) when the judge failed.
    """
    if judgment is None:
        return Score(case_id, 0, PAIRED_METRIC, math.nan), Score(case_id, 0, PAIRED_METRIC, math.nan)
    if judgment.outcome is None:
        reason = f"judge failed: {judgment.error}"
        return Score(case_id, 0, PAIRED_METRIC, math.nan, error=reason), Score(
            case_id, 0, PAIRED_METRIC, math.nan, error=reason
        )
    base, head = {"win": (0.0, 1.0), "loss": (1.0, 0.0), "tie": (0.0, 0.0)}[judgment.outcome]
    return Score(case_id, 0, PAIRED_METRIC, base), Score(case_id, 0, PAIRED_METRIC, head)
