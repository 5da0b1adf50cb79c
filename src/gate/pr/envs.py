"""Each side's own pipeline environment (DESIGN §8, "Each side in its own world").

With a setup command, ``rag-gate pr`` evaluates each side in a virtual environment of its own, built from its own
commit: a new venv made from the pipeline's Python (``RAG_GATE_PIPELINE_PYTHON``, or rag-gate's own), which sees
that Python's packages *after* its own (a ``.pth`` line adds them with ``site.addsitedir``, as the image's pipeline
venv sees the image's packages), into which the setup command is run in that side's checkout. A dependency the PR
changes is therefore measured on the head only, and nothing the PR's setup installs runs in the base's evaluation.

The base's environment is reused while its inputs are unchanged: its :func:`env_key` is the sha256 of the setup
command's text, the git tree of the base commit (every file the command can read), the pipeline's Python and the
rag-gate version. It is kept in the base cache directory (``<cache-dir>/envs/<key>/env``), signed like the base
results (HMAC over every file's digest; ``__pycache__`` is not covered and is removed before reuse), written by
trusted runs only and verified before use; the key is also part of the base results' cache key.

When rag-gate runs as root with a pipeline user (the image), an environment is built and set up as that user and
then handed back to root (read-only to the pipeline user) before any other code runs, so the head's code cannot
change the base's environment.

Source: Python ``venv`` and ``site`` (``.pth`` files, ``site.addsitedir``); RFC 2104 (HMAC).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from gate import __version__
from gate.errors import EvaluationError
from gate.files import remove_tree
from gate.pipeline import run_shell
from gate.pr.git import git
from gate.pr.trust import CachePolicy
from gate.sandbox import Sandbox

log = logging.getLogger("rag-gate")

ENVS_DIR = "envs"
"""Sub-directory of the cache directory that holds the reusable base environments."""
ENV_DIR = "env"
"""The virtual environment inside an entry (its path is fixed: a venv cannot be moved)."""
SIGNATURE_FILE = "signature"
CHAIN_FILE = "rag-gate-pipeline-python.pth"
"""The ``.pth`` file that makes a side's environment see the pipeline Python's packages after its own."""
_SITE_DIRS = (
    "import json, site, sysconfig\n"
    "dirs = [sysconfig.get_path('purelib'), sysconfig.get_path('platlib')] + site.getsitepackages()\n"
    "print(json.dumps(list(dict.fromkeys(dirs))))\n"
)


def env_key(repo: Path, commit: str, command: str, template_python: str) -> str:
    """The identity of a side's environment: what its setup can depend on (64 hex characters).

    Args:
        repo: the repository.
        commit: the side's commit (its whole tree: the requirements, lock files and scripts the command reads).
        command: the setup command's text.
        template_python: the pipeline's Python the environment is made from.

    Returns:
        The sha256 of the canonical JSON of those, with the rag-gate version.
    """
    tree = git(repo, "rev-parse", f"{commit}^{{tree}}").stdout.strip()
    canonical = json.dumps(
        {"setup_command": command, "tree": tree, "python": template_python, "gate_version": __version__},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def env_python(env: Path) -> Path:
    """The interpreter of the virtual environment ``env``."""
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def create(template_python: str, env: Path) -> Path:
    """Make a new virtual environment at ``env`` that sees ``template_python``'s packages after its own.

    Args:
        template_python: the pipeline's Python (a venv's or a system interpreter).
        env: where to create it (must not exist, or be empty).

    Returns:
        The new environment's interpreter.

    Raises:
        EvaluationError: the venv could not be made (e.g. no ``ensurepip`` in that Python).
    """
    made = subprocess.run(
        [template_python, "-m", "venv", str(env)], capture_output=True, text=True, check=False, encoding="utf-8"
    )
    python = env_python(env)
    if made.returncode != 0 or not python.exists():
        raise EvaluationError(
            f"cannot make the side's pipeline environment with {template_python} -m venv: "
            f"{' '.join(made.stderr.split())[-500:]}"
        )
    own = _site_dirs(str(python))
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in _site_dirs(template_python) if d not in own)
    Path(own[0], CHAIN_FILE).write_text(lines, encoding="utf-8")
    return python


def _site_dirs(python: str) -> list[str]:
    done = subprocess.run(
        [python, "-I", "-c", _SITE_DIRS], capture_output=True, text=True, check=False, encoding="utf-8"
    )
    if done.returncode != 0:
        raise EvaluationError(f"{python}: cannot list its site-packages: {' '.join(done.stderr.split())[-300:]}")
    return [d for d in json.loads(done.stdout) if isinstance(d, str)]


def hand_over(env: Path, uid: int, gid: int) -> None:
    """Give ``env`` (every file and directory, links themselves) to ``uid``/``gid``."""
    os.lchown(env, uid, gid)
    for root, dirs, files in os.walk(env):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, gid)


def freeze(env: Path) -> None:
    """Make ``env`` read-only to everyone but rag-gate's own user (which takes it back when it is root)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        hand_over(env, 0, 0)
    for root, dirs, files in os.walk(env):
        for name in [*dirs, *files, ""]:
            path = os.path.join(root, name) if name else root
            info = os.lstat(path)
            if not stat.S_ISLNK(info.st_mode):
                os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o022)


def digest(env: Path) -> str:
    """sha256 over every entry of ``env`` (path, kind, content digest or link target, executable bit).

    Links are recorded, never followed; ``__pycache__`` directories are left out (Python rewrites them as it
    imports; :func:`lookup` removes them before a reuse).
    """
    entries: list[tuple[str, str, str]] = []
    for root, dirs, files in os.walk(env):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, env)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                entries.append((rel, "link", os.readlink(path)))
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    content = hashlib.file_digest(handle, "sha256").hexdigest()
                entries.append((rel, "x" if info.st_mode & 0o111 else "f", content))
            else:
                entries.append((rel, "other", ""))
    canonical = json.dumps(sorted(entries), separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _sign(key: bytes, env_id: str, env: Path) -> str:
    message = json.dumps({"env": env_id, "digest": digest(env)}, sort_keys=True).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def entry(cache_dir: Path, env_id: str) -> Path:
    """The cache entry directory of the environment ``env_id``."""
    return cache_dir / ENVS_DIR / env_id


def lookup(cache_dir: Path, env_id: str, signing: bytes) -> Path | None:
    """The stored environment ``env_id``, verified, or None (absent, or changed since it was stored: warned).

    Compiled bytecode (``__pycache__``) is removed from a verified environment before it is used.
    """
    where = entry(cache_dir, env_id)
    env = where / ENV_DIR
    if where.is_symlink() or not (where / SIGNATURE_FILE).is_file() or env.is_symlink() or not env.is_dir():
        return None
    try:
        signature = (where / SIGNATURE_FILE).read_text(encoding="ascii").strip()
        valid = hmac.compare_digest(signature, _sign(signing, env_id, env))
    except (OSError, ValueError):
        valid = False
    if not valid:
        log.warning("%s: stored base environment failed verification; ignored, it is built again", where)
        return None
    for root, dirs, _ in os.walk(env):
        for name in [d for d in dirs if d == "__pycache__"]:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        dirs[:] = [d for d in dirs if d != "__pycache__"]
    return env_python(env)


def staging(cache_dir: Path | None, env_id: str) -> Path:
    """Where to build a new environment: its final place in the cache (a venv cannot move), or a temporary one.

    A previous, unsigned (incomplete or unverified) entry at that place is removed first.
    """
    if cache_dir is None:
        parent = Path(tempfile.mkdtemp(prefix="rag-gate-env-"))
        parent.chmod(0o755)
        return parent / ENV_DIR
    where = entry(cache_dir, env_id)
    if where.is_symlink():
        where.unlink()
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    where.chmod(0o755)
    return where / ENV_DIR


def store(env: Path, env_id: str, signing: bytes) -> None:
    """Sign a built environment that lives at its cache place (:func:`staging`), so later runs reuse it."""
    (env.parent / SIGNATURE_FILE).write_text(_sign(signing, env_id, env) + "\n", encoding="ascii")


@dataclass(frozen=True)
class Setup:
    """A side's setup: the command, where it runs (that side's checkout), and where temporary environments go."""

    command: str
    """The setup command's text."""
    repo: Path
    """The repository (for the commit's tree)."""
    checkout: Path
    """The directory the command runs in: ``working_directory`` inside that side's checkout."""
    cleanup: ExitStack
    """Removes the temporary environments made for this run."""


def run_setup(command: str, workdir: Path, sandbox: Sandbox, passthrough: Iterable[str]) -> None:
    """Run the user's setup command through the shell, in the sandbox (:func:`gate.pipeline.run_shell`).

    It installs the pipeline's dependencies, so it runs the PR's code too: it gets the pipeline's environment and
    user, its output is forwarded, redacted, and its process group is killed when it ends.

    Raises:
        EvaluationError: the command exited with an error (exit 3).
    """
    with sandbox.scratch() as tmpdir:
        try:
            code = run_shell(command, cwd=workdir, env=sandbox.environment(passthrough, tmpdir=tmpdir), sandbox=sandbox)
        finally:
            sandbox.sweep()
    if code != 0:
        raise EvaluationError(f"--setup-command exited with {code}: {sandbox.redactor(command)}")


def side_sandbox(
    setup: Setup, sandbox: Sandbox, passthrough: Iterable[str], cache: CachePolicy | None, env_id: str = ""
) -> Sandbox:
    """``sandbox`` with the pipeline's Python replaced by a side's own environment, set up by the side's command.

    The base's (``env_id`` given) is taken from the verified cache when there, else built and, on trusted runs,
    stored there for reuse; the head's (``env_id`` empty) is always new and temporary. In the image the environment
    is built as the pipeline user and taken back (read-only to it) once set up, so no later code changes it.
    """
    if env_id and cache is not None and cache.readable:
        assert cache.directory is not None and cache.signing_key is not None
        reused = lookup(cache.directory, env_id, cache.signing_key)
        if reused is not None:
            log.info("base environment reused (%s)", env_id[:12])
            return dataclasses.replace(sandbox, python=str(reused))
    keep = bool(env_id) and cache is not None and cache.writable
    env = staging(cache.directory if keep and cache is not None else None, env_id)
    if not keep:
        setup.cleanup.callback(remove_tree, env.parent)
    python = create(sandbox.python, env)
    if sandbox.user is not None:
        hand_over(env, sandbox.user.uid, sandbox.user.gid)
    side = dataclasses.replace(sandbox, python=str(python))
    log.info("setting up the %s's environment: %s", "base" if env_id else "head", sandbox.redactor(setup.command))
    run_setup(setup.command, setup.checkout, side, passthrough)
    freeze(env)
    if keep and cache is not None:
        assert cache.signing_key is not None
        store(env, env_id, cache.signing_key)
    return side
