"""Errors that carry the process exit code (DESIGN §6).

Exit codes: 0 pass · 1 regression (the gate failed) · 2 bad input or usage · 3 the evaluation itself could
not run · 4 ``compare --adaptive`` not settled, run the next batch (no error: ``gate.cli.common.NOT_SETTLED``). Core
modules raise these; only ``gate.cli`` turns them into a message and an exit code.
"""

from __future__ import annotations

from collections.abc import Sequence

from gate.sanitize import one_line, shown


class GateError(Exception):
    """Base class of every error rag-gate reports to a user; ``exit_code`` is what the CLI exits with."""

    exit_code = 3
    problems: tuple[str, ...] = ()
    """The problems of :meth:`listing`, one per printed line (empty: the message is one problem)."""

    @classmethod
    def listing(cls, problems: Sequence[str]) -> GateError:
        """An error listing several problems, printed one per line (its message joins them with newlines)."""
        error = cls("\n".join(problems))
        error.problems = tuple(problems)
        return error

    def lines(self) -> list[str]:
        """The message as printed lines: each problem of :meth:`listing`, or the message, on one line each.

        Untrusted text in a message (a pipeline's exception, a config key, a path) keeps no line break: CR, LF and
        every other hidden character are shown escaped (``\\n``, ``\\x01``, ``\\u202e``:
        :func:`gate.sanitize.one_line`).
        """
        return [one_line(problem) for problem in self.problems or (str(self),)]


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
    """Format ``file:line: field: message`` on one line (parts that are unknown are left out).

    Each part may hold untrusted text (a PR's config key, a golden path): it is kept on one line, its hidden
    characters escaped (:func:`gate.sanitize.one_line`, the escapes of :func:`gate.sanitize.shown` that the path
    gets), so the file named is the file meant and it reads the same wherever the message repeats it.
    """
    where = shown(path)
    if line is not None:
        where += f":{line}"
    return f"{where}: {one_line(field)}: {one_line(message)}" if field else f"{where}: {one_line(message)}"


NUL_INPUT = (
    "a path, environment value or command line read from the input holds a NUL byte (\\x00), which the operating "
    "system refuses; remove it"
)
"""The message of a NUL byte that reached an OS call without a check naming its field (exit code 2)."""


def is_nul_error(exc: BaseException) -> bool:
    """True for the ``ValueError: embedded null byte`` an OS call raises for a NUL byte in a path or argument."""
    return isinstance(exc, ValueError) and "null byte" in str(exc)
