"""Strict JSON reading: non-finite numbers and deep nesting are bad input with a location, never a crash."""

from __future__ import annotations

import json
import time

import pytest
from conftest import write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.errors import InputError
from gate.golden import check_golden, load_golden
from gate.jsonl import MAX_DEPTH, parse_json, read_jsonl
from gate.predictions import load_predictions

CASE = '{"id": "q1", "question": "Where?", "metadata": {"x": %s}}'
PRED = '{"id": "q1", "answer": "a", "retrieved": [{"id": "d1", "metadata": {"x": %s}}]}'


def nested(kinds: list[bool]) -> str:
    """Arrays (True) and objects (False) nested in the given order, innermost empty."""
    opening = "".join("[" if is_list else '{"k": ' for is_list in kinds)
    closing = "".join("]" if is_list else "}" for is_list in reversed(kinds))
    inner = "" if kinds and kinds[-1] else "1"
    return opening + inner + closing if kinds else "1"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(min_value=1, max_value=200_000), lists=st.booleans())
def test_any_nesting_depth_gives_a_value_or_input_error(tmp_path, depth, lists):
    text = CASE % nested([lists] * depth)
    path = tmp_path / "golden.jsonl"
    path.write_text('{"id": "q0", "question": "ok"}\n' + text + "\n")
    total = depth + 2  # the case object and its metadata object hold the nested value
    if total <= MAX_DEPTH:
        assert [c.id for c in load_golden(path)] == ["q0", "q1"]
    else:
        with pytest.raises(InputError, match=rf"golden.jsonl:2: JSON nested deeper than {MAX_DEPTH} levels"):
            load_golden(path)
        _, problems = check_golden(path)  # `rag-gate validate` collects it as one problem
        assert problems == [f"{path}:2: JSON nested deeper than {MAX_DEPTH} levels"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.booleans(), min_size=1, max_size=3000))
def test_mixed_nesting_in_predictions_is_bounded(tmp_path, kinds):
    path = tmp_path / "p.jsonl"
    path.write_text(PRED % nested(kinds) + "\n")
    if len(kinds) + 4 <= MAX_DEPTH:  # row, retrieved list, chunk, metadata
        assert load_predictions(path)[0].id == "q1"
    else:
        with pytest.raises(InputError, match=r"p.jsonl:1: JSON nested deeper than"):
            load_predictions(path)


def test_a_100k_deep_line_is_rejected_fast(tmp_path):
    path = tmp_path / "golden.jsonl"
    path.write_text(CASE % ("[" * 100_000 + "]" * 100_000) + "\n")
    started = time.perf_counter()
    with pytest.raises(InputError, match=r"golden.jsonl:1: JSON nested deeper"):
        load_golden(path)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "NaN"])
@pytest.mark.parametrize(
    "row, field",
    [
        ('{"id": "q1", "answer": "a", "latency_ms": %s}', "latency_ms"),
        ('{"id": "q1", "answer": "a", "cost_usd": %s}', "cost_usd"),
        ('{"id": "q1", "answer": "a", "retrieved": [{"id": "d1", "score": %s}]}', "retrieved.0.score"),
    ],
)
def test_non_finite_literals_name_line_and_field(tmp_path, literal, row, field):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "q0", "answer": "a"}\n\n' + row % literal + "\n")
    with pytest.raises(InputError) as info:
        load_predictions(path)
    assert (
        str(info.value) == f"{path}:3: {field}: {literal} is not a valid JSON number (only finite numbers are allowed)"
    )


@pytest.mark.parametrize(
    "row, message",
    [
        ({"latency_ms": 1e999}, "latency_ms: must be a finite number, got inf"),
        ({"cost_usd": 1e999}, "cost_usd: must be a finite number, got inf"),
        ({"retrieved": [{"id": "d", "score": -1e999}]}, "retrieved.0.score: must be a finite number, got -inf"),
    ],
)
def test_overflowing_numbers_are_rejected(tmp_path, row, message):
    # 1e999 is valid JSON syntax but parses to infinity
    text = json.dumps({"id": "q1", "answer": "a"} | row).replace("Infinity", "1e999")
    path = write_jsonl(tmp_path / "p.jsonl", [text])
    with pytest.raises(InputError) as info:
        load_predictions(path)
    assert str(info.value) == f"{path}:1: {message}"


def test_parse_json_whole_document_reports_parser_line():
    with pytest.raises(InputError, match=r"^m.json:3: invalid JSON: Expecting"):
        parse_json('{\n  "a": 1,\n  oops\n}', "m.json")
    assert parse_json('{"a": [1, 2.5, null]}', "m.json") == {"a": [1, 2.5, None]}


def test_problems_mode_skips_bad_lines_and_keeps_good_ones(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"a": NaN}\n' + "[" * 5000 + "]" * 5000 + '\n{"a": 2}\n')
    problems: list[str] = []
    assert [n for n, _ in read_jsonl(path, problems)] == [1, 4]
    assert problems == [
        f"{path}:2: a: NaN is not a valid JSON number (only finite numbers are allowed)",
        f"{path}:3: JSON nested deeper than {MAX_DEPTH} levels",
    ]
