import importlib
import json
import pkgutil
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from helpers import write_jsonl

from gate import __version__
from gate.cli import main
from gate.config import load_config
from gate.produce import run_side


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_version_and_help_for_every_command():
    assert invoke("--version").output.strip() == f"rag-gate, version {__version__}"
    for name, command in main.commands.items():
        result = invoke(name, "--help")
        assert result.exit_code == 0 and "Example" in result.output and "\\b" not in result.output, name
        assert command.help, name


def test_python_dash_m_gate_works():
    done = subprocess.run([sys.executable, "-m", "gate", "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and __version__ in done.stdout


def test_validate_ok(tiny_golden):
    result = invoke("validate", tiny_golden)
    assert result.exit_code == 0
    assert result.stdout.strip() == f"{tiny_golden}: 4 cases (1 out-of-domain) — OK"


def test_validate_reports_every_problem_and_exits_2(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [{"id": "a", "question": "x"}, {"id": "a", "question": "y"}, "{bad"])
    result = invoke("validate", path)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"{path}:2: id: duplicate id 'a' (first on line 1)",
        f"{path}:3: invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        f"rag-gate: error: {path}: 2 problem(s)",
    ]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "config, code, message",
    [
        (
            "golden: golden.jsonl\npipeline: {python: 'rag:answer'}\nrepeat: 2\n",
            2,
            "rag-gate.yml:3: repeat: unknown key",
        ),
        (
            "golden: golden.jsonl\npipeline: {python: 'missing_module:answer', retries: 0}\n",
            2,
            "rag-gate.yml:2): cannot import missing_module:answer: No module named 'missing_module' (searched from cwd",
        ),
        (
            "golden: golden.jsonl\npipeline: {python: 'rag:answer'}\njudge: oracle\n",
            2,
            "judge: unknown judge 'oracle'",
        ),
    ],
)
def test_run_errors_are_one_line_with_exit_code(tmp_path, tiny_golden, config, code, message):
    (tmp_path / "rag-gate.yml").write_text(config)
    result = invoke("run", "--config", tmp_path / "rag-gate.yml", "--out", tmp_path / "out")
    assert result.exit_code == code, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_compare_usage_errors_exit_2(tmp_path, tiny_golden):
    assert invoke("compare", tmp_path / "nope", tmp_path / "nope2").exit_code == 2
    (tmp_path / "empty").mkdir()
    result = invoke("compare", tmp_path / "empty", tmp_path / "empty")
    assert result.exit_code == 2 and "not a run directory (no manifest.json)" in result.stderr
    preds = write_jsonl(tmp_path / "p.jsonl", [{"id": "q1", "answer": "x"}])
    result = invoke("compare", preds, preds)
    assert result.exit_code == 2 and "a predictions file needs --golden" in result.stderr
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "q1", "answer": 3}])
    result = invoke("compare", "--golden", tiny_golden, bad, preds)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == f"rag-gate: error: {bad}:1: answer: must be a string, got int"


BOGUS = r"No such option:? '?--bogus'?\.?"  # click 8.2: "No such option: --bogus"; 8.3: "No such option '--bogus'."


@pytest.mark.parametrize(
    "args, pattern",
    [
        (["compare", "--bogus"], BOGUS + r" \(.*'?--jobs'?, '?--out'?.*\) \(see rag-gate compare --help\)"),
        (["history", "add"], re.escape("Missing argument 'RUN_DIR'. (see rag-gate history add --help)")),
        (["nosuch"], re.escape("No such command 'nosuch'. (see rag-gate --help)")),
        (["run", "--config"], re.escape("Option '--config' requires an argument. (see rag-gate run --help)")),
        (["pr", "--out-dir"], re.escape("Option '--out-dir' requires an argument. (see rag-gate pr --help)")),
        (["--bogus"], BOGUS + re.escape(" (see rag-gate --help)")),
        (["run", "--repeats", "0"],
         re.escape("Invalid value for '--repeats': 0 is not in the range x>=1. (see rag-gate run --help)")),
        (["pr", "--repeats", "x\x01"],
         re.escape("Invalid value for '--repeats': expected a whole number ≥ 1, got 'x\\x01'")
         + re.escape(" (see rag-gate pr --help)")),
    ],
)  # fmt: skip
def test_usage_errors_are_one_line_with_exit_2(args, pattern):
    """click prints usage, a hint, a blank line and the error; rag-gate's rule is one line, untrusted text escaped.

    click's own wording of an unknown option differs between its versions (the pattern takes both)."""
    result = CliRunner().invoke(main, args, prog_name="rag-gate")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert re.fullmatch(f"rag-gate: error: {pattern}", line), line


def test_help_and_a_group_without_a_command_still_print_help():
    result = CliRunner().invoke(main, ["compare", "--help"], prog_name="rag-gate")
    assert result.exit_code == 0 and result.stdout.startswith("Usage: rag-gate compare")
    result = CliRunner().invoke(main, ["history"], prog_name="rag-gate")  # click: a group without a command: help
    assert "Usage: rag-gate history" in result.output and "rag-gate: error" not in result.output


def test_shard_option_is_validated(tmp_path, tiny_golden):
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'rag:answer'}\n")
    result = invoke("run", "--config", tmp_path / "rag-gate.yml", "--out", tmp_path / "o", "--shard", "x")
    assert result.exit_code == 2 and "--shard x: expected i/n" in result.stderr


def test_a_side_where_every_case_fails_exits_3(tmp_path, tiny_golden):
    (tmp_path / "rag.py").write_text("def answer(case, **kw):\n    raise TypeError('bad option')\n")
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'rag:answer', retries: 0}\n")
    result = invoke("run", "--config", tmp_path / "rag-gate.yml", "--out", tmp_path / "out")
    assert result.exit_code == 3
    assert "every prediction failed (4 of 4), e.g. case 'q1': TypeError: bad option (rag.py:2)" in result.stderr
    assert len((tmp_path / "out" / "predictions.jsonl").read_text().splitlines()) == 4  # error rows kept
    good = write_jsonl(tmp_path / "good.jsonl", [{"id": f"q{i}", "answer": "x"} for i in range(1, 5)])
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    result = invoke("compare", "--golden", tiny_golden, empty, good, "--out", tmp_path / "r")
    assert result.exit_code == 3 and "every prediction failed (4 of 4)" in result.stderr  # no base to compare with


def test_a_head_that_fails_on_every_case_the_base_answered_is_a_regression(tmp_path, tiny_golden):
    """Not a broken evaluation (exit 3) but the head's pipeline failing (exit 1), every case listed with its error."""
    (tmp_path / "rag.py").write_text("def answer(case, **kw):\n    raise ImportError('no module named retriever')\n")
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'rag:answer', retries: 0}\n")
    write_jsonl(
        tmp_path / "base.jsonl",
        [{"id": f"q{i}", "answer": "x", "retrieved": [{"id": f"d{i}", "text": "x"}]} for i in range(1, 4)]
        + [{"id": "q4", "answer": "I don't have that information.", "refused": True}],
    )
    config = load_config(tmp_path / "rag-gate.yml")
    head = run_side(config, tmp_path / "head", require_answers=False)
    assert json.loads((head / "manifest.json").read_text())["counts"]["prediction_errors"] == 4
    result = invoke("compare", "--golden", tiny_golden, tmp_path / "base.jsonl", head, "--out", tmp_path / "r")
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert result.exit_code == 1 and report["verdict"] == "fail", result.output
    assert report["reasons"][0] == (  # q4 was refused on base: it ran, but was not answered
        "the pipeline fails on 4 case(s) that ran without error on base: 3 answered there, 1 refused (system errors)"
    )
    assert {c["id"]: c["cause"] for c in report["regressed_cases"]} == {f"q{i}": "error" for i in range(1, 5)}


def test_public_api_is_exported_lazily():
    import gate

    done = subprocess.run(
        [sys.executable, "-c", "import gate, sys; print('numpy' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "False"
    assert all(getattr(gate, name) is not None for name in gate.__all__)
    # an export never shares a name with a module of the package: importing that module would replace it
    modules = {info.name for info in pkgutil.iter_modules(gate.__path__)}
    assert modules & set(gate.__all__) == set()
    first = {name: getattr(gate, name) for name in gate.__all__}
    for name in sorted(modules):
        importlib.import_module(f"gate.{name}")
    assert {name: getattr(gate, name) for name in gate.__all__} == first


@pytest.mark.parametrize("nl", [False, True])
def test_a_long_report_is_printed_in_pieces_of_whole_lines_unchanged(nl):
    """``compare`` prints its report a piece at a time (the guarded stdout copies each write; the JSON
    of 100,000 cases is 65 MB): the pieces join to the text, with a workflow command split over none of them."""
    import click

    from gate.cli.main import _echo_in_pieces
    from gate.sanitize import guard_std_streams

    text = "".join(f'  {{"id": "q{i}", "answer": "::warning ##[error] {i}"}},\n' for i in range(50)) + "}"

    @click.command()
    def pieces():
        guard_std_streams()  # as rag-gate's main does
        _echo_in_pieces(text, nl=nl, size=40)

    @click.command()
    def whole():
        guard_std_streams()
        click.echo(text, nl=nl)

    out = CliRunner().invoke(pieces).output
    assert out == CliRunner().invoke(whole).output
    assert out.count("\n") == 50 + nl and out.count("##\\[error]") == 50 and "##[" not in out
