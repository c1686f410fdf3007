"""Videos for the report: the overlay of real and twin keypoints, written quietly.

:func:`overlay_video` draws, per trial (training and holdout), three panels side by side:
the real keypoints (white dots, linked in chain order) on the camera footage when the run
kept it, the twin at the initial values and the twin at the calibrated values rendered
through the rig's camera (``twin_renders.npz``, written by the calibration) with their
keypoints as rings over the real dots — and encodes it as WebM (VP9, else VP8), which
Chromium and Firefox play. No MPEG-4 Part 2 file: Chromium cannot play it.

FFmpeg prints codec notes from C straight to file descriptor 2; :func:`quiet_stderr`
redirects that descriptor into a log file while a writer runs, so they land in the
run's log instead of the terminal (``VID2SID_VERBOSE=1`` keeps them on the terminal).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Iterator

import numpy as np

from .run import TrialCurves

__all__ = ["quiet_stderr", "overlay_video", "overlay_frames", "encode_webm", "load_renders", "CODECS"]


@contextlib.contextmanager
def quiet_stderr(log_path: str | Path | None) -> Iterator[None]:
    """Send file descriptor 2 (C-level stderr: FFmpeg, OpenCV) to ``log_path`` (appended)
    for the duration; no-op when ``log_path`` is None or ``VID2SID_VERBOSE`` is set."""
    if log_path is None or os.environ.get("VID2SID_VERBOSE"):
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (embedded interpreter): nothing to redirect
        yield
        return
    try:
        with open(log_path, "ab") as log:
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def _step_rows(traj) -> dict[int, int]:
    st = traj.steps if traj.steps is not None else np.arange(traj.num_frames)
    return {int(s): i for i, s in enumerate(st)}


#: encoders tried in order: VP8 then VP9 in WebM (Chromium, Firefox, Safari 14.1+ all play both). VP8 first:
#: on the report's small overlay frames OpenCV's VP9 costs about 3.5x the CPU (2.0 s against 0.57 s for 128
#: frames of 600 x 150 px) for a file only about 3 % smaller. MPEG-4 Part 2 (``mp4v``) is not offered:
#: Chromium cannot play it.
CODECS = (("overlay.webm", "VP80"), ("overlay.webm", "VP90"))

_WHITE, _GREY, _RED = (255, 255, 255), (170, 170, 170), (230, 40, 40)


def load_renders(path: str | Path) -> dict[str, np.ndarray]:
    """The twin's rendered frames of ``twin_renders.npz`` (see
    :func:`vid2sid_ros.calibration.trial_curves.render_trials`); empty when absent or unreadable."""
    try:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError):
        return {}


def _draw_chain(img: np.ndarray, pts: list[tuple[int, int] | None], color, *, filled: bool) -> None:
    """Keypoints as dots (``filled``) or rings, consecutive ones linked (the chain in name order)."""
    import cv2

    for a, b in zip(pts[:-1], pts[1:]):
        if a is not None and b is not None:
            cv2.line(img, a, b, color, 1 if not filled else 2, cv2.LINE_AA)
    for p in pts:
        if p is not None:
            cv2.circle(img, p, 3 if filled else 6, color, -1 if filled else 2, cv2.LINE_AA)


def _points(traj, row: int | None, to_px) -> list[tuple[int, int] | None]:
    if traj is None or row is None:
        return []
    out = []
    for k in range(traj.num_keypoints):
        x, y = traj.keypoints[row, k]
        ok = bool(traj.valid[row, k]) and np.isfinite(x) and np.isfinite(y)
        out.append(to_px(x, y) if ok else None)
    return out


def _frame_map(trial: TrialCurves, renders: dict[str, np.ndarray], i: int, width: int):
    """``(to_px, height, image size known?)``: keypoint px -> panel px. With a render or real frame the
    keypoints' pixel frame is the image (scaled to ``width``); otherwise a canvas framing all keypoints."""
    img = next((renders[f"{i}_{k}"] for k in ("calibrated", "initial", "real") if f"{i}_{k}" in renders), None)
    if img is not None and trial.real.kind == "image":
        # the stored frames are the camera image shrunk to ``width``
        h = img.shape[1]
        cam_w = _camera_width(renders, i, img)
        s = width / cam_w
        return (lambda x, y: (int(round(x * s)), int(round(y * s)))), h, True
    pts = [t.keypoints[t.valid] for t in (trial.real, trial.initial, trial.calibrated)
           if t is not None and t.valid.any()]
    allp = np.concatenate(pts) if pts else np.zeros((1, 2))
    lo, hi = allp.min(axis=0), allp.max(axis=0)
    span = np.maximum(hi - lo, 20.0)
    lo, span = lo - 0.1 * span, span * 1.2
    h = int(min(max(round(span[1] * width / span[0]), 120), 2 * width)) // 2 * 2
    s = min(width / float(span[0]), h / float(span[1]))
    return (lambda x, y: (int(round((x - lo[0]) * s)), int(round((y - lo[1]) * s)))), h, False


def _camera_width(renders: dict[str, np.ndarray], i: int, img: np.ndarray) -> float:
    """Width (px) of the camera image the stored frames were shrunk from (``{i}_size``), i.e. of
    the keypoints' pixel frame; without it, the stored frame's own width."""
    size = renders.get(f"{i}_size")
    return float(size[0]) if size is not None and len(size) == 2 else float(img.shape[2])


def _panel(renders, key: str, j: int | None, h: int, width: int) -> np.ndarray:
    import cv2

    arr = renders.get(key)
    if arr is not None and j is not None and j < len(arr):
        img = arr[j]
        if img.shape[:2] != (h, width):
            img = cv2.resize(img, (width, h), interpolation=cv2.INTER_AREA)
        return np.ascontiguousarray(img)
    return np.full((h, width, 3), 40, np.uint8)


def _label(img: np.ndarray, text: str, *, y: int = 14, color=(255, 255, 255)) -> None:
    import cv2

    cv2.rectangle(img, (0, y - 11), (min(img.shape[1], 8 + int(5.6 * len(text))), y + 4), (0, 0, 0), -1)
    cv2.putText(img, text, (4, y), cv2.FONT_HERSHEY_SIMPLEX, 0.38, color, 1, cv2.LINE_AA)


def overlay_frames(trials: list[TrialCurves], renders: dict[str, np.ndarray] | None = None, *,
                   width: int = 200, max_frames: int = 160) -> tuple[np.ndarray, float, dict[str, bool]]:
    """The overlay video's frames: per trial (training and holdout, in order) three panels side by
    side — real (camera footage when kept, else a dark canvas) with the tracked keypoints (white
    dots), the twin at the initial values and the twin at the calibrated values (their renders
    through the rig's camera when the run stored them, else a dark canvas) with the twin's
    keypoints as rings and the real ones as small dots; keypoints linked in chain order.

    Args:
        trials: the trials of ``trials.json``; only image-keypoint trials are drawn.
        renders: :func:`load_renders` of the run (keys ``{i}_initial``, ``{i}_calibrated``,
            ``{i}_real``, ``{i}_steps`` with ``i`` the trial's index in ``trials``).
        width: width of one panel, px. max_frames: frames of the whole video at most (shared by the
            trials, at least 20 each): the report's size budget (WebM bytes grow with the duration).

    Returns:
        ``(frames (N, H, 3*width, 3) uint8 RGB, fps, shown)`` with ``shown`` saying what the video
        contains: ``footage``, ``renders``, ``holdout`` (True when at least one trial had it).

    Raises:
        ValueError: no image-keypoint trial.
    """
    renders = renders or {}
    width = width // 2 * 2
    shown = {"footage": False, "renders": False, "holdout": False}
    out, dts = [], []
    items = [(i, t) for i, t in enumerate(trials) if t.real.kind == "image"]
    if not items:
        raise ValueError("no trial measures image keypoints")
    sizes = []
    for i, t in items:
        to_px, h, _ = _frame_map(t, renders, i, width)
        sizes.append(h)
    H = max(sizes)
    max_frames = max(20, max_frames // len(items))  # per trial
    for (i, t), h0 in zip(items, sizes):
        to_px, h, _ = _frame_map(t, renders, i, width)
        real = t.real
        T = real.num_frames
        steps = np.asarray(real.steps if real.steps is not None else np.arange(T))
        stride = max(1, int(np.ceil(T / max_frames)))
        shown_steps = renders.get(f"{i}_steps")
        srow = {int(v): j for j, v in enumerate(shown_steps)} if shown_steps is not None else {}
        rows = [_step_rows(x) if x is not None else {} for x in (t.initial, t.calibrated)]
        hold = t.split == "holdout"
        shown["holdout"] |= hold
        shown["footage"] |= f"{i}_real" in renders
        shown["renders"] |= f"{i}_initial" in renders or f"{i}_calibrated" in renders
        picked = list(range(0, T, stride))
        if srow:  # the frames the renders hold (the calibration thinned them), thinned again to max_frames
            rrow = _step_rows(real)
            held = [rrow[v] for v in srow if v in rrow]
            every = max(1, int(np.ceil(len(held) / max_frames)))
            picked, stride = held[::every], max(1, int(round(T / max(len(held[::every]), 1))))
        if T > 1:
            dts.append(float(np.median(np.diff(real.time))) * stride)
        for r in picked:
            st = int(steps[r])
            j = srow.get(st)
            rp = _points(real, r, to_px)
            panels = []
            for key, traj, rmap, color, title in (("real", None, None, _WHITE, "real"),
                                                  ("initial", t.initial, rows[0], _GREY, "twin, initial values"),
                                                  ("calibrated", t.calibrated, rows[1], _RED, "twin, calibrated")):
                img = _panel(renders, f"{i}_{key}", j, h, width)
                if traj is not None:
                    _draw_chain(img, rp, _WHITE, filled=True)
                    _draw_chain(img, _points(traj, rmap.get(st), to_px), color, filled=False)
                elif key == "real":
                    _draw_chain(img, rp, _WHITE, filled=True)
                if h < H:
                    img = np.concatenate([img, np.full((H - h, width, 3), 40, np.uint8)])
                _label(img, title)
                panels.append(img)
            frame = np.concatenate(panels, axis=1)
            tag = f"{'HOLDOUT (not fitted)' if hold else 'TRAINING'} '{t.name}'  t = {float(real.time[r]):.2f} s"
            _label(frame, tag, y=H - 6, color=(255, 200, 120) if hold else (255, 255, 255))
            out.append(frame)
    fps = 1.0 / max(float(np.median(dts)), 1e-3) if dts else 10.0
    return np.stack(out), min(fps, 30.0), shown


def encode_webm(frames: np.ndarray, fps: float, out_dir: str | Path, *,
                log_path: str | Path | None = None) -> tuple[Path | None, str]:
    """Encode RGB frames as ``out_dir/overlay.webm``: VP9, else VP8 (see :data:`CODECS`).

    Returns:
        ``(path, codec)``, or ``(None, "")`` when no WebM encoder works in this OpenCV build.
    """
    from ..io.video import VideoError, write_video

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, codec in CODECS:
        try:
            with quiet_stderr(log_path):
                return write_video(out_dir / name, frames, fps, codec=codec), codec
        except VideoError:
            continue
    return None, ""


def overlay_video(trial: TrialCurves | list[TrialCurves], out_dir: str | Path, *,
                  renders: dict[str, np.ndarray] | None = None, width: int = 200, max_frames: int = 160,
                  log_path: str | Path | None = None) -> list[Path]:
    """Write ``overlay.webm`` (:func:`overlay_frames`, :func:`encode_webm`) into ``out_dir``.

    Returns:
        The files written; empty when no WebM encoder works or no trial measures image keypoints.
    """
    trials = trial if isinstance(trial, list) else [trial]
    try:
        frames, fps, _ = overlay_frames(trials, renders, width=width, max_frames=max_frames)
    except ValueError:
        return []
    path, _ = encode_webm(frames, fps, out_dir, log_path=log_path)
    return [path] if path is not None else []
