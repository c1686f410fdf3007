#!/usr/bin/env python3
"""The README's picture: frames of the pendulum clip with the tracked apple and the twin on top.

Usage (from the repository root, after `make setup`)::

    .venv/bin/vid2sid calibrate --rig pendulum --out runs/pendulum
    .venv/bin/python tools/readme_picture.py runs/pendulum --out docs/images/pendulum_overlay.png

Reads the run's ``trials.json`` (the tracked keypoints and the twin at the initial and at the
calibrated values, px) and the clip through the rig's own trial loader (the same frames the
calibration saw, dropped frames re-timed), then draws, on three frames (one fitted, two
predicted): the tracked apple (filled dot), the calibrated twin (ring) and the initial twin
(grey ring). Writes one PNG strip.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vid2sid_ros.io.video import draw_keypoints, read_video  # noqa: E402
from vid2sid_ros.report.run import load_trials  # noqa: E402
from vid2sid_ros.rigs import build_real_trial, load_rig  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a `vid2sid calibrate --rig pendulum` run directory")
    ap.add_argument("--out", type=Path, default=Path("docs/images/pendulum_overlay.png"))
    ap.add_argument("--times", default="4,14,20", help="clip times of the frames, s (comma-separated)")
    ap.add_argument("--width", type=int, default=320, help="width of each frame in the strip, px")
    args = ap.parse_args(argv)

    rig = load_rig("pendulum")
    real = build_real_trial(rig)
    parts = [real.train[0], real.holdout[0]]  # one clip: its first 60 % fitted, the rest scored (holdout)
    curves = {c.name: c for c in load_trials(args.run / "trials.json")}
    clip = read_video(parts[0].meta["video"])
    split_t = float(parts[0].time[parts[0].valid[:, 0]][-1])
    tiles = []
    for t in (float(x) for x in args.times.split(",")):
        whole = parts[0] if t <= split_t else parts[1]
        twin = curves[whole.trial_id]
        frame_of_row = np.asarray(whole.meta["frame_index"])
        rows = np.flatnonzero(whole.valid[:, 0])  # a frame where the apple was found
        row = int(rows[np.argmin(np.abs(whole.time[rows] - t))])
        step = int(whole.steps[row])
        img = cv2.cvtColor(clip.frames[int(frame_of_row[row])], cv2.COLOR_RGB2BGR)
        # a 4:3 crop about the apple's whole swing (40 px margin), scaled to --width
        H, W = img.shape[:2]
        seen = np.vstack([p.keypoints[p.valid[:, 0], 0] for p in parts])
        lo, hi = np.nanmin(seen, axis=0) - 40, np.nanmax(seen, axis=0) + 40
        cw = int(min(W, hi[0] - lo[0]))
        ch = int(min(H, 0.75 * cw))
        cx, cy = (lo + hi) / 2
        x0 = int(np.clip(cx - cw / 2, 0, W - cw))
        y0 = int(np.clip(cy - ch / 2, 0, H - ch))
        s = args.width / cw
        img = cv2.resize(img[y0:y0 + ch, x0:x0 + cw], (args.width, int(round(ch * s))), interpolation=cv2.INTER_CUBIC)
        offset = np.array([x0, y0], float)
        for traj, grey in ((twin.initial, True), (twin.calibrated, False)):
            if traj is None:
                continue
            r = int(np.flatnonzero(traj.steps == step)[0]) if traj.steps is not None else row
            xy, ok = (traj.keypoints[r] - offset) * s, traj.valid[r]
            if grey:
                for (x, y), v in zip(xy, ok):
                    if v:
                        cv2.circle(img, (int(round(x)), int(round(y))), 16, (110, 110, 110), 2, cv2.LINE_AA)
            else:
                draw_keypoints(img, xy, ok, filled=False, radius=12)
        draw_keypoints(img, (whole.keypoints[row] - offset) * s, whole.valid[row], filled=True, radius=3)
        part = "fitted" if whole.time[row] <= split_t else "predicted (holdout)"
        cv2.putText(img, f"t = {whole.time[row]:.1f} s, {part}", (6, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.42,
                    (20, 20, 20), 1, cv2.LINE_AA)
        tiles.append(img)
    strip = np.hstack(tiles)
    legend = np.full((22, strip.shape[1], 3), 255, np.uint8)
    cv2.putText(legend, "dot: tracked apple   ring: calibrated twin   grey ring: twin before calibration",
                (6, 15), cv2.FONT_HERSHEY_SIMPLEX, 0.42, (20, 20, 20), 1, cv2.LINE_AA)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(args.out), np.vstack([strip, legend]), [cv2.IMWRITE_PNG_COMPRESSION, 9]):
        print(f"readme_picture: cannot write {args.out}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
