"""Import promptfoo test cases: a tests file, a ``promptfooconfig.yaml``, or a results file (``eval -o results.json``).

A test case's ``vars`` hold the question (``--question-var``, default the one of ``question``, ``query``, ``input``,
``prompt`` it has, or its only var; a list of values is one case per value, as promptfoo runs them); ``assert``
holds the expectations: ``is-refusal`` marks an out-of-domain case (``not-is-refusal`` an in-domain one), and so does
``metadata.out_of_domain: true`` (or the key of ``--ood-from KEY[=VALUE]``, looked up in ``metadata``, then ``vars``);
the values of ``equals``, ``contains``, ``icontains``, ``contains-any``, ``icontains-any``, ``similar``,
``factuality``, ``context-recall`` and ``levenshtein`` are reference answers when they are text with a word in it,
rendered from the test's vars as promptfoo renders them (``It is {{ city }}``: nunjucks there, a sandboxed jinja2
here, variable substitution only); a value that cannot be rendered (an unknown or non-text var, a syntax error, a
filter, tag or expression) is left out and counted in the notes. One that is a refusal ("I don't know") marks the
case out-of-domain when it has no context. The values of ``llm-rubric``, ``model-graded-closedqa`` and ``g-eval`` are
criteria (as written). ``vars.context`` (text, one or a list) is matched to corpus ids with ``--corpus``;
``metadata.expected_doc_ids`` gives ids directly.
A config's ``tests`` may name further files (``file://tests.yaml``, YAML or JSON, relative to the config); its
``defaultTest`` applies to every case. ``description`` and ``metadata`` are kept in the case's metadata.

A results file (``promptfoo eval -o results.json``) holds each test case as promptfoo ran it (``defaultTest`` merged,
``file://`` tests read, list vars expanded) under ``results.results[i].testCase``, once per prompt and provider: each
test (``testIdx``) is imported once; ``-o results.yaml`` and ``-o results.jsonl`` (one result per line) are read too,
``-o results.csv`` is refused (it holds no assertions). Messages name ``file:line: field`` (YAML, JSONL: the line of
the test case or result) or, in a results JSON, ``file: results.results[i].testCase.field`` (the index in that
array).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import yaml
from jinja2 import nodes
from jinja2.sandbox import SandboxedEnvironment

from gate.errors import InputError, located
from gate.importers.common import Draft, Notes, Options, field_at, id_list, jsonable, ood_flag, short, text_list
from gate.jsonl import parse_json, read_jsonl
from gate.yamlsafe import check_yaml_size

QUESTION_VARS = ("question", "query", "input", "prompt")
REFERENCE_TYPES = ("equals", "contains", "icontains", "similar", "factuality", "context-recall", "levenshtein")
ANY_REFERENCE_TYPES = ("contains-any", "icontains-any")
"""Assertions whose list of values are each an acceptable answer."""
MAX_RESULTS_BYTES = 1 << 30
"""Largest results file read (1 GiB: it holds every response)."""
CRITERIA_TYPES = ("llm-rubric", "model-graded-closedqa", "g-eval")
MAX_BYTES = 64 << 20
MAX_NODES = 5_000_000
"""Most YAML values (after alias expansion) a promptfoo file may hold: bounds an alias bomb."""
MAX_FILE_DEPTH = 4
MAX_DEPTH = 64
"""Deepest nesting of lists and mappings read (loading deeper YAML would recurse without bound)."""

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_text(path: Path, limit: int, expected: str) -> str:
    """The UTF-8 text of ``path`` (a BOM dropped), read up to ``limit`` bytes.

    Raises:
        InputError: the file is missing, a directory (naming the ``expected`` file), unreadable, larger than
            ``limit`` bytes or not UTF-8 (with the line of the first bad byte).
    """
    try:
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected {expected}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise InputError(f"{path}: larger than {limit} bytes")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(located(path, raw[: exc.start].count(b"\n") + 1, None, "not UTF-8 text")) from None


def load_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """The data of a YAML (or JSON) file and its node tree (for line numbers), with alias expansion bounded.

    Raises:
        InputError: the file is missing, too large, not UTF-8, not YAML, or expands beyond :data:`MAX_NODES`.
    """
    text = _read_text(path, MAX_BYTES, "a promptfoo YAML file")
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


Entry = tuple[Path, int | None, str | None, Any, dict[str, Any]]
"""(file, line, field prefix, test case, defaultTest) of one test case."""


def tests(source: Path, depth: int = 0) -> Iterator[Entry]:
    """``(file, line, field prefix, test case, defaultTest)`` of every test case of a promptfoo file.

    Follows ``file://`` names; a results file (``-o results.json``, ``.yaml`` or ``.jsonl``) gives the test cases
    promptfoo ran.

    Raises:
        InputError: the file is not a list of test cases nor a config with ``tests`` nor a results file; a named
            file is not YAML/JSON.
    """
    suffix = source.suffix.lower()
    if suffix == ".csv":
        raise InputError(f"{source}: a promptfoo results CSV holds no assertions (no refusal marks, no reference "
                         "answers): import results.json (promptfoo eval -o results.json) or the config")  # fmt: skip
    if suffix == ".jsonl":
        yield from _results_jsonl(source)
        return
    if suffix == ".json":
        data = _read_json(source)
        if _is_results(data):
            yield from _from_results(source, data["results"]["results"], None)
            return
    data, node = load_yaml(source)
    if _is_results(data):
        results_node = _child(_child(node, "results"), "results")
        yield from _from_results(source, data["results"]["results"], _item_lines(results_node))
        return
    default: dict[str, Any] = {}
    if isinstance(data, dict):
        if "tests" not in data:
            raise InputError(f"{source}: no `tests:` key: not a promptfoo config, tests file or results file")
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
                hint = "import the results.json that promptfoo eval -o writes: it holds them"
                message = f"{item}: only YAML or JSON test files are read ({hint})"
                raise InputError(located(source, line, "tests", message))
            for entry in tests(named, depth + 1):
                yield entry[0], entry[1], entry[2], entry[3], {**default, **entry[4]}
        else:
            yield source, line, None, item, default


def _is_results(data: Any) -> bool:
    """Whether parsed data is a promptfoo results file: ``{"results": {"results": [...]}, ...}``."""
    return isinstance(data, dict) and isinstance(data.get("results"), dict) and "results" in data["results"]


def _read_json(source: Path) -> Any:
    """A JSON file's data (up to :data:`MAX_RESULTS_BYTES`).

    Raises:
        InputError: the file cannot be read, is too large, not UTF-8 or not JSON.
    """
    return parse_json(_read_text(source, MAX_RESULTS_BYTES, "a promptfoo results file"), source)


def _results_jsonl(source: Path) -> list[Entry]:
    """The test cases of a results JSONL file (``-o results.jsonl``: one result per line)."""
    rows = list(read_jsonl(source))
    return _from_results(source, [row for _, row in rows], [line for line, _ in rows])


def _from_results(source: Path, listed: Any, lines: list[int] | list[int | None] | None) -> list[Entry]:
    """The test cases of promptfoo's results, one per ``testIdx`` in its order.

    ``lines``: each result's line (YAML, JSONL), else None (JSON: a result is named by its index,
    ``results.results[i]``).

    Raises:
        InputError: the results are not a list, or a result has no test case.
    """
    if not isinstance(listed, list):
        raise InputError(located(source, None, "results.results", "must be a list (promptfoo's results)"))
    seen: dict[Any, tuple[int, Entry]] = {}
    for n, result in enumerate(listed):
        line = lines[n] if lines is not None and n < len(lines) else None
        prefix = "testCase" if line is not None else f"results.results[{n}].testCase"
        if not isinstance(result, dict) or not isinstance(result.get("testCase"), dict):
            raise InputError(located(source, line, prefix, "required: the test case promptfoo ran"))
        index = result.get("testIdx")
        key = index if isinstance(index, int) and not isinstance(index, bool) else repr(result["testCase"])
        if key not in seen:
            order = index if isinstance(index, int) else n
            seen[key] = (order, (source, line, prefix, result["testCase"], {}))
    if not seen:
        raise InputError(f"{source}: a promptfoo results file without results")
    return [entry for _, entry in sorted(seen.values(), key=lambda pair: pair[0])]


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
    for path, line, prefix, test, default in tests(source):
        at = functools.partial(field_at, path, line, prefix)
        if not isinstance(test, dict):
            problems.append(f"{at()}: expected a test case (an object with vars and assert)")
            continue
        wrong = next(
            (f"{at(where + key)}: must be {kind}" for where, item in (("defaultTest.", default), ("", test))
             for key, kind in (("vars", "an object (vars from a file:// are not read)"), ("metadata", "an object"),
                               ("assert", "a list of assertions"))
             if item.get(key) is not None and not isinstance(item[key], list if key == "assert" else dict)),
            None,
        )  # fmt: skip
        if wrong:
            problems.append(wrong)
            continue
        variables = {**(default.get("vars") or {}), **(test.get("vars") or {})}
        name = options.question_var or next((v for v in QUESTION_VARS if v in variables), None)
        if name is None and len(variables) == 1:
            name = next(iter(variables))
        if name is None or name not in variables:
            have = ", ".join(map(str, variables)) or "none"
            problems.append(f"{at('vars')}: no question var (have: {have}); pass --question-var NAME")
            continue
        questions = variables[name] if isinstance(variables[name], list) else [variables[name]]
        if not questions or not all(isinstance(q, str) and q.strip() for q in questions):
            problems.append(f"{at('vars.' + name)}: must be text (or a list of texts)")
            continue
        refusal = None
        values: list[Any] = []  # reference answers as written (templates rendered per question below)
        criteria: list[str] = []
        for check in _assertions(test, default):
            kind, value = check.get("type"), check.get("value")
            if kind == "is-refusal":
                refusal = True
            elif kind == "not-is-refusal":
                refusal = False
            elif kind in REFERENCE_TYPES:
                values.append(value)
            elif kind in ANY_REFERENCE_TYPES and isinstance(value, list):
                values.extend(value)
            elif kind in CRITERIA_TYPES and isinstance(value, str):
                criteria.append(value)
        meta = {**(default.get("metadata") or {}), **(test.get("metadata") or {})}
        ids = id_list(meta.pop("expected_doc_ids", None), at("metadata.expected_doc_ids"), problems)
        contexts = text_list(variables.get("context"), at("vars.context"), problems)
        n_problems = len(problems)
        marked, reason = ood_flag({"metadata": meta, "vars": variables}, options, ("metadata", "vars"), at, problems)
        if len(problems) > n_problems:
            continue
        if refusal:
            marked, reason = True, "an is-refusal assertion"
        elif refusal is False and marked:
            problems.append(f"{at('assert')}: not-is-refusal on a case {reason} marks out-of-domain")
            continue
        if marked and (contexts or ids):
            notes.add("out-of-domain case with a context var (context not used: an out-of-domain case expects none)",
                      at())  # fmt: skip
            contexts, ids = [], []
        if isinstance(test.get("description"), str):
            meta["description"] = test["description"]
        for n, question in enumerate(questions):
            item = f"vars.{name}[{n}]" if len(questions) > 1 else None
            references, failed = _references(values, {**variables, name: question})
            for value, why in failed if n == 0 else ():  # the same for each question (each is text)
                notes.add("reference answer whose template cannot be rendered from the test's vars (left out)",
                          f"{at('assert')}: '{short(value)}': {why}")  # fmt: skip
            drafts.append(
                Draft(
                    where=(path, line, ".".join(p for p in (prefix, item) if p) or None),
                    question=question,
                    doc_ids=ids,
                    contexts=[] if ids else contexts,
                    references=references,
                    out_of_domain=marked,
                    ood_reason=reason,
                    criteria="\n".join(criteria) or None,
                    metadata=jsonable({"source": "promptfoo", **meta}),
                )
            )
    if problems:
        raise InputError.listing(problems)
    return drafts


_WORD = re.compile(r"\w")
_DELIMITERS = ("{{", "{%", "{#")
"""What starts a template in nunjucks (promptfoo) and jinja2 alike: text without them is read as written."""
_SUBSTITUTION = (nodes.Output, nodes.TemplateData, nodes.Name)
"""The only template nodes rendered: literal text and ``{{ var }}``."""
_KINDS = {"Filter": "a filter", "Getattr": "an attribute", "Getitem": "an item", "Call": "a call", "Const": "a literal"}
"""How a refused template node is named in a note (any other: "a tag or an expression")."""
_ENVIRONMENT = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)


def render(value: str, variables: Mapping[str, Any]) -> str:
    """An assertion value with its ``{{ var }}`` placeholders replaced by the test's vars, as promptfoo renders it.

    Only variable substitution: literal text and ``{{ name }}`` with ``name`` a var whose value is text or a number
    (a number as its decimal text). Rendered by a sandboxed jinja2 environment (jinja2 and promptfoo's nunjucks share
    this syntax), parsed first and refused unless every node is one of those.

    Raises:
        ValueError: a syntax error, a filter, tag, attribute, call or literal (anything but a var), or a var that is
            not in ``variables`` or is not text or a number; the message says which.
    """
    try:
        tree = _ENVIRONMENT.parse(value)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"template syntax error: {exc.message}") from None
    other = next((node for node in tree.find_all(nodes.Node) if not isinstance(node, _SUBSTITUTION)), None)
    if other is not None:
        found = _KINDS.get(type(other).__name__, "a tag or an expression")
        raise ValueError(f"only {{{{ var }}}} is rendered, not {found}")
    usable = {
        key: value if isinstance(value, str) else str(value)
        for key, value in variables.items()
        if isinstance(value, (str, int, float)) and not isinstance(value, bool)
    }
    for node in tree.find_all(nodes.Name):
        if node.name not in usable:
            why = "no such var" if node.name not in variables else "the var is not text or a number"
            raise ValueError(f"{{{{ {node.name} }}}}: {why}")
    try:
        return _ENVIRONMENT.from_string(tree).render(usable)
    except jinja2.TemplateError as exc:  # not expected once the nodes are checked; said, never raised as a crash
        raise ValueError(f"cannot render: {exc}") from None


def _references(values: Sequence[Any], variables: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, str]]]:
    """The reference answers of assertion ``values`` (see :func:`_reference`) and the templates left out, with why."""
    references: list[str] = []
    failed: list[tuple[str, str]] = []
    for value in values:
        try:
            references.extend(_reference(value, variables))
        except ValueError as exc:
            failed.append((str(value), str(exc)))
    return references, failed


def _reference(value: Any, variables: Mapping[str, Any]) -> list[str]:
    """A reference answer from an assertion's value: text with a word in it, its templates rendered from the vars.

    A number (``contains: 42``, as promptfoo allows) is its decimal text; a value with ``{{``, ``{%`` or ``{#`` is
    rendered by :func:`render`.

    Raises:
        ValueError: the value is a template that cannot be rendered (:func:`render`).
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return []
    if any(mark in value for mark in _DELIMITERS):
        value = render(value, variables)
    if value.startswith("file://") or not _WORD.search(value):
        return []
    return [value]
