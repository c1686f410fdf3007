"""Safe file I/O shared by every layer: atomic writes and bounded reads of regular files.

Atomic write (:func:`atomic_write_bytes`, :func:`atomic_write_text`, :func:`atomic_output`):
the data goes to a temporary file in the destination's own directory, is flushed and
fsynced, and replaces the destination with ``os.replace`` (atomic on POSIX within one
file system). A reader sees the old file or the new one, never half of one; a full disk
leaves the old file (or none) and removes the temporary.

Bounded read (:func:`read_regular_file`, :func:`check_regular_file`): a path a user's
model or config names is opened only if it is a regular file no larger than a bound. The
file is opened with ``O_NONBLOCK`` (opening a FIFO for reading then returns at once instead
of waiting for a writer, and a device never blocks the open) and checked with ``fstat`` on
the open descriptor (no race between the check and the read).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_output", "read_regular_file",
           "check_regular_file", "NotARegularFileError", "DEFAULT_MAX_FILE_BYTES", "file_problem"]

#: default bound on a file a model or config names (a mesh, an included MJCF, a config): 512 MiB
DEFAULT_MAX_FILE_BYTES = 512 * 1024 * 1024


def _umask() -> int:
    """The process's umask, read without changing it (Linux /proc), else by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # not thread-safe for the instant it is changed: only where /proc is missing
    os.umask(mask)
    return mask


class NotARegularFileError(OSError):
    """A named file is a FIFO, a device, a directory or a socket, or is larger than allowed."""


def _fsync_dir(directory: Path) -> None:
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
def atomic_output(path: str | Path, *, suffix: str | None = None) -> Iterator[Path]:
    """Context yielding a temporary path beside ``path``; on success it replaces ``path``.

    For writers that want a file name (model exporters, video writers): write to the
    yielded path; when the block ends without an exception the file is fsynced and
    renamed over ``path``; on an exception it is removed and ``path`` is left as it was.

    Args:
        path: the destination. suffix: the temporary's suffix (default ``path``'s, so
            writers that pick a format by extension keep it).

    Raises:
        OSError: the directory cannot be written, the disk is full (``filename`` = ``path``).
    """
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix if suffix is None else suffix,
                                    dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_umask())  # an artefact gets the usual permissions, not mkstemp's 0600
    try:
        yield tmp
        if not tmp.is_file():
            raise FileNotFoundError(f"{path}: the writer produced no file")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(err, OSError) and err.filename is None:
            err.filename = str(path)
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary + fsync + ``os.replace``).

    Raises:
        OSError: with ``filename`` = ``path`` (a full disk included; ``path`` unchanged).
    """
    path = Path(path)
    with atomic_output(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    return path


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write_bytes`)."""
    return atomic_write_bytes(path, text.encode(encoding))


def _kind(mode: int) -> str:
    """What a non-regular file is, for a message (``"a FIFO (named pipe)"``, ``"a directory"``...)."""
    return ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def file_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be read as a file, or None when it is a regular file (never opens it, never blocks).

    Returns:
        None, ``"file not found: PATH"``, or ``"PATH is a FIFO (named pipe), expected a regular file"``
        (likewise a directory, a device, a socket): the tail of a one-line error whose head names
        the file's config key or command-line flag.
    """
    try:
        st = os.stat(path)  # follows a symlink: a link to a regular file is one
    except FileNotFoundError:
        return f"file not found: {path}"
    except OSError as err:
        return f"cannot read {path}: {err.strerror or err}"
    if stat.S_ISREG(st.st_mode):
        return None
    return f"{path} is {_kind(st.st_mode)}, expected a regular file"


def _open_regular(path: Path, max_bytes: int | None, what: str) -> tuple[int, int]:
    """(descriptor, size) of ``path`` opened read-only after the regular-file and size checks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        if err.filename is None:
            err.filename = str(path)
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFileError(f"{path}: {what} is {_kind(st.st_mode)}, expected a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise NotARegularFileError(f"{path}: {what} is {st.st_size:,} bytes, over the limit of {max_bytes:,} bytes")
    except BaseException:
        os.close(fd)
        raise
    return fd, int(st.st_size)


def check_regular_file(path: str | Path, *, max_bytes: int | None = DEFAULT_MAX_FILE_BYTES,
                       what: str = "the file") -> Path:
    """Refuse ``path`` unless it is a regular file of at most ``max_bytes`` (never blocks).

    Returns:
        ``path`` as a Path.

    Raises:
        NotARegularFileError: a FIFO, device, directory or socket, or too large
            (one line naming the file). OSError: missing or unreadable.
    """
    fd, _ = _open_regular(Path(path), max_bytes, what)
    os.close(fd)
    return Path(path)


def read_regular_file(path: str | Path, *, max_bytes: int | None = DEFAULT_MAX_FILE_BYTES,
                      what: str = "the file") -> bytes:
    """The bytes of ``path``, read only if it is a regular file of at most ``max_bytes``.

    Raises:
        NotARegularFileError: see :func:`check_regular_file`. OSError: missing or unreadable.
    """
    path = Path(path)
    fd, size = _open_regular(path, max_bytes, what)
    try:
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            total += len(b)
            if max_bytes is not None and total > max_bytes:  # grew while being read
                raise NotARegularFileError(f"{path}: {what} grew past the limit of {max_bytes:,} bytes while read")
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(fd)
