"""The package as users get it: the wheel holds every file the code opens, and the installed `rag-gate` runs a user's
first hour (init → validate → run → compare → --junit → pr) in a directory outside the checkout.

CI (.ci/run) installs the built wheel, not the source tree, and sets RAG_GATE_TEST_INSTALLED=1: then the tests must
import that install (site-packages), which `test_the_tests_import_the_installed_package` checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from helpers import REPO, git

import gate

RAG_GATE = Path(sys.executable).parent / "rag-gate"


def _package_files(root: Path) -> set[str]:
    """Every file of the source package ``root/gate`` as a wheel names it (``gate/...``), caches left out."""
    return {
        p.relative_to(root).as_posix()
        for p in (root / "gate").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    }


def _source_root() -> Path | None:
    """Where the package's source lives in this checkout (``src/`` or the top level), None when absent."""
    for root in (REPO / "src", REPO):
        if (root / "gate" / "__init__.py").is_file():
            return root
    return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel CI built (RAG_GATE_WHEEL), else one built here from the checkout with pip (no dependencies)."""
    given = os.environ.get("RAG_GATE_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.skip(f"could not build the wheel here (pip wheel: {done.stderr.strip()[-300:]})")
    return next(out.glob("rag_gate-*.whl"))


def test_the_wheel_holds_every_file_of_the_package(wheel):
    """Schemas, templates, the scaffold, the judges' data: a file missing here is a FileNotFoundError for users."""
    root = _source_root()
    if root is None:
        pytest.skip("no source tree beside the tests")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if name.startswith("gate/")}
    expected = _package_files(root)
    assert expected - shipped == set(), f"{wheel.name} lacks package files"
    assert {"gate/scaffold/rag-gate.yml", "gate/schemas/golden.schema.json"} <= shipped


def test_the_tests_import_the_installed_package():
    """In CI the suite runs against the installed wheel: `gate` comes from site-packages, not from the checkout."""
    if os.environ.get("RAG_GATE_TEST_INSTALLED") != "1":
        pytest.skip("RAG_GATE_TEST_INSTALLED=1 is set by .ci/run, which installs the wheel")
    where = Path(gate.__file__).resolve()
    assert where.is_relative_to(Path(sysconfig.get_paths()["purelib"]).resolve()), where
    assert not where.is_relative_to((REPO / "src").resolve()), where  # (the venv itself may live in the checkout)


def _rag_gate(*args: str, cwd: Path, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GITHUB_", "RAG_GATE_", "INPUT_"))}
    env.update(NO_COLOR="1", RAGAS_DO_NOT_TRACK="true")
    done = subprocess.run([str(RAG_GATE), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in ok, f"rag-gate {' '.join(args)} exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def _grow_golden(path: Path, copies: int) -> int:
    """Repeat the scaffold's cases under new ids, so that a real regression is significant; returns the count."""
    cases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    grown = [{**c, "id": f"{c['id']}-{i}"} for i in range(copies) for c in cases]
    path.write_text("".join(json.dumps(c) + "\n" for c in grown))
    return len(grown)


@pytest.mark.skipif(not RAG_GATE.exists(), reason="no rag-gate script beside this Python")
def test_a_users_first_hour_with_the_installed_package(tmp_path):
    """init → validate → run (base, head) → compare --junit into a new folder → pr --base-ref, as a user runs them."""
    repo = tmp_path / "my-rag"
    repo.mkdir()
    old = os.umask(0o022)
    try:
        git(repo, "init", "-q", "-b", "main")
        _rag_gate("init", ".", cwd=repo)
        assert _grow_golden(repo / "eval" / "golden.jsonl", 8) == 48
        assert "OK" in _rag_gate("validate", "rag-gate.yml", cwd=repo).stdout
        (repo / ".gitignore").write_text("runs/\nreports/\nrag-gate-out/\n.rag-gate-cache/\n__pycache__/\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "add rag-gate")
        _rag_gate("run", "--config", "rag-gate.yml", "--out", "runs/base", "--no-progress", cwd=repo)

        # the PR: retrieval ranks the wrong document first
        stub = repo / "rag_pipeline.py"
        stub.write_text(stub.read_text().replace("key=lambda d: (-len(", "key=lambda d: (len("))
        git(repo, "checkout", "-q", "-b", "worse-retrieval")
        git(repo, "commit", "-q", "-am", "rank by fewest shared words")
        _rag_gate("run", "--config", "rag-gate.yml", "--out", "runs/head", "--no-progress", cwd=repo)

        junit = "reports/ci/junit.xml"  # a folder that does not exist yet
        compare = ["compare", "runs/base", "runs/head", "--out", "reports/cmp", "--junit", junit]
        compared = _rag_gate(*compare, cwd=repo, ok=(1,))
        assert "fail" in compared.stdout
        report = json.loads((repo / "reports" / "cmp" / "report.json").read_text())
        assert report["verdict"] == "fail"
        assert "<testsuite" in (repo / junit).read_text()

        pr = _rag_gate("pr", "--base-ref", "main", "--no-progress", cwd=repo, ok=(1,))
        assert "fail" in pr.stdout + pr.stderr
        written = [p for p in (repo / "rag-gate-out").rglob("*") if p.is_file()]
        written += [repo / "reports" / "cmp" / "report.json", repo / junit, repo / "runs" / "head" / "scores.jsonl"]
        assert written and {oct(p.stat().st_mode & 0o777) for p in written} == {"0o644"}  # readable by the next step
    finally:
        os.umask(old)
