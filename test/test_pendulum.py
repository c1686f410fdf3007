"""The real clip, end to end: track the apple, calibrate with the reasoner, predict the holdout.

The shipped clip is decoded ONCE per session (module fixture, ~10 s on 2 shared cores);
derived clips (shorter, frames removed, marker leaving the frame) are written small and
short into ``tmp_path`` with OpenCV.
"""

from __future__ import annotations

import json

import os
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import cv2
import numpy as np
import pytest

from vid2sid_ros.calibration.loop import CalibrationConfig, run_calibration
from vid2sid_ros.calibration.proposers import make_proposer
from vid2sid_ros.io.video import VideoError
from vid2sid_ros.io.clip import ClipError, track_clip
from vid2sid_ros.rigs import RigConfigError, load_rig
from vid2sid_ros.rigs.trials import clip_real_trial
from vid2sid_ros.sim.pendulum import estimate_start, pendulum_period
from vid2sid_ros.sim.user_model import UserModelError

#: frames kept (half resolution) from the start of the clip to derive the short test clips
_DERIVED_FRAMES = 420
#: holdout bound of the issue: the apple is ~40 px across; a planar hand fit reaches ~8 px
HOLDOUT_BOUND_PX = 6.0


@pytest.fixture(scope="module")
def rig():
    return load_rig("pendulum")


@pytest.fixture(scope="module")
def clip(rig):
    return track_clip(rig.trials[0].source["video"]["path"], rig.tracker, thumb_scale=0.5, thumb_every=1)


@pytest.fixture(scope="module")
def calibrated(rig, clip, tmp_path_factory):
    twin = rig.make_twin()
    real = clip_real_trial(rig, clip, train_fraction=0.6)
    est = estimate_start(real.train[0], rig.parameters)
    params = est.apply(rig.parameters)
    rd = tmp_path_factory.mktemp("pendulum_run")
    res = run_calibration(rig, real, make_proposer("reasoner"),
                          CalibrationConfig(iterations=3, rollout_budget=30, identifiability=False,
                                            final_identifiability=False), rd, parameters=params)
    return real, est, res, rd


def test_clip_is_tracked_everywhere(clip):
    assert clip.trajectory.num_frames == 1299
    assert clip.fps == pytest.approx(59.768, abs=1e-3)
    assert clip.trajectory.valid.all()  # the apple never leaves the frame
    x = clip.trajectory.keypoints[:, 0, 0]
    assert 60 < x.min() < 90 and 480 < x.max() < 500  # first swing: left end ~73 px, right end ~490 px


def test_start_is_read_off_the_clip(calibrated):
    _, est, _, _ = calibrated
    assert est.period_s == pytest.approx(2.08, abs=0.02)  # the issue: "about 2.07 s"
    assert est.values["pivot_y"] < 0  # the pivot is above the frame
    assert 1.0 < est.length_m < est.length_small_angle_m < 1.12


def test_phone_frame_glitches_are_found_and_retimed(calibrated):
    real, _, _, _ = calibrated
    notes = " | ".join(real.meta["retimed"])
    # seen in the clip: one frame dropped before frames 276, 463 and 1290; frame 407 repeats 406
    for frame in ("frame 276: moved", "frame 407: repeats frame 406", "frame 463: moved", "frame 1290: moved"):
        assert frame in notes, notes
    assert len(real.meta["retimed"]) == 4
    assert real.meta["slots"] == 1299 + 3 - 1


def test_real_clip_calibration_meets_the_holdout_bound(calibrated):
    real, est, res, rd = calibrated
    assert res.holdout_mae_px is not None
    assert res.holdout_mae_px <= HOLDOUT_BOUND_PX, f"holdout MAE {res.holdout_mae_px:.2f} px"
    assert res.error_px < 2.5  # training part
    assert res.error_px < res.initial_error_px
    # the identified length swings with the period seen in the video (finite-amplitude formula)
    L = res.values["length"]
    assert pendulum_period(L, est.amplitude_rad) == pytest.approx(est.period_s, rel=5e-3)
    # the camera drifted (measured independently on the wall: about +0.4, -0.45 px/s)
    assert res.values["camera_drift_y"] < -0.2
    assert (rd / "iterations.jsonl").is_file() and (rd / "calibrated_model.xml").is_file()
    import re

    xml = (rd / "calibrated_model.xml").read_text()
    z = float(re.search(r'<body name="apple" pos="0 0 (-?[\d.e+-]+)"', xml).group(1))
    assert z == pytest.approx(-L, rel=1e-5)  # the calibrated model carries the identified length


# -- derived clips -------------------------------------------------------------------------
def _write(path: Path, frames: np.ndarray, fps: float) -> Path:
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (frames.shape[2], frames.shape[1]))
    for f in frames:
        w.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    w.release()
    return path


def _tracker(rig) -> dict:
    cfg = dict(rig.tracker)
    cfg["markers"] = [{**m, "min_area_px": 60} for m in cfg["markers"]]  # half resolution: ~1/4 of the area
    return cfg


def _calibrate(rig, path: Path, fps: float, budget: int = 24):
    clip = track_clip(path, _tracker(rig), thumb_scale=None)
    twin = rig.make_twin()
    real = clip_real_trial(rig, clip, train_fraction=0.6)
    est = estimate_start(real.train[0], rig.parameters)
    res = run_calibration(rig, real, make_proposer("reasoner"),
                          CalibrationConfig(iterations=2, rollout_budget=budget, identifiability=False,
                                            final_identifiability=False), None, parameters=est.apply(rig.parameters))
    return clip, est, res


def test_shorter_clip_still_calibrates(rig, clip, tmp_path):
    frames = clip.thumbnails[:_DERIVED_FRAMES]  # 7 s, half resolution
    path = _write(tmp_path / "short.mp4", frames, clip.fps)
    short, est, res = _calibrate(rig, path, clip.fps)
    assert short.trajectory.num_frames == _DERIVED_FRAMES and short.size == (320, 180)
    assert res.holdout_mae_px is not None and res.holdout_mae_px < 6.0  # in half-resolution pixels
    # scale-free physics survives the resolution change: the length comes from the period
    assert res.values["length"] == pytest.approx(1.06, rel=0.03)


def test_single_frames_removed_are_detected_and_retimed(rig, clip, tmp_path):
    """Frames cut out where the apple is fast: the clip is re-timed and fits as well as the intact one."""
    x = clip.trajectory.keypoints[:_DERIVED_FRAMES, 0, 0]
    fast = [k for k in (100, 160, 220) if abs(x[k + 1] - x[k]) > 8]  # ~10 px/frame near the bottom of a swing
    fast = [int(k + np.argmax(np.abs(np.diff(x[k - 10:k + 10])))) - 10 for k in fast]
    assert len(fast) == 3
    keep = np.setdiff1d(np.arange(_DERIVED_FRAMES), fast)
    path = _write(tmp_path / "drops.mp4", clip.thumbnails[keep], clip.fps)
    dropped, est, res = _calibrate(rig, path, clip.fps)
    real = clip_real_trial(rig, dropped, train_fraction=0.6)
    found = [int(n.split(":")[0].split()[1]) for n in real.meta["retimed"] if "dropped" in n]
    for k in fast:  # frame k was cut: the frame after it (now at index k - number cut before) jumps
        assert k - sum(f < k for f in fast) in found, (fast, real.meta["retimed"])
    assert res.holdout_mae_px is not None and res.holdout_mae_px < 6.0


def test_clip_with_frames_removed_calibrates_and_warns(rig, clip, tmp_path):
    keep = np.r_[0:300, 330:_DERIVED_FRAMES]  # 30 frames (0.5 s) cut out of the holdout part
    path = _write(tmp_path / "cut.mp4", clip.thumbnails[keep], clip.fps)
    cut, est, res = _calibrate(rig, path, clip.fps)
    assert any("frames may be missing" in w for w in cut.warnings), cut.warnings
    assert res.error_px < 2.0  # the training part (frames 0-239) is intact
    assert res.holdout_mae_px is not None and res.holdout_mae_px > res.error_px  # the cut shows in the holdout


def test_marker_leaving_the_frame_is_invalid_not_invented(rig, clip, tmp_path):
    frames = clip.thumbnails[:_DERIVED_FRAMES, :, 30:]  # crop: the apple's left turns leave the frame
    path = _write(tmp_path / "crop.mp4", np.ascontiguousarray(frames), clip.fps)
    crop, est, res = _calibrate(rig, path, clip.fps)
    valid = crop.trajectory.valid[:, 0]
    assert 0.02 < 1 - valid.mean() < 0.3  # some frames lost at the left turns
    assert np.isnan(crop.trajectory.keypoints[~valid]).all()
    name = crop.trajectory.names[0]  # the tracked fraction is reported; below 90 % it is a warning naming the frames
    assert crop.trajectory.meta["tracking"]["tracked"][name] == pytest.approx(valid.mean())
    assert any(f"marker '{name}' tracked in" in w for w in crop.warnings) == (valid.mean() < 0.9)
    assert res.holdout_mae_px is not None and res.holdout_mae_px < 6.0


def test_too_short_or_markerless_or_corrupt_clips_fail_clearly(rig, clip, tmp_path):
    one_second = _write(tmp_path / "one_second.mp4", clip.thumbnails[:60], clip.fps)
    c = track_clip(one_second, _tracker(rig), thumb_scale=None)
    real = clip_real_trial(rig, c, train_fraction=0.6)
    with pytest.raises(UserModelError, match="turning points|passes through the rest"):
        estimate_start(real.train[0], rig.parameters)
    grey = _write(tmp_path / "no_apple.mp4", np.full((30, 180, 320, 3), 200, np.uint8), clip.fps)
    with pytest.raises(ClipError, match="marker 'apple' was not found"):
        track_clip(grey, _tracker(rig), thumb_scale=None)
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(200))
    with pytest.raises(VideoError):
        track_clip(broken, _tracker(rig), thumb_scale=None)
    with pytest.raises(RigConfigError, match="only .* valid frames"):
        clip_real_trial(rig, c, train_fraction=0.1)


def test_demo_command_runs_end_to_end_on_a_short_clip(rig, clip, tmp_path, capsys):
    """`vid2sid demo` on a derived 7 s clip: report written, key numbers printed."""
    from vid2sid_ros.cli import main

    path = _write(tmp_path / "demo_clip.mp4", clip.thumbnails[:_DERIVED_FRAMES], clip.fps)
    cfg = tmp_path / "rig.yaml"
    import yaml

    c = yaml.safe_load(rig.source.read_text())  # the built-in config, with a derived clip
    c["trials"][0]["source"] = {"video": str(path)}
    c["tracker"] = _tracker(rig)
    c["projection"] = {**c["projection"], "width": 320, "height": 180}
    cfg.write_text(yaml.safe_dump(c))
    code = main(["demo", "--out", str(tmp_path / "out"), "--config", str(cfg), "--budget", "20",
                 "--iterations", "2", "--no-variants", "--methods", "none"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "holdout MAE" in out and "identified length" in out and "report:" in out
    from vid2sid_ros.report import REPORT_SIZE_BUDGET

    assert 50_000 < (tmp_path / "out" / "report.html").stat().st_size <= REPORT_SIZE_BUDGET
    assert (tmp_path / "out" / "reasoner" / "trajectories.json").is_file()
    assert "\n\nstopped: " in out  # the summary starts with the stop reason
    # the length is marked UNRELIABLE by calibrate's rule (was: "identified length: 1.0650 m ± 0.0011 m" with no
    # mark after a run that stopped NOT converged)
    stop = next(ln for ln in out.splitlines() if ln.startswith("stopped: "))
    length = next(ln for ln in out.splitlines() if ln.startswith("identified length"))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert ("UNRELIABLE" in length) == bool(summary["length_unreliable_because"]), (stop, length)
    if stop.startswith(("stopped: budget (", "stopped: iterations (")):  # 2 iterations, 20 rollouts: never converged
        assert "UNRELIABLE" in length and "NOT converged, so the values below are" in stop, (stop, length)
    assert "FFMPEG" not in capsys.readouterr().err  # codec notes go to OUT/run.log, not the terminal
    from helpers.browser import chromium, probe_page
    from vid2sid_ros.report import SECTION_IDS

    if chromium() is not None:  # the demo's report as a reader opens it (see test_report_browser.py)
        found = probe_page(tmp_path / "out" / "report.html", tmp_path)
        assert found["errors"] == [] and found["stderr_errors"] == [], found["errors"]
        assert len(found["videos"]) >= 2 and all(v["ok"] for v in found["videos"]), found["videos"]
        assert found["plots"] and all(p["ok"] for p in found["plots"])
        assert set(SECTION_IDS) <= set(found["sections"]), found["sections"]
        assert "Is the identified length consistent with the swing period?" in \
            (tmp_path / "out" / "report.html").read_text()  # the physics checks stay
    code = main(["demo", "--out", str(tmp_path / "out2"), "--config", str(tmp_path / "nope.yaml")])
    assert code == 1 and "not found" in capsys.readouterr().err
    code = main(["demo", "--out", str(tmp_path / "out3"), "--config", str(cfg), "--proposer", "oracle"])
    assert code == 1 and "unknown proposer 'oracle'" in capsys.readouterr().err


def test_demo_footage_video_keeps_the_report_within_its_size_budget(clip, tmp_path):
    """The full demo's report was 3.40 MB (the footage video: 325 frames at 320 px, 0.79 MB in base64)
    against the documented 3 MB. The footage video of the whole clip, with plotly.js and the rest of
    the full demo's report (figures, the run's overlay, the page: measured REST), fits the budget,
    and stays a readable video (>= 100 frames, >= 240 px wide)."""
    import base64

    from vid2sid_ros.commands.demo import _overlay_video
    from vid2sid_ros.report import REPORT_SIZE_BUDGET
    from vid2sid_ros.report.page import _plotly_gz

    T = clip.trajectory.num_frames
    (path,) = _overlay_video(tmp_path, clip, clip.trajectory, {}, int(0.6 * T), np.arange(T))
    embedded = len(base64.b64encode(path.read_bytes()))
    rest = 660_000  # the full demo's report less plotly.js and this video (measured 0.654 MB)
    assert len(_plotly_gz()) + embedded + rest <= REPORT_SIZE_BUDGET, embedded
    cap = cv2.VideoCapture(str(path))
    n = 0
    while cap.read()[0]:
        n += 1
    assert n >= 100 and cap.get(cv2.CAP_PROP_FRAME_WIDTH) >= 240, (n, cap.get(cv2.CAP_PROP_FRAME_WIDTH))
