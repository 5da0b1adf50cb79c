"""A fingerprint of the code a side's pipeline runs (``code`` in manifest.json): a run resumes only when it matches.

Git blob ids of the pipeline's workdir (tracked files as they are now, untracked ``*.py`` files), or of its ``*.py``
files outside git; the files a ``command:`` names; a ``predictions:`` file's content (:func:`code_fingerprint`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gate.config import PipelineSpec

FINGERPRINT_MAX_FILES = 20_000
"""Files hashed at most by the file walk of a workdir outside git (beyond: the fingerprint says ``partial``)."""
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "env"})


def _git_blob_sha(path: Path) -> str | None:
    """The git blob id of a file's current content (a link's target), None when it cannot be read."""
    try:
        data = os.readlink(path).encode("utf-8", "surrogateescape") if path.is_symlink() else path.read_bytes()
    except (OSError, IsADirectoryError):
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _git(workdir: Path, *args: str) -> bytes:
    """Output of ``git args`` in ``workdir`` (no fsmonitor hook, no prompt); raises on any failure."""
    return subprocess.run(
        ["git", "-c", "core.fsmonitor=false", "-c", "core.quotepath=false", *args],
        cwd=workdir,
        capture_output=True,
        check=True,
        timeout=120,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"},
    ).stdout


def _excluded(path: Path, exclude: list[Path]) -> bool:
    return any(path == e or e in path.parents for e in exclude)


def _git_entries(workdir: Path, exclude: list[Path]) -> dict[str, str] | None:
    """Path → blob id of the workdir's tracked files as they are now, plus its untracked ``*.py`` files.

    Tracked files: the index's blob ids (``git ls-files -s``: staged changes count), replaced by the current
    content's id for files changed or deleted since (``git ls-files -m -d``). Untracked, not ignored ``*.py``
    files (a new module the pipeline imports) are hashed too; other untracked files (outputs, caches, run
    directories) are not. Nothing is written to the repository. None when ``workdir`` is not in a git work tree
    or git cannot be run.
    """
    try:
        if _git(workdir, "rev-parse", "--is-inside-work-tree").strip() != b"true":
            return None
        staged = _git(workdir, "ls-files", "-z", "-s", "--", ".").split(b"\0")
        changed = set(_git(workdir, "ls-files", "-z", "-m", "-d", "--", ".").split(b"\0"))
        untracked = _git(workdir, "ls-files", "-z", "-o", "--exclude-standard", "--", "*.py").split(b"\0")
    except (OSError, subprocess.SubprocessError):
        return None
    entries: dict[str, str] = {}
    for line in filter(None, staged):
        meta, _, name = line.partition(b"\t")
        blob = meta.split(b" ")[1]
        entries[os.fsdecode(name)] = blob.decode()  # a submodule (mode 160000): its commit
    for name in filter(None, changed):
        path = workdir / os.fsdecode(name)
        if not path.is_dir():  # a changed submodule keeps its recorded commit
            entries[os.fsdecode(name)] = _git_blob_sha(path) or "deleted"
    for name in filter(None, untracked):
        entries[os.fsdecode(name)] = _git_blob_sha(workdir / os.fsdecode(name)) or "unreadable"
    return {name: sha for name, sha in entries.items() if not _excluded((workdir / name).resolve(), exclude)}


def _walked_entries(workdir: Path, exclude: list[Path]) -> tuple[dict[str, str], bool]:
    """Path → blob id of every ``*.py`` file under ``workdir`` (hidden, cache and virtualenv folders skipped).

    Returns:
        The entries, and whether the walk stopped at :data:`FINGERPRINT_MAX_FILES`.
    """
    entries: dict[str, str] = {}
    for root, dirs, files in os.walk(workdir):
        here = Path(root)
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in _SKIPPED_DIRS
            and not (here / d / "pyvenv.cfg").exists()
            and not _excluded((here / d).resolve(), exclude)
        )
        for name in sorted(files):
            if name.endswith(".py"):
                if len(entries) >= FINGERPRINT_MAX_FILES:
                    return entries, True
                path = here / name
                entries[path.relative_to(workdir).as_posix()] = _git_blob_sha(path) or "unreadable"
    return entries, False


def _named_files(command: str, workdir: Path) -> dict[str, str]:
    """Blob ids of the files a shell command names as plain words (``python eval.py``, ``./run.sh``)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return {}
    named = {}
    for word in words:
        path = workdir / word
        if "{" not in word and len(word) < 4096 and path.is_file():
            named[word] = _git_blob_sha(path) or "unreadable"
    return named


def code_fingerprint(spec: PipelineSpec, exclude: Iterable[Path] = ()) -> dict[str, Any]:
    """A fingerprint of the code a side's pipeline runs: a run resumes only when it is unchanged.

    - ``python:`` and ``command:`` in a git work tree: the workdir's tracked files as they are now (committed,
      staged or not) and its untracked, not ignored ``*.py`` files (:func:`_git_entries`), by git blob id.
    - outside git: every ``*.py`` file under the workdir (:func:`_walked_entries`).
    - ``command:`` also: the command and the files it names as plain words (a script outside the workdir's
      ``*.py`` files, an untracked one).
    - ``predictions:``: the predictions file's content.

    Files of ``exclude`` (the run directory) are left out. Not covered: installed packages, the interpreter,
    data the code reads at run time; a pipeline whose output goes into its workdir should keep it untracked (or
    git-ignored) so that it does not count as code.

    Args:
        spec: the pipeline section of the config.
        exclude: directories whose files never count (the run directory).

    Returns:
        ``{"sha256": 64 hex characters, "source": "git" | "files" | "predictions", "files": n}`` (``partial``:
        true when the file walk stopped at :data:`FINGERPRINT_MAX_FILES`).
    """
    if spec.predictions is not None:
        digest = hashlib.sha256()
        try:
            with Path(spec.predictions).open("rb") as stream:
                for block in iter(lambda: stream.read(1 << 20), b""):
                    digest.update(block)
        except OSError:
            digest.update(b"unreadable")
        return {"sha256": digest.hexdigest(), "source": "predictions", "files": 1}
    workdir = Path(spec.workdir).resolve()
    excluded = [Path(e).resolve() for e in exclude]
    partial = False
    entries = _git_entries(workdir, excluded)
    source = "git"
    if entries is None:
        entries, partial = _walked_entries(workdir, excluded)
        source = "files"
    named = _named_files(spec.command, workdir) if spec.command else {}
    canonical = json.dumps(
        {"files": entries, "command": spec.command, "named": named, "python": spec.python}, sort_keys=True
    )
    result: dict[str, Any] = {
        "sha256": hashlib.sha256(canonical.encode("utf-8", "surrogateescape")).hexdigest(),
        "source": source,
        "files": len(entries),
    }
    if partial:
        result["partial"] = True
    return result
