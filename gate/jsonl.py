"""JSON Lines I/O with schema validation; every error names ``file:line: field``.

NaN is written as JSON ``null`` (and read back as NaN where a number is expected) so that files stay valid JSON.
Reading is strict where Python's ``json`` is lenient: ``NaN``/``Infinity`` literals (not JSON, RFC 8259 §6) and
documents nested deeper than :data:`MAX_DEPTH` are bad input with a location, never a crash further on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import InputError, located
from gate.files import atomic_writer, write_text_atomic  # noqa: F401 - write_text_atomic is re-exported

if TYPE_CHECKING:  # imported when a record needs explaining: the fast path below decides valid ones
    import jsonschema

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in any JSON input (a case, a prediction, a manifest).

Real records nest a few levels; a limit far below Python's recursion limit keeps every later recursive step
(schema validation, serialisation) safe."""

_TYPE_NAMES = {
    "string": "a string",
    "array": "a list",
    "object": "an object",
    "boolean": "true or false",
    "integer": "an integer",
    "number": "a number",
    "null": "null",
}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    return {str: "str", list: "list", dict: "object", int: "int", float: "float", type(None): "null"}.get(
        type(value), type(value).__name__
    )


@cache
def shipped_schema(name: str) -> dict[str, Any]:
    """The JSON Schema shipped in ``gate/schemas`` (``config`` → ``config.schema.json``); do not modify it.

    Read without jsonschema (about 0.2 s to import and check a schema): its validity is a test
    (``tests/test_jsonl.py``), not a cost of every start.
    """
    text = resources.files("gate.schemas").joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def schema_validator(name: str) -> jsonschema.protocols.Validator:
    """The validator for a schema shipped in ``gate/schemas`` (``golden`` → ``golden.schema.json``)."""
    import jsonschema  # about 0.1 s to import: only to explain a record the compiled check does not accept

    schema = shipped_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@cache
def _compiled_check(name: str) -> Callable[[Any], Any] | None:
    """The shipped schema ``name`` compiled to Python by fastjsonschema (see :func:`_compiled`), or None."""
    return _compiled(json.dumps(shipped_schema(name)))


@cache
def _compiled(schema_text: str) -> Callable[[Any], Any] | None:
    """The schema (as JSON text) compiled to Python by fastjsonschema (about 20 times faster than jsonschema), or None.

    Our schemas use draft-07 keywords only, so they compile as draft-07. It is a fast path: a record it accepts
    is valid; anything else is decided, and explained, by jsonschema (:func:`schema_validator`).
    """
    import fastjsonschema

    try:
        return fastjsonschema.compile({**json.loads(schema_text), "$schema": "http://json-schema.org/draft-07/schema#"})
    except fastjsonschema.JsonSchemaDefinitionException:
        return None


def _describe(error: jsonschema.ValidationError) -> tuple[str | None, str]:
    """(field path, message) for the most useful part of a validation error."""
    path = ".".join(str(p) for p in error.absolute_path) or None
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return (f"{path}.{missing}" if path else missing), "required field is missing"
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        field = ".".join(filter(None, [path, extra[0] if extra else None]))
        return field, "unknown field (allowed: " + ", ".join(sorted(error.schema.get("properties", {}))) + ")"
    if error.validator == "type":
        expected = error.validator_value
        names = [expected] if isinstance(expected, str) else list(expected)
        wanted = " or ".join(_TYPE_NAMES.get(n, n) for n in names)
        return path, f"must be {wanted}, got {_json_type(error.instance)}"
    if error.validator == "minLength":
        return path, "must not be empty"
    if error.validator in ("minimum", "maximum") and not math.isfinite(error.instance):
        return path, f"must be a finite number, got {error.instance}"
    return path, error.message


def accepts(record: Any, schema: str | Mapping[str, Any]) -> bool:
    """Whether a compiled check accepts ``record`` (True: it is valid; False: ask jsonschema, which decides).

    The fast path of :func:`validate` on its own, for callers that report every problem themselves.

    Args:
        record: the value to check.
        schema: a shipped schema's name (``"config"``), or a JSON Schema (draft-07 keywords only) as a mapping.
    """
    check = _compiled_check(schema) if isinstance(schema, str) else _compiled(json.dumps(schema, sort_keys=True))
    if check is None:
        return False
    try:
        check(record)
    except Exception:  # noqa: BLE001 - any doubt goes to jsonschema, which decides and explains
        return False
    return True


def validate(record: Any, schema: str, path: Path | str, line: int | None) -> None:
    """Validate one record against a shipped schema.

    Raises:
        InputError: ``file:line: field: message`` for the first problem (the deepest, most specific one).

    """
    if not isinstance(record, dict):
        raise InputError(located(path, line, None, f"expected a JSON object, got {_json_type(record)}"))
    if accepts(record, schema):
        return
    import jsonschema

    error = jsonschema.exceptions.best_match(schema_validator(schema).iter_errors(record))
    if error is not None:
        field, message = _describe(error)
        raise InputError(located(path, line, field, message))


class _NonFinite(ValueError):
    """Raised by the decoder on ``NaN``, ``Infinity`` or ``-Infinity`` (Python extensions, not JSON)."""


def _reject_constant(name: str) -> Any:
    raise _NonFinite(name)


class _DuplicateKey(ValueError):
    """Raised by the unique-keys decoder on an object that names a key twice (JSON leaves it to the reader)."""


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)
_STRICT_UNIQUE = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_object)
_CONSTANT = object()


def _mark_constant(name: str) -> Any:
    return _CONSTANT


def _depth_exceeds(value: Any, limit: int) -> bool:
    """True when ``value`` nests arrays/objects more than ``limit`` levels deep (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _constant_field(text: str) -> str | None:
    """The dotted path of the first ``NaN``/``Infinity`` in ``text`` (None at top level or when not found)."""
    try:
        value = json.JSONDecoder(parse_constant=_mark_constant).decode(text)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        node, where = stack.pop()
        if node is _CONSTANT:
            return ".".join(where) or None
        if isinstance(node, dict):
            stack.extend((v, (*where, str(k))) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((v, (*where, str(i))) for i, v in reversed(list(enumerate(node))))
    return None


def parse_json(
    text: str, path: Path | str, line: int | None = None, *, max_depth: int = MAX_DEPTH, unique_keys: bool = False
) -> Any:
    """Parse one JSON document strictly: RFC 8259 numbers only, at most ``max_depth`` levels of nesting.

    As fast as ``json.loads`` on valid input: the depth is only walked when the text holds more brackets than
    ``max_depth``.

    Args:
        text: the document (one JSONL line, or a whole file).
        path: the file it came from, for messages.
        line: its 1-based line number for a JSONL line; None for a whole file (the parser's line is used).
        max_depth: deepest nesting accepted (:data:`MAX_DEPTH`).
        unique_keys: refuse an object that names a key twice (RFC 8259 §4: names SHOULD be unique; parsers
            differ on which value wins). For files people write (golden sets); about 2× slower.

    Returns:
        The parsed value.

    Raises:
        InputError: ``file:line: field: message`` for invalid JSON, a ``NaN``/``Infinity`` literal, too deep
            nesting or (``unique_keys``) a duplicate key.
    """
    try:
        value = (_STRICT_UNIQUE if unique_keys else _STRICT).decode(text)
    except _DuplicateKey as exc:
        raise InputError(located(path, line, str(exc), "duplicate key (JSON objects name each key once)")) from None
    except json.JSONDecodeError as exc:
        where = line if line is not None else exc.lineno
        raise InputError(located(path, where, None, f"invalid JSON: {exc.msg} (column {exc.colno})")) from None
    except _NonFinite as exc:
        message = f"{exc} is not a valid JSON number (only finite numbers are allowed)"
        raise InputError(located(path, line, _constant_field(text), message)) from None
    except RecursionError:  # deeper than the interpreter's recursion limit
        raise InputError(located(path, line, None, f"JSON nested deeper than {max_depth} levels")) from None
    if text.count("[") + text.count("{") > max_depth and _depth_exceeds(value, max_depth):
        raise InputError(located(path, line, None, f"JSON nested deeper than {max_depth} levels"))
    return value


def read_jsonl(
    path: Path | str, problems: list[str] | None = None, *, unique_keys: bool = False
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each non-blank line (1-based line numbers).

    Args:
        path: the JSONL file.
        problems: when given, a line that is not valid JSON is reported here and skipped instead of raising.
        unique_keys: also refuse an object that names a key twice (:func:`parse_json`).

    Raises:
        InputError: when the file is missing, not UTF-8, or (without ``problems``) a line is not valid JSON
            (including ``NaN``/``Infinity``, nesting deeper than :data:`MAX_DEPTH` and, with ``unique_keys``, a
            duplicate key).

    """
    for number, _, record in scan_jsonl(path, problems, unique_keys=unique_keys):
        yield number, record


def scan_jsonl(
    path: Path | str, problems: list[str] | None = None, *, unique_keys: bool = False
) -> Iterator[tuple[int, int, Any]]:
    """:func:`read_jsonl` with each line's byte offset: ``(line_number, offset, object)``.

    A row can be read again later with :func:`read_jsonl_rows` from its line and offset, so a large file is
    streamed once and need not be held in memory.

    Raises:
        InputError: as :func:`read_jsonl`.

    """
    path = Path(path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a JSONL file") from None
    offset = 0
    with handle:
        for number, raw in enumerate(handle, start=1):
            start, offset = offset, offset + len(raw)
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                message = located(path, number, None, f"not UTF-8 text ({exc.reason} at column {exc.start + 1})")
            else:
                if not text.strip():
                    continue
                try:
                    record = parse_json(text, path, number, unique_keys=unique_keys)
                except InputError as exc:
                    message = str(exc)
                else:
                    yield number, start, record
                    continue
            if problems is None:
                raise InputError(message)
            problems.append(message)


def read_jsonl_rows(path: Path | str, rows: Iterable[tuple[int, int]]) -> list[Any]:
    """Parse again the rows at ``(line_number, offset)`` of a file read before with :func:`scan_jsonl`.

    Raises:
        InputError: the file changed since it was read (a row is gone or no longer valid JSON).

    """
    path = Path(path)
    out = []
    try:
        with path.open("rb") as handle:
            for number, offset in rows:
                handle.seek(offset)
                text = handle.readline().decode("utf-8-sig" if number == 1 else "utf-8", errors="replace")
                out.append(parse_json(text, path, number))
    except (OSError, InputError) as exc:
        raise InputError(f"{path}: changed while rag-gate was reading it ({exc}); read it again") from None
    return out


def clean_nan(value: Any) -> Any:
    """Replace float NaN / ±inf by None, recursively (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_nan(v) for v in value]
    return value


def dumps(record: Any) -> str:
    """One compact JSON line, NaN written as null, non-ASCII kept as is.

    Most records hold no NaN: they are encoded as they are (json's C encoder refuses a non-finite float with
    ``ValueError``), and only the others are copied through :func:`clean_nan` first, which would double the cost
    of every row (scores.jsonl has one row per case × repeat × metric).
    """
    try:
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(clean_nan(record), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def write_jsonl(path: Path | str, records: Iterable[Any]) -> None:
    """Write records as JSON Lines, replacing ``path`` atomically (temp file, fsync, rename).

    Raises:
        EvaluationError: the file cannot be written (the old file, if any, is left intact).
    """
    with atomic_writer(path) as handle:
        for record in records:
            handle.write(dumps(record) + "\n")


class JsonlAppender:
    """Append records to a JSONL file, flushing each line so a killed run keeps what it computed."""

    def __init__(self, path: Path | str):
        self._handle = Path(path).open("a", encoding="utf-8")

    def write(self, record: Any) -> None:
        """Append one record and flush it to disk."""
        self._handle.write(dumps(record) + "\n")
        self._handle.flush()

    def close(self) -> None:
        """Close the file."""
        self._handle.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _dump(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=indent)


def _member(key: str, value: Any) -> str:
    if isinstance(value, list) and value:  # one item per line: json's C encoder (the indented one is pure Python)
        return f"  {_dump(key)}: [\n" + ",\n".join(f"    {_dump(item)}" for item in value) + "\n  ]"
    return f"  {_dump(key)}: " + _dump(value, 2).replace("\n", "\n  ")


def pretty_json(data: Any) -> str:
    """Readable JSON (keys as given, NaN and ±inf → null, non-ASCII kept) with a trailing newline.

    An object is written a member per line, its nested objects indented; a non-empty list inside it one item per
    line, each item compact. The same data gives the same bytes; the 9 MB report.json of a 5,000-case comparison
    (benchmarks/perfdata.py) takes 0.49 s instead of 1.13 s with ``indent=2`` throughout, whose encoder is pure
    Python.
    """
    data = clean_nan(data)
    if not isinstance(data, dict) or not data:
        return _dump(data, 2) + "\n"
    return "{\n" + ",\n".join(_member(key, value) for key, value in data.items()) + "\n}\n"


def write_json(path: Path | str, data: Any) -> None:
    """Write :func:`pretty_json` of ``data`` atomically (temp file, fsync, rename: see ``gate.files``).

    Raises:
        EvaluationError: the file cannot be written (the old file, if any, is left intact).
    """
    write_text_atomic(path, pretty_json(data))
