"""MuJoCo's own warnings, routed to Python logging and counted (never a ``MUJOCO_LOG.TXT``).

MuJoCo reports an unstable simulation ("Nan, Inf or huge value in QACC ... The simulation is
unstable"), a full scene buffer ("Pre-allocated visual geom buffer is full") and the like
through ``mju_warning``; without a handler it prints them and appends them to
``MUJOCO_LOG.TXT`` in the working directory (beside a user's rig config). :func:`install`
sets a handler (``mujoco.set_mju_user_warning``) that logs each message on the
``vid2sid_ros.mujoco`` logger at WARNING level (the CLI sends library output to the run's
``run.log``) and counts it; :func:`take_counts` hands the counts to whoever summarises a run
(``vid2sid calibrate`` prints one line). The handler is thread-safe: MuJoCo may call it from
``mujoco.rollout``'s threads.
"""

from __future__ import annotations

import collections
import logging
import re
import threading

import mujoco

__all__ = ["install", "take_counts", "summary_line", "LOGGER_NAME"]

LOGGER_NAME = "vid2sid_ros.mujoco"
_LOCK = threading.Lock()
_COUNTS: collections.Counter[str] = collections.Counter()
_FIRST: dict[str, str] = {}
_INSTALLED = False


def _kind(text: str) -> str:
    """The message without its numbers (``Time = 0.1234``, ``DOF 3``): one kind per warning type."""
    return re.sub(r"[-+]?\d+(\.\d*)?([eE][-+]?\d+)?", "#", text)


def _on_warning(message: str) -> None:
    text = " ".join(str(message).split())
    kind = _kind(text)
    with _LOCK:
        _COUNTS[kind] += 1
        _FIRST.setdefault(kind, text)
    logging.getLogger(LOGGER_NAME).warning("MuJoCo: %s", text)


def install() -> None:
    """Route MuJoCo's warnings through :func:`_on_warning` (idempotent; process-wide)."""
    global _INSTALLED
    with _LOCK:
        if _INSTALLED:
            return
        _INSTALLED = True
    mujoco.set_mju_user_warning(_on_warning)


def take_counts() -> list[tuple[str, int]]:
    """The warnings since the last call, as ``[(first message of a kind, count)]``, most frequent first;
    the counts are reset."""
    with _LOCK:
        out = [(_FIRST[k], n) for k, n in _COUNTS.most_common()]
        _COUNTS.clear()
        _FIRST.clear()
    return out


def summary_line(counts: list[tuple[str, int]], log_path: str | None = None) -> str | None:
    """One line for a terminal summary (None when MuJoCo did not warn): the total, the most
    frequent message and where the rest are."""
    if not counts:
        return None
    total = sum(n for _, n in counts)
    first, n = counts[0]
    more = f" and {len(counts) - 1} other kind(s)" if len(counts) > 1 else ""
    where = f"; all in {log_path}" if log_path else ""
    return f"MuJoCo warned {total} time(s): '{first}' ({n}x){more}{where}"
