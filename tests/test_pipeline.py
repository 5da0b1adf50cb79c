import textwrap

import pytest
from conftest import write_jsonl

from gate.config import load_config
from gate.errors import EvaluationError
from gate.golden import load_golden
from gate.pipeline import run_command, run_python

PIPELINE = """
import os, time
from pathlib import Path

CALLS = Path("calls.log")

def answer(case, *, suffix="!"):
    with CALLS.open("a") as f:
        f.write(case["id"] + "\\n")
    print("noise on stdout must not break the protocol")
    if case["id"] == "boom":
        raise ValueError("kaput")
    if case["id"] == "slow":
        time.sleep(5)
    if case["id"] == "crash":
        os._exit(7)
    if case["id"] == "flaky" and CALLS.read_text().count("flaky") == 1:
        raise RuntimeError("first call fails")
    return {"answer": case["question"] + suffix, "retrieved": [{"id": "d1", "text": "x", "score": 1.5}],
            "cost_usd": 0.001}
"""


@pytest.fixture
def side(tmp_path):
    (tmp_path / "rag.py").write_text(PIPELINE)
    ids = ["ok1", "boom", "slow", "crash", "flaky", "ok2"]
    write_jsonl(tmp_path / "golden.jsonl", [{"id": i, "question": f"q-{i}"} for i in ids])
    (tmp_path / "rag-gate.yml").write_text(
        textwrap.dedent("""
        golden: golden.jsonl
        pipeline:
          python: rag:answer
          options: {suffix: "?"}
          concurrency: 2
          timeout_s: 1
          retries: 1
    """)
    )
    return tmp_path


def test_python_adapter_isolates_failures(side):
    config = load_config(side / "rag-gate.yml")
    cases = load_golden(config.golden)
    got = {}
    run_python(config.pipeline, [(c, 0) for c in cases], lambda p: got.setdefault(p.id, p))
    assert got["ok1"].answer == "q-ok1?" and got["ok1"].error is None
    assert got["ok1"].retrieved[0].score == 1.5 and got["ok1"].cost_usd == 0.001
    assert got["ok1"].latency_ms is not None and got["ok1"].latency_ms >= 0
    assert got["boom"].error.startswith("ValueError: kaput (rag.py:")
    assert got["slow"].error == "timeout after 1 s"
    assert got["crash"].error == "pipeline process exited with code 7"
    assert got["flaky"].error is None and got["flaky"].answer == "q-flaky?"  # retried once
    calls = (side / "calls.log").read_text().split()
    assert calls.count("boom") == 2 and calls.count("flaky") == 2 and calls.count("ok2") == 1


def test_python_adapter_reports_import_errors(side):
    (side / "rag.py").write_text("import no_such_module_here\n")
    config = load_config(side / "rag-gate.yml")
    with pytest.raises(EvaluationError, match="cannot import rag:answer"):
        run_python(config.pipeline, [(load_golden(config.golden)[0], 0)], lambda p: None)


def test_command_adapter(tmp_path):
    write_jsonl(tmp_path / "golden.jsonl", [{"id": "a", "question": "q"}])
    (tmp_path / "make.py").write_text(
        textwrap.dedent("""
        import json, sys
        golden, out, repeat = sys.argv[1:]
        with open(out, "w") as f:
            for line in open(golden):
                case = json.loads(line)
                f.write(json.dumps({"id": case["id"], "answer": "r" + repeat, "retrieved": []}) + "\\n")
    """)
    )
    (tmp_path / "rag-gate.yml").write_text(
        "golden: golden.jsonl\npipeline:\n  command: python make.py {golden} {predictions} {repeat} && echo '{x}'\n"
    )
    config = load_config(tmp_path / "rag-gate.yml")
    preds = list(run_command(config.pipeline, config.golden, [0, 1], 1, tmp_path))
    assert [(p.repeat, p.answer) for p in preds] == [(0, "r0"), (1, "r1")]
    assert all(p.latency_ms is not None for p in preds)
    assert (tmp_path / "command-output-1.jsonl").read_text().count('"answer": "r1"') == 1  # kept for inspection
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline:\n  command: echo '{oops' > {predictions}\n")
    config = load_config(tmp_path / "rag-gate.yml")
    with pytest.raises(
        EvaluationError, match="command wrote malformed predictions: .*command-output-0.jsonl:1: invalid JSON"
    ):
        list(run_command(config.pipeline, config.golden, [0], 1, tmp_path))
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline:\n  command: exit 4\n")
    config = load_config(tmp_path / "rag-gate.yml")
    with pytest.raises(EvaluationError, match="exited with 4"):
        list(run_command(config.pipeline, config.golden, [0], 1, tmp_path))
