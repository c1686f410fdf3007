"""One run per run directory: an exclusive lock held for the life of a run.

A run (``vid2sid calibrate``, its ``--resume``, ``bringup``'s calibration, a calibrator
node's session, a benchmark cell) takes ``RUN_DIR/.vid2sid.lock`` with ``fcntl.flock``
(exclusive, non-blocking) *before* it looks at what the directory holds, and keeps it until
the run ends. A second run into the same directory is refused at once with one line naming
the holder (pid, host, command, start time), which the holder writes into the lock file.

The kernel releases a ``flock`` when its holder dies (SIGKILL, power loss of the process,
a crash), so a lock left by a killed run never blocks its ``--resume``: the file stays, the
lock does not. Inside one process the lock is re-entrant (the CLI takes it before its own
checks, :func:`~vid2sid_ros.calibration.loop.run_calibration` takes it again); two threads
of one process running into the same directory are refused like two processes.

flock works on local file systems; on NFS it is emulated with POSIX record locks (Linux
>= 2.6.12), which hold between machines as well.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

__all__ = ["LOCK_NAME", "RunDirBusy", "run_dir_lock", "lock_holder"]

#: the lock file's name inside a run directory
LOCK_NAME = ".vid2sid.lock"

_held: dict[str, tuple[int, int, int, bool]] = {}  # realpath -> (fd, depth, owning thread, dir created)
_guard = threading.Lock()


class RunDirBusy(RuntimeError):
    """Another run holds the run directory (message: one line naming the holder)."""


def lock_holder(run_dir: str | Path) -> dict | None:
    """The holder recorded in ``run_dir``'s lock file (pid, host, command, started), or None."""
    try:
        with open(Path(run_dir) / LOCK_NAME, encoding="utf-8") as f:
            d = json.loads(f.read(64 * 1024) or "null")
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _describe(holder: dict | None) -> str:
    if not holder:
        return "another run (its details are not recorded yet)"
    cmd = str(holder.get("command", "?"))
    cmd = cmd if len(cmd) <= 160 else cmd[:157] + "..."
    return (f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} ({cmd!r}, started "
            f"{holder.get('started', '?')})")


def _acquire(path: Path, command: str | None) -> int:
    """A descriptor of ``path`` holding an exclusive flock; RunDirBusy when taken."""
    for _ in range(20):  # the file may be replaced between open and flock: retry on another inode
        # O_NOFOLLOW: a symlink planted as the lock file is refused (ELOOP), never truncated through
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0),
                     0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = None
            for _ in range(10):  # the holder writes its details just after taking the lock
                holder = lock_holder(path.parent)
                if holder:
                    break
                time.sleep(0.05)
            raise RunDirBusy(f"{path.parent} is in use by another run: {_describe(holder)}; wait for it to end "
                             "or choose another output directory (nothing was changed)") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "command": command or (" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "python"),
                "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        except OSError:  # a full disk: the lock holds all the same; the details are best effort
            pass
        return fd
    raise RunDirBusy(f"{path.parent}: the lock file {path.name} keeps changing; another program is replacing it")


def _first_missing(path: Path) -> Path | None:
    """The outermost ancestor of ``path`` (or ``path`` itself) that does not exist yet, or None."""
    missing = None
    p = Path(os.path.abspath(path))
    while not p.exists():
        missing = p
        if p.parent == p:
            break
        p = p.parent
    return missing


@contextlib.contextmanager
def run_dir_lock(run_dir: str | Path | None, *, command: str | None = None) -> Iterator[Path | None]:
    """Context: hold ``run_dir``'s run lock (creating the directory if needed) for the block.

    Re-entrant within a thread; released when the outermost block ends (or the process dies).
    ``run_dir`` None is a no-op (a run that writes nothing).

    Args:
        run_dir: the run directory. command: what to record as the holder's command
            (default the process's command line).

    Raises:
        RunDirBusy: another process (or another thread) holds it, one line naming the holder.
        OSError: the directory cannot be created or the lock file cannot be opened.
    """
    if run_dir is None:
        yield None
        return
    rd = Path(run_dir)
    created = _first_missing(rd)  # the outermost directory this call creates (None: rd exists)
    rd.mkdir(parents=True, exist_ok=True)
    key = os.path.realpath(rd)
    me = threading.get_ident()
    with _guard:
        held = _held.get(key)
        if held is not None and held[2] != me:
            raise RunDirBusy(f"{rd} is in use by another run in this process ({_describe(lock_holder(rd))}); "
                             "wait for it to end or choose another output directory (nothing was changed)")
        if held is None:
            fd = _acquire(rd / LOCK_NAME, command)
            _held[key] = (fd, 1, me, created)
        else:
            _held[key] = (held[0], held[1] + 1, me, held[3])
    try:
        yield rd
    finally:
        with _guard:
            fd, depth, owner, made = _held[key]
            if depth > 1:
                _held[key] = (fd, depth - 1, owner, made)
            else:
                del _held[key]
                try:
                    os.ftruncate(fd, 0)  # no stale holder details for the next reader
                except OSError:
                    pass
                if made is not None and [p.name for p in rd.iterdir()] == [LOCK_NAME]:
                    # a run refused before writing anything leaves no directory it created behind (nor the
                    # parents it created: a node's sessions/ folder)
                    with contextlib.suppress(OSError):
                        (rd / LOCK_NAME).unlink()
                        d = Path(os.path.abspath(rd))
                        while True:
                            d.rmdir()
                            if d == made or d.parent == d:
                                break
                            d = d.parent
                os.close(fd)  # closes the last descriptor: the flock is released
