import pytest
from helpers import write_jsonl

from gate.errors import InputError
from gate.golden import check_golden, load_golden, shard


def test_loads_cases_in_order(tiny_golden):
    cases = load_golden(tiny_golden)
    assert [c.id for c in cases] == ["q1", "q2", "q3", "q4"]
    assert cases[2].reference_answers == ("William Shakespeare", "Shakespeare")
    assert cases[3].out_of_domain and cases[3].expected_doc_ids == ()
    assert cases[1].line == 2


@pytest.mark.parametrize(
    "rows, message",
    [
        (['{"id": "a", "question": "x"}', '{"id": "b", "question": '], "g.jsonl:2: invalid JSON"),
        ([{"id": "a"}], "g.jsonl:1: question: required field is missing"),
        (
            [{"id": "a", "question": "x", "expected_doc_ids": "d1"}],
            "g.jsonl:1: expected_doc_ids: must be a list, got str",
        ),
        (
            [{"id": "a", "question": "x", "out_of_domain": "yes"}],
            "g.jsonl:1: out_of_domain: must be true or false, got str",
        ),
        (
            [{"id": "a", "question": "x"}, {"id": "a", "question": "y"}],
            "g.jsonl:2: id: duplicate id 'a' (first on line 1)",
        ),
        ([{"id": "a", "question": "x", "expected_docs": []}], "g.jsonl:1: expected_docs: unknown field"),
        (
            [{"id": "a", "question": "x", "out_of_domain": True, "expected_doc_ids": ["d"]}],
            "g.jsonl:1: expected_doc_ids: must be empty for an out-of-domain case",
        ),
        ([{"id": 7, "question": "x"}], "g.jsonl:1: id: must be a string, got int"),
        (["[1, 2]"], "g.jsonl:1: expected a JSON object, got list"),
        ([], "g.jsonl: the golden set is empty"),
    ],
)
def test_bad_golden_sets_name_file_line_and_field(tmp_path, rows, message):
    path = write_jsonl(tmp_path / "g.jsonl", rows)
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert str(info.value).startswith(str(tmp_path / message))
    assert "\n" not in str(info.value)


def test_check_golden_collects_every_problem(tmp_path):
    path = write_jsonl(
        tmp_path / "g.jsonl",
        [
            {"id": "a", "question": "x"},
            "{oops",
            {"id": "a", "question": "y"},
            {"id": "c"},
            {"id": "d", "question": "z"},
        ],
    )
    cases, problems = check_golden(path)
    assert [c.id for c in cases] == ["a", "d"]
    assert [p.split(": ")[0].rsplit(":", 1)[1] for p in problems] == ["2", "3", "4"]


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_golden(tmp_path / "nope.jsonl")


def test_shards_partition_the_set(tiny_golden):
    cases = load_golden(tiny_golden)
    parts = [shard(cases, i, 3) for i in (1, 2, 3)]
    assert sorted(c.id for p in parts for c in p) == sorted(c.id for c in cases)
    assert [c.id for c in parts[0]] == ["q1", "q4"]
    with pytest.raises(InputError):
        shard(cases, 4, 3)


def test_encoding_problems_name_the_line(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_bytes("\ufeff".encode() + b'{"id": "a", "question": "x"}\n{"id": "b", "question": "caf\xe9"}\n')
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert str(info.value) == f"{path}:2: not UTF-8 text (invalid continuation byte at column 29)"
    path.write_bytes("\ufeff".encode() + b'{"id": "a", "question": "x"}\n')  # a BOM is fine
    assert [c.id for c in load_golden(path)] == ["a"]


def test_a_key_named_twice_in_a_golden_line_is_refused(tmp_path):
    """JSON leaves duplicate names to the reader (json.loads keeps the last): a golden case must not be ambiguous."""
    path = tmp_path / "golden.jsonl"
    path.write_text('{"id": "a", "question": "q"}\n{"id": "b", "question": "q", "id": "c"}\n')
    with pytest.raises(InputError, match=r"golden.jsonl:2: id: duplicate key"):
        load_golden(path)
    cases, problems = check_golden(path)
    assert [c.id for c in cases] == ["a"] and len(problems) == 1 and "golden.jsonl:2: id: duplicate key" in problems[0]
    nested = tmp_path / "nested.jsonl"
    nested.write_text('{"id": "a", "question": "q", "metadata": {"k": 1, "k": 2}}\n')
    with pytest.raises(InputError, match=r"nested.jsonl:1: k: duplicate key"):
        load_golden(nested)
