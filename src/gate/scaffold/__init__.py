"""``rag-gate init``: the files a repository needs to start gating, written where they are missing.

A config (``rag-gate.yml``), a golden-set template with in-domain and out-of-domain cases, a pipeline stub whose
docstring is the function contract, and the GitHub workflow. Existing files are never overwritten. The templates are
package data next to this module; ``workflow.yml`` is ``examples/workflows/rag-gate.yml`` (a test keeps them equal).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from gate.errors import WriteError
from gate.files import make_parent, writing
from gate.sanitize import shown

FILES = {
    "rag-gate.yml": "rag-gate.yml",
    "eval/golden.jsonl": "golden.jsonl",
    "rag_pipeline.py": "rag_pipeline.py",
    ".github/workflows/rag-gate.yml": "workflow.yml",
}
"""Scaffolded path (relative to the target directory) → template file in this package."""
CONFIG = "rag-gate.yml"
"""The scaffolded config's path."""
WORKFLOW = ".github/workflows/rag-gate.yml"
"""The scaffolded workflow's path."""
ACTION = "rag-gate/rag-gate"
"""The action's repository, as a workflow's ``uses:`` names it."""
UNRELEASED = f"{ACTION}@v1"
"""The action reference the workflow template uses: a tag that exists once rag-gate is released."""


@dataclass(frozen=True)
class Scaffolded:
    """One file of the scaffold."""

    path: Path
    """Where it is."""
    action: Literal["created", "kept"]
    """``created``, or ``kept``: it existed and was left as it was."""


def scaffold(directory: Path) -> list[Scaffolded]:
    """Write the scaffold's files into ``directory``, keeping every file that already exists.

    Args:
        directory: the repository's root (created if missing).

    Returns:
        One entry per file of :data:`FILES`, in that order.

    Raises:
        WriteError: ``directory`` or one of the paths is not a directory where one is needed, or cannot be written
            (exit code 3, ``PATH: cannot write: REASON``).
    """
    directory = Path(directory)
    done = []
    for relative, template in FILES.items():
        path = directory / relative
        if path.exists() or path.is_symlink():
            done.append(Scaffolded(path, "kept"))
            continue
        text = resources.files(__package__).joinpath(template).read_text(encoding="utf-8")
        make_parent(path)
        with writing(path):
            handle = path.open("x", encoding="utf-8")  # "x": never replaces a file created meanwhile
        try:
            with writing(path), handle:
                handle.write(text)
        except WriteError:
            path.unlink(missing_ok=True)  # ours, half-written: a re-run creates it again
            raise
        done.append(Scaffolded(path, "created"))
    return done


def installed_commit(direct_url: str | None) -> str | None:
    """The commit of rag-gate's repository this rag-gate was installed from, if it was installed from git.

    Args:
        direct_url: the text of the installed distribution's ``direct_url.json`` (PEP 610; pip writes it for an
            install from a URL, e.g. ``pip install "rag-gate @ git+https://github.com/rag-gate/rag-gate@main"``),
            or None.

    Returns:
        The 40-character commit sha (``vcs_info.commit_id``) when the URL is rag-gate's GitHub repository; None
        for a local, editable or wheel install, another repository, or text that is not such a record.
    """
    try:
        record = json.loads(direct_url or "")
    except ValueError:
        return None
    vcs = record.get("vcs_info") if isinstance(record, dict) else None
    url = record.get("url") if isinstance(record, dict) else None
    if not isinstance(vcs, dict) or vcs.get("vcs") != "git" or not isinstance(url, str):
        return None
    commit = vcs.get("commit_id")
    ours = re.fullmatch(rf"(git\+)?(https|ssh)://(git@)?github\.com[/:]{ACTION}(\.git)?/?", url, re.IGNORECASE)
    return commit if ours and isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{40}", commit) else None


def pin_advice(workflow: Path, direct_url: str | None) -> str | None:
    """What to do about the workflow's unreleased action reference (one line), or None when it has none.

    The template uses ``rag-gate/rag-gate@v1``, which resolves only once a ``v1`` tag exists; until then a workflow
    must pin a commit (README, "The workflow"). When this rag-gate was installed from a commit of rag-gate's
    repository (:func:`installed_commit`), that commit is named: the action then runs the code ``rag-gate run``
    ran locally.

    Args:
        workflow: the scaffolded (or kept) workflow file.
        direct_url: see :func:`installed_commit`.
    """
    try:
        text = workflow.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if UNRELEASED not in text:
        return None
    commit = installed_commit(direct_url)
    pin = f"{ACTION}@{commit} (the commit installed here)" if commit else f"{ACTION}@<commit sha>"
    return (
        f"{shown(workflow)}: uses {UNRELEASED}, which works once rag-gate has a v1 release; until then replace each "
        f"`{UNRELEASED}` with a commit of https://github.com/{ACTION}: {pin} (README: The workflow)"
    )
