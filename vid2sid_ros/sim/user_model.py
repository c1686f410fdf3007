"""User rigs without code: a MuJoCo (MJCF or URDF) model + a parameter spec + a camera.

A user brings a clip and an MJCF or URDF model of the thing in it. :class:`UserModelTwin`
turns the model into a :class:`~vid2sid_ros.sim.base.Twin` whose parameters are
declared entirely in the parameter spec YAML; each spec's ``target`` says what it
writes (comma-separated for shared parameters, ``*ratio`` to scale):

==========================  ===============================================================
target                      written into
==========================  ===============================================================
``body_pos[apple,2]*-1``    any real-valued ``MjModel`` field; indices may be numbers or the
                            name of the body/joint/geom/site/actuator/tendon the field is
                            indexed by (``dof_*`` fields take a joint name). The model is not
                            recompiled: after the writes, the constants MuJoCo derives at
                            compile time (``dof_M0``, inverse weights ...) are recomputed
                            (:func:`~.mujoco_constants.refresh_constants`), so ``body_mass``,
                            ``body_inertia`` and ``dof_armature`` act like compiled values.
                            A derived field itself cannot be a target. Geometry is not
                            re-derived: ``geom_size`` moves the collision shape, not the
                            body's mass or inertia (target those as well).
``opt.density``             an ``MjOption`` field (``opt.gravity[2]``, ``opt.viscosity``...)
``camera.yaw``              a nuisance field of the rig's camera: with a pinhole ``camera:``
                            (:data:`~vid2sid_ros.core.camera.CAMERA_FIELDS`: x, y, z m; roll,
                            pitch, yaw rad; fx, fy, cx, cy px; k1, k2, p1, p2, k3); with the
                            legacy planar ``projection:`` (:class:`~vid2sid_ros.sim.image_projection.
                            ImageProjection`: origin_x, origin_y, px_per_m, roll, distance,
                            radial_k1, drift_x, drift_y)
``init.qpos[swing]``        the initial state of the trial (joint name, optional component:
``init.qvel[swing]``        ``init.qpos[ball,1]``); other coordinates start at ``qpos0``, at rest;
                            ``init.qpos[swing]@t2`` sets it for trial ``t2`` only
``trial.time_offset``       time from the initial state to the first video frame, s (>= 0)
==========================  ===============================================================

Keypoints are named sites (or bodies) of the model, projected through the camera (a
pinhole :class:`~vid2sid_ros.core.camera.PinholeCamera`, or the legacy planar projection
relative to an *anchor* site), so the physics never sees the camera; the same camera renders
the twin's frames with MuJoCo's offscreen renderer (:mod:`.mujoco_render`: meshes, materials,
textures and the config's markers, added by :mod:`.mujoco_model`). The rig config that
binds a model, its parameters, camera, markers and trials is read by
:func:`vid2sid_ros.rigs.load_rig` (format: ``docs/rig_config.md``), which builds this twin
through :func:`build_user_twin`.

Time convention (free-decay clips): row ``k`` of a rollout is the state at ``t_k =
time_offset + k / rate`` — sampled *before* command ``k`` is applied — so row 0 shows
the initial state. (The finger twin samples after the command period; with no
commands the difference is only where the initial state sits in time.)
"""

from __future__ import annotations

import copy
import difflib
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from ..core.excitation import Excitation  # noqa: E402
from ..core.names import did_you_mean  # noqa: E402
from ..core.parameters import ParameterSet, ParameterSpecError, load_parameter_set  # noqa: E402
from ..core.trajectory import Trajectory  # noqa: E402
from ..core.camera import CAMERA_FIELDS, CameraError, PinholeCamera, camera_from_config  # noqa: E402
from .base import CameraIntrinsics, RolloutLimits, RolloutMeter, RolloutResult, TwinError  # noqa: E402
from .image_projection import PROJECTION_FIELDS, ImageProjection, ProjectionError  # noqa: E402
from ..share import PACKAGE_DIR, resolve_path  # noqa: E402,F401  (re-exported)
from .mujoco_constants import refresh_constants  # noqa: E402
from .mujoco_batch import BatchScratch  # noqa: E402
from .mujoco_finger import _render_rows, check_field, parse_targets  # noqa: E402
from .mujoco_model import (MarkerSpec, ModelError, build_model, compiled_model_xml, distortion_maps,  # noqa: E402
                           parse_actuators, parse_markers, set_camera)
from .mujoco_render import OffscreenRenderer, preview_size  # noqa: E402

__all__ = ["UserModelTwin", "UserModelError", "Binding", "parse_user_target", "element_name", "write_model_binding",
           "write_model_bindings", "build_user_twin", "resolve_path", "PACKAGE_DIR"]

#: MjModel field prefix -> object type whose names index that field
_PREFIX_OBJ = {
    "body_": mujoco.mjtObj.mjOBJ_BODY, "jnt_": mujoco.mjtObj.mjOBJ_JOINT, "geom_": mujoco.mjtObj.mjOBJ_GEOM,
    "site_": mujoco.mjtObj.mjOBJ_SITE, "actuator_": mujoco.mjtObj.mjOBJ_ACTUATOR, "tendon_": mujoco.mjtObj.mjOBJ_TENDON,
    "cam_": mujoco.mjtObj.mjOBJ_CAMERA, "light_": mujoco.mjtObj.mjOBJ_LIGHT, "mat_": mujoco.mjtObj.mjOBJ_MATERIAL,
    "eq_": mujoco.mjtObj.mjOBJ_EQUALITY, "sensor_": mujoco.mjtObj.mjOBJ_SENSOR,
}
_INIT_RE = re.compile(r"^init\.(?P<what>qpos|qvel)\[\s*(?P<joint>[A-Za-z_][\w.\-]*)\s*(?:,\s*(?P<c>\d+)\s*)?\]"
                      r"\s*(?:\*\s*(?P<ratio>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))?$")
_OPT_RE = re.compile(r"^opt\.(?P<field>[a-z_]+)(?:\[\s*(?P<i>\d+)\s*\])?"
                     r"\s*(?:\*\s*(?P<ratio>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))?$")
_NAME_INDEX_RE = re.compile(r"^(?P<field>[a-z_][a-z0-9_]*)\[\s*(?P<first>[^,\]]+?)\s*(?P<rest>(?:,[^\]]*)?)\]")
_MAX_ABS_QPOS = 1.0e3
#: MjModel fields that move a body's inertial frame (refused by mj_setConst on a "simple" body)
_FRAME_FIELDS = ("body_ipos", "body_iquat")
_DIVERGENCE_WARNINGS = (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS,
                        mujoco.mjtWarning.mjWARN_BADQVEL)
#: MuJoCo's sleep flag: a body at rest may be put to sleep (its state outside the physics state)
_SLEEP = int(mujoco.mjtEnableBit.mjENBL_SLEEP)


class UserModelError(TwinError):
    """A user rig (model, spec target, keypoint, config or trial) is malformed; the message says which."""


@dataclass(frozen=True)
class Binding:
    """Where one parameter value goes.

    Attributes:
        kind: ``"model"`` (MjModel field), ``"option"`` (MjOption), ``"camera"``
            (image projection), ``"qpos"``/``"qvel"`` (initial state) or ``"trial"``.
        field: field name (model/option/camera/trial) — unused for qpos/qvel.
        index: index into the field or state vector (empty for scalars).
        ratio: the value written is ``value * ratio``.
        trial: for ``qpos``/``qvel``/``trial`` bindings scoped with ``@trial``: the trial
            they apply to ("" = every trial).
    """

    kind: str
    field: str
    index: tuple[int, ...] = ()
    ratio: float = 1.0
    trial: str = ""


def _object_names(model: mujoco.MjModel, obj: mujoco.mjtObj) -> list[str]:
    """The names of the model's objects of type ``obj`` (unnamed ones left out)."""
    count = {mujoco.mjtObj.mjOBJ_JOINT: model.njnt, mujoco.mjtObj.mjOBJ_BODY: model.nbody,
             mujoco.mjtObj.mjOBJ_GEOM: model.ngeom, mujoco.mjtObj.mjOBJ_SITE: model.nsite,
             mujoco.mjtObj.mjOBJ_ACTUATOR: model.nu, mujoco.mjtObj.mjOBJ_TENDON: model.ntendon,
             mujoco.mjtObj.mjOBJ_CAMERA: model.ncam, mujoco.mjtObj.mjOBJ_LIGHT: model.nlight,
             mujoco.mjtObj.mjOBJ_MATERIAL: model.nmat, mujoco.mjtObj.mjOBJ_EQUALITY: model.neq,
             mujoco.mjtObj.mjOBJ_SENSOR: model.nsensor}.get(obj, 0)
    names = (mujoco.mj_id2name(model, obj, i) for i in range(int(count)))
    return [n for n in names if n]


_PLURAL = {"body": "bodies", "equality": "equalities"}


def _no_such(pname: str, what: str, token: str, names: list[str], field: str = "") -> UserModelError:
    """``parameter 'P': no joint named 'pna' for field 'F' (did you mean pan?); joints: [...]``."""
    return UserModelError(f"parameter '{pname}': no {what} named {token!r}" + (f" for field '{field}'" if field else "")
                          + did_you_mean(token, names) + f"; {_PLURAL.get(what, what + 's')}: {names[:20]}")


def _name_to_index(model: mujoco.MjModel, field: str, token: str, pname: str) -> int:
    if token.lstrip("-").isdigit():
        return int(token)
    if field.startswith("dof_") or field in ("qpos0", "qpos_spring"):
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, token)
        if jid < 0:
            raise _no_such(pname, "joint", token, _object_names(model, mujoco.mjtObj.mjOBJ_JOINT), field)
        return int(model.jnt_dofadr[jid] if field.startswith("dof_") else model.jnt_qposadr[jid])
    for prefix, obj in _PREFIX_OBJ.items():
        if field.startswith(prefix):
            i = mujoco.mj_name2id(model, obj, token)
            if i < 0:
                raise _no_such(pname, prefix.rstrip("_"), token, _object_names(model, obj), field)
            return int(i)
    raise UserModelError(f"parameter '{pname}': field '{field}' is not indexed by named objects; use a number")


def element_name(model: mujoco.MjModel, field: str, index: tuple[int, ...]) -> str:
    """``field[name,j]`` for a model field element, its first index shown by its object's name where the model has
    one (``dof_*``: the dof's joint), else the number: the inverse of the name lookup a target does
    (:func:`_name_to_index`)."""
    idx = [str(i) for i in index]
    if index:
        if field.startswith("dof_"):
            obj, i = mujoco.mjtObj.mjOBJ_JOINT, int(model.dof_jntid[index[0]])
        else:
            obj, i = next((o for prefix, o in _PREFIX_OBJ.items() if field.startswith(prefix)), None), index[0]
        if obj is not None:
            idx[0] = mujoco.mj_id2name(model, obj, i) or idx[0]
    return f"{field}[{','.join(idx)}]"


def _resolve_names(model: mujoco.MjModel, part: str, pname: str) -> str:
    """``body_pos[apple,2]*-1`` -> ``body_pos[1,2]*-1`` (names looked up in the model; a misspelt field is
    named before its index: ``dof_armatrue[pna]`` is about the field)."""
    m = _NAME_INDEX_RE.match(part.strip())
    if not m:
        return part
    try:
        check_field(model, pname, m.group("field"))  # a misspelt field is named first, not its index
    except TwinError as err:
        raise UserModelError(str(err)) from None
    idx = _name_to_index(model, m.group("field"), m.group("first"), pname)
    return f"{m.group('field')}[{idx}{m.group('rest')}]" + part.strip()[m.end():]


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_user_target(model: mujoco.MjModel, name: str, target: str, *,
                      camera_fields: Mapping[str, Any] = PROJECTION_FIELDS) -> list[Binding]:
    """Parse one spec's ``target`` (grammar in the module docstring).

    Args:
        model: the compiled model (names are looked up in it).
        name: the parameter's name (for messages). target: the spec's ``target`` text.
        camera_fields: valid ``camera.<field>`` names: :data:`PROJECTION_FIELDS` (legacy
            planar projection) or :data:`~vid2sid_ros.core.camera.CAMERA_FIELDS` (pinhole camera).

    ``init.*`` and ``trial.time_offset`` parts may end in ``@TRIAL``: they then set that
    trial's initial state / time offset only (per-trial nuisance parameters).

    Raises:
        UserModelError: naming the parameter and what is wrong (unknown field with the
            closest valid names, unknown object name, bad index, syntax).
    """
    if not target or not str(target).strip():
        raise UserModelError(f"parameter '{name}': empty 'target'; expected e.g. 'dof_damping[swing]', "
                             "'opt.density', 'camera.px_per_m', 'init.qpos[swing]' or 'trial.time_offset'")
    out: list[Binding] = []
    for part in _split_top_level(str(target)):
        scope = ""
        if (part.startswith("init.") or part.startswith("trial.")) and "@" in part:
            part, _, scope = part.rpartition("@")
            part, scope = part.strip(), scope.strip()
            if not re.match(r"^[\w.\-]+$", scope):
                raise UserModelError(f"parameter '{name}': expected '@TRIAL' (a trial name) after {part!r}, "
                                     f"got {scope!r}")
        if part.startswith("camera."):
            f = part[len("camera."):].strip()
            if f not in camera_fields:
                raise UserModelError(f"parameter '{name}': unknown camera field {f!r}{did_you_mean(f, camera_fields)}"
                                     f" (valid: {', '.join(camera_fields)})")
            out.append(Binding("camera", f))
        elif part.startswith("trial."):
            f = part[len("trial."):].strip()
            if f != "time_offset":
                raise UserModelError(f"parameter '{name}': unknown trial field {f!r}"
                                     + did_you_mean(f, ["time_offset"]) + "; valid: time_offset")
            out.append(Binding("trial", f, trial=scope))
        elif part.startswith("init."):
            m = _INIT_RE.match(part)
            if not m:
                raise UserModelError(f"parameter '{name}': cannot parse {part!r}; expected 'init.qpos[joint]', "
                                     "'init.qvel[joint]' or 'init.qpos[joint,component]'")
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, m.group("joint"))
            if jid < 0:
                raise _no_such(name, "joint", m.group("joint"), _object_names(model, mujoco.mjtObj.mjOBJ_JOINT))
            c = int(m.group("c") or 0)
            jtype = int(model.jnt_type[jid])
            width = {0: (7, 6), 1: (4, 3), 2: (1, 1), 3: (1, 1)}[jtype][0 if m.group("what") == "qpos" else 1]
            if c >= width:
                raise UserModelError(f"parameter '{name}': component {c} out of range for joint "
                                     f"{m.group('joint')!r} ({width} {m.group('what')} entries)")
            adr = model.jnt_qposadr[jid] if m.group("what") == "qpos" else model.jnt_dofadr[jid]
            out.append(Binding(m.group("what"), "", (int(adr) + c,), float(m.group("ratio") or 1.0), scope))
        elif part.startswith("opt."):
            m = _OPT_RE.match(part)
            if not m:
                raise UserModelError(f"parameter '{name}': cannot parse {part!r}; expected e.g. 'opt.density' "
                                     "or 'opt.gravity[2]'")
            f = m.group("field")
            cur = getattr(model.opt, f, None)
            if cur is None or isinstance(cur, (int, bool)) and not isinstance(cur, float):
                real = [o for o in dir(model.opt) if not o.startswith("_")
                        and isinstance(getattr(model.opt, o, None), (float, np.ndarray))]
                close = difflib.get_close_matches(f, real, n=1)
                raise UserModelError(f"parameter '{name}': 'opt.{f}' is not a real-valued MuJoCo option"
                                     + (f" (did you mean opt.{close[0]}?)" if close else "")
                                     + f"; options: {', '.join(real)}")
            arr = np.asarray(cur)
            if arr.ndim == 0 and m.group("i") is not None or arr.ndim == 1 and m.group("i") is None:
                raise UserModelError(f"parameter '{name}': 'opt.{f}' has shape {arr.shape}; index it accordingly")
            idx = () if m.group("i") is None else (int(m.group("i")),)
            if idx and idx[0] >= arr.shape[0]:
                raise UserModelError(f"parameter '{name}': index {idx[0]} out of range for opt.{f} {arr.shape}")
            out.append(Binding("option", f, idx, float(m.group("ratio") or 1.0)))
        else:
            try:
                for t in parse_targets(model, name, _resolve_names(model, part, name)):
                    out.append(Binding("model", t.field, t.index, t.ratio))
            except UserModelError:
                raise
            except TwinError as err:
                raise UserModelError(str(err)) from None
    return out


def write_model_binding(model: mujoco.MjModel, binding: Binding, value: float) -> None:
    """Write ``value`` (already times ``binding.ratio``) into ``model`` at a ``"model"`` (MjModel field)
    or ``"option"`` (MjOption field) binding of :func:`parse_user_target` (in place, no recompile).

    Raises:
        UserModelError: a binding of another kind (camera, initial state, trial: not in an MjModel).
    """
    if binding.kind == "model":
        getattr(model, binding.field)[binding.index] = value
    elif binding.kind == "option":
        if binding.index:
            getattr(model.opt, binding.field)[binding.index[0]] = value
        else:
            setattr(model.opt, binding.field, value)
    else:
        raise UserModelError(f"a {binding.kind!r} target is not a field of the MjModel")


def write_model_bindings(model: mujoco.MjModel, writes: Sequence[tuple[Binding, float]],
                         data: mujoco.MjData | None = None) -> None:
    """Write every ``(binding, value)`` (value already times ``binding.ratio``) with
    :func:`write_model_binding`, then recompute the constants MuJoCo derives at compile time
    when an MjModel field was written (:func:`~.mujoco_constants.refresh_constants`: without it
    a mass, inertia or armature write may change nothing).

    Args:
        model: compiled model, changed in place.
        writes: ``[(binding, value)]`` of kind ``"model"`` or ``"option"``.
        data: scratch data for the refresh (its state is overwritten), or None (a new one).

    Raises:
        UserModelError: a binding of another kind.
    """
    for b, x in writes:
        write_model_binding(model, b, x)
    if any(b.kind == "model" for b, _ in writes):
        refresh_constants(model, data)


class UserModelTwin(BatchScratch):
    """A user's MuJoCo or URDF model filmed by a camera (implements ``Twin`` and ``SteppableTwin``).

    The camera is either a real :class:`~vid2sid_ros.core.camera.PinholeCamera` (``camera=``:
    CameraInfo intrinsics, distortion, a pose in the world; targets ``camera.x`` ... ``camera.yaw``,
    ``camera.fx`` ...) or the legacy planar :class:`ImageProjection` (``projection=``, the
    pendulum clip: targets ``camera.origin_x`` ...), which is rendered through its equivalent
    pinhole (:meth:`ImageProjection.as_camera`). Either way the same camera projects the
    keypoints and renders the frames (MuJoCo's offscreen renderer: meshes, materials, textures
    and the config's markers).

    Args:
        model: MJCF/URDF path or ``{robot_description: text}`` (:func:`~.mujoco_model.load_spec`).
        model_path: the same as ``model`` (older name).
        parameters: :class:`ParameterSet` or spec YAML path; every target is parsed against
            the model at construction (errors name the parameter).
        keypoints: ``{keypoint name: site or body name}``, trajectory order (a marker's name
            is a site).
        camera: :class:`PinholeCamera` or a rig config ``camera:`` mapping
            (:func:`~vid2sid_ros.core.camera.camera_from_config`).
        projection: legacy planar projection, :class:`ImageProjection` or its mapping; an
            ``anchor`` key (site or body) names the point the origin refers to. Ignored when
            ``camera`` is given.
        markers: a rig config ``markers:`` list or :class:`MarkerSpec` s (added to the model).
        actuators: a rig config ``actuators:`` list: names (existing actuators) and/or
            mappings (added actuators, :func:`~.mujoco_model.parse_actuators`); their order is
            the excitation column order. Default: the model's actuators in model order.
        trial_init: fixed initial state per trial, ``{trial: {"qpos[joint]": value, "qvel[joint,1]": value}}``
            (SI: rad, m, rad/s, m/s); the trial of a rollout is ``excitation.meta["trial"]``
            (else its name). Free per-trial values are parameters with a target scoped to the
            trial, ``init.qpos[joint]@trial``.
        max_physics_timestep: upper bound of the fixed physics step, s: each frame period is split
            into ``ceil(period / bound)`` equal substeps, ``bound = min(max_physics_timestep, the
            model file's own <option timestep>)`` (a finer timestep of the model is kept, as the
            upper bound says; a model that sets none is stepped at this bound).
        name: rig name (trajectory metadata).
        source, base: the config file (for messages) and its directory (relative paths).
        image_size: ``(width, height)`` px for a pinhole ``camera``'s images (renders and
            projected keypoints), or None (the camera's own size); a None side keeps the camera's. The view is kept: the
            intrinsics scale with the image (:meth:`PinholeCamera.resized`), and intrinsic
            nuisance values (``camera.fx`` ...) stay in the camera's own pixels, scaled after.

    Raises:
        UserModelError: unreadable/uncompilable model (MuJoCo's message and the file), unknown
            keypoint/marker/actuator/anchor (``file:key``), bad target, bad camera, an
            ``image_size`` without a pinhole camera or not positive integers.
        ParameterSpecError: malformed spec.
    """

    model_suffix = ".xml"
    #: each spec's ``target`` is parsed and written (a re-targeted spec is honoured)
    writes_targets = True
    #: cost cap of one rollout (:class:`~vid2sid_ros.sim.base.RolloutLimits`); the loop sets it
    rollout_limits: RolloutLimits = RolloutLimits()
    #: a state with any ``|qpos|`` above this is a blow-up (rad or m)
    _max_abs_qpos = _MAX_ABS_QPOS

    def __init__(self, *, parameters: ParameterSet | str | Path, keypoints: Mapping[str, str],
                 model: str | Path | Mapping[str, Any] | None = None, model_path: str | Path | None = None,
                 camera: PinholeCamera | Mapping[str, Any] | None = None,
                 projection: ImageProjection | Mapping[str, Any] | None = None,
                 markers: Sequence[Any] | None = None, actuators: Sequence[Any] | None = None,
                 trial_init: Mapping[str, Mapping[str, float]] | None = None,
                 max_physics_timestep: float = 0.004, name: str = "user_model",
                 source: str = "<config>", base: str | Path | None = None,
                 image_size: tuple[int, int] | None = None, render: Mapping[str, Any] | None = None) -> None:
        self._renderer = None
        self._maxgeom = _maxgeom(render, source)
        self._source = str(source)
        model = model if model is not None else model_path
        if model is None:
            raise UserModelError(f"{source}:model: missing; give an MJCF/URDF path or {{robot_description: ...}}")
        self._base = Path(base) if base is not None else None
        try:
            if camera is not None and not isinstance(camera, PinholeCamera):
                camera = camera_from_config(camera, source=self._source, key="camera", base=self._base)
            marker_specs = [m for m in (markers or []) if isinstance(m, MarkerSpec)] or \
                parse_markers(list(markers) if markers else None, source=self._source)
            act_specs = parse_actuators(list(actuators) if actuators else None, source=self._source)
        except (CameraError, ModelError) as err:
            raise UserModelError(str(err)) from None
        render_camera, anchor = self._set_up_camera(camera, projection, image_size)
        self._build_args = dict(markers=marker_specs, actuators=act_specs, camera=render_camera,
                                base=self._base, source=self._source)
        self._model_arg = model
        self._build(model)
        self.model_path = self._built.path if self._built.path is not None else Path(
            f"{name}_robot_description.urdf")
        self.name = name
        self.parameters: ParameterSet = (parameters if isinstance(parameters, ParameterSet)
                                         else load_parameter_set(parameters))
        if not (max_physics_timestep > 0 and math.isfinite(max_physics_timestep)):
            raise UserModelError(f"max_physics_timestep must be > 0 s, got {max_physics_timestep}")
        self.max_physics_timestep = float(max_physics_timestep)
        #: the model file's own timestep, s (None: the file sets none)
        self.model_timestep: float | None = self._built.timestep
        #: the physics step bound used: ``max_physics_timestep``, or the model's own timestep when finer
        self.physics_step_bound = min(self.max_physics_timestep, self.model_timestep or math.inf)
        self._anchor = self._lookup_point(anchor, "projection.anchor") if anchor else None

        if not keypoints:
            raise UserModelError(f"{self._source}:keypoints: a user rig needs at least one keypoint "
                                 "{name: site or body}")
        self._keypoints = [self._lookup_point(obj, f"keypoints.{kp}") for kp, obj in keypoints.items()]
        self.keypoint_names: tuple[str, ...] = tuple(keypoints)
        self._set_up_actuators(actuators)
        self._bind_parameters(model)
        self._trial_init = self._parse_trial_init(trial_init)
        self._camera_values: dict[str, float] = {}
        self._camera_move: tuple[np.ndarray, np.ndarray] | None = None
        self._init_qpos: dict[int, float] = {}
        self._init_qvel: dict[int, float] = {}
        self._scoped: dict[str, dict[tuple[str, int], float]] = {}
        self._scoped_offset: dict[str, float] = {}
        self._time_offset = 0.0
        self._values: dict[str, float] = {}
        self._maps_key = None
        self._maps = None
        self.set_parameters(self.parameters.nominal())

    # -- construction -------------------------------------------------------------
    def _set_up_camera(self, camera: PinholeCamera | None, projection: ImageProjection | Mapping[str, Any] | None,
                       image_size: tuple[int, int] | None) -> tuple[Any, Any]:
        """The pinhole camera (resized to ``image_size``) or the legacy planar projection; returns the camera
        the model is built with and the projection's anchor (a site or body name, or None).

        Raises:
            UserModelError: ``image_size`` without a pinhole camera, a bad size or projection block.
        """
        if camera is None and image_size is not None:
            raise UserModelError(f"{self._source}: image_size needs a pinhole camera: block (the legacy planar "
                                 "projection takes projection.width / projection.height)")
        self._pinhole: PinholeCamera | None = camera
        self._image_size: tuple[int, int] | None = None
        if camera is not None and image_size is not None:
            w, h = image_size
            w, h = (camera.width if w is None else w), (camera.height if h is None else h)
            try:
                camera = camera.resized(w, h)  # the render camera; nuisance values are re-scaled in `pinhole`
            except CameraError as err:
                raise UserModelError(f"{self._source}:camera: {err}") from None
            self._image_size = (camera.width, camera.height)
        if camera is not None:
            self._projection = None
            return camera, None
        anchor = None
        if isinstance(projection, ImageProjection):
            self._projection = projection
        else:
            proj_cfg = dict(projection or {})
            anchor = proj_cfg.pop("anchor", None)
            try:
                self._projection = ImageProjection.from_config(proj_cfg, source=f"{self._source}:projection")
            except ProjectionError as err:
                raise UserModelError(str(err)) from None
        return self._projection.as_camera(np.zeros(3)), anchor

    def _build(self, model: Any) -> None:
        """Compile ``model`` with :attr:`_build_args` into :attr:`model` (with its MjData and scratch).

        Raises:
            UserModelError: the model cannot be read or compiled.
        """
        try:
            built = build_model(model, **self._build_args)
        except ModelError as err:
            raise UserModelError(str(err)) from None
        self._built, self.model, self._cam_id = built, built.model, built.camera_id
        self.data = mujoco.MjData(self.model)
        self._const_data = mujoco.MjData(self.model)  # scratch of refresh_constants (its state is overwritten)

    def _spec(self) -> mujoco.MjSpec:
        """The MjSpec the model was compiled from (the model file with the markers, actuators and camera).

        A twin that came through pickle (a Ray actor's copy: an MjSpec does not pickle, :class:`BuiltModel`)
        has none; it is built again here from the same model file (its absolute path) and arguments, once, and
        kept. (A batch sensor model compiled from it is checked against the twin's own model before use.)

        Raises:
            UserModelError: the model file cannot be read or compiled any more.
        """
        if self._built.spec is None:
            model = self._built.path if self._built.path is not None else self._model_arg
            try:
                self._built.spec = build_model(model, **self._build_args).spec
            except ModelError as err:
                raise UserModelError(str(err)) from None
        return self._built.spec

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (Ray ships the twin to its actors this way) without the offscreen renderer, which holds an
        OpenGL context (the copy makes its own if it renders); the model's MjSpec is left out too
        (:meth:`_spec`)."""
        return {**self.__dict__, "_renderer": None}

    def _set_up_actuators(self, actuators: Sequence[Any] | None) -> None:
        """:attr:`actuator_names` (the config's order, else the model's) and their model indices.

        Raises:
            UserModelError: a configured actuator the model does not have.
        """
        model_acts = [self.model.actuator(i).name for i in range(self.model.nu)]
        if actuators:
            order = [a if isinstance(a, str) else a.get("name") for a in actuators]
            for i, a in enumerate(order):
                if a not in model_acts:
                    raise UserModelError(f"{self._source}:actuators[{i}]: no actuator named {a!r} in "
                                         f"{self._built.source}" + (did_you_mean(a, model_acts)
                                                                    or f"; actuators: {model_acts}"))
        else:
            order = model_acts
        self.actuator_names: tuple[str, ...] = tuple(order)
        self._act_ids = np.array([model_acts.index(a) for a in order], dtype=int)

    def _bind_parameters(self, model: Any) -> None:
        """Every parameter's model/camera bindings; a body whose centre of mass or inertia frame a parameter
        writes needs the general body code, so the model is rebuilt with it marked not "simple".

        Raises:
            UserModelError: a target that names no model field (as :func:`parse_user_target`), a rebuild failing.
        """
        fields = CAMERA_FIELDS if self._pinhole is not None else PROJECTION_FIELDS
        self._bindings = {s.name: parse_user_target(self.model, s.name, s.target, camera_fields=fields)
                          for s in self.parameters}
        moved = sorted({self.model.body(b.index[0]).name for bs in self._bindings.values() for b in bs
                        if b.kind == "model" and b.field in _FRAME_FIELDS and self.model.body_simple[b.index[0]]})
        if moved:
            self._build_args["not_simple"] = moved
            self._build(model)

    def _parse_trial_init(self, trial_init: Mapping[str, Mapping[str, float]] | None
                          ) -> dict[str, dict[tuple[str, int], float]]:
        """``{trial: {(qpos|qvel, index): value}}`` of the config's per-trial initial states (model units).

        Raises:
            UserModelError: a key that is not qpos[joint] or qvel[joint].
        """
        out: dict[str, dict[tuple[str, int], float]] = {}
        for trial, block in (trial_init or {}).items():
            entries = {}
            for k, v in dict(block).items():
                b = parse_user_target(self.model, f"trial_init.{trial}", f"init.{k}")
                if len(b) != 1 or b[0].kind not in ("qpos", "qvel"):
                    raise UserModelError(f"{self._source}:trials.{trial}.init.{k}: expected qpos[joint] or qvel[joint]")
                entries[(b[0].kind, b[0].index[0])] = float(v) * b[0].ratio
            out[str(trial)] = entries
        return out

    # -- helpers ------------------------------------------------------------------
    def _lookup_point(self, obj: str, what: str) -> tuple[str, int]:
        sid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, str(obj))
        if sid >= 0:
            return ("site", sid)
        bid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, str(obj))
        if bid >= 0:
            return ("body", bid)
        names = [self.model.site(i).name for i in range(self.model.nsite)] + \
            [self.model.body(i).name for i in range(self.model.nbody)]
        raise UserModelError(f"{self._source}:{what}: {obj!r} is neither a site nor a body of {self._built.source}"
                             + (did_you_mean(obj, [n for n in names if n])
                                or f"; sites: {[self.model.site(i).name for i in range(self.model.nsite)]}"))

    def _point(self, d: mujoco.MjData, ref: tuple[str, int]) -> np.ndarray:
        return (d.site_xpos if ref[0] == "site" else d.xpos)[ref[1]].copy()

    @property
    def projection(self) -> ImageProjection | None:
        """The legacy planar projection at the current nuisance values (None with a pinhole camera)."""
        if self._projection is None:
            return None
        return self._projection.with_values(self._camera_values) if self._camera_values else self._projection

    @property
    def pinhole(self) -> PinholeCamera | None:
        """The pinhole camera at the current nuisance values (None with the legacy planar projection)."""
        if self._pinhole is None:
            return None
        pin = self._pinhole.with_values(self._camera_values) if self._camera_values else self._pinhole
        pin = pin.moved(*self._camera_move) if self._camera_move is not None else pin
        # intrinsic nuisances (camera.fx ...) are in the config's pixels: scaled with the image after
        return pin.resized(*self._image_size) if self._image_size is not None else pin

    def move_camera(self, translation: Sequence[float], rotation_vector: Sequence[float]) -> None:
        """Move the pinhole camera in its own optical frame after its nuisance values are applied
        (a camera-pose error: renders and projected keypoints see it). The move is relative to the
        configured camera; a new call replaces the previous move, ``(0, 0, 0), (0, 0, 0)`` undoes it.

        Args:
            translation: (3,) m along the optical axes (x right, y down, z forward).
            rotation_vector: (3,) rad about the optical axes (x tilt, y pan, z roll).

        Raises:
            UserModelError: the rig films through the legacy planar projection (no camera pose).
            CameraError: vectors that are not 3 finite numbers.
        """
        if self._pinhole is None:
            raise UserModelError(f"{self._source}: a camera pose error needs a pinhole camera (camera:); this rig "
                                 "uses the planar projection")
        t, w = np.asarray(translation, float), np.asarray(rotation_vector, float)
        self._pinhole.moved(t, w)  # validates
        self._camera_move = (t, w)

    def camera_at(self, anchor: np.ndarray | None = None, time: float = 0.0) -> PinholeCamera:
        """The camera that renders a frame at video time ``time`` s (the legacy projection's pinhole
        equivalent around the anchor's world position (3,) m)."""
        pin = self.pinhole
        if pin is not None:
            return pin
        return self.projection.as_camera(np.zeros(3) if anchor is None else anchor, time)

    @property
    def camera(self) -> CameraIntrinsics:  # type: ignore[override]
        """Image size and pinhole intrinsics (legacy projection: fx = fy = px_per_m x distance,
        or px_per_m when orthographic; principal point = image centre)."""
        pin = self.pinhole
        if pin is not None:
            return CameraIntrinsics(pin.width, pin.height, pin.fx, pin.fy, pin.cx, pin.cy)
        p = self.projection
        f = p.px_per_m * (p.distance if p.distance > 0 else 1.0)
        return CameraIntrinsics(int(p.width), int(p.height), f, f, (p.width - 1) / 2.0, (p.height - 1) / 2.0)

    # -- parameters ---------------------------------------------------------------
    def set_parameters(self, values: Mapping[str, float]) -> None:
        """Write parameters (by name, spec units) into the model / camera / initial state.

        Raises:
            ParameterSpecError: unknown name or a non-finite value.
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
        writes: list[tuple[Binding, float]] = []
        for name, fv in checked.items():
            for b in self._bindings[name]:
                x = fv * b.ratio
                if b.kind in ("model", "option"):
                    writes.append((b, x))
                elif b.kind == "camera":
                    self._camera_values[b.field] = x
                elif b.trial:
                    if b.kind == "trial":
                        self._scoped_offset[b.trial] = x
                    else:
                        self._scoped.setdefault(b.trial, {})[(b.kind, b.index[0])] = x
                elif b.kind == "qpos":
                    self._init_qpos[b.index[0]] = x
                elif b.kind == "qvel":
                    self._init_qvel[b.index[0]] = x
                elif b.kind == "trial":
                    self._time_offset = x
            self._values[name] = fv
        write_model_bindings(self.model, writes, self._const_data)

    def get_parameters(self) -> dict[str, float]:
        """Current value of every parameter, ``{name: value}`` in spec units."""
        return dict(self._values)

    def no_effect_cause(self, name: str) -> str:
        """The likely reason parameter ``name`` does not change a rollout (read off its targets and
        the model), for the start-of-run check (:mod:`~vid2sid_ros.calibration.effects`); "" when
        nothing in the model explains it."""
        m = self.model
        for b in self._bindings.get(name, []):
            if b.kind != "model":
                continue
            i = b.index[0] if b.index else 0
            if b.field.startswith("body_") and 0 <= i < m.nbody and m.body_weldid[i] == 0:
                return (f"body '{m.body(i).name}' is welded to the world (no joint moves it), so MuJoCo never "
                        "uses its mass, inertia or pose in the dynamics")
            if b.field.startswith("actuator_") and 0 <= i < m.nu:
                return (f"actuator '{m.actuator(i).name}' acts only when commanded: check that the training trials "
                        "command it (excitation columns)")
        fields = sorted({b.field for b in self._bindings.get(name, []) if b.kind == "model"})
        if fields:
            return (f"MuJoCo does not use {', '.join(fields)} in these trials (not read during a rollout, or not "
                    "excited: e.g. a joint that never moves, a contact that never happens)")
        return ""

    def export_model(self, path: str | Path) -> Path:
        """Write the model as MJCF with the current physics values (markers, added actuators and
        the camera included; nuisance values are not model fields): reloaded, it simulates the
        same trajectories (:func:`~.mujoco_model.compiled_model_xml`). Includes are merged and the
        asset files (meshes, textures, height fields, skins) are referenced by absolute path, so the
        file loads from any directory on this machine (copy the assets along with it to move it).

        Raises:
            TwinError: if MuJoCo cannot re-export the model.
        """
        path = Path(path)
        try:
            spec = build_model(self._model_arg, **self._build_args).spec
            # the author's timestep, not the substep of the last rollout
            text = compiled_model_xml(spec, self.model, timestep=self.model_timestep,
                                      base=self.model_path.parent if self.model_path else None)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except (ValueError, OSError, ModelError) as err:
            raise TwinError(f"cannot write calibrated model to {path}: {err}") from None
        return path

    # -- simulation ---------------------------------------------------------------
    def _trial_of(self, excitation: Excitation | None) -> str:
        if excitation is None:
            return ""
        return str((excitation.meta or {}).get("trial") or excitation.name)

    def _meta_init(self, excitation: Excitation | None) -> tuple[dict[tuple[str, int], float], float | None]:
        """The fixed initial state ``meta["init"]`` ({"qpos[joint]": value}) and ``meta["time_offset"]`` (s)
        an excitation of a rig config's trial carries (the rig loader puts them there)."""
        meta = (excitation.meta or {}) if excitation is not None else {}
        out: dict[tuple[str, int], float] = {}
        for k, v in dict(meta.get("init") or {}).items():
            b = parse_user_target(self.model, f"trial '{self._trial_of(excitation)}' init", f"init.{k}")
            if len(b) != 1 or b[0].kind not in ("qpos", "qvel"):
                raise TwinError(f"trial '{self._trial_of(excitation)}': init key {k!r} is not qpos[joint] or qvel[joint]")
            out[(b[0].kind, b[0].index[0])] = float(v) * b[0].ratio
        off = meta.get("time_offset")
        return out, (None if off is None else float(off))

    def _reset(self, trial: str = "", excitation: Excitation | None = None) -> float:
        """Initial state of ``trial``: the global init, then the trial's fixed init (``trial_init`` or the
        excitation's ``meta["init"]``), then its free (``@trial``) init; returns its time offset, s."""
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        for i, x in self._init_qpos.items():
            d.qpos[i] = x
        for i, x in self._init_qvel.items():
            d.qvel[i] = x
        meta_init, meta_offset = self._meta_init(excitation)
        for source in (self._trial_init.get(trial, {}), meta_init, self._scoped.get(trial, {})):
            for (kind, i), x in source.items():
                (d.qpos if kind == "qpos" else d.qvel)[i] = x
        mujoco.mj_forward(m, d)
        offset = self._time_offset if meta_offset is None else meta_offset
        return max(self._scoped_offset.get(trial, offset), 0.0)

    def _divergence(self) -> str:
        d = self.data
        for w in _DIVERGENCE_WARNINGS:
            if d.warning[int(w)].number > 0:
                return f"MuJoCo warning {mujoco.mjtWarning(w).name}"
        if not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            return "non-finite state"
        if np.any(np.abs(d.qpos) > _MAX_ABS_QPOS):
            return f"|qpos| beyond {_MAX_ABS_QPOS}"
        return ""

    def _ctrl(self, excitation: Excitation) -> np.ndarray:
        """Commands in MuJoCo actuator order, (T, nu)."""
        v = excitation.values
        T = v.shape[0]
        if self.model.nu == 0:
            if np.any(v != 0):
                raise TwinError(f"excitation '{excitation.name}' has non-zero commands but the model "
                                f"{self.model_path.name} has no actuator")
            return np.zeros((T, 0))
        names = list(excitation.actuator_names)
        out = np.zeros((T, self.model.nu))
        if set(names) == set(self.actuator_names):
            out[:, self._act_ids] = v[:, [names.index(n) for n in self.actuator_names]]
        elif v.shape[1] == len(self.actuator_names):
            out[:, self._act_ids] = v
        elif not np.any(v != 0):
            pass  # free motion
        else:
            raise TwinError(f"excitation '{excitation.name}' has columns {names}; the rig's actuators are "
                            f"{list(self.actuator_names)}")
        return out

    def _pre_roll_steps(self, offset: float) -> int:
        """Physics substeps of the ``time_offset`` pre-roll (``offset`` s at most :attr:`physics_step_bound`)."""
        if not offset > 0:
            return 0
        n = math.ceil(offset / self.physics_step_bound - 1e-9)
        return max(1, int(n)) if math.isfinite(n) else sys.maxsize

    def _pre_roll(self, offset: float) -> None:
        m, d = self.model, self.data
        npre = self._pre_roll_steps(offset)
        if npre:
            m.opt.timestep = offset / npre
            mujoco.mj_step(m, d, npre)
        mujoco.mj_kinematics(m, d)

    def _project(self, pts: np.ndarray, anchor: np.ndarray, time: np.ndarray) -> np.ndarray:
        """World points (T, K, 3) m at video times (T,) s -> pixels (T, K, 2)."""
        pin = self.pinhole
        if pin is not None:
            return pin.project(pts)
        return self.projection.project(pts, anchor, time)

    # -- rendering ----------------------------------------------------------------
    def _get_renderer(self, size: tuple[int, int] | None = None):
        """The offscreen renderer, at least ``size`` (w, h) px (None: the camera's image size).

        It is made at the first size asked for and remade larger only when a larger image is asked for:
        a run that renders only report thumbnails never holds the GL buffers of a 3840 x 2160 camera.
        """
        if size is None:
            cam = self.camera_at()
            size = (cam.width, cam.height)
        r = self._renderer
        if r is not None and (r.width < size[0] or r.height < size[1]):
            r.close()
            self._renderer = r = None
        if r is None:
            self._renderer = OffscreenRenderer(self.model, int(size[0]), int(size[1]), self._cam_id,
                                               maxgeom=self._maxgeom)
        self._renderer.make_current()
        return self._renderer

    def _render_frame(self, d: mujoco.MjData, anchor: np.ndarray, time: float, out: np.ndarray) -> None:
        """Render ``d``'s state from the camera at video time ``time`` into ``out`` (H, W, 3) uint8; an ``out``
        smaller than the camera's image gets the same view at that size (a preview, :func:`preview_size`)."""
        import cv2

        cam = self.camera_at(anchor, time)
        size = (out.shape[1], out.shape[0])
        if size != (cam.width, cam.height):
            if self._pinhole is None and self.projection.radial_k1 != 0.0:  # its lens maps are full-size only
                full = np.zeros((cam.height, cam.width, 3), np.uint8)
                self._render_frame(d, anchor, time, full)
                cv2.resize(full, size, dst=out, interpolation=cv2.INTER_AREA)
                return
            cam = cam.resized(*size)
        set_camera(self.model, self._cam_id, cam)
        mujoco.mj_camlight(self.model, d)
        r = self._get_renderer(size)
        if self._pinhole is not None:
            key = (cam.fx, cam.fy, cam.cx, cam.cy, cam.distortion)
            if key != self._maps_key:
                self._maps_key, self._maps = key, distortion_maps(cam)
        else:
            key = ("k1", self.projection.radial_k1)
            if key != self._maps_key:
                self._maps_key, self._maps = key, self.projection.distort_image_maps()
        if self._maps is None:
            r.render(d, out=out, size=size)
        else:
            img = r.render(d, size=size)
            cv2.remap(img, self._maps[0], self._maps[1], cv2.INTER_LINEAR, dst=out, borderMode=cv2.BORDER_REPLICATE)

    def rollout(self, excitation: Excitation, *, render: bool = False,
                render_steps: Sequence[int] | None = None, render_width: int | None = None,
                frame_sink: Callable[[int, np.ndarray], None] | None = None,
                render_rows: Iterable[int] | None = None) -> RolloutResult:
        """Reset to the trial's initial state and replay ``excitation`` (deterministic).

        Row ``k`` is the state at ``time_offset + k / rate`` s, before command ``k`` acts
        (see the module docstring). Every keypoint is reported valid, also outside the
        image: the twin knows where the point is (the real side's validity decides
        which samples are compared).

        Args:
            excitation: commands (T, A) at ``excitation.rate`` Hz in :attr:`actuator_names`
                order (all zero = free motion); ``meta["trial"]`` picks the trial's initial state.
            render: also render one frame per row with MuJoCo from the rig's camera
                (meshes, materials, markers; lens distortion applied).
            render_steps: with ``render``, render only these rows (in [0, T)), in this order:
                ``frames`` is then (len(render_steps), H, W, 3) (a report's thinned video without
                rendering every row).
            render_width: with ``render``, frames this many px wide (the same view, aspect kept:
                :func:`~.mujoco_render.preview_size`) instead of the camera's size; None: full size.
            frame_sink: with ``render``, stream the frames instead of keeping them: called as
                ``frame_sink(row, frame)`` with (H, W, 3) uint8 RGB in one buffer reused for every row
                (copy what you keep); ``frames`` is then None, so memory is one frame whatever ``T``.
            render_rows: with ``frame_sink``, render only these rows, in row order (None: every row;
                rows outside [0, T) are skipped).

        Returns:
            :class:`RolloutResult`; ``state`` holds ``qpos`` (T, nq), ``qvel`` (T, nv),
            ``keypoints_world`` (T, K, 3) m and ``time`` (T,) s; ``frames`` (T, H, W, 3) uint8
            when rendered. A blow-up gives ``diverged=True`` with NaN rows from the failing step on.

        Raises:
            TwinError: commands that do not fit the rig's actuators, no OpenGL for rendering.
        """
        m, d = self.model, self.data
        ctrl = self._ctrl(excitation)
        T, K = excitation.num_steps, len(self._keypoints)
        period = excitation.period
        nsub = max(1, int(math.ceil(period / self.physics_step_bound - 1e-9)))
        offset = self._reset(self._trial_of(excitation), excitation)
        npre = self._pre_roll_steps(offset)  # the time_offset pre-roll is stepped too: it counts
        message = self.rollout_limits.substeps_problem(
            T * nsub + npre, f"{nsub} per {period:.4g} s frame, {T} frames"
            + (f", {npre:,} for the {offset:.4g} s time_offset pre-roll" if npre else ""))
        if not message:  # refused before it starts: a failed evaluation, not a hang
            self._pre_roll(offset)
        m.opt.timestep = period / nsub
        anchor = self._point(d, self._anchor) if self._anchor else np.zeros(3)
        video = _RolloutVideo(self, T, anchor, offset, render=render, render_steps=render_steps,
                              render_width=render_width, frame_sink=frame_sink, render_rows=render_rows)
        pts = np.full((T, K, 3), np.nan)
        qpos = np.full((T, m.nq), np.nan)
        qvel = np.full((T, m.nv), np.nan)
        if not message:
            message = self._step_through(ctrl, T, nsub, offset, period, pts, qpos, qvel, video)
        diverged = bool(message)
        if diverged:
            pts[~np.all(np.isfinite(qpos), axis=1)] = np.nan
        time = offset + np.arange(T) * period
        kp = np.full((T, K, 2), np.nan)
        ok = np.all(np.isfinite(pts), axis=(1, 2))
        try:
            if ok.any():
                kp[ok] = self._project(pts[ok], anchor, time[ok])
        except ProjectionError as err:
            diverged, message = True, f"projection failed: {err}"
        valid = np.all(np.isfinite(kp), axis=2)
        traj = Trajectory(time=time, keypoints=kp, valid=valid, names=self.keypoint_names, source="sim",
                          trial_id=excitation.name,
                          meta={"rig": self.name, "parameters": dict(self._values), "physics_timestep": m.opt.timestep,
                                "substeps": nsub})
        state = {"qpos": qpos, "qvel": qvel, "keypoints_world": pts, "time": time}
        return RolloutResult(trajectory=traj, frames=video.frames, diverged=diverged, message=message, state=state)

    def _step_through(self, ctrl: np.ndarray, T: int, nsub: int, offset: float, period: float, pts: np.ndarray,
                      qpos: np.ndarray, qvel: np.ndarray, video: "_RolloutVideo") -> str:
        """Step the trial's ``T`` command periods (``nsub`` physics steps each) from the current state, filling
        row k of ``pts`` (T, K, 3), ``qpos`` and ``qvel`` before command k acts and rendering the rows
        ``video`` wants; returns why it stopped early (a divergence, a rollout limit) or ``""``."""
        m, d = self.model, self.data
        meter = RolloutMeter(self.rollout_limits)
        for k in range(T):
            problem = self._divergence() if k % 32 == 0 or k == T - 1 else ""
            if problem:
                return (f"simulation diverged by step {k} (t={offset + k * period:.3f} s): {problem}; "
                        f"parameters {self._values}")
            over = meter.problem(k)
            if over:
                pts[k:] = np.nan
                return over
            for j, ref in enumerate(self._keypoints):
                pts[k, j] = self._point(d, ref)
            qpos[k], qvel[k] = d.qpos, d.qvel
            video.row(k, d, offset + k * period)
            if m.nu:
                d.ctrl[:] = ctrl[k]
            mujoco.mj_step(m, d, nsub)
            mujoco.mj_kinematics(m, d)
        problem = self._divergence()
        return f"simulation diverged: {problem}; parameters {self._values}" if problem else ""

    def _batch_job(self, excitation: Excitation, values: Mapping[str, float], memo: dict):
        """The :class:`~.mujoco_batch.BatchJob` of :meth:`rollout` at ``values`` (used by ``rollout_batch`` /
        ``rollout_many``): the parameters written, the trial's initial state made (with its ``time_offset``
        pre-roll), the model copied; None where :meth:`rollout` must run it (no command step, refused by
        the rollout limits, diverged in the pre-roll, or a pre-roll of a model with MuJoCo's sleep flag on:
        which bodies sleep is not part of the state ``mujoco.rollout`` starts from, which wakes them). Pairs
        of one ``rollout_many`` call at the same point and physics step share one model copy (``memo``).

        Raises:
            TwinError, ParameterSpecError: as :meth:`set_parameters` / :meth:`rollout`.
        """
        from .mujoco_batch import BatchJob, full_state

        ctrl = self._ctrl(excitation)
        T, period = excitation.num_steps, excitation.period
        nsub = max(1, int(math.ceil(period / self.physics_step_bound - 1e-9)))
        if T == 0 or self.rollout_limits.substeps_problem(T * nsub):  # refused: rollout() says so
            return None
        m, d = self.model, self.data
        self.set_parameters(values)
        offset = self._reset(self._trial_of(excitation), excitation)
        if self.rollout_limits.substeps_problem(T * nsub + self._pre_roll_steps(offset)):
            return None
        self._pre_roll(offset)
        if self._divergence() or (self._pre_roll_steps(offset) and m.opt.enableflags & _SLEEP):
            return None  # a body put to sleep by the pre-roll is not in the state mujoco.rollout starts from
        m.opt.timestep = period / nsub
        key = (tuple(sorted(self._values.items())), float(m.opt.timestep))
        if key not in memo:
            memo[key] = self._sensor_model(slot=len(memo)) or copy.copy(m)
        model = memo[key]
        init = full_state(m, d)
        anchor = self._point(d, self._anchor) if self._anchor else np.zeros(3)
        point = (dict(self._values), offset, anchor, self.pinhole, self.projection)
        control = np.repeat(ctrl, nsub, axis=0) if m.nu else np.zeros((T * nsub, 0))

        def finish(states: np.ndarray, sensordata: np.ndarray | None, scratch: mujoco.MjData) -> RolloutResult:
            return self._batched_result(excitation, model, scratch, init, states, sensordata, nsub, *point)

        return BatchJob(model, init, d.qacc_warmstart.copy(), control, finish)

    def _sensor_model(self, slot: int | None = None) -> mujoco.MjModel | None:
        """A copy of the twin's model as it is now (parameter values, ``opt.timestep``) with a ``framepos``
        sensor per keypoint (its site, or its body's frame) appended after the model's own sensors, so that
        ``mujoco.rollout`` returns the keypoints of every step from its C++ threads; None where that model
        cannot be made equal to the twin's (then the states are read back in Python).

        It is compiled once from the twin's MjSpec with the sensors added; each copy gets the current model
        and option bindings written as :meth:`set_parameters` writes them. The first copy is compared with
        the twin's model (:func:`~.mujoco_batch.same_physics`): a difference (or two parameters writing one
        field) keeps the Python read-back for good.
        None as well while ``set_parameters`` is wrapped on the instance (a residual-diagnosis cause writes
        model fields of its own after the parameters: the rollout then steps a copy of the twin's model itself).
        ``slot``: the point's index in its batch; the copy kept for it from an earlier batch is written again
        (:func:`~.mujoco_batch.sensor_model_copy`); None: a fresh copy.
        """
        from .mujoco_batch import sensor_model_copy

        def write(m: mujoco.MjModel, scratch: mujoco.MjData) -> None:
            write_model_bindings(m, [(b, fv * b.ratio) for name, fv in self._values.items()
                                     for b in self._bindings[name] if b.kind in ("model", "option")], scratch)

        return sensor_model_copy(self, self._compile_sensor_model, write, slot)

    def _compile_sensor_model(self) -> tuple[mujoco.MjModel, mujoco.MjData] | None:
        """(the twin's MjSpec compiled with the keypoint sensors appended, its scratch data), or None (the
        spec cannot be copied or compiled, two parameters write one model field, or the model switches its
        sensors off: ``<flag sensor="disable"/>``, which would leave the keypoint sensors unset)."""
        writes = [(b.kind, b.field, tuple(b.index)) for bs in self._bindings.values() for b in bs
                  if b.kind in ("model", "option")]
        if len(set(writes)) != len(writes) or self.model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_SENSOR:
            return None  # (a model with its sensors switched off would not compute the keypoint sensors either)
        try:
            spec = self._spec().copy()
            for kind, i in self._keypoints:
                obj = self.model.site(i).name if kind == "site" else self.model.body(i).name
                spec.add_sensor(type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                                objtype=mujoco.mjtObj.mjOBJ_SITE if kind == "site" else mujoco.mjtObj.mjOBJ_XBODY,
                                objname=obj)
            m = spec.compile()
        except Exception:  # noqa: BLE001 - the Python read-back serves any model
            return None
        return m, mujoco.MjData(m)

    def _batched_result(self, excitation: Excitation, m: mujoco.MjModel, d: mujoco.MjData, init: np.ndarray,
                        states: np.ndarray, sensordata: np.ndarray | None, nsub: int, values: dict[str, float],
                        offset: float, anchor: np.ndarray, pinhole: PinholeCamera | None,
                        projection: ImageProjection | None) -> RolloutResult:
        """:meth:`rollout`'s result from a clean batched rollout's states (S, nstate), S = T * nsub:
        row k is the state before command k (the initial state, then the end of each period); from a
        model with the read-back sensors (:meth:`_sensor_model`) the keypoints come from its sensor values
        (S, nsensordata; row j computed from the state after j steps), from a copy of the twin's model (its
        own sensors, if any, and no others) by setting each row's state in Python."""
        from .mujoco_batch import FULL_STATE

        T, K, period = excitation.num_steps, len(self._keypoints), excitation.period
        rows = np.concatenate([init[None], states[nsub - 1:-1:nsub]]) if T > 1 else init[None]
        pts = np.empty((T, K, 3))
        n0 = self.model.nsensordata  # the model's own sensors come first
        if m.nsensordata != n0 + 3 * K:  # a copy of the twin's model (its own sensors only): read back in Python
            sensordata = None
        if sensordata is not None:
            pts[:] = sensordata[0:T * nsub:nsub, n0:n0 + 3 * K].reshape(T, K, 3)
        for k in range(0 if sensordata is not None else T):
            mujoco.mj_setState(m, d, rows[k], FULL_STATE)
            mujoco.mj_kinematics(m, d)
            for j, ref in enumerate(self._keypoints):
                pts[k, j] = self._point(d, ref)
        qpos = rows[:, 1:1 + m.nq].copy()
        qvel = rows[:, 1 + m.nq:1 + m.nq + m.nv].copy()
        time = offset + np.arange(T) * period
        diverged, message = False, ""
        try:
            kp = pinhole.project(pts) if pinhole is not None else projection.project(pts, anchor, time)
        except ProjectionError as err:
            kp, diverged, message = np.full((T, K, 2), np.nan), True, f"projection failed: {err}"
        valid = np.all(np.isfinite(kp), axis=2)
        traj = Trajectory(time=time, keypoints=kp, valid=valid, names=self.keypoint_names, source="sim",
                          trial_id=excitation.name,
                          meta={"rig": self.name, "parameters": values, "physics_timestep": m.opt.timestep,
                                "substeps": nsub})
        state = {"qpos": qpos, "qvel": qvel, "keypoints_world": pts, "time": time}
        return RolloutResult(trajectory=traj, frames=None, diverged=diverged, message=message, state=state)

    # -- one command period at a time (SteppableTwin, for the ROS lockstep graph) -----------
    def reset(self, trial: str = "") -> None:
        """Back to the initial state of ``trial`` (incl. its ``time_offset`` pre-roll) for :meth:`step`."""
        offset = self._reset(str(trial))
        message = self.rollout_limits.substeps_problem(self._pre_roll_steps(offset), f"the {offset:.4g} s "
                                                       "time_offset pre-roll")
        if message:
            raise TwinError(f"trial '{trial}': {message}")
        self._pre_roll(offset)
        d = self.data
        self._step_anchor = self._point(d, self._anchor) if self._anchor else np.zeros(3)
        self._step_time = offset
        self._step_obs = None

    def step(self, command: Sequence[float], period: float) -> None:
        """Sample the state (row ``k`` of :meth:`rollout`), then apply ``command`` for ``period`` s.

        :meth:`observe` and :meth:`render` then return that sample, so ``T`` steps give
        exactly the ``T`` rows of a rollout (sample-then-act, module docstring).

        Args:
            command: one value per actuator of :attr:`actuator_names`.
            period: command period, s.

        Raises:
            TwinError: if :meth:`reset` was not called, or the command does not fit the actuators.
        """
        if not hasattr(self, "_step_time"):
            raise TwinError("call reset() before step()")
        m, d = self.model, self.data
        u = np.asarray(command, dtype=float).ravel()
        if m.nu and u.shape[0] != len(self.actuator_names):
            raise TwinError(f"command has {u.shape[0]} values, the rig has {len(self.actuator_names)} actuators "
                            f"{list(self.actuator_names)}")
        pts = np.stack([self._point(d, ref) for ref in self._keypoints])
        self._step_obs = (pts, d.qpos.copy(), d.qvel.copy(), d.mocap_pos.copy(), d.mocap_quat.copy(),
                          self._step_time, self._divergence())
        if m.nu:
            d.ctrl[:] = 0.0
            d.ctrl[self._act_ids] = u
        nsub = max(1, int(math.ceil(period / self.physics_step_bound - 1e-9)))
        m.opt.timestep = period / nsub
        mujoco.mj_step(m, d, nsub)
        mujoco.mj_kinematics(m, d)
        self._step_time += period

    def observe(self) -> tuple[np.ndarray, np.ndarray]:
        """Keypoints of the last :meth:`step`'s sample: ((K, 2) px, (K,) bool).

        Raises:
            TwinError: before the first step, or when the simulation diverged.
        """
        if getattr(self, "_step_obs", None) is None:
            raise TwinError("observe() before step()")
        pts, *_, t, problem = self._step_obs
        if problem:
            raise TwinError(f"simulation diverged: {problem}")
        kp = self._project(pts[None], self._step_anchor, np.array([t]))[0]
        return kp, np.all(np.isfinite(kp), axis=1)

    def render(self) -> np.ndarray:
        """MuJoCo render (H, W, 3) uint8 of the last :meth:`step`'s sample (from the rig's camera)."""
        if getattr(self, "_step_obs", None) is None:
            raise TwinError("render() before step()")
        _, qpos, qvel, mpos, mquat, t, _ = self._step_obs
        scratch = getattr(self, "_scratch", None)
        if scratch is None:
            scratch = self._scratch = mujoco.MjData(self.model)
        scratch.qpos[:], scratch.qvel[:] = qpos, qvel
        scratch.mocap_pos[:], scratch.mocap_quat[:] = mpos, mquat
        mujoco.mj_kinematics(self.model, scratch)
        cam = self.camera_at(self._step_anchor, t)
        out = np.zeros((cam.height, cam.width, 3), np.uint8)
        self._render_frame(scratch, self._step_anchor, t, out)
        return out

    def close(self) -> None:
        """Free the renderer's OpenGL context (idempotent)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn down GL already
            pass


class _RolloutVideo:
    """The frames :meth:`UserModelTwin.rollout` renders (its ``render*`` / ``frame_sink`` arguments): which
    rows, at which size, kept in ``frames`` or streamed to the sink through one reused buffer."""

    def __init__(self, twin: UserModelTwin, T: int, anchor: np.ndarray, offset: float, *, render: bool,
                 render_steps: Sequence[int] | None, render_width: int | None,
                 frame_sink: Callable[[int, np.ndarray], None] | None, render_rows: Iterable[int] | None) -> None:
        self.twin, self.anchor, self.sink = twin, anchor, frame_sink
        self.frames: np.ndarray | None = None
        self.buf: np.ndarray | None = None
        self.want: dict[int, list[int]] = {}
        if not render:
            return
        cam0 = twin.camera_at(anchor, offset)
        if frame_sink is not None and render_rows is not None and render_steps is None:
            render_steps = sorted({int(r) for r in render_rows if 0 <= int(r) < T})
        self.want = _render_rows(T, render_steps)
        size = preview_size(cam0.width, cam0.height, render_width)
        n_frames = len(render_steps) if render_steps is not None else T
        if frame_sink is None:
            self.frames = np.zeros((n_frames, size[1], size[0], 3), np.uint8)
        else:
            self.buf = np.zeros((size[1], size[0], 3), np.uint8)

    def row(self, k: int, d: mujoco.MjData, time: float) -> None:
        """Render row ``k`` (``d``'s state at video time ``time``, s) where it is wanted."""
        for j in self.want.get(k, ()):
            if self.frames is not None:
                self.twin._render_frame(d, self.anchor, time, self.frames[j])
            else:
                self.twin._render_frame(d, self.anchor, time, self.buf)
                self.sink(k, self.buf)


def build_user_twin(*, model_path: str | Path | Mapping[str, Any], parameters: ParameterSet,
                    keypoints: Mapping[str, str], projection: Mapping[str, Any] | None = None,
                    max_physics_timestep: float = 0.004, name: str = "user_model",
                    image_size: tuple[int, int] | None = None,
                    _extra: Mapping[str, Any] | None = None) -> UserModelTwin:
    """The twin of a rig config's model (called by :func:`vid2sid_ros.rigs.load_rig`'s ``make_twin``).

    Args:
        model_path: MJCF/URDF file, or ``{robot_description: text}``.
        parameters: the rig's parameter set (targets parsed against the model).
        keypoints: ``{keypoint: site or body}``.
        projection: the legacy planar ``projection`` block (anchor + ImageProjection fields).
        max_physics_timestep: s.
        name: rig name.
        image_size: ``(width, height)`` px of a pinhole camera's images, or None (the
            camera's own): intrinsics scaled with the image, :meth:`PinholeCamera.resized`.
        _extra: the config's ``camera``, ``markers``, ``actuators``, ``render`` blocks, ``trial_init``
            (``{trial: {"qpos[joint]": value}}``), ``source`` (the file, for messages) and
            ``base_dir`` (its directory).

    Raises:
        UserModelError: see :class:`UserModelTwin` (messages name ``file:key``).
    """
    extra = dict(_extra or {})
    return UserModelTwin(model=model_path, parameters=parameters, keypoints=keypoints,
                         camera=extra.get("camera") or None, projection=projection,
                         markers=extra.get("markers") or None, actuators=extra.get("actuators") or None,
                         trial_init=extra.get("trial_init") or None, max_physics_timestep=max_physics_timestep,
                         name=name, source=str(extra.get("source", "<config>")), base=extra.get("base_dir"),
                         image_size=image_size, render=extra.get("render") or None)


#: largest render.maxgeom taken (a scene geom is about 0.5 kB: 200 000 is about 100 MB)
MAX_MAXGEOM = 200_000


def _maxgeom(render: Mapping[str, Any] | None, source: str) -> int | None:
    """The ``render.maxgeom`` of a rig config (None: the renderer's default).

    Raises:
        UserModelError: not a whole number in [100, :data:`MAX_MAXGEOM`] (naming ``file:render.maxgeom``)."""
    value = (render or {}).get("maxgeom")
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value != int(value)
            or not 100 <= value <= MAX_MAXGEOM):
        raise UserModelError(f"{source}:render.maxgeom: expected a whole number from 100 to {MAX_MAXGEOM} (scene "
                             f"geoms), got {value!r}")
    return int(value)
