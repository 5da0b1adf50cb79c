"""The pull-request flow (``rag-gate pr``): evaluate the merge base and the head, compare, report on GitHub.

Steps: read the GitHub context (or ``--base-ref`` locally) → refuse privileged events → resolve the merge base →
run the base side in a ``git worktree`` of it (or take the cached base run) → run the head side in the checkout →
check the base results against the copy held in memory → compare → post or edit the sticky comment → job summary,
outputs, annotations.

The gate's policy (metrics, margins, judge, the variables the pipeline may have) is the base side's, so a PR cannot
relax its own gate nor ask for secrets; the golden set is the head's, used on both sides. Without a pull request
(``--base-ref``) nothing is posted: the comment is printed and written to disk.

Trust (README "Security"): the PR's code runs in a :class:`~gate.sandbox.Sandbox`; events that give a write token
and secrets to code that can come from a fork are refused unless the workflow opts in; the base cache is read by
every run but written only by trusted ones (:func:`cache_policy`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import yaml

from gate import __version__, outputs
from gate.comparison import Comparison, FailOn, exit_code_for, relocate
from gate.config import Config, load_config
from gate.errors import EvaluationError, GateError, InputError
from gate.files import contained_dir, make_dirs, prepare_output_file, remove_tree
from gate.golden import GoldenDiff, contract, diff_golden, file_sha256, load_golden
from gate.jsonl import dumps, write_text_atomic
from gate.outputs import Output
from gate.outputs.annotations import annotation
from gate.outputs.escape import escape_markdown
from gate.outputs.markdown import render_error_comment, sticky_marker
from gate.pipeline import run_shell
from gate.pr import cache, envs, gitops
from gate.pr import github as gh
from gate.pr.history_store import HistoryStore
from gate.pr.trend import check_head, history_store, push_summary, record_push
from gate.produce import run_side
from gate.redact import Redactor
from gate.sandbox import Sandbox
from gate.sanitize import WorkflowCommand
from gate.sides import compare_sides
from gate.trends import TrendReport

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


@dataclass(frozen=True)
class PrOptions:
    """What ``rag-gate pr`` was asked to do (the action's inputs, one flag each)."""

    config: Path = Path("rag-gate.yml")
    """The config file, relative to ``working_directory``."""
    base_ref: str | None = None
    """Local mode: compare with the merge base of this ref and ``HEAD`` (overrides the event's base)."""
    out_dir: Path = Path("rag-gate-out")
    """Where ``base/``, ``head/``, ``report.json`` and ``comment.md`` go, relative to ``working_directory``."""
    fail_on: FailOn = "fail"
    """Which verdicts exit 1: ``fail``; ``inconclusive`` (fail and inconclusive); ``never``."""
    repeats: int | None = None
    """Repeats per case on each side (None: the config's)."""
    comment: bool = True
    """Post the sticky PR comment."""
    cache_dir: Path | None = None
    """Base-results cache directory, relative to ``working_directory`` (None: no cache)."""
    working_directory: Path | None = None
    """Directory to run in (None: the current one)."""
    setup_command: str | None = None
    """Shell command that installs the user's pipeline: run for each side in that side's checkout (the base's
    worktree, ``working_directory`` for the head), into that side's own environment (:mod:`gate.pr.envs`)."""
    github_token: str | None = None
    """Token for the comment, for local use (None: ``GITHUB_TOKEN``); ignored in GitHub Actions, where a command
    line is visible to every process of the job."""
    allow_privileged_event: bool = False
    """Run even on an event that gives a write token and secrets to code that can come from a fork."""
    strict: bool = False
    """Turn an inconclusive verdict into fail."""
    progress: bool = False
    """Show progress bars on stderr."""
    history: str | None = None
    """Main-branch history: None for the history branch, ``off``, or a file path relative to
    ``working_directory`` (read on pull requests, appended on pushes to the default branch)."""
    history_branch: str | None = None
    """The history branch (None: ``rag-gate-history``)."""
    junit: Path | None = None
    """Also write the comparison as JUnit XML to this file, relative to ``working_directory`` (None: not)."""


class NotGatedYet(GateError):
    """The base commit has no rag-gate config: this pull request is the one that adds rag-gate (exit 0).

    Nothing can be compared (the base's config is the policy), so the check passes with a notice, and the gate
    starts with the pull requests after this one is merged.
    """

    exit_code = 0


@dataclass(frozen=True)
class PrResult:
    """What the PR flow did."""

    verdict: str
    """``pass`` | ``fail`` | ``inconclusive``; on a trusted push without a PR, ``cached`` (base results stored for
    PRs; the history appended too unless it is off) or ``recorded`` (only appended to the history)."""
    exit_code: int
    """0 or 1, from the verdict and ``fail_on``."""
    comparison: Comparison | None
    """The comparison (``report.json``); None when nothing was compared (``cached``)."""
    report_path: Path
    """Where ``report.json`` was written."""
    comment_path: Path
    """Where ``comment.md`` was written."""
    comment_status: str
    """``created`` | ``updated`` | ``disabled`` | ``local`` | ``failed``."""
    base_sha: str
    """The merge base that was evaluated."""
    base_cached: bool
    """True when the base run came from the cache."""
    trend: TrendReport | None = None
    """The run against main's history (None: history off or unreadable)."""


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


def cache_policy(directory: Path | None, context: gh.GithubContext, environ: Mapping[str, str]) -> CachePolicy:
    """The rule for the shared base cache: every run reads verified entries; only trusted runs write.

    Entries are signed with ``RAG_GATE_CACHE_KEY`` (in CI, from a repository secret the pipeline never gets), or,
    locally, with a per-user key. In GitHub Actions without that secret (fork PRs get no secrets) the cache is
    not used: nothing could tell an entry written by a trusted run from one a PR's code forged.

    Args:
        directory: ``--cache-dir`` (None: no cache).
        context: the run's GitHub context.
        environ: rag-gate's environment.

    Returns:
        The policy.
    """
    if directory is None:
        return CachePolicy()
    key = cache.signing_key(environ, local=not context.in_actions)
    if key is None:
        log.warning(
            "base cache not used: no %s (set the action's cache-signing-key input from a repository secret; "
            "fork PRs get no secrets, so their base is always evaluated)",
            cache.SIGNING_KEY_VAR,
        )
    return CachePolicy(directory, key, write=is_trusted(context))


def _base_commit(options: PrOptions, context: gh.GithubContext, repo: Path) -> tuple[str, str]:
    """The merge base to evaluate, and a label for it (the base branch name)."""
    if options.base_ref:
        return gitops.merge_base(repo, options.base_ref, "HEAD"), options.base_ref
    if context.pr_number is not None and context.base_sha:
        head = context.head_sha or "HEAD"
        return gitops.merge_base(repo, context.base_sha, head), context.base_ref or context.base_sha
    raise InputError(
        "no base to compare with: pass --base-ref BRANCH (e.g. --base-ref main), or run on a pull_request event"
    )


def _run_setup(command: str, workdir: Path, sandbox: Sandbox, passthrough: Iterable[str]) -> None:
    """Run the user's setup command through the shell, in the sandbox.

    It installs the pipeline's dependencies, so it runs the PR's code too: it gets the pipeline's environment and
    user, and its output is forwarded, redacted.
    """
    with sandbox.scratch() as tmpdir:
        try:
            code = run_shell(command, cwd=workdir, env=sandbox.environment(passthrough, tmpdir=tmpdir), sandbox=sandbox)
        finally:
            sandbox.sweep()
    if code != 0:
        raise EvaluationError(f"--setup-command exited with {code}: {sandbox.redactor(command)}")


@dataclass(frozen=True)
class _Setup:
    """A side's setup: the command, where it runs (that side's checkout), and where temporary environments go."""

    command: str
    """The setup command's text."""
    repo: Path
    """The repository (for the commit's tree)."""
    checkout: Path
    """The directory the command runs in: ``working_directory`` inside that side's checkout."""
    cleanup: ExitStack
    """Removes the temporary environments made for this run."""


def _side_sandbox(
    setup: _Setup, sandbox: Sandbox, passthrough: Iterable[str], policy: CachePolicy | None, env_id: str = ""
) -> Sandbox:
    """``sandbox`` with the pipeline's Python replaced by a side's own environment, set up by the side's command.

    The base's (``env_id`` given) is taken from the verified cache when there, else built and, on trusted runs,
    stored there for reuse; the head's (``env_id`` empty) is always new and temporary. In the image the environment
    is built as the pipeline user and taken back (read-only to it) once set up, so no later code changes it.
    """
    if env_id and policy is not None and policy.readable:
        assert policy.directory is not None and policy.signing_key is not None
        reused = envs.lookup(policy.directory, env_id, policy.signing_key)
        if reused is not None:
            log.info("base environment reused (%s)", env_id[:12])
            return dataclasses.replace(sandbox, python=str(reused))
    keep = bool(env_id) and policy is not None and policy.writable
    env = envs.staging(policy.directory if keep and policy is not None else None, env_id)
    if not keep:
        setup.cleanup.callback(remove_tree, env.parent)
    python = envs.create(sandbox.python, env)
    if sandbox.user is not None:
        envs.hand_over(env, sandbox.user.uid, sandbox.user.gid)
    side = dataclasses.replace(sandbox, python=str(python))
    log.info("setting up the %s's environment: %s", "base" if env_id else "head", sandbox.redactor(setup.command))
    _run_setup(setup.command, setup.checkout, side, passthrough)
    envs.freeze(env)
    if keep and policy is not None:
        assert policy.signing_key is not None
        envs.store(env, env_id, policy.signing_key)
    return side


def _base_config(repo: Path, base_sha: str, worktree: Path, config_rel: Path, repeats: int | None) -> Config:
    """The base side's config from its worktree (with the base's own golden set), checked against git objects.

    The config and the files it names inside the repository (golden set, precomputed predictions) must be files
    of the base commit, links followed only inside it (:func:`gate.pr.gitops.file_at`): a link committed in the
    base that leads out of it (e.g. into the PR's checkout) is refused (exit 2), so the policy and the golden set
    are the base commit's own.
    """
    if gitops.file_at(repo, base_sha, config_rel.as_posix()) is None:
        raise NotGatedYet(
            f"{config_rel} is not in the base commit {base_sha[:12]}: this pull request adds rag-gate, so there is "
            "no base to compare with yet (the base's config is the policy); nothing was evaluated and the check "
            "passes. The gate compares the pull requests that come after this one is merged."
        )
    config = load_config(worktree / config_rel, repeats=repeats)
    raw = yaml.safe_load((worktree / config_rel).read_text(encoding="utf-8")) or {}
    pipeline = raw.get("pipeline") if isinstance(raw.get("pipeline"), dict) else {}
    root = worktree.resolve()
    for field, named in (("golden", raw.get("golden")), ("pipeline.predictions", pipeline.get("predictions"))):
        if not isinstance(named, str):
            continue
        lexical = os.path.normpath(config.path.parent / named)
        relative = os.path.relpath(lexical, root)
        if relative.startswith(".."):
            continue  # named outside the repository by the base config itself
        if gitops.file_at(repo, base_sha, relative) is None:
            raise InputError(f"{config_rel}: {field}: {named} is not a file of the base commit")
    return config


def _golden_contract(base: Config, head: Config, out: Path) -> tuple[Path, GoldenDiff, dict[str, int]]:
    """The golden set both sides are evaluated on (written to ``out/golden.jsonl``) and how the PR changed it.

    Also returns the line of each case in the PR's own golden file (for reviewers and annotations). By default
    (the base config's ``golden_changes: base``) it is the contract: every base case with its base definition,
    then the cases the PR adds (DESIGN §8); with ``golden_changes: head``, the PR's own set.
    """
    base_cases, head_cases = load_golden(base.golden), load_golden(head.golden)
    diff = diff_golden(base_cases, head_cases)
    if base.evaluation.golden_changes == "head":
        text = head.golden.read_text(encoding="utf-8")
    else:  # the base's file as it is (an unchanged golden set keeps its sha256, and its cached base results)
        text = base.golden.read_text(encoding="utf-8")
        text += ("" if not text or text.endswith("\n") else "\n") + "".join(
            dumps(case.to_dict()) + "\n" for case in contract(base_cases, diff)[len(base_cases) :]
        )
    path = out / "golden.jsonl"
    make_dirs(out)
    write_text_atomic(path, text)
    return path, diff, {case.id: case.line for case in head_cases}


def _base_results(
    options: PrOptions,
    policy: CachePolicy,
    config: Config,
    base_sha: str,
    base_label: str,
    out: Path,
    sandbox: Sandbox,
    setup: _Setup | None = None,
) -> tuple[cache.Snapshot, bool]:
    """The base's results in ``out/base``, from the verified cache or evaluated now; returns (snapshot, cached).

    With a setup command, the base is evaluated in its own environment (:func:`_side_sandbox`), whose key is part
    of the cache key. The snapshot (every file, in memory) is what the comparison will use: see :func:`_intact`.
    """
    env_id = envs.env_key(setup.repo, base_sha, setup.command, sandbox.python) if setup else ""
    key = cache.CacheKey(
        base_sha=base_sha,
        golden_sha256=file_sha256(config.golden),
        config_sha256=config.sha256,
        judge_id=cache.judge_id(config.evaluation.judge),
        repeats=config.repeats,
        gate_version=__version__,
        environment=env_id,
    )
    run_dir = out / "base"
    if policy.readable:
        assert policy.directory is not None and policy.signing_key is not None
        hit = cache.lookup(policy.directory, key, policy.signing_key)
        if hit is not None:
            hit.restore(run_dir)
            return hit, True
    if setup is not None:
        sandbox = _side_sandbox(setup, sandbox, config.pipeline.env_passthrough, policy, env_id)
    remove_tree(run_dir)  # never resume a run of another commit; a link there is removed, not followed
    run_side(config, run_dir, progress=options.progress, git_sha=base_sha, git_ref=base_label, sandbox=sandbox)
    snapshot = cache.Snapshot.of(run_dir)
    if policy.writable:
        assert policy.directory is not None and policy.signing_key is not None
        cache.store(policy.directory, key, snapshot, policy.signing_key)
    return snapshot, False


def _intact(snapshot: cache.Snapshot, run_dir: Path, context: gh.GithubContext, emit: Callable[[str], None]) -> Path:
    """``run_dir`` as it was computed.

    When its files differ from the snapshot held in memory (the head's code rewrote them), warn and restore them.
    """
    if not snapshot.matches(run_dir):
        message = (
            f"{run_dir}: the base results changed after they were computed (the PR's code wrote to them?); "
            "the copy rag-gate kept in memory is used"
        )
        log.warning(message)
        if context.in_actions:
            emit(annotation("warning", message, title="rag-gate: base results were modified"))
        snapshot.restore(run_dir)
    return run_dir


def _sandbox(environ: Mapping[str, str], configs: Iterable[Config], secrets: Iterable[str | None]) -> Sandbox:
    """The pipeline's sandbox; the judges' key variables and ``secrets`` (tokens) are redacted too."""
    names = {str(c.evaluation.judge[k]) for c in configs for k in ("api_key_env",) if c.evaluation.judge.get(k)}
    return Sandbox.from_environ(environ, secrets=secrets, secret_names=names)


def _warn_persisted_credentials(repo: Path, context: gh.GithubContext, emit: Callable[[str], None]) -> None:
    """Warn when ``.git/config`` holds credentials (``actions/checkout`` with ``persist-credentials: true``)."""
    names = gitops.credential_settings(repo)
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


def _relative(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` when inside it (paths inside the container mean nothing outside)."""
    if root is not None:
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            pass
    return str(path)


def _post_comment(
    options: PrOptions,
    context: gh.GithubContext,
    token: str | None,
    markdown: str,
    marker: str,
    policy: gh.RetryPolicy | None,
    redact: Redactor,
) -> tuple[str, str | None, str]:
    """Post or edit the config's sticky comment; returns (status, url, warning), never raises for GitHub failures.

    The body and the warning are redacted: a server that echoes the request's ``Authorization`` header puts the
    token in the exception.
    """
    from github import GithubException
    from requests import RequestException

    if context.pr_number is None:
        return "local", None, ""
    if not options.comment:
        return "disabled", None, ""
    if not token or not context.repository:
        return "failed", None, "no GitHub token (pass --github-token or set GITHUB_TOKEN): comment not posted."
    try:
        client = gh.make_client(token, context.api_url, policy)
        done = gh.upsert_comment(client, context.repository, context.pr_number, redact(markdown), marker=marker)
    except (GithubException, RequestException) as exc:
        return "failed", None, redact("the PR comment could not be posted: " + gh.explain_failure(exc, context))
    return done.action, done.url, ""


def run_pr(
    options: PrOptions,
    environ: Mapping[str, str],
    *,
    emit: Callable[[str], None] = print,
    policy: gh.RetryPolicy | None = None,
) -> PrResult:
    """Run the whole PR flow (see the module docstring).

    Args:
        options: the command's options.
        environ: the environment (``os.environ``): ``GITHUB_*`` and ``GITHUB_TOKEN``.
        emit: writes one line to stdout (workflow commands, and the comment in local mode).
        policy: GitHub retry bounds (tests shorten them).

    Returns:
        The verdict, exit code (0/1 per ``options.fail_on``), paths and what happened to the comment.

    Raises:
        InputError: ``pull_request_target``, no base, missing base commit (shallow clone), bad config (exit 2).
        EvaluationError: the setup command or a pipeline failed beyond recovery (exit 3).
        Both are also written to the job summary and as an ``::error`` annotation before being raised.
    """
    context = gh.github_context(environ)
    token = environ.get("GITHUB_TOKEN") or None
    if context.in_actions:
        # GitHub already masks a token that comes from `secrets` or `github.token`; a GitHub token from elsewhere
        # is masked here too. Anything else is never printed, not even in a mask command.
        for secret in sorted({options.github_token, token} - {None}):
            if gh.is_github_token(str(secret)):
                emit(gh.add_mask(str(secret)))
        if options.github_token:
            emit(annotation("warning", FLAG_TOKEN_IGNORED, title="rag-gate: token on the command line ignored"))
    else:
        token = options.github_token or token
    redact = Redactor.from_environ(environ, extra=(options.github_token, token))
    emit = _redacting(emit, redact)  # everything printed from here on (the ::add-mask:: lines are out already)
    try:
        with ExitStack() as envs_cleanup:  # the sides' temporary environments go when the run ends
            return _run_sides(options, context, token, emit, policy, environ, redact, envs_cleanup)
    except NotGatedYet as exc:
        _report_not_gated(exc, context, emit)
        raise
    except Exception as exc:
        _redact_exception(exc, redact)
        error = exc if isinstance(exc, GateError) else EvaluationError(f"internal error: {type(exc).__name__}: {exc}")
        _report_error(error, context, emit, redact)
        if event_allowed(context, allow_privileged=options.allow_privileged_event):
            _post_error_comment(error, options, context, token, policy, emit, redact)
        raise


def _redacting(emit: Callable[[str], None], redact: Redactor) -> Callable[[str], None]:
    """``emit`` with every line redacted first (rag-gate's own workflow commands stay commands)."""

    def emit_redacted(line: str) -> None:
        emit(WorkflowCommand(redact(line)) if isinstance(line, WorkflowCommand) else redact(line))

    return emit_redacted


def _redact_exception(exc: BaseException, redact: Redactor) -> None:
    """Redact an exception's message in place, before the CLI prints it."""
    if exc.args and isinstance(exc.args[0], str):
        exc.args = (redact(exc.args[0]), *exc.args[1:])
    if isinstance(exc, GateError) and exc.problems:
        exc.problems = tuple(redact(problem) for problem in exc.problems)


FLAG_TOKEN_IGNORED = (
    "--github-token is ignored in GitHub Actions: a command line is visible to every process of the job "
    "(/proc/<pid>/cmdline), the PR's pipeline included. Pass the token in the GITHUB_TOKEN environment variable "
    "(the action does)."
)


def _run_sides(
    options: PrOptions,
    context: gh.GithubContext,
    token: str | None,
    emit: Callable[[str], None],
    policy: gh.RetryPolicy | None,
    environ: Mapping[str, str],
    redact: Redactor,
    envs_cleanup: ExitStack,
) -> PrResult:
    refuse_unsafe_event(context, allow_privileged=options.allow_privileged_event)
    exit_code_for("pass", options.fail_on)  # validates fail_on before any work
    workdir = (options.working_directory or Path.cwd()).resolve()
    cache_dir = workdir / options.cache_dir if options.cache_dir is not None else None
    config_path = (workdir / options.config).resolve()
    repo = gitops.repo_root(workdir)
    _warn_persisted_credentials(repo, context, emit)
    head = load_config(config_path, repeats=options.repeats)
    try:
        config_rel = config_path.relative_to(repo)
    except ValueError:
        raise InputError(f"{config_path}: the config must be inside the repository {repo}") from None
    caching = cache_policy(cache_dir, context, environ)
    out = contained_dir(workdir / options.out_dir, repo, f"--out-dir {options.out_dir}")
    junit = None
    if options.junit is not None:  # its folder is made (or refused, exit 2) now, not after the evaluations
        where = contained_dir((workdir / options.junit).parent, repo, f"--junit {options.junit}")
        junit = prepare_output_file(where / options.junit.name, f"--junit {options.junit}")
    stale_files = (outputs.path(out, Output.JSON), outputs.path(out, Output.COMMENT), out / outputs.CHART_FILE)
    for stale in (*stale_files, out / outputs.HTML_FILE):
        stale.unlink(missing_ok=True)  # a run that reaches no verdict must not leave the previous run's verdict
    secrets = (options.github_token, token)
    store = history_store(options.history, options.history_branch, repo, workdir, context, token)
    if options.base_ref is None and context.pr_number is None and context.event_name in TRUSTED_EVENTS:
        return _store_base(options, context, caching, repo, workdir, config_rel, out, environ, secrets, store, emit)
    base_sha, base_label = _base_commit(options, context, repo)
    head_sha = gitops.resolve_commit(repo, "HEAD")
    dirty = gitops.uncommitted(repo)
    if dirty:
        shown = ", ".join(dirty[:3]) + (", …" if len(dirty) > 3 else "")
        log.warning(
            "the working tree has %d uncommitted change(s) (%s): the head side is evaluated as it is on disk, "
            "not as commit %s",
            len(dirty),
            shown,
            head_sha[:12],
        )
    with gitops.worktree(repo, base_sha) as tree:
        base = _base_config(repo, base_sha, tree, config_rel, options.repeats)
        head_golden = head.golden
        golden, diff, head_lines = _golden_contract(base, head, out)
        base, head = dataclasses.replace(base, golden=golden), dataclasses.replace(head, golden=golden)
        sandbox = _sandbox(environ, (base, head), secrets)
        setup = _Setup(options.setup_command or "", repo, tree / workdir.relative_to(repo), envs_cleanup)
        base_results, cached = _base_results(
            options, caching, base, base_sha, base_label, out, sandbox, setup if options.setup_command else None
        )
    # the base's policy, including which variables the pipeline may have: a PR cannot ask for more
    pipeline = dataclasses.replace(head.pipeline, env_passthrough=base.pipeline.env_passthrough)
    head = dataclasses.replace(head, evaluation=base.evaluation, repeats=base.repeats, pipeline=pipeline)
    if options.setup_command:  # the head's own environment, from its own checkout, after the base is done
        setup = dataclasses.replace(setup, checkout=workdir)
        sandbox = _side_sandbox(setup, sandbox, pipeline.env_passthrough, None)
    remove_tree(out / "head")
    head_run = run_side(
        head,
        out / "head",
        progress=options.progress,
        git_sha=head_sha,
        git_ref="HEAD",
        sandbox=sandbox,
        require_answers=False,  # failing on every case the base answered is a regression, not a broken run
    )
    base_run = _intact(base_results, out / "base", context, emit)
    compared = compare_sides(
        base_run,
        head_run,
        out,
        config=base,
        golden=golden,
        strict=options.strict,
        diff=diff or None,
        files=gitops.changed_files(repo, base_sha),
        commits=f"{base_sha[:12]}..{head_sha[:12]}",
    )
    trend, trend_note = (
        check_head(store, head_run, base, base_sha=base_sha, head_sha=head_sha, out=out) if store else (None, "")
    )
    comparison = relocate(dataclasses.replace(compared.comparison, trend=trend), head_lines)
    render_options = outputs.RenderOptions(
        details_url=context.run_url,
        golden_file=_relative(head_golden, repo),
        marker=sticky_marker(options.config.as_posix()),
        config=options.config.as_posix(),
    )
    texts = outputs.write(comparison, out, [Output.JSON, Output.COMMENT], render_options)
    outputs.write_chart(comparison, out)  # metrics.png in the artifact, with the plot extra
    outputs.write_html(  # report.html in the artifact: every case side by side
        comparison,
        out,
        compared.base,
        compared.head,
        compared.evaluation,
        details_url=context.run_url,
        config=options.config.as_posix(),
        lines=head_lines,
    )
    if junit is not None:
        write_text_atomic(junit, outputs.render(comparison, Output.JUNIT, render_options))
    status, url, warning = _post_comment(
        options, context, token, texts[Output.COMMENT], render_options.marker, policy, redact
    )
    if status == "local":
        emit(texts[Output.COMMENT])
    _report(comparison, render_options, out, context, emit, warning, repo, redact, status=status, url=url)
    _report_trend(trend, trend_note, context, emit)
    exit_code = exit_code_for(
        comparison.verdict,
        options.fail_on,
        strict=comparison.strict,
        trend=trend,
        trend_block=base.evaluation.trend.block,
    )
    return PrResult(
        verdict=comparison.verdict,
        exit_code=exit_code,
        comparison=comparison,
        report_path=outputs.path(out, Output.JSON),
        comment_path=outputs.path(out, Output.COMMENT),
        comment_status=status,
        base_sha=base_sha,
        base_cached=cached,
        trend=trend,
    )


def _report_trend(trend: TrendReport | None, note: str, context: gh.GithubContext, emit: Callable[[str], None]) -> None:
    """The trend's step output and annotation, or a warning when the history could not be read.

    The "Trend vs main" section itself is part of the comparison, so the comment and the summary show it.
    """
    if note:
        log.warning(note)
        if context.in_actions:
            emit(annotation("warning", note, title="rag-gate: trend vs main skipped"))
    if trend is None:
        return
    if context.output is not None:
        gh.write_outputs(context.output, {"trend-status": trend.status})
    if context.in_actions and trend.status in ("warning", "critical"):
        worst = [m.label for m in trend.metrics if m.gated and m.status == trend.status]
        emit(annotation("warning", f"trend vs main: {trend.status.upper()} ({', '.join(worst)})", title="rag-gate"))


def _store_base(
    options: PrOptions,
    context: gh.GithubContext,
    caching: CachePolicy,
    repo: Path,
    workdir: Path,
    config_rel: Path,
    out: Path,
    environ: Mapping[str, str],
    secrets: Iterable[str | None],
    store: HistoryStore | None = None,
    emit: Callable[[str], None] = print,
) -> PrResult:
    """Store the base results of a trusted run that has no pull request; nothing is compared or posted.

    On ``push``/``workflow_dispatch``/``schedule`` the commit is evaluated as the base of future PRs and stored in
    the cache, which only trusted runs may write, and, on the default branch, appended to the main-branch history
    (checked against the entries before it: exit 1 when the base config's ``trend.block`` level is reached).
    """
    recording = store is not None and is_trusted(context)
    if not caching.writable and not recording:
        why = "not on the default branch" if caching.readable else "no --cache-dir or no cache signing key"
        raise InputError(
            f"no base to compare with on `{context.event_name}` and nothing to store ({why}): run rag-gate on "
            "pull_request, or on pushes to the default branch with cache-dir and cache-signing-key set, so that "
            "pull requests reuse the base results"
        )
    sha = gitops.resolve_commit(repo, context.sha or "HEAD")
    with gitops.worktree(repo, sha) as tree:
        config = _base_config(repo, sha, tree, config_rel, options.repeats)
        sandbox = _sandbox(environ, (config,), secrets)
        with ExitStack() as envs_cleanup:
            setup = _Setup(options.setup_command or "", repo, tree / workdir.relative_to(repo), envs_cleanup)
            snapshot, cached = _base_results(
                options,
                caching,
                config,
                sha,
                context.ref or sha,
                out,
                sandbox,
                setup if options.setup_command else None,
            )
    if caching.writable:
        log.info(
            "base results of %s %s the cache for pull requests based on it",
            sha[:12],
            "already in" if cached else "stored in",
        )
    verdict, exit_code, trend = "cached", 0, None
    if recording:
        assert store is not None
        run_dir = out / "base"
        trend, done = record_push(store, run_dir, config, sha=sha, ref=context.ref, out=out)
        verdict = "cached" if caching.writable else "recorded"
        exit_code = exit_code_for(None, options.fail_on, trend=trend, trend_block=config.evaluation.trend.block)
        log.info("%s: %s", store.where, "appended" if done.appended else "already recorded")
        if context.step_summary is not None:
            gh.append_summary(context.step_summary, push_summary(trend, done, store, sha))
    if context.output is not None:
        values = {"verdict": verdict, "regressed-count": 0, "ood-failure-count": 0}
        gh.write_outputs(context.output, values | ({"trend-status": trend.status} if trend else {}))
    return PrResult(
        verdict=verdict,
        exit_code=exit_code,
        comparison=None,
        report_path=out / "base",
        comment_path=out / "base",
        comment_status="disabled",
        base_sha=sha,
        base_cached=cached,
        trend=trend,
    )


def _report(
    comparison: Comparison,
    render_options: outputs.RenderOptions,
    out: Path,
    context: gh.GithubContext,
    emit: Callable[[str], None],
    warning: str,
    repo: Path,
    redact: Redactor,
    *,
    status: str,
    url: str | None,
) -> None:
    """Job summary, step outputs and annotations for a finished comparison (redacted, like everything printed)."""
    if warning:
        emit(annotation("warning", warning, title="rag-gate: comment not posted"))
    if context.step_summary is not None:
        note = f"> [!WARNING]\n> {warning}\n\n" if warning else ""
        summary = note + outputs.render(comparison, Output.SUMMARY, render_options)
        gh.append_summary(context.step_summary, redact(summary))
    if context.output is not None:
        root = context.workspace or repo
        gh.write_outputs(
            context.output,
            {
                "verdict": comparison.verdict,
                "regressed-count": len(comparison.regressed_cases),
                "ood-failure-count": len(comparison.ood_failures),
                "report-path": _relative(outputs.path(out, Output.JSON), root),
                "comment-path": _relative(outputs.path(out, Output.COMMENT), root),
                "comment-url": url or "",
                "comment-status": status,
            },
            redact,
        )
    if context.in_actions and (lines := outputs.render(comparison, Output.ANNOTATIONS, render_options)):
        emit(lines)


def _post_error_comment(
    exc: GateError,
    options: PrOptions,
    context: gh.GithubContext,
    token: str | None,
    policy: gh.RetryPolicy | None,
    emit: Callable[[str], None],
    redact: Redactor,
) -> None:
    """Replace the config's sticky comment by "no verdict was reached" (exit 2 or 3).

    A stale verdict of an earlier push never stays on the pull request.
    """
    config = options.config.as_posix()
    markdown = render_error_comment(
        exc.exit_code, _error_kind(exc), str(exc), marker=sticky_marker(config), config=config
    )
    status, _, warning = _post_comment(options, context, token, markdown, sticky_marker(config), policy, redact)
    if warning and context.in_actions:
        emit(annotation("warning", warning, title="rag-gate: comment not posted"))
    if status in ("created", "updated"):
        log.info("sticky comment %s: no verdict", status)


def _report_not_gated(exc: NotGatedYet, context: gh.GithubContext, emit: Callable[[str], None]) -> None:
    """The pull request that adds rag-gate: a notice, a job summary line and ``verdict=skipped`` (no comment)."""
    if context.in_actions:
        emit(annotation("notice", str(exc), title="rag-gate: not gated yet"))
    if context.step_summary is not None:
        gh.append_summary(context.step_summary, f"## rag-gate: not gated yet\n\n{escape_markdown(str(exc))}\n")
    if context.output is not None:
        gh.write_outputs(
            context.output, {"verdict": "skipped", "regressed-count": 0, "ood-failure-count": 0, "report-path": ""}
        )


def _error_kind(exc: GateError) -> str:
    return "bad input or usage" if exc.exit_code == 2 else "the evaluation itself could not run"


def _report_error(exc: GateError, context: gh.GithubContext, emit: Callable[[str], None], redact: Redactor) -> None:
    """Put a user-facing error in the job summary, an ``::error`` annotation and the ``verdict`` output (redacted)."""
    kind = _error_kind(exc)
    message = "\n\n".join(escape_markdown(redact(line), limit=2000) for line in exc.lines())  # untrusted: escaped
    if context.in_actions:
        emit(annotation("error", str(exc), title=f"rag-gate: {kind} (exit {exc.exit_code})"))
    if context.step_summary is not None:
        gh.append_summary(
            context.step_summary,
            f"## rag-gate: error (exit {exc.exit_code}: {kind})\n\n{message}\n\n"
            "No verdict was reached; exit code 1 is reserved for a regression. "
            f"Fix the cause above and re-run; documentation: {gh.DOCS_URL}\n",
        )
    if context.output is not None:
        gh.write_outputs(
            context.output, {"verdict": "error", "regressed-count": 0, "ood-failure-count": 0, "report-path": ""}
        )
