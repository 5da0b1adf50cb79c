"""rag-gate: a regression gate for RAG systems on pull requests.

The public API is imported lazily (``import gate`` stays cheap, so ``rag-gate --help`` is fast)::

    from gate import load_config, run_side, compare_runs, render, Output

    comparison = compare_runs("runs/base", "runs/head", "out")
    print(render(comparison, Output.COMMENT))

Two loaded sides (:class:`gate.runs.Side`) are compared by ``gate.compare.compare``; no export shares the name of a
subpackage (importing ``gate.compare`` would replace it with the package).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "load_config": "gate.config",
    "load_golden": "gate.golden",
    "load_predictions": "gate.predictions",
    "run_side": "gate.produce",
    "compare_runs": "gate.sides",
    "merge_runs": "gate.shards",
    "Comparison": "gate.comparison",
    "load_report": "gate.comparison",
    "Output": "gate.outputs",
    "render": "gate.outputs",
    "METRICS": "gate.metrics",
    "resolve": "gate.metrics",
    "get_judge": "gate.judges",
    "read_history": "gate.history.entries",
    "entry_from_run": "gate.history.entries",
    "trend_report": "gate.history.trend",
    "analyze_metrics": "gate.stats",
    "analyze_cases": "gate.stats",
    "gate_decision": "gate.stats",
    "GateError": "gate.errors",
    "InputError": "gate.errors",
    "EvaluationError": "gate.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'gate' has no attribute {name!r}")
