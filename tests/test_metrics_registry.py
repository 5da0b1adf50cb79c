"""The README's metric table (## Metrics) and the registry (gate.metrics.METRICS) describe the same metrics."""

from __future__ import annotations

import re

import pytest
from conftest import REPO

from gate.metrics import METRICS


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
