"""Import a BEIR dataset folder: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/{split}.tsv``.

Each query judged in the split becomes a case: ``_id`` → id (integers as text), ``text`` → question, the documents
judged at least ``--min-relevance`` → expected documents (most relevant first; graded qrels are binarised there,
every judged score is kept in the case's ``metadata.relevance``). A query with no judgment reaching the threshold is
left out (it has no relevant document) and counted, and so is a query of ``queries.jsonl`` with no judgment in the
split, telling apart those judged in another split (``qrels/*.tsv``: they belong there) from those judged in none.

BEIR has no out-of-domain field. A query marked by ``--ood-from KEY[=VALUE]`` (default ``out_of_domain``; looked up
in the query, then in its ``metadata``) becomes an out-of-domain case when it has no relevant judgment in the split
and no judgment in another split; with ``--ood-without-documents`` every such query does (it has no relevant document
in the corpus: the system should refuse it). Qrels are tab-separated ``query-id corpus-id score`` with a header
line; TREC's four columns (``query-id iteration corpus-id score``) are read too. Judged documents missing from
``corpus.jsonl`` are counted (they can never be retrieved).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from gate.errors import InputError, located
from gate.importers.common import Draft, Notes, Options, as_id, field_at, ood_flag
from gate.jsonl import read_jsonl


def read_qrels(path: Path, problems: list[str]) -> dict[str, dict[str, int]]:
    """``{query id: {document id: score}}`` from a qrels TSV, in file order; bad lines are problems.

    Raises:
        InputError: the file is missing or not UTF-8.
    """
    qrels: dict[str, dict[str, int]] = {}
    try:
        handle = path.open(encoding="utf-8-sig")
    except FileNotFoundError:
        split_dir = path.parent
        have = sorted(p.stem for p in split_dir.glob("*.tsv")) if split_dir.is_dir() else []
        hint = f" (splits here: {', '.join(have)}; choose one with --split)" if have else ""
        raise InputError(f"{path}: file not found{hint}") from None
    with handle:
        try:
            for number, raw in enumerate(handle, start=1):
                cells = raw.rstrip("\r\n").split("\t") if "\t" in raw else raw.split()
                if not any(c.strip() for c in cells):
                    continue
                if len(cells) == 4:
                    cells = [cells[0], cells[2], cells[3]]
                if len(cells) != 3:
                    problems.append(located(path, number, None, f"expected 3 tab-separated columns, got {len(cells)}"))
                    continue
                query, doc, score_text = (c.strip() for c in cells)
                score: int | None
                try:
                    score = int(score_text)
                except ValueError:
                    try:
                        score = int(float(score_text)) if float(score_text).is_integer() else None
                    except ValueError:
                        score = None
                    if score is None:
                        if number == 1:
                            continue  # the header: query-id corpus-id score
                        problems.append(located(path, number, "score", f"must be an integer, got '{score_text}'"))
                        continue
                qrels.setdefault(query, {})[doc] = score
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from None
    return qrels


def read(source: Path, options: Options, notes: Notes) -> list[Draft]:
    """Drafts from a BEIR folder (see the module docstring).

    Raises:
        InputError: a missing file, or every malformed line listed.
    """
    if not source.is_dir():
        raise InputError(f"{source}: expected a BEIR folder (corpus.jsonl, queries.jsonl, qrels/{options.split}.tsv)")
    problems: list[str] = []
    qrels_path = source / "qrels" / f"{options.split}.tsv"
    qrels = read_qrels(qrels_path, problems)
    queries: dict[str, tuple[str, int, bool, str | None]] = {}
    queries_path = source / "queries.jsonl"
    for line, row in read_jsonl(queries_path, problems):
        key = "_id" if isinstance(row, dict) and "_id" in row else "id"
        query_id = as_id(row.get(key)) if isinstance(row, dict) else None
        text = row.get("text") if isinstance(row, dict) else None
        if query_id is None:
            problems.append(located(queries_path, line, "_id", "required: a non-empty string or an integer"))
        elif not isinstance(text, str) or not text.strip():
            problems.append(located(queries_path, line, "text", "required: the query as text"))
        elif query_id in queries:
            notes.add("duplicate query id (first kept)",
                      f"{located(queries_path, line, '_id', '').rstrip(': ')}: '{query_id}', first on line "
                      f"{queries[query_id][1]}")  # fmt: skip
        else:
            field = functools.partial(field_at, queries_path, line, None)
            marked, reason = ood_flag(row, options, ("", "metadata"), field, problems)
            queries[query_id] = (text, line, marked, reason)
    if problems:
        raise InputError.listing(problems)
    corpus_ids = _corpus_ids(source / "corpus.jsonl", notes)
    for query_id in qrels:
        if query_id not in queries:
            notes.add("judged query not in queries.jsonl (left out)", f"{qrels_path}: '{query_id}'")
    unjudged = [q for q in queries if q not in qrels]
    elsewhere = _judged_elsewhere(source / "qrels", options.split, set(unjudged)) if unjudged else {}
    drafts = []
    for query_id, (text, line, marked, reason) in queries.items():
        at = f"{located(queries_path, line, None, '').rstrip(': ')}: '{query_id}'"
        judged = qrels.get(query_id)
        if judged is None and query_id in elsewhere:
            splits = ", ".join(elsewhere[query_id])
            notes.add(f"query without a judgment in {options.split} but judged in another split (left out)",
                      f"{at} (in {splits})")  # fmt: skip
            continue
        scores = judged or {}
        relevant = sorted((d for d, s in scores.items() if s >= options.min_relevance), key=lambda d: -scores[d])
        if marked and relevant:
            problems.append(f"{at}: marked out-of-domain ({reason}) but judged relevant: {', '.join(relevant[:5])}")
            continue
        if not relevant and not marked and options.ood_without_documents:
            marked, reason = True, "no relevant judgment (--ood-without-documents)"
        if marked:
            metadata: dict[str, Any] = {"source": "beir", "split": options.split}
            if judged:
                metadata["relevance"] = judged
            drafts.append(Draft(where=(queries_path, line, None), question=text, case_id=query_id,
                                out_of_domain=True, ood_reason=reason, metadata=metadata))  # fmt: skip
            continue
        if judged is None:
            notes.add("query judged in no split (left out: no relevant document; --ood-without-documents or "
                      "--ood-from KEY imports it as out-of-domain)", at)  # fmt: skip
            continue
        if not relevant:
            notes.add(f"query with no judgment ≥ {options.min_relevance} (left out: no relevant document)", at)
            continue
        if corpus_ids is not None:
            for doc in relevant:
                if doc not in corpus_ids:
                    notes.add("relevant document not in corpus.jsonl (can never be retrieved)",
                              f"{qrels_path}: query '{query_id}', document '{doc}'")  # fmt: skip
        drafts.append(
            Draft(
                where=(queries_path, line, None),
                question=text,
                case_id=query_id,
                doc_ids=relevant,
                metadata={"source": "beir", "split": options.split, "relevance": judged},
            )
        )
    if problems:
        raise InputError.listing(problems)
    if not drafts:
        raise InputError(f"{qrels_path}: no query of queries.jsonl has a judgment ≥ {options.min_relevance}")
    return drafts


def _judged_elsewhere(folder: Path, split: str, wanted: set[str]) -> dict[str, list[str]]:
    """``{query id: [other splits judging it]}`` for the ``wanted`` queries, from the other ``qrels/*.tsv`` files."""
    found: dict[str, list[str]] = {}
    for path in sorted(folder.glob("*.tsv")):
        if path.stem == split:
            continue
        try:
            with path.open(encoding="utf-8-sig", errors="replace") as handle:
                for raw in handle:
                    query = raw.split("\t" if "\t" in raw else None, 1)[0].strip() if raw.strip() else ""
                    if query in wanted and path.stem not in found.setdefault(query, []):
                        found[query].append(path.stem)
        except OSError:
            continue
    return {q: splits for q, splits in found.items() if splits}


def _corpus_ids(path: Path, notes: Notes) -> set[str] | None:
    """The document ids of ``corpus.jsonl`` (``_id`` or ``id``); None, with a note, when there is no such file."""
    if not path.is_file():
        notes.add("no corpus.jsonl (judged document ids not checked)", str(path))
        return None
    ids = set()
    for _, row in read_jsonl(path):
        if isinstance(row, dict):
            doc_id = as_id(row.get("_id", row.get("id")))
            if doc_id is not None:
                ids.add(doc_id)
    return ids
