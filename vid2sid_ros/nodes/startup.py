"""Signals during a node process's start-up: no traceback, a clean exit, whatever the moment.

A node process goes through three phases, and SIGINT/SIGTERM are handled in each:

1. **imports** (rclpy, numpy, MuJoCo...: about a second): :func:`defer_signals`, called
   by the executables before they import a node module, only *records* a signal; the
   process exits as soon as the imports are done, before ``rclpy.init``.
2. **construction** (``rclpy.init`` and the node's ``__init__``: rig, twin, renderer):
   rclpy's own signal handlers are *not* installed yet (``rclpy.init`` with
   ``SignalHandlerOptions.NO``), so a signal can never invalidate the context under a
   half-built node (the cause of the old "the given context is not valid" traceback from
   ``SingleThreadedExecutor(...)``); the Python handler raises :class:`StartupInterrupted`
   in the main thread instead, which :func:`~vid2sid_ros.nodes.common.run_node` catches.
3. **spinning**: rclpy's handlers are installed (they shut the context down, which ends
   the spin) and chain to the recording handler, so the exit status still knows the signal.

Exit status (:func:`exit_status`): 0 after SIGINT (Ctrl-C, what ``ros2 launch`` sends
first), 143 = 128 + 15 after SIGTERM (the shell's convention, as the ``vid2sid`` CLI).

This module imports neither rclpy nor numpy, so it can run before them.
"""

from __future__ import annotations

import signal
import threading

__all__ = ["defer_signals", "raise_on_signal", "received_signal", "exit_status", "fast_exit", "StartupInterrupted"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []
_raising = False
_program = False  # set by defer_signals(): this process is a node executable


class StartupInterrupted(BaseException):
    """SIGINT/SIGTERM arrived while the node was being built (a BaseException, like
    KeyboardInterrupt, so no ``except Exception`` of the construction code swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum} during start-up")
        self.signum = int(signum)


def _handler(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    _received.append(int(signum))
    if _raising:
        raise StartupInterrupted(signum)


def defer_signals() -> None:
    """Record SIGINT/SIGTERM from now on instead of raising KeyboardInterrupt / dying.

    A no-op outside the main thread (Python only runs signal handlers there).
    """
    global _raising, _program
    if threading.current_thread() is not threading.main_thread():
        return
    _raising = False
    _program = True
    for s in _SIGNALS:
        signal.signal(s, _handler)


def raise_on_signal(on: bool) -> None:
    """``on``: a signal raises :class:`StartupInterrupted` (construction phase); off: it
    is only recorded. Installs the handlers if :func:`defer_signals` was not called."""
    global _raising
    if threading.current_thread() is not threading.main_thread():
        return
    for s in _SIGNALS:
        if signal.getsignal(s) is not _handler:
            signal.signal(s, _handler)
    _raising = bool(on)
    if on and _received:  # a signal recorded before (during the imports): stop now
        raise StartupInterrupted(_received[0])


def received_signal() -> int | None:
    """The first SIGINT/SIGTERM received so far, or None."""
    return _received[0] if _received else None


def exit_status(signum: int | None) -> int:
    """Process exit status after ``signum``: 0 for none or SIGINT, 128 + n otherwise (143 for SIGTERM)."""
    if signum is None or signum == signal.SIGINT:
        return 0
    return 128 + int(signum)


def fast_exit(status: int) -> None:
    """End a node *program* now with ``status``, after its node is destroyed and rclpy shut down.

    The interpreter's own finalisation (module teardown, garbage collection of MuJoCo, numba
    and DDS objects) took 0.3-2.5 s on a loaded 2-core machine, past the 2 s a node has to
    stop after SIGINT/SIGTERM; everything the node owns is closed by then (bag written,
    workers joined, rclpy shut down), so stdio and :mod:`logging` are flushed and the
    process exits with ``os._exit``. In-process callers (no :func:`defer_signals`: tests,
    the bringup) get ``SystemExit(status)`` for a non-zero status and a plain return otherwise.
    """
    import logging
    import os
    import sys

    if not _program or threading.current_thread() is not threading.main_thread():
        if status:
            raise SystemExit(status)
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe must not change the exit status
            pass
    os._exit(status)
