"""Import DeepEval goldens: the JSON array ``EvaluationDataset.save_as(file_type="json")`` writes (or JSONL).

Fields (``Golden``): ``input`` → question; ``expected_output`` → reference answer; ``context`` (the ideal contexts,
text, matched against ``--corpus``) → expected documents, or ``retrieval_context`` with ``--contexts retrieved``;
``additional_metadata`` → metadata, where ``out_of_domain: true`` marks an out-of-domain case and a string ``id``
is kept as the case id; ``name`` → a tag. ``actual_output`` (a system's answer) is not imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gate.errors import InputError, located
from gate.importers.common import Draft, Notes, Options, as_id, text_list
from gate.jsonl import parse_json, read_jsonl


def rows(source: Path) -> Iterator[tuple[int | None, str | None, Any]]:
    """``(line, field prefix, row)`` of a goldens file: a JSON array (or ``{"goldens": [...]}``), or JSONL.

    Raises:
        InputError: the file cannot be read or parsed.
    """
    try:
        text = source.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{source}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{source}: cannot read: {exc}") from None
    if source.suffix.lower() == ".jsonl" or not text.lstrip().startswith(("[", "{")) or _is_jsonl(text):
        for line, row in read_jsonl(source):
            yield line, None, row
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
        yield None, f"[{n}]", row


def _is_jsonl(text: str) -> bool:
    """Whether the text is one JSON object per line (more than one line, each starting with ``{``)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines) > 1 and text.lstrip().startswith("{") and all(line.lstrip().startswith("{") for line in lines)


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
    for line, prefix, row in rows(source):
        at = located(source, line, prefix, "").rstrip(": ")
        if not isinstance(row, dict):
            problems.append(f"{at}: expected an object (one golden)")
            continue
        question = row.get("input")
        if not isinstance(question, str) or not question.strip():
            name = f"{prefix}.input" if prefix else "input"
            problems.append(located(source, line, name, "required: the question as text"))
            continue
        texts = text_list(row.get(which), f"{at}: {which}", problems)
        if not texts and row.get(other):
            flag = "retrieved" if other == "retrieval_context" else "reference"
            notes.add(f"golden with {other} only (not used: pass --contexts {flag} to use it)", at)
        references = text_list(row.get("expected_output"), f"{at}: expected_output", problems)
        meta = row.get("additional_metadata") or {}
        if not isinstance(meta, dict):
            problems.append(f"{at}: additional_metadata: must be an object")
            continue
        ood = meta.get("out_of_domain", False)
        if not isinstance(ood, bool):
            problems.append(f"{at}: additional_metadata.out_of_domain: must be true or false")
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
                tags=[golden_name] if isinstance(golden_name, str) and golden_name else [],
                metadata={"source": "deepeval", **{k: v for k, v in meta.items() if k not in ("id", "out_of_domain")}},
            )
        )
    if problems:
        raise InputError.listing(problems)
    return drafts
