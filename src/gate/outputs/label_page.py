"""The labelling page of ``rag-gate label``: one self-contained HTML file (no network, works from ``file://``).

The rows are embedded as JSON in a ``<script type="application/json">`` element, with ``<``, ``>`` and ``&``
escaped so that no answer or chunk text can close the element or inject markup; the page's script reads them
and writes every untrusted string with ``textContent``. A Content-Security-Policy forbids any request.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from gate.files import write_text_atomic

TEMPLATE = "label.html"
"""The page's template in ``gate/outputs/templates``."""


def embedded_json(rows: Sequence[dict[str, Any]]) -> str:
    """``rows`` as JSON safe inside a script element: ASCII only, ``<``, ``>`` and ``&`` as ``\\u`` escapes.

    Raises:
        ValueError: a value is not finite (JSON has no NaN).
    """
    text = json.dumps(list(rows), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_label_page(rows: Sequence[dict[str, Any]]) -> str:
    """The labelling page's HTML for ``rows`` (rows of :func:`gate.labels.sampling.to_label_row` or pair rows)."""
    template = resources.files("gate.outputs.templates").joinpath(TEMPLATE).read_text(encoding="utf-8")
    return template.replace("__ROWS__", embedded_json(rows))


def write_label_page(path: Path | str, rows: Sequence[dict[str, Any]]) -> Path:
    """Write the labelling page for ``rows`` to ``path`` atomically; return the path."""
    write_text_atomic(path, render_label_page(rows))
    return Path(path)
