"""Frame times come from the container's presentation timestamps (a clip with a 1.5 s jump is tracked
with the jump in its trajectory, and a warning), not from an even spacing at the average rate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from vid2sid_ros.cli import main
from vid2sid_ros.io.video import frame_times, write_video

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers.mp4_timing import set_sample_durations  # noqa: E402

def jump_timestamps(path, after_frame: int, jump_s: float) -> None:
    """Rewrite an OpenCV mp4 so that frame ``after_frame`` is presented ``jump_s`` later than an even
    spacing, without re-encoding (:func:`helpers.mp4_timing.set_sample_durations`)."""
    set_sample_durations(path, lambda count, delta, scale: [
        (after_frame - 1, delta), (1, delta + int(round(jump_s * scale))), (count - after_frame, delta)])


@pytest.fixture(scope="module")
def finger_frames():
    from vid2sid_ros.rigs import load_rig

    rig = load_rig("finger")
    twin = rig.make_twin()
    frames = twin.rollout(rig.excitations["train"][0], render=True).frames
    reps = -(-300 // len(frames))
    return np.concatenate([frames] * reps)[:300]


def test_frame_times_follow_the_timestamps_and_warn():
    pts = [k / 30 for k in range(150)] + [k / 30 + 1.5 for k in range(150, 300)]
    t, warn = frame_times(pts, 300 / 11.5, where="clip.mp4")
    assert t[150] - t[149] == pytest.approx(1.5 + 1 / 30)
    assert t[299] == pytest.approx(299 / 30 + 1.5)
    assert warn and "clip.mp4" in warn and "between frames 149 and 150" in warn
    even, none = frame_times([k / 30 for k in range(10)], 30.0, first_at=None)
    assert none is None and even == pytest.approx((np.arange(10) + 1) / 30)


def test_track_keeps_a_timestamp_jump_in_the_trajectory(finger_frames, tmp_path, capsys):
    clip = write_video(tmp_path / "jump.mp4", finger_frames, 30.0)
    jump_timestamps(clip, 150, 1.5)
    out = tmp_path / "traj.json"
    main(["track", str(clip), "--rig", "finger", "--out", str(out)])
    err = capsys.readouterr().err
    t = np.asarray(json.loads(out.read_text())["time"], float)
    assert t.size == 300
    assert t[150] - t[149] == pytest.approx(1.5 + 1 / 30, abs=1e-3)  # was 1 / 26.087 s: 0.75 s early after it
    assert t[0] == pytest.approx(1 / 30, abs=1e-3) and t[299] == pytest.approx(300 / 30 + 1.5, abs=1e-3)
    assert np.allclose(np.diff(t[:150]), 1 / 30, atol=1e-3)
    assert "not evenly spaced" in err and "between frames 149 and 150" in err


def test_track_an_even_clip_as_before(finger_frames, tmp_path, capsys):
    clip = write_video(tmp_path / "even.mp4", finger_frames[:60], 30.0)
    out = tmp_path / "traj.json"
    main(["track", str(clip), "--rig", "finger", "--out", str(out), "--overlay", str(tmp_path / "o.mp4")])
    err = capsys.readouterr().err
    t = np.asarray(json.loads(out.read_text())["time"], float)
    assert t == pytest.approx((np.arange(60) + 1) / 30, abs=1e-6)
    assert "not evenly spaced" not in err and (tmp_path / "o.mp4").stat().st_size > 0


def test_track_clip_keeps_the_jump(finger_frames, tmp_path):
    from vid2sid_ros.io.clip import track_clip
    from vid2sid_ros.rigs import load_rig

    clip = write_video(tmp_path / "jump.mp4", finger_frames, 30.0)
    jump_timestamps(clip, 150, 1.5)
    cfg = load_rig("finger").config.get("tracker")
    if not isinstance(cfg, dict) or "markers" not in cfg:
        pytest.skip("the finger rig's tracker is not a marker config")
    tracked = track_clip(clip, cfg)
    t = tracked.trajectory.time
    assert t[0] == 0.0 and t[150] - t[149] == pytest.approx(1.5 + 1 / 30, abs=1e-3)
    assert any("not evenly spaced" in w for w in tracked.warnings)
