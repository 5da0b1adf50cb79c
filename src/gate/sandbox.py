"""Where the pipeline (code of the side under test, untrusted on a PR) runs, and what it can reach (DESIGN §8).

- **Environment**: an allow-list (:data:`ENV_ALLOWED`: what a process needs to run — ``PATH``, ``HOME``, locale,
  time zone, temporary directory, Python's own switches, TLS trust and proxies) plus the variables the (base)
  config passes through *by name* (``pipeline.env_passthrough``) and the config's literal ``pipeline.env``. The
  GitHub token, the judge's key, the cache signing key and everything else stay out; :data:`NEVER_PASSED` cannot
  be passed through at all.
- **User**: when rag-gate runs as root and ``RAG_GATE_PIPELINE_USER`` names a user (the action's image creates
  ``rag-gate-pipeline``), the pipeline, its workers and the setup command run as that user (setuid/setgid in the
  child, no supplementary groups). It cannot read rag-gate's ``/proc/<pid>/environ`` or memory, nor write what
  root wrote (output, cache, base results); it gets its own ``HOME`` and a private ``TMPDIR``, and every process it
  left behind is killed when a pipeline phase ends.
- **The gate's own process** (:func:`protect_process`): not dumpable (``prctl(PR_SET_DUMPABLE, 0)``: processes
  of the same non-root user cannot read its ``/proc/<pid>/environ`` or memory, nor ptrace it), and the values of
  variables outside the allow-list and secrets given as arguments are overwritten in its original environment and
  command-line memory, which ``/proc/<pid>/environ`` and ``/proc/<pid>/cmdline`` show.

Limits: without a separate user (running locally as yourself), the pipeline runs with your own rights: it can read
your files (including ``.git/config`` credentials), and as root it can read rag-gate's memory. See README, "Security".

Source: proc(5) (``/proc/<pid>/stat`` fields 48–51, ``environ``, ``cmdline``); prctl(2) ``PR_SET_DUMPABLE``;
kill(2) (``kill(-1, sig)`` as an unprivileged user signals exactly that user's processes); Python ``subprocess``
(``user``, ``group``, ``extra_groups``, ``umask``).
"""

from __future__ import annotations

import codecs
import ctypes
import fcntl
import logging
import os
import pwd
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gate.errors import EvaluationError
from gate.redact import SECRET_NAMES, Redactor
from gate.sanitize import encodable, neutralize_line

log = logging.getLogger("rag-gate")

ENV_ALLOWED = frozenset(
    {
        # the basics of a process: where programs are, who and where it is, its terminal and shell
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM",
        # locale and time zone (LC_* by prefix)
        "LANG", "LANGUAGE", "TZ",
        # temporary files
        "TMPDIR", "TEMP", "TMP",
        # Python: the virtual environment and the interpreter's own switches
        "VIRTUAL_ENV", "PYTHONPATH", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONNOUSERSITE", "PYTHONSAFEPATH",
        # shared libraries (CUDA, conda) and TLS trust for HTTPS clients
        "LD_LIBRARY_PATH", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
        # proxies, without which a pipeline behind one cannot reach its model
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    }
)  # fmt: skip
"""Variables of rag-gate's environment that the pipeline gets (plus every ``LC_*``)."""
ENV_ALLOWED_PREFIXES = ("LC_",)
PIPELINE_USER_VAR_NAME = "RAG_GATE_PIPELINE_USER"
NEVER_PASSED = frozenset(
    {*SECRET_NAMES, "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_RESULTS_URL", "ACTIONS_CACHE_URL", PIPELINE_USER_VAR_NAME}
)
"""Variables ``pipeline.env_passthrough`` may not name: the GitHub token, the cache signing key, the runner's own."""
PIPELINE_USER_VAR = PIPELINE_USER_VAR_NAME
"""Names the user the pipeline runs as, when rag-gate runs as root (set in the action's image)."""
PIPELINE_PYTHON_VAR = "RAG_GATE_PIPELINE_PYTHON"
"""The Python the ``python:`` adapter's workers run with (default: rag-gate's own); its ``bin`` leads ``PATH``."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_allowed(name: str) -> bool:
    """True when the variable ``name`` of rag-gate's environment is given to the pipeline without being asked."""
    return name in ENV_ALLOWED or name.startswith(ENV_ALLOWED_PREFIXES)


def check_passthrough(name: str) -> str | None:
    """Why ``name`` cannot be in ``pipeline.env_passthrough``, or None when it can.

    Args:
        name: a variable name.

    Returns:
        A one-line reason, or None.
    """
    if not _ENV_NAME.match(name):
        return f"'{name}' is not an environment variable name"
    if name in NEVER_PASSED or name.startswith("INPUT_"):
        return f"'{name}' is never given to the pipeline (it holds the GitHub token or rag-gate's own secrets)"
    return None


@dataclass(frozen=True)
class PipelineUser:
    """The unprivileged user the pipeline runs as."""

    name: str
    """User name."""
    uid: int
    """User id (never 0)."""
    gid: int
    """Primary group id."""
    home: Path
    """Home directory."""


def pipeline_user(environ: Mapping[str, str]) -> PipelineUser | None:
    """The user named by ``RAG_GATE_PIPELINE_USER`` when rag-gate runs as root, else None (no switch possible).

    Raises:
        EvaluationError: the variable names a user that does not exist (a broken image).
    """
    name = environ.get(PIPELINE_USER_VAR, "")
    if not name or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise EvaluationError(f"{PIPELINE_USER_VAR}={name}: no such user (the pipeline user must exist)") from None
    if entry.pw_uid == 0:
        raise EvaluationError(f"{PIPELINE_USER_VAR}={name}: that is root; the pipeline must run unprivileged")
    return PipelineUser(entry.pw_name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


def neutralize(line: str) -> str:
    """A line of the pipeline's output, made unable to act as a GitHub workflow command (``::error::``...).

    A line that starts with ``::`` is shown as ``[pipeline] ::…``; a legacy ``##[`` command anywhere in the line is
    escaped (:func:`gate.sanitize.neutralize_line`); lone surrogates are replaced.
    """
    line = "[pipeline] " + line if line.lstrip().startswith("::") else line
    return neutralize_line(encodable(line))


@dataclass(frozen=True)
class Sandbox:
    """How a pipeline process is started: its environment, its user, and the redaction of what it prints."""

    environ: Mapping[str, str]
    """rag-gate's environment: the source of the allow-listed and passed-through values."""
    redactor: Redactor = field(default_factory=Redactor)
    """Applied to everything that comes back from the pipeline."""
    user: PipelineUser | None = None
    """Run as this user (rag-gate must be root), or as rag-gate's own user when None."""
    python: str = sys.executable
    """Interpreter of the ``python:`` adapter's workers."""

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str], *, secrets: Iterable[str | None] = (), secret_names: Iterable[str] = ()
    ) -> Sandbox:
        """The sandbox for this process: user and Python from ``RAG_GATE_PIPELINE_*``, secrets from ``environ``.

        Args:
            environ: rag-gate's environment (``os.environ``).
            secrets: more secret values to redact (a ``--github-token`` given as an argument).
            secret_names: more variables whose values are secrets (the judge's ``api_key_env``).

        Raises:
            EvaluationError: ``RAG_GATE_PIPELINE_USER`` names no user.
        """
        environ = dict(environ)
        return cls(
            environ=environ,
            redactor=Redactor.from_environ(environ, secret_names, secrets),
            user=pipeline_user(environ),
            python=environ.get(PIPELINE_PYTHON_VAR) or sys.executable,
        )

    def environment(
        self, passthrough: Iterable[str] = (), literal: Mapping[str, str] | None = None, *, tmpdir: Path | None = None
    ) -> dict[str, str]:
        """The pipeline's environment: the allow-list, then ``passthrough`` by name, then ``literal`` values.

        Args:
            passthrough: names of variables of rag-gate's environment to pass (unset ones are skipped).
            literal: the config's ``pipeline.env``.
            tmpdir: the pipeline's ``TMPDIR``.

        Returns:
            The environment mapping for ``subprocess``.
        """
        env = {k: v for k, v in self.environ.items() if is_allowed(k)}
        env |= {k: self.environ[k] for k in passthrough if k in self.environ and check_passthrough(k) is None}
        env.setdefault("PATH", os.defpath)
        if self.python != sys.executable:
            bin_dir = Path(self.python).parent
            env["PATH"] = os.pathsep.join([str(bin_dir), env["PATH"]])
            if (bin_dir.parent / "pyvenv.cfg").is_file():
                env["VIRTUAL_ENV"] = str(bin_dir.parent)
        if self.user is not None:
            env |= {"HOME": str(self.user.home), "USER": self.user.name, "LOGNAME": self.user.name}
        if tmpdir is not None:
            env |= {"TMPDIR": str(tmpdir), "TEMP": str(tmpdir), "TMP": str(tmpdir)}
        env |= dict(literal or {})
        return env

    def popen_kwargs(self) -> dict[str, Any]:
        """``subprocess`` arguments that drop to the pipeline user (none without one)."""
        if self.user is None:
            return {}
        return {"user": self.user.uid, "group": self.user.gid, "extra_groups": [], "umask": 0o022}

    @contextmanager
    def scratch(self) -> Iterator[Path]:
        """A private temporary directory the pipeline can write (owned by its user); removed afterwards."""
        path = Path(tempfile.mkdtemp(prefix="rag-gate-pipeline-"))
        try:
            if self.user is not None:
                os.chown(path, self.user.uid, self.user.gid)
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def sweep(self) -> None:
        """Kill every process the pipeline user still runs (daemons it left behind); nothing without a user."""
        if self.user is None:
            return
        subprocess.run(  # the shell's kill(-1) signals every process of the user but the shell itself
            ["/bin/sh", "-c", "kill -9 -1 2>/dev/null; exit 0"],
            env={"PATH": os.defpath},
            cwd="/",
            check=False,
            timeout=30,
            **self.popen_kwargs(),
        )

    def forward(
        self, stream: IO[str] | IO[bytes], sink: IO[str] | None = None, budget: OutputBudget | None = None
    ) -> Forwarder:
        """Copy the pipeline's output to rag-gate's stderr, line by line, redacted, bounded, in a daemon thread.

        Lines are also made unable to act as workflow commands (:func:`neutralize`). At most ``budget.limit`` bytes
        are forwarded per call (:data:`MAX_FORWARDED_BYTES`) and at most :data:`MAX_FORWARDED_LINE` of one line;
        the rest is read and dropped (memory stays bounded whatever the pipeline writes), and one line says how many
        bytes were left out, when the call ends (:meth:`Forwarder.end_call`) or the stream does.

        Args:
            stream: the pipeline's stdout or stderr, the read end of a pipe (text or bytes; only its file
                descriptor is read, then it is closed once the stream ends).
            sink: where to write (default: ``sys.stderr`` at the time of each write).
            budget: the bytes left to forward per call. Default: a new :class:`OutputBudget`.

        Returns:
            The :class:`Forwarder`: the owner of a long-lived process (the ``python:`` workers) calls its
            :meth:`~Forwarder.end_call` at the end of each call, and once the process is killed.
        """
        return Forwarder(stream, self.redactor, sink, budget or OutputBudget())


MAX_FORWARDED_BYTES = 1024 * 1024
"""The most bytes of a pipeline's output (stdout and stderr) rag-gate forwards to its own stderr per call (1 MiB): per
case for ``python:`` pipelines, per run for a ``command:`` pipeline and the setup command. What is over it is read and
dropped, and one line says how many bytes were left out: a debug print in a loop cannot fill the CI job log."""
MAX_FORWARDED_LINE = 16 * 1024
"""The most bytes of one line of pipeline output forwarded (16 KiB); the rest of the line is left out (counted)."""
_REDACT_MARGIN = 4096
"""Bytes read past a cut and redacted with it, so that a secret across the cut is masked, never printed in part."""
_PIECE = MAX_FORWARDED_LINE + _REDACT_MARGIN
"""The most bytes of one line handled at a time."""
_READ_SIZE = 1 << 16
"""Bytes read from the pipe at a time."""


class OutputBudget:
    """The bytes of pipeline output still to forward in the current call, and those left out.

    Not thread-safe by itself: the :class:`Forwarder` that owns it uses it under its lock.

    Args:
        limit: bytes forwarded per call (:data:`MAX_FORWARDED_BYTES`).
    """

    def __init__(self, limit: int = MAX_FORWARDED_BYTES) -> None:
        self.limit = limit
        self._left = limit
        self._dropped = 0

    def take(self, n: int) -> int:
        """Take up to ``n`` bytes of the budget; how many may be forwarded (the rest is counted as left out)."""
        allowed = min(n, self._left)
        self._left -= allowed
        self._dropped += n - allowed
        return allowed

    def give_back(self, n: int) -> None:
        """``n`` bytes taken were not forwarded after all (a line cut short): left out, and back in the budget."""
        self._left += n
        self._dropped += n

    def skip(self, n: int) -> None:
        """Count ``n`` bytes as left out without taking them (the rest of a line cut short)."""
        self._dropped += n

    def end(self) -> str | None:
        """The call ended: the line that reports the bytes it left out (None when none); a full budget for the next."""
        left_out = self._dropped
        self._left, self._dropped = self.limit, 0
        if not left_out:
            return None
        return (
            f"rag-gate: … {left_out:,} bytes of pipeline output left out (at most {self.limit:,} bytes forwarded "
            f"per call, {MAX_FORWARDED_LINE:,} per line)\n"
        )


def _unread_bytes(fd: int) -> int:
    """Bytes written into the pipe ``fd`` and not read yet (``ioctl(FIONREAD)``, ioctl_pipe(2))."""
    return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])


class Forwarder:
    """Forwards one stream of pipeline output (made by :meth:`Sandbox.forward`), call by call, each counted once.

    A daemon thread forwards the stream as it comes. :meth:`end_call` ends a call: the calling thread forwards
    what the pipe still holds (every byte written before it was called: a worker flushes its output before it
    replies, a killed process group has written its last), ends a line left open, writes the line counting what the
    call left out, and gives the next call a full budget. So each call's count follows its own output, before any
    of the next call's, and is written before the call returns; the thread writes the stream's last count when
    the stream ends (output of a process that left the group). Bytes are read only under one lock, and only when
    they are there (poll(2), FIONREAD), so neither thread ever blocks on a read while holding it, and nothing waits
    for a time: what a process still writes after the call's end (a thread of the pipeline's, a process that left
    the group) counts towards the next call, or the stream's end.

    Args:
        stream: the read end of the pipe (only its file descriptor is read; closed when the stream ends).
        redactor: applied to every line forwarded.
        sink: where to write (None: ``sys.stderr`` at the time of each write).
        budget: the bytes forwarded per call.
    """

    def __init__(self, stream: IO[str] | IO[bytes], redactor: Redactor, sink: IO[str] | None, budget: OutputBudget):
        self._stream = stream
        self._fd = stream.fileno()
        self._redactor = redactor
        self._sink = sink
        self._budget = budget
        self._lock = threading.Lock()
        self._buffer = bytearray()  # read, not yet forwarded: at most a piece and a read
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._skipping = False  # the rest of a line that was cut short
        self._ended = False  # the stream ended (and was closed)
        self._thread = threading.Thread(target=self._pump, name="rag-gate-forward", daemon=True)
        self._thread.start()

    def end_call(self) -> None:
        """The call ended: forward what the pipe holds now, then report what the call left out (once)."""
        with self._lock:
            try:
                unread = 0 if self._ended else _unread_bytes(self._fd)
                while unread > 0 and (chunk := os.read(self._fd, min(unread, _READ_SIZE))):
                    unread -= len(chunk)
                    self._feed(chunk)
            except OSError:  # the pipe failed: the thread ends the stream
                pass
            self._end()

    def join(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` seconds) for the stream to end and its last count to be written."""
        self._thread.join(timeout)

    def _pump(self) -> None:
        ready = select.poll()
        ready.register(self._fd, select.POLLIN)
        while True:
            ready.poll()  # data, or the stream's end
            with self._lock:
                if not ready.poll(0):  # end_call read it meanwhile
                    continue
                try:
                    chunk = os.read(self._fd, _READ_SIZE)
                except OSError:
                    chunk = b""
                if chunk:
                    self._feed(chunk)
                    continue
                self._end()
                self._ended = True
                self._stream.close()
                return

    def _end(self) -> None:
        """Forward the line left open, write the count of what was left out, start a new call."""
        self._feed(b"", end=True)
        self._skipping = False
        self._decoder.reset()
        if (note := self._budget.end()) is not None:
            self._write(note)

    def _feed(self, chunk: bytes, end: bool = False) -> None:
        """Forward the lines (pieces of at most :data:`_PIECE` bytes) of what was read; at ``end``, the rest too."""
        buffer = self._buffer
        buffer += chunk
        start = 0
        while start < len(buffer):
            newline = buffer.find(b"\n", start, start + _PIECE)
            if newline >= 0:
                stop = newline + 1
            elif len(buffer) - start >= _PIECE or end:
                stop = min(start + _PIECE, len(buffer))
            else:
                break
            self._piece(bytes(buffer[start:stop]), end)
            start = stop
        del buffer[:start]

    def _piece(self, piece: bytes, end: bool) -> None:
        """Forward one piece of a line within the budget; count what is left out."""
        complete = piece.endswith(b"\n")
        if self._skipping:
            self._budget.skip(len(piece))
            self._skipping = not complete
            return
        allowed = self._budget.take(len(piece))
        if allowed == 0:
            self._skipping = not complete
            return
        text = self._redactor(self._decoder.decode(piece, final=end))  # the margin too: a secret across a cut
        if allowed < len(piece) or len(piece) > MAX_FORWARDED_LINE:  # over the budget, or a line too long
            cut = min(allowed, MAX_FORWARDED_LINE)
            self._budget.give_back(allowed - cut)
            shown = text.encode("utf-8", "surrogatepass")[:cut].decode("utf-8", "ignore")
            text = shown.rstrip("\n") + " …\n"
            self._decoder.reset()
            self._skipping = not complete
        elif not complete:  # the call's last line, without its newline
            text += "\n"
        self._write(neutralize(text))

    def _write(self, text: str) -> None:
        try:
            out = self._sink or sys.stderr
            out.write(text)
            out.flush()
        except (OSError, ValueError):  # rag-gate's stderr closed: keep draining the pipe
            pass


# ------------------------------------------------------------------------------------ rag-gate's own process

_PR_SET_DUMPABLE = 4


def _memory_span(first: int, last: int) -> tuple[int, int]:
    """(start, end) addresses from ``/proc/self/stat`` fields ``first`` and ``last`` (1-based, proc(5))."""
    after_name = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return int(after_name[first - 3]), int(after_name[last - 3])


def _overwrite(start: int, end: int, edit: Any) -> None:
    """Apply ``edit(bytes) -> bytes`` (same length) to the process memory [start, end)."""
    if not 0 < start < end:
        return
    original = ctypes.string_at(start, end - start)
    changed = edit(original)
    if changed != original and len(changed) == len(original):
        ctypes.memmove(start, changed, len(changed))


def protect_process(environ: Mapping[str, str], secrets: Iterable[str | None] = ()) -> bool:
    """Hide rag-gate's secrets from other processes' view of it (Linux; elsewhere nothing happens).

    Makes the process non-dumpable, overwrites (with ``*``) the values of every variable that the pipeline would
    not get (:func:`is_allowed`) in the original environment block, and every occurrence of ``secrets`` in the
    original argument block: what ``/proc/<pid>/environ`` and ``/proc/<pid>/cmdline`` show. ``os.environ`` and
    ``sys.argv`` are copies and keep their values; the C library's environment is pointed at fresh copies.

    Args:
        environ: ``os.environ`` (its values are restored for the C library).
        secrets: values given on the command line (``--github-token``).

    Returns:
        True when the memory was rewritten, False when the platform does not allow it.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        arg_span, env_span = _memory_span(48, 49), _memory_span(50, 51)
    except (OSError, ValueError, IndexError, AttributeError):
        return False
    hidden: list[str] = []

    def scrub_environ(block: bytes) -> bytes:
        entries = block.split(b"\0")
        for i, entry in enumerate(entries):
            name, sep, value = entry.partition(b"=")
            decoded = name.decode("utf-8", "replace")
            if sep and value and not is_allowed(decoded):
                entries[i] = name + sep + b"*" * len(value)
                hidden.append(decoded)
        return b"\0".join(entries)

    def scrub_arguments(block: bytes) -> bytes:
        for secret in {s for s in secrets if s}:
            raw = secret.encode("utf-8")
            block = block.replace(raw, b"*" * len(raw))
        return block

    _overwrite(*env_span, scrub_environ)
    _overwrite(*arg_span, scrub_arguments)
    for name in hidden:
        if name in environ:
            os.putenv(name, environ[name])
    return True
