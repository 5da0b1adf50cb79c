"""Pipeline wiring errors name the config line, the cwd and the sys.path searched, with real workers."""

from __future__ import annotations

import textwrap

import pytest
from helpers import write_jsonl

from gate.config import load_config
from gate.errors import EvaluationError, InputError
from gate.golden import load_golden
from gate.pipeline import run_python

RAG = """
NOT_A_FUNCTION = 3

def answer(case, *, top_k=5):
    if case["id"] == "typeerror":
        raise TypeError("bad input inside the function")
    return {"answer": "x" * top_k, "retrieved": []}
"""


@pytest.fixture
def side(tmp_path):
    (tmp_path / "rag.py").write_text(RAG)
    write_jsonl(tmp_path / "golden.jsonl", [{"id": "a", "question": "q"}, {"id": "typeerror", "question": "q"}])
    return tmp_path


def _run(side, target: str, options: str = "{}"):
    path = side / "rag-gate.yml"
    path.write_text(f"golden: golden.jsonl\npipeline:\n  python: {target}\n  options: {options}\n  retries: 0\n")
    config = load_config(path)
    got = {}
    run_python(config.pipeline, [(c, 0) for c in load_golden(config.golden)], lambda p: got.setdefault(p.id, p))
    return got


@pytest.mark.parametrize(
    "target, reason",
    [
        ("no_such_module:answer", "No module named 'no_such_module'"),
        ("rag:nothing", "'nothing' in {side}/rag.py is not defined"),
        ("rag:NOT_A_FUNCTION", "'NOT_A_FUNCTION' in {side}/rag.py is a int, not a function"),
    ],
)
def test_a_target_that_is_not_there_is_bad_input_naming_line_cwd_and_sys_path(side, target, reason):
    with pytest.raises(InputError) as info:
        _run(side, target)
    message = str(info.value)
    prefix = f"pipeline {target} ({side / 'rag-gate.yml'}:3): cannot import {target}: {reason.format(side=side)} "
    assert message.startswith(prefix), message
    assert f"(searched from cwd {side} on sys.path [" in message and message.count(f"'{side}'") == 1


def test_options_the_function_does_not_take_are_bad_input(side):
    with pytest.raises(InputError) as info:
        _run(side, "rag:answer", "{top_kk: 3}")
    assert str(info.value) == (
        f"pipeline rag:answer ({side / 'rag-gate.yml'}:3): rag:answer: answer() got an unexpected keyword argument "
        "'top_kk' (check pipeline.options)"
    )


def test_a_type_error_inside_the_function_stays_a_failed_case(side):
    got = _run(side, "rag:answer", "{top_k: 2}")
    assert got["a"].answer == "xx" and got["a"].error is None
    assert got["typeerror"].error.startswith("TypeError: bad input inside the function (rag.py:")


def test_a_module_whose_own_code_fails_is_an_evaluation_error(side):
    (side / "broken.py").write_text(
        textwrap.dedent("""
        import a_dependency_that_is_not_installed
        def answer(case):
            return {}
    """)
    )
    with pytest.raises(EvaluationError) as info:
        _run(side, "broken:answer")
    assert not isinstance(info.value, InputError)
    message = str(info.value)
    assert (
        "cannot import broken:answer: ModuleNotFoundError(\"No module named 'a_dependency_that_is_not_installed'\")"
        in message
    )
    assert f"(searched from cwd {side} on sys.path [" in message
