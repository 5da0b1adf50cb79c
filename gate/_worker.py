"""Worker process for the ``python: module:function`` adapter (run as ``python -m gate._worker module:function``).

Protocol: one JSON object per line on stdin ``{"case": {...}, "options": {...}}``; one JSON object per line on the
original stdout ``{"ok": true, "result": {...}, "latency_ms": float}`` or ``{"ok": false, "error": "..."}``.
Whatever the user's code prints to stdout goes to stderr, so it cannot corrupt the protocol.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
import traceback


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
        function = getattr(importlib.import_module(module_name), function_name)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        protocol.write(json.dumps({"ok": False, "fatal": True, "error": f"cannot import {target}: {exc!r}"}) + "\n")
        return 1
    protocol.write(json.dumps({"ok": True, "ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        start = time.perf_counter()
        try:
            result = function(request["case"], **request.get("options", {}))
            reply = {"ok": True, "result": result, "latency_ms": (time.perf_counter() - start) * 1000.0}
            text = json.dumps(reply, default=str)
        except Exception as exc:  # noqa: BLE001
            last = traceback.extract_tb(exc.__traceback__)[-1]
            where = f" ({os.path.basename(last.filename)}:{last.lineno})"
            text = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}{where}"})
        try:
            protocol.write(text + "\n")
        except BrokenPipeError:  # the parent is gone
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
