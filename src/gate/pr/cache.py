"""Base results the PR's code cannot change: in-memory snapshots of run directories and a signed cache of them.

- A :class:`Snapshot` is every file of a run directory, held in rag-gate's memory with its digest. The PR flow
  takes one of the base run before the head's pipeline starts, checks the directory against it before comparing,
  and restores it when it changed (the head's code rewrote it).
- The cache keeps one base run per :class:`CacheKey` (everything that determines it: base commit, golden set,
  config, judge, repeats, rag-gate version, the base's pipeline environment) so that later PRs on the same base
  need not re-run it. Each entry is signed with HMAC-SHA256 over its key and the digests of its files, with a key
  the pipeline never gets (:func:`signing_key`); an entry whose signature does not verify is ignored, with a
  warning, and recomputed.
  Who may *write* entries is the PR flow's rule (trusted runs only), see ``gate.pr.trust``.

The cache directory is plain files (``<dir>/<key digest>/key.json``, ``signature``, ``run/...``), so users can
persist it with ``actions/cache``.

Source: RFC 2104 / FIPS 198-1 (HMAC), FIPS 180-4 (SHA-256).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from gate.errors import WriteError
from gate.files import make_dirs, make_parent, writing

log = logging.getLogger("rag-gate")

KEY_FILE = "key.json"
SIGNATURE_FILE = "signature"
RUN_DIR = "run"
COMPLETE_MARKER = "manifest.json"
"""A run directory is complete once its manifest exists (it is written last)."""
SIGNING_KEY_VAR = "RAG_GATE_CACHE_KEY"
"""Environment variable holding the cache signing key (from a repository secret in CI)."""
LOCAL_KEY_FILE = Path("rag-gate") / "cache-signing.key"
"""The per-user signing key of local runs, under ``$XDG_CACHE_HOME`` (default ``~/.cache``)."""


def judge_id(judge: Mapping[str, Any] | None) -> str:
    """A stable id of a judge configuration: the sha256 of its canonical JSON (sorted keys), 16 hex chars.

    Args:
        judge: the ``judge`` section of the config (backend, model, options); None or {} for the default.

    Returns:
        16 lowercase hex characters; equal configs give equal ids whatever the key order.
    """
    canonical = json.dumps(dict(judge or {}), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class CacheKey:
    """What a base run depends on; two runs with equal keys produce interchangeable results."""

    base_sha: str
    """The base commit (merge base of the PR)."""
    golden_sha256: str
    """sha256 of the golden set file used on both sides."""
    config_sha256: str
    """sha256 of the base side's config file."""
    judge_id: str
    """:func:`judge_id` of the judge configuration that scores both sides."""
    repeats: int
    """Repeats per case (≥ 1)."""
    gate_version: str
    """rag-gate version (scoring may change between versions)."""
    environment: str = ""
    """:func:`gate.pr.envs.env_key` of the environment the base ran in ("" without a setup command)."""

    def digest(self) -> str:
        """sha256 of the key's canonical JSON: the entry's directory name (64 hex chars)."""
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Snapshot:
    """Every regular file of a run directory, by relative POSIX path, held in memory."""

    files: Mapping[str, bytes] = field(default_factory=dict)
    """Relative POSIX path → the file's bytes."""

    @classmethod
    def of(cls, run_dir: Path) -> Snapshot:
        """Read every regular file under ``run_dir`` (symbolic links are skipped, never followed)."""
        files = {}
        for path in sorted(run_dir.rglob("*")):
            if path.is_file() and not path.is_symlink() and not any(p.is_symlink() for p in path.parents):
                files[path.relative_to(run_dir).as_posix()] = path.read_bytes()
        return cls(files)

    @cached_property
    def file_digests(self) -> dict[str, str]:
        """Relative path → sha256 hex of the file's bytes."""
        return {name: hashlib.sha256(data).hexdigest() for name, data in sorted(self.files.items())}

    @cached_property
    def digest(self) -> str:
        """sha256 over the sorted (path, file sha256) pairs: equal for equal directories, 64 hex chars."""
        canonical = json.dumps(self.file_digests, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @property
    def complete(self) -> bool:
        """True when the run finished (its manifest exists)."""
        return COMPLETE_MARKER in self.files

    def matches(self, run_dir: Path) -> bool:
        """True when ``run_dir`` holds exactly these files with these bytes."""
        return run_dir.is_dir() and not run_dir.is_symlink() and Snapshot.of(run_dir).digest == self.digest

    def restore(self, run_dir: Path) -> Path:
        """Replace ``run_dir`` with exactly these files; returns ``run_dir``.

        Raises:
            WriteError: a file cannot be written (exit code 3), naming it.
        """
        if run_dir.is_symlink() or run_dir.is_file():
            run_dir.unlink()
        shutil.rmtree(run_dir, ignore_errors=True)
        for name, data in self.files.items():
            path = run_dir / name
            make_parent(path)
            with writing(path):
                path.write_bytes(data)
        make_dirs(run_dir)
        return run_dir


def signing_key(secret: str | None, environ: Mapping[str, str], *, local: bool) -> bytes | None:
    """The key that signs and verifies cache entries.

    ``RAG_GATE_CACHE_KEY`` when set (in CI, from a repository secret); otherwise, for a local run, a random
    per-user key kept in ``$XDG_CACHE_HOME/rag-gate/cache-signing.key`` (created with mode 0600 on first use);
    otherwise (CI without the secret) None: the cache cannot be trusted and is not used.

    Args:
        secret: ``RAG_GATE_CACHE_KEY``'s value (:class:`gate.pr.credentials.Credentials`; None or empty: unset).
        environ: rag-gate's environment (``XDG_CACHE_HOME``).
        local: True outside GitHub Actions.

    Returns:
        The key bytes, or None.
    """
    if secret:
        return secret.encode("utf-8")
    if not local:
        return None
    root = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = root / LOCAL_KEY_FILE
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    make_parent(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another run created it meanwhile
        return path.read_bytes().strip()
    except OSError as exc:
        raise WriteError(path, exc) from None
    with writing(path), os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(secrets.token_hex(32))
    return path.read_bytes().strip()


def sign(key: bytes, cache_key: CacheKey, snapshot: Snapshot) -> str:
    """HMAC-SHA256 (hex) of the canonical JSON of the cache key and the snapshot's file digests."""
    message = json.dumps({"key": asdict(cache_key), "files": snapshot.file_digests}, sort_keys=True).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def lookup(cache_dir: Path, key: CacheKey, signing: bytes) -> Snapshot | None:
    """The cached base run for ``key``, verified, as a snapshot (its files are read once, into memory).

    Args:
        cache_dir: the cache root (may not exist).
        key: the base run's key.
        signing: the signing key (:func:`signing_key`).

    Returns:
        The snapshot, or None when there is no complete entry, or when the entry fails verification (its files,
        key or signature were changed after it was written, or it was signed with another key): then a warning
        is logged and the caller recomputes the base.
    """
    entry = cache_dir / key.digest()
    if not (entry / KEY_FILE).is_file():
        return None
    try:
        stored = json.loads((entry / KEY_FILE).read_text(encoding="utf-8"))
        signature = (entry / SIGNATURE_FILE).read_text(encoding="ascii").strip()
        snapshot = Snapshot.of(entry / RUN_DIR)
    except (OSError, ValueError):
        stored, signature, snapshot = None, "", Snapshot()
    if stored == asdict(key) and snapshot.complete and hmac.compare_digest(signature, sign(signing, key, snapshot)):
        return snapshot
    log.warning(
        "%s: cached base results failed verification (changed after they were written, or signed with another "
        "key); ignored, the base is evaluated again",
        entry,
    )
    return None


def store(cache_dir: Path, key: CacheKey, snapshot: Snapshot, signing: bytes) -> Path:
    """Write a finished base run into the cache, signed (atomically: a half-written entry is never seen).

    Args:
        cache_dir: the cache root (created if missing).
        key: the base run's key.
        snapshot: a complete run directory's snapshot (has ``manifest.json``).
        signing: the signing key (:func:`signing_key`).

    Returns:
        The entry's run directory.

    Raises:
        ValueError: the run is incomplete.
        WriteError: the cache cannot be written (exit code 3), naming the cache directory.
    """
    if not snapshot.complete:
        raise ValueError(f"incomplete run (no {COMPLETE_MARKER}); not cached")
    make_dirs(cache_dir)
    entry = cache_dir / key.digest()
    with writing(cache_dir):
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=cache_dir))
    try:
        staging.chmod(0o755)
        snapshot.restore(staging / RUN_DIR)
        with writing(staging):
            (staging / KEY_FILE).write_text(json.dumps(asdict(key), indent=2, sort_keys=True) + "\n", encoding="utf-8")
            (staging / SIGNATURE_FILE).write_text(sign(signing, key, snapshot) + "\n", encoding="ascii")
        with writing(entry):
            if entry.is_symlink():
                entry.unlink()
            shutil.rmtree(entry, ignore_errors=True)
            staging.rename(entry)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return entry / RUN_DIR
