"""Misspecification: stand-in "real" trials that differ from the twin in named, documented ways.

The clean sim2sim benchmark is the easy case: the twin is exactly the model that made
the "real" trial. Every real rig also has small model errors a lab cannot avoid. With
``vid2sid benchmark sim2sim --misspecify KIND[=SIZE][,KIND[=SIZE]...]`` the stand-in
real side is made with these errors; the calibrating twin knows nothing of them.

============ ========== ========= ======================================================================
kind         size unit  default   what differs on the real side
============ ========== ========= ======================================================================
``latency``  s          0.02      the camera lags the commands: frame k shows the rig SIZE (either sign)
                                  earlier than its command time; the real rig is simulated at 10× the
                                  command rate so the delay is sub-frame (the realised delay, a multiple
                                  of 1/(10·rate), is recorded)
``frozen``   relative   0.3       a frozen physics parameter is wrong: the first frozen physics
                                  parameter with a non-zero nominal value (finger: ``joint_armature``) is
                                  ×(1 + SIZE) on the real side (clipped to its bounds)
``friction`` N or N·m   0.3       unmodelled Coulomb friction: on a MuJoCo twin, SIZE is added to every
                                  tendon's ``frictionloss`` (to every DoF's when the model has no tendon,
                                  re-applied after the parameters are set); on a twin with a frozen
                                  parameter whose name contains ``friction``, that parameter is set to
                                  SIZE (the toy arm)
``camera``   px         3.0       the camera pose is off: every real keypoint is shifted by
                                  (SIZE, −SIZE/2) px and turned by 0.1°·SIZE about the keypoints'
                                  centroid (a small pan/tilt and roll seen in the image)
``drops``    fraction   0.05      frame drops nobody noticed: that fraction of the frames is missing and
                                  the remaining ones are assigned to consecutive command steps, as a
                                  reader that trusts the nominal frame rate would (the video slips
                                  ahead of the commands); the steps left at the end are invalid
============ ========== ========= ======================================================================

Several kinds combine (``latency=0.02,frozen=0.2``). :func:`parse_misspecify` reads the
CLI form; :func:`upsampled_excitation` + :func:`delayed_rows`, :func:`perturb_real_twin` and
:func:`transform_real_trajectory` are the three places where the real side is changed,
used by :func:`~vid2sid_ros.calibration.sim2sim.make_sim2sim_trial`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from ..core.excitation import Excitation
from ..core.parameters import ParameterSet
from ..core.trajectory import Trajectory

__all__ = ["MISSPECIFICATIONS", "MisspecificationError", "parse_misspecify", "upsampled_excitation", "delayed_rows",
           "perturb_real_twin", "apply_model_friction", "transform_real_trajectory", "LATENCY_UPSAMPLE", "frozen_target"]

#: kind -> (default size, unit, one-line description)
MISSPECIFICATIONS: dict[str, tuple[float, str, str]] = {
    "latency": (0.02, "s", "camera delay behind the commands"),
    "frozen": (0.3, "relative", "a frozen physics parameter is off by this fraction"),
    "friction": (0.3, "N or N*m", "unmodelled Coulomb friction (tendon or joints)"),
    "camera": (3.0, "px", "camera pose error: image shift and roll"),
    "drops": (0.05, "fraction", "unnoticed frame drops (the video slips ahead of the commands)"),
}

#: largest ``latency`` size, s (either sign)
MAX_LATENCY_S = 1.0

#: the real side of a ``latency`` misspecification is simulated at this multiple of the command rate
LATENCY_UPSAMPLE = 10


class MisspecificationError(ValueError):
    """Bad ``--misspecify`` text or a kind this twin cannot express (one line, names the kind)."""


def parse_misspecify(text: str | Mapping[str, float] | None) -> dict[str, float]:
    """``"latency=0.02,frozen"`` -> ``{"latency": 0.02, "frozen": 0.3}`` (defaults fill bare kinds).

    Raises:
        MisspecificationError: unknown kind (lists the valid ones), a size that is not a
            finite number, a negative ``friction``, a ``latency`` beyond ±1 s, a ``drops``
            fraction outside [0, 0.5), a repeated kind.
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
        if kind == "drops" and not 0.0 <= value < 0.5:
            raise MisspecificationError(f"--misspecify: drops={value}: expected a fraction in [0, 0.5)")
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


def delayed_rows(num_steps: int, delay_s: float, rate: float, upsample: int = LATENCY_UPSAMPLE
                 ) -> tuple[np.ndarray, float]:
    """Rows of an upsampled rollout that a camera ``delay_s`` behind records at the command times.

    Frame ``k`` (time ``(k + 1) / rate``) shows the rig at ``(k + 1) / rate − delay``: row
    ``(k + 1) · upsample − 1 − round(delay · rate · upsample)``, clipped to the rollout (before
    the first row the first is held — the rig starts at rest — after the last the last).

    Returns:
        ``(rows (num_steps,) int, realised delay s)`` — the delay rounded to the fine period.
    """
    shift = int(round(float(delay_s) * rate * upsample))
    rows = np.clip((np.arange(num_steps) + 1) * upsample - 1 - shift, 0, num_steps * upsample - 1)
    return rows, shift / (rate * upsample)


def frozen_target(parameters: ParameterSet) -> str | None:
    """The frozen physics parameter a ``frozen`` misspecification changes (module table), or None."""
    for s in parameters:
        if s.frozen and s.kind == "physics" and s.nominal != 0.0:
            return s.name
    return None


def perturb_real_twin(twin: Any, parameters: ParameterSet, truth: Mapping[str, float],
                      mis: Mapping[str, float]) -> tuple[dict[str, float], dict[str, Any]]:
    """Apply the model-side misspecifications (``frozen``, ``friction``) to the real side's twin.

    Args:
        twin: the twin that plays the robot (a separate instance from the calibrating twin).
        parameters: the rig's spec. truth: hidden values (full dict). mis: parsed kinds.

    Returns:
        ``(real-side parameter values, info)``: the values to set on ``twin`` (the truth
        with the changed frozen parameter) and what was changed, JSON-ready.

    Raises:
        MisspecificationError: the kind cannot be expressed on this twin (says why).
    """
    values = dict(truth)
    info: dict[str, Any] = {}
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
    return values, info


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
    """Apply the measurement-side misspecifications (``camera``, ``drops``) to a real trajectory.

    Args:
        traj: the tracked (or projected) real trajectory, px.
        mis: parsed kinds; others are ignored here.
        rng: seeded generator (which frames drop).

    Returns:
        ``(trajectory, info)``.
    """
    info: dict[str, Any] = {}
    kp, valid = traj.keypoints.copy(), traj.valid.copy()
    if "camera" in mis:
        size = float(mis["camera"])
        centre = np.nanmean(kp.reshape(-1, 2), axis=0)
        ang = math.radians(0.1 * size)
        rot = np.array([[math.cos(ang), -math.sin(ang)], [math.sin(ang), math.cos(ang)]])
        kp = (kp - centre) @ rot.T + centre + np.array([size, -0.5 * size])
        info["camera"] = {"shift_px": [size, -0.5 * size], "roll_deg": 0.1 * size}
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
