"""The pull-request flow (``rag-gate pr``): evaluate the merge base and the head, compare, report on GitHub.

Steps: read the GitHub context (or ``--base-ref`` locally) → refuse ``pull_request_target`` → resolve the
merge base → run the base side in a ``git worktree`` of it (or reuse the cached base run) → run the head
side in the checkout → compare → post or edit the sticky comment → job summary, outputs, annotations.

The gate's policy (metrics, margins, judge) is the base side's, so a PR cannot relax its own gate; the
golden set is the head's, used on both sides. Without a pull request (``--base-ref``) nothing is posted:
the comment is printed and written to disk.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gate import __version__, outputs
from gate.comparison import Comparison, FailOn, exit_code_for
from gate.config import Config, load_config
from gate.errors import EvaluationError, GateError, InputError
from gate.flow import compare_runs, run_side
from gate.golden import file_sha256
from gate.outputs import Output
from gate.outputs.annotations import annotation
from gate.pr import cache, gitops
from gate.pr import github as gh

UNSAFE_EVENT_HELP = (
    "rag-gate refuses to run on `pull_request_target`: that event gives the job a write token and the "
    "repository's secrets, and rag-gate executes the PR's own code (its pipeline), so a fork could steal them. "
    "Run rag-gate on `pull_request` instead (fork PRs then get a read-only token: the report goes to the job "
    "summary and to an uploaded artifact), and, to comment on fork PRs, post the uploaded comment.md from a "
    f"second workflow triggered by `workflow_run`, which never checks out PR code. See {gh.DOCS_URL}."
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
    """Shell command run once in ``working_directory`` before evaluating (installs the user's pipeline)."""
    github_token: str | None = None
    """Token for the comment (None: ``GITHUB_TOKEN`` from the environment)."""
    strict: bool = False
    """Turn an inconclusive verdict into fail."""
    progress: bool = False
    """Show progress bars on stderr."""


@dataclass(frozen=True)
class PrResult:
    """What the PR flow did."""

    verdict: str
    """``pass`` | ``fail`` | ``inconclusive``."""
    exit_code: int
    """0 or 1, from the verdict and ``fail_on``."""
    comparison: Comparison
    """The comparison (``report.json``)."""
    report_path: Path
    comment_path: Path
    comment_status: str
    """``created`` | ``updated`` | ``disabled`` | ``local`` | ``failed``."""
    base_sha: str
    """The merge base that was evaluated."""
    base_cached: bool
    """True when the base run came from the cache."""


def refuse_unsafe_event(context: gh.GithubContext) -> None:
    """Refuse ``pull_request_target``, which would run PR code with a write token and secrets.

    Raises:
        InputError: the event is ``pull_request_target`` (exit 2), with the safe two-workflow pattern.
    """
    if context.event_name == "pull_request_target":
        raise InputError(UNSAFE_EVENT_HELP)


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


def _run_setup(command: str, workdir: Path) -> None:
    """Run the user's setup command (installs their pipeline's dependencies) through the shell."""
    done = subprocess.run(command, shell=True, cwd=workdir, check=False)  # noqa: S602 - the user's own command
    if done.returncode != 0:
        raise EvaluationError(f"--setup-command exited with {done.returncode}: {command}")


def _base_config(worktree: Path, config_rel: Path, head: Config, repeats: int | None) -> Config:
    """The base side's config from its worktree, pointed at the head's golden set."""
    path = worktree / config_rel
    if not path.is_file():
        raise InputError(
            f"{config_rel}: not found in the base commit; rag-gate compares against the base's config, "
            "so merge the config (and the golden set) before gating PRs on it"
        )
    return dataclasses.replace(load_config(path, repeats=repeats), golden=head.golden)


def _run_base(
    options: PrOptions, repo: Path, base_sha: str, base_label: str, config_rel: Path, head: Config, out: Path
) -> tuple[Config, Path, bool]:
    """Evaluate the base in a worktree, or take it from the cache; returns (config, run dir, cached)."""
    with gitops.worktree(repo, base_sha) as tree:
        config = _base_config(tree, config_rel, head, options.repeats)
        key = cache.CacheKey(
            base_sha=base_sha,
            golden_sha256=file_sha256(head.golden),
            config_sha256=config.sha256,
            judge_id=cache.judge_id(config.judge),
            repeats=config.repeats,
            gate_version=__version__,
        )
        hit = cache.lookup(options.cache_dir, key) if options.cache_dir else None
        if hit is not None:
            return config, hit, True
        shutil.rmtree(out / "base", ignore_errors=True)  # never resume a run of another commit
        run_dir = run_side(config, out / "base", progress=options.progress, git_sha=base_sha, git_ref=base_label)
    if options.cache_dir:
        cache.store(options.cache_dir, key, run_dir)
    return config, run_dir, False


def _relative(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` when inside it (paths inside the container mean nothing outside)."""
    if root is not None:
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            pass
    return str(path)


def _post_comment(
    options: PrOptions, context: gh.GithubContext, token: str | None, markdown: str, policy: gh.RetryPolicy | None
) -> tuple[str, str | None, str]:
    """Post or edit the sticky comment; returns (status, url, warning) and never raises for GitHub failures."""
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
        done = gh.upsert_comment(client, context.repository, context.pr_number, markdown)
    except (GithubException, RequestException) as exc:
        return "failed", None, "the PR comment could not be posted: " + gh.explain_failure(exc, context)
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
    token = options.github_token or environ.get("GITHUB_TOKEN") or None
    if token and context.in_actions:
        emit(gh.add_mask(token))
    try:
        return _run(options, context, token, emit, policy)
    except GateError as exc:
        _report_error(exc, context, emit)
        raise
    except Exception as exc:
        _report_error(EvaluationError(f"internal error: {type(exc).__name__}: {exc}"), context, emit)
        raise


def _run(
    options: PrOptions,
    context: gh.GithubContext,
    token: str | None,
    emit: Callable[[str], None],
    policy: gh.RetryPolicy | None,
) -> PrResult:
    refuse_unsafe_event(context)
    exit_code_for("pass", options.fail_on)  # validates fail_on before any work
    workdir = (options.working_directory or Path.cwd()).resolve()
    if options.cache_dir is not None:
        options = dataclasses.replace(options, cache_dir=workdir / options.cache_dir)
    config_path = (workdir / options.config).resolve()
    repo = gitops.repo_root(workdir)
    head = load_config(config_path, repeats=options.repeats)
    try:
        config_rel = config_path.relative_to(repo)
    except ValueError:
        raise InputError(f"{config_path}: the config must be inside the repository {repo}") from None
    base_sha, base_label = _base_commit(options, context, repo)
    head_sha = gitops.resolve_commit(repo, "HEAD")
    if options.setup_command:
        _run_setup(options.setup_command, workdir)
    out = workdir / options.out_dir
    base, base_run, cached = _run_base(options, repo, base_sha, base_label, config_rel, head, out)
    head = dataclasses.replace(head, evaluation=base.evaluation, repeats=base.repeats)
    shutil.rmtree(out / "head", ignore_errors=True)
    head_run = run_side(head, out / "head", progress=options.progress, git_sha=head_sha, git_ref="HEAD")
    comparison = compare_runs(base_run, head_run, out, config=base, golden=head.golden, strict=options.strict)
    render_options = outputs.RenderOptions(details_url=context.run_url, golden_file=_relative(head.golden, repo))
    texts = outputs.write(comparison, out, [Output.JSON, Output.COMMENT], render_options)
    status, url, warning = _post_comment(options, context, token, texts[Output.COMMENT], policy)
    if status == "local":
        emit(texts[Output.COMMENT])
    _report(comparison, render_options, out, context, emit, warning, repo, status=status, url=url)
    return PrResult(
        verdict=comparison.verdict,
        exit_code=exit_code_for(comparison.verdict, options.fail_on),
        comparison=comparison,
        report_path=outputs.path(out, Output.JSON),
        comment_path=outputs.path(out, Output.COMMENT),
        comment_status=status,
        base_sha=base_sha,
        base_cached=cached,
    )


def _report(
    comparison: Comparison,
    render_options: outputs.RenderOptions,
    out: Path,
    context: gh.GithubContext,
    emit: Callable[[str], None],
    warning: str,
    repo: Path,
    *,
    status: str,
    url: str | None,
) -> None:
    """Job summary, step outputs and annotations for a finished comparison."""
    if warning:
        emit(annotation("warning", warning, title="rag-gate: comment not posted"))
    if context.step_summary is not None:
        note = f"> [!WARNING]\n> {warning}\n\n" if warning else ""
        gh.append_summary(context.step_summary, note + outputs.render(comparison, Output.SUMMARY, render_options))
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
        )
    if context.in_actions and (lines := outputs.render(comparison, Output.ANNOTATIONS, render_options)):
        emit(lines)


def _report_error(exc: GateError, context: gh.GithubContext, emit: Callable[[str], None]) -> None:
    """Put a user-facing error in the job summary, an ``::error`` annotation and the ``verdict`` output."""
    kind = "bad input or usage" if exc.exit_code == 2 else "the evaluation itself could not run"
    if context.in_actions:
        emit(annotation("error", str(exc), title=f"rag-gate: {kind} (exit {exc.exit_code})"))
    if context.step_summary is not None:
        gh.append_summary(
            context.step_summary,
            f"## rag-gate: error (exit {exc.exit_code}: {kind})\n\n{exc}\n\n"
            "No verdict was reached; exit code 1 is reserved for a regression. "
            f"Fix the cause above and re-run; documentation: {gh.DOCS_URL}\n",
        )
    if context.output is not None:
        gh.write_outputs(
            context.output, {"verdict": "error", "regressed-count": 0, "ood-failure-count": 0, "report-path": ""}
        )
