"""Video files of rollouts: write and read mp4 (OpenCV), side-by-side comparison videos.

Frames are RGB ``uint8`` arrays of shape (H, W, 3) everywhere in vid2sid_ros; the
BGR order OpenCV uses on disk is handled here. Videos are for people and for the
vision-language model; the calibrator compares keypoint trajectories, not pixels.

* :func:`write_video` — an mp4 (codec ``mp4v``, MPEG-4 Part 2, available in every
  opencv-python wheel) of a clip.
* :func:`read_video` / :func:`iter_video` — decode a file; missing, unreadable,
  corrupt or truncated files raise :class:`VideoError` naming the file.
* :func:`write_side_by_side` — two clips next to each other (or one clip) with the
  keypoints of one or two trajectories drawn on them: filled dots for a panel's own
  trajectory, rings for the other one, so a discrepancy is visible at a glance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import cv2
import numpy as np

from ..core.trajectory import Trajectory
from ..core.files import file_problem

__all__ = ["VideoError", "VideoClip", "read_video", "iter_video", "frame_times", "video_info", "write_video",
           "write_side_by_side", "draw_keypoints"]

#: BGR drawing colours for keypoints (cycled): yellow, magenta, cyan, orange, white, violet, lime,
#: chosen to stay distinguishable from the finger's red/green/blue markers
_PALETTE = [(0, 230, 255), (255, 0, 255), (255, 255, 0), (0, 140, 255), (255, 255, 255), (255, 90, 160),
            (90, 255, 160)]


class VideoError(OSError):
    """A video file is missing, unreadable, corrupt or truncated, or frames to write are malformed."""


@dataclass(frozen=True)
class VideoClip:
    """A decoded clip.

    Attributes:
        frames: RGB frames, shape (T, H, W, 3) uint8.
        fps: frame rate stored in the file, Hz.
        path: the file it came from.
    """

    frames: np.ndarray
    fps: float
    path: str = ""

    @property
    def num_frames(self) -> int:
        return int(self.frames.shape[0])

    @property
    def width(self) -> int:
        return int(self.frames.shape[2])

    @property
    def height(self) -> int:
        return int(self.frames.shape[1])

    @property
    def duration(self) -> float:
        """T / fps, s."""
        return self.num_frames / self.fps if self.fps > 0 else float("nan")


def _open(path: str | Path) -> tuple[cv2.VideoCapture, Path]:
    path = Path(path)
    if not path.exists():
        raise VideoError(f"video not found: {path}")
    if not path.is_file():  # a FIFO would block the decoder's open; a directory or device is no clip either
        raise VideoError(f"video {file_problem(path) or f'{path}: not a video file'}")
    if path.stat().st_size == 0:
        raise VideoError(f"video file is empty (0 bytes): {path}")
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        cap.release()
        raise VideoError(f"cannot decode video {path}: corrupt, truncated or not a video "
                         "(OpenCV could not open it)")
    return cap, path


def video_info(path: str | Path) -> dict:
    """Container metadata: ``{"frames": T (as declared), "fps": Hz, "width": px, "height": px}``.

    Raises:
        VideoError: missing or undecodable file.
    """
    cap, path = _open(path)
    try:
        return {"frames": int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), "fps": float(cap.get(cv2.CAP_PROP_FPS)),
                "width": int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), "height": int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))}
    finally:
        cap.release()


def iter_video(path: str | Path, *, check_length: bool = True,
               timestamps: list[float] | None = None) -> Iterator[np.ndarray]:
    """Yield the RGB frames (H, W, 3) uint8 of a video file one at a time.

    Args:
        path: video file.
        check_length: raise if fewer frames decode than the container declares
            (a truncated or partly corrupt file).
        timestamps: when given, each decoded frame's presentation timestamp (s, the
            container's, via OpenCV ``CAP_PROP_POS_MSEC``) is appended to it as the frame
            is yielded (see :func:`frame_times`).

    Raises:
        VideoError: missing/undecodable file, no frame decodable, or (``check_length``)
            fewer frames than declared; the message names the file and counts.
    """
    cap, path = _open(path)
    try:
        declared = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        n = 0
        while True:
            ok, bgr = cap.read()
            if not ok or bgr is None:
                break
            if bgr.ndim != 3 or bgr.size == 0:
                raise VideoError(f"{path}: frame {n} decoded empty or malformed, shape {getattr(bgr, 'shape', None)}")
            n += 1
            if timestamps is not None:
                timestamps.append(float(cap.get(cv2.CAP_PROP_POS_MSEC)) / 1000.0)
            yield cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        if n == 0:
            raise VideoError(f"{path}: no frame could be decoded (corrupt or truncated video)")
        if check_length and declared > 0 and n < declared:
            raise VideoError(f"{path}: truncated or corrupt video: decoded {n} of {declared} declared frames")
    finally:
        cap.release()


#: a frame interval further than this fraction of the typical one from it makes the spacing "uneven"
UNEVEN_SPACING = 0.25


def frame_times(pts_s: Sequence[float], fps: float | None, *, where: str = "video",
                first_at: float | None = 0.0) -> tuple[np.ndarray, str | None]:
    """Frame times from the container's presentation timestamps, and a warning when uneven.

    ``t_k = pts_k - pts_0 + first_at`` (s); ``first_at=None`` puts the first frame one typical
    interval after 0 (the ``(k + 1) / fps`` convention: frame k closes period k). The typical
    interval is the median of the timestamp steps. When the timestamps are missing or not
    strictly increasing, frames are spaced evenly at ``fps`` and the warning says so.

    Args:
        pts_s: (T,) presentation timestamps, s. fps: the container's rate, Hz (fallback).
        where: file name for the warning. first_at: time of the first frame, s.

    Returns:
        ``(times (T,) s, warning or None)``; the warning names the largest irregular gap.
    """
    pts = np.asarray(pts_s, float).ravel()
    T = pts.size
    rate = float(fps) if fps and math.isfinite(fps) and fps > 0 else None
    if T >= 2 and np.all(np.isfinite(pts)) and np.all(np.diff(pts) > 0):
        dt = np.diff(pts)
        typical = float(np.median(dt))
        t = pts - pts[0] + (typical if first_at is None else float(first_at))
        off = np.abs(dt - typical) > UNEVEN_SPACING * typical
        if not off.any():
            return t, None
        k = int(np.argmax(np.abs(dt - typical)))
        return t, (f"{where}: frame times are not evenly spaced: {int(off.sum())} of {T - 1} frame interval(s) differ "
                   f"from the typical {typical * 1000:.1f} ms by more than {UNEVEN_SPACING:.0%} (largest: "
                   f"{dt[k] * 1000:.1f} ms between frames {k} and {k + 1}, at {t[k + 1]:.3f} s); the trajectory keeps "
                   "the container's presentation timestamps")
    step = 1.0 / rate if rate else 1.0
    t = (np.arange(T) + (1.0 if first_at is None else 0.0)) * step + (0.0 if first_at is None else float(first_at))
    if T < 2:
        return t, None
    return t, (f"{where}: the container's presentation timestamps are missing or not increasing; frames are spaced "
               f"evenly at {1.0 / step:g} Hz")


def read_video(path: str | Path, *, check_length: bool = True, max_frames: int | None = None) -> VideoClip:
    """Decode a whole video file.

    Args:
        path: video file (any container/codec the installed OpenCV decodes).
        check_length: see :func:`iter_video`.
        max_frames: stop after this many frames (no length check then).

    Returns:
        :class:`VideoClip` with frames (T, H, W, 3) uint8 RGB.

    Raises:
        VideoError: as :func:`iter_video`; also if the frame size changes mid-stream.
    """
    fps = video_info(path)["fps"]
    frames = []
    for k, f in enumerate(iter_video(path, check_length=check_length and max_frames is None)):
        if frames and f.shape != frames[0].shape:
            raise VideoError(f"{path}: frame {k} has shape {f.shape}, expected {frames[0].shape}")
        frames.append(f)
        if max_frames is not None and len(frames) >= max_frames:
            break
    return VideoClip(frames=np.stack(frames), fps=fps if fps > 0 else float("nan"), path=str(path))


def _as_frames(frames: np.ndarray | Sequence[np.ndarray], what: str = "frames") -> np.ndarray:
    if frames is None:
        raise VideoError(f"{what}: got None, expected (T, H, W, 3) uint8 RGB frames")
    try:
        arr = np.asarray(frames)
    except ValueError as err:  # ragged list of differently sized frames
        raise VideoError(f"{what}: frames must all have the same shape ({err})") from None
    if arr.ndim == 3 and arr.shape[0] > 0:  # grayscale clip (T, H, W)
        arr = np.repeat(arr[..., None], 3, axis=3)
    if arr.ndim != 4 or arr.shape[-1] != 3:
        raise VideoError(f"{what}: expected shape (T, H, W, 3) RGB, got {arr.shape}")
    if arr.shape[0] == 0:
        raise VideoError(f"{what}: no frames (T = 0)")
    if arr.shape[1] == 0 or arr.shape[2] == 0:
        raise VideoError(f"{what}: empty frames of size {arr.shape[2]}x{arr.shape[1]} px")
    if arr.dtype != np.uint8:
        raise VideoError(f"{what}: expected dtype uint8, got {arr.dtype}")
    return arr


def write_video(path: str | Path, frames: np.ndarray | Sequence[np.ndarray], fps: float, *,
                codec: str = "mp4v") -> Path:
    """Write RGB frames to a video file (mp4 by default).

    Args:
        path: output file; its folder is created. The extension picks the container.
        frames: (T, H, W, 3) uint8 RGB (or (T, H, W) grayscale), T >= 1.
        fps: frame rate, Hz (> 0).
        codec: FourCC, default ``mp4v``.

    Returns:
        The path written.

    Raises:
        VideoError: malformed/empty frames, bad fps, or the encoder failed.
    """
    arr = _as_frames(frames)
    if not (fps > 0 and np.isfinite(fps)):
        raise VideoError(f"fps must be > 0, got {fps}")
    if len(codec) != 4:
        raise VideoError(f"codec must be a 4-character FourCC, got {codec!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    T, H, W = arr.shape[:3]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*codec), float(fps), (W, H))
    if not writer.isOpened():
        raise VideoError(f"cannot open a {codec} video writer for {path} ({W}x{H} px at {fps} Hz)")
    try:
        for f in arr:
            writer.write(cv2.cvtColor(np.ascontiguousarray(f), cv2.COLOR_RGB2BGR))
    finally:
        writer.release()
    if not path.is_file() or path.stat().st_size == 0:
        raise VideoError(f"encoder produced no output for {path}")
    return path


def draw_keypoints(frame_bgr: np.ndarray, xy: np.ndarray, valid: np.ndarray, *, filled: bool,
                   radius: int = 4, names: Sequence[str] | None = None) -> None:
    """Draw keypoints (K, 2) px on a BGR frame in place: dots (``filled``) or rings; invalid ones skipped."""
    for k, ((x, y), ok) in enumerate(zip(xy, valid)):
        if not ok or not np.isfinite(x) or not np.isfinite(y):
            continue
        colour = _PALETTE[k % len(_PALETTE)]
        c = (int(round(x * 16)), int(round(y * 16)))  # 4 fractional bits: sub-pixel drawing
        cv2.circle(frame_bgr, c, radius * 16, colour, -1 if filled else 1, cv2.LINE_AA, shift=4)
        if names is not None and filled:
            cv2.putText(frame_bgr, names[k], (int(x) + radius + 2, int(y) - radius), cv2.FONT_HERSHEY_SIMPLEX,
                        0.3, colour, 1, cv2.LINE_AA)


def _traj_frame(traj: Trajectory | None, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    if traj is None or k >= traj.num_frames:
        return None
    return traj.keypoints[k], traj.valid[k]


def _one_frame(frame: Any, what: str, k: int) -> np.ndarray:
    """Frame ``k`` of a streamed clip checked as (H, W, 3) uint8 RGB (a (H, W) grey frame is widened)."""
    f = np.asarray(frame)
    if f.ndim == 2:
        f = np.repeat(f[..., None], 3, axis=2)
    if f.ndim != 3 or f.shape[-1] != 3 or f.dtype != np.uint8 or 0 in f.shape:
        raise VideoError(f"{what}: frame {k}: expected (H, W, 3) uint8 RGB, got {f.shape} {f.dtype}")
    return f


def write_side_by_side(path: str | Path, frames_a: np.ndarray | Iterable[np.ndarray],
                       frames_b: np.ndarray | Iterable[np.ndarray] | None, fps: float, *,
                       traj_a: Trajectory | None = None, traj_b: Trajectory | None = None,
                       labels: Sequence[str] = ("real", "sim"), codec: str = "mp4v") -> Path:
    """Write a comparison video of two clips and/or two trajectories.

    With ``frames_b`` the panels are placed side by side (b resized to a's height);
    each panel shows its own trajectory as filled dots and the other one as rings.
    With ``frames_b=None`` both trajectories are overlaid on ``frames_a``. Clips of
    different lengths are cut to the shorter one. Trajectory frame k is drawn on
    video frame k (trajectories are expected step-aligned with the clips). Frames are
    composed and encoded one at a time: an iterable clip (a decoder, a generator) is
    never held whole.

    Args:
        path: output file.
        frames_a, frames_b: (T, H, W, 3) uint8 RGB clips, or iterables of (H, W, 3) frames.
        fps: frame rate, Hz.
        traj_a, traj_b: optional keypoint trajectories (px in each clip's own frame).
        labels: panel captions.

    Returns:
        The path written.

    Raises:
        VideoError: malformed or empty clips, or the encoder failed.
    """
    if isinstance(frames_a, np.ndarray) or frames_a is None:
        frames_a = _as_frames(frames_a, "frames_a")
    if isinstance(frames_b, np.ndarray):
        frames_b = _as_frames(frames_b, "frames_b")
    if not (fps > 0 and np.isfinite(fps)):
        raise VideoError(f"fps must be > 0, got {fps}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pairs = zip(frames_a, frames_b) if frames_b is not None else ((f, None) for f in frames_a)
    writer, k = None, -1
    try:
        for k, (a_k, b_k) in enumerate(pairs):
            fa = cv2.cvtColor(_one_frame(a_k, "frames_a", k), cv2.COLOR_RGB2BGR)
            fb = None if b_k is None else _one_frame(b_k, "frames_b", k)
            out = _side_by_side_frame(fa, fb, k, traj_a, traj_b, labels)
            if writer is None:
                writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*codec), float(fps),
                                         (out.shape[1], out.shape[0]))
                if not writer.isOpened():
                    raise VideoError(f"cannot open a {codec} video writer for {path} ({out.shape[1]}x{out.shape[0]} "
                                     f"px at {fps} Hz)")
            writer.write(out)
    finally:
        if writer is not None:
            writer.release()
    if k < 0:
        raise VideoError("frames_a/frames_b: no frames (T = 0)")
    if not path.is_file() or path.stat().st_size == 0:
        raise VideoError(f"encoder produced no output for {path}")
    return path


def _side_by_side_frame(fa: np.ndarray, b: np.ndarray | None, k: int, traj_a: Trajectory | None,
                        traj_b: Trajectory | None, labels: Sequence[str]) -> np.ndarray:
    """Frame ``k`` of :func:`write_side_by_side` (BGR): ``fa`` (BGR, drawn on) and ``b`` (RGB) or None."""
    H = fa.shape[0]
    pa, pb = _traj_frame(traj_a, k), _traj_frame(traj_b, k)
    names_a = traj_a.names if traj_a is not None else None
    if b is None:
        if pb is not None:
            draw_keypoints(fa, *pb, filled=False, radius=6)
        if pa is not None:
            draw_keypoints(fa, *pa, filled=True, radius=3, names=names_a)
        _caption(fa, f"{labels[0]} (dots) vs {labels[1]} (rings)" if traj_b is not None and len(labels) > 1
                 else f"{labels[0]} (dots)")  # one trajectory: nothing to compare it with
        return fa
    sb = H / b.shape[0] if b.shape[0] != H else 1.0
    fb = cv2.cvtColor(b, cv2.COLOR_RGB2BGR)
    if sb != 1.0:
        fb = cv2.resize(fb, (int(round(b.shape[1] * sb)), H), interpolation=cv2.INTER_AREA)
    # panel a: own dots, b's rings (b's keypoints are in b's pixel frame; scale if resized)
    if pb is not None:
        draw_keypoints(fa, pb[0] * sb, pb[1], filled=False, radius=6)
    if pa is not None:
        draw_keypoints(fa, *pa, filled=True, radius=3, names=names_a)
    if pa is not None:  # the resized panel b shares a's pixel frame
        draw_keypoints(fb, *pa, filled=False, radius=6)
    if pb is not None:
        draw_keypoints(fb, pb[0] * sb, pb[1], filled=True, radius=3,
                       names=traj_b.names if traj_b is not None else None)
    _caption(fa, labels[0])
    _caption(fb, labels[1] if len(labels) > 1 else "b")
    return np.concatenate([fa, fb], axis=1)


def _caption(frame_bgr: np.ndarray, text: str) -> None:
    cv2.putText(frame_bgr, text, (5, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
