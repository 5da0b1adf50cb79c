"""The GitHub surface (DESIGN §3 ``github``): context, PyGithub client, sticky comment, job summary, outputs.

Everything here talks to GitHub through PyGithub only, or writes the workflow-command files and lines the
Actions runner reads (``$GITHUB_STEP_SUMMARY``, ``$GITHUB_OUTPUT``, ``::error``, ``::add-mask::``). Nothing is
read from the environment at import time: :func:`github_context` takes the mapping explicitly.

Source: GitHub Actions "Workflow commands" and "Webhook events and payloads" documentation; GitHub REST API
"Issue comments" and "Using pagination" (``Link`` header); PyGithub 2.x ``GithubRetry``.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gate.errors import InputError, located
from gate.files import append_text
from gate.jsonl import parse_json
from gate.outputs.annotations import escape_data
from gate.outputs.markdown import CONFIG_LINE, MARKER, SUMMARY_LIMIT, cap_text
from gate.outputs.markdown import GITHUB_COMMENT_LIMIT as COMMENT_LIMIT
from gate.sanitize import WorkflowCommand

if TYPE_CHECKING:
    from github import Github

DEFAULT_API_URL = "https://api.github.com"
ACTIONS_BOT = "github-actions[bot]"
"""Login of the comments written with the Actions ``GITHUB_TOKEN``."""

TOKEN_SOURCES = "the action's github-token input (GITHUB_TOKEN), or locally --github-token or GITHUB_TOKEN"
"""Where the token comes from, as messages name it: in Actions the ``github-token`` input, which reaches rag-gate as
``GITHUB_TOKEN`` only (``--github-token`` is ignored there: :func:`gate.pr.trust.github_token`)."""
DOCS_URL = "https://github.com/rag-gate/rag-gate#github-action"


@dataclass(frozen=True)
class GithubContext:
    """What the Actions runner tells a step about its event, repository and command files."""

    event_name: str | None = None
    """``GITHUB_EVENT_NAME`` (``pull_request``, ``pull_request_target``, ``push``, ...); None outside Actions."""
    repository: str | None = None
    """``owner/name`` of the base repository (``GITHUB_REPOSITORY``)."""
    pr_number: int | None = None
    """Pull request number from the event payload; None for non-PR events and local runs."""
    base_sha: str | None = None
    """``pull_request.base.sha``: the tip of the base branch when the event fired."""
    head_sha: str | None = None
    """``pull_request.head.sha``: the PR head commit."""
    base_ref: str | None = None
    """``pull_request.base.ref`` (branch name, e.g. ``main``)."""
    head_repository: str | None = None
    """``owner/name`` of the repository the PR comes from (differs from ``repository`` for forks)."""
    ref: str | None = None
    """``GITHUB_REF``: the ref that triggered the run (``refs/heads/main`` on a push to main)."""
    sha: str | None = None
    """``GITHUB_SHA``: the commit that triggered the run."""
    default_branch: str | None = None
    """``repository.default_branch`` from the event payload (``main``)."""
    api_url: str = DEFAULT_API_URL
    """REST API root (``GITHUB_API_URL``): GitHub Enterprise and local test servers work the same way."""
    server_url: str = "https://github.com"
    """``GITHUB_SERVER_URL``, used to link the workflow run."""
    run_id: str | None = None
    """``GITHUB_RUN_ID``."""
    workspace: Path | None = None
    """``GITHUB_WORKSPACE``: the checkout; outputs give paths relative to it."""
    step_summary: Path | None = None
    """``GITHUB_STEP_SUMMARY`` file (markdown, appended to)."""
    output: Path | None = None
    """``GITHUB_OUTPUT`` file (``name=value`` lines or heredocs)."""
    in_actions: bool = False
    """True when ``GITHUB_ACTIONS`` is ``true``: workflow commands (``::error``) are then printed."""

    @property
    def is_fork(self) -> bool:
        """True when the PR comes from another repository (its token is read-only on ``pull_request``)."""
        return bool(self.head_repository and self.repository and self.head_repository != self.repository)

    @property
    def run_url(self) -> str | None:
        """Link to the workflow run, or None outside Actions."""
        if not (self.repository and self.run_id):
            return None
        return f"{self.server_url.rstrip('/')}/{self.repository}/actions/runs/{self.run_id}"


def _path(environ: Mapping[str, str], name: str) -> Path | None:
    value = environ.get(name, "")
    return Path(value) if value else None


def read_event(path: Path) -> dict[str, Any]:
    """Read the webhook payload the runner stores at ``GITHUB_EVENT_PATH``.

    Args:
        path: JSON file holding one object.

    Returns:
        The payload (an empty dict when the file is empty).

    Raises:
        InputError: the file is missing or is not a JSON object (invalid, ``NaN``, nested too deeply: file:line).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(located(path, None, "GITHUB_EVENT_PATH", f"cannot read event file: {exc}")) from exc
    if not text.strip():
        return {}
    payload = parse_json(text, path)
    if not isinstance(payload, dict):
        raise InputError(located(path, None, None, "event file must hold a JSON object"))
    return payload


def github_context(environ: Mapping[str, str]) -> GithubContext:
    """Build the :class:`GithubContext` from an environment mapping (``os.environ`` in production).

    Reads ``GITHUB_EVENT_NAME``, ``GITHUB_EVENT_PATH``, ``GITHUB_REPOSITORY``, ``GITHUB_API_URL``,
    ``GITHUB_SERVER_URL``, ``GITHUB_RUN_ID``, ``GITHUB_WORKSPACE``, ``GITHUB_STEP_SUMMARY``, ``GITHUB_OUTPUT``,
    ``GITHUB_REF``, ``GITHUB_SHA`` and ``GITHUB_ACTIONS``; every one is optional (a local run has none).
    ``RAG_GATE_EVENT_PATH`` and ``RAG_GATE_API_URL`` take precedence over ``GITHUB_EVENT_PATH`` and
    ``GITHUB_API_URL``, which a workflow cannot override: they let the self-test replay an event against a local
    server.

    Args:
        environ: variable name → value.

    Returns:
        The context; PR fields are filled for ``pull_request`` and ``pull_request_target`` events.

    Raises:
        InputError: ``GITHUB_EVENT_PATH`` names a file that is missing or not a JSON object.

    Source: GitHub Actions "Variables" reference and "Events that trigger workflows".
    """
    event_name = environ.get("GITHUB_EVENT_NAME") or None
    event_path = _path(environ, "RAG_GATE_EVENT_PATH") or _path(environ, "GITHUB_EVENT_PATH")
    event = read_event(event_path) if event_path is not None else {}
    pull = event.get("pull_request") if isinstance(event.get("pull_request"), dict) else {}
    base = pull.get("base") or {}
    head = pull.get("head") or {}
    number = pull.get("number", event.get("number"))
    repository = event.get("repository") if isinstance(event.get("repository"), dict) else {}
    return GithubContext(
        event_name=event_name,
        repository=environ.get("GITHUB_REPOSITORY") or (base.get("repo") or {}).get("full_name"),
        pr_number=int(number) if isinstance(number, int) and pull else None,
        base_sha=base.get("sha"),
        head_sha=head.get("sha"),
        base_ref=base.get("ref"),
        head_repository=(head.get("repo") or {}).get("full_name"),
        ref=environ.get("GITHUB_REF") or None,
        sha=environ.get("GITHUB_SHA") or None,
        default_branch=repository.get("default_branch") or None,
        api_url=(environ.get("RAG_GATE_API_URL") or environ.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
        server_url=environ.get("GITHUB_SERVER_URL") or "https://github.com",
        run_id=environ.get("GITHUB_RUN_ID") or None,
        workspace=_path(environ, "GITHUB_WORKSPACE"),
        step_summary=_path(environ, "GITHUB_STEP_SUMMARY"),
        output=_path(environ, "GITHUB_OUTPUT"),
        in_actions=environ.get("GITHUB_ACTIONS", "").lower() == "true",
    )


# --------------------------------------------------------------------------------------------- client


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds on how long the GitHub client may retry and wait (a CI job must never sleep for minutes)."""

    total: int = 3
    """Retries after the first attempt, for 5xx answers, connection errors and rate limits."""
    backoff_factor: float = 1.0
    """Exponential backoff factor in seconds (urllib3: 0, 2f, 4f, ... between attempts)."""
    backoff_max: float = 10.0
    """Longest backoff between two attempts, in seconds."""
    max_wait: float = 30.0
    """Longest rate-limit wait (``Retry-After``, secondary or primary limit) in seconds; longer raises."""
    timeout: int = 15
    """Connect/read timeout of one HTTP request, in seconds."""


def bounded_retry(retry: RetryPolicy) -> Any:
    """Make a PyGithub ``GithubRetry`` whose every wait is bounded by ``retry``.

    ``GithubRetry`` already caps primary and secondary rate-limit waits with ``max_rate_limit_wait``; a
    ``Retry-After`` header, however, is slept on by urllib3 without a cap. The returned retry raises
    ``RateLimitExceededExceedsMaxWait`` instead of sleeping longer than ``retry.max_wait`` seconds.

    Idempotent requests (GET, and PATCH, which sets a body) are retried on 5xx answers and read errors. A POST
    is retried only after a rate limit (403/429: GitHub refused it, nothing was created): after a 5xx answer or a
    lost response the comment may exist, so :func:`upsert_comment` looks before it posts again.

    Args:
        retry: the bounds.

    Returns:
        A ``github.GithubRetry`` instance (typed ``Any``: PyGithub is imported lazily).

    Source: PyGithub ``GithubRetry``; urllib3 ``Retry`` (RFC 9110 §10.2.3 ``Retry-After``).
    """
    from github import GithubRetry
    from github.GithubException import RateLimitExceededExceedsMaxWait

    class _BoundedRetry(GithubRetry):
        def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
            if method == "POST":
                return status_code in (403, 429)
            return bool(super().is_retry(method, status_code, has_retry_after))

        def get_retry_after(self, response: Any) -> float | None:
            seconds = super().get_retry_after(response)
            if seconds is not None and self.max_rate_limit_wait is not None and seconds > self.max_rate_limit_wait:
                raise RateLimitExceededExceedsMaxWait(
                    response.status,
                    {"message": f"Retry-After of {seconds:g}s exceeds the {self.max_rate_limit_wait:g}s cap"},
                    dict(response.headers),
                    wait=seconds,
                )
            return seconds

    from urllib3.util.retry import Retry

    return _BoundedRetry(
        allowed_methods=Retry.DEFAULT_ALLOWED_METHODS | {"GET", "PATCH"},  # not POST: see is_retry
        total=retry.total,
        backoff_factor=retry.backoff_factor,
        backoff_max=retry.backoff_max,
        secondary_rate_wait=min(60.0, retry.max_wait),
        max_rate_limit_wait=retry.max_wait,
    )


def make_client(token: str, api_url: str = DEFAULT_API_URL, retry: RetryPolicy | None = None) -> Github:
    """Create the PyGithub client: token auth, bounded retries, timeouts, no sleeps between requests.

    Args:
        token: a GitHub token (``GITHUB_TOKEN`` or a PAT); never logged.
        api_url: REST API root, e.g. ``https://api.github.com`` or ``http://127.0.0.1:PORT/api/v3``.
        retry: retry and timeout bounds (defaults: :class:`RetryPolicy`).

    Returns:
        A ``github.Github`` instance.

    Raises:
        InputError: the token is empty.
    """
    from github import Auth, Github

    if not token:
        raise InputError(f"empty GitHub token (from {TOKEN_SOURCES})")
    retry = retry or RetryPolicy()
    return Github(
        base_url=api_url.rstrip("/"),
        auth=Auth.Token(token),
        retry=bounded_retry(retry),
        timeout=retry.timeout,
        seconds_between_requests=0,
        seconds_between_writes=0,
    )


def client_factory(
    token: str | None, api_url: str = DEFAULT_API_URL, retry: RetryPolicy | None = None
) -> Callable[[], Github] | None:
    """A maker of :func:`make_client` clients for ``token``, or None without a token.

    What holds the maker (the PR run's :class:`~gate.pr.report.Reporter`) can reach GitHub without holding the
    token: it stays in the maker's closure, which no ``repr`` shows.

    Args:
        token: the GitHub token (:func:`gate.pr.trust.github_token`); None or empty: no client.
        api_url: REST API root.
        retry: retry and timeout bounds (defaults: :class:`RetryPolicy`).
    """
    if not token:
        return None

    def client() -> Github:
        return make_client(token, api_url, retry)

    return client


# -------------------------------------------------------------------------------------- sticky comment


@dataclass(frozen=True)
class CommentResult:
    """Where the sticky comment went."""

    action: Literal["created", "updated"]
    """Whether a new comment was posted or the marked one edited in place."""
    id: int
    """Comment id."""
    url: str
    """``html_url`` of the comment (empty if the server gave none)."""


def comment_body(markdown: str, marker: str = MARKER) -> str:
    """Prefix the report with the hidden marker and cap it below GitHub's comment limit.

    Args:
        markdown: the rendered comment.
        marker: hidden HTML comment that identifies the sticky comment.

    Returns:
        The marker, a newline and ``markdown``; at most :data:`COMMENT_LIMIT` - 1 characters.
    """
    body = markdown if markdown.lstrip().startswith(marker) else f"{marker}\n{markdown}"
    return cap_text(body, COMMENT_LIMIT - 1, "report.json, comment.md and the job summary")


def own_login(client: Github) -> str:
    """The login that comments made with ``client`` are written by.

    ``GET /user`` for a personal access token; an installation token (the Actions ``GITHUB_TOKEN``) is answered
    403 there, and its comments are written by :data:`ACTIONS_BOT`.

    Raises:
        github.GithubException: any other failure of ``GET /user`` (bad credentials, a server error).

    Source: GitHub REST API "Get the authenticated user" (not available to GitHub App installation tokens).
    """
    from github import GithubException

    retry_log = logging.getLogger("github.GithubRetry")
    expected = _ExpectedForbidden()
    retry_log.addFilter(expected)  # only for this call: a 403 on any other request is still logged
    try:
        return str(client.get_user().login)
    except GithubException as exc:
        if exc.status == 403:
            return ACTIONS_BOT
        raise
    finally:
        retry_log.removeFilter(expected)


class _ExpectedForbidden(logging.Filter):
    """Drops PyGithub's log line for the one 403 a normal run gets: ``GET /user`` with the Actions token.

    ``GithubRetry`` logs every 403 at INFO (``Request GET /user failed with 403: Forbidden``) to a handler PyGithub
    installs on import, before it decides whether the 403 is a rate limit. For an installation token that 403 is
    the expected answer (:func:`own_login`), not a problem; every other record (a rate limit's waits, a 403 on
    another request) passes.
    """

    _LINE = re.compile(r"Request GET \S*/user failed with 403\b")

    def filter(self, record: logging.LogRecord) -> bool:
        """False for the expected line only."""
        return not self._LINE.match(record.getMessage())


def find_sticky(issue: Any, marker: str, login: str) -> Any | None:
    """The comment on ``issue`` written by ``login`` that is the sticky comment of ``marker``, or None.

    Walks every page (``Link: rel="next"``). Comments by anyone else are never candidates, whatever they hold. A
    comment that starts with ``marker`` is taken first; otherwise a comment of an older rag-gate, marked with
    :data:`MARKER` alone (no config line), is adopted, so an upgrade leaves no stale comment behind.
    """
    legacy = None
    for comment in issue.get_comments():
        author = comment.user.login if comment.user is not None else ""
        if author.lower() != login.lower():
            continue
        body = (comment.body or "").lstrip()
        if body.startswith(marker):
            return comment
        if legacy is None and body.startswith(MARKER) and not body[len(MARKER) :].lstrip().startswith(CONFIG_LINE):
            legacy = comment
    return legacy


def _lost_response(exc: BaseException) -> bool:
    """True when a failed POST may still have been performed: a 5xx answer, a timeout, a dropped connection."""
    from github import GithubException
    from requests import ConnectionError, Timeout

    if isinstance(exc, GithubException):
        return exc.status >= 500
    return isinstance(exc, Timeout | ConnectionError)


def upsert_comment(
    client: Github,
    repository: str,
    pr_number: int,
    markdown: str,
    *,
    marker: str = MARKER,
    author: str | None = None,
    attempts: int = 3,
) -> CommentResult:
    """Create the sticky PR comment, or edit ours (never a second one, never someone else's).

    The sticky comment is the first comment written by our own identity (``author``, else :func:`own_login`)
    whose body starts with ``marker``. It is edited; when it vanished between listing and editing (404), or
    there is none, a new one is posted. A post whose answer was lost (5xx, timeout) may have succeeded: the
    comments are listed again and the one found is adopted before posting again, at most ``attempts`` posts.

    Args:
        client: from :func:`make_client`.
        repository: ``owner/name``.
        pr_number: pull request number (> 0).
        markdown: the comment (capped and marked by :func:`comment_body`).
        marker: hidden marker.
        author: login of our own comments (None: ask GitHub, see :func:`own_login`).
        attempts: posts at most (≥ 1).

    Returns:
        What was done, with the comment id and URL (``created`` also for an adopted comment).

    Raises:
        github.GithubException: GitHub refused (403 for a read-only fork token, ...), kept failing, or a
            rate-limit wait would exceed the policy.
        requests.RequestException: GitHub kept failing after the retries (``RetryError``), or was unreachable.
    """
    from github import GithubException, UnknownObjectException
    from requests import RequestException

    body = comment_body(markdown, marker)
    issue = client.get_repo(repository).get_issue(pr_number)
    login = author or own_login(client)
    sticky = find_sticky(issue, marker, login)
    if sticky is not None:
        try:
            sticky.edit(body)
            return CommentResult("updated", sticky.id, sticky.html_url or "")
        except UnknownObjectException:  # deleted since it was listed
            pass
    attempt = 1
    while True:
        try:
            created = issue.create_comment(body)
            return CommentResult("created", created.id, created.html_url or "")
        except (GithubException, RequestException) as exc:
            if not _lost_response(exc) or attempt >= attempts:
                raise
        adopted = find_sticky(issue, marker, login)
        if adopted is not None:  # the post went through; its answer was lost
            if adopted.body != body:
                adopted.edit(body)
            return CommentResult("created", adopted.id, adopted.html_url or "")
        attempt += 1


def explain_failure(exc: BaseException, context: GithubContext) -> str:
    """Say in one line why the comment could not be posted, and what to do about it.

    Args:
        exc: what PyGithub or requests raised.
        context: the run's context (tells fork PRs apart).

    Returns:
        A one-line explanation for a ``::warning`` and the job summary.
    """
    from github import GithubException, RateLimitExceededException

    if isinstance(exc, RateLimitExceededException):
        return f"GitHub rate limit: waiting would exceed the retry cap ({exc.data!s:.200})."
    if isinstance(exc, GithubException) and exc.status == 403:
        if context.is_fork:
            return (
                "this PR comes from a fork, and GitHub gives fork PRs a read-only token on `pull_request` "
                "(403 Resource not accessible by integration); the report is in the job summary. To comment on "
                "fork PRs, use the two-workflow pattern (a `workflow_run` workflow that posts the uploaded "
                f"comment.md), see {DOCS_URL}."
            )
        message = exc.data.get("message", "") if isinstance(exc.data, dict) else ""
        return f"the token cannot comment (403 {message}); give the job `permissions: pull-requests: write`."
    if isinstance(exc, GithubException):
        return f"GitHub answered HTTP {exc.status}: {exc.data!s:.200}"
    return f"GitHub kept failing after retries ({type(exc).__name__}: {str(exc)[:200]})."


# ------------------------------------------------------------------------ summary, outputs, annotations


def append_summary(path: Path, markdown: str) -> None:
    """Append markdown to the job summary file (``$GITHUB_STEP_SUMMARY``), capped below 1 MiB.

    Args:
        path: the summary file (created if missing).
        markdown: text to append; a trailing newline is added.
    """
    text = cap_text(markdown, SUMMARY_LIMIT, "report.json")
    append_text(path, text if text.endswith("\n") else text + "\n")


def write_outputs(path: Path, outputs: Mapping[str, object], redact: Callable[[str], str] | None = None) -> None:
    """Append step outputs to ``$GITHUB_OUTPUT`` (``name=value``, or a heredoc for multi-line values).

    Args:
        path: the output file (created if missing).
        outputs: output name → value (converted with ``str``).
        redact: applied to every value (``gate.redact.Redactor``); None: values as given.

    Source: GitHub Actions "Workflow commands: setting an output parameter" (multiline strings).
    """
    lines = []
    for name, value in outputs.items():
        text = redact(str(value)) if redact is not None else str(value)
        if "\n" in text or "\r" in text:
            delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
            lines.append(f"{name}<<{delimiter}\n{text}\n{delimiter}\n")
        else:
            lines.append(f"{name}={text}\n")
    append_text(path, "".join(lines))


GITHUB_TOKEN_SHAPE = re.compile(r"(gh[pousr]_|github_pat_)[A-Za-z0-9_]+|(v1\.)?[0-9a-f]{40}")
"""GitHub's token formats: ``ghs_`` (installation: GITHUB_TOKEN), ``ghp_``/``github_pat_`` (personal), ``gho_``,
``ghu_``, ``ghr_``, and the older 40-hex forms (GitHub Enterprise Server)."""


def is_github_token(value: str) -> bool:
    """Whether ``value`` has the shape of a GitHub token (:data:`GITHUB_TOKEN_SHAPE`), which rag-gate masks."""
    return GITHUB_TOKEN_SHAPE.fullmatch(value) is not None


def add_mask(secret: str) -> str:
    """The ``::add-mask::`` command that makes the runner redact ``secret`` from every later log line."""
    return WorkflowCommand(f"::add-mask::{escape_data(secret)}")
