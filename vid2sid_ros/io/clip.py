"""A video clip of a real trial: decoded once, its markers tracked, small thumbnails kept.

:func:`track_clip` streams the frames (:func:`vid2sid_ros.io.video.iter_video`), runs the
marker tracker on each and returns a :class:`TrackedClip` (the keypoint trajectory, the
frame rate, and the warnings of :func:`~vid2sid_ros.perception.quality.check_tracking`: markers
tracked in too few frames, jumps, blobs unlike a marker).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..core.trajectory import Trajectory
from ..perception.quality import DEFAULT_MIN_TRACKED_FRACTION, check_tracking

__all__ = ["TrackedClip", "track_clip", "ClipError", "THUMB_MAX_WIDTH", "MAX_THUMBS"]

#: widest thumbnail a trial source keeps, px (the report shows 200 px wide frames)
THUMB_MAX_WIDTH = 320
#: most thumbnails a trial source keeps per clip (the report shows at most 100 frames per trial): a longer
#: clip keeps every n-th frame, so memory is bounded (150 x 320 x 180 x 3 B = 26 MB) whatever the clip
MAX_THUMBS = 150


class ClipError(ValueError):
    """A clip cannot be used (no frames, no frame rate, a marker never found); the message names the file."""


@dataclass
class TrackedClip:
    """A tracked video clip.

    Attributes:
        trajectory: all frames, keypoints (T, K, 2) px, frame k at its presentation timestamp (s, from 0;
            ``k / fps`` for an evenly spaced clip or an explicit ``fps``), step k; for unevenly spaced
            timestamps (a variable frame rate) the step is the frame's slot at the nominal rate
            (:func:`~vid2sid_ros.perception.frame_timing.slots_from_times`) and ``meta["timestamp_slots"]``
            is true.
        fps: frame rate used, Hz: the container's, an explicit one, or for uneven timestamps the
            rate of the median frame interval (the twin is simulated at it).
        size: (width, height) px.
        path: the video file.
        thumbnails: frames ``0, thumb_every, 2 thumb_every...`` downscaled by ``thumb_scale``,
            (ceil(T / thumb_every), h, w, 3) uint8 RGB, or None.
        thumb_scale: factor of the thumbnails (e.g. 0.5). thumb_every: thumbnail stride.
        warnings: problems found (lost marker spans, jumps that suggest missing frames).
    """

    trajectory: Trajectory
    fps: float
    size: tuple[int, int]
    path: Path
    thumbnails: np.ndarray | None = None
    thumb_scale: float = 1.0
    warnings: tuple[str, ...] = ()
    thumb_every: int = 1


def _marker_key(tracker_cfg: Mapping[str, Any], name: str) -> str:
    """Where a marker's HSV range is in the rig config: ``tracker.markers[1].hsv_lower/hsv_upper`` (the
    config's ``tracker:`` key; a legacy one-clip config's ``trial.tracker`` is loaded into it)."""
    markers = list(tracker_cfg.get("markers") or []) if isinstance(tracker_cfg, Mapping) else []
    k = next((i for i, m in enumerate(markers) if isinstance(m, Mapping) and m.get("name") == name), None)
    return f"tracker.markers[{k}].hsv_lower/hsv_upper" if k is not None else "in the tracker's markers"


def track_clip(video: str | Path, tracker_cfg: Mapping[str, Any], *, fps: float | None = None,
               max_frames: int | None = None, start_frame: int = 0, thumb_scale: float | None = 0.5,
               thumb_every: int = 1, min_tracked_fraction: float = DEFAULT_MIN_TRACKED_FRACTION,
               thumb_max_width: int | None = None, max_thumbs: int | None = None) -> TrackedClip:
    """Decode a clip once, track its markers and (optionally) keep small thumbnails.

    Frames are streamed (``vid2sid_ros.io.video.iter_video``): one decoded frame is alive at a
    time, and the thumbnails are bounded in size (``thumb_max_width``) and number (``max_thumbs``),
    so memory does not grow with the clip's length or resolution.

    Args:
        video: the file.
        tracker_cfg: :meth:`vid2sid_ros.perception.markers.MarkerTracker.from_config` mapping.
        fps: override the container's frame rate (slow-motion clips), Hz.
        max_frames: keep at most this many frames (after ``start_frame``).
        start_frame: skip this many frames at the start.
        thumb_scale: keep frames resized by this factor for reports (None: none).
        thumb_every: keep a thumbnail of every ``thumb_every``-th frame (frames 0, n, 2n...); raised to
            ``ceil(frames / max_thumbs)`` for a long clip (the frame count the container declares), and
            doubled (every other thumbnail dropped) if more than ``max_thumbs`` arrive all the same.
        thumb_max_width: thumbnails are at most this wide, px (the scale is lowered for a large frame;
            None: ``thumb_scale`` as given). max_thumbs: most thumbnails kept (None: one per stride).
            A trial source passes :data:`THUMB_MAX_WIDTH` and :data:`MAX_THUMBS`: the calibrate path's
            memory is then bounded whatever the clip.
        min_tracked_fraction: warn about a marker valid in fewer than this fraction of the frames
            (:func:`vid2sid_ros.perception.quality.check_tracking`, which also warns about jumps and
            blobs unlike a marker; its summary is ``trajectory.meta["tracking"]``).

    Raises:
        vid2sid_ros.io.video.VideoError: missing/corrupt file (names it).
        ClipError: no frames, a bad fps, or the marker never found (says which marker).
    """
    from ..io.video import iter_video, video_info
    from ..perception.markers import MarkerTracker

    path = Path(video)
    info = video_info(path)
    rate = float(fps) if fps else float(info.get("fps") or 0.0)
    if not (rate > 0 and math.isfinite(rate)):
        raise ClipError(f"{path}: the container reports no frame rate; set trial.fps")
    tracker = MarkerTracker.from_config(tracker_cfg)
    every = max(int(thumb_every), 1)
    expected = max(int(info.get("frames") or 0) - int(start_frame), 0)
    expected = min(expected, int(max_frames)) if max_frames is not None else expected
    if max_thumbs and expected > max_thumbs * every:
        every = math.ceil(expected / max_thumbs)
    pts: list[float] = []
    xs, vs, thumbs, size, thumb_scale, every = _track_frames(
        iter_video(path, check_length=False, timestamps=pts), tracker, start_frame=start_frame,
        max_frames=max_frames, thumb_scale=thumb_scale, every=every, thumb_max_width=thumb_max_width,
        max_thumbs=max_thumbs)
    if not xs:
        raise ClipError(f"{path}: no frames decoded (start_frame={start_frame})")
    kp, valid = np.stack(xs), np.stack(vs)
    T = kp.shape[0]
    declared = int(info.get("frames") or 0) - int(start_frame)
    if max_frames is not None:
        declared = min(declared, int(max_frames))
    uneven, steps, slot_meta = None, None, {}
    if fps:  # an explicit rate (a slow-motion clip): the container's playback times do not apply
        times = np.arange(T) / rate
    else:  # the container's presentation timestamps (a variable frame rate, dropped frames)
        times, keep, steps, rate, uneven, slot_meta = _container_times(pts[start_frame:start_frame + T], rate, path)
        if keep is not None:
            kp, valid = kp[keep], valid[keep]
    traj = Trajectory(time=times, keypoints=kp, valid=valid, names=tracker.names, source="real",
                      trial_id=path.stem, steps=steps, meta={"video": str(path), "fps": rate, **slot_meta,
                                                "occluded": {m.name: int(c) for m, c in zip(tracker.markers,
                                                                                             tracker.occluded)},
                                                 "blobs": tracker.frame_log()})
    warnings = [uneven.removeprefix(f"{path}: ")] if uneven else []
    if declared > 0 and T < declared:
        warnings.append(f"decoded {T} of {declared} frames the container declares: the file may be truncated")
    for k, n in enumerate(tracker.names):
        if not valid[:, k].any():
            raise ClipError(f"{path}: marker '{n}' was not found in any of {T} frames; check its HSV range "
                            f"{_marker_key(tracker_cfg, n)} (OpenCV H 0-180; red wraps, e.g. hsv_lower [170, ..] "
                            f"to hsv_upper [10, ..])")
    check = check_tracking(traj, min_fraction=min_tracked_fraction)
    warnings.extend(check.warnings)
    traj = traj._with(meta={**dict(traj.meta), "tracking": check.to_dict()})
    return TrackedClip(traj, rate, size, path, np.stack(thumbs) if thumbs else None,
                       float(thumb_scale or 1.0), tuple(warnings), every)


def _track_frames(frames: Any, tracker: Any, *, start_frame: int, max_frames: int | None, thumb_scale: float | None,
                  every: int, thumb_max_width: int | None, max_thumbs: int | None) -> tuple[list, list, list, Any,
                                                                                           float | None, int]:
    """Track streamed frames: (keypoints, validity, thumbnails per frame, (w, h) px, thumb scale, thumb stride)."""
    import cv2

    xs, vs, thumbs = [], [], []
    size = None
    for i, frame in enumerate(frames):
        if i < start_frame:
            continue
        if max_frames is not None and len(xs) >= max_frames:
            break
        size = (frame.shape[1], frame.shape[0])
        xy, ok = tracker.detect(frame)
        xs.append(xy)
        vs.append(ok)
        if thumb_scale and len(xs) == 1 and thumb_max_width:  # the scale is fixed by the first frame
            thumb_scale = min(float(thumb_scale), thumb_max_width / frame.shape[1])
        if thumb_scale and (len(xs) - 1) % every == 0:
            thumbs.append(cv2.resize(frame, None, fx=thumb_scale, fy=thumb_scale, interpolation=cv2.INTER_AREA))
            if max_thumbs and len(thumbs) > max_thumbs:  # more frames than declared: keep every other one
                thumbs, every = thumbs[::2], 2 * every
        del frame  # the decoded frame is not kept past its thumbnail
    return xs, vs, thumbs, size, thumb_scale, every


def _container_times(pts: list[float], rate: float, path: Path) -> tuple[np.ndarray, Any, Any, float,
                                                                         str | None, dict[str, Any]]:
    """Frame times (s) from the container's timestamps: (times, kept-frame mask, slots, rate Hz, note, meta).

    Uneven timestamps place the frames on slots of the median interval; frames closer than one
    slot to the previous one are left out (the mask; None when the frames are not slotted), and
    the note says so.
    """
    from ..io.video import frame_times
    from ..perception.frame_timing import slots_from_times

    times, uneven = frame_times(pts, rate, where=str(path), first_at=0.0)
    keep, steps, slot_meta = None, None, {}
    if uneven and np.all(np.diff(times) > 0):  # timestamps place the frames: slots at the nominal rate
        steps, keep, nominal, worst = slots_from_times(times)
        slot_meta = {"container_fps": rate, "timestamp_slots": True}
        uneven += (f"; frames are paired with the twin at their own times on a {nominal:.3f} Hz grid (the "
                   f"median frame interval; the container's average is {rate:.3f} Hz), within "
                   f"{worst * 1000:.1f} ms")
        if not keep.all():
            uneven += f"; {int((~keep).sum())} frame(s) closer than one slot to the previous one are left out"
        rate = nominal
        times = times[keep]
    return times, keep, steps, rate, uneven, slot_meta

