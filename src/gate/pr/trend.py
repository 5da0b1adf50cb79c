"""The trend alarm in the action (DESIGN §9): pull requests read main's history; pushes to main append to it.

On a pull request the head's aggregates are compared with the mean of the last ``window`` comparable main-branch
entries (``trend:`` of the base's config), read-only, forks included; a history that cannot be read is a warning,
never a failure of the check. On a push to the default branch the commit's run is appended (see
:mod:`gate.pr.history_store`) and checked against the entries before it.
"""

from __future__ import annotations

import os
from pathlib import Path

from gate.config import Config
from gate.errors import GateError
from gate.history.entries import HistoryEntry, entry_from_run
from gate.history.trend import trend_report
from gate.jsonl import write_json
from gate.pr import git
from gate.pr import github as gh
from gate.pr.history_store import DEFAULT_BRANCH, AppendResult, HistoryStore, append, auth_env, read
from gate.trends import TrendReport

OFF = "off"
"""``--history off``: neither read nor write a history."""
HISTORY_COPY = "history.jsonl"
"""Copy of the history read, kept in the output directory."""
TREND_FILE = "trend.json"
"""The run's trend (:meth:`gate.trends.TrendReport.to_dict`), in the output directory."""


def history_store(
    history: str | None, branch: str | None, repo: Path, workdir: Path, context: gh.GithubContext, token: str | None
) -> HistoryStore | None:
    """Where the history is for this run.

    Args:
        history: ``--history``: None or "" for the branch (default), ``off``, or a file path relative to
            ``workdir``.
        branch: ``--history-branch`` (None: :data:`~gate.pr.history_store.DEFAULT_BRANCH`).
        repo: the repository.
        workdir: the working directory.
        context: the GitHub context (server URL; whether this is Actions).
        token: the workflow token: given to git for the branch (in Actions, unless ``actions/checkout`` left
            credentials in ``.git/config``, which git would send twice).

    Returns:
        The store, or None when the history is off.
    """
    if history == OFF:
        return None
    if history:
        # as named: a link the PR commits at that path must not choose the file (history_store._base_file)
        return HistoryStore(repo, path=os.path.normpath(workdir / history), branch=None)
    credentials = context.in_actions and token and not git.credential_settings(repo)
    env = auth_env(token, context.server_url) if credentials else {}
    return HistoryStore(repo, branch=branch or DEFAULT_BRANCH, env=env)


def check_head(
    store: HistoryStore, head_run: Path, base: Config, *, base_sha: str, head_sha: str, out: Path
) -> tuple[TrendReport | None, str]:
    """The PR head against main's history, under the base's policy; never raises for an unreadable history.

    The head's entry takes the base config's sha256 (its policy was applied), so it is comparable with the main
    entries made under that config.

    Returns:
        (the trend, ""); (None, "") when there is no history yet (nothing recorded: no section); or (None, a
        warning saying why the history could not be read).
    """
    try:
        history = read(store, out / HISTORY_COPY, base_commit=base_sha)
        if history is None:
            return None, ""
        record = entry_from_run(head_run, sha=head_sha, ref="HEAD", config_sha256=base.sha256)
    except GateError as exc:
        return None, f"trend vs main skipped: {exc}"
    report = trend_report(
        history.entries,
        HistoryEntry(record),
        trend=base.policy.trend,
        gated=base.policy.gated,
        problems=history.problems,
        run_label="head",
    )
    write_json(out / TREND_FILE, report.to_dict())
    return report, ""


def record_push(
    store: HistoryStore, run_dir: Path, config: Config, *, sha: str, ref: str | None, out: Path
) -> tuple[TrendReport, AppendResult]:
    """Append a main-branch run to the history and check it against the entries before it.

    Raises:
        EvaluationError: the history cannot be fetched or pushed.
        InputError: the run directory or the history file is unreadable.
    """
    history = read(store, out / HISTORY_COPY)
    branch = ref.removeprefix("refs/heads/") if ref else None
    record = entry_from_run(run_dir, sha=sha, ref=branch)
    report = trend_report(
        history.entries if history else (),
        HistoryEntry(record),
        trend=config.policy.trend,
        gated=config.policy.gated,
        problems=history.problems if history else (),
        run_label=sha[:7],
    )
    done = append(store, record)
    write_json(out / TREND_FILE, report.to_dict())
    return report, done


def push_summary(report: TrendReport, done: AppendResult, store: HistoryStore, sha: str) -> str:
    """Job-summary markdown of a push: what was recorded, and the commit's trend."""
    from gate.outputs.trend import trend_markdown

    if done.appended:
        where = f" (commit {done.commit[:12]}, {done.attempts} push(es))" if done.commit else ""
        head = f"Recorded {sha[:12]} in the history: {store.where}{where}."
    else:
        head = f"{sha[:12]} was already in the history ({store.where}); nothing appended."
    body = trend_markdown(report, heading="### Trend of main", run_name="this commit")
    return f"## rag-gate: main-branch history\n\n{head}\n\n{body}"
