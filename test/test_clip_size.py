"""A clip whose frame size differs from the rig's camera is refused (one line, exit 2), at rig load for
`calibrate` and before tracking for `track`: its pixels are not the pixels the twin projects to."""

from __future__ import annotations

import numpy as np
import pytest

from vid2sid_ros.cli import main
from vid2sid_ros.rigs import RigConfigError, load_rig
from test_track_to_calibrate import SLIDER_RIG_HEAD, USER_MJCF, _red_disc_clip
from vid2sid_ros.io.video import write_video


def _clip(path, w: int, h: int, n: int = 12):
    frames = [np.full((h, w, 3), 40, np.uint8) for _ in range(n)]
    return write_video(path, frames, 20.0)


def _rig(tmp_path, clip_name: str, camera_line: str | None = None) -> str:
    head = SLIDER_RIG_HEAD if camera_line is None else "\n".join(
        camera_line if ln.startswith("camera:") else ln for ln in SLIDER_RIG_HEAD.splitlines()) + "\n"
    (tmp_path / "slider.xml").write_text(USER_MJCF)
    (tmp_path / "rig.yaml").write_text(
        head + "excitations: {push: {kind: sine, amplitude: 0.5, frequency: 1, duration: 1, rate: 20}}\n"
        f"trials: [{{name: run1, source: {{video: {clip_name}}}, excitation: push}}]\n")
    return str(tmp_path / "rig.yaml")


@pytest.mark.parametrize("w,h", [(320, 240), (214, 120)])
def test_calibrate_refuses_a_clip_of_another_size_than_the_camera(tmp_path, capsys, w, h):
    _clip(tmp_path / "big.mp4", w, h)
    rig = _rig(tmp_path, "big.mp4")  # camera 160 x 120
    with pytest.raises(RigConfigError, match=rf"clip big.mp4 is {w}x{h} px but the rig's camera is 160x120 px"):
        load_rig(rig)
    assert main(["calibrate", "--rig", rig, "--out", str(tmp_path / "run"), "--no-report"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{w}x{h} px" in err[0] and "160x120 px" in err[0], err
    assert not (tmp_path / "run").exists()


def test_camera_info_size_is_the_one_compared(tmp_path):
    (tmp_path / "cam.yaml").write_text(
        "image_width: 320\nimage_height: 240\ncamera_matrix: {rows: 3, cols: 3, data: [257, 0, 160, 0, 257, 120, "
        "0, 0, 1]}\ndistortion_model: plumb_bob\ndistortion_coefficients: {rows: 1, cols: 5, data: [0, 0, 0, 0, 0]}\n")
    cam = "camera: {camera_info: cam.yaml, pose: {position: [0, -2, 0], look_at: [0, 0, 0]}}"
    _clip(tmp_path / "big.mp4", 640, 480)
    with pytest.raises(RigConfigError, match=r"640x480 px but the rig's camera.camera_info \(cam.yaml\) is 320x240"):
        load_rig(_rig(tmp_path, "big.mp4", cam))
    _clip(tmp_path / "ok.mp4", 320, 240)
    assert load_rig(_rig(tmp_path, "ok.mp4", cam)).trials  # the same size loads


def test_track_refuses_a_clip_of_another_size_than_the_camera(tmp_path, capsys):
    _red_disc_clip(tmp_path / "ok.mp4", 12)
    rig = _rig(tmp_path, "ok.mp4")
    big = _clip(tmp_path / "big.mp4", 320, 240)
    out = tmp_path / "t.json"
    assert main(["track", str(big), "--rig", rig, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "320x240 px but the rig's camera is 160x120 px" in err[0], err
    assert not out.exists()
    assert main(["track", str(tmp_path / "ok.mp4"), "--rig", rig, "--out", str(out)]) == 0
