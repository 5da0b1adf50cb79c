"""Reading untrusted YAML safely: bounded size, the line of every key, only values JSON can hold.

Shared by the config loader (:mod:`gate.config`) and the promptfoo importer: :func:`check_yaml_size` refuses deep
nesting and alias bombs before anything is built; :func:`key_lines` gives every key path its line and reports
duplicate keys; :func:`nul_bytes` and :func:`non_json` find what a setting cannot hold (a NUL byte, a date, an
``on:`` key read as a boolean; numbers out of range are :func:`gate.jsonl.number_problems`). :class:`Problems`
collects what is wrong, each with its line, and raises them all at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from gate.errors import InputError, located

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
KeyPath = tuple[Any, ...]


class Problems:
    """Problems found in one YAML file, each with its key path and line; reported sorted by line."""

    def __init__(self, path: Path, lines: Mapping[KeyPath, int] | None = None) -> None:
        self.path, self.lines = path, lines or {}
        self.items: list[tuple[int | None, str | None, str]] = []
        """(line, dotted key path, message) per problem."""
        self.duplicates: set[KeyPath] = set()
        """Key paths given more than once (their values are not checked further)."""

    def line(self, keys: KeyPath) -> int | None:
        """Line of the node at ``keys``, or of its deepest parent that has one.

        A list index is an int; a mapping key is looked up as text (YAML ``1:`` is the key ``"1"`` here).
        """
        while keys:
            for variant in (tuple(k if isinstance(k, int) else str(k) for k in keys), tuple(map(str, keys))):
                if variant in self.lines:
                    return self.lines[variant]
            keys = keys[:-1]
        return None

    def add(self, keys: KeyPath, message: str, line: int | None = None) -> None:
        """Record a problem at ``keys`` (its line is looked up unless given)."""
        self.items.append((line if line is not None else self.line(keys), ".".join(map(str, keys)) or None, message))

    def raise_if_any(self) -> None:
        """Raise one InputError listing every problem, one per line, in file order (no line last)."""
        if self.items:
            ordered = sorted(dict.fromkeys(self.items), key=lambda p: (p[0] is None, p[0] or 0))
            raise InputError.listing([located(self.path, line, where, message) for line, where, message in ordered])


def yaml_error(path: Path, exc: yaml.YAMLError) -> InputError:
    """``path:line: invalid YAML: <problem>`` for a PyYAML error, as one InputError."""
    mark = getattr(exc, "problem_mark", None)
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    return InputError(located(path, mark.line + 1 if mark else None, None, f"invalid YAML: {problem}"))


def check_yaml_size(text: str, path: Path, *, max_nodes: int, max_depth: int) -> None:
    """Reject nesting deeper than ``max_depth`` and more than ``max_nodes`` values after alias expansion.

    Shared by every YAML rag-gate reads (the config; promptfoo test files), each with its own limits.

    Raises:
        InputError: ``path:line:`` and which bound was crossed; invalid YAML.

    Reads the YAML event stream (no recursion, nothing is built), counting for every anchor the number of
    values it stands for, so an alias costs what it expands to.
    """
    open_counts: list[int] = [0]  # values in each open collection (index 0: the document)
    open_anchors: list[str | None] = []
    anchors: dict[str, int] = {}
    try:
        for event in yaml.parse(text, Loader=LOADER):
            line = event.start_mark.line + 1 if event.start_mark is not None else None
            if isinstance(event, yaml.CollectionStartEvent):
                open_counts.append(1)
                open_anchors.append(event.anchor)
                if len(open_anchors) > max_depth:
                    message = f"nested deeper than {max_depth} levels"
                    raise InputError(located(path, line, None, message))
            elif isinstance(event, yaml.CollectionEndEvent):
                count, anchor = open_counts.pop(), open_anchors.pop()
                open_counts[-1] += count
                if anchor:
                    anchors[anchor] = count
            elif isinstance(event, yaml.ScalarEvent):
                open_counts[-1] += 1
                if event.anchor:
                    anchors[event.anchor] = 1
            elif isinstance(event, yaml.AliasEvent):
                open_counts[-1] += anchors.get(event.anchor or "", 1)
            if sum(open_counts) > max_nodes:
                message = f"more than {max_nodes} values once YAML aliases are expanded (an alias bomb?)"
                raise InputError(located(path, line, None, message))
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None


def key_lines(node: yaml.Node, problems: Problems, keys: KeyPath = ()) -> Iterator[tuple[KeyPath, int]]:
    """(key path, line) of every mapping key and list item under ``node``, in file order.

    Duplicate keys become problems.
    """
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            line, key = key_node.start_mark.line + 1, str(key_node.value)
            if key in seen:  # YAML keeps the last value: its line is the one indexed
                problems.add((*keys, key), f"duplicate key (first on line {seen[key]})", line)
                problems.duplicates.add((*keys, key))
            seen.setdefault(key, line)
            yield (*keys, key), line
            yield from key_lines(value_node, problems, (*keys, key))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield (*keys, i), item.start_mark.line + 1
            yield from key_lines(item, problems, (*keys, i))


def nul_bytes(data: Any, keys: KeyPath = ()) -> Iterator[KeyPath]:
    """Key paths of every string (a value or a key) that holds a NUL byte, in a loaded YAML document.

    YAML's ``"\\x00"`` escape writes one; no path, environment value or command line can hold it (the OS call
    fails with ``embedded null byte``), so a setting that holds one is refused where it is written.
    """
    if isinstance(data, str) and "\x00" in data:
        yield keys
    elif isinstance(data, Mapping):
        for k, v in data.items():
            if isinstance(k, str) and "\x00" in k:
                yield (*keys, k)
                continue
            yield from nul_bytes(v, (*keys, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from nul_bytes(v, (*keys, i))


_JSON_SCALARS = {f"tag:yaml.org,2002:{t}": t for t in ("str", "int", "float", "bool", "null")}
_YAML_TYPES = {"timestamp": "a date or timestamp", "binary": "binary data (!!binary)", "set": "a set (!!set)",
               "omap": "an ordered map (!!omap)", "pairs": "a list of pairs (!!pairs)",
               "bool": "a boolean", "int": "an integer", "float": "a number", "null": "null"}  # fmt: skip
_MERGE = "tag:yaml.org,2002:merge"


def _yaml_type(node: yaml.Node) -> str:
    """What YAML makes of a node, in words (``a date or timestamp`` for ``2024-01-01``)."""
    name = node.tag.rsplit(":", 1)[-1]
    return _YAML_TYPES.get(name, f"a {node.tag} value")


def _key_value(node: yaml.Node) -> Any:
    """The Python key PyYAML builds from a mapping key node (``on`` → True), as in the loaded data."""
    try:
        return LOADER("").construct_object(node, deep=True)
    except (yaml.YAMLError, TypeError):  # an unhashable key: the load itself refused it already
        return str(getattr(node, "value", node))


def _text_key(node: yaml.Node, written: str) -> bool:
    """Whether a mapping key reaches a pipeline as the text written: a string, or a number written as JSON writes it.

    ``1:`` is the key ``"1"``; ``0x10:`` would become ``"16"`` and ``on:`` ``true``, so those are refused.
    """
    if not isinstance(node, yaml.ScalarNode):
        return False
    if node.tag == "tag:yaml.org,2002:str":
        return True
    return node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and str(_key_value(node)) == written


def non_json(
    node: yaml.Node, keys: KeyPath = (), data_keys: KeyPath = ()
) -> Iterator[tuple[KeyPath, KeyPath, int, str]]:
    """Every key that is not text and every value that is not a JSON value, in a composed YAML document.

    YAML 1.1 types unquoted scalars by itself: ``on:``/``yes:``/``no:`` keys are booleans, ``2024-01-01`` a date,
    ``2024-01-01T10:00:00`` a timestamp, ``!!binary``/``!!set`` bytes and sets. A setting must be what a pipeline
    can receive (JSON: text keys; text, number, boolean, null, list or mapping values), so these are refused with
    their line rather than crash the run that serialises them (the config hash, the worker protocol, the
    environment).

    Yields:
        ``(keys as written, keys as loaded, line, message)`` per offending node; nothing under it.
    """
    if isinstance(node, yaml.MappingNode):
        if node.tag != "tag:yaml.org,2002:map":
            instead = "a list" if node.tag.endswith(":set") else "a mapping"
            yield keys, data_keys, node.start_mark.line + 1, f"{_yaml_type(node)} is not a setting value; use {instead}"
            return
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:  # `<<: *anchor` merges a mapping: its keys are checked where they are written
                continue
            line, written = key_node.start_mark.line + 1, str(getattr(key_node, "value", "?"))
            if not _text_key(key_node, written):
                message = (
                    f"the key `{written}` is read by YAML as {_yaml_type(key_node)}, not as text; "
                    f'quote it ("{written}")'
                )
                yield (*keys, written), (*data_keys, _key_value(key_node)), line, message
                continue
            yield from non_json(value_node, (*keys, written), (*data_keys, written))
    elif isinstance(node, yaml.SequenceNode):
        if node.tag != "tag:yaml.org,2002:seq":
            yield keys, data_keys, node.start_mark.line + 1, f"{_yaml_type(node)} is not a setting value; use a list"
            return
        for i, item in enumerate(node.value):
            yield from non_json(item, (*keys, i), (*data_keys, i))
    elif isinstance(node, yaml.ScalarNode) and node.tag not in _JSON_SCALARS:
        message = f"`{node.value}` is read by YAML as {_yaml_type(node)}, which a setting cannot hold; quote it"
        yield keys, data_keys, node.start_mark.line + 1, message
