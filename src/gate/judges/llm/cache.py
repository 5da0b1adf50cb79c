"""The judges' on-disk answer cache: one JSON file per key, the hash of everything that can change the answer."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def default_cache_dir() -> Path:
    """Return the default judge cache directory, ``$XDG_CACHE_HOME/rag-gate/judges``.

    ``XDG_CACHE_HOME`` defaults to ``~/.cache``.
    """
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rag-gate" / "judges"


class DiskCache:
    """A directory of JSON files, one per key (``ab/abcdef….json``); atomic writes, safe across threads.

    An unreadable entry is a miss. Only successful answers are stored.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    @staticmethod
    def key(**parts: Any) -> str:
        """SHA-256 hex digest of ``parts`` as canonical JSON (sorted keys, UTF-8)."""
        canonical = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        """Return the value stored under ``key``, or None on a miss."""
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))["value"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) under ``key`` atomically; best effort (an OS error stores nothing)."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({"value": value}, out, ensure_ascii=False)
            os.replace(tmp, path)
        except OSError:
            pass


def make_cache(cache_dir: str | os.PathLike[str] | None | bool) -> DiskCache | None:
    """Open the judge cache of a ``cache_dir`` option: a path, None/True (default dir) or False (off).

    Raises:
        ValueError: when ``cache_dir`` is neither a path, a bool nor None.

    """
    if cache_dir is False:
        return None
    if cache_dir is None or cache_dir is True:
        return DiskCache(default_cache_dir())
    if isinstance(cache_dir, str | os.PathLike):
        return DiskCache(cache_dir)
    raise ValueError(f"option 'cache_dir' must be a path or false, got {cache_dir!r}")
