"""Load and validate a golden set (DESIGN §2): JSONL, one case per line, unique ids."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.errors import InputError, located
from gate.jsonl import read_jsonl, validate
from gate.models import FormRules, GoldenCase
from gate.sanitize import hidden_in_id, unshown, visible


def _empty(text: str) -> str | None:
    """Why required text is empty in effect (None when it is not): only whitespace, or nothing that shows."""
    if not text.strip():
        return "must not be empty (it holds only whitespace)"
    if not visible(text).strip():
        return f"must not be empty (it holds only characters that do not show: {unshown(text)})"
    return None


def _text_problem(record: dict[str, Any]) -> tuple[str, str] | None:
    """(field, message) of the first id with hidden characters or required text that is empty in effect."""
    for field in ("id", "question"):
        if why := _empty(str(record[field])):
            return field, why
    if why := hidden_in_id(str(record["id"])):
        return "id", why
    for i, doc_id in enumerate(record.get("expected_doc_ids") or ()):
        if why := hidden_in_id(doc_id):
            return f"expected_doc_ids.{i}", why
    for i, point in enumerate(record.get("required_points") or ()):
        if why := _empty(point):
            return f"required_points.{i}", why
    rules = (record.get("form") or {}).get("rules")
    if rules is not None and (why := _empty(rules)):
        return "form.rules", why
    return None


def check_golden(path: Path | str) -> tuple[list[GoldenCase], list[str]]:
    """Read a golden set and collect every problem (one per bad line) instead of stopping at the first.

    Returns:
        The valid cases in file order, and the problems as ``file:line: field: message`` strings.

    Raises:
        InputError: only when the file cannot be read at all (missing, not UTF-8).

    """
    path = Path(path)
    cases: list[GoldenCase] = []
    problems: list[str] = []
    first_line: dict[str, int] = {}
    for line, record in read_jsonl(path, problems, unique_keys=True):
        try:
            validate(record, "golden", path, line)
        except InputError as exc:
            problems.append(str(exc))
            continue
        if found := _text_problem(record):
            problems.append(located(path, line, *found))
            continue
        case_id = record["id"]
        if case_id in first_line:
            problems.append(
                located(path, line, "id", f"duplicate id '{case_id}' (first on line {first_line[case_id]})")
            )
            continue
        first_line[case_id] = line
        out_of_domain = record.get("out_of_domain", False)
        if out_of_domain and record.get("expected_doc_ids"):
            problems.append(located(path, line, "expected_doc_ids", "must be empty for an out-of-domain case"))
            continue
        cases.append(
            GoldenCase(
                id=case_id,
                question=record["question"],
                expected_doc_ids=tuple(record.get("expected_doc_ids", ())),
                reference_answers=tuple(record.get("reference_answers", ())),
                out_of_domain=out_of_domain,
                tags=tuple(record.get("tags", ())),
                criteria=record.get("criteria"),
                cluster=record.get("cluster"),
                required_points=tuple(record.get("required_points", ())),
                form=FormRules(**record["form"]) if "form" in record else None,
                must_pass=record.get("must_pass"),
                line=line,
            )
        )
    if not cases and not problems:
        problems.append(f"{path}: the golden set is empty")
    return cases, problems


def load_golden(path: Path | str) -> list[GoldenCase]:
    """Read a golden set, in file order.

    Raises:
        InputError: ``file:line: field: message`` for the first problem: malformed JSON, a missing or mistyped
            field, an unknown field, a duplicate id, an id or expected document id with characters that do not
            show (:func:`gate.sanitize.hidden_in_id`), a question (id, required point, form rule) of whitespace only, an
            out-of-domain case with expected documents, an empty file.

    """
    cases, problems = check_golden(path)
    if problems:
        raise InputError(problems[0])
    return cases


def file_sha256(path: Path | str) -> str:
    """Hex sha256 of a file's bytes (the golden set's version in manifests and cache keys)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def shard(cases: list[GoldenCase], index: int, count: int) -> list[GoldenCase]:
    """The ``index``-th of ``count`` shards (1-based index), by position: case j goes to shard ``j % count + 1``.

    Raises:
        InputError: when not ``1 ≤ index ≤ count``.

    """
    if count < 1 or not 1 <= index <= count:
        raise InputError(f"--shard {index}/{count}: expected i/n with 1 ≤ i ≤ n")
    return [case for j, case in enumerate(cases) if j % count == index - 1]


@dataclass(frozen=True)
class GoldenDiff:
    """How a head's golden set differs from the base's, by case id."""

    removed: tuple[GoldenCase, ...]
    """Base cases the head no longer has (base definitions)."""
    edited: tuple[tuple[GoldenCase, GoldenCase], ...]
    """(base definition, head definition) of cases whose id is kept but some field changed."""
    added: tuple[GoldenCase, ...]
    """Head cases the base does not have (head definitions)."""

    def __bool__(self) -> bool:
        """True when anything changed."""
        return bool(self.removed or self.edited or self.added)


def diff_golden(base: Sequence[GoldenCase], head: Sequence[GoldenCase]) -> GoldenDiff:
    """Compare two golden sets by id: removed, edited (same id, any field changed) and added cases, in file order.

    The line a case is on is not a field: moving a case changes nothing.
    """
    head_by_id = {case.id: case for case in head}
    base_ids = {case.id for case in base}
    edited = tuple(
        (case, head_by_id[case.id])
        for case in base
        if case.id in head_by_id and case.to_dict() != head_by_id[case.id].to_dict()
    )
    return GoldenDiff(
        removed=tuple(case for case in base if case.id not in head_by_id),
        edited=edited,
        added=tuple(case for case in head if case.id not in base_ids),
    )


def contract(base: Sequence[GoldenCase], diff: GoldenDiff) -> list[GoldenCase]:
    """The cases a PR is evaluated on (DESIGN §8): every base case with its base definition, then the added ones.

    A PR cannot shrink or redefine the base's golden set: removed cases are still evaluated, edited ones with the
    base's definition; added cases are evaluated too, with their head definition.
    """
    return [*base, *diff.added]


def ood_unchecked_warning(cases: Sequence[GoldenCase], metrics: Sequence[str]) -> list[str]:
    """A warning when out-of-domain cases exist but ``refusal`` is not in ``metrics``: none of them is checked.

    The out-of-domain failures (and ``fail_on_new_ood``) are read from the ``refusal`` scores
    (:func:`gate.compare.cases.ood_failures`); must-pass out-of-domain cases still block on a certain flip.
    """
    n = sum(case.out_of_domain for case in cases)
    if not n or "refusal" in metrics:
        return []
    return [
        f"{n} out-of-domain case(s) are not scored for refusals: `refusal` is not in metrics (add it to list the "
        "ones answered on head as out-of-domain failures and let fail_on_new_ood fail the gate; must-pass cases are "
        "checked either way)"
    ]
