"""Stepping a twin one command period at a time (for the lockstep ROS graph).

The :class:`~vid2sid_ros.sim.base.Twin` protocol replays whole excitations
(``rollout``). The ROS sim node and the stand-in rig receive commands one at a time and
must produce the frame of each step as it arrives, so they drive a :class:`Stepper`:

* ``reset()`` — back to the initial state (start of a trial);
* ``step(command, period, render=...) -> StepResult`` — apply ``command`` (A,) for one
  command period and return the keypoints (and frame) sampled at the end of the period,
  i.e. exactly row k of ``rollout(...)`` after k+1 steps.

:func:`make_stepper` picks the implementation:

1. :class:`NativeStepper` for twins that implement ``reset()`` / ``step(command, period)``
   / ``observe()`` / ``render()`` themselves (constant cost per step);
2. :class:`MujocoFingerStepper` for :class:`~vid2sid_ros.sim.mujoco_finger.FingerTwin`:
   the same reset, substepping, sampling and divergence checks as ``FingerTwin.rollout``,
   one command period at a time (constant cost per step; equal to the rollout's rows);
3. :class:`ReplayStepper` for any other deterministic twin: re-runs the command history
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

__all__ = ["StepResult", "Stepper", "SteppableTwin", "NativeStepper", "MujocoFingerStepper", "ReplayStepper",
           "make_stepper"]

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
    """A twin that can advance one command period at a time (optional extension of Twin)."""

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

    def step(self, command: Sequence[float], period: float, *, render: bool = False) -> StepResult:
        u = _check_command(self.twin, command, period)
        self._k += 1
        try:
            self.twin.step(u, period)
            xy, valid = self.twin.observe()
        except Exception as err:  # noqa: BLE001 - a blow-up is reported, not raised
            K = len(self.twin.keypoint_names)
            return StepResult(self._k, np.full((K, 2), np.nan), np.zeros(K, bool), None, True,
                              f"{type(err).__name__}: {err}")
        xy, valid = np.asarray(xy, float), np.asarray(valid, bool)
        check = getattr(self.twin, "divergence", None)  # a twin's own blow-up test, when it has one
        problem = check() if callable(check) else ""
        if not problem and not np.all(np.isfinite(xy[valid])):
            problem = "non-finite keypoints"
        if problem:
            K = len(self.twin.keypoint_names)
            return StepResult(self._k, np.full((K, 2), np.nan), np.zeros(K, bool), None, True,
                              f"simulation diverged at command step {self._k}: {problem}")
        frame = self.twin.render() if render else None
        return StepResult(self._k, xy, valid, frame)


class MujocoFingerStepper:
    """Constant-cost stepping of a :class:`~vid2sid_ros.sim.mujoco_finger.FingerTwin`.

    Mirrors ``FingerTwin.rollout`` step for step (reset to the static equilibrium of the
    current parameters, ``ceil(period / max_physics_timestep)`` physics substeps per
    command, markers sampled after ``mj_kinematics`` at the end of the period, the same
    divergence checks and in-frame validity), so ``T`` steps give exactly the rows of a
    ``T``-step rollout. The twin's own model/data are used: do not call ``rollout`` on the
    same twin in the middle of a trial.
    """

    def __init__(self, twin: Any) -> None:
        self.twin = twin
        self._k = -1
        self._cam = None
        self._reset_done = False

    def reset(self) -> None:
        import mujoco

        from .mujoco_render import camera_extrinsics

        tw = self.twin
        m, d = tw.model, tw.data
        mujoco.mj_resetData(m, d)
        q0 = tw.static_equilibrium() if tw.start == "static_equilibrium" else m.qpos0.copy()
        mujoco.mj_resetData(m, d)
        d.qpos[:] = q0
        mujoco.mj_forward(m, d)
        self._cam = camera_extrinsics(d, tw._cam_id)  # noqa: SLF001 - same camera as rollout
        self._k = -1
        self._reset_done = True

    def _observe(self) -> tuple[np.ndarray, np.ndarray]:
        from .mujoco_render import project_points

        tw = self.twin
        markers = tw.data.geom_xpos[tw._marker_geoms][None]  # noqa: SLF001 - (1, K, 3) m
        kp = project_points(markers, self._cam[0], self._cam[1], tw.camera)[0]
        valid = np.all(np.isfinite(kp), axis=1)
        valid &= (kp[:, 0] >= 0) & (kp[:, 0] <= tw.camera.width - 1)
        valid &= (kp[:, 1] >= 0) & (kp[:, 1] <= tw.camera.height - 1)
        return kp, valid

    def step(self, command: Sequence[float], period: float, *, render: bool = False) -> StepResult:
        import math

        import mujoco

        if not self._reset_done:
            self.reset()
        tw = self.twin
        u = _check_command(tw, command, period)
        m, d = tw.model, tw.data
        nsub = max(1, int(math.ceil(period / tw.max_physics_timestep - 1e-9)))
        m.opt.timestep = period / nsub
        self._k += 1
        d.ctrl[:] = u
        mujoco.mj_step(m, d, nsub)
        mujoco.mj_kinematics(m, d)
        problem = tw._divergence(d)  # noqa: SLF001 - the rollout's own check
        K = len(tw.keypoint_names)
        if problem:
            return StepResult(self._k, np.full((K, 2), np.nan), np.zeros(K, bool), None, True,
                              f"simulation diverged at command step {self._k}: {problem}")
        kp, valid = self._observe()
        frame = None
        if render:
            frame = tw._renderer_for_rollout().render(d)  # noqa: SLF001 - makes the GL context current
            frame = np.array(frame, copy=True)
        return StepResult(self._k, kp, valid, frame)


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
    if type(twin).__name__ == "FingerTwin" and type(twin).__module__.endswith("sim.mujoco_finger"):
        return MujocoFingerStepper(twin)
    return ReplayStepper(twin)
