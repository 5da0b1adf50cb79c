"""One ``rag-gate pr`` run: what it is asked, the context it carries, and what it did.

:class:`PrOptions` (the command's options), :class:`PrRun` (the context every step of :mod:`gate.pr.flow` gets),
:class:`PrResult` (what the CLI prints and exits with), :class:`NotGatedYet` (the pull request that adds rag-gate).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from gate.comparison import Comparison, FailOn
from gate.config import Config
from gate.errors import GateError
from gate.pr import github as gh
from gate.pr.credentials import Credentials
from gate.pr.history_store import HistoryStore
from gate.pr.report import Reporter
from gate.pr.trust import CachePolicy
from gate.trends import TrendReport


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
    adaptive: bool | None = None
    """Adaptive evaluation (:mod:`gate.pr.adaptive`): True on, False off, None the base config's ``adaptive:``."""


class NotGatedYet(GateError):
    """The base commit has no rag-gate config: this pull request is the one that adds rag-gate (exit 0).

    Nothing can be compared (the base's config is the policy), so the check passes with a notice, and the gate
    starts with the pull requests after this one is merged.
    """

    exit_code = 0


@dataclass(frozen=True)
class PrResult:
    """What one ``rag-gate pr`` run did (the CLI prints it and exits with :attr:`exit_code`)."""

    verdict: str
    """The comparison's verdict (``pass`` | ``fail`` | ``inconclusive`` | ``error``), or, on a trusted run without a
    pull request, ``cached`` (base results stored for PRs; the history appended too unless it is off) or
    ``recorded`` (only appended to the history)."""
    exit_code: int
    """0, 1 or 3, from :func:`gate.comparison.exit_code_for` (the verdict, ``fail_on``, strict mode and the trend)."""
    comparison: Comparison | None
    """The comparison (``report.json``); None when nothing was compared (``cached``, ``recorded``)."""
    report_path: Path
    """Where ``report.json`` was written; the base run directory when nothing was compared."""
    comment_path: Path
    """Where ``comment.md`` was written; the base run directory when nothing was compared."""
    comment_status: str
    """``created`` | ``updated`` | ``disabled`` | ``local`` | ``failed`` (``disabled`` when nothing was compared)."""
    base_sha: str
    """The merge base that was evaluated (the pushed commit when nothing was compared)."""
    base_cached: bool
    """True when the base run came from the cache."""
    trend: TrendReport | None = None
    """The run against main's history (None: history off or unreadable)."""


@dataclass(frozen=True)
class PrRun:
    """The context of one ``rag-gate pr`` run, made once its paths are known and passed to every step.

    Errors before that (no repository, a bad ``--out-dir``) are reported through :attr:`report` alone.
    """

    options: PrOptions
    """What the run was asked to do."""
    report: Reporter
    """Where it reports (the GitHub context, a maker of the comment's GitHub client, stdout), redacted."""
    environ: Mapping[str, str]
    """rag-gate's environment (``os.environ``): what the sandbox passes on."""
    credentials: Credentials
    """The run's secrets (the tokens, the cache signing key), read once at the command line's edge."""
    head: Config
    """The head's config as the checkout has it (the comparison replaces its policy by the base's)."""
    repo: Path
    """The repository's root (the head's checkout)."""
    workdir: Path
    """``working_directory`` in the head's checkout (absolute); each side's commands run there in its checkout."""
    config_rel: Path
    """The config's path relative to :attr:`repo` (the same file is read in the base commit)."""
    out: Path
    """The output directory (``base/``, ``head/``, ``report.json``, ``comment.md``), inside the repository."""
    junit: Path | None
    """Where the JUnit XML goes (None: not written)."""
    caching: CachePolicy
    """Whether this run reads and writes the base cache (:func:`gate.pr.trust.cache_policy`)."""
    store: HistoryStore | None
    """The main-branch history (None: off)."""
    cleanup: ExitStack
    """Removes the sides' temporary environments when the run ends."""

    @property
    def context(self) -> gh.GithubContext:
        """The run's GitHub context."""
        return self.report.context

    @property
    def emit(self) -> Callable[[str], None]:
        """Writes one line to stdout, redacted."""
        return self.report.emit

    @property
    def secrets(self) -> tuple[str | None, ...]:
        """The secrets the sandbox redacts from the pipeline's output."""
        return self.credentials.secrets
