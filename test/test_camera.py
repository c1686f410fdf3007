"""core/camera.py: the pinhole camera (CameraInfo YAML, distortion, REP 103 pose)."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
import yaml

from vid2sid_ros.core.camera import (CameraError, PinholeCamera, camera_from_config, load_camera_info,
                                     look_at_rpy, matrix_to_rpy, rpy_to_matrix)
from vid2sid_ros.sim.image_projection import ImageProjection


def _points(rng, cam: PinholeCamera, n: int = 50) -> np.ndarray:
    """World points in front of ``cam`` (1-4 m along its optical axis, spread over the view)."""
    z = rng.uniform(1.0, 4.0, n)
    x = rng.uniform(-0.4, 0.4, n) * z
    y = rng.uniform(-0.3, 0.3, n) * z
    pc = np.stack([x, y, z], axis=1)
    return pc @ cam.rotation.T + np.asarray(cam.position)


@pytest.mark.parametrize("dist", [(0.0, 0.0, 0.0, 0.0, 0.0), (-0.28, 0.07, 0.001, -0.0015, 0.01),
                                  (0.3, -0.1, 0.002, 0.001, 0.02, 0.05, -0.01, 0.004)])
def test_project_matches_cv2_projectPoints(dist):
    rng = np.random.default_rng(3)
    cam = PinholeCamera(640, 480, fx=612.5, fy=608.1, cx=331.2, cy=236.9, distortion=dist,
                        position=(0.3, -1.2, 0.8), roll=0.05, pitch=0.4, yaw=1.2)
    pts = _points(rng, cam)
    ours = cam.project(pts)
    rvec, _ = cv2.Rodrigues(cam.rotation.T)          # world -> optical rotation
    tvec = -cam.rotation.T @ np.asarray(cam.position)
    ref, _ = cv2.projectPoints(pts, rvec, tvec, cam.camera_matrix, np.asarray(dist))
    assert np.max(np.abs(ours - ref[:, 0])) < 1e-6


def test_undistort_inverts_the_distortion():
    rng = np.random.default_rng(4)
    cam = PinholeCamera(640, 480, 600, 600, 320, 240, distortion=(-0.25, 0.06, 0.001, -0.001, 0.0))
    pts = _points(rng, cam)
    ideal = PinholeCamera(640, 480, 600, 600, 320, 240).project(pts)
    assert np.max(np.abs(cam.undistort_pixels(cam.project(pts)) - ideal)) < 1e-3
    assert not np.allclose(cam.project(pts), ideal, atol=1.0)  # the distortion is not negligible here


def test_pose_convention_rep103():
    """rpy = 0 looks along world +x, image right = world -y, image down = world -z; pitch > 0 looks down."""
    cam = PinholeCamera(640, 480, 500, 500, 319.5, 239.5)
    u = cam.project(np.array([[2.0, 0, 0], [2.0, -0.2, 0], [2.0, 0, -0.2], [-2.0, 0, 0]]))
    assert np.allclose(u[0], [319.5, 239.5])
    assert u[1, 0] > 319.5 and abs(u[1, 1] - 239.5) < 1e-9    # -y is to the right
    assert u[2, 1] > 239.5 and abs(u[2, 0] - 319.5) < 1e-9    # -z is down
    assert np.all(np.isnan(u[3]))                              # behind the camera
    down = PinholeCamera(640, 480, 500, 500, 319.5, 239.5, pitch=0.5)
    assert down.project(np.array([[2.0, 0, 0]]))[0, 1] < 239.5  # looking down: the horizon moves up


def test_look_at_and_rpy_round_trip():
    pos, target = (1.0, -2.0, 1.5), (0.1, 0.3, 0.2)
    r, p, y = look_at_rpy(pos, target, roll=0.2)
    cam = PinholeCamera(320, 240, 300, 300, 160.5, 120.5, position=pos, roll=r, pitch=p, yaw=y)
    assert np.allclose(cam.project(np.array([target]))[0], [160.5, 120.5], atol=1e-9)
    rng = np.random.default_rng(5)
    for _ in range(20):
        a = rng.uniform([-3, -1.5, -3], [3, 1.5, 3])
        assert np.allclose(rpy_to_matrix(*matrix_to_rpy(rpy_to_matrix(*a))), rpy_to_matrix(*a), atol=1e-12)
    with pytest.raises(CameraError, match="coincides"):
        look_at_rpy(pos, pos)


def _camera_info(path, **over):
    info = {"image_width": 640, "image_height": 480, "camera_name": "lab_cam",
            "camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0.0, 322.0, 0.0, 611.0, 241.0, 0.0, 0.0, 1.0]},
            "distortion_model": "plumb_bob",
            "distortion_coefficients": {"rows": 1, "cols": 5, "data": [-0.1, 0.02, 0.0, 0.0, 0.0]},
            "rectification_matrix": {"rows": 3, "cols": 3, "data": [1, 0, 0, 0, 1, 0, 0, 0, 1]},
            "projection_matrix": {"rows": 3, "cols": 4, "data": [610, 0, 322, 0, 0, 611, 241, 0, 0, 0, 1, 0]}}
    info.update(over)
    path.write_text(yaml.safe_dump(info))
    return path


def test_camera_info_yaml_round_trip(tmp_path):
    p = _camera_info(tmp_path / "cam.yaml")
    got = load_camera_info(p)
    assert (got["width"], got["height"], got["fx"], got["fy"], got["cx"], got["cy"]) == (640, 480, 610, 611, 322, 241)
    assert got["distortion"] == (-0.1, 0.02, 0.0, 0.0, 0.0) and got["name"] == "lab_cam"
    cam = camera_from_config({"camera_info": "cam.yaml", "pose": {"position": [0, 0, 1], "look_at": [2, 0, 0]}},
                             source="rig.yaml", base=tmp_path)
    assert cam.fx == 610 and cam.distortion_model == "plumb_bob"
    # and back out in the same format
    again = _camera_info(tmp_path / "again.yaml", **cam.camera_info())
    assert load_camera_info(again) == got


@pytest.mark.parametrize("over, key", [
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0, 322, 0, 611, 241, 0, 0]}}, "camera_matrix"),
    ({"camera_matrix": {"rows": 2, "cols": 3, "data": [610.0, 0, 322, 0, 611, 241]}}, "camera_matrix"),
    ({"distortion_coefficients": {"rows": 1, "cols": 4, "data": [0.1, 0, 0, 0]}}, "distortion_coefficients"),
    ({"distortion_model": "equidistant"}, "distortion_model"),
    ({"image_width": "640"}, "image_width"),
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0, 322, 0, 611, 241, 0, 0, "x"]}}, "camera_matrix.data[8]"),
])
def test_camera_info_errors_name_file_and_key(tmp_path, over, key):
    p = _camera_info(tmp_path / "bad.yaml", **over)
    with pytest.raises(CameraError) as err:
        load_camera_info(p)
    msg = str(err.value)
    assert f"{p}:{key}" in msg and "\n" not in msg


def test_config_block_errors(tmp_path):
    with pytest.raises(CameraError, match=r"rig.yaml:camera.fxx: unknown key \(did you mean fx\?\)"):
        camera_from_config({"width": 640, "height": 480, "fx": 500, "fy": 500, "fxx": 1}, source="rig.yaml")
    with pytest.raises(CameraError, match=r"rig.yaml:camera.pose.look_at: expected \[x, y, z\]"):
        camera_from_config({"width": 64, "height": 48, "fx": 50, "fy": 50, "pose": {"look_at": [1, 2]}},
                           source="rig.yaml")
    with pytest.raises(CameraError, match=r"rig.yaml:camera.fovy: expected a vertical field of view"):
        camera_from_config({"width": 64, "height": 48, "fovy": 190}, source="rig.yaml")
    with pytest.raises(CameraError, match=r"rig.yaml:camera.pose: give one of look_at, rpy"):
        camera_from_config({"fovy": 50, "pose": {"look_at": [1, 0, 0], "rpy": [0, 0, 0]}}, source="rig.yaml")
    with pytest.raises(CameraError, match=r"rig.yaml:camera.camera_info: file not found"):
        camera_from_config({"camera_info": "nope.yaml"}, source="rig.yaml", base=tmp_path)
    with pytest.raises(CameraError, match=r"rig.yaml:camera.pose.lookat: unknown key \(did you mean look_at\?\)"):
        camera_from_config({"width": 64, "height": 48, "fx": 50, "fy": 50, "pose": {"lookat": [1, 2, 3]}},
                           source="rig.yaml")


def test_config_defaults_fovy_rpy_and_up():
    cam = camera_from_config({"height": 480, "fovy": 60.0, "pose": {"position": [0, 0, 1], "rpy": [0.1, 0.2, 0.3]}})
    assert cam.width == 640 and math.isclose(cam.fy, 240 / math.tan(math.radians(30))) and cam.fx == cam.fy
    assert (cam.roll, cam.pitch, cam.yaw) == (0.1, 0.2, 0.3) and (cam.cx, cam.cy) == (319.5, 239.5)
    # look_at with up = +z keeps the horizon level: same as look_at_rpy with roll 0
    pos, target = [2.0, 1.0, 1.5], [0.0, 0.0, 0.3]
    lvl = camera_from_config({"fx": 500, "pose": {"position": pos, "look_at": target}})
    assert np.allclose((lvl.roll, lvl.pitch, lvl.yaw), look_at_rpy(pos, target), atol=1e-12)
    # up = world -y seen from above: image up is world -y
    top = camera_from_config({"fx": 500, "pose": {"position": [0, 0, 2], "look_at": [0, 0, 0], "up": [0, -1, 0]}})
    a, b = top.project(np.array([[0, 0, 0], [0, -0.1, 0]]))
    assert b[1] < a[1] and abs(b[0] - a[0]) < 1e-9


def test_pose_nuisance_fields():
    cam = PinholeCamera(320, 240, 300, 300, 160, 120, position=(0, 0, 1))
    moved = cam.with_values({"x": 0.5, "yaw": 0.1, "k1": -0.2})
    assert moved.position == (0.5, 0.0, 1.0) and moved.yaw == 0.1 and moved.distortion[0] == -0.2
    with pytest.raises(CameraError, match="unknown camera field"):
        cam.with_values({"pan": 0.1})


@pytest.mark.parametrize("distance", [0.0, 2.5])
def test_planar_projection_is_a_special_case(distance):
    """The pendulum's ImageProjection (orthographic or perspective) equals its pinhole equivalent."""
    rng = np.random.default_rng(6)
    proj = ImageProjection(640, 360, origin_x=301.0, origin_y=-250.0, px_per_m=420.0, roll=0.07,
                           distance=distance, drift_x=0.8, drift_y=-1.1)
    anchor = np.array([0.2, -0.1, 0.4])
    pts = anchor + rng.normal(0, 0.4, (30, 3))
    t = 3.0
    ref = proj.project(pts[None], anchor, np.array([t]))[0]
    cam = proj.as_camera(anchor, t)
    assert cam.orthographic == (distance == 0)
    assert np.max(np.abs(cam.project(pts) - ref)) < 1e-9
    assert math.isclose(cam.fx, 420.0 * (distance or 1.0))
