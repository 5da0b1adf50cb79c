"""gate.pr.trust and `rag-gate pr` against untrusted PR code: privileged events refused, secrets out of reach and out
of every output, base results and the base cache out of the head's reach."""

from __future__ import annotations

import hashlib
import json
import os
import string
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_github import FakeGithub
from helpers import git, readable_form
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scratch_repo import GITHUB_VARS, make_scratch_repo, pull_request_event
from scratch_repo import actions_env as shared_actions_env

from gate.cli import main
from gate.config import load_config
from gate.errors import InputError
from gate.pr import cache
from gate.pr import github as gh
from gate.pr.credentials import Credentials
from gate.pr.trust import SAFE_EVENTS, cache_policy, is_trusted, refuse_unsafe_event
from gate.produce import run_side
from gate.sandbox import Sandbox
from gate.sides import compare_runs

TOKEN = "ghs_securitytesttoken42"
FLAG_TOKEN = "ghs_flagtokenonthecommandline7"
JUDGE_KEY = "sk-judgekeyforthesecuritytest9"
CACHE_KEY = "cache-signing-key-for-tests-0123"

# The PR's pipeline: it collects every secret it can find (its environment, its parent's environment and command
# line), records their hashes (so the test knows what it really had) and leaks each in many encodings: in its
# answers, retrieved chunks, document ids, an error message, and on stdout and stderr.
LEAKY = r"""
import base64, hashlib, json, os, re, sys, urllib.parse
from pathlib import Path

def _read(path):
    try:
        return open(path, "rb").read().replace(b"\0", b"\n").decode("utf-8", "replace")
    except OSError:
        return ""

TEXT = "\n".join([*(f"{k}={v}" for k, v in os.environ.items()),
                  _read(f"/proc/{os.getppid()}/environ"), _read(f"/proc/{os.getppid()}/cmdline")])
FOUND = sorted(set(re.findall(r"(?:gh[pousr]_|sk-)[A-Za-z0-9_]{6,}", TEXT)))
Path("found.json").write_text(json.dumps([hashlib.sha256(s.encode()).hexdigest() for s in FOUND]))

def leak(secret):
    raw = ("token: " + secret).encode()
    return " | ".join([secret, " ".join(secret), secret[::-1], base64.b64encode(raw).decode(),
                       base64.urlsafe_b64encode(secret[::-1].encode()).decode(), raw.hex(), raw.hex().upper(),
                       urllib.parse.quote(secret, safe=""), "".join(f"%{b:02X}" for b in secret.encode())])

LEAKS = " / ".join(leak(s) for s in FOUND) or "nothing found"
print("stdout:", LEAKS)
print("stderr:", LEAKS, file=sys.stderr)

def answer(case, **_):
    if case["id"] == "q1":
        raise RuntimeError("failed: " + LEAKS)
    doc = FOUND[0] if FOUND else "none"
    return {"answer": "Sorry. " + LEAKS, "retrieved": [{"id": doc, "text": LEAKS, "score": 1.0}]}
"""


@pytest.fixture
def fake_token() -> str:
    """The fake GitHub (tests/pr/conftest.py) accepts TOKEN: the secret these tests look for."""
    return TOKEN


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def scratch_with_pr(tmp_path: Path, pr_code: str, *, base_config_extra: str = "", pr_config_extra: str = "") -> dict:
    """The scratch repository, its base config with ``base_config_extra`` (under pipeline:), and a PR commit on top
    of ``feature`` whose rag.py is ``pr_code`` (and whose config adds ``pr_config_extra``)."""
    repo = tmp_path / "repo"
    shas = make_scratch_repo(repo)
    if base_config_extra:
        git(repo, "checkout", "-q", "main")
        config = (repo / "rag-gate.yml").read_text().replace("pipeline:\n", "pipeline:\n" + base_config_extra)
        (repo / "rag-gate.yml").write_text(config)
        shas["base"] = commit(repo, "base: pass a variable to the pipeline")
        git(repo, "checkout", "-q", "feature")
        git(repo, "rebase", "-q", "main")
    (repo / "rag.py").write_text(pr_code)
    if pr_config_extra:
        config = (repo / "rag-gate.yml").read_text().replace("pipeline:\n", "pipeline:\n" + pr_config_extra)
        (repo / "rag-gate.yml").write_text(config)
    (repo / ".gitignore").write_text("rag-gate-out/\n.rag-gate-cache/\n__pycache__/\nfound.json\n")
    shas["head"] = commit(repo, "PR")
    return {"repo": repo, **shas}


def actions_env(tmp_path: Path, fake: FakeGithub, scratch: dict, event_name="pull_request", event=None) -> dict:
    event = event or pull_request_event(scratch)
    return shared_actions_env(tmp_path, fake.api_url, TOKEN, scratch["repo"], event, event_name)


def rag_gate(scratch: dict, env: dict, *args: str):
    return CliRunner().invoke(main, ["pr", "--working-directory", str(scratch["repo"]), *args], env=env)


# ------------------------------------------------------------------------------------------- §3 events


@pytest.mark.parametrize(
    "event",
    ["pull_request_target", "workflow_run", "issue_comment", "issues", "repository_dispatch", "check_run", "new_one"],
)
def test_privileged_events_are_refused_before_any_code_runs_even_with_base_ref(tmp_path, fake, event):
    scratch = scratch_with_pr(tmp_path, "raise SystemExit('PR code ran')\n")
    env = actions_env(tmp_path, fake, scratch, event_name=event, event={"action": "created"})
    result = rag_gate(scratch, env, "--base-ref", "main", "--comment", "off")
    assert result.exit_code == 2, result.output
    assert f"rag-gate refuses to run on `{event}`" in result.stderr and "allow-privileged-event: true" in result.stderr
    assert fake.requests == [] and not (scratch["repo"] / "rag-gate-out").exists()
    assert "exit 2: bad input or usage" in (tmp_path / "summary.md").read_text()


def test_a_workflow_that_opts_in_runs_on_a_privileged_event(tmp_path, fake):
    scratch = scratch_with_pr(tmp_path, _broken_rag())
    env = actions_env(tmp_path, fake, scratch, event_name="workflow_run", event={"action": "completed"})
    result = rag_gate(scratch, env, "--base-ref", "main", "--comment", "off", "--allow-privileged-event", "true")
    assert result.exit_code == 1, result.output  # the regression is caught: it did run
    assert "verdict: fail" in result.stderr


def _broken_rag() -> str:
    from scratch_repo import N_FACTS, RAG_TEMPLATE

    return RAG_TEMPLATE.format(broken=True, n=N_FACTS)


def test_safe_events_and_local_runs_are_not_refused():
    for event in [*sorted(SAFE_EVENTS), None]:
        refuse_unsafe_event(gh.GithubContext(event_name=event))
    with pytest.raises(InputError, match="`workflow_run`"):
        refuse_unsafe_event(gh.GithubContext(event_name="workflow_run"))
    refuse_unsafe_event(gh.GithubContext(event_name="workflow_run"), allow_privileged=True)


# ---------------------------------------------------------------------------------- §1 secrets


def test_pr_code_reaches_no_secret_and_nothing_written_holds_one(tmp_path, fake):
    scratch = scratch_with_pr(tmp_path, LEAKY, pr_config_extra="  env_passthrough: [OPENAI_API_KEY]\n")
    env = actions_env(tmp_path, fake, scratch) | {"OPENAI_API_KEY": JUDGE_KEY}
    (scratch["repo"] / ".git" / "config").open("a").write('[http "https://github.com/"]\n\textraheader = AUTH\n')
    result = rag_gate(scratch, env, "--github-token", FLAG_TOKEN, "--out-dir", "rag-gate-out")
    assert result.exit_code == 1, result.output
    # the PR's own config asked for the judge key: only the base's list counts, so the pipeline found nothing
    found = json.loads((scratch["repo"] / "found.json").read_text())
    assert found == []
    written = _everything_written(tmp_path, scratch, fake, result)
    for secret in (TOKEN, FLAG_TOKEN, JUDGE_KEY):
        for where, text in written.items():
            assert not readable_form(secret, text) and secret not in text, (secret, where)
    stdout = result.stdout.splitlines()
    assert f"::add-mask::{TOKEN}" in stdout and f"::add-mask::{FLAG_TOKEN}" in stdout
    assert any("--github-token is ignored in GitHub Actions" in line for line in stdout)
    assert any("credentials in .git/config" in line and "persist-credentials: false" in line for line in stdout)


def test_secrets_passed_by_the_base_reach_the_pipeline_but_no_output(tmp_path, fake):
    scratch = scratch_with_pr(tmp_path, LEAKY, base_config_extra="  env_passthrough: [OPENAI_API_KEY]\n")
    env = actions_env(tmp_path, fake, scratch) | {"OPENAI_API_KEY": JUDGE_KEY}
    result = rag_gate(scratch, env, "--out-dir", "rag-gate-out")
    assert result.exit_code == 1, result.output
    found = json.loads((scratch["repo"] / "found.json").read_text())
    assert found == [hashlib.sha256(JUDGE_KEY.encode()).hexdigest()]  # asked for by name: given; the token not
    written = _everything_written(tmp_path, scratch, fake, result)
    assert "stderr: ***" in written["log"] and "***" in written[str(scratch["repo"] / "rag-gate-out/report.json")]
    for secret in (TOKEN, JUDGE_KEY):
        for where, text in written.items():
            assert not readable_form(secret, text) and secret not in text, (secret, where)


def _everything_written(tmp_path: Path, scratch: dict, fake: FakeGithub, result) -> dict[str, str]:
    """Every file rag-gate wrote (out dir, summary, outputs), the comments it posted and its log."""
    texts = {"comment": "\n".join(c["body"] for c in fake.comments)}
    texts["log"] = "\n".join(line for line in result.stdout.splitlines() if not line.startswith("::add-mask::"))
    texts["log"] += result.stderr
    for path in [tmp_path / "summary.md", tmp_path / "output.txt", *(scratch["repo"] / "rag-gate-out").rglob("*")]:
        if path.is_file():
            texts[str(path)] = path.read_text(encoding="utf-8", errors="replace")
    assert texts["comment"] and any(k.endswith("report.json") for k in texts)
    return texts


encodings = st.sampled_from(["plain", "spaced", "reversed", "base64", "b64url", "hex", "HEX", "url", "url-all"])

PROPERTY_PIPELINE = r"""
import base64, json, os, sys, urllib.parse

def encode(secret, how, prefix):
    raw = (prefix + secret).encode()
    return {"plain": prefix + secret, "spaced": " ".join(secret), "reversed": secret[::-1],
            "base64": base64.b64encode(raw).decode(), "b64url": base64.urlsafe_b64encode(raw).decode(),
            "hex": raw.hex(), "HEX": raw.hex().upper(), "url": urllib.parse.quote(prefix + secret, safe=""),
            "url-all": "".join(f"%{b:02x}" for b in secret.encode())}[how]

def answer(case, *, how, where, prefix):
    leak = encode(os.environ["LEAKY_API_KEY"], how, prefix)
    if where == "error" and case["id"] == "q1":
        raise ValueError(leak)
    if where == "stderr":
        print(leak, file=sys.stderr)
    return {"answer": leak if where == "answer" else "fine",
            "retrieved": [{"id": leak if where == "doc id" else "d1", "text": leak if where == "chunk" else "t"}]}

if __name__ == "__main__":  # the command adapter: python3 leaky.py {predictions}, options in the environment
    leak = encode(os.environ["LEAKY_API_KEY"], os.environ["HOW"], os.environ["PREFIX"])
    print("stdout", leak)
    with open(sys.argv[1], "w") as out:
        for i in ("q1", "q2"):
            out.write(json.dumps({"id": i, "answer": leak, "retrieved": [{"id": leak, "text": leak}]}) + "\n")
"""


@pytest.mark.parametrize("where", ["answer", "chunk", "doc id", "error", "stderr", "command output"])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    # a secret is no word rag-gate writes itself ("chunk_text" held "chunk_te"): the digits make it one of a kind
    secret=st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=8, max_size=40).map(
        lambda s: s + "42x"
    ),
    how=encodings,
    prefix=st.text(alphabet="ab:= ", max_size=4),
)
def test_property_a_leaking_pipeline_never_gets_a_secret_into_a_written_file(
    tmp_path_factory, capfd, where, secret, how, prefix
):
    tmp = tmp_path_factory.mktemp("leak")
    (tmp / "leaky.py").write_text(PROPERTY_PIPELINE)
    cases = [{"id": f"q{i}", "question": "q", "expected_doc_ids": ["d1"]} for i in (1, 2)]
    (tmp / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    if where == "command output":
        options = json.dumps({"HOW": how, "PREFIX": prefix})
        pipeline = f"  command: python3 leaky.py {{predictions}}\n  env: {options}\n"
    else:
        pipeline = f"  python: leaky:answer\n  options: {json.dumps({'how': how, 'where': where, 'prefix': prefix})}\n"
    passthrough = "  env_passthrough: [LEAKY_API_KEY]\n"
    (tmp / "rag-gate.yml").write_text(f"golden: golden.jsonl\npipeline:\n{pipeline}{passthrough}")
    config = load_config(tmp / "rag-gate.yml")
    sandbox = Sandbox.from_environ({"PATH": os.environ["PATH"], "LEAKY_API_KEY": secret})
    run_side(config, tmp / "head", sandbox=sandbox)
    compare_runs(tmp / "head", tmp / "head", tmp / "out", config=config)
    printed = capfd.readouterr()
    texts = {str(p): p.read_text(errors="replace") for p in tmp.rglob("*") if p.is_file() and p.suffix != ".py"}
    texts |= {"stdout": printed.out, "stderr": printed.err}
    assert any("***" in t for t in texts.values())  # the leak happened, and was masked
    for where_written, text in texts.items():
        assert not readable_form(secret, text), (where_written, how, where)


# ------------------------------------------------------------------------------- §2 base results


TAMPER = r"""
import glob, json
from pathlib import Path

for path in glob.glob("rag-gate-out/base/scores.jsonl") + glob.glob(".rag-gate-cache/*/run/scores.jsonl"):
    try:  # the workers import this at once: one may read what another is writing
        rows = [json.loads(line) for line in open(path)]
    except ValueError:
        continue
    for row in rows:
        if row.get("value") is not None:
            row["value"] = 0.0
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows))
    with open("tampered.txt", "a") as note:
        note.write(path + "\n")
"""


def test_head_code_rewriting_the_base_results_and_the_cache_changes_nothing(tmp_path):
    scratch = scratch_with_pr(tmp_path, _broken_rag() + TAMPER)
    env = dict.fromkeys(GITHUB_VARS) | {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    args = ("--base-ref", "main", "--cache-dir", ".rag-gate-cache", "--out-dir", "rag-gate-out")
    first = rag_gate(scratch, env, *args)
    assert first.exit_code == 1, first.output
    tampered = set((scratch["repo"] / "tampered.txt").read_text().split())
    entry = f".rag-gate-cache/{next((scratch['repo'] / '.rag-gate-cache').iterdir()).name}/run/scores.jsonl"
    assert tampered == {"rag-gate-out/base/scores.jsonl", entry}  # it did rewrite both while it ran (local run)
    assert "the base results changed after they were computed" in first.stderr
    rows = [json.loads(line) for line in (scratch["repo"] / "rag-gate-out/base/scores.jsonl").read_text().splitlines()]
    hits = [r["value"] for r in rows if r["metric"] == "hit_rate@5" and r["value"] is not None]
    assert len(hits) == 24 and all(v == 1.0 for v in hits)  # restored: the base retrieves every fact
    assert json.loads((scratch["repo"] / "rag-gate-out/report.json").read_text())["verdict"] == "fail"
    # the next PR on the same cache: the rewritten entry fails verification, is ignored, and the base evaluated again
    second = rag_gate(scratch, env, *args)
    assert second.exit_code == 1 and "(base from cache)" not in second.stderr, second.output
    assert "cached base results failed verification" in second.stderr


def test_pull_requests_read_the_cache_but_never_write_it(tmp_path, fake):
    scratch = scratch_with_pr(tmp_path, _broken_rag())
    env = actions_env(tmp_path, fake, scratch) | {"RAG_GATE_CACHE_KEY": CACHE_KEY}
    result = rag_gate(scratch, env, "--cache-dir", ".rag-gate-cache", "--comment", "off")
    assert result.exit_code == 1 and "(base from cache)" not in result.stderr
    assert not (scratch["repo"] / ".rag-gate-cache").exists() or not any(
        (scratch["repo"] / ".rag-gate-cache").iterdir()
    )


def test_a_cache_entry_signed_with_another_key_is_not_trusted(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    key = cache.CacheKey("a" * 40, "b" * 64, "c" * 64, cache.judge_id(None), 1, "0")
    cache.store(tmp_path / "cache", key, cache.Snapshot.of(run), b"the trusted key")
    assert cache.lookup(tmp_path / "cache", key, b"the trusted key") is not None
    assert cache.lookup(tmp_path / "cache", key, b"a forged key") is None
    (tmp_path / "cache" / key.digest() / "run" / "scores.jsonl").write_text("added later\n")
    assert cache.lookup(tmp_path / "cache", key, b"the trusted key") is None


@pytest.mark.parametrize(
    ("event", "ref", "in_actions", "trusted"),
    [
        ("push", "refs/heads/main", True, True),
        ("workflow_dispatch", "refs/heads/main", True, True),
        ("push", "refs/heads/feature", True, False),
        ("pull_request", "refs/pull/7/merge", True, False),
        ("pull_request_review", "refs/pull/7/merge", True, False),
        (None, None, False, True),
    ],
)
def test_only_trusted_runs_write_the_cache(event, ref, in_actions, trusted):
    context = gh.GithubContext(event_name=event, ref=ref, default_branch="main", in_actions=in_actions)
    assert is_trusted(context) is trusted
    environ = {"RAG_GATE_CACHE_KEY": CACHE_KEY}
    caching = cache_policy(Path("c"), context, environ, Credentials.from_environ(environ))
    assert caching.readable and caching.writable is trusted and caching.signing_key == CACHE_KEY.encode()
    unset = cache_policy(Path("c"), context, {}, Credentials())
    assert not unset.readable or not in_actions  # CI without the secret: no cache
