"""Videos for the report: the overlay of real and twin keypoints, written quietly.

:func:`overlay_video` draws, frame by frame, the real tracked keypoints (filled white
dots), the initial twin (grey rings) and the calibrated twin (red rings) — on the real
camera frames when the run kept them (``videos/real.mp4``), otherwise on a dark canvas
framing the keypoints — and writes it as WebM/VP8 (Chromium, Firefox) plus MPEG-4.

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

__all__ = ["quiet_stderr", "overlay_video"]


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


def overlay_video(trial: TrialCurves, out_dir: str | Path, *, background: np.ndarray | None = None,
                  width: int = 480, max_frames: int = 300, log_path: str | Path | None = None) -> list[Path]:
    """Write ``overlay.webm`` and ``overlay.mp4`` for one trial into ``out_dir``.

    Args:
        trial: real / initial / calibrated keypoints (px) of one trial.
        out_dir: folder for the files (created).
        background: optional real frames (T, H, W, 3) uint8 RGB in the keypoints' pixel
            frame; None draws on a dark canvas framing all keypoints.
        width: output width in px (aspect kept). max_frames: at most this many frames
            (every n-th frame beyond).
        log_path: where FFmpeg's messages go (see :func:`quiet_stderr`).

    Returns:
        The files written (WebM first); empty when the encoders failed.
    """
    import cv2

    from ..io.video import VideoError, write_video

    real = trial.real
    trajs = [(real, (255, 255, 255), True), (trial.initial, (150, 150, 150), False),
             (trial.calibrated, (230, 40, 40), False)]
    pts = [t.keypoints[t.valid] for t, _, _ in trajs if t is not None and t.valid.any()]
    if background is not None:
        H, W = background.shape[1:3]
        x0, y0, sx = 0.0, 0.0, width / W
        h = int(round(H * sx)) // 2 * 2
    else:
        allp = np.concatenate(pts) if pts else np.zeros((1, 2))
        lo, hi = allp.min(axis=0), allp.max(axis=0)
        span = np.maximum(hi - lo, 20.0)
        lo, span = lo - 0.1 * span, span * 1.2
        x0, y0 = float(lo[0]), float(lo[1])
        sx = width / float(span[0])
        h = int(min(max(round(span[1] * sx), 120), 2 * width)) // 2 * 2
        sx = min(sx, h / float(span[1]))
    width = width // 2 * 2
    T = real.num_frames
    stride = max(1, int(np.ceil(T / max_frames)))
    rows = [_step_rows(t) if t is not None else {} for t, _, _ in trajs]
    steps = real.steps if real.steps is not None else np.arange(T)
    frames = []
    for i in range(0, T, stride):
        st = int(steps[i])
        if background is not None and i < len(background):
            img = cv2.resize(np.ascontiguousarray(background[i]), (width, h))
        else:
            img = np.full((h, width, 3), 40, np.uint8)
        for (t, color, filled), rmap in zip(trajs, rows):
            if t is None or st not in rmap:
                continue
            j = rmap[st]
            for k in range(t.num_keypoints):
                if not t.valid[j, k]:
                    continue
                x, y = t.keypoints[j, k]
                p = (int(round((x - x0) * sx)), int(round((y - y0) * sx)))
                cv2.circle(img, p, 4 if filled else 7, color, -1 if filled else 2, cv2.LINE_AA)
        cv2.putText(img, f"{trial.name}  t = {float(real.time[i]):.2f} s", (8, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.45,
                    (255, 255, 255), 1, cv2.LINE_AA)
        frames.append(img)
    fps = 1.0 / max(float(np.median(np.diff(real.time))) * stride, 1e-3) if T > 1 else 10.0
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    arr = np.stack(frames)
    for name, codec in (("overlay.webm", "VP80"), ("overlay.mp4", "mp4v")):
        try:
            with quiet_stderr(log_path):
                written.append(write_video(out_dir / name, arr, min(fps, 60.0), codec=codec))
        except VideoError:
            continue
    return written
