"""``vid2sid track VIDEO --rig finger --out traj.json``: video file -> keypoint trajectory.

Decodes the video, runs the rig's marker tracker on every frame and writes the
trajectory as JSON (:meth:`vid2sid_ros.core.trajectory.Trajectory.to_dict`; lost
markers are ``null`` with ``valid: false``). Optionally writes an overlay mp4 of the
tracked keypoints. Exit codes: 0 success, 2 bad input (missing/corrupt video, unknown
rig, unsupported tracker), 1 when no keypoint was ever found.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "track the markers of a rig in a video file and write the keypoint trajectory as JSON"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("video", help="input video file (mp4, avi, ...)")
    parser.add_argument("--rig", default="finger",
                        help="rig config file (RIG.yaml) or built-in rig name whose tracker is used (default: finger)")
    parser.add_argument("--allow-code", action="store_true",
                        help="allow a module:function rig reference (runs that code; also VID2SID_ALLOW_CODE=1)")
    parser.add_argument("--out", default="-", help="output JSON file ('-' = stdout, the default)")
    parser.add_argument("--source", default="real", help="trajectory source label (default: real)")
    parser.add_argument("--trial-id", default=None, help="trial id (default: the video's file stem)")
    parser.add_argument("--overlay", default=None, metavar="MP4", help="also write the video with tracked keypoints")


def run(args: argparse.Namespace) -> int:
    from ..io.video import VideoError, read_video, write_side_by_side
    from .outputs import check_output_path, write_error_message, write_output
    from ..perception import rig_tracker
    from ..rigs import RigConfigError, UnknownRigError, load_rig

    try:
        rig = load_rig(args.rig, allow_code=getattr(args, "allow_code", False))
        tracker, _ = rig_tracker(rig)
        clip = read_video(args.video)
        trajectory = tracker.track(clip.frames, fps=clip.fps if clip.fps == clip.fps else None,
                                   source=args.source, trial_id=args.trial_id or Path(args.video).stem)
    except (UnknownRigError, RigConfigError, VideoError, ValueError) as err:  # tracker config errors: ValueErrors
        print(f"vid2sid track: {err}", file=sys.stderr)
        return 2

    text = json.dumps(trajectory.to_dict())
    flag, target = "--out", args.out
    try:
        if args.out == "-":
            print(text)
        else:
            write_output(Path(args.out), text)
        if args.overlay:
            flag, target = "--overlay", args.overlay
            check_output_path(Path(args.overlay))
            write_side_by_side(args.overlay, clip.frames, None, clip.fps if clip.fps == clip.fps else 30.0,
                               traj_a=trajectory, labels=("tracked", "-"))
    except OSError as err:  # VideoError is an OSError too
        print(f"vid2sid track: {write_error_message(flag, Path(target), err)}", file=sys.stderr)
        return 2
    found = trajectory.valid.mean(axis=0)
    hidden = trajectory.meta.get("occluded") or {}
    summary = ", ".join(f"{n} {100 * f:.0f}%" + (f" ({hidden[n]} frame(s) partly hidden: invalid)" if hidden.get(n)
                                                  else "") for n, f in zip(trajectory.names, found))
    print(f"vid2sid track: {clip.num_frames} frames at {clip.fps:g} Hz from {args.video}; "
          f"keypoints found: {summary}" + ("" if args.out == "-" else f"; wrote {args.out}"), file=sys.stderr)
    return 0 if trajectory.valid.any() else 1
