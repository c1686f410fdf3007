"""Cooperative cancellation of a calibration running on a thread of a long-lived process.

A ROS node serves ``/vid2sid/propose`` on a worker thread; when the node shuts down, the
calibration that thread runs must end within one rollout, not when its diagnosis has
finished (a thread still rolling out keeps the process alive after the node is gone: the
interpreter joins it at exit). The thread that runs :func:`run_calibration
<vid2sid_ros.calibration.loop.run_calibration>` enters :func:`cancellable` with a
:class:`threading.Event`; every twin rollout of a
:class:`~vid2sid_ros.calibration.objective.TrialObjective` on that thread first calls
:func:`check_cancelled`, which raises :class:`Cancelled` once the event is set.

:class:`Cancelled` is a :class:`KeyboardInterrupt`, as Ctrl-C and SIGTERM are
(:mod:`vid2sid_ros.commands.signals`): it passes every ``except Exception`` of the
calibration (a proposer's failure, a diagnosis problem) and ends the run the way an
interruption does, with every completed iteration already persisted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Cancelled", "cancellable", "check_cancelled"]

_local = threading.local()


class Cancelled(KeyboardInterrupt):
    """The calibration on this thread was cancelled (its :func:`cancellable` event was set)."""


@contextmanager
def cancellable(event: threading.Event) -> Iterator[threading.Event]:
    """Let ``event`` cancel the calibration code run on this thread inside the block (nested blocks:
    the innermost event counts; the outer one is restored on exit)."""
    previous = getattr(_local, "event", None)
    _local.event = event
    try:
        yield event
    finally:
        _local.event = previous


def check_cancelled() -> None:
    """Raise :class:`Cancelled` when this thread's :func:`cancellable` event is set; nothing otherwise
    (no block entered on this thread: never cancelled).

    Raises:
        Cancelled: the event was set.
    """
    event = getattr(_local, "event", None)
    if event is not None and event.is_set():
        raise Cancelled("the calibration was cancelled")
