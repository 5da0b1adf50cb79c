"""The test suite's own rules: a fresh clone (no ../shared) passes, and the default run leaves out slow tests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from helpers import REPO

TESTS = REPO / "tests"


def test_every_module_reading_the_shared_data_marks_its_tests():
    """A module that reads ``SHARED_DATA`` must mark the tests that need it with ``shared_data(...)``, so that they
    skip with a reason on a fresh clone instead of failing."""
    modules = [p for p in TESTS.rglob("test_*.py") if p.name != Path(__file__).name]
    readers = [p for p in modules if re.search(r"\bSHARED_DATA\b", p.read_text(encoding="utf-8"))]
    assert readers, "no test reads the shared data: remove this test or SHARED_DATA"
    unmarked = [p.name for p in readers if "pytest.mark.shared_data(" not in p.read_text(encoding="utf-8")]
    assert unmarked == []
    fixed = "/work/" + "shared"  # the team's checkout path: never hard-coded, always through SHARED_DATA
    assert [p.name for p in TESTS.rglob("*.py") if fixed in p.read_text(encoding="utf-8")] == []


def test_default_run_excludes_slow_tests_and_markers_are_strict():
    options = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    addopts = " ".join(options["addopts"])
    assert re.search(r"-m[ =]?\W*not slow", addopts) and "--strict-markers" in addopts
    markers = {m.split(":")[0].split("(")[0] for m in options["markers"]}
    assert {"slow", "shared_data"} <= markers


def test_stored_oracles_come_with_the_script_that_made_them():
    stored = sorted((TESTS / "oracles").glob("*.json"))
    assert stored
    scripts = {p.name for p in (TESTS / "oracles").glob("make_*.py")}
    for path in stored:
        texts = [(TESTS / "oracles" / s).read_text(encoding="utf-8") for s in scripts]
        assert any(path.name in t for t in texts), f"{path.name}: no tests/oracles/make_*.py writes it"
