"""Compare base with head: :func:`compare` turns two loaded sides into a typed :class:`~gate.comparison.Comparison`.

The comparison is made in :mod:`gate.compare.core`; its parts have modules of their own: the score matrices
(:mod:`gate.compare.inputs`), the per-case findings (:mod:`gate.compare.cases`), the must-pass cases
(:mod:`gate.compare.mustpass`), the notes and warnings (:mod:`gate.compare.notes`) and the per-case view the
report page shows (:mod:`gate.compare.views`).
"""

from gate.compare.core import compare, pairwise_report

__all__ = ["compare", "pairwise_report"]
