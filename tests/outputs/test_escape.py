"""Values a pipeline or a file can hold that once crashed the gate after its work was done (exit 3, nothing written).

Kinds: numpy numbers and non-JSON objects returned by a pipeline; lone surrogates (valid JSON escapes, not Unicode
characters) in answers; integers beyond any float in run files; a manifest's repeats that is not a small integer.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner
from helpers import write_jsonl

from gate.cli import main
from gate.config import load_config
from gate.golden import load_golden
from gate.pipeline import run_python

PIPELINE = """
import numpy as np

def answer(case):
    kind = case["id"]
    if kind == "numpy":
        return {"answer": "Paris.", "retrieved": [{"id": "d1", "text": "Paris.", "score": np.float32(0.5)}],
                "tokens": np.int64(3), "cost_usd": np.float64(0.25)}
    if kind == "bytes":
        return {"answer": b"Paris"}
    if kind == "set":
        return {"answer": "Paris.", "retrieved": {1, 2}}
    if kind == "surrogate":
        return {"answer": "Paris\\ud800 is the capital.", "retrieved": [{"id": "d1", "text": "Paris."}]}
    return {"answer": "Paris.", "retrieved": [{"id": "d1", "text": "Paris."}]}
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "rag.py").write_text(PIPELINE)
    ids = ["numpy", "bytes", "set", "surrogate", "plain"]
    write_jsonl(tmp_path / "golden.jsonl", [{"id": i, "question": f"Capital {i}?", "expected_doc_ids": ["d1"],
                                              "reference_answers": ["Paris"]} for i in ids])  # fmt: skip
    (tmp_path / "rag-gate.yml").write_text(textwrap.dedent("""
        golden: golden.jsonl
        pipeline: {python: rag:answer, retries: 0}
        metrics: [hit_rate@5, answer_f1, faithfulness]
    """))  # fmt: skip
    return tmp_path


def test_numpy_numbers_are_numbers_and_other_objects_are_bad_return_values(project):
    config = load_config(project / "rag-gate.yml")
    got = {}
    run_python(config.pipeline, [(c, 0) for c in load_golden(config.golden)], lambda p: got.setdefault(p.id, p))
    assert got["numpy"].error is None
    assert (got["numpy"].retrieved[0].score, got["numpy"].tokens, got["numpy"].cost_usd) == (0.5, 3, 0.25)
    assert got["bytes"].error == "bad return value: bytes is not JSON (return str, numbers, lists and dicts)"
    assert got["set"].error == "bad return value: set is not JSON (return str, numbers, lists and dicts)"
    assert got["surrogate"].error is None and got["surrogate"].answer == "Paris\ud800 is the capital."


def test_a_lone_surrogate_in_an_answer_is_written_and_compared(project):
    runner = CliRunner()
    for side in ("base", "head"):
        result = runner.invoke(main, ["run", "--config", str(project / "rag-gate.yml"), "--out", str(project / side),
                                      "--no-progress"])  # fmt: skip
        assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (project / "head" / "predictions.jsonl").read_text("utf-8").splitlines()]
    assert {r["id"]: r.get("answer") for r in rows}["surrogate"] == "Paris\ud800 is the capital."  # \u escape
    result = runner.invoke(main, ["compare", str(project / "base"), str(project / "head"), "--out",
                                  str(project / "report")])  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    assert json.loads((project / "report" / "report.json").read_text("utf-8"))["n_cases"] == 5
    assert (project / "report" / "comment.md").read_text("utf-8").startswith("<!--")


@pytest.mark.parametrize("field, bound", [("latency_ms", "at most 86400000"), ("cost_usd", "at least 0")])
def test_an_integer_beyond_any_float_is_bad_input_naming_the_field(tmp_path, field, bound):
    write_jsonl(tmp_path / "golden.jsonl", [{"id": "q1", "question": "Q?"}])
    value = "1" + "0" * 400 if bound.startswith("at most") else "-1" + "0" * 400
    for side in ("base", "head"):
        (tmp_path / f"{side}.jsonl").write_text(f'{{"id": "q1", "answer": "a", "{field}": {value}}}\n')
    args = ["compare", "--golden", tmp_path / "golden.jsonl", tmp_path / "base.jsonl", tmp_path / "head.jsonl"]
    result = CliRunner().invoke(main, [*map(str, args), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    digits = len(value.lstrip("-"))
    assert f"base.jsonl:1: {field}: an integer of {digits} digits is beyond ±9007199254740991" in result.output


@pytest.mark.parametrize("repeats, code", [("1.0", 0), ("1" + "0" * 400, 2), ("101", 2)])
def test_a_manifest_s_repeats_is_a_small_integer(project, repeats, code):
    import shutil

    runner = CliRunner()
    result = runner.invoke(main, ["run", "--config", str(project / "rag-gate.yml"), "--out", str(project / "base"),
                                  "--no-progress"])  # fmt: skip
    assert result.exit_code == 0, result.output
    shutil.copytree(project / "base", project / "head")
    manifest = project / "head" / "manifest.json"
    text = manifest.read_text("utf-8")
    manifest.write_text(text.replace('"repeats": 1,', f'"repeats": {repeats},', 1), "utf-8")
    assert manifest.read_text("utf-8") != text
    result = runner.invoke(main, ["compare", str(project / "base"), str(project / "head"), "--out",
                                  str(project / "report")])  # fmt: skip
    assert result.exit_code == code, result.output
    if code == 2:
        expected = (
            "101 is greater than the maximum of 100" if repeats == "101" else "an integer of 401 digits is beyond ±90"
        )
        assert f"head/manifest.json: repeats: {expected}" in result.output
