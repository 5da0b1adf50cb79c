"""Import a ragas dataset: an ``EvaluationDataset`` (``to_jsonl``/``to_csv``) or a testset generator's output.

Fields (``SingleTurnSample``): ``user_input`` → question; ``reference`` → reference answer; ``reference_context_ids``
(or else ``reference_contexts``, text matched against ``--corpus``) → expected documents; with ``--contexts
retrieved``, ``retrieved_context_ids`` / ``retrieved_contexts`` instead; ``synthesizer_name`` → a tag; ``rubrics`` →
criteria. The field names of ragas 0.1 (``question``, ``ground_truth``, ``ground_truths``, ``contexts``) are read too.
ragas has no out-of-domain field (``to_jsonl``/``to_csv`` drop unknown fields): a case is out-of-domain when its
``reference`` is a refusal ("I don't know", the refusal metric's phrases) and it names no context, or when a
column added to the file marks it (``out_of_domain``, or any ``--ood-from KEY[=VALUE]``). In CSV, list cells are JSON
or Python lists, as ``to_csv`` and pandas write them. Messages name ``file:line: field`` (JSONL, CSV) or
``file: [i].field`` (a JSON array: the sample's index).
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gate.errors import InputError, located
from gate.importers.common import Draft, Notes, Options, field_at, id_list, is_jsonl, ood_flag, read_csv, text_list
from gate.jsonl import parse_json, read_jsonl

LIST_FIELDS = ("reference_contexts", "retrieved_contexts", "reference_context_ids", "retrieved_context_ids",
               "contexts", "ground_truths", "rubrics")  # fmt: skip
MAX_CELL = 1 << 24
"""Largest CSV cell parsed as a list (16 MiB)."""


def rows(source: Path) -> Iterator[tuple[int | None, str | None, Any]]:
    """``(line, field prefix, row)`` of a ragas file: JSONL (``.jsonl``), a JSON array (``.json``) or CSV (``.csv``).

    Raises:
        InputError: the file cannot be read or parsed.
    """
    suffix = source.suffix.lower()
    if suffix == ".csv":
        for line, row in read_csv(source):
            yield line, None, {k: _cell(k, v, source, line) for k, v in row.items() if v is not None}
    elif suffix == ".json":
        try:
            text = source.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{source}: cannot read: {exc}") from None
        if is_jsonl(text):  # to_hf_dataset().to_json() writes JSON Lines
            for line, row in read_jsonl(source):
                yield line, None, row
            return
        data = parse_json(text, source)
        data = data.get("samples", data) if isinstance(data, dict) else data
        if not isinstance(data, list):
            raise InputError(f"{source}: expected a JSON array of samples")
        for n, row in enumerate(data):
            yield None, f"[{n}]", row
    else:
        for line, row in read_jsonl(source):
            yield line, None, row


def _cell(name: str, value: str, path: Path, line: int) -> Any:
    """A CSV cell: list fields parsed from JSON or a Python literal; empty cells are absent (None)."""
    text = value.strip()
    if not text:
        return None
    if name not in LIST_FIELDS or text[0] not in "[{":
        return value
    if len(text) > MAX_CELL:
        raise InputError(located(path, line, name, f"cell larger than {MAX_CELL} bytes"))
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise InputError(located(path, line, name, "not a list (expected JSON or a Python list of strings)")) from None


def read(source: Path, options: Options, notes: Notes) -> list[Draft]:
    """Drafts from a ragas file (see the module docstring).

    Raises:
        InputError: every malformed row listed (a missing question, a multi-turn sample, a field of the wrong type).
    """
    drafts: list[Draft] = []
    problems: list[str] = []
    which = "retrieved" if options.contexts == "retrieved" else "reference"
    other = "reference" if which == "retrieved" else "retrieved"
    for line, prefix, row in rows(source):
        where = (source, line, prefix)
        if not isinstance(row, dict):
            problems.append(located(source, line, prefix, "expected an object (one sample)"))
            continue
        key = "user_input" if "user_input" in row else "question"
        question = row.get(key)
        if isinstance(question, list):
            problems.append(located(source, line, _f(prefix, key), "a multi-turn sample: only single-turn is imported"))
            continue
        if not isinstance(question, str) or not question.strip():
            problems.append(located(source, line, _f(prefix, "user_input"), "required: the question as text"))
            continue
        at = functools.partial(field_at, source, line, prefix)
        ids = id_list(row.get(f"{which}_context_ids"), at(f"{which}_context_ids"), problems)
        legacy = "contexts" if which == "retrieved" else None
        texts = text_list(row.get(f"{which}_contexts", row.get(legacy) if legacy else None),
                          at(f"{which}_contexts"), problems)  # fmt: skip
        if not ids and not texts and (row.get(f"{other}_context_ids") or row.get(f"{other}_contexts")
                                      or (other == "retrieved" and row.get("contexts"))):  # fmt: skip
            notes.add(f"sample with {other} contexts only (not used: pass --contexts {other} to use them)", at())
        references = text_list(row.get("reference", row.get("ground_truth")), at("reference"), problems)
        references += text_list(row.get("ground_truths"), at("ground_truths"), problems)
        n_problems = len(problems)
        ood, reason = ood_flag(row, options, ("",), at, problems)
        if len(problems) > n_problems:
            continue
        rubrics = row.get("rubrics")
        criteria = "\n".join(f"{k}: {v}" for k, v in rubrics.items()) if isinstance(rubrics, dict) else None
        synth = row.get("synthesizer_name")
        metadata = {k: row[k] for k in ("persona_name", "query_style", "query_length") if isinstance(row.get(k), str)}
        drafts.append(
            Draft(
                where=where,
                question=question,
                doc_ids=ids,
                contexts=[] if ids else texts,
                references=references,
                out_of_domain=ood,
                ood_reason=reason,
                tags=[synth] if isinstance(synth, str) and synth else [],
                criteria=criteria,
                metadata={"source": "ragas", **metadata},
            )
        )
    if problems:
        raise InputError.listing(problems)
    return drafts


def _f(prefix: str | None, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name
