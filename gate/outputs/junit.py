"""The comparison as JUnit XML, for CI systems other than GitHub (GitLab, Jenkins, Azure DevOps, CircleCI…).

Two test suites: one test case per gated metric (a failed metric is a ``<failure>`` carrying its reason; an
inconclusive or not-applicable one is ``<skipped>``, the reason as its text; a metric whose evaluation failures
broke the error budget an ``<error>``), and one per regressed case and per new out-of-domain failure (each a
``<failure>`` saying what changed, and where the case is in the golden set). Built with the standard library's
ElementTree; untrusted text is cut and stripped of the characters XML 1.0 cannot hold.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from gate.comparison import Comparison, MetricRow
from gate.outputs import cells

TEXT_LIMIT = 2_000
"""Characters of a failure's text."""
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: object, limit: int = TEXT_LIMIT) -> str:
    text = _NOT_XML.sub("", str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(golden_file: str | None, line: int) -> list[str]:
    """``golden case: eval/golden.jsonl:17`` (the widely read JUnit schema has no file/line attributes)."""
    return [f"golden case: {golden_file}:{line}"] if golden_file and line else []


def _suite(parent: ET.Element, name: str) -> ET.Element:
    return ET.SubElement(parent, "testsuite", name=name)


def _count(suite: ET.Element) -> tuple[int, int, int, int]:
    cases = suite.findall("testcase")
    failures = sum(c.find("failure") is not None for c in cases)
    errors = sum(c.find("error") is not None for c in cases)
    skipped = sum(c.find("skipped") is not None for c in cases)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    return len(cases), failures, errors, skipped


def _metric_case(suite: ET.Element, row: MetricRow, broken: dict[str, str]) -> None:
    case = ET.SubElement(suite, "testcase", classname="rag-gate.metrics", name=row.name)
    c = cells.metric_cells(row)
    figures = (
        f"{row.label}: base {c.base}, head {c.head}, Δ {c.delta}, CI {c.interval}, "
        f"p (Holm-adjusted) {c.p}, margin {cells.margin_cell(row)}, cases worse / tie / better {c.counts}"
    )
    if row.name in broken:
        ET.SubElement(case, "error", message=_text(broken[row.name], 500), type="evaluation").text = _text(figures)
    elif row.status == "fail":
        ET.SubElement(case, "failure", message=_text(row.reason, 500), type="regression").text = _text(figures)
    elif row.status in ("inconclusive", "not_applicable"):
        ET.SubElement(case, "skipped").text = _text(f"{row.status}: {row.reason}", 500)
    ET.SubElement(case, "system-out").text = _text(figures)


def render_junit(comparison: Comparison, golden_file: str | None = None) -> str:
    """Render ``comparison`` as a JUnit XML document (``<testsuites>``, UTF-8, with an XML declaration).

    Args:
        comparison: what to render.
        golden_file: the golden set's path as the CI system should show it (the cases' ``file`` attribute).

    Returns:
        The document; ``failures`` > 0 exactly when a gated metric failed, a case regressed or a new out-of-domain
        failure is listed.

    Source: the JUnit XML report format of Apache Ant's ``XMLJUnitResultFormatter``, as read by Jenkins' JUnit
    plugin and GitLab's unit test reports; valid against Jenkins' ``junit-4.xsd`` (``tests/schemas/``).
    """
    root = ET.Element("testsuites", name=f"rag-gate: {comparison.verdict}")
    broken = {
        use.metric: f"{use.failed} of {use.expected} evaluations failed on {use.side} ({use.rate:.1%})"
        for use in comparison.error_budget_use
        if use.rate > comparison.error_budget
    }
    metrics = _suite(root, "rag-gate.metrics")
    properties = ET.SubElement(metrics, "properties")
    for name, value in (
        ("verdict", comparison.verdict),
        ("cases", comparison.n_cases),
        ("repeats", f"{comparison.repeats.base}/{comparison.repeats.head}"),
        ("base", comparison.base.git_sha or ""),
        ("head", comparison.head.git_sha or ""),
    ):
        ET.SubElement(properties, "property", name=name, value=_text(value, 200))
    for row in comparison.gated:
        _metric_case(metrics, row, broken)
    cases = _suite(root, "rag-gate.cases")
    labels = {m.name: m.label for m in comparison.metrics}
    for entry in comparison.regressed_cases:
        case = ET.SubElement(cases, "testcase", classname="rag-gate.cases", name=_text(entry.id, 200))
        changes = [cells.case_change(m, labels.get(m.name, m.name)) for m in entry.metrics]
        detail = [*_where(golden_file, entry.line), f"question: {entry.question}", *changes]
        if entry.dropped_docs:
            detail.append(f"expected documents that fell out of the top k: {', '.join(entry.dropped_docs)}")
        if entry.error:
            detail.append(f"head failed: {entry.error}")
        detail.append(f"answer: base “{entry.answer_base}” → head “{entry.answer_head}”")
        message = f"regressed ({entry.cause}): " + "; ".join(changes)
        ET.SubElement(case, "failure", message=_text(message, 500), type="regression").text = _text("\n".join(detail))
    for failure in comparison.ood_failures:
        if not failure.new:
            continue
        case = ET.SubElement(cases, "testcase", classname="rag-gate.out-of-domain", name=_text(failure.id, 200))
        message = "out-of-domain question refused on base, answered on head"
        lines = [f"question: {failure.question}", f"head answered: {failure.answer}"]
        text = "\n".join(_where(golden_file, failure.line) + lines)
        ET.SubElement(case, "failure", message=message, type="out-of-domain").text = _text(text)
    totals = [_count(suite) for suite in (metrics, cases)]
    for i, key in enumerate(("tests", "failures", "errors")):  # <testsuites> has no "skipped" attribute
        root.set(key, str(sum(t[i] for t in totals)))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
