"""``rag-gate init``: the files a repository needs to start gating, written where they are missing.

A config (``rag-gate.yml``), a golden-set template with in-domain and out-of-domain cases, a pipeline stub whose
docstring is the function contract, and the GitHub workflow. Existing files are never overwritten. The templates are
package data next to this module; ``workflow.yml`` is ``examples/workflows/rag-gate.yml`` (a test keeps them equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from gate.errors import WriteError
from gate.files import make_parent, writing

FILES = {
    "rag-gate.yml": "rag-gate.yml",
    "eval/golden.jsonl": "golden.jsonl",
    "rag_pipeline.py": "rag_pipeline.py",
    ".github/workflows/rag-gate.yml": "workflow.yml",
}
"""Scaffolded path (relative to the target directory) → template file in this package."""
CONFIG = "rag-gate.yml"
"""The scaffolded config's path."""


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
