"""Git for the PR flow: resolve the merge base of a pull request and check it out as a ``git worktree``.

Every call runs ``git -c safe.directory=*`` because, inside the action's container, the workspace belongs to
another user than the one running git. Errors a user can fix (a shallow clone, an unknown ref) raise
:class:`~gate.errors.InputError` (exit 2) with the fix in the message.

Source: git-merge-base(1), git-worktree(1), git-rev-parse(1).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from gate.comparison import ChangedFile
from gate.errors import EvaluationError, InputError

FETCH_DEPTH_HINT = (
    "check out the repository with full history: `actions/checkout` with `fetch-depth: 0` "
    "(a shallow clone has neither the base branch nor the merge base)"
)


def git(
    repo: Path, *args: str, check: bool = True, env: Mapping[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``git -C repo args...`` and capture its output.

    Args:
        repo: a directory inside the repository.
        *args: git arguments.
        check: raise when git exits non-zero.
        env: variables added to rag-gate's environment for this call (e.g. ``GIT_INDEX_FILE``, credentials as
            ``GIT_CONFIG_*``: never on the command line, which every process can read).
        stdin: text sent to git's standard input.

    Returns:
        The completed process (``stdout`` / ``stderr`` as text).

    Raises:
        EvaluationError: git is not installed, or it failed and ``check`` is true.
    """
    command = ["git", "-c", "safe.directory=*", "-C", str(repo), *args]
    environment = {**os.environ, **env} if env else None
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, env=environment, input=stdin, encoding="utf-8"
        )
    except FileNotFoundError as exc:
        raise EvaluationError("git is not installed (rag-gate pr needs it to check out the base)") from exc
    if check and done.returncode != 0:
        raise EvaluationError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def repo_root(path: Path) -> Path:
    """The top-level directory of the git repository that holds ``path``.

    Raises:
        InputError: ``path`` is not inside a git repository.
    """
    done = git(path, "rev-parse", "--show-toplevel", check=False)
    if done.returncode != 0:
        raise InputError(f"{path}: not inside a git repository (rag-gate pr compares two commits of one)")
    return Path(done.stdout.strip())


def is_shallow(repo: Path) -> bool:
    """True when ``repo`` is a shallow clone (``fetch-depth`` other than 0)."""
    return git(repo, "rev-parse", "--is-shallow-repository", check=False).stdout.strip() == "true"


def resolve_commit(repo: Path, rev: str, *, what: str = "commit") -> str:
    """Resolve a ref or sha to a full commit sha; for a bare branch name also try ``origin/<name>``.

    Args:
        repo: the repository.
        rev: a sha, branch, tag or any revision git understands.
        what: how the error names it ("base commit", "--base-ref").

    Returns:
        The 40-hex commit sha.

    Raises:
        InputError: the commit is not in this clone (the message tells how to fetch it).
    """
    for candidate in (rev, f"origin/{rev}"):
        done = git(repo, "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}", check=False)
        if done.returncode == 0:
            return done.stdout.strip()
    hint = FETCH_DEPTH_HINT if is_shallow(repo) else f"fetch it first (`git fetch origin {rev}`), or {FETCH_DEPTH_HINT}"
    raise InputError(f"{what} {rev!r} is not in this clone: {hint}")


def merge_base(repo: Path, base: str, head: str) -> str:
    """The best common ancestor of ``base`` and ``head``: what the PR is compared with.

    Args:
        repo: the repository.
        base: base branch tip (sha or ref).
        head: PR head (sha or ref).

    Returns:
        The merge-base sha.

    Raises:
        InputError: either commit is missing, or they share no history in this clone.
    """
    base_sha = resolve_commit(repo, base, what="base commit")
    head_sha = resolve_commit(repo, head, what="head commit")
    done = git(repo, "merge-base", base_sha, head_sha, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise InputError(f"no merge base of {base} and {head} in this clone: {FETCH_DEPTH_HINT}")
    return done.stdout.strip()


def changed_files(repo: Path, base: str) -> list[ChangedFile]:
    """The files the checkout changed since ``base`` (``git diff --numstat`` of ``base`` against the working tree).

    The head side runs the checkout as it is, so uncommitted edits count too; in CI the working tree is the PR's
    head commit. Renames count as a deletion and an addition (``--no-renames``).

    Args:
        repo: the repository.
        base: the merge base (sha).

    Returns:
        One entry per changed file, in git's order (by path); binary files have no line counts.

    Raises:
        EvaluationError: git failed.

    Source: git-diff(1), ``--numstat`` and ``-z``.
    """
    out = git(repo, "diff", "--numstat", "-z", "--no-renames", base).stdout
    files = []
    for record in filter(None, out.split("\0")):
        added, deleted, path = record.split("\t", 2)
        binary = added == "-" or deleted == "-"
        files.append(ChangedFile(path, None if binary else int(added), None if binary else int(deleted)))
    return files


def uncommitted(repo: Path) -> list[str]:
    """Tracked files whose working-tree or staged content differs from ``HEAD`` (untracked files left out).

    Source: git-status(1), ``--porcelain=v1 -z``.
    """
    out = git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=no").stdout
    return [record[3:] for record in out.split("\0") if len(record) > 3 and record[2] == " "]


def credential_settings(repo: Path) -> list[str]:
    """Names of the ``http.<url>.extraheader`` settings in the repository's own ``.git/config``.

    ``actions/checkout`` leaves the job's token there (``persist-credentials: true``, its default), where any code
    of the job, the PR's pipeline included, can read it. Only the names are read, never the values.

    Args:
        repo: the repository.

    Returns:
        Setting names, e.g. ``["http.https://github.com/.extraheader"]``; empty when there are none.
    """
    done = git(repo, "config", "--local", "--name-only", "--get-regexp", r"^http\..*\.extraheader$", check=False)
    return done.stdout.split() if done.returncode == 0 else []


def file_at(repo: Path, commit: str, path: str) -> str | None:
    """The text of the file ``path`` as it is in ``commit``, read from git objects, never from a checkout.

    Symbolic links in the commit's tree (the file itself or a directory on its way) are followed inside the
    commit only (``git cat-file --follow-symlinks``); a link that leads outside the tree (an absolute target such
    as ``/dev/null``, or ``../`` above the root), that leads nowhere, or that loops is refused.

    Args:
        repo: the repository.
        commit: the commit (sha).
        path: a POSIX path relative to the repository root (``..`` components are normalized away first).

    Returns:
        The file's text (UTF-8, undecodable bytes replaced), or None when ``commit`` has nothing at ``path``.

    Raises:
        InputError: ``path`` leaves the repository, is a directory, or is a link refused as above.
    """
    name = os.path.normpath(path).replace(os.sep, "/")
    if name.startswith("../") or name == ".." or os.path.isabs(name):
        raise InputError(f"{path}: outside the repository; rag-gate reads it as in the base commit")
    done = git(repo, "cat-file", "--batch-check", "--follow-symlinks", stdin=f"{commit}:{name}\n")
    header, _, rest = done.stdout.partition("\n")
    words = header.split()
    if header.endswith(" missing") or words[:1] == ["notdir"]:
        return None
    if len(words) == 3 and words[1] == "blob":
        try:
            return git(repo, "cat-file", "blob", words[0]).stdout
        except UnicodeDecodeError:
            raise InputError(f"{name}: not UTF-8 text in commit {commit[:12]}") from None
    if len(words) == 3:
        raise InputError(f"{name}: a {words[1]} in commit {commit[:12]}, not a file")
    why = {
        "symlink": f"a symbolic link to {rest.strip()!r}, outside the repository",
        "dangling": "a symbolic link that leads to nothing",
        "loop": "a loop of symbolic links",
    }.get(words[0] if words else "", f"unreadable ({header!r})")
    raise InputError(
        f"{name}: in commit {commit[:12]} it is {why}; rag-gate reads files as in the base commit from git objects "
        "and follows links only inside that commit"
    )


WORKTREE_PREFIX = "rag-gate-base-"
"""How the temporary folder of a base checkout is named: the prefix, the pid of the run that made it, ``-`` and a
random suffix (:func:`tempfile.mkdtemp`)."""


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_abandoned_worktrees(repo: Path) -> list[Path]:
    """Remove the base checkouts left registered by runs that were killed before their clean-up; return them.

    A checkout is abandoned when it lies in this host's temporary folder, under a folder named by
    :data:`WORKTREE_PREFIX` whose pid no longer runs. ``git worktree prune`` then drops the registrations whose
    folders are gone (e.g. a container's ``/tmp``). A checkout of a live run is never touched.
    """
    listing = git(repo, "worktree", "list", "--porcelain", check=False).stdout
    removed = []
    for line in listing.splitlines():
        path = Path(line.removeprefix("worktree "))
        owner = re.fullmatch(rf"{WORKTREE_PREFIX}(\d+)-[^/]+", path.parent.name)
        if not line.startswith("worktree ") or path.name != "base" or owner is None:
            continue
        if path.parent.parent != Path(tempfile.gettempdir()) or _alive(int(owner[1])):
            continue
        git(repo, "worktree", "remove", "--force", str(path), check=False)
        shutil.rmtree(path.parent, ignore_errors=True)
        removed.append(path)
    git(repo, "worktree", "prune", check=False)
    return removed


@contextmanager
def worktree(repo: Path, sha: str) -> Iterator[Path]:
    """Check out ``sha`` as a detached ``git worktree`` in a temporary directory; remove it afterwards.

    The worktree shares the object store with ``repo`` (no clone, no network) and is removed, with its
    administrative files under ``.git/worktrees``, even when the body raises. Checkouts that killed runs left behind
    are removed first (:func:`remove_abandoned_worktrees`).

    Args:
        repo: the repository.
        sha: the commit to check out.

    Yields:
        The worktree directory (the repository root at ``sha``).

    Raises:
        EvaluationError: git could not create the worktree.
    """
    remove_abandoned_worktrees(repo)
    parent = Path(tempfile.mkdtemp(prefix=f"{WORKTREE_PREFIX}{os.getpid()}-"))
    parent.chmod(0o755)  # the pipeline user (another user in the container) reads the base's checkout
    path = parent / "base"
    git(repo, "worktree", "add", "--detach", str(path), sha)
    try:
        yield path
    finally:
        git(repo, "worktree", "remove", "--force", str(path), check=False)
        git(repo, "worktree", "prune", check=False)
        shutil.rmtree(parent, ignore_errors=True)
