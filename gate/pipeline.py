"""Pipeline adapters: produce one side's predictions (DESIGN §3).

- ``python: module:function`` — called per case in worker subprocesses whose cwd and ``sys.path[0]`` are the side's
  directory, with bounded concurrency, a per-case timeout (the worker is killed and restarted) and retries of
  crashes (tenacity); a case that still fails becomes a prediction row with ``error``.
- ``command: ...`` — a shell template run once per repeat in the side's directory; it must write predictions JSONL
  to ``{predictions}`` (placeholders: ``{golden}``, ``{predictions}``, ``{repeat}``).
- ``predictions: FILE`` — precomputed predictions.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
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
from gate.jsonl import validate
from gate.models import GoldenCase, Prediction
from gate.predictions import load_predictions, prediction_from_record


class CallFailed(Exception):
    """One call of the pipeline failed (exception in the user's function, crash, or timeout)."""


class _Worker:
    """One long-lived worker subprocess serving calls to ``module:function``."""

    def __init__(self, spec: PipelineSpec):
        self._spec = spec
        self._proc: subprocess.Popen[str] | None = None
        self._replies: queue.Queue[str | None] = queue.Queue()

    def _start(self) -> None:
        env = {**os.environ, **self._spec.env}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self._spec.workdir), env.get("PYTHONPATH")]))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "gate._worker", self._spec.python],
            cwd=self._spec.workdir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            text=True,
            encoding="utf-8",
        )
        self._replies = queue.Queue()
        threading.Thread(target=self._read, args=(self._proc, self._replies), daemon=True).start()
        try:
            ready = self._reply(timeout=self._spec.startup_timeout_s)
        except CallFailed as exc:  # a worker that cannot start would fail every case: stop the run
            raise EvaluationError(f"pipeline {self._spec.python} did not start: {exc} (importing the module)") from None
        if not ready.get("ready"):
            self.stop()
            raise EvaluationError(f"pipeline {self._spec.python}: {ready.get('error', 'worker did not start')}")

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
            code = self._proc.wait() if self._proc else None
            self._proc = None
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
        if not reply.get("ok"):
            raise CallFailed(reply.get("error", "unknown error"))
        return reply

    def stop(self) -> None:
        """Kill the worker process if it runs."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


def _to_prediction(case: GoldenCase, repeat: int, reply: dict[str, Any], source: str) -> Prediction:
    result = reply["result"]
    if not isinstance(result, dict):
        raise CallFailed(f"expected a dict with 'answer' and 'retrieved', got {type(result).__name__}")
    record = {"id": case.id, "repeat": repeat, **result}
    record.setdefault("latency_ms", reply.get("latency_ms"))
    try:
        validate(record, "prediction", source, None)
    except InputError as exc:
        raise CallFailed(f"bad return value: {exc}") from None
    return prediction_from_record(record)


def run_python(
    spec: PipelineSpec, jobs: Iterable[tuple[GoldenCase, int]], on_result: Callable[[Prediction], None]
) -> None:
    """Call ``spec.python`` for each (case, repeat), ``spec.concurrency`` at a time; report each prediction.

    Calls that raise, crash the worker or time out are retried ``spec.retries`` times (retries are never counted
    as repeats); a call that still fails yields a prediction with ``error`` set.

    Raises:
        EvaluationError: when the module cannot be imported (every call would fail).

    """
    workers: queue.Queue[_Worker] = queue.Queue()
    for _ in range(spec.concurrency):
        workers.put(_Worker(spec))
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
            return _to_prediction(case, repeat, reply, spec.python or "pipeline")
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
    spec: PipelineSpec, golden_path: Path, repeats: Iterable[int], n_cases: int, work_dir: Path
) -> Iterator[Prediction]:
    """Run ``spec.command`` once per repeat and yield the predictions it wrote.

    The placeholders ``{golden}``, ``{predictions}`` and ``{repeat}`` are replaced (shell-quoted); other braces
    are left alone (awk, JSON). The command writes ``work_dir/command-output-<repeat>.jsonl``, which is kept.

    Raises:
        EvaluationError: when the command fails, times out, writes no file, or writes a malformed one.
    """
    for repeat in repeats:
        out = work_dir / f"command-output-{repeat}.jsonl"
        out.unlink(missing_ok=True)
        command = (
            spec.command.replace("{golden}", shlex.quote(str(golden_path)))
            .replace("{predictions}", shlex.quote(str(out)))
            .replace("{repeat}", str(repeat))
        )
        start = time.perf_counter()
        try:
            done = subprocess.run(
                command,
                shell=True,
                cwd=spec.workdir,
                env={**os.environ, **spec.env},
                timeout=spec.timeout_s * max(n_cases, 1),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise EvaluationError(f"pipeline command timed out (repeat {repeat}): {command}") from None
        if done.returncode != 0:
            raise EvaluationError(f"pipeline command exited with {done.returncode} (repeat {repeat}): {command}")
        if not out.exists():
            raise EvaluationError(f"pipeline command wrote no predictions to {{predictions}}: {command}")
        per_case_ms = (time.perf_counter() - start) * 1000.0 / max(n_cases, 1)
        try:
            predictions = load_predictions(out)
        except InputError as exc:
            raise EvaluationError(f"pipeline command wrote malformed predictions: {exc}") from None
        for prediction in predictions:
            values = prediction.to_dict() | {"repeat": repeat}
            if values.get("latency_ms") is None:
                values["latency_ms"] = per_case_ms
            yield prediction_from_record(values)
