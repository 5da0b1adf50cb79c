"""Per-case operational metrics, read from the prediction record: error rate, latency, cost.

Unlike every other metric, these score a failed prediction too (a call that failed was still waited for and paid
for; ``error_rate`` counts the failures themselves).
"""

from __future__ import annotations

import math

from gate.metrics.context import ScoreContext


def latency_ms(ctx: ScoreContext) -> float:
    """Wall-clock latency of the case in milliseconds (≥ 0), as recorded in the prediction (a failed one's too).

    Returns:
        Milliseconds; NaN when unknown.

    Source: the prediction contract (DESIGN §2, ``latency_ms``), measured by the pipeline adapter.

    """
    value = ctx.prediction.latency_ms
    return math.nan if value is None else float(value)


def cost_usd(ctx: ScoreContext) -> float:
    """Cost of the case in US dollars (≥ 0), as reported by the pipeline (a failed call's too: it was paid for).

    Returns:
        US dollars; NaN when unknown.

    Source: the prediction contract (DESIGN §2, ``cost_usd``), reported by the pipeline.

    """
    value = ctx.prediction.cost_usd
    return math.nan if value is None else float(value)


def error_rate(ctx: ScoreContext) -> float:
    """Score a system error: 1 when the pipeline under test failed on the case, else 0.

    Failed means it raised, timed out, returned a malformed result or no row.

    Returns:
        0.0 or 1.0 (never NaN: every case × repeat has a prediction row, a failed one carries ``error``).

    Source: the prediction contract (DESIGN §2: a failed case is a row with ``error``); DESIGN §8 (a pipeline that
        breaks on a case is the system failing).

    """
    return 1.0 if ctx.prediction.error is not None else 0.0
