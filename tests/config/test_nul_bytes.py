"""A NUL byte in any string of the config is a config problem (file:line: key, exit 2) at validate and at run."""

from __future__ import annotations

import os

import click
import pytest
from click.testing import CliRunner
from helpers import write_jsonl

from gate.cli.common import handle_errors
from gate.cli.main import main
from gate.config import NUL_MESSAGE, load_config
from gate.errors import NUL_INPUT, InputError
from gate.importers import promptfoo
from gate.yamlsafe import nul_bytes

# (config text, the key the error names, its line)
CONFIGS = {
    "golden": ('golden: "golden.jsonl\\x00.txt"\npipeline: {python: "pipe:answer"}\n', "golden", 1),
    "workdir": (
        'golden: golden.jsonl\npipeline:\n  python: pipe:answer\n  workdir: "a\\x00b"\n',
        "pipeline.workdir",
        4,
    ),
    "predictions": ('golden: golden.jsonl\npipeline: {predictions: "p\\x00.jsonl"}\n', "pipeline.predictions", 2),
    "env value": (
        'golden: golden.jsonl\npipeline:\n  python: pipe:answer\n  env: {X: "a\\x00b"}\n',
        "pipeline.env.X",
        4,
    ),
    "env key": (
        'golden: golden.jsonl\npipeline:\n  python: pipe:answer\n  env: {"X\\x00": b}\n',
        "pipeline.env.X\\x00",
        4,
    ),
    "command": ('golden: golden.jsonl\npipeline: {command: "echo \\x00"}\n', "pipeline.command", 2),
    "list item": (
        'golden: golden.jsonl\npipeline: {python: "pipe:answer"}\nmetrics: [mrr, "f\\x00"]\n',
        "metrics.1",
        3,
    ),
    "judge option": (
        'golden: golden.jsonl\npipeline: {python: "pipe:answer"}\njudge:\n  name: llm\n  base_url: "http://x\\x00"\n',
        "judge.base_url",
        5,
    ),
}


@pytest.fixture
def side(tmp_path):
    write_jsonl(tmp_path / "golden.jsonl", [{"id": "q1", "question": "q", "expected_doc_ids": ["d1"]}])
    (tmp_path / "pipe.py").write_text("def answer(case):\n    return {'answer': 'a', 'retrieved': []}\n")
    return tmp_path


@pytest.mark.parametrize("name", CONFIGS)
def test_a_nul_byte_is_refused_with_its_key_and_line_by_load_validate_and_run(side, name):
    text, key, line = CONFIGS[name]
    path = side / "rag-gate.yml"
    path.write_text(text)
    expected = f"{path}:{line}: {key}: {NUL_MESSAGE}"
    with pytest.raises(InputError) as exc:
        load_config(path)
    assert expected in str(exc.value).splitlines()
    validated = CliRunner().invoke(main, ["validate", str(path)])
    assert validated.exit_code == 2 and expected in validated.stderr.splitlines()
    ran = CliRunner().invoke(main, ["run", "--config", str(path), "--out", str(side / "out"), "--no-progress"])
    assert ran.exit_code == 2 and f"rag-gate: error: {expected}" in ran.stderr.splitlines()
    assert "internal error" not in ran.stderr and not (side / "out" / "predictions.jsonl").exists()


def test_nul_bytes_finds_values_and_keys_anywhere():
    data = {"a": ["x", "y\x00"], "b\x00": {"c": 1}, "d": {"e": {"f": "\x00"}}, "g": "fine"}
    assert sorted(nul_bytes(data), key=str) == [("a", 1), ("b\x00",), ("d", "e", "f")]


def test_a_nul_byte_in_a_promptfoo_file_name_is_bad_input(tmp_path):
    source = tmp_path / "promptfooconfig.yaml"
    source.write_text('tests:\n  - "file://tests\\x00.yaml"\n')
    with pytest.raises(InputError, match="a file:// name holds a NUL byte"):
        list(promptfoo.tests(source))


def test_a_nul_byte_that_reaches_an_os_call_unchecked_exits_2_not_internal_error():
    @click.command()
    @handle_errors
    def opens() -> None:
        os.stat("a\x00b")  # the OS call refuses it: ValueError: embedded null byte

    result = CliRunner().invoke(opens)
    assert result.exit_code == 2
    assert result.stderr == f"rag-gate: error: {NUL_INPUT} (re-run with --debug to see where)\n"
