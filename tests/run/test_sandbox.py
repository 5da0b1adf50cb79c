"""The pipeline's sandbox: allow-listed environment, secrets by name only, redacted output, a process that hides its
secrets from /proc, and (as root) another user whose leftovers are killed."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import REPO, write_jsonl

from gate.config import load_config
from gate.errors import InputError
from gate.golden import load_golden
from gate.pipeline import run_command, run_python
from gate.redact import MASK
from gate.sandbox import Sandbox, check_passthrough, neutralize, pipeline_user

TOKEN = "ghs_dummytoken123"
JUDGE_KEY = "sk-dummyjudgekey456"
GATE_ENV = {
    "PATH": os.environ["PATH"],
    "HOME": "/home/gate",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "GITHUB_TOKEN": TOKEN,
    "INPUT_GITHUB-TOKEN": TOKEN,
    "OPENAI_API_KEY": JUDGE_KEY,
    "RAG_GATE_CACHE_KEY": "cache-signing-key-0123",
    "GITHUB_REPOSITORY": "octo/rag",
    "SOME_SETTING": "visible-only-by-name",
}

SNOOP = """
import json, os

def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().replace(b"\\0", b"\\n").decode("utf-8", "replace")
    except OSError as exc:
        return f"unreadable: {type(exc).__name__}"

def answer(case, **_):
    parent = os.getppid()
    seen = {"env": dict(os.environ), "parent_environ": _read(f"/proc/{parent}/environ"),
            "parent_cmdline": _read(f"/proc/{parent}/cmdline"), "uid": os.getuid()}
    return {"answer": json.dumps(seen), "retrieved": [{"id": os.environ.get("OPENAI_API_KEY", "none"), "text": "t"}]}
"""


def side(tmp_path: Path, pipeline: str, extra: str = "") -> Path:
    (tmp_path / "snoop.py").write_text(SNOOP)
    write_jsonl(tmp_path / "golden.jsonl", [{"id": "q1", "question": "q"}])
    (tmp_path / "rag-gate.yml").write_text(f"golden: golden.jsonl\npipeline:\n  {pipeline}\n{extra}")
    return tmp_path / "rag-gate.yml"


def run_snoop(tmp_path: Path, extra: str = "") -> tuple[dict, list[str]]:
    config = load_config(side(tmp_path, "python: snoop:answer", extra))
    got = []
    run_python(
        config.pipeline, [(load_golden(config.golden)[0], 0)], got.append, sandbox=Sandbox.from_environ(GATE_ENV)
    )
    assert got[0].error is None, got[0].error
    return json.loads(got[0].answer), [d.id for d in got[0].retrieved]


def test_pipeline_gets_the_allow_list_and_nothing_else(tmp_path):
    seen, ids = run_snoop(tmp_path)
    env = seen["env"]
    for name in ("GITHUB_TOKEN", "INPUT_GITHUB-TOKEN", "OPENAI_API_KEY", "RAG_GATE_CACHE_KEY", "GITHUB_REPOSITORY"):
        assert name not in env
    assert not any(secret in json.dumps(env) for secret in (TOKEN, JUDGE_KEY))
    assert {k: env[k] for k in ("HOME", "LANG", "LC_ALL", "TZ")} == {
        "HOME": "/home/gate",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
    }
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path.resolve())
    assert Path(env["TMPDIR"]).name.startswith("rag-gate-pipeline-") and not Path(env["TMPDIR"]).exists()
    assert ids == ["none"]


def test_variables_are_passed_by_name_and_secrets_among_them_redacted(tmp_path):
    extra = "  env_passthrough: [OPENAI_API_KEY, SOME_SETTING, NOT_SET_ANYWHERE]\n  env: {LITERAL: 'yes'}\n"
    seen, ids = run_snoop(tmp_path, extra.replace("\n  env:", "\n  env:"))
    # the pipeline really had the key (it returned it) but what rag-gate kept is masked
    assert ids == [MASK]
    assert seen["env"]["OPENAI_API_KEY"] == MASK and seen["env"]["SOME_SETTING"] == "visible-only-by-name"
    assert seen["env"]["LITERAL"] == "yes" and "NOT_SET_ANYWHERE" not in seen["env"]
    assert "GITHUB_TOKEN" not in seen["env"]


@pytest.mark.parametrize("name", ["GITHUB_TOKEN", "RAG_GATE_CACHE_KEY", "ACTIONS_RUNTIME_TOKEN", "INPUT_GITHUB_TOKEN"])
def test_the_github_token_cannot_be_passed_through(tmp_path, name):
    path = side(tmp_path, "python: snoop:answer", f"  env_passthrough: [SOME_SETTING, '{name}']\n")
    with pytest.raises(InputError) as error:
        load_config(path)
    assert str(error.value).startswith(f"{path}:4: pipeline.env_passthrough.1: '{name}' ")
    assert check_passthrough("OPENAI_API_KEY") is None


def test_command_pipeline_sandboxed_and_its_output_redacted(tmp_path, capfd):
    command = (
        "python3 -c \"import json, os, sys; print('::error::fake annotation'); "
        "print('leak', os.environ.get('OPENAI_API_KEY'), file=sys.stderr); "
        "open(sys.argv[1], 'w').write(json.dumps({'id': 'q1', 'answer': json.dumps(dict(os.environ)), "
        "'retrieved': []}) + chr(10))\" {predictions}"
    )
    path = side(tmp_path, f"command: {json.dumps(command)}", "  env_passthrough: [OPENAI_API_KEY]\n")
    config = load_config(path)
    (prediction,) = run_command(
        config.pipeline, config.golden, [0], 1, tmp_path, sandbox=Sandbox.from_environ(GATE_ENV)
    )
    env = json.loads(prediction.answer)
    assert env["OPENAI_API_KEY"] == MASK and "GITHUB_TOKEN" not in env and env["HOME"] == "/home/gate"
    kept = (tmp_path / "command-output-0.jsonl").read_text()
    assert JUDGE_KEY not in kept and MASK in kept
    err = capfd.readouterr().err
    assert f"leak {MASK}" in err and JUDGE_KEY not in err
    assert "[pipeline] ::error::fake annotation" in err


def test_neutralize_only_touches_workflow_commands():
    assert neutralize("  ::set-output name=x::1\n") == "[pipeline]   ::set-output name=x::1\n"
    assert neutralize("a :: b\n") == "a :: b\n"


# ------------------------------------------------------------------------------ rag-gate's own process

PROTECTED = """
import os, subprocess, sys
from gate.sandbox import protect_process
assert protect_process(os.environ, [sys.argv[1]])
me = os.getpid()
child = subprocess.run([sys.executable, "-c", '''
import sys
def read(p):
    return open(p, "rb").read().decode("utf-8", "replace")
print(repr(read(f"/proc/{sys.argv[1]}/environ") + "|" + read(f"/proc/{sys.argv[1]}/cmdline")))
''', str(me)], capture_output=True, text=True, env={"PATH": os.defpath})
inherited = subprocess.run(["sh", "-c", "echo $GITHUB_TOKEN"], capture_output=True, text=True).stdout.strip()
print(child.stdout.strip() or child.stderr.strip().splitlines()[-1])
print(os.environ["GITHUB_TOKEN"] + "|" + sys.argv[1] + "|" + inherited)
"""


def test_protect_process_hides_environment_and_argument_secrets_from_proc():
    env = {"PATH": os.environ["PATH"], "GITHUB_TOKEN": TOKEN, "LANG": "C.UTF-8", "OTHER": "not-for-the-pipeline"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", PROTECTED, "flag-secret-789"], capture_output=True, text=True, env=env, check=True
    )
    seen, kept = done.stdout.strip().splitlines()
    if seen.startswith("PermissionError"):  # not root: PR_SET_DUMPABLE closed /proc/<pid>/environ entirely
        assert os.geteuid() != 0
    else:
        assert TOKEN not in seen and "not-for-the-pipeline" not in seen and "flag-secret-789" not in seen
        assert "GITHUB_TOKEN=*****************" in seen and "LANG=C.UTF-8" in seen
    # the process itself, and children started without an explicit environment, still have the real values
    assert kept == f"{TOKEN}|flag-secret-789|{TOKEN}"


# ------------------------------------------------------------------------------------- another user


def _user_can_run(user: str, path: str) -> bool:
    done = subprocess.run(["su", user, "-s", "/bin/sh", "-c", f"test -x {path}"], capture_output=True, check=False)
    return done.returncode == 0


needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("su") is None, reason="needs root (setuid)"
)


@pytest.fixture
def public_dir():
    path = Path(tempfile.mkdtemp(prefix="rag-gate-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@needs_root
def test_as_root_the_command_runs_as_the_pipeline_user_and_leftovers_are_killed(public_dir):
    nobody = pwd.getpwnam("nobody")
    out = public_dir / "out"
    out.mkdir()
    (out / "scores.jsonl").write_text("original\n")
    command = (
        "sleep 300 >/dev/null 2>&1 & daemon=$!; "
        f"echo poisoned > {out}/scores.jsonl 2>/dev/null; echo x > {public_dir}/mine.txt 2>/dev/null; "
        "if cat /proc/$PPID/environ >/dev/null 2>&1; then parent=readable; else parent=denied; fi; "
        'printf \'{"id": "q1", "answer": "%s %s %s %s", "retrieved": []}\\n\' '
        "$(id -u) $HOME $parent $daemon > {predictions}"
    )
    config = load_config(side(public_dir, f"command: {json.dumps(command)}"))
    sandbox = Sandbox.from_environ(GATE_ENV | {"RAG_GATE_PIPELINE_USER": "nobody"})
    (prediction,) = run_command(config.pipeline, config.golden, [0], 1, out, sandbox=sandbox)
    uid, home, parent, daemon = prediction.answer.split()
    assert (int(uid), home, parent) == (nobody.pw_uid, nobody.pw_dir, "denied")
    assert (out / "scores.jsonl").read_text() == "original\n"  # what root wrote is not writable by the pipeline
    assert not (public_dir / "mine.txt").exists()  # nor is the workspace
    assert not _alive(int(daemon))  # the process it left behind was killed


@needs_root
def test_as_root_the_python_worker_cannot_read_the_gate(public_dir):
    if not _user_can_run("nobody", sys.executable):
        pytest.skip(f"the user 'nobody' cannot execute {sys.executable} (its directory is private)")
    config = load_config(side(public_dir, "python: snoop:answer"))
    got = []
    sandbox = Sandbox.from_environ(GATE_ENV | {"RAG_GATE_PIPELINE_USER": "nobody"})
    run_python(config.pipeline, [(load_golden(config.golden)[0], 0)], got.append, sandbox=sandbox)
    seen = json.loads(got[0].answer)
    assert seen["uid"] == pwd.getpwnam("nobody").pw_uid
    assert seen["parent_environ"].startswith("unreadable: PermissionError")


def test_pipeline_user_is_only_used_as_root(monkeypatch):
    assert pipeline_user({}) is None
    if os.geteuid() != 0:
        assert pipeline_user({"RAG_GATE_PIPELINE_USER": "nobody"}) is None
    else:
        assert pipeline_user({"RAG_GATE_PIPELINE_USER": "nobody"}).name == "nobody"
        with pytest.raises(Exception, match="no such user"):
            pipeline_user({"RAG_GATE_PIPELINE_USER": "no-such-user-here"})


def test_setup_like_commands_get_the_same_environment():
    sandbox = Sandbox.from_environ(GATE_ENV)
    env = sandbox.environment(["OPENAI_API_KEY"], {"X": "1"}, tmpdir=Path("/tmp/x"))
    assert env["OPENAI_API_KEY"] == JUDGE_KEY and env["X"] == "1" and env["TMPDIR"] == "/tmp/x"
    assert "GITHUB_TOKEN" not in env and "INPUT_GITHUB-TOKEN" not in env and "SOME_SETTING" not in env
