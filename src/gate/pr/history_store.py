"""Where the main-branch history lives: a JSONL file on a dedicated branch (default), or a file path.

**Branch mode** (``rag-gate-history``, like benchmark-action/github-action-benchmark keeps its data on a branch):
the file is read with ``git fetch`` + ``git show``; an entry is appended by building a commit with git plumbing
(``hash-object``, a temporary index, ``write-tree``, ``commit-tree``) on top of the fetched tip and pushing it
without force. When another run appended first, the push is rejected; the append is then redone on the new tip
(fetch, re-append, push), so two pushes appending at once both land. The checkout, its index and its branches are
never touched; the fetched tip is kept under :data:`TRACKING_REF`.

**File mode** (``--history FILE``): the file on disk, relative to the working directory. On a pull request, a path
inside the repository is read as it is in the base commit, from git objects (see :func:`_base_file`), so a PR
cannot rewrite, replace or redirect (with a symbolic link) the history it is judged by.

Pull requests only read; only trusted runs (pushes to the default branch) append. Credentials: the workflow token
is passed to git as ``http.<server>/.extraheader`` through ``GIT_CONFIG_*`` environment variables (what
``actions/checkout`` writes into ``.git/config``), never on a command line and never into a file.

Source: git-fetch(1), git-hash-object(1), git-read-tree(1), git-update-index(1), git-commit-tree(1), git-push(1),
git-config(1) ``GIT_CONFIG_COUNT``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gate.errors import EvaluationError, InputError
from gate.files import make_parent, write_text_atomic
from gate.history.entries import History, append_entry, read_history
from gate.jsonl import dumps
from gate.pr.git import file_at, git

log = logging.getLogger("rag-gate")

DEFAULT_BRANCH = "rag-gate-history"
"""The branch that holds the history by default."""
DEFAULT_FILE = "history.jsonl"
"""The history file's path inside the branch."""
TRACKING_REF = "refs/rag-gate/history"
"""Local ref where the fetched tip of the history branch is kept (outside ``refs/heads``: no branch is created)."""
ATTEMPTS = 6
"""Pushes tried before giving up when other runs keep appending first."""
RETRYABLE = ("fetch first", "non-fast-forward", "cannot lock ref", "failed to update ref", "stale info")
"""Push errors that mean "someone appended first": the append is redone on the new tip."""
IDENTITY = {
    "GIT_AUTHOR_NAME": "github-actions[bot]",
    "GIT_AUTHOR_EMAIL": "41898282+github-actions[bot]@users.noreply.github.com",
    "GIT_COMMITTER_NAME": "github-actions[bot]",
    "GIT_COMMITTER_EMAIL": "41898282+github-actions[bot]@users.noreply.github.com",
}
"""Author of history commits (the identity GitHub shows for commits made with the workflow token)."""


def auth_env(token: str | None, server_url: str = "https://github.com") -> dict[str, str]:
    """Git environment that authenticates HTTPS fetches and pushes to ``server_url`` with ``token``.

    Sets ``http.<server_url>/.extraheader`` to ``AUTHORIZATION: basic base64(x-access-token:TOKEN)`` through
    ``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_0`` / ``GIT_CONFIG_VALUE_0``.

    Args:
        token: the workflow token; None or empty: no authentication (public repositories, local remotes).
        server_url: ``GITHUB_SERVER_URL``.

    Returns:
        Variables for :func:`gate.pr.git.git`'s ``env`` (empty without a token).
    """
    if not token:
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"http.{server_url.rstrip('/')}/.extraheader",
        "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
    }


@dataclass(frozen=True)
class HistoryStore:
    """A history location: a file on a branch of ``remote`` (``branch`` set) or a file path (``branch`` None)."""

    repo: Path
    """The repository (the checkout)."""
    path: str = DEFAULT_FILE
    """Branch mode: the file's path inside the branch. File mode: a path, relative to ``repo`` or absolute."""
    branch: str | None = DEFAULT_BRANCH
    """The history branch; None for file mode."""
    remote: str = "origin"
    """The remote that holds the branch."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Extra git environment (credentials: :func:`auth_env`); never shown."""

    @property
    def where(self) -> str:
        """A human description, e.g. ``history.jsonl on branch rag-gate-history of origin``."""
        if self.branch is None:
            return str(self.path)
        return f"{self.path} on branch {self.branch} of {self.remote}"


@dataclass(frozen=True)
class AppendResult:
    """What :func:`append` did."""

    appended: bool
    """False when the history already held an entry of this commit, golden set and config."""
    attempts: int
    """Pushes made (1 without contention; 0 in file mode or when nothing was appended)."""
    commit: str | None = None
    """The history branch's new tip (branch mode)."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _has_remote(store: HistoryStore) -> bool:
    return git(store.repo, "remote", "get-url", store.remote, check=False).returncode == 0


def fetch(store: HistoryStore) -> str | None:
    """Fetch the history branch's tip into :data:`TRACKING_REF`.

    Without the remote (a local clone with no ``origin``), the local branch of that name is used.

    Returns:
        The tip's sha, or None when the branch does not exist yet.

    Raises:
        EvaluationError: the remote cannot be reached or refuses the fetch (the message names the branch).
    """
    assert store.branch is not None
    if not _has_remote(store):
        local = git(store.repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{store.branch}", check=False)
        return local.stdout.strip() or None
    listed = git(
        store.repo, "ls-remote", "--exit-code", store.remote, f"refs/heads/{store.branch}", check=False, env=store.env
    )
    if listed.returncode == 2:  # the remote answered: no such branch
        git(store.repo, "update-ref", "-d", TRACKING_REF, check=False)
        return None
    if listed.returncode != 0:
        raise EvaluationError(f"cannot read {store.where}: {_one_line(listed.stderr)}")
    done = git(
        store.repo,
        "fetch",
        "--no-tags",
        "--quiet",
        "--no-write-fetch-head",
        store.remote,
        f"+refs/heads/{store.branch}:{TRACKING_REF}",
        check=False,
        env=store.env,
    )
    if done.returncode != 0:
        raise EvaluationError(f"cannot fetch {store.where}: {_one_line(done.stderr)}")
    return git(store.repo, "rev-parse", TRACKING_REF).stdout.strip()


def _file_at(store: HistoryStore, commit: str | None) -> str:
    """The history file's text in ``commit`` ("" when the commit or the file does not exist)."""
    if commit is None:
        return ""
    done = git(store.repo, "show", f"{commit}:{store.path}", check=False)
    return done.stdout if done.returncode == 0 else ""


def _disk_path(store: HistoryStore) -> Path:
    """The file-mode path as named: absolute, ``..`` resolved lexically, no link followed."""
    path = Path(store.path)
    return Path(os.path.normpath(path if path.is_absolute() else store.repo / path))


def _base_file(store: HistoryStore, base_commit: str) -> str | None:
    """A pull request's history file (file mode): as in the base commit, never as the PR's checkout has it.

    The path is taken as named (made absolute, ``..`` resolved lexically, no link followed). Inside the
    repository it is read from the base commit's git objects (links followed only inside that commit; one leading
    out of it, such as ``-> /dev/null``, is refused); when the base commit has no such file, a file the PR's
    commit added there is ignored (no history, as in the base), and only a regular file that git does not track
    and reached through no symbolic link is read from disk (a history kept outside git on a persistent runner).
    Outside the repository it must be a regular file.

    Raises:
        InputError: the base commit's file is a link refused as above, or the file on disk is reached through a
            symbolic link or is not a regular file.
    """
    path = _disk_path(store)
    repo = store.repo.resolve()
    relative = os.path.relpath(path, repo)
    if relative.startswith(".."):
        if not path.is_file():
            raise InputError(f"{path}: the history is not a regular file")
        return path.read_text(encoding="utf-8", errors="replace")
    text = file_at(repo, base_commit, relative)
    if text is not None:
        return text
    if not os.path.lexists(path):
        return None
    link = next((p for p in [path, *path.parents] if p.is_symlink() and repo in p.parents), None)
    if link is not None or not path.is_file():
        why = f"{link} is a symbolic link" if link is not None else "it is not a regular file"
        raise InputError(f"{store.path}: not in the base commit, and {why} in the checkout; not read")
    if git(repo, "ls-files", "--error-unmatch", "--", relative, check=False).returncode == 0:
        log.info("%s: not in the base commit (the pull request adds it): no history", relative)
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def read(store: HistoryStore, dest: Path, *, base_commit: str | None = None) -> History | None:
    """Read the history, copying it to ``dest`` (kept with the run's outputs); bad lines are skipped.

    Args:
        store: where the history is.
        dest: file the history is copied to.
        base_commit: on a pull request, the merge base: a history file tracked in git is read as of that commit.

    Returns:
        The history (entries and skipped-line messages), or None when there is none yet.

    Raises:
        EvaluationError: the branch cannot be fetched.
        InputError: the file cannot be read.
    """
    if store.branch is not None:
        tip = fetch(store)
        if tip is None:
            return None
        text = _file_at(store, tip)
    elif base_commit is not None:
        text = _base_file(store, base_commit)
        if text is None:
            return None
    else:
        path = _disk_path(store)
        if not path.is_file():
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
    make_parent(dest)
    write_text_atomic(dest, text)
    return read_history(dest)


def _recorded(text: str, record: Mapping[str, Any]) -> bool:
    """Whether ``text`` (a history) already holds an entry of the record's commit, golden set and config."""
    keys = ("sha", "golden_sha256", "config_sha256")
    if not record.get("sha"):
        return False
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and all(entry.get(k) == record.get(k) for k in keys):
            return True
    return False


def _commit(store: HistoryStore, parent: str | None, text: str, message: str) -> str:
    """A commit whose tree is ``parent``'s with the history file replaced by ``text``; the checkout is untouched."""
    blob = git(store.repo, "hash-object", "-w", "--stdin", stdin=text).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="rag-gate-index-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(store.repo, "read-tree", *([parent] if parent else ["--empty"]), env=index)
        git(store.repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{store.path}", env=index)
        tree = git(store.repo, "write-tree", env=index).stdout.strip()
    parents = ["-p", parent] if parent else []
    return git(store.repo, "commit-tree", tree, *parents, "-m", message, env=IDENTITY).stdout.strip()


def append(
    store: HistoryStore,
    record: Mapping[str, Any],
    *,
    message: str | None = None,
    attempts: int = ATTEMPTS,
    backoff_s: float = 0.5,
) -> AppendResult:
    """Append one entry to the history; in branch mode, commit and push it, redoing it when another run won.

    An entry of the same commit, golden set and config that is already there is not appended again (a re-run
    of the same push would count twice in the trend's window).

    Args:
        store: where the history is.
        record: the entry (see :func:`gate.history.entries.make_record`).
        message: commit message (default: names the commit).
        attempts: pushes tried before giving up.
        backoff_s: mean pause between attempts, grown linearly and jittered.

    Returns:
        Whether it was appended, the pushes made and the new tip.

    Raises:
        EvaluationError: the branch cannot be fetched or pushed (missing ``contents: write``, branch protection),
            or other runs kept appending first ``attempts`` times.
        InputError: the record is not a valid entry (file mode).
    """
    if store.branch is None:
        path = _disk_path(store)
        if path.is_file() and _recorded(path.read_text(encoding="utf-8", errors="replace"), record):
            return AppendResult(False, 0)
        append_entry(path, record)
        return AppendResult(True, 0)
    line = dumps(dict(record)) + "\n"
    message = message or f"rag-gate history: {str(record.get('sha') or '?')[:12]} ({record.get('ref') or '?'})"
    error = ""
    for attempt in range(1, attempts + 1):
        tip = fetch(store)
        text = _file_at(store, tip)
        if _recorded(text, record):
            return AppendResult(False, attempt - 1, tip)
        if text and not text.endswith("\n"):
            text += "\n"  # close a cut last line: it stays skipped, the new entry stays readable
        commit = _commit(store, tip, text + line, message)
        if not _has_remote(store):
            git(store.repo, "update-ref", f"refs/heads/{store.branch}", commit, *([tip] if tip else []))
            return AppendResult(True, attempt, commit)
        done = git(
            store.repo,
            "push",
            "--quiet",
            store.remote,
            f"{commit}:refs/heads/{store.branch}",
            check=False,
            env=store.env,
        )
        if done.returncode == 0:
            return AppendResult(True, attempt, commit)
        error = _one_line(done.stderr)
        if not any(marker in error for marker in RETRYABLE):
            raise EvaluationError(
                f"cannot push to {store.where}: {error} (the job that appends needs `permissions: contents: write`, "
                "and the branch must accept pushes from the workflow token)"
            )
        log.info("%s: another run appended first; appending again (attempt %d)", store.where, attempt + 1)
        time.sleep(backoff_s * attempt * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not security
    raise EvaluationError(f"cannot append to {store.where}: {attempts} pushes rejected, last: {error}")
