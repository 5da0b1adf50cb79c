"""Score predictions: every configured metric for every case × repeat (one :class:`~gate.models.Score` each).

Three jobs, a module each: scoring one prediction or a batch in this process (:mod:`gate.scoring.score`), scoring
every prediction, on worker processes when that pays (:mod:`gate.scoring.pool`), and judging pairs of answers, base's
against head's, with the pairwise judge (:mod:`gate.scoring.pairwise`, the ``head_win_rate`` metric).
"""

from gate.collector import gc_frozen as gc_frozen
from gate.collector import gc_paused as gc_paused
from gate.metrics.refusal import is_refusal as is_refusal
from gate.scoring.pairwise import PAIRED_METRIC, PairwiseRun, judge_pairs, pair_scores
from gate.scoring.pool import (
    CHUNK,
    CLEAN_WORKERS_MIN,
    PARALLEL_MIN,
    PROCESS_JUDGES,
    available_cores,
    score_all,
    use_processes,
)
from gate.scoring.score import (
    NO_CHECKABLE_CLAIM,
    TEXTLESS_CHUNK,
    EarlyScores,
    batch_values,
    call_judge,
    detect_refusal,
    has_no_claim,
    judgment_of,
    score_lines,
    score_one,
    textless_judgment,
)

__all__ = [
    "CHUNK",
    "CLEAN_WORKERS_MIN",
    "NO_CHECKABLE_CLAIM",
    "PAIRED_METRIC",
    "PARALLEL_MIN",
    "PROCESS_JUDGES",
    "TEXTLESS_CHUNK",
    "EarlyScores",
    "PairwiseRun",
    "available_cores",
    "batch_values",
    "call_judge",
    "detect_refusal",
    "has_no_claim",
    "judge_pairs",
    "judgment_of",
    "pair_scores",
    "score_all",
    "score_lines",
    "score_one",
    "textless_judgment",
    "use_processes",
]
