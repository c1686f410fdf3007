"""MuJoCo twin of a planar tendon-driven finger (the Vid2Sid rigid benchmark).

The model (``models/finger.xml``) is a three-phalanx finger in a vertical plane:
hinge joints MCP, PIP, DIP with return springs, viscous damping, dry friction and
armature; one motor pulls a flexor tendon (fixed tendon, constant moment arms); a
coloured sphere marks the distal end of each phalanx; a fixed camera films the plane.
:class:`FingerTwin` implements :class:`~vid2sid_ros.sim.base.Twin`:

* :meth:`FingerTwin.set_parameters` writes values into compiled-model fields named by
  each spec's ``target`` (``"dof_damping[1]"``, ``"actuator_gainprm[0,0]"``, or a
  comma-separated list with optional ratios ``"jnt_stiffness[1]*0.6"``) without
  reloading the model, then recomputes the constants MuJoCo derives from them at compile
  time (:func:`~.mujoco_constants.refresh_constants`);
* :meth:`FingerTwin.rollout` starts every trial from rest at the static equilibrium
  under gravity with zero command (a rest state for any damping and friction), holds
  each command for one command period (``ceil(period / max_physics_timestep)`` fixed
  physics substeps), and samples the marker centres at the end of each period,
  projected through the camera (px, pixel centres at integer coordinates);
* divergence (non-finite state, MuJoCo instability warnings) ends the rollout with
  ``diverged=True`` instead of raising.

``make_rig(**overrides)`` builds the registry's ``finger`` rig from
:func:`default_config`.
"""

from __future__ import annotations

import copy
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

os.environ.setdefault("MUJOCO_GL", "egl")
# Single-threaded llvmpipe is faster than two threads on a small, shared CPU budget.
os.environ.setdefault("LP_NUM_THREADS", "1")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from ..core.excitation import Excitation, build_excitation_sets  # noqa: E402
from ..core.names import did_you_mean  # noqa: E402
from ..core.parameters import ParameterSet, ParameterSpecError, load_parameter_set  # noqa: E402
from ..core.trajectory import Trajectory  # noqa: E402
from .base import CameraIntrinsics, RolloutLimits, RolloutMeter, RolloutResult, TwinError  # noqa: E402
from .mujoco_batch import BatchScratch, sensor_model_copy  # noqa: E402
from .mujoco_constants import derived_field_problem, refresh_constants  # noqa: E402
from .mujoco_model import compiled_model_xml  # noqa: E402
from .mujoco_render import (OffscreenRenderer, camera_extrinsics, camera_intrinsics, move_camera,  # noqa: E402
                            preview_size, project_points)

__all__ = ["FingerTwin", "FieldTarget", "parse_targets", "check_field", "default_config", "make_rig",
           "MODEL_PATH", "PARAMETERS_PATH"]

MODELS_DIR = Path(__file__).resolve().parent / "models"
#: the shipped finger model
MODEL_PATH = MODELS_DIR / "finger.xml"
#: the shipped parameter specification
PARAMETERS_PATH = MODELS_DIR / "finger_parameters.yaml"

_TARGET_RE = re.compile(
    r"^\s*(?P<field>[a-z_][a-z0-9_]*)\s*\[\s*(?P<i>\d+)\s*(?:,\s*(?P<j>\d+)\s*)?\]"
    r"\s*(?:\*\s*(?P<ratio>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))?\s*$")
_DIVERGENCE_WARNINGS = (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS,
                        mujoco.mjtWarning.mjWARN_BADQVEL)
#: |joint angle| beyond this (rad) is treated as a blown-up simulation
_MAX_ABS_QPOS = 50.0

#: key of a ``_batch_job`` memo's entry ``(values, point key)``: the values the last pair wrote into the model
_LAST_WRITTEN = "last written"


@dataclass(frozen=True)
class FieldTarget:
    """One compiled-model entry a parameter writes: ``model.<field>[index] = value * ratio``."""

    field: str
    index: tuple[int, ...]
    ratio: float = 1.0

    def __str__(self) -> str:
        idx = ",".join(str(i) for i in self.index)
        return f"{self.field}[{idx}]" + ("" if self.ratio == 1.0 else f"*{self.ratio:g}")


def check_field(model: mujoco.MjModel, name: str, field: str) -> None:
    """Check that ``field`` is a real-valued MjModel field a parameter may target.

    Raises:
        TwinError: ``parameter 'NAME': target field 'dof_armatrue' is not a real-valued MjModel field (did you
            mean dof_armature?)`` (the closest valid name, by :func:`difflib.get_close_matches`).
    """
    arr = getattr(model, field, None)
    if not isinstance(arr, np.ndarray) or arr.dtype.kind != "f":
        fields = [f for f in dir(model) if not f.startswith("_")
                  and isinstance(getattr(model, f, None), np.ndarray) and getattr(model, f).dtype.kind == "f"]
        hint = did_you_mean(field, fields) or "; e.g. dof_damping, jnt_stiffness, body_mass"
        raise TwinError(f"parameter '{name}': target field '{field}' is not a real-valued MjModel field{hint}")


def parse_targets(model: mujoco.MjModel, name: str, target: str) -> list[FieldTarget]:
    """Parse and check a spec's ``target`` string against a compiled model.

    Grammar: ``field[i]`` or ``field[i,j]``, optionally ``*ratio``, comma-separated
    at the top level, e.g. ``"jnt_stiffness[0]*1.0, jnt_stiffness[1]*0.6"``.

    Raises:
        TwinError: naming the parameter: empty target, syntax error, unknown
            MjModel field (with the closest valid names), a field MuJoCo derives from
            others (:data:`~.mujoco_constants.DERIVED_FIELDS`), index out of range, or a
            ratio that is not finite.
    """
    if not target or not target.strip():
        raise TwinError(f"parameter '{name}': empty 'target'; expected e.g. 'dof_damping[0]'")
    parts = _split_top_level(target)
    out = []
    for part in parts:
        m = _TARGET_RE.match(part)
        if not m:
            raise TwinError(f"parameter '{name}': cannot parse target {part.strip()!r}; expected "
                            "'field[i]', 'field[i,j]' or 'field[i]*ratio' (e.g. 'jnt_stiffness[1]*0.6')")
        field = m.group("field")
        check_field(model, name, field)
        arr = getattr(model, field)
        derived = derived_field_problem(field)
        if derived:
            raise TwinError(f"parameter '{name}': {derived}")
        index = (int(m.group("i")),) + ((int(m.group("j")),) if m.group("j") is not None else ())
        if arr.ndim == 1 and len(index) == 2 or arr.ndim == 2 and len(index) == 1 or arr.ndim > 2:
            raise TwinError(f"parameter '{name}': target '{part.strip()}' needs {arr.ndim} index(es) "
                            f"for field '{field}' of shape {arr.shape}")
        if any(i >= n for i, n in zip(index, arr.shape)):
            raise TwinError(f"parameter '{name}': index {index} out of range for '{field}' of shape {arr.shape}")
        ratio = float(m.group("ratio")) if m.group("ratio") else 1.0
        if not math.isfinite(ratio):
            raise TwinError(f"parameter '{name}': ratio in {part.strip()!r} is not finite")
        out.append(FieldTarget(field, index, ratio))
    return out


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()] or [text]


class FingerTwin(BatchScratch):
    """Simulated tendon-driven finger with a fixed camera (implements ``Twin``).

    Args:
        model_path: MJCF file; default the shipped ``models/finger.xml``.
        parameters: a :class:`ParameterSet` or a spec YAML path; default the shipped
            ``models/finger_parameters.yaml``. Nominal values are written at start.
        width, height: camera image size, px (<= 1280 x 960).
        camera: camera name in the model.
        keypoints: ``{keypoint name: marker geom name}`` in trajectory order; the
            keypoint is the marker sphere's centre.
        max_physics_timestep: upper bound of the fixed physics step, s; each command
            period is split into ``ceil(period / max_physics_timestep)`` equal substeps.
        start: ``"static_equilibrium"`` (rest under gravity, zero command, solved for
            the current parameters) or ``"reference"`` (the model's ``qpos0``).

    Raises:
        TwinError: unreadable model, unknown camera/marker, or a parameter target
            that does not name a model field.
        ParameterSpecError: malformed parameter specification.
    """

    #: each spec's ``target`` is parsed and written (a re-targeted spec is honoured)
    writes_targets = True
    #: cost cap of one rollout (:class:`~vid2sid_ros.sim.base.RolloutLimits`); the loop sets it
    rollout_limits: RolloutLimits = RolloutLimits()
    #: a state with any ``|qpos|`` above this is a blow-up (rad or m)
    _max_abs_qpos = _MAX_ABS_QPOS

    def __init__(self, *, model_path: str | Path | None = None,
                 parameters: ParameterSet | str | Path | None = None,
                 width: int = 320, height: int = 240, camera: str = "front",
                 keypoints: Mapping[str, str] | None = None,
                 max_physics_timestep: float = 0.002, start: str = "static_equilibrium") -> None:
        self.model_path = Path(model_path) if model_path is not None else MODEL_PATH
        try:
            self.model = mujoco.MjModel.from_xml_path(str(self.model_path))
        except (ValueError, OSError) as err:
            raise TwinError(f"cannot load MuJoCo model {self.model_path}: {err}") from None
        self._file_timestep = float(self.model.opt.timestep)  # rollouts change it to their substep
        self.data = mujoco.MjData(self.model)
        if parameters is None:
            parameters = PARAMETERS_PATH
        self.parameters: ParameterSet = (parameters if isinstance(parameters, ParameterSet)
                                         else load_parameter_set(parameters))
        if not (max_physics_timestep > 0 and math.isfinite(max_physics_timestep)):
            raise TwinError(f"max_physics_timestep must be > 0 s, got {max_physics_timestep}")
        if start not in ("static_equilibrium", "reference"):
            raise TwinError(f"start must be 'static_equilibrium' or 'reference', got {start!r}")
        self.max_physics_timestep = float(max_physics_timestep)
        self.start = start

        self._cam_id = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if self._cam_id < 0:
            names = [self.model.camera(i).name for i in range(self.model.ncam)]
            raise TwinError(f"camera {camera!r} not in {self.model_path}; cameras: {names}")
        self.camera_name = camera
        self._cam_home = (self.model.cam_pos[self._cam_id].copy(), self.model.cam_quat[self._cam_id].copy())
        self.camera: CameraIntrinsics = camera_intrinsics(self.model, self._cam_id, width, height)
        g = self.model.vis.global_
        if self.camera.width > g.offwidth or self.camera.height > g.offheight:  # was: refused at the first render
            raise TwinError(f"finger camera: image {self.camera.width}x{self.camera.height} px exceeds the model's "
                            f"offscreen buffer {g.offwidth}x{g.offheight} ({self.model_path})")

        keypoints = dict(keypoints or {"proximal": "marker_proximal", "middle": "marker_middle",
                                       "tip": "marker_tip"})
        self._marker_geoms = []
        for kp, geom in keypoints.items():
            gid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, geom)
            if gid < 0:
                raise TwinError(f"keypoint '{kp}': marker geom {geom!r} not in {self.model_path}")
            self._marker_geoms.append(gid)
        self.keypoint_names: tuple[str, ...] = tuple(keypoints)
        self.actuator_names: tuple[str, ...] = tuple(self.model.actuator(i).name for i in range(self.model.nu))
        self.joint_names: tuple[str, ...] = tuple(self.model.joint(i).name for i in range(self.model.njnt))

        self._targets = {s.name: parse_targets(self.model, s.name, s.target) for s in self.parameters}
        self._const_data = mujoco.MjData(self.model)  # scratch of refresh_constants (its state is overwritten)
        self._values: dict[str, float] = {}
        self._renderer: OffscreenRenderer | None = None
        self._cam_pose: tuple[np.ndarray, np.ndarray] | None = None
        self._substeps, self._period, self._diverged, self._steps_done = 1, 1.0 / 30.0, "", 0
        self._set_period(self._period)
        self.set_parameters(self.parameters.nominal())

    # -- parameters -------------------------------------------------------------
    def set_parameters(self, values: Mapping[str, float]) -> None:
        """Write parameters (by name, in their spec units) into the compiled model.

        Values outside the spec bounds are written as given (the calibrator owns the
        bounds); the next rollout reports a divergence if they make the model unstable.

        Raises:
            ParameterSpecError: unknown name, or a value that is not a finite number.
        """
        self.parameters.check_names(values, require_all=False)
        checked = {}
        for name, v in values.items():
            try:
                fv = float(v)
            except (TypeError, ValueError):
                raise ParameterSpecError(f"parameter '{name}': value must be a number, got {v!r}") from None
            if not math.isfinite(fv):
                raise ParameterSpecError(f"parameter '{name}': value must be finite, got {v!r}")
            checked[name] = fv
        for name, fv in checked.items():
            for t in self._targets[name]:
                getattr(self.model, t.field)[t.index] = fv * t.ratio
            self._values[name] = fv
        if any(self._targets[name] for name in checked):  # mass, inertia, armature: see mujoco_constants
            refresh_constants(self.model, self._const_data)

    def get_parameters(self) -> dict[str, float]:
        """Current value of every parameter, ``{name: value}`` in spec units."""
        return dict(self._values)

    def export_model(self, path: str | Path) -> Path:
        """Write the model with the current parameter values as MJCF (calibrated model copy).

        Returns:
            The path written.

        Raises:
            TwinError: if MuJoCo cannot re-export the model.
        """
        path = Path(path)
        try:
            spec = mujoco.MjSpec.from_file(str(self.model_path))
            text = compiled_model_xml(spec, self.model, timestep=self._file_timestep)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except (ValueError, OSError) as err:
            raise TwinError(f"cannot write calibrated model to {path}: {err}") from None
        return path

    def move_camera(self, translation: Sequence[float], rotation_vector: Sequence[float]) -> None:
        """Move the filming camera in its own optical frame (a camera-pose error; both the render
        and the projected keypoints see it from the next trial on). The move is relative to the
        model's camera; a new call replaces the previous move, ``(0, 0, 0), (0, 0, 0)`` undoes it.

        Args:
            translation: (3,) m along the optical axes (x right, y down, z forward).
            rotation_vector: (3,) rad about the optical axes (x tilt, y pan, z roll).

        Raises:
            CameraError: vectors that are not 3 finite numbers.
        """
        self.model.cam_pos[self._cam_id], self.model.cam_quat[self._cam_id] = self._cam_home
        move_camera(self.model, self._cam_id, np.asarray(translation, float), np.asarray(rotation_vector, float))
        self._cam_pose = None  # the next reset() recomputes the camera's world pose

    # -- simulation -------------------------------------------------------------
    def static_equilibrium(self, ctrl: Sequence[float] | None = None) -> np.ndarray:
        """Joint angles (nq,) rad where springs, gravity and the tendon balance.

        Solves ``qfrc_passive + qfrc_actuator - qfrc_bias = 0`` at zero velocity
        (dry friction and joint limits excluded: a state at rest there needs no
        friction force, so it is a rest state for any friction loss). Falls back to
        the model's ``qpos0`` if Newton's method does not converge (residual > 1e-9 N*m).
        """
        m, d = self.model, self.data
        ctrl_vec = np.zeros(m.nu) if ctrl is None else np.asarray(ctrl, dtype=float)
        qpos, passive, actuator, bias = d.qpos, d.qfrc_passive, d.qfrc_actuator, d.qfrc_bias  # views, looked up once
        d.qvel[:] = 0.0  # mj_forward reads the velocity and the control, never writes them: set once
        d.ctrl[:] = ctrl_vec

        def residual(q):
            qpos[:] = q
            mujoco.mj_forward(m, d)
            return passive + actuator - bias

        # Newton's method with a finite-difference Jacobian, always from qpos0 (no warm
        # start), so a rollout depends only on its inputs.
        eps = 1e-7
        probes = np.eye(m.nq) * eps  # row i: eps in coordinate i, 0 elsewhere
        q = m.qpos0.copy()
        f = residual(q)
        for _ in range(50):  # (the arrays' own reductions: np.all / np.max's values without their wrappers)
            if not np.isfinite(f).all():
                break
            if np.abs(f).max() < 1e-12:
                return q
            J = np.empty((m.nv, m.nq))
            for i, probe in enumerate(q + probes):  # row i: q + probes[i]
                J[:, i] = (residual(probe) - f) / eps
            try:
                step = np.linalg.solve(J, -f)
            except np.linalg.LinAlgError:
                break
            step *= min(1.0, 0.5 / max(np.abs(step).max(), 1e-300))  # at most 0.5 rad per iteration
            q = q + step
            f = residual(q)
        if np.isfinite(f).all() and np.abs(f).max() < 1e-9:
            return q
        return m.qpos0.copy()

    def _renderer_for_rollout(self) -> OffscreenRenderer:
        """The offscreen renderer, created on first use, its GL context current on this thread."""
        if self._renderer is None:
            self._renderer = OffscreenRenderer(self.model, self.camera.width, self.camera.height, self._cam_id)
        self._renderer.make_current()
        return self._renderer

    def _ctrl_matrix(self, excitation: Excitation) -> np.ndarray:
        v = excitation.values
        if v.shape[1] != self.model.nu:
            raise TwinError(f"excitation '{excitation.name}' has {v.shape[1]} command column(s) "
                            f"{excitation.actuator_names}; the finger has {self.model.nu}: {self.actuator_names}")
        names = excitation.actuator_names
        if set(names) == set(self.actuator_names) and names != self.actuator_names:
            v = v[:, [names.index(n) for n in self.actuator_names]]
        return v

    # -- one command period at a time (SteppableTwin; rollout() is built on these) ------------
    def reset(self, period: float | None = None) -> None:
        """Start a trial: back to the rest state (see ``start``) with the current parameters.

        Args:
            period: command period of the coming steps, s (> 0); default: the last one
                (1/30 s initially). Each period is split into
                ``ceil(period / max_physics_timestep)`` equal physics substeps.

        Raises:
            TwinError: if ``period`` is not a positive finite number.
        """
        m, d = self.model, self.data
        self._set_period(self._period if period is None else period)
        mujoco.mj_resetData(m, d)
        q0 = self.static_equilibrium() if self.start == "static_equilibrium" else m.qpos0.copy()
        mujoco.mj_resetData(m, d)
        d.qpos[:] = q0
        mujoco.mj_forward(m, d)
        self._cam_pose = camera_extrinsics(d, self._cam_id)
        self._steps_done = 0
        self._diverged = ""

    def _set_period(self, period: float) -> None:
        period = float(period)
        if not (math.isfinite(period) and period > 0):
            raise TwinError(f"command period must be > 0 s, got {period!r}")
        self._period = period
        self._substeps = max(1, int(math.ceil(period / self.max_physics_timestep - 1e-9)))

    def step(self, command: Sequence[float] | np.ndarray, period: float | None = None) -> None:
        """Hold ``command`` for exactly one command period, then sample the state.

        After the call, :meth:`observe` and :meth:`render` show the end of the period
        (time ``(k + 1) * period`` for the k-th step since :meth:`reset`), which is row
        ``k`` of :meth:`rollout`. The first call without a prior :meth:`reset` resets.
        A divergence is recorded in :attr:`diverged` / :attr:`message`, not raised.

        Args:
            command: (A,) values in :attr:`actuator_names` order (normalised flexor command
                in [0, 1]; MuJoCo clamps to the actuator's ``ctrlrange``).
            period: command period, s; default the one set by :meth:`reset`. A different
                value re-splits the physics substeps from this step on.

        Raises:
            TwinError: wrong number of values or non-finite command or period; stepping
                a diverged simulation (call :meth:`reset`).
        """
        if self._cam_pose is None:
            self.reset(period)
        elif period is not None and period != self._period:
            self._set_period(period)
        if self._diverged:
            raise TwinError(f"the simulation diverged ({self._diverged}); call reset() before stepping again")
        u = np.asarray(command, dtype=float).ravel()
        if u.shape[0] != self.model.nu or not np.all(np.isfinite(u)):
            raise TwinError(f"command must hold {self.model.nu} finite value(s) for {list(self.actuator_names)}, "
                            f"got {u.tolist()}")
        m, d, k = self.model, self.data, self._steps_done
        m.opt.timestep = self._period / self._substeps  # set per step: a rollout in between may change it
        d.ctrl[:] = u
        mujoco.mj_step(m, d, self._substeps)
        mujoco.mj_kinematics(m, d)  # geom poses at the end of the period (mj_step leaves them one substep behind)
        self._steps_done = k + 1
        problem = self._divergence(d)
        if problem:
            self._diverged = (f"simulation diverged at command step {k} (t={(k + 1) * self._period:.3f} s): "
                              f"{problem}; parameters {self._values}")

    @property
    def diverged(self) -> bool:
        """True once the current trial's simulation has blown up (see :attr:`message`)."""
        return bool(self._diverged)

    @property
    def message(self) -> str:
        """Why the current trial diverged (step, time, MuJoCo warning, parameters), or ``""``."""
        return self._diverged

    @property
    def steps_done(self) -> int:
        """Command periods stepped since the last :meth:`reset`."""
        return self._steps_done

    def markers_world(self) -> np.ndarray:
        """Marker centres now, (K, 3) m (a copy)."""
        return self.data.geom_xpos[self._marker_geoms].copy()

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        """Keypoints now: ``((K, 2) px, (K,) bool)``, projected marker centres and in-image validity.

        NaN and all invalid once the trial diverged.

        Raises:
            TwinError: before the first :meth:`reset` / :meth:`step`.
        """
        if self._cam_pose is None:
            raise TwinError("observe() before reset(): start a trial first")
        if self._diverged:
            K = len(self._marker_geoms)
            return np.full((K, 2), np.nan), np.zeros(K, dtype=bool)
        return self._project(self.data.geom_xpos[self._marker_geoms])

    def render(self, out: np.ndarray | None = None, *, size: tuple[int, int] | None = None) -> np.ndarray:
        """RGB frame of the current state, (H, W, 3) uint8 (into ``out`` when given).

        The GL context is created on first use and made current on the calling thread;
        render from one thread at a time.

        Raises:
            TwinError: before the first :meth:`reset` / :meth:`step`, or no OpenGL backend.
        """
        if self._cam_pose is None:
            raise TwinError("render() before reset(): start a trial first")
        return self._renderer_for_rollout().render(self.data, out=out, size=size)

    def _project(self, points_world: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pixels (..., 2) of world points (..., 3) and their in-image validity (...)."""
        kp = project_points(points_world, *self._cam_pose, self.camera)
        valid = np.all(np.isfinite(kp), axis=-1)
        valid &= (kp[..., 0] >= 0) & (kp[..., 0] <= self.camera.width - 1)
        valid &= (kp[..., 1] >= 0) & (kp[..., 1] <= self.camera.height - 1)
        return kp, valid

    # -- one trial -----------------------------------------------------------------------------
    def rollout(self, excitation: Excitation, *, render: bool = False,
                render_steps: Sequence[int] | None = None, render_width: int | None = None) -> RolloutResult:
        """Reset to rest and replay ``excitation``; deterministic.

        Equivalent to :meth:`reset` with the excitation's period followed by one
        :meth:`step` (and :meth:`render`) per command.

        Args:
            excitation: commands (T, nu) at ``excitation.rate`` Hz, columns in
                :attr:`actuator_names` order (normalised flexor command in [0, 1];
                MuJoCo clamps to the actuator's ``ctrlrange``).
            render: also render one RGB frame per command step.
            render_steps: with ``render``, render only these rows (command steps in [0, T)), in this
                order: ``frames`` is then (len(render_steps), H, W, 3) (a report's thinned video
                without rendering every step).
            render_width: with ``render``, frames this many px wide (the same view, aspect kept:
                :func:`~.mujoco_render.preview_size`) instead of the camera's size; None: full size.

        Returns:
            :class:`RolloutResult` with the projected marker centres (T, K, 2) px,
            sampled at the end of each command period (time ``(k + 1) / rate`` s,
            step ``k``), frames (T, H, W, 3) uint8 if ``render``, and ``state``:
            ``qpos`` (T, nq) rad, ``ctrl`` (T, nu), ``tendon_force`` (T, nu) N,
            ``markers_world`` (T, K, 3) m (also as ``keypoints_world``, the name every
            twin uses, :mod:`vid2sid_ros.sim.measurement`). On divergence the samples from the
            failing step on are NaN/invalid, frames black, ``diverged=True``.

        Raises:
            TwinError: command columns do not match the actuators, or hold NaN/inf; no
                OpenGL backend when ``render`` is requested.
        """
        m, d = self.model, self.data
        ctrl = self._ctrl_matrix(excitation)
        if not np.all(np.isfinite(ctrl)):
            raise TwinError(f"excitation '{excitation.name}' holds NaN or inf commands")
        T, K = excitation.num_steps, len(self._marker_geoms)
        want = _render_rows(T, render_steps) if render else {}
        size = preview_size(self.camera.width, self.camera.height, render_width)
        frames = (np.zeros((len(render_steps) if render_steps is not None else T, size[1], size[0], 3), np.uint8)
                  if render else None)
        self.reset(excitation.period)
        refused = self.rollout_limits.substeps_problem(
            T * self._substeps, f"{self._substeps} per {excitation.period:.4g} s frame, {T} frames")
        if refused:  # a failed evaluation, not a hang
            self._diverged = refused
        meter = RolloutMeter(self.rollout_limits)

        markers = np.full((T, K, 3), np.nan)
        qpos = np.full((T, m.nq), np.nan)
        applied = np.full((T, m.nu), np.nan)
        tension = np.full((T, m.nu), np.nan)
        for k in range(0 if refused else T):
            self.step(ctrl[k])
            if self._diverged:
                break
            markers[k] = d.geom_xpos[self._marker_geoms]
            qpos[k] = d.qpos
            applied[k] = d.ctrl
            tension[k] = d.actuator_force
            for j in want.get(k, ()):
                self.render(out=frames[j], size=size)
            over = meter.problem(k)
            if over:  # the samples so far are kept, the rollout counts as failed
                self._diverged = over
                break

        kp, valid = self._project(markers)
        traj = Trajectory(time=(np.arange(T) + 1) / excitation.rate, keypoints=kp, valid=valid,
                          names=self.keypoint_names, source="sim", trial_id=excitation.name,
                          meta={"rig": "finger", "parameters": dict(self._values),
                                "physics_timestep": m.opt.timestep, "substeps": self._substeps})
        state = {"qpos": qpos, "ctrl": applied, "tendon_force": tension, "markers_world": markers,
                 "keypoints_world": markers}
        return RolloutResult(trajectory=traj, frames=frames, diverged=bool(self._diverged),
                             message=self._diverged, state=state)

    def _batch_job(self, excitation: Excitation, values: Mapping[str, float], memo: dict):
        """The :class:`~.mujoco_batch.BatchJob` of :meth:`rollout` at ``values`` (used by ``rollout_batch`` /
        ``rollout_many``): the parameters written, the rest state solved, the model copied; None where
        :meth:`rollout` must run it (no command step, refused by the rollout limits). The rest state and
        the model copy depend on the parameters and the command period only: pairs of one
        ``rollout_many`` call at the same point and period share them (``memo``).

        Raises:
            TwinError, ParameterSpecError: as :meth:`set_parameters` / :meth:`rollout`.
        """
        from .mujoco_batch import BatchJob, full_state

        ctrl = self._ctrl_matrix(excitation)
        if not np.all(np.isfinite(ctrl)):
            raise TwinError(f"excitation '{excitation.name}' holds NaN or inf commands")
        T = excitation.num_steps
        nsub = max(1, int(math.ceil(float(excitation.period) / self.max_physics_timestep - 1e-9)))
        if T == 0 or self.rollout_limits.substeps_problem(T * nsub):
            return None
        last = memo.pop(_LAST_WRITTEN, None)  # the previous pair's values, written into the model just now
        if last is None or last[0] != values or "set_parameters" in vars(self):  # (a wrapper may write more)
            self.set_parameters(values)  # (the same values again would write the same fields and constants)
            last = (dict(values), tuple(sorted(self._values.items())))
        key = (last[1], float(excitation.period))
        if key not in memo:
            self.reset(excitation.period)
            self.model.opt.timestep = self._period / self._substeps  # as step() sets it
            memo[key] = (self._sensor_model(slot=len(memo)) or copy.copy(self.model),
                         full_state(self.model, self.data), self.data.qacc_warmstart.copy(), dict(self._values),
                         self._cam_pose)
        model, init, warm, point, cam_pose = memo[key]
        u = np.asarray(ctrl, dtype=float)

        def finish(states: np.ndarray, sensordata: np.ndarray | None, d: mujoco.MjData) -> RolloutResult:
            self._cam_pose = cam_pose
            return self._batched_result(excitation, model, d, init, states, sensordata, u, nsub, point)

        memo[_LAST_WRITTEN] = last
        return BatchJob(model, init, warm, np.repeat(u, nsub, axis=0), finish,
                        extra=1 if model.nsensordata else 0)

    def _sensor_model(self, slot: int | None = None) -> mujoco.MjModel | None:
        """A copy of the twin's model as it is now (parameters, ``opt.timestep``) with a ``framepos`` sensor
        per marker geom and an ``actuatorfrc`` sensor per actuator appended, so that ``mujoco.rollout``
        returns the markers and tendon forces of every step from its C++ threads; None where that model
        cannot be made equal to the twin's (then the states are read back in Python).

        It is compiled once from the twin's MJCF with the sensors added; each copy gets the current
        parameter values written as :meth:`set_parameters` writes them and its constants refreshed. The
        first copy is compared with the twin's model (:func:`~.mujoco_batch.same_physics`): a difference
        (or two parameters writing one field) keeps the Python read-back for good.
        None as well while ``set_parameters`` is wrapped on the instance (a residual-diagnosis cause writes
        model fields of its own after the parameters: the rollout then steps a copy of the twin's model itself).
        ``slot``: the point's index in its batch; the copy kept for it from an earlier batch is written again
        (:func:`~.mujoco_batch.sensor_model_copy`); None: a fresh copy.
        """
        def write(m: mujoco.MjModel, scratch: mujoco.MjData) -> None:
            for name, fv in self._values.items():
                for t in self._targets[name]:
                    getattr(m, t.field)[t.index] = fv * t.ratio
            if any(self._targets[name] for name in self._values):
                refresh_constants(m, scratch)

        return sensor_model_copy(self, self._compile_sensor_model, write, slot)

    def _compile_sensor_model(self) -> tuple[mujoco.MjModel, mujoco.MjData] | None:
        """(the twin's MJCF compiled with the marker and actuator sensors appended, its scratch data), or None
        (the MJCF cannot be re-read, it has sensors of its own, or two parameters write one model field)."""
        writes = [(t.field, tuple(t.index)) for ts in self._targets.values() for t in ts]
        if self.model.nsensor or len(set(writes)) != len(writes):
            return None
        try:
            spec = mujoco.MjSpec.from_file(str(self.model_path))
            for g in self._marker_geoms:
                spec.add_sensor(type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objtype=mujoco.mjtObj.mjOBJ_GEOM,
                                objname=self.model.geom(g).name)
            for i in range(self.model.nu):
                spec.add_sensor(type=mujoco.mjtSensor.mjSENS_ACTUATORFRC, objtype=mujoco.mjtObj.mjOBJ_ACTUATOR,
                                objname=self.model.actuator(i).name)
            m = spec.compile()
        except Exception:  # noqa: BLE001 - the Python read-back serves any model
            return None
        return m, mujoco.MjData(m)

    def _batched_result(self, excitation: Excitation, m: mujoco.MjModel, d: mujoco.MjData, init: np.ndarray,
                        states: np.ndarray, sensordata: np.ndarray | None, ctrl: np.ndarray, nsub: int,
                        values: dict[str, float]) -> RolloutResult:
        """:meth:`rollout`'s result from a clean batched rollout's states (S, nstate), S = T * nsub, and,
        from a model with the read-back sensors (:meth:`_sensor_model`; one more step), its sensor values
        (S + 1, nsensordata): row j computed from the state after j steps with the control of step j + 1."""
        from .mujoco_batch import FULL_STATE

        T, K = excitation.num_steps, len(self._marker_geoms)
        markers = np.empty((T, K, 3))
        tension = np.empty((T, m.nu))
        if sensordata is not None:  # the end of each period; the period's last substep
            markers[:] = sensordata[nsub::nsub][:T, :3 * K].reshape(T, K, 3)
            tension[:] = sensordata[nsub - 1::nsub][:T, 3 * K:3 * K + m.nu]
        else:  # read back from the states
            every = np.concatenate([init[None], states])  # row j: after j physics steps
        for k in range(0 if sensordata is not None else T):
            mujoco.mj_setState(m, d, every[(k + 1) * nsub - 1], FULL_STATE)  # before the period's last substep
            d.ctrl[:] = ctrl[k]
            mujoco.mj_fwdPosition(m, d)  # the actuator force of that substep (what mj_step leaves in data)
            mujoco.mj_fwdVelocity(m, d)
            mujoco.mj_fwdActuation(m, d)
            tension[k] = d.actuator_force
            mujoco.mj_setState(m, d, every[(k + 1) * nsub], FULL_STATE)  # the end of the period
            mujoco.mj_kinematics(m, d)
            markers[k] = d.geom_xpos[self._marker_geoms]
        qpos = states[nsub - 1:T * nsub:nsub, 1:1 + m.nq].copy()  # the end of each period (after (k + 1) * nsub steps)
        kp, valid = self._project(markers)
        traj = Trajectory(time=(np.arange(T) + 1) / excitation.rate, keypoints=kp, valid=valid,
                          names=self.keypoint_names, source="sim", trial_id=excitation.name,
                          meta={"rig": "finger", "parameters": values, "physics_timestep": m.opt.timestep,
                                "substeps": nsub})
        state = {"qpos": qpos, "ctrl": np.array(ctrl, dtype=float), "tendon_force": tension, "markers_world": markers,
                 "keypoints_world": markers}
        return RolloutResult(trajectory=traj, frames=None, diverged=False, message="", state=state)

    @staticmethod
    def _divergence(d: mujoco.MjData) -> str:
        for w in _DIVERGENCE_WARNINGS:
            if d.warning[int(w)].number > 0:
                return f"MuJoCo warning {mujoco.mjtWarning(w).name}"
        if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel)) and np.all(np.isfinite(d.qacc))):
            return "non-finite joint state"
        if np.any(np.abs(d.qpos) > _MAX_ABS_QPOS):
            return f"joint angle beyond {_MAX_ABS_QPOS} rad"
        return ""

    def close(self) -> None:
        """Free the renderer's GL context (the twin can still roll out; rendering re-creates it)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __enter__(self) -> "FingerTwin":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _render_rows(T: int, render_steps: Sequence[int] | None) -> dict[int, list[int]]:
    """``{row: [frame indices]}`` to render: every row of T, or ``render_steps`` (rows in [0, T)).

    Raises:
        TwinError: a requested row outside [0, T).
    """
    if render_steps is None:
        return {k: [k] for k in range(T)}
    out: dict[int, list[int]] = {}
    for j, k in enumerate(render_steps):
        if not 0 <= int(k) < T:
            raise TwinError(f"render_steps: row {k} is outside the rollout's {T} rows")
        out.setdefault(int(k), []).append(j)
    return out


# -- rig ----------------------------------------------------------------------------

def default_config() -> dict[str, Any]:
    """Default configuration of the ``finger`` rig (a fresh, mutable dict).

    Keys: ``model``, ``parameters`` (paths), ``width``, ``height`` (px), ``camera``,
    ``keypoints`` ({name: marker geom}), ``max_physics_timestep`` (s), ``start``,
    ``excitations`` ({"train": [...], "holdout": [...]}, configs of
    :func:`~vid2sid_ros.core.excitation.build_excitation`; commands are normalised
    flexor currents in [0, 1]), ``tracker`` (config of
    :meth:`vid2sid_ros.perception.markers.MarkerTracker.from_config`, HSV ranges of
    the rendered markers, OpenCV H in [0, 180)), ``noise`` (keyword arguments of
    :class:`vid2sid_ros.sim.camera_model.SensorNoiseModel`, used for sim2sim "real" video).
    """
    return {
        "model": str(MODEL_PATH),
        "parameters": str(PARAMETERS_PATH),
        "width": 320,
        "height": 240,
        "camera": "front",
        "keypoints": {"proximal": "marker_proximal", "middle": "marker_middle", "tip": "marker_tip"},
        "max_physics_timestep": 0.002,
        "start": "static_equilibrium",
        "excitations": {
            # training: (1) a two-level step: 0 -> 0.1 at t=0 (small: friction dead-band), -> 0.4 at
            # 0.6 s (gain, overshoot), back to 0.1 at 1.3 s (free ring-down: damping vs friction);
            # (2) a chirp through the 2-3.5 Hz modes (stiffness with the known inertia, damping)
            "train": [
                {"kind": "step", "name": "train_step", "amplitude": 0.3, "offset": 0.1, "t_step": 0.6,
                 "t_release": 1.3, "duration": 2.0, "rate": 30.0},
                {"kind": "chirp", "name": "train_chirp", "amplitude": 0.2, "offset": 0.3, "f0": 0.5,
                 "f1": 4.0, "duration": 2.0, "rate": 30.0},
            ],
            # holdout: controls never used for fitting
            "holdout": [
                {"kind": "multisine", "name": "holdout_multisine", "amplitude": 0.25, "offset": 0.3,
                 "frequencies": [0.7, 1.9, 3.1], "seed": 3, "duration": 2.5, "rate": 30.0},
                {"kind": "sine", "name": "holdout_sine", "amplitude": 0.25, "offset": 0.35, "frequency": 1.5,
                 "duration": 2.0, "rate": 30.0},
            ],
        },
        "tracker": {
            "kind": "markers",
            "markers": [
                {"name": "proximal", "hsv_lower": [100, 120, 80], "hsv_upper": [130, 255, 255]},
                {"name": "middle", "hsv_lower": [45, 120, 80], "hsv_upper": [80, 255, 255]},
                {"name": "tip", "hsv_lower": [170, 120, 80], "hsv_upper": [10, 255, 255]},
            ],
            "min_area_px": 6,
            "roi_radius_px": 24,
        },
        "noise": {"gaussian_sigma": 2.0, "poisson": 4000.0, "blur_px": 0.6, "motion_blur": 0.3,
                  "gamma": 1.0, "exposure": 1.0, "drop_prob": 0.01, "seed": 0},
    }


_DESCRIPTION = (
    "A rigid, tendon-driven robot finger seen from the side: three phalanges (proximal 90 mm, "
    "middle 60 mm, distal 45 mm) hang from a fixed palm block on the left, in a vertical plane, "
    "sagging slightly under their own weight. A motor pulls a flexor tendon that curls the finger "
    "downward; torsional springs at the MCP, PIP and DIP joints return it. Coloured markers sit "
    "near the distal end of each phalanx: blue = proximal, green = middle, red = fingertip. "
    "Keypoints are the marker centres in pixels. Commands are the normalised flexor motor current "
    "in [0, 1]. Stiffer joints: less sag, smaller deflection, faster ringing; more damping: less "
    "overshoot and quicker decay; more friction: the finger stops early and does not return fully "
    "after release; more actuator gain: larger deflection for the same command.")


def make_rig(**overrides: Any):
    """Build the ``finger`` :class:`~vid2sid_ros.sim.registry.Rig`.

    Args:
        overrides: keys of :func:`default_config` to replace (``excitations``,
            ``tracker`` and ``noise`` are replaced whole).

    Raises:
        TwinError: on an unknown override key (lists the valid keys).
        ParameterSpecError, ExcitationError: on a malformed spec or excitation.
    """
    from .registry import Rig

    cfg = default_config()
    unknown = [k for k in overrides if k not in cfg]
    if unknown:
        raise TwinError(f"finger rig: unknown config key(s) {unknown}; valid keys: {', '.join(cfg)}")
    cfg.update(copy.deepcopy(overrides))
    parameters = load_parameter_set(cfg["parameters"])
    twin_keys = ("model", "width", "height", "camera", "keypoints", "max_physics_timestep", "start")

    def make_twin(**kw: Any) -> FingerTwin:
        bad = [k for k in kw if k not in twin_keys + ("parameters",)]
        if bad:
            raise TwinError(f"finger make_twin: unknown argument(s) {bad}; valid: {', '.join(twin_keys)}, parameters")
        args = {k: cfg[k] for k in twin_keys}
        args["model_path"] = args.pop("model")
        args["parameters"] = parameters
        for k, v in kw.items():
            args["model_path" if k == "model" else k] = v
        return FingerTwin(**args)

    excitations = build_excitation_sets(cfg["excitations"], actuator_names=("flexor_motor",))
    return Rig(name="finger", description=_DESCRIPTION, parameters=parameters, excitations=excitations,
               make_twin=make_twin, tracker=cfg["tracker"], config=cfg)
