"""A real camera: pinhole intrinsics (``sensor_msgs/CameraInfo``), lens distortion and a pose.

One :class:`PinholeCamera` projects the twin's keypoints and sets up the MuJoCo camera that
renders its frames (``vid2sid_ros.sim.mujoco_model``), so both see the same image.

Frames (REP 103 / REP 105 and the ROS camera convention):

* world: x forward, y left, z up (REP 103), metres;
* camera body (``camera_link``): x along the optical axis, y left, z up, placed in the
  world by ``position`` and fixed-axis ``roll`` (about x), ``pitch`` (about y), ``yaw``
  (about z), the URDF/tf convention ``R = Rz(yaw) Ry(pitch) Rx(roll)``. All zero: the camera
  looks along world +x, horizon level; positive pitch looks down;
* optical frame (``camera_optical_frame``): z forward, x right, y down. A point
  ``X_c = R_opt^T (P - position)`` with ``R_opt = R @ B``, ``B`` the fixed
  body-to-optical rotation (columns: optical x = -body y, optical y = -body z, optical z = body x).

Projection (OpenCV ``cv2.projectPoints`` and ROS ``image_geometry``; pixel centres at
integer coordinates, u = column to the right, v = row downwards)::

    x', y'  = X_c / Z_c,  Y_c / Z_c                    (orthographic: X_c, Y_c in metres)
    r2      = x'^2 + y'^2
    radial  = (1 + k1 r2 + k2 r2^2 + k3 r2^3) / (1 + k4 r2 + k5 r2^2 + k6 r2^3)
    x''     = x' radial + 2 p1 x' y' + p2 (r2 + 2 x'^2)
    y''     = y' radial + p1 (r2 + 2 y'^2) + 2 p2 x' y'
    u, v    = fx x'' + cx,  fy y'' + cy

``plumb_bob`` has ``D = [k1, k2, p1, p2, k3]`` (k4 = k5 = k6 = 0); ``rational_polynomial``
has all eight ``[k1, k2, p1, p2, k3, k4, k5, k6]``. An orthographic camera (a parallel
projection, ``fx``/``fy`` then in px/m) covers the legacy planar image projection.

Nuisance fields (parameter targets ``camera.<field>``): the pose ``x, y, z`` (m) and
``roll, pitch, yaw`` (rad), the intrinsics ``fx, fy, cx, cy`` (px) and the distortion
coefficients ``k1, k2, p1, p2, k3`` (dimensionless).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .files import file_problem

__all__ = ["PinholeCamera", "CameraError", "CAMERA_FIELDS", "load_camera_info", "camera_from_config",
           "rpy_to_matrix", "matrix_to_rpy", "look_at_rpy", "look_at_rotation", "BODY_TO_OPTICAL",
           "rotation_vector_to_matrix", "moved_pose", "camera_frames", "link_frame_of"]


#: largest image side, px: a rendered trial holds frames x height x width x 3 bytes (16384 is the usual
#: OpenGL framebuffer / texture limit; a typo like 10**9 would otherwise ask for terabytes)
MAX_IMAGE_SIDE = 16384


class CameraError(ValueError):
    """A camera description (CameraInfo YAML, config block, pose) is malformed; the message
    names the file and key, what was expected and what was found."""


#: nuisance field -> (unit, meaning): the names parameter-spec targets use as ``camera.<field>``
CAMERA_FIELDS: dict[str, tuple[str, str]] = {
    "x": ("m", "camera position, world x"),
    "y": ("m", "camera position, world y"),
    "z": ("m", "camera position, world z"),
    "roll": ("rad", "camera roll about its optical axis (fixed-axis RPY of camera_link, REP 103)"),
    "pitch": ("rad", "camera pitch (positive looks down)"),
    "yaw": ("rad", "camera yaw about world z (0 looks along world +x)"),
    "fx": ("px", "focal length, x"),
    "fy": ("px", "focal length, y"),
    "cx": ("px", "principal point, column"),
    "cy": ("px", "principal point, row"),
    "k1": ("1", "radial distortion k1 (plumb_bob)"),
    "k2": ("1", "radial distortion k2 (plumb_bob)"),
    "p1": ("1", "tangential distortion p1 (plumb_bob)"),
    "p2": ("1", "tangential distortion p2 (plumb_bob)"),
    "k3": ("1", "radial distortion k3 (plumb_bob)"),
}
_DIST_NAMES = ("k1", "k2", "p1", "p2", "k3", "k4", "k5", "k6")
_DIST_SIZES = {"plumb_bob": 5, "rational_polynomial": 8}

#: body (x forward, y left, z up) -> optical (z forward, x right, y down); columns = optical axes in body frame
BODY_TO_OPTICAL = np.array([[0.0, 0.0, 1.0],
                            [-1.0, 0.0, 0.0],
                            [0.0, -1.0, 0.0]])


def rpy_to_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Fixed-axis roll-pitch-yaw (URDF ``rpy``, tf) to a rotation matrix ``Rz(yaw) Ry(pitch) Rx(roll)``, (3, 3)."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def matrix_to_rpy(rotation: np.ndarray) -> tuple[float, float, float]:
    """Inverse of :func:`rpy_to_matrix`: (3, 3) rotation -> (roll, pitch, yaw) rad, pitch in [-pi/2, pi/2]."""
    r = np.asarray(rotation, float)
    pitch = math.asin(max(-1.0, min(1.0, -r[2, 0])))
    if abs(r[2, 0]) < 1.0 - 1e-12:
        roll = math.atan2(r[2, 1], r[2, 2])
        yaw = math.atan2(r[1, 0], r[0, 0])
    else:  # gimbal lock: put everything into yaw
        roll = 0.0
        yaw = math.atan2(-r[0, 1], r[1, 1])
    return roll, pitch, yaw


def rotation_vector_to_matrix(rotation_vector: Sequence[float]) -> np.ndarray:
    """Rodrigues' formula: a rotation vector (3,) rad (axis × angle) to a rotation matrix (3, 3).

    ``R = I + sin θ K + (1 − cos θ) K²`` with ``θ = |w|`` and ``K`` the cross-product matrix of
    ``w / θ`` (the identity for ``w = 0``).

    Raises:
        CameraError: not 3 finite numbers.
    """
    w = np.asarray(rotation_vector, dtype=float)
    if w.shape != (3,) or not np.all(np.isfinite(w)):
        raise CameraError(f"rotation vector must be 3 finite numbers (rad), got {np.asarray(rotation_vector).tolist()}")
    theta = float(np.linalg.norm(w))
    if theta < 1e-15:
        return np.eye(3)
    k = w / theta
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(theta) * K + (1.0 - math.cos(theta)) * (K @ K)


def moved_pose(position: Sequence[float], rotation: np.ndarray, translation: Sequence[float],
               rotation_vector: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """A camera pose moved in its own frame: ``(position', rotation')``.

    Args:
        position: camera centre in the world, (3,) m.
        rotation: the camera frame in the world, (3, 3), columns = the camera's axes.
        translation: (3,) m along the camera's own axes (the columns of ``rotation``).
        rotation_vector: (3,) rad about the camera's own axes (axis × angle).

    Returns:
        ``position + rotation @ translation`` (3,) and ``rotation @ R(rotation_vector)`` (3, 3).

    Raises:
        CameraError: a translation or rotation vector that is not 3 finite numbers.
    """
    t = np.asarray(translation, dtype=float)
    if t.shape != (3,) or not np.all(np.isfinite(t)):
        raise CameraError(f"camera translation must be 3 finite numbers (m), got {np.asarray(translation).tolist()}")
    r = np.asarray(rotation, dtype=float)
    return np.asarray(position, dtype=float) + r @ t, r @ rotation_vector_to_matrix(rotation_vector)


def look_at_rpy(position: Sequence[float], target: Sequence[float], roll: float = 0.0) -> tuple[float, float, float]:
    """Roll, pitch, yaw (rad) of a camera at ``position`` looking at ``target`` (both (3,) m).

    Roll is kept as given (0: the image horizon is level). Looking straight down or up,
    yaw is 0 (image up = world +x when looking down).

    Raises:
        CameraError: if ``target`` equals ``position``.
    """
    d = np.asarray(target, float) - np.asarray(position, float)
    n = float(np.linalg.norm(d))
    if not n > 1e-12:
        raise CameraError(f"look_at {list(target)} coincides with the camera position {list(position)}")
    d /= n
    yaw = math.atan2(d[1], d[0]) if math.hypot(d[0], d[1]) > 1e-12 else 0.0
    pitch = math.atan2(-d[2], math.hypot(d[0], d[1]))
    return float(roll), float(pitch), float(yaw)


@dataclass(frozen=True)
class PinholeCamera:
    """A calibrated camera in the world (equations in the module docstring).

    Attributes:
        width, height: image size, px.
        fx, fy: focal lengths, px (orthographic: px/m).
        cx, cy: principal point, px (pixel centres at integers).
        distortion: ``(k1, k2, p1, p2, k3[, k4, k5, k6])``, dimensionless (OpenCV order).
        position: camera centre in the world, (3,) m.
        roll, pitch, yaw: camera_link orientation, rad (fixed-axis RPY).
        orthographic: parallel projection instead of perspective (legacy planar projection).
        name: for messages (e.g. the CameraInfo ``camera_name``).

    Raises:
        CameraError: non-positive size or focal length, non-finite values, a distortion
            vector that is neither 5 (plumb_bob) nor 8 (rational_polynomial) long.
    """

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    distortion: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    roll: float = 0.0
    pitch: float = 0.0
    yaw: float = 0.0
    orthographic: bool = False
    name: str = "camera"

    def __post_init__(self) -> None:
        w = f"camera '{self.name}'"
        if int(self.width) != self.width or int(self.height) != self.height or self.width <= 0 or self.height <= 0:
            raise CameraError(f"{w}: image size must be positive integers, got {self.width}x{self.height}")
        if max(self.width, self.height) > MAX_IMAGE_SIDE:
            raise CameraError(f"{w}: image size must be at most {MAX_IMAGE_SIDE} px a side, got "
                              f"{self.width}x{self.height}")
        object.__setattr__(self, "width", int(self.width))
        object.__setattr__(self, "height", int(self.height))
        for f in ("fx", "fy", "cx", "cy", "roll", "pitch", "yaw"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise CameraError(f"{w}: '{f}' must be a finite number, got {v!r}")
            object.__setattr__(self, f, float(v))
        if self.fx <= 0 or self.fy <= 0:
            raise CameraError(f"{w}: focal lengths must be > 0 px, got fx={self.fx} fy={self.fy}")
        d = tuple(float(x) for x in self.distortion)
        if len(d) not in (4, 5, 8) or not all(math.isfinite(x) for x in d):
            raise CameraError(f"{w}: distortion must be 5 (plumb_bob) or 8 (rational_polynomial) finite "
                              f"coefficients, got {list(self.distortion)}")
        object.__setattr__(self, "distortion", d + (0.0,) * (5 - len(d)) if len(d) == 4 else d)
        p = tuple(float(x) for x in self.position)
        if len(p) != 3 or not all(math.isfinite(x) for x in p):
            raise CameraError(f"{w}: position must be 3 finite numbers (m), got {list(self.position)}")
        object.__setattr__(self, "position", p)

    # -- geometry -----------------------------------------------------------------
    @property
    def rotation(self) -> np.ndarray:
        """Optical frame in the world: columns = optical x (right), y (down), z (forward), (3, 3)."""
        return rpy_to_matrix(self.roll, self.pitch, self.yaw) @ BODY_TO_OPTICAL

    @property
    def camera_matrix(self) -> np.ndarray:
        """``K = [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]``, (3, 3)."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def distortion_model(self) -> str:
        """``plumb_bob`` (5 coefficients) or ``rational_polynomial`` (8)."""
        return "rational_polynomial" if len(self.distortion) == 8 else "plumb_bob"

    @property
    def distorted(self) -> bool:
        """True when any distortion coefficient is non-zero."""
        return any(x != 0.0 for x in self.distortion)

    def to_camera(self, points_world: np.ndarray) -> np.ndarray:
        """World points (..., 3) m -> optical-frame coordinates (..., 3) m."""
        p = np.asarray(points_world, dtype=float)
        return (p - np.asarray(self.position)) @ self.rotation

    def project(self, points_world: np.ndarray) -> np.ndarray:
        """Project world points to pixels, distortion included (``cv2.projectPoints`` equivalent).

        Args:
            points_world: shape (..., 3), m (typically (N, 3) or (T, K, 3)).

        Returns:
            Pixels, shape (..., 2) (u = column, v = row). Points at or behind the camera
            (perspective, ``Z_c <= 0``) give NaN.

        Raises:
            CameraError: if the last axis is not 3.
        """
        p = np.asarray(points_world, dtype=float)
        if p.shape[-1:] != (3,):
            raise CameraError(f"camera '{self.name}': points must have shape (..., 3), got {p.shape}")
        pc = self.to_camera(p)
        # a point on the image plane divides by zero and the lens polynomial then meets inf/nan:
        # its pixel is set to NaN below, silently (no RuntimeWarning)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.orthographic:
                x, y = pc[..., 0], pc[..., 1]
                behind = np.zeros(x.shape, bool)
            else:
                z = pc[..., 2]
                behind = ~(z > 1e-12)
                x, y = pc[..., 0] / z, pc[..., 1] / z
            xd, yd = self._distort(x, y)
        out = np.stack([self.fx * xd + self.cx, self.fy * yd + self.cy], axis=-1)
        out[behind] = np.nan
        return out

    def _distort(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not self.distorted:
            return x, y
        d = self.distortion + (0.0,) * (8 - len(self.distortion))
        k1, k2, p1, p2, k3, k4, k5, k6 = d
        r2 = x * x + y * y
        radial = (1 + r2 * (k1 + r2 * (k2 + r2 * k3))) / (1 + r2 * (k4 + r2 * (k5 + r2 * k6)))
        xd = x * radial + 2 * p1 * x * y + p2 * (r2 + 2 * x * x)
        yd = y * radial + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y
        return xd, yd

    def undistort_pixels(self, pixels: np.ndarray, iterations: int = 20) -> np.ndarray:
        """Invert the lens distortion: distorted pixels (..., 2) -> ideal pinhole pixels (..., 2).

        Fixed-point iteration as in OpenCV's ``cvUndistortPoints`` (exact for zero distortion).
        Used to warp an ideal render into the distorted image.
        """
        q = np.asarray(pixels, dtype=float)
        if not self.distorted:
            return q.copy()
        xd = (q[..., 0] - self.cx) / self.fx
        yd = (q[..., 1] - self.cy) / self.fy
        d = self.distortion + (0.0,) * (8 - len(self.distortion))
        k1, k2, p1, p2, k3, k4, k5, k6 = d
        x, y = xd.copy(), yd.copy()
        for _ in range(int(iterations)):
            r2 = x * x + y * y
            icdist = (1 + r2 * (k4 + r2 * (k5 + r2 * k6))) / (1 + r2 * (k1 + r2 * (k2 + r2 * k3)))
            dx = 2 * p1 * x * y + p2 * (r2 + 2 * x * x)
            dy = p1 * (r2 + 2 * y * y) + 2 * p2 * x * y
            x = (xd - dx) * icdist
            y = (yd - dy) * icdist
        return np.stack([self.fx * x + self.cx, self.fy * y + self.cy], axis=-1)

    # -- copies ---------------------------------------------------------------------
    def with_values(self, values: Mapping[str, float]) -> "PinholeCamera":
        """Copy with nuisance fields replaced (names of :data:`CAMERA_FIELDS`).

        Raises:
            CameraError: on an unknown field name (lists the valid ones).
        """
        bad = [k for k in values if k not in CAMERA_FIELDS]
        if bad:
            raise CameraError(f"unknown camera field(s) {bad}; valid: {', '.join(CAMERA_FIELDS)}")
        kw: dict[str, Any] = {}
        pos = list(self.position)
        dist = list(self.distortion)
        for k, v in values.items():
            v = float(v)
            if k in ("x", "y", "z"):
                pos["xyz".index(k)] = v
            elif k in _DIST_NAMES:
                dist[_DIST_NAMES.index(k)] = v
            else:
                kw[k] = v
        return replace(self, position=tuple(pos), distortion=tuple(dist), **kw)

    def resized(self, width: int, height: int) -> "PinholeCamera":
        """The same camera delivering ``width`` x ``height`` px images (a resized image / other sensor mode).

        The field of view, pose and lens are kept; the intrinsics scale with the image
        (OpenCV's rule for a resized image, pixel centres at integers so pixel edges at
        -0.5): ``fx' = fx sx``, ``cx' = (cx + 0.5) sx - 0.5`` with ``sx = width / self.width``
        (``fy``, ``cy`` likewise with ``sy = height / self.height``). Distortion coefficients
        act on normalised coordinates and are unchanged. A point that projects to pixel
        ``(u, v)`` in this camera projects to ``((u + 0.5) sx - 0.5, (v + 0.5) sy - 0.5)``.

        Args:
            width, height: new image size, px (positive integers up to :data:`MAX_IMAGE_SIDE`).

        Raises:
            CameraError: a size that is not a positive integer, or above :data:`MAX_IMAGE_SIDE`.
        """
        for k, v in (("width", width), ("height", height)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 < int(v) <= MAX_IMAGE_SIDE:
                raise CameraError(f"camera {self.name!r}: resized {k} must be an integer in [1, {MAX_IMAGE_SIDE}] px, "
                                  f"got {v!r}")
        if (int(width), int(height)) == (self.width, self.height):
            return self
        sx, sy = int(width) / self.width, int(height) / self.height
        return replace(self, width=int(width), height=int(height), fx=self.fx * sx, fy=self.fy * sy,
                       cx=(self.cx + 0.5) * sx - 0.5, cy=(self.cy + 0.5) * sy - 0.5)

    def moved(self, translation: Sequence[float], rotation_vector: Sequence[float]) -> "PinholeCamera":
        """Copy with the pose moved in the camera's optical frame (x right, y down, z forward).

        Args:
            translation: (3,) m along the optical axes (``(0, 0, 0.01)``: 1 cm towards the scene).
            rotation_vector: (3,) rad about the optical axes, right-handed (x: tilt, positive tips
                the view up, a level camera's pitch decreases; y: pan, positive turns it right, yaw
                decreases; z: roll about the optical axis, roll increases).

        Returns:
            The camera with ``position`` and ``roll, pitch, yaw`` of the moved pose (intrinsics
            unchanged); :func:`moved_pose` has the formula.

        Raises:
            CameraError: a vector that is not 3 finite numbers.
        """
        pos, rot = moved_pose(self.position, self.rotation, translation, rotation_vector)
        roll, pitch, yaw = matrix_to_rpy(rot @ BODY_TO_OPTICAL.T)
        return replace(self, position=tuple(float(x) for x in pos), roll=roll, pitch=pitch, yaw=yaw)

    def camera_info(self) -> dict[str, Any]:
        """The intrinsics as a ``sensor_msgs/CameraInfo`` YAML mapping (camera_calibration format)."""
        k = self.camera_matrix.ravel().tolist()
        p = [self.fx, 0.0, self.cx, 0.0, 0.0, self.fy, self.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
        return {"image_width": self.width, "image_height": self.height, "camera_name": self.name,
                "camera_matrix": {"rows": 3, "cols": 3, "data": k},
                "distortion_model": self.distortion_model,
                "distortion_coefficients": {"rows": 1, "cols": len(self.distortion), "data": list(self.distortion)},
                "rectification_matrix": {"rows": 3, "cols": 3, "data": np.eye(3).ravel().tolist()},
                "projection_matrix": {"rows": 3, "cols": 4, "data": p}}


# -- reading ------------------------------------------------------------------------
def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise CameraError(f"{where}: expected a finite number, got {v!r}")
    return float(v)


def _matrix(info: Mapping[str, Any], key: str, rows: int, cols: int | None, where: str) -> list[float]:
    """A ``{rows, cols, data}`` block of a CameraInfo YAML; ``cols=None`` accepts any column count."""
    m = info.get(key)
    if not isinstance(m, Mapping):
        raise CameraError(f"{where}:{key}: expected a mapping {{rows, cols, data}}, got {m!r}")
    data = m.get("data")
    if not isinstance(data, list):
        raise CameraError(f"{where}:{key}.data: expected a list of numbers, got {data!r}")
    r, c = m.get("rows"), m.get("cols")
    want_c = cols if cols is not None else c
    if r != rows or c != want_c or not isinstance(c, int) or len(data) != rows * c:
        want = (f"a {rows}x{cols} matrix (rows: {rows}, cols: {cols}, {rows * cols} values)" if cols is not None
                else f"a {rows}xN matrix (rows: {rows}, cols: N, N values)")
        raise CameraError(f"{where}:{key}: expected {want}, got rows: {r}, cols: {c}, {len(data)} values")
    return [_number(x, f"{where}:{key}.data[{i}]") for i, x in enumerate(data)]


def _intrinsics_from_info(info: Mapping[str, Any], where: str) -> dict[str, Any]:
    for key in ("image_width", "image_height"):
        v = info.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_IMAGE_SIDE:
            raise CameraError(f"{where}:{key}: expected a positive integer (px, at most {MAX_IMAGE_SIDE}), got {v!r}")
    k = _matrix(info, "camera_matrix", 3, 3, where)
    if k[1] != 0.0 or k[3] != 0.0 or k[6:] != [0.0, 0.0, 1.0]:
        raise CameraError(f"{where}:camera_matrix: expected [fx, 0, cx, 0, fy, cy, 0, 0, 1] (no skew), got {k}")
    model = info.get("distortion_model", "plumb_bob")
    if model not in _DIST_SIZES:
        raise CameraError(f"{where}:distortion_model: expected one of {', '.join(_DIST_SIZES)}, got {model!r}")
    if "distortion_coefficients" in info:
        d = _matrix(info, "distortion_coefficients", 1, None, where)
        n = _DIST_SIZES[model]
        if len(d) != n and not (model == "plumb_bob" and len(d) == 0):
            raise CameraError(f"{where}:distortion_coefficients: {model} expects {n} coefficients, got {len(d)}")
        d = d or [0.0] * 5
    else:
        d = [0.0] * _DIST_SIZES[model]
    return {"width": info["image_width"], "height": info["image_height"], "fx": k[0], "fy": k[4],
            "cx": k[2], "cy": k[5], "distortion": tuple(d), "name": str(info.get("camera_name") or "camera")}


def load_camera_info(path: str | Path) -> dict[str, Any]:
    """Read the intrinsics of a ``sensor_msgs/CameraInfo`` YAML written by ``camera_calibration``.

    Keys read: ``image_width``, ``image_height`` (px), ``camera_matrix`` ({rows: 3, cols: 3,
    data: [fx, 0, cx, 0, fy, cy, 0, 0, 1]}), ``distortion_model`` (``plumb_bob`` |
    ``rational_polynomial``), ``distortion_coefficients`` ({rows: 1, cols: 5|8, data}),
    ``camera_name``. Rectification/projection matrices (stereo) are ignored.

    Returns:
        ``{width, height, fx, fy, cx, cy, distortion, name}`` (the :class:`PinholeCamera`
        intrinsic fields).

    Raises:
        CameraError: ``file:key: expected ..., got ...`` (missing file, not YAML, wrong-sized
            matrix, unknown distortion model, skew).
    """
    from .yamlio import YAMLInputError, load_yaml

    p = Path(path)
    if not p.is_file():
        raise CameraError(f"{p}: CameraInfo YAML not found")
    try:
        info = load_yaml(p)
    except YAMLInputError as err:  # not UTF-8, not YAML, a duplicate key (file:line)
        raise CameraError(str(err)) from None
    if not isinstance(info, Mapping):
        raise CameraError(f"{p}: expected a CameraInfo mapping (image_width, camera_matrix, ...), "
                          f"got {type(info).__name__}")
    return _intrinsics_from_info(info, str(p))


_CAMERA_KEYS = ("camera_info", "width", "height", "fx", "fy", "cx", "cy", "fovy", "distortion", "pose", "name")
_POSE_KEYS = ("position", "look_at", "up", "rpy", "roll", "pitch", "yaw")


def look_at_rotation(position: Sequence[float], target: Sequence[float],
                     up: Sequence[float] = (0.0, 0.0, 1.0)) -> tuple[float, float, float]:
    """Roll, pitch, yaw (rad) of a camera at ``position`` looking at ``target`` with world direction
    ``up`` (3,) shown upwards in the image (the OpenGL ``lookAt`` convention).

    Raises:
        CameraError: ``target == position`` or ``up`` parallel to the viewing direction.
    """
    z = np.asarray(target, float) - np.asarray(position, float)
    if not np.linalg.norm(z) > 1e-12:
        raise CameraError(f"look_at {list(target)} coincides with the camera position {list(position)}")
    z /= np.linalg.norm(z)
    x = np.cross(z, np.asarray(up, float))
    if not np.linalg.norm(x) > 1e-9:
        raise CameraError(f"up {list(up)} is parallel to the viewing direction; give another up vector")
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return matrix_to_rpy(np.stack([x, y, z], axis=1) @ BODY_TO_OPTICAL.T)


def camera_from_config(cfg: Mapping[str, Any], *, source: str = "<config>", key: str = "camera",
                       base: Path | None = None) -> PinholeCamera:
    """Build a :class:`PinholeCamera` from a rig config's ``camera:`` block.

    Shape::

        camera:
          camera_info: camera.yaml       # CameraInfo YAML (relative to the config's directory), or:
          width: 640  height: 480        # px (defaults 640 x 480)
          fx: 600  fy: 600  cx: 319.5  cy: 239.5   # px; or fovy (deg, default 45): fy = (height/2)/tan(fovy/2)
          distortion: [k1, k2, p1, p2, k3]         # plumb_bob (or 8 rational_polynomial coefficients)
          pose: {position: [x, y, z], look_at: [x, y, z], up: [0, 0, 1]}
                # or rpy: [roll, pitch, yaw] (rad; or roll:, pitch:, yaw: keys) of camera_link (REP 103)

    Fields given next to ``camera_info`` override it. Defaults: fy = fx, fx = fy, principal point at
    the image centre; pose at the origin looking along world +x. ``name`` is only a label here.

    Raises:
        CameraError: ``source:key.sub: expected ..., got ...`` for unknown keys (with a
            suggestion), wrong types, a bad CameraInfo file, an impossible pose.
    """
    if not isinstance(cfg, Mapping):
        raise CameraError(f"{source}:{key}: expected a mapping (camera_info or fx/fy/cx/cy, pose), got {cfg!r}")
    _refuse_unknown_keys(cfg, _CAMERA_KEYS, f"{source}:{key}")
    kw = _intrinsics(cfg, source=source, key=key, base=base)
    pose = cfg.get("pose") or {}
    if not isinstance(pose, Mapping):
        raise CameraError(f"{source}:{key}.pose: expected a mapping {{position, look_at | rpy}}, got {pose!r}")
    _refuse_unknown_keys(pose, _POSE_KEYS, f"{source}:{key}.pose")
    position, angles = _pose(pose, f"{source}:{key}.pose")
    try:
        return PinholeCamera(position=position, **angles, **kw)
    except CameraError as err:
        raise CameraError(f"{source}:{key}: {err}") from None


def _refuse_unknown_keys(block: Mapping[str, Any], valid: Sequence[str], where: str) -> None:
    """CameraError naming the first key of ``block`` not in ``valid`` (with the closest valid one)."""
    import difflib

    for k in block:
        if k not in valid:
            close = difflib.get_close_matches(str(k), list(valid), n=1)
            raise CameraError(f"{where}.{k}: unknown key" + (f" (did you mean {close[0]}?)" if close else "")
                              + f"; valid: {', '.join(valid)}")


def _intrinsics(cfg: Mapping[str, Any], *, source: str, key: str, base: Path | None) -> dict[str, Any]:
    """PinholeCamera keyword arguments of a ``camera:`` block: size (px), fx, fy, cx, cy (px), distortion, name."""
    kw: dict[str, Any] = {}
    if cfg.get("camera_info") is not None:
        ci = Path(str(cfg["camera_info"])).expanduser()
        if not ci.is_absolute() and base is not None:
            ci = base / ci
        why = file_problem(ci)
        if why:  # missing, or a FIFO / directory / device (never opened)
            raise CameraError(f"{source}:{key}.camera_info: {why}")
        try:
            kw.update(load_camera_info(ci))
        except CameraError as err:
            raise CameraError(f"{source}:{key}.camera_info: {err}") from None
    for f in ("width", "height"):
        if f in cfg:
            v = cfg[f]
            if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= MAX_IMAGE_SIDE:
                raise CameraError(f"{source}:{key}.{f}: expected a positive integer (px, at most {MAX_IMAGE_SIDE}), "
                                  f"got {v!r}")
            kw[f] = v
    kw.setdefault("width", 640)
    kw.setdefault("height", 480)
    for f in ("fx", "fy", "cx", "cy"):
        if f in cfg:
            kw[f] = _number(cfg[f], f"{source}:{key}.{f}")
    if "fx" not in kw and "fy" not in kw:
        fovy = _number(cfg.get("fovy", 45.0), f"{source}:{key}.fovy")
        if not 0.0 < fovy < 180.0:
            raise CameraError(f"{source}:{key}.fovy: expected a vertical field of view in (0, 180) deg, got {fovy}")
        kw["fy"] = 0.5 * kw["height"] / math.tan(math.radians(fovy) / 2.0)
    kw.setdefault("fx", kw.get("fy"))
    kw.setdefault("fy", kw["fx"])
    if "distortion" in cfg:
        d = cfg["distortion"]
        if not isinstance(d, list) or len(d) not in (5, 8):
            raise CameraError(f"{source}:{key}.distortion: expected [k1, k2, p1, p2, k3] (plumb_bob) or 8 "
                              f"rational_polynomial coefficients, got {d!r}")
        kw["distortion"] = tuple(_number(x, f"{source}:{key}.distortion[{i}]") for i, x in enumerate(d))
    if "name" in cfg:
        kw["name"] = str(cfg["name"])
    kw.setdefault("cx", (kw["width"] - 1) / 2.0)
    kw.setdefault("cy", (kw["height"] - 1) / 2.0)
    return kw


def _pose(pose: Mapping[str, Any], where: str) -> tuple[tuple[float, float, float], dict[str, float]]:
    """A ``pose:`` block as (position m, {roll, pitch, yaw} rad of camera_link); look_at converted."""

    def vec3(name: str) -> tuple[float, float, float]:
        v = pose[name]
        if not isinstance(v, list) or len(v) != 3:
            unit = "rad" if name == "rpy" else ("1" if name == "up" else "m")
            raise CameraError(f"{where}.{name}: expected [x, y, z] ({unit}), got {v!r}")
        return tuple(_number(x, f"{where}.{name}[{i}]") for i, x in enumerate(v))  # type: ignore

    position = vec3("position") if "position" in pose else (0.0, 0.0, 0.0)
    angles = {a: _number(pose[a], f"{where}.{a}") for a in ("roll", "pitch", "yaw") if a in pose}
    given = [k for k in ("look_at", "rpy") if k in pose] + (["roll/pitch/yaw"] if angles else [])
    if len(given) > 1:
        raise CameraError(f"{where}: give one of look_at, rpy or roll/pitch/yaw, got {', '.join(given)}")
    if "up" in pose and "look_at" not in pose:
        raise CameraError(f"{where}.up: only used with look_at")
    if "rpy" in pose:
        angles = dict(zip(("roll", "pitch", "yaw"), vec3("rpy")))
    if "look_at" in pose:
        target, up = vec3("look_at"), (vec3("up") if "up" in pose else (0.0, 0.0, 1.0))
        try:  # only the geometry's errors get the pose.look_at prefix: vec3 already names its key
            r, p_, y = look_at_rotation(position, target, up)
        except CameraError as err:
            raise CameraError(f"{where}.look_at: {err}") from None
        angles = {"roll": r, "pitch": p_, "yaw": y}
    return position, angles


def link_frame_of(optical_frame: str) -> str:
    """The camera body frame beside an optical frame id: ``front_optical_frame`` -> ``front_link``
    (REP 103's ``<camera>_link`` / ``<camera>_optical_frame`` pair); any other id gets ``_link`` appended."""
    base = optical_frame[:-len("_optical_frame")] if optical_frame.endswith("_optical_frame") else optical_frame
    return f"{base}_link"


def camera_frames(camera: "PinholeCamera", world_frame: str, optical_frame: str
                  ) -> list[tuple[str, str, tuple[float, float, float], tuple[float, float, float, float]]]:
    """Static transforms of a camera for tf (REP 103 / REP 105): world -> camera body -> optical.

    Returns ``[(parent, child, translation (x, y, z) m, rotation quaternion (x, y, z, w))]``:

    * ``world_frame`` -> :func:`link_frame_of` ``(optical_frame)``: the camera's ``position`` and
      body rotation ``Rz(yaw) Ry(pitch) Rx(roll)`` (x along the optical axis, z up);
    * the link -> ``optical_frame``: no translation, the fixed rotation :data:`BODY_TO_OPTICAL`
      (z forward, x right, y down; the quaternion (-0.5, 0.5, -0.5, 0.5)).
    """
    from scipy.spatial.transform import Rotation

    def quat(m: np.ndarray) -> np.ndarray:
        q = Rotation.from_matrix(m).as_quat()
        return -q if q[3] < 0 else q  # the w >= 0 representative

    link = link_frame_of(optical_frame)
    body = quat(rpy_to_matrix(camera.roll, camera.pitch, camera.yaw))
    optical = quat(BODY_TO_OPTICAL)
    pos = tuple(float(v) for v in camera.position)
    return [(world_frame, link, pos, tuple(float(q) for q in body)),
            (link, optical_frame, (0.0, 0.0, 0.0), tuple(float(q) for q in optical))]
