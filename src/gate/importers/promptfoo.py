"""Import promptfoo test cases: a tests file (a YAML or JSON list of test cases) or a ``promptfooconfig.yaml``.

A test case's ``vars`` hold the question (``--question-var``, default the one of ``question``, ``query``, ``input``,
``prompt`` it has, or its only var; a list of values is one case per value, as promptfoo runs them); ``assert``
holds the expectations: ``is-refusal`` marks an out-of-domain case (``not-is-refusal`` an in-domain one); the values
of ``equals``, ``similar``, ``factuality``, ``context-recall`` and ``levenshtein`` are reference answers; those of
``llm-rubric``, ``model-graded-closedqa`` and ``g-eval`` are criteria. ``vars.context`` (text, one or a list) is
matched to corpus ids with ``--corpus``; ``metadata.expected_doc_ids`` gives ids directly. A config's ``tests`` may
name further files (``file://tests.yaml``, YAML or JSON, relative to the config); its ``defaultTest`` applies to
every case. ``description`` and ``metadata`` are kept in the case's metadata.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from gate.errors import InputError, located
from gate.importers.common import Draft, Notes, Options, id_list, jsonable, text_list
from gate.yamlsafe import check_yaml_size

QUESTION_VARS = ("question", "query", "input", "prompt")
REFERENCE_TYPES = ("equals", "similar", "factuality", "context-recall", "levenshtein")
CRITERIA_TYPES = ("llm-rubric", "model-graded-closedqa", "g-eval")
MAX_BYTES = 64 << 20
MAX_NODES = 5_000_000
"""Most YAML values (after alias expansion) a promptfoo file may hold: bounds an alias bomb."""
MAX_FILE_DEPTH = 4
MAX_DEPTH = 64
"""Deepest nesting of lists and mappings read (loading deeper YAML would recurse without bound)."""

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """The data of a YAML (or JSON) file and its node tree (for line numbers), with alias expansion bounded.

    Raises:
        InputError: the file is missing, too large, not UTF-8, not YAML, or expands beyond :data:`MAX_NODES`.
    """
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a promptfoo YAML file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(located(path, raw[: exc.start].count(b"\n") + 1, None, "not UTF-8 text")) from None
    try:
        check_yaml_size(text, path, max_nodes=MAX_NODES, max_depth=MAX_DEPTH)
        return yaml.load(text, Loader=_LOADER), yaml.compose(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise InputError(located(path, mark.line + 1 if mark else None, None, f"invalid YAML: {problem}")) from None


def _item_lines(node: yaml.Node | None) -> list[int | None]:
    if isinstance(node, yaml.SequenceNode):
        return [item.start_mark.line + 1 for item in node.value]
    return []


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def tests(source: Path, depth: int = 0) -> Iterator[tuple[Path, int | None, Any, dict[str, Any]]]:
    """``(file, line, test case, defaultTest)`` of every test case of a promptfoo file, following ``file://`` names.

    Raises:
        InputError: the file is not a list of test cases nor a config with ``tests``; a named file is not YAML/JSON.
    """
    data, node = load_yaml(source)
    default: dict[str, Any] = {}
    if isinstance(data, dict):
        if "tests" not in data:
            raise InputError(f"{source}: no `tests:` key: not a promptfoo config or tests file")
        default = data.get("defaultTest") or {}
        if not isinstance(default, dict):
            raise InputError(located(source, None, "defaultTest", "must be an object (a file:// default is not read)"))
        node = _child(node, "tests")
        data = data["tests"]
    items = data if isinstance(data, list) else [data]
    lines = _item_lines(node) if isinstance(data, list) else [None]
    for item, line in zip(items, lines + [None] * (len(items) - len(lines)), strict=True):
        if isinstance(item, str) and item.startswith("file://"):
            if depth >= MAX_FILE_DEPTH:
                raise InputError(located(source, line, "tests", f"file:// nested deeper than {MAX_FILE_DEPTH}"))
            if "\x00" in item:
                raise InputError(located(source, line, "tests", "a file:// name holds a NUL byte (\\x00)"))
            named = (source.parent / item.removeprefix("file://")).resolve()
            if named.suffix.lower() not in (".yaml", ".yml", ".json"):
                raise InputError(located(source, line, "tests", f"{item}: only YAML or JSON test files are read"))
            for entry in tests(named, depth + 1):
                yield entry[0], entry[1], entry[2], {**default, **entry[3]}
        else:
            yield source, line, item, default


def _assertions(test: Mapping[str, Any], default: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    stack = [a for a in [*(default.get("assert") or []), *(test.get("assert") or [])] if isinstance(a, dict)]
    while stack:
        item = stack.pop(0)
        if item.get("type") == "assert-set":
            stack.extend(a for a in item.get("assert") or [] if isinstance(a, dict))
        else:
            yield item


def read(source: Path, options: Options, notes: Notes) -> list[Draft]:
    """Drafts from promptfoo test cases (see the module docstring).

    Raises:
        InputError: every malformed test listed (no question var, vars of the wrong type).
    """
    drafts: list[Draft] = []
    problems: list[str] = []
    for path, line, test, default in tests(source):
        at = located(path, line, None, "").rstrip(": ")
        if not isinstance(test, dict):
            problems.append(f"{at}: expected a test case (an object with vars and assert)")
            continue
        wrong = next(
            (f"{where}{key}: must be {kind}" for where, item in (("defaultTest.", default), ("", test))
             for key, kind in (("vars", "an object (vars from a file:// are not read)"), ("metadata", "an object"),
                               ("assert", "a list of assertions"))
             if item.get(key) is not None and not isinstance(item[key], list if key == "assert" else dict)),
            None,
        )  # fmt: skip
        if wrong:
            problems.append(f"{at}: {wrong}")
            continue
        variables = {**(default.get("vars") or {}), **(test.get("vars") or {})}
        name = options.question_var or next((v for v in QUESTION_VARS if v in variables), None)
        if name is None and len(variables) == 1:
            name = next(iter(variables))
        if name is None or name not in variables:
            have = ", ".join(map(str, variables)) or "none"
            problems.append(f"{at}: vars: no question var (have: {have}); pass --question-var NAME")
            continue
        questions = variables[name] if isinstance(variables[name], list) else [variables[name]]
        if not questions or not all(isinstance(q, str) and q.strip() for q in questions):
            problems.append(f"{at}: vars.{name}: must be text (or a list of texts)")
            continue
        refusal = None
        references: list[str] = []
        criteria: list[str] = []
        for check in _assertions(test, default):
            kind, value = check.get("type"), check.get("value")
            if kind == "is-refusal":
                refusal = True
            elif kind == "not-is-refusal":
                refusal = False
            elif kind in REFERENCE_TYPES and isinstance(value, str):
                references.append(value)
            elif kind in CRITERIA_TYPES and isinstance(value, str):
                criteria.append(value)
        meta = {**(default.get("metadata") or {}), **(test.get("metadata") or {})}
        ids = id_list(meta.pop("expected_doc_ids", None), f"{at}: metadata.expected_doc_ids", problems)
        contexts = text_list(variables.get("context"), f"{at}: vars.context", problems)
        if refusal and (contexts or ids):
            notes.add("is-refusal case with a context var (context not used: an out-of-domain case expects none)", at)
            contexts, ids = [], []
        if isinstance(test.get("description"), str):
            meta["description"] = test["description"]
        for n, question in enumerate(questions):
            drafts.append(
                Draft(
                    where=(path, line, f"vars.{name}[{n}]" if len(questions) > 1 else None),
                    question=question,
                    doc_ids=ids,
                    contexts=[] if ids else contexts,
                    references=references,
                    out_of_domain=bool(refusal),
                    criteria="\n".join(criteria) or None,
                    metadata=jsonable({"source": "promptfoo", **meta}),
                )
            )
    if problems:
        raise InputError.listing(problems)
    return drafts
