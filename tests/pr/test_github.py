"""gate.pr.github against a fake GitHub REST server on 127.0.0.1 (PyGithub for real, nothing mocked)."""

from __future__ import annotations

import json
import time

import pytest
import requests
from fake_github import FakeGithub
from github import GithubException, RateLimitExceededException

from gate.errors import InputError
from gate.outputs.annotations import annotation
from gate.pr import github as gh
from gate.redact import Redactor

FAST = gh.RetryPolicy(total=2, backoff_factor=0.01, backoff_max=0.05, max_wait=2.0, timeout=5)


def client(fake: FakeGithub, retry: gh.RetryPolicy = FAST):
    return gh.make_client(fake.token, fake.api_url, retry)


def write_event(tmp_path, name="pull_request", fork=False):
    event = {
        "number": 7,
        "pull_request": {
            "number": 7,
            "base": {"sha": "a" * 40, "ref": "main", "repo": {"full_name": "octo/rag"}},
            "head": {"sha": "b" * 40, "ref": "feature", "repo": {"full_name": "evil/rag" if fork else "octo/rag"}},
        },
    }
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    return {
        "GITHUB_EVENT_NAME": name,
        "GITHUB_EVENT_PATH": str(path),
        "GITHUB_REPOSITORY": "octo/rag",
        "GITHUB_API_URL": "http://127.0.0.1:9/api/v3/",
        "GITHUB_RUN_ID": "42",
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }


# ------------------------------------------------------------------------------------------ context


def test_context_reads_pull_request_event(tmp_path):
    ctx = gh.github_context(write_event(tmp_path))
    assert (ctx.event_name, ctx.repository, ctx.pr_number) == ("pull_request", "octo/rag", 7)
    assert (ctx.base_sha, ctx.head_sha, ctx.base_ref) == ("a" * 40, "b" * 40, "main")
    assert ctx.api_url == "http://127.0.0.1:9/api/v3"
    assert ctx.step_summary == tmp_path / "summary.md" and ctx.output is None
    assert ctx.in_actions and not ctx.is_fork
    assert ctx.run_url == "https://github.com/octo/rag/actions/runs/42"


def test_context_detects_fork_and_local_run(tmp_path):
    assert gh.github_context(write_event(tmp_path, fork=True)).is_fork
    local = gh.github_context({})
    assert local.pr_number is None and local.api_url == gh.DEFAULT_API_URL and not local.in_actions


def test_context_push_event_has_no_pr(tmp_path):
    path = tmp_path / "push.json"
    path.write_text(json.dumps({"ref": "refs/heads/main", "number": 3}))
    ctx = gh.github_context({"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(path)})
    assert ctx.pr_number is None


def test_context_bad_event_file_is_input_error(tmp_path):
    path = tmp_path / "event.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match=r"event.json:1: invalid JSON: Expecting property name"):
        gh.github_context({"GITHUB_EVENT_PATH": str(path)})
    path.write_text('{"pull_request": ' * 5000 + "1" + "}" * 5000)
    with pytest.raises(InputError, match=r"event.json: JSON nested deeper than 64 levels"):
        gh.github_context({"GITHUB_EVENT_PATH": str(path)})


# ------------------------------------------------------------------------------------ sticky comment


def test_first_run_creates_second_run_edits(fake):
    first = gh.upsert_comment(client(fake), "octo/rag", 7, "report v1")
    second = gh.upsert_comment(client(fake), "octo/rag", 7, "report v2")
    assert first.action == "created" and second.action == "updated" and first.id == second.id
    assert len(fake.comments) == 1
    assert fake.comments[0]["body"] == f"{gh.MARKER}\nreport v2"
    assert len(fake.calls("POST", "/comments$")) == 1 and len(fake.calls("PATCH")) == 1
    assert all(r.authorization == "token ghs_t0ken" for r in fake.requests)


def test_marker_found_on_second_page_of_35_comments(fake):
    for i in range(32):
        fake.add_comment(f"chatter {i}, mentions {gh.MARKER} in the middle")
    target = fake.add_comment(f"{gh.MARKER}\nold report", login="github-actions[bot]")
    for i in range(2):
        fake.add_comment(f"late chatter {i}")
    result = gh.upsert_comment(client(fake), "octo/rag", 7, "new report")
    assert result.action == "updated" and result.id == target["id"]
    assert len(fake.comments) == 35 and target["body"].endswith("new report")
    pages = [r.query.get("page", ["1"])[0] for r in fake.calls("GET", "/issues/7/comments$")]
    assert pages == ["1", "2"]


def test_502_then_success_is_retried(fake):
    fake.fail("POST", "/issues/7/comments$", 502, times=1)  # refused, nothing created
    result = gh.upsert_comment(client(fake), "octo/rag", 7, "report")
    assert result.action == "created" and len(fake.comments) == 1
    assert [r.status for r in fake.calls("POST")] == [502, 201]
    # between the two posts, the comments were listed again to look for a post that went through
    methods = [(r.method, r.status) for r in fake.requests if "comments" in r.path]
    assert methods == [("GET", 200), ("POST", 502), ("GET", 200), ("POST", 201)]


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_create_that_succeeded_but_answered_5xx_is_adopted_not_repeated(fake, status):
    fake.fail("POST", "/issues/7/comments$", status, perform=True)
    result = gh.upsert_comment(client(fake), "octo/rag", 7, "report")
    assert len(fake.comments) == 1 and len(fake.calls("POST")) == 1
    assert result.action == "created" and result.id == fake.comments[0]["id"]
    assert fake.comments[0]["body"] == f"{gh.MARKER}\nreport" and fake.calls("PATCH") == []  # already right


def test_create_whose_answer_timed_out_is_adopted(fake):
    fake.fail("POST", "/issues/7/comments$", 201, perform=True, delay=2.0)
    quick = gh.RetryPolicy(total=2, backoff_factor=0.01, backoff_max=0.05, max_wait=2.0, timeout=1)
    result = gh.upsert_comment(client(fake, quick), "octo/rag", 7, "report")
    assert len(fake.comments) == 1 and len(fake.calls("POST")) == 1 and result.id == fake.comments[0]["id"]


def test_persistent_5xx_on_create_gives_up_after_the_attempts(fake):
    fake.fail("POST", "/issues/7/comments$", 502, times=100)
    with pytest.raises(GithubException) as info:
        gh.upsert_comment(client(fake), "octo/rag", 7, "report", attempts=3)
    assert info.value.status == 502 and len(fake.calls("POST")) == 3 and fake.comments == []


def test_other_users_marked_comment_is_never_taken_over(fake):
    foreign = fake.add_comment(f"{gh.MARKER}\nlooks like a report", login="someone-else")
    impostor = fake.add_comment(f"{gh.MARKER}\nanother bot", login="other-app[bot]")
    first = gh.upsert_comment(client(fake), "octo/rag", 7, "report v1")
    second = gh.upsert_comment(client(fake), "octo/rag", 7, "report v2")
    assert foreign["body"] == f"{gh.MARKER}\nlooks like a report" and impostor["body"].endswith("another bot")
    assert (first.action, second.action) == ("created", "updated") and first.id == second.id
    ours = [c for c in fake.comments if c["user"]["login"] == "github-actions[bot]"]
    assert len(ours) == 1 and ours[0]["body"].endswith("report v2")


def test_a_personal_access_token_edits_its_own_users_comment_only():
    fake = FakeGithub(user_login="ci-user").start()
    try:
        bot = fake.add_comment(f"{gh.MARKER}\nwritten with GITHUB_TOKEN", login="github-actions[bot]")
        mine = fake.add_comment(f"{gh.MARKER}\nolder report", login="ci-user")
        assert gh.own_login(client(fake)) == "ci-user"
        result = gh.upsert_comment(client(fake), "octo/rag", 7, "new report")
        assert result.action == "updated" and result.id == mine["id"] and mine["body"].endswith("new report")
        assert bot["body"].endswith("written with GITHUB_TOKEN")
    finally:
        fake.stop()


def test_identity_of_an_installation_token_is_the_actions_bot(fake):
    assert gh.own_login(client(fake)) == "github-actions[bot]"  # GET /user answers 403 to GITHUB_TOKEN
    fake.fail("GET", "/user$", 401, body={"message": "Bad credentials"})
    with pytest.raises(GithubException) as info:
        gh.own_login(client(fake))
    assert info.value.status == 401


def test_sticky_comment_deleted_before_the_edit_is_posted_again(fake):
    old = fake.add_comment(f"{gh.MARKER}\nprevious push", login="github-actions[bot]")

    def delete(server):
        server.comments.remove(old)

    fake.fail("PATCH", r"/issues/comments/\d+$", 404, body={"message": "Not Found"}, action=delete)
    result = gh.upsert_comment(client(fake), "octo/rag", 7, "this push")
    assert result.action == "created" and result.id != old["id"]
    assert [c["body"] for c in fake.comments] == [f"{gh.MARKER}\nthis push"]


def test_edit_answered_502_is_retried_it_is_idempotent(fake):
    old = fake.add_comment(f"{gh.MARKER}\nprevious push", login="github-actions[bot]")
    fake.fail("PATCH", r"/issues/comments/\d+$", 502, perform=True)
    result = gh.upsert_comment(client(fake), "octo/rag", 7, "this push")
    assert result.action == "updated" and old["body"].endswith("this push") and len(fake.comments) == 1
    assert [r.status for r in fake.calls("PATCH")] == [502, 200] and fake.calls("POST") == []


def test_echoed_authorization_header_never_reaches_the_message():
    token = "ghs_dummytoken0123456789"
    fake = FakeGithub(token=token).start()
    try:
        body = {"message": f"proxy refused credentials {token}"}
        fake.fail("GET", "/repos/octo/rag$", 400, body=body, echo_authorization=True)
        with pytest.raises(GithubException) as info:
            gh.upsert_comment(client(fake), "octo/rag", 7, "report")
    finally:
        fake.stop()
    raw = gh.explain_failure(info.value, gh.GithubContext())
    assert raw.count(token) == 2  # what the server sent back: the gate must redact it before showing it
    shown = Redactor([token])(raw)
    assert token not in shown and "'Authorization': 'token ***'" in shown and "credentials ***" in shown
    unknown = Redactor()(raw)  # the header's value is masked even when the secret is not known
    assert "'Authorization': 'token ***'" in unknown and unknown.count(token) == 1


def test_persistent_5xx_raises_after_bounded_retries(fake):
    fake.fail("GET", "/issues/7$", 503, times=100)
    started = time.monotonic()
    with pytest.raises(requests.exceptions.RetryError):
        gh.upsert_comment(client(fake), "octo/rag", 7, "report")
    assert time.monotonic() - started < 60  # backoff capped at 0.05 s: bounded (generous for a loaded machine)
    assert len(fake.calls("GET", "/issues/7$")) == FAST.total + 1


def test_403_for_fork_token_is_not_retried_and_explained(fake, tmp_path):
    body = {"message": "Resource not accessible by integration"}
    fake.fail("POST", "/comments$", 403, body=body, times=100)
    with pytest.raises(GithubException) as info:
        gh.upsert_comment(client(fake), "octo/rag", 7, "report")
    assert info.value.status == 403 and len(fake.calls("POST")) == 1
    fork = gh.github_context(write_event(tmp_path, fork=True))
    assert "fork" in gh.explain_failure(info.value, fork) and "workflow_run" in gh.explain_failure(info.value, fork)
    same = gh.github_context(write_event(tmp_path))
    assert "pull-requests: write" in gh.explain_failure(info.value, same)


def test_secondary_rate_limit_retry_after_is_honoured(fake):
    limit = {"message": "You have exceeded a secondary rate limit."}
    fake.fail("POST", "/comments$", 403, body=limit, headers={"Retry-After": "1"}, times=1)
    started = time.monotonic()
    result = gh.upsert_comment(client(fake), "octo/rag", 7, "report")
    assert result.action == "created" and 1.0 <= time.monotonic() - started < 60  # waited the 1 s it was asked


def test_retry_after_beyond_cap_fails_fast(fake):
    limit = {"message": "You have exceeded a secondary rate limit."}
    fake.fail("POST", "/comments$", 403, body=limit, headers={"Retry-After": "120"}, times=100)
    started = time.monotonic()
    with pytest.raises(RateLimitExceededException) as info:
        gh.upsert_comment(client(fake), "octo/rag", 7, "report")
    assert time.monotonic() - started < 60 and info.value.wait == 120  # not the 120 s asked for
    assert "rate limit" in gh.explain_failure(info.value, gh.GithubContext())


def test_oversized_comment_is_capped(fake):
    huge = "\n".join(f"| case {i} | {'x' * 90} |" for i in range(1500))
    assert len(huge) > 100_000
    gh.upsert_comment(client(fake), "octo/rag", 7, huge)
    posted = fake.comments[0]["body"]
    assert len(posted) < gh.COMMENT_LIMIT and posted.startswith(gh.MARKER)
    assert "more characters were left out" in posted and "report.json" in posted


def test_empty_token_is_input_error():
    with pytest.raises(InputError, match="empty GitHub token") as info:
        gh.make_client("", "http://127.0.0.1:9")
    # in Actions the token comes from the input (as GITHUB_TOKEN): the flag alone would name a source that is ignored
    assert "github-token input" in str(info.value) and "GITHUB_TOKEN" in str(info.value)


# ------------------------------------------------------------------------ outputs, summary, commands


def test_outputs_single_and_multiline(tmp_path):
    path = tmp_path / "out"
    gh.write_outputs(path, {"verdict": "fail", "regressed-count": 3})
    gh.write_outputs(path, {"note": "two\nlines"})
    lines = path.read_text().splitlines()
    assert lines[:2] == ["verdict=fail", "regressed-count=3"]
    delimiter = lines[2].split("<<")[1]
    assert lines[2] == f"note<<{delimiter}" and lines[3:] == ["two", "lines", delimiter]


def test_summary_is_appended_and_capped(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("previous step\n")
    gh.append_summary(path, "# rag-gate")
    gh.append_summary(path, "y\n" * 600_000)
    text = path.read_text()
    assert text.startswith("previous step\n# rag-gate\n")
    assert len(text) < 15 + 11 + gh.SUMMARY_LIMIT + 2 and "left out" in text


def test_annotation_escapes_newlines_and_properties():
    line = annotation("error", "50% drop\nsecond line", title="case a,b: x", file="eval/g.jsonl", line=7)
    assert line == "::error file=eval/g.jsonl,line=7,title=case a%2Cb%3A x::50%25 drop%0Asecond line"
    assert annotation("warning", "plain") == "::warning::plain"
    assert gh.add_mask("s3cr%t") == "::add-mask::s3cr%25t"


@pytest.mark.parametrize(
    ("value", "masked"),
    [
        ("ghs_16C7e42F292c6912E7710c838347Ae178B4a", True),
        ("ghp_abcDEF0123456789abcDEF0123456789abcd", True),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", True),
        ("0123456789abcdef0123456789abcdef01234567", True),
        ("fake-token", False),
        ("ghs_", False),
        ("hello ghs_abc", False),
    ],
)
def test_only_github_shaped_tokens_get_a_mask_command(value, masked):
    """A mask command prints the value: rag-gate prints only GitHub tokens' (which the runner may not have masked)."""
    assert gh.is_github_token(value) is masked


OWN_LOGIN = """
import sys
sys.path.insert(0, {tests!r})
from fake_github import FakeGithub
from gate.pr import github as gh
fake = FakeGithub().start()
{fail}
client = gh.make_client(fake.token, fake.api_url, gh.RetryPolicy(total=0, max_wait=1.0, timeout=5))
print(gh.own_login(client))
try:
    gh.upsert_comment(client, "octo/rag", 7, "report")
except Exception as exc:
    print(type(exc).__name__)
fake.stop()
"""


@pytest.mark.parametrize("forbid", [False, True])
def test_the_expected_403_of_get_user_logs_nothing_and_a_real_403_still_does(forbid):
    """PyGithub logs every 403 to stderr through its own handler; GET /user's 403 is a normal run's, not an error."""
    import subprocess
    import sys
    from pathlib import Path

    fail = 'fake.fail("POST", "/comments", 403, body={"message": "Resource not accessible by integration"})'
    code = OWN_LOGIN.format(tests=str(Path(__file__).parents[1]), fail=fail if forbid else "")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "github-actions[bot]"
    assert "/user failed with 403" not in done.stderr
    if forbid:  # the token cannot comment: that 403 is reported as PyGithub reports it
        assert done.stdout.splitlines()[1] == "GithubException"
        assert "Request POST /api/v3/repos/octo/rag/issues/7/comments failed with 403" in done.stderr
    else:
        assert done.stderr == "" and len(done.stdout.splitlines()) == 1
