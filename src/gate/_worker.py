"""Worker process for the ``python: module:function`` adapter (run as ``python -m gate._worker module:function``).

Protocol: one JSON object per line on stdin ``{"case": {...}, "options": {...}}``; one JSON object per line on the
original stdout ``{"ok": true, "result": {...}, "latency_ms": float}`` (with ``"warmup": true`` on the worker's first
successful call) or ``{"ok": false, "error": "..."}`` (with ``"final": true`` when a retry would fail the same way: a
result over :data:`MAX_REPLY_BYTES`).
Whatever the user's code prints to stdout goes to stderr, so it cannot corrupt the protocol.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import signal
import sys
import threading
import time
from typing import IO, Any

# inspect and traceback are imported when a call fails: every worker's start (C of them at once) pays for its imports

PARENT_PID_VAR = "RAG_GATE_PARENT_PID"
"""The environment variable in which rag-gate gives its worker its own process id (see :func:`die_with_parent`)."""
_PR_SET_PDEATHSIG = 1  # prctl(2)
_CO_COROUTINE = 0x80  # inspect.CO_COROUTINE: an ``async def`` function (read without importing inspect)
_WATCH_S = 0.25  # how often the watchdog thread checks that rag-gate still runs
MAX_REPLY_BYTES = 16 * 1024 * 1024
"""The largest result one call may send back, in bytes of its JSON line (16 MiB: the answer, the retrieved chunks
and the rest). A larger one (a runaway generation, a whole corpus returned) fails the case with its size, without
being retried, instead of filling rag-gate's memory and the predictions file."""


def _kill_group(*_: object) -> None:
    """Kill this worker's process group: the worker (its leader) and everything the user's function started.

    Only a worker that leads its own group (rag-gate starts it with ``start_new_session``) kills the group; any
    other just exits.
    """
    try:
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(1)


def die_with_parent(parent: int | None) -> None:
    """Make this worker (and its process group) die when rag-gate dies, however it dies (SIGKILL included).

    Two mechanisms, since neither alone covers every case:

    - ``prctl(PR_SET_PDEATHSIG)`` (Linux): the kernel sends a signal when the parent exits; the handler kills the
      worker's process group (workers run in their own session, so a runner's signal to rag-gate's group misses
      them). The kernel sends it when the *thread* that spawned the worker ends: rag-gate spawns workers from its
      main thread or from the pipeline's call threads, which live until the pool is closed.
    - a daemon thread that checks ``getppid()`` every :data:`_WATCH_S` seconds: covers the parent dying before the
      ``prctl`` call, other platforms, and a user module that replaces the signal's handler.

    Args:
        parent: rag-gate's process id (the worker's parent at spawn), None when unknown (nothing is watched).

    Source: prctl(2) ``PR_SET_PDEATHSIG``; getppid(2) (an orphan is re-parented to init or a subreaper).
    """
    if parent is None:
        return
    signum = getattr(signal, "SIGRTMIN", signal.SIGUSR2)  # a signal user code does not use for itself
    if sys.platform.startswith("linux"):
        try:
            signal.signal(signum, _kill_group)
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
        except (OSError, AttributeError, ValueError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_S)
        _kill_group()

    threading.Thread(target=watch, name="rag-gate-parent-watch", daemon=True).start()


def _parent_pid() -> int | None:
    """rag-gate's process id from :data:`PARENT_PID_VAR` (None when not given or not a number)."""
    value = os.environ.pop(PARENT_PID_VAR, "")
    return int(value) if value.isdigit() else None


def _json_value(value: object) -> object:
    """``json.dumps``' ``default``: numpy numbers and arrays as Python numbers and lists; nothing else is JSON.

    Raises:
        TypeError: any other type (bytes, a set, an object): a bad return value, never its ``str``.
    """
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON (return str, numbers, lists and dicts)")


def _text(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in when the exception's own ``__str__`` fails (user code)."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - any failure of user code is reported, never a crash of the worker
        return f"<{type(exc).__name__} whose message cannot be shown>"


def _encode(reply: dict[str, object]) -> str:
    """The reply as one JSON line; any value that cannot be sent makes it a failed call, never a crash.

    Bytes, a set, an object, a circular reference (TypeError, ValueError), a structure nested too deeply for the
    encoder (RecursionError), a ``default`` or ``__str__`` that fails: the case fails with ``bad return value``.
    """
    try:
        return json.dumps(reply, default=_json_value)
    except RecursionError:
        return json.dumps({"ok": False, "error": "bad return value: nested too deeply to send (RecursionError)"})
    except Exception as exc:  # noqa: BLE001 - TypeError, ValueError, or anything user objects raise
        told = _text(exc) if isinstance(exc, (TypeError, ValueError)) else f"{type(exc).__name__}: {_text(exc)}"
        return json.dumps({"ok": False, "error": f"bad return value: {told}"})


def _wiring_error(target: str, reason: str, is_input: bool) -> dict[str, object]:
    """The reply for a target that cannot be loaded, naming where Python looked.

    ``input`` is True when the config names a module or function that is not there (a configuration mistake);
    False when the module's own code failed while being imported (the pipeline failing).
    """
    searched = f"(searched from cwd {os.getcwd()} on sys.path {list(dict.fromkeys(sys.path))})"  # each entry once
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


def _caller(function: Any) -> Any:
    """``function`` itself, or for an ``async def`` pipeline a function that runs it to completion.

    A coroutine function is awaited on one event loop kept for the worker's life, so clients the pipeline creates
    once (an ``AsyncOpenAI``, a connection pool) are reused across calls.
    """
    if not getattr(getattr(function, "__code__", None), "co_flags", 0) & _CO_COROUTINE:
        return function
    import asyncio

    loop = asyncio.new_event_loop()

    def run(case: object, **options: object) -> object:
        return loop.run_until_complete(function(case, **options))

    return run


def _send(protocol: IO[str], text: str) -> None:
    """Write one reply line, after flushing what the user's code printed (a line without its newline too).

    rag-gate ends a call's output when it reads the reply (:meth:`gate.sandbox.Forwarder.end_call`): what is still
    in this process's buffers then would be shown and counted with the next call, or lost when the worker is killed.

    Raises:
        BrokenPipeError: rag-gate is gone.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a stream the user's code replaced or closed: nothing to flush
            pass
    protocol.write(text + "\n")


def main(target: str) -> int:
    """Serve calls to ``target`` until stdin closes.

    Ctrl-C reaches the whole process group: the worker ignores it and the parent stops it (or closes stdin).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(_parent_pid())
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # the user's prints go to stderr
    sys.stdout = sys.stderr
    sys.path.insert(0, os.getcwd())
    module_name, function_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        named = isinstance(exc, ModuleNotFoundError) and f"{module_name}.".startswith(f"{exc.name}.")
        _send(protocol, json.dumps(_wiring_error(target, str(exc) if named else f"{exc!r}", named)))
        return 1
    function = getattr(module, function_name, None)
    if not callable(function):
        found = "not defined" if function is None else f"a {type(function).__name__}, not a function"
        reason = f"{function_name!r} in {module.__file__} is {found}"
        _send(protocol, json.dumps(_wiring_error(target, reason, True)))
        return 1
    _send(protocol, json.dumps({"ok": True, "ready": True}))
    call = _caller(function)
    first = True
    for line in sys.stdin:
        request = json.loads(line)
        start = time.perf_counter()
        try:
            result = call(request["case"], **request.get("options", {}))
            reply = {"ok": True, "result": result, "latency_ms": (time.perf_counter() - start) * 1000.0}
            if first:  # a cold start (lazy imports, index loading): the adapter records it apart from latency
                reply["warmup"] = True
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - sys.exit() in the pipeline fails the case
            import traceback

            last = traceback.extract_tb(exc.__traceback__)[-1]
            where = f" ({os.path.basename(last.filename)}:{last.lineno})"
            told = f"the pipeline called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else _text(exc)
            text = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {told}{where}"})
            if isinstance(exc, TypeError) and not _accepts(function, request):
                text = json.dumps({"ok": False, "fatal": True, "input": True, "error": f"{target}: {_text(exc)}"})
        else:
            text = _encode(reply)
            if len(text) > MAX_REPLY_BYTES:  # ASCII (json.dumps escapes the rest): characters are bytes
                told = f"the result of {len(text):,} bytes (as JSON) exceeds the limit of {MAX_REPLY_BYTES:,} bytes"
                text = json.dumps({"ok": False, "final": True, "error": f"{told} a pipeline call may return"})
        first = False
        try:
            _send(protocol, text)
        except BrokenPipeError:  # the parent is gone
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
