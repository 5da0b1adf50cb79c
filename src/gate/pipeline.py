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

import contextlib
import ctypes
import json
import logging
import math
import os
import queue
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import tenacity

from gate._worker import MAX_REPLY_BYTES, PARENT_PID_VAR
from gate.config import PipelineSpec
from gate.errors import EvaluationError, InputError
from gate.files import writing
from gate.golden import load_golden
from gate.jsonl import read_jsonl, validate
from gate.models import GoldenCase, Prediction
from gate.predictions import load_predictions, prediction_from_record
from gate.redact import Redactor
from gate.sandbox import Forwarder, Sandbox

log = logging.getLogger("rag-gate")


_PR_SET_CHILD_SUBREAPER = 36  # prctl(2)
_READ_SIZE = 1 << 16  # bytes read from a worker's output at a time
_REAP_WAIT_S = 2.0


def _group_members(pgid: int) -> list[int]:
    """Ids of the processes whose process group is ``pgid``, from ``/proc/<pid>/stat`` field 5 (Linux; else [])."""
    return _groups_members([pgid])[pgid]


def _groups_members(pgids: Iterable[int]) -> dict[int, list[int]]:
    """:func:`_group_members` of several groups, from one pass over ``/proc``."""
    members: dict[int, list[int]] = {pgid: [] for pgid in pgids}
    wanted = {str(pgid): pgid for pgid in members}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile, or not Linux's format
            continue
        if len(fields) > 2 and fields[2] in wanted:
            members[wanted[fields[2]]].append(int(stat.parent.name))
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


def kill_group(proc: subprocess.Popen[Any], members: list[int] | None = None) -> None:
    """Kill ``proc`` and every process of its process group (it must have been started with ``start_new_session``).

    ``members`` are the group's processes when the caller has just listed them (:func:`_groups_members`, one pass
    over ``/proc`` for several groups); default: listed here.

    The group is signalled before the leader is reaped, so its id cannot have been reused; the group's other
    processes are reaped too, once re-parented to rag-gate (:func:`_become_subreaper`), so none is left as a
    zombie. Processes that left the group themselves (``setsid``) are out of reach here; the sandbox's sweep of the
    pipeline user kills those.

    Source: kill(2) and setsid(2): a negative pid signals the process group; prctl(2) ``PR_SET_CHILD_SUBREAPER``.
    """
    members = [pid for pid in (_group_members(proc.pid) if members is None else members) if pid != proc.pid]
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


class FinalCallFailed(CallFailed):
    """A call that failed in a way a retry would repeat (a result over :data:`~gate._worker.MAX_REPLY_BYTES`)."""


class _Worker:
    """One long-lived worker subprocess serving calls to ``module:function``.

    Its replies are read by the calling thread itself: :meth:`_readline` waits in ``poll(2)``, which returns as
    soon as the worker has written (or exited, or the timeout ran out): nothing sleeps between checks, and no
    reader thread has to be woken between a reply and the next case.
    """

    def __init__(self, spec: PipelineSpec, sandbox: Sandbox, tmpdir: Path):
        self._spec = spec
        self._sandbox = sandbox
        self._tmpdir = tmpdir
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._buffer = bytearray()
        self._output: Forwarder | None = None
        self.closed = False
        """Set by :meth:`WorkerPool.close`: the worker is not started again (a call in flight fails)."""

    def spawn(self) -> None:
        """Start the worker process (without waiting for it: :meth:`call` waits for its "ready" line)."""
        spec, sandbox = self._spec, self._sandbox
        env = sandbox.environment(spec.env_passthrough, spec.env, tmpdir=self._tmpdir)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(spec.workdir), env.get("PYTHONPATH")]))
        env[PARENT_PID_VAR] = str(os.getpid())  # the worker dies with rag-gate (gate._worker.die_with_parent)
        if self.closed:  # the pool is being closed (rag-gate stops): no new worker, the call fails at once
            raise CallFailed("rag-gate is stopping")
        self._proc = subprocess.Popen(
            [sandbox.python, "-m", "gate._worker", spec.python],
            cwd=spec.workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout kills what the function started too
            **sandbox.popen_kwargs(),
        )
        assert self._proc.stderr is not None
        self._output = sandbox.forward(self._proc.stderr)  # the worker's output, counted per call (_end_call)
        self._ready = False
        self._buffer = bytearray()

    def _start(self) -> None:
        if self._proc is None:
            self.spawn()
        try:
            ready = self._reply(timeout=self._spec.startup_timeout_s)
        except CallFailed as exc:  # a worker that cannot start would fail every case: stop the run
            raise EvaluationError(f"pipeline {self._spec.python} did not start: {exc} (importing the module)") from None
        if not ready.get("ready"):
            self.stop()
            error = self._sandbox.redactor(str(ready.get("error", "worker did not start")))
            raise (InputError if ready.get("input") else EvaluationError)(f"{self._where()}: {error}")
        self._ready = True

    def _where(self) -> str:
        """``pipeline module:function (rag-gate.yml:3)`` for error messages."""
        return f"pipeline {self._spec.python}" + (f" ({self._spec.origin})" if self._spec.origin else "")

    def _readline(self, timeout: float) -> bytes | None:
        """The worker's next line (b"" once it closed its output), or None when ``timeout`` seconds ran out."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        waiting = select.poll()  # poll(2), unlike select(2), takes any descriptor number
        waiting.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        searched = 0
        while (newline := self._buffer.find(b"\n", searched)) < 0:
            searched = len(self._buffer)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not waiting.poll(math.ceil(remaining * 1000)):
                return None
            chunk = os.read(fd, _READ_SIZE)
            if not chunk:
                return b""
            self._buffer += chunk
            if len(self._buffer) > MAX_REPLY_BYTES + _READ_SIZE:  # the worker bounds its replies: this one did not
                self.stop()
                raise FinalCallFailed(f"the pipeline process sent a reply over {MAX_REPLY_BYTES:,} bytes")
        line = bytes(self._buffer[: newline + 1])
        del self._buffer[: newline + 1]
        return line

    def _end_call(self) -> None:
        """The call (or the worker's start) ended: forward the rest of its output and what it left out, now."""
        if self._output is not None:
            self._output.end_call()

    def _reply(self, timeout: float) -> dict[str, Any]:
        line = self._readline(timeout)
        if line is None:
            self.stop()
            raise CallFailed(f"timeout after {timeout:g} s")
        if not line:
            proc = self._proc
            self.stop()  # what the worker started dies with it; a zombie keeps its exit status
            code = proc.returncode if proc is not None else None
            raise CallFailed(f"pipeline process exited with code {code}")
        self._end_call()  # the worker flushed its output before it replied: the call's output is all in the pipe
        try:
            reply = json.loads(line.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError) as exc:  # not the protocol (or nested deeper than this decoder goes)
            raise CallFailed(f"unreadable reply from the pipeline process: {type(exc).__name__}") from None
        if not isinstance(reply, dict):
            raise CallFailed("unreadable reply from the pipeline process")
        return reply

    def call(self, case: dict[str, Any]) -> dict[str, Any]:
        """Send one case, wait for the reply (at most ``timeout_s``)."""
        if self._proc is None or not self._ready:
            self._start()
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps({"case": case, "options": self._spec.options}) + "\n").encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.stop()
            raise CallFailed("pipeline process died") from None
        reply = self._reply(self._spec.timeout_s)
        if reply.get("fatal"):  # the configured options do not fit the function: every call would fail
            error = self._sandbox.redactor(str(reply.get("error")))
            raise InputError(f"{self._where()}: {error} (check pipeline.options)")
        if not reply.get("ok"):
            failed = FinalCallFailed if reply.get("final") else CallFailed
            raise failed(self._sandbox.redactor(str(reply.get("error", "unknown error"))))
        return reply

    @property
    def pid(self) -> int | None:
        """The worker process's id (and its process group's), None when it does not run."""
        return self._proc.pid if self._proc is not None else None

    def stop(self, members: list[int] | None = None) -> None:
        """Kill the worker process, and every process it started, if it runs (``members``: see :func:`kill_group`)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            kill_group(proc, members)
            self._end_call()  # the group is dead and reaped: its last output is in the pipe
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()


class WorkerPool:
    """The worker processes of a ``python:`` pipeline, all spawned when the pool is made.

    Their interpreters start (and import the pipeline's module) while rag-gate goes on preparing the run; each is
    waited for on its first call. :meth:`close` (or leaving the ``with`` block) kills every worker and what it
    started, sweeps the pipeline user's processes and removes the pipeline's scratch directory.

    Args:
        spec: the pipeline section of the config (``spec.python`` set).
        sandbox: where the workers run (default: :meth:`Sandbox.from_environ` of ``os.environ``).
        size: how many workers (default and at most ``spec.concurrency``; at least 1).
    """

    def __init__(self, spec: PipelineSpec, sandbox: Sandbox | None = None, size: int | None = None):
        self.spec = spec
        self.sandbox = sandbox or Sandbox.from_environ(os.environ)
        self._scratch = self.sandbox.scratch()
        tmpdir = self._scratch.__enter__()
        self.workers = [
            _Worker(spec, self.sandbox, tmpdir) for _ in range(max(1, min(size or spec.concurrency, spec.concurrency)))
        ]
        try:
            for worker in self.workers:
                worker.spawn()
        except BaseException:
            self.close()
            raise

    def serve(self, jobs: Iterable[tuple[GoldenCase, int]], on_result: Callable[[Prediction], None]) -> None:
        """Call the pipeline for each (case, repeat), one call per worker at a time (see :func:`run_python`)."""
        _serve(self.spec, jobs, on_result, self.sandbox, self.workers)

    def close(self) -> None:
        """Kill the workers and what they started; sweep; remove the scratch directory."""
        for worker in self.workers:
            worker.closed = True
        try:
            groups = _groups_members(pid for worker in self.workers if (pid := worker.pid) is not None)
            for pgid in groups:  # every group signalled first: they die together, then each is reaped
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
            for worker in self.workers:
                pid = worker.pid
                worker.stop(groups.get(pid) if pid is not None else None)  # a worker respawned meanwhile: listed
        finally:
            try:
                self.sandbox.sweep()
            finally:
                self._scratch.__exit__(None, None, None)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


ROW_KEYS = ("id", "repeat")
"""Keys of a prediction row that rag-gate sets from the job: a pipeline's return value never decides them."""


def _to_prediction(case: GoldenCase, repeat: int, reply: dict[str, Any], source: str, redactor: Redactor) -> Prediction:
    """The prediction row of one call: the job's ``id`` and ``repeat``, the function's other keys.

    ``id`` and ``repeat`` in the return value (a framework's response echoing a request id) are ignored: the row
    belongs to the case and repeat that were asked, whatever the function says.

    Raises:
        CallFailed: the return value is not a valid prediction (``bad return value: ...``).
    """
    result = reply["result"]
    if not isinstance(result, dict):
        raise CallFailed(f"expected a dict with 'answer' and 'retrieved', got {type(result).__name__}")
    try:
        fields = redactor.redact({k: v for k, v in result.items() if k not in ROW_KEYS})
    except RecursionError:
        raise CallFailed("bad return value: nested too deeply (RecursionError)") from None
    record = {**fields, "id": case.id, "repeat": repeat}
    if "latency_ms" not in record and reply.get("warmup"):
        record["warmup_ms"] = reply.get("latency_ms")  # a worker's cold start is not latency
    record.setdefault("latency_ms", None if "warmup_ms" in record else reply.get("latency_ms"))
    try:
        validate(record, "prediction", source, None)
        return prediction_from_record(record)
    except InputError as exc:
        raise CallFailed(f"bad return value: {exc}") from None
    except RecursionError:
        raise CallFailed("bad return value: nested too deeply (RecursionError)") from None


def run_python(
    spec: PipelineSpec,
    jobs: Iterable[tuple[GoldenCase, int]],
    on_result: Callable[[Prediction], None],
    *,
    sandbox: Sandbox | None = None,
    pool: WorkerPool | None = None,
) -> None:
    """Call ``spec.python`` for each (case, repeat), ``spec.concurrency`` at a time; report each prediction.

    Calls that raise, crash the worker or time out are retried ``spec.retries`` times (retries are never counted
    as repeats); a call that still fails yields a prediction with ``error`` set.

    Args:
        spec: the pipeline section of the config.
        jobs: (case, repeat index) pairs.
        on_result: receives each prediction (redacted), in the order of ``jobs``.
        sandbox: where the workers run (default: :meth:`Sandbox.from_environ` of ``os.environ``).
        pool: workers spawned beforehand (:class:`WorkerPool`, closed by its owner); default: a pool of
            ``spec.concurrency`` workers made here and closed before returning.

    Raises:
        InputError: when the configured module or function does not exist, is not a function, or does not take
            the configured options (named with the config line, the cwd and ``sys.path`` searched).
        EvaluationError: when importing the module fails (every call would fail).

    """
    if pool is not None:
        pool.serve(jobs, on_result)
        return
    with WorkerPool(spec, sandbox, size=len(jobs) if isinstance(jobs, Sized) else None) as own:
        own.serve(jobs, on_result)


def _serve(
    spec: PipelineSpec,
    jobs: Iterable[tuple[GoldenCase, int]],
    on_result: Callable[[Prediction], None],
    sandbox: Sandbox,
    pool: list[_Worker],
) -> None:
    workers: queue.Queue[_Worker] = queue.Queue()
    for worker in pool:
        workers.put(worker)
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(spec.retries + 1),
        retry=tenacity.retry_if_exception_type(CallFailed) & tenacity.retry_if_not_exception_type(FinalCallFailed),
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

    threads = ThreadPoolExecutor(len(pool))
    try:
        for prediction in threads.map(one, jobs):
            on_result(prediction)
    except Exception:  # a call that stops the run (bad options, a module that cannot start): the others finish
        threads.shutdown(cancel_futures=True)
        raise
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: do not wait for calls in flight (the pool's close kills them)
        for worker in pool:
            worker.closed = True
        threads.shutdown(wait=False, cancel_futures=True)
        raise
    threads.shutdown()


def substitute(template: str, values: dict[str, str]) -> str:
    """``template`` with every ``{name}`` of ``values`` replaced by its value, in one pass.

    A value is never read again for placeholders: a path that contains ``{golden}`` or ``{repeat}`` (a checkout in
    ``/tmp/{golden}/``) is inserted as it is. Braces that name no placeholder (awk, JSON) are left alone.
    """
    if not values:
        return template
    pattern = re.compile("|".join(re.escape("{" + name + "}") for name in values))
    return pattern.sub(lambda match: values[match.group(0)[1:-1]], template)


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
            command = substitute(
                spec.command,
                {"golden": shlex.quote(str(golden_path)), "predictions": shlex.quote(str(out)), "repeat": str(repeat)},
            )
            start = time.perf_counter()
            try:
                env = sandbox.environment(spec.env_passthrough, spec.env, tmpdir=scratch)
                code = run_shell(command, cwd=spec.workdir, env=env, sandbox=sandbox, timeout=budget)
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
                    writing(kept),
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


def run_shell(
    command: str, *, cwd: Path, env: dict[str, str], sandbox: Sandbox, timeout: float | None = None
) -> int | None:
    """Run ``command`` through the shell in the sandbox, its output forwarded; its exit code, or None on timeout.

    The one way rag-gate runs a shell command of the user's (the ``command:`` pipeline, the setup command). The
    shell runs in its own process group (session), which is killed when it times out, when rag-gate is interrupted
    (Ctrl-C, SIGTERM, SIGHUP: a ``KeyboardInterrupt`` at any point after the shell started, its output pump's start
    included) and once the shell has exited (background processes it left behind): nothing it started outlives it.
    """
    proc: subprocess.Popen[str] | None = None
    pump = None
    code: int | None = None
    try:
        proc = subprocess.Popen(  # noqa: S602 - the config's or the workflow's own command
            command,
            shell=True,
            cwd=cwd,
            env=env,
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
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    finally:  # the new session does not get the terminal's signal: its group is killed here, whatever happened
        if proc is not None:
            kill_group(proc)
        if pump is not None:  # the group is dead: its output is forwarded and counted before this returns
            pump.end_call()
    return code
