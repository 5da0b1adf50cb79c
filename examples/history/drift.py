"""Write a simulated main-branch history: 8 stable runs, then faithfulness drifts down 3 points per run.

Each step is within faithfulness's per-PR margin (0.05), so every PR passes its own gate; the trend alarm
(window 4, warning 5 %, critical 10 %) warns at run 10 and goes critical at run 16 (tests/history/test_history.py
computes these by hand).

    python examples/history/drift.py > examples/history/history.jsonl
    rag-gate history show --history examples/history/history.jsonl --out examples/history
"""

import hashlib
import json

STABLE = [0.90, 0.91, 0.89, 0.90, 0.91, 0.90, 0.89, 0.90]
DRIFT = [round(0.90 - 0.03 * k, 2) for k in range(1, 13)]
HIT_RATE = [0.80, 0.81, 0.80, 0.79, 0.80, 0.81, 0.80, 0.80, 0.81, 0.80] + [0.80, 0.79, 0.80, 0.81, 0.80] * 2

for day, (faithfulness, hit_rate) in enumerate(zip(STABLE + DRIFT, HIT_RATE, strict=True), start=1):
    sha = hashlib.sha1(f"commit {day}".encode()).hexdigest()
    entry = {
        "schema_version": 1,
        "timestamp": f"2025-03-{day:02d}T12:00:00+00:00",
        "sha": sha,
        "ref": "main",
        "golden_sha256": "9" * 64,
        "config_sha256": "c" * 64,
        "n_cases": 100,
        "repeats": 1,
        "gated": ["hit_rate@5", "faithfulness"],
        "metrics": {
            name: {"mean": mean, "sd": None, "p10": None, "share_below_0_5": None, "n": 100, "run_se": None}
            for name, mean in (("hit_rate@5", hit_rate), ("faithfulness", faithfulness))
        },
    }
    print(json.dumps(entry))
