"""A calibration session served one request at a time (the calibrator node's ``/vid2sid/propose``).

A session is a run directory that each request resumes for a few more iterations. What a
request fits, where its session starts, and what the caller is told about the result are
decided here; the node only wires ROS messages to these functions. No rclpy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

__all__ = ["SessionRequestError", "SessionStart", "choose_trials", "result_notes", "session_start"]


class SessionRequestError(ValueError):
    """A request the session cannot serve; the message is the one line the caller reads."""


def choose_trials(requested: str, available: Sequence[str], with_real: Collection[str], mode: str) -> list[str]:
    """The real trials a request fits.

    Args:
        requested: the request's trial id ("" = none named).
        available: trials with a real trajectory in arrival order, designed trials excluded.
        with_real: every trial id holding a real trajectory (designed ones included).
        mode: ``"latest"`` (the last available trial) or ``"all"``, when no trial is named.

    Returns:
        Trial ids, in order.

    Raises:
        SessionRequestError: the named trial has no real trajectory, or there is none yet.
    """
    if requested:
        if requested not in with_real:
            raise SessionRequestError(f"no real trajectory for trial {requested!r}; trials with one: "
                                      + (", ".join(available) or "none yet (run a trial first)"))
        return [requested]
    if not available:
        raise SessionRequestError("no real trajectory yet: run a trial (/vid2sid/excitation/start) or replay "
                                  "a bag first")
    return list(available[-1:]) if mode == "latest" else list(available)


@dataclass(frozen=True)
class SessionStart:
    """Where a request's run in a session directory begins.

    Attributes:
        resume: the run directory holds a run (``run.json``) that this request continues.
        done: proposal iterations already run there (0 for a new run).
        fresh: the session's start point is not yet saved (``start_file`` to be written once the
            run's checks have passed).
        start: ``{name: value}`` start point, SI units of each parameter.
        start_file: ``RUN_DIR/session_start.json``.
    """

    resume: bool
    done: int
    fresh: bool
    start: dict[str, float]
    start_file: Path


def session_start(run_dir: Path, begin: Mapping[str, float], parameters: Collection[str]) -> SessionStart:
    """The start of a request in ``run_dir``: the saved session start on a resume, else ``begin``.

    Args:
        run_dir: the session's run directory (may not exist yet).
        begin: candidate start values (SI), e.g. the values applied to the twin; only names in
            ``parameters`` are kept.
        parameters: the calibrated parameter set (anything supporting ``in``).

    Raises:
        CalibrationError: a malformed ``iterations.jsonl`` (:func:`~vid2sid_ros.calibration.loop.load_history`).
        json.JSONDecodeError: a malformed ``session_start.json``.
    """
    from .loop import load_history

    start_file = run_dir / "session_start.json"
    resume = (run_dir / "run.json").is_file()
    done = len(load_history(run_dir)) - 1 if resume else 0
    fresh = not (resume and start_file.is_file())
    start = ({n: float(v) for n, v in begin.items() if n in parameters} if fresh
             else json.loads(start_file.read_text()))
    return SessionStart(resume, done, fresh, start, start_file)


def result_notes(result: Any, proposer: str) -> list[str]:
    """What the caller reads about a request's result, most important first.

    The residual diagnosis's text, a run without a proposal, the best error against the start
    (in the result's unit, :func:`~vid2sid_ros.core.trajectory.format_error`) and why the loop
    stopped, a best value from another proposer (a fallback), the last iteration's notes.

    Args:
        result: a :class:`~vid2sid_ros.calibration.loop.CalibrationResult`.
        proposer: the proposer the request asked for.
    """
    from ..core.trajectory import format_error

    last = result.history[-1]
    notes = [f"best of {len(result.history) - 1} iteration(s): {format_error(result.error_px, result.unit)} "
             f"(start {format_error(result.initial_error_px, result.unit)}), stopped: {result.stopped}"]
    if result.status != "ok":
        notes.insert(0, f"status {result.status}: no proposal was made, nothing was calibrated")
    elif result.best_proposer != proposer:
        notes.append(f"best values proposed by '{result.best_proposer}' (iteration {result.best_iteration})")
    if last.notes:
        notes.append("; ".join(str(n) for n in last.notes))
    diag = result.diagnosis or {}
    if diag.get("text"):  # the residual diagnosis comes before anything else the caller reads
        notes.insert(0, str(diag["text"]))
    return notes
