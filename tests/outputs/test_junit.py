"""`--junit FILE`: JUnit XML that Jenkins' and Ant's schemas accept, one test case per gated metric, regressed case and
new out-of-domain failure, failures carrying the reason and the case's golden file and line, every suite and case
timed. Comparisons are made by the real code from scored sides; the documents are read back with junitparser."""

import dataclasses
import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import write_jsonl
from junit_check import assert_valid_junit, jenkins_schema

from gate.cli import main
from gate.compare import compare
from gate.config import GatePolicy
from gate.judges import get_judge
from gate.models import Chunk, GoldenCase, Prediction
from gate.outputs import Output, RenderOptions, render
from gate.outputs.junit import render_junit
from gate.runs import Side
from gate.scoring import score_all
from gate.stats.decision import ErrorBudgetUse

POLICY = GatePolicy(
    metrics=("hit_rate@1", "answer_f1", "refusal", "recall@1"), gated=("hit_rate@1", "answer_f1", "refusal")
)
HOSTILE = "What\x00 is <b>&amp; \x1b[31m ]]> this?"


def _side(label, golden, answers):
    table = {
        (c.id, 0): Prediction(
            id=c.id,
            answer=answers[c.id][0],
            retrieved=(Chunk(answers[c.id][1], "text"),),
            latency_ms=100.0 * (i + 1) if label == "head" else 5.0,
        )
        for i, c in enumerate(golden)
    }
    return Side(label, golden, table, 1, score_all(golden, table, 1, POLICY, get_judge(POLICY.judge)), {})


@pytest.fixture(scope="module")
def comparison():
    golden = [
        GoldenCase(f"q{i}", HOSTILE if i == 0 else f"Q{i}?", (f"d{i}",), (f"answer {i}",), line=i + 1)
        for i in range(30)
    ] + [GoldenCase("ood", "Unanswerable?", (), (), out_of_domain=True, line=31)]
    base = {f"q{i}": (f"answer {i}", f"d{i}") for i in range(30)} | {"ood": ("I don't have that information.", "x")}
    head = base | {f"q{i}": (f"answer {i}", "elsewhere") for i in range(8)} | {"ood": ("Made up.", "x")}
    return compare(_side("base", golden, base), _side("head", golden, head), POLICY)


def test_junit_validates_against_jenkins_schema_and_says_what_failed(comparison):
    text = render(comparison, Output.JUNIT, RenderOptions(golden_file="eval/golden.jsonl"))
    root = assert_valid_junit(text)
    metrics, cases = root.findall("testsuite")
    assert [c.get("name") for c in metrics.findall("testcase")] == [m.name for m in comparison.gated]
    hit = next(m for m in comparison.metrics if m.name == "hit_rate@1")
    failure = metrics.find("testcase[@name='hit_rate@1']/failure")
    assert hit.status == "fail" and failure.get("message") == hit.reason and failure.get("type") == "regression"
    f1 = metrics.find("testcase[@name='answer_f1']")
    assert f1.find("failure") is None and f1.find("skipped") is None  # passed: answers unchanged
    regressed = {c.get("name"): c for c in cases.findall("testcase[@classname='rag-gate.cases']")}
    assert set(regressed) == {c.id for c in comparison.regressed_cases} == {f"q{i}" for i in range(8)}
    q3 = regressed["q3"].find("failure")
    assert q3.get("message") == "regressed (retrieval): Hit rate@1: 1.000 → 0.000, worse (single observation)"
    assert q3.text.startswith("golden case: eval/golden.jsonl:4\nquestion: Q3?")
    assert "\x00" not in regressed["q0"].find("failure").text  # what XML cannot hold is dropped, the rest is kept
    assert "<b>&amp;" in regressed["q0"].find("failure").text
    ood = cases.find("testcase[@classname='rag-gate.out-of-domain']")
    assert ood.get("name") == "ood" and ood.find("failure").get("type") == "out-of-domain"
    # the counts are those of the elements: 1 failed metric, 8 regressed cases, 1 new out-of-domain failure
    assert len(root.findall(".//failure")) == 1 + 8 + 1 and len(root.findall(".//testcase")) == 3 + 9
    assert metrics.get("failures") == "1" and cases.get("failures") == "9"
    assert not root.attrib  # Ant's schema allows no attribute on <testsuites>


def test_inconclusive_is_skipped_and_a_broken_budget_is_an_error(comparison):
    rows = tuple(
        dataclasses.replace(m, status="inconclusive", reason="not enough evidence") if m.name == "answer_f1" else m
        for m in comparison.metrics
    )
    use = ErrorBudgetUse("refusal", "head", 5, 31, 5 / 31, ("5× judge timeout",))
    changed = dataclasses.replace(comparison, metrics=rows, error_budget_use=(use,), verdict="error")
    text = render(changed, Output.JUNIT)
    root = assert_valid_junit(text)
    skipped = root.find(".//testcase[@name='answer_f1']/skipped").text
    assert skipped.startswith("inconclusive: not enough evidence\nAnswer F1: base 1.000, head 1.000")
    error = root.find(".//testcase[@name='refusal']/error")
    assert error.get("message") == "5 of 31 evaluations failed on head (16.1%)"
    assert root.find("testsuite[@name='rag-gate.metrics']").get("errors") == "1"
    assert root.find("testsuite[@name='rag-gate.metrics']").get("skipped") == "1"


def test_compare_writes_junit(tmp_path):
    golden = [{"id": f"q{i}", "question": f"Q{i}?", "expected_doc_ids": [f"d{i}"]} for i in range(20)]
    write_jsonl(tmp_path / "golden.jsonl", golden)
    base = [{"id": f"q{i}", "answer": "a", "retrieved": [{"id": f"d{i}"}], "latency_ms": 1.0} for i in range(20)]
    head = [{"id": f"q{i}", "answer": "a", "retrieved": [{"id": "x" if i < 10 else f"d{i}"}]} for i in range(20)]
    write_jsonl(tmp_path / "base.jsonl", base)
    write_jsonl(tmp_path / "head.jsonl", head)
    sides = [str(tmp_path / "base.jsonl"), str(tmp_path / "head.jsonl")]
    result = CliRunner().invoke(
        main,
        ["compare", "--golden", str(tmp_path / "golden.jsonl"), *sides, "--out", str(tmp_path / "out"),
         "--junit", str(tmp_path / "junit.xml")],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    text = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    jenkins_schema().validate(text)
    root = ET.fromstring(text)
    assert len(root.findall(".//testcase[@classname='rag-gate.cases']")) == 10
    assert "golden case: " in root.find(".//testcase[@classname='rag-gate.cases']/failure").text
    # piped, compare prints the markdown comment; --format text prints plain text (what a terminal gets)
    assert result.stdout.startswith("<!-- rag-gate -->")
    args = ["compare", "--golden", str(tmp_path / "golden.jsonl"), *sides, "--out", str(tmp_path / "out")]
    text = CliRunner().invoke(main, [*args, "--format", "text"])
    assert text.exit_code == 1 and text.stdout.startswith("rag-gate: FAIL\n") and "\\_" not in text.stdout


def test_every_suite_and_case_is_timed_a_case_by_heads_latency(comparison):
    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    text = render_junit(comparison, "eval/golden.jsonl", timestamp=when, hostname="ci-runner-7")
    root = assert_valid_junit(text)
    metrics, cases = root.findall("testsuite")
    # a case's time is head's latency on it (q3 is golden line 4: 400 ms); the metrics are not timed one by one
    assert cases.find("testcase[@name='q3']").get("time") == "0.400"
    assert cases.find("testcase[@name='ood']").get("time") == "3.100"
    assert {c.get("time") for c in metrics.findall("testcase")} == {"0.000"}
    assert cases.get("time") == f"{sum(100 * (i + 1) for i in range(8)) / 1000 + 3.1:.3f}" == "6.700"
    for index, suite in enumerate((metrics, cases)):
        assert suite.get("timestamp") == "2024-05-06T07:08:09" and suite.get("hostname") == "ci-runner-7"
        assert suite.get("id") == str(index) and suite.get("package") == suite.get("name")
    # the figures of every gated metric, passed ones included, are in the suite's output
    lines = metrics.find("system-out").text.splitlines()
    assert lines[0] == "rag-gate: fail" and [line.split(":")[0] for line in lines[1:]] == [
        m.label for m in comparison.gated
    ]
    # the time of a case without a measured latency is 0, never NaN
    unmeasured = dataclasses.replace(
        comparison, regressed_cases=tuple(dataclasses.replace(c, latency_ms=None) for c in comparison.regressed_cases)
    )
    assert_valid_junit(render_junit(unmeasured))
    assert ET.fromstring(render_junit(unmeasured)).find(".//testcase[@name='q3']").get("time") == "0.000"


def _files(tmp_path):
    golden = [{"id": f"q{i}", "question": f"Q{i}?", "expected_doc_ids": [f"d{i}"]} for i in range(20)]
    (tmp_path / "eval").mkdir()
    write_jsonl(tmp_path / "eval" / "golden.jsonl", golden)
    base = [{"id": f"q{i}", "answer": "a", "retrieved": [{"id": f"d{i}"}], "latency_ms": 1.0} for i in range(20)]
    head = [
        {"id": f"q{i}", "answer": "a", "retrieved": [{"id": "x" if i < 10 else f"d{i}"}], "latency_ms": 250.0 + i}
        for i in range(20)
    ]
    write_jsonl(tmp_path / "base.jsonl", base)
    write_jsonl(tmp_path / "head.jsonl", head)


def _regressed(text):
    root = assert_valid_junit(text)
    return {c.get("name"): c for c in root.findall(".//testcase[@classname='rag-gate.cases']")}


@pytest.mark.parametrize("form", ["predictions files", "run directories"])
def test_compare_names_the_golden_file_and_line_and_makes_a_missing_junit_folder(tmp_path, monkeypatch, form):
    _files(tmp_path)
    monkeypatch.chdir(tmp_path)  # the CI's checkout: the golden file is named relative to it
    if form == "run directories":
        for side in ("base", "head"):
            config = f"golden: eval/golden.jsonl\npipeline: {{predictions: {side}.jsonl}}\n"
            (tmp_path / f"{side}.yml").write_text(config)
            ran = CliRunner().invoke(main, ["run", "--config", f"{side}.yml", "--out", f"runs/{side}"])
            assert ran.exit_code == 0, ran.output
        sides = ["runs/base", "runs/head"]  # the golden set is the base run's (its manifest)
    else:
        sides = ["--golden", "eval/golden.jsonl", "base.jsonl", "head.jsonl"]
    junit = tmp_path / "reports" / "ci" / "junit.xml"  # its folder does not exist yet
    result = CliRunner().invoke(main, ["compare", *sides, "--out", "out", "--junit", str(junit)])
    assert result.exit_code == 1, result.output
    regressed = _regressed(junit.read_text(encoding="utf-8"))
    assert set(regressed) == {f"q{i}" for i in range(10)}
    q7 = regressed["q7"]
    assert q7.find("failure").text.splitlines()[0] == "golden case: eval/golden.jsonl:8"
    assert q7.get("time") == "0.257"  # head's latency_ms on q7, in seconds
    if form == "run directories":  # the manifest records an absolute path; the report names it from the checkout
        assert Path(json.loads((tmp_path / "runs/base/manifest.json").read_text())["golden"]).is_absolute()


def test_compare_refuses_a_junit_path_it_cannot_create_before_comparing(tmp_path):
    _files(tmp_path)
    (tmp_path / "blocker").write_text("a file where the folder should be")
    args = ["compare", "--golden", str(tmp_path / "eval" / "golden.jsonl"), str(tmp_path / "base.jsonl")]
    args += [str(tmp_path / "head.jsonl"), "--out", str(tmp_path / "out")]
    blocked = tmp_path / "blocker" / "sub" / "junit.xml"
    result = CliRunner().invoke(main, [*args, "--junit", str(blocked)])
    assert result.exit_code == 2, result.output
    reason = f"cannot create the folder {blocked.parent}: {tmp_path / 'blocker'} is not a folder"
    assert result.stderr == f"rag-gate: error: --junit {blocked}: {reason}\n"
    result = CliRunner().invoke(main, [*args, "--junit", str(tmp_path)])  # click refuses a directory itself
    assert result.exit_code == 2 and "is a directory" in result.stderr
    assert not (tmp_path / "out").exists()  # refused before the comparison, nothing half-written
