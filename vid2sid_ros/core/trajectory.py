"""Measured trajectories, in the measurement's own unit, and the paper's error metrics.

A :class:`Trajectory` is what a sensor hands to the calibrator: for each of T frames,
K named keypoints with D coordinates each and a validity flag. Three kinds of
measurement (:data:`KINDS`) carry their unit with the data:

=========  ===  ==================  =======================================================
kind       D    unit                meaning
=========  ===  ==================  =======================================================
image      2    px                  image keypoints ``(x, y)``, x = column, y = row; integer
                                    coordinates are pixel centres, (0, 0) is the centre of
                                    the top-left pixel (OpenCV)
points     3    m                   3-D points ``(x, y, z)`` in a named world frame (REP 103:
                                    x forward, y left, z up), e.g. motion-capture markers
joints     1    rad or m per joint  joint coordinates (revolute: rad, prismatic: m), e.g.
                                    ``sensor_msgs/JointState.position``
=========  ===  ==================  =======================================================

Invalid samples hold NaN and are excluded from every metric — a lost marker is never
replaced by an invented value. The error between two trajectories is the Euclidean
distance per sample (absolute difference for joints), in their unit; trajectories of
different kinds or frames are never compared with each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

__all__ = ["Trajectory", "TrajectoryError", "KINDS", "DEFAULT_NOISE", "align", "mae", "per_keypoint_mae", "errors",
           "residuals", "mae_px", "per_keypoint_mae_px", "residuals_px", "unit_label", "noise_levels",
           "format_error", "display_unit"]

#: kind -> (coordinates per keypoint D, allowed units)
KINDS: dict[str, tuple[int, tuple[str, ...]]] = {
    "image": (2, ("px",)),
    "points": (3, ("m",)),
    "joints": (1, ("rad", "m")),
}

#: default measurement noise (1 sigma) per unit, used to weigh the residuals of trials of
#: different kinds fitted together: 1 px for a marker/centreline tracker at VGA, 1 mm for
#: an optical motion-capture marker (OptiTrack/Vicon/Qualisys calibrations report
#: 0.1-1 mm), 0.005 rad (0.3 deg) for a joint encoder read through a gearbox with backlash.
#: Override per unit (``TrialObjective(noise={"m": 0.0005})``, rig config
#: ``calibration.noise``) or per trial (``Trajectory.meta["noise"]``, a number in the unit).
DEFAULT_NOISE: dict[str, float] = {"px": 1.0, "m": 0.001, "rad": 0.005}


class TrajectoryError(ValueError):
    """Shapes or names of a trajectory (or a pair) do not fit."""


@dataclass(frozen=True)
class Trajectory:
    """Measured keypoints of one trial.

    Attributes:
        time: frame times in s, shape (T,), non-decreasing (step k at k / rate).
        keypoints: measurements, shape (T, K, D) in ``unit``; D = 2 for ``kind="image"``
            (``[..., 0]`` = x column, ``[..., 1]`` = y row, px), 3 for ``"points"`` (x, y, z
            in m in ``frame``), 1 for ``"joints"`` (rad or m per joint). NaN where invalid.
        valid: shape (T, K) bool; False when the keypoint was lost, out of frame or
            the frame was dropped.
        names: K keypoint names.
        source: ``"real"`` or ``"sim"`` (free text allowed).
        trial_id: the excitation/trial this belongs to.
        steps: command step index per frame, shape (T,), int; defaults to 0..T-1.
        meta: free-form extras (e.g. dropped frame count; ``noise``: this trial's
            measurement noise, 1 sigma in its unit, overriding :data:`DEFAULT_NOISE`).
        kind: ``"image"`` (default), ``"points"`` or ``"joints"`` (:data:`KINDS`).
        unit: ``"px"`` / ``"m"`` for images / points; for joints one unit for all or a
            tuple of K units (``"rad"`` or ``"m"``); default: the kind's first unit.
        frame: name of the coordinate frame of ``"points"`` (default ``"world"``);
            ``"image"`` for images; ``""`` for joints.

    Raises:
        TrajectoryError: on inconsistent shapes, an unknown kind or a unit the kind
            does not allow.
    """

    time: np.ndarray
    keypoints: np.ndarray
    valid: np.ndarray
    names: tuple[str, ...]
    source: str = ""
    trial_id: str = ""
    steps: np.ndarray | None = None
    meta: Mapping[str, object] = field(default_factory=dict)
    kind: str = "image"
    unit: str | tuple[str, ...] | None = None
    frame: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TrajectoryError(f"unknown trajectory kind {self.kind!r}; expected one of {', '.join(KINDS)}")
        D, allowed = KINDS[self.kind]
        t = np.asarray(self.time, dtype=float).ravel()
        kp = np.asarray(self.keypoints, dtype=float)
        if self.kind == "joints" and kp.ndim == 2:
            kp = kp[:, :, None]
        if kp.ndim != 3 or kp.shape[2] != D:
            raise TrajectoryError(f"keypoints must have shape (T, K, {D}) for kind {self.kind!r}, got {kp.shape}")
        T, K = kp.shape[:2]
        unit = allowed[0] if self.unit is None else self.unit
        units = (unit,) * K if isinstance(unit, str) else tuple(unit)
        if len(units) != K:
            raise TrajectoryError(f"{len(units)} units for K={K} keypoints")
        bad = [u for u in units if u not in allowed]
        if bad:
            raise TrajectoryError(f"unit {bad[0]!r} is not a unit of kind {self.kind!r}; expected {' or '.join(allowed)}")
        unit = units[0] if len(set(units)) == 1 and isinstance(unit, str) else units
        frame = {"image": "image", "points": "world", "joints": ""}[self.kind] if self.frame is None else str(self.frame)
        if t.shape[0] != T:
            raise TrajectoryError(f"time has {t.shape[0]} entries but keypoints have T={T}")
        valid = np.asarray(self.valid, dtype=bool)
        if valid.shape != (T, K):
            raise TrajectoryError(f"valid must have shape (T, K)=({T}, {K}), got {valid.shape}")
        names = tuple(self.names)
        if len(names) != K:
            raise TrajectoryError(f"{len(names)} names for K={K} keypoints")
        valid = valid & np.all(np.isfinite(kp), axis=2)
        kp = kp.copy()
        kp[~valid] = np.nan
        steps = np.arange(T) if self.steps is None else np.asarray(self.steps, dtype=int).ravel()
        if steps.shape[0] != T:
            raise TrajectoryError(f"steps has {steps.shape[0]} entries, expected T={T}")
        for a in (t, kp, valid, steps):
            a.setflags(write=False)
        object.__setattr__(self, "time", t)
        object.__setattr__(self, "keypoints", kp)
        object.__setattr__(self, "valid", valid)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "frame", frame)

    @property
    def units(self) -> tuple[str, ...]:
        """Unit of each keypoint, K entries."""
        return (self.unit,) * self.num_keypoints if isinstance(self.unit, str) else tuple(self.unit)

    @property
    def unit_label(self) -> str:
        """The unit as printed: ``"px"``, ``"m"``, ``"rad"``; ``"rad|m"`` for mixed joints."""
        return unit_label(self.units)

    @property
    def dims(self) -> int:
        """Coordinates per keypoint, D."""
        return int(self.keypoints.shape[2])

    def _with(self, **changes) -> "Trajectory":
        kw = dict(time=self.time, keypoints=self.keypoints, valid=self.valid, names=self.names, source=self.source,
                  trial_id=self.trial_id, steps=self.steps, meta=self.meta, kind=self.kind, unit=self.unit,
                  frame=self.frame)
        kw.update(changes)
        return Trajectory(**kw)

    @property
    def num_frames(self) -> int:
        return int(self.keypoints.shape[0])

    @property
    def num_keypoints(self) -> int:
        return int(self.keypoints.shape[1])

    def keypoint(self, name: str) -> np.ndarray:
        """Measurements of one keypoint, shape (T, D) in its unit (NaN where invalid).

        Raises:
            KeyError: listing the valid names.
        """
        if name not in self.names:
            raise KeyError(f"unknown keypoint '{name}'; valid: {', '.join(self.names)}")
        return self.keypoints[:, self.names.index(name)]

    def select(self, names: Sequence[str]) -> "Trajectory":
        """Copy with only the named keypoints (in the given order)."""
        idx = [self.names.index(n) for n in names]
        unit = self.unit if isinstance(self.unit, str) else tuple(self.unit[i] for i in idx)
        return self._with(keypoints=self.keypoints[:, idx], valid=self.valid[:, idx], names=tuple(names), unit=unit)

    def slice(self, start: int, stop: int | None = None) -> "Trajectory":
        """Frames ``[start:stop]`` (for train/holdout splits in time)."""
        s = slice(start, stop)
        return self._with(time=self.time[s], keypoints=self.keypoints[s], valid=self.valid[s], steps=self.steps[s])

    def take(self, idx: np.ndarray) -> "Trajectory":
        """Copy with the frames ``idx`` (int indices, in that order)."""
        return self._with(time=self.time[idx], keypoints=self.keypoints[idx], valid=self.valid[idx],
                          steps=self.steps[idx])

    def to_dict(self) -> dict:
        """JSON-ready dict (NaN becomes None); ``kind``/``unit``/``frame`` only for non-image kinds,
        so image trajectories keep their historic file format."""
        kp = np.where(np.isfinite(self.keypoints), self.keypoints, np.nan)
        out = {"names": list(self.names), "source": self.source, "trial_id": self.trial_id,
               "time": self.time.tolist(), "steps": self.steps.tolist(),
               "keypoints": [[[None if np.isnan(v) else float(v) for v in p] for p in f] for f in kp],
               "valid": self.valid.tolist()}
        if self.kind != "image":
            out.update(kind=self.kind, unit=self.unit if isinstance(self.unit, str) else list(self.unit),
                       frame=self.frame)
        return out

    @classmethod
    def from_dict(cls, d: Mapping) -> "Trajectory":
        """Inverse of :meth:`to_dict` (``null`` keypoints become NaN; no ``kind`` = image px).

        Raises:
            TrajectoryError: naming the field and frame at fault (missing field, keypoints
                that are not (T, K, D) numbers or null, an unknown kind or unit).
        """
        if not isinstance(d, Mapping):
            raise TrajectoryError(f"trajectory must be a mapping, got {type(d).__name__}")
        missing = [k for k in ("time", "keypoints", "valid", "names") if k not in d]
        if missing:
            raise TrajectoryError(f"trajectory: missing field(s) {missing}")
        kind = d.get("kind", "image")
        if kind not in KINDS:
            raise TrajectoryError(f"trajectory: unknown 'kind' {kind!r}; expected one of {', '.join(KINDS)}")
        D = KINDS[kind][0]
        if not isinstance(d["keypoints"], list):
            raise TrajectoryError(f"trajectory: 'keypoints' must be a (T, K, {D}) list, got {type(d['keypoints']).__name__}")
        frames = []
        for t, f in enumerate(d["keypoints"]):
            try:
                frames.append([[np.nan if v is None else float(v) for v in p] for p in f])
            except (TypeError, ValueError):
                what = {"image": "[x, y] px pairs", "points": "[x, y, z] m triples", "joints": "[q] rad/m values"}[kind]
                raise TrajectoryError(f"trajectory: 'keypoints' frame {t} must be a list of {what} "
                                      f"(or null), got {str(f)[:60]}") from None
        try:
            kp = np.array(frames, dtype=float)
        except ValueError:
            raise TrajectoryError(f"trajectory: 'keypoints' frames differ in size; expected (T, K, {D})") from None
        valid = np.asarray(d["valid"], bool)
        if kp.size == 0:
            kp = kp.reshape(0, len(d["names"]), D)
            valid = valid.reshape(0, len(d["names"]))
        unit = d.get("unit")
        return cls(np.asarray(d["time"], float), kp, valid, tuple(d["names"]),
                   d.get("source", ""), d.get("trial_id", ""), np.asarray(d.get("steps", range(len(d["time"])))),
                   kind=kind, unit=tuple(unit) if isinstance(unit, list) else unit, frame=d.get("frame"))


def unit_label(units) -> str:
    """Printable unit of a set of measurements: ``"px"``, ``"m"``, ``"rad"``, or ``"rad|m"`` when mixed.

    Args:
        units: iterable of unit strings (per keypoint), or one string.
    """
    if isinstance(units, str):
        return units
    return "|".join(dict.fromkeys(units)) or "px"


def display_unit(unit: str) -> tuple[float, str]:
    """``(factor, label)`` to print a value in ``unit``: metres as mm (x1000), others unchanged."""
    return (1000.0, "mm") if unit == "m" else (1.0, unit)


def format_error(value: float, unit: str, digits: int = 3) -> str:
    """An error or distance as printed: ``"2.170 px"``, ``"1.234 mm"`` (metres shown in mm),
    ``"0.0123 rad"``, ``"1.500 sigma"``; ``"inf"``/``"nan"`` kept as words with the unit.

    Args:
        value: in ``unit`` (m for ``"m"``).
        unit: ``"px"``, ``"m"``, ``"rad"``, ``"rad|m"``, ``"sigma"`` or any other label.
        digits: decimals (px/mm/sigma); rad gets one more.
    """
    v = float(value)
    if unit == "m":
        return f"{v * 1000.0:.{digits}f} mm"
    if unit == "rad":  # noqa: SIM114 - one more decimal for radians
        return f"{v:.{digits + 1}f} rad"
    return f"{v:.{digits}f} {unit}"


def noise_levels(traj: Trajectory, noise: Mapping[str, float] | None = None) -> np.ndarray:
    """Measurement noise (1 sigma) per keypoint of ``traj``, shape (K,), in each keypoint's unit.

    ``traj.meta["noise"]`` (a number) wins, then ``noise[unit]``, then :data:`DEFAULT_NOISE`.

    Raises:
        TrajectoryError: a noise level that is not a number > 0 (names the unit).
    """
    table = dict(DEFAULT_NOISE)
    table.update(noise or {})
    own = traj.meta.get("noise") if isinstance(traj.meta, Mapping) else None
    out = []
    for u in traj.units:
        v = own if own is not None else table.get(u)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise TrajectoryError(f"noise level of unit {u!r} must be a number > 0, got {v!r}")
        out.append(float(v))
    return np.asarray(out)


def align(a: Trajectory, b: Trajectory, *, by: str = "step", tolerance_s: float = 1e-6) -> tuple[Trajectory, Trajectory]:
    """Pair two trajectories frame by frame.

    Args:
        a, b: trajectories of the same kind, unit and frame with the same keypoint names
            (b is reordered to a's order).
        by: ``"step"`` pairs frames with equal command step; ``"time"`` pairs frames
            whose times agree within ``tolerance_s``. Unpaired frames are dropped —
            never shifted.

    Returns:
        The two trajectories restricted to the paired frames, same length (``a`` and ``b``
        themselves, b in a's keypoint order, when every frame pairs with the frame of its index:
        equal, strictly increasing steps).

    Raises:
        TrajectoryError: if keypoint names, kinds, units or frames differ, or ``by`` is unknown.
    """
    if set(a.names) != set(b.names):
        raise TrajectoryError(f"keypoint names differ: {a.names} vs {b.names}")
    if a.kind != b.kind or a.frame != b.frame:
        raise TrajectoryError(f"cannot compare a {a.kind} trajectory (frame {a.frame!r}) with a {b.kind} one "
                              f"(frame {b.frame!r})")
    b = b.select(a.names) if b.names != a.names else b
    if a.units != b.units:
        raise TrajectoryError(f"units differ: {a.unit_label} vs {b.unit_label}")
    if by == "step":
        if np.array_equal(a.steps, b.steps) and bool(np.all(a.steps[1:] > a.steps[:-1])):
            return a, b  # every frame pairs with the frame of its index (what take() would copy)
        common, ia, ib = np.intersect1d(a.steps, b.steps, return_indices=True)
    elif by == "time":
        ia_list, ib_list = [], []
        j = 0
        for i, ti in enumerate(a.time):
            while j < b.num_frames and b.time[j] < ti - tolerance_s:
                j += 1
            if j < b.num_frames and abs(b.time[j] - ti) <= tolerance_s:
                ia_list.append(i)
                ib_list.append(j)
        ia, ib = np.array(ia_list, dtype=int), np.array(ib_list, dtype=int)
    else:
        raise TrajectoryError(f"align: by must be 'step' or 'time', got {by!r}")
    return a.take(ia), b.take(ib)


def residuals(a: Trajectory, b: Trajectory) -> tuple[np.ndarray, np.ndarray]:
    """Euclidean distance per paired sample, in the trajectories' unit.

    Returns:
        ``(dist, mask)``: dist shape (T, K) (px, m, or rad/m per joint; NaN where either
        side is invalid), mask shape (T, K) bool, True where both are valid. ``a`` and
        ``b`` must already be aligned (same T and names).

    Raises:
        TrajectoryError: on a shape or name mismatch.
    """
    if a.keypoints.shape != b.keypoints.shape or a.names != b.names:
        raise TrajectoryError(
            f"trajectories not aligned: shapes {a.keypoints.shape} vs {b.keypoints.shape}, names {a.names} vs {b.names}")
    mask = a.valid & b.valid
    d = np.linalg.norm(a.keypoints - b.keypoints, axis=2)
    d[~mask] = np.nan
    return d, mask


def per_keypoint_mae(a: Trajectory, b: Trajectory) -> dict[str, float]:
    """Mean Euclidean error per keypoint over samples valid in both, in each keypoint's unit.

    Returns:
        ``{name: MAE}``; NaN for a keypoint with no valid pair.
    """
    a, b = align(a, b)
    d, mask = residuals(a, b)
    out = {}
    for k, n in enumerate(a.names):
        out[n] = float(np.mean(d[mask[:, k], k])) if mask[:, k].any() else float("nan")
    return out


def mae(a: Trajectory, b: Trajectory) -> float:
    """Mean Euclidean error over all keypoints and samples valid in both, in the trajectories' unit.

    For image trajectories this is the paper's trajectory MAE (px). NaN if nothing overlaps.
    """
    a, b = align(a, b)
    d, mask = residuals(a, b)
    return float(np.mean(d[mask])) if mask.any() else float("nan")


def errors(a: Trajectory, b: Trajectory) -> tuple[float, dict[str, float]]:
    """``(mae(a, b), per_keypoint_mae(a, b))`` from one pairing of the frames and one set of residuals: the
    same values to the bit (each mean is the same sum, in the same order, over the same samples).

    Returns:
        ``(MAE, {name: MAE})`` in the trajectories' unit; NaN where nothing overlaps.
    """
    a, b = align(a, b)
    d, mask = residuals(a, b)
    if mask.all() and d.size:  # every sample: each keypoint's distances a contiguous row (numpy's pairwise sums)
        per = (np.add.reduce(np.ascontiguousarray(d.T), axis=1) / d.shape[0]).tolist()
        return float(np.add.reduce(d.ravel()) / d.size), dict(zip(a.names, per))
    out = {n: float(np.mean(d[mask[:, k], k])) if mask[:, k].any() else float("nan") for k, n in enumerate(a.names)}
    return (float(np.mean(d[mask])) if mask.any() else float("nan")), out


#: historic names (image trajectories, px); same functions, any kind
residuals_px = residuals
per_keypoint_mae_px = per_keypoint_mae
mae_px = mae
