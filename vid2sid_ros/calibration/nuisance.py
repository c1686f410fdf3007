"""Measurement nuisances: what stands between the twin's motion and the camera's record.

A real rig's camera is never exactly in step with its commands, and a marker is never
exactly where the model's site is. These effects are not physics: they are identified
together with the physics and reported apart (``kind: nuisance``), never written into the
model. This module holds the ones that act on the *trajectory* (after the rollout), so
their sensitivity comes from the trajectory itself and costs no rollout:

=========================== ======== ==============================================================
parameter                   unit     effect on the twin's trajectory
=========================== ======== ==============================================================
``latency``                 s        measurement delay behind the commands (the camera's for a video,
                                     the recording's for motion capture or joint states), continuous,
                                     sub-frame, either sign: the twin is sampled at ``t − latency``
                                     (cubic spline over the sample times, ends held: the rig rests
                                     before the first command and holds the last one). ``latency > 0``:
                                     the measurement records the motion late.
``marker_offset.<kp>.x|y``  px       a constant image-space offset of keypoint ``<kp>`` (marker glued
                                     off its model site, tracker bias); for motion capture
                                     ``.x|y|z`` in m
=========================== ======== ==============================================================

Parameters are ordinary :class:`~vid2sid_ros.core.parameters.ParameterSpec` objects
with ``kind="nuisance"`` and a target in the ``measurement.`` namespace
(``measurement.latency``, ``measurement.offset[tip].x``); :class:`MeasurementModel`
splits a full value dict into the twin's values and these, and applies them.

Switches (the rig config's ``nuisance:`` block, or ``CalibrationConfig.nuisance``)::

    nuisance:
      latency: {enabled: true, bounds: [-0.05, 0.05]}           # s; default on when the trials
                                                               #  have commanded excitation
      marker_offsets: {enabled: true, bounds: [-5.0, 5.0]}      # px; default on for real trials
                                                               #  (unless the spec has free camera
                                                               #  nuisances of its own), off for
                                                               #  sim2sim stand-ins

``enabled`` may also be written as a bare boolean (``latency: false``). Camera-pose
nuisances belong to the camera model (the twin's ``camera.*`` parameters), not here.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.excitation import Excitation
from ..core.parameters import ParameterSet, ParameterSpec
from ..core.trajectory import Trajectory

__all__ = ["MeasurementModel", "NuisanceConfigError", "add_measurement_nuisances", "shift_trajectory",
           "parse_nuisance_config", "LATENCY", "MEASUREMENT_PREFIX", "DEFAULT_LATENCY_BOUNDS_S",
           "DEFAULT_OFFSET_BOUNDS_PX", "is_commanded", "rig_nuisance", "nuisance_names", "describe_free", "latency_meaning"]

#: the latency parameter's name
LATENCY = "latency"
#: target namespace of trajectory-level nuisances
MEASUREMENT_PREFIX = "measurement."
#: default latency bounds, s (±1.5 frames at 30 Hz)
DEFAULT_LATENCY_BOUNDS_S = (-0.05, 0.05)
#: default marker-offset bounds, px
DEFAULT_OFFSET_BOUNDS_PX = (-5.0, 5.0)

_KEYS = {"latency", "marker_offsets"}


class NuisanceConfigError(ValueError):
    """A bad ``nuisance:`` block; the message names the key and what was expected."""


def _switch(block: Any, key: str, default_bounds: tuple[float, float], source: str) -> tuple[bool | None, tuple[float, float]]:
    where = f"{source}: nuisance.{key}"
    if block is None:
        return None, default_bounds
    if isinstance(block, bool):
        return block, default_bounds
    if not isinstance(block, Mapping):
        raise NuisanceConfigError(f"{where}: expected true/false or a mapping {{enabled, bounds}}, "
                                  f"got {type(block).__name__} {block!r}")
    unknown = set(block) - {"enabled", "bounds"}
    if unknown:
        from ..core.names import did_you_mean

        raise NuisanceConfigError(f"{where}: unknown key(s) {sorted(unknown)}"
                                  f"{did_you_mean(sorted(unknown)[0], ('enabled', 'bounds'))}; valid: enabled, bounds")
    enabled = block.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise NuisanceConfigError(f"{where}.enabled: expected true or false, got {enabled!r}")
    bounds = block.get("bounds", default_bounds)
    if (not isinstance(bounds, (list, tuple)) or len(bounds) != 2
            or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in bounds)
            or not bounds[0] < 0.0 < bounds[1]):
        raise NuisanceConfigError(f"{where}.bounds: expected [lower, upper] with lower < 0 < upper, got {bounds!r}")
    return (True if enabled is None else enabled), (float(bounds[0]), float(bounds[1]))


def parse_nuisance_config(config: Mapping[str, Any] | None, *, source: str = "<config>") -> dict[str, Any]:
    """Validate a ``nuisance:`` block (module docstring).

    Returns:
        ``{"latency": (enabled | None, (lo, hi)), "marker_offsets": (enabled | None, (lo, hi))}``;
        ``None`` = not said, the default applies.

    Raises:
        NuisanceConfigError: unknown key, wrong type, bounds not straddling 0 (one line naming the key).
    """
    cfg = {} if config is None else config
    if not isinstance(cfg, Mapping):
        raise NuisanceConfigError(f"{source}: nuisance: expected a mapping, got {type(cfg).__name__}")
    unknown = set(cfg) - _KEYS
    if unknown:
        from ..core.names import did_you_mean

        raise NuisanceConfigError(f"{source}: nuisance: unknown key(s) {sorted(unknown)}"
                                  f"{did_you_mean(sorted(unknown)[0], _KEYS)}; valid: {', '.join(sorted(_KEYS))}"
                                  " (camera pose nuisances are camera.* parameters)")
    return {"latency": _switch(cfg.get("latency"), "latency", DEFAULT_LATENCY_BOUNDS_S, source),
            "marker_offsets": _switch(cfg.get("marker_offsets"), "marker_offsets", DEFAULT_OFFSET_BOUNDS_PX, source)}


def rig_nuisance(rig: Any, calibration: Mapping[str, Any] | None = None, *,
                 source: str = "<config>") -> dict[str, Any] | None:
    """The ``nuisance:`` switches a calibration of ``rig`` runs with (``CalibrationConfig.nuisance``).

    The one place every entry point (``vid2sid calibrate``, ``vid2sid demo``, ``vid2sid
    benchmark``, ``calibrator_node``) reads the rig config's top-level ``nuisance:`` block
    from: validated here, so a bad block is refused before any work or file.

    Args:
        rig: a rig with a ``nuisance`` attribute (the config's block; missing or empty =
            not given).
        calibration: the rig's ``calibration:`` block, when the caller passes it on; its own
            ``nuisance`` key is used when the rig has no top-level block.
        source: the config file, for messages.

    Returns:
        A copy of the block, or None when neither gives one (the defaults apply).

    Raises:
        NuisanceConfigError: a bad block, or the switches given in both places (one line
            naming ``source`` and the key).
    """
    top = getattr(rig, "nuisance", None) or None
    inner = (calibration or {}).get("nuisance")
    if top is not None and inner is not None:
        raise NuisanceConfigError(f"{source}:calibration.nuisance: the switches are given twice (also the top-level "
                                  "'nuisance:' block); keep one")
    block = top if top is not None else inner
    if block is None:
        return None
    parse_nuisance_config(block, source=source)
    return dict(block)


def is_commanded(excitations: Sequence[Excitation]) -> bool:
    """True if any excitation commands something that changes (a free swing has none)."""
    for e in excitations:
        v = np.asarray(e.values, float)
        if v.size and float(np.ptp(v, axis=0).max()) > 0.0:
            return True
    return False


#: marker-offset unit -> (axes, default bounds) for the measurement kinds an offset makes sense for
OFFSET_UNITS = {"px": (("x", "y"), DEFAULT_OFFSET_BOUNDS_PX), "m": (("x", "y", "z"), (-0.01, 0.01))}


def offset_unit(trajectories: Sequence[Trajectory]) -> str | None:
    """The unit a marker offset of these trajectories has: ``"px"`` (image keypoints) or ``"m"``
    (3-D marker points), or None when a marker offset means nothing for them: joint positions
    (a slide joint's metres are not a marker's), or a mix of kinds or units.

    Args:
        trajectories: the training trajectories (:attr:`Trajectory.kind` ``"image"``,
            ``"points"`` or ``"joints"``).
    """
    kinds = {t.kind for t in trajectories}
    units = {t.unit for t in trajectories}
    if not trajectories or "joints" in kinds or len(units) != 1:
        return None
    unit = units.pop()
    return unit if unit in OFFSET_UNITS else None


def latency_meaning(unit: str | None) -> str:
    """The ``latency`` nuisance's meaning for trials measured in ``unit``: a camera's delay for image
    keypoints (``"px"``), the measurement's for anything else (motion capture in m, joint states in rad or
    m, a mix: never called a camera's or a video's)."""
    if unit == "px":
        return "camera delay behind the commands (positive: the video shows the motion late)"
    return "measurement delay behind the commands (positive: the measurement records the motion late)"


def nuisance_names(keypoints: Sequence[str]) -> list[str]:
    """Every measurement nuisance name :func:`add_measurement_nuisances` may add for these keypoints.

    ``latency`` and ``marker_offset.<kp>.<axis>`` for each keypoint and axis of any offset
    unit (which ones a calibration adds depends on its trials).
    """
    axes = dict.fromkeys(a for ax, _ in OFFSET_UNITS.values() for a in ax)
    return [LATENCY, *(f"marker_offset.{kp}.{a}" for kp in keypoints for a in axes)]


def add_measurement_nuisances(parameters: ParameterSet, config: Mapping[str, Any] | None, *,
                              keypoints: Sequence[str], excitations: Sequence[Excitation], real_trial: bool,
                              unit: str | None = "px", source: str = "<config>") -> ParameterSet:
    """``parameters`` plus the enabled measurement nuisances (names already present are kept as they are).

    Args:
        parameters: the twin's (or the caller's) spec.
        config: the ``nuisance:`` block (None = defaults).
        keypoints: keypoint names (one marker offset pair each).
        excitations: the training excitations (latency defaults on when they are commanded).
        real_trial: True for a recorded robot (marker offsets default on, unless the spec
            has free nuisance parameters of its own modelling the camera, i.e. ``camera.*``
            targets; a free initial state ``init.qpos[...]`` does not count), False for a
            sim2sim stand-in.
        unit: the marker-offset unit of the trials (:func:`offset_unit`): ``px`` (image:
            x, y offsets) or ``m`` (motion capture: x, y, z; default bounds ±0.01 m); None or
            another unit (joint states, mixed) gets no marker offsets. Also what the latency's meaning calls
            the delay (:func:`latency_meaning`: a camera's for px only).
        source: file name for error messages.

    Raises:
        NuisanceConfigError: a bad block (see :func:`parse_nuisance_config`).
    """
    cfg = parse_nuisance_config(config, source=source)
    specs = list(parameters.specs)
    have = set(parameters.names)
    lat_on, lat_b = cfg["latency"]
    if (is_commanded(excitations) if lat_on is None else lat_on) and LATENCY not in have:
        specs.append(ParameterSpec(LATENCY, "s", lat_b[0], lat_b[1], 0.0, latency_meaning(unit),
                                   MEASUREMENT_PREFIX + "latency", "linear", "nuisance"))
    off_on, off_b = cfg["marker_offsets"]
    # default: on for real trials, unless the spec already models the camera with free nuisances of its
    # own (``camera.*`` targets: a pixel scale, a pivot position, a pose: an offset of one keypoint would
    # duplicate them). Other free nuisances (a per-trial initial state, a time offset) do not move the image.
    own_camera = any(s.kind == "nuisance" and any(t.strip().startswith("camera.") for t in s.target.split(","))
                     for s in parameters.free)
    default_offsets = real_trial and not own_camera
    if (default_offsets if off_on is None else off_on) and unit in OFFSET_UNITS:
        axes, unit_bounds = OFFSET_UNITS[unit]
        if unit != "px" and off_b == DEFAULT_OFFSET_BOUNDS_PX:
            off_b = unit_bounds
        for kp in keypoints:
            for axis in axes:
                name = f"marker_offset.{kp}.{axis}"
                if name not in have:
                    where = "image " if unit == "px" else ""  # a mocap marker's offset is in 3-D, m
                    specs.append(ParameterSpec(name, unit, off_b[0], off_b[1], 0.0,
                                               f"constant {where}{axis} offset of keypoint '{kp}' (marker off its "
                                               "site)",
                                               f"{MEASUREMENT_PREFIX}offset[{kp}].{axis}", "linear", "nuisance"))
    if len(specs) == len(parameters.specs):
        return parameters
    return replace(parameters, specs=tuple(specs))


def describe_free(parameters: ParameterSet) -> str:
    """What is fitted, for the calibrate header: ``"13 free: 4 physics (a, b, c, d) + 9 nuisance (x0, latency,
    6 marker offsets)"``; the marker offsets are counted, not listed; without free nuisances: ``"4 physics (a, ...)"``.

    Args:
        parameters: the spec as the calibration fits it (measurement nuisances added,
            :func:`add_measurement_nuisances`).
    """
    phys = [s.name for s in parameters.free if s.kind != "nuisance"]
    nuis = [s.name for s in parameters.free if s.kind == "nuisance"]
    offsets = [n for n in nuis if n.startswith("marker_offset.")]
    listed = [n for n in nuis if n not in offsets]
    if offsets:
        listed.append(f"{len(offsets)} marker offset{'s' if len(offsets) != 1 else ''}")
    text = f"{len(phys)} physics ({', '.join(phys) or 'none'})"
    if not nuis:
        return text
    return f"{len(phys) + len(nuis)} free: {text} + {len(nuis)} nuisance ({', '.join(listed)})"


def shift_trajectory(traj: Trajectory, delay_s: float) -> Trajectory:
    """The trajectory as a camera ``delay_s`` behind would record it: ``x'(t) = x(t − delay_s)``.

    Keypoints with every sample valid are resampled by a cubic spline over the frame
    times (error O(Δt⁴) for smooth motion, so a 0.5-frame shift of a 5 Hz ringing stays
    far below a pixel); keypoints with gaps are resampled linearly and a resampled sample
    is valid only if both neighbours are. Times before the first frame take the first
    frame (the twin's trajectory starts one command period after the first command; the
    state before is not recorded), times after the last the last frame.

    Args:
        traj: keypoints (T, K, 2) px at times ``traj.time`` (s).
        delay_s: s, either sign; 0 returns ``traj`` itself.

    Returns:
        A trajectory with the same times, steps, names and source.
    """
    d = float(delay_s)
    if d == 0.0 or traj.num_frames < 2:
        return traj
    t = traj.time
    tq = np.clip(t - d, t[0], t[-1])
    kp = traj.keypoints
    valid = traj.valid
    out = np.full_like(kp, np.nan)
    vout = np.zeros_like(valid)
    tl = tq
    idx = np.clip(np.searchsorted(t, tl, side="right") - 1, 0, len(t) - 2)
    dt = t[idx + 1] - t[idx]
    w = np.where(dt > 0, (tl - t[idx]) / np.where(dt > 0, dt, 1.0), 0.0)
    full = valid.all(axis=0) if np.all(np.diff(t) > 0) and len(t) >= 4 else np.zeros(traj.num_keypoints, bool)
    if full.any():  # one spline for every fully valid keypoint: each column is solved and evaluated on its own,
        from scipy.interpolate import CubicSpline  # so the values are those of one spline per keypoint, to the bit

        out[:, full, :] = CubicSpline(t, kp[:, full, :], axis=0)(tq)
        vout[:, full] = True
    for k in np.flatnonzero(~full):
        a, b = kp[idx, k, :], kp[idx + 1, k, :]
        ok = valid[idx, k] & (valid[idx + 1, k] | (w == 0.0))
        b = np.where(np.isfinite(b), b, a)
        out[:, k, :] = (1.0 - w)[:, None] * a + w[:, None] * b
        vout[:, k] = ok
    return replace(traj, keypoints=out, valid=vout)


class MeasurementModel:
    """The trajectory-level nuisances of a parameter set (module docstring).

    Args:
        parameters: a spec that may contain ``measurement.*`` targets.

    Attributes:
        names: names of the measurement nuisances in ``parameters``.
    """

    def __init__(self, parameters: ParameterSet) -> None:
        self.parameters = parameters
        self.names = [s.name for s in parameters if s.target.startswith(MEASUREMENT_PREFIX)]
        self._offsets: dict[str, tuple[str, int]] = {}
        for s in parameters:
            tgt = s.target[len(MEASUREMENT_PREFIX):] if s.target.startswith(MEASUREMENT_PREFIX) else ""
            if tgt.startswith("offset[") and "]." in tgt:
                kp, axis = tgt[len("offset["):].split("].", 1)
                self._offsets[s.name] = (kp, "xyz".index(axis) if axis in ("x", "y", "z") else 0)
        self._latency = next((s.name for s in parameters if s.target == MEASUREMENT_PREFIX + "latency"), None)

    def __bool__(self) -> bool:
        return bool(self.names)

    def split(self, values: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
        """``(twin values, measurement values)`` of a value dict."""
        meas = {k: float(v) for k, v in values.items() if k in self.names}
        return {k: v for k, v in values.items() if k not in meas}, meas

    def physics_only(self) -> ParameterSet:
        """The spec without the measurement nuisances (what the twin and result.yaml hold)."""
        if not self.names:
            return self.parameters
        return replace(self.parameters, specs=tuple(s for s in self.parameters if s.name not in self.names))

    def apply(self, traj: Trajectory, values: Mapping[str, float]) -> Trajectory:
        """The twin's trajectory as the camera would record it at these nuisance values.

        Args:
            traj: the twin's trajectory (px).
            values: full or partial values; missing nuisances count as 0.
        """
        if not self.names:
            return traj
        out = traj
        if self._latency is not None:
            out = shift_trajectory(out, float(values.get(self._latency, 0.0)))
        if self._offsets:
            kp = out.keypoints.copy()
            moved = False
            for name, (kpname, axis) in self._offsets.items():
                v = float(values.get(name, 0.0))
                if v != 0.0 and kpname in out.names and axis < kp.shape[2]:
                    kp[:, out.names.index(kpname), axis] += v
                    moved = True
            if moved:
                out = replace(out, keypoints=kp)
        return out
