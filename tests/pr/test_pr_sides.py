"""gate.pr.sides and gate.pr.envs, DESIGN §8 "Each side in its own world": each side is set up and evaluated in its
own environment, built from its own commit; every rule "as in the base commit" reads git objects, never a path a PR
can redirect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers import git

import gate
from gate.errors import InputError
from gate.pr import envs
from gate.pr.flow import run_pr
from gate.pr.history_store import read
from gate.pr.run import PrOptions
from gate.pr.trend import history_store

PIPE = """import sys
import dep

def answer(case):
    return {"answer": f"{dep.VERSION} {sys.prefix}", "retrieved": [{"id": "d1", "text": "the one document"}]}
"""
# installs the dependency of this commit (its dep.py) into the Python on PATH: the side's environment
SETUP = "python -c \"import shutil, sysconfig; shutil.copy('dep.py', sysconfig.get_path('purelib'))\""
GOLDEN = [{"id": f"q{i}", "question": f"question {i}?", "expected_doc_ids": ["d1"]} for i in range(3)]


def new_repo(repo: Path, files: dict[str, str]) -> None:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ci@example.com")
    git(repo, "config", "user.name", "ci")
    for name, text in files.items():
        (repo / name).write_text(text)
    commit(repo, "base")


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def answers(run_dir: Path) -> set[str]:
    return {json.loads(line)["answer"] for line in (run_dir / "predictions.jsonl").read_text().splitlines()}


@pytest.fixture
def template(tmp_path):
    """The pipeline's Python (as RAG_GATE_PIPELINE_PYTHON in the image): a venv that sees rag-gate's packages."""
    venv = tmp_path / "pipeline-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    gate_root = os.path.dirname(os.path.dirname(gate.__file__))
    Path(purelib, "rag-gate.pth").write_text(f"{gate_root}\n{sysconfig.get_path('purelib')}\n")
    return python, Path(purelib)


def dependency_repo(repo: Path) -> None:
    """main uses dep 1.0; the PR (feature) changes nothing but the dependency: dep 2.0."""
    new_repo(
        repo,
        {
            "dep.py": 'VERSION = "1.0"\n',
            "pipe.py": PIPE,
            "golden.jsonl": "".join(json.dumps(g) + "\n" for g in GOLDEN),
            "rag-gate.yml": "golden: golden.jsonl\npipeline: {python: 'pipe:answer'}\n",
            ".gitignore": "out/\ncache/\n__pycache__/\n",
        },
    )
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "dep.py").write_text('VERSION = "2.0"\n')
    commit(repo, "PR: dep 2.0")


def pr(repo: Path, template: Path, tmp_path: Path, out: str = "out"):
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "RAG_GATE_PIPELINE_PYTHON": str(template),
    }
    options = PrOptions(
        base_ref="main", working_directory=repo, setup_command=SETUP, out_dir=Path(out), cache_dir=Path("cache")
    )
    return run_pr(options, environ, emit=lambda _line: None)


def test_a_dependency_change_is_measured_on_the_head_only_and_the_base_environment_is_reused(tmp_path, template):
    python, template_site = template
    repo = tmp_path / "repo"
    dependency_repo(repo)

    first = pr(repo, python, tmp_path)
    base, head = answers(repo / "out" / "base"), answers(repo / "out" / "head")
    assert {a.split()[0] for a in base} == {"1.0"} and {a.split()[0] for a in head} == {"2.0"}
    (base_prefix,), (head_prefix,) = {a.split()[1] for a in base}, {a.split()[1] for a in head}
    assert base_prefix != head_prefix and str(python.parent.parent) not in (base_prefix, head_prefix)
    assert not (template_site / "dep.py").exists()  # neither side installed into the shared pipeline Python
    assert not Path(head_prefix).exists()  # the head's environment is temporary
    env_id = envs.env_key(repo, git(repo, "rev-parse", "main"), SETUP, str(python))
    stored = repo / "cache" / envs.ENVS_DIR / env_id
    assert Path(base_prefix) == stored / envs.ENV_DIR and (stored / envs.SIGNATURE_FILE).is_file()
    assert first.base_cached is False and first.comparison is not None

    # the PR adds a case: the base results cannot be reused (other golden set), the base environment is
    with (repo / "golden.jsonl").open("a") as handle:
        handle.write(json.dumps({"id": "q9", "question": "question 9?", "expected_doc_ids": ["d1"]}) + "\n")
    commit(repo, "PR: one more case")
    (stored / envs.ENV_DIR / "marker-not-signed").write_text("")  # ...unless it changed since it was stored
    second = pr(repo, python, tmp_path, out="out2")
    assert second.base_cached is False
    assert not (stored / envs.ENV_DIR / "marker-not-signed").exists()  # rebuilt: it failed verification
    (repo / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'pipe:answer'}\nseed: 3\n")
    commit(repo, "PR: config edit (the base's config is used: base results cached)")
    third = pr(repo, python, tmp_path, out="out3")
    assert third.base_cached is True and answers(repo / "out3" / "base") == answers(repo / "out2" / "base")


def test_the_stored_base_environment_is_used_again_and_a_tampered_one_is_not(tmp_path, template):
    python, _ = template
    repo = tmp_path / "repo"
    dependency_repo(repo)
    pr(repo, python, tmp_path)
    env_id = envs.env_key(repo, git(repo, "rev-parse", "main"), SETUP, str(python))
    site = next((repo / "cache" / envs.ENVS_DIR / env_id / envs.ENV_DIR).glob("lib/python*/site-packages"))
    for entry in (repo / "cache").iterdir():  # drop the cached base results, keep the environment
        if entry.name != envs.ENVS_DIR:
            subprocess.run(["rm", "-rf", str(entry)], check=True)
    inode = (site / "dep.py").stat().st_ino
    pr(repo, python, tmp_path, out="again")
    assert {a.split()[0] for a in answers(repo / "again" / "base")} == {"1.0"}
    assert (site / "dep.py").stat().st_ino == inode  # reused as stored, not installed again

    for entry in (repo / "cache").iterdir():
        if entry.name != envs.ENVS_DIR:
            subprocess.run(["rm", "-rf", str(entry)], check=True)
    (site / "dep.py").chmod(0o644)
    (site / "dep.py").write_text('VERSION = "6.6"\n')  # someone changed the stored environment
    pr(repo, python, tmp_path, out="tampered")
    assert {a.split()[0] for a in answers(repo / "tampered" / "base")} == {"1.0"}


def test_env_key_follows_the_setup_command_and_the_base_tree_only(tmp_path):
    repo = tmp_path / "repo"
    new_repo(repo, {"requirements.txt": "ranker==1.0\n"})
    first = git(repo, "rev-parse", "HEAD")
    same_tree = commit(repo, "an empty commit: same tree")
    (repo / "requirements.txt").write_text("ranker==2.0\n")
    other_tree = commit(repo, "another requirement")
    key = envs.env_key(repo, first, "pip install -r requirements.txt", "/py")
    assert key == envs.env_key(repo, same_tree, "pip install -r requirements.txt", "/py")
    assert key != envs.env_key(repo, other_tree, "pip install -r requirements.txt", "/py")
    assert key != envs.env_key(repo, first, "pip install -r requirements.txt --pre", "/py")
    assert key != envs.env_key(repo, first, "pip install -r requirements.txt", "/other/python")


# ------------------------------------------------------------------ "as in the base commit" reads git objects

BASE_HISTORY = '{"entry": "of the base"}\n'


@pytest.fixture
def history_repo(tmp_path):
    repo = tmp_path / "repo"
    new_repo(repo, {"history.jsonl": BASE_HISTORY, "README": "x\n"})
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    return repo, base


def read_as_pr(repo: Path, base: str, named: str, tmp_path: Path) -> str | None:
    store = history_store(named, None, repo, repo, _context(), None)
    assert store is not None
    dest = tmp_path / "copy.jsonl"
    return None if read(store, dest, base_commit=base) is None else dest.read_text()


def _context():
    from gate.pr.github import github_context

    return github_context({})


@pytest.mark.parametrize("target", ["own", "/dev/null", "dir"])
def test_a_pr_that_turns_the_history_into_a_link_is_judged_by_the_base_history(history_repo, tmp_path, target):
    repo, base = history_repo
    (repo / "history.jsonl").unlink()
    if target == "own":
        (repo / "history-pr.jsonl").write_text("")
        os.symlink("history-pr.jsonl", repo / "history.jsonl")
    elif target == "dir":  # the directory on the way is a link (history kept under data/)
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "history.jsonl").write_text("")
        os.symlink(tmp_path / "elsewhere", repo / "data")
        os.symlink("data/history.jsonl", repo / "history.jsonl")
    else:
        os.symlink(target, repo / "history.jsonl")
    commit(repo, "PR: history.jsonl is a link")
    assert read_as_pr(repo, base, "history.jsonl", tmp_path) == BASE_HISTORY
    assert history_store("history.jsonl", None, repo, repo, _context(), None).path == str(repo / "history.jsonl")


def test_a_history_file_the_base_does_not_have_is_not_taken_from_the_pr(tmp_path):
    repo = tmp_path / "repo"
    new_repo(repo, {"README": "x\n"})
    base = git(repo, "rev-parse", "HEAD")
    (repo / "history.jsonl").write_text('{"entry": "made by the PR"}\n')
    commit(repo, "PR: adds a history")
    assert read_as_pr(repo, base, "history.jsonl", tmp_path) is None  # as in the base commit: no history
    git(repo, "rm", "-q", "--cached", "history.jsonl")
    (repo / ".git" / "info" / "exclude").write_text("history.jsonl\n")
    commit(repo, "untracked: kept on disk, outside git (a persistent runner)")
    assert read_as_pr(repo, base, "history.jsonl", tmp_path) == '{"entry": "made by the PR"}\n'
    (repo / "history.jsonl").unlink()
    os.symlink("/dev/null", repo / "history.jsonl")  # an untracked link is never followed
    with pytest.raises(InputError, match="symbolic link"):
        read(history_store("history.jsonl", None, repo, repo, _context(), None), tmp_path / "c", base_commit=base)


def test_links_in_the_base_commit_are_followed_inside_it_only(tmp_path):
    repo = tmp_path / "repo"
    new_repo(repo, {"README": "x\n"})
    (repo / "data").mkdir()
    (repo / "data" / "h.jsonl").write_text(BASE_HISTORY)
    os.symlink("data/h.jsonl", repo / "history.jsonl")
    os.symlink("/dev/null", repo / "null.jsonl")
    os.symlink("../../outside.jsonl", repo / "up.jsonl")
    base = commit(repo, "links in the base")
    assert read_as_pr(repo, base, "history.jsonl", tmp_path) == BASE_HISTORY
    for name in ("null.jsonl", "up.jsonl"):
        with pytest.raises(InputError, match="outside the repository"):
            read_as_pr(repo, base, name, tmp_path)


def gate_repo(repo: Path) -> None:
    new_repo(
        repo,
        {
            "pipe.py": 'def answer(case):\n    return {"answer": "a", "retrieved": [{"id": "d1", "text": "t"}]}\n',
            "golden.jsonl": "".join(json.dumps(g) + "\n" for g in GOLDEN),
            "rag-gate.yml": "golden: golden.jsonl\npipeline: {python: 'pipe:answer'}\n",
            ".gitignore": "out/\n__pycache__/\n",
        },
    )


def local_pr(repo: Path, tmp_path: Path):
    environ = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    return run_pr(PrOptions(base_ref="main", working_directory=repo, out_dir=Path("out")), environ, emit=lambda _: None)


@pytest.mark.parametrize("name", ["rag-gate.yml", "golden.jsonl"])
def test_a_base_config_or_golden_set_linked_out_of_the_base_commit_is_refused(tmp_path, name):
    repo = tmp_path / "repo"
    gate_repo(repo)
    outside = tmp_path / f"outside-{name}"
    outside.write_text((repo / name).read_text())
    (repo / name).unlink()
    os.symlink(outside, repo / name)
    commit(repo, f"{name} is a link out of the repository")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / name).unlink()
    (repo / name).write_text(outside.read_text())  # the PR's own is a regular file: only the base's is a link
    commit(repo, "PR")
    with pytest.raises(InputError, match=f"{name}: in commit .* outside the repository"):
        local_pr(repo, tmp_path)


def test_a_base_config_linked_inside_the_base_commit_is_read(tmp_path):
    repo = tmp_path / "repo"
    gate_repo(repo)
    (repo / "ci").mkdir()
    (repo / "ci" / "rag-gate.yml").write_text(
        "golden: ../golden.jsonl\npipeline: {python: 'pipe:answer', workdir: ..}\n"
    )
    (repo / "rag-gate.yml").unlink()
    os.symlink("ci/rag-gate.yml", repo / "rag-gate.yml")
    commit(repo, "config under ci/")
    git(repo, "checkout", "-q", "-b", "feature")
    result = local_pr(repo, tmp_path)
    assert result.verdict == "pass" and result.comparison is not None


def test_a_pr_that_links_its_golden_set_away_is_still_evaluated_on_the_base_cases(tmp_path):
    repo = tmp_path / "repo"
    gate_repo(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "mine.jsonl").write_text(json.dumps(GOLDEN[0]) + "\n")
    (repo / "golden.jsonl").unlink()
    os.symlink("mine.jsonl", repo / "golden.jsonl")
    commit(repo, "PR: the golden set is a link to one case")
    assert local_pr(repo, tmp_path).comparison is not None
    ids = {json.loads(line)["id"] for line in (repo / "out" / "head" / "predictions.jsonl").read_text().splitlines()}
    assert ids == {g["id"] for g in GOLDEN}
