"""SIGTERM ends a command the way Ctrl-C does (same message, conventional exit code).

``kill PID``, ``timeout``, systemd and container runtimes stop a process with SIGTERM;
Python's default is to die at once (exit -15, no message, nothing flushed). Inside
:func:`sigterm_as_interrupt`, SIGTERM raises :class:`Terminated`, a
``KeyboardInterrupt`` subclass, so every place that already handles Ctrl-C (the
calibration loop keeps completed iterations, the CLI prints how to resume) handles
SIGTERM the same, and :func:`interrupt_exit_code` gives 128 + the signal number
(130 for SIGINT, 143 for SIGTERM), the shell convention.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

__all__ = ["Terminated", "sigterm_as_interrupt", "interrupt_exit_code", "interrupt_name"]


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM.

    Attributes:
        signum: the signal number (``signal.SIGTERM``).
    """

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = int(signum)


def _raise_terminated(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    raise Terminated(signum)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Context: SIGTERM raises :class:`Terminated` in the main thread; the old handler is restored.

    Does nothing outside the main thread (Python only runs signal handlers there) or
    when a handler other than the default is installed (an embedding application's).
    """
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupt_exit_code(err: BaseException) -> int:
    """128 + signal number: 143 for :class:`Terminated` (SIGTERM), 130 for Ctrl-C (SIGINT)."""
    return 128 + (err.signum if isinstance(err, Terminated) else int(signal.SIGINT))


def interrupt_name(err: BaseException) -> str:
    """``"SIGTERM"`` or ``"Ctrl-C"``, for messages."""
    return signal.Signals(err.signum).name if isinstance(err, Terminated) else "Ctrl-C"
