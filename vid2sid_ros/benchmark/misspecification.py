"""Misspecification: stand-in "real" trials that differ from the twin in named, documented ways.

The clean sim2sim benchmark is the easy case: the twin is exactly the model that made
the "real" trial. Every real rig also has small model errors a lab cannot avoid. With
``vid2sid benchmark sim2sim --misspecify KIND[=SIZE][,KIND[=SIZE]...]`` the stand-in
real side is made with these errors; the calibrating twin knows nothing of them.

=================== ========== ========= ======================================================================
kind                size unit  default   what differs on the real side
=================== ========== ========= ======================================================================
``latency``         s          0.02      the camera lags the commands: frame k shows the rig SIZE (either sign)
                                         earlier than its command time; the real rig is simulated at 10× the
                                         command rate so the delay is sub-frame (the realised delay, a multiple
                                         of 1/(10·rate), is recorded)
``frozen``          relative   0.3       a frozen physics parameter is wrong: the first frozen physics
                                         parameter with a non-zero nominal value (finger: ``joint_armature``) is
                                         ×(1 + SIZE) on the real side (clipped to its bounds)
``friction``        N or N·m   0.3       unmodelled Coulomb friction: on a MuJoCo twin, SIZE is added to every
                                         tendon's ``frictionloss`` (to every DoF's when the model has no tendon,
                                         re-applied after the parameters are set); on a twin with a frozen
                                         parameter whose name contains ``friction``, that parameter is set to
                                         SIZE (the toy arm)
``camera``          mm, mrad   3.0       the camera pose is off: the stand-in's camera is moved in its own optical
                                         frame (x right, y down, z towards the scene) by SIZE·(+1, −0.5, +1) mm and
                                         turned by the rotation vector SIZE·(−0.5, +1, +1) mrad (tilt, pan, roll)
                                         — :data:`CAMERA_TRANSLATION_MM`, :data:`CAMERA_ROTATION_MRAD`; the real
                                         frames are rendered and the keypoints projected from that camera (MuJoCo
                                         camera of the finger, pinhole camera of a user rig, the toy arm's
                                         orthographic camera); the twin keeps the nominal pose. On the finger
                                         (0.56 m away, f = 448 px) SIZE 3 moves the markers by about 4 px
``rolling_shutter`` s          0.02      a rolling-shutter camera: image row v of frame k is read out
                                         (H − 1 − v)/(H − 1)·SIZE before the frame's time stamp (SIZE = the readout
                                         time from the top row to the bottom row, at most one frame period), so
                                         each keypoint shows the rig at the time its own row was read (solved by
                                         fixed-point iteration on the row, linear interpolation of a rollout at
                                         10× the command rate); rendered frames are composed row by row from
                                         that rollout's nearest frames
``drops``           fraction   0.05      frame drops nobody noticed: that fraction of the frames is missing and
                                         the remaining ones are assigned to consecutive command steps, as a
                                         reader that trusts the nominal frame rate would (the video slips
                                         ahead of the commands); the steps left at the end are invalid
``mass``            relative   0.2       a link is heavier than modelled: one body's mass and its inertia are
                                         ×(1 + SIZE) on the real side (a density error; ``mj_setConst``
                                         re-derives the armature-dependent constants). The body is
                                         ``mass_body=`` of :func:`perturb_real_twin`, else picked
                                         (:func:`mass_target`: the middle one of the bodies with a mass, in
                                         model order — the finger's ``middle`` phalanx). MuJoCo twins only
``deadzone``        fraction   0.3       an actuator dead-zone: every command column u becomes
                                         sign(u)·max(|u| − d, 0) with d = SIZE × the column's largest |u| over
                                         all the rig's excitations (the drive ignores small commands)
``backlash``        fraction   0.2       backlash (play) in the drive: every command column passes through a
                                         play operator of width b = SIZE × the column's peak-to-peak range over
                                         all the rig's excitations (the output follows the input only once it
                                         has moved b/2 past it; the first sample passes unchanged)
``focal``           relative   0.03      the focal length is off: every keypoint is scaled about the principal
                                         point by (1 + SIZE) (fx and fy both; a pinhole camera with its focal
                                         length × (1 + SIZE)); applied to the measured keypoints, rendered frames
                                         are not rescaled
=================== ========== ========= ======================================================================

Several kinds combine (``latency=0.02,frozen=0.2``). :func:`parse_misspecify` reads the
CLI form; :func:`upsampled_excitation` + :func:`delayed_rows` (latency) or
:func:`rolling_shutter_sample` + :func:`rolling_shutter_frames` (rolling shutter, with any
latency), :func:`perturb_real_twin` (model and camera pose) and
:func:`transform_real_trajectory` (frame drops) are the places where the real side is
changed, used by :func:`~vid2sid_ros.benchmark.sim2sim.make_sim2sim_trial`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.parameters import ParameterSet
from ..core.trajectory import Trajectory

__all__ = ["MISSPECIFICATIONS", "MisspecificationError", "parse_misspecify", "upsampled_excitation", "delayed_rows", "first_step_of",
           "perturb_real_twin", "apply_model_friction", "transform_real_trajectory", "LATENCY_UPSAMPLE", "frozen_target",
           "camera_pose_error", "CAMERA_TRANSLATION_MM", "CAMERA_ROTATION_MRAD", "rolling_shutter_sample",
           "rolling_shutter_frames", "MAX_ROLLING_SHUTTER_S", "MAX_CAMERA_SIZE", "check_misspecification",
           "MODEL_KINDS", "CAMERA_KINDS", "mass_target", "command_transform", "apply_model_changes", "focal_scaled"]

#: kind -> (default size, unit, one-line description)
MISSPECIFICATIONS: dict[str, tuple[float, str, str]] = {
    "latency": (0.02, "s", "camera delay behind the commands"),
    "frozen": (0.3, "relative", "a frozen physics parameter is off by this fraction"),
    "friction": (0.3, "N or N*m", "unmodelled Coulomb friction (tendon or joints)"),
    "camera": (3.0, "mm and mrad", "camera pose error: the real camera moved and turned"),
    "rolling_shutter": (0.02, "s", "rolling-shutter readout time, top row to bottom row"),
    "drops": (0.05, "fraction", "unnoticed frame drops (the video slips ahead of the commands)"),
    "mass": (0.2, "relative", "one link's mass and inertia are off by this fraction"),
    "deadzone": (0.3, "fraction of the peak command", "an actuator dead-zone of this share of the peak |command|"),
    "backlash": (0.2, "fraction of the command range", "backlash (play) of this share of the command range"),
    "focal": (0.03, "relative", "the focal length is off by this fraction (keypoints scaled about the principal "
                                "point)"),
}

#: kinds that change the real side's twin (its model or the commands it receives): never the caller's twin
MODEL_KINDS = ("frozen", "friction", "camera", "mass", "deadzone", "backlash")
#: kinds that change only what a camera sees: they leave joint and mocap measurements alone
CAMERA_KINDS = ("camera", "rolling_shutter", "focal")

#: largest ``latency`` size, s (either sign)
MAX_LATENCY_S = 1.0

#: the real side of a ``latency`` misspecification is simulated at this multiple of the command rate
LATENCY_UPSAMPLE = 10

#: ``camera=SIZE``: the camera moves SIZE × this (mm) along its optical axes (x right, y down, z forward)
CAMERA_TRANSLATION_MM = (1.0, -0.5, 1.0)
#: ``camera=SIZE``: and turns by SIZE × this rotation vector (mrad) about its optical axes (tilt, pan, roll)
CAMERA_ROTATION_MRAD = (-0.5, 1.0, 1.0)

#: largest ``rolling_shutter`` readout time, s (the run refuses one longer than its frame period too)
MAX_ROLLING_SHUTTER_S = 1.0

#: largest ``camera`` size either sign (mm and mrad: 0.3 m and 0.3 rad along/about each axis at most); a
#: larger one is another camera, not a pose error (``camera=1e9`` moved it 1000 km and still ran)
MAX_CAMERA_SIZE = 300.0


class MisspecificationError(ValueError):
    """Bad ``--misspecify`` text or a kind this twin cannot express (one line, names the kind)."""


def parse_misspecify(text: str | Mapping[str, float] | None) -> dict[str, float]:
    """``"latency=0.02,frozen"`` -> ``{"latency": 0.02, "frozen": 0.3}`` (defaults fill bare kinds).

    Raises:
        MisspecificationError: unknown kind (lists the valid ones), a size that is not a
            finite number, a negative ``friction``, a ``latency`` beyond ±1 s, a ``rolling_shutter``
            readout outside [0, 1] s, a ``camera`` size beyond ±:data:`MAX_CAMERA_SIZE`, a ``drops``
            fraction outside [0, 0.5), a ``mass`` error outside [-0.9, 10], a ``deadzone`` or ``backlash``
            fraction outside [0, 1), a ``focal`` error outside (-0.5, 0.5), a repeated kind.
    """
    if text is None:
        return {}
    if isinstance(text, Mapping):
        items = [(str(k), v) for k, v in text.items()]
    else:
        items = []
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                continue
            kind, _, size = part.partition("=")
            items.append((kind.strip(), size.strip() if size.strip() else None))
    out: dict[str, float] = {}
    for kind, size in items:
        if kind not in MISSPECIFICATIONS:
            raise MisspecificationError(f"--misspecify: unknown kind {kind!r}; valid: {', '.join(MISSPECIFICATIONS)}")
        if kind in out:
            raise MisspecificationError(f"--misspecify: kind {kind!r} given twice")
        if size is None:
            value = MISSPECIFICATIONS[kind][0]
        else:
            try:
                value = float(size)
            except (TypeError, ValueError):
                raise MisspecificationError(f"--misspecify: {kind}={size!r}: expected a number "
                                            f"({MISSPECIFICATIONS[kind][1]})") from None
        if not math.isfinite(value):
            raise MisspecificationError(f"--misspecify: {kind}={size!r}: expected a finite number")
        if kind == "friction" and value < 0.0:  # a Coulomb friction (MuJoCo frictionloss) is a magnitude
            raise MisspecificationError(f"--misspecify: friction={value}: expected a friction >= 0 "
                                        f"({MISSPECIFICATIONS[kind][1]})")
        if kind == "latency" and abs(value) > MAX_LATENCY_S:
            raise MisspecificationError(f"--misspecify: latency={value}: expected a delay of at most "
                                        f"{MAX_LATENCY_S} s either sign (more is a clock error, not a latency)")
        if kind == "rolling_shutter" and not 0.0 <= value <= MAX_ROLLING_SHUTTER_S:
            raise MisspecificationError(f"--misspecify: rolling_shutter={value}: expected a readout time in [0, "
                                        f"{MAX_ROLLING_SHUTTER_S}] s (top row to bottom row)")
        if kind == "camera" and abs(value) > MAX_CAMERA_SIZE:
            raise MisspecificationError(f"--misspecify: camera={value:g}: expected a pose-error size of at most "
                                        f"{MAX_CAMERA_SIZE:g} either sign (mm and mrad; more is another camera)")
        if kind == "drops" and not 0.0 <= value < 0.5:
            raise MisspecificationError(f"--misspecify: drops={value}: expected a fraction in [0, 0.5)")
        if kind == "mass" and not -0.9 <= value <= 10.0:
            raise MisspecificationError(f"--misspecify: mass={value}: expected a relative error in [-0.9, 10] "
                                        "(the link keeps a positive mass)")
        if kind in ("deadzone", "backlash") and not 0.0 <= value < 1.0:
            raise MisspecificationError(f"--misspecify: {kind}={value}: expected a fraction in [0, 1) "
                                        f"({MISSPECIFICATIONS[kind][1]})")
        if kind == "focal" and not -0.5 < value < 0.5:
            raise MisspecificationError(f"--misspecify: focal={value}: expected a relative focal-length error in "
                                        "(-0.5, 0.5)")
        out[kind] = value
    return out


def upsampled_excitation(excitation: Excitation, upsample: int = LATENCY_UPSAMPLE) -> Excitation:
    """The same zero-order-hold command stream at ``upsample`` × the rate (each sample repeated).

    A rollout of it is the same motion sampled ``upsample`` times as often: row
    ``(k + 1) · upsample − 1`` is the state at the original row ``k``'s time ``(k + 1) / rate``.

    Raises:
        MisspecificationError: ``upsample < 1``.
    """
    if upsample < 1:
        raise MisspecificationError(f"latency: upsample must be >= 1, got {upsample}")
    values = np.repeat(np.asarray(excitation.values), upsample, axis=0)
    return Excitation(excitation.name, excitation.rate * upsample, values, excitation.actuator_names,
                      {**dict(excitation.meta), "upsample": upsample})


def delayed_rows(num_steps: int, delay_s: float, rate: float, upsample: int = LATENCY_UPSAMPLE,
                 first_step: int = 1) -> tuple[np.ndarray, float]:
    """Rows of an upsampled rollout that a camera ``delay_s`` behind records at the command times.

    Frame ``k`` (time ``(k + first_step) / rate``, the twin's own stamp) shows the rig at that time
    ``− delay``: row ``(k + first_step) · upsample − first_step − round(delay · rate · upsample)``,
    clipped to the rollout (before the first row the first is held — the rig starts at rest — after
    the last the last).

    Args:
        first_step: command steps before a rollout's first sample — 1 for a twin that records the
            state after each step (frame k at (k + 1) / rate: the finger), 0 for one whose first
            sample is the initial state (frame k at k / rate: a user MJCF or URDF model);
            :func:`first_step_of` reads it off the upsampled rollout's time stamps.

    Returns:
        ``(rows (num_steps,) int, realised delay s)`` — the delay rounded to the fine period.
    """
    shift = int(round(float(delay_s) * rate * upsample))
    s = int(first_step)
    rows = np.clip((np.arange(num_steps) + s) * upsample - s - shift, 0, num_steps * upsample - 1)
    return rows, shift / (rate * upsample)


def first_step_of(fine_time: np.ndarray, rate: float, upsample: int = LATENCY_UPSAMPLE) -> int:
    """Command steps before the first sample of an upsampled rollout with time stamps ``fine_time`` (s):
    ``round(fine_time[0] · rate · upsample)``, 0 or 1 (the twin's frame convention, :func:`delayed_rows`)."""
    t = np.asarray(fine_time, float)
    return int(np.clip(round(float(t[0]) * rate * upsample), 0, 1)) if t.size else 1


def _fine_index(times: np.ndarray, rate: float, upsample: int, first_step: int = 1) -> np.ndarray:
    """Fractional row of an upsampled rollout at ``times`` s (row j is the state at
    (j + first_step) / (rate·upsample))."""
    return np.asarray(times, float) * rate * upsample - float(first_step)


def _interpolate(fine: np.ndarray, fine_valid: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keypoints (T, K, D) and validity (T, K) of ``fine`` (N, K, D) at fractional rows ``index`` (T, K),
    linear between the neighbouring rows, clipped to the rollout (before the first row the first is held)."""
    n = fine.shape[0]
    f = np.clip(index, 0.0, n - 1.0)
    lo = np.floor(f).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    a = (f - lo)[..., None]
    k = np.broadcast_to(np.arange(fine.shape[1]), f.shape)
    kp = (1.0 - a) * fine[lo, k] + a * fine[hi, k]
    valid = fine_valid[lo, k] & fine_valid[hi, k] & np.all(np.isfinite(kp), axis=-1)
    return kp, valid


def rolling_shutter_sample(fine_keypoints: np.ndarray, fine_valid: np.ndarray, num_steps: int, rate: float,
                           readout_s: float, height: int, *, latency_s: float = 0.0,
                           upsample: int = LATENCY_UPSAMPLE, iterations: int = 4, first_step: int = 1
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What a rolling-shutter camera records of an upsampled rollout (module table, ``rolling_shutter``).

    Frame ``k`` is stamped ``t_k = (k + first_step) / rate`` (:func:`delayed_rows`); image row ``v`` (0 = top) is read at
    ``t_k − latency − (H − 1 − v) / (H − 1) · readout``. A keypoint is seen at the time its own
    row is read: ``v`` is found by fixed-point iteration (start: the row at ``t_k − latency``;
    the row of the interpolated position gives the next read time), ``iterations`` times.

    Args:
        fine_keypoints: (num_steps · upsample, K, 2) px, the rollout of
            :func:`upsampled_excitation`. fine_valid: (num_steps · upsample, K) bool.
        num_steps: frames of the trial. rate: frame (= command) rate, Hz.
        readout_s: top-to-bottom readout time, s (0: a global shutter).
        height: image height, px (rows 0 .. H − 1).
        latency_s: a camera latency on top, s (either sign).
        first_step: the twin's frame convention (:func:`delayed_rows`).

    Returns:
        ``(keypoints (T, K, 2) px, valid (T, K), read time (T, K) s)``.

    Raises:
        MisspecificationError: a rollout that is not ``num_steps · upsample`` rows, ``height < 2``.
    """
    fine = np.asarray(fine_keypoints, float)
    if fine.shape[0] != num_steps * upsample:
        raise MisspecificationError(f"rolling_shutter: expected {num_steps * upsample} rollout rows "
                                    f"({num_steps} frames × {upsample}), got {fine.shape[0]}")
    if height < 2:
        raise MisspecificationError(f"rolling_shutter: the image needs at least 2 rows, got {height}")
    stamp = np.broadcast_to(((np.arange(num_steps) + first_step) / rate - float(latency_s))[:, None],
                            (num_steps, fine.shape[1]))
    t = stamp.copy()
    for _ in range(max(1, int(iterations))):
        kp, valid = _interpolate(fine, np.asarray(fine_valid, bool), _fine_index(t, rate, upsample, first_step))
        row = np.clip(np.where(np.isfinite(kp[..., 1]), kp[..., 1], height - 1.0), 0.0, height - 1.0)
        t = stamp - (height - 1.0 - row) / (height - 1.0) * float(readout_s)
    kp, valid = _interpolate(fine, np.asarray(fine_valid, bool), _fine_index(t, rate, upsample, first_step))
    return kp, valid, t


def rolling_shutter_frames(fine_frames: np.ndarray, num_steps: int, rate: float, readout_s: float, *,
                           latency_s: float = 0.0, upsample: int = LATENCY_UPSAMPLE, first_step: int = 1
                           ) -> np.ndarray:
    """Rolling-shutter frames composed row by row from an upsampled render.

    Row ``v`` of frame ``k`` is row ``v`` of the upsampled frame nearest to its read time
    (:func:`rolling_shutter_sample` has the timing), clipped to the rollout.

    Args:
        fine_frames: (num_steps · upsample, H, W, 3) uint8.

    Returns:
        (num_steps, H, W, 3) uint8.
    """
    fine = np.asarray(fine_frames)
    n, h = fine.shape[0], fine.shape[1]
    rows = np.arange(h)
    out = np.empty((num_steps,) + fine.shape[1:], fine.dtype)
    for k in range(num_steps):
        t = (k + 1) / rate - float(latency_s) - (h - 1.0 - rows) / max(h - 1.0, 1.0) * float(readout_s)
        idx = np.clip(np.rint(_fine_index(t, rate, upsample, first_step)).astype(int), 0, n - 1)
        out[k] = fine[idx, rows]
    return out


def check_misspecification(rig: Any, mis: Mapping[str, float]) -> None:
    """Refuse, before any work, a misspecification this rig cannot express.

    Checks what :func:`perturb_real_twin` would refuse (no frozen parameter to get wrong, no
    friction to add, no movable camera) on a throw-away twin of ``rig``, and a
    ``rolling_shutter`` readout longer than a trial's frame period.

    Args:
        rig: the rig (``make_twin``, ``parameters``, ``excitations``). mis: parsed kinds.

    Raises:
        MisspecificationError: naming the kind and why.
    """
    if not mis:
        return
    if "rolling_shutter" in mis:
        for exc in (e for v in rig.excitations.values() for e in v):
            if mis["rolling_shutter"] > 1.0 / exc.rate + 1e-12:
                raise MisspecificationError(f"--misspecify: rolling_shutter={mis['rolling_shutter']}: the readout "
                                            f"cannot take longer than a frame period ({1.0 / exc.rate:.4g} s on "
                                            f"'{exc.name}')")
    model_side = {k: v for k, v in mis.items() if k in MODEL_KINDS or k == "focal"}
    if model_side:
        twin = rig.make_twin()
        try:
            perturb_real_twin(twin, rig.parameters, rig.parameters.nominal(), model_side,
                              excitations=[e for v in rig.excitations.values() for e in v])
        finally:
            close = getattr(twin, "close", None)
            if close is not None:
                close()


def frozen_target(parameters: ParameterSet) -> str | None:
    """The frozen physics parameter a ``frozen`` misspecification changes (module table), or None."""
    for s in parameters:
        if s.frozen and s.kind == "physics" and s.nominal != 0.0:
            return s.name
    return None


def camera_pose_error(size: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``camera=SIZE`` pose error: ``(translation (3,) m, rotation vector (3,) rad)`` in the
    camera's optical frame (x right, y down, z forward): SIZE × :data:`CAMERA_TRANSLATION_MM` mm
    and SIZE × :data:`CAMERA_ROTATION_MRAD` mrad."""
    return (float(size) * 1e-3 * np.asarray(CAMERA_TRANSLATION_MM, float),
            float(size) * 1e-3 * np.asarray(CAMERA_ROTATION_MRAD, float))


def mass_target(model: Any) -> str:
    """The body a ``mass`` misspecification changes when none is named: the middle one (index n // 2) of
    the n bodies with a positive mass, in model order (the finger: ``middle``).

    Raises:
        MisspecificationError: a model with no body that has a mass.
    """
    import mujoco

    bodies = [b for b in range(1, int(model.nbody)) if float(model.body_mass[b]) > 0.0]
    if not bodies:
        raise MisspecificationError("--misspecify mass: the model has no body with a mass")
    b = bodies[len(bodies) // 2]
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or str(b)


def command_transform(values: np.ndarray, *, deadzone: np.ndarray | None = None,
                      backlash: np.ndarray | None = None) -> np.ndarray:
    """The commands as a drive with a dead-zone and/or backlash passes them on (module table).

    Args:
        values: (T, A) commands, one column per actuator (command units).
        deadzone: (A,) dead-zone half-width d per column: u -> sign(u)·max(|u| − d, 0); None: none.
        backlash: (A,) play width b per column: y_k = clip(y_{k−1}, u_k − b/2, u_k + b/2), y_0 = u_0
            (applied after the dead-zone); None: none.

    Returns:
        (T, A) float array (a copy).
    """
    u = np.array(values, float)
    if deadzone is not None:
        d = np.asarray(deadzone, float)[None, :]
        u = np.sign(u) * np.maximum(np.abs(u) - d, 0.0)
    if backlash is not None and u.shape[0] > 1:
        h = 0.5 * np.maximum(np.asarray(backlash, float), 0.0)
        y = u.copy()
        for k in range(1, u.shape[0]):
            y[k] = np.minimum(np.maximum(y[k - 1], u[k] - h), u[k] + h)
        u = y
    return u


def _command_widths(excitations: Sequence[Excitation], num: int, mis: Mapping[str, float]) -> dict[str, np.ndarray]:
    """Per command column: the dead-zone (SIZE × peak |u|) and backlash (SIZE × peak-to-peak) widths."""
    cols = [np.concatenate([np.asarray(e.values, float)[:, a] for e in excitations if a < np.shape(e.values)[1]])
            for a in range(num)]
    out: dict[str, np.ndarray] = {}
    if "deadzone" in mis:
        out["deadzone"] = np.array([float(mis["deadzone"]) * float(np.max(np.abs(c))) for c in cols])
    if "backlash" in mis:
        out["backlash"] = np.array([float(mis["backlash"]) * float(np.ptp(c)) for c in cols])
    return out


def _wrap_commands(twin: Any, widths: Mapping[str, np.ndarray]) -> None:
    """Make ``twin.rollout`` pass every excitation's commands through :func:`command_transform`."""
    roll = twin.rollout

    def rollout(excitation: Excitation, **kw: Any):
        values = command_transform(excitation.values, deadzone=widths.get("deadzone"),
                                   backlash=widths.get("backlash"))
        return roll(Excitation(excitation.name, excitation.rate, values, excitation.actuator_names,
                               excitation.meta), **kw)

    twin.rollout = rollout


def focal_scaled(traj: Trajectory, cx: float, cy: float, scale: float) -> Trajectory:
    """``traj`` as a camera with its focal length × ``scale`` sees it: every keypoint moved to
    ``c + scale · (p − c)`` about the principal point ``c = (cx, cy)`` px (pinhole model)."""
    c = np.array([float(cx), float(cy)])
    return replace(traj, keypoints=c + (np.asarray(traj.keypoints, float) - c) * float(scale))


def perturb_real_twin(twin: Any, parameters: ParameterSet, truth: Mapping[str, float],
                      mis: Mapping[str, float], *, excitations: Sequence[Excitation] | None = None,
                      mass_body: str | None = None) -> tuple[dict[str, float], dict[str, Any]]:
    """Apply the model-side misspecifications (``frozen``, ``friction``, ``camera``, ``mass``, ``deadzone``,
    ``backlash``) to the real side's twin.

    ``camera`` moves the twin's camera (its ``move_camera(translation, rotation_vector)``) at once;
    ``deadzone`` and ``backlash`` wrap its ``rollout`` (the commands it receives); ``mass`` is recorded
    and written by :func:`apply_model_changes` after the parameters are set. The twin must be the
    real side's own instance.

    Args:
        twin: the twin that plays the robot (a separate instance from the calibrating twin).
        parameters: the rig's spec. truth: hidden values (full dict). mis: parsed kinds.
        excitations: every excitation of the rig (the dead-zone's and backlash's widths are shares of
            each command column's range over all of them); required by ``deadzone`` and ``backlash``.
        mass_body: the body whose mass and inertia ``mass`` scales (default :func:`mass_target`).

    Returns:
        ``(real-side parameter values, info)``: the values to set on ``twin`` (the truth
        with the changed frozen parameter) and what was changed, JSON-ready.

    Raises:
        MisspecificationError: the kind cannot be expressed on this twin (says why).
    """
    values = dict(truth)
    info: dict[str, Any] = {}
    model = getattr(twin, "model", None)
    if "mass" in mis:
        if model is None or not hasattr(model, "body_mass"):
            raise MisspecificationError(f"--misspecify mass: twin {type(twin).__name__} has no MuJoCo model")
        import mujoco

        body = mass_body or mass_target(model)
        b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
        if b < 1 or float(model.body_mass[b]) <= 0.0:
            raise MisspecificationError(f"--misspecify mass: no body {body!r} with a mass in the model")
        scale = 1.0 + float(mis["mass"])
        info["mass"] = {"body": body, "scale": scale, "twin_mass_kg": float(model.body_mass[b]),
                        "real_mass_kg": float(model.body_mass[b]) * scale,
                        "what": "mass and inertia x scale (a density error)"}
    if "deadzone" in mis or "backlash" in mis:
        if not excitations:
            raise MisspecificationError("--misspecify deadzone/backlash: the rig has no commanded excitation")
        num = int(np.shape(excitations[0].values)[1])
        widths = _command_widths(excitations, num, mis)
        _wrap_commands(twin, widths)
        names = list(excitations[0].actuator_names or [f"u{a}" for a in range(num)])
        for k, w in widths.items():
            info[k] = {"width": dict(zip(names, (float(x) for x in w))), "unit": "command units",
                       "share": float(mis[k])}
    if "focal" in mis:
        cam = getattr(twin, "camera", None)
        if cam is None or not hasattr(cam, "cx"):
            raise MisspecificationError(f"--misspecify focal: twin {type(twin).__name__} has no pinhole camera "
                                        "(principal point cx, cy)")
        info["focal"] = {"scale": 1.0 + float(mis["focal"]), "cx": float(cam.cx), "cy": float(cam.cy),
                         "unit": "px"}
    if "frozen" in mis:
        name = frozen_target(parameters)
        if name is None:
            raise MisspecificationError("--misspecify frozen: this rig has no frozen physics parameter with a "
                                        "non-zero nominal value to get wrong")
        spec = parameters[name]
        values[name] = min(max(spec.nominal * (1.0 + mis["frozen"]), spec.lower), spec.upper)
        info["frozen"] = {"parameter": name, "twin_value": spec.nominal, "real_value": values[name],
                          "unit": spec.unit}
    if "friction" in mis:
        size = float(mis["friction"])
        frozen_friction = [s.name for s in parameters if s.frozen and "friction" in s.name]
        model = getattr(twin, "model", None)
        if frozen_friction:
            values[frozen_friction[0]] = size
            info["friction"] = {"parameter": frozen_friction[0], "real_value": size,
                                "unit": parameters[frozen_friction[0]].unit}
        elif model is not None and hasattr(model, "tendon_frictionloss") and getattr(model, "ntendon", 0) > 0:
            info["friction"] = {"field": "tendon_frictionloss", "added": size, "unit": "N"}
        elif model is not None and hasattr(model, "dof_frictionloss"):
            info["friction"] = {"field": "dof_frictionloss", "added": size, "unit": "N*m"}
        else:
            raise MisspecificationError(f"--misspecify friction: twin {type(twin).__name__} has neither a MuJoCo "
                                        "model nor a frozen friction parameter")
    if "camera" in mis:
        move = getattr(twin, "move_camera", None)
        if move is None:
            raise MisspecificationError(f"--misspecify camera: twin {type(twin).__name__} has no movable camera "
                                        "(move_camera); the finger, the toy arm and pinhole user rigs have one")
        t, w = camera_pose_error(mis["camera"])
        try:
            move(t, w)
        except (ValueError, RuntimeError) as err:  # CameraError, TwinError: e.g. a planar-projection rig
            raise MisspecificationError(f"--misspecify camera: {err}") from None
        info["camera"] = {"translation_mm": (t * 1e3).tolist(), "rotation_mrad": (w * 1e3).tolist(),
                          "frame": "camera optical frame (x right, y down, z forward)"}
    return values, info


def apply_model_changes(twin: Any, info: Mapping[str, Any]) -> None:
    """Write the model changes recorded by :func:`perturb_real_twin` (friction, a link's mass and
    inertia) into the real twin's model; call once, after ``twin.set_parameters``."""
    apply_model_friction(twin, info)
    m = info.get("mass")
    if m:
        import mujoco

        from ..sim.mujoco_constants import refresh_constants

        b = mujoco.mj_name2id(twin.model, mujoco.mjtObj.mjOBJ_BODY, m["body"])
        twin.model.body_mass[b] = float(m["real_mass_kg"])
        twin.model.body_inertia[b] = np.asarray(twin.model.body_inertia[b]) * float(m["scale"])
        refresh_constants(twin.model)


def apply_model_friction(twin: Any, info: Mapping[str, Any]) -> None:
    """Add the MuJoCo friction recorded by :func:`perturb_real_twin` to the real twin's model.

    Call once, after ``twin.set_parameters`` (which rewrites the fields the spec targets).
    """
    fr = info.get("friction") or {}
    field = fr.get("field")
    if field:
        arr = getattr(twin.model, field)
        arr[:] = np.asarray(arr) + float(fr["added"])


def transform_real_trajectory(traj: Trajectory, mis: Mapping[str, float], rng: np.random.Generator
                              ) -> tuple[Trajectory, dict[str, Any]]:
    """Apply the measurement-side misspecification ``drops`` to a real trajectory.

    Args:
        traj: the tracked (or projected) real trajectory, px.
        mis: parsed kinds; others are ignored here.
        rng: seeded generator (which frames drop).

    Returns:
        ``(trajectory, info)``.
    """
    info: dict[str, Any] = {}
    kp, valid = traj.keypoints.copy(), traj.valid.copy()
    if "drops" in mis and mis["drops"] > 0:
        T = traj.num_frames
        n_drop = int(round(float(mis["drops"]) * T))
        dropped = np.sort(rng.choice(np.arange(1, T), size=min(n_drop, T - 1), replace=False)) if n_drop else []
        kept = np.setdiff1d(np.arange(T), dropped)
        kp2 = np.full_like(kp, np.nan)
        v2 = np.zeros_like(valid)
        kp2[:kept.size], v2[:kept.size] = kp[kept], valid[kept]
        kp, valid = kp2, v2
        info["drops"] = {"dropped_frames": [int(d) for d in dropped], "fraction": float(mis["drops"])}
    if not info:
        return traj, info
    return replace(traj, keypoints=kp, valid=valid), info
