"""`rag-gate validate` on a config checks the config and every file it names."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import write_jsonl
from scipy import stats

from gate.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_valid_config_and_its_files(tmp_path, tiny_golden):
    write_jsonl(tmp_path / "preds.jsonl", [{"id": f"q{i}", "answer": "x"} for i in range(1, 5)])
    path = tmp_path / "rag-gate.yml"
    path.write_text("golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\nmetrics: [mrr, refusal]\n")
    result = invoke("validate", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        f"{path}: OK — golden set golden.jsonl: 4 cases (1 out-of-domain); pipeline {tmp_path / 'preds.jsonl'}; "
        "2 metrics (2 gated); judge lexical; repeats 1"
    )
    assert result.stdout.splitlines()[1].endswith(
        "mrr none: too few cases (3 cases) · refusal none: too few cases (1 out-of-domain cases)"
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


def test_smallest_holm_p_is_the_exact_sign_test_times_the_family():
    """Oracle: scipy's exact binomial test of n successes in n trials (every case worse) is 2^-n."""
    from scipy.stats import binomtest

    from gate.stats.power import smallest_holm_p

    for n, k in ((4, 7), (5, 1), (8, 7), (1, 3)):
        assert smallest_holm_p(n, k) == min(1.0, k * binomtest(n, n, 0.5, alternative="greater").pvalue)


def _golden(tmp_path, n):
    tmp_path.mkdir()
    rows = [{"id": f"q{i}", "question": f"Q{i}?", "expected_doc_ids": [f"d{i}"]} for i in range(n)]
    write_jsonl(tmp_path / "golden.jsonl", rows)
    write_jsonl(
        tmp_path / "base.jsonl",
        [{"id": r["id"], "answer": "x", "retrieved": [{"id": f"d{i}"}]} for i, r in enumerate(rows)],
    )
    write_jsonl(tmp_path / "head.jsonl", [{"id": r["id"], "answer": "x", "retrieved": [{"id": "other"}]} for r in rows])
    path = tmp_path / "rag-gate.yml"
    path.write_text("golden: golden.jsonl\npipeline: {predictions: head.jsonl}\nmetrics: [hit_rate@5]\n")
    return path


def test_validate_warns_when_no_case_drop_could_fail_the_gate_and_compare_agrees(tmp_path):
    """One gated metric at α = 0.05 needs n ≥ 5 cases (2^-5 = 0.031): with 4 every case can get worse and the gate
    still cannot fail (validate says so); with 5 it fails."""
    for n, warned, exit_code in ((4, True, 0), (5, False, 1)):
        path = _golden(tmp_path / str(n), n)
        result = invoke("validate", path)
        assert result.exit_code == 0 and ("too few cases for 1 of 1 gated metrics" in result.stderr) == warned
        if warned:
            assert "hit_rate@5 (4 in-domain case(s), needs ≥ 5)" in result.stderr
        args = ("--config", path, "--golden", path.parent / "golden.jsonl", path.parent / "base.jsonl")
        compared = invoke("compare", *args, path.parent / "head.jsonl", "--out", path.parent / "r")
        assert compared.exit_code == exit_code, compared.output


def test_the_golden_set_is_named_as_the_config_names_it(tmp_path):
    (tmp_path / "eval").mkdir()
    write_jsonl(tmp_path / "eval" / "golden.jsonl", [{"id": "q1", "question": "Q?", "expected_doc_ids": ["d1"]}])
    write_jsonl(tmp_path / "preds.jsonl", [{"id": "q1", "answer": "x"}])
    path = tmp_path / "rag-gate.yml"
    path.write_text("golden: eval/golden.jsonl\npipeline: {predictions: preds.jsonl}\nmetrics: [mrr]\n")
    result = invoke("validate", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{path}: OK — golden set eval/golden.jsonl: 1 cases (0 out-of-domain)")


def _best_case_mde(n: int, level: float, margin: float) -> float:
    """Oracle (scipy.stats.binom): a PR breaks each case with probability δ, nothing moves otherwise; the gate fails
    when b broken cases make exact McNemar reject (2^-b ≤ level) and b/n ≥ m. The smallest δ on a 1e-5 grid with
    P(Bin(n, δ) ≥ max(b*, ⌈m·n⌉)) ≥ 0.8."""
    b_star = next(b for b in range(1, 200) if 0.5**b <= level)
    needed = max(b_star, math.ceil(margin * n - 1e-9))
    grid = np.arange(1, 100_001) / 100_000
    return float(grid[np.argmax(stats.binom.sf(needed - 1, n, grid) >= 0.8)])


def test_validate_prints_each_gated_metrics_minimum_detectable_worsening(tmp_path):
    """The issue's newcomer set, 46 in-domain and 12 out-of-domain cases, gate [hit_rate@5, refusal], repeats 3: the
    MDE at best (no noise, cases broken at random) at Holm's first-step level 0.05/3, against the binomial oracle;
    latency is named without a value (run-to-run noise decides)."""
    rows = [{"id": f"q{i}", "question": f"Q{i}?", "expected_doc_ids": [f"d{i}"]} for i in range(46)]
    rows += [{"id": f"o{i}", "question": f"O{i}?", "out_of_domain": True} for i in range(12)]
    write_jsonl(tmp_path / "golden.jsonl", rows)
    write_jsonl(tmp_path / "preds.jsonl", [{"id": r["id"], "answer": "x"} for r in rows])
    path = tmp_path / "rag-gate.yml"
    path.write_text(
        "golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\nmetrics: [hit_rate@5, refusal, latency_ms]\n"
        "gate: [hit_rate@5, refusal, latency_ms]\nrepeats: 3\n"
    )
    result = invoke("validate", path)
    assert result.exit_code == 0, result.output
    line = result.stdout.splitlines()[1]
    assert line.startswith("minimum detectable worsening (80 % power, repeats 3;")
    found = dict(re.findall(r"(hit_rate@5|refusal) (\d\.\d{3}) \(", line))
    assert float(found["hit_rate@5"]) == pytest.approx(_best_case_mde(46, 0.05 / 3, 0.03), abs=6e-4)
    assert float(found["refusal"]) == pytest.approx(_best_case_mde(12, 0.05 / 3, 0.03), abs=6e-4)
    assert "(46 cases)" in line and "(12 out-of-domain cases)" in line
    assert "latency_ms – (run-to-run noise decides)" in line
    assert float(found["refusal"]) > 0.5  # 12 cases: only a PR that breaks most of them is caught


# ------------------------------------------------------------------ ids that print as they are; questions with words
HIDDEN = "control, bidirectional or invisible format characters"


@pytest.mark.parametrize(
    "row, field, escapes",
    [
        ({"id": "q1\u202etxt"}, "id", r"\u202e"),  # right-to-left override: would print "q1txt" reversed
        ({"id": "q\x01"}, "id", r"\x01"),
        ({"id": "q1\u200b"}, "id", r"\u200b"),  # zero-width space: two ids that print alike
        ({"id": "q\t1\n"}, "id", r"\t, \n"),
        ({"expected_doc_ids": ["d1", "doc\u2066-2"]}, "expected_doc_ids.1", r"\u2066"),
    ],
)
def test_ids_with_characters_that_do_not_show_are_refused_by_validate_and_run(tmp_path, row, field, escapes):
    rows = [{"id": "q0", "question": "ok"}, {"id": "q1", "question": "Q?", **row}]
    golden = write_jsonl(tmp_path / "golden.jsonl", rows)
    expected = f"{golden}:2: {field}: holds characters that do not show ({escapes}: {HIDDEN})"
    result = invoke("validate", golden)
    assert result.exit_code == 2 and result.stderr.splitlines()[0] == expected, result.output
    (tmp_path / "rag.py").write_text("def answer(case, **kw):\n    return {'answer': 'x'}\n")
    config = tmp_path / "rag-gate.yml"
    config.write_text("golden: golden.jsonl\npipeline: {python: 'rag:answer'}\n")
    result = invoke("run", "--config", config, "--out", tmp_path / "run")
    assert result.exit_code == 2 and result.stderr.strip() == f"rag-gate: error: {expected}", result.output


def test_a_predictions_file_id_with_hidden_characters_is_refused(tmp_path, tiny_golden):
    write_jsonl(tmp_path / "preds.jsonl", [{"id": "q1", "answer": "x"}, {"id": "q2\u202e", "answer": "y"}])
    path = tmp_path / "rag-gate.yml"
    path.write_text("golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\n")
    result = invoke("validate", path)
    assert result.exit_code == 2
    expected = f"{tmp_path / 'preds.jsonl'}:2: id: holds characters that do not show (\\u202e: {HIDDEN})"
    assert result.stderr.splitlines()[0] == expected


@pytest.mark.parametrize(
    "row, field",
    [({"question": " \t\n "}, "question"), ({"id": "  "}, "id"), ({"required_points": ["a", " "]}, "required_points.1"),
     ({"form": {"rules": "\n"}}, "form.rules")],
)  # fmt: skip
def test_required_text_of_whitespace_only_is_refused(tmp_path, row, field):
    rows = [{"id": "q0", "question": "ok"}, {"id": "q1", "question": "Q?", **row}]
    golden = write_jsonl(tmp_path / "golden.jsonl", rows)
    result = invoke("validate", golden)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == f"{golden}:2: {field}: must not be empty (it holds only whitespace)"


def test_validate_warns_that_out_of_domain_cases_go_unchecked_without_refusal(tmp_path, tiny_golden):
    write_jsonl(tmp_path / "preds.jsonl", [{"id": f"q{i}", "answer": "x"} for i in range(1, 5)])
    path = tmp_path / "rag-gate.yml"
    path.write_text("golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\nmetrics: [mrr]\n")
    result = invoke("validate", path)
    assert result.exit_code == 0, result.output
    assert f"{path}: warning: 1 out-of-domain case(s) are not scored for refusals: `refusal` is not in metrics" in (
        result.stderr
    )
    path.write_text("golden: golden.jsonl\npipeline: {predictions: preds.jsonl}\nmetrics: [mrr, refusal]\n")
    assert "not scored for refusals" not in invoke("validate", path).stderr


@pytest.mark.parametrize("text, escapes", [("\u200b\u200b", r"\u200b"), (" \u2060\ufeff ", r"\u2060, \ufeff")])
def test_a_question_of_characters_that_do_not_show_is_refused(tmp_path, text, escapes):
    golden = write_jsonl(tmp_path / "golden.jsonl", [{"id": "q0", "question": "ok"}, {"id": "q1", "question": text}])
    result = invoke("validate", golden)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        f"{golden}:2: question: must not be empty (it holds only characters that do not show: {escapes})"
    )
