"""The twin protocol every simulated rig implements.

A twin owns a simulator model and a fixed camera. It receives physics (and
nuisance) parameters by name, replays an :class:`~vid2sid_ros.core.excitation.Excitation`
one command period per step, and returns a :class:`RolloutResult`: the ground-truth
keypoints projected into the camera (px) and, when asked, the rendered RGB frames.
Parameters change between rollouts without reloading the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, runtime_checkable

import numpy as np

from ..core.excitation import Excitation
from ..core.parameters import ParameterSet
from ..core.trajectory import Trajectory

__all__ = ["Twin", "RolloutResult", "TwinError", "CameraIntrinsics"]


class TwinError(RuntimeError):
    """A twin could not be built or driven (bad model file, unknown field...)."""


@dataclass(frozen=True)
class CameraIntrinsics:
    """Pinhole camera of a rig.

    Attributes:
        width, height: image size in px.
        fx, fy: focal lengths in px; cx, cy: principal point in px.
    """

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float


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
