"""Pipeline adapters: produce one side's predictions (DESIGN §3).

- ``python: module:function`` — called per case in worker subprocesses whose cwd and ``sys.path[0]`` are the side's
  directory, with bounded concurrency, a per-case timeout (the worker is killed and restarted) and retries of
  crashes (tenacity); a case that still fails becomes a prediction row with ``error``.
- ``command: ...`` — a shell template run once per repeat in the side's directory; it must write predictions JSONL
  to ``{predictions}`` (placeholders: ``{golden}``, ``{predictions}``, ``{repeat}``).
- ``predictions: FILE`` — precomputed predictions.

Both run in a :class:`~gate.sandbox.Sandbox`: an allow-listed environment (plus the variables the config passes
through by name), as the pipeline user when there is one, their output forwarded redacted; every string that comes
back (answers, chunks, ids, error messages) is redacted before rag-gate keeps or shows it.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import tenacity

from gate.config import PipelineSpec
from gate.errors import EvaluationError, InputError
from gate.golden import load_golden
from gate.jsonl import read_jsonl, validate
from gate.models import GoldenCase, Prediction
from gate.predictions import load_predictions, prediction_from_record
from gate.redact import Redactor
from gate.sandbox import Sandbox

log = logging.getLogger("rag-gate")


_PR_SET_CHILD_SUBREAPER = 36  # prctl(2)
_REAP_WAIT_S = 2.0


def _group_members(pgid: int) -> list[int]:
    """Ids of the processes whose process group is ``pgid``, from ``/proc/<pid>/stat`` field 5 (Linux; else [])."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile, or not Linux's format
            continue
        if len(fields) > 2 and fields[2] == str(pgid):
            members.append(int(stat.parent.name))
    return members


def _become_subreaper() -> None:
    """Make rag-gate the "child subreaper" of its descendants (Linux; elsewhere nothing happens).

    A process whose parent dies is re-parented to its nearest subreaper instead of PID 1, so rag-gate can reap the
    processes of a group it killed: an init that never reaps (some containers and micro-VMs) would leave them as
    zombies, which still answer ``kill(pid, 0)`` as if alive.
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def _reap(pid: int, pgid: int) -> None:
    """Wait (at most :data:`_REAP_WAIT_S`) for the killed group member ``pid`` to become rag-gate's child, and reap it.

    It becomes one when its parent, killed too, is gone (:func:`_become_subreaper`); nothing is waited for once the
    process is gone, reaped elsewhere, or its id belongs to a process outside the group.
    """
    deadline = time.monotonic() + _REAP_WAIT_S
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # not (yet) rag-gate's child
            if pid not in _group_members(pgid):
                return
        time.sleep(0.01)


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill ``proc`` and every process of its process group (it must have been started with ``start_new_session``).

    The group is signalled before the leader is reaped, so its id cannot have been reused; the group's other
    processes are reaped too, once re-parented to rag-gate (:func:`_become_subreaper`), so none is left as a
    zombie. Processes that left the group themselves (``setsid``) are out of reach here; the sandbox's sweep of the
    pipeline user kills those.

    Source: kill(2) and setsid(2): a negative pid signals the process group; prctl(2) ``PR_SET_CHILD_SUBREAPER``.
    """
    members = [pid for pid in _group_members(proc.pid) if pid != proc.pid]
    _become_subreaper()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group is gone already
        proc.kill()
    proc.wait()
    for pid in members:
        _reap(pid, proc.pid)


class CallFailed(Exception):
    """One call of the pipeline failed (exception in the user's function, crash, or timeout)."""


class _Worker:
    """One long-lived worker subprocess serving calls to ``module:function``."""

    def __init__(self, spec: PipelineSpec, sandbox: Sandbox, tmpdir: Path):
        self._spec = spec
        self._sandbox = sandbox
        self._tmpdir = tmpdir
        self._proc: subprocess.Popen[str] | None = None
        self._replies: queue.Queue[str | None] = queue.Queue()

    def _start(self) -> None:
        spec, sandbox = self._spec, self._sandbox
        env = sandbox.environment(spec.env_passthrough, spec.env, tmpdir=self._tmpdir)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(spec.workdir), env.get("PYTHONPATH")]))
        self._proc = subprocess.Popen(
            [sandbox.python, "-m", "gate._worker", spec.python],
            cwd=spec.workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,  # its own process group: a timeout kills what the function started too
            **sandbox.popen_kwargs(),
        )
        assert self._proc.stderr is not None
        sandbox.forward(self._proc.stderr)
        self._replies = queue.Queue()
        threading.Thread(target=self._read, args=(self._proc, self._replies), daemon=True).start()
        try:
            ready = self._reply(timeout=spec.startup_timeout_s)
        except CallFailed as exc:  # a worker that cannot start would fail every case: stop the run
            raise EvaluationError(f"pipeline {spec.python} did not start: {exc} (importing the module)") from None
        if not ready.get("ready"):
            self.stop()
            error = sandbox.redactor(str(ready.get("error", "worker did not start")))
            raise (InputError if ready.get("input") else EvaluationError)(f"{self._where()}: {error}")

    def _where(self) -> str:
        """``pipeline module:function (rag-gate.yml:3)`` for error messages."""
        return f"pipeline {self._spec.python}" + (f" ({self._spec.origin})" if self._spec.origin else "")

    @staticmethod
    def _read(proc: subprocess.Popen[str], replies: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            replies.put(line)
        replies.put(None)

    def _reply(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise CallFailed(f"timeout after {timeout:g} s") from None
        if line is None:
            proc, self._proc = self._proc, None
            if proc is not None:
                kill_group(proc)  # what the worker started dies with it; a zombie keeps its exit status
            code = proc.returncode if proc is not None else None
            raise CallFailed(f"pipeline process exited with code {code}")
        return json.loads(line)

    def call(self, case: dict[str, Any]) -> dict[str, Any]:
        """Send one case, wait for the reply (at most ``timeout_s``)."""
        if self._proc is None:
            self._start()
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps({"case": case, "options": self._spec.options}) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.stop()
            raise CallFailed("pipeline process died") from None
        reply = self._reply(self._spec.timeout_s)
        if reply.get("fatal"):  # the configured options do not fit the function: every call would fail
            error = self._sandbox.redactor(str(reply.get("error")))
            raise InputError(f"{self._where()}: {error} (check pipeline.options)")
        if not reply.get("ok"):
            raise CallFailed(self._sandbox.redactor(str(reply.get("error", "unknown error"))))
        return reply

    def stop(self) -> None:
        """Kill the worker process, and every process it started, if it runs."""
        if self._proc is not None:
            kill_group(self._proc)
            self._proc = None


def _to_prediction(case: GoldenCase, repeat: int, reply: dict[str, Any], source: str, redactor: Redactor) -> Prediction:
    result = reply["result"]
    if not isinstance(result, dict):
        raise CallFailed(f"expected a dict with 'answer' and 'retrieved', got {type(result).__name__}")
    record = {"id": case.id, "repeat": repeat, **redactor.redact(result)}
    if "latency_ms" not in record and reply.get("warmup"):
        record["warmup_ms"] = reply.get("latency_ms")  # a worker's cold start is not latency
    record.setdefault("latency_ms", None if "warmup_ms" in record else reply.get("latency_ms"))
    try:
        validate(record, "prediction", source, None)
    except InputError as exc:
        raise CallFailed(f"bad return value: {exc}") from None
    return prediction_from_record(record)


def run_python(
    spec: PipelineSpec,
    jobs: Iterable[tuple[GoldenCase, int]],
    on_result: Callable[[Prediction], None],
    *,
    sandbox: Sandbox | None = None,
) -> None:
    """Call ``spec.python`` for each (case, repeat), ``spec.concurrency`` at a time; report each prediction.

    Calls that raise, crash the worker or time out are retried ``spec.retries`` times (retries are never counted
    as repeats); a call that still fails yields a prediction with ``error`` set.

    Args:
        spec: the pipeline section of the config.
        jobs: (case, repeat index) pairs.
        on_result: receives each prediction (redacted), in the order of ``jobs``.
        sandbox: where the workers run (default: :meth:`Sandbox.from_environ` of ``os.environ``).

    Raises:
        InputError: when the configured module or function does not exist, is not a function, or does not take
            the configured options (named with the config line, the cwd and ``sys.path`` searched).
        EvaluationError: when importing the module fails (every call would fail).

    """
    sandbox = sandbox or Sandbox.from_environ(os.environ)
    with sandbox.scratch() as tmpdir:
        try:
            _serve(spec, jobs, on_result, sandbox, tmpdir)
        finally:
            sandbox.sweep()


def _serve(
    spec: PipelineSpec,
    jobs: Iterable[tuple[GoldenCase, int]],
    on_result: Callable[[Prediction], None],
    sandbox: Sandbox,
    tmpdir: Path,
) -> None:
    workers: queue.Queue[_Worker] = queue.Queue()
    for _ in range(spec.concurrency):
        workers.put(_Worker(spec, sandbox, tmpdir))
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(spec.retries + 1),
        retry=tenacity.retry_if_exception_type(CallFailed),
        reraise=True,
    )

    def one(job: tuple[GoldenCase, int]) -> Prediction:
        case, repeat = job
        worker = workers.get()
        try:
            reply = retrying(worker.call, case.to_dict())
            return _to_prediction(case, repeat, reply, spec.python or "pipeline", sandbox.redactor)
        except CallFailed as exc:
            return Prediction(id=case.id, repeat=repeat, error=str(exc))
        finally:
            workers.put(worker)

    try:
        with ThreadPoolExecutor(spec.concurrency) as pool:
            for prediction in pool.map(one, jobs):
                on_result(prediction)
    finally:
        while not workers.empty():
            workers.get().stop()


def run_command(
    spec: PipelineSpec,
    golden_path: Path,
    repeats: Iterable[int],
    n_cases: int,
    work_dir: Path,
    *,
    sandbox: Sandbox | None = None,
) -> Iterator[Prediction]:
    """Run ``spec.command`` once per repeat and yield the predictions it wrote.

    The placeholders ``{golden}``, ``{predictions}`` and ``{repeat}`` are replaced (shell-quoted); other braces
    are left alone (awk, JSON). ``{predictions}`` is a file in a private temporary directory the command can write;
    rag-gate keeps a redacted copy as ``work_dir/command-output-<repeat>.jsonl``. The command's output goes to
    rag-gate's stderr, redacted.

    The command runs in its own process group. It gets ``spec.timeout_s`` per case (``timeout_s × n_cases`` in
    all, since one run answers every case); when that runs out, the whole group is killed, the rows it wrote so far
    are kept, and every other case becomes a failed prediction (it counts against this side, DESIGN §8).

    Args:
        spec: the pipeline section of the config.
        golden_path: the golden set, given to the command as ``{golden}``.
        repeats: repeat indices to run.
        n_cases: cases in the golden set (the timeout is ``spec.timeout_s`` per case).
        work_dir: the run directory.
        sandbox: where the command runs (default: :meth:`Sandbox.from_environ` of ``os.environ``).

    Raises:
        EvaluationError: when the command fails, writes no file, or writes a malformed one (before a timeout).
    """
    sandbox = sandbox or Sandbox.from_environ(os.environ)
    budget = spec.timeout_s * max(n_cases, 1)
    for repeat in repeats:
        kept = work_dir / f"command-output-{repeat}.jsonl"
        kept.unlink(missing_ok=True)
        with sandbox.scratch() as scratch:
            out = scratch / f"predictions-{repeat}.jsonl"
            command = (
                spec.command.replace("{golden}", shlex.quote(str(golden_path)))
                .replace("{predictions}", shlex.quote(str(out)))
                .replace("{repeat}", str(repeat))
            )
            start = time.perf_counter()
            try:
                code = _run_shell(command, spec, sandbox, scratch, timeout=budget)
            finally:
                sandbox.sweep()
            shown = sandbox.redactor(command)
            if code is not None and code != 0:
                raise EvaluationError(f"pipeline command exited with {code} (repeat {repeat}): {shown}")
            if code is not None and not out.is_file():
                raise EvaluationError(f"pipeline command wrote no predictions to {{predictions}}: {shown}")
            per_case_ms = (time.perf_counter() - start) * 1000.0 / max(n_cases, 1)
            if out.is_file():
                with (
                    out.open(encoding="utf-8", errors="surrogateescape") as source,
                    kept.open("w", encoding="utf-8", errors="surrogateescape") as copy,
                ):
                    for line in source:
                        copy.write(sandbox.redactor(line))
        if code is None:
            predictions = _timed_out(kept, golden_path, repeat, budget, spec.timeout_s, shown)
        else:
            try:
                predictions = load_predictions(kept)
            except InputError as exc:
                raise EvaluationError(f"pipeline command wrote malformed predictions: {exc}") from None
        for prediction in predictions:
            values = prediction.to_dict() | {"repeat": repeat}
            if values.get("latency_ms") is None and prediction.error is None:
                values["latency_ms"] = per_case_ms
            yield prediction_from_record(values)


def _timed_out(
    kept: Path, golden_path: Path, repeat: int, budget: float, timeout_s: float, shown: str
) -> list[Prediction]:
    """The rows a command wrote before it was killed, plus a failed row for every case it did not answer."""
    rows: dict[str, Prediction] = {}
    if kept.is_file():
        problems: list[str] = []  # a row cut by the kill, or any malformed row, is not kept
        for line, record in read_jsonl(kept, problems):
            try:
                validate(record, "prediction", kept, line)
            except InputError:
                continue
            rows.setdefault(record["id"], prediction_from_record(record, line))
    error = f"pipeline command timed out after {budget:g} s (timeout_s {timeout_s:g} per case) before answering it"
    missing = [Prediction(id=c.id, repeat=repeat, error=error) for c in load_golden(golden_path) if c.id not in rows]
    log.warning(
        "pipeline command timed out after %g s (repeat %d), its process group killed: %d row(s) it wrote kept, "
        "%d case(s) failed: %s",
        budget,
        repeat,
        len(rows),
        len(missing),
        shown,
    )
    return [*rows.values(), *missing]


def _run_shell(command: str, spec: PipelineSpec, sandbox: Sandbox, tmpdir: Path, *, timeout: float) -> int | None:
    """Run ``command`` through the shell in the sandbox, its output forwarded; its exit code, or None on timeout.

    The shell runs in its own process group (session), which is killed when it times out, when rag-gate is
    interrupted, and once the shell has exited (background processes it left behind): nothing it started
    outlives it.
    """
    proc = subprocess.Popen(  # noqa: S602 - the config's own command
        command,
        shell=True,
        cwd=spec.workdir,
        env=sandbox.environment(spec.env_passthrough, spec.env, tmpdir=tmpdir),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
        **sandbox.popen_kwargs(),
    )
    assert proc.stdout is not None
    pump = sandbox.forward(proc.stdout)
    code: int | None = None
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    finally:  # also on KeyboardInterrupt (Ctrl-C and SIGTERM): the new session does not get the terminal's signal
        kill_group(proc)
        pump.join(timeout=5)
    return code
