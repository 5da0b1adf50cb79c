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
from collections.abc import Callable, Iterable, Iterator, Mapping
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
    ood_from: str | None = None
    """``KEY`` or ``KEY=VALUE``: the source field that marks a case out-of-domain (default ``out_of_domain``)."""
    ood_refusals: bool = True
    """A case whose reference answers are all refusals (:func:`gate.metrics.refusal.is_refusal`) is out-of-domain."""
    ood_without_documents: bool = False
    """A case whose source names no expected document (no ids, no contexts) is out-of-domain."""


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
    ood_reason: str | None = None
    """Why the case is out-of-domain (e.g. ``out_of_domain: true``, ``is-refusal``), for the import's summary."""
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
    ood_reasons: dict[str, int] = field(default_factory=dict)
    """Out-of-domain cases by what marked them (a field, a refusal reference answer, no expected document)."""


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


def is_jsonl(text: str) -> bool:
    """Whether the text is one JSON object per line (more than one line, each starting with ``{``).

    Hugging Face ``datasets`` writes JSON Lines under a ``.json`` name (``Dataset.to_json``).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines) > 1 and text.lstrip().startswith("{") and all(line.lstrip().startswith("{") for line in lines)


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


def field_at(path: Path, line: int | None, prefix: str | None, name: str | None = None) -> str:
    """Where a field is, for messages: ``file:line: name`` (JSONL, CSV, YAML) or ``file: [i].name`` (a JSON array).

    ``prefix`` is the record's place in a JSON document (``[3]``, ``results.results[3].testCase``) or None.
    """
    where = ".".join(p for p in (prefix, name) if p) or None
    return located(path, line, where, "").rstrip(": ")


# --- out-of-domain ------------------------------------------------------------------------------------------------

DEFAULT_OOD_KEY = "out_of_domain"
"""The field read as the out-of-domain flag when ``--ood-from`` is not given."""
TRUE_WORDS = frozenset({"true", "yes", "y", "1"})
FALSE_WORDS = frozenset({"false", "no", "n", "0", ""})


def ood_rule(options: Options) -> tuple[str, str | None]:
    """``(key, value)`` of ``--ood-from KEY[=VALUE]`` (value None: the key holds a boolean flag).

    Raises:
        InputError: an empty key.
    """
    spec = options.ood_from if options.ood_from is not None else DEFAULT_OOD_KEY
    key, sep, value = spec.partition("=")
    if not key.strip():
        raise InputError(f"--ood-from {spec!r}: expected KEY or KEY=VALUE")
    return key.strip(), value.strip() if sep else None


def lookup(row: Mapping[str, Any], key: str, places: tuple[str, ...] = ("",)) -> tuple[str, Any] | None:
    """``(field name, value)`` of ``key`` in the first of ``places`` that has it; None when none has.

    A place is ``""`` (the row itself) or a nested object's name (``additional_metadata``); a dotted key
    (``meta.scope``) walks nested objects.
    """
    for place in places:
        node: Any = row
        for part in place.split(".") if place else ():
            node = node.get(part) if isinstance(node, Mapping) else None
        if not isinstance(node, Mapping):
            continue
        if key in node:
            return (f"{place}.{key}" if place else key), node[key]
        value: Any = node
        for part in key.split("."):
            if not isinstance(value, Mapping) or part not in value:
                break
            value = value[part]
        else:
            return (f"{place}.{key}" if place else key), value
    return None


def ood_flag(
    row: Mapping[str, Any], options: Options, places: tuple[str, ...], where: Callable[[str], str], problems: list[str]
) -> tuple[bool, str | None]:
    """Whether ``row`` is marked out-of-domain by ``--ood-from KEY[=VALUE]`` (default ``out_of_domain``).

    Without ``=VALUE`` the field holds a flag: true/false, 1/0, or the text true/false/yes/no/y/n/1/0 (any case;
    empty is false). With ``=VALUE`` the case is out-of-domain when the field's text equals VALUE (case-insensitive;
    booleans read as true/false). An absent field or null is in-domain.

    Args:
        row: the source record.
        options: the import's options (``ood_from``).
        places: where the key is looked up, in order (see :func:`lookup`).
        where: the message prefix of a field name (``file:line: field``).
        problems: a value that is not a flag is added here.

    Returns:
        ``(out of domain, reason)``; the reason (``additional_metadata.out_of_domain: true``) when marked.
    """
    key, expected = ood_rule(options)
    found = lookup(row, key, places)
    if found is None or found[1] is None:
        return False, None
    name, value = found
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float) and value in (0.0, 1.0):  # a flag column read as numbers (pandas)
        text = str(int(value))
    elif isinstance(value, (str, int, float)):
        text = str(value).strip()
    else:
        problems.append(f"{where(name)}: must be true or false (or text, with --ood-from {key}=VALUE)")
        return False, None
    if expected is not None:
        hit = text.casefold() == expected.casefold()
        return hit, f"{name} = {expected}" if hit else None
    word = text.casefold()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS, f"{name}: true" if word in TRUE_WORDS else None
    shown = text if len(text) <= 40 else text[:37] + "…"
    problems.append(f"{where(name)}: must be true or false, got '{shown}' (--ood-from {key}=VALUE marks a value)")
    return False, None


def refusal_references(references: list[str]) -> int:
    """How many of ``references`` are refusals, by the refusal metric's own rule and default phrases."""
    from gate.metrics.refusal import is_refusal

    return sum(is_refusal(r) for r in references)


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
    ood_reasons: dict[str, int] = {}
    for draft in drafts:
        _mark_out_of_domain(draft, options, notes)
        expected = list(dict.fromkeys(draft.doc_ids))
        if draft.contexts and corpus is None:
            notes.add("case with text contexts but no --corpus to match them to ids (no expected documents)",
                      f"{draft.at()}: {len(draft.contexts)} context(s)")  # fmt: skip
        elif corpus is not None:
            for n, context in enumerate(draft.contexts):
                kind, ids = corpus.resolve(context)
                matched[kind] += 1
                if kind in ("unmatched", "ambiguous"):
                    shown = short(context)
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
        if draft.out_of_domain:
            reason = draft.ood_reason or "marked by the source"
            ood_reasons[reason] = ood_reasons.get(reason, 0) + 1
    if problems:
        raise InputError.listing(problems)
    if not records:
        raise InputError(f"{drafts[0].where[0] if drafts else 'source'}: no case to import")
    return Result(records, notes, {k: v for k, v in matched.items() if v}, ood_reasons)


def _mark_out_of_domain(draft: Draft, options: Options, notes: Notes) -> None:
    """Apply the rules that need no source field: refusal reference answers, and (asked) no expected document."""
    if draft.out_of_domain:
        return
    has_documents = bool(draft.doc_ids or draft.contexts)
    if options.ood_without_documents and not has_documents:
        draft.out_of_domain, draft.ood_reason = True, "no expected document (--ood-without-documents)"
        return
    refusals = refusal_references(draft.references) if options.ood_refusals and draft.references else 0
    if refusals and refusals == len(draft.references) and not has_documents:
        draft.out_of_domain, draft.ood_reason = True, "a reference answer that is a refusal"
        shown = " ".join(draft.references[0].split())
        notes.add("reference answer is a refusal (imported as out-of-domain; --no-ood-refusals keeps it in-domain)",
                  f"{draft.at()}: '{shown if len(shown) <= 60 else shown[:57] + '…'}'")  # fmt: skip
    elif refusals:
        why = "the case names expected documents" if has_documents else "other reference answers are not"
        notes.add(f"reference answer is a refusal but {why} (kept in-domain)", draft.at())


def _same_case(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    keys = ("question", "expected_doc_ids", "reference_answers", "out_of_domain", "tags", "criteria")
    return all(a.get(k) == b.get(k) for k in keys)


def short(text: str) -> str:
    """Text for a note's example: whitespace runs made one space; over 60 characters, its first 57 and "…"."""
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "…"
