"""Candidate causes of a residual: what each perturbs, its probe step and its search range.

A :class:`Cause` is one scalar quantity ``theta`` the model or the measurement may have
wrong, with ``theta = 0`` the calibrated twin as it is. It acts through one of four hooks,
which :meth:`~.context.ProbeContext.residual` composes:

* ``adjust_values`` — a frozen parameter of the spec (:class:`FrozenParameter`);
* ``applied`` — a MuJoCo model quantity no parameter frees (:class:`ModelField`: body mass,
  inertia, centre of mass; joint armature, damping, stiffness, frictionloss; tendon
  frictionloss), or the camera's pose (:class:`CameraPose`); costs rollouts;
* ``excitation`` — the commands as the drive passes them on (:class:`CommandTransform`:
  gain, bias, dead-zone, backlash); costs rollouts;
* ``transform`` — the twin's measured trajectory (:class:`TimeWarp`: latency, frame drops,
  rolling shutter; :class:`Intrinsic`: focal length, principal point; :class:`MarkerOffset`;
  :class:`EncoderError`: a joint reading's zero or scale; :class:`TrackerBias`: the tracker's own
  bias measured on renders of the twin);
  costs no rollout.

Families of causes are registered in :data:`CAUSE_FAMILIES` (like the proposers):
``name -> function(ctx) -> list[Cause]``; :func:`candidate_causes` lists every family's
causes the twin supports, leaving out what is already free (a free latency is no candidate,
nor are free marker offsets).
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

import numpy as np

from ...core.excitation import Excitation
from ...core.trajectory import Trajectory
from ..nuisance import LATENCY, MEASUREMENT_PREFIX

__all__ = ["Cause", "Composite", "parts_of", "FrozenParameter", "ModelField", "CameraPose", "CommandTransform",
           "TimeWarp", "Intrinsic",
           "MarkerOffset", "EncoderError", "TrackerBias", "CAUSE_FAMILIES", "candidate_causes", "filmed", "LATENCY_SEARCH_FRAMES"]

#: the latency a diagnosis searches, ± frames (also at most a quarter of the shortest trial)
LATENCY_SEARCH_FRAMES = 5.0


@dataclass(eq=False)
class Cause:
    """One candidate cause: a scalar ``theta`` (``unit``) that is 0 in the calibrated twin.

    Attributes:
        name: what it is, for people (``"mass of body 'middle'"``).
        kind: ``inertia`` | ``joint`` | ``friction`` | ``actuator`` | ``frozen`` | ``latency`` |
            ``timing`` | ``rolling_shutter`` | ``camera`` | ``offset`` | ``encoder`` | ``tracker``.
        fields: what a user would free or add (spec parameter names, MuJoCo fields such as
            ``body_mass[middle]``, ``camera.fx``).
        unit: unit of ``theta``. step: the probe's finite-difference step (unit).
        bounds: the search range of ``theta`` (unit); a refit that ends on it has not determined it.
    """

    name: str
    kind: str
    fields: tuple[str, ...]
    unit: str
    step: float
    bounds: tuple[float, float]
    changes_rollout = False
    changes_commands = False
    changes_measurement = False

    def adjust_values(self, ctx: Any, values: dict[str, float], theta: float) -> dict[str, float]:
        return values

    @contextlib.contextmanager
    def applied(self, ctx: Any, theta: float) -> Iterator[None]:
        yield

    def excitation(self, ctx: Any, exc: Excitation, theta: float) -> Excitation:
        return exc

    def transform(self, ctx: Any, traj: Trajectory, theta: float) -> Trajectory:
        return traj

    def value_text(self, ctx: Any, theta: float) -> str:
        """``theta`` for people, with its unit."""
        return f"{theta:+.3g} {self.unit}".replace("*", "·")


@dataclass(eq=False)
class Composite(Cause):
    """Several causes that are one error together (a camera position: x, y, z), fitted and tested as one
    candidate with ``len(parts)`` degrees of freedom; ``theta`` is then a vector, one size per part."""

    parts: tuple = ()

    def value_text(self, ctx: Any, theta: Any) -> str:
        """Each part's size, labelled by its field, or by its name where parts share a first field (a camera
        turn's three parts each name all three angles: "camera tilt", "camera pan", "camera roll")."""
        firsts = [p.fields[0] if p.fields else p.name for p in self.parts]
        labels = firsts if len(set(firsts)) == len(firsts) else [p.name for p in self.parts]
        return ", ".join(f"{lab} {p.value_text(ctx, float(t))}" for lab, p, t in zip(labels, self.parts, theta))


def parts_of(cause: Cause) -> tuple:
    """The 1-D causes a candidate is made of (itself unless :class:`Composite`)."""
    return tuple(cause.parts) if isinstance(cause, Composite) else (cause,)


# -- the spec's frozen parameters ------------------------------------------------------------------------
@dataclass(eq=False)
class FrozenParameter(Cause):
    """A frozen parameter of the spec; ``theta`` is its move in normalised units (0..1 over its bounds)."""

    spec: Any = None

    @property
    def category(self) -> str:
        """The kind of quantity its target writes (``inertia``, ``joint``, ``friction``, ``actuator``), else
        ``frozen``: what :func:`~.advice.separating_trial` reasons with."""
        t = f"{self.spec.target} {self.spec.name}".lower()
        for words, kind in ((("frictionloss", "friction"), "friction"), (("body_mass", "inertia", "ipos", "mass"),
                            "inertia"), (("armature", "damping", "stiffness"), "joint"),
                            (("gain", "gear", "bias", "transmission"), "actuator")):
            if any(w in t for w in words):
                return kind
        return "frozen"

    def adjust_values(self, ctx, values, theta):
        u0 = self.spec.to_unit(ctx.full[self.spec.name])
        return {**values, self.spec.name: self.spec.from_unit(u0 + theta)}

    def points_to(self, ctx, theta: float) -> float:
        """The parameter's value (its unit) at move ``theta``."""
        return self.spec.from_unit(self.spec.to_unit(ctx.full[self.spec.name]) + theta)

    def value_text(self, ctx, theta):
        return f"{self.spec.name} = {self.points_to(ctx, theta):.3g} {self.spec.unit}".replace("*", "·")


def filmed(ctx: Any) -> bool:
    """Whether any of the diagnosed trials is filmed (image keypoints, px): causes that act only on an image
    (the camera's pose and intrinsics, a rolling shutter, the tracker's bias, a camera field) are candidates only
    then. Joint-state trials (``joint_csv``, a bag's ``measurement: joints``) and motion capture are not filmed."""
    return any(getattr(r, "kind", "image") == "image" for r in ctx.reals)


def frozen_parameters(ctx: Any) -> list[Cause]:
    out: list[Cause] = []
    for s in ctx.params:
        if not s.frozen:
            continue
        camera = s.target.strip().startswith("camera.")
        if s.kind == "nuisance" and not camera:
            continue  # a frozen initial state or time offset is not a model error
        if camera and not filmed(ctx):
            continue  # a camera field changes nothing a joint reading or a motion capture measures
        u0 = s.to_unit(ctx.full[s.name])
        step = 0.05 if u0 + 0.05 <= 1.0 else -0.05
        out.append(FrozenParameter(f"frozen parameter '{s.name}'", "camera" if camera else "frozen", (s.name,),
                                   "1", step, (-u0, 1.0 - u0), spec=s))
    return out


# -- MuJoCo model quantities -----------------------------------------------------------------------------
@dataclass(eq=False)
class ModelField(Cause):
    """MuJoCo model quantities no free parameter sets: ``writes`` = [(field, index, mode)], mode ``scale``
    (value × (1 + theta)) or ``add`` (value + theta). Written after the twin's own parameter writes;
    ``mj_setConst`` afterwards where MuJoCo derives quantities from them (masses, inertias, armature)."""

    writes: tuple = ()
    set_const: bool = False
    changes_rollout = True

    @contextlib.contextmanager
    def applied(self, ctx, theta):
        import mujoco

        twin, model = ctx.twin, ctx.twin.model
        saved = {f: np.array(getattr(model, f), copy=True) for f, _, _ in self.writes}
        scratch = mujoco.MjData(model) if self.set_const else None
        original = twin.set_parameters
        had = "set_parameters" in vars(twin)  # an enclosing cause's patch (nested causes compose)

        def patched(values):
            for f, arr in saved.items():
                getattr(model, f)[...] = arr
            original(values)
            for f, idx, mode in self.writes:
                a = getattr(model, f)
                a[idx] = a[idx] * (1.0 + theta) if mode == "scale" else a[idx] + theta
            if scratch is not None:
                mujoco.mj_setConst(model, scratch)

        twin.set_parameters = patched
        try:
            yield
        finally:
            if had:
                twin.set_parameters = original
            else:
                del twin.set_parameters
            for f, arr in saved.items():
                getattr(model, f)[...] = arr
            if scratch is not None:
                mujoco.mj_setConst(model, scratch)


def _mujoco_model(ctx: Any):
    try:
        import mujoco
    except ImportError:  # pragma: no cover - mujoco is a dependency
        return None
    model = getattr(ctx.twin, "model", None)
    return model if isinstance(model, mujoco.MjModel) else None


def _targeted(ctx: Any) -> set[tuple[str, str]]:
    """(field, first index) pairs a single-target parameter writes (numbers only): free, its column is in the
    free span already; frozen, it is a candidate of its own (:class:`FrozenParameter`)."""
    out = set()
    for s in ctx.params:
        parts = [p.strip() for p in s.target.split(",") if p.strip()]
        if len(parts) == 1:
            m = re.match(r"^([a-z_]+)\[\s*([^,\]\s]+)", parts[0])
            if m:
                out.add((m.group(1), m.group(2)))  # an index or a name (a dof_* field's joint name)
    return out


def _name(model, obj, i: int) -> str:
    import mujoco

    n = mujoco.mj_id2name(model, obj, i)
    return n if n else str(i)


def body_causes(ctx: Any) -> list[Cause]:
    """Mass (mass and inertia scaled together: a density error), inertia alone, centre of mass x/y/z."""
    import mujoco

    model = _mujoco_model(ctx)
    if model is None:
        return []
    out: list[Cause] = []
    for b in range(1, model.nbody):
        if model.body_mass[b] <= 0:
            continue
        n = _name(model, mujoco.mjtObj.mjOBJ_BODY, b)
        out.append(ModelField(f"mass of body '{n}' (mass and inertia together)", "inertia",
                              (f"body_mass[{n}]", f"body_inertia[{n}]"), "relative", 0.05, (-0.6, 1.5),
                              writes=(("body_mass", b, "scale"), ("body_inertia", b, "scale")), set_const=True))
        out.append(ModelField(f"inertia of body '{n}'", "inertia", (f"body_inertia[{n}]",), "relative", 0.05,
                              (-0.6, 1.5), writes=(("body_inertia", b, "scale"),), set_const=True))
        for i, ax in enumerate("xyz"):
            out.append(ModelField(f"centre of mass of body '{n}' along its {ax}", "inertia",
                                  (f"body_ipos[{n},{i}]",), "m", 0.002, (-0.05, 0.05),
                                  writes=(("body_ipos", (b, i), "add"),), set_const=True))
    return out


def _dof_inertia(model) -> np.ndarray:
    """Diagonal of the joint-space inertia at qpos0, (nv,) kg·m² or kg."""
    import mujoco

    d = mujoco.MjData(model)
    mujoco.mj_forward(model, d)
    M = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, d, M)  # MuJoCo 4: (m, d, dst)
    return np.maximum(np.diag(M), 1e-12)


def joint_causes(ctx: Any) -> list[Cause]:
    """Per 1-DoF joint: armature, damping, stiffness (kind ``joint``) and frictionloss (``friction``);
    per tendon: frictionloss. Steps are 5 % of a reference: the value itself, else the joint's
    inertia × a 1 Hz rate (damping), × (2π·1 Hz)² (stiffness), or 1 % of its stiffness reference (friction)."""
    import mujoco

    model = _mujoco_model(ctx)
    if model is None:
        return []
    targeted = _targeted(ctx)
    Mdiag = _dof_inertia(model)
    out: list[Cause] = []
    for j in range(model.njnt):
        if int(model.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            continue
        n = _name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        dof = int(model.jnt_dofadr[j])
        M, w = float(Mdiag[dof]), 2 * math.pi
        rot = int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_HINGE)
        for field, idx, kind, ref, unit in (
                ("dof_armature", dof, "joint", M, "kg*m^2" if rot else "kg"),
                ("dof_damping", dof, "joint", M * w, "N*m*s/rad" if rot else "N*s/m"),
                ("jnt_stiffness", j, "joint", M * w * w, "N*m/rad" if rot else "N/m"),
                ("dof_frictionloss", dof, "friction", 0.01 * M * w * w, "N*m" if rot else "N")):
            if (field, str(idx)) in targeted or (field, n) in targeted:
                continue
            cur = float(getattr(model, field)[idx])
            step = 0.05 * (cur if cur > 0 else ref)
            label = field.split("_", 1)[1]
            out.append(ModelField(f"{label} of joint '{n}'", kind, (f"{field}[{n}]",), unit, step,
                                  (-cur, cur * 3 + 40 * step), writes=((field, idx, "add"),),
                                  set_const=field == "dof_armature"))
    for t in range(getattr(model, "ntendon", 0)):
        n = _name(model, mujoco.mjtObj.mjOBJ_TENDON, t)
        if ("tendon_frictionloss", str(t)) in targeted or ("tendon_frictionloss", n) in targeted:
            continue
        cur = float(model.tendon_frictionloss[t])
        out.append(ModelField(f"frictionloss of tendon '{n}'", "friction", (f"tendon_frictionloss[{n}]",), "N",
                              0.01, (-cur, cur + 10.0), writes=(("tendon_frictionloss", t, "add"),)))
    return out


# -- the camera's pose ----------------------------------------------------------------------------------
_POSE_AXES = (("x", 0, "camera.x"), ("y", 1, "camera.y"), ("z", 2, "camera.z"),
              ("tilt", 0, "camera.pitch"), ("pan", 1, "camera.yaw"), ("roll", 2, "camera.roll"))


@dataclass(eq=False)
class CameraPose(Cause):
    """The camera moved along (``axis`` 0-2, m) or turned about (3-5, rad) its own optical axes
    (x right, y down, z forward), through the twin's ``move_camera``; re-renders the keypoints."""

    axis: int = 0
    changes_rollout = True

    @contextlib.contextmanager
    def applied(self, ctx, theta):
        twin = ctx.twin
        missing = object()
        pose = getattr(ctx, "camera_pose", None)  # nested pose causes add up (move_camera replaces a move)
        outer = pose is None
        if outer:
            pose = ctx.camera_pose = np.zeros(6)
            saved = getattr(twin, "_camera_move", missing)
        pose[self.axis] += theta
        twin.move_camera(pose[:3].copy(), pose[3:].copy())
        try:
            yield
        finally:
            pose[self.axis] -= theta
            if outer:
                ctx.camera_pose = None
                twin.move_camera(np.zeros(3), np.zeros(3))
                if saved is not missing:
                    twin._camera_move = saved


def camera_pose_causes(ctx: Any) -> list[Cause]:
    if ctx.unit != "px" or not callable(getattr(ctx.twin, "move_camera", None)):
        return []
    if any(s.target.strip().startswith("camera.") for s in ctx.params):
        return []  # the spec models the camera itself: its frozen fields are candidates as parameters
    out: list[Cause] = []
    world = _optical_in_world(ctx)
    for i, (ax, _, field) in enumerate(_POSE_AXES):
        what = f"camera position along the image {ax} axis" if i < 3 else f"camera {ax}"
        # the fields a user frees are the world position (camera.x/y/z) and camera_link's fixed-axis RPY: name
        # the world components of this optical-axis move (a camera looking along world y moves "forward" in
        # camera.y, not in camera.z), and all three angles for a turn (RPY mixes them)
        fields = (_world_fields(world[:, i]) if i < 3 and world is not None else
                  (field,) if i < 3 else ("camera.roll", "camera.pitch", "camera.yaw"))
        out.append(CameraPose(what, "camera", fields, "m" if i < 3 else "rad", 0.002, (-0.1, 0.1), axis=i))
    pos, rot = tuple(out[:3]), tuple(out[3:])
    out.append(Composite("camera position (x, y, z)", "camera", ("camera.x", "camera.y", "camera.z"), "m", 0.0,
                         (0.0, 0.0), parts=pos))
    out.append(Composite("camera orientation (roll, pitch, yaw)", "camera",
                         ("camera.roll", "camera.pitch", "camera.yaw"), "rad", 0.0, (0.0, 0.0), parts=rot))
    return out


def _optical_in_world(ctx) -> np.ndarray | None:
    """The twin camera's optical axes in the world, (3, 3) columns x right, y down, z forward, or None
    when the twin has no pinhole camera (a legacy planar projection)."""
    cam = getattr(ctx.twin, "pinhole", None)
    rot = getattr(cam, "rotation", None)
    return None if rot is None else np.asarray(rot, float)


def _world_fields(direction: np.ndarray) -> tuple[str, ...]:
    """The ``camera.x/y/z`` fields a move along ``direction`` (world, unit (3,)) changes appreciably
    (a component of at least 0.3), largest first."""
    d = np.abs(np.asarray(direction, float))
    order = [int(k) for k in np.argsort(-d) if d[k] >= 0.3]
    return tuple(f"camera.{'xyz'[k]}" for k in order) or ("camera.x", "camera.y", "camera.z")


# -- the commands as the drive passes them on ------------------------------------------------------------
@dataclass(eq=False)
class CommandTransform(Cause):
    """The commands of actuator column ``column`` as the drive applies them: ``gain`` u·(1+θ), ``bias``
    u + θ, ``deadzone`` sign(u)·max(|u| − θ, 0), ``backlash`` (play θ: the output follows the input
    only once it has moved θ/2 past it)."""

    column: int = 0
    mode: str = "gain"
    changes_commands = True

    def excitation(self, ctx, exc, theta):
        v = np.array(exc.values, float)
        u = v[:, self.column]
        if self.mode == "gain":
            u = u * (1.0 + theta)
        elif self.mode == "bias":
            u = u + theta
        elif self.mode == "deadzone":
            u = np.sign(u) * np.maximum(np.abs(u) - theta, 0.0)
        else:  # backlash
            y = np.empty_like(u)
            y[0] = u[0]
            h = 0.5 * max(theta, 0.0)
            for k in range(1, u.size):
                y[k] = min(max(y[k - 1], u[k] - h), u[k] + h)
            u = y
        v[:, self.column] = u
        return replace(exc, values=v)


def command_causes(ctx: Any) -> list[Cause]:
    out: list[Cause] = []
    excs = ctx.objective.excitations
    if not excs:
        return out
    names = excs[0].actuator_names
    free_gains = {m.group(1) for s in ctx.params.free
                  for m in [re.match(r"^\s*actuator_(?:gear|gainprm)\[\s*([^,\]\s]+)", s.target)] if m}
    for a, n in enumerate(names):
        # a free parameter already writes this actuator's gain: its column is in the free span, never a cause
        has_gain = n in free_gains or str(a) in free_gains
        col = np.concatenate([np.asarray(e.values, float)[:, a] for e in excs if a < e.values.shape[1]])
        span, peak = float(np.ptp(col)), float(np.max(np.abs(col)))
        if span <= 0:
            continue
        unit = "command units"
        if not has_gain:
            out.append(CommandTransform(f"actuator '{n}' gain", "actuator", (f"gain of '{n}'",), "relative", 0.05,
                                        (-0.6, 1.5), column=a, mode="gain"))
        out += [CommandTransform(f"actuator '{n}' bias", "actuator", (f"bias of '{n}'",), unit, 0.02 * peak,
                                 (-peak, peak), column=a, mode="bias"),
                CommandTransform(f"actuator '{n}' dead-zone", "actuator", (f"dead-zone of '{n}'",), unit,
                                 0.02 * peak, (0.0, 0.5 * peak), column=a, mode="deadzone"),
                CommandTransform(f"actuator '{n}' backlash", "actuator", (f"backlash of '{n}'",), unit,
                                 0.02 * span, (0.0, 0.5 * span), column=a, mode="backlash")]
    return out + _every_drive(out)


def _every_drive(per_actuator: list[Cause]) -> list[Cause]:
    """With two or more actuators: a dead-zone in every drive, and backlash in every drive, each one candidate
    (a :class:`Composite`, one size per actuator). Drives of one make share their electronics and gearing, and a
    threshold in each leaves a residual that no single drive's explains: each explains its own joint's part."""
    out: list[Cause] = []
    for mode, what in (("deadzone", "a dead-zone"), ("backlash", "backlash")):
        parts = tuple(c for c in per_actuator if isinstance(c, CommandTransform) and c.mode == mode)
        if len(parts) >= 2:
            out.append(Composite(f"{what} in every actuator's drive", "actuator",
                                 tuple(f for p in parts for f in p.fields), "command units", 0.0, (0.0, 0.0),
                                 parts=parts))
    return out


# -- the measurement: timing, intrinsics, markers ---------------------------------------------------------
def warp(traj: Trajectory, delay: np.ndarray) -> Trajectory:
    """``x'(t) = x(t − delay)`` per sample, delay (T, K) s; cubic spline over the frame times (ends held)."""
    from scipy.interpolate import CubicSpline

    t = traj.time
    if traj.num_frames < 4 or not np.all(np.diff(t) > 0):
        return traj
    kp = np.array(traj.keypoints, float)
    out = kp.copy()
    for k in range(traj.num_keypoints):
        ok = traj.valid[:, k] & np.all(np.isfinite(kp[:, k]), axis=1)
        if ok.sum() < 4:
            continue
        tq = np.clip(t - delay[:, k], t[ok][0], t[ok][-1])
        out[:, k] = CubicSpline(t[ok], kp[ok, k], axis=0)(tq)
    return replace(traj, keypoints=out)


@dataclass(eq=False)
class TimeWarp(Cause):
    """A timing error: ``latency`` (a constant delay θ s), ``drops`` (the video slips ahead of the commands
    by θ frame per frame: unnoticed dropped frames or a wrong frame rate) or ``rolling_shutter`` (row v is
    read θ·(H − 1 − v)/(H − 1) s before the frame's stamp; θ the readout time, s)."""

    mode: str = "latency"
    changes_measurement = True

    def transform(self, ctx, traj, theta):
        T, K = traj.valid.shape
        if self.mode == "latency":
            d = np.full((T, K), theta)
        elif self.mode == "drops":
            d = np.broadcast_to(-(theta * (traj.time - traj.time[0]))[:, None], (T, K))
        else:
            H = float(getattr(ctx.camera, "height", 0) or 0) or (np.nanmax(traj.keypoints[..., 1]) + 1)
            v = np.nan_to_num(traj.keypoints[..., 1], nan=(H - 1) / 2)
            d = theta * (H - 1 - v) / max(H - 1, 1.0)
        return warp(traj, np.asarray(d, float))

    def value_text(self, ctx, theta):
        if self.mode == "drops":
            return f"{theta * 100:+.2g} % of the frames ({theta * ctx.rate * ctx.duration_s:+.2f} frame over a trial)"
        return f"{theta * 1000:+.1f} ms ({theta * ctx.rate:+.2f} frame)"


def timing_causes(ctx: Any) -> list[Cause]:
    period = 1.0 / ctx.rate
    lat_range = min(LATENCY_SEARCH_FRAMES * period, 0.25 * ctx.duration_s)
    free_latency = any(s.target == MEASUREMENT_PREFIX + "latency" for s in ctx.params.free)
    out: list[Cause] = []
    if not free_latency:
        what = "a camera latency (constant delay)" if ctx.unit == "px" else "a measurement delay (constant)"
        out.append(TimeWarp(what, "latency", (LATENCY,), "s", 0.2 * period,
                            (-lat_range, lat_range), mode="latency"))
    slip = 0.15  # at most 15 % of the frames: the video slips by at most 15 % of a trial's length
    out.append(TimeWarp("dropped frames or a wrong frame rate", "timing", ("frame times",), "1", 0.005,
                        (-slip, slip), mode="drops"))
    if ctx.unit == "px":
        out.append(TimeWarp("a rolling-shutter readout", "rolling_shutter", ("readout time",), "s", 0.2 * period,
                            (-period, period), mode="rolling_shutter"))
    return out


@dataclass(eq=False)
class Intrinsic(Cause):
    """A camera intrinsic off: ``fx``/``fy`` relative (the image scaled about the principal point),
    ``cx``/``cy`` px (the image shifted). Exact for a pinhole without distortion."""

    field: str = "fx"
    changes_measurement = True

    def transform(self, ctx, traj, theta):
        kp = np.array(traj.keypoints, float)
        i = 0 if self.field in ("fx", "cx") else 1
        if self.field == "f":  # one focal length for both axes (a zoom, a wrong lens)
            for j, c in ((0, float(ctx.camera.cx)), (1, float(ctx.camera.cy))):
                kp[..., j] = c + (kp[..., j] - c) * (1.0 + theta)
        elif self.field in ("fx", "fy"):
            c = float(getattr(ctx.camera, "cx" if i == 0 else "cy"))
            kp[..., i] = c + (kp[..., i] - c) * (1.0 + theta)
        else:
            kp[..., i] = kp[..., i] + theta
        return replace(traj, keypoints=kp)


def intrinsic_causes(ctx: Any) -> list[Cause]:
    cam = ctx.camera
    if ctx.unit != "px" or cam is None or not hasattr(cam, "cx"):
        return []
    free = {s.target.strip() for s in ctx.params.free}
    out: list[Cause] = []
    for f, what in (("fx", "focal length fx"), ("fy", "focal length fy"), ("cx", "principal point cx"),
                    ("cy", "principal point cy")):
        if f"camera.{f}" in free or any(s.target.strip() == f"camera.{f}" for s in ctx.params):
            continue
        if f in ("fx", "fy"):
            out.append(Intrinsic(f"camera {what}", "camera", (f"camera.{f}",), "relative", 0.01, (-0.3, 0.3), field=f))
        else:
            size = float(getattr(cam, "width" if f == "cx" else "height", 100))
            out.append(Intrinsic(f"camera {what}", "camera", (f"camera.{f}",), "px", 1.0, (-size / 4, size / 4),
                                 field=f))
    by = {c.fields[0]: c for c in out}
    if "camera.fx" in by and "camera.fy" in by:
        out.append(Intrinsic("camera focal length (fx and fy together)", "camera", ("camera.fx", "camera.fy"),
                             "relative", 0.01, (-0.3, 0.3), field="f"))
    if "camera.cx" in by and "camera.cy" in by:
        out.append(Composite("camera principal point (cx, cy)", "camera", ("camera.cx", "camera.cy"), "px", 0.0,
                             (0.0, 0.0), parts=(by["camera.cx"], by["camera.cy"])))
    return out


@dataclass(eq=False)
class MarkerOffset(Cause):
    """Keypoint ``keypoint``'s coordinate ``axis`` off by a constant θ (unit of the measurement)."""

    keypoint: str = ""
    axis: int = 0
    changes_measurement = True

    def transform(self, ctx, traj, theta):
        if self.keypoint not in traj.names or self.axis >= traj.keypoints.shape[2]:
            return traj
        kp = np.array(traj.keypoints, float)
        kp[:, traj.names.index(self.keypoint), self.axis] += theta
        return replace(traj, keypoints=kp)


def marker_causes(ctx: Any) -> list[Cause]:
    """A marker off its site: each keypoint's constant offset, per axis, of image keypoints (px) or motion-capture
    markers (m). None for joint-state trials: a joint reading has no marker (the calibration frees no offset for
    it either; a joint's zero is a ``qpos0``/``init`` matter of the model)."""
    free_offsets = {s.name for s in ctx.params.free if s.name.startswith("marker_offset.")}
    out: list[Cause] = []
    marked = [r for r in ctx.reals if getattr(r, "kind", "image") in ("image", "points")]
    if not marked:
        return []
    real = marked[0]
    D = real.keypoints.shape[2]
    scale = 1.0 if ctx.unit == "px" else (0.001 if ctx.unit == "m" else 0.005)
    for kp in dict.fromkeys(n for r in marked for n in r.names):
        parts = []
        for i in range(D):
            ax = "xyz"[i] if D <= 3 else str(i)
            if f"marker_offset.{kp}.{ax}" in free_offsets:
                continue
            parts.append(MarkerOffset(f"keypoint '{kp}' offset along {ax}", "offset", (f"marker_offset.{kp}.{ax}",),
                                      ctx.unit, scale, (-20 * scale, 20 * scale), keypoint=kp, axis=i))
        if len(parts) == 1:
            out.append(parts[0])
        elif parts:  # a marker off its site is off in every direction at once
            out.append(Composite(f"keypoint '{kp}' offset", "offset", tuple(f for p in parts for f in p.fields),
                                 ctx.unit, 0.0, (0.0, 0.0), parts=tuple(parts)))
    return out


@dataclass(eq=False)
class EncoderError(Cause):
    """A joint reading's own error: its zero off by a constant θ (``mode="offset"``, rad or m) or its scale off by
    a factor ``1 + θ`` about its zero (``mode="scale"``, relative: a wrong counts-per-radian or gear ratio). It
    acts on the twin's reading of joint ``joint`` as the encoder would have recorded it; the motion is not
    changed (a gravity-loaded link at a wrong zero moves differently, which is why it is a measurement cause
    and not the model's initial state)."""

    joint: str = ""
    mode: str = "offset"
    changes_measurement = True

    def transform(self, ctx, traj, theta):
        if traj.kind != "joints" or self.joint not in traj.names:
            return traj
        kp = np.array(traj.keypoints, float)
        k = traj.names.index(self.joint)
        kp[:, k, 0] = kp[:, k, 0] + theta if self.mode == "offset" else kp[:, k, 0] * (1.0 + theta)
        return replace(traj, keypoints=kp)


def encoder_causes(ctx: Any) -> list[Cause]:
    """Each recorded joint's encoder zero and scale (:class:`EncoderError`), for joint-state trials only: a
    joint reading's offset explains a residual as well as a centre of mass or a spring's rest angle can, and
    must be weighed against them."""
    joints: dict[str, str] = {}
    for r in ctx.reals:
        if getattr(r, "kind", "image") == "joints":
            for n, u in zip(r.names, r.units):
                joints.setdefault(n, u)
    out: list[Cause] = []
    for n, u in joints.items():
        step = 0.005 if u == "rad" else 0.001
        out.append(EncoderError(f"joint '{n}' encoder zero offset", "encoder", (f"encoder zero of joint '{n}'",),
                                u, step, (-100 * step, 100 * step), joint=n, mode="offset"))
        out.append(EncoderError(f"joint '{n}' encoder scale", "encoder", (f"encoder scale of joint '{n}'",),
                                "relative", 0.01, (-0.3, 0.3), joint=n, mode="scale"))
    return out


@dataclass(eq=False)
class TrackerBias(Cause):
    """The tracker's own systematic error: ``θ · b`` added to the twin's keypoints, ``b = tracked − projected``
    (per frame and keypoint, px) measured by rendering the twin at the identified point and tracking the
    renders with the rig's tracker (:func:`~vid2sid_ros.calibration.tracker_bias.twin_tracker_bias`: clean
    renders, passed through the real videos' codec when they share one); θ = 1 is the bias as measured (θ is
    dimensionless: a real camera's blur and exposure may make the real video's bias larger than the renders').
    It acts only on the training trials the bias was
    measured on (:meth:`~.context.ProbeContext.candidate_bias`); a holdout trial is left as it is."""

    changes_measurement = True

    def transform(self, ctx, traj, theta):
        from ..tracker_bias import add_bias

        b = ctx.candidate_bias(traj)
        if b is None or theta == 0:
            return traj
        return add_bias([traj], [replace(b, keypoints=np.asarray(b.keypoints, float) * float(theta))])[0]

    def value_text(self, ctx, theta):
        return (f"{theta:.3g} × the bias measured on renders of the twin ({ctx.candidate_bias_rms:.3g} px "
                "RMS as measured)")


def tracker_causes(ctx: Any) -> list[Cause]:
    """The tracker's bias on renders of the twin as a candidate (:class:`TrackerBias`), when it was measured and not
    already applied to every residual (``ctx.bias_candidate``, image keypoints only)."""
    if getattr(ctx, "bias_candidate", None) is None or ctx.unit != "px":
        return []
    return [TrackerBias("the tracker's own bias on these markers (measured on renders of the twin)",
                        "tracker", ("calibration.tracker_bias",), "1", 0.1, (0.0, 3.0))]


#: family name -> function(ctx) -> the causes it proposes (like the proposers' registry)
CAUSE_FAMILIES: dict[str, Callable[[Any], list[Cause]]] = {
    "frozen": frozen_parameters, "body": body_causes, "joint": joint_causes, "command": command_causes,
    "timing": timing_causes, "camera_pose": camera_pose_causes, "camera_intrinsics": intrinsic_causes,
    "marker": marker_causes, "encoder": encoder_causes, "tracker": tracker_causes,
}


def candidate_causes(ctx: Any, families: tuple[str, ...] | None = None) -> list[Cause]:
    """Every registered family's causes for this twin and spec (``families``: a subset by name)."""
    out: list[Cause] = []
    for name, make in CAUSE_FAMILIES.items():
        if families is None or name in families:
            out.extend(make(ctx))
    return out
