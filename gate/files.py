"""Safe file operations: atomic replacement, output paths that stay inside a root, deletion without following links.

Every file rag-gate rewrites (``predictions.jsonl`` on resume, ``scores.jsonl``, ``manifest.json``,
``report.json``, ``comment.md``) is written to a fresh temporary file in the same directory, flushed to disk
(``fsync``) and renamed over the target: a kill, a full disk or a file-size limit at any moment leaves either the
old file or the new one, never a truncated mix. The rename replaces a symbolic link at the target instead of
writing through it, and the temporary file is created with ``O_EXCL`` under a random name, so a planted link
cannot redirect the write either.

Source: POSIX ``rename(2)`` (atomic replacement within one file system) and ``fsync(2)``; Python's
``shutil.rmtree`` (``avoids_symlink_attacks``) and ``tempfile.mkstemp``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from gate.errors import EvaluationError, InputError, WriteError, reason_text


def _fsync_dir(directory: Path) -> None:
    """Flush a directory entry (the rename) to disk; a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_writer(path: Path | str, *, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """Open a text file that replaces ``path`` atomically when the ``with`` block ends without an error.

    On an error (including a full disk or ``KeyboardInterrupt``) the temporary file is removed and ``path`` is
    left as it was. A character the encoding cannot hold (a lone surrogate in untrusted text) is written as
    ``?``, never a crash after the work is done.

    Args:
        path: the file to (re)write; its directory must exist.
        encoding: text encoding.

    Yields:
        A writable text handle.

    Raises:
        EvaluationError: the file cannot be written (disk full, file-size limit, permissions): exit code 3.
    """
    path = Path(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise EvaluationError(f"{path}: cannot write: {exc.strerror or exc}") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding=encoding, errors="replace", newline="") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise EvaluationError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_text_atomic(path: Path | str, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (see :func:`atomic_writer`).

    Raises:
        EvaluationError: the file cannot be written.
    """
    with atomic_writer(path) as handle:
        handle.write(text)


def _reason(path: Path, exc: OSError, *, directory: bool = False) -> str:
    """Why ``path`` (a ``directory``, or a file) cannot be written; names a file standing where a folder should be."""
    if isinstance(exc, NotADirectoryError | FileExistsError):
        for part in (*reversed(path.parents), *([path] if directory else [])):
            if part.exists() and not part.is_dir():
                return "it is a file, not a directory" if part == path else f"{part} is a file, not a directory"
    return reason_text(exc)


def make_dirs(path: Path | str) -> Path:
    """Create the directory ``path`` and its parents (an existing directory is fine).

    Returns:
        ``path`` as a Path.

    Raises:
        WriteError: it cannot be created (a file in the way, a read-only or full file system): exit code 3,
            ``PATH: cannot write: REASON``.
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(path, _reason(path, exc, directory=True)) from None
    return path


def make_parent(path: Path | str) -> Path:
    """Create the directory of the file ``path`` (and its parents); an error names the file.

    Returns:
        ``path`` as a Path.

    Raises:
        WriteError: the directory cannot be created: ``PATH: cannot write: REASON`` (exit code 3).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(path, _reason(path, exc)) from None
    return path


@contextlib.contextmanager
def writing(path: Path | str) -> Iterator[Path]:
    """Report an ``OSError`` raised in the ``with`` block as :class:`WriteError` naming ``path``.

    For writes that are not atomic replacements (a chart a library saves, a file opened for appending); wrap
    only the writing itself, so that a read error is not reported as a write error.
    """
    path = Path(path)
    try:
        yield path
    except OSError as exc:
        raise WriteError(path, _reason(path, exc)) from None


def write_all(fd: int, data: bytes, path: Path | str, *, sync: bool = True) -> None:
    """Append ``data`` to the open file ``fd`` (opened with ``O_APPEND``) all or nothing.

    Every byte is written (a short write is continued) and, with ``sync``, flushed to disk (``fsync``); when a
    write fails (full disk, file-size limit) or is interrupted, the file is truncated back to its size before the
    call, so a reader never sees a partial line. Appends are expected from one writer at a time.

    Raises:
        WriteError: the data cannot be written (the file is left as it was).
    """
    size = os.fstat(fd).st_size
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            try:
                os.fsync(fd)
            except OSError as exc:  # a pipe or a character device (e.g. /dev/stdout) cannot be synced
                if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EROFS):
                    raise
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        if isinstance(exc, OSError):
            raise WriteError(path, reason_text(exc)) from None
        raise


def open_append(path: Path | str, *, readable: bool = False) -> int:
    """Open ``path`` for appending (created if missing) and return its descriptor, for :func:`write_all`.

    With ``readable``, the descriptor can also be read (``os.pread``).

    Raises:
        WriteError: it cannot be opened for writing.
    """
    path = Path(path)
    try:
        flags = (os.O_RDWR if readable else os.O_WRONLY) | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        return os.open(path, flags, 0o666)
    except OSError as exc:
        raise WriteError(path, _reason(path, exc)) from None


def append_text(path: Path | str, text: str) -> None:
    """Append ``text`` (UTF-8) to ``path`` all or nothing (see :func:`write_all`); the file is created if missing.

    Raises:
        WriteError: the text cannot be written; the file keeps its previous content.
    """
    fd = open_append(path)
    try:
        write_all(fd, text.encode("utf-8", errors="replace"), path)
    finally:
        os.close(fd)


def remove_tree(path: Path | str) -> None:
    """Delete ``path`` without following symbolic links: a link is unlinked, never its target.

    A directory is removed with ``shutil.rmtree``, which does not descend into links (on platforms where
    ``shutil.rmtree.avoids_symlink_attacks`` is true, also not into a link swapped in while it runs).
    A missing path is fine.

    Raises:
        WriteError: the path exists and cannot be removed (exit code 3).
    """
    path = Path(path)
    try:
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise WriteError(path, exc, doing="remove") from None


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or lies under it (both taken as given: resolve them first)."""
    return path == root or root in path.parents


def contained_dir(path: Path | str, root: Path | str, what: str) -> Path:
    """Resolve an output directory named inside ``root``; refuse it when a symbolic link takes it outside.

    A committed ``rag-gate-out -> ../elsewhere`` link must not make rag-gate write or delete outside the checkout.
    A directory named outside ``root`` in the first place (``--out-dir /tmp/out``) is the caller's explicit choice
    and is resolved as is.

    Args:
        path: the directory, absolute or relative to the current directory; it need not exist yet.
        root: the directory it must stay in when it is named inside it (the checkout).
        what: how the user named it, for the message (e.g. ``--out-dir rag-gate-out``).

    Returns:
        The resolved path (symbolic links followed).

    Raises:
        InputError: ``path`` lies inside ``root`` by name but resolves outside it (exit code 2), naming both.
    """
    named = Path(os.path.normpath(os.path.abspath(path)))
    resolved = Path(path).resolve()
    top = Path(root).resolve()
    inside_by_name = is_within(named, top) or is_within(named, Path(os.path.normpath(os.path.abspath(root))))
    if inside_by_name and not is_within(resolved, top):
        raise InputError(
            f"{what}: resolves through a symbolic link to {resolved}, outside the checkout {top}; rag-gate only "
            "writes and deletes inside the checkout (remove the link or choose another directory)"
        )
    return resolved


def refuse_inputs_inside(out_dir: Path | str, inputs: dict[str, Path | None], what: str) -> None:
    """Refuse an output directory that equals or contains one of the run's own input files.

    Args:
        out_dir: the output directory (need not exist).
        inputs: a label (e.g. ``golden``) → the input file, or None when the input is not used.
        what: how the user named the directory (e.g. ``--out out/data``).

    Raises:
        InputError: an input lies in ``out_dir`` or below it (exit code 2), before anything is written.
    """
    out = Path(out_dir).resolve()
    for label, source in inputs.items():
        if source is None:
            continue
        resolved = Path(source).resolve()
        if is_within(resolved.parent, out):
            raise InputError(
                f"{what}: the directory holds the run's own input ({label}: {source}); rag-gate writes "
                "predictions.jsonl, scores.jsonl and manifest.json there, so choose a separate output directory"
            )


def next_free_number(directory: Path, stems: tuple[str, ...]) -> int:
    """The smallest n ≥ 1 above every ``<stem>.previous-<k>.<ext>`` already in ``directory``.

    Args:
        directory: the run directory.
        stems: file names whose archived copies are numbered together (e.g. ``predictions.jsonl``).

    Returns:
        One more than the highest number in use (1 when there is none), so numbers follow the order of runs.
    """
    highest = 0
    for name in stems:
        stem, dot, ext = name.partition(".")
        for found in directory.glob(f"{stem}.previous-*{dot}{ext}"):
            number = found.name[len(stem) + len(".previous-") : len(found.name) - len(dot + ext)]
            if number.isdigit():
                highest = max(highest, int(number))
    return highest + 1


def archive_previous(directory: Path, names: tuple[str, ...]) -> list[Path]:
    """Move the files of a previous run aside as ``<stem>.previous-<n>.<ext>``, all with one new number n.

    Nothing is overwritten: n is above every number already in use.

    Args:
        directory: the run directory.
        names: the file names to move when they exist (e.g. ``predictions.jsonl``, ``manifest.json``).

    Returns:
        The archived paths (empty when none of the files existed).

    Raises:
        WriteError: a file cannot be renamed (exit code 3).
    """
    present = [name for name in names if (directory / name).exists() or (directory / name).is_symlink()]
    if not present:
        return []
    number = next_free_number(directory, names)
    moved = []
    for name in present:
        stem, dot, ext = name.partition(".")
        target = directory / f"{stem}.previous-{number}{dot}{ext}"
        try:
            os.rename(directory / name, target)
        except OSError as exc:
            raise WriteError(directory / name, exc, doing="move it aside") from None
        moved.append(target)
    return moved
