"""The metric registry: the README's metric table (## Metrics) is generated from it; how judged metrics are read;
margin limits; and where Kind / Direction live."""

from __future__ import annotations

import ast
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import REPO

import gate
from gate.config import GatePolicy
from gate.judges.base import ClaimVerdict, Judgment
from gate.metrics import METRICS, MetricSpec, resolve
from gate.models import Chunk, GoldenCase, Prediction
from gate.scoring import score_one

README_TABLE_HEADER = ("| name | direction | kind | default margin | definition |", "|---|---|---|---|---|")


def registry_table() -> str:
    """The README's metric table as the registry generates it: one row per MetricSpec, in registry order."""
    rows = list(README_TABLE_HEADER)
    for spec in METRICS.values():
        if spec.kind == "ratio":  # relative: a rise for a lower-is-better metric, a fall for a higher-is-better one
            margin = f"{'+' if spec.direction == 'lower' else '−'}{spec.default_margin * 100:g} %"
        else:
            margin = f"{spec.default_margin:g}"
        rows.append(f"| `{spec.name}` | {spec.direction} | {spec.kind} | {margin} | {spec.description} |")
    return "\n".join(rows)


def readme_table() -> str:
    """The first table under ``## Metrics`` in README.md, as written."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Metrics\n(.*?)(?=^## )", text, re.M | re.S)
    assert section, "README.md has no '## Metrics' section"
    table = re.search(r"^\|.*?(?=\n(?!\|))", section.group(1), re.M | re.S)
    assert table, "README.md's '## Metrics' section has no table"
    return table.group(0)


def test_readme_metric_table_is_the_one_the_registry_generates():
    generated = registry_table()
    assert readme_table() == generated, f"paste this table into README.md's '## Metrics':\n{generated}"


def test_registry_table_renders_margins_and_definitions():
    rows = {line.split(" | ")[0]: line for line in registry_table().splitlines()[2:]}
    assert len(rows) == len(METRICS)
    assert rows["| `latency_ms`"].startswith("| `latency_ms` | lower | ratio | +10 % | milliseconds per case")
    assert rows["| `error_rate`"].startswith("| `error_rate` | lower | binary | 0 | the pipeline failed")
    assert rows["| `hit_rate@k`"] == "| `hit_rate@k` | higher | binary | 0.03 | an expected document is in the top k |"
    assert all("|" not in spec.description for spec in METRICS.values())  # a pipe would split the cell


GATE = Path(gate.__file__).resolve().parent  # the package under test (installed in CI)


def _judgment() -> Judgment:
    verdicts = ["supported", "supported", "contradicted", "unverifiable"]
    return Judgment(claims=tuple(ClaimVerdict(f"claim {i}", v) for i, v in enumerate(verdicts)))


def test_judged_metrics_name_the_judgment_field_they_read():
    judged = {name: spec for name, spec in METRICS.items() if spec.judged}
    assert set(judged) == {"faithfulness", "contradiction_rate", "hallucination_rate", "hallucinated_claim_rate",
                           "grounded_answer_rate", "answer_relevance", "correctness", "completeness",
                           "form"}  # fmt: skip
    judgment = replace(_judgment(), grades={"answer_relevance": 0.5, "correctness": 1.0, "completeness": 0.0})
    # 2 supported and 1 contradicted of 4 claims (RAGAS faithfulness: supported / all claims); a contradicted
    # claim makes the answer hallucinated; grades as given, a dimension without a grade is NaN.
    expected = {"faithfulness": 2 / 4, "contradiction_rate": 1 / 4, "hallucination_rate": 1.0,
                "hallucinated_claim_rate": 2 / 4,  # a judge reading meaning: every claim not supported
                "grounded_answer_rate": 0.0,  # grounded only when every claim is supported
                "answer_relevance": 0.5, "correctness": 1.0, "completeness": 0.0, "form": math.nan}  # fmt: skip
    for name, spec in judged.items():
        assert isinstance(getattr(Judgment, spec.judgment_field), property)
        assert getattr(judgment, spec.judgment_field) == pytest.approx(expected[name], nan_ok=True), name
        assert math.isnan(getattr(replace(judgment, error="down"), spec.judgment_field)), name
    # the deterministic part of the hybrid metrics, and how the judge's grade combines with it
    assert {n for n, s in judged.items() if s.fn is not None} == {
        "correctness", "completeness", "form", "grounded_answer_rate"}  # fmt: skip
    assert METRICS["correctness"].combined(0.2, 1.0) == 1.0 and METRICS["form"].combined(0.5, 1.0) == 0.5
    assert METRICS["form"].combined(math.nan, 0.5) == 0.5 and METRICS["form"].combined(1.0, 0.0) == 0.0
    assert [name for name, spec in judged.items() if spec.keeps_detail] == ["faithfulness"]


def test_a_spec_is_computed_judged_both_or_paired():
    with pytest.raises(ValueError, match="give fn, judgment_field or both"):
        MetricSpec("x", "X", "higher", "graded", 0.03, "x")
    with pytest.raises(ValueError, match="a paired metric has neither fn nor judgment_field"):
        MetricSpec("x", "X", "higher", "graded", 0.03, "x", fn=lambda ctx: 0.0, paired=True)
    assert [name for name, spec in METRICS.items() if spec.paired] == ["head_win_rate"]


def test_margin_limits_follow_the_metric_range():
    assert {name: spec.margin_limit for name, spec in METRICS.items() if spec.margin_limit != 1.0} == {
        "latency_ms": math.inf,
        "cost_usd": math.inf,
    }
    assert all(spec.default_margin < spec.margin_limit for spec in METRICS.values())


class _FixedJudge:
    """A judge that returns one fixed Judgment and counts its calls (the function under test is score_one)."""

    id = "fixed"
    version = "1"

    def __init__(self, judgment: Judgment) -> None:
        self.judgment, self.calls = judgment, 0

    def judge(self, question, answer, chunks, *, repeat=0):
        self.calls += 1
        return self.judgment


def test_scoring_reads_judged_metrics_through_the_registry():
    case = GoldenCase(id="c", question="q?", expected_doc_ids=("d",), reference_answers=("Paris",))
    names = ("hit_rate@1", "faithfulness", "contradiction_rate")
    metrics = [resolve(n) for n in names]
    judge = _FixedJudge(_judgment())
    scores = score_one(case, Prediction(id="c", answer="Paris.", retrieved=(Chunk("d", "x"),)), metrics,
                       GatePolicy(metrics=names), judge)  # fmt: skip
    assert [(s.metric, s.value) for s in scores] == [("hit_rate@1", 1.0), ("faithfulness", 0.5),
                                                      ("contradiction_rate", 0.25)]  # fmt: skip
    assert [s.detail is not None for s in scores] == [False, True, False]
    assert len(scores[1].detail["claims"]) == 4 and judge.calls == 1
    refusal = score_one(case, Prediction(id="c", answer="I don't know."), metrics, GatePolicy(metrics=names), judge)
    assert judge.calls == 1 and all(math.isnan(s.value) and s.error is None for s in refusal[1:])
    failed = score_one(case, Prediction(id="c", answer="Paris."), metrics, GatePolicy(metrics=names),
                       _FixedJudge(Judgment(error="endpoint down")))  # fmt: skip
    assert [s.error for s in failed] == [None, "judge failed: endpoint down", "judge failed: endpoint down"]


def _definitions(name: str) -> list[str]:
    found = []
    for path in sorted(GATE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append(str(path.relative_to(GATE.parent)))
    return found


def test_kind_and_direction_are_defined_once_in_the_result_contracts():
    assert _definitions("Kind") == ["gate/results.py"]
    assert _definitions("Direction") == ["gate/results.py"]


def test_the_statistics_import_nothing_else_from_the_package():
    # but gate.results: the result types they build (a contract module that imports only the standard library)
    allowed = ("gate.stats", "gate.results")
    outside = []
    for path in sorted((GATE / "stats").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gate"):
                if not node.module.startswith(allowed):
                    outside.append(f"{path.name}: {node.module}")
            elif isinstance(node, ast.Import):
                outside += [
                    f"{path.name}: {a.name}"
                    for a in node.names
                    if a.name.startswith("gate") and not a.name.startswith(allowed)
                ]
    assert outside == []
