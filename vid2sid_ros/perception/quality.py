"""What a trial's measurements lost, and whether a marker followed something else: ONE check for every source.

:func:`check_tracking` reads a measured :class:`~vid2sid_ros.core.trajectory.Trajectory`
(a tracked video clip, a sim2sim stand-in filmed through the rig's camera, a rosbag's camera
re-tracked or its joint states, motion capture, a joint-state CSV) and returns a
:class:`TrackingCheck`:

- the **tracked fraction** per keypoint (valid samples / samples), and why the others were
  lost when the tracker says so (``meta["blobs"]`` of the marker tracker: not found, at the
  image border, partly hidden; frames the camera dropped), with the lost frames as ranges;
  below ``min_fraction`` (rig config ``tracking.min_tracked_fraction``, default
  :data:`DEFAULT_MIN_TRACKED_FRACTION`) it is a warning;
- **jumps**: a step between consecutive valid samples larger than :data:`JUMP_FACTOR` times the
  keypoint's 90th-percentile step, the noise level (1 px / 1 mm / 0.005 rad) and the steps just
  before and after it (so a fast but smooth motion is not one), or a one-frame spike away from
  two neighbours that agree: another object was tracked for a while, or frames are missing;
- for colour markers, **a blob that is not the marker**: a marker is a small round blob whose
  size changes slowly, so a blob the fit uses (a valid sample) is flagged in frames where it is
  elongated beyond what its
  own motion can smear (``elongation`` above :data:`ELONGATION_LIMIT` with a streak longer than
  the distance the keypoint moved to its neighbour frames plus :data:`STREAK_MARGIN_PX`), and in
  frames where its area is more than :data:`AREA_FACTOR` times, or less than 1 / that, the
  keypoint's median area. A colour range that matches a limb (a long, large blob in every
  frame) or jumps between the marker and another object is named with its frames.

Every source calls :func:`check_tracking` on its whole recording (before any train/holdout
split); the warnings join the recording's, the :meth:`TrackingCheck.to_dict` summary goes into
the trial's metadata (``RealTrial.meta["tracking"][trial]``) and from there into
``result.json`` (``tracking``), the terminal summary and the report's insights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.trajectory import Trajectory, display_unit, noise_levels

__all__ = ["TrackingCheck", "check_tracking", "check_trials", "frame_ranges", "min_tracked_fraction", "DEFAULT_MIN_TRACKED_FRACTION",
           "JUMP_FACTOR", "ELONGATION_LIMIT", "STREAK_MARGIN_PX", "AREA_FACTOR", "LOST_DROPPED"]

#: a keypoint valid in fewer than this fraction of its trial's frames is warned about
DEFAULT_MIN_TRACKED_FRACTION = 0.9
#: a step larger than this many times the keypoint's 90th-percentile step is a jump
JUMP_FACTOR = 4.0
#: a marker blob more elongated than this (sqrt of the second-moment eigenvalue ratio) is suspect
ELONGATION_LIMIT = 2.0
#: motion blur explains a streak up to the keypoint's displacement to its neighbour frames plus this, px
STREAK_MARGIN_PX = 2.0
#: a blob area beyond this factor of the keypoint's median area (either way) is suspect
AREA_FACTOR = 3.0
#: why a sample is invalid when the camera dropped its frame
LOST_DROPPED = "frame dropped"


def frame_ranges(frames: Sequence[int] | np.ndarray, limit: int = 6) -> str:
    """``"3-10, 15, 40-41"``: sorted frame indices as ranges (at most ``limit``, then ``"+N more"``)."""
    idx = sorted({int(i) for i in frames})
    runs: list[tuple[int, int]] = []
    for i in idx:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    if len(runs) > limit:
        text.append(f"+{len(runs) - limit} more range(s)")
    return ", ".join(text)


def min_tracked_fraction(config: Mapping[str, Any] | None, where: str = "rig config") -> float:
    """The rig config's ``tracking.min_tracked_fraction`` (default :data:`DEFAULT_MIN_TRACKED_FRACTION`).

    Raises:
        ValueError: ``WHERE:tracking.min_tracked_fraction: expected a number in [0, 1], got ...``.
    """
    block = (config or {}).get("tracking") or {}
    v = block.get("min_tracked_fraction", DEFAULT_MIN_TRACKED_FRACTION) if isinstance(block, Mapping) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= float(v) <= 1.0):
        raise ValueError(f"{where}:tracking.min_tracked_fraction: expected a number in [0, 1] (fraction of "
                         f"frames), got {v!r}")
    return float(v)


@dataclass
class TrackingCheck:
    """The result of :func:`check_tracking` for one trial.

    Attributes:
        trial: trial id. frames: samples (T).
        tracked: keypoint -> valid fraction in [0, 1].
        lost: keypoint -> {reason: samples} (reasons the tracker knows; ``"lost"`` otherwise).
        suspect: keypoint -> list of ``{"what": ..., "frames": [...]}`` (jumps, blobs unlike a marker).
        min_fraction: the threshold used.
        warnings: one line each, naming the keypoint, what is off and the frame ranges.
    """

    trial: str
    frames: int
    tracked: dict[str, float]
    lost: dict[str, dict[str, int]]
    min_fraction: float
    suspect: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{frames, min_tracked_fraction, tracked, lost, suspect, warnings}``."""
        return {"frames": self.frames, "min_tracked_fraction": self.min_fraction,
                "tracked": {k: float(v) for k, v in self.tracked.items()},
                "lost": {k: dict(v) for k, v in self.lost.items()},
                "suspect": {k: [dict(s) for s in v] for k, v in self.suspect.items() if v},
                "warnings": list(self.warnings)}


def _reasons(traj: Trajectory, k: int, status: Sequence[str] | None, dropped: np.ndarray) -> dict[str, int]:
    bad = ~np.asarray(traj.valid[:, k])
    out: dict[str, int] = {}
    for t in np.flatnonzero(bad):
        why = (LOST_DROPPED if dropped[t] else
               (status[t] or "marked invalid after tracking") if status is not None and t < len(status) else "lost")
        out[why] = out.get(why, 0) + 1
    return out


def _jumps(traj: Trajectory, k: int, floor: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Samples the keypoint jumped to: ``(frames, jump sizes, 90th-percentile step)`` (see the module doc).

    A step (per frame, between consecutive valid samples) is a jump when it exceeds
    :data:`JUMP_FACTOR` times the largest of the noise floor, the 90th-percentile step and the
    steps on either side of it (fast but smooth motion, e.g. a step response, keeps its speed
    from one frame to the next; a hop to another object does not); a single sample is a jump
    (a one-frame spike) when it lies that far from both neighbours while they agree.
    """
    idx = np.flatnonzero(traj.valid[:, k])
    if idx.size < 12:
        return np.zeros(0, int), np.zeros(0), float("nan")
    pts = traj.keypoints[idx, k]
    gaps = np.diff(idx)
    step = np.linalg.norm(np.diff(pts, axis=0), axis=1) / gaps  # per frame across a gap
    typical = float(np.percentile(step, 90))
    base = max(typical, floor)
    side = np.maximum(np.r_[0.0, step[:-1]], np.r_[step[1:], 0.0])
    hop = step > JUMP_FACTOR * np.maximum(base, side)
    # a one-frame spike: sample j + 1 far from samples j and j + 2, which agree
    across = np.linalg.norm(pts[2:] - pts[:-2], axis=1) / (gaps[:-1] + gaps[1:])
    spike = np.minimum(step[:-1], step[1:]) > JUMP_FACTOR * np.maximum(base, across)
    hit = hop | np.r_[spike, False]
    size = np.where(np.r_[spike, False], np.maximum(step, np.r_[step[1:], 0.0]), step) * gaps
    return idx[1:][hit], size[hit], typical


def _blob_suspects(traj: Trajectory, k: int, blobs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Frames where the marker's blob does not look like the marker (see the module doc)."""
    area = np.asarray(blobs.get("area", []), float)
    elong = np.asarray(blobs.get("elongation", []), float)
    T = traj.num_frames
    if area.shape[0] != T or elong.shape[0] != T:
        return []
    out = []
    # the samples the fit uses: a blob cut by the border or judged partly hidden is already left out
    found = np.isfinite(area) & (area > 0) & np.asarray(traj.valid[:, k])
    if found.sum() < 3:
        return out
    # motion a blob may be smeared by: the keypoint's distance to its neighbours (nearest valid rows)
    pos = np.asarray(traj.keypoints[:, k], float)
    move = np.zeros(T)
    for t in range(T):
        d = [np.linalg.norm(pos[t] - pos[u]) for u in (t - 1, t + 1)
             if 0 <= u < T and np.all(np.isfinite(pos[u])) and np.all(np.isfinite(pos[t]))]
        move[t] = max(d) if d else np.inf  # unknown motion: never call it a streak
    with np.errstate(invalid="ignore", divide="ignore"):
        major = 2.0 * np.sqrt(area * elong / math.pi)
        minor = 2.0 * np.sqrt(area / (math.pi * elong))
        streak = major - minor
    long_ = found & (elong > ELONGATION_LIMIT) & (streak > move + STREAK_MARGIN_PX)
    if long_.any():
        f = np.flatnonzero(long_)
        out.append({"what": f"an elongated blob (elongation {float(np.median(elong[f])):.1f}, "
                            f"{float(np.median(major[f])):.0f} px long; a marker is round, and its motion smears it "
                            f"by at most {float(np.median(np.where(np.isfinite(move[f]), move[f], 0))):.1f} px there)",
                    "frames": f.tolist()})
    med = float(np.median(area[found]))
    odd = found & ((area > AREA_FACTOR * med) | (area < med / AREA_FACTOR))
    if odd.any():
        f = np.flatnonzero(odd)
        out.append({"what": f"a blob of {float(np.median(area[f])):.0f} px² where the marker's median is {med:.0f} px² "
                            f"(beyond x{AREA_FACTOR:g} either way)", "frames": f.tolist()})
    return out


def check_tracking(traj: Trajectory, *, min_fraction: float = DEFAULT_MIN_TRACKED_FRACTION,
                   dropped: Sequence[bool] | np.ndarray | None = None, what: str | None = None) -> TrackingCheck:
    """Tracked fraction per keypoint, jumps and blobs unlike a marker (module doc) of one trial.

    Args:
        traj: the trial's whole recording (T frames, K keypoints); ``meta["blobs"]`` (the marker
            tracker's :meth:`~vid2sid_ros.perception.markers.MarkerTracker.frame_log`) adds the
            reasons and the blob checks.
        min_fraction: warn below this valid fraction, in [0, 1].
        dropped: (T,) bool, frames the camera dropped (default ``meta["dropped"]`` if present).
        what: the word for a keypoint in messages (default by kind: marker / point / joint).

    Returns:
        TrackingCheck (warnings name keypoint, what is off and the frames).

    Raises:
        ValueError: ``min_fraction`` outside [0, 1] or ``dropped`` of the wrong length.
    """
    if not 0.0 <= float(min_fraction) <= 1.0:
        raise ValueError(f"min_fraction must be in [0, 1], got {min_fraction!r}")
    T = traj.num_frames
    meta = traj.meta if isinstance(traj.meta, Mapping) else {}
    drop = np.zeros(T, bool) if dropped is None and meta.get("dropped") is None else \
        np.asarray(meta.get("dropped") if dropped is None else dropped, bool).ravel()
    if drop.shape[0] != T:
        raise ValueError(f"dropped has {drop.shape[0]} entries for {T} frames")
    word = what or {"image": "marker", "points": "point", "joints": "joint"}.get(traj.kind, "keypoint")
    blobs = meta.get("blobs") if isinstance(meta.get("blobs"), Mapping) else {}
    floors = noise_levels(traj) if T else np.ones(traj.num_keypoints)
    chk = TrackingCheck(traj.trial_id, T, {}, {}, float(min_fraction))
    for k, name in enumerate(traj.names):
        valid = np.asarray(traj.valid[:, k])
        frac = float(valid.mean()) if T else 0.0
        chk.tracked[name] = frac
        log = blobs.get(name) if isinstance(blobs.get(name), Mapping) else None
        chk.lost[name] = _reasons(traj, k, log.get("status") if log else None, drop)
        if frac < min_fraction:
            known = {r: n for r, n in chk.lost[name].items() if r != "lost"}
            why = (" (" + ", ".join(f"{n} {r}" for r, n in sorted(chk.lost[name].items(), key=lambda x: -x[1]))
                   + ")") if known else ""
            verb = "tracked" if traj.kind == "image" else "measured"
            pct = f"{100 * frac:.0f}" if f"{100 * frac:.0f}" != f"{100 * min_fraction:.0f}" else f"{100 * frac:.1f}"
            chk.warnings.append(f"{word} '{name}' {verb} in {pct} % of {T} frames (below "
                                f"{100 * min_fraction:.0f} %): {int((~valid).sum())} lost{why} in frames "
                                f"{frame_ranges(np.flatnonzero(~valid))}; those samples are excluded from every error")
        sus: list[dict[str, Any]] = []
        jf, js, typical = _jumps(traj, k, float(floors[k]))
        if jf.size:
            f, lab = display_unit(traj.units[k])
            sus.append({"what": f"jumps of up to {f * float(js.max()):.3g} {lab} between consecutive samples (90th "
                                f"percentile step {f * typical:.3g} {lab})", "frames": jf.tolist()})
        if log:
            sus.extend(_blob_suspects(traj, k, log))
        if sus:
            chk.suspect[name] = sus
            for s in sus:
                hint = ("the colour range may match another object (check its hsv_lower/hsv_upper)" if word == "marker"
                        else "another object was tracked")
                if s["what"].startswith("jumps"):
                    hint += ", or frames may be missing from the recording"
                chk.warnings.append(f"{word} '{name}': {s['what']} in frames {frame_ranges(s['frames'])}: {hint}")
    return chk


def check_trials(trajectories: Sequence[Trajectory], *, min_fraction: float = DEFAULT_MIN_TRACKED_FRACTION
                 ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """:func:`check_tracking` of several whole trials (a bag's): ``({trial_id: summary}, warnings)``, each
    warning prefixed ``trial 'ID': ``. A trajectory whose ``meta["tracking"]`` is already set keeps it.

    Raises:
        ValueError: ``min_fraction`` outside [0, 1].
    """
    summary: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    for traj in trajectories:
        key = traj.trial_id if traj.trial_id not in summary else f"{traj.trial_id} ({traj.kind})"
        done = (traj.meta or {}).get("tracking") if isinstance(traj.meta, Mapping) else None
        if isinstance(done, Mapping):
            summary[key] = dict(done)
            warnings += [f"trial '{key}': {w}" for w in done.get("warnings", [])]
            continue
        chk = check_tracking(traj, min_fraction=min_fraction)
        summary[key] = chk.to_dict()
        warnings += [f"trial '{key}': {w}" for w in chk.warnings]
    return summary, warnings
