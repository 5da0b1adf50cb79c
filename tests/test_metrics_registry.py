"""The metric registry: the README's metric table (## Metrics) describes the same metrics; how judged metrics
are read; margin limits; and where Kind / Direction live."""

from __future__ import annotations

import ast
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import REPO

import gate
from gate.config import Evaluation
from gate.judges.base import ClaimVerdict, Judgment
from gate.metrics import METRICS, MetricSpec, resolve
from gate.models import Chunk, GoldenCase, Prediction
from gate.scoring import score_one


def readme_metric_rows() -> dict[str, dict[str, str]]:
    """The rows of the first table under ``## Metrics`` in README.md: name → {column: cell}."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Metrics\n(.*?)(?=^## )", text, re.M | re.S)
    assert section, "README.md has no '## Metrics' section"
    lines = [ln for ln in section.group(1).splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert re.fullmatch(r"[-|: ]+", lines[1]), "the table's second line must be its separator"
    rows = {}
    for line in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        name = re.fullmatch(r"`([^`]+)`", cells["name"])
        assert name, f"README metric name must be in backticks: {cells['name']!r}"
        assert name.group(1) not in rows, f"README lists {name.group(1)} twice"
        rows[name.group(1)] = cells
    return rows


def parse_margin(cell: str, kind: str) -> float:
    """``0.03`` (absolute) for binary / graded metrics, ``+10 %`` (relative) for ratio ones."""
    if kind == "ratio":
        match = re.fullmatch(r"\+(\d+(?:\.\d+)?) %", cell)
        assert match, f"a ratio metric's margin is relative, written like '+10 %': {cell!r}"
        return float(match.group(1)) / 100
    assert re.fullmatch(r"\d+(?:\.\d+)?", cell), f"an absolute margin is a plain number: {cell!r}"
    return float(cell)


def test_readme_table_parser_reads_a_known_row():
    rows = readme_metric_rows()
    assert {"name", "direction", "kind", "default margin", "definition"} <= set(next(iter(rows.values())))
    assert parse_margin("+10 %", "ratio") == pytest.approx(0.10) and parse_margin("0.03", "binary") == 0.03
    with pytest.raises(AssertionError):
        parse_margin("0.10", "ratio")


def test_every_registry_entry_has_a_matching_readme_row_and_vice_versa():
    rows = readme_metric_rows()
    assert set(rows) == set(METRICS), (
        f"only in README: {sorted(set(rows) - set(METRICS))}; only in the registry: {sorted(set(METRICS) - set(rows))}"
    )
    for name, spec in METRICS.items():
        row = rows[name]
        assert (row["direction"], row["kind"]) == (spec.direction, spec.kind), name
        assert parse_margin(row["default margin"], spec.kind) == pytest.approx(spec.default_margin, abs=1e-12), name
        assert row["definition"], name


GATE = Path(gate.__file__).resolve().parent  # the package under test (installed in CI)


def _judgment() -> Judgment:
    verdicts = ["supported", "supported", "contradicted", "unverifiable"]
    return Judgment(claims=tuple(ClaimVerdict(f"claim {i}", v) for i, v in enumerate(verdicts)))


def test_judged_metrics_name_the_judgment_field_they_read():
    judged = {name: spec for name, spec in METRICS.items() if spec.judged}
    assert set(judged) == {"faithfulness", "contradiction_rate", "hallucination_rate", "hallucinated_claim_rate",
                           "answer_relevance", "correctness", "completeness", "form"}  # fmt: skip
    judgment = replace(_judgment(), grades={"answer_relevance": 0.5, "correctness": 1.0, "completeness": 0.0})
    # 2 supported and 1 contradicted of 4 claims (RAGAS faithfulness: supported / all claims); a contradicted
    # claim makes the answer hallucinated; grades as given, a dimension without a grade is NaN.
    expected = {"faithfulness": 2 / 4, "contradiction_rate": 1 / 4, "hallucination_rate": 1.0,
                "hallucinated_claim_rate": 2 / 4,  # a judge reading meaning: every claim not supported
                "answer_relevance": 0.5, "correctness": 1.0, "completeness": 0.0, "form": math.nan}  # fmt: skip
    for name, spec in judged.items():
        assert isinstance(getattr(Judgment, spec.judgment_field), property)
        assert getattr(judgment, spec.judgment_field) == pytest.approx(expected[name], nan_ok=True), name
        assert math.isnan(getattr(replace(judgment, error="down"), spec.judgment_field)), name
    # the deterministic part of the hybrid metrics, and how the judge's grade combines with it
    assert {n for n, s in judged.items() if s.fn is not None} == {"correctness", "completeness", "form"}
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
                       Evaluation(metrics=names), judge)  # fmt: skip
    assert [(s.metric, s.value) for s in scores] == [("hit_rate@1", 1.0), ("faithfulness", 0.5),
                                                      ("contradiction_rate", 0.25)]  # fmt: skip
    assert [s.detail is not None for s in scores] == [False, True, False]
    assert len(scores[1].detail["claims"]) == 4 and judge.calls == 1
    refusal = score_one(case, Prediction(id="c", answer="I don't know."), metrics, Evaluation(metrics=names), judge)
    assert judge.calls == 1 and all(math.isnan(s.value) and s.error is None for s in refusal[1:])
    failed = score_one(case, Prediction(id="c", answer="Paris."), metrics, Evaluation(metrics=names),
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


def test_kind_and_direction_are_defined_once_with_the_statistics():
    assert _definitions("Kind") == ["gate/stats/inputs.py"]
    assert _definitions("Direction") == ["gate/stats/inputs.py"]


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
