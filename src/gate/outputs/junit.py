"""The comparison as JUnit XML, for CI systems other than GitHub (GitLab, Jenkins, Azure DevOps, CircleCI…).

Two test suites: one test case per gated metric (a failed metric is a ``<failure>`` carrying its reason; an
inconclusive or not-applicable one is ``<skipped>``, the reason as its text; a metric whose evaluation failures
broke the error budget an ``<error>``), and one per must-pass flip (first: a ``<failure>`` when certain, else
``<skipped>``), per regressed case and per new out-of-domain failure (each a ``<failure>`` saying what changed,
and where the case is in the golden set). A policy change of the PR is the ``policy_changes`` property. Built
with the standard library's ElementTree; untrusted text is cut and stripped of the characters XML 1.0 cannot hold.

The document is valid against both schemas CI reporters are written for (``tests/schemas/``): Jenkins' (dtkit
``junit-4.xsd``) and the stricter Apache Ant one (windyroad ``JUnit.xsd``). What that asks of it: every
``<testsuite>`` carries name, package, id, tests, failures, errors, skipped, time, timestamp (UTC, no zone) and
hostname, a ``<properties>`` element with at least one property, and ``<system-out>`` / ``<system-err>``; every
``<testcase>`` carries name, classname and time and holds at most one of skipped, failure, error (both schemas
forbid other attributes, so a case's golden file and line are the first line of its failure text,
``golden case: FILE:LINE``); ``<testsuites>`` carries no attribute (Ant allows none).

Times are seconds: a case's is head's mean pipeline latency on it (``latency_ms`` over its valid repeats, 0 when
not measured); a metric's is 0 (the metrics are computed together, not timed one by one); a suite's is the sum
of its cases'.
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from gate.comparison import Comparison, MetricRow
from gate.outputs import cells
from gate.sanitize import clean

TEXT_LIMIT = 2_000
"""Characters of a failure's text."""
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: object, limit: int = TEXT_LIMIT) -> str:
    text = _NOT_XML.sub("", clean(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(golden_file: str | None, line: int) -> list[str]:
    """``golden case: eval/golden.jsonl:17`` (neither JUnit schema allows file/line attributes on a test case)."""
    if not line:
        return []
    return [f"golden case: {golden_file}:{line}" if golden_file else f"golden case: line {line}"]


def _seconds(value: float | None) -> str:
    """A duration as ``xs:decimal`` seconds (``0.250``): never NaN, an exponent or a sign."""
    return f"{value:.3f}" if value is not None and value == value and 0 <= value < 1e12 else "0.000"


def _case(suite: ET.Element, classname: str, name: str, latency_ms: float | None = None) -> ET.Element:
    seconds = None if latency_ms is None else latency_ms / 1000
    return ET.SubElement(suite, "testcase", name=_text(name, 200), classname=classname, time=_seconds(seconds))


def _suite(parent: ET.Element, name: str, index: int, timestamp: str, hostname: str) -> ET.Element:
    suite = ET.SubElement(parent, "testsuite", name=name, package=name, id=str(index))
    suite.set("timestamp", timestamp)
    suite.set("hostname", hostname)
    return suite


def _close(suite: ET.Element, out: list[str]) -> None:
    """Set a suite's counts and time from its test cases; add the ``system-out`` and ``system-err`` Ant requires."""
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    suite.set("errors", str(sum(c.find("error") is not None for c in cases)))
    suite.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    suite.set("time", _seconds(sum(float(c.get("time", "0")) for c in cases)))
    ET.SubElement(suite, "system-out").text = _text("\n".join(out), 50 * TEXT_LIMIT)
    ET.SubElement(suite, "system-err").text = ""


POLICY_PROPERTY_LIMIT = 4_000
"""Characters of the ``policy_changes`` property: every change in full (other properties: 200)."""


def _properties(suite: ET.Element, pairs: list[tuple[str, object]]) -> None:
    properties = ET.SubElement(suite, "properties")
    for name, value in pairs:
        limit = POLICY_PROPERTY_LIMIT if name == "policy_changes" else 200
        ET.SubElement(properties, "property", name=name, value=_text(value, limit))


def _metric_case(suite: ET.Element, row: MetricRow, broken: dict[str, str]) -> str:
    """Add the metric's test case; return its figures (one line of the suite's ``system-out``)."""
    case = _case(suite, "rag-gate.metrics", row.name)
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
        # Jenkins' schema types <skipped> as a plain string (no message attribute): the reason is its text
        ET.SubElement(case, "skipped").text = _text(f"{row.status}: {row.reason}\n{figures}", 1_000)
    return figures


def render_junit(
    comparison: Comparison,
    golden_file: str | None = None,
    *,
    timestamp: datetime | None = None,
    hostname: str | None = None,
) -> str:
    """Render ``comparison`` as a JUnit XML document (``<testsuites>``, UTF-8, with an XML declaration).

    Args:
        comparison: what to render.
        golden_file: the golden set's path as the CI system should show it (the first line of a case's failure
            text, ``golden case: FILE:LINE``); None: ``golden case: line LINE``.
        timestamp: when the comparison ran (the suites' ``timestamp``, written in UTC); default: now.
        hostname: the suites' ``hostname``; default: this machine's name (``localhost`` when it has none).

    Returns:
        The document; ``failures`` > 0 exactly when a gated metric failed, a case regressed or a new out-of-domain
        failure is listed.

    Source: the JUnit XML report format of Apache Ant's ``XMLJUnitResultFormatter``, as read by Jenkins' JUnit
    plugin and GitLab's unit test reports; valid against Jenkins' ``junit-4.xsd`` and Ant's ``JUnit.xsd``
    (``tests/schemas/``).
    """
    when = (timestamp or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    host = (hostname if hostname is not None else socket.gethostname()).strip() or "localhost"
    host = _text(host, 200)
    root = ET.Element("testsuites")  # Ant's schema allows no attribute here; the totals are the suites'
    broken = {
        use.metric: f"{use.failed} of {use.expected} evaluations failed on {use.side} ({use.rate:.1%})"
        for use in comparison.error_budget_use
        if use.rate > comparison.error_budget
    }
    metrics = _suite(root, "rag-gate.metrics", 0, when, host)
    _properties(
        metrics,
        [
            ("verdict", comparison.verdict),
            ("cases", comparison.n_cases),
            ("repeats", f"{comparison.repeats.base}/{comparison.repeats.head}"),
            ("base", comparison.base.git_sha or ""),
            ("head", comparison.head.git_sha or ""),
            *([("policy_changes", cells.policy_changes_text(comparison))] if comparison.policy_changes else []),
        ],
    )
    figures = [_metric_case(metrics, row, broken) for row in comparison.gated]
    _close(metrics, [f"rag-gate: {comparison.verdict}", *figures])
    cases = _suite(root, "rag-gate.cases", 1, when, host)
    _properties(cases, [("golden", golden_file or ""), ("cases", comparison.n_cases)])
    labels = {m.name: m.label for m in comparison.metrics}
    new_ood = {f.id for f in comparison.ood_failures if f.new}
    for flip in comparison.must_pass_failures:  # first: a contract, not a statistic
        if not flip.certain and flip.id in new_ood:
            continue  # listed below as an out-of-domain failure, as before must-pass cases existed
        case = _case(cases, "rag-gate.must-pass", flip.id)
        lines = [*_where(golden_file, flip.line), f"question: {flip.question}", f"head answered: {flip.answer}"]
        message = f"must-pass case passed on base, failed on head in every repeat: {flip.why}"
        if flip.certain:
            ET.SubElement(case, "failure", message=_text(message, 500), type="must-pass").text = _text("\n".join(lines))
        else:
            ET.SubElement(case, "skipped").text = _text(f"{message} (not certain: not blocking)\n" + "\n".join(lines))
    listed = {flip.id for flip in comparison.must_pass_failures if flip.certain}
    for entry in comparison.regressed_cases:
        case = _case(cases, "rag-gate.cases", entry.id, entry.latency_ms)
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
        if not failure.new or failure.id in listed:
            continue
        case = _case(cases, "rag-gate.out-of-domain", failure.id, failure.latency_ms)
        message = "out-of-domain question refused on base, answered on head"
        lines = [f"question: {failure.question}", f"head answered: {failure.answer}"]
        text = "\n".join(_where(golden_file, failure.line) + lines)
        ET.SubElement(case, "failure", message=message, type="out-of-domain").text = _text(text)
    _close(cases, [])
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
