"""``vid2sid track VIDEO --rig RIG.yaml --out traj.json``: video file -> keypoint trajectory.

Decodes the video, runs the rig's marker tracker on every frame and writes the
trajectory as JSON (:meth:`vid2sid_ros.core.trajectory.Trajectory.to_dict`; lost
markers are ``null`` with ``valid: false``). Optionally writes an overlay mp4 of the
tracked keypoints. Exit codes: 0 success, 2 bad input (missing/corrupt video, unknown
rig, unsupported tracker, unknown excitation), 1 when no keypoint was ever found.

With ``--excitation NAME`` (one of the rig's excitations, the command the robot was given
while the clip was filmed) the output is a real trial instead — the
:class:`~vid2sid_ros.core.trial.RealTrial` JSON that ``vid2sid calibrate
--real FILE`` reads — with the trajectory paired to that excitation by command step (a
frame at time t closes command period ``round(t · rate) − 1``, the twin's convention, so a
camera rate different from the command rate pairs by time). ``--split holdout`` files the clip as a holdout trial, ``--append`` adds it to an
existing trial file. From a clip to a calibration::

    vid2sid track step.mp4  --rig finger --excitation step --out trial.json
    vid2sid track chirp.mp4 --rig finger --excitation chirp --split holdout --append --out trial.json
    vid2sid calibrate --rig finger --real trial.json --out runs/from_video
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path


HELP = "track the markers of a rig in a video file and write the keypoint trajectory as JSON"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("video", help="input video file (mp4, avi, ...)")
    parser.add_argument("--rig", required=True, metavar="RIG.yaml|NAME",
                        help="the rig whose tracker is used: your rig config (RIG.yaml) or a built-in rig name")
    parser.add_argument("--allow-code", action="store_true",
                        help="allow a module:function rig reference (runs that code; also VID2SID_ALLOW_CODE=1)")
    parser.add_argument("--out", default="-", help="output JSON file ('-' = stdout, the default)")
    parser.add_argument("--source", default="real", help="trajectory source label (default: real)")
    parser.add_argument("--trial-id", default=None, help="trial id (default: the video's file stem)")
    parser.add_argument("--overlay", default=None, metavar="MP4", help="also write the video with tracked keypoints")
    parser.add_argument("--excitation", default=None, metavar="NAME",
                        help="the rig excitation commanded during the clip: write a real trial that calibrate reads "
                             "(--real FILE) instead of a bare trajectory")
    parser.add_argument("--split", choices=["train", "holdout"], default="train",
                        help="with --excitation: file the clip as a training (default) or holdout trial")
    parser.add_argument("--append", action="store_true",
                        help="with --excitation: add the trial to the real-trial file --out instead of replacing it")


def run(args: argparse.Namespace) -> int:
    from ..io.sources import SourceError, check_clip_size
    from ..io.video import VideoError, frame_times, iter_video, video_info
    from .outputs import check_output_path, write_error_message, write_output
    from ..perception import rig_tracker
    from ..rigs import RigConfigError, UnknownRigError, load_rig

    # refused before the clip is tracked: a FIFO --out would block the write until a reader came
    for flag, target in (("--out", None if args.out == "-" else args.out), ("--overlay", args.overlay)):
        try:
            if target:
                check_output_path(Path(target))
        except OSError as err:
            print(f"vid2sid track: {write_error_message(flag, Path(target), err)}", file=sys.stderr)
            return 2
    try:
        rig = load_rig(args.rig, allow_code=getattr(args, "allow_code", False))
        tracker, _ = rig_tracker(rig)
        cfg = getattr(rig, "config", None) or {}
        check_clip_size(args.video, cfg, where="vid2sid track", base=cfg.get("_dir"))
        fps = float(video_info(args.video)["fps"])
        pts: list[float] = []  # streamed: one frame in memory at a time, whatever the clip's length
        trajectory = tracker.track(iter_video(args.video, timestamps=pts), fps=fps if fps > 0 else None,
                                   source=args.source, trial_id=args.trial_id or Path(args.video).stem)
    except SourceError as err:
        print(err, file=sys.stderr)
        return 2
    except (UnknownRigError, RigConfigError, VideoError, ValueError) as err:  # tracker config errors: ValueErrors
        print(f"vid2sid track: {err}", file=sys.stderr)
        return 2
    import numpy as np

    # frame k closes period k: the first frame one typical interval after 0, then the container's timestamps
    times, uneven = frame_times(pts, fps, where=str(args.video), first_at=None)
    trajectory = dataclasses.replace(trajectory, time=times)
    if uneven:
        trajectory.meta["warnings"] = list(trajectory.meta.get("warnings") or []) + [uneven]
        print(f"vid2sid track: warning: {uneven}", file=sys.stderr)
    rate = (1.0 / float(np.median(np.diff(times)))) if len(times) > 1 else (fps if fps > 0 else 30.0)

    if args.excitation is not None or args.append:
        try:
            text = json.dumps(_real_trial_doc(args, rig, trajectory))
        except (ValueError, OSError) as err:
            print(f"vid2sid track: {err}", file=sys.stderr)
            return 2
    else:
        text = json.dumps(trajectory.to_dict())
    flag, target = "--overlay", args.overlay
    wrote_overlay = None
    try:
        if args.overlay:  # refused before --out is written
            check_output_path(Path(args.overlay))
        flag, target = "--out", args.out
        if args.out == "-":
            print(text)
        else:
            write_output(Path(args.out), text)
        if args.overlay:
            flag, target = "--overlay", args.overlay
            wrote_overlay = _write_overlay(Path(args.overlay), args.video, trajectory, rate)
    except OSError as err:  # VideoError is an OSError too
        print(f"vid2sid track: {write_error_message(flag, Path(target), err)}", file=sys.stderr)
        return 2
    found = trajectory.valid.mean(axis=0)
    hidden = trajectory.meta.get("occluded") or {}
    summary = ", ".join(f"{n} {100 * f:.0f}%" + (f" ({hidden[n]} frame(s) partly hidden: invalid)" if hidden.get(n)
                                                  else "") for n, f in zip(trajectory.names, found))
    print(f"vid2sid track: {trajectory.num_frames} frames at {rate:g} Hz from {args.video}; "
          f"keypoints found: {summary}" + ("" if args.out == "-" else f"; wrote {args.out}")
          + (f"; wrote the overlay video {wrote_overlay}" if wrote_overlay else ""), file=sys.stderr)
    from ..perception.quality import check_tracking, min_tracked_fraction

    for w in check_tracking(trajectory, min_fraction=min_tracked_fraction(rig.config, rig.where)).warnings:
        print(f"warning: {w}", file=sys.stderr)  # the check every trial source runs
    own = _trial_of_clip(rig, args.video)
    listing = _excitation_listing(rig)
    if args.excitation is None and own is not None:  # the config already pairs this clip with its command
        print(f"vid2sid track: this clip is trial '{own}' of {rig.source}: `calibrate {rig.source}` tracks it "
              "the same way and pairs it with its trial's command, nothing more to name (only for a real-trial "
              "file, calibrate --real FILE: --excitation NAME" + (f" ({listing})" if listing else "") + ")",
              file=sys.stderr)
    elif args.excitation is None and args.out != "-":  # a clip the config does not know: calibrate needs its command
        print("vid2sid track: this clip is no trial of the rig config, so calibrate cannot tell which command it "
              "was filmed under: add it as a trial (trials: source: video) or write a real trial with "
              "--excitation NAME" + (f" ({listing})" if listing else "") + " and pass it to calibrate --real FILE",
              file=sys.stderr)
    return 0 if trajectory.valid.any() else 1


def _trial_of_clip(rig, video: str) -> str | None:
    """The name of the rig config's trial whose video source is this file, else None."""
    try:
        clip = Path(video).resolve()
        for t in getattr(rig, "trials", None) or ():
            src = (t.source or {}).get("video")
            path = src.get("path") if isinstance(src, dict) else src
            if path and Path(path).resolve() == clip:
                return t.name
    except (OSError, AttributeError, TypeError):
        return None
    return None


def _write_overlay(path: Path, video: str, trajectory, fps: float) -> Path:
    """The clip with its tracked keypoints drawn on it (mp4), decoded again frame by frame
    (memory does not grow with the clip's length); written atomically.

    Raises:
        VideoError: the encoder cannot write ``path``. OSError: the directory cannot be written.
    """
    import cv2

    from ..core.files import atomic_output
    from ..io.video import VideoError, draw_keypoints, iter_video

    with atomic_output(path, suffix=".mp4") as tmp:
        writer = None
        try:
            for k, frame in enumerate(iter_video(video, check_length=False)):
                if k >= trajectory.num_frames:
                    break
                bgr = cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)
                draw_keypoints(bgr, trajectory.keypoints[k], trajectory.valid[k], filled=True,
                               names=list(trajectory.names))
                if writer is None:
                    writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter_fourcc(*"mp4v"), float(fps),
                                             (bgr.shape[1], bgr.shape[0]))
                    if not writer.isOpened():
                        raise VideoError(f"{path}: the mp4v encoder cannot write here")
                writer.write(bgr)
        finally:
            if writer is not None:
                writer.release()
    return path


def _rig_excitations(rig) -> dict:
    """``NAME -> Excitation``: the config's named ``excitations:`` profiles (whole), then the rig's
    train/holdout sets (a built-in twin's, or one per trial part of a config with trials)."""
    excs = dict(getattr(rig, "named_excitations", None) or {})
    for k in ("train", "holdout"):
        for e in (rig.excitations or {}).get(k, ()):
            excs.setdefault(e.name, e)
    return excs


def _excitation_listing(rig) -> str:
    """The names ``--excitation`` takes, excitations apart from trial parts.

    ``"this rig's excitations: chirp, multisine; trial parts: decay (no command: free decay)"``.
    Excitations are the config's named profiles and a built-in rig's sets; a trial part
    (``meta["trial"]``, from the config's ``trials:``) whose name is not a profile's is listed
    separately, with its command's profile or "no command: free decay" for ``excitation: none``
    (such a part used to be listed as an excitation). Empty when the rig has neither.
    """
    named = dict(getattr(rig, "named_excitations", None) or {})
    excitations, parts = list(named), []
    for name, e in _rig_excitations(rig).items():
        if name in named:
            continue
        trial = (e.meta or {}).get("trial")
        if trial is None:
            excitations.append(name)
            continue
        cmd = next((t.excitation for t in (getattr(rig, "trials", None) or ()) if t.name == trial), None)
        free = cmd is None or (e.meta or {}).get("kind") == "free_decay"
        parts.append(f"{name} (" + ("no command: free decay" if free else getattr(cmd, "name", trial)) + ")")
    out = [f"this rig's excitations: {', '.join(excitations)}"] if excitations else []
    if parts:
        out.append(f"trial parts: {', '.join(parts)}")
    return "; ".join(out)


def _real_trial_doc(args: argparse.Namespace, rig, trajectory) -> dict:
    """The RealTrial JSON document: ``trajectory`` paired with ``--excitation`` (appended with ``--append``).

    Raises:
        ValueError: no/unknown excitation (lists the rig's), an unreadable ``--append`` file,
            or a clip whose keypoints differ from the file's trials.
    """
    import dataclasses

    import numpy as np

    from ..core.trial import RealTrial

    excs = _rig_excitations(rig)
    if args.excitation is None:
        raise ValueError("--append needs --excitation NAME (the command the clip was filmed under)")
    if args.excitation not in excs:
        raise ValueError(f"--excitation: unknown excitation {args.excitation!r} of rig '{rig.name}'; valid: "
                         f"{_excitation_listing(rig) or '(the rig defines none)'}")
    exc = excs[args.excitation]
    # a frame at time t closes command period k = t * rate - 1 (the twin's convention, frame k at (k + 1) / rate)
    steps = np.rint(np.asarray(trajectory.time, float) * exc.rate).astype(int) - 1
    if np.any(np.diff(steps) <= 0):
        raise ValueError(f"{args.video}: frame times do not map to distinct command steps at {exc.rate:g} Hz "
                         "(the camera is faster than the command rate: frames would share a step)")
    traj = dataclasses.replace(trajectory, steps=steps)
    out = Path(args.out) if args.out != "-" else None
    if args.append and out is not None and out.is_file():
        old = RealTrial.load(out)
        if tuple(old.keypoint_names) != tuple(traj.names):
            raise ValueError(f"{out}: its trials track {old.keypoint_names}, this clip {traj.names}")
    else:
        old = None
    train = list(old.train) if old else []
    train_e = list(old.train_excitations) if old else []
    hold = list(old.holdout) if old else []
    hold_e = list(old.holdout_excitations) if old else []
    (train if args.split == "train" else hold).append(traj)
    (train_e if args.split == "train" else hold_e).append(exc)
    if not train:
        raise ValueError("a real trial needs at least one training clip: track one without --split holdout first")
    src = f"video {Path(args.video).name}" + (f" + {old.source}" if old and old.source else "")
    trial = RealTrial(train, train_e, hold, hold_e, source=src,
                      meta={"tracked_with": f"vid2sid track --rig {rig.name}"})
    return trial.to_dict()
