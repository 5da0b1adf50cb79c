import pytest
from helpers import write_jsonl

from gate.errors import InputError
from gate.golden import load_golden
from gate.predictions import MISSING, align, load_predictions, scan_predictions


def pred(i, repeat=0, **kw):
    return {"id": i, "repeat": repeat, "answer": "a", "retrieved": [{"id": "d1", "text": "t"}], "latency_ms": 5, **kw}


def test_align_fills_missing_rows_with_errors(tmp_path, tiny_golden):
    path = write_jsonl(tmp_path / "p.jsonl", [pred("q1"), pred("q2"), pred("q1", 1)])
    table = align(load_golden(tiny_golden), load_predictions(path), path, 2)
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


# ------------------------------------------------------------------ repeats: stated, or inferred when every case agrees
def test_inferred_repeats_need_every_case_of_the_file_to_agree(tmp_path, tiny_golden):
    """One stray ``repeat: 3`` among cases run once would make R = 4 and 3 missing rows per case: refused instead."""
    rows = [pred("q1"), pred("q2"), pred("q3"), pred("q2", 3), pred("q4")]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    golden = load_golden(tiny_golden)
    message = (
        f"{path}:4: repeat: 3 on this line makes 4 repeats per case, but 4 of the file's 4 cases lack some of "
        "repeats 0–3 ('q1' has only repeat 0, 'q2' has repeats 0, 3, 'q3' has only repeat 0, …): give every case a "
        "row for each repeat (a failed call is a row with `error`), or remove the stray rows"
    )
    for table in (lambda: align(golden, load_predictions(path), path), lambda: scan_predictions(path).index(golden)):
        with pytest.raises(InputError) as info:
            table()
        assert str(info.value) == message
    assert len(align(golden, load_predictions(path), path, 4)) == 16  # stated repeats: the missing rows are errors
    complete = write_jsonl(tmp_path / "c.jsonl", [pred(i, r) for i in ("q1", "q2") for r in range(3)])
    assert scan_predictions(complete).index(golden).repeats == 3  # cases absent from the file are missing rows


def test_compare_refuses_a_stray_repeat_in_a_predictions_file_with_exit_2(tmp_path, tiny_golden):
    from click.testing import CliRunner

    from gate.cli import main

    ids = ("q1", "q2", "q3", "q4")
    write_jsonl(tmp_path / "base.jsonl", [pred(i) for i in ids])
    write_jsonl(tmp_path / "head.jsonl", [pred(i) for i in ids] + [pred("q3", 3)])
    args = ["compare", "--golden", tiny_golden, tmp_path / "base.jsonl", tmp_path / "head.jsonl"]
    result = CliRunner().invoke(main, [*map(str, args), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"rag-gate: error: {tmp_path / 'head.jsonl'}:5: repeat: 3 on this line makes 4 ")
    assert "4 of the file's 4 cases lack some of repeats 0–3 ('q1' has only repeat 0, 'q2' has" in result.stderr


@pytest.mark.parametrize("stated", ["repeats: 2\n", ""])
def test_a_precomputed_row_beyond_the_configs_repeats_is_bad_input_in_validate_and_run(tmp_path, tiny_golden, stated):
    """``pipeline: {predictions: FILE}``: a row the run would leave out without a word is named instead."""
    from click.testing import CliRunner

    from gate.cli import main

    repeats = 2 if stated else 1
    rows = [pred(i, r) for i in ("q1", "q2") for r in range(repeats)]
    write_jsonl(tmp_path / "p.jsonl", [*rows, pred("q1", repeats)])
    config = tmp_path / "rag-gate.yml"
    config.write_text(f"golden: golden.jsonl\npipeline: {{predictions: p.jsonl}}\n{stated}")
    expected = (
        f"{tmp_path / 'p.jsonl'}:{2 * repeats + 1}: repeat: {repeats} ≥ repeats ({repeats}, the config's `repeats:` "
        "(default 1) or --repeats: set it to the file's repeats, or remove the row)"
    )
    result = CliRunner().invoke(main, ["validate", str(config)])
    assert result.exit_code == 2 and result.stderr.splitlines()[0] == expected, result.output
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and result.stderr.strip() == f"rag-gate: error: {expected}", result.output
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--out", str(tmp_path / "r"), "--repeats", "3"])
    assert result.exit_code == 0, result.output  # the missing rows of repeat 2 (and 1) are the run's errors


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
