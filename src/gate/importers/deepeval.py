"""Import DeepEval goldens: the files ``EvaluationDataset.save_as(file_type="json"|"jsonl"|"csv")`` writes.

Fields (``Golden``): ``input`` → question; ``expected_output`` → reference answer; ``context`` (the ideal contexts,
text, matched against ``--corpus``) → expected documents, or ``retrieval_context`` with ``--contexts retrieved``;
``additional_metadata`` → metadata, where ``out_of_domain: true`` (or the key of ``--ood-from KEY[=VALUE]``, looked
up in ``additional_metadata``, then ``custom_column_key_values``, then the golden itself) marks an out-of-domain
case and a string ``id`` is kept as the case id; ``name`` → a tag. An ``expected_output`` that is a refusal ("I
don't know") marks an out-of-domain case too when the golden has no context. ``actual_output`` (a system's answer) is
not imported; a multi-turn golden (``scenario``, ``turns``) is refused.

In CSV and JSONL DeepEval joins a context list into one text with ``|``; it is split there again, as DeepEval's own
``add_goldens_from_csv_file``/``add_goldens_from_jsonl_file`` do (so a context holding ``|`` itself comes back as
two). CSV cells of ``additional_metadata`` and ``custom_column_key_values`` are JSON (or a Python dict). Messages
name ``file:line: field`` (CSV, JSONL) or ``file: [i].field`` (a JSON array: the golden's index).
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gate.errors import InputError
from gate.importers.common import Draft, Notes, Options, as_id, field_at, is_jsonl, ood_flag, read_csv, text_list
from gate.jsonl import parse_json, read_jsonl

DELIMITER = "|"
"""DeepEval's ``DELIMITER``: how ``save_as`` joins a context list in a CSV cell or a JSONL field."""
MAPPING_COLUMNS = ("additional_metadata", "custom_column_key_values")
_RETRIEVED_MARKER = re.compile(r"^deepeval_source=(?P<source>.*?),deepeval_context=(?P<context>.*)$", re.DOTALL)
"""DeepEval's own marker for a ``RetrievedContextData`` item written to a file (its ``_RETRIEVED_CONTEXT_MARKER``)."""


def rows(source: Path) -> Iterator[tuple[int | None, str | None, Any, bool]]:
    """``(line, field prefix, row, joined)`` of a goldens file: CSV, a JSON array (or ``{"goldens": [...]}``), JSONL.

    ``joined``: the file joins context lists with :data:`DELIMITER` (CSV and JSONL, as ``save_as`` writes them).

    Raises:
        InputError: the file cannot be read or parsed.
    """
    if source.suffix.lower() == ".csv":
        for line, row in read_csv(source):
            yield line, None, {k: _cell(k, v, source, line) for k, v in row.items() if v is not None}, True
        return
    try:
        text = source.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{source}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{source}: cannot read: {exc}") from None
    if source.suffix.lower() == ".jsonl" or not text.lstrip().startswith(("[", "{")) or is_jsonl(text):
        for line, row in read_jsonl(source):
            yield line, None, row, True
        return
    data = parse_json(text, source)
    if isinstance(data, dict):
        key = next((k for k in ("goldens", "test_cases") if isinstance(data.get(k), list)), None)
        if key is None:
            raise InputError(f"{source}: expected a JSON array of goldens")
        data = data[key]
    if not isinstance(data, list):
        raise InputError(f"{source}: expected a JSON array of goldens")
    for n, row in enumerate(data):
        yield None, f"[{n}]", row, False


def _cell(name: str, value: str, path: Path, line: int) -> Any:
    """A CSV cell: empty → None; the mapping columns parsed from JSON (or a Python dict literal, as DeepEval reads)."""
    if not value.strip():
        return None
    if name not in MAPPING_COLUMNS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        return ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise InputError(field_at(path, line, None, name) + ": not a JSON object") from None


def _contexts(value: Any, joined: bool, where: str, problems: list[str]) -> list[str]:
    """The contexts of a field: a list as it is, a text split at :data:`DELIMITER` when the file joins them."""
    if joined and isinstance(value, str):
        value = value.split(DELIMITER)
    texts = text_list(value, where, problems)
    return [m.group("context") if (m := _RETRIEVED_MARKER.match(t)) else t for t in texts]


def read(source: Path, options: Options, notes: Notes) -> list[Draft]:
    """Drafts from DeepEval goldens (see the module docstring).

    Raises:
        InputError: every malformed golden listed (a missing ``input``, a field of the wrong type).
    """
    drafts: list[Draft] = []
    problems: list[str] = []
    which, other = ("context", "retrieval_context")
    if options.contexts == "retrieved":
        which, other = other, which
    for line, prefix, row, joined in rows(source):
        at = functools.partial(field_at, source, line, prefix)
        if not isinstance(row, dict):
            problems.append(f"{at()}: expected an object (one golden)")
            continue
        if row.get("scenario") or row.get("turns"):
            problems.append(f"{at('scenario')}: a multi-turn golden: only single-turn goldens are imported")
            continue
        question = row.get("input")
        if not isinstance(question, str) or not question.strip():
            problems.append(f"{at('input')}: required: the question as text")
            continue
        texts = _contexts(row.get(which), joined, at(which), problems)
        if not texts and row.get(other):
            flag = "retrieved" if other == "retrieval_context" else "reference"
            notes.add(f"golden with {other} only (not used: pass --contexts {flag} to use it)", at())
        references = text_list(row.get("expected_output"), at("expected_output"), problems)
        meta = row.get("additional_metadata") or {}
        if not isinstance(meta, dict):
            problems.append(f"{at('additional_metadata')}: must be an object")
            continue
        n_problems = len(problems)
        ood, reason = ood_flag(row, options, (*MAPPING_COLUMNS, ""), at, problems)
        if len(problems) > n_problems:
            continue
        golden_name = row.get("name")
        drafts.append(
            Draft(
                where=(source, line, prefix),
                question=question,
                case_id=as_id(meta.get("id")),
                contexts=texts,
                references=references,
                out_of_domain=ood,
                ood_reason=reason,
                tags=[golden_name] if isinstance(golden_name, str) and golden_name else [],
                metadata={"source": "deepeval", **{k: v for k, v in meta.items() if k not in ("id", "out_of_domain")}},
            )
        )
    if problems:
        raise InputError.listing(problems)
    return drafts
