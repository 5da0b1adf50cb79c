"""gate.files: atomic replacement, deletion that never follows links, output paths kept inside the checkout."""

from __future__ import annotations

import os

import pytest

from gate.errors import EvaluationError, InputError
from gate.files import (
    archive_previous,
    atomic_writer,
    contained_dir,
    current_umask,
    refuse_inputs_inside,
    remove_tree,
    write_text_atomic,
)


def test_atomic_writer_keeps_the_old_file_when_the_block_fails(tmp_path):
    target = tmp_path / "predictions.jsonl"
    target.write_text("old row 1\nold row 2\n")
    with pytest.raises(KeyboardInterrupt), atomic_writer(target) as handle:
        handle.write("new row 1\n")
        raise KeyboardInterrupt
    assert target.read_text() == "old row 1\nold row 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predictions.jsonl"]  # no temporary file left


def test_atomic_writer_turns_os_errors_into_evaluation_errors(tmp_path):
    with pytest.raises(EvaluationError, match=r"missing/x.json: cannot write"):
        write_text_atomic(tmp_path / "missing" / "x.json", "{}")


def test_atomic_write_replaces_a_planted_symlink_instead_of_following_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "out" / "summary.json"
    link.parent.mkdir()
    link.symlink_to(victim)
    write_text_atomic(link, "{}\n")
    assert victim.read_text() == "precious"
    assert not link.is_symlink() and link.read_text() == "{}\n"


def test_remove_tree_unlinks_links_and_never_deletes_their_targets(tmp_path):
    victim = tmp_path / "victim"
    (victim / "base").mkdir(parents=True)
    (victim / "base" / "precious.txt").write_text("keep")
    out = tmp_path / "repo" / "out"
    out.mkdir(parents=True)
    (out / "base").symlink_to(victim / "base")  # a link to a directory
    (out / "head").mkdir()
    (out / "head" / "inner").symlink_to(victim)  # a link inside a directory that is removed
    (out / "file").symlink_to(victim / "base" / "precious.txt")
    for name in ("base", "head", "file", "missing"):
        remove_tree(out / name)
    assert sorted(os.listdir(out)) == []
    assert (victim / "base" / "precious.txt").read_text() == "keep"


def test_contained_dir_refuses_a_symlink_out_of_the_checkout(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "victim").mkdir()
    (repo / "rag-gate-out").symlink_to("../victim")
    with pytest.raises(InputError, match=r"rag-gate-out: resolves through a symbolic link to .*victim, outside"):
        contained_dir(repo / "rag-gate-out", repo, "--out-dir rag-gate-out")
    (repo / "sub").mkdir()
    (repo / "sub" / "deep").symlink_to(tmp_path / "victim")  # an absolute link, deeper down
    with pytest.raises(InputError, match=r"outside the checkout"):
        contained_dir(repo / "sub" / "deep" / "out", repo, "--out-dir sub/deep/out")
    # a directory named outside the checkout is the caller's explicit choice
    assert contained_dir(repo / ".." / "elsewhere", repo, "x") == (tmp_path / "elsewhere").resolve()
    (repo / "inside").mkdir()
    (repo / "alias").symlink_to("inside")  # a link that stays inside is fine
    assert contained_dir(repo / "alias" / "x", repo, "x") == (repo / "inside" / "x").resolve()
    assert contained_dir(repo / "new" / "dir", repo, "x") == (repo / "new" / "dir").resolve()


def test_refuse_inputs_inside(tmp_path):
    inputs = {"golden": tmp_path / "eval" / "golden.jsonl", "pipeline.predictions": None}
    for out in (tmp_path / "eval", tmp_path, tmp_path / "eval" / ".." / "eval"):
        with pytest.raises(InputError, match=r"holds the run's own input \(golden: "):
            refuse_inputs_inside(out, inputs, "--out x")
    refuse_inputs_inside(tmp_path / "eval" / "run", inputs, "--out x")  # a subdirectory of the input's folder
    refuse_inputs_inside(tmp_path / "runs", inputs, "--out x")


def test_archive_previous_numbers_never_overwrite(tmp_path):
    names = ("predictions.jsonl", "manifest.json")
    (tmp_path / "predictions.previous-4.jsonl").write_text("older")
    (tmp_path / "predictions.jsonl").write_text("p")
    (tmp_path / "manifest.json").write_text("m")
    moved = archive_previous(tmp_path, names)
    assert [p.name for p in moved] == ["predictions.previous-5.jsonl", "manifest.previous-5.json"]
    assert (tmp_path / "predictions.previous-4.jsonl").read_text() == "older"
    assert archive_previous(tmp_path, names) == []


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_atomic_writer_gives_the_mode_an_ordinary_open_gives(tmp_path, umask, mode):
    """0666 less the umask (mkstemp alone gives 0600: unreadable by the job's next steps, which run as another user)."""
    old = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "comment.md", "x")
        with open(tmp_path / "plain.txt", "w") as handle:  # the oracle: what open() gives under the same umask
            handle.write("x")
    finally:
        os.umask(old)
    assert (tmp_path / "comment.md").stat().st_mode & 0o777 == mode
    assert (tmp_path / "plain.txt").stat().st_mode & 0o777 == mode


def test_current_umask_reads_without_changing_it():
    old = os.umask(0o037)
    try:
        assert current_umask() == 0o037
        assert current_umask() == 0o037
    finally:
        os.umask(old)
