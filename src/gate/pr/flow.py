"""The pull-request flow (``rag-gate pr``): evaluate the merge base and the head, compare, report on GitHub.

Steps: read the GitHub context (or ``--base-ref`` locally) → refuse privileged events → resolve the merge base →
run the base side in a ``git worktree`` of it (or take the cached base run) → run the head side in the checkout →
check the base results against the copy held in memory → compare → post or edit the sticky comment → job summary,
outputs, annotations.

The gate's policy (metrics, margins, judge, the variables the pipeline may have) is the base side's, so a PR cannot
relax its own gate nor ask for secrets; the golden set is the base's cases plus the ones the PR adds, used on both
sides (:func:`gate.pr.sides.golden_contract`). Without a pull request (``--base-ref``) nothing is posted: the comment
is printed and written to disk.

This module orchestrates; the steps have modules of their own: the trust policy (:mod:`gate.pr.trust`), the sides
(:mod:`gate.pr.sides`) and their environments (:mod:`gate.pr.envs`), reporting (:mod:`gate.pr.report`). Every step
gets the run's context as one :class:`~gate.pr.run.PrRun`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path

from gate import outputs
from gate.compare.notes import policy_changes
from gate.comparison import exit_code_for, relocate
from gate.config import Config, load_config
from gate.errors import NUL_INPUT, EvaluationError, GateError, InputError, is_nul_error
from gate.files import (
    contained_dir,
    locked_directory,
    prepare_output_file,
    refuse_inputs_inside,
    refuse_output_clashes,
    remove_tree,
)
from gate.golden import GoldenDiff
from gate.outputs import Output
from gate.outputs.markdown import sticky_marker
from gate.pr import adaptive, envs, git, sides, trust
from gate.pr import github as gh
from gate.pr.cache import Snapshot
from gate.pr.credentials import Credentials
from gate.pr.envs import Setup
from gate.pr.ownership import hand_outputs_over
from gate.pr.report import Reporter, redact_exception, redacting, relative
from gate.pr.run import NotGatedYet, PrOptions, PrResult, PrRun
from gate.pr.trend import HISTORY_COPY, OFF, TREND_FILE, check_head, history_store, push_summary, record_push
from gate.produce import run_side
from gate.redact import Redactor
from gate.sandbox import Sandbox
from gate.sides import Compared, compare_sides
from gate.sides import comparison_outputs as sides_outputs

log = logging.getLogger("rag-gate")


def run_pr(
    options: PrOptions,
    environ: Mapping[str, str],
    *,
    emit: Callable[[str], None] = print,
    retry: gh.RetryPolicy | None = None,
    credentials: Credentials | None = None,
) -> PrResult:
    """Run the whole PR flow (see the module docstring).

    Args:
        options: the command's options.
        environ: the environment (``os.environ``): ``GITHUB_*``, and what the pipeline's sandbox passes on.
        emit: writes one line to stdout (workflow commands, and the comment in local mode).
        retry: GitHub retry bounds (tests shorten them).
        credentials: the run's secrets, read by the command (default: read from ``environ``, no flag token).

    Returns:
        The verdict, exit code (:func:`gate.comparison.exit_code_for`), paths and what happened to the comment.

    Raises:
        NotGatedYet: the base commit has no config: this pull request adds rag-gate (exit 0).
        InputError: ``pull_request_target``, no base, missing base commit (shallow clone), bad config (exit 2).
        EvaluationError: the setup command or a pipeline failed beyond recovery (exit 3).
        Both are also written to the job summary and as an ``::error`` annotation before being raised.
    """
    context = gh.github_context(environ)
    credentials = credentials if credentials is not None else Credentials.from_environ(environ)
    token = trust.github_token(context, credentials, emit)
    redact = Redactor.from_environ(environ, extra=credentials.secrets)
    report = Reporter(
        context,
        redacting(emit, redact),  # everything printed from here on (the ::add-mask:: lines are out already)
        redact,
        client=gh.client_factory(token, context.api_url, retry),
        comment=options.comment,
        config=options.config.as_posix(),
    )
    run: PrRun | None = None
    try:
        with ExitStack() as cleanup:  # the sides' temporary environments go when the run ends
            run = _prepare(options, environ, credentials, report, cleanup)
            if trust.stores_base_only(context, options.base_ref):
                return _store_base(run)
            return _compare(run)
    except NotGatedYet as exc:
        report.not_gated(exc)
        raise
    except Exception as exc:
        redact_exception(exc, redact)
        error = (
            exc
            if isinstance(exc, GateError)
            else InputError(NUL_INPUT)
            if is_nul_error(exc)
            else EvaluationError(f"internal error: {type(exc).__name__}: {exc}")
        )
        report.error(error)
        if trust.event_allowed(context, allow_privileged=options.allow_privileged_event):
            report.error_comment(error)
        raise
    finally:  # in the action (root in a container), what rag-gate made in the workspace goes to its owner
        if run is not None:
            cache = run.workdir / options.cache_dir if options.cache_dir is not None else None
            hand_outputs_over((run.out, cache, run.junit), environ)


def _prepare(
    options: PrOptions, environ: Mapping[str, str], credentials: Credentials, report: Reporter, cleanup: ExitStack
) -> PrRun:
    """Check the event and the options, find the repository and the paths, and clear the previous run's verdict."""
    context = report.context
    trust.refuse_unsafe_event(context, allow_privileged=options.allow_privileged_event)
    exit_code_for("pass", options.fail_on)  # validates fail_on before any work
    workdir = (options.working_directory or Path.cwd()).resolve()
    cache_dir = workdir / options.cache_dir if options.cache_dir is not None else None
    config_path = (workdir / options.config).resolve()
    repo = git.repo_root(workdir)
    trust.warn_persisted_credentials(repo, context, report.emit)
    head = load_config(config_path, repeats=options.repeats)
    try:
        config_rel = config_path.relative_to(repo)
    except ValueError:
        raise InputError(f"{config_path}: the config must be inside the repository {repo}") from None
    caching = trust.cache_policy(cache_dir, context, environ, credentials)
    out = contained_dir(workdir / options.out_dir, repo, f"--out-dir {options.out_dir}")
    inputs = {"config": config_path, "golden": head.golden, "pipeline.predictions": head.pipeline.predictions}
    refuse_inputs_inside(out, inputs, f"--out-dir {options.out_dir}")  # its golden.jsonl would replace the set
    junit = None
    if options.junit is not None:
        junit = contained_dir((workdir / options.junit).parent, repo, f"--junit {options.junit}") / options.junit.name
    _refuse_clashes(options, out, junit, workdir, context.step_summary, config_path)
    if junit is not None:  # its folder is made (or refused, exit 2) now, not after the evaluations
        junit = prepare_output_file(junit, f"--junit {options.junit}")
    # one PR run writes an output folder at a time: a second one is refused (exit 2) before it clears anything
    cleanup.enter_context(locked_directory(out, f"--out-dir {options.out_dir}"))
    stale_files = (outputs.path(out, Output.JSON), outputs.path(out, Output.COMMENT), out / outputs.CHART_FILE)
    for stale in (*stale_files, out / outputs.HTML_FILE):
        stale.unlink(missing_ok=True)  # a run that reaches no verdict must not leave the previous run's verdict
    token = credentials.github(context.in_actions)  # the history branch's, as the comment's
    store = history_store(options.history, options.history_branch, repo, workdir, context, token)
    return PrRun(
        options, report, environ, credentials, head, repo, workdir, config_rel, out, junit, caching, store, cleanup
    )


def _refuse_clashes(
    options: PrOptions, out: Path, junit: Path | None, workdir: Path, summary: Path | None, config: Path
) -> None:
    """The run's outputs never overwrite each other or the config: refused before any work (exit 2)."""
    written, folders = sides_outputs(out, f"--out-dir {options.out_dir}", ("golden.jsonl", TREND_FILE, HISTORY_COPY))
    files: dict[str, Path | None] = dict(written)
    files[f"--junit {options.junit}"] = junit
    files["$GITHUB_STEP_SUMMARY"] = summary
    if options.history and options.history != OFF:  # a history file is appended to on pushes to the default branch
        files[f"--history {options.history}"] = workdir / options.history
    refuse_output_clashes(files, folders, {"--config": config})


def _base_commit(run: PrRun) -> tuple[str, str]:
    """The merge base to evaluate, and a label for it (the base branch name)."""
    options, context = run.options, run.context
    if options.base_ref:
        return git.merge_base(run.repo, options.base_ref, "HEAD"), options.base_ref
    if context.pr_number is not None and context.base_sha:
        head = context.head_sha or "HEAD"
        return git.merge_base(run.repo, context.base_sha, head), context.base_ref or context.base_sha
    raise InputError(
        "no base to compare with: pass --base-ref BRANCH (e.g. --base-ref main), or run on a pull_request event"
    )


def _setup(run: PrRun, checkout: Path) -> Setup | None:
    """The setup command of the side checked out in ``checkout`` (None: no setup command)."""
    if not run.options.setup_command:
        return None
    return Setup(run.options.setup_command, run.repo, checkout / run.workdir.relative_to(run.repo), run.cleanup)


@dataclasses.dataclass(frozen=True)
class Evaluated:
    """Both sides of a pull request evaluated and compared: what :func:`_report` needs to report the comparison."""

    compared: Compared
    """The comparison and the sides it was made from."""
    base: Config
    """The base's config (its policy is the gate's), with the contract's golden set."""
    head_run: Path
    """The head's run directory."""
    base_sha: str
    """The merge base evaluated."""
    head_sha: str
    """The head commit."""
    cached: bool
    """Whether the base's results came from the verified cache."""
    diff: GoldenDiff
    """How the PR changes the golden set."""
    head_lines: dict[str, int]
    """Line of each case in the PR's own golden set (where the report points)."""
    head_golden: Path
    """The PR's own golden set."""


def _compare(run: PrRun) -> PrResult:
    """Evaluate the merge base and the head, compare them (:func:`_evaluate`), and report it (:func:`_report`)."""
    return _report(run, _evaluate(run))


def _evaluate(run: PrRun) -> Evaluated:
    """Evaluate the merge base (or take its cached results) and the head, and compare them under the base's policy.

    Adaptive (``--adaptive``, or the base config's ``adaptive:``) runs both sides batch by batch
    (:mod:`gate.pr.adaptive`); otherwise the base runs in a worktree of the merge base, then the head on every case.
    """
    options, repo, out = run.options, run.repo, run.out
    base_sha, base_label = _base_commit(run)
    head_sha = git.resolve_commit(repo, "HEAD")
    _warn_uncommitted(repo, head_sha)
    head = run.head
    with git.worktree(repo, base_sha) as tree:
        base = sides.base_config(repo, base_sha, tree, run.config_rel, options.repeats)
        head_golden = head.golden
        golden, diff, head_lines = sides.golden_contract(base, head, out)
        base, head = dataclasses.replace(base, golden=golden), dataclasses.replace(head, golden=golden)
        sandbox = sides.make_sandbox(run.environ, (base, head), run.secrets)
        if options.adaptive if options.adaptive is not None else base.policy.adaptive.enabled:
            setups, shas = (_setup(run, tree), _setup(run, repo)), (base_sha, base_label, head_sha)
            files = git.changed_files(repo, base_sha)
            compared, head_run, cached = adaptive.evaluate(
                run, base, head, sandbox, setups, shas, golden=golden, diff=diff, files=files
            )
            return Evaluated(compared, base, head_run, base_sha, head_sha, cached, diff, head_lines, head_golden)
        base_results, cached = sides.base_results(run, base, base_sha, base_label, sandbox, _setup(run, tree))
    compared, head_run = _head_side(run, base, head, base_results, sandbox, golden, diff, (base_sha, head_sha))
    return Evaluated(compared, base, head_run, base_sha, head_sha, cached, diff, head_lines, head_golden)


def _warn_uncommitted(repo: Path, head_sha: str) -> None:
    """Log that the head side is evaluated as the working tree is on disk when it has uncommitted changes."""
    dirty = git.uncommitted(repo)
    if dirty:
        shown = ", ".join(dirty[:3]) + (", …" if len(dirty) > 3 else "")
        log.warning(
            "the working tree has %d uncommitted change(s) (%s): the head side is evaluated as it is on disk, "
            "not as commit %s",
            len(dirty),
            shown,
            head_sha[:12],
        )


def _report(run: PrRun, done: Evaluated) -> PrResult:
    """Report a comparison: the head against main's history (trend), the outputs, the sticky comment, the summary.

    The PR's own config's policy changes are listed (they apply after merge); the exit code follows the verdict,
    ``--fail-on``, strict mode and the trend's blocking level (:func:`gate.comparison.exit_code_for`).
    """
    options, context, out, base = run.options, run.context, run.out, done.base
    trend, trend_note = (
        check_head(run.store, done.head_run, base, base_sha=done.base_sha, head_sha=done.head_sha, out=out)
        if run.store
        else (None, "")
    )
    moved = policy_changes(base.policy, run.head.policy, done.diff)  # the PR's own config: after merge
    comparison = relocate(
        dataclasses.replace(done.compared.comparison, trend=trend, policy_changes=moved), done.head_lines
    )
    render_options = outputs.RenderOptions(
        details_url=context.run_url,
        golden_file=relative(done.head_golden, run.repo),
        marker=sticky_marker(options.config.as_posix()),
        config=options.config.as_posix(),
    )
    cases = done.compared.cases(done.head_lines)
    texts = outputs.write(comparison, out, options=render_options, cases=cases, junit=run.junit)
    status, url, warning = run.report.post_comment(texts[Output.COMMENT])
    if status == "local":
        run.emit(texts[Output.COMMENT])
    run.report.comparison(comparison, render_options, out, run.repo, status=status, url=url, warning=warning)
    run.report.trend(trend, trend_note)
    exit_code = exit_code_for(
        comparison.verdict, options.fail_on, strict=comparison.strict, trend=trend, trend_block=base.policy.trend.block
    )
    return PrResult(
        verdict=comparison.verdict,
        exit_code=exit_code,
        comparison=comparison,
        report_path=outputs.path(out, Output.JSON),
        comment_path=outputs.path(out, Output.COMMENT),
        comment_status=status,
        base_sha=done.base_sha,
        base_cached=done.cached,
        trend=trend,
    )


def _head_side(
    run: PrRun,
    base: Config,
    head: Config,
    base_results: Snapshot,
    sandbox: Sandbox,
    golden: Path,
    diff: GoldenDiff,
    shas: tuple[str, str],
) -> tuple[Compared, Path]:
    """Evaluate the head on every case and compare it with the base's results; returns (comparison, head run)."""
    options, repo, out = run.options, run.repo, run.out
    base_sha, head_sha = shas
    # the base's policy, including which variables the pipeline may have: a PR cannot ask for more
    pipeline = dataclasses.replace(head.pipeline, env_passthrough=base.pipeline.env_passthrough)
    head = dataclasses.replace(head, policy=base.policy, repeats=base.repeats, pipeline=pipeline)
    if (setup := _setup(run, repo)) is not None:  # the head's own environment, from its own checkout, after the base
        sandbox = envs.side_sandbox(setup, sandbox, pipeline.env_passthrough, None)
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
    base_run = sides.intact(base_results, run)
    compared = compare_sides(
        base_run,
        head_run,
        out,
        config=base,
        golden=golden,
        strict=options.strict,
        diff=diff or None,
        files=git.changed_files(repo, base_sha),
        commits=f"{base_sha[:12]}..{head_sha[:12]}",
    )
    return compared, head_run


def _store_base(run: PrRun) -> PrResult:
    """Store the base results of a trusted run that has no pull request; nothing is compared or posted.

    On ``push``/``workflow_dispatch``/``schedule`` the commit is evaluated as the base of future PRs and stored in
    the cache, which only trusted runs may write, and, on the default branch, appended to the main-branch history
    (checked against the entries before it: exit 1 when the base config's ``trend.block`` level is reached).
    """
    options, context, caching, store, out = run.options, run.context, run.caching, run.store, run.out
    recording = store is not None and trust.is_trusted(context)
    if not caching.writable and not recording:
        why = "not on the default branch" if caching.readable else "no --cache-dir or no cache signing key"
        raise InputError(
            f"no base to compare with on `{context.event_name}` and nothing to store ({why}): run rag-gate on "
            "pull_request, or on pushes to the default branch with cache-dir and cache-signing-key set, so that "
            "pull requests reuse the base results"
        )
    sha = git.resolve_commit(run.repo, context.sha or "HEAD")
    with git.worktree(run.repo, sha) as tree:
        config = sides.base_config(run.repo, sha, tree, run.config_rel, options.repeats)
        sandbox = sides.make_sandbox(run.environ, (config,), run.secrets)
        snapshot, cached = sides.base_results(run, config, sha, context.ref or sha, sandbox, _setup(run, tree))
    if caching.writable:
        log.info(
            "base results of %s %s the cache for pull requests based on it",
            sha[:12],
            "already in" if cached else "stored in",
        )
    verdict, trend = "cached", None
    if recording:
        assert store is not None
        trend, done = record_push(store, out / "base", config, sha=sha, ref=context.ref, out=out)
        verdict = "cached" if caching.writable else "recorded"
        log.info("%s: %s", store.where, "appended" if done.appended else "already recorded")
        if context.step_summary is not None:
            gh.append_summary(context.step_summary, push_summary(trend, done, store, sha))
    if context.output is not None:
        values = {"verdict": verdict, "regressed-count": 0, "ood-failure-count": 0}
        gh.write_outputs(context.output, values | ({"trend-status": trend.status} if trend else {}))
    return PrResult(
        verdict=verdict,
        exit_code=exit_code_for(None, options.fail_on, trend=trend, trend_block=config.policy.trend.block),
        comparison=None,
        report_path=out / "base",
        comment_path=out / "base",
        comment_status="disabled",
        base_sha=sha,
        base_cached=cached,
        trend=trend,
    )
