"""Video I/O: mp4 round trip, corrupt/truncated/missing files, side-by-side videos, `vid2sid track`."""

import json
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from vid2sid_ros.core.trajectory import Trajectory, per_keypoint_mae_px  # noqa: E402
from vid2sid_ros.io.video import (VideoError, iter_video, read_video, video_info, write_side_by_side,  # noqa: E402
                                  write_video)


def _moving_square_clip(T=12, H=48, W=64):
    frames = np.zeros((T, H, W, 3), np.uint8)
    frames[..., 2] = 60
    for k in range(T):
        frames[k, 10:26, 2 + 3 * k:18 + 3 * k] = (220, 40, 40)
    return frames


@pytest.fixture(scope="module")
def finger_clip(tmp_path_factory):
    """A rendered finger rollout written to mp4, with its ground truth."""
    from vid2sid_ros.sim.registry import make_rig

    rig = make_rig("finger")
    twin = rig.make_twin()
    r = twin.rollout(rig.excitations["holdout"][1], render=True)
    twin.close()
    path = write_video(tmp_path_factory.mktemp("video") / "finger.mp4", r.frames, 30.0)
    return path, r


def test_mp4_round_trip(tmp_path):
    frames = _moving_square_clip()
    path = write_video(tmp_path / "sub" / "clip.mp4", frames, 30.0)
    assert path.is_file() and path.stat().st_size > 0
    info = video_info(path)
    assert info == {"frames": 12, "fps": 30.0, "width": 64, "height": 48}
    clip = read_video(path)
    assert clip.frames.shape == frames.shape and clip.frames.dtype == np.uint8
    assert clip.fps == 30.0 and clip.duration == pytest.approx(0.4)
    assert np.abs(clip.frames.astype(int) - frames).mean() < 6  # lossy codec, RGB order kept
    assert clip.frames[5, 18, 20, 0] > 150 and clip.frames[5, 18, 20, 2] < 110
    assert sum(1 for _ in iter_video(path)) == 12
    assert read_video(path, max_frames=4).num_frames == 4


def test_grayscale_frames_are_accepted(tmp_path):
    gray = np.tile(np.linspace(0, 255, 32, dtype=np.uint8), (5, 16, 1))
    clip = read_video(write_video(tmp_path / "g.mp4", gray, 10.0))
    assert clip.frames.shape == (5, 16, 32, 3)


def test_missing_empty_garbage_truncated_and_corrupt_files_raise_video_error(tmp_path):
    good = write_video(tmp_path / "good.mp4", _moving_square_clip(T=30, H=96, W=128), 30.0)
    data = good.read_bytes()
    with pytest.raises(VideoError, match="not found.*missing.mp4"):
        read_video(tmp_path / "missing.mp4")
    (tmp_path / "empty.mp4").write_bytes(b"")
    with pytest.raises(VideoError, match="empty.*0 bytes"):
        read_video(tmp_path / "empty.mp4")
    (tmp_path / "garbage.mp4").write_bytes(np.random.default_rng(0).bytes(4000))
    with pytest.raises(VideoError, match="cannot decode.*garbage.mp4"):
        read_video(tmp_path / "garbage.mp4")
    (tmp_path / "half.mp4").write_bytes(data[: len(data) // 2])  # index (moov) lost
    with pytest.raises(VideoError, match="half.mp4"):
        read_video(tmp_path / "half.mp4")
    with pytest.raises(VideoError, match="is a directory, expected a regular file"):
        read_video(tmp_path)


def test_frames_missing_from_a_file_are_reported_as_truncation(tmp_path):
    # an AVI (MJPG) keeps its index at the end too; drop the index and some frame data
    path = write_video(tmp_path / "clip.avi", _moving_square_clip(T=40), 30.0, codec="MJPG")
    data = path.read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    with pytest.raises(VideoError, match=r"cut.avi: truncated.*decoded \d+ of 40 declared frames"):
        read_video(cut)
    assert len(read_video(cut, check_length=False).frames) < 40  # the readable part, on request


def test_writing_empty_or_malformed_frames_raises(tmp_path):
    with pytest.raises(VideoError, match="no frames"):
        write_video(tmp_path / "x.mp4", np.zeros((0, 8, 8, 3), np.uint8), 30)
    with pytest.raises(VideoError, match="empty frames"):
        write_video(tmp_path / "x.mp4", np.zeros((3, 0, 8, 3), np.uint8), 30)
    with pytest.raises(VideoError, match="uint8"):
        write_video(tmp_path / "x.mp4", np.zeros((3, 8, 8, 3), np.float64), 30)
    with pytest.raises(VideoError, match="same shape"):
        write_video(tmp_path / "x.mp4", [np.zeros((8, 8, 3), np.uint8), np.zeros((9, 8, 3), np.uint8)], 30)
    with pytest.raises(VideoError, match="fps"):
        write_video(tmp_path / "x.mp4", np.zeros((3, 8, 8, 3), np.uint8), 0)
    with pytest.raises(VideoError, match="None"):
        write_video(tmp_path / "x.mp4", None, 30)


def test_side_by_side_and_overlay_videos(tmp_path, finger_clip):
    _, r = finger_clip
    traj = r.trajectory
    shifted = Trajectory(traj.time, traj.keypoints + 8.0, traj.valid, traj.names, "sim")
    small = r.frames[:, ::2, ::2].copy()  # a half-size second clip is resized to match
    p = write_side_by_side(tmp_path / "sbs.mp4", r.frames, small, 30.0, traj_a=traj, traj_b=shifted)
    info = video_info(p)
    assert (info["width"], info["height"], info["frames"]) == (640, 240, r.frames.shape[0])
    clip = read_video(p)
    # the left panel's own (filled) tip dot is drawn in its palette colour on the tip marker
    x, y = np.round(traj.keypoint("tip")[10]).astype(int)
    assert clip.frames[10, y, x, 1] > 150 and clip.frames[10, y, x, 2] > 150  # keypoint 3 is cyan
    assert clip.frames[10, y, x, 0] < 120  # ... drawn over the red marker
    p2 = write_side_by_side(tmp_path / "overlay.mp4", r.frames, None, 30.0, traj_a=traj, traj_b=shifted)
    assert video_info(p2)["width"] == 320
    with pytest.raises(VideoError, match="frames_b"):
        write_side_by_side(tmp_path / "bad.mp4", r.frames, np.zeros((0, 4, 4, 3), np.uint8), 30.0)


def test_tracking_the_mp4_recovers_ground_truth(finger_clip):
    from vid2sid_ros.perception.markers import MarkerTracker
    from vid2sid_ros.sim.mujoco_finger import default_config

    path, r = finger_clip
    clip = read_video(path)
    traj = MarkerTracker.from_config(default_config()["tracker"]).track(clip.frames, fps=clip.fps)
    assert traj.valid.all()
    for name, err in per_keypoint_mae_px(traj, r.trajectory).items():
        assert err < 0.6, (name, err)  # mp4v compression adds a little to the 0.1 px render->track error


def test_track_command_writes_trajectory_json(tmp_path, finger_clip, capsys):
    from vid2sid_ros.cli import main

    path, r = finger_clip
    out = tmp_path / "traj.json"
    overlay = tmp_path / "tracked.mp4"
    assert main(["track", str(path), "--rig", "finger", "--out", str(out), "--overlay", str(overlay)]) == 0
    traj = Trajectory.from_dict(json.loads(out.read_text()))
    assert traj.names == ("proximal", "middle", "tip") and traj.num_frames == r.frames.shape[0]
    assert traj.trial_id == "finger" and traj.source == "real"
    assert np.allclose(traj.time, r.trajectory.time)
    assert per_keypoint_mae_px(traj, r.trajectory)["tip"] < 0.6
    assert video_info(overlay)["frames"] == r.frames.shape[0]
    assert "tip 100%" in capsys.readouterr().err


def test_track_command_bad_inputs_exit_2(tmp_path, capsys):
    from vid2sid_ros.cli import main

    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00" * 100)
    assert main(["track", str(bad), "--rig", "finger", "--out", str(tmp_path / "t.json")]) == 2
    assert "cannot decode" in capsys.readouterr().err
    assert main(["track", str(tmp_path / "nope.mp4"), "--rig", "finger"]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["track", str(bad), "--rig", "nope"]) == 2
    assert "unknown rig 'nope'; built-in rigs: finger" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()
