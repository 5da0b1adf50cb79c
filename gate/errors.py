"""Errors that carry the process exit code (DESIGN §6).

Exit codes: 0 pass · 1 regression (the gate failed) · 2 bad input or usage · 3 the evaluation itself could
not run. Core modules raise these; only ``gate.cli`` turns them into a message and an exit code.
"""

from __future__ import annotations


class GateError(Exception):
    """Base class of every error rag-gate reports to a user; ``exit_code`` is what the CLI exits with."""

    exit_code = 3


class InputError(GateError):
    """Bad input or usage: a malformed file, a missing field, an unknown config key (exit code 2).

    The message is one line, ``file:line: field: message`` where a file and line are known.
    """

    exit_code = 2


class EvaluationError(GateError):
    """The evaluation itself could not run: the pipeline or the judge failed beyond recovery (exit code 3)."""

    exit_code = 3


class WriteError(EvaluationError):
    """An output could not be written: a read-only or full file system, a file where a folder should be (exit 3).

    The message is one line, ``PATH: cannot write: REASON`` (``cannot remove``, ``cannot move it aside`` for those
    operations), naming the file or directory rag-gate was writing, so an environment problem reads as one and
    never as an internal error.
    """

    exit_code = 3

    def __init__(self, path: object, reason: BaseException | str, *, doing: str = "write") -> None:
        self.path = str(path)
        self.reason = reason_text(reason) if isinstance(reason, BaseException) else reason
        super().__init__(f"{self.path}: cannot {doing}: {self.reason}")


def reason_text(exc: BaseException) -> str:
    """The human part of an ``OSError`` (``No space left on device``), else the exception's text."""
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def located(path: object, line: int | None, field: str | None, message: str) -> str:
    """Format ``file:line: field: message`` (parts that are unknown are left out)."""
    where = str(path)
    if line is not None:
        where += f":{line}"
    return f"{where}: {field}: {message}" if field else f"{where}: {message}"
