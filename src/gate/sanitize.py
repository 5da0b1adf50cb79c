"""One sanitizer for every text rag-gate prints or writes: untrusted text made encodable, visible and inert.

Untrusted text (answers, questions, chunks, a pipeline's exception messages, a PR's config keys and paths) reaches
rag-gate's stdout and stderr, the files it writes and the PR comment. Three things can go wrong, and this module
is the one place that handles each of them:

- **Unencodable text.** A lone UTF-16 surrogate (``"\\ud83d"``, valid JSON, what a JavaScript service or an LLM
  stream cut inside an emoji produces) cannot be encoded as UTF-8: every output path replaces it with U+FFFD
  (:func:`encodable`; a message shows it escaped, ``\\ud83d``), never fails on it.
- **Hidden text.** Control characters (C0 and C1: NUL, backspace, ``ESC[2K``, OSC 8 hyperlinks) and invisible
  characters (Unicode's format category Cf, the Default_Ignorable_Code_Point set: bidirectional controls,
  zero-width characters, the tag block U+E0000–E0FFF, variation selectors, Hangul fillers, CGJ, U+180E) are
  dropped from text a person or an LLM will read (:func:`clean`: an answer, a question in a report).
  In a message (an error, a warning, a name) they are shown instead, escaped (:func:`shown`, :func:`one_line`:
  ``\\x01``, ``\\u202e``), so what a message names is what the input holds.
- **Workflow commands.** The GitHub Actions runner treats a log line that starts with ``::`` (after leading
  whitespace) as a command (``::error::``, ``::add-mask::``, ``::stop-commands::``), and a line that contains
  ``##[`` anywhere as a legacy command. Untrusted text printed as part of a message is kept on one line
  (:func:`one_line`: CR and LF shown as ``\\r`` and ``\\n``, the escapes :func:`shown` gives a path, so one
  message never shows one name two ways; the ``%0D``/``%0A`` of a command's data are for workflow commands only,
  :mod:`gate.outputs.annotations`), and every line written to rag-gate's stdout and stderr passes
  :class:`GuardedStream`, which escapes a leading ``::`` (``%3A:``) and every ``##[`` (``##\\[``) unless the line
  is one of rag-gate's own commands (:class:`WorkflowCommand`).

Sources: GitHub Actions "Workflow commands for GitHub Actions" (escaping of data and properties); the runner's
``ActionCommand.TryParseV2`` (``::`` after ``TrimStart``) and ``ActionCommand.TryParse`` (``##[`` anywhere in the
line), tried in turn by ``ActionCommandManager.TryProcessCommand``; Unicode 15.1, ``DerivedCoreProperties.txt``
(Default_Ignorable_Code_Point) and ``UnicodeData.txt`` (general categories Cc, Cf, Cs, Zl, Zp).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from typing import IO, Any

_SURROGATE = re.compile("[\ud800-\udfff]")
_INVISIBLE_RANGES = (
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\ufffe\uffff"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
INVISIBLE = re.compile(f"[{_INVISIBLE_RANGES}]")
"""Invisible characters: the format category (Cf), the Default_Ignorable_Code_Point set (zero-width and bidirectional
controls, the tag block, variation selectors, Hangul fillers, CGJ, U+180E) and the noncharacters U+FFFE/U+FFFF."""
_CONTROLS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
_CONTROL = re.compile(f"[{_CONTROLS}]")
_HIDDEN = re.compile(f"[{_CONTROLS}{_INVISIBLE_RANGES}]")
_SEPARATORS = re.compile("[\u2028\u2029]")
_NEWLINES = re.compile(r"\r\n?")
_COMMAND_START = re.compile(r"^(\s*):(?=:)")
_LEGACY_COMMAND = re.compile(r"##\[")
_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")
_UNSHOWN = re.compile(f"[\t\n\r{_CONTROLS}{_INVISIBLE_RANGES}\u2028\u2029\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with every lone surrogate (U+D800–U+DFFF) replaced by U+FFFD, so that UTF-8 can encode it."""
    return _SURROGATE.sub("\ufffd", text)


def strip_controls(text: str) -> str:
    """``text`` encodable and without C0/C1 control characters other than TAB, CR and LF.

    For text that is rag-gate's own layout around already-cleaned values (a rendered comment, a log stream): its
    deliberate invisible characters (the word joiners that break mentions) stay.
    """
    return _CONTROL.sub("", encodable(text))


def visible(text: Any) -> str:
    """``text`` encodable, without control characters other than TAB, CR and LF, without invisible characters.

    U+2028/U+2029 (line and paragraph separators) become a space; CR and LF stay as they are.
    """
    return _SEPARATORS.sub(" ", _HIDDEN.sub("", encodable(str(text))))


def clean(text: Any) -> str:
    """Untrusted text for a reader: encodable, controls and invisible characters dropped, newlines kept.

    CR LF and lone CR become LF; LF and TAB are kept (a layout may mean them); every other C0/C1 control character
    and every :data:`INVISIBLE` character is removed; U+2028/U+2029 become a space.

    Args:
        text: any value (converted with ``str``).

    Returns:
        The text, safe to render in markdown, plain text or a terminal (escaping for the format is the caller's).
    """
    return _NEWLINES.sub("\n", visible(text))


def one_line(text: Any) -> str:
    """Untrusted text as part of one printed line (an error message, a warning): every hidden character escaped.

    The escapes of :func:`shown` (``\\n``, ``\\r``, ``\\t``, ``\\x01``, ``\\u202e``, ``\\udcff``): the line cannot
    be split by the runner or a terminal, nothing in it is hidden or deleted (``a\\x01b`` is not shown as ``ab``), and
    a path or id reads the same in every part of a message. Other characters (``%`` and ``\\`` too) stay as typed:
    this is a message for a person, not a workflow command (those escape their data: :mod:`gate.outputs.annotations`).

    Args:
        text: any value (converted with ``str``).

    Returns:
        One line of text without control or invisible characters.
    """
    return shown(text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in "\t\n\r":
        return {"\t": "\\t", "\n": "\\n", "\r": "\\r"}[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: Any) -> str:
    """A name (a path, an id) as printed: every character that would not show is written as its escape.

    Control characters (C0 and C1, TAB, CR and LF included), :data:`INVISIBLE` characters, U+2028/U+2029 and lone
    surrogates (a file name that is not UTF-8, as ``os.fsdecode`` gives it) become Python-style escapes (``\\x01``,
    ``\\u200b``, ``\\udcff``), so ``x\\x01y`` is never shown as ``xy``: two different names never print alike
    and the printed one can be typed back. Other characters stay as they are.

    Args:
        text: any value (converted with ``str``; a :class:`~pathlib.Path` too).

    Returns:
        One line without control or invisible characters.
    """
    return _UNSHOWN.sub(_escape, str(text))


def unshown(text: str) -> str:
    """The escapes of the characters of ``text`` that would not show (as :func:`shown` writes them), once each.

    Separated by commas, the first five (then ``…``); empty when every character shows. For names that must print
    as they are (case and document ids): a name with ``\\u202e`` (right-to-left override) or ``\\x01`` is refused
    where it is read.
    """
    escapes = list(dict.fromkeys(_escape(match) for match in _UNSHOWN.finditer(text)))
    return ", ".join(escapes[:5] + ["…"] * (len(escapes) > 5))


def hidden_in_id(text: str) -> str | None:
    """Why a case or document id cannot be taken (None when it can): it holds characters that do not show.

    A control character (``\\x01``, a tab, a newline), a bidirectional control (U+202E, which makes ``q1‮txt.exe``
    read backwards) or an invisible format character (U+200B) would make two ids print alike, or an id print as
    another; messages and reports could not name the case it is. The escapes of :func:`unshown`.
    """
    escapes = unshown(text)
    if not escapes:
        return None
    return f"holds characters that do not show ({escapes}: control, bidirectional or invisible format characters)"


def neutralize_line(line: str) -> str:
    """A line made unable to act as a workflow command: a leading ``::`` → ``%3A:``, every ``##[`` → ``##\\[``."""
    return _LEGACY_COMMAND.sub(r"##\\[", _COMMAND_START.sub(r"\1%3A", line))


def inert_json(text: str) -> str:
    """JSON text to print: every ``##[`` (only ever inside a string) written ``##\\u005b``, the same JSON value.

    :class:`GuardedStream` would otherwise escape it as ``##\\[``, which is no JSON escape. A JSON text never puts
    ``::`` at the start of a line (newlines inside strings are ``\\n``).
    """
    return text.replace("##[", "##\\u005b")


class WorkflowCommand(str):
    """A line (or lines) of rag-gate's own workflow commands, built with their data and properties escaped.

    :class:`GuardedStream` writes these as they are; every other text is neutralized. Only
    ``gate.outputs.annotations.annotation`` and ``gate.pr.github.add_mask`` make them.
    """

    __slots__ = ()


class GuardedStream:
    """A text stream (rag-gate's stdout or stderr) through which no untrusted text can act on its reader.

    Every write is made encodable (:func:`encodable`, then the stream's encoding with ``errors="replace"``), loses
    its C0/C1 control characters other than TAB, CR and LF, and has each line neutralized (:func:`neutralize_line`):
    a line cannot start with ``::`` nor contain ``##[``, also when written in pieces. :meth:`command` writes
    rag-gate's own :class:`WorkflowCommand` lines unchanged (encodable).

    Args:
        stream: the wrapped stream (``sys.stdout`` or ``sys.stderr``).
    """

    buffer = None
    """No binary buffer: a writer that found one (click on a misconfigured locale) would bypass the guard."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.RLock()
        """Held from neutralizing a write to writing it (the pipeline's output is forwarded by other threads)."""
        self._lead = ""
        """The current line's text so far, without leading whitespace, up to its first two characters."""
        self._tail = ""
        """The current line's last two characters (a ``##[`` split over two writes)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    @property
    def wrapped(self) -> IO[str]:
        """The stream written to."""
        return self._stream

    def _guard(self, text: str) -> str:
        out = []
        for piece in _LINE_BREAK.split(text):
            if piece in ("\r\n", "\r", "\n"):
                out.append(piece)
                self._lead = self._tail = ""
                continue
            if not self._lead:
                stripped = piece.lstrip()
                if stripped.startswith("::"):
                    piece = piece[: len(piece) - len(stripped)] + "%3A" + stripped[1:]
                    stripped = piece.lstrip()
            elif self._lead == ":" and piece.startswith(":"):
                piece = "%3A" + piece[1:]
                stripped = piece
            else:
                stripped = piece
            joined = self._tail + piece
            piece = _LEGACY_COMMAND.sub(r"##\\[", joined)[len(self._tail) :]
            self._lead = (self._lead + stripped)[:2] if len(self._lead) < 2 else self._lead
            self._tail = (self._tail + piece)[-2:]
            out.append(piece)
        return "".join(out)

    def _write(self, text: str) -> int:
        try:
            try:
                return self._stream.write(text)
            except UnicodeEncodeError:
                encoding = getattr(self._stream, "encoding", None) or "utf-8"
                return self._stream.write(text.encode(encoding, "replace").decode(encoding))
        except BrokenPipeError:
            self._reader_gone()
            return 0

    def _reader_gone(self) -> None:
        """The reader closed the pipe (``rag-gate compare | head``): drop the rest of the output, not the command.

        The stream's descriptor is pointed at ``os.devnull`` so that no later flush (nor the interpreter's at exit)
        raises again; the command goes on and exits with its own code (its results are written to files anyway).
        Source: Python's documentation, "Note on SIGPIPE" (``signal`` module).
        """
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def write(self, text: str) -> int:
        """Write ``text`` encodable, without control characters, each line neutralized."""
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._lock:
            self._write(self._guard(strip_controls(text)))
        return len(text)

    def command(self, line: WorkflowCommand) -> None:
        """Write rag-gate's own workflow command line(s) unchanged, each on a line of its own."""
        with self._lock:
            if self._lead or self._tail:
                self._write("\n")
            self._write(encodable(line).rstrip("\n") + "\n")
            self._lead = self._tail = ""
            self.flush()

    def writelines(self, lines: Any) -> None:
        """Write each of ``lines`` (:meth:`write`)."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush the wrapped stream (nothing when its reader closed the pipe: :meth:`_reader_gone`)."""
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()


def guard_std_streams() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in :class:`GuardedStream` (once; a wrapped stream stays as it is)."""
    if not isinstance(sys.stdout, GuardedStream):
        sys.stdout = GuardedStream(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, GuardedStream):
        sys.stderr = GuardedStream(sys.stderr)  # type: ignore[assignment]


def print_line(text: str, *, err: bool = False) -> None:
    """Print one line of rag-gate's output: a :class:`WorkflowCommand` as it is, any other text guarded.

    On a stream that is not a :class:`GuardedStream` (rag-gate used as a library), the text is neutralized here.
    """
    stream = sys.stderr if err else sys.stdout
    if isinstance(text, WorkflowCommand) and isinstance(stream, GuardedStream):
        stream.command(text)
        return
    if not isinstance(stream, GuardedStream):
        text = "\n".join(neutralize_line(line) for line in encodable(text).split("\n"))
    stream.write(text + "\n")
    stream.flush()
