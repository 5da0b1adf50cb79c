"""Safe file operations: atomic replacement, output paths that stay inside a root, deletion without following links.

Every file rag-gate rewrites (``predictions.jsonl`` on resume, ``scores.jsonl``, ``manifest.json``,
``report.json``, ``comment.md``) is written to a fresh temporary file in the same directory, flushed to disk
(``fsync``) and renamed over the target: a kill, a full disk or a file-size limit at any moment leaves either the
old file or the new one, never a truncated mix. The rename replaces a symbolic link at the target instead of
writing through it, and the temporary file is created with ``O_EXCL`` under a random name, so a planted link
cannot redirect the write either. The file gets the mode an ordinary ``open()`` would give it (0666 less the
umask: 0644 under the usual 022), not ``mkstemp``'s private 0600: in the action rag-gate runs as root and the
job's later steps (artifact upload, test reporters) and the pipeline user must read what it wrote.

Source: POSIX ``rename(2)`` (atomic replacement within one file system) and ``fsync(2)``; Python's
``shutil.rmtree`` (``avoids_symlink_attacks``) and ``tempfile.mkstemp``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from gate.errors import InputError, WriteError, reason_text


def current_umask() -> int:
    """The process's file mode creation mask, read without changing it.

    Linux reports it in ``/proc/self/status``; elsewhere it is read by setting and restoring it (``os.umask`` has
    no getter), which is momentarily visible to other threads.

    Returns:
        The umask, e.g. ``0o022``.
    """
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
        WriteError: the file cannot be written (disk full, file-size limit, permissions): exit code 3.
    """
    path = Path(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise WriteError(path, exc) from None
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "w", encoding=encoding, errors="replace", newline="") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteError(path, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_text_atomic(path: Path | str, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (see :func:`atomic_writer`).

    Raises:
        WriteError: the file cannot be written.
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


def hand_over(path: Path | str, uid: int, gid: int) -> int:
    """Give ``path`` (and, for a directory, everything under it) that this process owns to ``uid``:``gid``.

    For the GitHub Action: rag-gate runs as root in its container, and the job's later steps run as the runner's
    user on the host, where root-owned 0755 folders in the workspace cannot be written into or removed (a later
    step's files, a self-hosted runner's next checkout clean). Handing the outputs to the workspace's owner fixes
    that without making anything writable by anyone else.

    Safe against links: a symbolic link is never followed (the walk opens each directory with ``O_NOFOLLOW``
    relative to its parent's descriptor, and changes owners with ``follow_symlinks=False``), a link itself is left
    as it is, and so is a file with more than one hard link (it also exists elsewhere) and every entry this process
    does not own (it was not made by rag-gate). A path that does not exist is nothing to do.

    Args:
        path: a directory or file.
        uid: the new owner (e.g. the owner of ``GITHUB_WORKSPACE``).
        gid: the new group.

    Returns:
        How many entries changed owner.

    Raises:
        WriteError: an owner could not be changed (exit code 3), naming the entry.
    """
    path = Path(path)
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise WriteError(path.parent, exc, doing="read") from None
    try:
        return _hand_over_entry(parent, path.name, path, uid, gid)
    finally:
        os.close(parent)


def _hand_over_entry(parent: int, name: str, path: Path, uid: int, gid: int) -> int:
    """:func:`hand_over` of the entry ``name`` of the directory open as ``parent``."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return 0
    if info.st_uid != os.geteuid() or stat.S_ISLNK(info.st_mode):
        return 0
    if not stat.S_ISDIR(info.st_mode):
        if info.st_nlink != 1:
            return 0
        _chown(path, uid, gid, name=name, dir_fd=parent)
        return 1
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except FileNotFoundError:
        return 0
    except OSError as exc:  # swapped for a link or a file meanwhile (ELOOP, ENOTDIR): not ours to follow
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return 0
        raise WriteError(path, exc, doing="read") from None
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            return 0
        changed = sum(_hand_over_entry(fd, child, path / child, uid, gid) for child in os.listdir(fd))
        _chown(path, uid, gid, fd=fd)  # the directory last: nobody else can write into it while it is walked
        return changed + 1
    finally:
        os.close(fd)


def _chown(path: Path, uid: int, gid: int, *, fd: int | None = None, name: str = "", dir_fd: int | None = None) -> None:
    try:
        if fd is not None:
            os.fchown(fd, uid, gid)
        else:
            os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise WriteError(path, exc, doing="change the owner of") from None


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


def prepare_output_file(path: Path | str, what: str) -> Path:
    """Make sure an output file named on the command line can be written, before any work: create its folder.

    A report file such as ``--junit reports/rag-gate.xml`` is written after the comparison; a folder that does not
    exist yet is created here, so that a finished comparison is never lost to it (exit 3 after the work).

    Args:
        path: the file (its folder need not exist).
        what: how the user named it, for the message (e.g. ``--junit reports/x.xml``).

    Returns:
        ``path``.

    Raises:
        InputError: the path is a directory, or its folder cannot be created (a regular file is in the way, no
            permission): exit code 2, before anything runs.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{what}: {path} is a directory; name a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next(p for p in (path.parent, *path.parent.parents) if p.exists() or p.is_symlink())
        raise InputError(f"{what}: cannot create the folder {path.parent}: {blocker} is not a folder") from None
    except OSError as exc:
        raise InputError(f"{what}: cannot create the folder {path.parent}: {exc.strerror or exc}") from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise InputError(f"{what}: the folder {path.parent} is not writable")
    return path


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


def _spellings(path: Path) -> set[Path]:
    """The names ``path`` can be reached by: its folder resolved (links followed) with its name, and in full."""
    absolute = Path(os.path.abspath(path))
    return {Path(os.path.realpath(absolute.parent)) / absolute.name, Path(os.path.realpath(absolute))}


def refuse_output_clashes(
    files: Mapping[str, Path | str | None],
    folders: Mapping[str, Path | str | None] | None = None,
    inputs: Mapping[str, Path | str | None] | None = None,
) -> None:
    """Refuse, before any work, two outputs of one command that would land on the same file.

    Two output files clash when they name the same file, after relative paths and symbolic links in their folders
    (or the file itself) are followed, or when they are the same existing file (``os.path.samefile``: a hard link,
    a case-insensitive file system). An output file clashes with an output folder (a whole tree the command
    writes, e.g. ``OUT/base``) that holds it or that it is, two output folders when one holds the other, and an
    output file with one of the command's inputs (it would be replaced after being read).

    Args:
        files: how the user named each output file (e.g. ``--junit rep/x.xml``, ``--out rep (report.json)``) →
            the file; None when that output is not written.
        folders: the same for output folders (every file under them is written).
        inputs: the same for the command's input files.

    Raises:
        InputError: two of them clash (exit code 2), naming both and the file.
    """
    named = [(what, Path(p), False) for what, p in files.items() if p is not None]
    named += [(what, Path(p), True) for what, p in (folders or {}).items() if p is not None]
    reached = [(what, path, tree, _spellings(path)) for what, path, tree in named]
    for i, (what, path, tree, spelled) in enumerate(reached):
        for other, other_path, other_tree, other_spelled in reached[:i]:
            if (spelled & other_spelled or _same_existing(path, other_path)) and not (tree and other_tree):
                raise InputError(
                    f"{other} and {what} name the same file ({path}); one would overwrite the other: "
                    "choose another path"
                )
            inner, outer = _nested((what, path, tree, spelled), (other, other_path, other_tree, other_spelled))
            if outer is not None:
                raise InputError(
                    f"{inner[0]} ({inner[1]}) lies in {outer[0]} ({outer[1]}), a folder the same command writes: "
                    "choose another path"
                )
    for label, source in (inputs or {}).items():
        if source is None:
            continue
        source_spelled = _spellings(Path(source))
        for what, path, tree, spelled in reached:
            if tree:
                continue
            if spelled & source_spelled or _same_existing(path, Path(source)):
                raise InputError(
                    f"{what} names the input {label} ({source}); writing it would replace the input: "
                    "choose another path"
                )


def _same_existing(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` both exist and are one file (a hard link, a case-insensitive file system)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _nested(
    a: tuple[str, Path, bool, set[Path]], b: tuple[str, Path, bool, set[Path]]
) -> tuple[tuple[str, Path], tuple[str, Path] | None]:
    """(the inner one, the output folder that holds or is it), or (a, None) when neither is in the other."""
    for inner, outer in ((a, b), (b, a)):
        if outer[2] and any(is_within(x, y) for x in inner[3] for y in outer[3]):
            return (inner[0], inner[1]), (outer[0], outer[1])
    return (a[0], a[1]), None


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


LOCK_FILE = ".rag-gate.lock"
"""The lock file of a run directory (``flock(2)`` through ``filelock``; it stays in place when released)."""
OWNER_FILE = ".rag-gate.owner.json"
"""Beside the lock: who holds it (pid, host, started), removed when the holder releases it."""


def _owner_text(owner: dict[str, Any] | None) -> str:
    """``pid 123 on host ci-1, started 2024-...`` (or a stand-in when the owner file is missing or unreadable)."""
    if not owner:
        return "another process (no owner recorded)"
    return f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')}, started {owner.get('started', '?')}"


def read_owner(directory: Path | str) -> dict[str, Any] | None:
    """The owner recorded beside a directory's lock (pid, host, started), or None when there is none or unreadable."""
    try:
        owner = json.loads((Path(directory) / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


@contextlib.contextmanager
def locked_directory(directory: Path | str, what: str) -> Iterator[dict[str, Any] | None]:
    """Hold the directory exclusively while the ``with`` block runs (one run writes a run directory at a time).

    The lock is ``filelock``'s :class:`~filelock.FileLock` on :data:`LOCK_FILE` (``flock(2)``): the kernel
    releases it when the holder exits, however it exits (SIGKILL included), so a lock can never be left behind.
    The holder's pid, host and start time are written beside it (:data:`OWNER_FILE`) for the message a
    second process gets, and removed on release. An owner file found when the lock is free was left by a holder
    that was killed: it is yielded, so the caller can report it.

    Args:
        directory: the directory (created if needed).
        what: how the user named it, for the message (e.g. ``--out out/run``).

    Yields:
        The owner left behind by a killed holder, or None.

    Raises:
        InputError: another process holds the lock (exit code 2), naming the directory and the holder.
        WriteError: the directory or its lock file cannot be created.
    """
    from filelock import FileLock, Timeout

    directory = Path(directory)
    make_dirs(directory)
    try:
        lock = FileLock(directory / LOCK_FILE)
        lock.acquire(timeout=0)
    except Timeout:
        raise InputError(
            f"{what}: {directory} is in use by another rag-gate run ({_owner_text(read_owner(directory))}); "
            "wait for it to finish or choose another directory"
        ) from None
    except OSError as exc:
        raise WriteError(directory / LOCK_FILE, exc, doing="lock") from None
    try:
        stale = read_owner(directory) if (directory / OWNER_FILE).exists() else None
        owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        write_text_atomic(directory / OWNER_FILE, json.dumps(owner) + "\n")
        yield stale
    finally:
        try:
            (directory / OWNER_FILE).unlink(missing_ok=True)
        finally:
            lock.release()
