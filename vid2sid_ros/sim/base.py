"""The twin protocol every simulated rig implements.

A twin owns a simulator model and a fixed camera. It receives physics (and
nuisance) parameters by name, replays an :class:`~vid2sid_ros.core.excitation.Excitation`
one command period per step, and returns a :class:`RolloutResult`: the ground-truth
keypoints projected into the camera (px) and, when asked, the rendered RGB frames.
Parameters change between rollouts without reloading the model.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Protocol, runtime_checkable

import numpy as np

from ..core.excitation import Excitation
from ..core.parameters import ParameterSet
from ..core.trajectory import Trajectory

__all__ = ["Twin", "RolloutResult", "rollout_frames", "TwinError", "CameraIntrinsics", "RolloutLimits", "RolloutMeter",
           "DEFAULT_MAX_SUBSTEPS", "in_image_valid", "whole_px"]

#: default cap on physics substeps per rollout: about 60x the tentacle's worst case
#: inside its shipped bounds (16 800 for 75 frames), ~2 min of PyElastica on one core
DEFAULT_MAX_SUBSTEPS = 1_000_000


class TwinError(RuntimeError):
    """A twin could not be built or driven (bad model file, unknown field...)."""


@dataclass(frozen=True)
class CameraIntrinsics:
    """Pinhole camera of a rig.

    Attributes:
        width, height: image size in px (integers in [1, :data:`~vid2sid_ros.core.camera.MAX_IMAGE_SIDE`]).
        fx, fy: focal lengths in px; cx, cy: principal point in px.

    Raises:
        TwinError: a width or height that is not such an integer (was: ``make_twin(width=0)``,
            ``-5`` or ``20000`` built a finger or toy twin that failed, if at all, at its first render).
    """

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    def __post_init__(self) -> None:
        from ..core.camera import MAX_IMAGE_SIDE

        for k in ("width", "height"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 < int(v) <= MAX_IMAGE_SIDE:
                raise TwinError(f"camera image {k} must be an integer in [1, {MAX_IMAGE_SIDE}] px, got {v!r}")


def whole_px(v: object) -> int | None:
    """``v`` as an int when it is a whole number of px (an int, or a float such as YAML's ``640.0``),
    else None (a fraction like 64.5, NaN, inf, a bool, text). The sign is the caller's to check."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
        return None
    return int(v) if v == int(v) else None


def in_image_valid(traj: Trajectory, twin: object) -> np.ndarray:
    """``traj.valid`` (T, K) without the pixel keypoints a camera could not see.

    A keypoint counts as seen when it is finite and inside ``twin.camera``'s image,
    ``[-0.5, width - 0.5] x [-0.5, height - 0.5]`` px (pixel centres at integer coordinates).
    Trajectories not in px, or a twin without an integer camera size, come back unchanged.
    Used by the stand-in "real" sides that skip the camera (sim2sim ``keypoint`` / ``none``
    noise): a tracker loses such keypoints by itself; these projected them anyway (a camera
    posed past the robot calibrated on keypoints at u = -1400 px of a 160 px image).

    Returns:
        (T, K) bool, a new array.
    """
    valid = np.array(traj.valid, bool)
    cam = getattr(twin, "camera", None)
    w, h = getattr(cam, "width", None), getattr(cam, "height", None)
    if (traj.unit_label != "px" or isinstance(w, bool) or isinstance(h, bool)
            or not isinstance(w, (int, np.integer)) or not isinstance(h, (int, np.integer))):
        return valid
    kp = np.asarray(traj.keypoints, float)
    with np.errstate(invalid="ignore"):
        inside = (kp[..., 0] >= -0.5) & (kp[..., 0] <= w - 0.5) & (kp[..., 1] >= -0.5) & (kp[..., 1] <= h - 0.5)
    return valid & inside


@dataclass(frozen=True)
class RolloutLimits:
    """What one rollout may cost before it is recorded as failed instead of run to the end.

    A twin whose step size depends on the parameters (the explicit PyElastica rod:
    ``dt ~ dl * sqrt(rho / E)``) can be asked for millions of substeps per frame by a
    proposal at a bound; MuJoCo models can slow down in contact. Twins with a
    ``rollout_limits`` attribute check it: a rollout whose substep count would exceed
    ``max_substeps`` is refused before it starts, one that runs past ``max_wall_s`` is
    stopped; both come back as ``RolloutResult(diverged=True, message=...)``, which the
    calibration loop records as a failed evaluation.

    Attributes:
        max_substeps: physics substeps per rollout (all command periods), or None = no cap.
        max_wall_s: wall time per rollout, s, or None = no cap. Off by default: the first
            PyElastica rollout of a process includes numba compilation (up to minutes).

    Raises:
        ValueError: a limit that is not a positive number (or None).
    """

    max_substeps: int | None = DEFAULT_MAX_SUBSTEPS
    max_wall_s: float | None = None

    def __post_init__(self) -> None:
        ms, mw = self.max_substeps, self.max_wall_s
        if ms is not None and (isinstance(ms, bool) or not isinstance(ms, int) or ms < 1):
            raise ValueError(f"rollout limit max_substeps must be a positive integer or null, got {ms!r}")
        if mw is not None and (isinstance(mw, bool) or not isinstance(mw, (int, float)) or not math.isfinite(mw)
                               or mw <= 0):
            raise ValueError(f"rollout limit max_wall_s must be a number > 0 (s) or null, got {mw!r}")

    def substeps_problem(self, substeps: int, why: str = "") -> str:
        """``""`` when ``substeps`` fits, else the message of a refused rollout."""
        if self.max_substeps is None or substeps <= self.max_substeps:
            return ""
        return (f"rollout refused: it needs {substeps:,} physics substeps{f' ({why})' if why else ''}, over the "
                f"budget of {self.max_substeps:,} per rollout (calibration.rollout_max_substeps)")


class RolloutMeter:
    """Wall-time meter of one rollout against :attr:`RolloutLimits.max_wall_s`.

    Usage: ``meter = RolloutMeter(limits)`` at the start, ``meter.problem(k)`` after
    command step ``k``: ``""`` while within the budget, else the failure message.
    """

    def __init__(self, limits: RolloutLimits | None, clock=time.perf_counter) -> None:
        self.limits = limits or RolloutLimits(max_substeps=None)
        self._clock = clock
        self._t0 = clock()

    def problem(self, step: int) -> str:
        mw = self.limits.max_wall_s
        if mw is None:
            return ""
        elapsed = self._clock() - self._t0
        if elapsed <= mw:
            return ""
        return (f"rollout stopped after command step {step}: {elapsed:.1f} s of wall time, over the budget of "
                f"{mw:g} s per rollout (calibration.rollout_max_wall_s)")


@dataclass
class RolloutResult:
    """Outcome of one rollout.

    Attributes:
        trajectory: ground-truth keypoints projected to the image, (T, K, 2) px, one
            frame per command step (step k sampled at the end of command period k).
        frames: rendered RGB frames, shape (T, H, W, 3) uint8, or None if not rendered.
        diverged: True when the simulation blew up (non-finite state, or positions
            beyond physical reach); the trajectory is then unusable and the caller
            must count a failed evaluation, not crash.
        message: why it diverged, or warnings.
        state: optional extra time series (e.g. joint angles (T, n) rad) keyed by name.
    """

    trajectory: Trajectory
    frames: np.ndarray | None = None
    diverged: bool = False
    message: str = ""
    state: Mapping[str, np.ndarray] = field(default_factory=dict)


@runtime_checkable
class Twin(Protocol):
    """What the calibration loop and the ROS sim node need from a simulated rig."""

    #: the rig's parameter specification (names, units, bounds, nominal values).
    parameters: ParameterSet
    #: the rig's actuator names, in excitation column order.
    actuator_names: tuple[str, ...]
    #: keypoint names, in trajectory order.
    keypoint_names: tuple[str, ...]
    #: the camera that films the rig.
    camera: CameraIntrinsics

    def set_parameters(self, values: Mapping[str, float]) -> None:
        """Write parameters (by name, SI units) into the model.

        Raises:
            vid2sid_ros.core.parameters.ParameterSpecError: on an unknown name.
        """

    def get_parameters(self) -> dict[str, float]:
        """Current values of every parameter, ``{name: value}``."""

    def rollout(self, excitation: Excitation, *, render: bool = False) -> RolloutResult:
        """Reset to the initial state and replay ``excitation``; deterministic."""

    # Optional: ``export_model(path) -> Path`` writes the model file with the current
    # parameters (MJCF for MuJoCo twins), and ``model_suffix`` names its file type; the
    # calibration loop saves ``calibrated_model<suffix>`` beside ``result.yaml`` with it.


def rollout_frames(twin: Twin, excitation: Excitation, sink: Callable[[int, np.ndarray], None], *,
                   rows: Iterable[int] | None = None) -> RolloutResult:
    """A rendered rollout whose frames are handed to ``sink(row, frame)`` one at a time, not kept.

    A twin whose ``rollout`` takes ``frame_sink`` (and ``render_rows``), as the user MuJoCo
    twin does, renders into one reused (H, W, 3) uint8 buffer: memory is one camera frame
    whatever the trial's length (a 20 s trial filmed at 3840 x 2160 px would be 15 GB of
    frames). Any other twin renders the whole rollout as before and its frames are handed
    over from the array (the built-in twins' cameras are small).

    Args:
        twin: the twin. excitation: the commands replayed.
        sink: called with the row index and the frame (RGB; copy what you keep: the buffer is reused).
        rows: the rows wanted, in any order (None: every row); ``sink`` sees them in row order.

    Returns:
        The :class:`RolloutResult`, ``frames`` None.

    Raises:
        TwinError: as the twin's ``rollout`` (no OpenGL, bad commands).
    """
    import inspect

    wanted = None if rows is None else sorted({int(r) for r in rows})
    try:
        streams = "frame_sink" in inspect.signature(twin.rollout).parameters
    except (TypeError, ValueError):
        streams = False
    if streams:
        res = twin.rollout(excitation, render=True, frame_sink=sink, render_rows=wanted)
        return RolloutResult(res.trajectory, None, res.diverged, res.message, res.state)
    res = twin.rollout(excitation, render=True)
    frames = res.frames
    if frames is not None:
        for k in (range(len(frames)) if wanted is None else [r for r in wanted if 0 <= r < len(frames)]):
            sink(k, frames[k])
    return RolloutResult(res.trajectory, None, res.diverged, res.message, res.state)
