"""core/camera.py, edge by edge: rotations, projection, undistortion, copies, CameraInfo files, config blocks.

Right values come from an independent source: OpenCV (``cv2.projectPoints``,
``cv2.undistortPoints``, ``cv2.Rodrigues``), scipy's ``Rotation`` (REP 103 roll-pitch-yaw =
extrinsic x-y-z), or numbers derived by hand in the comments. Error paths check the one-line
message names the file/key and what was expected.
"""

from __future__ import annotations

import math
import warnings

import cv2
import numpy as np
import pytest
import yaml
from scipy.spatial.transform import Rotation

from vid2sid_ros.core.camera import (BODY_TO_OPTICAL, CAMERA_FIELDS, MAX_IMAGE_SIDE, CameraError, PinholeCamera,
                                     camera_from_config, load_camera_info, look_at_rotation, look_at_rpy,
                                     matrix_to_rpy, moved_pose, rotation_vector_to_matrix, rpy_to_matrix)

RNG_SEED = 20261201


def _cam(**over) -> PinholeCamera:
    kw = dict(width=640, height=480, fx=600.0, fy=590.0, cx=321.5, cy=238.25)
    kw.update(over)
    return PinholeCamera(**kw)


# -- rotations -----------------------------------------------------------------------
def test_rpy_to_matrix_is_extrinsic_xyz():
    """REP 103 fixed-axis rpy = scipy's extrinsic 'xyz' Euler angles."""
    rng = np.random.default_rng(RNG_SEED)
    for a in rng.uniform(-math.pi, math.pi, (25, 3)):
        assert np.allclose(rpy_to_matrix(*a), Rotation.from_euler("xyz", a).as_matrix(), atol=1e-14)
    # by hand: a yaw of 90 deg turns world +x into +y, a pitch of 90 deg turns +x into -z, a roll of 90 deg +y into +z
    assert np.allclose(rpy_to_matrix(0, 0, math.pi / 2) @ [1, 0, 0], [0, 1, 0], atol=1e-15)
    assert np.allclose(rpy_to_matrix(0, math.pi / 2, 0) @ [1, 0, 0], [0, 0, -1], atol=1e-15)
    assert np.allclose(rpy_to_matrix(math.pi / 2, 0, 0) @ [0, 1, 0], [0, 0, 1], atol=1e-15)


def test_matrix_to_rpy_matches_scipy_away_from_gimbal_lock():
    rng = np.random.default_rng(RNG_SEED + 1)
    for a in rng.uniform([-3.1, -1.5, -3.1], [3.1, 1.5, 3.1], (25, 3)):
        m = Rotation.from_euler("xyz", a).as_matrix()
        assert np.allclose(matrix_to_rpy(m), Rotation.from_matrix(m).as_euler("xyz"), atol=1e-12)
        assert np.allclose(matrix_to_rpy(m), a, atol=1e-12)


@pytest.mark.parametrize("pitch, sign", [(math.pi / 2, -1.0), (-math.pi / 2, 1.0)])
def test_matrix_to_rpy_gimbal_lock_puts_everything_into_yaw(pitch, sign):
    """At pitch = +-90 deg only yaw -+ roll is defined (by hand: Rz(y) Ry(+90) Rx(r) depends on y - r,
    Rz(y) Ry(-90) Rx(r) on y + r); the reader returns roll 0 and that combination as yaw."""
    roll, yaw = 0.3, 1.1
    m = Rotation.from_euler("xyz", [roll, pitch, yaw]).as_matrix()
    r, p, y = matrix_to_rpy(m)
    assert r == 0.0 and math.isclose(p, pitch, abs_tol=1e-7) and math.isclose(y, yaw + sign * roll, abs_tol=1e-7)
    assert np.allclose(rpy_to_matrix(r, p, y), m, atol=1e-7)
    # numerical noise beyond |r20| = 1 is clipped, not a math domain error
    noisy = m.copy()
    noisy[2, 0] = -math.copysign(1.0 + 1e-13, math.sin(pitch))
    assert matrix_to_rpy(noisy)[1] == pitch


def test_rotation_vector_to_matrix_matches_cv2_rodrigues():
    rng = np.random.default_rng(RNG_SEED + 2)
    for w in np.vstack([rng.normal(0, 1.5, (20, 3)), [[0, 0, math.pi], [1e-9, 0, 0], [0, -2.0, 0]]]):
        ref, _ = cv2.Rodrigues(np.asarray(w, float))
        assert np.allclose(rotation_vector_to_matrix(w), ref, atol=1e-13)
    assert np.array_equal(rotation_vector_to_matrix([0.0, 0.0, 0.0]), np.eye(3))
    assert np.array_equal(rotation_vector_to_matrix([1e-16, 0.0, 0.0]), np.eye(3))   # below 1e-15: identity, no 0/0


@pytest.mark.parametrize("bad", [[0.1, 0.2], [0.1, 0.2, 0.3, 0.4], [0.0, float("nan"), 0.0], [float("inf"), 0, 0],
                                 [[0.1, 0.2, 0.3]], [None, 0.0, 0.0]])
def test_rotation_vector_must_be_three_finite_numbers(bad):
    with pytest.raises(CameraError, match=r"rotation vector must be 3 finite numbers \(rad\)"):
        rotation_vector_to_matrix(bad)


def test_moved_pose_by_hand():
    """A camera at (1, 2, 3) whose axes are the world's turned 90 deg about z (x -> y, y -> -x):
    a step (0.5, 0, 0.2) along its own axes is (0, 0.5, 0.2) in the world; a turn of 90 deg about its own z
    composes to 180 deg about z."""
    rot = rpy_to_matrix(0, 0, math.pi / 2)
    pos, r = moved_pose([1.0, 2.0, 3.0], rot, [0.5, 0.0, 0.2], [0.0, 0.0, math.pi / 2])
    assert np.allclose(pos, [1.0, 2.5, 3.2], atol=1e-15)
    assert np.allclose(r, [[-1, 0, 0], [0, -1, 0], [0, 0, 1]], atol=1e-15)
    for bad in ([0.1, 0.2], [0.0, 0.0, float("nan")], [float("-inf"), 0.0, 0.0], [0.0, None, 0.0]):  # None: a YAML ~
        with pytest.raises(CameraError, match=r"camera translation must be 3 finite numbers \(m\)"):
            moved_pose([0, 0, 0], np.eye(3), bad, [0, 0, 0])
    with pytest.raises(CameraError, match="rotation vector"):
        moved_pose([0, 0, 0], np.eye(3), [0, 0, 0], [0, 0])


@pytest.mark.parametrize("target, pitch, yaw", [
    ((1.0, 1.0, 0.0), 0.0, math.pi / 4),          # level, 45 deg to the left
    ((-1.0, 0.0, 0.0), 0.0, math.pi),              # behind: yaw 180
    ((2.0, 0.0, -2.0), math.pi / 4, 0.0),          # 45 deg down: positive pitch
    ((0.0, -3.0, 3.0), -math.pi / 4, -math.pi / 2),  # 45 deg up, to the right
    ((0.0, 0.0, -5.0), math.pi / 2, 0.0),          # straight down: yaw 0
    ((0.0, 0.0, 0.5), -math.pi / 2, 0.0),          # straight up: yaw 0
])
def test_look_at_rpy_by_hand(target, pitch, yaw):
    origin = np.array([1.0, -2.0, 0.5])
    r, p, y = look_at_rpy(origin, origin + target, roll=-0.25)
    assert r == -0.25 and math.isclose(p, pitch, abs_tol=1e-12) and math.isclose(y, yaw, abs_tol=1e-12)
    assert type(r) is float and type(p) is float and type(y) is float


def test_look_at_rpy_refuses_a_target_within_1e_12_m():
    with pytest.raises(CameraError, match=r"look_at \[1.0, 2.0, 3.0\] coincides with the camera position"):
        look_at_rpy([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(CameraError, match="coincides"):
        look_at_rpy([0.0, 0.0, 0.0], [1e-13, 0.0, 0.0])
    assert look_at_rpy([0.0, 0.0, 0.0], [1e-6, 1e-6, 0.0])[2] == pytest.approx(math.pi / 4)


def test_look_at_rpy_straight_down_is_judged_on_the_direction_not_the_distance():
    """1e-11 m sideways of a target 1 km below is straight down (direction 1e-14 off vertical): yaw 0, not 180."""
    r, p, y = look_at_rpy([0.0, 0.0, 0.0], [-1e-11, 0.0, -1000.0])
    assert (r, y) == (0.0, 0.0) and math.isclose(p, math.pi / 2, abs_tol=1e-12)
    assert look_at_rpy([0.0, 0.0, 0.0], [-1e-3, 0.0, -1.0])[2] == pytest.approx(math.pi)


def test_look_at_rotation_by_hand_and_by_projection():
    # level along +x with up = +z: all zero
    assert np.allclose(look_at_rotation([0, 0, 0], [3, 0, 0]), (0, 0, 0), atol=1e-15)
    # along +x with world +y shown up (by hand: camera_link z = +y, y = -z, i.e. Rx(-90 deg))
    assert np.allclose(look_at_rotation([0, 0, 0], [3, 0, 0], up=[0, 1, 0]), (-math.pi / 2, 0, 0), atol=1e-12)
    # along +y, level: yaw 90 deg
    assert np.allclose(look_at_rotation([1, 1, 1], [1, 4, 1]), (0, 0, math.pi / 2), atol=1e-12)
    # generic: the target at the principal point, the up direction straight up in the image
    rng = np.random.default_rng(RNG_SEED + 3)
    for _ in range(10):
        pos, target, up = rng.normal(0, 2, 3), rng.normal(0, 2, 3), rng.normal(0, 1, 3)
        r, p, y = look_at_rotation(pos, target, up)
        cam = _cam(position=tuple(pos), roll=r, pitch=p, yaw=y)
        f = (target - pos) / np.linalg.norm(target - pos)
        up_perp = up - (up @ f) * f
        a, b = cam.project(np.array([target, target + 0.01 * up_perp / np.linalg.norm(up_perp)]))
        assert np.allclose(a, [cam.cx, cam.cy], atol=1e-8)
        assert abs(b[0] - a[0]) < 1e-8 and b[1] < a[1] - 0.1


def test_look_at_rotation_errors():
    with pytest.raises(CameraError, match=r"look_at \[1, 1, 1\] coincides"):
        look_at_rotation([1, 1, 1], [1, 1, 1])
    with pytest.raises(CameraError, match=r"up \[0, 0, 2\] is parallel to the viewing direction"):
        look_at_rotation([0, 0, 1], [0, 0, 0], up=[0, 0, 2])
    with pytest.raises(CameraError, match="parallel"):
        look_at_rotation([0, 0, 0], [1, 0, 0], up=[-1, 0, 1e-10])
    # an up vector 1e-6 off the viewing direction is still usable
    r, p, y = look_at_rotation([0, 0, 0], [1, 0, 0], up=[1, 0, 1e-6])
    assert np.allclose((r, p, y), (0, 0, 0), atol=1e-9)


# -- the camera --------------------------------------------------------------------------
def test_optical_frame_axes():
    """rpy = 0: optical x (right) = world -y, optical y (down) = world -z, optical z (forward) = world +x;
    the rotation is the camera_link rotation times BODY_TO_OPTICAL."""
    assert np.array_equal(_cam().rotation, [[0, 0, 1], [-1, 0, 0], [0, -1, 0]])
    cam = _cam(roll=0.2, pitch=-0.4, yaw=2.0)
    assert np.allclose(cam.rotation, Rotation.from_euler("xyz", [0.2, -0.4, 2.0]).as_matrix() @ BODY_TO_OPTICAL)
    assert np.allclose(_cam().to_camera(np.array([[1.0, 2.0, 3.0]])), [[-2.0, -3.0, 1.0]])
    moved = _cam(position=(1.0, 1.0, 1.0))
    assert np.allclose(moved.to_camera([[1.0, 2.0, 3.0]]), [[-1.0, -2.0, 0.0]])


def test_camera_matrix_model_and_distorted():
    cam = _cam()
    assert np.array_equal(cam.camera_matrix, [[600.0, 0, 321.5], [0, 590.0, 238.25], [0, 0, 1]])
    assert cam.distortion_model == "plumb_bob" and not cam.distorted
    assert _cam(distortion=(0, 0, 0, 0, 0, 0, 0, 0)).distortion_model == "rational_polynomial"
    for i in range(8):
        d = [0.0] * 8
        d[i] = 1e-3
        assert _cam(distortion=tuple(d)).distorted


def test_four_coefficient_distortion_is_padded_with_k3_zero():
    cam = _cam(distortion=(0.1, -0.02, 0.001, 0.002))
    assert cam.distortion == (0.1, -0.02, 0.001, 0.002, 0.0) and cam.distortion_model == "plumb_bob"


def test_fields_are_stored_as_float_and_int():
    cam = PinholeCamera(640.0, 480.0, 600, 600, 320, 240, distortion=[0, 0, 0, 0, 0], position=[1, 2, 3], roll=1)
    assert type(cam.width) is int and type(cam.height) is int
    assert all(type(getattr(cam, f)) is float for f in ("fx", "fy", "cx", "cy", "roll", "pitch", "yaw"))
    assert cam.position == (1.0, 2.0, 3.0) and all(type(x) is float for x in cam.position + cam.distortion)
    assert isinstance(cam.distortion, tuple) and isinstance(cam.position, tuple)
    assert PinholeCamera(MAX_IMAGE_SIDE, 1, 1, 1, 0, 0).width == MAX_IMAGE_SIDE
    assert (PinholeCamera(1, MAX_IMAGE_SIDE, 1, 1, 0, 0).width, PinholeCamera(1, 1, 1, 1, 0, 0).height) == (1, 1)


@pytest.mark.parametrize("over, match", [
    ({"width": 640.5}, r"camera 'cam': image size must be positive integers, got 640.5x480"),
    ({"height": 480.5}, "image size must be positive integers"),
    ({"width": 0}, "image size must be positive integers, got 0x480"),
    ({"height": -4}, "image size must be positive integers"),
    ({"height": 0}, "image size must be positive integers, got 640x0"),
    ({"width": MAX_IMAGE_SIDE + 1}, rf"image size must be at most {MAX_IMAGE_SIDE} px a side"),
    ({"height": MAX_IMAGE_SIDE + 1}, "at most"),
    ({"fx": True}, r"'fx' must be a finite number, got True"),
    ({"fy": "600"}, r"'fy' must be a finite number, got '600'"),
    ({"cx": float("nan")}, "'cx' must be a finite number"),
    ({"cy": float("inf")}, "'cy' must be a finite number"),
    ({"roll": None}, "'roll' must be a finite number"),
    ({"pitch": float("-inf")}, "'pitch' must be a finite number"),
    ({"yaw": [0.1]}, "'yaw' must be a finite number"),
    ({"fx": 0.0}, r"focal lengths must be > 0 px, got fx=0.0 fy=590.0"),
    ({"fy": -1.0}, "focal lengths must be > 0 px"),
    ({"fy": 0.0}, "focal lengths must be > 0 px, got fx=600.0 fy=0.0"),
    ({"distortion": (0.1, 0.0, 0.0)}, r"distortion must be 5 \(plumb_bob\) or 8 \(rational_polynomial\)"),
    ({"distortion": (0.0,) * 6}, "distortion must be 5"),
    ({"distortion": (0.0, 0.0, float("nan"), 0.0, 0.0)}, "distortion must be 5"),
    ({"position": (0.0, 1.0)}, r"position must be 3 finite numbers \(m\), got \[0.0, 1.0\]"),
    ({"position": (0.0, 1.0, float("nan"))}, "position must be 3 finite numbers"),
])
def test_constructor_errors(over, match):
    with pytest.raises(CameraError, match=match) as err:
        _cam(name="cam", **over)
    assert "\n" not in str(err.value)


def test_points_on_the_image_plane_give_nan_without_a_warning():
    """Z_c = 0 divides by zero and Z_c = 1e-300 overflows the lens polynomial; the NaN is the answer, not a
    RuntimeWarning (callers may run with -W error)."""
    cam = _cam(distortion=(-0.1, 0.0, 0.0, 0.0, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        px = cam.project(np.array([[0.0, 0.5, 0.5], [0.0, 0.0, 0.0], [-1.0, 0.0, 0.0], [1e-300, 0.5, 0.5]]))
    assert np.all(np.isnan(px))


def test_project_shapes_and_errors():
    cam = _cam(distortion=(-0.2, 0.05, 0.001, -0.002, 0.01), pitch=0.1)
    pts = np.array([[2.0, 0.3, -0.1], [3.0, -0.5, 0.4], [1.5, 0.0, 0.0], [4.0, 0.2, 0.2]])
    flat = cam.project(pts)
    assert flat.shape == (4, 2)
    assert np.array_equal(cam.project(pts.reshape(2, 2, 3)), flat.reshape(2, 2, 2))
    assert np.array_equal(cam.project(pts[0]), flat[0])
    with pytest.raises(CameraError, match=r"camera 'camera': points must have shape \(\.\.\., 3\), got \(4, 2\)"):
        cam.project(np.zeros((4, 2)))


def test_points_on_or_behind_the_image_plane_are_nan_in_perspective_only():
    cam = _cam()   # looks along world +x from the origin: Z_c = world x
    px = cam.project(np.array([[0.0, 0.1, 0.1], [1e-13, 0.0, 0.0], [-2.0, 0.0, 0.0], [1e-6, 0.0, 0.0],
                               [1.0, 0.0, 0.0]]))
    assert np.all(np.isnan(px[:3])) and np.allclose(px[3:], [[321.5, 238.25]] * 2)
    # orthographic (px/m): u = fx X_c + cx, v = fy Y_c + cy, whatever the depth (by hand: X_c = -y, Y_c = -z)
    ortho = _cam(orthographic=True, fx=100.0, fy=50.0)
    got = ortho.project(np.array([[-3.0, 0.2, -0.4], [0.0, -1.0, 1.0]]))
    assert np.allclose(got, [[321.5 - 20.0, 238.25 + 20.0], [321.5 + 100.0, 238.25 - 50.0]], atol=1e-12)


def test_orthographic_distortion_acts_on_metres():
    """The orthographic camera distorts X_c, Y_c (m) by the same polynomial (by hand, k1 only:
    x'' = x (1 + k1 r2))."""
    cam = _cam(orthographic=True, fx=100.0, fy=100.0, distortion=(0.5, 0.0, 0.0, 0.0, 0.0))
    got = cam.project(np.array([[1.0, -0.4, 0.0]]))[0]   # X_c = 0.4, Y_c = 0: r2 = 0.16
    assert np.allclose(got, [321.5 + 100.0 * 0.4 * 1.08, 238.25], atol=1e-12)


@pytest.mark.parametrize("dist", [(-0.3, 0.09, 0.002, -0.003, -0.02),
                                  (0.25, -0.08, -0.001, 0.0015, 0.01, 0.3, -0.05, 0.02),
                                  (0.0, 0.0, 0.004, 0.0, 0.0), (0.0, 0.0, 0.0, -0.004, 0.0),
                                  (0.0, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3, 0.0),
                                  (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.4)])
def test_project_each_coefficient_matches_cv2(dist):
    """Each distortion term on its own (and mixed) as cv2.projectPoints has it, off-centre points included."""
    rng = np.random.default_rng(RNG_SEED + 4)
    cam = _cam(distortion=dist, position=(0.2, 0.1, 0.3), roll=-0.1, pitch=0.2, yaw=0.3)
    pc = np.stack([rng.uniform(-0.6, 0.6, 40), rng.uniform(-0.45, 0.45, 40), np.ones(40)], axis=1) * \
        rng.uniform(1, 3, (40, 1))
    pts = pc @ cam.rotation.T + np.asarray(cam.position)
    rvec, _ = cv2.Rodrigues(cam.rotation.T)
    tvec = -cam.rotation.T @ np.asarray(cam.position)
    ref, _ = cv2.projectPoints(pts, rvec, tvec, cam.camera_matrix, np.asarray(dist, float))
    assert np.max(np.abs(cam.project(pts) - ref[:, 0])) < 1e-7


@pytest.mark.parametrize("dist", [(-0.28, 0.07, 0.001, -0.0015, 0.01),
                                  (0.2, -0.05, 0.002, 0.001, 0.01, 0.15, -0.02, 0.005),
                                  (0.0, 0.0, 0.003, 0.0, 0.0), (0.0, 0.0, 0.0, 0.003, 0.0),
                                  (0.0, 0.0, 0.0, 0.0, 0.1), (0.0, 0.0, 0.0, 0.0, 0.0, 0.3, 0.0, 0.0),
                                  (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3, 0.0), (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.3)])
@pytest.mark.parametrize("iterations", [1, 3, 20])
def test_undistort_pixels_matches_cv2_undistortPoints(dist, iterations):
    """The same fixed-point iteration as cv2.undistortPoints with a COUNT criterion, pixel for pixel."""
    rng = np.random.default_rng(RNG_SEED + 5)
    cam = _cam(distortion=dist)
    q = np.stack([rng.uniform(0, 640, 30), rng.uniform(0, 480, 30)], axis=1)
    crit = (cv2.TERM_CRITERIA_COUNT, iterations, 0.0)
    ref = cv2.undistortPoints(q.reshape(-1, 1, 2), cam.camera_matrix, np.asarray(dist, float),
                              P=cam.camera_matrix, criteria=crit)[:, 0]
    got = cam.undistort_pixels(q, iterations=iterations) if iterations != 20 else cam.undistort_pixels(q)
    assert np.max(np.abs(got - ref)) < 1e-8


def test_undistort_pixels_zero_iterations_and_no_distortion():
    cam = _cam(distortion=(-0.2, 0.0, 0.0, 0.0, 0.0))
    q = np.array([[10.0, 20.0], [600.0, 400.0]])
    assert np.allclose(cam.undistort_pixels(q, iterations=0), q, atol=1e-12)   # the start point: no correction
    ideal = _cam()
    out = ideal.undistort_pixels(q)
    assert np.array_equal(out, q) and out is not q
    out[0, 0] = -1.0
    assert q[0, 0] == 10.0   # a copy: the caller's array is untouched
    # the (T, K, 2) shape is kept
    tk = np.stack([np.linspace(5, 600, 12), np.linspace(3, 470, 12)], axis=-1).reshape(4, 3, 2)
    got = cam.undistort_pixels(tk)
    assert got.shape == (4, 3, 2) and np.array_equal(got.reshape(12, 2), cam.undistort_pixels(tk.reshape(12, 2)))
    # integer pixels give float pixels, with or without a lens (sub-pixel results; cv2.remap needs float maps)
    ints = np.array([[10, 20], [600, 400]])
    assert ideal.undistort_pixels(ints).dtype == np.float64 and cam.undistort_pixels(ints).dtype == np.float64


def test_undistort_then_project_round_trip_rational():
    rng = np.random.default_rng(RNG_SEED + 6)
    cam = _cam(distortion=(0.1, -0.03, 0.0005, -0.0007, 0.002, 0.05, -0.01, 0.002))
    pc = np.stack([rng.uniform(-0.4, 0.4, 25), rng.uniform(-0.3, 0.3, 25), np.full(25, 2.0)], axis=1)
    pts = pc @ cam.rotation.T
    ideal = _cam().project(pts)
    assert np.max(np.abs(cam.undistort_pixels(cam.project(pts)) - ideal)) < 1e-6


# -- copies ------------------------------------------------------------------------------
def test_with_values_sets_every_nuisance_field():
    cam = _cam(position=(0.1, 0.2, 0.3), distortion=(0.01, 0.02, 0.03, 0.04, 0.05))
    for i, f in enumerate(CAMERA_FIELDS):
        v = 1.5 + i / 100.0
        got = cam.with_values({f: v})
        if f in ("x", "y", "z"):
            want = list(cam.position)
            want["xyz".index(f)] = v
            assert got.position == tuple(want), f
        elif f in ("k1", "k2", "p1", "p2", "k3"):
            want = list(cam.distortion)
            want[("k1", "k2", "p1", "p2", "k3").index(f)] = v
            assert got.distortion == tuple(want), f
        else:
            assert getattr(got, f) == v, f
            assert got.position == cam.position and got.distortion == cam.distortion
        others = [g for g in ("fx", "fy", "cx", "cy", "roll", "pitch", "yaw") if g != f]
        assert all(getattr(got, g) == getattr(cam, g) for g in others), f
    rational = _cam(distortion=(0.0,) * 5 + (0.1, 0.2, 0.3)).with_values({"k3": 0.5, "p2": np.float32(0.25)})
    assert rational.distortion == (0.0, 0.0, 0.0, 0.25, 0.5, 0.1, 0.2, 0.3)
    assert type(rational.distortion[3]) is float
    # numpy scalars (an optimiser's output) are accepted for every field
    fed = cam.with_values({"fx": np.float32(512.5), "yaw": np.float64(0.25), "x": np.float32(2.0)})
    assert (fed.fx, fed.yaw, fed.position[0]) == (512.5, 0.25, 2.0) and type(fed.fx) is float


def test_with_values_refuses_unknown_fields_and_keeps_the_camera():
    cam = _cam()
    with pytest.raises(CameraError, match=r"unknown camera field\(s\) \['pan', 'k4'\]; valid: x, y, z, roll"):
        cam.with_values({"pan": 0.1, "x": 1.0, "k4": 0.2})
    assert cam.with_values({}) == cam


def test_resized_scales_intrinsics_opencv_rule():
    cam = _cam(distortion=(-0.1, 0.01, 0.0, 0.0, 0.0), position=(1.0, 2.0, 3.0), pitch=0.3)
    half = cam.resized(320, 240)
    # by hand: fx' = 600 * 0.5, cx' = (321.5 + 0.5) * 0.5 - 0.5, cy' = (238.25 + 0.5) * 0.5 - 0.5
    assert (half.width, half.height, half.fx, half.fy, half.cx, half.cy) == (320, 240, 300.0, 295.0, 160.5, 118.875)
    assert half.distortion == cam.distortion and half.position == cam.position and half.pitch == cam.pitch
    wide = cam.resized(np.int64(1280), 720)   # sx = 2, sy = 1.5
    assert (wide.fx, wide.fy, wide.cx, wide.cy) == (1200.0, 885.0, 643.5, 357.625)
    assert type(wide.width) is int
    rng = np.random.default_rng(RNG_SEED + 7)
    pc = np.stack([rng.uniform(-0.5, 0.5, 10), rng.uniform(-0.4, 0.4, 10), np.full(10, 2.0)], axis=1)
    pts = pc @ cam.rotation.T + np.asarray(cam.position)
    uv = cam.project(pts)
    assert np.allclose(wide.project(pts), np.stack([(uv[:, 0] + 0.5) * 2 - 0.5, (uv[:, 1] + 0.5) * 1.5 - 0.5], 1))


def test_resized_to_the_same_size_is_the_camera_itself():
    cam = _cam(cx=0.1, cy=0.7)   # (0.1 + 0.5) - 0.5 != 0.1 in floating point: a no-op must not drift
    assert cam.resized(640, 480) is cam


@pytest.mark.parametrize("w, h, key", [(0, 480, "width"), (640, 0, "height"), (MAX_IMAGE_SIDE + 1, 480, "width"),
                                       (640, MAX_IMAGE_SIDE + 1, "height"), (True, 480, "width"),
                                       (640.0, 480, "width"), (640, "480", "height"), (-2, 480, "width")])
def test_resized_errors(w, h, key):
    with pytest.raises(CameraError, match=rf"camera 'camera': resized {key} must be an integer in \[1, "
                                          rf"{MAX_IMAGE_SIDE}\] px"):
        _cam().resized(w, h)


def test_resized_accepts_the_largest_side():
    assert _cam(width=4, height=3).resized(MAX_IMAGE_SIDE, 1).width == MAX_IMAGE_SIDE


def test_moved_in_the_optical_frame_by_hand():
    cam = _cam(position=(1.0, 2.0, 3.0))   # looks along world +x: optical x = -y, y = -z, z = +x
    ahead = cam.moved([0.1, 0.2, 0.5], [0.0, 0.0, 0.0])
    assert np.allclose(ahead.position, [1.5, 1.9, 2.8], atol=1e-15)
    assert (ahead.roll, ahead.pitch, ahead.yaw) == (0.0, 0.0, 0.0)
    assert (ahead.fx, ahead.cx, ahead.distortion) == (cam.fx, cam.cx, cam.distortion)
    assert all(type(x) is float for x in ahead.position)
    # right-handed turns: about optical x (right) the forward axis tips to optical -y, up: pitch -;
    # about optical y (down) it tips to optical +x, right: yaw -; about optical z (forward) = camera_link x: roll +
    assert np.allclose([getattr(_cam().moved([0, 0, 0], [0.1, 0, 0]), a) for a in ("roll", "pitch", "yaw")],
                       [0, -0.1, 0], atol=1e-12)
    assert np.allclose([getattr(_cam().moved([0, 0, 0], [0, 0.1, 0]), a) for a in ("roll", "pitch", "yaw")],
                       [0, 0, -0.1], atol=1e-12)
    assert np.allclose([getattr(_cam().moved([0, 0, 0], [0, 0, 0.1]), a) for a in ("roll", "pitch", "yaw")],
                       [0.1, 0, 0], atol=1e-12)
    # generic: the moved camera's optical frame is rotation @ Rodrigues(w) (cv2), its centre position + R t
    base = _cam(position=(0.3, -0.2, 1.1), roll=0.2, pitch=0.35, yaw=-0.8)
    w, t = np.array([0.05, -0.1, 0.2]), np.array([0.01, -0.02, 0.03])
    m = base.moved(t, w)
    assert np.allclose(m.rotation, base.rotation @ cv2.Rodrigues(w)[0], atol=1e-12)
    assert np.allclose(m.position, np.asarray(base.position) + base.rotation @ t, atol=1e-15)


def test_camera_info_mapping_by_hand():
    cam = _cam(distortion=(0.1, -0.2, 0.003, 0.004, 0.05, 0.6, 0.7, 0.8), name="lab")
    assert cam.camera_info() == {
        "image_width": 640, "image_height": 480, "camera_name": "lab",
        "camera_matrix": {"rows": 3, "cols": 3, "data": [600.0, 0.0, 321.5, 0.0, 590.0, 238.25, 0.0, 0.0, 1.0]},
        "distortion_model": "rational_polynomial",
        "distortion_coefficients": {"rows": 1, "cols": 8, "data": [0.1, -0.2, 0.003, 0.004, 0.05, 0.6, 0.7, 0.8]},
        "rectification_matrix": {"rows": 3, "cols": 3, "data": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]},
        "projection_matrix": {"rows": 3, "cols": 4,
                              "data": [600.0, 0.0, 321.5, 0.0, 0.0, 590.0, 238.25, 0.0, 0.0, 0.0, 1.0, 0.0]}}
    plain = _cam().camera_info()
    assert plain["distortion_model"] == "plumb_bob" and plain["distortion_coefficients"]["cols"] == 5


# -- CameraInfo YAML ---------------------------------------------------------------------
def _info(**over):
    info = {"image_width": 640, "image_height": 480, "camera_name": "lab_cam",
            "camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0.0, 322.0, 0.0, 611.0, 241.0, 0.0, 0.0, 1.0]},
            "distortion_model": "plumb_bob",
            "distortion_coefficients": {"rows": 1, "cols": 5, "data": [-0.1, 0.02, 0.001, 0.002, 0.003]}}
    for k, v in over.items():
        if v is None:
            info.pop(k, None)
        else:
            info[k] = v
    return info


def _write(path, info):
    path.write_text(yaml.safe_dump(info) if not isinstance(info, str) else info)
    return path


def test_camera_info_a_file_camera_calibration_writes(tmp_path):
    """The camera_calibration layout (keys in its order, flow lists), read back to the intrinsics."""
    p = _write(tmp_path / "ost.yaml", (
        "image_width: 1280\nimage_height: 720\ncamera_name: narrow_stereo\n"
        "camera_matrix:\n  rows: 3\n  cols: 3\n  data: [900.5, 0, 641.2, 0, 901.25, 359.8, 0, 0, 1]\n"
        "distortion_model: rational_polynomial\n"
        "distortion_coefficients:\n  rows: 1\n  cols: 8\n  data: [0.1, -0.2, 0.001, 0.002, 0.03, 0.4, -0.5, 0.06]\n"
        "rectification_matrix:\n  rows: 3\n  cols: 3\n  data: [1, 0, 0, 0, 1, 0, 0, 0, 1]\n"
        "projection_matrix:\n  rows: 3\n  cols: 4\n  data: [900.5, 0, 641.2, 0, 0, 901.25, 359.8, 0, 0, 0, 1, 0]\n"))
    got = load_camera_info(p)
    assert got == {"width": 1280, "height": 720, "fx": 900.5, "fy": 901.25, "cx": 641.2, "cy": 359.8,
                   "distortion": (0.1, -0.2, 0.001, 0.002, 0.03, 0.4, -0.5, 0.06), "name": "narrow_stereo"}
    assert all(type(x) is float for x in got["distortion"]) and type(got["fx"]) is float
    assert PinholeCamera(**got).distortion_model == "rational_polynomial"


@pytest.mark.parametrize("over, want", [
    ({"distortion_coefficients": None}, (0.0,) * 5),                                   # plumb_bob, no coefficients
    ({"distortion_model": None}, (-0.1, 0.02, 0.001, 0.002, 0.003)),                  # model defaults to plumb_bob
    ({"distortion_model": None, "distortion_coefficients": None}, (0.0,) * 5),
    ({"distortion_model": "rational_polynomial", "distortion_coefficients": None}, (0.0,) * 8),
    ({"distortion_coefficients": {"rows": 1, "cols": 0, "data": []}}, (0.0,) * 5),  # an empty plumb_bob list
])
def test_camera_info_distortion_defaults(tmp_path, over, want):
    assert load_camera_info(_write(tmp_path / "c.yaml", _info(**over)))["distortion"] == want


def test_camera_info_smallest_and_largest_image(tmp_path):
    got = load_camera_info(_write(tmp_path / "c.yaml", _info(image_width=1, image_height=MAX_IMAGE_SIDE)))
    assert (got["width"], got["height"]) == (1, MAX_IMAGE_SIDE)
    got = load_camera_info(_write(tmp_path / "d.yaml", _info(image_width=MAX_IMAGE_SIDE, image_height=1)))
    assert (got["width"], got["height"]) == (MAX_IMAGE_SIDE, 1)


@pytest.mark.parametrize("name, want", [(None, "camera"), ("", "camera"), (17, "17"), ("left", "left")])
def test_camera_info_name(tmp_path, name, want):
    assert load_camera_info(_write(tmp_path / "c.yaml", _info(camera_name=name)))["name"] == want


@pytest.mark.parametrize("over, key, expected", [
    ({"image_width": None}, "image_width", "expected a positive integer (px, at most 16384), got None"),
    ({"image_height": 0}, "image_height", "expected a positive integer"),
    ({"image_height": MAX_IMAGE_SIDE + 1}, "image_height", "expected a positive integer"),
    ({"image_width": True}, "image_width", "got True"),
    ({"image_width": 640.0}, "image_width", "expected a positive integer"),
    ({"camera_matrix": None}, "camera_matrix", "expected a mapping {rows, cols, data}, got None"),
    ({"camera_matrix": [610.0, 0, 322, 0, 611, 241, 0, 0, 1]}, "camera_matrix", "expected a mapping"),
    ({"camera_matrix": {"rows": 3, "cols": 3}}, "camera_matrix.data", "expected a list of numbers, got None"),
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": "610 0 322"}}, "camera_matrix.data", "expected a list"),
    ({"camera_matrix": {"rows": 3, "cols": 1, "data": [1.0] * 9}}, "camera_matrix",
     "expected a 3x3 matrix (rows: 3, cols: 3, 9 values), got rows: 3, cols: 1, 9 values"),
    ({"camera_matrix": {"cols": 3, "data": [1.0] * 9}}, "camera_matrix", "got rows: None, cols: 3, 9 values"),
    ({"camera_matrix": {"rows": 3, "cols": 4, "data": [610.0, 0, 322, 0, 0, 611, 241, 0, 0, 0, 1, 0]}}, "camera_matrix",
     "expected a 3x3 matrix (rows: 3, cols: 3, 9 values), got rows: 3, cols: 4, 12 values"),   # a P matrix as K
    ({"camera_matrix": {"rows": 3, "cols": 3.0, "data": [610.0, 0, 322, 0, 611, 241, 0, 0, 1]}}, "camera_matrix",
     "got rows: 3, cols: 3.0, 9 values"),
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0, 322, 0, 611, 241, 0, 0, 1, 0]}}, "camera_matrix",
     "expected a 3x3 matrix"),
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0.5, 322, 0, 611, 241, 0, 0, 1]}}, "camera_matrix",
     "expected [fx, 0, cx, 0, fy, cy, 0, 0, 1] (no skew)"),
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0, 322, 0.5, 611, 241, 0, 0, 1]}}, "camera_matrix",
     "(no skew)"),
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0, 322, 0, 611, 241, 0.1, 0, 1]}}, "camera_matrix",
     "(no skew)"),
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0, 322, 0, 611, 241, 0, 0.1, 1]}}, "camera_matrix",
     "(no skew)"),
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0, 322, 0, 611, 241, 0, 0, 2]}}, "camera_matrix",
     "(no skew)"),
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": [610.0, 0, 322, 0, 611, True, 0, 0, 1]}},
     "camera_matrix.data[5]", "expected a finite number, got True"),
    ({"camera_matrix": {"rows": 3, "cols": 3, "data": [float("nan"), 0, 322, 0, 611, 241, 0, 0, 1]}},
     "camera_matrix.data[0]", "expected a finite number"),
    ({"distortion_model": "fisheye"}, "distortion_model",
     "expected one of plumb_bob, rational_polynomial, got 'fisheye'"),
    ({"distortion_coefficients": [0.0] * 5}, "distortion_coefficients", "expected a mapping"),
    ({"distortion_coefficients": {"rows": 2, "cols": 5, "data": [0.0] * 5}}, "distortion_coefficients",
     "expected a 1xN matrix (rows: 1, cols: N, N values), got rows: 2, cols: 5, 5 values"),
    ({"distortion_coefficients": {"rows": 1, "cols": "5", "data": [0.0] * 5}}, "distortion_coefficients",
     "expected a 1xN matrix"),
    ({"distortion_coefficients": {"rows": 1, "cols": 5, "data": [0.0] * 4}}, "distortion_coefficients",
     "expected a 1xN matrix"),
    ({"distortion_coefficients": {"rows": 1, "cols": 8, "data": [0.0] * 8}}, "distortion_coefficients",
     "plumb_bob expects 5 coefficients, got 8"),
    ({"distortion_model": "rational_polynomial"}, "distortion_coefficients",
     "rational_polynomial expects 8 coefficients, got 5"),
    ({"distortion_model": "rational_polynomial", "distortion_coefficients": {"rows": 1, "cols": 0, "data": []}},
     "distortion_coefficients", "rational_polynomial expects 8 coefficients, got 0"),
    ({"distortion_coefficients": {"rows": 1, "cols": 5, "data": [0.0, 0.0, "k", 0.0, 0.0]}},
     "distortion_coefficients.data[2]", "expected a finite number, got 'k'"),
])
def test_camera_info_errors(tmp_path, over, key, expected):
    p = _write(tmp_path / "bad.yaml", _info(**over))
    with pytest.raises(CameraError) as err:
        load_camera_info(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}:{key}: ") and expected in msg and "\n" not in msg, msg


def test_camera_info_file_errors(tmp_path):
    with pytest.raises(CameraError, match=r"nope.yaml: CameraInfo YAML not found"):
        load_camera_info(tmp_path / "nope.yaml")
    with pytest.raises(CameraError, match="CameraInfo YAML not found"):
        load_camera_info(tmp_path)   # a directory is not a file
    with pytest.raises(CameraError, match=r"list.yaml: expected a CameraInfo mapping \(image_width, camera_matrix, "
                                          r"\.\.\.\), got list"):
        load_camera_info(_write(tmp_path / "list.yaml", "- 1\n- 2\n"))
    dup = _write(tmp_path / "dup.yaml", "image_width: 640\nimage_width: 320\n")
    with pytest.raises(CameraError, match=r"dup.yaml:2:1: duplicate key 'image_width'") as err:
        load_camera_info(dup)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    with pytest.raises(CameraError, match=r"broken.yaml:\d+:\d+: "):
        load_camera_info(_write(tmp_path / "broken.yaml", "image_width: [640\n"))
    assert load_camera_info(str(_write(tmp_path / "s.yaml", _info())))["width"] == 640   # a str path works too


# -- the camera config block ---------------------------------------------------------------
def test_config_defaults():
    cam = camera_from_config({})
    fy = 0.5 * 480 / math.tan(math.radians(45.0) / 2)   # default fovy 45 deg
    assert (cam.width, cam.height, cam.cx, cam.cy) == (640, 480, 319.5, 239.5)
    assert math.isclose(cam.fy, fy, rel_tol=1e-15) and cam.fx == cam.fy
    assert cam.position == (0.0, 0.0, 0.0) and (cam.roll, cam.pitch, cam.yaw) == (0.0, 0.0, 0.0)
    assert cam.distortion == (0.0,) * 5 and cam.name == "camera" and not cam.orthographic
    assert camera_from_config({"pose": None}) == cam
    narrow = camera_from_config({"fovy": 0.5})   # a telephoto lens: any fovy in (0, 180) deg
    assert math.isclose(narrow.fy, 240.0 / math.tan(math.radians(0.25)), rel_tol=1e-15)
    sides = camera_from_config({"width": 1, "height": MAX_IMAGE_SIDE}), camera_from_config({"width": MAX_IMAGE_SIDE,
                                                                                            "height": 1})
    assert [(c.width, c.height) for c in sides] == [(1, MAX_IMAGE_SIDE), (MAX_IMAGE_SIDE, 1)]
    small = camera_from_config({"width": 64, "height": 48, "fovy": 90.0})
    assert math.isclose(small.fy, 24.0) and small.fx == small.fy and (small.cx, small.cy) == (31.5, 23.5)


def test_config_fx_fy_fill_each_other():
    a = camera_from_config({"fx": 500})
    b = camera_from_config({"fy": 400, "cx": 300, "cy": 200.5})
    c = camera_from_config({"fx": 500, "fy": 450, "fovy": 170})   # fovy only used without fx/fy
    assert (a.fx, a.fy) == (500.0, 500.0) and (b.fx, b.fy, b.cx, b.cy) == (400.0, 400.0, 300.0, 200.5)
    assert (c.fx, c.fy) == (500.0, 450.0)


def test_config_distortion_name_and_pose_angles():
    cam = camera_from_config({"fx": 500, "distortion": [0.1, 0.0, 0.0, 0.0, 0.02], "name": 7,
                              "pose": {"position": [1, 2, 3], "pitch": 0.3}})
    assert cam.distortion == (0.1, 0.0, 0.0, 0.0, 0.02) and cam.name == "7"
    assert cam.position == (1.0, 2.0, 3.0) and (cam.roll, cam.pitch, cam.yaw) == (0.0, 0.3, 0.0)
    eight = camera_from_config({"fx": 500, "distortion": [0.0] * 5 + [0.1, 0.2, 0.3],
                                "pose": {"roll": 0.1, "yaw": -0.2}})
    assert eight.distortion_model == "rational_polynomial" and (eight.roll, eight.pitch, eight.yaw) == (0.1, 0.0, -0.2)
    rpy = camera_from_config({"fx": 500, "pose": {"rpy": [0.4, -0.5, 0.6]}})
    assert (rpy.roll, rpy.pitch, rpy.yaw) == (0.4, -0.5, 0.6)


def test_config_look_at_with_up():
    """A camera 2 m above the origin looking down with world +x shown up (by hand: optical z = -z, image up
    = +x so optical y (down) = -x, optical x (right) = y × z = -y: world +y is to the left)"""
    cam = camera_from_config({"fx": 500, "pose": {"position": [0, 0, 2], "look_at": [0, 0, 0], "up": [1, 0, 0]}})
    o, ahead, left = cam.project(np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0]]))
    assert np.allclose(o, [319.5, 239.5]) and ahead[1] < o[1] and abs(ahead[0] - o[0]) < 1e-9
    assert left[0] < o[0] and abs(left[1] - o[1]) < 1e-9   # +y is to the left, as seen from above with +x up
    want = look_at_rotation([0, 0, 2], [0, 0, 0], [1, 0, 0])
    assert np.allclose((cam.roll, cam.pitch, cam.yaw), want)


def test_config_camera_info_paths_and_overrides(tmp_path, monkeypatch):
    _write(tmp_path / "cam.yaml", _info())
    rel = camera_from_config({"camera_info": "cam.yaml"}, base=tmp_path)
    assert (rel.width, rel.fx, rel.fy, rel.cx, rel.cy, rel.name) == (640, 610.0, 611.0, 322.0, 241.0, "lab_cam")
    assert rel.distortion == (-0.1, 0.02, 0.001, 0.002, 0.003)
    other = tmp_path / "elsewhere"
    other.mkdir()
    absolute = camera_from_config({"camera_info": str(tmp_path / "cam.yaml")}, base=other)
    assert absolute == rel
    monkeypatch.setenv("HOME", str(tmp_path))
    assert camera_from_config({"camera_info": "~/cam.yaml"}, base=other) == rel
    monkeypatch.chdir(tmp_path)
    assert camera_from_config({"camera_info": "cam.yaml"}) == rel   # no base: relative to the working directory
    # fields next to camera_info override it; a CameraInfo's focal length wins over the fovy default
    over = camera_from_config({"camera_info": "cam.yaml", "fx": 700, "cy": 200, "name": "x", "width": 800,
                               "distortion": [0.0] * 5}, base=tmp_path)
    assert (over.width, over.height, over.fx, over.fy, over.cx, over.cy) == (800, 480, 700.0, 611.0, 322.0, 200.0)
    assert over.name == "x" and over.distortion == (0.0,) * 5
    assert camera_from_config({"camera_info": None, "fx": 10}).fx == 10.0


def test_config_camera_info_errors_name_the_config_key(tmp_path):
    with pytest.raises(CameraError, match=r"^rig.yaml:cam.camera_info: file not found: .*nope.yaml$"):
        camera_from_config({"camera_info": "nope.yaml"}, source="rig.yaml", key="cam", base=tmp_path)
    bad = _write(tmp_path / "bad.yaml", _info(distortion_model="kannala"))
    with pytest.raises(CameraError) as err:
        camera_from_config({"camera_info": "bad.yaml"}, source="rig.yaml", base=tmp_path)
    assert str(err.value).startswith(f"rig.yaml:camera.camera_info: {bad}:distortion_model: expected one of")


@pytest.mark.parametrize("cfg, where, expected", [
    ([1, 2], "camera", "expected a mapping (camera_info or fx/fy/cx/cy, pose), got [1, 2]"),
    ({"zzz": 1}, "camera.zzz", "unknown key; valid: camera_info, width, height, fx, fy, cx, cy, fovy"),
    ({"fovx": 1}, "camera.fovx", "unknown key (did you mean fovy?); valid:"),
    ({"width": 0}, "camera.width", "expected a positive integer (px, at most 16384), got 0"),
    ({"width": True}, "camera.width", "got True"),
    ({"height": 48.0}, "camera.height", "expected a positive integer"),
    ({"height": MAX_IMAGE_SIDE + 1}, "camera.height", "expected a positive integer"),
    ({"fx": "500"}, "camera.fx", "expected a finite number, got '500'"),
    ({"fy": None}, "camera.fy", "expected a finite number"),
    ({"cx": float("nan"), "fx": 1}, "camera.cx", "expected a finite number"),
    ({"cy": [1]}, "camera.cy", "expected a finite number"),
    ({"fovy": "45"}, "camera.fovy", "expected a finite number"),
    ({"fovy": 0.0}, "camera.fovy", "expected a vertical field of view in (0, 180) deg, got 0.0"),
    ({"fovy": 180}, "camera.fovy", "in (0, 180) deg, got 180.0"),
    ({"fovy": -10}, "camera.fovy", "in (0, 180) deg"),
    ({"distortion": (0.0,) * 5}, "camera.distortion", "expected [k1, k2, p1, p2, k3] (plumb_bob) or 8"),
    ({"distortion": [0.0] * 4}, "camera.distortion", "expected [k1, k2, p1, p2, k3]"),
    ({"distortion": [0.0] * 6}, "camera.distortion", "expected [k1, k2, p1, p2, k3]"),
    ({"distortion": [0.0, 0.0, 0.0, "p2", 0.0]}, "camera.distortion[3]", "expected a finite number, got 'p2'"),
    ({"pose": [0, 0, 1]}, "camera.pose", "expected a mapping {position, look_at | rpy}, got [0, 0, 1]"),
    ({"pose": {"zzz": [0, 0, 0]}}, "camera.pose.zzz", "unknown key; valid: position, look_at"),
    ({"pose": {"position": [0, 0]}}, "camera.pose.position", "expected [x, y, z] (m), got [0, 0]"),
    ({"pose": {"position": (0, 0, 1)}}, "camera.pose.position", "expected [x, y, z] (m)"),
    ({"pose": {"position": [0, "z", 1]}}, "camera.pose.position[1]", "expected a finite number, got 'z'"),
    ({"pose": {"rpy": [0, 0]}}, "camera.pose.rpy", "expected [x, y, z] (rad), got [0, 0]"),
    ({"pose": {"rpy": [0, 0, None]}}, "camera.pose.rpy[2]", "expected a finite number"),
    ({"pose": {"look_at": [1, 0, 0], "up": [0, 1]}}, "camera.pose.up", "expected [x, y, z] (1), got [0, 1]"),
    ({"pose": {"look_at": [1, 0, 0], "up": [0, 0, "u"]}}, "camera.pose.up[2]", "expected a finite number"),
    ({"pose": {"look_at": [1, 0, "0"]}}, "camera.pose.look_at[2]", "expected a finite number"),
    ({"pose": {"roll": "0.1"}}, "camera.pose.roll", "expected a finite number, got '0.1'"),
    ({"pose": {"pitch": True}}, "camera.pose.pitch", "expected a finite number"),
    ({"pose": {"yaw": float("inf")}}, "camera.pose.yaw", "expected a finite number"),
    ({"pose": {"rpy": [0, 0, 0], "yaw": 0.1}}, "camera.pose", "give one of look_at, rpy or roll/pitch/yaw, got rpy, "
                                                              "roll/pitch/yaw"),
    ({"pose": {"look_at": [1, 0, 0], "roll": 0.1}}, "camera.pose", "got look_at, roll/pitch/yaw"),
    ({"pose": {"up": [0, 0, 1]}}, "camera.pose.up", "only used with look_at"),
    ({"pose": {"rpy": [0, 0, 0], "up": [0, 0, 1]}}, "camera.pose.up", "only used with look_at"),
    ({"pose": {"position": [1, 1, 1], "look_at": [1, 1, 1]}}, "camera.pose.look_at",
     "look_at [1.0, 1.0, 1.0] coincides with the camera position"),
    ({"pose": {"position": [0, 0, 1], "look_at": [0, 0, 0], "up": [0, 0, 1]}}, "camera.pose.look_at",
     "up [0.0, 0.0, 1.0] is parallel to the viewing direction"),
    ({"fx": -5.0}, "camera", "camera 'camera': focal lengths must be > 0 px"),
    ({"fx": 5.0, "name": "left", "cx": 1e400}, "camera.cx", "expected a finite number"),
])
def test_config_errors_name_source_and_key(cfg, where, expected):
    with pytest.raises(CameraError) as err:
        camera_from_config(cfg, source="rig.yaml")
    msg = str(err.value)
    assert msg.startswith(f"rig.yaml:{where}: ") and expected in msg and "\n" not in msg, msg
    assert err.value.__cause__ is None


def test_config_key_names_the_block():
    with pytest.raises(CameraError, match=r"^trial.yaml:rig.cameras\[0\].pose.position: expected \[x, y, z\] \(m\)"):
        camera_from_config({"pose": {"position": [1]}}, source="trial.yaml", key="rig.cameras[0]")
    with pytest.raises(CameraError, match=r"^trial.yaml:rig.cameras\[0\]: camera 'left': focal lengths"):
        camera_from_config({"fx": 0.0, "name": "left"}, source="trial.yaml", key="rig.cameras[0]")
    with pytest.raises(CameraError, match=r"^<config>:camera.fx: expected a finite number"):
        camera_from_config({"fx": "1"})
