"""What every importer shares: drafts of cases, matching text contexts to corpus ids, stable ids, the report.

An importer reads its format into :class:`Draft` rows (a question, the document ids the source names, the contexts it
gives as text, reference answers, out-of-domain). :func:`build` turns them into golden records: contexts are matched
to corpus ids (exact text, then normalised text, then — only when exactly one document holds it — containment),
ids are made from a hash of the question when the source has none, duplicates are reported, and every record is
checked against the golden schema. Nothing is guessed silently: whatever could not be carried over is counted in
:class:`Notes` and printed by the command.
"""

from __future__ import annotations

import csv
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gate.errors import InputError, located
from gate.jsonl import read_jsonl, validate

MIN_CONTAINED_WORDS = 5
"""A context shorter than this many words is never matched by containment (too likely to occur by chance)."""


@dataclass
class Options:
    """The options of ``rag-gate import`` that importers read."""

    corpus: Path | None = None
    """A corpus JSONL (``id`` or ``_id``, ``text``, optional ``title``) to match text contexts to document ids."""
    min_relevance: int = 1
    """BEIR: a judgment with a score at least this is relevant (graded qrels are binarised)."""
    split: str = "test"
    """BEIR: the qrels split (``qrels/{split}.tsv``)."""
    contexts: str = "reference"
    """Which contexts are the expected documents: ``reference`` (ground truth) or ``retrieved`` (a system's)."""
    question_var: str | None = None
    """promptfoo: the var that holds the question (default: the one of question/query/input/prompt present)."""


@dataclass
class Draft:
    """One case as read from a source, before its contexts are matched and its id is made."""

    where: tuple[Path, int | None, str | None]
    """(file, line or None, field prefix such as ``[3]``) for messages."""
    question: str
    """The question, exactly as the source writes it."""
    case_id: str | None = None
    """The source's own id (BEIR); None: made from a hash of the question."""
    doc_ids: list[str] = field(default_factory=list)
    """Expected document ids the source names."""
    contexts: list[str] = field(default_factory=list)
    """Expected contexts the source gives as text only, matched to corpus ids by :func:`build`."""
    references: list[str] = field(default_factory=list)
    """Reference answers (the golden case's ``reference_answers``)."""
    out_of_domain: bool = False
    """True when the source marks the question as one the system should refuse."""
    tags: list[str] = field(default_factory=list)
    """Tags carried over from the source."""
    criteria: str | None = None
    """Free-text grading criteria for judges, when the source has them."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Source fields kept for reference (e.g. BEIR's graded relevance)."""

    def at(self, name: str | None = None) -> str:
        """``file:line: field`` prefix of a message about this case (``name`` under its field prefix)."""
        path, line, prefix = self.where
        where = ".".join(p for p in (prefix, name) if p) or None
        return located(path, line, where, "").rstrip(": ")


class Notes:
    """What an import could not carry over as it was, by kind: a count and the first examples of each."""

    def __init__(self) -> None:
        self.kinds: dict[str, list[str]] = {}

    def add(self, kind: str, example: str) -> None:
        """Count one occurrence of ``kind`` (e.g. ``unmatched context``) with an example (``file:line: ...``)."""
        self.kinds.setdefault(kind, []).append(example)

    def count(self, kind: str) -> int:
        """How many times ``kind`` occurred."""
        return len(self.kinds.get(kind, ()))

    def lines(self, examples: int = 3) -> list[str]:
        """One line per kind with its count, then up to ``examples`` indented examples of it."""
        out = []
        for kind, items in self.kinds.items():
            out.append(f"{len(items)} × {kind}")
            out.extend(f"  {item}" for item in items[:examples])
            if len(items) > examples:
                out.append(f"  … and {len(items) - examples} more")
        return out


@dataclass
class Result:
    """An import's outcome: golden records in source order, the notes, and how contexts were matched."""

    records: list[dict[str, Any]]
    """The golden cases, as written to ``golden.jsonl``."""
    notes: Notes
    """What the import reported: duplicates, unmatched contexts, skipped rows."""
    matched: dict[str, int] = field(default_factory=dict)
    """Contexts by how they were resolved: exact, normalised, contained, unmatched, ambiguous."""


# --- text ---------------------------------------------------------------------------------------------------------

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalise(text: str) -> str:
    """Text compared loosely: NFKC, case-folded, every run of punctuation and whitespace made one space."""
    return _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def question_id(question: str) -> str:
    """A stable id for a case whose source has none: ``q-`` and 16 hex digits of the sha256 of its question.

    The question is hashed as written, with surrounding whitespace and runs of whitespace made one space, so the same
    source imports to the same ids every time and an edited question gets a new id.
    """
    text = " ".join(question.split())
    return "q-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def as_id(value: Any) -> str | None:
    """A document or case id as text: strings as they are, integers (BEIR corpora have some) in decimal; else None."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def jsonable(value: Any) -> Any:
    """A value as JSON data: mappings with text keys, lists, text, numbers, booleans, null; anything else as text.

    YAML reads dates and timestamps as Python objects; golden metadata stays plain JSON.
    """
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    return str(value)


# --- corpus -------------------------------------------------------------------------------------------------------


class Corpus:
    """A corpus's documents, indexed to resolve a text context to the id of the document it came from."""

    def __init__(self, docs: Iterable[tuple[str, str, str]]) -> None:
        self.exact: dict[str, list[str]] = {}
        self.loose: dict[str, list[str]] = {}
        self.docs: list[tuple[str, str]] = []  # (id, normalised text) for containment
        for doc_id, title, text in docs:
            self.exact.setdefault(text, []).append(doc_id)
            loose = normalise(text)
            self.loose.setdefault(loose, []).append(doc_id)
            if title:
                self.exact.setdefault(f"{title}\n{text}", []).append(doc_id)
                self.loose.setdefault(normalise(f"{title} {text}"), []).append(doc_id)
            self.docs.append((doc_id, loose))
        self.ids = {doc_id for doc_id, _ in self.docs}

    @classmethod
    def load(cls, path: Path) -> Corpus:
        """Read a corpus JSONL: one document per line with ``id`` (or BEIR's ``_id``), ``text`` and optional ``title``.

        Raises:
            InputError: every bad line listed (``file:line: field: message``): not JSON, no id, no text.
        """
        problems: list[str] = []
        docs = []
        seen: dict[str, int] = {}
        for line, row in read_jsonl(path, problems):
            if not isinstance(row, dict):
                problems.append(located(path, line, None, "expected a JSON object"))
                continue
            key = "id" if "id" in row else "_id"
            doc_id = as_id(row.get(key))
            text = row.get("text")
            if doc_id is None:
                problems.append(located(path, line, key, "required: a non-empty string or an integer"))
            elif not isinstance(text, str):
                problems.append(located(path, line, "text", "required: a string"))
            elif doc_id in seen:
                problems.append(located(path, line, key, f"duplicate id '{doc_id}' (first on line {seen[doc_id]})"))
            else:
                seen[doc_id] = line
                title = row.get("title")
                docs.append((doc_id, title if isinstance(title, str) else "", text))
        if problems:
            raise InputError.listing(problems)
        if not docs:
            raise InputError(f"{path}: the corpus is empty")
        return cls(docs)

    def resolve(self, context: str) -> tuple[str, list[str]]:
        """How a context matches: ``(kind, ids)`` with kind exact, normalised, contained, ambiguous or unmatched.

        Exact text first, then normalised text (:func:`normalise`), then containment: the normalised context (at
        least :data:`MIN_CONTAINED_WORDS` words) inside exactly one document's normalised text (a chunk of it).
        Several documents matching at the first step that matches is ``ambiguous``: no id is chosen.
        """
        for kind, ids in (("exact", self.exact.get(context)), ("normalised", self.loose.get(normalise(context)))):
            if ids:
                return (kind, ids) if len(set(ids)) == 1 else ("ambiguous", sorted(set(ids)))
        loose = normalise(context)
        if len(loose.split()) < MIN_CONTAINED_WORDS:
            return "unmatched", []
        needle = f" {loose} "
        found = [doc_id for doc_id, text in self.docs if needle in f" {text} "]
        if len(found) == 1:
            return "contained", found
        return ("ambiguous", sorted(found)) if found else ("unmatched", [])


# --- reading helpers ------------------------------------------------------------------------------------------------


def read_csv(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line, row)`` of a CSV file with a header (the line where each row starts).

    Raises:
        InputError: the file is missing, not UTF-8, or not CSV.
    """
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 26))  # contexts can be long paragraphs
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle, strict=True)  # strict: an unterminated quote is an error, not one cell
            start = 2
            for row in reader:
                if None in row:
                    raise InputError(located(path, start, None, "more cells than the header has columns"))
                yield start, row
                start = reader.line_num + 1
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except csv.Error as exc:
        raise InputError(located(path, start, None, f"invalid CSV: {exc}")) from None


def text_list(value: Any, where: str, problems: list[str]) -> list[str]:
    """A list of strings from a source field: None → [], a string → [it], a list of strings → it.

    A wrong type is a problem (``where: must be a string or a list of strings``) and gives [].
    """
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v.strip()]
    problems.append(f"{where}: must be a string or a list of strings")
    return []


def id_list(value: Any, where: str, problems: list[str]) -> list[str]:
    """A list of document ids from a source field (strings or integers); a wrong type is a problem."""
    if value is None:
        return []
    values = value if isinstance(value, list) else [value]
    ids = [as_id(v) for v in values]
    if any(i is None for i in ids):
        problems.append(f"{where}: must be a list of ids (strings or integers)")
        return []
    return [i for i in ids if i is not None]


# --- building the golden set ----------------------------------------------------------------------------------------


def build(drafts: list[Draft], options: Options, notes: Notes, *, corpus: Corpus | None = None) -> Result:
    """Turn drafts into golden records (see the module docstring); ``corpus`` overrides ``options.corpus``.

    Raises:
        InputError: a record that would not validate (every one listed), or no case at all.
    """
    if corpus is None and options.corpus is not None:
        corpus = Corpus.load(options.corpus)
    matched = dict.fromkeys(("exact", "normalised", "contained", "ambiguous", "unmatched"), 0)
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    by_id: dict[str, tuple[dict[str, Any], Draft]] = {}
    by_question: dict[str, Draft] = {}
    for draft in drafts:
        expected = list(dict.fromkeys(draft.doc_ids))
        if draft.contexts and corpus is None:
            notes.add("case with text contexts but no --corpus to match them to ids (no expected documents)",
                      f"{draft.at()}: {len(draft.contexts)} context(s)")  # fmt: skip
        elif corpus is not None:
            for n, context in enumerate(draft.contexts):
                kind, ids = corpus.resolve(context)
                matched[kind] += 1
                if kind in ("unmatched", "ambiguous"):
                    shown = " ".join(context.split())
                    shown = shown if len(shown) <= 60 else shown[:57] + "…"
                    also = f" (in {', '.join(ids[:5])})" if ids else ""
                    notes.add(f"{kind} context (left out)", f"{draft.at(f'context {n + 1}')}: '{shown}'{also}")
                else:
                    expected.extend(i for i in ids if i not in expected)
            if draft.contexts and not expected:
                notes.add("in-domain case left without expected documents", draft.at())
        if corpus is not None and draft.doc_ids:
            for doc_id in draft.doc_ids:
                if doc_id not in corpus.ids:
                    notes.add("expected id not in the corpus (can never be retrieved)", f"{draft.at()}: '{doc_id}'")
        if draft.out_of_domain and expected:
            problems.append(f"{draft.at()}: an out-of-domain case cannot have expected documents ({len(expected)})")
            continue
        record: dict[str, Any] = {
            "id": draft.case_id or question_id(draft.question),
            "question": draft.question,
            "expected_doc_ids": expected,
            "reference_answers": list(dict.fromkeys(draft.references)),
            "out_of_domain": draft.out_of_domain,
        }
        if draft.tags:
            record["tags"] = list(dict.fromkeys(draft.tags))
        if draft.criteria:
            record["criteria"] = draft.criteria
        if draft.metadata:
            record["metadata"] = draft.metadata
        loose = normalise(draft.question)
        if loose in by_question and draft.case_id is not None:
            notes.add("duplicate question under another id (both kept)",
                      f"{draft.at()}: same question as {by_question[loose].at()}")  # fmt: skip
        by_question.setdefault(loose, draft)
        first = by_id.get(record["id"])
        if first is not None:
            if _same_case(first[0], record):
                notes.add("duplicate case (dropped)", f"{draft.at()}: same as {first[1].at()}")
                continue
            base, n = record["id"], 2
            while f"{base}-{n}" in by_id:
                n += 1
            record["id"] = f"{base}-{n}"
            what = "duplicate id" if draft.case_id else "duplicate question"
            notes.add(f"{what} with other expectations (kept as <id>-N)",
                      f"{draft.at()}: '{record['id']}', first at {first[1].at()}")  # fmt: skip
        by_id[record["id"]] = (record, draft)
        try:
            validate(record, "golden", draft.where[0], draft.where[1])
        except InputError as exc:
            problems.append(f"{exc} (in {draft.at()})")
            continue
        records.append(record)
    if problems:
        raise InputError.listing(problems)
    if not records:
        raise InputError(f"{drafts[0].where[0] if drafts else 'source'}: no case to import")
    return Result(records, notes, {k: v for k, v in matched.items() if v})


def _same_case(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    keys = ("question", "expected_doc_ids", "reference_answers", "out_of_domain", "tags", "criteria")
    return all(a.get(k) == b.get(k) for k in keys)
