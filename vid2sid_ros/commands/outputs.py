"""Writing a command's output file, with errors that name the path (issue 12 item 14).

``Path.write_text`` on a full disk fails at ``close()`` with an ``OSError`` whose
``filename`` is None ("None: No space left on device"), and ``mkdir`` under a file says
only "afile: File exists". :func:`write_output` writes (flush + fsync, so a full disk is
reported, not lost) and :func:`write_error_message` turns any such error into one line
naming the flag, the path and what is wrong with it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["check_output_path", "write_output", "write_error_message"]


def check_output_path(path: Path) -> None:
    """Refuse an output path that cannot be a file: a directory, a FIFO, a socket or a block device (never
    opened: a FIFO's open would wait for a reader), or a parent that is a file. A character device
    (``/dev/null``) is accepted.

    Raises:
        IsADirectoryError: ``path`` is a directory. NotARegularFileError: ``path`` exists and is a FIFO, a
            socket or a block device. NotADirectoryError: a parent is a file (``filename`` = that parent).
    """
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, expected a file path", str(path))
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None
    # a FIFO would block the open until a reader came, a socket cannot be opened; a character device (/dev/null,
    # /dev/full) is written as asked and its error, if any, said by write_output
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
        from ..core.files import NotARegularFileError, file_problem

        raise NotARegularFileError(errno.EINVAL, file_problem(path) or "not a regular file", str(path))
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, f"{parent} is a file, not a directory", str(parent))
            break


def write_output(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, creating missing parent directories.

    Raises:
        OSError: any write error, with ``filename`` set to ``path`` (or the offending
            parent); pass it to :func:`write_error_message`.
    """
    check_output_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            if path.is_file():  # fsync a regular file: a full disk shows up here, not later
                os.fsync(f.fileno())
    except OSError as err:
        if err.filename is None:
            err.filename = str(path)
        raise


def write_error_message(flag: str, path: Path, err: OSError) -> str:
    """One line: ``cannot write --out PATH: <why>`` (the path always named)."""
    why = err.strerror or str(err)
    where = err.filename if err.filename not in (None, str(path)) else None
    if isinstance(err, NotADirectoryError) and where:
        return f"cannot write {flag} {path}: {where} is a file, not a directory"
    if isinstance(err, FileExistsError) and where:
        return f"cannot write {flag} {path}: {where} is a file, not a directory"
    if isinstance(err, IsADirectoryError):
        return f"cannot write {flag} {path}: it is a directory, expected a file path"
    if where is None and err.strerror and str(path) in err.strerror:  # the reason names the path already
        return f"cannot write {flag} {path}: {err.strerror}"
    return f"cannot write {flag} {path}: {why}" + (f" ({where})" if where else "")
