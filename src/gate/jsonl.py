"""JSON Lines I/O with schema validation; every error names ``file:line: field``.

NaN is written as JSON ``null`` (and read back as NaN where a number is expected) so that files stay valid JSON.
Reading is strict where Python's ``json`` is lenient: ``NaN``/``Infinity`` literals (not JSON, RFC 8259 §6), numbers
that overflow a double (``1e999``), integers beyond :data:`MAX_INTEGER` and documents nested deeper than
:data:`MAX_DEPTH` are bad input with a location, never a crash or a silent ``inf`` further on.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, fields, is_dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import msgspec.inspect

from gate.errors import InputError, located
from gate.files import (
    atomic_writer,
    open_append,
    write_all,
    write_text_atomic,  # noqa: F401 - re-exported
)

if TYPE_CHECKING:  # imported when a record needs explaining: the fast path below decides valid ones
    import jsonschema

RowT = TypeVar("RowT")

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in any JSON input (a case, a prediction, a manifest).

Real records nest a few levels; a limit far below Python's recursion limit keeps every later recursive step
(schema validation, serialisation) safe."""

MAX_INTEGER = 2**53 - 1
"""The largest magnitude of an integer accepted in any JSON input (9,007,199,254,740,991).

RFC 8259 §6: integers in ``[-(2**53)+1, 2**53-1]`` are interoperable, because an IEEE 754 double holds each of them
exactly; beyond it readers disagree (JavaScript rounds, others overflow 64 bits). A larger id belongs in a string."""

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

    Read without jsonschema (slow to import and to check a schema; ``benchmarks/perf.py``'s startup rows measure
    every start): its validity is a test (``tests/io/test_jsonl.py``), not a cost of every start.
    """
    text = resources.files("gate.schemas").joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@cache
def schema_validator(name: str) -> jsonschema.protocols.Validator:
    """The validator for a schema shipped in ``gate/schemas`` (``golden`` → ``golden.schema.json``)."""
    import jsonschema  # slow to import (benchmarks/perf.py, startup): only to explain what the compiled check refuses

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
    if error.validator in ("minimum", "maximum"):
        value = error.instance
        if isinstance(value, int) and abs(value) > sys.float_info.max:  # its hundreds of digits would fill the line
            bound = "at most" if error.validator == "maximum" else "at least"
            limit = error.validator_value
            shown = str(int(limit)) if float(limit).is_integer() and abs(limit) < 1e15 else f"{limit:g}"
            return path, f"must be {bound} {shown}, got an integer of {len(str(abs(value)))} digits"
        if isinstance(value, float) and not math.isfinite(value):
            return path, f"must be a finite number, got {value}"
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


class _BadNumber(ValueError):
    """Raised by the strict decoder on a number rag-gate does not read; its text is the message."""


def _reject_constant(name: str) -> Any:
    raise _BadNumber(f"{name} is not a valid JSON number (only finite numbers are allowed)")


def integer_message(text: str) -> str:
    """Why the integer written ``text`` is refused (it is beyond :data:`MAX_INTEGER`)."""
    digits = len(text.lstrip("-"))
    written = text if digits <= 30 else f"an integer of {digits} digits"
    return (
        f"{written} is beyond ±{MAX_INTEGER}, the integers every JSON reader holds exactly (RFC 8259 §6); "
        "an identifier that large belongs in a string"
    )


def _out_of_range(text: str) -> bool:
    """Whether the JSON integer ``text`` is beyond :data:`MAX_INTEGER` (its digits are counted first: no huge int)."""
    return len(text) - text.startswith("-") > 16 or abs(int(text)) > MAX_INTEGER


def _bounded_int(text: str) -> int:
    if _out_of_range(text):
        raise _BadNumber(integer_message(text))
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _BadNumber(f"{text} is not a finite number (it overflows a 64-bit float: at most ±1.8e308)")
    return value


def number_problems(data: Any, keys: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """``(key path, message)`` of every number JSON input may not hold, in a decoded value (a loaded YAML config).

    A NaN or infinite float ("must be a finite number"), or an integer beyond :data:`MAX_INTEGER`. Booleans are
    not numbers here.
    """
    if isinstance(data, float) and not math.isfinite(data):
        yield keys, "must be a finite number"
    elif isinstance(data, int) and not isinstance(data, bool) and not -MAX_INTEGER <= data <= MAX_INTEGER:
        yield keys, integer_message(str(data))
    elif isinstance(data, Mapping):
        for k, v in data.items():
            yield from number_problems(v, (*keys, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from number_problems(v, (*keys, i))


def integer_out_of_range(value: Any) -> bool:
    """Whether a decoded JSON value holds an integer beyond :data:`MAX_INTEGER` anywhere (iterative: no recursion).

    The check after msgspec's decoder, which takes integers of any size (it refuses floats that overflow itself).
    """
    stack = [value]
    while stack:
        node = stack.pop()
        for child in node.values() if type(node) is dict else node:
            kind = type(child)
            if kind is int:
                if not -MAX_INTEGER <= child <= MAX_INTEGER:
                    return True
            elif kind is dict or kind is list:
                stack.append(child)
    return False


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


_STRICT = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_bounded_int)
_STRICT_UNIQUE = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_bounded_int, object_pairs_hook=_unique_object
)
_CONSTANT = object()


def _mark_constant(name: str) -> Any:
    return _CONSTANT


_MARKING = json.JSONDecoder(
    parse_constant=_mark_constant,
    parse_float=lambda text: _CONSTANT if math.isinf(float(text)) else float(text),
    parse_int=lambda text: _CONSTANT if _out_of_range(text) else int(text),
)


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


def _number_field(text: str) -> str | None:
    """The dotted path of the first refused number in ``text`` (None at top level or when not found)."""
    try:
        value = _MARKING.decode(text)
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
    """Parse one JSON document strictly: finite RFC 8259 numbers only, at most ``max_depth`` levels of nesting.

    Parsed by msgspec (RFC 8259 strict, the same values; faster than ``json.loads``, checks included, as
    ``benchmarks/io_speed.py`` measures on a 5,000-case predictions.jsonl);
    a document msgspec refuses is decided and explained by a strict ``json`` decoder (which also takes escaped lone
    surrogates). A number that overflows a double (``1e999``) or an integer beyond :data:`MAX_INTEGER` is refused
    with its field, where Python's ``json`` would give ``inf`` or an integer no other reader agrees on. The depth is
    only walked when the text holds more brackets than ``max_depth``.

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
        InputError: ``file:line: field: message`` for invalid JSON, a ``NaN``/``Infinity`` literal, a number out of
            range (above), too deep nesting or (``unique_keys``) a duplicate key.
    """
    brackets = text.count("[") + text.count("{")
    if not unique_keys and brackets <= max_depth:
        try:
            value = msgspec.json.decode(text)
        except msgspec.DecodeError:  # any doubt goes to the strict decoder below, which decides and explains
            pass
        else:
            if not integer_out_of_range([value]):  # else the strict decoder refuses it, naming the field
                return value
    try:
        value = (_STRICT_UNIQUE if unique_keys else _STRICT).decode(text)
    except _DuplicateKey as exc:
        raise InputError(located(path, line, str(exc), "duplicate key (JSON objects name each key once)")) from None
    except json.JSONDecodeError as exc:
        where = line if line is not None else exc.lineno
        raise InputError(located(path, where, None, f"invalid JSON: {exc.msg} (column {exc.colno})")) from None
    except _BadNumber as exc:
        raise InputError(located(path, line, _number_field(text), str(exc))) from None
    except RecursionError:  # deeper than the interpreter's recursion limit
        raise InputError(located(path, line, None, f"JSON nested deeper than {max_depth} levels")) from None
    if brackets > max_depth and _depth_exceeds(value, max_depth):
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


def _lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """``(line_number, offset, raw bytes)`` of each line of a file (1-based numbers, byte offsets)."""
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
            yield number, start, raw


_BLANK = object()


def _parse_line(path: Path, number: int, raw: bytes, unique_keys: bool = False) -> Any:
    """One JSONL line parsed by :func:`parse_json` (``_BLANK`` for a blank line; a BOM allowed on line 1).

    Raises:
        InputError: not UTF-8, or not valid JSON (as :func:`parse_json`).
    """
    try:
        text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            located(path, number, None, f"not UTF-8 text ({exc.reason} at column {exc.start + 1})")
        ) from None
    if not text.strip():
        return _BLANK
    return parse_json(text, path, number, unique_keys=unique_keys)


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
    for number, start, raw in _lines(path):
        try:
            record = _parse_line(path, number, raw, unique_keys)
        except InputError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
            continue
        if record is not _BLANK:
            yield number, start, record


def scan_rows(path: Path | str, row_type: type[RowT], schema: str) -> Iterator[tuple[int, int, RowT]]:
    """:func:`scan_jsonl` of a file of one kind of row, each row parsed and validated in one step.

    msgspec decodes each line straight into ``row_type``, a ``msgspec.Struct`` that mirrors the shipped
    ``schema`` and takes no row the schema refuses (tested); faster, typed rows included, than :func:`parse_json`
    then :func:`validate` into dicts (``benchmarks/io_speed.py`` measures both on a 5,000-case scores.jsonl).
    A line it does not take (bad input, or what only the schema allows, e.g. ``1.0`` as an integer) goes through
    :func:`parse_json` and :func:`validate`, which decide and explain, and is then converted.

    Yields:
        ``(line_number, offset, row)`` for each non-blank line.

    Raises:
        InputError: ``file:line: field: message`` as :func:`scan_jsonl` and :func:`validate`.
    """
    path = Path(path)
    decode = msgspec.json.Decoder(row_type).decode
    for number, start, raw in _lines(path):
        if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:  # deeper: parse_json refuses it with its message
            try:
                yield number, start, decode(raw)
                continue
            except msgspec.MsgspecError:
                pass
        record = _parse_line(path, number, raw)
        if record is _BLANK:
            continue
        validate(record, schema, path, number)
        try:
            yield number, start, msgspec.convert(record, row_type, strict=False)
        except msgspec.ValidationError as exc:
            raise InputError(located(path, number, None, str(exc))) from None


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
                try:  # its numbers were checked when it was scanned
                    out.append(msgspec.json.decode(text))
                except msgspec.DecodeError:
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


def from_builtins(data: Any, type_: type[RowT]) -> RowT:
    """``data`` (JSON as :func:`json.loads` returns it) as ``type_``, a dataclass: :func:`clean_nan` undone.

    ``msgspec.convert`` builds it (nested dataclasses, lists as tuples, literals and types checked) after two steps
    it does not take itself: JSON ``null`` becomes NaN where a ``float`` (not ``float | None``) is expected, and a
    key that names no field of its dataclass is refused (msgspec ignores those in dataclasses).

    Raises:
        ValueError: a key is unknown or missing, or a value has the wrong type; the message names its path
            (``$.metrics[0].p_value``, msgspec's notation).
    """
    try:
        return msgspec.convert(_null_as_nan(data, msgspec.inspect.type_info(type_), "$"), type_)
    except msgspec.ValidationError as exc:  # a ValueError itself only from msgspec 0.19 on
        raise ValueError(str(exc)) from None


def _null_as_nan(value: Any, info: msgspec.inspect.Type, where: str) -> Any:
    """``value`` with null as NaN where ``info`` expects a float; a key naming no field of a dataclass refused."""
    types = msgspec.inspect
    if isinstance(info, types.FloatType):
        return math.nan if value is None else value
    if isinstance(info, types.UnionType):  # a report's unions are all ``X | None``: null stays None
        members = [t for t in info.types if not isinstance(t, types.NoneType)]
        return value if value is None or len(members) != 1 else _null_as_nan(value, members[0], where)
    if isinstance(info, types.DataclassType) and isinstance(value, dict):
        known = {f.encode_name: f.type for f in info.fields}
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"Object contains unknown field `{unknown[0]}` - at `{where}`")
        return {k: _null_as_nan(v, known[k], f"{where}.{k}") for k, v in value.items()}
    if isinstance(info, types.ListType | types.VarTupleType) and isinstance(value, list):
        return [_null_as_nan(v, info.item_type, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(info, types.TupleType) and isinstance(value, list) and len(value) == len(info.item_types):
        pairs = enumerate(zip(value, info.item_types, strict=True))
        return [_null_as_nan(v, t, f"{where}[{i}]") for i, (v, t) in pairs]
    return value  # anything else is msgspec's to check


def dumps(record: Any) -> str:
    """One compact JSON line (:func:`to_json_text`)."""
    return to_json_text(record)


def write_jsonl(path: Path | str, records: Iterable[Any]) -> None:
    """Write records as JSON Lines, replacing ``path`` atomically (temp file, fsync, rename).

    Raises:
        EvaluationError: the file cannot be written (the old file, if any, is left intact).
    """
    with atomic_writer(path) as handle:
        for record in records:
            handle.write(dumps(record) + "\n")


class JsonlAppender:
    """Append records to a JSONL file, a whole line at a time, so a killed run keeps what it computed.

    Each line is written all or nothing (:func:`gate.files.write_all`, without an ``fsync`` per line): a full disk
    leaves the file as it was before that line, and the error names the file.

    Raises:
        WriteError: the file cannot be opened or a line cannot be written (exit code 3).
    """

    def __init__(self, path: Path | str):
        self._path = Path(path)
        self._fd: int | None = open_append(self._path)

    def write(self, record: Any) -> None:
        """Append one record and flush it to disk."""
        assert self._fd is not None, "write after close"
        write_all(self._fd, (dumps(record) + "\n").encode("utf-8", errors="replace"), self._path, sync=False)

    def close(self) -> None:
        """Close the file."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _numpy_value(value: Any) -> Any:
    """The ``enc_hook`` of msgspec: numpy scalars and arrays as Python numbers and lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_ENCODER = msgspec.json.Encoder(enc_hook=_numpy_value)


def _plain(value: Any) -> Any:
    """``value`` with dataclasses as dicts, tuples as lists and numpy values as Python ones (for ``json``)."""
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value.tolist() if hasattr(value, "tolist") else value


def to_json_text(value: Any, *, indent: bool = False) -> str:
    """JSON text of ``value``, compact or indented by 2 spaces; NaN and ±inf as null, non-ASCII kept.

    Dataclasses are written as objects (fields in order), tuples and sets as lists, numpy values as numbers.
    Written by msgspec's encoder, many times faster than ``dataclasses.asdict`` and ``json`` (``benchmarks/io_speed.py``
    measures both on the report.json of a 5,000-case comparison). A value
    holding a lone surrogate (from an escaped input such as ``"\\ud800"``, or a pipeline's string), which UTF-8
    cannot encode, is written by ``json`` with ``\\u`` escapes for everything non-ASCII: the same JSON value, and a
    file that can be written.

    Raises:
        TypeError: ``value`` holds something JSON cannot represent (e.g. an arbitrary object).
    """
    try:
        data = _ENCODER.encode(value)
    except UnicodeEncodeError:  # a lone surrogate: JSON writes it as a \u escape, UTF-8 cannot hold it
        plain = clean_nan(_plain(value))
        return json.dumps(plain, ensure_ascii=True, allow_nan=False, indent=2 if indent else None,
                          separators=None if indent else (",", ":"))  # fmt: skip
    return (msgspec.json.format(data, indent=2) if indent else data).decode()


def _member(key: str, value: Any) -> str:
    if isinstance(value, list | tuple) and value:  # one item per line, each compact
        return f"  {to_json_text(key)}: [\n" + ",\n".join(f"    {to_json_text(item)}" for item in value) + "\n  ]"
    return f"  {to_json_text(key)}: " + to_json_text(value, indent=True).replace("\n", "\n  ")


def pretty_json(data: Any) -> str:
    """Readable JSON of a dict or a dataclass (as :func:`to_json_text`) with a trailing newline.

    An object is written a member per line (keys as given, fields in order), its nested objects indented; a
    non-empty list inside it one item per line, each item compact. The same data gives the same bytes.
    """
    if is_dataclass(data) and not isinstance(data, type):
        members = [(f.name, getattr(data, f.name)) for f in fields(data)]
    elif isinstance(data, dict):
        members = list(data.items())
    else:
        members = []
    if not members:
        return to_json_text(data, indent=True) + "\n"
    return "{\n" + ",\n".join(_member(key, value) for key, value in members) + "\n}\n"


def write_json(path: Path | str, data: Any) -> None:
    """Write :func:`pretty_json` of ``data`` atomically (temp file, fsync, rename: see ``gate.files``).

    Raises:
        EvaluationError: the file cannot be written (the old file, if any, is left intact).
    """
    write_text_atomic(path, pretty_json(data))
