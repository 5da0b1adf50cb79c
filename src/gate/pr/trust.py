"""The PR flow's trust policy (README "Security"): events, trusted runs, the base cache, the GitHub token.

Which events rag-gate runs on, which runs are trusted, who writes the base cache, which GitHub token the comment
uses, and which credentials it warns about.

The PR's code runs in a :class:`~gate.sandbox.Sandbox`; events that give a write token and secrets to code that can
come from a fork are refused unless the workflow opts in (:func:`refuse_unsafe_event`); the base cache is read by
every run but written only by trusted ones (:func:`cache_policy`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gate.errors import InputError
from gate.outputs.annotations import annotation
from gate.pr import cache, git
from gate.pr import github as gh
from gate.pr.credentials import Credentials

log = logging.getLogger("rag-gate")

SAFE_EVENTS = frozenset(
    {"pull_request", "pull_request_review", "pull_request_review_comment", "push", "merge_group"}
    | {"workflow_dispatch", "schedule"}
)
"""Events on which rag-gate runs without an opt-in: a fork's code only ever gets a read-only token and no secrets
(``pull_request`` and its reviews), or the code comes from the repository itself, written by people who can push
(``push``, ``workflow_dispatch``, ``schedule``, and ``merge_group``, whose PRs were approved to merge). Every other
event (``pull_request_target``, ``workflow_run``, ``issue_comment``, ...) gives the job a write token and the
repository's secrets while the code it checks out can come from a fork."""
TRUSTED_EVENTS = frozenset({"push", "workflow_dispatch", "schedule"})
"""Events whose runs, on the default branch, may write the shared base cache."""

FLAG_TOKEN_IGNORED = (
    "--github-token is ignored in GitHub Actions: a command line is visible to every process of the job "
    "(/proc/<pid>/cmdline), the PR's pipeline included. Pass the token in the GITHUB_TOKEN environment variable "
    "(the action does)."
)


def privileged_event_help(event: str) -> str:
    """Why rag-gate refuses ``event``, what to do instead, and how to opt in."""
    return (
        f"rag-gate refuses to run on `{event}`: that event gives the job a write token and the repository's "
        "secrets, while the code it checks out can come from a fork (a pull request's head), and rag-gate executes "
        "that code (the pipeline and the setup command), so a fork could steal the secrets or write to the "
        "repository. Run rag-gate on `pull_request` instead (fork PRs then get a read-only token and no secrets: "
        "the report goes to the job summary and to an uploaded artifact), and, to comment on fork PRs, post the "
        "uploaded comment.md from a second workflow triggered by `workflow_run`, which runs neither rag-gate nor PR "
        "code. If this workflow only ever checks out code you trust, opt in with the input "
        f"`allow-privileged-event: true` (`--allow-privileged-event on`). See {gh.DOCS_URL}."
    )


def refuse_unsafe_event(context: gh.GithubContext, *, allow_privileged: bool = False) -> None:
    """Refuse every event outside :data:`SAFE_EVENTS` unless the workflow opted in; local runs (no event) pass.

    Args:
        context: the run's GitHub context.
        allow_privileged: the workflow's explicit opt-in (``allow-privileged-event: true``).

    Raises:
        InputError: the event is privileged (exit 2), saying why and what to do instead.
    """
    if not event_allowed(context, allow_privileged=allow_privileged):
        raise InputError(privileged_event_help(str(context.event_name)))


def event_allowed(context: gh.GithubContext, *, allow_privileged: bool = False) -> bool:
    """Whether rag-gate may run on this event: local runs, :data:`SAFE_EVENTS`, or a privileged one opted into."""
    return context.event_name is None or context.event_name in SAFE_EVENTS or allow_privileged


@dataclass(frozen=True)
class CachePolicy:
    """Whether this run reads and writes the base cache, and with which signing key."""

    directory: Path | None = None
    """The cache directory; None: no cache."""
    signing_key: bytes | None = None
    """HMAC key (:func:`gate.pr.cache.signing_key`)."""
    write: bool = False
    """True for trusted runs only."""

    @property
    def readable(self) -> bool:
        """Entries can be read (and verified)."""
        return self.directory is not None and self.signing_key is not None

    @property
    def writable(self) -> bool:
        """This run may store its base results."""
        return self.readable and self.write


def is_trusted(context: gh.GithubContext) -> bool:
    """True for a trusted run, which may write the shared base cache.

    Local runs (not in GitHub Actions) are, and ``push``/``workflow_dispatch``/``schedule`` runs on the repository's
    default branch (code that was merged). Pull requests never are, whatever their origin.
    """
    if not context.in_actions:
        return True
    return (
        context.event_name in TRUSTED_EVENTS
        and context.default_branch is not None
        and context.ref == f"refs/heads/{context.default_branch}"
    )


def cache_policy(
    directory: Path | None, context: gh.GithubContext, environ: Mapping[str, str], credentials: Credentials
) -> CachePolicy:
    """The rule for the shared base cache: every run reads verified entries; only trusted runs write.

    Entries are signed with ``RAG_GATE_CACHE_KEY`` (in CI, from a repository secret the pipeline never gets), or,
    locally, with a per-user key. In GitHub Actions without that secret (fork PRs get no secrets) the cache is
    not used: nothing could tell an entry written by a trusted run from one a PR's code forged.

    Args:
        directory: ``--cache-dir`` (None: no cache).
        context: the run's GitHub context.
        environ: rag-gate's environment (where a local run's per-user key is kept).
        credentials: the run's secrets (``RAG_GATE_CACHE_KEY``).

    Returns:
        The policy.
    """
    if directory is None:
        return CachePolicy()
    key = cache.signing_key(credentials.cache_key, environ, local=not context.in_actions)
    if key is None:
        log.warning(
            "base cache not used: no %s (set the action's cache-signing-key input from a repository secret; "
            "fork PRs get no secrets, so their base is always evaluated)",
            cache.SIGNING_KEY_VAR,
        )
    return CachePolicy(directory, key, write=is_trusted(context))


def stores_base_only(context: gh.GithubContext, base_ref: str | None) -> bool:
    """True for a run with nothing to compare that stores the base for later PRs: a trusted event, no pull request.

    Such a run evaluates its commit as the base of future pull requests (the cache, which only trusted runs write)
    and, on the default branch, appends it to the main-branch history.
    """
    return base_ref is None and context.pr_number is None and context.event_name in TRUSTED_EVENTS


def github_token(context: gh.GithubContext, credentials: Credentials, emit: Callable[[str], None]) -> str | None:
    """The token for the comment, masked in the log first when it is a GitHub token.

    In GitHub Actions the token is ``GITHUB_TOKEN`` only: ``--github-token`` (``credentials.flag_token``) is ignored
    with a warning, since a command line is visible to every process of the job. GitHub already masks a token that
    comes from ``secrets`` or ``github.token``; a GitHub token from elsewhere is masked here too (anything else is
    never printed, not even in a mask command). Locally the flag wins over ``GITHUB_TOKEN``.
    """
    token, flag = credentials.github_token, credentials.flag_token
    if not context.in_actions:
        return credentials.github(in_actions=False)
    for secret in sorted({s for s in (flag, token) if s is not None}):
        if gh.is_github_token(secret):
            emit(gh.add_mask(secret))
    if flag:
        emit(annotation("warning", FLAG_TOKEN_IGNORED, title="rag-gate: token on the command line ignored"))
    return credentials.github(in_actions=True)


def warn_persisted_credentials(repo: Path, context: gh.GithubContext, emit: Callable[[str], None]) -> None:
    """Warn when ``.git/config`` holds credentials (``actions/checkout`` with ``persist-credentials: true``)."""
    names = git.credential_settings(repo)
    if not names:
        return
    message = (
        f"{repo}/.git/config holds credentials ({', '.join(names)}, left by actions/checkout): any code in this job, "
        "the PR's pipeline included, can read them. Set `persist-credentials: false` on actions/checkout."
    )
    if context.in_actions:
        emit(annotation("warning", message, title="rag-gate: credentials in .git/config"))
    else:
        log.warning(message)
