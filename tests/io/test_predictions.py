import pytest
from helpers import write_jsonl

from gate.errors import InputError
from gate.golden import load_golden
from gate.predictions import MISSING, align, load_predictions, scan_predictions


def pred(i, repeat=0, **kw):
    return {"id": i, "repeat": repeat, "answer": "a", "retrieved": [{"id": "d1", "text": "t"}], "latency_ms": 5, **kw}


def test_align_fills_missing_rows_with_errors(tmp_path, tiny_golden):
    path = write_jsonl(tmp_path / "p.jsonl", [pred("q1"), pred("q2"), pred("q1", 1)])
    table = align(load_golden(tiny_golden), load_predictions(path), path)
    assert len(table) == 8  # 4 cases × 2 repeats
    assert table[("q1", 1)].error is None
    assert table[("q3", 0)].error == MISSING and table[("q2", 1)].error == MISSING


@pytest.mark.parametrize(
    "rows, message",
    [
        ([pred("q1"), pred("q1")], "p.jsonl:2: id: duplicate prediction for id 'q1' repeat 0 (first on line 1)"),
        ([{"id": "q1", "retrieved": []}], "p.jsonl:1: answer: required field is missing"),
        ([pred("q1", retrieved=[{"text": "x"}])], "p.jsonl:1: retrieved.0.id: required field is missing"),
        ([pred("q1", latency_ms="fast")], "p.jsonl:1: latency_ms: must be a number or null, got str"),
        ([pred("q1", latency_ms=-1)], "p.jsonl:1: latency_ms: -1 is less than the minimum of 0"),
        ([pred("zz")], "p.jsonl:1: id: 'zz' is not in the golden set"),
    ],
)
def test_bad_predictions(tmp_path, tiny_golden, rows, message):
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    with pytest.raises(InputError) as info:
        align(load_golden(tiny_golden), load_predictions(path), path)
    assert str(info.value) == str(tmp_path / message)


def test_the_streaming_reader_refuses_a_duplicate_row_like_the_loader(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [pred("q1"), pred("q2"), pred("q1", 1), pred("q2")])
    with pytest.raises(InputError) as info:
        scan_predictions(path)
    message = "p.jsonl:4: id: duplicate prediction for id 'q2' repeat 0 (first on line 2)"
    assert str(info.value) == str(tmp_path / message)


def test_error_rows_need_no_answer(tmp_path, tiny_golden):
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "q1", "error": "timeout"}])
    (p,) = load_predictions(path)
    assert p.error == "timeout" and p.answer == "" and p.latency_ms is None


# ------------------------------------------------------------------ measured values have bounds


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("latency_ms", "1e308", "latency_ms: 1e+308 is greater than the maximum of 86400000"),
        ("latency_ms", "86400000.5", "latency_ms: 86400000.5 is greater than the maximum of 86400000"),
        ("warmup_ms", "1e12", "warmup_ms: 1000000000000.0 is greater than the maximum of 86400000"),
        ("cost_usd", "1e6", "cost_usd: 1000000.0 is greater than the maximum of 10000"),
        (
            "latency_ms",
            "1e999",
            "latency_ms: 1e999 is not a finite number (it overflows a 64-bit float: at most ±1.8e308)",
        ),  # noqa: E501
        ("cost_usd", "-1e-9", "cost_usd: -1e-09 is less than the minimum of 0"),
    ],
)
def test_absurd_or_non_finite_latency_and_cost_are_refused_naming_file_line_field(tmp_path, field, value, message):
    from click.testing import CliRunner

    from gate.cli import main

    write_jsonl(tmp_path / "golden.jsonl", [{"id": "q1", "question": "Q?"}, {"id": "q2", "question": "R?"}])
    good = '{"id": "q1", "answer": "a", "latency_ms": 86400000, "cost_usd": 10000}\n'  # the bounds themselves: valid
    (tmp_path / "base.jsonl").write_text(good + '{"id": "q2", "answer": "b"}\n')
    (tmp_path / "head.jsonl").write_text(good + f'{{"id": "q2", "answer": "b", "{field}": {value}}}\n')
    args = ["compare", "--golden", tmp_path / "golden.jsonl", tmp_path / "base.jsonl", tmp_path / "head.jsonl"]
    result = CliRunner().invoke(main, [*map(str, args), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"rag-gate: error: {tmp_path / 'head.jsonl'}:2: {message}"
    assert not (tmp_path / "out" / "report.json").exists()
    assert load_predictions(tmp_path / "base.jsonl")[0].latency_ms == 86_400_000
