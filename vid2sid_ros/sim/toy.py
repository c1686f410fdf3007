"""A small synthetic twin for tests and examples: a rotary arm on a torsion spring.

The arm (one revolute joint, fixed inertia ``I``) obeys

    I θ'' = G u(t) - k θ - c θ' - f sign(θ')        (Coulomb friction f, stiction when stuck)

with ``u`` the commanded excitation (dimensionless, one actuator ``motor``), ``G`` the
actuator gain (N·m per unit command), ``k`` the torsional stiffness (N·m/rad) and
``c`` the viscous damping (N·m·s/rad). It is integrated with semi-implicit Euler at
``substeps`` per command period. Two keypoints (``mid``, ``tip``) at 0.05 m and 0.10 m
along the arm are projected to the image by an orthographic camera of scale
``pixel_scale`` px/m centred on the pivot, so the trajectories are in px like the real
rigs'. Identifiability is textbook: a step gives the static gain ``G/k`` (steady-state
offset), the natural frequency ``sqrt(k/I)/2π`` and the damping ratio
``c / (2 sqrt(k I))``.

Optional parameters make the identifiability tests possible:

- ``inertia`` (kg·m²) freed: only the ratios ``k/I``, ``c/I``, ``G/I`` are observable.
- ``transmission`` (dimensionless): multiplies the gain, so ``gain`` and
  ``transmission`` only enter as a product.
- ``pixel_scale`` (px/m, kind ``nuisance``): the camera scale as a calibratable
  nuisance parameter (like a user's pendulum video).
- ``friction`` (N·m): Coulomb friction, a dead-band on the command.

The camera looks straight at the arm's plane (optical axis along the plane normal, image x
= plane x, image y = down); :meth:`ToyTwin.move_camera` moves it (a camera-pose error: an
orthographic camera sees a translation across the axis and any rotation, not one along it).

``render=True`` draws the arm and two coloured discs (red ``mid``, green ``tip``) with
OpenCV, so the marker tracker and the video paths can be exercised without MuJoCo.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.camera import rotation_vector_to_matrix
from ..core.excitation import Excitation, build_excitation_sets
from ..core.parameters import ParameterSet, ParameterSpec, ParameterSpecError
from ..core.trajectory import Trajectory
from .base import CameraIntrinsics, RolloutLimits, RolloutResult
from .registry import Rig

__all__ = ["ToyArmTwin", "toy_parameters", "make_rig", "TOY_SPECS"]

#: every parameter the toy understands; ``make_rig(free=...)`` picks the calibrated ones.
TOY_SPECS: dict[str, ParameterSpec] = {
    "stiffness": ParameterSpec("stiffness", "N*m/rad", 0.1, 2.0, 0.4, "torsional stiffness of the joint spring",
                               "k", "log"),
    "damping": ParameterSpec("damping", "N*m*s/rad", 0.002, 0.2, 0.02, "viscous damping of the joint", "c", "log"),
    "gain": ParameterSpec("gain", "N*m", 0.05, 1.0, 0.3, "actuator torque per unit command", "G", "log"),
    "friction": ParameterSpec("friction", "N*m", 0.0, 0.05, 0.0, "Coulomb friction torque of the joint", "f"),
    "inertia": ParameterSpec("inertia", "kg*m^2", 0.002, 0.05, 0.01, "rotational inertia of the arm about the pivot",
                             "I", "log"),
    "transmission": ParameterSpec("transmission", "1", 0.25, 4.0, 1.0, "gear ratio multiplying the actuator gain",
                                  "n", "log"),
    "pixel_scale": ParameterSpec("pixel_scale", "px/m", 800.0, 2500.0, 1500.0, "camera scale at the arm's plane",
                                 "camera", "linear", "nuisance"),
}

_DEFAULT_FREE = ("stiffness", "damping", "gain")

_EXCITATIONS = {
    "train": [
        {"kind": "step", "amplitude": 0.3, "t_step": 0.2, "duration": 3.0, "rate": 30.0},
        {"kind": "chirp", "amplitude": 0.3, "f0": 0.3, "f1": 3.0, "duration": 3.0, "rate": 30.0},
    ],
    "holdout": [
        {"kind": "multisine", "amplitude": 0.3, "frequencies": [0.4, 1.1, 2.3], "duration": 3.0, "rate": 30.0,
         "seed": 3},
    ],
}


def toy_parameters(free: Sequence[str] = _DEFAULT_FREE) -> ParameterSet:
    """The toy's parameter set with exactly ``free`` calibratable (others frozen at nominal).

    Raises:
        ParameterSpecError: on an unknown name (lists the valid ones).
    """
    unknown = [n for n in free if n not in TOY_SPECS]
    if unknown:
        raise ParameterSpecError(f"toy rig: unknown parameter(s) {unknown}; valid: {', '.join(TOY_SPECS)}")
    return ParameterSet(tuple(TOY_SPECS.values()), rig="toy", source="vid2sid_ros.sim.toy").with_frozen(free=free)


class ToyArmTwin:
    """The rotary-arm twin (see module docstring); implements the Twin protocol.

    Args:
        parameters: specification (default :func:`toy_parameters`).
        width, height: image size in px (default 320 x 240).
        substeps: integration substeps per command period.
        link_lengths: keypoint distances from the pivot, m (one keypoint each).
    """

    actuator_names = ("motor",)
    #: file suffix of :meth:`export_model` (the calibration loop names the calibrated copy with it)
    model_suffix = ".yaml"
    #: cost cap of one rollout (:class:`~vid2sid_ros.sim.base.RolloutLimits`); the loop sets it
    rollout_limits: RolloutLimits = RolloutLimits()

    def __init__(self, parameters: ParameterSet | None = None, *, width: int = 320, height: int = 240,
                 substeps: int = 20, link_lengths: Sequence[float] = (0.05, 0.10)) -> None:
        self.parameters = parameters if parameters is not None else toy_parameters()
        self.keypoint_names = ("mid", "tip")[: len(link_lengths)] if len(link_lengths) <= 2 else tuple(
            f"p{i}" for i in range(len(link_lengths)))
        self._lengths = np.asarray(link_lengths, dtype=float)
        self.camera = CameraIntrinsics(width, height, 1.0, 1.0, width / 2.0, 40.0)
        self._substeps = int(substeps)
        self._values = self.parameters.nominal()
        self._camera_move: tuple[np.ndarray, np.ndarray] | None = None  # (translation m, rotation (3, 3))

    def move_camera(self, translation: Sequence[float], rotation_vector: Sequence[float]) -> None:
        """Move the camera in its own optical frame (x right, y down, z towards the plane); the
        keypoints and renders of later rollouts see the plane from the moved camera,
        ``p_image = R^T (p − t)`` scaled by ``pixel_scale`` (orthographic). A new call replaces
        the previous move, zeros undo it.

        Args:
            translation: (3,) m. rotation_vector: (3,) rad (axis × angle).

        Raises:
            CameraError: vectors that are not 3 finite numbers.
        """
        t = np.asarray(translation, dtype=float)
        rot = rotation_vector_to_matrix(rotation_vector)
        if t.shape != (3,) or not np.all(np.isfinite(t)):
            from ..core.camera import CameraError

            raise CameraError(f"camera translation must be 3 finite numbers (m), got {np.asarray(translation).tolist()}")
        self._camera_move = (t, rot)

    def _image(self, plane_xy: np.ndarray) -> np.ndarray:
        """Plane points (..., 2) m (x right, y down from the pivot) -> pixels (..., 2)."""
        s = self._values["pixel_scale"]
        p = np.asarray(plane_xy, dtype=float)
        if self._camera_move is not None:
            t, rot = self._camera_move
            p3 = np.concatenate([p, np.zeros(p.shape[:-1] + (1,))], axis=-1)
            p = ((p3 - t) @ rot)[..., :2]
        return np.stack([self.camera.cx + s * p[..., 0], self.camera.cy + s * p[..., 1]], axis=-1)

    def set_parameters(self, values: Mapping[str, float]) -> None:
        """Write parameters by name (SI units).

        Raises:
            ParameterSpecError: on an unknown name or a non-finite value.
        """
        self.parameters.check_names(values, require_all=False)
        for k, v in values.items():
            if not math.isfinite(float(v)):
                raise ParameterSpecError(f"toy twin: parameter '{k}' must be finite, got {v!r}")
        self._values.update({k: float(v) for k, v in values.items()})

    def get_parameters(self) -> dict[str, float]:
        return dict(self._values)

    def _simulate(self, u: np.ndarray, rate: float) -> tuple[np.ndarray, bool, str]:
        p = self._values
        inertia = p["inertia"]
        k, c, f = p["stiffness"], p["damping"], p["friction"]
        gain = p["gain"] * p["transmission"]
        dt = 1.0 / rate / self._substeps
        theta, omega = 0.0, 0.0
        out = np.empty(u.shape[0])
        for i, ui in enumerate(u):
            drive = gain * ui
            for _ in range(self._substeps):
                tau = drive - k * theta - c * omega
                if omega == 0.0 and abs(tau) <= f:
                    continue  # stuck by stiction
                tau -= f * math.copysign(1.0, omega if omega != 0.0 else tau)
                new_omega = omega + dt * tau / inertia
                if omega != 0.0 and new_omega * omega < 0.0 and f > 0.0:
                    new_omega = 0.0  # friction stops the arm instead of reversing it
                omega = new_omega
                theta += dt * omega
            if not (math.isfinite(theta) and abs(theta) < 50.0):
                out[i:] = np.nan
                return out, True, f"arm diverged at step {i} (theta={theta!r} rad)"
            out[i] = theta
        return out, False, ""

    def rollout(self, excitation: Excitation, *, render: bool = False) -> RolloutResult:
        """Replay ``excitation`` from rest (θ = 0); deterministic.

        Returns:
            RolloutResult with keypoints (T, K, 2) px; frames (T, H, W, 3) uint8 if ``render``.
        """
        u = np.asarray(excitation.values, dtype=float)[:, 0]
        msg = self.rollout_limits.substeps_problem(u.shape[0] * self._substeps,
                                                   f"{self._substeps} per frame, {u.shape[0]} frames")
        if msg:  # refused before it starts: a failed evaluation
            theta, diverged = np.full(u.shape[0], np.nan), True
        else:
            theta, diverged, msg = self._simulate(u, excitation.rate)
        plane = np.stack([self._lengths[None, :] * np.sin(theta)[:, None],
                          self._lengths[None, :] * np.cos(theta)[:, None]], axis=-1)  # (T, K, 2) m
        kp = self._image(plane)
        valid = np.isfinite(kp).all(axis=2)
        time = (np.arange(u.shape[0]) + 1) / excitation.rate
        traj = Trajectory(time, kp, valid, self.keypoint_names, "sim", excitation.name)
        frames = self._render(kp) if render else None
        return RolloutResult(traj, frames, diverged, msg, {"joint_angle": theta[:, None]})

    def _render(self, kp: np.ndarray) -> np.ndarray:
        import cv2

        h, w = self.camera.height, self.camera.width
        colours = [(220, 30, 30), (30, 200, 30), (30, 30, 220)]
        frames = np.full((kp.shape[0], h, w, 3), 90, dtype=np.uint8)
        pivot = tuple(int(round(v)) for v in self._image(np.zeros(2)))
        for t in range(kp.shape[0]):
            img = frames[t]
            if not np.isfinite(kp[t]).all():
                continue
            tip = tuple(int(round(v)) for v in kp[t, -1])
            cv2.line(img, pivot, tip, (200, 200, 200), 3, cv2.LINE_AA)
            for j in range(kp.shape[1]):
                c = tuple(int(round(v)) for v in kp[t, j])
                cv2.circle(img, c, 6, colours[j % len(colours)], -1, cv2.LINE_AA)
        return frames

    def export_model(self, path) -> None:
        """Write the current parameters as YAML (the toy has no model file of its own)."""
        import yaml
        from pathlib import Path

        Path(path).write_text(yaml.safe_dump({"toy_arm": self.get_parameters()}, sort_keys=False))


def make_rig(free: Sequence[str] = _DEFAULT_FREE, *, excitations: Mapping[str, Any] | None = None,
             **twin_kwargs: Any) -> Rig:
    """The toy rig: :class:`ToyArmTwin`, its parameter set and step/chirp training, multisine holdout.

    Args:
        free: parameters to calibrate (see :data:`TOY_SPECS`).
        excitations: override of the ``{"train": [...], "holdout": [...]}`` excitation configs.
        twin_kwargs: forwarded to :class:`ToyArmTwin`.
    """
    params = toy_parameters(free)
    exc_cfg = dict(excitations or _EXCITATIONS)
    sets = build_excitation_sets(exc_cfg, ToyArmTwin.actuator_names)
    tracker = {"kind": "markers", "markers": [
        {"name": "mid", "hsv_lower": [0, 120, 120], "hsv_upper": [10, 255, 255]},
        {"name": "tip", "hsv_lower": [50, 120, 120], "hsv_upper": [70, 255, 255]}]}
    return Rig(
        name="toy",
        description=("A rigid arm on a torsion spring, driven by one motor, filmed from the front; keypoints 'mid' "
                     "and 'tip' are discs at 0.05 m and 0.10 m from the pivot."),
        parameters=params,
        excitations=sets,
        make_twin=lambda **kw: ToyArmTwin(params, **{**twin_kwargs, **kw}),
        tracker=tracker,
        config={"free": list(free), "excitations": exc_cfg},
    )
