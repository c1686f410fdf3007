"""Keypoint trajectories in image space and the paper's pixel metrics.

A :class:`Trajectory` is what the perception layer hands to the calibrator: for each
of T frames, K named keypoints ``(x, y)`` in pixels (x = column, y = row; integer coordinates
are pixel centres, so (0, 0) is the centre of the top-left pixel, as in OpenCV) and a validity flag. Invalid samples hold NaN and
are excluded from every metric — a lost marker is never replaced by an invented value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

__all__ = ["Trajectory", "TrajectoryError", "align", "mae_px", "per_keypoint_mae_px", "residuals_px"]


class TrajectoryError(ValueError):
    """Shapes or names of a trajectory (or a pair) do not fit."""


@dataclass(frozen=True)
class Trajectory:
    """Keypoints of one trial.

    Attributes:
        time: frame times in s, shape (T,), non-decreasing (step k at k / rate).
        keypoints: pixel positions, shape (T, K, 2), ``[..., 0]`` = x (column),
            ``[..., 1]`` = y (row). NaN where invalid.
        valid: shape (T, K) bool; False when the keypoint was lost, out of frame or
            the frame was dropped.
        names: K keypoint names.
        source: ``"real"`` or ``"sim"`` (free text allowed).
        trial_id: the excitation/trial this belongs to.
        steps: command step index per frame, shape (T,), int; defaults to 0..T-1.
        meta: free-form extras (e.g. dropped frame count).

    Raises:
        TrajectoryError: on inconsistent shapes.
    """

    time: np.ndarray
    keypoints: np.ndarray
    valid: np.ndarray
    names: tuple[str, ...]
    source: str = ""
    trial_id: str = ""
    steps: np.ndarray | None = None
    meta: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        t = np.asarray(self.time, dtype=float).ravel()
        kp = np.asarray(self.keypoints, dtype=float)
        if kp.ndim != 3 or kp.shape[2] != 2:
            raise TrajectoryError(f"keypoints must have shape (T, K, 2), got {kp.shape}")
        T, K = kp.shape[:2]
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

    @property
    def num_frames(self) -> int:
        return int(self.keypoints.shape[0])

    @property
    def num_keypoints(self) -> int:
        return int(self.keypoints.shape[1])

    def keypoint(self, name: str) -> np.ndarray:
        """Positions of one keypoint, shape (T, 2), px (NaN where invalid).

        Raises:
            KeyError: listing the valid names.
        """
        if name not in self.names:
            raise KeyError(f"unknown keypoint '{name}'; valid: {', '.join(self.names)}")
        return self.keypoints[:, self.names.index(name)]

    def select(self, names: Sequence[str]) -> "Trajectory":
        """Copy with only the named keypoints (in the given order)."""
        idx = [self.names.index(n) for n in names]
        return Trajectory(self.time, self.keypoints[:, idx], self.valid[:, idx], tuple(names),
                          self.source, self.trial_id, self.steps, self.meta)

    def slice(self, start: int, stop: int | None = None) -> "Trajectory":
        """Frames ``[start:stop]`` (for train/holdout splits in time)."""
        s = slice(start, stop)
        return Trajectory(self.time[s], self.keypoints[s], self.valid[s], self.names, self.source,
                          self.trial_id, self.steps[s], self.meta)

    def to_dict(self) -> dict:
        """JSON-ready dict (NaN becomes None)."""
        kp = np.where(np.isfinite(self.keypoints), self.keypoints, np.nan)
        return {"names": list(self.names), "source": self.source, "trial_id": self.trial_id,
                "time": self.time.tolist(), "steps": self.steps.tolist(),
                "keypoints": [[[None if np.isnan(v) else float(v) for v in p] for p in f] for f in kp],
                "valid": self.valid.tolist()}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Trajectory":
        """Inverse of :meth:`to_dict` (``null`` keypoints become NaN).

        Raises:
            TrajectoryError: naming the field and frame at fault (missing field, keypoints
                that are not (T, K, 2) numbers or null).
        """
        if not isinstance(d, Mapping):
            raise TrajectoryError(f"trajectory must be a mapping, got {type(d).__name__}")
        missing = [k for k in ("time", "keypoints", "valid", "names") if k not in d]
        if missing:
            raise TrajectoryError(f"trajectory: missing field(s) {missing}")
        if not isinstance(d["keypoints"], list):
            raise TrajectoryError(f"trajectory: 'keypoints' must be a (T, K, 2) list, got {type(d['keypoints']).__name__}")
        frames = []
        for t, f in enumerate(d["keypoints"]):
            try:
                frames.append([[np.nan if v is None else float(v) for v in p] for p in f])
            except (TypeError, ValueError):
                raise TrajectoryError(f"trajectory: 'keypoints' frame {t} must be a list of [x, y] px pairs "
                                      f"(or null), got {str(f)[:60]}") from None
        try:
            kp = np.array(frames, dtype=float)
        except ValueError:
            raise TrajectoryError("trajectory: 'keypoints' frames differ in size; expected (T, K, 2)") from None
        valid = np.asarray(d["valid"], bool)
        if kp.size == 0:
            kp = kp.reshape(0, len(d["names"]), 2)
            valid = valid.reshape(0, len(d["names"]))
        return cls(np.asarray(d["time"], float), kp, valid, tuple(d["names"]),
                   d.get("source", ""), d.get("trial_id", ""), np.asarray(d.get("steps", range(len(d["time"])))))


def align(a: Trajectory, b: Trajectory, *, by: str = "step", tolerance_s: float = 1e-6) -> tuple[Trajectory, Trajectory]:
    """Pair two trajectories frame by frame.

    Args:
        a, b: trajectories with the same keypoint names (b is reordered to a's order).
        by: ``"step"`` pairs frames with equal command step; ``"time"`` pairs frames
            whose times agree within ``tolerance_s``. Unpaired frames are dropped —
            never shifted.

    Returns:
        The two trajectories restricted to the paired frames, same length.

    Raises:
        TrajectoryError: if keypoint names differ or ``by`` is unknown.
    """
    if set(a.names) != set(b.names):
        raise TrajectoryError(f"keypoint names differ: {a.names} vs {b.names}")
    b = b.select(a.names) if b.names != a.names else b
    if by == "step":
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

    def take(t: Trajectory, idx: np.ndarray) -> Trajectory:
        return Trajectory(t.time[idx], t.keypoints[idx], t.valid[idx], t.names, t.source, t.trial_id,
                          t.steps[idx], t.meta)

    return take(a, ia), take(b, ib)


def residuals_px(a: Trajectory, b: Trajectory) -> tuple[np.ndarray, np.ndarray]:
    """Euclidean pixel distance per paired sample.

    Returns:
        ``(dist, mask)``: dist shape (T, K) px (NaN where either side is invalid),
        mask shape (T, K) bool, True where both are valid. ``a`` and ``b`` must
        already be aligned (same T and names).

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


def per_keypoint_mae_px(a: Trajectory, b: Trajectory) -> dict[str, float]:
    """Mean Euclidean pixel error per keypoint over samples valid in both.

    Returns:
        ``{name: MAE px}``; NaN for a keypoint with no valid pair.
    """
    a, b = align(a, b)
    d, mask = residuals_px(a, b)
    out = {}
    for k, n in enumerate(a.names):
        out[n] = float(np.mean(d[mask[:, k], k])) if mask[:, k].any() else float("nan")
    return out


def mae_px(a: Trajectory, b: Trajectory) -> float:
    """Mean Euclidean pixel error over all keypoints and samples valid in both.

    This is the paper's trajectory MAE (px). NaN if nothing overlaps.
    """
    a, b = align(a, b)
    d, mask = residuals_px(a, b)
    return float(np.mean(d[mask])) if mask.any() else float("nan")
