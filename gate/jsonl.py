"""JSON Lines I/O with schema validation; every error names ``file:line: field``.

NaN is written as JSON ``null`` (and read back as NaN where a number is expected) so that files stay valid JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from gate.errors import InputError, located

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
def schema_validator(name: str) -> jsonschema.protocols.Validator:
    """The validator for a schema shipped in ``gate/schemas`` (``golden`` → ``golden.schema.json``)."""
    text = resources.files("gate.schemas").joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


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
    return path, error.message


def validate(record: Any, schema: str, path: Path | str, line: int | None) -> None:
    """Validate one record against a shipped schema.

    Raises:
        InputError: ``file:line: field: message`` for the first problem (the deepest, most specific one).

    """
    if not isinstance(record, dict):
        raise InputError(located(path, line, None, f"expected a JSON object, got {_json_type(record)}"))
    error = jsonschema.exceptions.best_match(schema_validator(schema).iter_errors(record))
    if error is not None:
        field, message = _describe(error)
        raise InputError(located(path, line, field, message))


def read_jsonl(path: Path | str, problems: list[str] | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each non-blank line (1-based line numbers).

    Args:
        path: the JSONL file.
        problems: when given, a line that is not valid JSON is reported here and skipped instead of raising.

    Raises:
        InputError: when the file is missing, not UTF-8, or (without ``problems``) a line is not valid JSON.

    """
    path = Path(path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a JSONL file") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                message = located(path, number, None, f"not UTF-8 text ({exc.reason} at column {exc.start + 1})")
            else:
                if not text.strip():
                    continue
                try:
                    yield number, json.loads(text)
                    continue
                except json.JSONDecodeError as exc:
                    message = located(path, number, None, f"invalid JSON: {exc.msg} (column {exc.colno})")
            if problems is None:
                raise InputError(message)
            problems.append(message)


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
    """One compact JSON line, NaN written as null, non-ASCII kept as is."""
    return json.dumps(clean_nan(record), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def write_jsonl(path: Path | str, records: Iterable[Any]) -> None:
    """Write records as JSON Lines (overwrites)."""
    with Path(path).open("w", encoding="utf-8") as handle:
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


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write a UTF-8 text file atomically: a reader sees the old file or the new one, never half of it."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def pretty_json(data: Any) -> str:
    """Indented JSON (keys as given, NaN and ±inf → null, non-ASCII kept) with a trailing newline."""
    return json.dumps(clean_nan(data), ensure_ascii=False, indent=2, allow_nan=False) + "\n"


def write_json(path: Path | str, data: Any) -> None:
    """Write :func:`pretty_json` of ``data`` atomically."""
    write_text_atomic(path, pretty_json(data))
