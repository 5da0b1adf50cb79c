"""The action's outputs handed to the owner of the workspace when the run ends.

GitHub runs a Docker action as root in its container, with the job's workspace mounted at ``GITHUB_WORKSPACE``; the
job's later steps run on the host as the runner's user (uid 1001 on hosted runners). Folders rag-gate makes there
(``rag-gate-out/`` with ``base/`` and ``head/``, the base cache, a JUnit file's folder) would stay root-owned 0755:
a later step could not write into them, and a self-hosted runner's next checkout could not remove them (EACCES).
So, when rag-gate runs as root inside the workspace of a job, what it made there goes to the workspace's owner
(:func:`gate.files.hand_over`: links never followed, nothing it did not make touched).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from gate.errors import WriteError
from gate.files import hand_over, is_within

log = logging.getLogger("rag-gate")


def workspace_owner(environ: Mapping[str, str]) -> tuple[Path, int, int] | None:
    """The job's workspace and its owner's uid and gid, when rag-gate must hand its outputs over to them.

    Args:
        environ: rag-gate's environment (``GITHUB_WORKSPACE``).

    Returns:
        ``(workspace, uid, gid)`` when this process runs as root, ``GITHUB_WORKSPACE`` names a directory (not a
        link) and its owner is another user; else None (a local run, a runner that runs the action as its own user).
    """
    workspace = environ.get("GITHUB_WORKSPACE")
    if os.geteuid() != 0 or not workspace:
        return None
    try:
        info = os.lstat(workspace)
    except OSError:
        return None
    if not os.path.isdir(workspace) or os.path.islink(workspace) or info.st_uid == 0:
        return None
    return Path(workspace).resolve(), info.st_uid, info.st_gid


def hand_outputs_over(paths: Iterable[Path | None], environ: Mapping[str, str]) -> int:
    """Give what rag-gate made at ``paths`` (and the folders it made above them) to the workspace's owner.

    Only paths inside the workspace are handed over, each with :func:`gate.files.hand_over`, and so are the
    root-owned folders between a path and the workspace (made by rag-gate for ``--out-dir a/b`` or
    ``--junit reports/x.xml``). A failure is a warning: the verdict stands, the next step may lack access.

    Args:
        paths: the output folder, the cache folder, the JUnit file (None entries are skipped); absolute.
        environ: rag-gate's environment (see :func:`workspace_owner`).

    Returns:
        How many entries changed owner (0 when there is no one to hand them to).
    """
    owner = workspace_owner(environ)
    if owner is None:
        return 0
    workspace, uid, gid = owner
    changed = 0
    for path in paths:
        if path is None or not is_within(Path(path).resolve(), workspace) or Path(path).resolve() == workspace:
            continue
        path = Path(path).resolve()
        try:
            changed += hand_over(path, uid, gid)
            for folder in path.parents:  # the folders made above it (root-owned, inside the workspace)
                if folder == workspace or not is_within(folder, workspace):
                    break
                changed += _hand_over_folder(folder, uid, gid)
        except WriteError as exc:
            log.warning("%s; a later step running as uid %d may not be able to write there or remove it", exc, uid)
    return changed


def _hand_over_folder(folder: Path, uid: int, gid: int) -> int:
    """The folder itself (not what it holds) to ``uid``:``gid`` when this process owns it and it is no link."""
    try:
        info = os.lstat(folder)
    except OSError:
        return 0
    if info.st_uid != os.geteuid() or os.path.islink(folder) or not os.path.isdir(folder):
        return 0
    try:
        os.chown(folder, uid, gid, follow_symlinks=False)
    except OSError as exc:
        raise WriteError(folder, exc, doing="change the owner of") from None
    return 1
