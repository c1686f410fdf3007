"""Stepping a twin one command period at a time (for the lockstep ROS graph).

The :class:`~vid2sid_ros.sim.base.Twin` protocol replays whole excitations
(``rollout``). The ROS sim node and the stand-in rig receive commands one at a time and
must produce the frame of each step as it arrives, so they drive a :class:`Stepper`:

* ``reset()`` — back to the initial state (start of a trial);
* ``step(command, period, render=...) -> StepResult`` — apply ``command`` (A,) for one
  command period and return the keypoints (and frame) sampled at the end of the period,
  i.e. exactly row k of ``rollout(...)`` after k+1 steps.

:func:`make_stepper` picks the implementation:

1. :class:`NativeStepper` for twins that implement :class:`SteppableTwin` (``reset()`` /
   ``step(command, period)`` / ``observe()`` / ``render()``) themselves, at constant cost
   per step: the MuJoCo finger (whose ``rollout`` is built on the same calls, so T steps
   give exactly its T rows), the PyElastica tentacle, user MuJoCo models;
2. :class:`ReplayStepper` for any other deterministic twin: re-runs the command history
   with ``rollout`` and keeps the last row. Exact but O(k) per step, so only for short
   trials (a warning is logged past ``replay_warn_steps``).

Core module: no rclpy.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from ..core.excitation import Excitation
from .base import Twin, TwinError

__all__ = ["StepResult", "Stepper", "SteppableTwin", "NativeStepper", "ReplayStepper", "make_stepper"]

_log = logging.getLogger(__name__)


@dataclass
class StepResult:
    """Observation at the end of one command period.

    Attributes:
        step: index of the command just applied (0 after the first step of a trial).
        keypoints: (K, 2) px, NaN where invalid.
        valid: (K,) bool.
        frame: (H, W, 3) uint8 RGB when rendered, else None.
        diverged: the simulation blew up; the stepper must be reset before further use.
        message: why it diverged, or warnings.
    """

    step: int
    keypoints: np.ndarray
    valid: np.ndarray
    frame: np.ndarray | None = None
    diverged: bool = False
    message: str = ""


@runtime_checkable
class SteppableTwin(Protocol):
    """A twin that can advance one command period at a time (optional extension of Twin).

    Optionally, the twin reports a blow-up of the current trial through a ``diverged``
    (bool) and ``message`` (str) attribute pair, or a ``divergence() -> str`` method
    (``""`` when fine); :class:`NativeStepper` checks whichever it has after each step.
    """

    def reset(self) -> None: ...

    def step(self, command: Sequence[float], period: float) -> None: ...

    def observe(self) -> tuple[np.ndarray, np.ndarray]: ...  # ((K, 2) px, (K,) bool)

    def render(self) -> np.ndarray: ...  # (H, W, 3) uint8


class Stepper(Protocol):
    twin: Twin

    def reset(self) -> None: ...

    def step(self, command: Sequence[float], period: float, *, render: bool = False) -> StepResult: ...


def _check_command(twin: Twin, command: Sequence[float], period: float) -> np.ndarray:
    u = np.asarray(command, dtype=float).ravel()
    if u.shape[0] != len(twin.actuator_names):
        raise TwinError(f"command has {u.shape[0]} values, the twin has {len(twin.actuator_names)} actuators "
                        f"{list(twin.actuator_names)}")
    if not np.all(np.isfinite(u)):
        raise TwinError(f"command contains NaN or inf: {u.tolist()}")
    if not (np.isfinite(period) and period > 0):
        raise TwinError(f"command period must be > 0 s, got {period!r}")
    return u


class NativeStepper:
    """Stepper over a twin implementing :class:`SteppableTwin` (constant cost per step)."""

    def __init__(self, twin: Any) -> None:
        self.twin = twin
        self._k = -1

    def reset(self) -> None:
        self.twin.reset()
        self._k = -1

    def _problem(self) -> str:
        """The twin's own blow-up report for the current state, ``""`` when fine."""
        tw = self.twin
        if isinstance(getattr(tw, "diverged", None), bool):
            return str(getattr(tw, "message", "") or "diverged") if tw.diverged else ""
        check = getattr(tw, "divergence", None)
        return check() if callable(check) else ""

    def step(self, command: Sequence[float], period: float, *, render: bool = False) -> StepResult:
        u = _check_command(self.twin, command, period)
        self._k += 1
        K = len(self.twin.keypoint_names)
        try:
            self.twin.step(u, period)
            problem = self._problem()
            if not problem:
                xy, valid = self.twin.observe()
        except Exception as err:  # noqa: BLE001 - a blow-up is reported, not raised
            return StepResult(self._k, np.full((K, 2), np.nan), np.zeros(K, bool), None, True,
                              f"{type(err).__name__}: {err}")
        if not problem:
            xy, valid = np.asarray(xy, float), np.asarray(valid, bool)
            if not np.all(np.isfinite(xy[valid])):
                problem = "non-finite keypoints"
        if problem:
            msg = problem if "diverged" in problem else f"simulation diverged at command step {self._k}: {problem}"
            return StepResult(self._k, np.full((K, 2), np.nan), np.zeros(K, bool), None, True, msg)
        frame = self.twin.render() if render else None
        return StepResult(self._k, xy, valid, frame)


@dataclass
class ReplayStepper:
    """Exact stepping for any deterministic twin by replaying the command history.

    Step k costs one rollout of k+1 commands (and k+1 renders when ``render``), so a
    trial of T steps costs O(T^2): fine for a few seconds of a cheap twin, not for
    long trials (prefer a twin with a native step API).

    Attributes:
        twin: the twin.
        replay_warn_steps: log a warning once the history exceeds this many steps.
    """

    twin: Twin
    replay_warn_steps: int = 600
    _history: list[np.ndarray] = field(default_factory=list)
    _warned: bool = False

    def reset(self) -> None:
        self._history = []
        self._warned = False

    def step(self, command: Sequence[float], period: float, *, render: bool = False) -> StepResult:
        u = _check_command(self.twin, command, period)
        self._history.append(u)
        k = len(self._history) - 1
        if k >= self.replay_warn_steps and not self._warned:
            _log.warning("ReplayStepper: %d steps replayed per command (O(k) cost); give the twin a native "
                         "reset/step/observe/render API for long trials", k + 1)
            self._warned = True
        exc = Excitation("stepping", 1.0 / period, np.stack(self._history), tuple(self.twin.actuator_names))
        res = self.twin.rollout(exc, render=render)
        traj = res.trajectory
        frame = None if res.frames is None else np.asarray(res.frames[-1])
        return StepResult(k, np.asarray(traj.keypoints[-1]), np.asarray(traj.valid[-1]), frame, bool(res.diverged),
                          res.message)


def make_stepper(twin: Twin) -> NativeStepper | ReplayStepper:
    """The best stepper for ``twin`` (see module docstring)."""
    if isinstance(twin, SteppableTwin):
        return NativeStepper(twin)
    return ReplayStepper(twin)
