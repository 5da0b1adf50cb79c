"""One function decides the exit code (gate.comparison.exit_code_for), and README's table says what it does."""

import re
from pathlib import Path

import pytest

from gate.comparison import exit_code_for
from gate.errors import InputError
from gate.trends import MetricTrend, TrendPolicy, TrendReport

README = Path(__file__).resolve().parent.parent / "README.md"
COLUMNS = {  # README column header → (fail_on, strict) settings it stands for ("± strict": both)
    "`fail-on: fail` (default)": [("fail", False)],
    "`fail-on: fail` + strict": [("fail", True)],
    "`fail-on: inconclusive` (± strict)": [("inconclusive", False), ("inconclusive", True)],
    "`fail-on: never` (± strict)": [("never", False), ("never", True)],
}


def readme_table() -> dict[tuple[str, str], int]:
    """(verdict, column header) → the exit code README's table gives."""
    text = README.read_text(encoding="utf-8")
    header = next(line for line in text.splitlines() if line.startswith("| verdict | `fail-on: fail`"))
    columns = [c.strip() for c in header.strip("|").split("|")][1:]
    start = text.index(header)
    rows = text[start:].splitlines()[2:6]
    table = {}
    for row in rows:
        verdict, *cells = (c.strip() for c in row.strip("|").split("|"))
        for column, cell in zip(columns, cells, strict=True):
            table[verdict, column] = int(re.match(r"\d", cell).group())
    return table


def trend(status: str) -> TrendReport:
    metric = MetricTrend("faithfulness", "Faithfulness", "higher", True, status, 0.8, 0.9, 0.11)
    return TrendReport(TrendPolicy(), "head", None, 10, (), (), (metric,))


def test_readme_table_is_what_the_function_does():
    table = readme_table()
    assert len(table) == 16 and set(COLUMNS) == {column for _, column in table}
    for (verdict, column), code in table.items():
        for fail_on, strict in COLUMNS[column]:
            assert exit_code_for(verdict, fail_on, strict=strict) == code, (verdict, fail_on, strict)


@pytest.mark.parametrize(
    ("verdict", "fail_on", "status", "block", "code"),
    [
        ("pass", "fail", "critical", "critical", 1),  # the trend alarm blocks a passing check
        ("pass", "never", "critical", "critical", 1),  # whatever fail-on
        ("pass", "fail", "warning", "critical", 0),  # below the blocking level
        ("pass", "fail", "critical", "never", 0),  # never blocks
        ("error", "fail", "critical", "critical", 3),  # error stays 3
        (None, "fail", "critical", "warning", 1),  # nothing compared (a push, history check): the trend decides
        (None, "fail", "ok", "warning", 0),
        ("fail", "fail", "ok", "warning", 1),
    ],
)
def test_the_trend_adds_to_the_verdict(verdict, fail_on, status, block, code):
    assert exit_code_for(verdict, fail_on, trend=trend(status), trend_block=block) == code


def test_unknown_fail_on_is_bad_usage():
    with pytest.raises(InputError, match="--fail-on: must be one of fail, inconclusive, never, got 'sometimes'"):
        exit_code_for("pass", "sometimes")
