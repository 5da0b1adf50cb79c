"""Reading many predictions back from disk: one read per list, and every row right however many.

``PredictionTable`` keeps the rows it read in a bounded cache (``CACHE``); a read used to hand back a placeholder
(no answer, no latency) for a row that the same read had pushed out of the cache, so the report's per-case
latency of a listed case could average fewer repeats than it had.
"""

from __future__ import annotations

import json

from gate.golden import load_golden
from gate.predictions import PredictionTable, scan_predictions
from gate.runs import Side


def _files(tmp_path, n: int, repeats: int):
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"id": f"q{i}", "question": "?", "expected_doc_ids": []}) + "\n"
                              for i in range(n)))  # fmt: skip
    rows = []
    for r in range(repeats):
        for i in range(n):
            row = {"id": f"q{i}", "repeat": r, "answer": f"a{i}.{r}", "latency_ms": 100.0 * i + r}
            if i % 5 == 4 and r == 1:
                row = {"id": f"q{i}", "repeat": r, "error": "boom", "latency_ms": 1.0}
            rows.append(json.dumps(row) + "\n")
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(rows))
    cases = load_golden(golden)
    return cases, scan_predictions(predictions).index(cases, repeats)


def test_a_read_returns_every_row_even_when_it_overflows_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(PredictionTable, "CACHE", 4)
    _, table = _files(tmp_path, 10, 3)
    table.read([("q0", 0), ("q1", 0), ("q2", 0)])  # these three are now the oldest in the cache
    got = table.read([(f"q{i}", r) for i in range(3) for r in range(3)])  # reading 6 more pushes them out
    assert [(p.answer, p.latency_ms) for p in got] == [(f"a{i}.{r}", 100.0 * i + r) for i in range(3) for r in range(3)]
    assert len(table._cache) == 4


def test_valid_many_equals_valid_case_by_case(tmp_path, monkeypatch):
    monkeypatch.setattr(PredictionTable, "CACHE", 8)
    cases, table = _files(tmp_path, 20, 3)
    side = Side("head", cases, table, 3, [], {})
    ids = [case.id for case in cases]
    many = side.valid_many(ids)
    assert [len(many[i]) for i in ("q3", "q4")] == [3, 2]  # q4's repeat 1 failed
    assert many["q4"][1].latency_ms == 402.0
    for case_id in ids:
        assert [(p.repeat, p.answer, p.latency_ms) for p in many[case_id]] == [
            (p.repeat, p.answer, p.latency_ms) for p in side.valid(case_id)
        ]
