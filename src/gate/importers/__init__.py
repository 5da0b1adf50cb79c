"""Importers: golden sets from other tools' formats (``rag-gate import FORMAT SOURCE --out golden.jsonl``).

One module per format — :mod:`~gate.importers.ragas`, :mod:`~gate.importers.deepeval`,
:mod:`~gate.importers.promptfoo`, :mod:`~gate.importers.beir` — each reading its source into drafts that
:func:`gate.importers.common.build` turns into validated golden records. :func:`sniff` tells which importer a file
that is not a golden set needs, for ``rag-gate validate``.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from gate.errors import InputError
from gate.importers.common import Notes, Options, Result, build, ood_rule

FORMATS = ("ragas", "deepeval", "promptfoo", "beir")


def import_golden(fmt: str, source: Path | str, options: Options | None = None) -> Result:
    """Read ``source`` in format ``fmt`` into golden records (not written; see :func:`write`).

    Raises:
        InputError: an unknown format, a malformed ``--ood-from``, an unreadable source, malformed rows (every one
            listed).
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown format '{fmt}' (known: {', '.join(FORMATS)})")
    options = options or Options()
    ood_rule(options)
    module = importlib.import_module(f"gate.importers.{fmt}")
    notes = Notes()
    drafts = module.read(Path(source), options, notes)
    return build(drafts, options, notes)


def write(result: Result, out: Path | str) -> None:
    """Write the records as ``golden.jsonl`` (atomically), then read it back as a golden set to prove it validates.

    Raises:
        InputError: the written file does not validate (a bug: every problem listed).
        WriteError: the file cannot be written.
    """
    from gate.golden import check_golden
    from gate.jsonl import write_jsonl

    write_jsonl(out, result.records)
    _, problems = check_golden(out)
    if problems:
        raise InputError.listing(problems)


_RAGAS_KEYS = {"user_input", "reference_contexts", "retrieved_contexts", "reference", "response",
               "reference_context_ids", "retrieved_context_ids", "synthesizer_name"}  # fmt: skip
_RAGAS_LEGACY = {"ground_truth", "ground_truths", "contexts", "answer"}
_DEEPEVAL_KEYS = {"input", "expected_output", "actual_output", "context", "retrieval_context"}


def _shape(row: Any) -> str | None:
    """The format one record looks like, by its keys."""
    if not isinstance(row, dict):
        return None
    keys = set(row)
    if "id" not in keys and ("user_input" in keys or ("question" in keys and keys & _RAGAS_LEGACY)):
        return "ragas"
    if "input" in keys and not keys & {"id", "question"}:
        return "deepeval"
    if "vars" in keys or "assert" in keys or "testCase" in keys:
        return "promptfoo"
    if "_id" in keys and "text" in keys:
        return "beir"
    return None


def sniff(path: Path | str) -> tuple[str | None, str]:
    """Which importer a file (or folder) that is not a rag-gate golden set needs: ``(format or None, what it is)``.

    Reads at most the first 1 MiB and the first record; never raises on unreadable input (that is validate's).
    """
    path = Path(path)
    if path.is_dir():
        if (path / "queries.jsonl").is_file() and (path / "qrels").is_dir():
            return "beir", "a BEIR folder"
        return None, ""
    try:
        with path.open("rb") as handle:
            head = handle.read(1 << 20).decode("utf-8-sig", errors="replace")
    except OSError:
        return None, ""
    stripped = head.lstrip()
    suffix = path.suffix.lower()
    if suffix in (".yml", ".yaml"):
        return _sniff_yaml(path)
    if suffix == ".csv" or (stripped and stripped[0] not in "[{"):
        header = stripped.splitlines()[0] if stripped else ""
        if "user_input" in header or ("question" in header and "ground_truth" in header):
            return "ragas", "a ragas CSV"
        if {"input", "expected_output"} <= {c.strip().strip('"') for c in header.split(",")}:
            return "deepeval", "a DeepEval CSV"
        if "\t" in header and "query-id" in header:
            return None, "a BEIR qrels file (import the folder that holds it)"
        return None, ""
    if stripped.startswith("["):
        try:
            data = json.loads(head) if len(head) < (1 << 20) else None
        except (ValueError, RecursionError):  # a document nested too deep is validate's to report
            data = None
        first = data[0] if isinstance(data, list) and data else None
        if first is None:  # too large or cut: read the first object's keys from the text
            shape = next((f for f, keys in (("deepeval", _DEEPEVAL_KEYS), ("ragas", _RAGAS_KEYS))
                          if any(f'"{k}"' in head[:4096] for k in keys - {"input", "context"})), None)  # fmt: skip
        else:
            shape = _shape(first)
        return shape, "a JSON array" + (f" of {shape} records" if shape else "")
    if stripped.startswith("{") and ('"evalId"' in head[:4096] or '"results": {' in head[:4096]):
        return "promptfoo", "a promptfoo results file"
    first_line = stripped.splitlines()[0] if stripped else ""
    try:
        row = json.loads(first_line)
    except (ValueError, RecursionError):  # a document nested too deep is validate's to report
        return None, ""
    shape = _shape(row)
    if shape == "beir":
        return "beir", "BEIR queries or corpus lines (import the BEIR folder that holds them)"
    return shape, f"{shape} records" if shape else ""


def _sniff_yaml(path: Path) -> tuple[str | None, str]:
    from gate.importers.promptfoo import load_yaml

    try:
        data, _ = load_yaml(path)
    except InputError:
        return None, ""
    if isinstance(data, dict) and isinstance(data.get("results"), dict) and "results" in data["results"]:
        return "promptfoo", "a promptfoo results file"
    if isinstance(data, dict) and "tests" in data and ("prompts" in data or "providers" in data):
        return "promptfoo", "a promptfoo config"
    if isinstance(data, list) and data and all(isinstance(t, dict) and _shape(t) == "promptfoo" for t in data):
        return "promptfoo", "a promptfoo tests file"
    return None, ""
