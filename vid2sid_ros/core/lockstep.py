"""Pairing camera frames with excitation command steps (the lockstep convention).

The same commanded excitation drives the real rig and the twin; each command step must
yield exactly one real frame and one sim frame, paired *by step*. This module holds the
one pairing rule, used by the ROS tracker node and by the rosbag loader alike:

* Command step ``k`` of a trial is stamped ``t_k`` (the ``ExcitationCommand`` header stamp)
  and lasts one command period ``p``.
* The frame of step ``k`` is the one *captured at the end of its period*, ``t_k + p``
  (matching :class:`~vid2sid_ros.sim.base.RolloutResult`: "step k sampled at the end of
  command period k"). The sim twin stamps its frame of step ``k`` with exactly
  ``t_k + p``; a camera stamps the capture time, which lands near it.
* A frame belongs to the step whose target time ``t_k + p`` is nearest to its stamp, if
  within ``p / 2``; otherwise it is *unmatched* (before the trial, after it, or between
  steps because of a clock problem).
* When two frames fall on one step the nearer one is kept and the other counted as a
  *duplicate*; a step that got no frame is *dropped*; a kept frame received more than
  ``late_tolerance_s`` after its target time is *late* (it is still used: frames are
  paired by stamp and never shifted to a neighbouring step).

Everything here is plain numpy: no rclpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .trajectory import Trajectory

__all__ = ["LockstepError", "FrameRecord", "LockstepStream", "assign_steps"]


class LockstepError(ValueError):
    """Inconsistent lockstep input (bad period, keypoint count, ...)."""


def assign_steps(frame_stamps: Sequence[float], command_stamps: Sequence[float], period: float) -> np.ndarray:
    """Step index of each frame by the lockstep rule (module docstring).

    Args:
        frame_stamps: capture time of each frame, shape (F,), s.
        command_stamps: stamp ``t_k`` of each command step k = 0..T-1, shape (T,), s,
            non-decreasing.
        period: command period ``p``, s, > 0.

    Returns:
        int array, shape (F,): the step of each frame, or -1 when unmatched.

    Raises:
        LockstepError: if ``period`` is not positive and finite.
    """
    if not (np.isfinite(period) and period > 0):
        raise LockstepError(f"command period must be a positive number of seconds, got {period!r}")
    f = np.asarray(frame_stamps, dtype=float).ravel()
    c = np.asarray(command_stamps, dtype=float).ravel()
    out = np.full(f.shape, -1, dtype=int)
    if c.size == 0 or f.size == 0:
        return out
    target = c + period
    order = np.argsort(target, kind="stable")
    ts = target[order]
    idx = np.clip(np.searchsorted(ts, f), 1, len(ts) - 1) if len(ts) > 1 else np.zeros(f.shape, dtype=int)
    if len(ts) > 1:
        left = ts[idx - 1]
        right = ts[idx]
        idx = np.where(np.abs(f - left) <= np.abs(f - right), idx - 1, idx)
    near = order[idx]
    ok = np.abs(f - target[near]) <= period / 2 + 1e-9
    out[ok] = near[ok]
    return out


@dataclass
class FrameRecord:
    """One tracked frame of a stream.

    Attributes:
        stamp: capture time, s (header stamp).
        keypoints: (K, 2) px, NaN where invalid.
        valid: (K,) bool.
        received: wall time the frame reached the tracker, s (same clock as ``stamp``);
            None when unknown (offline loading), which never counts as late.
    """

    stamp: float
    keypoints: np.ndarray
    valid: np.ndarray
    received: float | None = None


@dataclass
class LockstepStream:
    """Frames of one stream (``real`` or ``sim``) of one trial, paired with its command steps.

    Commands and frames may arrive in any order; :meth:`trajectory` applies the pairing
    rule to everything seen so far.

    Attributes:
        trial_id: the trial.
        source: ``"real"`` or ``"sim"``.
        keypoint_names: K names.
        period: command period, s.
        late_tolerance_s: a frame received later than ``target + late_tolerance_s`` is
            late; default (None) = one period.
    """

    trial_id: str
    source: str
    keypoint_names: tuple[str, ...]
    period: float
    late_tolerance_s: float | None = None
    commands: dict[int, float] = field(default_factory=dict)
    frames: list[FrameRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not (np.isfinite(self.period) and self.period > 0):
            raise LockstepError(f"trial {self.trial_id!r}: command period must be > 0 s, got {self.period!r}")
        self.keypoint_names = tuple(self.keypoint_names)

    def add_command(self, step: int, stamp: float) -> None:
        """Record the stamp ``t_k`` (s) of command step ``k``."""
        self.commands[int(step)] = float(stamp)

    def step_of(self, stamp: float) -> int:
        """Step the frame stamped ``stamp`` belongs to with the commands seen so far, -1 if none.

        Before step ``k``'s command arrives, its target is extrapolated from the nearest
        known command (``t_j + (k - j) p``), so a frame can be labelled as it arrives.
        """
        if not self.commands:
            return -1
        steps = np.array(sorted(self.commands))
        stamps = np.array([self.commands[s] for s in steps])
        k = int(assign_steps([stamp], stamps, self.period)[0])
        if k >= 0:
            return int(steps[k])
        # extrapolate from the last known command (frames of steps whose command is in flight)
        j = int(steps[-1])
        k_est = j + int(round((stamp - self.period - stamps[-1]) / self.period))
        return k_est if k_est > j else -1

    def add_frame(self, stamp: float, keypoints: np.ndarray, valid: np.ndarray,
                  received: float | None = None) -> int:
        """Store a tracked frame; returns its provisional step (see :meth:`step_of`).

        Raises:
            LockstepError: if the keypoint array is not (K, 2) / valid not (K,).
        """
        kp = np.asarray(keypoints, dtype=float)
        v = np.asarray(valid, dtype=bool)
        K = len(self.keypoint_names)
        if kp.shape != (K, 2) or v.shape != (K,):
            raise LockstepError(f"{self.source} frame of trial {self.trial_id!r}: expected keypoints (K={K}, 2) and "
                                f"valid ({K},), got {kp.shape} and {v.shape}")
        self.frames.append(FrameRecord(float(stamp), kp, v, received))
        return self.step_of(stamp)

    @property
    def num_steps(self) -> int:
        """T: commands seen (steps 0..max)."""
        return (max(self.commands) + 1) if self.commands else 0

    def trajectory(self, num_steps: int | None = None) -> Trajectory:
        """Pair frames with steps and build the trial's trajectory.

        Args:
            num_steps: T, when known (e.g. from the trial-end notice); default = commands seen.

        Returns:
            A :class:`Trajectory` with one row per command step 0..T-1 (``time = (k + 1) * period``,
            the end of period k since the trial start, as the twins sample; ``steps = k``); a dropped step has NaN keypoints and ``valid`` False. ``meta``
            holds ``dropped_frames``, ``late_frames``, ``duplicate_frames``,
            ``unmatched_frames`` (counts) and ``period``.
        """
        T = self.num_steps if num_steps is None else int(num_steps)
        K = len(self.keypoint_names)
        kp = np.full((T, K, 2), np.nan)
        valid = np.zeros((T, K), dtype=bool)
        known = np.array(sorted(s for s in self.commands if s < T), dtype=int)
        if known.size:
            # fill steps whose command was never seen by extrapolation from step 0's grid
            t0 = self.commands[int(known[0])] - known[0] * self.period
            stamps = np.array([self.commands.get(k, t0 + k * self.period) for k in range(T)])
        else:
            stamps = np.zeros(0)
        assigned = assign_steps([f.stamp for f in self.frames], stamps, self.period) if T else \
            np.full(len(self.frames), -1)
        best: dict[int, int] = {}
        duplicates = 0
        for i, k in enumerate(assigned):
            if k < 0:
                continue
            if k in best:
                duplicates += 1
                prev = best[k]
                target = stamps[k] + self.period
                if abs(self.frames[i].stamp - target) < abs(self.frames[prev].stamp - target):
                    best[k] = i
            else:
                best[k] = i
        tol = self.period if self.late_tolerance_s is None else float(self.late_tolerance_s)
        late = 0
        delays = []
        for k, i in best.items():
            fr = self.frames[i]
            kp[k] = fr.keypoints
            valid[k] = fr.valid
            if fr.received is not None:
                delays.append(fr.received - (stamps[k] + self.period))
                if delays[-1] > tol:
                    late += 1
        meta = {"dropped_frames": int(T - len(best)), "late_frames": int(late),
                "duplicate_frames": int(duplicates), "unmatched_frames": int(np.sum(assigned < 0)),
                "period": float(self.period)}
        if delays:  # receive time minus capture target (end of the command period), s
            meta["delay_p50_s"] = float(np.percentile(delays, 50))
            meta["delay_p95_s"] = float(np.percentile(delays, 95))
            meta["delay_max_s"] = float(np.max(delays))
        return Trajectory((np.arange(T) + 1) * self.period, kp, valid, self.keypoint_names, self.source,
                          self.trial_id, np.arange(T), meta)
