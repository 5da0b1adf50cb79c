"""Worker process for the ``python: module:function`` adapter (run as ``python -m gate._worker module:function``).

Protocol: one JSON object per line on stdin ``{"case": {...}, "options": {...}}``; one JSON object per line on the
original stdout ``{"ok": true, "result": {...}, "latency_ms": float}`` (with ``"warmup": true`` on the worker's first
successful call) or ``{"ok": false, "error": "..."}``.
Whatever the user's code prints to stdout goes to stderr, so it cannot corrupt the protocol.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time

# inspect and traceback are imported when a call fails: every worker's start (C of them at once) pays for its imports


def _json_value(value: object) -> object:
    """``json.dumps``' ``default``: numpy numbers and arrays as Python numbers and lists; nothing else is JSON.

    Raises:
        TypeError: any other type (bytes, a set, an object): a bad return value, never its ``str``.
    """
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON (return str, numbers, lists and dicts)")


def _wiring_error(target: str, reason: str, is_input: bool) -> dict[str, object]:
    """The reply for a target that cannot be loaded, naming where Python looked.

    ``input`` is True when the config names a module or function that is not there (a configuration mistake);
    False when the module's own code failed while being imported (the pipeline failing).
    """
    searched = f"(searched from cwd {os.getcwd()} on sys.path {sys.path})"
    return {"ok": False, "fatal": True, "input": is_input, "error": f"cannot import {target}: {reason} {searched}"}


def _accepts(function: object, request: dict[str, object]) -> bool:
    """Whether ``function(case, **options)`` binds (False: the configured options do not fit its signature)."""
    import inspect

    try:
        inspect.signature(function).bind(request["case"], **request.get("options", {}))  # type: ignore[arg-type]
    except TypeError:
        return False
    except ValueError:  # no signature (a builtin): assume it fits
        return True
    return True


def main(target: str) -> int:
    """Serve calls to ``target`` until stdin closes.

    Ctrl-C reaches the whole process group: the worker ignores it and the parent stops it (or closes stdin).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # the user's prints go to stderr
    sys.stdout = sys.stderr
    sys.path.insert(0, os.getcwd())
    module_name, function_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        named = isinstance(exc, ModuleNotFoundError) and f"{module_name}.".startswith(f"{exc.name}.")
        protocol.write(json.dumps(_wiring_error(target, str(exc) if named else f"{exc!r}", named)) + "\n")
        return 1
    function = getattr(module, function_name, None)
    if not callable(function):
        found = "not defined" if function is None else f"a {type(function).__name__}, not a function"
        reason = f"{function_name!r} in {module.__file__} is {found}"
        protocol.write(json.dumps(_wiring_error(target, reason, True)) + "\n")
        return 1
    protocol.write(json.dumps({"ok": True, "ready": True}) + "\n")
    first = True
    for line in sys.stdin:
        request = json.loads(line)
        start = time.perf_counter()
        try:
            result = function(request["case"], **request.get("options", {}))
            reply = {"ok": True, "result": result, "latency_ms": (time.perf_counter() - start) * 1000.0}
            if first:  # a cold start (lazy imports, index loading): the adapter records it apart from latency
                reply["warmup"] = True
        except Exception as exc:  # noqa: BLE001
            import traceback

            last = traceback.extract_tb(exc.__traceback__)[-1]
            where = f" ({os.path.basename(last.filename)}:{last.lineno})"
            text = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}{where}"})
            if isinstance(exc, TypeError) and not _accepts(function, request):
                text = json.dumps({"ok": False, "fatal": True, "input": True, "error": f"{target}: {exc}"})
        else:
            try:
                text = json.dumps(reply, default=_json_value)
            except (TypeError, ValueError) as exc:  # bytes, a set, an object, a circular reference
                text = json.dumps({"ok": False, "error": f"bad return value: {exc}"})
        first = False
        try:
            protocol.write(text + "\n")
        except BrokenPipeError:  # the parent is gone
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
