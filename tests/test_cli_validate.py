"""`rag-gate validate` on a config checks the config and every file it names (issue 11)."""

from __future__ import annotations

from click.testing import CliRunner
from conftest import write_jsonl

from gate.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_valid_config_and_its_files(tmp_path, tiny_golden):
    write_jsonl(tmp_path / "preds.jsonl", [{"id": f"q{i}", "answer": "x"} for i in range(1, 5)])
    path = tmp_path / "rag-gate.yml"
    path.write_text("golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\nmetrics: [mrr, refusal]\n")
    result = invoke("validate", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        f"{path}: OK — golden set golden.jsonl: 4 cases (1 out-of-domain); pipeline {tmp_path / 'preds.jsonl'}; "
        "2 metrics (2 gated); judge lexical; repeats 1"
    )


def test_every_problem_of_the_config_is_printed_in_file_order(tmp_path, tiny_golden):
    path = tmp_path / "rag-gate.yml"
    path.write_text("golden: golden.jsonl\npipline: {python: 'rag:answer'}\nrepeats: 1000000000\njudge: lexial\n")
    result = invoke("validate", path)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"{path}:2: pipline: unknown key; did you mean `pipeline`?",
        f"{path}:3: repeats: 1000000000 is greater than the maximum of 100 (the largest value rag-gate accepts)",
        f"{path}:4: judge: unknown judge 'lexial' (known: lexical, llm, nli, ragas); did you mean `lexical`?",
        f"rag-gate: error: {path}: 3 problem(s)",
    ]


def test_the_golden_set_and_predictions_a_config_names_are_validated(tmp_path):
    golden = write_jsonl(tmp_path / "golden.jsonl", [{"id": "a", "question": "x"}, {"id": "a", "question": "y"}])
    preds = write_jsonl(tmp_path / "preds.jsonl", [{"id": "a", "answer": "x"}, {"id": "zz", "answer": "y"}])
    path = tmp_path / "rag-gate.yml"
    path.write_text("golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\n")
    result = invoke("validate", path)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"{golden}:2: id: duplicate id 'a' (first on line 1)",
        f"{preds}:2: id: 'zz' is not in the golden set",
        f"rag-gate: error: {path}: 2 problem(s)",
    ]
