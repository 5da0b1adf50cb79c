"""What ``rag-gate run`` does around the pipeline's calls: the overhead of a run with a slow pipeline.

Scores are computed while the pipeline runs (:class:`gate.scoring.EarlyScores`) and must equal those computed
afterwards from the file; JSON rows are written without a NaN-cleaning copy unless they hold a NaN; a valid config
and judge are checked by the compiled schema alone. Timings are in benchmarks/perf.py (``--only sleep``).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import replace

import jsonschema
import pytest
from helpers import write_jsonl

import gate.produce
from gate.config import GatePolicy, load_config
from gate.errors import EvaluationError
from gate.golden import load_golden
from gate.jsonl import accepts, clean_nan, dumps
from gate.judges import JUDGES
from gate.models import Chunk, Prediction
from gate.pipeline import WorkerPool, run_python
from gate.predictions import align, load_predictions
from gate.produce import _early_workers, make_judge, run_side
from gate.scoring import EarlyScores, score_all, score_lines

NO_JUDGE = (
    "hit_rate@5", "recall@5", "precision@5", "mrr", "ndcg@5", "answer_f1", "exact_match", "refusal",
    "false_refusal", "error_rate", "latency_ms", "cost_usd",
)  # fmt: skip

PIPELINE = """
import time

def answer(case):
    time.sleep(0.005)  # 5 ms: slow enough to be scored while the next cases run (1 ms x concurrency 3)
    i = int(case["id"][1:])
    if i % 7 == 3:
        raise RuntimeError("index unavailable")
    if i % 5 == 4:
        return {"answer": "I don't know.", "retrieved": [], "cost_usd": 0.002}
    docs = [{"id": f"d{j}", "text": f"Item {j} is blue."} for j in (i + 1, i, i + 2)[: 1 + i % 3]]
    return {"answer": "It is blue." if i % 2 else f"Item {i} is blue.", "retrieved": docs, "tokens": 10 + i}
"""


@pytest.fixture
def project(tmp_path):
    cases = [
        {"id": f"q{i}", "question": f"What colour is item {i}?", "expected_doc_ids": [f"d{i}"],
         "reference_answers": ["blue", f"Item {i} is blue."]}
        for i in range(24)
    ] + [{"id": "q99", "question": "What will the weather be?", "out_of_domain": True}]  # fmt: skip
    write_jsonl(tmp_path / "golden.jsonl", cases)
    (tmp_path / "pipe.py").write_text(PIPELINE)
    (tmp_path / "rag-gate.yml").write_text(
        f"golden: golden.jsonl\npipeline: {{python: pipe:answer, concurrency: 3, retries: 0}}\n"
        f"metrics: [{', '.join(NO_JUDGE)}]\nrepeats: 2\n"
    )
    return tmp_path


def test_scores_made_while_the_pipeline_runs_equal_those_scored_from_the_file(project, monkeypatch):
    made = []

    class Recorded(EarlyScores):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(gate.produce, "EarlyScores", Recorded)
    config = load_config(project / "rag-gate.yml")
    out = run_side(config, project / "run")
    assert len(made) == 1 and len(made[0]) == 25 * 2 - 6  # every answered case was scored early; failures after
    golden = load_golden(config.golden)
    predictions = load_predictions(out / "predictions.jsonl")
    assert sum(p.error is not None for p in predictions) == 6  # q3, q10, q17, twice each: failures are scored too
    table = align(golden, predictions, out / "predictions.jsonl", 2)
    afterwards = score_all(golden, table, 2, config.policy, make_judge(config.policy))  # no early scores
    assert (out / "scores.jsonl").read_text() == score_lines(afterwards)
    assert len(afterwards) == 25 * 2 * len(NO_JUDGE)


def test_early_scores_are_reused_only_for_the_same_prediction(project):
    config = load_config(project / "rag-gate.yml")
    golden = load_golden(config.golden)
    policy = config.policy
    early = EarlyScores(golden, policy, make_judge(policy))
    assert early.enabled
    first = Prediction("q1", 0, "It is blue.", (Chunk("d1", "Item 1 is blue."),), latency_ms=12.5)
    other = Prediction("q2", 1, "I don't know.", latency_ms=3.0)
    early.add(first)
    early.add(other)
    early.add(Prediction("not-a-case", 0, "x"))  # not in the golden set: left to score_all, which refuses it
    assert len(early) == 2
    as_read = replace(first, line=7)  # the same row read back from predictions.jsonl
    scores = early.get(as_read)
    assert scores is not None and [s.metric for s in scores] == list(NO_JUDGE)
    assert early.lines(scores) == score_lines(scores)
    assert early.get(replace(first, answer="It is red.")) is None  # a different row is scored afresh
    assert early.get(replace(first, latency_ms=12.25)) is None
    assert early.get(replace(other, repeat=0)) is None
    # score_all takes the reused rows as they are, and computes the others: the same values either way
    table = {(c.id, r): Prediction(c.id, r, error="missing") for c in golden for r in range(2)}
    table[("q1", 0)] = as_read
    table[("q2", 1)] = replace(other, answer="Blue.")
    reused = score_all(golden, table, 2, policy, None, known=early)
    fresh = score_all(golden, table, 2, policy, None)
    assert score_lines(reused) == score_lines(fresh)
    hit = next(s for s in reused if s.id == "q1" and s.metric == "hit_rate@5")
    assert hit.value == 1.0 and any(s is scores[0] for s in reused)  # q1's rows are the early ones, not copies


def test_only_the_predictions_of_slow_calls_are_scored_early(tiny_golden):
    golden = load_golden(tiny_golden)
    early = EarlyScores(golden, GatePolicy(metrics=("answer_f1", "mrr")), None, min_latency_ms=8.0)
    early.add(Prediction("q1", 0, "France", latency_ms=7.9))  # fast: scored with the others afterwards
    early.add(Prediction("q2", 0, "1889", latency_ms=8.0))
    early.add(Prediction("q3", 0, "Shakespeare", warmup_ms=950.0))  # a worker's first call: its cold start counts
    early.add(Prediction("q4", 0, error="timeout after 1 s"))  # failed: no call time, scored afterwards
    assert len(early) == 2
    assert early.get(Prediction("q1", 0, "France", latency_ms=7.9)) is None
    assert [s.value for s in early.get(Prediction("q2", 0, "1889", latency_ms=8.0))] == [1.0, 0.0]


def test_nothing_is_scored_early_when_the_judge_grades_a_metric(tiny_golden):
    golden = load_golden(tiny_golden)
    policy = GatePolicy(metrics=("faithfulness", "answer_f1"))
    early = EarlyScores(golden, policy, make_judge(policy))
    assert not early.enabled  # judge calls stay in score_all, judge_concurrency at a time
    early.add(Prediction("q1", 0, "Paris is in France."))
    assert len(early) == 0 and early.get(Prediction("q1", 0, "Paris is in France.")) is None


@pytest.mark.parametrize(
    "record",
    [
        {"id": "q1", "value": 0.5, "detail": {"claims": [{"text": "é", "score": 1.0}]}},
        {"id": "q1", "value": math.nan, "error": "judge failed"},
        {"a": [1.0, math.inf, (2, -math.inf)], "b": {"c": {"d": math.nan}}, "e": "\u2028"},
        {"tuple": (1, 2), "none": None, "int": 3, "bool": True},
    ],
)
def test_dumps_writes_nan_as_null_and_the_rest_as_json_does(record):
    text = dumps(record)
    assert "\n" not in text and "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == json.loads(json.dumps(clean_nan(record)))
    assert text == json.dumps(clean_nan(record), ensure_ascii=False, separators=(",", ":"))


@pytest.mark.parametrize(
    ("spec", "valid"),
    [
        ({"name": "lexical"}, True),
        ({"name": "lexical", "support": 0.8, "cover": 1}, True),
        ({"name": "lexical", "support": 1.5}, False),
        ({"name": "lexical", "support": "high"}, False),
        ({"name": "lexical", "supprot": 0.8}, False),
        ({"name": "lexical", "support": True}, False),
        ({}, False),
    ],
)
def test_the_compiled_check_of_judge_options_agrees_with_jsonschema(spec, valid):
    schema = JUDGES["lexical"].schema
    assert jsonschema.Draft202012Validator(schema).is_valid(spec) == valid  # the oracle
    assert accepts(spec, schema) == valid


def test_a_valid_config_is_checked_without_jsonschema_and_an_invalid_one_is_explained(tmp_path, tiny_golden):
    import subprocess
    import sys

    (tmp_path / "ok.yml").write_text("golden: golden.jsonl\npipeline: {python: rag:answer}\njudge: lexical\n")
    (tmp_path / "bad.yml").write_text("golden: golden.jsonl\npipeline: {python: rag:answer, concurency: 2}\n")
    probe = (
        "import sys\nfrom gate.config import load_config\nfrom gate.produce import make_judge\n"
        "make_judge(load_config(sys.argv[1]).policy)\nprint('jsonschema' in sys.modules)\n"
    )
    found = subprocess.run([sys.executable, "-c", probe, "ok.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert found.stdout.strip() == "False", found.stderr
    with pytest.raises(Exception, match=r"bad.yml:2: pipeline.concurency: unknown key; did you mean `concurrency`"):
        load_config(tmp_path / "bad.yml")


# ------------------------------------------------------------------------------------ the python: adapter's loop
WORKER_PIPELINE = """
import os

def answer(case):
    size = int(case["question"])
    return {"answer": "x" * size, "retrieved": [{"id": "d1", "text": str(os.getpid())}]}
"""


def python_side(tmp_path, sizes, concurrency=2):
    (tmp_path / "rag.py").write_text(WORKER_PIPELINE)
    write_jsonl(tmp_path / "golden.jsonl", [{"id": f"c{i}", "question": str(n)} for i, n in enumerate(sizes)])
    (tmp_path / "rag-gate.yml").write_text(
        f"golden: golden.jsonl\npipeline: {{python: rag:answer, concurrency: {concurrency}, retries: 0}}\n"
    )
    return load_config(tmp_path / "rag-gate.yml")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not reaped, counts as alive: it must have been reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_loop_never_sleeps_between_cases_and_reads_replies_of_any_size(tmp_path, monkeypatch):
    """Each reply wakes the calling thread (poll(2) on the worker's output): no sleep, no polling interval."""
    sizes = [3, 0, 200_000, 5, 1_000_000, 1] * 5  # replies of one pipe read and of many (64 KiB at a time)
    config = python_side(tmp_path, sizes)
    cases = load_golden(config.golden)

    others = {t for t in threading.enumerate() if t is not threading.main_thread()}  # other tests' daemons
    sleep, slept = time.sleep, []

    def no_sleep(seconds):
        if threading.current_thread() in others:
            return sleep(seconds)
        slept.append(seconds)
        return None

    monkeypatch.setattr(time, "sleep", no_sleep)
    got = []
    run_python(config.pipeline, [(c, 0) for c in cases], got.append)
    monkeypatch.undo()
    assert slept == []
    assert [p.id for p in got] == [c.id for c in cases]
    assert [len(p.answer) for p in got] == sizes and all(p.error is None for p in got)
    assert len({p.retrieved[0].text for p in got}) == 2  # two worker processes served them all


def test_a_worker_pool_spawns_its_workers_at_once_and_leaves_none_behind(tmp_path):
    config = python_side(tmp_path, [1, 2, 3], concurrency=4)
    with WorkerPool(config.pipeline, size=3) as pool:  # three cases: three workers, not four
        pids = [w.pid for w in pool.workers]
        assert len(pids) == 3 and all(pid is not None and alive(pid) for pid in pids)  # before any call
        got = []
        run_python(config.pipeline, [(c, 0) for c in load_golden(config.golden)], got.append, pool=pool)
        assert [p.answer for p in got] == ["x", "xx", "xxx"]
        assert {int(p.retrieved[0].text) for p in got} <= set(pids)  # served by the workers spawned up front
    assert not any(alive(pid) for pid in pids)  # killed and reaped
    assert all(w.pid is None for w in pool.workers)


def test_a_fresh_run_spawns_its_workers_early_and_a_resumable_one_does_not(tmp_path):
    config = python_side(tmp_path, [1, 2])
    out = tmp_path / "run"
    out.mkdir()
    pool = _early_workers(config, out, 2, None)
    assert pool is not None and len(pool.workers) == 2
    pool.close()
    assert _early_workers(config, out, 0, None) is None  # nothing to run
    run_side(config, out)
    assert _early_workers(config, out, 2, None) is None  # a manifest: the run may resume, cases left unknown yet
    assert len(load_predictions(out / "predictions.jsonl")) == 2


def test_a_broken_pipeline_spawned_early_still_fails_the_run_with_its_error(tmp_path):
    config = python_side(tmp_path, [1, 2])
    (tmp_path / "rag.py").write_text("import no_such_module_here\n")
    with pytest.raises(EvaluationError, match="cannot import rag:answer"):
        run_side(config, tmp_path / "run")
