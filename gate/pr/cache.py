"""Cache of base-side run directories, so a second push to the same PR does not re-run the base.

An entry is keyed by everything that determines the base run: the base commit, the golden set, the
config, the judge, the number of repeats and the rag-gate version. The cache directory is plain files
(``<dir>/<key digest>/`` holding a copy of the run directory and ``key.json``), so users can persist it
with ``actions/cache``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

KEY_FILE = "key.json"
COMPLETE_MARKER = "manifest.json"
"""A run directory is complete once its manifest exists (it is written last)."""


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

    def digest(self) -> str:
        """sha256 of the key's canonical JSON: the entry's directory name (64 hex chars)."""
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def lookup(cache_dir: Path, key: CacheKey) -> Path | None:
    """Find a complete cached run directory for ``key``.

    Args:
        cache_dir: the cache root (may not exist).
        key: the base run's key.

    Returns:
        The cached run directory, or None when there is none, it is incomplete, or its stored key differs.
    """
    entry = cache_dir / key.digest()
    try:
        stored = json.loads((entry / KEY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    run_dir = entry / "run"
    if stored != asdict(key) or not (run_dir / COMPLETE_MARKER).is_file():
        return None
    return run_dir


def store(cache_dir: Path, key: CacheKey, run_dir: Path) -> Path:
    """Copy a finished run directory into the cache (atomically: a half-written entry is never seen).

    Args:
        cache_dir: the cache root (created if missing).
        key: the base run's key.
        run_dir: a complete run directory (has ``manifest.json``).

    Returns:
        The cached copy of the run directory.

    Raises:
        ValueError: ``run_dir`` is incomplete.
    """
    if not (run_dir / COMPLETE_MARKER).is_file():
        raise ValueError(f"{run_dir}: incomplete run (no {COMPLETE_MARKER}); not cached")
    cache_dir.mkdir(parents=True, exist_ok=True)
    entry = cache_dir / key.digest()
    staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=cache_dir))
    shutil.copytree(run_dir, staging / "run")
    (staging / KEY_FILE).write_text(json.dumps(asdict(key), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(entry, ignore_errors=True)
    staging.rename(entry)
    return entry / "run"
