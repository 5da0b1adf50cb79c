"""gate.yamlsafe on its own: the limits it is given, the line of every key, what a setting cannot hold."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gate.errors import InputError
from gate.jsonl import number_problems
from gate.yamlsafe import LOADER, Problems, check_yaml_size, key_lines, non_json

PATH = Path("x.yml")


def test_check_yaml_size_counts_an_alias_as_the_values_it_stands_for():
    text = "a: &a [1, 2, 3, 4]\nb: [*a, *a]\n"  # b stands for 2 × 5 values
    check_yaml_size(text, PATH, max_nodes=100, max_depth=5)
    with pytest.raises(InputError, match=r"^x.yml:2: more than 12 values once YAML aliases are expanded"):
        check_yaml_size(text, PATH, max_nodes=12, max_depth=5)


def test_check_yaml_size_refuses_nesting_deeper_than_its_limit_with_the_line():
    text = "a:\n  b:\n    c: [1]\n"
    check_yaml_size(text, PATH, max_nodes=100, max_depth=4)
    with pytest.raises(InputError, match=r"^x.yml:3: nested deeper than 3 levels$"):
        check_yaml_size(text, PATH, max_nodes=100, max_depth=3)


def test_key_lines_give_each_key_path_its_line_and_report_duplicates():
    text = "a: 1\nb:\n  - x\n  - y\na: 2\n"
    problems = Problems(PATH)
    lines = dict(key_lines(yaml.compose(text, Loader=LOADER), problems))
    assert lines == {("a",): 5, ("b",): 2, ("b", 0): 3, ("b", 1): 4}
    assert problems.duplicates == {("a",)}
    problems.lines = lines
    with pytest.raises(InputError, match=r"^x.yml:5: a: duplicate key \(first on line 1\)$"):
        problems.raise_if_any()


def test_number_problems_and_non_json_name_what_a_setting_cannot_hold():
    text = "x: .nan\non: 1\nwhen: 2024-01-01\nok: [1, 'two', null, 9007199254740991]\nbig: [-9007199254740992]\n"
    data = yaml.load(text, Loader=LOADER)  # noqa: S506 - a safe loader
    found = list(number_problems(data))
    assert [keys for keys, _ in found] == [("x",), ("big", 0)]  # 2**53 - 1 is the largest integer taken
    assert found[0][1] == "must be a finite number" and found[1][1].startswith("-9007199254740992 is beyond ±9007")
    found = [
        (keys, line, message.split(",")[0]) for keys, _, line, message in non_json(yaml.compose(text, Loader=LOADER))
    ]
    assert found == [
        (("on",), 2, "the key `on` is read by YAML as a boolean"),
        (("when",), 3, "`2024-01-01` is read by YAML as a date or timestamp"),
    ]
