"""Frame timing of phone clips: find single dropped and repeated frames from the motion.

See :func:`repair_frame_timing`.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.trajectory import Trajectory

__all__ = ["repair_frame_timing", "slots_from_times"]


#: frames on each side of a suspected drop in its local fit, and the fit's polynomial degree
DROP_FIT_HALF_WINDOW, DROP_FIT_DEGREE = 4, 3
#: a drop is accepted when the one-slot shift leaves at most this fraction of the unshifted fit's residual
DROP_FIT_GAIN = 0.5


def slots_from_times(times: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Time slots of unevenly spaced frames (a variable-frame-rate clip) at the clip's nominal rate.

    The nominal rate is the rate of the median frame interval, ``1 / median(diff(times))`` Hz (the
    average over the clip, what OpenCV reports as the container's rate, mixes the fast and slow
    stretches and fits neither). Frame ``k`` gets slot ``s_k = round(t_k * rate)``, the
    command/sample step of the twin closest to its own time, so a frame at ``t`` is paired with
    the twin's sample at ``s_k / rate`` (``|t - s_k / rate| <= 0.5 / rate``). Slots with no frame
    are simply not observed (as a dropped frame, :func:`repair_frame_timing`); when two frames fall
    in one slot (intervals shorter than the nominal one) only the first is kept, as a slot is
    never observed twice.

    Args:
        times: (T,) frame times, s, strictly increasing, the first at 0 (the container's
            presentation timestamps, :func:`vid2sid_ros.io.video.frame_times`).

    Returns:
        ``(steps (T',) int, keep (T,) bool, rate Hz, worst |t - s / rate| s)``; ``keep`` marks the
        frames given a slot of their own, ``steps`` their slots.

    Raises:
        ValueError: fewer than 2 times, or times not finite and strictly increasing.
    """
    t = np.asarray(times, float).ravel()
    if t.size < 2 or not np.all(np.isfinite(t)) or not np.all(np.diff(t) > 0):
        raise ValueError("frame times: expected at least 2 finite, strictly increasing times (s)")
    rate = 1.0 / float(np.median(np.diff(t)))
    slots = np.rint((t - t[0]) * rate).astype(int)
    keep = np.r_[True, np.diff(slots) > 0]
    err = float(np.max(np.abs(t[keep] - t[0] - slots[keep] / rate)))
    return slots[keep], keep, rate, err


def _drop_fits_better(mean: np.ndarray, k: int) -> bool:
    """Does "one frame lost before frame ``k``" explain the motion around ``k`` better than none?

    The ratio test alone misreads fast smooth motion: for a sinusoid of period ``P`` frames the
    second-neighbour prediction is ``cos(4 pi / P)`` times the true step, so a 2-2.5 Hz swing
    filmed at 30 fps (``P`` = 12-15) "moves 1.6-2.5x the expected" at every fast frame. Here the
    mean keypoint ``mean`` (T, 2) px over frames ``k - 4 .. k + 3`` is fitted with a cubic in the
    time slot twice, with slots = frame indices and with the frames from ``k`` on one slot later;
    the drop is accepted when the shifted fit's squared residual is at most
    :data:`DROP_FIT_GAIN` of the unshifted one. Invalid frames are left out of the fit; fewer
    than 3 valid frames on either side (the clip's ends) cannot be judged: no drop.

    Args:
        mean: (T, 2) px, the mean keypoint per frame (NaN = invalid).
        k: the frame after the suspected gap.
    """
    lo, hi = max(0, k - DROP_FIT_HALF_WINDOW), min(mean.shape[0], k + DROP_FIT_HALF_WINDOW)
    idx = np.arange(lo, hi)
    idx = idx[np.all(np.isfinite(mean[idx]), axis=1)]
    if np.sum(idx < k) < 3 or np.sum(idx >= k) < 3:  # cannot be told apart from curvature: not a drop
        return False
    frames = idx.astype(float)
    y = mean[idx] - mean[idx].mean(axis=0)

    def ssr(slots: np.ndarray) -> float:
        x = slots - slots.mean()
        basis = np.vander(x, DROP_FIT_DEGREE + 1)
        coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
        return float(np.sum((basis @ coef - y) ** 2))

    return ssr(frames + (frames >= k)) <= DROP_FIT_GAIN * ssr(frames)


def repair_frame_timing(trajectory: Trajectory, fps: float, *, min_speed_px: float = 4.0,
                        drop_ratio: tuple[float, float] = (1.6, 2.5), duplicate_ratio: float = 0.3
                        ) -> tuple[Trajectory, list[str]]:
    """Find single dropped and repeated frames from the motion and re-time the clip.

    Phone cameras sometimes drop a frame or repeat one while the container still
    stamps a constant frame rate, so frame ``k`` is not always at ``k / fps``. Where the
    keypoints move fast, such a glitch is unmistakable: the displacement between two
    frames is about twice (dropped frame) or about zero times (repeated frame) what its
    second neighbours predict, ``v_pred = (v[k-2] + v[k+2]) / 2`` (``v`` = per-frame
    displacement of the mean keypoint, px/frame; first neighbours would be polluted by
    the glitch itself). Two passes: steps that look abnormal in the first are skipped
    when predicting their neighbours in the second (the next unflagged step further out is
    used). Only steps with ``|v_pred| >= min_speed_px`` are judged. A repeat is a step shorter
    than ``duplicate_ratio * |v_pred|`` (the frame did not move; a step against the prediction
    is not one); a drop must also be confirmed by a local cubic fit of the motion with and
    without the one-slot shift (:func:`_drop_fits_better`), else fast smooth motion (a 2-2.5 Hz
    swing at 30 fps) reads as a string of drops that never happened.

    * dropped frame before frame ``k``: frames ``k, k+1, ...`` move one time slot later;
    * repeated frame ``k`` (a copy of ``k-1``): frame ``k`` becomes invalid (it carries no
      new observation) and, when the next step is a normal single step, the frames after it
      move one slot earlier (the copy took the slot of a real frame).

    The result has ``steps`` = time slots (command steps) and ``time = steps / fps``; the
    calibration pairs sim and real by slot, so the twin is compared at the true times.

    Args:
        trajectory: tracked clip, frame k at step k.
        fps: nominal frame rate, Hz.
        min_speed_px: slowest predicted motion judged, px/frame.
        drop_ratio: displacement ratio range read as one dropped frame.
        duplicate_ratio: ratio below which a frame is read as a repeat.

    Returns:
        ``(retimed trajectory, notes)``; ``meta["frame_index"]`` of the retimed trajectory
        gives each row's original frame index. The trajectory is returned unchanged (same
        object) when nothing is found.
    """
    kp = np.asarray(trajectory.keypoints, float)
    mean = kp.mean(axis=1)  # NaN where any keypoint is invalid
    v = np.diff(mean, axis=0)  # v[i] = displacement from frame i to i+1
    T = kp.shape[0]
    shift = np.zeros(T, int)
    invalid = np.zeros(T, bool)
    notes: list[str] = []
    r0, _, _ = _step_ratios(v, np.zeros(len(v), bool), min_speed_px)
    suspect = np.isfinite(r0) & ((r0 < 0.6) | (r0 > 1.4))
    r, pr, spd = _step_ratios(v, suspect, min_speed_px)  # second pass: glitches do not pollute their neighbours
    skip_next = False
    for i in range(len(v)):
        if skip_next or not np.isfinite(r[i]):
            skip_next = False
            continue
        k = i + 1  # the frame after the step
        if drop_ratio[0] <= r[i] <= drop_ratio[1] and _drop_fits_better(mean, k):
            shift[k:] += 1
            notes.append(f"frame {k}: moved {r[i]:.2f}x the expected {spd[i]:.1f} px: one frame dropped before it")
        elif float(np.hypot(*v[i])) < duplicate_ratio * spd[i]:  # it (nearly) did not move: a copy
            invalid[k] = True
            nxt = float(v[i + 1] @ pr[i]) / spd[i] ** 2 if i + 1 < len(v) and np.all(np.isfinite(v[i + 1])) else math.nan
            if math.isfinite(nxt) and nxt < drop_ratio[0]:
                shift[k + 1:] -= 1
                notes.append(f"frame {k}: repeats frame {k - 1} (moved {r[i]:.2f}x the expected {spd[i]:.1f} px); "
                             "later frames move one slot earlier")
            else:  # the copy sat in a lost frame's slot: the (double) step after it is not a drop
                skip_next = True
                notes.append(f"frame {k}: repeats frame {k - 1} in place of a lost frame; marked invalid")
    if not notes:
        return trajectory, notes
    steps = np.asarray(trajectory.steps) + shift
    keep = np.ones(T, bool)
    keep[1:] = np.diff(steps) > 0  # a slot is never observed twice
    keep &= ~invalid | np.r_[True, np.diff(steps) > 0]
    new_valid = trajectory.valid.copy()
    new_valid[invalid] = False
    steps, kpk, vk = steps[keep], kp[keep], new_valid[keep]
    out = Trajectory(steps / float(fps), kpk, vk, trajectory.names, trajectory.source, trajectory.trial_id, steps,
                     {**dict(trajectory.meta), "retimed": notes, "frame_index": np.flatnonzero(keep)})
    return out, notes


def _step_ratios(v: np.ndarray, flagged: np.ndarray,
                 min_speed_px: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step of ``v`` (T-1, 2) px/frame: (displacement / prediction, prediction (T-1, 2) px, its speed px/frame).

    The prediction averages the nearest unflagged finite steps at distance >= 2 on each side;
    ratios are NaN where there is no prediction or it is slower than ``min_speed_px``.
    """
    r = np.full(len(v), np.nan)
    pr = np.full((len(v), 2), np.nan)
    spd = np.zeros(len(v))
    for i in range(len(v)):
        side = []
        for direction in (-1, 1):
            for dist in range(2, 6):
                j = i + direction * dist
                if 0 <= j < len(v) and not flagged[j] and np.all(np.isfinite(v[j])):
                    side.append(v[j])
                    break
        if len(side) < 2 or not np.all(np.isfinite(v[i])):
            continue
        pred = 0.5 * (side[0] + side[1])
        spd[i] = float(np.hypot(*pred))
        if spd[i] >= min_speed_px:
            pr[i] = pred
            r[i] = float(v[i] @ pred) / spd[i] ** 2
    return r, pr, spd

