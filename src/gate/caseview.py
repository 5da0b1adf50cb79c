"""One paired case as the report page shows it (a contract): what :mod:`gate.compare` reads from the two runs.

A contract module like :mod:`gate.comparison`: it imports the standard library only, so that the renderers
(:mod:`gate.outputs`) format a case without reading a run directory or knowing the gate's policy. The views are
produced by :func:`gate.compare.views.case_views`, a batch at a time (a page of 100,000 cases is never whole in
memory); the text in them is untrusted and unclipped: the renderer cleans and clips it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CaseView:
    """One case present in both golden sets: its question, both sides' first valid answers, claims and means."""

    id: str
    """Case id."""
    question: str
    """The golden question."""
    line: int
    """Line of the case in the golden file a reviewer edits (0: unknown)."""
    out_of_domain: bool
    """The golden set marks the case as one the system should refuse."""
    expected_doc_ids: tuple[str, ...]
    """The golden set's expected documents."""
    answer_base: str | None
    """Base's first valid answer (None: every repeat failed)."""
    answer_head: str | None
    """Head's first valid answer."""
    retrieved_base: tuple[str, ...]
    """The ids base retrieved with that answer, rank 1 first (empty without an answer)."""
    retrieved_head: tuple[str, ...]
    """The ids head retrieved."""
    dropped_docs: tuple[str, ...]
    """Expected documents in base's top k that are not in head's top k (empty unless both sides answered)."""
    identical_answer: bool
    """Both sides answered, with the same text."""
    claims_base: Sequence[dict[str, Any]] | None
    """Every claim of base's first judged answer as the judge recorded it (None: not judged)."""
    claims_head: Sequence[dict[str, Any]] | None
    """Every claim of head's first judged answer."""
    means: tuple[tuple[float, float], ...]
    """(base, head) per-case mean over the repeats of each metric, in the comparison's metric order (NaN: not
    applicable, failed or not scored)."""

    @property
    def both_answered(self) -> bool:
        """Both sides have a valid answer (``dropped_docs`` and the answers' identity then mean something)."""
        return self.answer_base is not None and self.answer_head is not None
