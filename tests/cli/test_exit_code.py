"""One function decides the exit code (gate.comparison.exit_code_for), and its docstring's table and README's table
say what it does."""

import inspect
import itertools
import re

import pytest
from helpers import REPO

from gate.comparison import FAIL_ON, exit_code_for
from gate.errors import InputError
from gate.trends import MetricTrend, TrendPolicy, TrendReport

README = REPO / "README.md"
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


DOC_COLUMNS = {  # exit_code_for's docstring column header → (fail_on, strict) settings it stands for
    "fail": [("fail", False)],
    "fail + strict": [("fail", True)],
    "inconclusive (± strict)": [("inconclusive", False), ("inconclusive", True)],
    "never (± strict)": [("never", False), ("never", True)],
}
VERDICTS = {"pass": "pass", "inconclusive": "inconclusive", "fail": "fail", "error": "error", "None": None}
TRENDS = {  # the docstring's "trend blocks" → every (trend status, trend_block) that means it; None: no trend read
    "no": [None, ("ok", "warning"), ("warning", "critical"), ("critical", "never"), ("ok", "never")],
    "yes": [("critical", "critical"), ("warning", "warning"), ("critical", "warning")],
}


def docstring_table() -> dict[tuple[str, str, str], int]:
    """(verdict, trend blocks, column header) → the exit code exit_code_for's docstring gives."""
    lines = inspect.getdoc(exit_code_for).splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("====")]
    assert len(rules) == 3, "the docstring holds one table (a header rule, a header, a rule, rows, a closing rule)"
    columns = re.split(r"\s{2,}", lines[rules[0] + 1].strip())
    assert columns[:2] == ["verdict", "trend blocks"] and columns[2:] == list(DOC_COLUMNS)
    table = {}
    for line in lines[rules[1] + 1 : rules[2]]:
        verdict, blocks, *cells = re.split(r"\s{2,}", line.strip())
        for column, cell in zip(columns[2:], cells, strict=True):
            table[verdict, blocks, column] = int(cell)
    return table


def test_the_docstring_table_is_what_the_function_does_for_every_input():
    """Walk the whole table: every verdict × trend × fail-on × strict, each cell against exit_code_for."""
    table = docstring_table()
    assert {(v, b) for v, b, _ in table} == set(itertools.product(VERDICTS, TRENDS))  # every row, once
    assert {(f, s) for c in DOC_COLUMNS for f, s in DOC_COLUMNS[c]} == set(itertools.product(FAIL_ON, (False, True)))
    walked = 0
    for (verdict, blocks, column), code in table.items():
        for (fail_on, strict), setting in itertools.product(DOC_COLUMNS[column], TRENDS[blocks]):
            kwargs = {} if setting is None else {"trend": trend(setting[0]), "trend_block": setting[1]}
            got = exit_code_for(VERDICTS[verdict], fail_on, strict=strict, **kwargs)
            assert got == code, (verdict, fail_on, strict, setting)
            walked += 1
    assert walked == 5 * 3 * 2 * (5 + 3)  # verdicts × fail-on × strict × trend settings


def test_the_docstring_table_agrees_with_readme_when_no_trend_blocks():
    doc, readme = docstring_table(), readme_table()
    for (verdict, column), code in readme.items():
        fail_on, strict = COLUMNS[column][0]
        doc_column = next(c for c, settings in DOC_COLUMNS.items() if (fail_on, strict) in settings)
        assert doc[verdict, "no", doc_column] == code, (verdict, column)


def test_every_exit_code_is_documented_where_the_codes_are_listed():
    """README's exit-code table and the CLI's lists name 0–4; 4 is compare --adaptive's "not settled"."""
    import importlib

    from click.testing import CliRunner

    from gate.cli import main
    from gate.cli.common import NOT_SETTLED

    text = README.read_text(encoding="utf-8")
    start = text.index("| code | meaning |")
    rows = text[start:].split("\n\n", 1)[0].splitlines()[2:]
    codes = {int(row.split("|")[1]): row.split("|")[2] for row in rows}
    assert sorted(codes) == [0, 1, 2, 3, 4]
    assert NOT_SETTLED == 4 and "`rag-gate compare --adaptive`" in codes[NOT_SETTLED]
    for name in ("gate.cli.common", "gate.cli.main", "gate.errors"):
        assert "· 4 " in " ".join((importlib.import_module(name).__doc__ or "").split()), name
    assert "4 compare --adaptive not settled" in " ".join(CliRunner().invoke(main, ["--help"]).output.split())
