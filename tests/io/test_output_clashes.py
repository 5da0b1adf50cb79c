"""Outputs of one command never overwrite each other (gate.files.refuse_output_clashes), checked before any work."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from helpers import write_jsonl

from gate.cli.main import main
from gate.errors import InputError
from gate.files import refuse_output_clashes


def sides(tmp_path):
    """A golden set of 8 cases and two predictions files (the head answers 3 of them wrongly): the compare args."""
    golden, base, head = [], [], []
    for i in range(8):
        doc = {"id": f"d{i}", "text": f"The bridge number {i} of Arlen was built in {1800 + i}."}
        golden.append({"id": f"q{i}", "question": f"When was bridge {i} built?", "expected_doc_ids": [f"d{i}"],
                       "reference_answers": [str(1800 + i)]})  # fmt: skip
        base.append({"id": f"q{i}", "answer": f"It was built in {1800 + i}.", "retrieved": [doc]})
        head.append({**base[-1], "answer": "It was built in 1700." if i < 3 else base[-1]["answer"]})
    write_jsonl(tmp_path / "golden.jsonl", golden)
    write_jsonl(tmp_path / "base.jsonl", base)
    write_jsonl(tmp_path / "head.jsonl", head)
    return [
        "compare",
        "--golden",
        str(tmp_path / "golden.jsonl"),
        str(tmp_path / "base.jsonl"),
        str(tmp_path / "head.jsonl"),
    ]


def test_two_outputs_that_name_the_same_file_are_refused_naming_both(tmp_path):
    out = tmp_path / "rep"
    with pytest.raises(InputError) as exc:
        refuse_output_clashes({"--out rep (report.json)": out / "report.json", "--junit x": out / "report.json"})
    assert str(exc.value) == (
        f"--out rep (report.json) and --junit x name the same file ({out / 'report.json'}); one would overwrite "
        "the other: choose another path"
    )


def test_relative_paths_and_symlinked_folders_are_followed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rep").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "rep")
    with pytest.raises(InputError, match="name the same file"):
        refuse_output_clashes({"a": tmp_path / "rep" / "comment.md", "b": "sub/../rep/comment.md"})
    with pytest.raises(InputError, match="name the same file"):
        refuse_output_clashes({"a": tmp_path / "rep" / "comment.md", "b": "alias/comment.md"})
    (tmp_path / "rep" / "link.xml").symlink_to(tmp_path / "rep" / "report.html")  # the file itself is a link
    with pytest.raises(InputError, match="name the same file"):
        refuse_output_clashes({"a": "rep/report.html", "b": "rep/link.xml"})
    refuse_output_clashes({"a": "rep/report.html", "b": "rep/junit.xml", "c": None})  # distinct: no error


def test_a_file_inside_an_output_folder_and_nested_folders_are_refused(tmp_path):
    folders = {"--out rep (base/)": tmp_path / "rep" / "base"}
    with pytest.raises(InputError) as exc:
        refuse_output_clashes({"--junit j": tmp_path / "rep" / "base" / "scores.jsonl"}, folders)
    assert str(exc.value) == (
        f"--junit j ({tmp_path / 'rep' / 'base' / 'scores.jsonl'}) lies in --out rep (base/) "
        f"({tmp_path / 'rep' / 'base'}), a folder the same command writes: choose another path"
    )
    with pytest.raises(InputError, match="name the same file"):
        refuse_output_clashes({"--junit j": tmp_path / "rep" / "base"}, folders)  # the folder itself
    with pytest.raises(InputError, match="lies in"):
        refuse_output_clashes({}, {**folders, "--cache c": tmp_path / "rep"})
    refuse_output_clashes({"--junit j": tmp_path / "rep" / "junit.xml"}, folders)  # beside it: fine


def test_an_output_that_names_an_input_is_refused(tmp_path):
    source = tmp_path / "base.jsonl"
    source.write_text("{}\n")
    os.link(source, tmp_path / "hard.jsonl")
    for named in (source, tmp_path / "hard.jsonl"):  # the same name, or a hard link to the same file
        with pytest.raises(InputError) as exc:
            refuse_output_clashes({"--junit j": named}, inputs={"BASE": source})
        assert str(exc.value) == f"--junit j names the input BASE ({source}); writing it would replace the input: " + (
            "choose another path"
        )


@pytest.mark.parametrize("name", ["report.json", "comment.md", "report.html", "metrics.png", "pairwise.jsonl"])
def test_compare_refuses_junit_onto_its_own_outputs_before_any_work(tmp_path, name):
    out = tmp_path / "rep"
    result = CliRunner().invoke(main, [*sides(tmp_path), "--out", str(out), "--junit", str(out / name)])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"rag-gate: error: --out {out} ({name}) and --junit {out / name} name the same file ({out / name}); one "
        "would overwrite the other: choose another path\n"
    )
    assert not out.exists()  # nothing written, not even the folder


def test_compare_refuses_junit_onto_its_inputs_and_into_its_side_folders(tmp_path):
    args = [*sides(tmp_path), "--out"]
    head = tmp_path / "head.jsonl"
    before = head.read_bytes()
    result = CliRunner().invoke(main, [*args, str(tmp_path / "rep"), "--junit", str(head)])
    assert result.exit_code == 2 and f"names the input HEAD ({head})" in result.stderr
    assert head.read_bytes() == before
    result = CliRunner().invoke(main, [*args, str(tmp_path / "rep"), "--junit", str(tmp_path / "rep/head/x.xml")])
    assert result.exit_code == 2 and "a folder the same command writes" in result.stderr


def test_compare_with_distinct_outputs_still_writes_both(tmp_path):
    out = tmp_path / "rep"
    result = CliRunner().invoke(
        main, [*sides(tmp_path), "--out", str(out), "--junit", str(out / "junit.xml"), "--jobs", "1"]
    )
    assert result.exit_code in (0, 1), result.output
    verdict = json.loads((out / "report.json").read_text())["verdict"]
    assert result.exit_code == (verdict == "fail")
    assert (out / "junit.xml").read_text().startswith("<?xml")


def test_label_refuses_an_out_file_its_own_page_would_replace(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    result = CliRunner().invoke(main, ["label", str(run), "--out", str(tmp_path / "rows.html")])
    assert result.exit_code == 2
    assert "name the same file" in result.stderr and "the page beside --out" in result.stderr
    assert not (tmp_path / "rows.html").exists()
